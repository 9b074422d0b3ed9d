#include "grammar.h"

#include "ir.h"

namespace tg {

Status compile_grammar(const Vocab& vocab, const int32_t* words, int32_t n_words, Grammar* out) {
  Ir ir;
  Status s = read_ir(words, n_words, &ir);
  if (!s.ok()) return s;
  out->vocab = &vocab;
  s = build_automaton(ir, Limits{}, &out->automaton);
  if (!s.ok()) return s;
  out->cache.assign(out->automaton.n_states(), TokenCache{});
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
  std::vector<uint8_t> ended(v.max_len + 1, 0);  // the walk's bottom rule completed before depth d
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
    stepper.step(pool, levels[d - 1], node.byte, &levels[d]);
    ended[d] = ended[d - 1] || levels[d - 1].can_end;
    const StateSet& here = levels[d];
    const int32_t own_end = node.tok_begin + node.n_here;
    if (!here.dead() || here.can_end) {
      for (int32_t p = node.tok_begin; p < own_end; ++p) accept(p);
    } else if (ended[d]) {
      for (int32_t p = node.tok_begin; p < own_end; ++p) c.uncertain.push_back(p);
    }
    if (here.dead()) {
      // Nothing continues inside the rule: deeper tokens depend on the stack, or fail.
      if (ended[d] || here.can_end)
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
