// The regex front-end of the JSON Schema port: py/trellis/grammar/regex.py's regex_expr, the
// ECMA-262 subset (`u`-flag semantics, Annex B's literal `{`) that `pattern`, `patternProperties`
// and `format` are written in, parsed and lowered to the very expression the Python builds (the
// same constructor calls in the same order: ir.folded_repeat on each quantifier, _merge_literals
// on each alternative, _factored tries for classes with property escapes).
//
// Where the Python raises (a syntax error, an unsupported construct, a lone surrogate, a bound
// past ir.MAX_COUNT), regex_expr returns kNoExpr: the port declines and the Python reports its
// error. It also declines, where the Python would work, on what it will not build:
// - property escapes under another Unicode version than its tables' (regex_unicode.inc; the
//   Python's classes follow its own unicodedata);
// - expressions nested deeper than kMaxRegexDepth (the Python recurses on the nesting, in
//   ir.nullable, json_escape and more, and may run out of frames where this could not tell);
// - patterns that would make it build more than kMaxRegexWork words (nested groups copy their
//   flattened items at every level: quadratic in the nesting, which the Python pays in time).
// Not ported: parse_regex and its _outline_repeated (the regex grammar front-end's), whose
// outlining counts the Python's object identities rather than its expressions.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir_build.h"

namespace tg::schema {

constexpr int32_t kMaxRegexDepth = 256;      // expression levels (a leaf is 1)
constexpr int64_t kMaxRegexWork = 1 << 24;   // items and bytes one pattern's constructors take

// unicodedata.unidata_version of the Python that generated the property tables.
std::string_view regex_unicode_version();
// A version given as major * 10000 + minor * 100 + micro (the C ABI's), written as Python does.
std::string unicode_version_name(int32_t packed);

// str.isdigit of one code point (Unicode digits: json_schema/_text.py's _drop_lazy asks).
bool unicode_isdigit(int32_t c);

// Decodes UTF-8 (WTF-8's surrogates included, as json.h keeps a lone one) into code points;
// false for anything else.
bool decode_code_points(std::string_view text, std::vector<int32_t>* out);

// One builder's regex front-end, with its caches (property classes and their tries).
class Regex {
 public:
  // `unicode_version`: unicodedata.unidata_version of the Python whose words are wanted; property
  // escapes decline unless it is regex_unicode_version().
  Regex(IrBuilder& ir, std::string_view unicode_version);

  // regex.regex_expr(pattern): the full-match language of a pattern (UTF-8, or WTF-8) as one
  // expression without rule references, or kNoExpr (why() says why).
  Expr regex_expr(std::string_view pattern);
  Expr regex_expr(const std::vector<int32_t>& code_points);

  IrBuilder& ir() { return ir_; }
  const std::string& why() const { return why_; }
  // An expression's nesting depth (a leaf is 1), each distinct node measured once.
  int32_t depth(Expr e);

 private:
  friend class RegexParser;
  Expr decline(std::string why);
  Expr property_class(int32_t key, bool negate);  // _property_class
  Expr factored(Expr e);                            // _factored

  IrBuilder& ir_;
  bool properties_ = false;  // the tables are the wanted Python's
  std::string why_;
  std::vector<int32_t> depth_;  // by handle, 0: not measured yet
  std::unordered_map<int32_t, Expr> property_classes_;  // key << 1 | negate
  std::unordered_map<Expr, Expr> factored_;
};

}  // namespace tg::schema
