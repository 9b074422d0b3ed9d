#include "patterns.h"

#include <algorithm>

#include "text.h"

namespace tg::schema {

namespace {

// Check kinds (../checks.h, ir.py).
constexpr int32_t kCheckLeapSecond = 3, kCheckRegex = 4, kCheckRegexPrefix = 7;
constexpr int64_t kNfaBudget = 200000;  // _dfa._Subsets' budget of build calls
constexpr size_t kMaxSearchText = 4000;  // _dfa.MAX_STATES: a longer text may meet more states
constexpr size_t kMaxSearchStates = size_t{1} << 21;  // this port's bound on one NFA
constexpr int64_t kMaxSearchWork = int64_t{1} << 26;  // states visited by one match
constexpr std::string_view kRegexRule = "fmt-regex-disjunction";

using S = std::string;

// ---- the format regexes (_text.py, the same text) ----------------------------------------------

const S kDecOctet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
const S kH16 = "[0-9A-Fa-f]{1,4}";
const S kUnreserved = "A-Za-z0-9._~\\-";
const S kSub = "!$&'()*+,;=";
const S kPct = "%[0-9A-Fa-f]{2}";
const S kScheme = "[A-Za-z][A-Za-z0-9+.\\-]*";
const S kAlnum = "[A-Za-z0-9]";
const S kLdh = "[A-Za-z0-9-]";

S join(const std::vector<S>& parts, const S& sep) {
  S out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : S()) + parts[i];
  return out;
}

S ipv4() { return kDecOctet + "(?:\\." + kDecOctet + "){3}"; }

S ipv6() {
  const S ls32 = "(?:" + kH16 + ":" + kH16 + "|" + ipv4() + ")";
  std::vector<S> forms{"(?:" + kH16 + ":){6}" + ls32, "::(?:" + kH16 + ":){5}" + ls32};
  forms.push_back("(?:" + kH16 + ")?::(?:" + kH16 + ":){4}" + ls32);
  for (int n = 1; n <= 4; ++n) {  // [ *n( h16 ":" ) h16 ] "::" ...
    const S before = "(?:(?:" + kH16 + ":){0," + std::to_string(n) + "}" + kH16 + ")?";
    const S tail = n == 1   ? "(?:" + kH16 + ":){3}" + ls32
                   : n == 2 ? "(?:" + kH16 + ":){2}" + ls32
                   : n == 3 ? kH16 + ":" + ls32
                            : ls32;
    forms.push_back(before + "::" + tail);
  }
  forms.push_back("(?:(?:" + kH16 + ":){0,5}" + kH16 + ")?::" + kH16);
  forms.push_back("(?:(?:" + kH16 + ":){0,6}" + kH16 + ")?::");
  return "(?:" + join(forms, "|") + ")";
}

S label(int n) {  // labels of at most n characters
  return "(?:" + kAlnum + "(?:" + kLdh + "?" + kAlnum + ")?|" + kAlnum + kLdh + "(?:" + kLdh + kAlnum + "|(?:" + kAlnum +
         kLdh + "|" + kLdh + kAlnum + ")" + kLdh + "{0," + std::to_string(n - 5) + "}" + kAlnum + "))";
}

S hex_upper(int32_t v) {
  static const char digits[] = "0123456789ABCDEF";
  S out;
  do out.insert(out.begin(), digits[v & 15]), v >>= 4;
  while (v);
  return out;
}

struct UriLike {
  S absolute, relative;
};

UriLike uri_like(const S& unreserved, const S& ip_literal, const S& priv) {
  const S pchar = "(?:[" + unreserved + kSub + ":@]|" + kPct + ")";
  const S pchar_nc = "(?:[" + unreserved + kSub + "@]|" + kPct + ")";
  const S userinfo = "(?:[" + unreserved + kSub + ":]|" + kPct + ")*";
  const S host = "(?:" + ip_literal + "|(?:[" + unreserved + kSub + "]|" + kPct + ")*)";
  const S authority = "(?:" + userinfo + "@)?" + host + "(?::[0-9]*)?";
  const S abempty = "(?:/" + pchar + "*)*";
  const S hier = "(?://" + authority + abempty + "|/(?:" + pchar + "+(?:/" + pchar + "*)*)?|" + pchar + "+(?:/" +
                 pchar + "*)*)?";
  const S query = "(?:" + pchar + "|[/?" + priv + "])*";
  const S fragment = "(?:" + pchar + "|[/?])*";
  return {kScheme + ":" + hier + "(?:\\?" + query + ")?(?:#" + fragment + ")?",
          "(?://" + authority + abempty + "|/(?:" + pchar + "+(?:/" + pchar + "*)*)?|" + pchar_nc + "+(?:/" + pchar +
              "*)*)?" + "(?:\\?" + query + ")?(?:#" + fragment + ")?"};
}

struct Formats {
  S date, base64, leap_time;
  std::vector<std::pair<std::string_view, S>> table;  // FORMATS, in order
  std::vector<std::string_view> names;
};

const Formats& formats() {
  static const Formats f = [] {
    Formats t;
    const S v4 = ipv4(), v6 = ipv6();
    const S year_leap = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)";
    const S date =
        "(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
        "|02-(?:0[1-9]|1[0-9]|2[0-8]))|" +
        year_leap + "-02-29)";
    const S time =
        "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
    const S dur_time = "T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)";
    const S dur_date = "(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)";
    const S duration = "P(?:[0-9]+W|" + dur_date + "(?:" + dur_time + ")?|" + dur_time + ")";
    const S label63 = label(63), label30 = label(30);
    const S hostname = "(?:" + label63 + "(?:\\." + label63 + "){0,2}|" + label30 + "(?:\\." + label30 + "){3,7})";
    const S atext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
    const S quoted = "\"(?:[\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]|\\\\[\\x20-\\x7e])*\"";
    const S email = "(?:" + atext + "+(?:\\." + atext + "+)*|" + quoted + ")@(?:" + hostname + "|\\[" + v4 +
                    "\\]|\\[IPv6:" + v6 + "\\])";
    const S uuid = "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}";
    const S ip_literal = "\\[(?:" + v6 + "|[vV][0-9A-Fa-f]+\\.[" + kUnreserved + kSub + ":]+)\\]";
    const UriLike uri = uri_like(kUnreserved, ip_literal, "");
    const S json_pointer = "(?:/(?:[^~/]|~[01])*)*";
    // RFC 3987: IRIs are URIs whose unreserved characters include `ucschar` (and `iprivate` in queries)
    std::vector<std::pair<int32_t, int32_t>> ucs_ranges{{0xA0, 0xD7FF}, {0xF900, 0xFDCF}, {0xFDF0, 0xFFEF}};
    for (int32_t p = 1; p < 14; ++p) ucs_ranges.push_back({p << 16, (p << 16) + 0xFFFD});
    ucs_ranges.push_back({0xE1000, 0xEFFFD});
    S ucs;
    for (const auto& r : ucs_ranges) ucs += "\\u{" + hex_upper(r.first) + "}-\\u{" + hex_upper(r.second) + "}";
    const S priv = "\\u{E000}-\\u{F8FF}\\u{F0000}-\\u{FFFFD}\\u{100000}-\\u{10FFFD}";
    const UriLike iri = uri_like(kUnreserved + ucs, ip_literal, priv);
    const S varchar = "(?:[A-Za-z0-9_]|" + kPct + ")";
    const S varspec = varchar + "(?:\\.?" + varchar + ")*(?::[1-9][0-9]{0,3}|\\*)?";
    const S uri_template = "(?:[\\x21\\x23\\x24\\x26-\\x3b\\x3d\\x3f-\\x5b\\x5d\\x5f\\x61-\\x7a\\x7e" + ucs + priv +
                           "]|" + kPct + "|\\{[+#./;?&=,!@|]?" + varspec + "(?:," + varspec + ")*\\})*";
    t.date = date;
    t.base64 = "(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?";
    t.leap_time = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:60(?:\\.[0-9]+)?";
    t.table = {{"date", date},
               {"time", time},
               {"date-time", date + "[Tt]" + time},
               {"duration", duration},
               {"email", email},
               {"hostname", hostname},
               {"ipv4", v4},
               {"ipv6", v6},
               {"uuid", uuid},
               {"uri", uri.absolute},
               {"uri-reference", "(?:" + uri.absolute + "|" + uri.relative + ")"},
               {"json-pointer", json_pointer},
               {"relative-json-pointer", "(?:0|[1-9][0-9]*)(?:#|" + json_pointer + ")"},
               {"iri", iri.absolute},
               {"iri-reference", "(?:" + iri.absolute + "|" + iri.relative + ")"},
               {"uri-template", uri_template}};
    for (const auto& entry : t.table) t.names.push_back(entry.first);
    return t;
  }();
  return f;
}

