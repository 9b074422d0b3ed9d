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
//
// Threads: a compiled grammar is shared by the matchers of many threads at once (each matcher
// belongs to one thread at a time). Everything built lazily (the caches, the shortest
// completions, the per-state answers below) is built under one lock and published through an
// atomic pointer or flag: once built, a look-up is one acquire load, with no lock.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "automaton.h"
#include "cache_classes.h"
#include "completion.h"
#include "mask_walk.h"
#include "parser.h"
#include "vocab.h"

// wasm32-wasi without the atomics feature has one thread and no std::mutex: no locking there.
#if defined(__wasm__) && !defined(__wasm_atomics__)
#define TG_THREADS 0
#else
#define TG_THREADS 1
#include <mutex>
#endif

namespace tg {

#if TG_THREADS
using BuildMutex = std::mutex;
#else
struct BuildMutex {
  void lock() {}
  void unlock() {}
};
#endif

// Holds a BuildMutex for a scope (also while an exception unwinds it).
class BuildLock {
 public:
  explicit BuildLock(BuildMutex& m) : m_(m) { m_.lock(); }
  ~BuildLock() { m_.unlock(); }
  BuildLock(const BuildLock&) = delete;
  BuildLock& operator=(const BuildLock&) = delete;

 private:
  BuildMutex& m_;
};

// Zeroed memory for `n` entries of `size` bytes, from calloc: the pages of a large table of
// which few entries are ever set are neither written nor faulted in until one is (the cache
// slots, 16 bytes a state, were written whole at every compile though most states never get a
// cache). Throws std::bad_alloc (aborts without exceptions) as operator new does.
void* zeroed_table(size_t n, size_t size);

struct FreeTable {
  void operator()(void* p) const { std::free(p); }
};

// A fixed number of write-once pointers that own what they point to: read without a lock,
// written (published) under the builder's lock, each at most once.
template <class T>
class PublishedSlots {
  // All bits zero is a null pointer in a lock-free atomic: the table starts as zeroed memory.
  static_assert(sizeof(std::atomic<T*>) == sizeof(T*), "an atomic pointer is a pointer");

 public:
  PublishedSlots() = default;
  PublishedSlots(const PublishedSlots&) = delete;
  PublishedSlots& operator=(const PublishedSlots&) = delete;
  ~PublishedSlots() { free_all(); }
  // Only before the slots are shared.
  void reset(size_t n) {
    free_all();
    slots_.reset(static_cast<std::atomic<T*>*>(zeroed_table(n, sizeof(std::atomic<T*>))));
    n_ = n;
  }
  size_t size() const { return n_; }
  // Null until published; acquire: what the builder wrote before publishing is visible.
  T* get(size_t i) const { return slots_.get()[i].load(std::memory_order_acquire); }
  T& publish(size_t i, std::unique_ptr<T> value) {
    published_.push_back(i);  // first: if it fails, `value` is still freed
    T* p = value.release();
    slots_.get()[i].store(p, std::memory_order_release);
    return *p;
  }

 private:
  // Only the published slots: reading every one would touch every page.
  void free_all() {
    for (size_t i : published_) delete slots_.get()[i].load(std::memory_order_relaxed);
    published_.clear();
    n_ = 0;
  }
  std::unique_ptr<std::atomic<T*>, FreeTable> slots_;
  std::vector<size_t> published_;
  size_t n_ = 0;
};

struct TokenCache {
  struct Word {
    uint32_t index, bits;
  };
  // The accepted tokens' bitmask: every word, or, when few tokens are accepted (most states of
  // a structure accept a few dozen), only the words that hold them, increasing; both empty when
  // nothing is accepted. Such a mask and its cache's build then cost those tokens, not the
  // vocabulary's 32 KiB of words (262,144 tokens).
  std::vector<uint32_t> accepted;
  std::vector<Word> accepted_words;
  std::vector<int32_t> uncertain;   // positions in Vocab::order, increasing
  // Its walk passed MaskWalk::kMaxWork: the cache holds nothing and a mask that needs it is
  // refused (kept, so that the walk is not tried again).
  bool over_work = false;
  void add_accepted(uint32_t* __restrict words, int32_t n_words) const {
    if (!accepted.empty()) {
      const uint32_t* __restrict acc = accepted.data();
      for (int32_t w = 0; w < n_words; ++w) words[w] |= acc[w];
    }
    for (const Word& w : accepted_words) words[w.index] |= w.bits;
  }
};

struct Grammar {
  const Vocab* vocab = nullptr;
  Automaton automaton;
  // rule -> the states where parsing may continue once the rule completes, over all call
  // sites (tail calls resolved to their callers' continuations). Sorted.
  std::vector<std::vector<int32_t>> contexts;

