#include "cache_classes.h"

#include <algorithm>

#include "signature_table.h"

namespace tg {

std::vector<int32_t> cache_representatives(const Automaton& a, int32_t horizon) {
  const int32_t n = a.n_states();
  // Classes never span rules, and a small rule costs few caches however alike its states are:
  // only the states of large rules are compared (the rest is a third of a schema's compile).
  // Small grammars too: the copies of a state the subset construction once made (a word's
  // letters in `\w+( \w+)*`) are one state now that states are the NFA positions that act.
  constexpr int32_t kWorthClassing = 64;
  std::vector<int32_t> rule_size(a.start.size(), 0), rep(n);
  for (int32_t s = 0; s < n; ++s) ++rule_size[a.rule_of[s]], rep[s] = s;
  std::vector<uint8_t> large(n);
  bool any = false;
  for (int32_t s = 0; s < n; ++s) any |= large[s] = rule_size[a.rule_of[s]] >= kWorthClassing;
  if (!any) return rep;
  const std::vector<uint8_t> nullable = nullable_rules(a);

  // Each round refines the classes by one more byte of depth. Only a state with a successor
  // whose class split in the last round can split now, so a round looks at those alone (a
  // chain splits one position per round), and ids stay stable: of a class's states looked at,
  // those with the class's old signature (or else the first group) keep its id.
  std::vector<int32_t> pred_begin(n + 1, 0), preds;
  {
    // predecessors by target, in two passes over the edges (counts, then places)
    const auto each_edge = [&](auto&& f) {
      for (int32_t s = 0; s < n; ++s) {
        if (!large[s]) continue;
        for (const ByteRun* r = a.runs_begin(s); r != a.runs_end(s); ++r) f(r->to, s);
        for (const Call* c = a.calls_begin(s); c != a.calls_end(s); ++c)
          if (!nullable[c->rule]) f(c->next, s);
      }
    };
    each_edge([&](int32_t t, int32_t) { ++pred_begin[t + 1]; });
    for (int32_t t = 0; t < n; ++t) pred_begin[t + 1] += pred_begin[t];
    preds.resize(pred_begin[n]);
    std::vector<int32_t> fill(pred_begin.begin(), pred_begin.end() - 1);
    each_edge([&](int32_t t, int32_t s) { preds[fill[t]++] = s; });
  }
  SignatureTable table;
  std::vector<int32_t> cls(n), size;  // size: states per class id
  table.clear(n);
  for (int32_t s = 0; s < n; ++s) {
    const size_t from = table.words_.size();
    if (large[s]) table.words_.insert(table.words_.end(), {a.rule_of[s], a.final[s]});
    else table.words_.insert(table.words_.end(), {-1, s});  // a class of its own
    cls[s] = table.intern(from);
    if (cls[s] == static_cast<int32_t>(size.size())) size.push_back(0);
    ++size[cls[s]];
  }
  std::vector<int32_t> dirty, changed, group, group_id, stamp(n, -1);
  std::vector<int32_t> seen(size.size(), -1), dirty_in(size.size(), 0), group_size;
  std::vector<int32_t> largest(size.size(), -1), largest_size(size.size(), 0);  // per class looked at whole
  for (int32_t s = 0; s < n; ++s)
    if (large[s]) dirty.push_back(s);
  std::vector<std::pair<int32_t, int32_t>> calls;
  for (int32_t round = 0; round < horizon && !dirty.empty(); ++round) {
    table.clear(dirty.size());
    group.resize(dirty.size());
    for (size_t i = 0; i < dirty.size(); ++i) {
      const int32_t s = dirty[i];
      std::vector<int32_t>& w = table.words_;
      const size_t from = w.size();
      w.push_back(cls[s]);
      w.push_back(static_cast<int32_t>(a.runs_end(s) - a.runs_begin(s)));
      for (const ByteRun* r = a.runs_begin(s); r != a.runs_end(s); ++r) w.insert(w.end(), {r->lo, r->hi, cls[r->to]});
      // A call consumes a byte before its return unless the rule is nullable: then the state
      // returned to must be the same one (encoded below zero, apart from class ids).
      calls.clear();
      for (const Call* c = a.calls_begin(s); c != a.calls_end(s); ++c)
        calls.push_back({c->rule, nullable[c->rule] ? -1 - c->next : cls[c->next]});
      std::sort(calls.begin(), calls.end());
      w.push_back(static_cast<int32_t>(calls.size()));
      for (const auto& [rule, to] : calls) w.insert(w.end(), {rule, to});
      group[i] = table.intern(from);
      ++dirty_in[cls[s]];
    }
    // A class with states not looked at keeps its id for them (their signature is the old one,
    // which no state looked at has: each of those has a successor with a new id). A class
    // looked at whole keeps it for its largest group, so that the fewest states move: a chain
    // walked from its far end would otherwise move all but one state every round (Hopcroft's
    // rule, which keeps the refinement near-linear).
    group_id.assign(table.size(), -1);
    group_size.assign(table.size(), 0);
    for (size_t i = 0; i < dirty.size(); ++i) {
      const int32_t c = cls[dirty[i]], g = group[i];
      if (dirty_in[c] != size[c]) continue;
      if (++group_size[g] > largest_size[c] || seen[c] != round) largest[c] = g, largest_size[c] = group_size[g];
      seen[c] = round;
    }
    changed.clear();
    for (size_t i = 0; i < dirty.size(); ++i) {
      const int32_t c = cls[dirty[i]], g = group[i];
      if (group_id[g] < 0) {
        if (dirty_in[c] == size[c] && largest[c] == g) {
          group_id[g] = c;
        } else {
          group_id[g] = static_cast<int32_t>(size.size());
          size.push_back(0), dirty_in.push_back(0), seen.push_back(-1), largest.push_back(-1),
              largest_size.push_back(0);
        }
      }
      if (group_id[g] != c) changed.push_back(static_cast<int32_t>(i));
    }
    for (int32_t s : dirty) dirty_in[cls[s]] = 0;
    for (int32_t& i : changed) {
      const int32_t s = dirty[i];
      --size[cls[s]];
      cls[s] = group_id[group[i]];
      ++size[cls[s]];
      i = s;
    }
    // Next round: the states leading to one that moved, but those alone in their class (a
    // class only ever splits: most states of an object's chain of members are alone after a
    // round or two, and were looked at again every round after).
    dirty.clear();
    for (int32_t t : changed)
      for (int32_t k = pred_begin[t]; k < pred_begin[t + 1]; ++k)
        if (stamp[preds[k]] != round && size[cls[preds[k]]] > 1) {
          stamp[preds[k]] = round;
          dirty.push_back(preds[k]);
        }
  }
  std::vector<int32_t> first(size.size(), -1);
  for (int32_t s = 0; s < n; ++s) {
    if (first[cls[s]] < 0) first[cls[s]] = s;
    rep[s] = first[cls[s]];
  }
  return rep;
}

}  // namespace tg
