#include "matcher.h"

#include <algorithm>
#include <cstring>

#include "checks.h"

namespace tg {

Matcher::Matcher(Grammar* g) : g_(g), stepper_(g->automaton), walker_(*g, scratch_, &text_) {
  pool_.watch(&over_budget_);
  scratch_.watch(&over_budget_);
  reset();
}

void Matcher::reset() {
  const Automaton& a = g_->automaton;
  over_budget_ = over_work_ = over_mask_work_ = false;
  pool_.init(a.n_states());
  checked_.clear(), kept_ids_ = 0;  // its keys name frames of the pool
  names_.clear();
  history_.assign(1, Entry{});
  text_.clear();
  stepper_.set_text(text_.data(), 0);
  stepper_.start(pool_, a.start[a.root], &history_[0].set);
}

void Matcher::step(FramePool& pool, const StateSet& in, uint8_t byte, StateSet* out) {
  if (!g_->automaton.checks.empty()) {  // else no text is read
    text_.push_back(byte);
    stepper_.set_text(text_.data(), static_cast<int64_t>(text_.size()));
  }
  stepper_.step(pool, in, byte, out);
}

void Matcher::fill_mask(uint32_t* __restrict words) {
  const Vocab& v = *g_->vocab;
  const int32_t n_words = v.words();
  std::memset(words, 0, sizeof(uint32_t) * n_words);
  const Entry& cur = history_.back();
  if (cur.terminated) return;
  scratch_.layer_on(pool_);
  seen_caches_.clear();
  pending_.clear();
  constexpr size_t kMaxCallers = 256;  // beyond, the frame's own cache and the real stack
  for (int32_t id : cur.set.frames) {
    const int32_t state = pool_.get(id).state;
    // A frame whose callers are known gets the union of a cache per caller (several callers:
    // stacks that merged); equivalent callers share a cache (cache_classes.h).
    if (!g_->by_site(state) || !pool_.return_states(id, kMaxCallers, &returns_, &return_todo_)) returns_.assign(1, -1);
    frame_caches_.clear();
    for (int32_t ret : returns_) {
      const TokenCache& c = g_->cache_for(state, ret);
      if (c.over_work) {  // refused: the words written so far mean nothing
        over_mask_work_ = true;
        scratch_.clear();
        return;
      }
      if (std::find(frame_caches_.begin(), frame_caches_.end(), &c) != frame_caches_.end()) continue;
      frame_caches_.push_back(&c);
      // Frames with the same cache share the accepted part; only the uncertain part differs.
      if (std::find(seen_caches_.begin(), seen_caches_.end(), &c) == seen_caches_.end()) {
        seen_caches_.push_back(&c);
        c.add_accepted(words, n_words);
      }
      if (!c.uncertain.empty()) pending_.push_back({id, &c});
    }
  }
  if (!pending_.empty()) check_uncertain(words);
  if (cur.set.can_end)
    for (int32_t id : v.stop_ids) words[id >> 5] |= 1u << (id & 31);
  scratch_.clear();
}

// States that share a cache are those no token tells apart (cache_classes.h), so on equal stacks
// they accept the same uncertain tokens, unless a check read the text: the answer is kept. Inside
// a string, the body's frames have one parent, and every mask but the first finds it here; so do
// the strings of the second record of an array.
void Matcher::check_uncertain(uint32_t* words) {
  constexpr size_t kMaxKept = 1 << 16;  // token ids kept; past them the table starts again
  key_.clear();
  for (const auto& [frame, c] : pending_)
    key_.push_back({c, names_.name(pool_, g_->automaton.n_states(), pool_.get(frame).parent)});
  std::sort(key_.begin(), key_.end());
  key_.erase(std::unique(key_.begin(), key_.end()), key_.end());
  const auto known = checked_.find(key_);
  if (known != checked_.end()) {
    for (int32_t id : known->second) words[id >> 5] |= 1u << (id & 31);
    return;
  }
  walk_frames_.clear();
  for (const auto& [frame, c] : pending_)  // a frame's pairs are consecutive
    if (walk_frames_.empty() || walk_frames_.back() != frame) walk_frames_.push_back(frame);
  // The union of the caches' uncertain positions; one cache (the common case) lends its own.
  const std::vector<int32_t>* positions = &key_.front().first->uncertain;
  if (key_.front().first != key_.back().first) {
    positions_.clear();
    for (size_t i = 0; i < key_.size(); ++i) {  // each cache once: key_ is sorted by cache
      const std::vector<int32_t>& more = key_[i].first->uncertain;
      if (i > 0 && key_[i - 1].first == key_[i].first) continue;
      merged_.resize(positions_.size() + more.size());
      const auto end = std::set_union(positions_.begin(), positions_.end(), more.begin(), more.end(), merged_.begin());
      merged_.erase(end, merged_.end());
      positions_.swap(merged_);
    }
    positions = &positions_;
  }
  valid_.clear();
  if (walker_.check(walk_frames_, *positions, words, &valid_)) return;
  if (kept_ids_ + valid_.size() > kMaxKept) checked_.clear(), kept_ids_ = 0;
  checked_.emplace(key_, valid_);
  kept_ids_ += valid_.size() + key_.size();
}

bool Matcher::advance(const uint8_t* data, int32_t n, StateSet* out) {
  const StateSet* in = &history_.back().set;
  const size_t base = text_.size();
  StateSet* bufs[2] = {&a_, &b_};
  int32_t i = 0;
  const int64_t before = stepper_.work();  // frames looked at before this call
  for (; i < n && !in->dead() && !over_budget_; ++i) {
    if (stepper_.work() - before > kMaxStepWork) {
      over_work_ = true;
      break;
    }
    StateSet* next = bufs[i & 1];
    step(pool_, *in, data[i], next);
    in = next;
  }
  if (i < n || (in->dead() && !in->can_end) || over_budget_) {
    text_.resize(base);
    return false;
  }
  *out = *in;
  return true;
}

int32_t Matcher::accept_token(int32_t id) {
  const Vocab& v = *g_->vocab;
  if (is_terminated()) return 0;
  if (v.stop[id]) {
    if (!can_terminate()) return 0;
    Entry e{history_.back().set, true, text_.size()};
    history_.push_back(std::move(e));
    return 1;
  }
  if (!v.ordinary(id)) return 0;
  return accept_bytes(v.bytes(id), v.length(id));
}

int32_t Matcher::accept_bytes(const uint8_t* data, int32_t n) {
  if (is_terminated()) return 0;
  Entry e;
  if (!advance(data, n, &e.set)) return 0;
  e.text_len = text_.size();
  history_.push_back(std::move(e));
  return 1;
}

bool Matcher::rollback(int32_t n) {
  if (n < 0 || n > history_length()) return false;
  history_.resize(history_.size() - n);
  text_.resize(history_.back().text_len);
  return true;
}

int32_t Matcher::jump_forward(uint8_t* out, int32_t cap) {
  if (is_terminated()) return 0;
  const Automaton& a = g_->automaton;
  scratch_.layer_on(pool_);
  StateSet cur = history_.back().set, next, trial;
  const size_t base = text_.size();
  int32_t n = 0;
  while (n < cap && !cur.can_end && !cur.dead()) {
    bool seen[256] = {};
    int32_t count = 0, only = -1;
    for (int32_t id : cur.frames) {
      const int32_t s = scratch_.get(id).state;
      for (int32_t b = 0; b < 256; ++b)
        if (!seen[b] && a.step(s, static_cast<uint8_t>(b)) >= 0) seen[b] = true, ++count, only = b;
      if (count > 1 && a.checks.empty()) break;
    }
    if (count > 1) {
      if (a.checks.empty()) break;
      // Checks may refuse all but one of the bytes the automata allow: that one is forced.
      only = -1;
      for (int32_t b = 0; b < 256 && only != -2; ++b) {
        if (!seen[b]) continue;
        step(scratch_, cur, static_cast<uint8_t>(b), &trial);
        text_.resize(base + n);
        if (!trial.dead() || trial.can_end) only = only == -1 ? b : -2;
      }
    }
    if (only < 0) break;
    step(scratch_, cur, static_cast<uint8_t>(only), &next);
    if (next.dead() && !next.can_end) break;  // the one byte the automata allow fails a check
    out[n++] = static_cast<uint8_t>(only);
    std::swap(cur, next);
  }
  text_.resize(base);
  scratch_.clear();
  return n;
}

bool Matcher::reaches_end(const StateSet& from, const std::vector<uint8_t>& bytes) {
  StateSet cur = from, next;
  size_t i = 0;
  for (; i < bytes.size() && !cur.dead(); ++i) {
    step(scratch_, cur, bytes[i], &next);
    std::swap(cur, next);
  }
  return i == bytes.size() && cur.can_end;
}

// The cheapest way to finish node `id` (a frame: its rule, then the rules below it; a join:
// those of its cheapest caller), over the stack graph, memoized in costs_: the cost and the
// node that continues it (a join's cheapest return, a frame's parent).
int64_t Matcher::finish_cost(const FramePool& pool, int32_t id) {
  const Shortest& sh = g_->shortest();
  const auto known = [&](int32_t n) { return n < 0 || costs_.count(n) > 0; };
  const auto cost_of = [&](int32_t n) { return n < 0 ? int64_t(0) : costs_[n].first; };
  std::vector<std::pair<int32_t, bool>> todo{{id, false}};  // (node, its successors pushed)
  while (!todo.empty()) {
    const auto [n, expanded] = todo.back();
    if (!expanded && known(n)) {
      todo.pop_back();
      continue;
    }
    const Frame f = pool.get(n);
    if (!expanded) {
      todo.back().second = true;
      costs_[n] = {Shortest::kInf, -1};  // in progress: a cycle back here costs infinitely
      if (!is_join(f)) todo.push_back({f.parent, false});
      else pool.for_each_return(n, [&](int32_t ret) { todo.push_back({ret, false}); });
      continue;
    }
    todo.pop_back();
    std::pair<int64_t, int32_t> best{Shortest::kInf, -1};
    if (!is_join(f)) {
      best = {Shortest::add(sh.dist[f.state], cost_of(f.parent)), f.parent};
    } else {
      pool.for_each_return(n, [&](int32_t ret) {
        if (cost_of(ret) < best.first) best = {cost_of(ret), ret};
      });
    }
    costs_[n] = best;
  }
  return costs_[id].first;
}

// A completion starts with a byte from some live frame, then finishes that frame's rule and
// the rules below it along the cheapest path: at least the sum of their distances, reachable.
int64_t Matcher::cheapest(const FramePool& pool, const StateSet& set, std::vector<uint8_t>* out) {
  if (out) out->clear();
  if (set.can_end) return 0;
  costs_.clear();
  int64_t best = Shortest::kInf;
  int32_t best_frame = -1;
  for (int32_t id : set.frames) {
    const int64_t cost = finish_cost(pool, id);
    if (cost < best) best = cost, best_frame = id;
  }
  if (best_frame < 0) return -1;
  if (!out || best > kMaxCompletion) return best;  // not spelled out (too long: the caller reports it)
  const Shortest& sh = g_->shortest();
  for (int32_t n = best_frame; n >= 0; n = costs_[n].second)
    if (!is_join(pool.get(n))) sh.emit(g_->automaton, pool.get(n).state, out);
  return best;
}

int64_t Matcher::shortest_completion(std::vector<uint8_t>* out) {
  out->clear();
  const Entry& cur = history_.back();
  if (cur.terminated) return -1;
  int64_t best = cheapest(pool_, cur.set, out);
  if (cur.set.can_end || best < 0 || best > kMaxCompletion || g_->automaton.checks.empty()) return best;
  scratch_.layer_on(pool_);
  const size_t base = text_.size();
  const bool checked = reaches_end(cur.set, *out);
  text_.resize(base);
  if (!checked) best = search_completion(cur.set, out);
  text_.resize(base);
  if (best < 0) best = digits_completion(cur.set, out);
  text_.resize(base);
  scratch_.clear();
  return best;
}

// Repairs the distances' completion where a check refuses it, depth first: a choice is the byte
// refused (first pass) or any byte of the completion followed (second pass, for a refusal that
// an earlier byte causes: `[0,0` can only end as `[0,1]`); its other bytes are tried from the
// latest choice back (the cheapest continuation first; of bytes with the same transitions, the
// lowest the checks let through), each followed by the distances' completion again. The length
// allowed grows a byte at a time, up to kMaxGrowth bytes more than the first one.
int64_t Matcher::search_completion(const StateSet& from, std::vector<uint8_t>* out) {
  constexpr int32_t kMaxSteps = 16384;  // per pass, a few ms: the engine may ask at every token
  constexpr size_t kMaxGrowth = 16;
  struct Choice {
    StateSet set;                 // before the byte taken
    std::vector<uint8_t> prefix;  // the bytes up to there
    int32_t taken;                // the byte the completion took there
    bool ranked = false;
    std::vector<int32_t> bytes;   // the others to try, the next one last
  };
  const size_t base = text_.size();
  size_t limit = 0;
  int32_t steps = 0;
  bool every_byte = false;
  std::vector<Choice> stack;
  std::vector<uint8_t> tail;
  std::vector<std::pair<int64_t, int32_t>> ranked;
  std::vector<int32_t> targets;               // a byte's transitions from each frame
  std::vector<std::vector<int32_t>> reached;  // those of the bytes kept at a choice
  const auto with_text = [&](const std::vector<uint8_t>& prefix) {
    text_.resize(base);
    text_.insert(text_.end(), prefix.begin(), prefix.end());
  };
  // The bytes to try at a choice, apart from the one taken.
  const auto rank = [&](Choice& c) {
    with_text(c.prefix);
    ranked.clear();
    reached.clear();
    StateSet next;
    for (int32_t x = 0; x < 256 && steps < kMaxSteps; ++x) {
      targets.clear();
      for (int32_t id : c.set.frames) targets.push_back(g_->automaton.step(scratch_.get(id).state, uint8_t(x)));
      if (x == c.taken || std::all_of(targets.begin(), targets.end(), [](int32_t t) { return t < 0; }) ||
          std::find(reached.begin(), reached.end(), targets) != reached.end())
        continue;
      step(scratch_, c.set, uint8_t(x), &next);
      ++steps;
      text_.pop_back();
      const int64_t rest = next.dead() && !next.can_end ? -1 : cheapest(scratch_, next, nullptr);
      if (rest < 0 || c.prefix.size() + 1 + size_t(rest) > limit) continue;
      reached.push_back(targets);
      ranked.push_back({rest, x});
    }
    std::sort(ranked.rbegin(), ranked.rend());  // the cheapest, then the lowest byte, last
    for (const auto& r : ranked) c.bytes.push_back(r.second);
    c.ranked = true;
  };
  // Follows the distances' completion from `set` after `prefix`, each byte a choice: true when
  // it ends.
  const auto attempt = [&](const StateSet& set, std::vector<uint8_t> prefix) {
    const int64_t n = cheapest(scratch_, set, &tail);
    if (n < 0 || prefix.size() + size_t(n) > limit) return false;
    with_text(prefix);
    StateSet cur = set, next;
    for (uint8_t b : tail) {
      step(scratch_, cur, b, &next);
      ++steps;
      const bool refused = next.dead() && !next.can_end;
      if (every_byte || refused) {
        text_.pop_back();
        stack.push_back({cur, prefix, b, false, {}});
        text_.push_back(b);
      }
      if (refused) return false;
      prefix.push_back(b);
      std::swap(cur, next);
    }
    if (!cur.can_end) return false;
    *out = std::move(prefix);
    return true;
  };
  const int64_t first = cheapest(scratch_, from, &tail);
  for (size_t pass = 0, growth = 1; first >= 0 && pass < 2; ++growth) {
    if (growth > kMaxGrowth || steps >= kMaxSteps) {
      every_byte = ++pass == 1, growth = 0, steps = 0;
      continue;
    }
    limit = size_t(first) + growth;
    stack.clear();
    if (attempt(from, {})) return static_cast<int64_t>(out->size());
    while (!stack.empty() && steps < kMaxSteps) {
      Choice& c = stack.back();
      if (!c.ranked) rank(c);
      if (c.bytes.empty()) {
        stack.pop_back();
        continue;
      }
      const uint8_t b = static_cast<uint8_t>(c.bytes.back());
      c.bytes.pop_back();
      with_text(c.prefix);
      StateSet next;
      step(scratch_, c.set, b, &next);
      ++steps;
      std::vector<uint8_t> prefix = c.prefix;  // copied before attempt, which grows the stack
      prefix.push_back(b);
      if (attempt(next, std::move(prefix))) return static_cast<int64_t>(out->size());
    }
  }
  out->clear();
  return -1;  // none within the search's budget
}

int64_t Matcher::digits_completion(const StateSet& from, std::vector<uint8_t>* out) {
  const Automaton& a = g_->automaton;
  const size_t base = text_.size();
  std::vector<int64_t> starts;
  for (int32_t id : from.frames) {
    const int64_t start = scratch_.region_from(id);
    if (start >= 0 && size_t(start) <= base && std::find(starts.begin(), starts.end(), start) == starts.end())
      starts.push_back(start);
  }
  std::vector<uint8_t> digits, rest;
  StateSet cur, next;
  for (int64_t start : starts) {
    for (const CheckSpec& c : a.checks) {
      text_.resize(base);
      if (!check_digits(c, text_.data() + start, static_cast<int64_t>(base) - start, &digits))
        continue;
      cur = from;
      bool alive = true;
      for (uint8_t b : digits) {
        step(scratch_, cur, b, &next);
        if (next.dead()) {
          alive = false;
          break;
        }
        std::swap(cur, next);
      }
      if (!alive) continue;
      // The text is at the digits' end: the checks of the rest read it.
      const int64_t n = cheapest(scratch_, cur, &rest);
      if (n < 0 || n > kMaxCompletion || !reaches_end(cur, rest)) continue;
      digits.insert(digits.end(), rest.begin(), rest.end());
      *out = std::move(digits);
      return static_cast<int64_t>(out->size());
    }
  }
  text_.resize(base);
  out->clear();
  return -1;
}

}  // namespace tg
