// Numbers: json_schema/_numbers.py (the JSON number texts, exact digit-level languages of the
// numbers within bounds and of multiples) and _number_schema.py (a context's number grammar from
// its keywords), with Converter.const_expr for numbers.
//
// The Python compares bounds and multiples as decimal.Decimal and fractions.Fraction, exactly,
// never as floats; so does this port, with Decimal and BigInt below. It follows the Python's
// arithmetic where that is not exact too: a negated Decimal is rounded to the default context's
// 28 digits (decimal_range's `-lo` of a 30-digit bound), and so is a normalized multipleOf.
// Where the Python raises (a malformed or draft-04 boolean bound, too many digits for a check,
// a number past int's 4,300-digit str() limit), the port declines: number() returns kNoExpr.
// The automata of multipleOf (_dfa.py's from_ir, product, minimize and trim, for number texts)
// are built here as the Python builds them: whether a product fits in MAX_STATES decides
// between an automaton and a check, so their state counts must be the Python's.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir_build.h"
#include "json.h"

namespace tg::schema {

// ---- exact arithmetic ------------------------------------------------------------------------

// An integer of any size (Python's int), with the operations the number grammar needs.
class BigInt {
 public:
  BigInt() = default;
  explicit BigInt(int64_t v);
  static BigInt from_digits(std::string_view digits, bool negative = false);  // decimal digits only
  static BigInt pow10(int64_t n);  // n >= 0

  std::string str() const;  // Python's str(): "-" and the digits
  int sign() const { return limbs_.empty() ? 0 : negative_ ? -1 : 1; }
  bool is_zero() const { return limbs_.empty(); }
  bool to_int64(int64_t* out) const;  // false when it does not fit

  BigInt operator-() const;
  friend BigInt operator+(const BigInt& a, const BigInt& b);
  friend BigInt operator-(const BigInt& a, const BigInt& b);
  friend BigInt operator*(const BigInt& a, const BigInt& b);
  friend int compare(const BigInt& a, const BigInt& b);
  friend bool operator==(const BigInt& a, const BigInt& b) { return compare(a, b) == 0; }
  friend bool operator!=(const BigInt& a, const BigInt& b) { return compare(a, b) != 0; }
  friend bool operator<(const BigInt& a, const BigInt& b) { return compare(a, b) < 0; }
  friend bool operator<=(const BigInt& a, const BigInt& b) { return compare(a, b) <= 0; }
  friend bool operator>(const BigInt& a, const BigInt& b) { return compare(a, b) > 0; }
  friend bool operator>=(const BigInt& a, const BigInt& b) { return compare(a, b) >= 0; }
  // Python's divmod (floor division, the remainder has b's sign); b must not be zero.
  static void divmod(const BigInt& a, const BigInt& b, BigInt* quotient, BigInt* remainder);
  static BigInt gcd(BigInt a, BigInt b);  // math.gcd: non-negative
  static BigInt lcm(const BigInt& a, const BigInt& b);  // math.lcm: non-negative

 private:
  static int compare_magnitude(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b);
  static std::vector<uint32_t> add_magnitude(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b);
  static std::vector<uint32_t> sub_magnitude(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b);
  void trim();

  bool negative_ = false;
  std::vector<uint32_t> limbs_;  // base 10^9, least significant first, no zero limb on top
};

// A decimal.Decimal as the Python makes one from a bound: Decimal(int) or Decimal(repr(float)),
// finite. Its value is (-1)^negative * digits * 10^exponent; equal values may be spelled apart
// (5 and 5.0 are "5"e0 and "50"e-1), and stay apart where the Python keys a memo by str(d).
struct Decimal {
  bool negative = false;
  std::string digits = "0";  // the coefficient: no leading zeros ("0" for zero)
  int32_t exponent = 0;

