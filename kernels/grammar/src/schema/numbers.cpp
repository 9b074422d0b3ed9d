#include "numbers.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <tuple>

#include "../checks.h"

namespace tg::schema {

namespace {

constexpr uint32_t kBase = 1000000000;  // BigInt's limbs: nine decimal digits each
// Python's int <-> str limit (sys.int_info.default_max_str_digits): a bound whose integer part
// has this many digits can make a str() of more, which raises there.
constexpr size_t kMaxBoundDigits = 4300;

}  // namespace

// ---- BigInt ----------------------------------------------------------------------------------

BigInt::BigInt(int64_t v) {
  negative_ = v < 0;
  uint64_t m = v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v);
  for (; m; m /= kBase) limbs_.push_back(uint32_t(m % kBase));
}

BigInt BigInt::from_digits(std::string_view digits, bool negative) {
  BigInt out;
  for (size_t end = digits.size(); end > 0;) {
    const size_t begin = end >= 9 ? end - 9 : 0;
    uint32_t limb = 0;
    for (size_t i = begin; i < end; ++i) limb = limb * 10 + uint32_t(digits[i] - '0');
    out.limbs_.push_back(limb);
    end = begin;
  }
  out.negative_ = negative;
  out.trim();
  return out;
}

BigInt BigInt::pow10(int64_t n) {
  BigInt out;
  out.limbs_.assign(size_t(n / 9), 0);
  uint32_t top = 1;
  for (int64_t i = 0; i < n % 9; ++i) top *= 10;
  out.limbs_.push_back(top);
  return out;
}

void BigInt::trim() {
  while (!limbs_.empty() && limbs_.back() == 0) limbs_.pop_back();
  if (limbs_.empty()) negative_ = false;
}

std::string BigInt::str() const {
  if (limbs_.empty()) return "0";
  std::string out = negative_ ? "-" : "";
  out += std::to_string(limbs_.back());
  for (size_t i = limbs_.size() - 1; i-- > 0;) {
    const std::string limb = std::to_string(limbs_[i]);
    out.append(9 - limb.size(), '0');
    out += limb;
  }
  return out;
}

bool BigInt::to_int64(int64_t* out) const {
  uint64_t m = 0;
  for (size_t i = limbs_.size(); i-- > 0;) {
    if (m > (UINT64_MAX - limbs_[i]) / kBase) return false;
    m = m * kBase + limbs_[i];
  }
  if (m > (negative_ ? uint64_t(INT64_MAX) + 1 : uint64_t(INT64_MAX))) return false;
  *out = negative_ ? int64_t(uint64_t(0) - m) : int64_t(m);
  return true;
}

int BigInt::compare_magnitude(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  for (size_t i = a.size(); i-- > 0;)
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}

std::vector<uint32_t> BigInt::add_magnitude(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  std::vector<uint32_t> out;
  uint32_t carry = 0;
  for (size_t i = 0; i < std::max(a.size(), b.size()) || carry; ++i) {
    uint32_t s = carry + (i < a.size() ? a[i] : 0) + (i < b.size() ? b[i] : 0);
    carry = s >= kBase;
    out.push_back(carry ? s - kBase : s);
  }
  return out;
}

std::vector<uint32_t> BigInt::sub_magnitude(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  std::vector<uint32_t> out(a);  // a >= b
  int64_t borrow = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t d = int64_t(out[i]) - borrow - (i < b.size() ? b[i] : 0);
    borrow = d < 0;
    out[i] = uint32_t(d < 0 ? d + kBase : d);
  }
  while (!out.empty() && out.back() == 0) out.pop_back();
  return out;
}

BigInt BigInt::operator-() const {
  BigInt out(*this);
  out.negative_ = !negative_;
  out.trim();
  return out;
}

BigInt operator+(const BigInt& a, const BigInt& b) {
  BigInt out;
  if (a.negative_ == b.negative_) {
    out.limbs_ = BigInt::add_magnitude(a.limbs_, b.limbs_);
    out.negative_ = a.negative_;
  } else if (BigInt::compare_magnitude(a.limbs_, b.limbs_) >= 0) {
    out.limbs_ = BigInt::sub_magnitude(a.limbs_, b.limbs_);
    out.negative_ = a.negative_;
  } else {
    out.limbs_ = BigInt::sub_magnitude(b.limbs_, a.limbs_);
    out.negative_ = b.negative_;
  }
  out.trim();
  return out;
}

BigInt operator-(const BigInt& a, const BigInt& b) { return a + -b; }

BigInt operator*(const BigInt& a, const BigInt& b) {
  BigInt out;
  if (a.limbs_.empty() || b.limbs_.empty()) return out;
  std::vector<uint64_t> acc(a.limbs_.size() + b.limbs_.size() + 1, 0);
  for (size_t i = 0; i < a.limbs_.size(); ++i) {
    uint64_t carry = 0;
    for (size_t j = 0; j < b.limbs_.size(); ++j) {
      const uint64_t cur = acc[i + j] + uint64_t(a.limbs_[i]) * b.limbs_[j] + carry;
      acc[i + j] = cur % kBase;
      carry = cur / kBase;
    }
    for (size_t k = i + b.limbs_.size(); carry; ++k) {
      const uint64_t cur = acc[k] + carry;
      acc[k] = cur % kBase;
      carry = cur / kBase;
    }
  }
  out.limbs_.assign(acc.begin(), acc.end());
  out.negative_ = a.negative_ != b.negative_;
  out.trim();
  return out;
}

int compare(const BigInt& a, const BigInt& b) {
  if (a.sign() != b.sign()) return a.sign() < b.sign() ? -1 : 1;
  const int m = BigInt::compare_magnitude(a.limbs_, b.limbs_);
  return a.negative_ ? -m : m;
}

void BigInt::divmod(const BigInt& a, const BigInt& b, BigInt* quotient, BigInt* remainder) {
  // Magnitudes first (Knuth's algorithm D in base 10^9), then Python's floor rounding.
  std::vector<uint32_t> q, r;
  const std::vector<uint32_t>& v0 = b.limbs_;
  const size_t n = v0.size();
  if (compare_magnitude(a.limbs_, v0) < 0) {
    r = a.limbs_;
  } else if (n == 1) {
    uint64_t rem = 0;
    q.assign(a.limbs_.size(), 0);
    for (size_t i = a.limbs_.size(); i-- > 0;) {
      const uint64_t cur = rem * kBase + a.limbs_[i];
      q[i] = uint32_t(cur / v0[0]);
      rem = cur % v0[0];
    }
    if (rem) r.push_back(uint32_t(rem));
  } else {
    const size_t m = a.limbs_.size() - n;
    const uint64_t d = kBase / (uint64_t(v0.back()) + 1);  // scales v's top limb to >= kBase / 2
    auto scaled = [d](const std::vector<uint32_t>& x, size_t size) {
      std::vector<uint32_t> out(size, 0);
      uint64_t carry = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const uint64_t cur = x[i] * d + carry;
        out[i] = uint32_t(cur % kBase);
        carry = cur / kBase;
      }
      if (x.size() < size) out[x.size()] = uint32_t(carry);
      return out;
    };
    std::vector<uint32_t> u = scaled(a.limbs_, a.limbs_.size() + 1);
    const std::vector<uint32_t> v = scaled(v0, n);
    q.assign(m + 1, 0);
    for (size_t j = m + 1; j-- > 0;) {
      const uint64_t top = uint64_t(u[j + n]) * kBase + u[j + n - 1];
      uint64_t qhat = top / v[n - 1], rhat = top % v[n - 1];
      while (qhat >= kBase || qhat * v[n - 2] > rhat * kBase + u[j + n - 2]) {
        --qhat;
        rhat += v[n - 1];
        if (rhat >= kBase) break;
      }
      int64_t borrow = 0;
      uint64_t carry = 0;
      for (size_t i = 0; i < n; ++i) {
        const uint64_t p = qhat * v[i] + carry;
        carry = p / kBase;
        int64_t t = int64_t(u[i + j]) - int64_t(p % kBase) - borrow;
        borrow = t < 0;
        u[i + j] = uint32_t(t < 0 ? t + kBase : t);
      }
      const int64_t t = int64_t(u[j + n]) - int64_t(carry) - borrow;
      if (t < 0) {  // qhat was one too many: add v back
        --qhat;
        uint64_t c = 0;
        for (size_t i = 0; i < n; ++i) {
          const uint64_t s = uint64_t(u[i + j]) + v[i] + c;
          u[i + j] = uint32_t(s % kBase);
          c = s / kBase;
        }
        u[j + n] = uint32_t((t + int64_t(kBase) + int64_t(c)) % int64_t(kBase));
      } else {
        u[j + n] = uint32_t(t);
      }
      q[j] = uint32_t(qhat);
    }
    r.assign(n, 0);
    uint64_t rem = 0;
    for (size_t i = n; i-- > 0;) {
      const uint64_t cur = rem * kBase + u[i];
      r[i] = uint32_t(cur / d);
      rem = cur % d;
    }
  }
  BigInt qv, rv;
  qv.limbs_ = std::move(q);
  qv.negative_ = a.negative_ != b.negative_;
  qv.trim();
  rv.limbs_ = std::move(r);
  rv.negative_ = a.negative_;
  rv.trim();
  if (!rv.is_zero() && a.negative_ != b.negative_) {  // toward minus infinity
    qv = qv - BigInt(1);
    rv = rv + b;
  }
  *quotient = std::move(qv);
  *remainder = std::move(rv);
}