// ---- pattern text (_drop_lazy, _split_top_level, _ends_with_anchor), over code points ----------

using Cps = std::vector<int32_t>;

// _drop_lazy: without the '?' of lazy quantifiers (which match is found differs, whether one
// exists does not). _closes_quantifier's look back to the last '{' and over the digits and commas
// after it is read from two tables, so that a pattern of many '}' costs linear time.
Cps drop_lazy(const Cps& p) {
  const size_t n = p.size();
  std::vector<int64_t> last_open(n + 1, -1);  // the last '{' before each position
  for (size_t j = 0; j < n; ++j) last_open[j + 1] = p[j] == '{' ? int64_t(j) : last_open[j];
  std::vector<size_t> run_end(n + 1, n);  // the first position from here that is no digit or ','
  for (size_t j = n; j-- > 0;) run_end[j] = unicode_isdigit(p[j]) || p[j] == ',' ? run_end[j + 1] : j;
  const auto closes_quantifier = [&](size_t j) {
    const int64_t k = last_open[j];
    return k >= 0 && run_end[size_t(k) + 1] >= j && size_t(k) + 1 < j && unicode_isdigit(p[size_t(k) + 1]);
  };
  Cps out;
  out.reserve(n);
  size_t i = 0;
  bool in_class = false;
  while (i < n) {
    const int32_t c = p[i];
    if (c == '\\') {
      out.insert(out.end(), p.begin() + i, p.begin() + std::min(i + 2, n));
      i += 2;
      continue;
    }
    out.push_back(c);
    ++i;
    if (in_class) {
      in_class = c != ']';
      continue;
    }
    if (c == '[') {
      in_class = true;
    } else if (c == '*' || c == '+' || c == '?' || (c == '}' && closes_quantifier(i - 1))) {
      // _is_quantifier_question: a '?' after '(' opens a group instead
      if (i < n && p[i] == '?' && (c != '?' || (i - 1 > 0 && p[i - 2] != '(')))
        ++i;  // the lazy marker
    }
  }
  return out;
}

