// The compiled grammar: one deterministic automaton per (non-inlined) rule, over bytes and
// rule calls. Non-recursive rules small enough are inlined into their callers, so most
// grammars end up as a few recursive rules with large local automata.
#pragma once
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "checks.h"
#include "ir.h"
#include "status.h"

namespace tg {

struct Call {
  int32_t rule;
  int32_t next;  // state to continue in once the called rule completes
};

struct ByteRun {
  int32_t lo, hi, to;  // the bytes lo..hi lead to state `to`
  bool covers(uint8_t byte) const { return uint32_t(byte - lo) <= uint32_t(hi - lo); }
};

// The boundaries of runs (each run's first byte and the byte past its last) as a 257-bit set,
// listed in order: the pieces of bytes within which every run added has one target. No sort.
class RunBounds {
 public:
  void clear() { bits_[0] = bits_[1] = bits_[2] = bits_[3] = bits_[4] = 0; }
  void add(const ByteRun& r) {
    bits_[r.lo >> 6] |= uint64_t{1} << (r.lo & 63);
    bits_[(r.hi + 1) >> 6] |= uint64_t{1} << ((r.hi + 1) & 63);
  }
  void list(std::vector<int32_t>* out) const {
    out->clear();
    for (int32_t w = 0; w < 5; ++w)
      for (uint64_t b = bits_[w]; b; b &= b - 1) out->push_back(w * 64 + __builtin_ctzll(b));
  }

 private:
  uint64_t bits_[5] = {0, 0, 0, 0, 0};
};

// Leaves new elements uninitialized on resize: the transition table is large (up to 1 KiB a
// state) and every entry is written right after, so zeroing it first would be wasted work.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind { using other = UninitializedAllocator<U>; };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) {}
  template <class U>
  void construct(U* p) { ::new (static_cast<void*>(p)) U; }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) { ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...); }
};

// Rules are the IR's, then one per REGION node that a check reads (its body: calling it marks
// where the region's text starts; other regions are built as their bodies) and one per CHECK
// node (matches the empty string when its predicate holds).
struct Automaton {
  int32_t root = -1;                 // root rule
  bool empty = false;                // the root matches no string: every parser state is dead
  std::vector<int32_t> start;        // rule -> start state, -1 when the rule has no automaton
  std::vector<int32_t> rule_of;      // state -> rule; a rule's states are numbered consecutively from its start
  std::vector<uint8_t> final;        // state -> the rule may complete here
  // state -> where its row begins in `next`; -1 when no byte leaves it; -2 - (i << 1 | k) when
  // 1 + k runs of bytes leave it, from runs[i]: a literal's states, most of a schema grammar's,
  // need no row, nor do two runs (a key's letter or any other: half of a large schema's rows;
  // rows were two fifths of its compile time, most of it the kernel zeroing their pages).
  std::vector<int32_t> row;
  // The row word of a state that `n` (1 or 2) runs leave, from runs[first] (step() reads it).
  static int32_t runs_row(int32_t first, int32_t n) { return -2 - (first << 1 | (n - 1)); }
  // Bytes that no state tells apart are one class, and a row has a target per class (-1 =
  // none): a JSON grammar's rows are a few dozen wide instead of 256 (a large schema's tables
  // were tens of megabytes, half of its compile).
  uint8_t byte_class[256] = {};
  uint8_t class_first[256] = {};     // class -> its first byte
  int32_t n_classes = 0;
  std::vector<int32_t, UninitializedAllocator<int32_t>> next;
  // The same transitions as runs of bytes with one target, per state in byte order: what the
  // compile-time passes read (a few per state instead of a row's 256 entries).
  std::vector<int32_t> run_begin;    // state -> first run; size n_states + 1
  std::vector<ByteRun> runs;
  std::vector<int32_t> call_begin;   // state -> first call; size n_states + 1
  std::vector<Call> calls;
  // state -> completing is all that is left (final, no bytes, no calls): a call returning
  // here is a tail call, so the parser need not keep its frame (right recursion stays flat).
  std::vector<uint8_t> tail;
  // state -> bytes leave it, and it neither calls nor completes: stepping into it needs no closure.
  std::vector<uint8_t> plain;
  int32_t first_node_rule = 0;       // rules from here on are REGION and CHECK nodes'
  std::vector<int32_t> check_of;     // rule -> index into checks, -1 when the rule is no check
  std::vector<uint8_t> region;       // rule -> a region: its callers mark where its text starts
  std::vector<CheckSpec> checks;
  std::vector<uint8_t> nullable;     // rule -> it may complete without consuming a byte (a check rule among them)

  int32_t n_states() const { return static_cast<int32_t>(rule_of.size()); }
  bool has_bytes(int32_t s) const { return row[s] != -1; }
  int32_t step(int32_t s, uint8_t byte) const {
    const int32_t r = row[s];
    if (r >= 0) return next[r + byte_class[byte]];
    if (r == -1) return -1;
    const int32_t k = -2 - r;  // runs_row's
    const ByteRun* run = &runs[k >> 1];
    if (run->covers(byte)) return run->to;
    return (k & 1) && run[1].covers(byte) ? run[1].to : -1;
  }
  // Whether every byte steps s and t alike.
  bool same_steps(int32_t s, int32_t t) const {
    for (int32_t c = 0; c < n_classes; ++c)
      if (step(s, class_first[c]) != step(t, class_first[c])) return false;
    return true;
  }
  const Call* calls_begin(int32_t s) const { return calls.data() + call_begin[s]; }
  const Call* calls_end(int32_t s) const { return calls.data() + call_begin[s + 1]; }
  const ByteRun* runs_begin(int32_t s) const { return runs.data() + run_begin[s]; }
  const ByteRun* runs_end(int32_t s) const { return runs.data() + run_begin[s + 1]; }
};

struct Limits {
  int64_t max_nfa_nodes = 2'000'000;
  int32_t max_dfa_states = 131'072;  // at most 256 transitions each: at most 128 MiB of tables
  // NFA nodes in all of one rule's DFA states together: the subset construction's memory and
  // time (a regex of 5,000 `#.+` reached the state limit only after a minute and gigabytes).
  int64_t max_subset_nodes = int64_t{1} << 24;
  int32_t max_depth = 2'000;          // expression nesting
  int64_t inline_size = 20'000;       // largest rule body (in NFA-node units) to inline
  int64_t inline_small = 48;          // rules at most this size are inlined wherever used
};

Status build_automaton(const Ir& ir, const Limits& limits, Automaton* out);

}  // namespace tg
