// Edges of one kind grouped by source node, for the automata built from the IR (automaton.cpp's
// rules, intersection.cpp's AND children).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace tg {

// Edges of one kind grouped by source node. They are recorded in any order while an
// automaton is built and grouped once afterwards (a stable counting sort), so building
// allocates nothing per node and the buffers are reused from one rule to the next.
template <class T>
class EdgeLists {
 public:
  void clear() { raw_.clear(); }
  void add(int32_t from, const T& edge) { raw_.push_back({from, edge}); }
  void group(int32_t n_nodes) {
    begin_.assign(n_nodes + 1, 0);
    for (const auto& e : raw_) ++begin_[e.first + 1];
    for (int32_t i = 0; i < n_nodes; ++i) begin_[i + 1] += begin_[i];
    fill_.assign(begin_.begin(), begin_.end() - 1);
    items_.resize(raw_.size());
    for (const auto& e : raw_) items_[fill_[e.first]++] = e.second;
  }
  const T* begin(int32_t node) const { return items_.data() + begin_[node]; }
  const T* end(int32_t node) const { return items_.data() + begin_[node + 1]; }

 private:
  std::vector<std::pair<int32_t, T>> raw_;
  std::vector<int32_t> begin_, fill_;
  std::vector<T> items_;
};

}  // namespace tg