BigInt BigInt::gcd(BigInt a, BigInt b) {
  a.negative_ = b.negative_ = false;
  BigInt q, r;
  while (!b.is_zero()) {
    divmod(a, b, &q, &r);
    a = std::move(b);
    b = std::move(r);
  }
  return a;
}

BigInt BigInt::lcm(const BigInt& a, const BigInt& b) {
  if (a.is_zero() || b.is_zero()) return BigInt();
  BigInt q, r;
  divmod(a * b, gcd(a, b), &q, &r);
  q.negative_ = false;
  return q;
}

// ---- Decimal ---------------------------------------------------------------------------------

namespace {

bool all_of_digit(std::string_view s, char c) {
  return std::all_of(s.begin(), s.end(), [c](char x) { return x == c; });
}

// Decimal._fix's rounding to the default context's 28 digits, half to even.
void round_to_context(Decimal* d) {
  constexpr size_t kPrecision = 28;
  if (d->digits.size() <= kPrecision) return;
  const std::string rest = d->digits.substr(kPrecision);
  d->exponent += int32_t(rest.size());
  d->digits.resize(kPrecision);
  const bool above_half = rest[0] > '5' || (rest[0] == '5' && !all_of_digit(rest.substr(1), '0'));
  const bool half = rest[0] == '5' && all_of_digit(rest.substr(1), '0');
  if (!(above_half || (half && (d->digits.back() - '0') % 2 == 1))) return;
  size_t i = d->digits.size();
  while (i > 0 && d->digits[i - 1] == '9') d->digits[--i] = '0';
  if (i > 0) {
    ++d->digits[i - 1];
  } else {  // 99..9 became 10..0: 29 digits, one dropped
    d->digits = "1" + std::string(kPrecision - 1, '0');
    d->exponent += 1;
  }
}

// A non-negative decimal as _split gives it: integer part (no leading zeros, "0" for none)
// and fraction digits without trailing zeros. The sign is dropped.
struct Split {
  std::string whole, frac;
};

Split split(const Decimal& d) {
  Split out;
  const int64_t n = int64_t(d.digits.size());
  if (d.exponent >= 0) {
    out.whole = d.is_zero() ? "0" : d.digits + std::string(size_t(d.exponent), '0');
  } else if (n + d.exponent > 0) {
    out.whole = d.digits.substr(0, size_t(n + d.exponent));
    out.frac = d.digits.substr(size_t(n + d.exponent));
  } else {
    out.whole = "0";
    out.frac = std::string(size_t(-d.exponent - n), '0') + d.digits;
  }
  while (!out.frac.empty() && out.frac.back() == '0') out.frac.pop_back();
  return out;
}

// The integer part's digits (for the limit on bounds) without writing them.
int64_t whole_digits(const Decimal& d) {
  return d.is_zero() ? 1 : std::max<int64_t>(1, int64_t(d.digits.size()) + d.exponent);
}

}  // namespace

bool Decimal::is_integral() const {
  if (exponent >= 0 || is_zero()) return true;
  const size_t zeros = digits.size() - (digits.find_last_not_of('0') + 1);
  return int64_t(zeros) >= -int64_t(exponent);
}

bool to_decimal(const Value& value, Decimal* out) {
  if (value.is_integer()) {
    const std::string_view t = value.text();
    out->negative = t[0] == '-';
    out->digits = std::string(out->negative ? t.substr(1) : t);
    out->exponent = 0;
    return true;
  }
  if (!value.is_number() || !std::isfinite(value.number())) return false;
  // Decimal(repr(v)): the coefficient is every digit written, the exponent counts the fraction's
  std::string_view t = value.text();
  out->negative = t[0] == '-';
  if (out->negative) t.remove_prefix(1);
  const size_t e = t.find_first_of("eE");
  int64_t exponent = e == std::string_view::npos ? 0 : std::strtoll(std::string(t.substr(e + 1)).c_str(), nullptr, 10);
  const std::string_view mantissa = t.substr(0, e);
  std::string digits;
  for (char c : mantissa) {
    if (c == '.') continue;
    digits += c;
  }
  const size_t dot = mantissa.find('.');
  if (dot != std::string_view::npos) exponent -= int64_t(mantissa.size() - dot - 1);
  const size_t first = digits.find_first_not_of('0');
  out->digits = first == std::string::npos ? "0" : digits.substr(first);
  out->exponent = int32_t(exponent);
  return true;
}

int compare(const Decimal& a, const Decimal& b) {
  const int sa = a.is_zero() ? 0 : a.negative ? -1 : 1, sb = b.is_zero() ? 0 : b.negative ? -1 : 1;
  if (sa != sb) return sa < sb ? -1 : 1;
  if (sa == 0) return 0;
  const int64_t ea = int64_t(a.digits.size()) + a.exponent, eb = int64_t(b.digits.size()) + b.exponent;
  int m = 0;
  if (ea != eb) {
    m = ea < eb ? -1 : 1;
  } else {
    const size_t n = std::max(a.digits.size(), b.digits.size());
    for (size_t i = 0; i < n && !m; ++i) {
      const char x = i < a.digits.size() ? a.digits[i] : '0', y = i < b.digits.size() ? b.digits[i] : '0';
      if (x != y) m = x < y ? -1 : 1;
    }
  }
  return sa * m;
}

Decimal negate(const Decimal& d) {
  Decimal out = d;
  out.negative = d.is_zero() ? false : !d.negative;  // -0 is 0 (copy_abs)
  round_to_context(&out);
  return out;
}

// ---- the JSON number texts --------------------------------------------------------------------

NumberTexts::NumberTexts(IrBuilder& b) {
  digit = b.byte_set({{0x30, 0x39}});
  nonzero = b.byte_set({{0x31, 0x39}});
  uint = b.alt(b.literal("0"), b.seq(nonzero, b.repeat(digit, 0, kUnbounded)));
  frac = b.seq(b.literal("."), b.repeat(digit, 1, kUnbounded));
  exp = b.seq(b.byte_set({{0x45, 0x45}, {0x65, 0x65}}), b.repeat(b.byte_set({{0x2B, 0x2B}, {0x2D, 0x2D}}), 0, 1),
              b.repeat(digit, 1, kUnbounded));
  minus = b.repeat(b.literal("-"), 0, 1);
  number = b.seq(minus, uint, b.repeat(frac, 0, 1), b.repeat(exp, 0, 1));
  zero_frac = b.repeat(b.seq(b.literal("."), b.repeat(b.literal("0"), 1, kUnbounded)), 0, 1);
  integer = b.seq(minus, uint, zero_frac);
  plain_number = b.seq(minus, uint, b.repeat(frac, 0, 1));
  non_integer = b.seq(minus, uint, b.literal("."), b.repeat(digit, 0, kUnbounded), nonzero,
                      b.repeat(digit, 0, kUnbounded));
}

