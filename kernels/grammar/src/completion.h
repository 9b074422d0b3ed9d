// Shortest completions: for every state, the fewest bytes that finish its rule from there,
// a called rule costing its own shortest string. A parser stack then finishes in the sum of
// its frames' distances, so the matcher's shortest completion is the cheapest live stack.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "automaton.h"

namespace tg {

struct Shortest {
  static constexpr int64_t kInf = int64_t(1) << 62;  // cannot complete
  // A completion exists and is at least this long: finite sums saturate here, not at kInf
  // (minItems 2^63 is completable, only not in any practical length).
  static constexpr int64_t kLong = kInf / 2;
  static int64_t add(int64_t a, int64_t b) { return a >= kInf || b >= kInf ? kInf : std::min(a + b, kLong); }
  static constexpr int32_t kDone = -1;                // move: complete the rule here
  bool ready = false;
  std::vector<int64_t> dist;  // state -> bytes to complete its rule
  // state -> first move of a shortest path: kDone, a byte (0..255), or 256 + index into calls.
  std::vector<int32_t> move;
  // Appends a shortest string that takes `state`'s rule to completion.
  void emit(const Automaton& a, int32_t state, std::vector<uint8_t>* out) const;
};

void compute_shortest(const Automaton& a, Shortest* out);

}  // namespace tg
