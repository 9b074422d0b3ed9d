// Token-level matching: the parser state after each accepted token, kept for rollback.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grammar.h"
#include "parser.h"

namespace tg {

class Matcher {
 public:
  explicit Matcher(Grammar* g);
  void reset();
  void fill_mask(uint32_t* __restrict words);
  // 1 accepted, 0 refused (state unchanged).
  int32_t accept_token(int32_t id);
  int32_t accept_bytes(const uint8_t* data, int32_t n);
  bool rollback(int32_t n);
  int32_t history_length() const { return static_cast<int32_t>(history_.size()) - 1; }
  bool is_terminated() const { return history_.back().terminated; }
  bool can_terminate() const { return history_.back().set.can_end; }
  int32_t jump_forward(uint8_t* out, int32_t cap);
  // A shortest byte string after which the matcher can terminate (empty when it already can).
  // Returns its length, or -1 when there is none (terminated). Longer than kMaxCompletion (a
  // nest of rules can need exponentially many bytes), only the length is returned. Checks are
  // unknown to the distances: when they refuse the distances' string, a search finds the
  // shortest they accept (-1 when it finds none within its budget).
  static constexpr int64_t kMaxCompletion = int64_t(1) << 24;
  int64_t shortest_completion(std::vector<uint8_t>* out);
  const Vocab& vocab() const { return *g_->vocab; }
  // A parser pool passed FramePool::kMaxNodes: the call that did it stopped early (a byte
  // refused, a mask left short) and the matcher holds until reset.
  bool over_budget() const { return over_budget_; }
  // The frames one accept may look at, stepped or visited by the closures after each byte
  // (Stepper::work): an ambiguous grammar fed a long text at once keeps many frames alive at every
  // byte, quadratic time in all (two unbounded repetitions of one byte in a row, 2n bytes: about
  // n^2/2 steps; nested counted repetitions close over every split point at each byte). Past it
  // the accept stops, refused, and the matcher is as it was before (1.5 to 3 s of work).
  static constexpr int64_t kMaxStepWork = int64_t(1) << 28;
  // Whether an accept stopped at kMaxStepWork since the last asking (each call reports its own).
  bool take_over_work() { return std::exchange(over_work_, false); }
  // Whether a mask stopped since the last asking at a cache its walk could not finish
  // (MaskWalk::kMaxWork): refused, the matcher as it was.
  bool take_over_mask_work() { return std::exchange(over_mask_work_, false); }

 private:
  struct Entry {
    StateSet set;
    bool terminated = false;
    size_t text_len = 0;
  };
  bool advance(const uint8_t* data, int32_t n, StateSet* out);
  void step(FramePool& pool, const StateSet& in, uint8_t byte, StateSet* out);
  // Whether `bytes` take `from` (frames in scratch_, the text at its end) to where it can end.
  bool reaches_end(const StateSet& from, const std::vector<uint8_t>& bytes);
  // The completion the distances find cheapest from `set` (checks unseen); its length or -1.
  // With `out` null, only the length.
  int64_t cheapest(const FramePool& pool, const StateSet& set, std::vector<uint8_t>* out);
  int64_t finish_cost(const FramePool& pool, int32_t id);
  int64_t search_completion(const StateSet& from, std::vector<uint8_t>* out);
  // Digits computed by a check (check_digits) on a live frame's region text, then the
  // distances' completion, if the checks let it end: where searching digits is hopeless.
  int64_t digits_completion(const StateSet& from, std::vector<uint8_t>* out);
  // Sets the bits of the tokens that the caches of pending_ leave to the real stack and that are
  // valid from their frames. The frames are walked together, one walk over the union of their
  // tokens: a token is valid when it is from some frame, and a frame's cache refuses only what no
  // stack accepts. An ambiguous grammar keeps a frame per derivation depth alive (hundreds after a
  // few hundred bytes): a walk per frame would step the trie once each.
  void check_uncertain(uint32_t* words);

  Grammar* g_;
  bool over_budget_ = false;
  bool over_work_ = false;
  bool over_mask_work_ = false;
  FramePool pool_, scratch_;
  Stepper stepper_;
  std::vector<Entry> history_;
  std::vector<uint8_t> text_;  // every byte accepted: the checks read it
  StateSet a_, b_;
  std::vector<const TokenCache*> seen_caches_, frame_caches_;
  std::vector<int32_t> returns_, return_todo_;
  std::unordered_map<int32_t, std::pair<int64_t, int32_t>> costs_;  // finish_cost's memo
  // Stacks by what they do, not where the regions in them start: the answers kept are those no
  // check read.
  FrameNames names_{false};
  // The (frame, cache) pairs of a mask whose caches leave tokens to the real stack.
  std::vector<std::pair<int32_t, const TokenCache*>> pending_;
  // check_uncertain's answers, by the sorted (cache, the name of the frame's parent) of the
  // pairs walked: the valid tokens' ids.
  using CheckedKey = std::vector<std::pair<const TokenCache*, int32_t>>;
  struct CheckedHash {
    size_t operator()(const CheckedKey& k) const {
      size_t h = k.size();
      for (const auto& [cache, parent] : k) {
        h ^= std::hash<const void*>()(cache) ^ (static_cast<size_t>(parent) * 0x9E3779B97F4A7C15ull);
        h *= 0x100000001B3ull;
      }
      return h;
    }
  };
  std::unordered_map<CheckedKey, std::vector<int32_t>, CheckedHash> checked_;
  size_t kept_ids_ = 0;  // in checked_, plus one per answer
  CheckedKey key_;
  std::vector<int32_t> valid_, walk_frames_, positions_, merged_;
  TokenWalker walker_;  // after scratch_: it walks speculative frames there
};

}  // namespace tg
