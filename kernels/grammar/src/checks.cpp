#include "checks.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace tg {

namespace {

using Bytes = std::vector<uint8_t>;
using CodePoints = std::vector<uint32_t>;

// Longer text fails every check, so that sums of offsets and digit counts stay far from
// overflow (and below 10^18, which number forms rely on).
constexpr int64_t kMaxText = int64_t(1) << 48;
// Deeper nesting fails kUniqueItem: sorting members rewrites each object inside its parents.
constexpr size_t kMaxDepth = 1000;

inline bool is_ws(uint32_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
inline bool is_digit(uint32_t c) { return c >= '0' && c <= '9'; }
inline int hex_value(uint32_t c) {
  if (is_digit(c)) return int(c - '0');
  if (c >= 'a' && c <= 'f') return int(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return int(c - 'A' + 10);
  return -1;
}
// Bytes that end a scalar: what can follow a value, or begin another.
inline bool is_structural(uint8_t c) {
  return is_ws(c) || c == ',' || c == ':' || c == '[' || c == ']' || c == '{' || c == '}' || c == '"';
}
inline bool is_high_surrogate(uint32_t c) { return c >= 0xD800 && c < 0xDC00; }
inline bool is_low_surrogate(uint32_t c) { return c >= 0xDC00 && c < 0xE000; }
inline uint32_t pair(uint32_t hi, uint32_t lo) { return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00); }

// A read position in the region text.
struct Text {
  const uint8_t* p;
  int64_t n;
  int64_t i = 0;
  bool done() const { return i >= n; }
  bool at(uint8_t c) const { return i < n && p[i] == c; }
  bool at_digit() const { return i < n && is_digit(p[i]); }
  bool eat(uint8_t c) {
    if (!at(c)) return false;
    ++i;
    return true;
  }
  void skip_ws() {
    while (i < n && is_ws(p[i])) ++i;
  }
  void skip_digits() {
    while (at_digit()) ++i;
  }
};

// ---- strings ----------------------------------------------------------------------------

// The code point of the UTF-8 character at p[0, n) and its length; false unless it is valid
// (shortest form, no surrogates), since only such text can be told apart from escapes.
bool utf8_char(const uint8_t* p, int64_t n, uint32_t* cp, int* size) {
  const uint8_t b = p[0];
  if (b < 0x80) {
    *cp = b, *size = 1;
    return true;
  }
  int len;
  uint32_t min;
  if (b >= 0xC2 && b < 0xE0) len = 2, *cp = b & 0x1F, min = 0x80;
  else if (b >= 0xE0 && b < 0xF0) len = 3, *cp = b & 0x0F, min = 0x800;
  else if (b >= 0xF0 && b < 0xF5) len = 4, *cp = b & 0x07, min = 0x10000;
  else return false;
  if (n < len) return false;
  for (int k = 1; k < len; ++k) {
    if ((p[k] & 0xC0) != 0x80) return false;
    *cp = (*cp << 6) | (p[k] & 0x3F);
  }
  *size = len;
  return *cp >= min && *cp <= 0x10FFFF && !(*cp >= 0xD800 && *cp < 0xE000);
}

// Appends `cp` as UTF-8, lone surrogates included (they are code points of their own).
void put_utf8(uint32_t cp, Bytes* out) {
  if (cp < 0x80) {
    out->push_back(uint8_t(cp));
  } else if (cp < 0x800) {
    out->push_back(uint8_t(0xC0 | (cp >> 6)));
    out->push_back(uint8_t(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(uint8_t(0xE0 | (cp >> 12)));
    out->push_back(uint8_t(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(uint8_t(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(uint8_t(0xF0 | (cp >> 18)));
    out->push_back(uint8_t(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(uint8_t(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(uint8_t(0x80 | (cp & 0x3F)));
  }
}

bool read_hex4(Text& t, uint32_t* v) {
  if (t.n - t.i < 4) return false;
  *v = 0;
  for (int k = 0; k < 4; ++k) {
    const int h = hex_value(t.p[t.i + k]);
    if (h < 0) return false;
    *v = *v << 4 | uint32_t(h);
  }
  t.i += 4;
  return true;
}

// Reads the escape at t (a backslash): a surrogate pair of \u escapes is one code point, and
// either half alone stands for itself.
bool read_escape(Text& t, uint32_t* cp) {
  if (t.n - t.i < 2) return false;
  const uint8_t e = t.p[t.i + 1];
  t.i += 2;
  switch (e) {
    case '"': case '\\': case '/': *cp = e; return true;
    case 'b': *cp = '\b'; return true;
    case 'f': *cp = '\f'; return true;
    case 'n': *cp = '\n'; return true;
    case 'r': *cp = '\r'; return true;
    case 't': *cp = '\t'; return true;
    case 'u': break;
    default: return false;
  }
  if (!read_hex4(t, cp)) return false;
  if (is_high_surrogate(*cp) && t.n - t.i >= 2 && t.p[t.i] == '\\' && t.p[t.i + 1] == 'u') {
    Text low = t;
    low.i += 2;
    uint32_t lo;
    if (read_hex4(low, &lo) && is_low_surrogate(lo)) *cp = pair(*cp, lo), t.i = low.i;
  }
  return true;
}

enum class Chars { quote, end, bad };

// Decodes string characters from t up to an unescaped quote (left unread) or the end of the
// text, passing each code point to `put`.
template <class Put>
Chars read_chars(Text& t, Put&& put) {
  while (!t.done()) {
    const uint8_t c = t.p[t.i];
    uint32_t cp;
    if (c == '"') return Chars::quote;
    if (c == '\\') {
      if (!read_escape(t, &cp)) return Chars::bad;
    } else {
      int size;
      if (c < 0x20 || !utf8_char(t.p + t.i, t.n - t.i, &cp, &size)) return Chars::bad;
      t.i += size;
    }
    put(cp);
  }
  return Chars::end;
}

// Reads the string at t (its opening quote) and appends its code points as UTF-8.
bool read_string(Text& t, Bytes* out) {
  if (!t.eat('"')) return false;
  if (read_chars(t, [out](uint32_t cp) { put_utf8(cp, out); }) != Chars::quote) return false;
  ++t.i;
  return true;
}

// Moves past the string at t without decoding it.
bool skip_string(Text& t) {
  for (++t.i; t.i < t.n; ++t.i) {
    if (t.p[t.i] == '\\') ++t.i;
    else if (t.p[t.i] == '"') break;
  }
  if (t.done()) return false;
  ++t.i;
  return true;
}

// Moves past one JSON value without a close look, for the items and members that need none.
bool skip_value(Text& t) {
  int64_t depth = 0;
  do {
    if (t.done()) return false;
    const uint8_t c = t.p[t.i];
    if (c == '"') {
      if (!skip_string(t)) return false;
    } else if (c == '[' || c == '{') {
      ++depth, ++t.i;
    } else if (c == ']' || c == '}') {
      if (depth == 0) return false;
      --depth, ++t.i;
    } else if (depth > 0) {
      ++t.i;
    } else {  // a scalar: up to the next structural byte
      const int64_t begin = t.i;
      while (!t.done() && !is_structural(t.p[t.i])) ++t.i;
      return t.i > begin;
    }
  } while (depth > 0);
  return true;
}

// ---- numbers ------------------------------------------------------------------------------

// A JSON number -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, by the places of its parts. Its
// digits (integer then fraction) are numbered from 0; the value is
// digits[first..last] * 10^(written exponent + shift()).
struct Number {
  const uint8_t* p = nullptr;
  bool negative = false;
  int64_t int_begin = 0, n_int = 0, frac_begin = 0, n_frac = 0;
  bool exp_negative = false;
  int64_t exp_begin = 0, exp_end = 0;  // exponent digits, leading zeros dropped
  int64_t first = -1, last = -1;       // the significant digits; -1: the number is zero

  uint8_t digit(int64_t k) const { return k < n_int ? p[int_begin + k] : p[frac_begin + k - n_int]; }
  bool zero() const { return last < 0; }
  int64_t shift() const { return n_int - 1 - last; }
};

bool read_number(Text& t, Number* num) {
  num->p = t.p;
  num->negative = t.eat('-');
  num->int_begin = t.i;
  if (!t.at_digit()) return false;
  if (!t.eat('0')) t.skip_digits();
  num->n_int = t.i - num->int_begin;
  if (t.eat('.')) {
    num->frac_begin = t.i;
    if (!t.at_digit()) return false;
    t.skip_digits();
    num->n_frac = t.i - num->frac_begin;
  }
  if (t.eat('e') || t.eat('E')) {
    num->exp_negative = t.eat('-');
    if (!num->exp_negative) t.eat('+');
    if (!t.at_digit()) return false;
    while (t.at('0')) ++t.i;
    num->exp_begin = t.i;
    t.skip_digits();
    num->exp_end = t.i;
  }
  for (int64_t k = 0; k < num->n_int + num->n_frac; ++k) {
    if (num->digit(k) == '0') continue;
    if (num->first < 0) num->first = k;
    num->last = k;
  }
  return true;
}

// The written exponent when its magnitude is at most 10^15 (the limit kMultipleOf accepts).
bool small_exponent(const Number& num, int64_t* e) {
  if (num.exp_end - num.exp_begin > 16) return false;
  *e = 0;
  for (int64_t k = num.exp_begin; k < num.exp_end; ++k) *e = *e * 10 + (num.p[k] - '0');
  if (*e > 1000000000000000) return false;
  if (num.exp_negative) *e = -*e;
  return true;
}

// Adds `s` to the decimal magnitude (*out)[from, end), which has more digits than |s| does, so
// the result stays positive.
void add_to_digits(Bytes* out, size_t from, int64_t s) {
  uint64_t mag = s < 0 ? 0 - uint64_t(s) : uint64_t(s);
  int carry = 0;
  for (size_t k = out->size(); k-- > from && (mag || carry);) {
    const int x = int(mag % 10) + carry;
    mag /= 10;
    int d = (*out)[k] - '0' + (s < 0 ? -x : x);
    carry = d < 0 || d > 9;
    if (carry) d += d < 0 ? 10 : -10;
    (*out)[k] = uint8_t('0' + d);
  }
  if (carry) out->insert(out->begin() + from, '1');
  size_t zeros = 0;
  while (from + zeros + 1 < out->size() && (*out)[from + zeros] == '0') ++zeros;
  out->erase(out->begin() + from, out->begin() + from + zeros);
}

void put_decimal(int64_t v, Bytes* out) {
  if (v < 0) out->push_back('-');
  uint64_t mag = v < 0 ? 0 - uint64_t(v) : uint64_t(v);
  uint8_t buf[20];
  int len = 0;
  do {
    buf[len++] = uint8_t('0' + mag % 10);
    mag /= 10;
  } while (mag);
  while (len) out->push_back(buf[--len]);
}

// ---- kUniqueItem: canonical forms ---------------------------------------------------------

// Writes canonical forms of JSON values: two values are equal as JSON Schema says exactly when
// their forms are the same bytes. Each form delimits itself:
//   null n, true t, false f;
//   number N0 for zero, else N, a sign + or -, the significant digits, e, the exponent of the
//     last of them in decimal, ;
//   string s, its code points as UTF-8 (lone surrogates too), 0xFF (never in UTF-8);
//   array [ item forms ];
//   object { members sorted by key form, only the last of a repeated key: key form, value form }.
class Canon {
 public:
  // Writes the form of the value at t (none of its nesting deeper than kMaxDepth) to *out.
  bool value(Text& t, Bytes* out);

 private:
  struct Open {
    bool object;
    size_t at;       // where its form begins in out
    size_t members;  // where its members begin in members_
  };
  struct Member {
    size_t at, key_end, end;  // its key form is out[at, key_end), its value form then up to end
  };
  bool scalar(Text& t, Bytes* out);
  bool number(Text& t, Bytes* out);
  bool key(Text& t, Bytes* out);
  void close(Bytes* out);

  std::vector<Open> open_;
  std::vector<Member> members_;
  Bytes scratch_;
};

bool Canon::value(Text& t, Bytes* out) {
  out->clear();
  open_.clear();
  members_.clear();
  for (;;) {
    // A value starts at t.
    t.skip_ws();
    bool ended = true;  // false: a container just opened, and it is empty
    if (t.at('[') || t.at('{')) {
      if (open_.size() >= kMaxDepth) return false;
      const bool object = t.at('{');
      open_.push_back({object, out->size(), members_.size()});
      out->push_back(t.p[t.i++]);
      t.skip_ws();
      if (!t.at(object ? '}' : ']')) {
        if (object && !key(t, out)) return false;
        continue;
      }
      ended = false;
    } else if (!scalar(t, out)) {
      return false;
    }
    // Close the containers that end here.
    for (;; ended = true) {
      if (open_.empty()) return true;
      const bool object = open_.back().object;
      t.skip_ws();
      if (object && ended) members_.back().end = out->size();
      if (t.eat(',')) {
        if (object && !key(t, out)) return false;
        break;
      }
      if (!t.eat(object ? '}' : ']')) return false;
      close(out);
    }
  }
}

bool Canon::scalar(Text& t, Bytes* out) {
  if (t.at('"')) {
    out->push_back('s');
    if (!read_string(t, out)) return false;
    out->push_back(0xFF);
    return true;
  }
  if (t.at('-') || t.at_digit()) return number(t, out);
  static const struct {
    const char* text;
    int64_t len;
  } kWords[] = {{"null", 4}, {"true", 4}, {"false", 5}};
  for (const auto& w : kWords) {
    if (t.n - t.i >= w.len && std::equal(w.text, w.text + w.len, t.p + t.i)) {
      out->push_back(uint8_t(w.text[0]));
      t.i += w.len;
      return true;
    }
  }
  return false;
}

bool Canon::number(Text& t, Bytes* out) {
  Number num;
  if (!read_number(t, &num)) return false;
  out->push_back('N');
  if (num.zero()) {
    out->push_back('0');
    return true;
  }
  out->push_back(num.negative ? '-' : '+');
  for (int64_t k = num.first; k <= num.last; ++k) out->push_back(num.digit(k));
  out->push_back('e');
  // The exponent has any number of digits: add the shift in decimal when it may not fit.
  const int64_t n_exp = num.exp_end - num.exp_begin;
  if (n_exp <= 18) {
    int64_t e = 0;
    for (int64_t k = num.exp_begin; k < num.exp_end; ++k) e = e * 10 + (t.p[k] - '0');
    put_decimal((num.exp_negative ? -e : e) + num.shift(), out);
  } else {
    if (num.exp_negative) out->push_back('-');
    const size_t from = out->size();
    out->insert(out->end(), t.p + num.exp_begin, t.p + num.exp_end);
    add_to_digits(out, from, num.exp_negative ? -num.shift() : num.shift());
  }
  out->push_back(';');
  return true;
}

// Reads a member's key and its colon; the member's record opens.
bool Canon::key(Text& t, Bytes* out) {
  t.skip_ws();
  members_.push_back({out->size(), 0, 0});
  out->push_back('s');
  if (!read_string(t, out)) return false;
  out->push_back(0xFF);
  members_.back().key_end = out->size();
  t.skip_ws();
  return t.eat(':');
}

// Writes the closer of the innermost container; an object's members are sorted first.
void Canon::close(Bytes* out) {
  const Open o = open_.back();
  open_.pop_back();
  if (!o.object) return out->push_back(']');
  const uint8_t* base = out->data();
  auto key_less = [base](const Member& a, const Member& b) {
    return std::lexicographical_compare(base + a.at, base + a.key_end, base + b.at, base + b.key_end);
  };
  const size_t first = o.members, n = members_.size();
  bool canonical = true;
  for (size_t m = first; m + 1 < n && canonical; ++m) canonical = key_less(members_[m], members_[m + 1]);
  if (!canonical) {
    // Stable, so that of equal keys the last written comes last, and only it is kept.
    std::stable_sort(members_.begin() + first, members_.end(), key_less);
    scratch_.clear();
    for (size_t m = first; m < n; ++m) {
      const Member& a = members_[m];
      if (m + 1 == n || key_less(a, members_[m + 1])) scratch_.insert(scratch_.end(), base + a.at, base + a.end);
    }
    out->resize(o.at + 1);
    out->insert(out->end(), scratch_.begin(), scratch_.end());
  }
  members_.resize(first);
  out->push_back('}');
}

struct Span {
  int64_t begin, end;
};

// The form of the value exactly spanning `s`.
bool canon_span(Canon& canon, const uint8_t* text, Span s, Bytes* out) {
  Text t{text, s.end, s.begin};
  return canon.value(t, out) && t.i == s.end;
}

// Values of different kinds never equal; numbers are one kind however they begin.
uint8_t kind_of(uint8_t first) { return first == '-' || is_digit(first) ? uint8_t('0') : first; }

bool unique_item(const uint8_t* text, int64_t len) {
  Text t{text, len};
  if (!t.eat('[')) return false;
  std::vector<Span> items;
  for (;;) {
    t.skip_ws();
    const int64_t begin = t.i;
    if (!skip_value(t)) return false;
    items.push_back({begin, t.i});
    if (t.done()) break;
    t.skip_ws();
    if (!t.eat(',')) return false;
  }
  Canon canon;
  Bytes last, other;
  const Span z = items.back();
  if (!canon_span(canon, text, z, &last)) return false;
  for (size_t k = 0; k + 1 < items.size(); ++k) {
    const Span s = items[k];
    if (kind_of(text[s.begin]) != kind_of(text[z.begin])) continue;
    // The same text is the same value: the common case costs no form.
    if (s.end - s.begin == z.end - z.begin && std::equal(text + s.begin, text + s.end, text + z.begin))
      return false;
    if (!canon_span(canon, text, s, &other) || other == last) return false;
  }
  return true;
}

// ---- kDistinctKey -------------------------------------------------------------------------

bool distinct_key(const uint8_t* text, int64_t len, const std::vector<Bytes>& listed) {
  Text t{text, len};
  if (!t.eat('{')) return false;
  Bytes keys, key;  // keys: the earlier keys decoded, one after another
  std::vector<size_t> ends;
  for (;;) {
    t.skip_ws();
    key.clear();
    if (!read_string(t, &key)) return false;
    if (t.done()) break;
    t.skip_ws();
    if (!t.eat(':')) return false;
    t.skip_ws();
    if (!skip_value(t)) return false;
    t.skip_ws();
    if (!t.eat(',')) return false;
    keys.insert(keys.end(), key.begin(), key.end());
    ends.push_back(keys.size());
  }
  size_t begin = 0;
  for (size_t end : ends) {
    if (end - begin == key.size() && std::equal(key.begin(), key.end(), keys.begin() + begin)) return false;
    begin = end;
  }
  return !std::binary_search(listed.begin(), listed.end(), key);
}

// ---- kLeapSecond --------------------------------------------------------------------------

bool two_digits(const uint8_t* p, int* v) {
  if (!is_digit(p[0]) || !is_digit(p[1])) return false;
  *v = (p[0] - '0') * 10 + (p[1] - '0');
  return true;
}

// Whether offset `oh`:`om` agrees with the offset digits written so far.
bool offset_fits(int oh, int om, const int* digits, int n_digits) {
  const int want[4] = {oh / 10, oh % 10, om / 10, om % 10};
  for (int k = 0; k < n_digits; ++k)
    if (digits[k] != want[k]) return false;
  return true;
}

// The minute of the day that `minutes` past local midnight falls on, wrapping days.
int utc_minute(int minutes) { return ((minutes % 1440) + 1440) % 1440; }

bool leap_second(const uint8_t* p, int64_t len) {
  int hh, mm, ss;
  if (len < 8 || p[2] != ':' || p[5] != ':' || !two_digits(p, &hh) || !two_digits(p + 3, &mm) ||
      !two_digits(p + 6, &ss))
    return false;
  Text t{p, len, 8};
  if (t.eat('.')) t.skip_digits();
  // The offset so far: none, Z, or a sign and a prefix of HH:MM.
  int sign = 0, digits[4], n_digits = 0;
  bool zulu = false;
  if (t.eat('Z') || t.eat('z')) {
    zulu = true;
  } else if (t.at('+') || t.at('-')) {
    sign = t.p[t.i++] == '+' ? 1 : -1;
    for (int k = 0; !t.done(); ++k, ++t.i) {  // k: the position in HH:MM
      if (k == 2) {
        if (!t.at(':')) return false;
      } else {
        if (k > 4 || !t.at_digit()) return false;
        digits[n_digits++] = t.p[t.i] - '0';
      }
    }
  }
  if (!t.done()) return false;
  if (ss != 60) return true;
  const int local = hh * 60 + mm;
  if (zulu) return local == 23 * 60 + 59;
  if (sign == 0) return true;  // the offset that makes it 23:59 UTC may still follow
  for (int oh = 0; oh < 24; ++oh)
    for (int om = 0; om < 60; ++om)
      if (offset_fits(oh, om, digits, n_digits) && utc_minute(local - sign * (oh * 60 + om)) == 23 * 60 + 59)
        return true;
  return false;
}

// ---- kRegexRefs ---------------------------------------------------------------------------

// What an ECMAScript pattern's grammar (the front-end's) cannot see: group names defined once,
// back-references that resolve, {n,m} with n <= m, class ranges in order and without class
// escapes, and no \0 before a digit. The grammar guarantees the rest of the syntax.
class RegexScan {
 public:
  explicit RegexScan(const CodePoints& p) : p_(p) {}
  bool run();
  bool names_unique();
  bool refs_resolve();

 private:
  static constexpr int64_t kClassEscape = -1;  // \d and the like: a set, not a character
  uint32_t at(size_t k) const { return k < p_.size() ? p_[k] : 0; }
  bool escape();
  bool char_class();
  bool class_atom(int64_t* value);
  bool escape_value(int64_t* value);
  bool bound();
  bool group();
  bool read_name(CodePoints* name);
  bool unicode_escape(uint32_t* v);
  void skip_past(uint32_t close);
  bool hex_run(size_t count, uint32_t* v);

  const CodePoints& p_;
  size_t i_ = 0;
  int64_t groups_ = 0, max_ref_ = 0;  // max_ref_: the highest \N
  std::vector<CodePoints> names_, refs_;
};

bool RegexScan::run() {
  while (i_ < p_.size()) {
    const uint32_t c = p_[i_];
    bool ok = true;
    if (c == '\\') ok = escape();
    else if (c == '[') ok = char_class();
    else if (c == '(') ok = group();
    else if (c == '{') ok = bound();
    else ++i_;
    if (!ok) return false;
  }
  return true;
}

// At `[`: every range's ends are characters, the first at most the second.
bool RegexScan::char_class() {
  ++i_;
  if (at(i_) == '^') ++i_;
  while (i_ < p_.size() && p_[i_] != ']') {
    int64_t lo, hi;
    if (!class_atom(&lo)) return false;
    if (at(i_) != '-' || i_ + 1 >= p_.size() || at(i_ + 1) == ']') continue;
    ++i_;
    if (!class_atom(&hi)) return false;
    if (lo == kClassEscape || hi == kClassEscape || lo > hi) return false;
  }
  if (i_ >= p_.size()) return false;
  ++i_;
  return true;
}

bool RegexScan::class_atom(int64_t* value) {
  if (p_[i_] != '\\') {
    *value = p_[i_++];
    return true;
  }
  return escape_value(value);
}

// At a backslash in a class: the character the escape stands for, or kClassEscape.
bool RegexScan::escape_value(int64_t* value) {
  const uint32_t e = at(i_ + 1);
  i_ += 2;
  uint32_t v = e;
  switch (e) {
    case 'd': case 'D': case 's': case 'S': case 'w': case 'W': *value = kClassEscape; return true;
    case 'p': case 'P': skip_past('}'); *value = kClassEscape; return true;
    case 'b': v = 8; break;
    case 'f': v = 12; break;
    case 'n': v = 10; break;
    case 'r': v = 13; break;
    case 't': v = 9; break;
    case 'v': v = 11; break;
    case 'c': v = at(i_) % 32; ++i_; break;
    case '0': if (is_digit(at(i_))) return false; v = 0; break;
    case 'x': if (!hex_run(2, &v)) return false; break;
    case 'u': if (!unicode_escape(&v)) return false; break;
    default: break;  // an identity escape
  }
  if (i_ > p_.size()) return false;
  *value = v;
  return true;
}

// At `{` (the grammar lets it open only a quantifier): {n}, {n,} or {n,m} with n <= m.
bool RegexScan::bound() {
  ++i_;
  const auto number = [&](size_t* begin, size_t* end) {
    while (at(i_) == '0' && is_digit(at(i_ + 1))) ++i_;  // leading zeros do not count
    *begin = i_;
    while (is_digit(at(i_))) ++i_;
    *end = i_;
  };
  size_t a, b, c, d;
  number(&a, &b);
  if (at(i_) != ',') return true;
  ++i_;
  if (!is_digit(at(i_))) return true;
  number(&c, &d);
  if (b - a != d - c) return b - a < d - c;
  return !std::lexicographical_compare(p_.begin() + c, p_.begin() + d, p_.begin() + a, p_.begin() + b);
}

// At `(`: counts a capturing group, and reads a named group's name.
bool RegexScan::group() {
  ++i_;
  if (at(i_) != '?') {
    ++groups_;
    return true;
  }
  // (?<name> captures; (?: (?= (?! (?<= (?<! do not.
  if (at(i_ + 1) != '<' || i_ + 2 >= p_.size() || at(i_ + 2) == '=' || at(i_ + 2) == '!') {
    ++i_;
    return true;
  }
  i_ += 2;
  ++groups_;
  names_.emplace_back();
  return read_name(&names_.back());
}

// At a backslash outside a class: moves past the whole escape, recording back-references.
bool RegexScan::escape() {
  const uint32_t e = at(i_ + 1);
  if (e == 'k' && at(i_ + 2) == '<') {
    i_ += 3;
    refs_.emplace_back();
    return read_name(&refs_.back());
  }
  if (e >= '1' && e <= '9') {
    i_ += 2;
    int64_t n = e - '0';
    for (; is_digit(at(i_)); ++i_) n = std::min<int64_t>(n * 10 + (at(i_) - '0'), int64_t(1) << 40);
    max_ref_ = std::max(max_ref_, n);
    return true;
  }
  int64_t ignored;
  return escape_value(&ignored);
}

// After `\u`: {hex} up to 10FFFF, or four hex digits (a surrogate pair of them is one code point).
bool RegexScan::unicode_escape(uint32_t* v) {
  if (at(i_) == '{') {
    ++i_;
    for (*v = 0; at(i_) != '}'; ++i_) {
      const int h = hex_value(at(i_));
      if (h < 0 || *v > 0x10FFFF) return false;
      *v = *v << 4 | uint32_t(h);
    }
    ++i_;
    return *v <= 0x10FFFF;
  }
  if (!hex_run(4, v)) return false;
  if (is_high_surrogate(*v) && at(i_) == '\\' && at(i_ + 1) == 'u') {
    const size_t save = i_;
    uint32_t lo;
    i_ += 2;
    if (hex_run(4, &lo) && is_low_surrogate(lo)) *v = pair(*v, lo);
    else i_ = save;
  }
  return true;
}

// Reads a group name up to its `>`, decoding \uXXXX (a surrogate pair as one) and \u{...}.
bool RegexScan::read_name(CodePoints* name) {
  for (;;) {
    if (i_ >= p_.size()) return false;
    uint32_t c = p_[i_++];
    if (c == '>') return true;
    if (c == '\\') {
      if (at(i_) != 'u') return false;
      ++i_;
      if (!unicode_escape(&c)) return false;
    }
    name->push_back(c);
  }
}

// Reads `count` hex digits.
bool RegexScan::hex_run(size_t count, uint32_t* v) {
  *v = 0;
  for (size_t k = 0; k < count; ++k, ++i_) {
    const int h = hex_value(at(i_));
    if (h < 0) return false;
    *v = *v << 4 | uint32_t(h);
  }
  return true;
}

void RegexScan::skip_past(uint32_t close) {
  while (i_ < p_.size() && p_[i_] != close) ++i_;
  if (i_ < p_.size()) ++i_;
}

bool RegexScan::names_unique() {
  std::sort(names_.begin(), names_.end());
  return std::adjacent_find(names_.begin(), names_.end()) == names_.end();
}

bool RegexScan::refs_resolve() {
  if (max_ref_ > groups_ || !names_unique()) return false;
  for (const CodePoints& r : refs_)
    if (!std::binary_search(names_.begin(), names_.end(), r)) return false;
  return true;
}

// `whole`: the pattern is complete, every reference must resolve; else it is a prefix, and
// only what no continuation can mend fails (a repeated name, a range or bound out of order).
bool regex_valid(const uint8_t* text, int64_t len, bool whole) {
  Text t{text, len};
  if (!t.eat('"')) return false;
  CodePoints pattern;
  if (read_chars(t, [&pattern](uint32_t cp) { pattern.push_back(cp); }) != Chars::end) return false;
  RegexScan scan(pattern);
  return scan.run() && (whole ? scan.refs_resolve() : scan.names_unique());
}

// ---- kBase64Json --------------------------------------------------------------------------

// Decodes padded base64; false on any other character, a bad length or misplaced padding.
bool base64_decode(const CodePoints& in, Bytes* out) {
  if (in.size() % 4) return false;
  const auto value = [](uint32_t c) -> int {
    if (c >= 'A' && c <= 'Z') return int(c - 'A');
    if (c >= 'a' && c <= 'z') return int(c - 'a' + 26);
    if (is_digit(c)) return int(c - '0' + 52);
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  for (size_t k = 0; k < in.size(); k += 4) {
    const bool last = k + 4 == in.size();
    const int pad = (in[k + 3] == '=') + (in[k + 2] == '=' && in[k + 3] == '=');
    if (pad && !last) return false;
    uint32_t block = 0;
    for (int j = 0; j < 4 - pad; ++j) {
      const int v = value(in[k + j]);
      if (v < 0) return false;
      block = block << 6 | uint32_t(v);
    }
    block <<= 6 * pad;
    for (int j = 0; j < 3 - pad; ++j) out->push_back(uint8_t(block >> (16 - 8 * j)));
  }
  return true;
}

// Whether t from here is one JSON value (RFC 8259), containers kept on an explicit stack.
bool json_value(Text& t) {
  std::vector<uint8_t> open;  // the containers around t: '[' or '{'
  for (;;) {
    t.skip_ws();
    if (t.done()) return false;
    const uint8_t c = t.p[t.i];
    bool empty = false;
    if (c == '[' || c == '{') {
      if (open.size() >= kMaxDepth) return false;
      open.push_back(c);
      ++t.i;
      t.skip_ws();
      empty = t.eat(c == '[' ? ']' : '}');
      if (!empty && c == '{') {
        Bytes key;
        if (!read_string(t, &key)) return false;
        t.skip_ws();
        if (!t.eat(':')) return false;
        continue;
      }
      if (!empty) continue;
      open.pop_back();
    } else if (c == '"') {
      Bytes ignored;
      if (!read_string(t, &ignored)) return false;
    } else if (c == '-' || is_digit(c)) {
      t.eat('-');
      if (t.eat('0')) {
      } else if (t.at_digit()) {
        t.skip_digits();
      } else {
        return false;
      }
      if (t.eat('.')) {
        if (!t.at_digit()) return false;
        t.skip_digits();
      }
      if (t.eat('e') || t.eat('E')) {
        if (!t.eat('+')) t.eat('-');
        if (!t.at_digit()) return false;
        t.skip_digits();
      }
    } else {
      static const char* const kWords[] = {"true", "false", "null"};
      bool found = false;
      for (const char* w : kWords) {
        int64_t n = 0;
        while (w[n] && t.i + n < t.n && t.p[t.i + n] == uint8_t(w[n])) ++n;
        if (!w[n]) {
          t.i += n, found = true;
          break;
        }
      }
      if (!found) return false;
    }
    // A value ended: close the containers it ends, or go on to the next item or member.
    for (;;) {
      if (open.empty()) return true;
      t.skip_ws();
      if (t.eat(',')) {
        if (open.back() == '{') {
          t.skip_ws();
          Bytes key;
          if (!read_string(t, &key)) return false;
          t.skip_ws();
          if (!t.eat(':')) return false;
        }
        break;
      }
      if (!t.eat(open.back() == '[' ? ']' : '}')) return false;
      open.pop_back();
    }
  }
}

bool base64_json(const uint8_t* text, int64_t len) {
  Text t{text, len};
  if (!t.eat('"')) return false;
  CodePoints chars;
  if (read_chars(t, [&chars](uint32_t cp) { chars.push_back(cp); }) != Chars::end) return false;
  Bytes doc;
  if (!base64_decode(chars, &doc)) return false;
  Text d{doc.data(), static_cast<int64_t>(doc.size())};
  // The document is UTF-8 text: decoded, every character is checked by the JSON reading.
  for (int64_t k = 0; k < d.n;) {
    uint32_t cp;
    int size;
    if (!utf8_char(d.p + k, d.n - k, &cp, &size)) return false;
    k += size;
  }
  if (!json_value(d)) return false;
  d.skip_ws();
  return d.done();
}

// ---- kMultipleOf --------------------------------------------------------------------------

// a * b mod m for m < 2^63, by doubling: a 128-bit division would link compiler-rt, whose
// bcmp then replaces libc's (several times slower in the mask walks' set comparisons).
uint64_t mul_mod(uint64_t a, uint64_t b, uint64_t m) {
  uint64_t r = 0;
  for (a %= m; b; b >>= 1) {
    if (b & 1) r = r + a >= m ? r + a - m : r + a;
    a = a + a >= m ? a + a - m : a + a;
  }
  return r;
}

uint64_t pow_mod(uint64_t base, int64_t e, uint64_t m) {
  uint64_t r = 1 % m;
  for (base %= m; e > 0; e >>= 1, base = mul_mod(base, base, m))
    if (e & 1) r = mul_mod(r, base, m);
  return r;
}

// The number is M * 10^E with M free of trailing zeros, so number / (P * 10^Q) is
// (M * 10^(E - Q)) / P: when E < Q an integer would need 10 to divide M, and otherwise P must
// divide M * 10^(E - Q).
bool multiple_of(uint64_t divisor, int32_t q, const uint8_t* text, int64_t len) {
  Text t{text, len};
  Number num;
  if (!read_number(t, &num) || !t.done()) return false;
  if (num.zero()) return true;
  int64_t e;
  if (!small_exponent(num, &e)) return false;
  const int64_t k = e + num.shift() - q;
  if (k < 0) return false;
  uint64_t m = 0;
  for (int64_t d = num.first; d <= num.last; ++d)
    m = (mul_mod(m, 10, divisor) + uint64_t(num.digit(d) - '0')) % divisor;
  return mul_mod(m, pow_mod(10, k, divisor), divisor) == 0;
}

uint64_t divisor_of(const int32_t* params) { return uint64_t(uint32_t(params[0])) << 32 | uint32_t(params[1]); }

// The divisor P * 10^Q as one integer below 2^63, or 0 when it is not one.
uint64_t integer_divisor(uint64_t p, int32_t q) {
  if (q < 0) return 0;
  for (int32_t i = 0; i < q; ++i) {
    if (p > (uint64_t(1) << 63) / 10) return 0;
    p *= 10;
  }
  return p < (uint64_t(1) << 63) ? p : 0;
}

// The most zeros a completion writes after an integer divisor's digits (P * 10^Q past 2^63).
constexpr int32_t kMaxScaleZeros = 1 << 20;

// Appending k digits x makes N * 10^k + x: a multiple of D when x = -N * 10^k mod D fits in
// k digits, which it does by k = 19 (D < 2^63 < 10^19).
bool multiple_digits(uint64_t divisor, const uint8_t* text, int64_t len, std::vector<uint8_t>* out) {
  int64_t i = len > 0 && text[0] == '-' ? 1 : 0;
  uint64_t n = 0;
  for (; i < len; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    n = (mul_mod(n, 10, divisor) + uint64_t(text[i] - '0')) % divisor;
  }
  uint64_t power = 1;  // 10^k
  for (int32_t k = 0; k <= 19; ++k, power *= 10) {
    const uint64_t x = (divisor - mul_mod(n, pow_mod(10, k, divisor), divisor)) % divisor;
    if (x >= power) continue;
    out->assign(size_t(k), '0');
    uint64_t rest = x;
    for (int32_t j = k - 1; j >= 0; --j, rest /= 10) (*out)[size_t(j)] = uint8_t('0' + rest % 10);
    return true;
  }
  return false;
}

// The same for a divisor P * 10^Q past 2^63 (Q > 0). With k >= Q digits x appended, N * 10^k is
// a multiple of 10^Q, so x must be too: x = y * 10^Q with N * 10^(k - Q) + y a multiple of P
// (multiple_digits for P, then Q zeros). Fewer digits can only be zeros, and then N * 10^k is a
// multiple already: N = M * 10^z (M free of trailing zeros) needs z + k >= Q and P dividing
// M * 10^(z + k - Q), as in multiple_of.
bool scaled_multiple_digits(uint64_t p, int32_t q, const uint8_t* text, int64_t len, std::vector<uint8_t>* out) {
  uint64_t m = 0;  // M mod P
  int64_t z = 0;   // trailing zeros so far
  bool nonzero = false;
  for (int64_t i = len > 0 && text[0] == '-' ? 1 : 0; i < len; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    if (text[i] == '0') {
      ++z;
      continue;
    }
    m = (mul_mod(m, pow_mod(10, z + 1, p), p) + uint64_t(text[i] - '0')) % p;
    z = 0;
    nonzero = true;
  }
  if (!nonzero) return true;  // zero is a multiple of anything: no digit needed
  // P < 2^63 has fewer than 63 factors 2 or 5: past 63 more tens, none helps that did not already.
  const int64_t first = std::max<int64_t>(0, z - q), last = std::min<int64_t>(z - 1, first + 63);
  for (int64_t j = first; j <= last; ++j)
    if (mul_mod(m, pow_mod(10, j, p), p) == 0) {
      out->assign(size_t(q - z + j), '0');
      return true;
    }
  if (!multiple_digits(p, text, len, out)) return false;
  out->insert(out->end(), size_t(q), '0');
  return true;
}

// A plain number so far (`-`? digits, then maybe `.` and f digits): N, its digits as an integer
// modulo P, and f (-1 without a '.'). False for any other text.
bool read_plain(uint64_t p, const uint8_t* text, int64_t len, uint64_t* n, int64_t* f) {
  int64_t i = len > 0 && text[0] == '-' ? 1 : 0, dot = -1;
  *n = 0;
  for (; i < len; ++i) {
    if (text[i] == '.' && dot < 0) {
      dot = i;
      continue;
    }
    if (text[i] < '0' || text[i] > '9') return false;
    *n = (mul_mod(*n, 10, p) + uint64_t(text[i] - '0')) % p;
  }
  *f = dot < 0 ? -1 : len - 1 - dot;
  return true;
}

// P / gcd(P, 10^tens): what of P a factor 10^tens does not already supply.
uint64_t without_tens(uint64_t p, int64_t tens) {
  for (; tens > 0 && (p % 2 == 0 || p % 5 == 0); --tens) p /= p % 10 == 0 ? 10 : p % 2 == 0 ? 2 : 5;
  return p;
}

// The fewest fraction digits x (k of them, the smallest; `min` at least) after N.f, f < s, that
// make a multiple of P * 10^-s: (N * 10^k + x) * 10^(s - f - k) a multiple of P. The factor
// 10^(s - f - k) lends P its twos and fives (P2 = without_tens), so x is -N * 10^k mod P2 when
// that fits in k digits, which it does by k = 19 (P2 < 2^63 < 10^19).
bool fraction_digits(uint64_t p, int64_t s, uint64_t n, int64_t f, int32_t min, std::vector<uint8_t>* out) {
  uint64_t power = 1;  // 10^k
  for (int64_t k = 0; k <= 19 && f + k <= s; ++k) {
    if (k >= min) {
      const uint64_t p2 = without_tens(p, s - f - k);
      const uint64_t x = (p2 - mul_mod(n % p2, pow_mod(10, k, p2), p2)) % p2;
      if (x < power) {
        out->assign(size_t(k), '0');
        uint64_t rest = x;
        for (int64_t d = k - 1; d >= 0; --d, rest /= 10) (*out)[size_t(d)] = uint8_t('0' + rest % 10);
        return true;
      }
    }
    if (k < 19) power *= 10;
  }
  return false;
}

// The digits a plain number so far needs to become a multiple of P * 10^Q (none when it is one).
// An integer in progress with Q < 0 takes a '.' and fraction digits where some fit (the value
// stays below the next integer, within bounds the text met), else integer digits: N * 10^-Q is
// then a multiple of P, which leaves P2 = P / gcd(P, 10^-Q) to divide N. With a fraction,
// fraction digits; past the scale -Q they add only zeros: the value must be a multiple already
// (after a bare '.', the value of the text before it, and a '0' to write). False for an integer
// and Q >= 0.
bool fraction_completion(uint64_t p, int32_t q, const uint8_t* text, int64_t len, std::vector<uint8_t>* out) {
  uint64_t n;
  int64_t f;
  out->clear();
  if (!read_plain(p, text, len, &n, &f) || (f < 0 && q >= 0)) return false;
  if (f < 0) {
    const int64_t s = -int64_t(q);
    if (!fraction_digits(p, s, n, 0, 1, out)) return multiple_digits(without_tens(p, s), text, len, out);
    out->insert(out->begin(), '.');
    return true;
  }
  if (f < -int64_t(q)) return fraction_digits(p, -int64_t(q), n, f, f == 0 ? 1 : 0, out);
  if (!multiple_of(p, q, text, f == 0 ? len - 1 : len)) return false;
  if (f == 0) out->assign(1, '0');
  return true;
}

}  // namespace

bool check_digits(const CheckSpec& c, const uint8_t* text, int64_t len, std::vector<uint8_t>* out) {
  out->clear();
  if (c.kind != kMultipleOf || len < 0 || len > kMaxText || (len > 0 && !text)) return false;
  const uint64_t p = divisor_of(c.params.data());
  const int32_t q = c.params[2];
  if (q < 0 || std::find(text, text + len, uint8_t('.')) != text + len)
    return fraction_completion(p, q, text, len, out);
  const uint64_t divisor = integer_divisor(p, q);
  if (divisor > 0) return multiple_digits(divisor, text, len, out);
  return q > 0 && q <= kMaxScaleZeros && scaled_multiple_digits(p, q, text, len, out);
}

bool check_valid(int32_t kind, const int32_t* params, int32_t n_params) {
  switch (kind) {
    case kDistinctKey:
      if (n_params > 0 && !params) return false;
      for (int64_t k = 0; k < n_params;) {
        const int64_t n = params[k++];
        if (n < 0 || n > n_params - k) return false;
        for (const int32_t* b = params + k; b < params + k + n; ++b)
          if (*b < 0 || *b > 255) return false;
        k += n;
      }
      return true;
    case kUniqueItem:
    case kLeapSecond:
    case kRegexRefs:
    case kRegexPrefix:
    case kBase64Json:
      return n_params == 0;
    case kMultipleOf:
    case kMultipleOfPrefix:
      return n_params == 3 && params && params[0] >= 0 && divisor_of(params) > 0;
  }
  return false;
}

CheckSpec::CheckSpec(int32_t kind, std::vector<int32_t> params) : kind(kind), params(std::move(params)) {
  if (kind != kDistinctKey) return;
  const int32_t* p = this->params.data();
  for (const int32_t* end = p + this->params.size(); p < end; p += 1 + p[0]) keys.emplace_back(p + 1, p + 1 + p[0]);
  std::sort(keys.begin(), keys.end());
}

bool run_check(const CheckSpec& c, const uint8_t* text, int64_t len) {
  if (len < 0 || len > kMaxText || (len > 0 && !text)) return false;
  static const uint8_t kEmpty = 0;
  if (!text) text = &kEmpty;
  const int32_t* params = c.params.data();
  switch (c.kind) {
    case kUniqueItem: return unique_item(text, len);
    case kDistinctKey: return distinct_key(text, len, c.keys);
    case kLeapSecond: return leap_second(text, len);
    case kRegexRefs: return regex_valid(text, len, true);
    case kRegexPrefix: return regex_valid(text, len, false);
    case kMultipleOf: return multiple_of(divisor_of(params), params[2], text, len);
    case kMultipleOfPrefix: {
      std::vector<uint8_t> digits;
      return fraction_completion(divisor_of(params), params[2], text, len, &digits);
    }
    case kBase64Json: return base64_json(text, len);
  }
  return false;
}

}  // namespace tg