// _split_top_level: the pattern cut at each '|' outside groups and classes.
std::vector<std::pair<size_t, size_t>> split_top_level(const Cps& p) {
  std::vector<std::pair<size_t, size_t>> parts;
  int64_t depth = 0;
  size_t i = 0, start = 0;
  bool in_class = false;
  while (i < p.size()) {
    const int32_t c = p[i];
    if (c == '\\') {
      i += 2;
      continue;
    }
    if (in_class)
      in_class = c != ']';
    else if (c == '[')
      in_class = true;
    else if (c == '(')
      ++depth;
    else if (c == ')')
      --depth;
    else if (c == '|' && depth == 0)
      parts.push_back({start, i}), start = i + 1;
    ++i;
  }
  parts.push_back({start, std::max(start, p.size())});
  return parts;
}

bool ends_with_anchor(const int32_t* p, size_t n) {
  if (n == 0 || p[n - 1] != '$') return false;
  size_t k = n - 1, backslashes = 0;
  while (k > 0 && p[k - 1] == '\\') ++backslashes, --k;
  return backslashes % 2 == 0;
}

}  // namespace

// ---- the NFA of a search (pattern_search) -------------------------------------------------------

// _Nfa.build's automaton without its state numbering (only its language is asked): byte runs and
// empty moves, built with a frame per expression being built, repetitions copied out.
struct Patterns::Search {
  struct Run {
    int32_t from, lo, hi, to;
  };
  std::vector<Run> runs;
  std::vector<std::pair<int32_t, int32_t>> moves;  // empty moves
  int32_t states = 0, end = -1;
  // by state, after building: where its runs and moves start (CSR)
  std::vector<int32_t> run_at, move_at, move_to;
  std::vector<Run> sorted_runs;
  // matches' tables, kept between texts: a state is in the current set when stamped `round`
  std::vector<uint32_t> seen;
  uint32_t round = 0;
  std::vector<int32_t> cur, next, todo;

  int32_t add() { return states++; }

