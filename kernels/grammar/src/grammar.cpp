#include "grammar.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <new>

#include "cache_classes.h"
#include "ir.h"

namespace tg {

namespace {

void compute_contexts(const Automaton& a, std::vector<std::vector<int32_t>>* out) {
  const int32_t n_rules = static_cast<int32_t>(a.start.size());
  std::vector<std::vector<int32_t>> direct(n_rules), tail_callers(n_rules);
  for (int32_t s = 0; s < a.n_states(); ++s)
    for (const Call* c = a.calls_begin(s); c != a.calls_end(s); ++c) {
      if (a.tail[c->next]) tail_callers[c->rule].push_back(a.rule_of[s]);
      else direct[c->rule].push_back(c->next);
    }
  out->assign(n_rules, {});
  // seen[q] == r + 1: q met in rule r's search (clearing a flag per rule per search was a
  // large grammar's rules squared)
  std::vector<int32_t> seen(n_rules, 0), todo;
  for (int32_t r = 0; r < n_rules; ++r) {
    if (a.start[r] < 0) continue;
    std::vector<int32_t> states;
    todo.assign(1, r);
    seen[r] = r + 1;
    while (!todo.empty()) {
      int32_t q = todo.back();
      todo.pop_back();
      states.insert(states.end(), direct[q].begin(), direct[q].end());
      for (int32_t caller : tail_callers[q])
        if (seen[caller] != r + 1) { seen[caller] = r + 1; todo.push_back(caller); }
    }
    std::sort(states.begin(), states.end());
    states.erase(std::unique(states.begin(), states.end()), states.end());
    (*out)[r] = std::move(states);
  }
}

constexpr int32_t kWorthReaching = 16;  // smaller subtrees are walked faster than checked
constexpr int32_t kWorthIndexing = 16;  // nor are they worth a run index's look-ups
constexpr size_t kFewExitBytes = 16;  // a run index's exits are looked up byte by byte

// Whether every token below trie node i is accepted from `config`, known without visiting them:
// every byte below leads back to the configuration (the body of a string), or every string of
// those bytes as long as the subtree is deep stays in plain states (a counted string, a search).
bool skips_subtree(MaskWalk& walk, int32_t config, const Vocab& v, int32_t i) {
  const int32_t bytes = v.below[i];
  if (walk.loops_on(config, v.byte_sets[bytes])) return true;
  return v.trie[i].end - i > kWorthReaching &&
         walk.alive_within(config, v.byte_sets[bytes], bytes, v.trie[i].height);
}

// The same for a lone frame in the plain state `state` (see MaskWalk::config_of).
bool plain_skips_subtree(MaskWalk& walk, int32_t state, const Vocab& v, int32_t i) {
  const int32_t bytes = v.below[i];
  if (walk.loops_on_state(state, v.byte_sets[bytes])) return true;
  return v.trie[i].end - i > kWorthReaching &&
         walk.alive_within_state(state, v.byte_sets[bytes], bytes, v.trie[i].height);
}

// The cache's accepted tokens from the marked trie positions (all in words [lo, hi)). A string
// body accepts nearly every token: then the unmarked positions are cleared from the mask of
// all tokens instead, so the cost follows the smaller side. Few tokens (most states of a
// structure) become the words list straight from the marks, without a pass over the vocabulary.
void set_accepted(const Vocab& v, const uint64_t* pos, int32_t lo, int32_t hi, int64_t marked, TokenCache* c) {
  const int64_t n = static_cast<int64_t>(v.order.size());
  const int32_t n_words = static_cast<int32_t>((n + 63) / 64);
  const int32_t id_words = v.words();
  const auto each_marked = [&](auto&& f) {
    for (int32_t k = lo; k < hi; ++k)
      for (uint64_t w = pos[k]; w; w &= w - 1) f(v.order[k * 64 + __builtin_ctzll(w)]);
  };
  if (marked * 4 <= id_words) {
    std::vector<int32_t> ids;
    ids.reserve(marked);
    each_marked([&](int32_t id) { ids.push_back(id); });
    std::sort(ids.begin(), ids.end());
    std::vector<TokenCache::Word>& out = c->accepted_words;
    for (int32_t id : ids) {
      const uint32_t index = static_cast<uint32_t>(id >> 5), bit = 1u << (id & 31);
      if (out.empty() || out.back().index != index) out.push_back({index, bit});
      else out.back().bits |= bit;
    }
    return;
  }
  const bool most = marked * 2 > n;
  std::vector<uint32_t>& out = c->accepted;
  if (most) out = v.order_mask;
  else out.assign(id_words, 0);
  uint32_t* words = out.data();
  const auto flip = [&](int32_t id) { words[id >> 5] ^= 1u << (id & 31); };
  if (!most) {
    each_marked(flip);
    return;
  }
  for (int32_t k = 0; k < n_words; ++k) {
    uint64_t w = ~pos[k];
    if (k + 1 == n_words && n % 64) w &= (uint64_t(1) << (n % 64)) - 1;  // past the last token
    for (; w; w &= w - 1) flip(v.order[k * 64 + __builtin_ctzll(w)]);
  }
}

}  // namespace

void* zeroed_table(size_t n, size_t size) {
  void* p = std::calloc(n ? n : 1, size);
  if (p == nullptr) {
#if defined(__cpp_exceptions)
    throw std::bad_alloc();
#else
    std::abort();
#endif
  }
  return p;
}

Status compile_grammar(const Vocab& vocab, const int32_t* words, int32_t n_words, Grammar* out) {
  Ir ir;
  Status s = read_ir(words, n_words, &ir);
  return s.ok() ? compile_grammar(vocab, ir, out) : s;
}

Status compile_grammar(const Vocab& vocab, const Ir& ir, Grammar* out) {
  out->vocab = &vocab;
  Status s = build_automaton(ir, Limits{}, &out->automaton);
  if (!s.ok()) return s;
  compute_contexts(out->automaton, &out->contexts);
  out->prepare_lazy_tables();
  return {};
}

// The states that may follow, once a rule of `after`'s states completes, any rule above it:
// the continuations of those rules, then of the rules those continuations are in, and so on.
void Grammar::states_beyond(const std::vector<int32_t>& after, std::vector<int32_t>* out) {
  const Automaton& a = automaton;
  out->clear();
  rule_marks_.assign(a.start.size(), 0);
  std::vector<int32_t> todo;
  const auto reach = [&](int32_t state) {
    const int32_t r = a.rule_of[state];
    if (!rule_marks_[r]) rule_marks_[r] = 1, todo.push_back(r);
  };
  for (int32_t s : after) reach(s);
  while (!todo.empty()) {
    const int32_t r = todo.back();
    todo.pop_back();
    prepare_rule(r);
    for (int32_t s : context_reps_[r]) {
      out->push_back(s);
      reach(s);
    }
  }
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
}

// Under mutex_. States_beyond depends only on the rules of `after`: for a state's own cache,
// the state's rule (`after` are its contexts); for a site cache, the return state's rule.
const std::vector<int32_t>& Grammar::beyond_of(int32_t state, const std::vector<int32_t>& after, bool exact) {
  const uint64_t key = uint64_t(automaton.rule_of[exact ? after[0] : state]) * 2 + exact;
  const auto known = beyond_memo_.find(key);
  if (known != beyond_memo_.end()) return known->second;
  std::vector<int32_t> states;  // stored only once complete (an allocation failure leaves no half entry)
  states_beyond(after, &states);
  return beyond_memo_.emplace(key, std::move(states)).first->second;
}

void Grammar::prepare_lazy_tables() {
  const int32_t n = automaton.n_states();
  const size_t n_rules = automaton.start.size();
  classes_ = std::make_unique<CacheClasses>(automaton, vocab->max_len);
  rep_.assign(n, -1);
  classed_.assign(n_rules, 0);
  context_reps_.assign(n_rules, {});
  prepared_ = std::make_unique<std::atomic<bool>[]>(n_rules);
  for (size_t r = 0; r < n_rules; ++r) prepared_[r].store(false, std::memory_order_relaxed);
  own_caches_.reset(n);
  site_caches_.reset(n);
  by_site_ = std::make_unique<std::atomic<int8_t>[]>(n);
  for (int32_t s = 0; s < n; ++s) by_site_[s].store(-1, std::memory_order_relaxed);
}

void Grammar::prepare_rule(int32_t rule) {
  if (prepared_[rule].load(std::memory_order_relaxed)) return;
  const auto classed = [&](int32_t r) {
    if (!classed_[r]) classes_->classify(r, rep_.data()), classed_[r] = 1;
  };
  classed(rule);
  std::vector<int32_t> reps;
  for (int32_t s : contexts[rule]) {
    classed(automaton.rule_of[s]);
    reps.push_back(rep_[s]);
  }
  std::sort(reps.begin(), reps.end());
  reps.erase(std::unique(reps.begin(), reps.end()), reps.end());
  context_reps_[rule] = std::move(reps);
  prepared_[rule].store(true, std::memory_order_release);
}

int32_t Grammar::rep(int32_t state) {
  const int32_t rule = automaton.rule_of[state];
  if (!prepared_[rule].load(std::memory_order_acquire)) {
    BuildLock lock(mutex_);
    prepare_rule(rule);
  }
  return rep_[state];
}

namespace {

uint64_t site_key(int32_t state, int32_t ret) { return (uint64_t(uint32_t(state)) << 32) | uint32_t(ret); }

// The index of `ret` in the sorted `rets`, or -1.
int32_t index_of(const std::vector<int32_t>& rets, int32_t ret) {
  const auto at = std::lower_bound(rets.begin(), rets.end(), ret);
  return at != rets.end() && *at == ret ? static_cast<int32_t>(at - rets.begin()) : -1;
}

}  // namespace

// Under mutex_. The answers are stored only once complete: an allocation failure half-way
// leaves the tables as they were.
bool Grammar::ends_checked(int32_t rule) {
  const Automaton& a = automaton;
  if (a.checks.empty()) return false;
  if (ends_checked_.empty()) {
    seen_rule_.assign(a.start.size(), -1);
    seen_state_.assign(a.n_states(), -1);
    ends_checked_.assign(a.start.size(), -1);  // last: its size says the marks are there
  }
  if (ends_checked_[rule] >= 0) return ends_checked_[rule];
  bool known = false;
  // The states where parsing goes on once the rule completes, and, where those complete their
  // rule too, the states after that: a check called there comes before any byte. The seen
  // marks carry the rule they were set for: no clearing between rules.
  std::vector<int32_t> todo(contexts[rule]);
  seen_rule_[rule] = rule;
  while (!todo.empty() && !known) {
    const int32_t s = todo.back();
    todo.pop_back();
    if (seen_state_[s] == rule) continue;
    seen_state_[s] = rule;
    for (const Call* c = a.calls_begin(s); c != a.calls_end(s); ++c) known |= a.check_of[c->rule] >= 0;
    const int32_t caller = a.rule_of[s];
    if (a.final[s] && seen_rule_[caller] != rule) {
      seen_rule_[caller] = rule;
      todo.insert(todo.end(), contexts[caller].begin(), contexts[caller].end());
    }
  }
  ends_checked_[rule] = known;
  return known;
}

// A pure function of the automaton and vocabulary: threads that race to compute it store the
// same answer.
bool Grammar::by_site(int32_t state) {
  state = rep(state);
  int8_t known = by_site_[state].load(std::memory_order_relaxed);
  if (known < 0) {
    constexpr int32_t kNarrow = 8;  // bytes with a transition; JSON whitespace has 4
    // Checking a token on the real stack costs about what a site cache's walk costs per token
    // walked; past this many, a cache per caller (its class) soon pays for itself.
    constexpr size_t kManyUncertain = 1024;
    int32_t n = 0;
    for (int32_t b = 0; b < 256 && n <= kNarrow; ++b) n += automaton.step(state, static_cast<uint8_t>(b)) >= 0;
    known = contexts[automaton.rule_of[state]].size() > 1 &&
            (n <= kNarrow || completes_within(state, kNarrow) ||
             cache_for(state, -1).uncertain.size() > kManyUncertain);
    by_site_[state].store(known, std::memory_order_relaxed);
  }
  return known;
}

bool Grammar::completes_within(int32_t state, int32_t n) const {
  const Automaton& a = automaton;
  std::vector<int32_t> level{state}, next;
  for (int32_t k = 0; k <= n; ++k) {
    if (level.empty()) return true;
    next.clear();
    for (int32_t s : level) {
      if (a.calls_begin(s) != a.calls_end(s)) return false;
      for (const ByteRun* r = a.runs_begin(s); r != a.runs_end(s); ++r)
        if (std::find(next.begin(), next.end(), r->to) == next.end()) next.push_back(r->to);
      if (next.size() > 64) return false;
    }
    level.swap(next);
  }
  return level.empty();
}

std::unique_ptr<TokenCache> Grammar::new_cache(int32_t state, const std::vector<int32_t>* after, bool exact) {
  auto c = std::make_unique<TokenCache>();
  build_cache(state, after, exact, c.get());
  return c;
}

const TokenCache& Grammar::cache_for(int32_t state, int32_t ret) {
  state = rep(state);
  if (ret >= 0 && by_site(state)) return site_cache(state, rep(ret));
  if (const TokenCache* c = own_caches_.get(state)) return *c;
  BuildLock lock(mutex_);
  if (const TokenCache* c = own_caches_.get(state)) return *c;  // built by another thread meanwhile
  return own_caches_.publish(state, new_cache(state, &context_reps_[automaton.rule_of[state]], false));
}

const TokenCache* Grammar::built_site_cache(int32_t state, int32_t ret) const {
  const int32_t k = index_of(context_reps_[automaton.rule_of[state]], ret);
  if (k < 0) {
    const auto it = odd_site_caches_.find(site_key(state, ret));  // the caller holds mutex_
    return it == odd_site_caches_.end() ? nullptr : it->second.get();
  }
  const PublishedSlots<TokenCache>* per_ret = site_caches_.get(state);
  return per_ret ? per_ret->get(k) : nullptr;
}

const TokenCache& Grammar::site_cache(int32_t state, int32_t ret) {
  const std::vector<int32_t>& rets = context_reps_[automaton.rule_of[state]];
  const int32_t k = index_of(rets, ret);
  if (k >= 0)
    if (const PublishedSlots<TokenCache>* per_ret = site_caches_.get(state))
      if (const TokenCache* c = per_ret->get(k)) return *c;
  BuildLock lock(mutex_);
  if (const TokenCache* c = built_site_cache(state, ret)) return *c;
  site_after_.assign(1, ret);
  std::unique_ptr<TokenCache> c = new_cache(state, &site_after_, true);
  if (k < 0) return *(odd_site_caches_[site_key(state, ret)] = std::move(c));
  PublishedSlots<TokenCache>* per_ret = site_caches_.get(state);
  if (!per_ret) {
    auto table = std::make_unique<PublishedSlots<TokenCache>>();
    table->reset(rets.size());
    per_ret = &site_caches_.publish(state, std::move(table));
  }
  return per_ret->publish(k, std::move(c));
}

int32_t Grammar::warm(int32_t max_caches) {
  int32_t built = 0;
  bool refused = false;
  const auto build = [&](int32_t state, int32_t ret) {
    if (max_caches >= 0 && built >= max_caches) return;
    refused |= cache_for(state, ret).over_work;
    ++built;
  };
  const Automaton& a = automaton;
  for (int32_t s = 0; s < a.n_states() && !refused; ++s) {
    if (!a.has_bytes(s) || rep(s) != s) continue;
    const bool site = by_site(s);
    // Frames of the start rule may have no parent: only they use a per-site state's own cache.
    if ((!site || a.rule_of[s] == a.root) && !own_caches_.get(s)) build(s, -1);
    if (!site) continue;
    const std::vector<int32_t>& rets = context_reps_[a.rule_of[s]];
    for (size_t k = 0; k < rets.size(); ++k) {
      const PublishedSlots<TokenCache>* per_ret = site_caches_.get(s);
      if (!per_ret || !per_ret->get(k)) build(s, rets[k]);
    }
  }
  return refused ? -1 : built;
}

namespace {

uint8_t first_byte(const ByteSet& s) {
  for (int32_t w = 0; w < 4; ++w)
    if (s.bits[w]) return static_cast<uint8_t>(w * 64 + __builtin_ctzll(s.bits[w]));
  return 0;
}

}  // namespace

const Grammar::RunChain& Grammar::run_chain(int32_t state) {
  if (run_chains_.empty()) run_chains_.resize(automaton.n_states());
  RunChain& c = run_chains_[state];
  if (c.index != -2) return c;
  c.index = -1;
  const Automaton& a = automaton;
  const auto step = [&](int32_t s, int32_t b) { return a.step(s, static_cast<uint8_t>(b)); };
  // Past the vocabulary's longest token no walk goes: a longer chain is as good as a loop.
  const size_t longest = static_cast<size_t>(vocab->max_len) + 1;
  std::vector<int32_t> states;
  // The runs go from narrow to wide, each holding the one before: the last that fits is taken.
  for (size_t k = 0; k < vocab->runs.size(); ++k) {
    const ByteSet& run = vocab->runs[k].bytes;
    const uint8_t enter = first_byte(run);
    states.assign(1, state);
    bool fits = true, bounded = false;
    while (fits && states.size() <= longest) {
      const int32_t from = states.back(), t = step(from, enter);
      for (int32_t b = 0; b < 256 && fits; ++b)
        fits = !run.has(static_cast<uint8_t>(b)) || step(from, b) == t;
      if (!fits || t == from) break;  // a loop: the chain is complete
      if (t < 0) {
        bounded = true;
        break;
      }
      fits = a.plain[t] && std::find(states.begin(), states.end(), t) == states.end();
      states.push_back(t);
    }
    if (!fits || (bounded && states.size() == 1)) continue;  // (no byte of the run goes on)
    c.index = static_cast<int8_t>(k), c.enter = enter, c.bounded = bounded, c.states = states;
  }
  if (c.index < 0) return c;
  const ByteSet& run = vocab->runs[c.index].bytes;
  for (int32_t b = 0; b < 256; ++b) {
    if (run.has(static_cast<uint8_t>(b))) continue;
    for (int32_t s : c.states)
      if (step(s, b) >= 0) {
        c.exit_bytes.push_back(static_cast<uint8_t>(b));
        break;
      }
  }
  // Where most other bytes go on too (a string body), the exits are most of the subtree and the
  // walk's own shortcuts (text_below) do better.
  if (c.exit_bytes.size() > kFewExitBytes) c.index = -1, c.states.clear(), c.exit_bytes.clear();
  return c;
}

const Grammar::RunChain& Grammar::config_run_chain(int32_t config, bool exact, bool checked_end) {
  static const RunChain kNone{-1, 0, false, {}, {}};
  if (config_runs_.size() <= static_cast<size_t>(config)) config_runs_.resize(config + 1, -2);
  if (config_runs_[config] != -2) return config_runs_[config] >= 0 ? config_chains_[config_runs_[config]] : kNone;
  config_runs_[config] = -1;
  MaskWalk& walk = *walk_;
  const size_t longest = static_cast<size_t>(vocab->max_len) + 1;
  RunChain c;
  for (size_t k = vocab->runs.size(); k-- > 0;) {  // the widest that fits
    const ByteSet& run = vocab->runs[k].bytes;
    c.enter = first_byte(run);
    c.states.assign(1, config);
    c.bounded = false;
    bool fits = true;
    while (c.states.size() <= longest) {
      const int32_t from = c.states.back();
      if (!walk.uniform(from, static_cast<int32_t>(k), run)) {
        fits = false;
        break;
      }
      const int32_t t = walk.step(from, c.enter);  // may grow the walk's tables: nothing held across
      if (t < 0) {
        c.bounded = true;
        break;
      }
      // Tokens that end at t are accepted, as the walk would (its rule, or with the one caller
      // known the caller's, is alive or ends there). The chain is complete at a loop; a longer
      // cycle is not taken.
      fits = walk.own_alive(t) || (exact && walk.spec_alive(t)) ||
             (!checked_end && (walk.own_ends(t) || (exact && walk.spec_ends(t))));
      if (!fits || t == from) break;
      if (std::find(c.states.begin(), c.states.end(), t) != c.states.end()) {
        fits = false;
        break;
      }
      c.states.push_back(t);
    }
    if (!fits || (c.bounded && c.states.size() == 1)) continue;  // (no byte of the run goes on)
    ByteSet exits;
    for (int32_t s : c.states) {
      const ByteSet out = walk.next_bytes(s);
      for (int w = 0; w < 4; ++w) exits.bits[w] |= out.bits[w] & ~run.bits[w];
    }
    c.exit_bytes.clear();
    for (int32_t b = 0; b < 256; ++b)
      if (exits.has(static_cast<uint8_t>(b))) c.exit_bytes.push_back(static_cast<uint8_t>(b));
    if (c.exit_bytes.size() > kFewExitBytes) break;
    c.index = static_cast<int8_t>(k);
    config_runs_[config] = static_cast<int32_t>(config_chains_.size());
    config_chains_.push_back(std::move(c));
    return config_chains_.back();
  }
  return kNone;
}

const Shortest& Grammar::shortest() {
  if (!shortest_ready_.load(std::memory_order_acquire)) {
    BuildLock lock(mutex_);
    if (!shortest_ready_.load(std::memory_order_relaxed)) {
      compute_shortest(automaton, &shortest_);
      shortest_ready_.store(true, std::memory_order_release);
    }
  }
  return shortest_;
}

// Walks the vocabulary trie from the frame (state, bottom); `after` are the states that may
// follow the state's rule: with `exact`, the one state that does (the frame's parent's).
void Grammar::build_cache(int32_t state, const std::vector<int32_t>* after, bool exact, TokenCache* out) {
  // A build stopped half-way (an allocation failure) leaves marks in positions_ and the walk's
  // tables in between: both are dropped then, so that the next build starts clean.
  struct ScratchReset {
    Grammar& g;
    bool done = false;
    ~ScratchReset() {
      if (!done) g.positions_.clear(), g.walk_.reset();
    }
  } scratch_reset{*this};
  TokenCache& c = *out;
  const Vocab& v = *vocab;
  if (positions_.empty()) positions_.assign((v.order.size() + 63) / 64 + 1, 0);
  beyond_ = &beyond_of(state, *after, exact);
  uint64_t* pos = positions_.data();
  int64_t marked = 0;  // may count a position twice: it only picks the cheaper translation
  int32_t lo = INT32_MAX, hi = 0;
  const auto refused = [&] {  // scratch_reset drops the marks and the walk's tables
    c = TokenCache{};
    c.over_work = true;
  };
  const bool checked = walk_trie(state, after, exact, CheckMode::pass, &marked, &lo, &hi, &c.uncertain);
  if (walk_->over_work()) return refused();
  if (checked) {
    // Checks decide on text the cache cannot know. With all of them passing, the walk found
    // every token that may be valid; with all failing, those valid whatever the checks say,
    // the accepted ones. The others are left to the real stack, like the uncertain ones.
    // Only the words the first walk touched are read (not the vocabulary's): the second walk
    // accepts a part of what the first did.
    int32_t from = lo, to = hi;
    for (int32_t p : c.uncertain) from = std::min(from, p >> 6), to = std::max(to, (p >> 6) + 1);
    std::vector<uint64_t> maybe;
    if (from < to) maybe.assign(pos + from, pos + to);
    for (int32_t p : c.uncertain) maybe[(p >> 6) - from] |= uint64_t(1) << (p & 63);
    if (from < to) std::fill(pos + from, pos + to, 0);
    c.uncertain.clear();
    std::vector<int32_t> ignored;
    marked = 0, lo = INT32_MAX, hi = 0;
    walk_trie(state, after, exact, CheckMode::fail, &marked, &lo, &hi, &ignored);
    if (walk_->over_work()) return refused();
    for (int32_t k = from; k < to; ++k)
      for (uint64_t w = maybe[k - from] & ~pos[k]; w; w &= w - 1)
        c.uncertain.push_back(k * 64 + __builtin_ctzll(w));
  }
  if (marked > 0) {
    set_accepted(v, pos, lo, hi, marked, &c);
    std::fill(pos + lo, pos + hi, 0);
  }
  scratch_reset.done = true;
  caches_built.fetch_add(1, std::memory_order_relaxed);
  cache_bytes.fetch_add(int64_t(c.accepted.size()) * 4 + int64_t(c.accepted_words.size()) * 8 +
                            int64_t(c.uncertain.size()) * 4,
                        std::memory_order_relaxed);
}

namespace {

// After node i's byte, the bytes left in the character it is in, when every token below the node
// is JSON string text from that byte on (Vocab::text_tail); -1 otherwise.
int32_t rest_of_char(const Vocab& v, int32_t i) {
  const int32_t k = v.text_tail[i];
  if (k == Vocab::kNoText) return -1;
  if (k > 0) return k - 1;
  const uint8_t b = v.trie[i].byte;  // begins a character
  return b < 0x80 ? 0 : b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : 1;
}

}  // namespace

bool Grammar::walk_trie(int32_t state, const std::vector<int32_t>* after, bool exact, CheckMode mode,
                        int64_t* marked_out, int32_t* lo_out, int32_t* hi_out, std::vector<int32_t>* unsure) {
  const Vocab& v = *vocab;
  if (!walk_) walk_ = std::make_unique<MaskWalk>(automaton, rep_.data());
  MaskWalk& walk = *walk_;
  walk.begin(state, after, beyond_, mode);
  config_runs_.clear();
  config_chains_.clear();
  // Per depth along the current trie path: the configuration after its first d bytes, or, while
  // the path stays in plain states, that lone frame (plain[d] >= 0; configs[d] interned on demand).
  constexpr int32_t kUnset = -2;
  std::vector<int32_t> configs(v.max_len + 1), plain(v.max_len + 1, -1);
  configs[0] = walk.start();
  const Automaton& a = automaton;
  if (a.plain[state]) plain[0] = state;  // the bottom frame of a state is the state's id
  const bool checked_end = ends_checked(a.rule_of[state]);
  // Accepted tokens are marked by trie position, where a subtree is a range (a few word writes),
  // and translated to ids once at the end (set_accepted). The buffer is kept all clear between
  // walks: only the words touched, [lo, hi), are cleared again.
  uint64_t* pos = positions_.data();
  int64_t marked = *marked_out;  // locals: the marks below cannot alias them
  int32_t lo = *lo_out, hi = *hi_out;
  const auto accept = [&](int32_t begin, int32_t end) {
    if (begin >= end) return;
    marked += end - begin;
    lo = std::min(lo, begin >> 6);
    hi = std::max(hi, ((end - 1) >> 6) + 1);
    for (; begin < end && begin % 64; ++begin) pos[begin >> 6] |= uint64_t(1) << (begin & 63);
    for (; begin + 64 <= end; begin += 64) pos[begin >> 6] = ~uint64_t(0);
    for (; begin < end; ++begin) pos[begin >> 6] |= uint64_t(1) << (begin & 63);
  };
  const auto accept_subtree = [&](int32_t i) { accept(v.trie[i].tok_begin, v.trie[i].tok_end); };
  // Every token below node i is, after the node's byte, the rest of its character and then JSON
  // string text, and from `frame` (after the byte) they all stay in a string body: the subtree is
  // accepted (a key's body past its first character, a body's rest called after a non-ASCII
  // character) without visiting it.
  const auto text_below = [&](int32_t i, int32_t frame) {
    const int32_t rest = rest_of_char(v, i);
    return rest >= 0 && walk.text_after(frame, rest);
  };
  const auto uncertain = [&](int32_t begin, int32_t end) {
    for (int32_t p = begin; p < end; ++p) unsure->push_back(p);
  };
  // Accepts the tokens of node i's subtree from position `begin` on, at most `longest` bytes long,
  // that are anchored where i is (RunIndex): from the index's bits when the anchor is the root
  // or a first byte, else (or when the length is bounded) position by position.
  const auto accept_run = [&](const RunIndex& r, int32_t i, int32_t begin, int64_t longest) {
    const TrieNode& node = v.trie[i];
    if (begin >= node.tok_end) return;
    const uint8_t k = r.node_anchor[i];
    const int32_t first = begin >> 6, last = (node.tok_end - 1) >> 6;
    lo = std::min(lo, first);
    hi = std::max(hi, last + 1);
    const uint8_t* anchor = r.token_anchor.data();
    const uint8_t* len = v.order_len.data();
    const int32_t n = static_cast<int32_t>(r.token_anchor.size());
    if (longest >= v.max_len) longest = INT32_MAX;  // no token is longer
    for (int32_t w = first; w <= last; ++w) {
      uint64_t bits = 0;
      if (longest == INT32_MAX && k <= 1) {  // tokens of the run's bytes after the root or a first byte
        bits = r.anchored[k][w];
      } else {
        for (int32_t p = w * 64, end = std::min(p + 64, n); p < end; ++p)
          bits |= uint64_t(anchor[p] == k && len[p] <= longest) << (p & 63);
      }
      if (w == first) bits &= ~uint64_t(0) << (begin & 63);
      if (w == last && (node.tok_end & 63)) bits &= ~(~uint64_t(0) << (node.tok_end & 63));
      pos[w] |= bits;
      marked += __builtin_popcountll(bits);
    }
  };
  // Whether `run` applies at node i: an index of the class, an anchor it holds, and a count's
  // lengths within those it compares.
  const auto indexed = [&](const RunChain& run, int32_t i) {
    return run.index >= 0 && v.runs[run.index].node_anchor[i] != RunIndex::kDeep &&
           (!run.bounded || v.trie[i].depth + run.states.size() <= Vocab::kLongToken);
  };
  // Node i's subtree along `run`: accepts from position `begin` the tokens that keep to the run
  // (no longer than a count allows), then walks each exit the chain's states take, in preorder (as
  // the uncertain list is kept), from the chain's element at its offset: `parent(d, o)` sets the
  // depth tables at d for element o.
  const auto along_run = [&](auto& self, const RunChain& run, int32_t i, int32_t begin, auto&& parent) {
    const RunIndex& r = v.runs[run.index];
    const int32_t depth = v.trie[i].depth, last = static_cast<int32_t>(run.states.size()) - 1;
    accept_run(r, i, begin, run.bounded ? depth + last : INT32_MAX);
    const size_t base = run_exits_.size();
    for (uint8_t b : run.exit_bytes) {
      const auto [first, end] = r.exits_below(v, i, b);
      run_exits_.insert(run_exits_.end(), first, end);
    }
    std::sort(run_exits_.begin() + base, run_exits_.end());
    for (size_t k = base; k < run_exits_.size(); ++k) {
      const int32_t e = run_exits_[k], d = v.trie[e].depth;
      const int32_t o = d - 1 - depth;  // the run's bytes between i and e
      if (run.bounded && o > last) continue;  // the count is over: refused
      parent(d - 1, std::min(o, last));  // a loop stays on its last element
      self(self, e, v.trie[e].end);
    }
    run_exits_.resize(base);
  };
  // Walks the nodes [i, stop) of one subtree (or the root's children from one first byte).
  const auto walk_range = [&](auto& self, int32_t i, int32_t stop) -> void {
    while (i < stop) {
      const TrieNode& node = v.trie[i];
      const int32_t from = plain[node.depth - 1];
      if (from >= 0) {
        if (v.text_tail[i] == 0 && walk.text_loop(walk.state_of(from))) {  // inside a string, to its end
          accept_subtree(i);
          i = node.end;
          continue;
        }
        const int32_t to = walk.step_plain(from, node.byte);
        if (to == -1) {  // nothing else is alive from a lone plain frame
          i = node.end;
          continue;
        }
        if (to >= 0) {  // still consuming inside the rule: these tokens are accepted
          plain[node.depth] = to;
          configs[node.depth] = kUnset;
          if (node.end > i + 1 && (text_below(i, to) || plain_skips_subtree(walk, walk.state_of(to), v, i))) {
            accept_subtree(i);
            i = node.end;
            continue;
          }
          // Along a chain over a run's bytes (a loop, a count): accept what stays in the run, walk
          // only the exits the chain's states take.
          const RunChain* run = node.end - i > kWorthIndexing ? &run_chain(walk.state_of(to)) : nullptr;
          if (run && indexed(*run, i)) {
            std::vector<int32_t> frames{to};  // per state of the chain (all under to's parent)
            along_run(self, *run, i, node.tok_begin, [&](int32_t d, int32_t o) {
              while (static_cast<int32_t>(frames.size()) <= o) frames.push_back(walk.step_plain(frames.back(), run->enter));
              plain[d] = frames[o];
              configs[d] = kUnset;
            });
            i = node.end;
            continue;
          }
          accept(node.tok_begin, node.tok_begin + node.n_here);
          ++i;
          continue;
        }
        if (configs[node.depth - 1] == kUnset) configs[node.depth - 1] = walk.config_of(from);
      }
      const int32_t at = walk.step(configs[node.depth - 1], node.byte);
      if (at < 0) {  // every token below is rejected
        i = node.end;
        continue;
      }
      configs[node.depth] = at;
      plain[node.depth] = walk.lone_plain(at);
      // With the one caller known (`exact`), a continuation alive in it makes the token valid too:
      // the walk follows that caller as the real parser would, until the caller's rule completes.
      const bool live = walk.own_alive(at) || (exact && walk.spec_alive(at));
      const bool ends = walk.own_ends(at) || (exact && walk.spec_ends(at));
      const bool maybe = walk.spec_alive(at) || walk.spec_ends(at) || walk.far_alive(at);  // on some stack
      const int32_t own_end = node.tok_begin + node.n_here;
      if (live || (ends && !checked_end)) accept(node.tok_begin, own_end);
      else if (ends || maybe) uncertain(node.tok_begin, own_end);
      if (!live && !maybe) {  // every deeper token is refused
        i = node.end;
        continue;
      }
      if (!live && !walk.spec_alive(at) && node.end > i + 1 && walk.loops_on(at, v.byte_sets[v.below[i]])) {
        uncertain(own_end, node.tok_end);  // only the real stack can tell, whatever the bytes below
        i = node.end;
        continue;
      }
      if (live && node.end > i + 1 && ((plain[node.depth] >= 0 && text_below(i, plain[node.depth])) ||
                                       skips_subtree(walk, at, v, i))) {
        accept_subtree(i);
        i = node.end;
        continue;
      }
      // Along a chain over a run's bytes that may end its rule (a lone plain frame goes on above).
      if (plain[node.depth] < 0 && node.end - i > kWorthIndexing) {
        const RunChain& run = config_run_chain(at, exact, checked_end);
        if (indexed(run, i)) {
          // The node's own tokens were sorted above, by `at`.
          along_run(self, run, i, own_end, [&](int32_t d, int32_t o) {
            configs[d] = run.states[o];
            plain[d] = walk.lone_plain(configs[d]);
          });
          i = node.end;
          continue;
        }
      }
      ++i;
    }
  };
  // The walk starts from the lone frame (state, bottom): no way on without a transition.
  for (int32_t first = 0; first < 256; ++first) {
    const int32_t top = v.first[first];
    if (top < 0 || a.step(state, static_cast<uint8_t>(first)) < 0) continue;
    walk_range(walk_range, top, v.trie[top].end);
  }
  *marked_out = marked, *lo_out = lo, *hi_out = hi;
  return walk.met_check();
}

int32_t TokenWalker::keep(const StateSet& set) {
  if (kept_frames_ + set.frames.size() > kMaxKeptFrames) return -1;
  if (n_kept_ == static_cast<int32_t>(kept_.size())) kept_.emplace_back();
  kept_[n_kept_] = set;  // keeps the slot's memory from earlier checks
  kept_frames_ += set.frames.size();
  return n_kept_++;
}

bool TokenWalker::check(const std::vector<int32_t>& frames, const std::vector<int32_t>& positions, uint32_t* words,
                        std::vector<int32_t>* valid_ids) {
  const Vocab& v = *g_.vocab;
  const Automaton& a = g_.automaton;
  if (levels_.size() < static_cast<size_t>(v.max_len + 1))
    levels_.resize(v.max_len + 1), kept_at_.resize(v.max_len + 1);
  levels_[0].frames = frames;
  levels_[0].can_end = false;
  const uint8_t* prev = nullptr;
  int32_t valid = 0;  // levels_[0..valid] hold the states along `prev`
  const size_t base = text_->size();
  const bool checks = !a.checks.empty();  // else no text is read
  steps_.clear();
  n_kept_ = 0, kept_frames_ = 0;
  kept_at_[0] = checks ? -1 : keep(levels_[0]);
  stepper_.set_mode(CheckMode::evaluate);  // only to learn whether a check was met
  for (int32_t pos : positions) {
    const int32_t id = v.order[pos], len = v.length(id);
    const uint8_t* b = v.bytes(id);
    int32_t d = 0;
    while (d < valid && d < len && b[d] == prev[d]) ++d;
    bool alive = true;
    for (; d < len; ++d) {
      if (levels_[d].dead()) { alive = false; break; }
      const int32_t from = kept_at_[d];
      const uint64_t key = uint64_t(from) << 8 | a.byte_class[b[d]];
      const int32_t known = from < 0 ? FlatMap::kAbsent : steps_.find(key);
      if (known >= 0) {
        levels_[d + 1] = kept_[known];
        kept_at_[d + 1] = known;
        continue;
      }
      if (checks) {
        text_->resize(base + d + 1);
        (*text_)[base + d] = b[d];
        stepper_.set_text(text_->data(), static_cast<int64_t>(base + d + 1));
      }
      stepper_.step(pool_, levels_[d], b[d], &levels_[d + 1]);
      kept_at_[d + 1] = from < 0 ? -1 : keep(levels_[d + 1]);
      if (kept_at_[d + 1] >= 0) steps_.put(key, kept_at_[d + 1]);
    }
    valid = d;
    prev = b;
    if (alive && (!levels_[len].dead() || levels_[len].can_end)) {
      words[id >> 5] |= 1u << (id & 31);
      valid_ids->push_back(id);
    }
  }
  text_->resize(base);
  return stepper_.met_check();
}

}  // namespace tg
