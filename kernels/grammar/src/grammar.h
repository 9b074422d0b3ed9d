// A compiled grammar: automata plus the adaptive token-mask cache, filled lazily.
//
// For a state s that can consume bytes, walking the vocabulary trie from the frame (s, bottom)
// sorts every token into one of three classes, independent of what lies below s on the stack:
//   accepted  - the token's bytes are consumed inside s's rule (or end it exactly);
//   rejected  - the bytes fail inside the rule before it could complete;
//   uncertain - the rule completes before the token's last byte, so the rest depends on the
//               rules below; these few are checked against the real stack at mask time.
// After the rule completes, the walk goes on speculatively from every state that can follow
// the rule anywhere in the grammar: a token that fails in all of them is rejected outright,
// which keeps the uncertain lists short. A cache kept per return state (see cache_for) knows
// the one continuation: a token alive in it is accepted, and only tokens that complete the
// caller's rule too are uncertain.
#pragma once
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "automaton.h"
#include "completion.h"
#include "mask_walk.h"
#include "parser.h"
#include "vocab.h"

namespace tg {

struct TokenCache {
  std::vector<uint32_t> accepted;   // bitmask words, or empty when nothing is accepted
  std::vector<int32_t> uncertain;   // positions in Vocab::order, increasing
};

struct Grammar {
  const Vocab* vocab = nullptr;
  Automaton automaton;
  // Per state, built on first use: a pointer each, as most states never need one and
  // compiling should not pay for their room.
  std::vector<std::unique_ptr<TokenCache>> cache;
  // rule -> the states where parsing may continue once the rule completes, over all call
  // sites (tail calls resolved to their callers' continuations).
  std::vector<std::vector<int32_t>> contexts;

  int64_t caches_built = 0;
  int64_t cache_bytes = 0;

  // The cache of a frame in `state` whose parent frame is in state `ret` (-1: none, the bottom).
  // A narrow state (few bytes lead on: JSON whitespace) of a rule called from many places gets a
  // cache per return state: its walk speculates only into that caller, not into every place
  // the rule is called from (for the shared whitespace rule, nearly all of the grammar).
  const TokenCache& cache_for(int32_t state, int32_t ret = -1);
  // Whether frames in `state` use per-return-state caches.
  bool by_site(int32_t state);
  // Whether what may follow the rule's completion, before any byte, includes a check: a token
  // that ends exactly where the rule does then needs the real stack (the check reads the text).
  // Found on first use.
  bool ends_checked(int32_t rule);
  // Builds up to `max_caches` (all when negative) of the caches not built yet; returns how many.
  int32_t warm(int32_t max_caches);
  // Per-state shortest completions, computed on first use.
  const Shortest& shortest() {
    if (!shortest_.ready) compute_shortest(automaton, &shortest_);
    return shortest_;
  }

 private:
  Shortest shortest_;
  void build_cache(int32_t state, const std::vector<int32_t>* after, bool exact, TokenCache* out);
  // One walk of build_cache with checks decided by `mode`: marks accepted trie positions in
  // positions_ (words [*lo, *hi)), appends uncertain ones; returns whether it met a check.
  bool walk_trie(int32_t state, const std::vector<int32_t>* after, bool exact, CheckMode mode, int64_t* marked,
                 int32_t* lo, int32_t* hi, std::vector<int32_t>* uncertain);
  std::unique_ptr<MaskWalk> walk_;  // reused by every cache_for: its tables keep their memory
  std::unordered_map<uint64_t, std::unique_ptr<TokenCache>> site_cache_;  // (state, ret) -> cache
  std::vector<int8_t> by_site_;  // per state: -1 not known yet
  std::vector<int8_t> ends_checked_;  // per rule: -1 not known yet
  std::vector<int32_t> seen_rule_, seen_state_;  // ends_checked's marks: the rule they were set for
  std::vector<int32_t> site_after_;
  std::vector<uint64_t> positions_;  // cache_for's accepted trie positions, all clear between calls
};

Status compile_grammar(const Vocab& vocab, const int32_t* words, int32_t n_words, Grammar* out);

// Walks tokens from one frame with the real stack below it: the per-depth parser states are
// reused between consecutive tokens that share a prefix.
class TokenWalker {
 public:
  // `text`: the bytes accepted so far, which checks read; tokens are appended while walked.
  TokenWalker(const Grammar& g, FramePool& pool, std::vector<uint8_t>* text)
      : g_(g), pool_(pool), text_(text), stepper_(g.automaton) {}
  // Sets the bit of every token among `positions` (in Vocab::order) valid from `frame`.
  void check(int32_t frame, const std::vector<int32_t>& positions, uint32_t* words);

 private:
  const Grammar& g_;
  FramePool& pool_;
  std::vector<uint8_t>* text_;
  Stepper stepper_;
  std::vector<StateSet> levels_;
};

}  // namespace tg
