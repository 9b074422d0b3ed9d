#include "cache_classes.h"

#include <algorithm>
#include <climits>
#include <deque>

#include "signature_table.h"

namespace tg {

// The fewest bytes a non-nullable rule consumes, up to `cap`: a breadth-first search from its
// start to the nearest completion, where a call costs 0 bytes if its rule is nullable and 1
// otherwise (a lower bound, so no rule's search waits on another's: any lower bound keeps the
// classes below exact). Asked only for the rules that large states call; each searched once.
class CacheClasses::MinLengths {
 public:
  MinLengths(const Automaton& a, const std::vector<uint8_t>& nullable, int32_t cap)
      : a_(a), nullable_(nullable), cap_(cap), known_(a.start.size(), -1) {}

  int32_t of(int32_t rule) {
    if (nullable_[rule]) return 0;
    int32_t& m = known_[rule];
    if (m < 0) m = search(rule);
    return m;
  }

 private:
  int32_t search(int32_t rule) {
    const int32_t start = a_.start[rule];
    if (start < 0) return 1;
    int32_t found = cap_;
    if (depth_.empty()) depth_.assign(a_.n_states(), -1);  // (made at the first search: many grammars have none)
    std::deque<int32_t> todo{start};
    touched_.assign(1, start);
    depth_[start] = 0;
    while (!todo.empty()) {
      const int32_t s = todo.front();
      todo.pop_front();
      const int32_t d = depth_[s];
      if (d >= found) break;  // the deque holds depths d and d + 1 in order: nothing nearer is left
      if (a_.final[s]) {
        found = d;
        break;
      }
      const auto reach = [&](int32_t t, int32_t cost) {
        if (depth_[t] >= 0 && depth_[t] <= d + cost) return;
        if (depth_[t] < 0) touched_.push_back(t);
        depth_[t] = d + cost;
        if (cost == 0) todo.push_front(t); else todo.push_back(t);
      };
      for (const ByteRun* r = a_.runs_begin(s); r != a_.runs_end(s); ++r) reach(r->to, 1);
      for (const Call* c = a_.calls_begin(s); c != a_.calls_end(s); ++c) reach(c->next, nullable_[c->rule] ? 0 : 1);
    }
    for (int32_t t : touched_) depth_[t] = -1;
    return std::max(found, 1);
  }