  // False past kMaxSearchStates or for a node a search holds none of.
  bool build(const IrBuilder& ir, Expr top) {
    struct Frame {
      Expr e;
      int32_t start, cur, target;
      int64_t i;
      int8_t phase;
    };
    std::vector<Frame> stack;
    const int32_t start = add();
    int32_t ret = -1;
    stack.push_back({top, start, start, -1, 0, 0});
    bool returned = false;  // ret holds the end of the child just built
    while (!stack.empty()) {
      if (size_t(states) > kMaxSearchStates) return false;
      Frame& f = stack.back();
      const int32_t kind = ir.kind(f.e);
      if (kind == BYTES) {
        int32_t cur = f.start;
        for (unsigned char b : ir.bytes(f.e)) {
          const int32_t next = add();
          runs.push_back({cur, b, b, next});
          cur = next;
        }
        ret = cur, returned = true;
        stack.pop_back();
        continue;
      }
      if (kind == BYTESET) {
        const int32_t target = add();
        const IrSpan<int32_t> r = ir.operands(f.e);
        for (size_t k = 0; k + 1 < r.size(); k += 2) runs.push_back({f.start, r[k], r[k + 1], target});
        ret = target, returned = true;
        stack.pop_back();
        continue;
      }
      if (kind == SEQ) {
        const IrSpan<Expr> items = ir.items(f.e);
        if (returned) f.cur = ret;
        returned = false;
        if (f.i < int64_t(items.size())) {
          const Expr item = items[size_t(f.i++)];
          const int32_t from = f.cur;
          stack.push_back({item, from, from, -1, 0, 0});
        } else {
          ret = f.cur, returned = true;
          stack.pop_back();
        }
        continue;
      }
      if (kind == ALT) {
        const IrSpan<Expr> items = ir.items(f.e);
        if (f.target < 0) f.target = add();
        if (returned) moves.push_back({ret, f.target});
        returned = false;
        if (f.i < int64_t(items.size())) {
          const Expr item = items[size_t(f.i++)];
          const int32_t s = add();
          moves.push_back({f.start, s});
          stack.push_back({item, s, s, -1, 0, 0});
        } else {
          ret = f.target, returned = true;
          stack.pop_back();
        }
        continue;
      }
      if (kind != REPEAT) return false;
      const Expr item = ir.item(f.e);
      const int64_t min = ir.repeat_min(f.e), max = ir.repeat_max(f.e);
      if (returned) {
        returned = false;
        if (f.phase == 0 || max != kUnbounded) {
          f.cur = ret;
        } else {  // the loop's copy, back to the loop
          moves.push_back({ret, f.target});
          ret = f.target, returned = true;
          stack.pop_back();
          continue;
        }
      }
      if (f.phase == 0 && f.i < min) {
        ++f.i;
        const int32_t from = f.cur;
        stack.push_back({item, from, from, -1, 0, 0});
        continue;
      }
      if (f.phase == 0) {
        f.phase = 1;
        f.i = 0;
        f.target = add();  // the loop state, or the end of the optional copies
        moves.push_back({f.cur, f.target});
        if (max == kUnbounded) {
          const int32_t from = f.target;
          stack.push_back({item, from, from, -1, 0, 0});
          continue;
        }
      } else {
        moves.push_back({f.cur, f.target});
      }
      if (f.i < max - min) {
        ++f.i;
        const int32_t from = f.cur;
        stack.push_back({item, from, from, -1, 0, 0});
        continue;
      }
      ret = f.target, returned = true;
      stack.pop_back();
    }
    end = ret;
    run_at.assign(size_t(states) + 1, 0);
    move_at.assign(size_t(states) + 1, 0);
    for (const Run& r : runs) ++run_at[size_t(r.from) + 1];
    for (const auto& m : moves) ++move_at[size_t(m.first) + 1];
    for (size_t s = 0; s < size_t(states); ++s) run_at[s + 1] += run_at[s], move_at[s + 1] += move_at[s];
    sorted_runs.resize(runs.size());
    move_to.resize(moves.size());
    std::vector<int32_t> fill(run_at.begin(), run_at.end() - 1), mfill(move_at.begin(), move_at.end() - 1);
    for (const Run& r : runs) sorted_runs[size_t(fill[size_t(r.from)]++)] = r;
    for (const auto& m : moves) move_to[size_t(mfill[size_t(m.first)]++)] = m.second;
    runs.clear();
    moves.clear();
    return true;
  }

