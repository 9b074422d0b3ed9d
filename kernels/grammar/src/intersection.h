// The language of an AND node (ir.h) as one DFA over bytes: the strings that every wanted
// child matches and no other child does, built as the product of the children's DFAs. The
// automaton builder (automaton.cpp) writes it into the rule that holds the node.
#pragma once
#include <cstdint>
#include <vector>

#include "automaton.h"
#include "ir.h"
#include "status.h"

namespace tg {

struct ByteDfa {
  std::vector<int32_t> begin;  // state -> its first run; n_states() + 1 entries
  std::vector<ByteRun> runs;   // per state, in byte order, disjoint
  std::vector<uint8_t> accept;
  int32_t n_states() const { return static_cast<int32_t>(accept.size()); }
};

// Product states built before trimming, and left after it: the front-end's products were
// refused past 4,000 states, and what is kept here is never more than what it built.
constexpr int32_t kMaxProductStates = 4'000;
constexpr int32_t kMaxExploredStates = 1 << 15;
// NFA nodes held by one child's DFA states together (the subset construction's memory), and
// NFA nodes built for all children of all AND nodes together.
constexpr int64_t kMaxSubsetNodes = int64_t{1} << 22;
constexpr int64_t kMaxChildNfaNodes = int64_t{1} << 19;

// The product of AND node `node`'s children (read_ir checked that they are regular), trimmed
// to the states from which acceptance is reachable (start state 0; an empty language is one
// state that accepts nothing). NFA nodes built for the children count against `budget`
// (kMaxChildNfaNodes for a grammar's AND nodes together).
Status intersection_dfa(const Ir& ir, int32_t node, int64_t* budget, ByteDfa* out);

// Bytes a JSON string writes escaped (control bytes, quote, backslash), and the escape.
bool json_escaped(int32_t byte);
const char* json_escape_of(int32_t byte);

}  // namespace tg