  const Automaton& a_;
  const std::vector<uint8_t>& nullable_;
  const int32_t cap_;
  std::vector<int32_t> known_, depth_, touched_;
};

CacheClasses::CacheClasses(const Automaton& a, int32_t horizon)
    : a_(a), horizon_(horizon), nullable_(a.nullable), size_(a.start.size(), 0) {
  for (int32_t s = 0; s < a.n_states(); ++s) ++size_[a.rule_of[s]];
  min_length_ = std::make_unique<MinLengths>(a, nullable_, horizon + 1);
}

CacheClasses::~CacheClasses() = default;

void CacheClasses::classify(int32_t rule, int32_t* rep) {
  const Automaton& a = a_;
  const int32_t horizon = horizon_;
  const std::vector<uint8_t>& nullable = nullable_;
  MinLengths& min_length = *min_length_;
  // A rule's states are numbered consecutively from its start (automaton.h): state lo + i is
  // i here.
  const int32_t lo = a.start[rule], n = size_[rule];
  for (int32_t i = 0; i < n; ++i) rep[lo + i] = lo + i;
  // A small rule costs few caches however alike its states are: only large rules are compared
  // (the rest is a third of a schema's compile). Small grammars too: the copies of a state the
  // subset construction once made (a word's letters in `\w+( \w+)*`) are one state now that
  // states are the NFA positions that act.
  constexpr int32_t kWorthClassing = 64;
  if (n < kWorthClassing) return;

  // Each round refines the classes by one more byte of depth. Only a state with a successor
  // whose class split in the last round can split now, so a round looks at those alone (a
  // chain splits one position per round), and ids stay stable: of a class's states looked at,
  // those with the class's old signature (or else the first group) keep its id. A call to a
  // rule that consumes at least m bytes reaches its return state m bytes later: the return's
  // class m - 1 rounds back is what counts (a string's 16-character blocks would otherwise
  // split a 255-character bound into a class per block, and its caches with them).
  std::vector<int32_t> pred_begin(n + 1, 0), preds, delays, hist_of(n, -1);
  std::vector<std::vector<std::pair<int32_t, int32_t>>> hists;  // (depth, class) from depth 0, per return state
  {
    // predecessors by target, with the rounds until a move of the target reaches them, in two
    // passes over the edges (counts, then places)
    const auto each_edge = [&](auto&& f) {
      for (int32_t s = 0; s < n; ++s) {
        for (const ByteRun* r = a.runs_begin(lo + s); r != a.runs_end(lo + s); ++r) f(r->to - lo, s, 1);
        for (const Call* c = a.calls_begin(lo + s); c != a.calls_end(lo + s); ++c)
          if (!nullable[c->rule]) {
            const int32_t m = min_length.of(c->rule);
            if (m <= horizon) f(c->next - lo, s, m);  // else its return lies beyond the horizon
          }
      }
    };
    each_edge([&](int32_t t, int32_t, int32_t) { ++pred_begin[t + 1]; });
    for (int32_t t = 0; t < n; ++t) pred_begin[t + 1] += pred_begin[t];
    preds.resize(pred_begin[n]);
    delays.resize(pred_begin[n]);
    std::vector<int32_t> fill(pred_begin.begin(), pred_begin.end() - 1);
    each_edge([&](int32_t t, int32_t s, int32_t m) {
      preds[fill[t]] = s, delays[fill[t]++] = m;
      if (m > 1 && hist_of[t] < 0) hist_of[t] = static_cast<int32_t>(hists.size()), hists.emplace_back();
    });
  }
  SignatureTable table;
  std::vector<int32_t> cls(n), size;  // size: states per class id
  table.clear(n);
  for (int32_t s = 0; s < n; ++s) {
    const size_t from = table.words_.size();
    table.words_.push_back(a.final[lo + s]);
    cls[s] = table.intern(from);
    if (cls[s] == static_cast<int32_t>(size.size())) size.push_back(0);
    ++size[cls[s]];
  }
  std::vector<int32_t> dirty, changed, group, group_id, stamp(n, -1);
  std::vector<int32_t> seen(size.size(), -1), dirty_in(size.size(), 0), group_size;
  std::vector<int32_t> largest(size.size(), -1), largest_size(size.size(), 0);  // per class looked at whole
  for (int32_t s = 0; s < n; ++s) dirty.push_back(s);
  for (int32_t t = 0; t < n; ++t)
    if (hist_of[t] >= 0) hists[hist_of[t]].push_back({0, cls[t]});
  // The class of t at `depth` (at most the current one's).
  const auto class_at = [&](int32_t t, int32_t depth, int32_t now) {
    if (depth >= now || hist_of[t] < 0) return cls[t];
    const auto& h = hists[hist_of[t]];
    size_t k = h.size() - 1;
    while (h[k].first > depth) --k;
    return h[k].second;
  };
  std::vector<std::vector<int32_t>> later(horizon);  // round -> states a move reaches then
  size_t waiting = 0;
  std::vector<std::pair<int32_t, int32_t>> calls;
  for (int32_t round = 0; round < horizon; ++round) {
    if (round > 0) {
      dirty.clear();
      for (int32_t p : later[round])
        if (stamp[p] != round && size[cls[p]] > 1) {
          stamp[p] = round;
          dirty.push_back(p);
        }
      waiting -= later[round].size();
      std::vector<int32_t>().swap(later[round]);
    }
    if (dirty.empty()) {
      if (!waiting) break;
      continue;
    }
    table.clear(dirty.size());
    group.resize(dirty.size());
    for (size_t i = 0; i < dirty.size(); ++i) {
      const int32_t s = dirty[i];
      std::vector<int32_t>& w = table.words_;
      const size_t from = w.size();
      w.push_back(cls[s]);
      w.push_back(static_cast<int32_t>(a.runs_end(lo + s) - a.runs_begin(lo + s)));
      for (const ByteRun* r = a.runs_begin(lo + s); r != a.runs_end(lo + s); ++r)
        w.insert(w.end(), {r->lo, r->hi, cls[r->to - lo]});
      // A call consumes a byte before its return unless the rule is nullable: then the state
      // returned to must be the same one (encoded below zero, apart from class ids).
      calls.clear();
      for (const Call* c = a.calls_begin(lo + s); c != a.calls_end(lo + s); ++c) {
        if (nullable[c->rule]) {
          calls.push_back({c->rule, -1 - (c->next - lo)});
          continue;
        }
        // The return's class at the depth it is seen from depth round + 1; before it is reached,
        // its class at depth 0 all the same: splitting early changes no class at the horizon,
        // and spares a round that would look at every such state again.
        const int32_t m = min_length.of(c->rule);
        calls.push_back({c->rule, m > horizon ? INT32_MIN : class_at(c->next - lo, std::max(round + 1 - m, 0), round)});
      }
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
      if (hist_of[s] >= 0) hists[hist_of[s]].push_back({round + 1, cls[s]});
      i = s;
    }
    // Later rounds: the states leading to one that moved, once the move reaches them, but
    // those alone in their class then (a class only ever splits: most states of an object's
    // chain of members are alone after a round or two, and were looked at again every round after).
    for (int32_t t : changed)
      for (int32_t k = pred_begin[t]; k < pred_begin[t + 1]; ++k)
        if (round + delays[k] < horizon && size[cls[preds[k]]] > 1) {
          later[round + delays[k]].push_back(preds[k]);
          ++waiting;
        }
  }
  std::vector<int32_t> first(size.size(), -1);
  for (int32_t s = 0; s < n; ++s) {
    if (first[cls[s]] < 0) first[cls[s]] = lo + s;
    rep[lo + s] = first[cls[s]];
  }
}

}  // namespace tg