namespace {

// ---- digit strings -----------------------------------------------------------------------------

// Non-negative integers' digit strings (no leading zeros) compared by value.
int compare_digits(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

Expr digits_between(IrBuilder& b, char lo, char hi) {
  return b.byte_set({{int32_t(uint8_t(lo)), int32_t(uint8_t(hi))}});
}

// _same_length: digit strings of len(a) == len(b) from a to b. The Python recurses a digit at a
// time on suffixes of a or of zeros against suffixes of b or of nines: four suffix pairs per
// position, built here from the last position up.
Expr same_length(IrBuilder& b, const NumberTexts& t, const std::string& a, const std::string& z) {
  const size_t n = a.size();
  // pair p: bit 1 set: the low side is zeros (else a), bit 0 set: the high side is nines (else z)
  auto low = [&](int p, size_t i) { return p & 2 ? '0' : a[i]; };
  auto high = [&](int p, size_t i) { return p & 1 ? '9' : z[i]; };
  std::vector<uint8_t> a_zeros(n + 1, 1), z_nines(n + 1, 1), a_nines(n + 1, 1), z_zeros(n + 1, 1), equal(n + 1, 1);
  for (size_t i = n; i-- > 0;) {  // from position i to the end: all zeros, all nines, a == z
    a_zeros[i] = a_zeros[i + 1] && a[i] == '0';
    a_nines[i] = a_nines[i + 1] && a[i] == '9';
    z_nines[i] = z_nines[i + 1] && z[i] == '9';
    z_zeros[i] = z_zeros[i + 1] && z[i] == '0';
    equal[i] = equal[i + 1] && a[i] == z[i];
  }
  auto low_zeros = [&](int p, size_t i) { return p & 2 ? true : bool(a_zeros[i]); };
  auto high_nines = [&](int p, size_t i) { return p & 1 ? true : bool(z_nines[i]); };
  auto same = [&](int p, size_t i) {  // the suffixes are equal
    switch (p) {
      case 0: return bool(equal[i]);
      case 1: return bool(a_nines[i]);
      case 2: return bool(z_zeros[i]);
      default: return false;  // zeros and nines, both non-empty
    }
  };
  enum Case : uint8_t { kNone, kEmpty, kLiteral, kPrefix, kBlock, kSplit };
  std::vector<uint8_t> cases(4 * (n + 1), kNone);
  cases[0] = kLiteral;  // marked needed
  for (size_t i = 0; i <= n; ++i) {
    for (int p = 0; p < 4; ++p) {
      uint8_t& c = cases[4 * i + p];
      if (c == kNone) continue;
      if (i == n) {
        c = kEmpty;
      } else if (same(p, i)) {
        c = kLiteral;
      } else if (low(p, i) == high(p, i)) {
        c = kPrefix;
        if (cases[4 * (i + 1) + p] == kNone) cases[4 * (i + 1) + p] = kLiteral;
      } else if (low_zeros(p, i + 1) && high_nines(p, i + 1)) {
        c = kBlock;
      } else {
        c = kSplit;
        if (cases[4 * (i + 1) + (p | 1)] == kNone) cases[4 * (i + 1) + (p | 1)] = kLiteral;
        if (cases[4 * (i + 1) + (p | 2)] == kNone) cases[4 * (i + 1) + (p | 2)] = kLiteral;
      }
    }
  }
  std::vector<Expr> out(4 * (n + 1), kNoExpr);
  std::string text;
  for (size_t i = n + 1; i-- > 0;) {
    for (int p = 0; p < 4; ++p) {
      const size_t m = n - i;
      Expr e = kNoExpr;
      switch (cases[4 * i + p]) {
        case kNone: continue;
        case kEmpty: e = IrBuilder::kEmpty; break;
        case kLiteral:
          text.clear();
          for (size_t k = i; k < n; ++k) text += low(p, k);
          e = b.literal(text);
          break;
        case kPrefix: e = b.seq(b.literal(std::string(1, low(p, i))), out[4 * (i + 1) + p]); break;
        case kBlock:
          e = b.seq(digits_between(b, low(p, i), high(p, i)), b.repeat(t.digit, int64_t(m - 1), int64_t(m - 1)));
          break;
        case kSplit: {
          std::vector<Expr> parts{b.seq(b.literal(std::string(1, low(p, i))), out[4 * (i + 1) + (p | 1)])};
          if (high(p, i) - low(p, i) > 1)
            parts.push_back(b.seq(digits_between(b, char(low(p, i) + 1), char(high(p, i) - 1)),
                                  b.repeat(t.digit, int64_t(m - 1), int64_t(m - 1))));
          parts.push_back(b.seq(b.literal(std::string(1, high(p, i))), out[4 * (i + 1) + (p | 2)]));
          e = b.alt(parts);
          break;
        }
      }
      out[4 * i + p] = e;
    }
  }
  return out[0];
}

// uint_range: non-negative integers from lo to hi (digit strings; hi null: unbounded).
Expr uint_range(IrBuilder& b, const NumberTexts& t, const std::string& lo, const std::string* hi) {
  if (hi && compare_digits(*hi, lo) < 0) return IrBuilder::kNothing;
  std::vector<Expr> parts;
  const size_t top = hi ? hi->size() : lo.size();
  for (size_t n = lo.size(); n <= top; ++n) {
    const std::string a = n == lo.size() ? lo : "1" + std::string(n - 1, '0');
    const std::string nines(n, '9');
    const std::string& z = hi && n == top ? *hi : nines;
    if (a <= z) parts.push_back(same_length(b, t, a, z));
  }
  if (!hi) parts.push_back(b.seq(t.nonzero, b.repeat(t.digit, int64_t(top), kUnbounded)));
  return b.alt(parts);
}

// An optional BigInt (None).
struct Bound {
  bool set = false;
  BigInt v;
};

// integer_range: integers from lo to hi as JSON writes them (no "-0").
Expr integer_range(IrBuilder& b, const NumberTexts& t, const Bound& lo, const Bound& hi) {
  std::vector<Expr> parts;
  const BigInt zero, one(1);
  if (!hi.set || hi.v.sign() >= 0) {
    const std::string from = lo.set && lo.v.sign() > 0 ? lo.v.str() : "0";
    const std::string to = hi.set ? hi.v.str() : "";
    parts.push_back(uint_range(b, t, from, hi.set ? &to : nullptr));
  }
  if (!lo.set || lo.v.sign() < 0) {
    const BigInt bottom = hi.set && -hi.v > one ? -hi.v : one;
    if (!lo.set || -lo.v >= bottom) {
      const std::string to = lo.set ? (-lo.v).str() : "";
      parts.push_back(b.seq(b.literal("-"), uint_range(b, t, bottom.str(), lo.set ? &to : nullptr)));
    }
  }
  return b.alt(parts);
}

// ---- decimals ----------------------------------------------------------------------------------

// _Fractions: fraction digit strings D with 0.D within bounds given as digit strings (lo or hi
// null: unbounded), the Python's recursion over their suffixes built from the deepest up.
class FractionDigits {
 public:
  FractionDigits(IrBuilder& b, const NumberTexts& t, const std::string* lo, bool li, const std::string* hi, bool hinc)
      : b_(b), t_(t), lo_(lo), hi_(hi), li_(li), hinc_(hinc) {}

  // Suffix positions: -1 for None, else the suffix's start (its string's size: "").
  bool empty_ok(int32_t i, int32_t j) const {
    if (i >= 0 && (lo_->find_first_not_of('0', size_t(i)) != std::string::npos || !li_)) return false;
    if (j >= 0 && hi_->find_first_not_of('0', size_t(j)) == std::string::npos && !hinc_) return false;
    return true;
  }

  Expr any_digits(int32_t i, int32_t j) {
    const Expr rest = nonempty(i, j);
    return empty_ok(i, j) ? b_.alt(IrBuilder::kEmpty, rest) : rest;
  }

  Expr nonempty(int32_t i0, int32_t j0) {
    std::vector<std::pair<int32_t, int32_t>> stack{{i0, j0}};
    std::vector<Group> groups;
    while (!stack.empty()) {
      const auto [i, j] = normal(stack.back());
      if (memo_.count(key(i, j))) {
        stack.pop_back();
        continue;
      }
      const bool leaf = grouped(i, j, &groups);
      bool waiting = false;
      if (!leaf) {
        for (const Group& g : groups) {
          const auto [ci, cj] = normal({g.lo, g.hi});
          if (!memo_.count(key(ci, cj))) {
            stack.push_back({ci, cj});
            waiting = true;
          }
        }
      }
      if (waiting) continue;
      memo_[key(i, j)] = leaf ? leaf_expr(i, j) : groups_expr(groups);
      stack.pop_back();
    }
    const auto [i, j] = normal({i0, j0});
    return memo_[key(i, j)];
  }

 private:
  struct Group {
    int32_t lo, hi;
    std::vector<IrRange> digits;
  };

  std::pair<int32_t, int32_t> normal(std::pair<int32_t, int32_t> s) const {
    if (s.first >= 0 && size_t(s.first) == lo_->size() && li_) s.first = -1;  // lo == "" and li: None
    return s;
  }
  static int64_t key(int32_t i, int32_t j) { return (int64_t(i) + 1) << 32 | uint32_t(j + 1); }

  // Whether (i, j) is one of nonempty's first three cases; else its digit groups, in order.
  bool grouped(int32_t i, int32_t j, std::vector<Group>* groups) const {
    const bool lo_empty = i >= 0 && size_t(i) == lo_->size();
    if ((i < 0 && j < 0) || (lo_empty && j < 0) || (j >= 0 && size_t(j) == hi_->size())) return true;
    groups->clear();
    for (char d = '0'; d <= '9'; ++d) {
      int32_t lo2 = -1, hi2 = -1;
      if (i >= 0) {
        const char l0 = lo_empty ? '0' : (*lo_)[size_t(i)];
        if (d < l0) continue;
        if (d == l0) lo2 = lo_empty ? i : i + 1;
      }
      if (j >= 0) {
        const char h0 = (*hi_)[size_t(j)];
        if (d > h0) continue;
        if (d == h0) hi2 = j + 1;
      }
      auto g = std::find_if(groups->begin(), groups->end(), [&](const Group& x) { return x.lo == lo2 && x.hi == hi2; });
      if (g == groups->end()) g = groups->insert(groups->end(), Group{lo2, hi2, {}});
      g->digits.push_back({int32_t(d), int32_t(d)});
    }
    return false;
  }

  Expr leaf_expr(int32_t i, int32_t j) {
    const bool lo_empty = i >= 0 && size_t(i) == lo_->size();
    if (i < 0 && j < 0) return b_.repeat(t_.digit, 1, kUnbounded);
    if (lo_empty && j < 0)  // exclusive 0: some nonzero digit
      return b_.seq(b_.repeat(b_.literal("0"), 0, kUnbounded), t_.nonzero, b_.repeat(t_.digit, 0, kUnbounded));
    // 0.D <= 0 (or < 0): only zeros, if the lower bound allows 0 (lo "" with li was made None)
    return hinc_ && i < 0 ? b_.repeat(b_.literal("0"), 1, kUnbounded) : IrBuilder::kNothing;
  }

  Expr groups_expr(const std::vector<Group>& groups) {  // the groups' suffixes are built: no walk deeper
    std::vector<Expr> parts;
    for (const Group& g : groups) {
      const Expr set = b_.byte_set(g.digits);
      parts.push_back(b_.seq(set, any_digits(g.lo, g.hi)));
    }
    return b_.alt(parts);
  }

  IrBuilder& b_;
  const NumberTexts& t_;
  const std::string* lo_;
  const std::string* hi_;
  bool li_, hinc_;
  std::unordered_map<int64_t, Expr> memo_;
};

Expr with_frac(IrBuilder& b, const NumberTexts& t, Expr int_expr, const std::string* flo, bool fli,
               const std::string* fhi, bool fhinc) {
  FractionDigits fr(b, t, flo, fli, fhi, fhinc);
  const int32_t i = flo ? 0 : -1, j = fhi ? 0 : -1;
  const Expr more = b.seq(b.literal("."), fr.nonempty(i, j));
  return b.seq(int_expr, fr.empty_ok(i, j) ? b.alt(IrBuilder::kEmpty, more) : more);
}

std::string plus(const std::string& digits, int64_t k) { return (BigInt::from_digits(digits) + BigInt(k)).str(); }

// magnitude_range: non-negative numbers m (text `uint(.digits)?`) with lo <(=) m <(=) hi; lo >= 0.
Expr magnitude_range(IrBuilder& b, const NumberTexts& t, const Decimal& lo, bool li, const Decimal* hi, bool hinc) {
  if (hi && (compare(*hi, lo) < 0 || (compare(*hi, lo) == 0 && !(li && hinc)))) return IrBuilder::kNothing;
  const Split l = split(lo);
  std::vector<Expr> parts;
  if (!hi) {
    parts.push_back(with_frac(b, t, b.literal(l.whole), &l.frac, li, nullptr, true));
    parts.push_back(with_frac(b, t, uint_range(b, t, plus(l.whole, 1), nullptr), nullptr, true, nullptr, true));
  } else {
    const Split h = split(*hi);
    if (h.whole == l.whole) {
      parts.push_back(with_frac(b, t, b.literal(l.whole), &l.frac, li, &h.frac, hinc));
    } else {
      parts.push_back(with_frac(b, t, b.literal(l.whole), &l.frac, li, nullptr, true));
      const std::string next = plus(l.whole, 1);
      if (compare_digits(h.whole, next) > 0) {
        const std::string before = plus(h.whole, -1);
        parts.push_back(with_frac(b, t, uint_range(b, t, next, &before), nullptr, true, nullptr, true));
      }
      parts.push_back(with_frac(b, t, b.literal(h.whole), nullptr, true, &h.frac, hinc));
    }
  }
  return b.alt(parts);
}

// decimal_range: numbers (without exponent, no negative zero) in the interval (null: unbounded).
Expr decimal_range(IrBuilder& b, const NumberTexts& t, const Decimal* lo, bool li, const Decimal* hi, bool hinc) {
  std::vector<Expr> parts;
  const Decimal zero;
  if (!hi || compare(*hi, zero) > 0 || (compare(*hi, zero) == 0 && hinc)) {
    if (!lo || compare(*lo, zero) < 0)
      parts.push_back(magnitude_range(b, t, zero, true, hi, hinc));
    else
      parts.push_back(magnitude_range(b, t, *lo, li, hi, hinc));
  }
  if (!lo || compare(*lo, zero) < 0) {  // "-m" with m > 0: -hi <(=) m <(=) -lo
    Decimal m_lo = zero;
    bool m_li = false;
    if (hi && compare(*hi, zero) < 0) m_lo = negate(*hi), m_li = hinc;
    Decimal m_hi;
    if (lo) m_hi = negate(*lo);
    parts.push_back(b.seq(b.literal("-"), magnitude_range(b, t, m_lo, m_li, lo ? &m_hi : nullptr, li)));
  }
  return b.alt(parts);
}

// ---- exact fractions (multipleOf) ---------------------------------------------------------------

struct Fraction {  // reduced, den > 0
  BigInt num, den{1};
};

Fraction make_fraction(BigInt num, BigInt den) {
  if (den.sign() < 0) num = -num, den = -den;
  const BigInt g = BigInt::gcd(num, den);
  BigInt q, r;
  if (!g.is_zero() && g != BigInt(1)) {
    BigInt::divmod(num, g, &q, &r), num = q;
    BigInt::divmod(den, g, &q, &r), den = q;
  }
  return {std::move(num), std::move(den)};
}

Fraction fraction_of(const Decimal& d) {
  BigInt c = BigInt::from_digits(d.digits, d.negative);
  if (d.exponent >= 0) return {c * BigInt::pow10(d.exponent), BigInt(1)};
  return make_fraction(std::move(c), BigInt::pow10(-int64_t(d.exponent)));
}

int compare(const Fraction& a, const Fraction& b) { return compare(a.num * b.den, b.num * a.den); }
Fraction operator+(const Fraction& a, const Fraction& b) {
  return make_fraction(a.num * b.den + b.num * a.den, a.den * b.den);
}
Fraction operator-(const Fraction& a) { return {-a.num, a.den}; }
BigInt floor_div(const Fraction& a, const Fraction& b) {  // Fraction.__floordiv__
  BigInt q, r;
  BigInt::divmod(a.num * b.den, a.den * b.num, &q, &r);
  return q;
}
bool divides(const Fraction& f, const Fraction& x) {  // (x / f).denominator == 1, f > 0
  BigInt q, r;
  BigInt::divmod(x.num * f.den, x.den * f.num, &q, &r);
  return r.is_zero();
}

// common_step: the least positive multiple of the first `used` multiples (and of 1: integer).
Fraction common_step(const std::vector<Decimal>& multiples, bool integer, const Fraction* until, size_t* used) {
  Fraction step = integer ? Fraction{BigInt(1), BigInt(1)} : fraction_of(multiples[0]);
  *used = 0;
  for (const Decimal& m : multiples) {
    if (until && compare(step, *until) > 0) break;
    const Fraction f = fraction_of(m);
    step = make_fraction(BigInt::lcm(step.num, f.num), BigInt::gcd(step.den, f.den));
    ++*used;
  }
  return step;
}

bool no_common_multiple(const NumberFacts& f, bool integer) {
  if (!f.has_lo || !f.has_hi || f.multiples.empty()) return false;
  const Fraction low = fraction_of(f.lo), high = fraction_of(f.hi);
  const Fraction width = high + -low;
  size_t used = 0;
  const Fraction step = common_step(f.multiples, integer, &width, &used);
  Fraction first = make_fraction(-floor_div(-low, step) * step.num, step.den);  // the least multiple >= lo
  if (compare(first, low) == 0 && !f.lo_inclusive) first = first + step;
  std::vector<Fraction> rest;
  for (size_t k = used; k < f.multiples.size(); ++k) rest.push_back(fraction_of(f.multiples[k]));
  for (const Fraction& x : {first, first + step}) {
    const int c = compare(x, high);
    if (!(c < 0 || (c == 0 && f.hi_inclusive))) continue;
    if (std::all_of(rest.begin(), rest.end(), [&](const Fraction& m) { return divides(m, x); })) return false;
  }
  return true;
}

void integer_bounds(const NumberFacts& f, Bound* ilo, Bound* ihi) {
  if (f.has_lo) {  // ceiling; past an exclusive integral bound
    const Split s = split(f.lo);
    BigInt v = BigInt::from_digits(s.whole, f.lo.negative);
    if (!f.lo.negative && !s.frac.empty()) v = v + BigInt(1);
    if (!f.lo_inclusive && s.frac.empty()) v = v + BigInt(1);
    *ilo = {true, std::move(v)};
  }
  if (f.has_hi) {  // floor; before an exclusive integral bound
    const Split s = split(f.hi);
    BigInt v = BigInt::from_digits(s.whole, f.hi.negative);
    if (f.hi.negative && !s.frac.empty()) v = v - BigInt(1);
    if (!f.hi_inclusive && s.frac.empty()) v = v - BigInt(1);
    *ihi = {true, std::move(v)};
  }
}

// check_params: the MULTIPLE_OF check's [P_hi, P_lo, Q], m = P * 10^Q (normalized, as the
// Python's Decimal.normalize rounds it); false where the Python raises (P >= 2^63).
bool check_params(const Decimal& m, std::vector<int32_t>* out) {
  Decimal n = m;
  round_to_context(&n);
  const size_t last = n.digits.find_last_not_of('0');
  int64_t exponent = n.exponent + int64_t(n.digits.size() - last - 1);
  n.digits.resize(last + 1);
  int64_t p = 0;
  if (!BigInt::from_digits(n.digits).to_int64(&p) || exponent < INT32_MIN || exponent > INT32_MAX) return false;
  const int64_t lo = p & 0xFFFFFFFF;
  *out = {int32_t(p >> 32), int32_t(lo >= (int64_t(1) << 31) ? lo - (int64_t(1) << 32) : lo), int32_t(exponent)};
  return true;
}

// ---- automata of number texts (_dfa.py) ---------------------------------------------------------

constexpr size_t kMaxStates = 4000;     // _dfa.MAX_STATES
constexpr int64_t kNfaBudget = 200000;  // from_ir's budget of expression nodes

struct Arc {
  int32_t lo, hi, to;
  bool operator<(const Arc& o) const { return std::tie(lo, hi, to) < std::tie(o.lo, o.hi, o.to); }
};

struct Dfa {  // rows of arcs from each state; state 0 starts
  std::vector<std::vector<Arc>> trans;
  std::vector<uint8_t> accept;
  bool trimmed = false;  // only reachable states that reach acceptance
};

struct VectorHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ uint32_t(x)) * 1099511628211ull;
    return size_t(h ^ (h >> 29));
  }
};
using StateIndex = std::unordered_map<std::vector<int32_t>, int32_t, VectorHash>;

