#include "matcher.h"

#include <algorithm>
#include <cstring>

namespace tg {

Matcher::Matcher(Grammar* g) : g_(g), stepper_(g->automaton), walker_(*g, scratch_, &text_) { reset(); }

void Matcher::reset() {
  const Automaton& a = g_->automaton;
  pool_.init(a.n_states());
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
  for (int32_t id : cur.set.frames) {
    const Frame f = pool_.get(id);
    const int32_t ret = f.parent < 0 ? -1 : pool_.get(f.parent).state;
    const TokenCache& c = g_->cache_for(f.state, is_mark(ret) ? -1 : ret);
    // Frames with the same cache share the accepted part; only the uncertain part differs.
    if (std::find(seen_caches_.begin(), seen_caches_.end(), &c) == seen_caches_.end()) {
      seen_caches_.push_back(&c);
      if (!c.accepted.empty()) {
        const uint32_t* __restrict acc = c.accepted.data();
        for (int32_t w = 0; w < n_words; ++w) words[w] |= acc[w];
      }
    }
    if (!c.uncertain.empty()) walker_.check(id, c.uncertain, words);
  }
  if (cur.set.can_end)
    for (int32_t id : v.stop_ids) words[id >> 5] |= 1u << (id & 31);
  scratch_.clear();
}

bool Matcher::advance(const uint8_t* data, int32_t n, StateSet* out) {
  const StateSet* in = &history_.back().set;
  const size_t base = text_.size();
  StateSet* bufs[2] = {&a_, &b_};
  int32_t i = 0;
  for (; i < n && !in->dead(); ++i) {
    StateSet* next = bufs[i & 1];
    step(pool_, *in, data[i], next);
    in = next;
  }
  if (i < n || (in->dead() && !in->can_end)) {
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

bool Matcher::completes(const std::vector<uint8_t>& bytes) {
  scratch_.layer_on(pool_);
  const size_t base = text_.size();
  StateSet cur = history_.back().set, next;
  size_t i = 0;
  for (; i < bytes.size() && !cur.dead(); ++i) {
    step(scratch_, cur, bytes[i], &next);
    std::swap(cur, next);
  }
  const bool ok = i == bytes.size() && cur.can_end;
  text_.resize(base);
  scratch_.clear();
  return ok;
}

int64_t Matcher::shortest_completion(std::vector<uint8_t>* out) {
  out->clear();
  const Entry& cur = history_.back();
  if (cur.terminated) return -1;
  if (cur.set.can_end) return 0;
  const Shortest& sh = g_->shortest();
  // A completion starts with a byte from some live frame, then finishes that frame's rule and
  // each rule below it in turn: it is at least the sum of their distances, which is reachable.
  int64_t best = Shortest::kInf;
  int32_t best_frame = -1;
  for (int32_t id : cur.set.frames) {
    int64_t cost = 0;
    for (int32_t f = id; f >= 0 && cost < best; f = pool_.get(f).parent)
      if (!is_mark(pool_.get(f).state)) cost = std::min(cost + sh.dist[pool_.get(f).state], Shortest::kInf);
    if (cost < best) best = cost, best_frame = id;
  }
  if (best_frame < 0) return -1;
  if (best > kMaxCompletion) return best;  // not spelled out: the caller reports it
  for (int32_t f = best_frame; f >= 0; f = pool_.get(f).parent)
    if (!is_mark(pool_.get(f).state)) sh.emit(g_->automaton, pool_.get(f).state, out);
  if (!g_->automaton.checks.empty() && !completes(*out)) {  // the distances know no checks
    out->clear();
    return -1;
  }
  return best;
}

}  // namespace tg