  bool is_zero() const { return digits == "0"; }
  bool is_integral() const;  // d == d.to_integral_value()
};

// _numbers.to_decimal: false where the Python raises (not a number, a boolean, infinite or NaN).
bool to_decimal(const Value& value, Decimal* out);
int compare(const Decimal& a, const Decimal& b);  // by value: -1, 0, 1
// -d as Decimal.__neg__ gives it: rounded to the default context's 28 digits (half even).
Decimal negate(const Decimal& d);

// ---- the JSON number texts --------------------------------------------------------------------

// _numbers.py's constants, built in one builder.
struct NumberTexts {
  explicit NumberTexts(IrBuilder& b);
  Expr digit, nonzero, uint, frac, exp, minus, number, zero_frac, integer, plain_number, non_integer;
};

// ---- a context's numbers ----------------------------------------------------------------------

// The converter's atoms (_type_analysis: what a value can be), as bits: number()'s memo tells
// contexts apart by the whole set, as the Python's frozenset(atoms) does.
enum Atom : uint32_t {
  kAtomNull = 1,
  kAtomBoolean = 2,
  kAtomInt = 4,
  kAtomFrac = 8,
  kAtomString = 16,
  kAtomArray = 32,
  kAtomObject = 64,
};

// The keywords _negate.py writes for `not: {const}` and `not: {multipleOf}`.
constexpr std::string_view kNotConst = "$trellis:notConst";
constexpr std::string_view kNotMultiple = "$trellis:notMultipleOf";

// _number_schema.NumberFacts: the tightest bounds (has_lo/has_hi false: None), the multiples
// required and excluded, the values excluded (numbers only: atom_of int or frac).
struct NumberFacts {
  bool has_lo = false;
  Decimal lo;
  bool lo_inclusive = true;
  bool has_hi = false;
  Decimal hi;
  bool hi_inclusive = true;
  std::vector<Decimal> multiples;
  std::vector<Decimal> not_multiples;
  std::vector<const Value*> excluded;
  std::string pointer;  // the first node's: the site of a rule made for them
};

// _number_schema.number_facts over the nodes' schemas (objects; the first node's pointer).
// False where the Python raises: a boolean or malformed bound, a multipleOf not above zero.
// draft-04's boolean exclusive bounds are _dialect.draft6_forms' to rewrite before.
bool number_facts(IrSpan<const Value*> schemas, std::string_view pointer, NumberFacts* out);

// converter.Options as numbers read it.
struct NumberOptions {
  bool zero_frac = true;        // Options.zero_frac is ZERO_FRAC (false: EMPTY, canonical_integers or draft-04)
  bool const_zero_frac = true;  // Options.const_zero_frac is ZERO_FRAC (false: canonical_integers)
};

// What number() needs of the converter that owns it.
class NumberHost {
 public:
  virtual ~NumberHost() = default;
  // Converter.intersection: a new rule fresh("and") = And(items, wants, escaped), its site
  // (keyword, pointer), and the reference to it; kNoExpr to decline (too many rules).
  virtual Expr intersection(IrSpan<Expr> items, IrSpan<uint8_t> wants, std::string_view keyword,
                            std::string_view pointer, bool escaped) = 0;
};

// Converter.const_expr of a number (an integer or float Value): its texts, `zero_frac` after an
// integral value (Options.zero_frac where only integers are allowed, else const_zero_frac).
// kNoExpr for a value that is not a number.
Expr number_const(IrBuilder& b, const Value& v, Expr zero_frac);

// The NumberSchema mixin: one per conversion, with its builder, host and options.
class NumberSchema {
 public:
  NumberSchema(IrBuilder& b, NumberHost& host, NumberOptions opt);

  // NumberSchema.number: the numbers of `atoms` (kAtomInt, kAtomFrac) that the nodes' number
  // keywords allow; equal facts share one answer (and one rule). kNoExpr: declined.
  Expr number(IrSpan<const Value*> schemas, std::string_view pointer, uint32_t atoms);
  Expr number(const NumberFacts& facts, uint32_t atoms);

  const NumberTexts& texts() const { return texts_; }
  Expr zero_frac() const { return zero_frac_; }              // Options.zero_frac
  Expr const_zero_frac() const { return const_zero_frac_; }  // Options.const_zero_frac
  Expr integer() const { return integer_; }                  // Options.integer

 private:
  Expr build(const NumberFacts& facts, uint32_t atoms);
  Expr with_multiples(const NumberFacts& facts, Expr base);

  IrBuilder& b_;
  NumberHost& host_;
  NumberTexts texts_;
  Expr zero_frac_, const_zero_frac_, integer_;
  std::unordered_map<std::string, Expr> memo_;  // Converter._numbers
};

}  // namespace tg::schema