std::vector<Arc> merged(std::vector<Arc> row) {
  std::sort(row.begin(), row.end());
  std::vector<Arc> out;
  for (const Arc& a : row) {
    if (!out.empty() && out.back().to == a.to && out.back().hi + 1 == a.lo)
      out.back().hi = a.hi;
    else
      out.push_back(a);
  }
  return out;
}

// _cuts: the first byte of each piece when bytes are cut at every range end of every automaton.
std::vector<int32_t> cuts(const std::vector<const Dfa*>& dfas) {
  std::vector<int32_t> points{0};
  for (const Dfa* d : dfas)
    for (const auto& row : d->trans)
      for (const Arc& a : row) points.insert(points.end(), {a.lo, a.hi + 1});
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  if (points.back() == 256) points.pop_back();
  return points;
}

// _expand: a state's target in each piece (-1: none).
std::vector<int32_t> expand(const std::vector<Arc>& row, const std::vector<int32_t>& starts) {
  std::vector<int32_t> out;
  out.reserve(starts.size());
  size_t j = 0;
  for (int32_t a : starts) {
    while (j < row.size() && row[j].hi < a) ++j;
    out.push_back(j < row.size() && row[j].lo <= a ? row[j].to : -1);
  }
  return out;
}

// minimize: Moore's refinement, then the blocks numbered breadth first from the start.
Dfa minimize(const Dfa& d) {
  const std::vector<int32_t> starts = cuts({&d});
  std::vector<std::vector<int32_t>> rows;
  for (const auto& row : d.trans) rows.push_back(expand(row, starts));
  const size_t n = d.trans.size();
  std::vector<int32_t> block(d.accept.begin(), d.accept.end());
  size_t count = std::count(d.accept.begin(), d.accept.end(), 1) ? 1 : 0;
  count += std::count(d.accept.begin(), d.accept.end(), 0) ? 1 : 0;
  std::vector<int32_t> key;
  while (true) {
    StateIndex keys;
    std::vector<int32_t> next(n);
    for (size_t s = 0; s < n; ++s) {
      key.assign(1, block[s]);
      for (int32_t t : rows[s]) key.push_back(t < 0 ? -1 : block[size_t(t)]);
      next[s] = keys.emplace(key, int32_t(keys.size())).first->second;
    }
    block = std::move(next);
    if (keys.size() == count) break;
    count = keys.size();
  }
  std::vector<int32_t> first(count, -1), number(count, -1), order;
  for (size_t s = 0; s < n; ++s)
    if (first[size_t(block[s])] < 0) first[size_t(block[s])] = int32_t(s);
  number[size_t(block[0])] = 0;
  order.push_back(block[0]);
  Dfa out;
  out.trimmed = d.trimmed;  // merging states keeps them reachable and live
  for (size_t k = 0; k < order.size(); ++k) {  // grows while it is walked
    const int32_t s = first[size_t(order[k])];
    std::vector<Arc> row;
    for (const Arc& a : d.trans[size_t(s)]) {
      int32_t& j = number[size_t(block[size_t(a.to)])];
      if (j < 0) {
        j = int32_t(order.size());
        order.push_back(block[size_t(a.to)]);
      }
      row.push_back({a.lo, a.hi, j});
    }
    out.trans.push_back(merged(std::move(row)));
    out.accept.push_back(d.accept[size_t(s)]);
  }
  return out;
}

