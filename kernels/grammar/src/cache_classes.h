// States that no token can tell apart share one token-mask cache.
//
// A long counted repetition (`.{10000}`, a string's maxLength) is a chain of states, one per
// position. Far from both ends, the positions accept the same tokens, yet each would build its
// own cache (a walk of the whole vocabulary) the first time the parser stands there.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "automaton.h"

namespace tg {

// Per state, the smallest state of its class. Two states are in one class when they belong to
// one rule and agree to a depth of `horizon` bytes (the longest token): whether the rule may
// complete, which bytes lead on and to which classes, which rules they call and where those
// calls return, the return seen at the depth the called rule's shortest match reaches it (a
// string's calls of one or 16 characters). A call to a rule that may match the empty string (a
// check among them) returns to the very same state in both, as the return comes before any byte.
//
// A rule's classes depend on its own states alone, so they are found one rule at a time, when
// a mask first needs them: the first masks of a large schema stand in a few of its rules.
class CacheClasses {
 public:
  CacheClasses(const Automaton& a, int32_t horizon);
  ~CacheClasses();
  CacheClasses(const CacheClasses&) = delete;
  CacheClasses& operator=(const CacheClasses&) = delete;
  // Writes rep[s], the smallest state of s's class, for every state s of `rule`.
  void classify(int32_t rule, int32_t* rep);

 private:
  class MinLengths;
  const Automaton& a_;
  const int32_t horizon_;
  const std::vector<uint8_t>& nullable_;  // the automaton's
  std::vector<int32_t> size_;  // per rule: its states
  std::unique_ptr<MinLengths> min_length_;  // shared by the rules: each called rule searched once
};

}  // namespace tg