  std::atomic<int64_t> caches_built{0};
  std::atomic<int64_t> cache_bytes{0};

  // Sizes the lazily built tables once the automaton is known (compile_grammar calls it).
  void prepare_lazy_tables();
  // The cache of a frame in `state` whose parent frame is in state `ret` (-1: none, the bottom).
  // A narrow state (few bytes lead on: JSON whitespace) of a rule called from many places gets a
  // cache per return state: its walk speculates only into that caller, not into every place
  // the rule is called from (for the shared whitespace rule, nearly all of the grammar).
  // Safe from many threads at once; built on first use.
  const TokenCache& cache_for(int32_t state, int32_t ret = -1);
  // Whether frames in `state` use per-return-state caches: a narrow state, one whose rule ends
  // within a few bytes, or one whose own cache leaves many tokens to the real stack (a character
  // of a long counted repetition, where every longer token ends the rule and goes on in the
  // caller).
  bool by_site(int32_t state);
  // Whether every path from `state` leaves its rule within `n` bytes, calling no rule (one
  // character of a count): every longer token goes on in the caller.
  bool completes_within(int32_t state, int32_t n) const;
  // Builds up to `max_caches` (all when negative) of the caches not built yet; returns how many,
  // or -1 when one of them passed the walk's work limit (the rest not built).
  int32_t warm(int32_t max_caches);
  // Per-state shortest completions, computed on first use (thread-safe).
  const Shortest& shortest();

 private:
  // The per-return-state cache of (state, ret), both representatives: one slot per entry of
  // context_reps_, found by binary search; a `ret` outside them (not expected) falls back to a map under the lock.
  const TokenCache& site_cache(int32_t state, int32_t ret);
  const TokenCache* built_site_cache(int32_t state, int32_t ret) const;
  // These run under mutex_.
  std::unique_ptr<TokenCache> new_cache(int32_t state, const std::vector<int32_t>* after, bool exact);
  void build_cache(int32_t state, const std::vector<int32_t>* after, bool exact, TokenCache* out);
  // One walk of build_cache with checks decided by `mode`: marks accepted trie positions in
  // positions_ (words [*lo, *hi)), appends uncertain ones; returns whether it met a check.
  bool walk_trie(int32_t state, const std::vector<int32_t>* after, bool exact, CheckMode mode, int64_t* marked,
                 int32_t* lo, int32_t* hi, std::vector<int32_t>* uncertain);
  // Whether what may follow the rule's completion, before any byte, includes a check: a token
  // that ends exactly where the rule does then needs the real stack (the check reads the text).
  bool ends_checked(int32_t rule);
  // The states that may follow any rule above `after`'s, once theirs completes (see MaskWalk).
  void states_beyond(const std::vector<int32_t>& after, std::vector<int32_t>* out);
  const std::vector<int32_t>& beyond_of(int32_t state, const std::vector<int32_t>& after, bool exact);