  // 1 or 0, or -1 past kMaxSearchWork.
  int matches(std::string_view text) {
    if (seen.size() != size_t(states) || round > UINT32_MAX - text.size() - 2) seen.assign(size_t(states), 0), round = 0;
    ++round;
    int64_t work = 0;
    cur.clear();
    const auto close = [&](std::vector<int32_t>* set) {  // the empty moves' closure, stamped `round`
      todo = *set;
      while (!todo.empty()) {
        const int32_t s = todo.back();
        todo.pop_back();
        for (int32_t k = move_at[size_t(s)]; k < move_at[size_t(s) + 1]; ++k) {
          const int32_t t = move_to[size_t(k)];
          if (seen[size_t(t)] != round) seen[size_t(t)] = round, set->push_back(t), todo.push_back(t);
        }
      }
    };
    cur.push_back(0);
    seen[0] = round;
    close(&cur);
    for (unsigned char b : text) {
      ++round;
      next.clear();
      for (int32_t s : cur) {
        for (int32_t k = run_at[size_t(s)]; k < run_at[size_t(s) + 1]; ++k) {
          const Run& r = sorted_runs[size_t(k)];
          if (r.lo <= b && b <= r.hi && seen[size_t(r.to)] != round) seen[size_t(r.to)] = round, next.push_back(r.to);
        }
      }
      close(&next);
      work += int64_t(cur.size() + next.size());
      if (work > kMaxSearchWork) return -1;
      if (next.empty()) return 0;
      cur.swap(next);
    }
    return seen[size_t(end)] == round ? 1 : 0;  // in the last set
  }
};

// ---- module functions ---------------------------------------------------------------------------

std::string_view format_regex(std::string_view name) {
  for (const auto& entry : formats().table)
    if (entry.first == name) return entry.second;
  return {};
}

const std::vector<std::string_view>& format_names() { return formats().names; }

bool is_refused_format(std::string_view name) { return name == "idn-email" || name == "idn-hostname"; }

bool is_checked_format(std::string_view name) { return name == "time" || name == "date-time" || name == "regex"; }

std::string_view base64_regex() { return formats().base64; }

// ---- Patterns -----------------------------------------------------------------------------------

Patterns::Patterns(IrBuilder& ir, std::string_view unicode_version) : ir_(ir), regex_(ir, unicode_version) {
  any_string_ = text_exprs(ir).any_string;
  const IrRange all{0, 0xFF};
  any_bytes_ = ir.repeat(ir.make_byte_set(IrSpan<IrRange>(&all, 1)), 0, kUnbounded);  // _ANY_BYTES
}

Patterns::~Patterns() = default;

Expr Patterns::decline(std::string why) {
  why_ = std::move(why);
  return kNoExpr;
}

// _search_expr: each top-level alternative with its own anchors, `anything` around an
// unanchored side.
Expr Patterns::search_expr(std::string_view pattern, Expr anything) {
  Cps cps;
  if (!decode_code_points(pattern, &cps)) return decline("pattern: not UTF-8");
  const Cps p = drop_lazy(cps);
  std::vector<Expr> alternatives;
  Cps part;
  for (const auto& [from, to] : split_top_level(p)) {
    part.assign(p.begin() + from, p.begin() + to);
    const bool start = !part.empty() && part[0] == '^', end = ends_with_anchor(part.data(), part.size());
    const Expr core = regex_.regex_expr(part);
    if (core == kNoExpr) return decline(regex_.why());
    std::vector<Expr> items;
    if (!start) items.push_back(anything);
    items.push_back(core);
    if (!end) items.push_back(anything);
    alternatives.push_back(ir_.seq(items));
  }
  const Expr e = ir_.alt(alternatives);
  return ir_.ok() ? e : decline("pattern: " + ir_.status().message);
}

Expr Patterns::pattern_expr(std::string_view pattern) {
  const std::string key(pattern);
  const auto known = patterns_.find(key);
  if (known != patterns_.end()) return known->second == kNoExpr ? decline(refused_[key]) : known->second;
  const Expr e = search_expr(pattern, any_string_);
  patterns_.emplace(key, e);
  if (e == kNoExpr) refused_[key] = why_;
  return e;
}

