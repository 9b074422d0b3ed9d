// _string_schema.py's StringSchema for the JSON Schema port: the grammar of a context's strings
// from its string keywords (StringFacts), built as a counted character class, one pattern or
// format as it is, a checked format, or the intersection of their languages (an And rule, whose
// product automaton the core builds), and the character counts other places share. The same
// calls build the same expressions, rules and rule names as the Python, so the grammars' words
// are its words; where the Python raises (a minLength past MAX_STRING_LENGTH, too many rules, a
// pattern it refuses) these return kNoExpr and the caller declines.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir_build.h"
#include "patterns.h"
#include "text.h"

namespace tg::schema {

// _string_schema's limits: a longer maxLength is cut to kMaxStringLength characters, counts up to
// kFlatChars are written out, up to kCalledChars one rule call per character.
constexpr int64_t kMaxStringLength = 100000;
constexpr int64_t kFlatChars = 64;
constexpr int64_t kCalledChars = 1024;
// string_parts: a maxLength above this together with a pattern or format is refused.
constexpr int64_t kMaxLengthWithPattern = 500;


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
  // Converter.intersection: a new rule fresh("and") = And(items, wants, escaped), referred to.
  virtual Expr intersection(IrSpan<Expr> items, IrSpan<uint8_t> wants, std::string_view keyword,
                            std::string_view pointer, bool escaped) = 0;
};

// StringFacts: the string keywords of a context's subschemas together, lengths in characters
// (hi kUnbounded: no maxLength) and, in the nodes' order, the languages the string must be in
// (each `pattern`, each enforced `format`) or must not be in (the negations _negate.py writes:
// a pattern, a format, a literal). Content keywords decline before.
struct StringPart {
  enum Kind : uint8_t { kPattern, kFormat, kNotPattern, kNotFormat, kNotLiteral } kind;
  std::string value;  // UTF-8, or WTF-8
  bool negated() const { return kind >= kNotPattern; }
};
struct StringFacts {
  int64_t lo = 0, hi = kUnbounded;
  std::vector<StringPart> parts;
};

// StringSchema: a context's strings, with its table of character rules (Converter.char_rules)
// and of built intersections (Converter.strings); one per conversion. Every call returns kNoExpr
// where the Python raises, and when the builder holds an error.
class StringSchema {
 public:
  StringSchema(IrBuilder& ir, TextHost& host, Patterns& patterns);

  // string(nodes) of the nodes' facts: one counted class, one pattern or format as it is, a
  // checked format, or the intersection of their languages.
  Expr string(const StringFacts& facts);

  const TextExprs& text() const { return text_; }

  // string_parts: the languages a decoded string must be in (wants 1) or not, for an And: any
  // string, each part (a pattern as its search), the length bounds; false where the Python
  // raises (a maxLength past kMaxLengthWithPattern, a part it refuses).
  bool string_parts(const StringFacts& facts, std::vector<Expr>* items, std::vector<uint8_t>* wants);

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

  Expr part(const StringPart& p, bool search);  // string_part
  Expr intersection(const StringFacts& facts);   // string_parts and the rule of their product

  IrBuilder& ir_;
  TextHost& host_;
  Patterns& patterns_;
  TextExprs text_;
  std::unordered_map<uint64_t, RuleId> char_rules_;  // (ch << 32 | n) -> its rule
  std::unordered_map<std::string, Expr> intersections_;  // by the facts' text
};

}  // namespace tg::schema
