// States that no token can tell apart share one token-mask cache.
//
// A long counted repetition (`.{10000}`, a string's maxLength) is a chain of states, one per
// position. Far from both ends, the positions accept the same tokens, yet each would build its
// own cache (a walk of the whole vocabulary) the first time the parser stands there.
#pragma once
#include <cstdint>
#include <vector>

#include "automaton.h"

namespace tg {

// Per state, the smallest state of its class. Two states are in one class when they belong to
// one rule and agree to a depth of `horizon` bytes (the longest token): whether the rule may
// complete, which bytes lead on and to which classes, which rules they call and where those
// calls return, the return seen at the depth the called rule's shortest match reaches it (a
// string's 16-character blocks). A call to a rule that may match the empty string (a check
// among them) returns to the very same state in both, as the return comes before any byte.
std::vector<int32_t> cache_representatives(const Automaton& a, int32_t horizon);

}  // namespace tg
