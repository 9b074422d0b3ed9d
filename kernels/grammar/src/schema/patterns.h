// Patterns and formats for the JSON Schema port: the part of json_schema/_text.py that text.h
// does not hold. `pattern` and `patternProperties` as the decoded strings a pattern matches
// anywhere (pattern_expr) or as the byte strings its search automaton takes (pattern_search_expr),
// the match of a pattern against a property name (pattern_search), and `format`: the FORMATS
// regexes, REFUSED_FORMATS, CHECKED_FORMATS and checked_format's grammars, with
// regex_min_max_length. The same calls build the same expressions as the Python, so the words
// are its words; every call returns kNoExpr (or declines) where the Python raises, and where the
// regex front-end declines (regex.h).
//
// Values the Python refuses for their type (a pattern or a format that is not a string) are the
// caller's to decline: these take strings (UTF-8, or WTF-8 with a lone surrogate).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir_build.h"
#include "regex.h"

namespace tg::schema {

constexpr Expr kNoFormat = -2;  // format_expr's None: a format nobody defines, an annotation

// FORMATS[name]: the regex of a format the port enforces, or empty for none.
std::string_view format_regex(std::string_view name);
// The names FORMATS holds, in its order.
const std::vector<std::string_view>& format_names();
bool is_refused_format(std::string_view name);  // REFUSED_FORMATS: idn-email, idn-hostname
bool is_checked_format(std::string_view name);  // CHECKED_FORMATS: time, date-time, regex
std::string_view base64_regex();                // BASE64

class Patterns {
 public:
  // `unicode_version`: as Regex's (property escapes decline under another version).
  Patterns(IrBuilder& ir, std::string_view unicode_version);
  ~Patterns();

  Regex& regex() { return regex_; }
  const std::string& why() const { return why_; }  // why the last call declined

  // pattern_expr: the decoded strings the pattern matches anywhere (each top-level alternative
  // with its own anchors, lazy quantifiers read as greedy); kNoExpr where the Python raises.
  Expr pattern_expr(std::string_view pattern);
  // pattern_search_expr: the same search over any bytes around a match.
  Expr pattern_search_expr(std::string_view pattern);
  // pattern_search: whether the pattern matches anywhere in `text` (1 or 0), as the language of
  // pattern_search_expr, run as an NFA over the text's UTF-8 (the Python runs a lazy DFA of the
  // same expression); -1 declines: where the Python raises (an unsupported pattern, an
  // automaton over its budget, a text with a lone surrogate), for a text of more than 4,000
  // bytes (the Python's lazy DFA may refuse one), and past this port's own bounds on the NFA.
  int pattern_search(std::string_view pattern, std::string_view text);

  // format_expr: the decoded strings of a FORMATS format; kNoFormat for a format nobody defines;
  // kNoExpr for REFUSED_FORMATS and "regex" (the Python raises).
  Expr format_expr(std::string_view name);
  // full_regex_expr: a trusted regex of the module (formats, base64) as a full match.
  Expr full_regex_expr(std::string_view pattern);
  // checked_format for a CHECKED_FORMATS name: the JSON strings (quotes included) and the rules
  // the expression refers to, in the Python's order; false for any other name or a decline.
  bool checked_format(std::string_view name, Expr* expr, std::vector<std::pair<RuleId, Expr>>* rules);

  // regex_min_max_length: bounds on the code points of the strings an expression matches (hi
  // kUnbounded for None); false where a bound passes int64 (the Python's ints do not).
  bool regex_min_max_length(Expr e, int64_t* lo, int64_t* hi);

 private:
  struct Search;
  Expr search_expr(std::string_view pattern, Expr anything);
  Expr decline(std::string why);

  IrBuilder& ir_;
  Regex regex_;
  std::string why_;
  Expr any_string_, any_bytes_;
  std::unordered_map<std::string, Expr> patterns_, searches_, full_;
  std::unordered_map<std::string, std::string> refused_;  // why a pattern declined
  std::unordered_map<std::string, std::unique_ptr<Search>> matchers_;
  std::unordered_map<Expr, std::pair<int64_t, int64_t>> lengths_;
};

}  // namespace tg::schema
