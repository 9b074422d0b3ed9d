// Reads and validates the flat IR words produced by py/trellis/grammar/ir.py.
#pragma once
#include <cstdint>
#include <vector>

#include "status.h"

namespace tg {

// CHECK is a zero-width assertion decided by a predicate (checks.h) on the text of the nearest
// enclosing REGION, from the region's first byte to the check. AND (n, flags, (child, want)*n)
// matches what every wanted child matches and no other does; its children are regular (bytes,
// byte sets, sequences, choices, repetitions), at least one is wanted, and flag kAndJsonEscaped
// writes each matched byte as a JSON string does (intersection.h builds it). AUTOMATON
// (n_states, n_runs, accept * n_states, (from, lo, hi, to) * n_runs) is the strings that lead
// from state 0 to an accepting state: an automaton a front-end built (read as an NFA: runs may
// overlap), regular like bytes.
// MACHINE (n_states, n_edges, accept * n_states, (from, child, to) * n_edges) is the same
// with an expression on each edge instead of a byte range: a counting automaton's states
// (objects' members in order, tracked keys, counted items) in one node, regular when its
// children are.
enum Kind : int32_t {
  BYTES = 1, BYTESET = 2, SEQ = 3, ALT = 4, REPEAT = 5, REF = 6, CHECK = 7, REGION = 8, AND = 9, AUTOMATON = 10,
  MACHINE = 11
};
constexpr int32_t kAndJsonEscaped = 1;

struct Ir {
  static constexpr int32_t kFirstNode = 4;  // after the header; nodes lie in [kFirstNode, table)
  std::vector<int32_t> words;
  int32_t n_rules = 0;
  int32_t root = 0;
  int32_t table = 0;  // where the rule bodies' offsets start, one word per rule, to the end
  int32_t body(int32_t rule) const { return words[table + rule]; }
  int32_t kind(int32_t node) const { return words[node]; }
  // Operands of a node, after its kind word.
  const int32_t* args(int32_t node) const { return &words[node + 1]; }
  // Words the (validated) node takes, kind word included: the offset of the node after it.
  int32_t size(int32_t node) const { return node_size(&words[node]); }
  // The same for a node's words.
  static int32_t node_size(const int32_t* node) {
    const int32_t* a = node + 1;
    switch (node[0]) {
      case BYTESET: return 2 + 2 * a[0];
      case BYTES: case SEQ: case ALT: return 2 + a[0];
      case REPEAT: return 4;
      case CHECK: return 3 + a[1];
      case AND: return 3 + 2 * a[0];
      case AUTOMATON: return 3 + a[0] + 4 * a[1];
      case MACHINE: return 3 + a[0] + 3 * a[1];
      default: return 2;  // REF, REGION
    }
  }
};

// A MACHINE node's edges (its operands `a`): n_edges triples (from, child, to).
inline const int32_t* machine_edges(const int32_t* a) { return a + 2 + a[0]; }
inline const int32_t* machine_edges_end(const int32_t* a) { return a + 2 + a[0] + 3 * a[1]; }

constexpr int32_t kIrMagic = 0x54524C31;
constexpr int32_t kIrVersion = 6;
constexpr int32_t kMaxIrWords = 1 << 24;

// Fills `ir` from the words, checking every offset, count and range.
Status read_ir(const int32_t* words, int32_t n_words, Ir* ir);
// The same, taking the words instead of a copy.
Status read_ir(std::vector<int32_t>&& words, Ir* ir);

}  // namespace tg