  BuildMutex mutex_;  // held while anything below is built
  // Per state, built on first use: a pointer each, as most states never need one and
  // compiling should not pay for their room.
  PublishedSlots<TokenCache> own_caches_;
  PublishedSlots<PublishedSlots<TokenCache>> site_caches_;  // state -> per index in contexts
  std::unordered_map<uint64_t, std::unique_ptr<TokenCache>> odd_site_caches_;  // (state, ret)
  std::unique_ptr<std::atomic<int8_t>[]> by_site_;  // per state: -1 not known yet (any thread may fill it)
  std::atomic<bool> shortest_ready_{false};
  Shortest shortest_;
  // Per state, the state whose caches it shares (cache_classes.h); per rule, the representatives
  // of its contexts, sorted: the own cache's walk speculates into these, and a site cache is
  // kept per representative of the return state. Both are written a rule at a time, on first
  // use: rep() and prepare_rule().
  std::vector<int32_t> rep_;
  std::vector<std::vector<int32_t>> context_reps_;
  std::unique_ptr<CacheClasses> classes_;
  std::vector<uint8_t> classed_;  // per rule, under mutex_: rep_ holds its states'
  std::unique_ptr<std::atomic<bool>[]> prepared_;  // per rule: rep_ of its states and context_reps_ written
  // `state`'s representative; prepares its rule first if no thread has (then under mutex_).
  int32_t rep(int32_t state);
  // Under mutex_: classes `rule`'s states and its contexts' rules, then its context_reps_.
  void prepare_rule(int32_t rule);
  // Scratch of the builds, under mutex_.
  std::unique_ptr<MaskWalk> walk_;  // reused by every build: its tables keep their memory
  std::unordered_map<uint64_t, std::vector<int32_t>> beyond_memo_;  // beyond_of's, per (rule, exact)
  const std::vector<int32_t>* beyond_ = nullptr;  // the build's, from beyond_memo_
  std::vector<uint8_t> rule_marks_;  // states_beyond's rules met
  std::vector<int8_t> ends_checked_;  // per rule: -1 not known yet
  std::vector<int32_t> seen_rule_, seen_state_;  // ends_checked's marks: the rule they were set for
  std::vector<int32_t> site_after_;
  std::vector<uint64_t> positions_;  // accepted trie positions, all clear between builds
  // Per plain state s, built on first use: the vocabulary's run index (the widest class C)
  // whose bytes all take s along one chain of plain states, states[o + 1] from states[o], that
  // either loops on its last state (`[a-z]+`; s may come before it) or ends where they all fail
  // (a count: `[a-z]{2,8}`); index -1 none, -2 not known yet. Then the other bytes that some
  // state of the chain takes, whose exits are walked.
  struct RunChain {
    int8_t index = -2;
    uint8_t enter = 0;        // a byte of C
    bool bounded = false;     // no more than states.size() - 1 of C's bytes go on
    std::vector<int32_t> states;
    std::vector<uint8_t> exit_bytes;
  };
  const RunChain& run_chain(int32_t state);
  std::vector<RunChain> run_chains_;
  // The same for a configuration of the current walk (states: configurations, whose tokens past
  // the first are accepted): a loop or a count that may end its rule (`[a-z]+`, `[a-z]{1,40}` at
  // a grammar's end) is not plain.
  const RunChain& config_run_chain(int32_t config, bool exact, bool checked_end);
  std::vector<int32_t> config_runs_;  // per configuration of the current walk: index in config_chains_, -1 none, -2 not known
  std::deque<RunChain> config_chains_;  // a deque: references stay while the walk adds more
  std::vector<int32_t> run_exits_;  // walk_trie's exits to walk, a stretch per nested run
};

Status compile_grammar(const Vocab& vocab, const int32_t* words, int32_t n_words, Grammar* out);
Status compile_grammar(const Vocab& vocab, const Ir& ir, Grammar* out);  // ir read already

// Walks tokens from frames with the real stack below them: the per-depth parser states are
// reused between consecutive tokens that share a prefix.
class TokenWalker {
 public:
  // `text`: the bytes accepted so far, which checks read; tokens are appended while walked.
  TokenWalker(const Grammar& g, FramePool& pool, std::vector<uint8_t>* text)
      : g_(g), pool_(pool), text_(text), stepper_(g.automaton) {}
  // Sets the bit of every token among `positions` (in Vocab::order) valid from some frame of
  // `frames` (distinct), and appends its id to `valid_ids`. Returns whether a check read the text
  // (the answer is then the text's, not only the frames').
  bool check(const std::vector<int32_t>& frames, const std::vector<int32_t>& positions, uint32_t* words,
             std::vector<int32_t>* valid_ids);

 private:
  // A set stepped within this check (and kept), or -1: the memo is full or checks read the text.
  int32_t keep(const StateSet& set);

  const Grammar& g_;
  FramePool& pool_;
  std::vector<uint8_t>* text_;
  Stepper stepper_;
  std::vector<StateSet> levels_;
  // Bytes of one class (Automaton::byte_class) step every set alike, so tokens that are one
  // string of classes share their steps, unless checks read the text: under an ambiguous
  // grammar a step costs a closure over hundreds of frames, and most of a vocabulary is a few
  // strings of classes. Within one check, steps_ maps (a kept set, a class) to the kept set
  // after it; kept_ holds the sets, at most kMaxKeptFrames frames in all.
  static constexpr size_t kMaxKeptFrames = size_t(1) << 22;
  FlatMap steps_;
  std::vector<StateSet> kept_;
  int32_t n_kept_ = 0;
  size_t kept_frames_ = 0;
  std::vector<int32_t> kept_at_;  // per depth: levels_[d] as a kept set, or -1
};

}  // namespace tg