Expr Patterns::pattern_search_expr(std::string_view pattern) {
  if (pattern_expr(pattern) == kNoExpr) return kNoExpr;  // the Python raises its schema error first
  const std::string key(pattern);
  const auto known = searches_.find(key);
  if (known != searches_.end()) return known->second;
  const Expr e = search_expr(pattern, any_bytes_);
  searches_.emplace(key, e);
  return e;
}

int Patterns::pattern_search(std::string_view pattern, std::string_view text) {
  const Expr search = pattern_search_expr(pattern);
  if (search == kNoExpr) return -1;
  const std::string key(pattern);
  auto known = matchers_.find(key);
  if (known == matchers_.end()) {
    // _Nfa.build's calls: one per expression built, a repetition's item once per copy (and
    // once for its loop); past kNfaBudget the Python refuses the pattern
    std::unordered_map<Expr, int64_t> calls;
    std::vector<Expr> stack{search}, kids;
    while (!stack.empty()) {
      const Expr e = stack.back();
      if (calls.count(e)) {
        stack.pop_back();
        continue;
      }
      const int32_t kind = ir_.kind(e);
      if (kind != BYTES && kind != BYTESET && kind != SEQ && kind != ALT && kind != REPEAT)
        return decline("pattern: an expression the search automaton does not take"), -1;
      ir_.children(e, &kids);
      bool waiting = false;
      for (Expr k : kids)
        if (!calls.count(k)) stack.push_back(k), waiting = true;
      if (waiting) continue;
      int64_t n = 1;
      if (kind == REPEAT) {
        const int64_t c = calls[ir_.item(e)], min = ir_.repeat_min(e), max = ir_.repeat_max(e);
        const int64_t copies = max == kUnbounded ? min + 1 : max;  // at most 2^31
        n += copies > kNfaBudget ? kNfaBudget + 1 : std::min<int64_t>(copies * c, kNfaBudget + 1);
      } else {
        for (Expr k : kids) n = std::min<int64_t>(n + calls[k], kNfaBudget + 1);
      }
      calls.emplace(e, std::min<int64_t>(n, kNfaBudget + 1));
      stack.pop_back();
    }
    std::unique_ptr<Search> nfa;
    if (calls[search] <= kNfaBudget) {
      nfa.reset(new Search);
      if (!nfa->build(ir_, search)) nfa.reset();
    }
    known = matchers_.emplace(key, std::move(nfa)).first;
  }
  if (!known->second) return decline("pattern: the search automaton is too big"), -1;
  Cps cps;
  if (!decode_code_points(text, &cps)) return decline("pattern: a text that is not UTF-8"), -1;
  for (int32_t c : cps)
    if (c >= 0xD800 && c <= 0xDFFF) return decline("pattern: a text with a lone surrogate"), -1;
  if (text.size() > kMaxSearchText) return decline("pattern: a text too long to match"), -1;
  const int m = known->second->matches(text);
  if (m < 0) return decline("pattern: a match too costly to port"), -1;
  return m;
}

Expr Patterns::full_regex_expr(std::string_view pattern) {
  const std::string key(pattern);
  const auto known = full_.find(key);
  if (known != full_.end()) return known->second;
  const Expr e = regex_.regex_expr("^" + key + "$");
  if (e == kNoExpr) decline(regex_.why());
  full_.emplace(key, e);
  return e;
}

Expr Patterns::format_expr(std::string_view name) {
  if (is_refused_format(name)) return decline("format: '" + std::string(name) + "' is not enforced");
  if (name == "regex") return decline("format: 'regex' is enforced only as a string's one constraint");
  const std::string_view regex = format_regex(name);
  if (regex.empty()) return kNoFormat;
  return full_regex_expr(regex);
}