// trim: without the states that are unreachable or cannot reach acceptance (0 stays first).
Dfa trim(const Dfa& d, bool reachable = false) {
  if (d.trimmed) return d;
  const size_t n = d.trans.size();
  std::vector<uint8_t> reach(n, reachable ? 1 : 0);
  if (!reachable) {
    std::vector<int32_t> todo{0};
    reach[0] = 1;
    while (!todo.empty()) {
      const int32_t s = todo.back();
      todo.pop_back();
      for (const Arc& a : d.trans[size_t(s)])
        if (!reach[size_t(a.to)]) reach[size_t(a.to)] = 1, todo.push_back(a.to);
    }
  }
  std::vector<std::vector<int32_t>> back(n);
  for (size_t s = 0; s < n; ++s)
    if (reach[s])
      for (const Arc& a : d.trans[s]) back[size_t(a.to)].push_back(int32_t(s));
  std::vector<uint8_t> live(n, 0);
  std::vector<int32_t> todo;
  for (size_t s = 0; s < n; ++s)
    if (reach[s] && d.accept[s]) live[s] = 1, todo.push_back(int32_t(s));
  while (!todo.empty()) {
    const int32_t s = todo.back();
    todo.pop_back();
    for (int32_t p : back[size_t(s)])
      if (!live[size_t(p)]) live[size_t(p)] = 1, todo.push_back(p);
  }
  Dfa out;
  out.trimmed = true;
  if (!live[0]) {
    out.trans.assign(1, {});
    out.accept.assign(1, 0);
    return out;
  }
  std::vector<int32_t> index(n, -1);
  int32_t k = 0;
  for (size_t s = 0; s < n; ++s)
    if (live[s]) index[s] = k++;
  for (size_t s = 0; s < n; ++s) {
    if (!live[s]) continue;
    std::vector<Arc> row;
    for (const Arc& a : d.trans[s])
      if (live[size_t(a.to)]) row.push_back({a.lo, a.hi, index[size_t(a.to)]});
    out.trans.push_back(std::move(row));
    out.accept.push_back(d.accept[s]);
  }
  return out;
}

Expr as_expr(IrBuilder& b, const Dfa& dfa) {
  const Dfa d = trim(dfa);
  if (!d.accept[0] && d.trans[0].empty()) return IrBuilder::kNothing;
  std::vector<IrRun> runs;
  for (size_t s = 0; s < d.trans.size(); ++s)
    for (const Arc& a : d.trans[s]) runs.push_back({int32_t(s), a.lo, a.hi, a.to});
  return b.make_automaton(runs, d.accept);
}

// _Nfa (shared ends off), built without recursion: a frame per expression being built.
struct Nfa {
  std::vector<std::vector<int32_t>> eps;
  std::vector<std::vector<Arc>> edges;
  int32_t add() {
    eps.emplace_back();
    edges.emplace_back();
    return int32_t(eps.size() - 1);
  }
  std::vector<int32_t> closure(std::vector<int32_t> states) const {
    std::vector<uint8_t> seen(eps.size(), 0);
    for (int32_t s : states) seen[size_t(s)] = 1;
    for (size_t k = 0; k < states.size(); ++k)
      for (int32_t t : eps[size_t(states[k])])
        if (!seen[size_t(t)]) seen[size_t(t)] = 1, states.push_back(t);
    std::sort(states.begin(), states.end());
    states.erase(std::unique(states.begin(), states.end()), states.end());
    return states;
  }
};

enum class Built { ok, too_big, unsupported };

// _Nfa.build(top, start): the end state in *end.
Built build_nfa(const IrBuilder& b, Expr top, int32_t start, Nfa* nfa, int32_t* end) {
  struct Frame {
    Expr e;
    int32_t start, end, cur, target;
    int64_t i;
    int8_t phase;
    bool waiting;
  };
  std::vector<Frame> stack;
  int64_t budget = kNfaBudget;
  int32_t ret = -1;
  auto enter = [&](Expr e, int32_t from, int32_t to) {
    if (--budget < 0) return false;
    stack.push_back({e, from, to, from, -1, 0, 0, false});
    return true;
  };
  if (!enter(top, start, -1)) return Built::too_big;
  while (!stack.empty()) {
    Frame& f = stack.back();
    const int32_t kind = b.kind(f.e);
    const bool empty = (kind == BYTES && b.bytes(f.e).empty()) || (kind == SEQ && b.items(f.e).empty());
    if (kind == BYTES && !empty) {
      const std::string_view data = b.bytes(f.e);
      int32_t cur = f.start;
      for (size_t k = 0; k < data.size(); ++k) {
        const int32_t next = f.end >= 0 && k == data.size() - 1 ? f.end : nfa->add();
        nfa->edges[size_t(cur)].push_back({uint8_t(data[k]), uint8_t(data[k]), next});
        cur = next;
      }
      ret = cur;
      stack.pop_back();
      continue;
    }
    if (kind == BYTESET) {
      const int32_t target = f.end < 0 ? nfa->add() : f.end;
      const IrSpan<int32_t> ranges = b.operands(f.e);
      for (size_t k = 0; k + 1 < ranges.size(); k += 2)
        nfa->edges[size_t(f.start)].push_back({ranges[k], ranges[k + 1], target});
      ret = target;
      stack.pop_back();
      continue;
    }
    if (kind == SEQ && !empty) {
      const IrSpan<Expr> items = b.items(f.e);
      if (f.waiting) f.cur = ret, f.waiting = false;
      if (f.i < int64_t(items.size())) {
        const size_t k = size_t(f.i++);
        f.waiting = true;
        const Expr item = items[k];
        const int32_t from = f.cur, to = k + 1 == items.size() ? f.end : -1;
        if (!enter(item, from, to)) return Built::too_big;
      } else {
        ret = f.cur;
        stack.pop_back();
      }
      continue;
    }
    if (kind == ALT) {
      const IrSpan<Expr> items = b.items(f.e);
      if (f.target < 0) f.target = f.end < 0 ? nfa->add() : f.end;
      if (f.waiting) nfa->eps[size_t(ret)].push_back(f.target), f.waiting = false;
      if (f.i < int64_t(items.size())) {
        const Expr item = items[size_t(f.i++)];
        const int32_t s = nfa->add();
        nfa->eps[size_t(f.start)].push_back(s);
        f.waiting = true;
        if (!enter(item, s, -1)) return Built::too_big;
      } else {
        ret = f.target;
        stack.pop_back();
      }
      continue;
    }
    // build_other, then the end given joined by an empty move
    int32_t result = -1;
    if (empty) {
      result = f.start;
    } else if (kind == REPEAT) {
      const Expr item = b.item(f.e);
      const int64_t min = b.repeat_min(f.e), max = b.repeat_max(f.e);
      if (f.waiting) {
        f.waiting = false;
        if (f.phase == 0 || (f.phase == 1 && max != kUnbounded)) {
          f.cur = ret;
        } else {  // the loop's copy
          nfa->eps[size_t(ret)].push_back(f.target);
          result = f.target;
        }
      }
      if (result < 0) {
        if (f.phase == 0 && f.i < min) {
          ++f.i;
          f.waiting = true;
          const int32_t from = f.cur;
          if (!enter(item, from, -1)) return Built::too_big;
          continue;
        }
        if (f.phase == 0) {
          f.phase = 1;
          f.i = 0;
          f.target = nfa->add();  // the loop state, or the end of the optional copies
          nfa->eps[size_t(f.cur)].push_back(f.target);
          if (max == kUnbounded) {
            f.waiting = true;
            const int32_t from = f.target;
            if (!enter(item, from, -1)) return Built::too_big;
            continue;
          }
        } else if (max != kUnbounded) {
          nfa->eps[size_t(f.cur)].push_back(f.target);
        }
        if (f.i < max - min) {
          ++f.i;
          f.waiting = true;
          const int32_t from = f.cur;
          if (!enter(item, from, -1)) return Built::too_big;
          continue;
        }
        result = f.target;
      }
    } else {
      return Built::unsupported;  // no number text holds another node
    }
    if (f.end >= 0) {
      nfa->eps[size_t(result)].push_back(f.end);
      result = f.end;
    }
    ret = result;
    stack.pop_back();
  }
  *end = ret;
  return Built::ok;
}

