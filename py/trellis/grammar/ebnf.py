"""EBNF front-end: the GBNF / xgrammar dialect used by web-llm, parsed into the grammar IR.

    name ::= expr          a rule; its body runs until the next `name ::=`
    a b   a | b   ( )      sequence, choice, grouping
    e*  e+  e?  e{m}  e{m,}  e{m,n}
    "text"  'text'         literals (Unicode, with escapes)
    [a-z]  [^"\\]          character classes over code points
    # comment              to the end of the line

Rule order and positions are kept so that later stages (the core's left-recursion check,
unused-rule warnings) can point back at the source.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from ..errors import GrammarError, GrammarLimitError
from . import ir

# The JSON grammar printed in web-llm's EBNF example (its README and docs), verbatim: our
# benchmark grammar. Right-recursive strings, objects or arrays at the top.
WEBLLM_JSON_EBNF = r"""root ::= basic_array | basic_object
basic_any ::= basic_number | basic_string | basic_boolean | basic_null | basic_array | basic_object
basic_integer ::= ("0" | "-"? [1-9] [0-9]*) ".0"?
basic_number ::= ("0" | "-"? [1-9] [0-9]*) ("." [0-9]+)? ([eE] [+-]? [0-9]+)?
basic_string ::= (([\"] basic_string_1 [\"]))
basic_string_1 ::= "" | [^"\\\x00-\x1F] basic_string_1 | "\\" escape basic_string_1
escape ::= ["\\/bfnrt] | "u" [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9]
basic_boolean ::= "true" | "false"
basic_null ::= "null"
basic_array ::= "[" ("" | ws basic_any (ws "," ws basic_any)*) ws "]"
basic_object ::= "{" ("" | ws basic_string ws ":" ws basic_any ( ws "," ws basic_string ws ":" ws basic_any)*) ws "}"
ws ::= [ \n\t]*
"""

# llama.cpp's json.gbnf (the classic GBNF JSON grammar), verbatim.
LLAMACPP_JSON_EBNF = r"""root ::= object
value ::= object | array | string | number | ("true" | "false" | "null") ws
object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws
array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws
string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F]) # escapes
  )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]*)) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws
# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= ([ \t\n] ws)?
"""

# Integer arithmetic. Precedence comes from layering (expr > term > factor) and
# associativity from repetition, so no rule is left-recursive.
ARITHMETIC_EBNF = r"""# Integer arithmetic with + - * / and parentheses, no whitespace.
root    ::= expr
expr    ::= term (("+" | "-") term)*
term    ::= factor (("*" | "/") factor)*
factor  ::= integer | "(" expr ")"
integer ::= "0" | [1-9] [0-9]*
"""

_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_REST = _NAME_START | frozenset("0123456789-")
_HEX = frozenset("0123456789abcdefABCDEF")
_DIGITS = frozenset("0123456789")
# Single-character escapes shared by literals and classes (C-style, as xgrammar accepts).
_SIMPLE_ESCAPES = {
    "n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'",
    "a": "\a", "b": "\b", "f": "\f", "v": "\v", "0": "\0", "e": "\x1b", "?": "?", "/": "/",
}
_CLASS_ESCAPES = {"]": "]", "[": "[", "-": "-", "^": "^"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_PUNCT = {"|": "PIPE", "(": "LPAREN", ")": "RPAREN", "*": "STAR", "+": "PLUS", "?": "QMARK"}


@dataclass
class _Token:
    kind: str  # NAME DEFINE STRING CLASS PIPE LPAREN RPAREN STAR PLUS QMARK BRACE EOF
    offset: int
    value: object = None  # NAME: str; STRING/CLASS: ir.Expr; BRACE: (min, max)


class _Lexer:
    def __init__(self, text: str):
        self.text = text
        self.line_starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]

    def where(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def error(self, message: str, offset: int) -> GrammarError:
        return GrammarError(message, *self.where(offset))

    def tokens(self) -> list[_Token]:
        text, i, out = self.text, 0, []
        while i < len(text):
            ch = text[i]
            if ch in " \t\r\n":
                i += 1
            elif ch == "#":
                end = text.find("\n", i)
                i = len(text) if end < 0 else end
            elif ch in _NAME_START:
                j = i + 1
                while j < len(text) and text[j] in _NAME_REST:
                    j += 1
                out.append(_Token("NAME", i, text[i:j]))
                i = j
            elif text.startswith("::=", i):
                out.append(_Token("DEFINE", i))
                i += 3
            elif ch in "\"'":
                i = self._string(i, out)
            elif ch == "[":
                i = self._class(i, out)
            elif ch == "{":
                i = self._braces(i, out)
            elif ch in _PUNCT:
                out.append(_Token(_PUNCT[ch], i))
                i += 1
            else:
                raise self.error(f"unexpected character {ch!r}", i)
        out.append(_Token("EOF", len(text)))
        return out

    def _escape(self, i: int, extra: dict[str, str]) -> tuple[int, int]:
        """Decode the escape starting at text[i] == '\\'; returns (code point, next index)."""
        text = self.text
        if i + 1 >= len(text) or text[i + 1] == "\n":
            raise self.error("incomplete escape sequence", i)
        key = text[i + 1]
        if key in _SIMPLE_ESCAPES:
            return ord(_SIMPLE_ESCAPES[key]), i + 2
        if key in extra:
            return ord(extra[key]), i + 2
        if key in _HEX_ESCAPES:
            n = _HEX_ESCAPES[key]
            digits = text[i + 2 : i + 2 + n]
            if len(digits) != n or not set(digits) <= _HEX:
                raise self.error(f"\\{key} needs exactly {n} hex digits", i)
            value = int(digits, 16)
            if value > ir.MAX_CODE_POINT:
                raise self.error(f"code point {value:#x} is beyond U+10FFFF", i)
            return value, i + 2 + n
        raise self.error(f"unknown escape sequence '\\{key}'", i)

    def _char(self, i: int, extra: dict[str, str]) -> tuple[int, int]:
        """One code point of a literal or class, joining \\uD8xx\\uDCxx surrogate pairs."""
        text = self.text
        if text[i] != "\\":
            cp = ord(text[i])
            if 0xD800 <= cp <= 0xDFFF:
                raise self.error("lone surrogate in grammar text", i)
            return cp, i + 1
        cp, j = self._escape(i, extra)
        if 0xD800 <= cp <= 0xDBFF and text.startswith("\\u", j):
            low, k = self._escape(j, extra)
            if 0xDC00 <= low <= 0xDFFF:
                return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00), k
        if 0xD800 <= cp <= 0xDFFF:
            raise self.error("a surrogate code point has no UTF-8 encoding", i)
        return cp, j

    def _string(self, start: int, out: list[_Token]) -> int:
        text, quote, i, chars = self.text, self.text[start], start + 1, []
        while True:
            if i >= len(text) or text[i] == "\n":
                raise self.error("unterminated string literal", start)
            if text[i] == quote:
                value = ir.literal("".join(chars)) if chars else ir.EMPTY
                out.append(_Token("STRING", start, value))
                return i + 1
            cp, i = self._char(i, {})
            chars.append(chr(cp))

    def _class(self, start: int, out: list[_Token]) -> int:
        text, i = self.text, start + 1
        negate = i < len(text) and text[i] == "^"
        i += negate
        ranges: list[tuple[int, int]] = []
        while True:
            if i >= len(text) or text[i] == "\n":
                raise self.error("unterminated character class", start)
            if text[i] == "]":
                out.append(_Token("CLASS", start, ir.char_class(ranges, negate)))
                return i + 1
            at = i
            lo, i = self._char(i, _CLASS_ESCAPES)
            hi = lo
            # '-' is a range operator unless it is the last thing before ']'.
            if i + 1 < len(text) and text[i] == "-" and text[i + 1] not in "]\n":
                hi, i = self._char(i + 1, _CLASS_ESCAPES)
                if hi < lo:
                    raise self.error("character range is out of order", at)
            ranges.append((lo, hi))

    def _braces(self, start: int, out: list[_Token]) -> int:
        """`{m}`, `{m,}`, `{m,n}` (and `{,n}`), spaces allowed inside."""
        text = self.text
        end = text.find("}", start)
        body = text[start + 1 : end] if end >= 0 else ""
        parts = [p.strip() for p in body.split(",")]
        ok = end >= 0 and "\n" not in body and 1 <= len(parts) <= 2
        ok = ok and all(set(p) <= _DIGITS for p in parts) and (parts[0] or len(parts) == 2)
        ok = ok and any(parts)
        if not ok:
            raise self.error("malformed repetition, expected {m}, {m,} or {m,n}", start)
        for p in parts:  # before int(): Python refuses to convert more than 4300 digits
            if len(p.lstrip("0")) > len(str(ir.MAX_COUNT)) or (p and int(p) > ir.MAX_COUNT):
                shown = p if len(p) <= 20 else f"{p[:10]}...({len(p)} digits)"
                raise GrammarLimitError(f"repetition bound {shown} exceeds the limit {ir.MAX_COUNT}",
                                        *self.where(start))
        lo = int(parts[0]) if parts[0] else 0
        hi = lo if len(parts) == 1 else (int(parts[1]) if parts[1] else None)
        if hi is not None and hi < lo:
            raise self.error(f"repetition bounds are out of order: {{{body}}}", start)
        out.append(_Token("BRACE", start, (lo, hi)))
        return end + 1


_DESCRIBE = {
    "NAME": "a rule name", "DEFINE": "'::='", "STRING": "a string literal",
    "CLASS": "a character class", "PIPE": "'|'", "LPAREN": "'('", "RPAREN": "')'",
    "STAR": "'*'", "PLUS": "'+'", "QMARK": "'?'", "BRACE": "a repetition", "EOF": "end of input",
}
_POSTFIX = {"STAR": (0, None), "PLUS": (1, None), "QMARK": (0, 1)}


class _Parser:
    def __init__(self, text: str):
        self.lexer = _Lexer(text)
        self.toks = self.lexer.tokens()
        self.i = 0
        self.refs: list[tuple[str, int]] = []  # (name, offset) of every reference

    def peek(self, ahead: int = 0) -> _Token:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def next(self) -> _Token:
        tok = self.peek()
        self.i += 1
        return tok

    def fail(self, tok: _Token, wanted: str) -> GrammarError:
        return self.lexer.error(f"expected {wanted}, found {_DESCRIBE[tok.kind]}", tok.offset)

    def at_rule_start(self) -> bool:
        return self.peek().kind == "NAME" and self.peek(1).kind == "DEFINE"

    def grammar(self, root: str) -> ir.Grammar:
        rules: dict[str, ir.Expr] = {}
        positions: dict[str, tuple[int, int]] = {}
        while self.peek().kind != "EOF":
            if not self.at_rule_start():
                raise self.fail(self.peek(), "a rule definition 'name ::= ...'")
            name_tok = self.next()
            self.next()
            name = name_tok.value
            if name in rules:
                line, col = positions[name]
                raise self.lexer.error(
                    f"rule {name!r} is already defined at line {line}, column {col}",
                    name_tok.offset,
                )
            positions[name] = self.lexer.where(name_tok.offset)
            rules[name] = self.choice()
            if self.peek().kind == "RPAREN":  # the only token that can stop a body early
                raise self.lexer.error("unmatched ')'", self.peek().offset)
        for name, offset in self.refs:
            if name not in rules:
                raise self.lexer.error(f"undefined rule {name!r}", offset)
        if root not in rules:
            raise GrammarError(f"the root rule {root!r} is not defined", 1, 1)
        return ir.Grammar(rules, root, positions)

    def choice(self) -> ir.Expr:
        """A rule body. Groups are parsed with a stack of their own, not by recursion: how deep
        they nest is the user's choice."""
        stack = [_Group(None)]
        while True:
            group, tok = stack[-1], self.peek()
            if tok.kind == "PIPE":
                self.next()
                group.alternatives.append(ir.seq(*group.items))
                group.items = []
            elif tok.kind == "LPAREN":
                self.next()
                stack.append(_Group(tok))
            elif tok.kind == "RPAREN" and len(stack) > 1:
                self.next()
                stack.pop()
                stack[-1].items.append(self.postfix(group.expr()))
            elif tok.kind in ("RPAREN", "EOF") or self.at_rule_start():
                if len(stack) > 1:  # the body ended (EOF or the next rule) inside a group
                    raise self.lexer.error("unclosed '('", group.opened.offset)
                return group.expr()  # a ')' here is reported by grammar()
            else:
                group.items.append(self.postfix(self.primary()))

    def postfix(self, expr: ir.Expr) -> ir.Expr:
        while True:
            tok = self.peek()
            if tok.kind in _POSTFIX:
                expr = ir.folded_repeat(expr, *_POSTFIX[tok.kind])
            elif tok.kind == "BRACE":
                expr = ir.folded_repeat(expr, *tok.value)
            else:
                return expr
            self.next()

    def primary(self) -> ir.Expr:
        """A name, literal or class (groups are the caller's)."""
        tok = self.next()
        if tok.kind == "NAME":
            self.refs.append((tok.value, tok.offset))
            return ir.Ref(tok.value)
        if tok.kind in ("STRING", "CLASS"):
            return tok.value
        if tok.kind in _POSTFIX or tok.kind == "BRACE":
            raise self.lexer.error(f"{_DESCRIBE[tok.kind]} has nothing to repeat", tok.offset)
        raise self.fail(tok, "an expression")


class _Group:
    """A choice being parsed: the rule body (opened None) or a parenthesized group.
    An empty sequence is the empty string (GBNF allows empty alternatives)."""

    def __init__(self, opened: _Token | None):
        self.opened = opened
        self.alternatives: list[ir.Expr] = []
        self.items: list[ir.Expr] = []

    def expr(self) -> ir.Expr:
        return ir.alt(*self.alternatives, ir.seq(*self.items))


def parse_ebnf(text: str, root: str = "root") -> ir.Grammar:
    """Parse GBNF/xgrammar-style EBNF into the IR; raises GrammarError with line and column
    (GrammarLimitError for a repetition bound beyond the IR's ir.MAX_COUNT)."""
    if not isinstance(text, str) or not isinstance(root, str):
        raise GrammarError(f"a grammar and its root must be strings, got {type(text).__name__} and "
                           f"{type(root).__name__}")
    with ir.nesting_guard("the grammar"):
        return _Parser(text).grammar(root)