bool Patterns::checked_format(std::string_view name, Expr* expr, std::vector<std::pair<RuleId, Expr>>* rules) {
  rules->clear();
  IrBuilder& ir = ir_;
  const Expr quote = ir.literal("\"");
  const auto set = [&](std::initializer_list<std::pair<int32_t, int32_t>> pairs) {
    std::vector<IrRange> r;
    for (const auto& p : pairs) r.push_back({p.first, p.second});
    return ir.byte_set(r);
  };
  const auto chars = [&](std::string_view cs) {
    std::vector<IrRange> r;
    for (char c : cs) r.push_back({uint8_t(c), uint8_t(c)});
    return r;
  };
  if (name == "regex") {  // _regex_format
    const std::string_view syntax = "^$\\.*+?()[]{}|";
    const auto lit = [&](std::string_view s) { return ir.literal(s); };
    const Expr disj = ir.make_ref(kRegexRule);
    const Expr hex = set({{0x30, 0x39}, {0x41, 0x46}, {0x61, 0x66}});
    const Expr digits = ir.seq(set({{0x30, 0x39}}), ir.repeat(set({{0x30, 0x39}}), 0, kUnbounded));
    const Expr group_name =
        ir.seq(set({{0x24, 0x24}, {0x41, 0x5A}, {0x5F, 0x5F}, {0x61, 0x7A}}),
               ir.repeat(set({{0x24, 0x24}, {0x30, 0x39}, {0x41, 0x5A}, {0x5F, 0x5F}, {0x61, 0x7A}}), 0, kUnbounded));
    const Expr code_point =
        ir.seq(lit("{"), ir.repeat(lit("0"), 0, kUnbounded),
               ir.alt(ir.repeat(hex, 1, 5), ir.seq(lit("10"), ir.repeat(hex, 4, 4))), lit("}"));
    const Expr char_escape = ir.alt(ir.byte_set(chars(std::string("fnrtv0/") + std::string(syntax))),
                                    ir.seq(lit("c"), set({{0x41, 0x5A}, {0x61, 0x7A}})), ir.seq(lit("x"), hex, hex),
                                    ir.seq(lit("u"), ir.alt(ir.repeat(hex, 4, 4), code_point)));
    const Expr class_escape = ir.byte_set(chars("dDsSwW"));
    const Expr atom_escape = ir.alt(digits, ir.seq(lit("k<"), group_name, lit(">")), class_escape, char_escape);
    const Expr class_atom = ir.alt(ir.char_class(chars("\\]"), true),
                                   ir.seq(lit("\\"), ir.alt(class_escape, char_escape, set({{0x62, 0x62}, {0x2D, 0x2D}}))));
    // Checked as soon as they end, what no continuation could mend: a range, a bound, a name.
    const Expr mended = ir.make_check(kCheckRegexPrefix);
    const Expr char_class = ir.seq(lit("["), ir.repeat(lit("^"), 0, 1), ir.repeat(class_atom, 0, kUnbounded), lit("]"),
                                   mended);
    const Expr group = ir.seq(lit("("), ir.repeat(ir.alt(lit("?:"), ir.seq(lit("?<"), group_name, lit(">"), mended)), 0, 1),
                              disj, lit(")"));
    const Expr pattern_char = ir.char_class(chars(syntax), true);
    const Expr atom = ir.alt(pattern_char, lit("."), ir.seq(lit("\\"), atom_escape), char_class, group);
    const Expr bound = ir.seq(lit("{"), digits, ir.repeat(ir.seq(lit(","), ir.repeat(digits, 0, 1)), 0, 1), lit("}"),
                              mended);
    const Expr quantifier = ir.seq(ir.alt(set({{0x2A, 0x2B}, {0x3F, 0x3F}}), bound), ir.repeat(lit("?"), 0, 1));
    const Expr look = ir.seq(ir.alt(lit("(?="), lit("(?!"), lit("(?<="), lit("(?<!")), disj, lit(")"));
    const Expr assertion = ir.alt(set({{0x24, 0x24}, {0x5E, 0x5E}}), lit("\\b"), lit("\\B"), look);
    const Expr term = ir.alt(assertion, ir.seq(atom, ir.repeat(quantifier, 0, 1)));
    const Expr alternative = ir.repeat(term, 0, kUnbounded);
    const Expr rule = ir.seq(alternative, ir.repeat(ir.seq(lit("|"), alternative), 0, kUnbounded));
    rules->push_back({ir.rule(kRegexRule), json_escape(ir, rule)});
    // The region starts at the opening quote, where the check's decoding starts (checks.h).
    *expr = ir.seq(ir.make_region(ir.seq(quote, json_escape(ir, disj), ir.make_check(kCheckRegex))), quote);
    if (!ir.ok() || rules->back().second == kNoExpr) return decline("format: " + ir.status().message), false;
    return true;
  }
  if (name != "time" && name != "date-time") return false;
  // _leap_time: times at second 60, a check after the zone and after each digit of an offset
  const Expr check = ir.make_check(kCheckLeapSecond);
  const Expr digit = set({{0x30, 0x39}});
  const Expr hour = ir.alt(ir.seq(set({{0x30, 0x31}}), check, digit), ir.seq(ir.literal("2"), check, set({{0x30, 0x33}})));
  const Expr minute = ir.seq(set({{0x30, 0x35}}), check, digit);
  const Expr offset = ir.seq(set({{0x2B, 0x2B}, {0x2D, 0x2D}}), hour, check, ir.literal(":"), minute, check);
  const Expr zone = ir.alt(ir.seq(set({{0x5A, 0x5A}, {0x7A, 0x7A}}), check), offset);
  const Expr leap_body = full_regex_expr(formats().leap_time);
  const Expr time_format = format_expr("time");
  if (leap_body == kNoExpr || time_format == kNoExpr) return false;
  const Expr leap = ir.make_region(ir.seq(leap_body, zone));
  Expr time = ir.alt(time_format, leap);
  if (name == "date-time") {
    const Expr date = full_regex_expr(formats().date);
    if (date == kNoExpr) return false;
    time = ir.seq(date, set({{0x54, 0x54}, {0x74, 0x74}}), time);
  }
  *expr = ir.seq(quote, json_escape(ir, time), quote);
  if (!ir.ok()) return decline("format: " + ir.status().message), false;
  return true;
}

