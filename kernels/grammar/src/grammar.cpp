#include "grammar.h"

#include <algorithm>

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
  std::vector<uint8_t> seen(n_rules);
  for (int32_t r = 0; r < n_rules; ++r) {
    if (a.start[r] < 0) continue;
    std::fill(seen.begin(), seen.end(), 0);
    std::vector<int32_t> todo{r}, states;
    seen[r] = 1;
    while (!todo.empty()) {
      int32_t q = todo.back();
      todo.pop_back();
      states.insert(states.end(), direct[q].begin(), direct[q].end());
      for (int32_t caller : tail_callers[q])
        if (!seen[caller]) { seen[caller] = 1; todo.push_back(caller); }
    }
    std::sort(states.begin(), states.end());
    states.erase(std::unique(states.begin(), states.end()), states.end());
    (*out)[r] = std::move(states);
  }
}

}  // namespace

Status compile_grammar(const Vocab& vocab, const int32_t* words, int32_t n_words, Grammar* out) {
  Ir ir;
  Status s = read_ir(words, n_words, &ir);
  if (!s.ok()) return s;
  out->vocab = &vocab;
  s = build_automaton(ir, Limits{}, &out->automaton);
  if (!s.ok()) return s;
  out->cache.assign(out->automaton.n_states(), TokenCache{});
  compute_contexts(out->automaton, &out->contexts);
  return {};
}

const TokenCache& Grammar::cache_for(int32_t state) {
  TokenCache& c = cache[state];
  if (c.ready) return c;
  const Vocab& v = *vocab;
  const Automaton& a = automaton;
  FramePool pool;
  pool.init(a.n_states());
  Stepper stepper(a);
  // levels[d]: parser state after the first d bytes of the current trie path.
  std::vector<StateSet> levels(v.max_len + 1);
  // spec[d]: speculative states after the rule completed somewhere before depth d;
  // open[d]: a speculative continuation itself completed, so anything may follow.
  std::vector<StateSet> spec(v.max_len + 1);
  std::vector<uint8_t> open(v.max_len + 1, 0);
  const std::vector<int32_t>& after = contexts[a.rule_of[state]];
  levels[0].frames.assign(1, state);  // no closure: the other frames of the real state are separate
  std::vector<uint32_t> accepted(v.words(), 0);
  bool any_accepted = false;
  const auto accept = [&](int32_t pos) {
    int32_t id = v.order[pos];
    accepted[id >> 5] |= 1u << (id & 31);
    any_accepted = true;
  };
  const int32_t n_nodes = static_cast<int32_t>(v.trie.size());
  for (int32_t i = 1; i < n_nodes;) {
    const TrieNode& node = v.trie[i];
    const int32_t d = node.depth;
    const StateSet& prev = levels[d - 1];
    const int32_t only = prev.frames.size() == 1 ? prev.frames[0] : -1;
    const int32_t next = only >= 0 && only < a.n_states() ? a.step(only, node.byte) : -1;
    if (only >= 0 && only < a.n_states() && spec[d - 1].dead() && !open[d - 1] &&
        (next < 0 || a.plain[next])) {
      // Most of the walk: one bottom frame moving through plain states, a bare DFA step.
      levels[d].frames.clear();
      if (next >= 0) levels[d].frames.push_back(next);
      levels[d].can_end = false;
      spec[d].frames.clear();
      spec[d].can_end = false;
      open[d] = 0;
    } else {
      stepper.step(pool, prev, node.byte, &levels[d]);
      stepper.step(pool, spec[d - 1], node.byte, &spec[d]);
      if (levels[d].can_end) stepper.extend(pool, after, &spec[d]);
      open[d] = open[d - 1] || spec[d].can_end;
    }
    const bool own = !levels[d].dead();
    const bool maybe = !spec[d].dead() || open[d];
    const int32_t own_end = node.tok_begin + node.n_here;
    if (own || levels[d].can_end) {
      for (int32_t p = node.tok_begin; p < own_end; ++p) accept(p);
    } else if (maybe) {
      for (int32_t p = node.tok_begin; p < own_end; ++p) c.uncertain.push_back(p);
    }
    if (!own && (open[d] || spec[d].dead())) {
      // Deeper tokens no longer depend on this walk: all uncertain, or all rejected.
      if (open[d])
        for (int32_t p = own_end; p < node.tok_end; ++p) c.uncertain.push_back(p);
      i = node.end;
      continue;
    }
    ++i;
  }
  if (any_accepted) c.accepted.swap(accepted);
  c.ready = true;
  ++caches_built;
  cache_bytes += int64_t(c.accepted.size()) * 4 + int64_t(c.uncertain.size()) * 4;
  return c;
}

void TokenWalker::check(int32_t frame, const std::vector<int32_t>& positions, uint32_t* words) {
  const Vocab& v = *g_.vocab;
  if (levels_.size() < static_cast<size_t>(v.max_len + 1)) levels_.resize(v.max_len + 1);
  levels_[0].frames.assign(1, frame);
  levels_[0].can_end = false;
  const uint8_t* prev = nullptr;
  int32_t valid = 0;  // levels_[0..valid] hold the states along `prev`
  for (int32_t pos : positions) {
    const int32_t id = v.order[pos], len = v.length(id);
    const uint8_t* b = v.bytes(id);
    int32_t d = 0;
    while (d < valid && d < len && b[d] == prev[d]) ++d;
    bool alive = true;
    for (; d < len; ++d) {
      if (levels_[d].dead()) { alive = false; break; }
      stepper_.step(pool_, levels_[d], b[d], &levels_[d + 1]);
    }
    valid = d;
    prev = b;
    if (alive && (!levels_[len].dead() || levels_[len].can_end)) words[id >> 5] |= 1u << (id & 31);
  }
}

}  // namespace tg
