"""Where the whitespace and separators go between JSON tokens: one Layout per nesting depth.

Three modes (xgrammar's options, json.dumps' meaning):
- any whitespace: JSON whitespace (at most max_whitespace bytes in a row, one shared rule) around
  the separators, which are "," and ":" unless `separators` are given; `indent` is ignored there,
  as xgrammar ignores it (web-llm passes indent=2 with anyWhitespace);
- compact (no indent, no separators): "," or ", " and ":" or ": " (json.dumps' default
  separators, or none of their spaces);
- formatted (indent and/or separators given): exactly json.dumps(value, indent=, separators=)'s
  text (separators: "," and ":" with JSON whitespace around, layout_options.py). separators default to (",", ": ") with an indent and (", ", ": ") without, as json.dumps.
  With an indent, each item or member starts a line indented `indent` spaces per depth, the
  closing bracket its own line one level less; an empty array or object is "[]" / "{}".

A container's parts at depth d (the root value is at depth 0; its items at depth 1):
  "[" open first item sep item ... close "]"   and the empty one "[" open "]"
  "{" open first key colon value sep ... close "}"
"""

from __future__ import annotations

from .. import ir

WS_BYTES = [(0x20, 0x20), (0x09, 0x0A), (0x0D, 0x0D)]  # space, tab, newline, carriage return


class Layout:
    """The separators of an array or object at one depth (see the module's picture)."""
    __slots__ = ("open", "first", "sep", "close", "colon")

    def __init__(self, open_: ir.Expr, first: ir.Expr, sep: ir.Expr, close: ir.Expr, colon: ir.Expr):
        self.open, self.first, self.sep, self.close, self.colon = open_, first, sep, close, colon


class Layouts:
    """The layout of each depth for one conversion's options. `by_depth`: whether containers'
    texts depend on their depth (an indent in formatted mode): then value rules are built per depth."""

    def __init__(self, any_whitespace: bool, max_whitespace: int, indent: int | None,
                 separators: tuple[str, str] | None, rules: dict):
        self.indent = None if any_whitespace else indent
        self.by_depth = self.indent is not None
        self._layouts: dict[int, Layout] = {}
        if any_whitespace:
            # One rule that every place calls: the bound costs its states once, not at each place.
            rules["ws"] = ir.repeat(ir.byte_set(WS_BYTES), 0, max_whitespace)
            ws = ir.Ref("ws")
            item, key = separators or (",", ":")
            self._flat = Layout(ws, ir.EMPTY, ir.seq(ws, ir.literal(item), ws), ws,
                                ir.seq(ws, ir.literal(key), ws))
        elif separators is None and indent is None:  # compact, but json.dumps' default ", " and ": " too
            space = ir.repeat(ir.literal(" "), 0, 1)
            self._flat = Layout(ir.EMPTY, ir.EMPTY, ir.seq(ir.literal(","), space), ir.EMPTY,
                                ir.seq(ir.literal(":"), space))
        else:
            self.item, self.key = separators or ((",", ": ") if indent is not None else (", ", ": "))
            self._flat = None if indent is not None else Layout(ir.EMPTY, ir.EMPTY, ir.literal(self.item), ir.EMPTY,
                                                                ir.literal(self.key))

    def at(self, depth: int) -> Layout:
        """The layout of a container whose value is at `depth` (its items at depth + 1)."""
        if self._flat is not None:
            return self._flat
        known = self._layouts.get(depth)
        if known is None:
            inner = "\n" + " " * (self.indent * (depth + 1))
            known = self._layouts[depth] = Layout(
                ir.EMPTY, ir.literal(inner), ir.literal(self.item + inner),
                ir.literal("\n" + " " * (self.indent * depth)), ir.literal(self.key))
        return known