bool Patterns::regex_min_max_length(Expr top, int64_t* out_lo, int64_t* out_hi) {
  using Big = __int128;
  constexpr Big kTop = INT64_MAX;
  std::vector<Expr> stack{top}, kids;
  while (!stack.empty()) {
    const Expr e = stack.back();
    if (lengths_.count(e)) {
      stack.pop_back();
      continue;
    }
    const int32_t kind = ir_.kind(e);
    int64_t lo = 0, hi = kUnbounded;
    if (kind == BYTES) {
      lo = 0;
      for (unsigned char b : ir_.bytes(e)) lo += !(b >= 0x80 && b <= 0xBF);
      hi = lo;
    } else if (kind == BYTESET) {
      const IrSpan<int32_t> r = ir_.operands(e);
      bool lead = false;
      for (size_t k = 0; k + 1 < r.size(); k += 2) lead = lead || !(0x80 <= r[k] && r[k + 1] <= 0xBF);
      lo = hi = lead ? 1 : 0;
    } else if (kind == SEQ || kind == ALT || kind == REPEAT) {
      ir_.children(e, &kids);
      bool waiting = false;
      for (Expr k : kids)
        if (!lengths_.count(k)) stack.push_back(k), waiting = true;
      if (waiting) continue;
      if (kind == SEQ) {
        Big l = 0, h = 0;
        bool open = false;
        for (Expr k : kids) {
          const auto& [a, b] = lengths_[k];
          l += a;
          if (b == kUnbounded) open = true;
          if (!open) h += b;
          if (l > kTop || h > kTop) return decline("regex_min_max_length: a length past int64"), false;
        }
        lo = int64_t(l), hi = open ? kUnbounded : int64_t(h);
      } else if (kind == ALT) {
        if (kids.empty()) {
          lo = hi = 0;
        } else {
          lo = INT64_MAX, hi = 0;
          bool open = false;
          for (Expr k : kids) {
            const auto& [a, b] = lengths_[k];
            lo = std::min(lo, a);
            if (b == kUnbounded) open = true;
            else hi = std::max(hi, b);
          }
          if (open) hi = kUnbounded;
        }
      } else {
        const auto [a, b] = lengths_[kids[0]];
        const int64_t min = ir_.repeat_min(e), max = ir_.repeat_max(e);
        const Big l = Big(a) * min, h = max == kUnbounded || b == kUnbounded ? -1 : Big(b) * max;
        if (l > kTop || h > kTop) return decline("regex_min_max_length: a length past int64"), false;
        lo = int64_t(l), hi = h < 0 ? kUnbounded : int64_t(h);
      }
    }
    lengths_.emplace(e, std::make_pair(lo, hi));
    stack.pop_back();
  }
  *out_lo = lengths_[top].first;
  *out_hi = lengths_[top].second;
  return true;
}

}  // namespace tg::schema