// from_ir (not compact): the subset construction; too_big past kMaxStates.
Built from_ir(const IrBuilder& b, Expr expr, Dfa* out) {
  Nfa nfa;
  const int32_t start = nfa.add();
  int32_t end = -1;
  const Built built = build_nfa(b, expr, start, &nfa, &end);
  if (built != Built::ok) return built;
  // _universal_states: where every string is accepted, all such sets are one state
  std::vector<uint8_t> universal(nfa.eps.size(), 0);
  int32_t first_universal = -1;
  for (size_t s = 0; s < nfa.edges.size(); ++s) {
    for (const Arc& a : nfa.edges[s]) {
      if (a.lo != 0 || a.hi != 0xFF || universal[size_t(a.to)]) continue;
      const std::vector<int32_t> reach = nfa.closure({a.to});
      if (std::binary_search(reach.begin(), reach.end(), end) &&
          std::binary_search(reach.begin(), reach.end(), int32_t(s))) {
        universal[size_t(a.to)] = 1;
        if (first_universal < 0 || a.to < first_universal) first_universal = a.to;
      }
    }
  }
  std::vector<int32_t> everything;
  if (first_universal >= 0) everything = nfa.closure({first_universal});
  auto settled = [&](std::vector<int32_t> states) {
    if (first_universal >= 0)
      for (int32_t s : states)
        if (universal[size_t(s)]) return everything;
    return states;
  };
  StateIndex index;
  std::vector<std::vector<int32_t>> order{settled(nfa.closure({start}))};
  index.emplace(order[0], 0);
  for (size_t i = 0; i < order.size(); ++i) {
    const std::vector<int32_t> cur = order[i];
    out->accept.push_back(std::binary_search(cur.begin(), cur.end(), end));
    // _partition: the bytes cut at every range end, each piece with the targets covering it
    std::vector<int32_t> points;
    for (int32_t s : cur)
      for (const Arc& a : nfa.edges[size_t(s)]) points.insert(points.end(), {a.lo, a.hi + 1});
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
    std::vector<std::vector<int32_t>> pieces(points.empty() ? 0 : points.size() - 1);
    for (int32_t s : cur) {
      for (const Arc& a : nfa.edges[size_t(s)]) {
        const size_t from = size_t(std::lower_bound(points.begin(), points.end(), a.lo) - points.begin());
        for (size_t k = from; points[k] <= a.hi; ++k) pieces[k].push_back(a.to);
      }
    }
    std::vector<Arc> row;
    for (size_t k = 0; k < pieces.size(); ++k) {
      if (pieces[k].empty()) continue;
      std::vector<int32_t> next = settled(nfa.closure(pieces[k]));
      auto known = index.find(next);
      int32_t j;
      if (known != index.end()) {
        j = known->second;
      } else {
        if (order.size() >= kMaxStates) return Built::too_big;
        j = int32_t(order.size());
        index.emplace(next, j);
        order.push_back(std::move(next));
      }
      row.push_back({points[k], points[k + 1] - 1, j});
    }
    out->trans.push_back(merged(std::move(row)));
  }
  return Built::ok;
}

// intersect (product, every component wanted): trimmed and minimized (a number keyword's);
// too_big past kMaxStates.
Built intersect(const std::vector<Dfa>& dfas, Dfa* out) {
  if (dfas.size() == 1) {
    *out = dfas[0];
    return Built::ok;
  }
  const size_t n = dfas.size();
  std::vector<const Dfa*> all;
  for (const Dfa& d : dfas) all.push_back(&d);
  const std::vector<int32_t> starts = cuts(all);
  std::vector<int32_t> ends;
  for (size_t x = 1; x < starts.size(); ++x) ends.push_back(starts[x] - 1);
  ends.push_back(255);
  std::vector<std::unordered_map<int32_t, std::vector<int32_t>>> expanded(n);
  const std::vector<int32_t> nowhere(starts.size(), -1);
  auto pieces_of = [&](size_t k, int32_t s) -> const std::vector<int32_t>& {
    if (s < 0) return nowhere;
    auto known = expanded[k].find(s);
    if (known == expanded[k].end()) known = expanded[k].emplace(s, expand(dfas[k].trans[size_t(s)], starts)).first;
    return known->second;
  };
  StateIndex index;
  std::vector<std::vector<int32_t>> order{std::vector<int32_t>(n, 0)};
  index.emplace(order[0], 0);
  index.emplace(std::vector<int32_t>(n, -1), -1);
  Dfa d;
  std::vector<int32_t> next(n);
  for (size_t i = 0; i < order.size(); ++i) {
    const std::vector<int32_t> cur = order[i];
    bool accepting = true;
    for (size_t k = 0; k < n; ++k) accepting = accepting && dfas[k].accept[size_t(cur[k])];
    d.accept.push_back(accepting);
    std::vector<const std::vector<int32_t>*> rows;
    for (size_t k = 0; k < n; ++k) rows.push_back(&pieces_of(k, cur[k]));
    std::vector<Arc> row;
    int32_t last = -1;
    for (size_t x = 0; x < starts.size(); ++x) {
      bool hopeless = false;  // a component is dead
      for (size_t k = 0; k < n; ++k) next[k] = (*rows[k])[x], hopeless = hopeless || next[k] < 0;
      int32_t j;
      auto known = index.find(next);
      if (known != index.end()) {
        j = known->second;
      } else if (hopeless) {
        j = -1;
        index.emplace(next, -1);
      } else {
        if (order.size() >= kMaxStates) return Built::too_big;
        j = int32_t(order.size());
        index.emplace(next, j);
        order.push_back(next);
      }
      if (j != last) {
        if (j >= 0) row.push_back({starts[x], ends[x], j});
        last = j;
      } else if (j >= 0) {
        row.back().hi = ends[x];
      }
    }
    d.trans.push_back(std::move(row));
  }
  *out = minimize(trim(d, true));
  return Built::ok;
}

