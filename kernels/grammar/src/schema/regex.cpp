#include "regex.h"

#include <algorithm>
#include <set>

#include "text.h"

namespace tg::schema {

namespace {

#include "regex_unicode.inc"

constexpr int32_t kEnd = -1;  // peek() past the pattern (Python's "")

const std::vector<IrRange> kDigit = {{0x30, 0x39}};
const std::vector<IrRange> kWord = {{0x30, 0x39}, {0x41, 0x5A}, {0x5F, 0x5F}, {0x61, 0x7A}};
// ECMA WhiteSpace (TAB VT FF SP NBSP ZWNBSP + Zs) and LineTerminator (LF CR LS PS).
const std::vector<IrRange> kSpace = {{0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680},
                                     {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
                                     {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const std::vector<IrRange> kLineTerminators = {{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}};

bool is_digit(int32_t c) { return c >= '0' && c <= '9'; }
bool is_hex(int32_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int32_t hex_value(int32_t c) { return is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10; }
bool is_surrogate(int32_t c) { return c >= 0xD800 && c <= 0xDFFF; }
bool is_ascii_alpha(int32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_syntax(int32_t c) {  // regex.py's _SYNTAX
  return c >= 0 && c < 0x80 && std::string_view("^$\\.*+?()[]{}|/").find(char(c)) != std::string_view::npos;
}

// ir.normalize_ranges: sorted, empty ones dropped, overlapping or adjacent ones merged.
std::vector<IrRange> normalized(std::vector<IrRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const IrRange& a, const IrRange& b) { return a.lo != b.lo ? a.lo < b.lo : a.hi < b.hi; });
  std::vector<IrRange> out;
  for (const IrRange& r : ranges) {
    if (r.lo > r.hi) continue;
    if (!out.empty() && int64_t(r.lo) <= int64_t(out.back().hi) + 1)
      out.back().hi = std::max(out.back().hi, r.hi);
    else
      out.push_back(r);
  }
  return out;
}

// _negated: the complement within all code points.
std::vector<IrRange> negated(const std::vector<IrRange>& ranges) {
  std::vector<IrRange> out;
  int32_t start = 0;
  for (const IrRange& r : normalized(ranges)) {
    if (r.lo > start) out.push_back({start, r.lo - 1});
    start = r.hi + 1;
  }
  if (start <= kMaxCodePoint) out.push_back({start, kMaxCodePoint});
  return out;
}

template <size_t N>
std::vector<IrRange> table_ranges(const uint32_t (&t)[N]) {
  std::vector<IrRange> out;
  for (size_t i = 0; i + 1 < N; i += 2) out.push_back({int32_t(t[i]), int32_t(t[i + 1])});
  return out;
}

bool in_table(const uint32_t* t, size_t n, int32_t c) {  // t: sorted lo, hi pairs
  size_t lo = 0, hi = n / 2;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (uint32_t(c) > t[2 * mid + 1])
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n / 2 && t[2 * lo] <= uint32_t(c);
}

// ---- Unicode properties ------------------------------------------------------------------------

// General_Category values: the short name first, then its aliases (regex.py's _GC_VALUES).
constexpr std::string_view kGcValues =
    "C Other; Cc Control cntrl; Cf Format; Cn Unassigned; Co Private_Use; Cs Surrogate;"
    "L Letter; LC Cased_Letter; Ll Lowercase_Letter; Lm Modifier_Letter; Lo Other_Letter;"
    "Lt Titlecase_Letter; Lu Uppercase_Letter; M Mark Combining_Mark; Mc Spacing_Mark; Me Enclosing_Mark;"
    "Mn Nonspacing_Mark; N Number; Nd Decimal_Number digit; Nl Letter_Number; No Other_Number;"
    "P Punctuation punct; Pc Connector_Punctuation; Pd Dash_Punctuation; Pe Close_Punctuation;"
    "Pf Final_Punctuation; Pi Initial_Punctuation; Po Other_Punctuation; Ps Open_Punctuation;"
    "S Symbol; Sc Currency_Symbol; Sk Modifier_Symbol; Sm Math_Symbol; So Other_Symbol;"
    "Z Separator; Zl Line_Separator; Zp Paragraph_Separator; Zs Space_Separator";

// Binary properties: (ECMA-262 name, short alias), keyed kBinaryKey + their index here.
constexpr std::string_view kBinary[][2] = {
    {"Any", "Any"},         {"ASCII", "ASCII"},         {"Assigned", "Assigned"},
    {"ASCII_Hex_Digit", "AHex"}, {"Lowercase", "Lower"}, {"Uppercase", "Upper"},
    {"XID_Start", "XIDS"},  {"XID_Continue", "XIDC"},   {"Noncharacter_Code_Point", "NChar"}};
constexpr int32_t kBinaryKey = 100;

// A General_Category value's key: its short name's index among the values' short names.
struct GcAlias {
  std::string_view alias;
  int32_t key;
};
struct GcTable {
  std::vector<std::string_view> shorts;  // by key
  std::vector<GcAlias> aliases;
};

const GcTable& gc_table() {
  static const GcTable table = [] {
    GcTable t;
    size_t at = 0;
    while (at < kGcValues.size()) {
      size_t end = kGcValues.find(';', at);
      if (end == std::string_view::npos) end = kGcValues.size();
      const std::string_view names = kGcValues.substr(at, end - at);
      at = end + 1;
      size_t k = 0;
      bool first = true;
      while (k < names.size()) {
        while (k < names.size() && names[k] == ' ') ++k;
        size_t e = k;
        while (e < names.size() && names[e] != ' ') ++e;
        if (e > k) {
          if (first) t.shorts.push_back(names.substr(k, e - k));
          t.aliases.push_back({names.substr(k, e - k), int32_t(t.shorts.size() - 1)});
          first = false;
        }
        k = e;
      }
    }
    return t;
  }();
  return table;
}

int32_t gc_key(std::string_view name) {
  for (const GcAlias& a : gc_table().aliases)
    if (a.alias == name) return a.key;
  return -1;
}

// _property_key: a key for `\p{name}`, or -1 for a name it does not support.
int32_t property_key(std::string_view name) {
  const size_t eq = name.find('=');
  if (eq != std::string_view::npos) {
    const std::string_view prop = name.substr(0, eq);
    if (prop != "General_Category" && prop != "gc") return -1;
    return gc_key(name.substr(eq + 1));
  }
  const int32_t gc = gc_key(name);
  if (gc >= 0) return gc;
  for (int32_t i = 0; i < int32_t(sizeof(kBinary) / sizeof(kBinary[0])); ++i)
    if (name == kBinary[i][0] || name == kBinary[i][1]) return kBinaryKey + i;
  return -1;
}

// _gc_ranges: a value's code points from the runs (LC: Ll Lt Lu; one letter: its group).
std::vector<IrRange> gc_ranges(std::string_view value) {
  const auto member = [&](std::string_view two) {
    if (value == "LC") return two == "Ll" || two == "Lt" || two == "Lu";
    if (value.size() == 1) return two[0] == value[0];
    return two == value;
  };
  std::vector<IrRange> out;
  const size_t n = sizeof(kGcRuns) / sizeof(kGcRuns[0]);
  for (size_t i = 0; i < n; ++i) {
    if (!member(kGcNames[kGcRuns[i] & 31])) continue;
    const int32_t lo = int32_t(kGcRuns[i] >> 5), hi = i + 1 < n ? int32_t(kGcRuns[i + 1] >> 5) - 1 : kMaxCodePoint;
    out.push_back({lo, hi});
  }
  return normalized(std::move(out));
}

// _key_ranges.
std::vector<IrRange> key_ranges(int32_t key) {
  if (key < kBinaryKey) return gc_ranges(gc_table().shorts[size_t(key)]);
  const std::string_view name = kBinary[key - kBinaryKey][1];
  if (name == "Any") return {{0, kMaxCodePoint}};
  if (name == "ASCII") return {{0, 0x7F}};
  if (name == "AHex") return {{0x30, 0x39}, {0x41, 0x46}, {0x61, 0x66}};
  if (name == "Assigned") return negated(gc_ranges("Cn"));
  if (name == "NChar") {  // fixed forever by Unicode's stability policy
    std::vector<IrRange> out{{0xFDD0, 0xFDEF}};
    for (int32_t p = 0; p < 17; ++p) out.push_back({p << 16 | 0xFFFE, p << 16 | 0xFFFF});
    return normalized(std::move(out));
  }
  if (name == "Lower") return table_ranges(kLower);
  if (name == "Upper") return table_ranges(kUpper);
  if (name == "XIDS") return table_ranges(kXidStart);
  return table_ranges(kXidContinue);
}

// str.isidentifier (XID_Start or '_', then XID_Continue) of a group name, '$' read as '_'.
bool is_identifier(const int32_t* s, size_t n) {
  if (n == 0) return false;
  for (size_t i = 0; i < n; ++i) {
    const int32_t c = s[i] == '$' ? '_' : s[i];
    const bool ok = i == 0 ? c == '_' || in_table(kXidStart, sizeof(kXidStart) / 4, c)
                           : in_table(kXidContinue, sizeof(kXidContinue) / 4, c);
    if (!ok) return false;
  }
  return true;
}

std::string utf8(const int32_t* s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t c = uint32_t(s[i]);
    if (c < 0x80) {
      out += char(c);
    } else if (c < 0x800) {
      out += char(0xC0 | c >> 6), out += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += char(0xE0 | c >> 12), out += char(0x80 | (c >> 6 & 0x3F)), out += char(0x80 | (c & 0x3F));
    } else {
      out += char(0xF0 | c >> 18), out += char(0x80 | (c >> 12 & 0x3F)), out += char(0x80 | (c >> 6 & 0x3F));
      out += char(0x80 | (c & 0x3F));
    }
  }
  return out;
}

}  // namespace

std::string_view regex_unicode_version() { return kTablesUnicodeVersion; }

std::string unicode_version_name(int32_t packed) {
  return std::to_string(packed / 10000) + "." + std::to_string(packed / 100 % 100) + "." + std::to_string(packed % 100);
}

bool unicode_isdigit(int32_t c) { return in_table(kIsDigit, sizeof(kIsDigit) / 4, c); }

bool decode_code_points(std::string_view s, std::vector<int32_t>* out) {
  out->clear();
  out->reserve(s.size());
  for (size_t i = 0, n = 0; i < s.size(); i += n) {
    int32_t c;
    if (!decode_utf8(s, i, true, &c, &n)) return false;
    out->push_back(c);
  }
  return true;
}

// ---- the parser (regex._Parser) ----------------------------------------------------------------

// _merge_literals, applied as items arrive (it only ever looks at the last one): adjacent byte
// literals join, and adjacent repetitions of one item when one is unbounded. A run of literals
// is kept as text until something else comes, so that `abc...` builds one node, not one per
// prefix.
class Merger {
 public:
  explicit Merger(IrBuilder& ir) : ir_(&ir) {}

  void push(Expr item) {
    IrBuilder& ir = *ir_;
    if (ir.kind(item) == BYTES) {
      if (pending_) {
        text_.append(ir.bytes(item));
        return;
      }
      if (!out_.empty() && join(out_.back(), item, 1, 1)) return;
      text_.assign(ir.bytes(item));
      pending_ = true;
      return;
    }
    if (pending_) {  // the last item is the literal text_: (text_, 1, 1) against item's counts
      if (ir.kind(item) == REPEAT && ir.repeat_max(item) == kUnbounded && ir.kind(ir.item(item)) == BYTES &&
          ir.bytes(ir.item(item)) == text_ && 1 + ir.repeat_min(item) <= kMaxCount) {
        pending_ = false;
        out_.push_back(ir.repeat(ir.item(item), 1 + ir.repeat_min(item), kUnbounded));
        return;
      }
      flush();
    } else if (!out_.empty()) {
      const bool counted = ir.kind(item) == REPEAT;
      if (join(out_.back(), counted ? ir.item(item) : item, counted ? ir.repeat_min(item) : 1,
               counted ? ir.repeat_max(item) : 1, counted))
        return;
    }
    out_.push_back(item);
  }

  // The items merged; `work` grows by the items and the bytes the literals took.
  const std::vector<Expr>& finish(int64_t* work) {
    flush();
    *work += bytes_ + int64_t(out_.size());
    bytes_ = 0;
    return out_;
  }

 private:
  // out_.back() = last, not a pending literal: joined with (item, min, max) when they repeat one
  // item and one of them is unbounded and a Repeat.
  bool join(Expr last, Expr item, int64_t min, int64_t max, bool item_repeat = false) {
    IrBuilder& ir = *ir_;
    const bool last_repeat = ir.kind(last) == REPEAT;
    const Expr x = last_repeat ? ir.item(last) : last;
    const int64_t lmin = last_repeat ? ir.repeat_min(last) : 1, lmax = last_repeat ? ir.repeat_max(last) : 1;
    if (x != item || (lmax != kUnbounded && max != kUnbounded) || !(item_repeat || last_repeat) ||
        lmin + min > kMaxCount)
      return false;
    out_.back() = ir.repeat(x, lmin + min, kUnbounded);
    return true;
  }

  void flush() {
    if (!pending_) return;
    bytes_ += int64_t(text_.size());
    out_.push_back(ir_->make_bytes(text_));
    pending_ = false;
  }

  IrBuilder* ir_;
  std::vector<Expr> out_;
  std::string text_;
  bool pending_ = false;
  int64_t bytes_ = 0;
};

class RegexParser {
 public:
  RegexParser(Regex& rx, const int32_t* p, size_t n) : rx_(rx), ir_(rx.ir_), p_(p), n_(n) {}

  Expr parse() {
    if (peek() == '^') ++i_;
    const Expr expr = disjunction();
    if (bad_) return kNoExpr;
    if (i_ < n_) return error("unmatched ')'");  // only a stray ')' stops the top level early
    return expr;
  }

 private:
  // A disjunction being parsed: the whole pattern or a group (_Group).
  struct Group {
    explicit Group(IrBuilder& ir) : items(ir) {}
    std::vector<Expr> alternatives;
    Merger items;
  };

  // An escape's or a class atom's value: a code point, class ranges, or an expression.
  struct Atom {
    enum Kind { code_point, ranges, expr } kind = code_point;
    int32_t cp = 0;
    std::vector<IrRange> set;
    Expr e = kNoExpr;
  };

  Expr error(const char* message) {
    if (!bad_) rx_.decline(std::string("regex: ") + message + " (at " + std::to_string(i_ + 1) + ")");
    bad_ = true;
    return kNoExpr;
  }

  int32_t peek(size_t ahead = 0) const { return i_ + ahead < n_ ? p_[i_ + ahead] : kEnd; }

  // Counts what the constructors take, past kMaxRegexWork a decline.
  Expr spent(Expr e, size_t n) {
    work_ += int64_t(n);
    if (work_ > kMaxRegexWork && !bad_) {
      rx_.decline("regex: the pattern builds too much to port");
      bad_ = true;
    }
    return e;
  }

  void end_alternative(Group& g) {
    const std::vector<Expr>& items = g.items.finish(&work_);
    g.alternatives.push_back(spent(ir_.seq(items), 0));
    g.items = Merger(ir_);
  }

  Expr group_expr(Group& g) {
    end_alternative(g);
    const Expr e = ir_.alt(g.alternatives);
    return spent(e, ir_.kind(e) == ALT ? ir_.items(e).size() : 1);
  }

  // The pattern up to its end or a stray ')', groups on a stack of their own (their nesting is
  // the user's).
  Expr disjunction() {
    std::vector<Group> stack;
    std::vector<size_t> starts{0};
    stack.emplace_back(ir_);
    while (!bad_) {
      Group& group = stack.back();
      const int32_t ch = peek();
      if (i_ >= n_ || (ch == ')' && stack.size() == 1)) {
        if (stack.size() > 1) {
          i_ = starts.back();
          return error("missing ')' for this group");
        }
        return group_expr(group);
      }
      if (ch == '|') {
        ++i_;
        end_alternative(group);
      } else if (ch == ')') {
        ++i_;
        const Expr e = group_expr(group);
        stack.pop_back();
        starts.pop_back();
        if (bad_) break;
        const Expr q = quantified(e);
        if (bad_) break;
        stack.back().items.push(q);
      } else if (ch == '(') {
        const size_t start = i_++;
        if (peek() == '?') group_prefix(start);
        stack.emplace_back(ir_);
        starts.push_back(start);
      } else if (ch == '$') {
        if (i_ != n_ - 1 || stack.size() > 1) return error("'$' is only supported at the very end of the pattern");
        ++i_;
      } else if (ch == '^') {
        return error("'^' is only supported at the very start of the pattern");
      } else {
        const Expr a = atom();
        if (bad_) break;
        const Expr q = quantified(a);
        if (bad_) break;
        group.items.push(q);
      }
    }
    return kNoExpr;
  }

  Expr quantified(Expr atom) {
    const size_t start = i_;
    int64_t lo, hi;
    if (!quantifier(&lo, &hi)) return atom;
    if (bad_) return kNoExpr;
    if (hi != kUnbounded && hi < lo) {
      i_ = start;
      return error("numbers out of order in {} quantifier");
    }
    if (peek() == '?') return error("lazy quantifiers are not supported");
    if (peek() == '+') return error("possessive quantifiers are not supported");
    // ir.nullable and ir.nonempty walk the atom's nesting in the Python
    if (rx_.depth(atom) > kMaxRegexDepth) {
      rx_.decline("regex: the pattern nests too deeply to port");
      bad_ = true;
      return kNoExpr;
    }
    return ir_.folded_repeat(atom, lo, hi);
  }

  // Consumes a quantifier if one starts here (true, bounds in *lo, *hi; bad_ when a bound is
  // past the limit).
  bool quantifier(int64_t* lo, int64_t* hi) {
    const int32_t ch = peek();
    if (ch == '*' || ch == '+' || ch == '?') {
      ++i_;
      *lo = ch == '+' ? 1 : 0;
      *hi = ch == '?' ? 1 : kUnbounded;
      return true;
    }
    if (ch == '{') {
      size_t end;
      if (braced(lo, hi, &end)) {
        i_ = end;
        return true;
      }
      return bad_;
    }
    return false;
  }

  // `{m}`, `{m,}`, `{m,n}` at i_ without consuming: true with the bounds and the end; false if
  // not one, or for a bound past the limit (bad_ then).
  bool braced(int64_t* lo, int64_t* hi, size_t* end) {
    const size_t j = i_ + 1;
    size_t k = j;
    while (k < n_ && is_digit(p_[k])) ++k;
    if (k == j) return false;
    if (!count(j, k, lo)) return false;  // the lower bound is read before the rest is looked at
    *hi = kUnbounded;
    if (k < n_ && p_[k] == '}') {
      *hi = *lo;
      *end = k + 1;
      return true;
    }
    if (k >= n_ || p_[k] != ',') return false;
    size_t m = k + 1;
    while (m < n_ && is_digit(p_[m])) ++m;
    if (m >= n_ || p_[m] != '}') return false;
    if (m > k + 1 && !count(k + 1, m, hi)) return false;
    *end = m + 1;
    return true;
  }

  // A quantifier's bound, at most kMaxCount (leading zeros allowed): false past it (bad_).
  bool count(size_t from, size_t to, int64_t* out) {
    while (from < to && p_[from] == '0') ++from;
    int64_t v = 0;
    for (size_t k = from; k < to; ++k) {
      v = v * 10 + (p_[k] - '0');
      if (v > kMaxCount) {
        error("quantifier bound exceeds the limit");
        return false;
      }
    }
    *out = v;
    return true;
  }

  Expr atom() {
    const int32_t ch = peek();
    const size_t start = i_;
    if (ch == '*' || ch == '+' || ch == '?') return error("nothing to repeat");
    if (ch == '{') {
      int64_t lo, hi;
      size_t end;
      if (braced(&lo, &hi, &end)) return error("nothing to repeat");
      if (bad_) return kNoExpr;
    }
    if (ch == '[') return char_class();
    if (ch == '.') {
      ++i_;
      return ir_.char_class(kLineTerminators, true);
    }
    if (ch == '\\') {
      const Atom a = escape(false);
      if (bad_) return kNoExpr;
      return a.kind == Atom::expr ? a.e : code_point(a.cp);
    }
    ++i_;
    if (is_surrogate(ch)) {
      i_ = start;
      return error("lone surrogate in pattern");
    }
    return code_point(ch);
  }

  Expr code_point(int32_t cp) { return ir_.literal(utf8(&cp, 1)); }

  // What follows '(?': only non-capturing and named groups.
  void group_prefix(size_t start) {
    const int32_t a = peek(1), b = peek(2);  // after the '?'
    if (a == ':') {
      i_ += 2;
      return;
    }
    if (a == '=' || a == '!' || (a == '<' && (b == '=' || b == '!'))) {
      i_ = start;
      error("lookaround assertions are not supported");
      return;
    }
    if (a == 'P' && b == '=') {
      i_ = start;
      error("backreferences are not supported");
      return;
    }
    if (a == '<' || (a == 'P' && b == '<')) {
      i_ += a == '<' ? 2 : 3;
      size_t end = i_;
      while (end < n_ && p_[end] != '>') ++end;
      const bool found = end < n_;
      const size_t len = found ? end - i_ : 0;
      if (!is_identifier(p_ + i_, len)) {
        i_ = start;
        error("invalid group name");
        return;
      }
      if (!names_.emplace(p_ + i_, p_ + i_ + len).second) {
        i_ = start;
        error("duplicate group name");
        return;
      }
      i_ = end + 1;
      return;
    }
    i_ = start;
    error("inline flags and other '(?' groups are not supported");
  }

  Expr char_class() {
    const size_t start = i_;
    const int64_t properties = properties_;
    ++i_;
    const bool negate = peek() == '^';
    i_ += negate;
    std::vector<IrRange> ranges;
    while (true) {
      if (i_ >= n_) {
        i_ = start;
        return error("unterminated character class");
      }
      if (peek() == ']') {
        ++i_;
        const Expr expr = spent(ir_.char_class(ranges, negate), ranges.size());
        return properties_ > properties ? rx_.factored(expr) : expr;
      }
      const size_t at = i_;
      const Atom lo = class_atom();
      if (bad_) return kNoExpr;
      if (peek() == '-' && peek(1) != ']' && peek(1) != kEnd) {
        ++i_;
        const Atom hi = class_atom();
        if (bad_) return kNoExpr;
        if (lo.kind != Atom::code_point || hi.kind != Atom::code_point) {
          i_ = at;
          return error("a class escape cannot bound a range");
        }
        if (hi.cp < lo.cp) {
          i_ = at;
          return error("range out of order in character class");
        }
        ranges.push_back({lo.cp, hi.cp});
      } else if (lo.kind == Atom::ranges) {
        ranges.insert(ranges.end(), lo.set.begin(), lo.set.end());
      } else {
        ranges.push_back({lo.cp, lo.cp});
      }
      if (int64_t(ranges.size()) > kMaxRegexWork) {
        spent(kNoExpr, ranges.size());
        return kNoExpr;
      }
    }
  }

  Atom class_atom() {
    const int32_t ch = peek();
    Atom a;
    if (ch == '\\') {
      if (peek(1) == 'b') {  // backspace inside a class
        i_ += 2;
        a.cp = 0x08;
        return a;
      }
      if (peek(1) == '-') {
        i_ += 2;
        a.cp = '-';
        return a;
      }
      return escape(true);
    }
    ++i_;
    if (is_surrogate(ch)) {
      --i_;
      error("lone surrogate in pattern");
    }
    a.cp = ch;
    return a;
  }

  // A backslash escape: a code point, class ranges (in a class), or an expression.
  Atom escape(bool in_class) {
    const size_t start = i_;
    const int32_t key = peek(1);
    i_ += 2;
    Atom a;
    if (key == kEnd) {
      i_ = start;
      error("pattern ends with a backslash");
      return a;
    }
    const int32_t lower = key >= 'A' && key <= 'Z' ? key | 0x20 : key;  // only ASCII lowers to d, s, w
    if (lower == 'd' || lower == 'w' || lower == 's') {
      const std::vector<IrRange>& set = lower == 'd' ? kDigit : lower == 'w' ? kWord : kSpace;
      std::vector<IrRange> ranges = key == lower ? set : negated(set);
      if (in_class) {
        a.kind = Atom::ranges;
        a.set = std::move(ranges);
      } else {
        a.kind = Atom::expr;
        a.e = ir_.char_class(ranges);
      }
      return a;
    }
    switch (key) {
      case 't': a.cp = 0x09; return a;
      case 'n': a.cp = 0x0A; return a;
      case 'v': a.cp = 0x0B; return a;
      case 'f': a.cp = 0x0C; return a;
      case 'r': a.cp = 0x0D; return a;
      default: break;
    }
    if (key == '0') {
      if (is_digit(peek())) {
        i_ = start;
        error("octal escapes are not supported");
      }
      a.cp = 0;
      return a;
    }
    if (is_digit(key) || (key == 'k' && peek() == '<')) {
      i_ = start;
      error("backreferences are not supported");
      return a;
    }
    if (key == 'b' || key == 'B') {
      i_ = start;
      error("word boundary assertions are not supported");
      return a;
    }
    if (key == 'p' || key == 'P') return property_escape(key, start, in_class);
    if (key == 'c') {
      const int32_t letter = peek();
      if (!is_ascii_alpha(letter)) {
        i_ = start;
        error("\\c must be followed by a letter");
        return a;
      }
      ++i_;
      a.cp = letter % 32;
      return a;
    }
    if (key == 'x') {
      a.cp = hex_digits(2, start);
      return a;
    }
    if (key == 'u') {
      a.cp = unicode_escape(start);
      return a;
    }
    // escaped punctuation stands for itself (ASCII, printable, not a letter or digit)
    if (is_syntax(key) || (key >= 0x20 && key < 0x7F && !is_digit(key) && !is_ascii_alpha(key))) {
      a.cp = key;
      return a;
    }
    i_ = start;
    error("unknown escape");
    return a;
  }

  Atom property_escape(int32_t key, size_t start, bool in_class) {
    Atom a;
    size_t end = n_;
    if (peek() == '{') {
      end = i_;
      while (end < n_ && p_[end] != '}') ++end;
    }
    if (end >= n_) {
      i_ = start;
      error("\\p must be followed by {name}");
      return a;
    }
    const std::string name = utf8(p_ + i_ + 1, end - i_ - 1);
    i_ = end + 1;
    ++properties_;
    const int32_t prop = property_key(name);
    if (prop < 0) {
      i_ = start;
      error("Unicode property not supported");
      return a;
    }
    if (!rx_.properties_) {
      rx_.decline("regex: property escapes under another Unicode version than the port's tables");
      bad_ = true;
      return a;
    }
    if (!in_class) {
      a.kind = Atom::expr;
      a.e = rx_.property_class(prop, key == 'P');
      return a;
    }
    a.kind = Atom::ranges;
    a.set = key == 'p' ? key_ranges(prop) : negated(key_ranges(prop));
    return a;
  }

  int32_t hex_digits(size_t n, size_t start) {
    if (i_ + n > n_ || !std::all_of(p_ + i_, p_ + i_ + n, is_hex)) {
      i_ = start;
      error("escape needs exactly n hex digits");
      return 0;
    }
    int32_t v = 0;
    for (size_t k = 0; k < n; ++k) v = v * 16 + hex_value(p_[i_ + k]);
    i_ += n;
    return v;
  }

  int32_t unicode_escape(size_t start) {
    int32_t cp;
    if (peek() == '{') {
      size_t end = i_;
      while (end < n_ && p_[end] != '}') ++end;
      const size_t from = i_ + 1, to = end < n_ ? end : from;
      size_t k = from;
      while (k < to && p_[k] == '0') ++k;
      const bool hex = std::all_of(p_ + from, p_ + to, is_hex);
      if (to == from || !hex || to - k > 6) {
        i_ = start;
        error("invalid \\u{...} escape");
        return 0;
      }
      cp = 0;
      for (; k < to; ++k) cp = cp * 16 + hex_value(p_[k]);
      if (cp > kMaxCodePoint) {
        i_ = start;
        error("invalid \\u{...} escape");
        return 0;
      }
      i_ = end + 1;
    } else {
      cp = hex_digits(4, start);
      if (bad_) return 0;
      // A \uD8xx\uDCxx pair is one code point, as in the u-flag.
      if (cp >= 0xD800 && cp <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
        const size_t save = i_;
        i_ += 2;
        int32_t low = -1;
        if (peek() != '{') {
          low = hex_digits(4, save);
          if (bad_) return 0;
        }
        if (low >= 0xDC00 && low <= 0xDFFF) return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        i_ = save;
      }
    }
    if (is_surrogate(cp)) {
      i_ = start;
      error("a lone surrogate has no UTF-8 encoding");
      return 0;
    }
    return cp;
  }

  Regex& rx_;
  IrBuilder& ir_;
  const int32_t* p_;
  size_t n_;
  size_t i_ = 0;
  bool bad_ = false;
  int64_t properties_ = 0;  // property escapes seen so far
  int64_t work_ = 0;
  std::set<std::vector<int32_t>> names_;  // group names so far
};

// ---- Regex -------------------------------------------------------------------------------------

Regex::Regex(IrBuilder& ir, std::string_view unicode_version)
    : ir_(ir), properties_(unicode_version == kTablesUnicodeVersion) {}

Expr Regex::decline(std::string why) {
  why_ = std::move(why);
  return kNoExpr;
}

Expr Regex::regex_expr(std::string_view pattern) {
  std::vector<int32_t> cps;
  if (!decode_code_points(pattern, &cps)) return decline("regex: the pattern is not UTF-8");
  return regex_expr(cps);
}

Expr Regex::regex_expr(const std::vector<int32_t>& cps) {
  why_.clear();
  if (!ir_.ok()) return decline("regex: the builder holds an error");
  RegexParser parser(*this, cps.data(), cps.size());
  const Expr e = parser.parse();
  if (e == kNoExpr) return kNoExpr;
  if (!ir_.ok()) return decline("regex: " + ir_.status().message);
  if (depth(e) > kMaxRegexDepth) return decline("regex: the pattern nests too deeply to port");
  return e;
}

int32_t Regex::depth(Expr top) {
  if (size_t(top) >= depth_.size()) depth_.resize(ir_.n_exprs(), 0);
  if (depth_[size_t(top)]) return depth_[size_t(top)];
  std::vector<Expr> stack{top}, kids;
  while (!stack.empty()) {
    const Expr e = stack.back();
    if (depth_[size_t(e)]) {
      stack.pop_back();
      continue;
    }
    ir_.children(e, &kids);
    int32_t deepest = 0;
    bool waiting = false;
    for (Expr k : kids) {
      if (size_t(k) >= depth_.size()) depth_.resize(ir_.n_exprs(), 0);
      if (!depth_[size_t(k)])
        stack.push_back(k), waiting = true;
      else
        deepest = std::max(deepest, depth_[size_t(k)]);
    }
    if (waiting) continue;
    depth_[size_t(e)] = deepest + 1;
    stack.pop_back();
  }
  return depth_[size_t(top)];
}

Expr Regex::property_class(int32_t key, bool negate) {
  const int32_t slot = key << 1 | int32_t(negate);
  const auto known = property_classes_.find(slot);
  if (known != property_classes_.end()) return known->second;
  const Expr e = factored(ir_.char_class(key_ranges(key), negate));
  property_classes_.emplace(slot, e);
  return e;
}

// _factored: a char_class expression (byte-set sequences) as a trie sharing leading byte sets.
// _trie recurses once per byte of a UTF-8 sequence: at most 4 levels.
Expr Regex::factored(Expr expr) {
  const auto known = factored_.find(expr);
  if (known != factored_.end()) return known->second;
  struct Trie {
    static Expr build(IrBuilder& ir, const std::vector<std::vector<Expr>>& seqs, size_t from) {
      std::vector<Expr> firsts;  // in the order first met (a dict's)
      std::vector<std::vector<std::vector<Expr>>> tails;
      for (const std::vector<Expr>& s : seqs) {
        const Expr first = s[from];
        size_t g = std::find(firsts.begin(), firsts.end(), first) - firsts.begin();
        if (g == firsts.size()) firsts.push_back(first), tails.emplace_back();
        tails[g].push_back(s);
      }
      std::vector<Expr> items;
      for (size_t g = 0; g < firsts.size(); ++g) {
        // sequences with one lead byte set have one length (char_class splits by encoded length)
        if (tails[g][0].size() > from + 1)
          items.push_back(ir.seq(firsts[g], build(ir, tails[g], from + 1)));
        else
          items.push_back(firsts[g]);
      }
      return ir.alt(items);
    }
  };
  std::vector<Expr> items;
  if (ir_.kind(expr) == ALT)
    items.assign(ir_.items(expr).begin(), ir_.items(expr).end());
  else
    items.push_back(expr);
  std::vector<std::vector<Expr>> seqs;
  for (Expr x : items) {
    if (ir_.kind(x) == SEQ)
      seqs.emplace_back(ir_.items(x).begin(), ir_.items(x).end());
    else
      seqs.push_back({x});
  }
  const Expr e = Trie::build(ir_, seqs, 0);
  factored_.emplace(expr, e);
  return e;
}

}  // namespace tg::schema
