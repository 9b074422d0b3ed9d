// Checks: zero-width predicates in the grammar for what a context-free grammar cannot say. At
// a check the parser hands over the raw text of the enclosing region so far; the grammar
// vouches for its syntax and the check decides the rest. Any text is safe to pass: text of
// another shape fails.
#pragma once
#include <cstdint>
#include <vector>

namespace tg {

enum CheckKind : int32_t {
  // `[` item (`,` item)*, up to the end of the last item: it equals no earlier item as JSON
  // values (numbers by exact value, strings by code points, objects regardless of order).
  kUniqueItem = 1,
  // `{` members `,` ... then one more key, up to its closing quote: it names no earlier member
  // and, decoded, none of the keys params list as (length, byte*)* of their UTF-8 (a schema's
  // named properties, where the key must be another: an exclusion trie in the key's automaton
  // cost the core about 30 IR words per key byte).
  kDistinctKey = 2,
  // RFC 3339 `HH:MM:SS[.frac]` and an offset maybe cut short: a second 60 is 23:59:60 UTC
  // under some completion of the offset.
  kLeapSecond = 3,
  // `"` and the escaped content of an ECMAScript pattern (u flag): group names are defined
  // once, `\k<name>` names a group, `\N` is at most the number of capturing groups, {n,m}
  // has n <= m, class ranges are in order and between characters, no `\0` before a digit.
  kRegexRefs = 4,
  // One JSON number, a multiple of P * 10^Q for params [P_hi, P_lo, Q] with
  // P = P_hi << 32 | P_lo in [1, 2^63). Written exponents beyond 10^15 fail.
  kMultipleOf = 5,
  // `"` and the content of a string, base64 (RFC 4648, padded): it decodes to a JSON text.
  kBase64Json = 6,
  // The start of an ECMAScript pattern, after a class, a {n,m} or a group name: nothing
  // kRegexRefs refuses whatever follows (a name repeated, a range or bound out of order).
  kRegexPrefix = 7,
  // A plain number in progress with a fraction (`-`? digits `.` digits), params as kMultipleOf:
  // more fraction digits (maybe none) can still make it a multiple. Placed after each fraction
  // digit, it keeps a mask from leading into a number no digit completes.
  kMultipleOfPrefix = 8,
};

// Whether `kind` is known and takes these parameter words (IR validation).
bool check_valid(int32_t kind, const int32_t* params, int32_t n_params);

// A check as a grammar holds it: its kind and parameters, which check_valid accepted (the IR
// reader checks each once), and what is read from them once rather than at every evaluation:
// a kDistinctKey's keys, sorted (a mask asks the check at every token that ends a key, and a
// scan of 2,500 names there cost 0.15 ms a mask).
struct CheckSpec {
  int32_t kind;
  std::vector<int32_t> params;
  std::vector<std::vector<uint8_t>> keys;
  CheckSpec(int32_t kind, std::vector<int32_t> params);
};

// True when the region text `text[0, len)` passes check `c` (a mask asks at every token that
// crosses a check).
bool run_check(const CheckSpec& c, const uint8_t* text, int64_t len);

// The fewest digits (the smallest of them) that, written after the region text `text[0, len)`,
// an integer in progress (`-`? digits), make it pass check `c`; false where the check has
// no such rule (kMultipleOf of an integer P * 10^Q has one, up to 2^20 zeros) or the text is no such
// integer. A completion search cannot find them byte by byte: a 14-digit divisor may need 14.
// kMultipleOf of any P * 10^Q also has one for a plain number with a fraction (`-`? digits `.`
// digits?): fraction digits; and with Q < 0 for an integer in progress: a '.' and fraction digits,
// or integer digits.
bool check_digits(const CheckSpec& c, const uint8_t* text, int64_t len, std::vector<uint8_t>* out);

}  // namespace tg