// multiple_dfa: number texts (digits, one '.', a leading '-') that are multiples of m > 0,
// minimized; too_big where the Python refuses the remainders, unsupported for m = 0 (its
// ZeroDivisionError: a negated multipleOf of 0).
Built multiple_dfa(const Decimal& m, Dfa* out) {
  // m = p / 10^s with p from the coefficient as written (not normalized)
  if (m.digits.size() > 4 || m.exponent > 3) return m.is_zero() ? Built::unsupported : Built::too_big;
  int64_t p = std::strtoll(m.digits.c_str(), nullptr, 10);
  const int64_t s = m.exponent < 0 ? -int64_t(m.exponent) : 0;
  for (int32_t k = 0; k < m.exponent; ++k) p *= 10;
  if (p * (s + 2) > 3000) return Built::too_big;
  if (p == 0) return Built::unsupported;
  // states: start, sign, ("i", r), ("f", k, r), ("z", r); keyed (kind, k, r)
  enum : int64_t { kStart, kSign, kInt, kFrac, kZeros };
  auto key_of = [&](int64_t kind, int64_t k, int64_t r) { return (kind * (s + 1) + k) * p + r; };
  std::unordered_map<int64_t, int32_t> index;
  std::vector<std::array<int64_t, 3>> keys;
  Dfa d;
  std::vector<int64_t> power(size_t(s) + 1, 1 % p);  // 10^e mod p
  for (size_t e = 1; e < power.size(); ++e) power[e] = power[e - 1] * 10 % p;
  auto state = [&](int64_t kind, int64_t k, int64_t r) {
    const int64_t key = key_of(kind, k, r);
    auto known = index.find(key);
    if (known != index.end()) return known->second;
    const int32_t id = int32_t(d.trans.size());
    index.emplace(key, id);
    keys.push_back({kind, k, r});
    d.trans.emplace_back();
    const int64_t read = kind == kFrac ? k : kind == kInt ? 0 : s;
    d.accept.push_back(kind != kStart && kind != kSign && r * power[size_t(s - read)] % p == 0);
    return id;
  };
  state(kStart, 0, 0);
  std::vector<int32_t> todo{0};
  std::vector<uint8_t> seen{1};
  while (!todo.empty()) {
    const int32_t src = todo.back();
    todo.pop_back();
    const auto [kind, k, r] = keys[size_t(src)];
    std::vector<std::pair<int32_t, std::array<int64_t, 3>>> edges;  // byte, next key
    if (kind == kStart) edges.push_back({0x2D, {kSign, 0, 0}});
    if (kind == kStart || kind == kSign || kind == kInt)
      for (int64_t dgt = 0; dgt < 10; ++dgt) edges.push_back({int32_t(0x30 + dgt), {kInt, 0, (r * 10 + dgt) % p}});
    if (kind == kInt)
      edges.push_back({0x2E, s ? std::array<int64_t, 3>{kFrac, 0, r} : std::array<int64_t, 3>{kZeros, 0, r}});
    if (kind == kFrac)
      for (int64_t dgt = 0; dgt < 10; ++dgt)
        edges.push_back({int32_t(0x30 + dgt), k + 1 < s ? std::array<int64_t, 3>{kFrac, k + 1, (r * 10 + dgt) % p}
                                                         : std::array<int64_t, 3>{kZeros, 0, (r * 10 + dgt) % p}});
    if (kind == kZeros) edges.push_back({0x30, {kZeros, 0, r}});
    for (const auto& [byte, next] : edges) {
      const int32_t t = state(next[0], next[1], next[2]);
      d.trans[size_t(src)].push_back({byte, byte, t});
      if (size_t(t) >= seen.size()) seen.resize(size_t(t) + 1, 0);
      if (!seen[size_t(t)]) seen[size_t(t)] = 1, todo.push_back(t);
    }
  }
  for (auto& row : d.trans) row = merged(std::move(row));
  *out = minimize(d);
  return Built::ok;
}

// ir.rebuild with checked_as_written's build: `checks` after each digit and point written.
Expr checked_as_written(IrBuilder& b, Expr top, const std::vector<Expr>& checks) {
  std::unordered_map<Expr, Expr> done;
  std::vector<Expr> stack{top}, kids, parts;
  while (!stack.empty()) {
    const Expr e = stack.back();
    if (done.count(e)) {
      stack.pop_back();
      continue;
    }
    const int32_t kind = b.kind(e);
    kids.clear();
    if (kind == SEQ || kind == ALT) {
      const IrSpan<Expr> items = b.items(e);
      kids.assign(items.begin(), items.end());
    } else if (kind == REPEAT) {
      kids.push_back(b.item(e));
    }
    bool waiting = false;
    for (Expr k : kids)
      if (!done.count(k)) stack.push_back(k), waiting = true;
    if (waiting) continue;
    stack.pop_back();
    Expr out = e;
    if (kind == BYTES) {
      const std::string data(b.bytes(e));
      parts.clear();
      for (char c : data) {
        const Expr one = b.literal(std::string(1, c));
        if ((c >= '0' && c <= '9') || c == '.') {
          std::vector<Expr> item{one};
          item.insert(item.end(), checks.begin(), checks.end());
          parts.push_back(b.seq(item));
        } else {
          parts.push_back(one);
        }
      }
      out = b.seq(parts);
    } else if (kind == BYTESET) {
      const IrSpan<int32_t> r = b.operands(e);
      bool numeric = !r.empty();
      for (size_t k = 0; k + 1 < r.size(); k += 2) numeric = numeric && 0x2E <= r[k] && r[k + 1] <= 0x39;
      if (numeric) {
        std::vector<Expr> item{e};
        item.insert(item.end(), checks.begin(), checks.end());
        out = b.seq(item);
      }
    } else if (kind == REPEAT) {
      out = b.repeat(done[kids[0]], b.repeat_min(e), b.repeat_max(e));
    } else if (kind == SEQ || kind == ALT) {
      std::vector<Expr> rebuilt;
      for (Expr k : kids) rebuilt.push_back(done[k]);
      out = kind == SEQ ? b.seq(rebuilt) : b.alt(rebuilt);
    }
    done[e] = out;
  }
  return done[top];
}

constexpr int64_t kMaxListedMultiples = 256;

// checked_integer_multiples: integer texts in [ilo, ihi] that are multiples of every m (all
// integral), the core checking the integer part; kNoExpr where check_params raises.
Expr checked_integer_multiples(IrBuilder& b, const NumberTexts& t, const Bound& ilo, const Bound& ihi,
                               const std::vector<Decimal>& multiples, Expr zero_frac) {
  std::vector<Expr> checks;
  for (const Decimal& m : multiples) {
    std::vector<int32_t> params;
    if (!check_params(m, &params)) return kNoExpr;
    checks.push_back(b.make_check(kMultipleOf, params));
  }
  size_t used = 0;
  const BigInt step = common_step(multiples, true, nullptr, &used).num;
  auto side = [&](const BigInt& lo, const Bound& hi, const char* sign) {
    if (hi.set) {
      if (hi.v < lo) return IrBuilder::kNothing;
      BigInt q, r;
      BigInt::divmod(-lo, step, &q, &r);
      const BigInt first = -q * step;
      if (first > hi.v) return IrBuilder::kNothing;
      BigInt::divmod(hi.v - first, step, &q, &r);
      if (q < BigInt(kMaxListedMultiples)) {
        std::vector<Expr> listed;
        for (BigInt v = first; v <= hi.v; v = v + step) listed.push_back(b.literal(sign + v.str()));
        return b.alt(listed);
      }
    }
    const std::string to = hi.set ? hi.v.str() : "";
    std::vector<Expr> item{b.literal(sign), uint_range(b, t, lo.str(), hi.set ? &to : nullptr)};
    item.insert(item.end(), checks.begin(), checks.end());
    return b.make_region(b.seq(item));
  };
  std::vector<Expr> parts;
  const BigInt zero, one(1);
  if (!ihi.set || ihi.v.sign() >= 0) parts.push_back(side(ilo.set && ilo.v.sign() > 0 ? ilo.v : zero, ihi, ""));
  if (!ilo.set || ilo.v.sign() < 0) {
    const Bound top = ilo.set ? Bound{true, -ilo.v} : Bound{};
    parts.push_back(side(ihi.set && -ihi.v > one ? -ihi.v : one, top, "-"));
  }
  if ((!ilo.set || ilo.v.sign() <= 0) && (!ihi.set || ihi.v.sign() >= 0))
    parts.push_back(b.literal("-0"));  // JSON's negative zero is zero, a multiple of anything
  return b.seq(b.alt(parts), zero_frac);
}

void key_decimal(const Decimal& d, std::string* key) {
  *key += d.negative ? '-' : '+';
  *key += d.digits;
  *key += 'e';
  *key += std::to_string(d.exponent);
  *key += ',';
}

}  // namespace

// ---- constants ---------------------------------------------------------------------------------

Expr number_const(IrBuilder& b, const Value& v, Expr zero_frac) {
  if (v.is_integer()) return b.seq(b.literal(v.text()), zero_frac);
  if (!v.is_number()) return kNoExpr;
  const double x = v.number();
  const bool integral = std::isfinite(x) && x == std::floor(x);
  std::vector<Expr> forms;
  if (integral) {  // str(int(v)): the double's exact value
    int e = 0;
    const double f = std::frexp(std::fabs(x), &e);
    BigInt m(int64_t(std::ldexp(f, 53)));
    e -= 53;
    if (e >= 0) {
      for (; e >= 30; e -= 30) m = m * BigInt(int64_t(1) << 30);
      m = m * BigInt(int64_t(1) << e);
    } else {  // an integral value below 2^53: the shift drops zeros only
      BigInt q, r;
      BigInt::divmod(m, BigInt(int64_t(1) << -e), &q, &r);
      m = q;
    }
    forms.push_back(b.seq(b.literal((x < 0 ? -m : m).str()), zero_frac));
  }
  if (zero_frac != IrBuilder::kEmpty || !integral) {  // 1.0 spelled as itself
    const std::string_view text = v.text();
    if (text.find('e') == std::string_view::npos && text.find('.') != std::string_view::npos)
      forms.push_back(b.seq(b.literal(text), b.repeat(b.literal("0"), 0, kUnbounded)));
    else if (text != "inf" && text != "-inf" && text != "nan")
      forms.push_back(b.literal(text));
  }
  return b.alt(forms);
}

