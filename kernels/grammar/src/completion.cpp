#include "completion.h"

#include <functional>
#include <queue>

namespace tg {

// One Dijkstra over every state of every rule, backwards from the final states. A call edge
// s -(rule)-> next costs dist(start[rule]) + dist(next), so it is relaxed once both of its
// inputs are settled (Knuth's generalization to such superior functions): a state's move then
// only points at states settled before it, and following moves always terminates, even
// through recursion and zero-length calls.
void compute_shortest(const Automaton& a, Shortest* out) {
  const int32_t n = a.n_states();
  const int64_t inf = Shortest::kInf;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> byte_pred(n);  // target -> (source, byte)
  std::vector<std::vector<int32_t>> call_users(n);                    // input state -> call index
  std::vector<int32_t> call_src(a.calls.size()), pending(a.calls.size());
  for (int32_t s = 0; s < n; ++s) {
    for (const ByteRun* r = a.runs_begin(s); r != a.runs_end(s); ++r) byte_pred[r->to].push_back({s, r->lo});
    for (int32_t i = a.call_begin[s]; i < a.call_begin[s + 1]; ++i) {
      const int32_t start = a.start[a.calls[i].rule], next = a.calls[i].next;
      call_src[i] = s;
      pending[i] = start == next ? 1 : 2;
      call_users[start].push_back(i);
      if (start != next) call_users[next].push_back(i);
    }
  }
  out->dist.assign(n, inf);
  out->move.assign(n, Shortest::kDone);
  std::vector<uint8_t> settled(n, 0);
  using Item = std::pair<int64_t, int32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
  const auto relax = [&](int32_t s, int64_t d, int32_t move) {
    if (settled[s] || d >= out->dist[s]) return;
    out->dist[s] = d;
    out->move[s] = move;
    queue.push({d, s});
  };
  for (int32_t s = 0; s < n; ++s)
    if (a.final[s]) relax(s, 0, Shortest::kDone);
  while (!queue.empty()) {
    const auto [d, t] = queue.top();
    queue.pop();
    if (settled[t]) continue;
    settled[t] = 1;
    for (auto [s, b] : byte_pred[t]) relax(s, Shortest::add(d, 1), b);
    for (int32_t i : call_users[t]) {
      if (--pending[i] > 0) continue;
      relax(call_src[i], Shortest::add(out->dist[a.start[a.calls[i].rule]], out->dist[a.calls[i].next]), 256 + i);
    }
  }
  out->ready = true;
}

void Shortest::emit(const Automaton& a, int32_t state, std::vector<uint8_t>* out) const {
  std::vector<int32_t> resume{state};  // where to go on once the rule being emitted completes
  while (!resume.empty()) {
    int32_t s = resume.back();
    resume.pop_back();
    while (move[s] != kDone) {
      if (move[s] < 256) {
        out->push_back(static_cast<uint8_t>(move[s]));
        s = a.step(s, static_cast<uint8_t>(move[s]));
        continue;
      }
      const Call& c = a.calls[move[s] - 256];
      const int32_t callee = a.start[c.rule];
      if (dist[callee] > 0) resume.push_back(c.next);  // an empty callee emits nothing
      s = dist[callee] > 0 ? callee : c.next;
    }
  }
}

}  // namespace tg
