// Strings for the JSON Schema port: json_schema/_text.py's JSON string encoding (keys and
// constants), the JSON escaping of an expression over decoded UTF-8 bytes, ANY_CHAR, ANY_STRING
// and JSON_CHAR; and from _string_schema.py the counted characters of a string whose only
// keywords are minLength/maxLength (char_count, char_rule, capped_count). The same calls build
// the same expressions as the Python, so the grammars' words are its words; where the Python
// raises (a lone surrogate, a minLength past MAX_STRING_LENGTH, too many rules) these return
// kNoExpr and the caller declines.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ir_build.h"

namespace tg::schema {

// _string_schema's limits: a longer maxLength is cut to kMaxStringLength characters, counts up to
// kFlatChars are written out, up to kCalledChars one rule call per character.
constexpr int64_t kMaxStringLength = 100000;
constexpr int64_t kFlatChars = 64;
constexpr int64_t kCalledChars = 1024;

// escape_byte: the JSON spelling of an ASCII byte that must be escaped (`\"`, `\\`, `\b`, `\f`,
// `\n`, `\r`, `\t`, else `\u00xx` for a control byte); empty for any other byte.
std::string_view escape_byte(uint8_t b);

// encode_string: what json.dumps(s, ensure_ascii=False) writes, quotes included, appended to
// `out`: escape_byte for the bytes it names, every other byte as it is (UTF-8 or WTF-8 alike).
void encode_string(std::string_view s, std::string* out);

// string_literal: the JSON text of the string `s` (UTF-8), quotes included: ASCII as
// encode_string writes it, each other character raw or as its \u escape(s) (either-case hex).
// `shared` is the Python's node-sharing hint; equal nodes are one handle here, so it changes
// nothing. kNoExpr for a lone surrogate (WTF-8) or invalid UTF-8, where the Python raises.
Expr string_literal(IrBuilder& ir, std::string_view s, bool shared = true);

// json_escape: an expression over decoded UTF-8 bytes mapped onto JSON string-body bytes (each
// byte JSON must escape replaced by its escape). Every expression kind, as the Python: bytes and
// byte sets rewritten, sequences, choices, repetitions and regions rebuilt, the rest kept.
Expr json_escape(IrBuilder& ir, Expr e);

// The module's constants, built in one builder.
struct TextExprs {
  Expr any_char;    // ANY_CHAR: one code point, decoded
  Expr any_string;  // ANY_STRING: every decoded string
  Expr json_char;   // JSON_CHAR: one code point as a JSON string holds it
};
TextExprs text_exprs(IrBuilder& ir);

// length_expr: lo..hi decoded characters (hi kUnbounded for None).
Expr length_expr(IrBuilder& ir, int64_t lo, int64_t hi);

// What _string_schema needs of the converter: its rule names and rules (Converter.fresh and
// self.rules); a reference is the builder's (Converter.ref's object is only a cache).
class TextHost {
 public:
  virtual ~TextHost() = default;
  // fresh(hint): the next name of the converter's shared counter (prefix, hint, "_n"), or -1
  // past its MAX_RULES, where the Python raises.
  virtual RuleId fresh(std::string_view hint) = 0;
  // self.rules[name] = body: a new rule goes last, a known one keeps its place.
  virtual void set_rule(RuleId rule, Expr body) = 0;
};

// StringSchema's counted strings, with its table of character rules (Converter.char_rules);
// one per conversion. Every call returns kNoExpr where the Python raises (see above), and when
// the builder holds an error.
class StringSchema {
 public:
  StringSchema(IrBuilder& ir, TextHost& host);

  const TextExprs& text() const { return text_; }

  // string(nodes) for nodes whose only string keywords are lengths (no pattern, format or
  // content keywords): the quoted lo..hi JSON characters, NOTHING when hi < lo. lo and hi
  // (kUnbounded: no maxLength) are what count_bounds gives; values past int64 are the caller's
  // to decline.
  Expr string_of_length(int64_t lo, int64_t hi);
  // char_count within kMaxStringLength: a longer minimum refused (kNoExpr), a longer maximum cut.
  Expr capped_count(int64_t lo, int64_t hi, Expr ch);
  Expr capped_count(int64_t lo, int64_t hi) { return capped_count(lo, hi, text_.json_char); }
  // lo..hi characters `ch` (lo <= hi): written out when short, else through char_rule's rules.
  Expr char_count(int64_t lo, int64_t hi, Expr ch);
  // A reference to the rule of `n` characters `ch`, one rule per (ch, n): named "chars<n>" for
  // JSON_CHAR, else fresh("chars<n>").
  Expr char_rule(Expr ch, int32_t n);

 private:
  Expr finish(Expr e) const { return ir_.ok() ? e : kNoExpr; }

  IrBuilder& ir_;
  TextHost& host_;
  TextExprs text_;
  std::unordered_map<uint64_t, RuleId> char_rules_;  // (ch << 32 | n) -> its rule
};

}  // namespace tg::schema