// ---- a context's numbers -------------------------------------------------------------------------

bool number_facts(IrSpan<const Value*> schemas, std::string_view pointer, NumberFacts* out) {
  static constexpr std::string_view kKeywords[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                                   "multipleOf"};
  *out = NumberFacts();
  out->pointer = std::string(pointer);
  for (const Value* s : schemas) {
    if (!s->is_object()) return false;
    for (std::string_view key : kKeywords) {
      const Value* v = s->find(key);
      if (!v) continue;
      Decimal d;
      if (v->is_bool() || !to_decimal(*v, &d)) return false;  // draft-04's flags were rewritten before
      if (key == "multipleOf") {
        if (compare(d, Decimal()) <= 0) return false;
        out->multiples.push_back(std::move(d));
      } else if (key == "minimum" || key == "exclusiveMinimum") {
        const bool inc = key == "minimum";
        if (!out->has_lo || compare(d, out->lo) > 0 || (compare(d, out->lo) == 0 && !inc))
          out->has_lo = true, out->lo = std::move(d), out->lo_inclusive = inc;
      } else {
        const bool inc = key == "maximum";
        if (!out->has_hi || compare(d, out->hi) < 0 || (compare(d, out->hi) == 0 && !inc))
          out->has_hi = true, out->hi = std::move(d), out->hi_inclusive = inc;
      }
    }
  }
  for (const Value* s : schemas) {
    if (const Value* v = s->find(kNotMultiple)) {
      Decimal d;
      if (!to_decimal(*v, &d)) return false;
      out->not_multiples.push_back(std::move(d));
    }
  }
  for (const Value* s : schemas) {
    const Value* v = s->find(kNotConst);
    if (v && (v->is_integer() || v->is_number())) out->excluded.push_back(v);  // atom_of: int or frac
  }
  return true;
}

NumberSchema::NumberSchema(IrBuilder& b, NumberHost& host, NumberOptions opt)
    : b_(b), host_(host), texts_(b) {
  zero_frac_ = opt.zero_frac ? texts_.zero_frac : IrBuilder::kEmpty;
  const_zero_frac_ = opt.const_zero_frac ? texts_.zero_frac : IrBuilder::kEmpty;
  integer_ = opt.zero_frac ? texts_.integer : b.seq(texts_.minus, texts_.uint);
}

Expr NumberSchema::number(IrSpan<const Value*> schemas, std::string_view pointer, uint32_t atoms) {
  NumberFacts facts;
  if (!number_facts(schemas, pointer, &facts)) return kNoExpr;
  return number(facts, atoms);
}

Expr NumberSchema::number(const NumberFacts& f, uint32_t atoms) {
  // The Python's key: the decimals as str() writes them (sign, digits and exponent tell them
  // apart alike), the excluded values as json.dumps does (a number's text), the atoms.
  std::string key;
  if (f.has_lo) key_decimal(f.lo, &key);
  key += f.has_lo ? "" : "N,";
  key += f.lo_inclusive ? "i," : "x,";
  if (f.has_hi) key_decimal(f.hi, &key);
  key += f.has_hi ? "" : "N,";
  key += f.hi_inclusive ? "i," : "x,";
  for (const Decimal& m : f.multiples) key_decimal(m, &key);
  key += "/";
  for (const Decimal& m : f.not_multiples) key_decimal(m, &key);
  key += "/";
  for (const Value* v : f.excluded) key += std::string(v->is_integer() ? "I" : "F") + std::string(v->text()) + ",";
  key += std::to_string(atoms);
  const auto known = memo_.find(key);
  if (known != memo_.end()) return known->second;
  const Expr out = build(f, atoms);
  if (out == kNoExpr || !b_.ok()) return kNoExpr;
  memo_.emplace(std::move(key), out);
  return out;
}

Expr NumberSchema::build(const NumberFacts& f, uint32_t atoms) {
  IrBuilder& b = b_;
  const NumberTexts& t = texts_;
  // Integer parts past Python's int/str limit raise there (str(10**4300)).
  if ((f.has_lo && whole_digits(f.lo) >= int64_t(kMaxBoundDigits) - 1) ||
      (f.has_hi && whole_digits(f.hi) >= int64_t(kMaxBoundDigits) - 1))
    return kNoExpr;
  const Decimal* lo = f.has_lo ? &f.lo : nullptr;
  const Decimal* hi = f.has_hi ? &f.hi : nullptr;
  const bool li = f.lo_inclusive, hinc = f.hi_inclusive;
  const bool integer_only = !(atoms & kAtomFrac), frac_only = !(atoms & kAtomInt);
  const bool bounded = lo || hi;
  if (no_common_multiple(f, integer_only)) return IrBuilder::kNothing;
  if (frac_only || !f.excluded.empty() || !f.not_multiples.empty()) {
    // exact via automata over exponent-free numbers: an And the core builds
    std::vector<Expr> items{decimal_range(b, t, lo, li, hi, hinc)};
    std::vector<uint8_t> wants{1};
    if (frac_only) items.push_back(t.non_integer), wants.push_back(1);
    if (integer_only) items.push_back(integer_), wants.push_back(1);
    for (int pass = 0; pass < 2; ++pass) {
      for (const Decimal& m : pass == 0 ? f.multiples : f.not_multiples) {
        Dfa d;
        if (multiple_dfa(m, &d) != Built::ok) return kNoExpr;
        items.push_back(as_expr(b, d));
        wants.push_back(pass == 0);
      }
    }
    if (!f.excluded.empty()) {
      std::vector<Expr> values;
      for (const Value* v : f.excluded) values.push_back(number_const(b, *v, const_zero_frac_));
      items.push_back(b.alt(values));
      wants.push_back(0);
    }
    return host_.intersection(items, wants, "not", f.pointer, false);
  }
  const Decimal zero;
  if (!integer_only && f.multiples.empty() && bounded &&
      ((lo && compare(*lo, zero) == 0 && !hi) || (hi && compare(*hi, zero) == 0 && !lo))) {
    // a sign constraint alone: exponents are allowed (1e-06 >= 0)
    const Expr positive =
        b.seq(b.alt(b.seq(t.nonzero, b.repeat(t.digit, 0, kUnbounded), b.repeat(t.frac, 0, 1)),
                    b.seq(b.literal("0."), b.repeat(b.literal("0"), 0, kUnbounded), t.nonzero,
                          b.repeat(t.digit, 0, kUnbounded))),
              b.repeat(t.exp, 0, 1));
    const Expr zero_text =
        b.seq(b.literal("0"), b.repeat(b.seq(b.literal("."), b.repeat(b.literal("0"), 1, kUnbounded)), 0, 1),
              b.repeat(t.exp, 0, 1));
    const bool inclusive = lo ? li : hinc;
    if (lo) return inclusive ? b.alt(positive, zero_text) : positive;
    const Expr negative = b.seq(b.literal("-"), positive);
    return inclusive ? b.alt(negative, zero_text) : negative;
  }
  Expr expr = kNoExpr;
  if (integer_only) {
    Bound ilo, ihi;
    integer_bounds(f, &ilo, &ihi);
    if (ilo.set && ihi.set && ihi.v < ilo.v) return IrBuilder::kNothing;
    expr = bounded ? b.seq(integer_range(b, t, ilo, ihi), zero_frac_) : integer_;
  } else if (bounded) {
    expr = decimal_range(b, t, lo, li, hi, hinc);
  }
  if (f.multiples.empty()) return expr != kNoExpr ? expr : t.number;
  return with_multiples(f, expr != kNoExpr ? expr : t.plain_number);
}

Expr NumberSchema::with_multiples(const NumberFacts& f, Expr base) {
  IrBuilder& b = b_;
  std::vector<Dfa> dfas(1);
  Built fits = from_ir(b, base, &dfas[0]);
  if (fits == Built::unsupported) return kNoExpr;
  for (size_t k = 0; fits == Built::ok && k < f.multiples.size(); ++k) {
    dfas.emplace_back();
    fits = multiple_dfa(f.multiples[k], &dfas.back());
    if (fits == Built::unsupported) return kNoExpr;
  }
  Dfa product;
  if (fits == Built::ok && intersect(dfas, &product) == Built::ok) return as_expr(b, product);
  // Too many remainders for an automaton: the core divides the number's text when it ends.
  if (std::all_of(f.multiples.begin(), f.multiples.end(), [](const Decimal& m) { return m.is_integral(); })) {
    // Only integers are multiples: checking the integer part keeps a '.' from leading into a
    // text that no digit can complete.
    Bound ilo, ihi;
    integer_bounds(f, &ilo, &ihi);
    return checked_integer_multiples(b, texts_, ilo, ihi, f.multiples, zero_frac_);
  }
  // Each digit and point checked as it comes
  std::vector<std::vector<int32_t>> params(f.multiples.size());
  for (size_t k = 0; k < f.multiples.size(); ++k)
    if (!check_params(f.multiples[k], &params[k])) return kNoExpr;
  std::vector<Expr> prefix, whole{kNoExpr};
  for (const auto& p : params) prefix.push_back(b.make_check(kMultipleOfPrefix, p));
  whole[0] = checked_as_written(b, base, prefix);
  for (const auto& p : params) whole.push_back(b.make_check(kMultipleOf, p));
  return b.make_region(b.seq(whole));
}

}  // namespace tg::schema
