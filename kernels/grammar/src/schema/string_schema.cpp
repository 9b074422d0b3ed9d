#include "string_schema.h"

#include <algorithm>

namespace tg::schema {

// ---- StringSchema -----------------------------------------------------------------------

StringSchema::StringSchema(IrBuilder& ir, TextHost& host, Patterns& patterns)
    : ir_(ir), host_(host), patterns_(patterns), text_(text_exprs(ir)) {}

Expr StringSchema::string_of_length(int64_t lo, int64_t hi) {
  if (hi != kUnbounded && hi < lo) return IrBuilder::kNothing;
  const Expr count = capped_count(lo, hi);
  if (count == kNoExpr) return kNoExpr;
  const Expr quote = ir_.literal("\"");
  return finish(ir_.seq(quote, count, quote));
}

Expr StringSchema::capped_count(int64_t lo, int64_t hi, Expr ch) {
  if (lo > kMaxStringLength) return kNoExpr;  // refused: minLength above MAX_STRING_LENGTH
  if (hi != kUnbounded && hi > kMaxStringLength) hi = kMaxStringLength;  // a restriction
  return char_count(lo, hi, ch);
}

// Past kCalledChars: kCalledChars calls of the one-character rule, then 16-character blocks and
// single characters for the rest (strings shorter than kCalledChars apart).
Expr StringSchema::char_count(int64_t lo, int64_t hi, Expr ch) {
  if ((hi == kUnbounded || hi <= kFlatChars) && lo <= kFlatChars) return finish(ir_.repeat(ch, lo, hi));
  if (hi == kUnbounded) {
    const Expr exact = char_count(lo, lo, ch);  // one level: lo is bounded now
    return exact == kNoExpr ? kNoExpr : finish(ir_.seq(exact, ir_.repeat(ch, 0, kUnbounded)));
  }
  const Expr one = char_rule(ch, 1);
  if (one == kNoExpr) return kNoExpr;
  if (hi <= kCalledChars) return finish(ir_.repeat(one, lo, hi));
  const Expr block = char_rule(ch, 16);
  if (block == kNoExpr) return kNoExpr;
  const int64_t rest_lo = std::max<int64_t>(lo - kCalledChars, 0), m = hi - kCalledChars - rest_lo;
  const int64_t q = m / 16;
  const Expr up_to = q == 0 ? ir_.repeat(one, 0, m)
                            : ir_.alt(ir_.seq(ir_.repeat(block, 0, q - 1), ir_.repeat(one, 0, 15)),
                                      ir_.seq(ir_.repeat(block, q, q), ir_.repeat(one, 0, m % 16)));
  const Expr longer = ir_.seq(ir_.repeat(one, kCalledChars, kCalledChars), ir_.repeat(block, rest_lo / 16, rest_lo / 16),
                              ir_.repeat(one, rest_lo % 16, rest_lo % 16), up_to);
  if (lo >= kCalledChars) return finish(longer);
  return finish(ir_.alt(ir_.repeat(one, lo, kCalledChars - 1), longer));
}

Expr StringSchema::char_rule(Expr ch, int32_t n) {
  const uint64_t key = uint64_t(uint32_t(ch)) << 32 | uint32_t(n);
  const auto known = char_rules_.find(key);
  RuleId rule;
  if (known != char_rules_.end()) {
    rule = known->second;
  } else {
    const std::string hint = "chars" + std::to_string(n);
    // Handles are equal exactly when expressions are: the Python's `char is JSON_CHAR`.
    rule = ch == text_.json_char ? ir_.rule(hint) : host_.fresh(hint);
    if (rule < 0) return kNoExpr;  // past MAX_RULES
    char_rules_.emplace(key, rule);
    host_.set_rule(rule, ir_.repeat(ch, n, n));
  }
  return finish(ir_.make_ref(rule));
}

// ---- strings with patterns and formats ----------------------------------------------------------

Expr StringSchema::string(const StringFacts& f) {
  const int64_t lo = f.lo, hi = f.hi;
  if (f.parts.empty() || (hi != kUnbounded && hi < lo)) return string_of_length(lo, hi);
  const Expr quote = ir_.literal("\"");
  if (f.parts.size() == 1 && f.parts[0].kind == StringPart::kFormat && is_checked_format(f.parts[0].value) && lo == 0 &&
      hi == kUnbounded) {
    Expr e;
    std::vector<std::pair<RuleId, Expr>> rules;
    if (!patterns_.checked_format(f.parts[0].value, &e, &rules)) return kNoExpr;
    for (const auto& [rule, body] : rules) host_.set_rule(rule, body);
    return finish(e);
  }
  if (f.parts.size() == 1 && !f.parts[0].negated()) {
    const Expr e = part(f.parts[0], false);
    int64_t rlo, rhi, ilo, ihi;
    if (e == kNoExpr || !patterns_.regex_min_max_length(e, &rlo, &rhi)) return kNoExpr;
    const bool repeat = ir_.kind(e) == REPEAT;
    if (repeat && !patterns_.regex_min_max_length(ir_.item(e), &ilo, &ihi)) return kNoExpr;
    const bool one_class = repeat && ilo == 1 && ihi == 1;
    if (rlo >= lo && (hi == kUnbounded || (rhi != kUnbounded && rhi <= hi))) {
      if (!one_class) return finish(ir_.seq(quote, json_escape(ir_, e), quote));
      const Expr count = char_count(ir_.repeat_min(e), ir_.repeat_max(e), json_escape(ir_, ir_.item(e)));
      return count == kNoExpr ? kNoExpr : finish(ir_.seq(quote, count, quote));
    }
    if (one_class) {  // counted_class: the length bounds as count bounds, counted by the core
      const int64_t clo = std::max(lo, ir_.repeat_min(e)), emax = ir_.repeat_max(e);
      const int64_t chi = hi == kUnbounded ? emax : emax == kUnbounded ? hi : std::min(hi, emax);
      if (chi != kUnbounded && chi < clo) return finish(ir_.seq(quote, IrBuilder::kNothing, quote));
      const Expr count = capped_count(clo, chi, json_escape(ir_, ir_.item(e)));
      return count == kNoExpr ? kNoExpr : finish(ir_.seq(quote, count, quote));
    }
  }
  // The same constraints on several properties are one product automaton and one set of rules.
  std::string key = std::to_string(lo) + "," + std::to_string(hi);
  for (const StringPart& p : f.parts)
    key += "\1" + std::to_string(p.kind) + std::to_string(p.value.size()) + ":" + p.value;
  const auto known = intersections_.find(key);
  if (known != intersections_.end()) return known->second;
  const Expr e = intersection(f);
  if (e == kNoExpr) return kNoExpr;
  const Expr out = finish(ir_.seq(quote, e, quote));
  if (out != kNoExpr) intersections_.emplace(std::move(key), out);
  return out;
}

// string_part: a pattern as the strings it matches anywhere in (`search`: over any bytes around
// the match, as an intersection takes it), a format's language, or a literal (negated or not).
Expr StringSchema::part(const StringPart& p, bool search) {
  switch (p.kind) {
    case StringPart::kFormat:
    case StringPart::kNotFormat: {
      const Expr e = patterns_.format_expr(p.value);
      return e == kNoFormat ? kNoExpr : e;  // (facts hold enforced formats only)
    }
    case StringPart::kNotLiteral: return ir_.literal(p.value);
    default: return search ? patterns_.pattern_search_expr(p.value) : patterns_.pattern_expr(p.value);
  }
}

bool StringSchema::string_parts(const StringFacts& f, std::vector<Expr>* items, std::vector<uint8_t>* wants) {
  items->assign(1, text_.any_string);
  wants->assign(1, 1);
  for (const StringPart& p : f.parts) {
    const Expr e = part(p, true);
    if (e == kNoExpr) return false;
    items->push_back(e);
    wants->push_back(!p.negated());
  }
  if (f.lo > 0 || f.hi != kUnbounded) {
    if (f.hi != kUnbounded && f.hi > kMaxLengthWithPattern) return false;  // refused
    const Expr len = length_expr(ir_, f.lo, f.hi);
    if (len == kNoExpr) return false;
    items->push_back(len);
    wants->push_back(1);
  }
  return ir_.ok();
}

// string_parts and Converter.intersection.
Expr StringSchema::intersection(const StringFacts& f) {
  std::vector<Expr> items;
  std::vector<uint8_t> wants;
  if (!string_parts(f, &items, &wants)) return kNoExpr;
  return finish(host_.intersection(IrSpan<Expr>(items), IrSpan<uint8_t>(wants), "pattern", "", true));
}

}  // namespace tg::schema
