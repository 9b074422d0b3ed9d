// Thompson's construction of the IR's regular node kinds, shared by the rules' automata
// (automaton.cpp) and the children of AND nodes (intersection.cpp). A builder B has:
//   int32_t add();                                      a new node (counted against its budget)
//   void eps(int32_t from, int32_t to);                 an empty step
//   void byte(int32_t from, int32_t lo, int32_t hi, int32_t to);
//   int32_t n_nodes() const;
//   bool ok() const;                                    no error so far
//   int32_t expr(int32_t node, int32_t from, int32_t depth);   any child (its checks, then this)
//   int32_t other(int32_t node, int32_t from, int32_t depth);  the kinds built here not
#pragma once
#include <cstdint>
#include <utility>

#include "ir.h"

namespace tg {

// Builds `node` from `from`; returns the node reached at its end.
template <class B>
int32_t thompson(const Ir& ir, int32_t node, int32_t from, int32_t depth, B& b) {
  const int32_t* a = ir.args(node);
  // AUTOMATON and MACHINE: a node per state and one end, entered at state 0 from `from` and
  // left from the accepting states. Returns (the first state's node, the end).
  const auto states = [&](int32_t n, const int32_t* accept) {
    const int32_t first = b.n_nodes();
    for (int32_t i = 0; i < n; ++i) b.add();
    const int32_t end = b.add();
    if (b.ok()) {
      b.eps(from, first);
      for (int32_t i = 0; i < n; ++i)
        if (accept[i]) b.eps(first + i, end);
    }
    return std::make_pair(first, end);
  };
  switch (ir.kind(node)) {
    case BYTES: {
      int32_t cur = from;
      for (int32_t i = 0; i < a[0] && b.ok(); ++i) {
        const int32_t n = b.add();
        b.byte(cur, a[1 + i], a[1 + i], n);
        cur = n;
      }
      return cur;
    }
    case BYTESET: {
      const int32_t n = b.add();
      for (int32_t i = 0; i < a[0]; ++i) b.byte(from, a[1 + 2 * i], a[2 + 2 * i], n);
      return n;
    }
    case SEQ: {
      int32_t cur = from;
      for (int32_t i = 0; i < a[0]; ++i) cur = b.expr(a[1 + i], cur, depth + 1);
      return cur;
    }
    case ALT: {
      // Alternatives share `from`: constructions only add edges leaving their start, and
      // loops go back to fresh nodes, so sharing cannot create false paths.
      const int32_t end = b.add();
      for (int32_t i = 0; i < a[0]; ++i) b.eps(b.expr(a[1 + i], from, depth + 1), end);
      return end;
    }
    case REPEAT: {
      // A copy that adds no node reads nothing (an empty item): it stands for all the others,
      // which would otherwise cost a loop turn each, up to 2^31 of them.
      const auto copy = [&](int32_t at) {
        const int32_t before = b.n_nodes(), next = b.expr(a[2], at, depth + 1);
        return std::make_pair(next, b.n_nodes() == before && next == at);
      };
      int32_t cur = from;
      for (int32_t i = 0; i < a[0] && b.ok(); ++i) {
        const auto [next, empty] = copy(cur);
        cur = next;
        if (empty) break;
      }
      if (a[1] < 0) {
        const int32_t loop = b.add();
        b.eps(cur, loop);
        b.eps(b.expr(a[2], loop, depth + 1), loop);
        return loop;
      }
      const int32_t end = b.add();
      for (int32_t i = a[0]; i < a[1] && b.ok(); ++i) {
        b.eps(cur, end);
        const auto [next, empty] = copy(cur);
        cur = next;
        if (empty) break;
      }
      b.eps(cur, end);
      return end;
    }
    case AUTOMATON: {
      const auto [first, end] = states(a[0], a + 2);
      if (!b.ok()) return end;
      for (const int32_t* r = a + 2 + a[0]; r < a + 2 + a[0] + 4 * int64_t(a[1]); r += 4)
        b.byte(first + r[0], r[1], r[2], first + r[3]);
      return end;
    }
    case MACHINE: {
      const auto [first, end] = states(a[0], a + 2);
      // An edge's expression only adds edges leaving its start (see ALT): the state's node is
      // its start, shared by the state's edges.
      for (const int32_t* e = machine_edges(a); e < machine_edges_end(a) && b.ok(); e += 3)
        b.eps(b.expr(e[1], first + e[0], depth + 1), first + e[2]);
      return end;
    }
    default:
      return b.other(node, from, depth);
  }
}

}  // namespace tg
