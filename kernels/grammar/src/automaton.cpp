#include "automaton.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "edge_lists.h"
#include "intersection.h"
#include "thompson.h"

namespace tg {

namespace {

constexpr int64_t kHuge = int64_t(1) << 40;
int64_t sat_add(int64_t a, int64_t b) { return std::min(kHuge, a + b); }
int64_t sat_mul(int64_t a, int64_t b) { return (a != 0 && b > kHuge / a) ? kHuge : std::min(kHuge, a * b); }

// ---- call graph: which rules are recursive, which are small enough to inline ----------

// Calls visit(node) once per node of rule r's body (a DAG: shared nodes once), below REGION
// nodes too when `into_regions`. `stamp` (per IR word, no entry equal to r) and `stack` are scratch.
template <class F>
void each_body_node(const Ir& ir, int32_t r, bool into_regions, std::vector<int32_t>* stamp,
                    std::vector<int32_t>* stack, F&& visit) {
  stack->assign(1, ir.body(r));
  while (!stack->empty()) {
    const int32_t node = stack->back();
    stack->pop_back();
    if ((*stamp)[node] == r) continue;
    (*stamp)[node] = r;
    const int32_t* a = ir.args(node);
    switch (ir.kind(node)) {
      case SEQ: case ALT: stack->insert(stack->end(), a + 1, a + 1 + a[0]); break;
      case REPEAT: stack->push_back(a[2]); break;
      case REGION: if (into_regions) stack->push_back(a[0]); break;
      case MACHINE:
        for (const int32_t* e = machine_edges(a); e < machine_edges_end(a); e += 3) stack->push_back(e[1]);
        break;
      default: visit(node); break;
    }
  }
}

// Edges between rules, each rule's in one list: rule r's lead to to[begin[r] .. begin[r + 1])
// (a list per rule was an allocation per rule, several thousand in a large schema's grammar).
struct RuleGraph {
  std::vector<int32_t> begin{0}, to;
  int32_t size() const { return static_cast<int32_t>(begin.size()) - 1; }
  const int32_t* edges_begin(int32_t r) const { return to.data() + begin[r]; }
  const int32_t* edges_end(int32_t r) const { return to.data() + begin[r + 1]; }
  bool has_edge(int32_t r, int32_t t) const { return std::find(edges_begin(r), edges_end(r), t) != edges_end(r); }
  // Ends rule size()'s list: the edges added since the last end, sorted and unique if asked.
  void end_rule(bool sorted) {
    const auto first = to.begin() + begin.back();
    if (sorted) {
      std::sort(first, to.end());
      to.erase(std::unique(first, to.end()), to.end());
    }
    begin.push_back(static_cast<int32_t>(to.size()));
  }
};

RuleGraph call_graph(const Ir& ir) {
  RuleGraph refs;
  std::vector<int32_t> stamp(ir.words.size(), -1), stack;
  for (int32_t r = 0; r < ir.n_rules; ++r) {
    each_body_node(ir, r, true, &stamp, &stack, [&](int32_t node) {
      if (ir.kind(node) == REF) refs.to.push_back(ir.args(node)[0]);
    });
    refs.end_rule(true);
  }
  return refs;
}

// Per IR node: a REGION whose text a check reads (a check called within it, not inside a
// nearer region). Any other region is built as its body: a region is a call of its own, which
// the token-mask caches do not see past, so a needless one sent every token that crosses it
// to the real stack (a repeated region of one byte: 70 ms per mask).
std::vector<uint8_t> read_regions(const Ir& ir) {
  const int32_t n = static_cast<int32_t>(ir.words.size());
  // Per rule: whether a check within its body, outside regions, reads the caller's region;
  // through calls outside regions too (callers: the reverse edges).
  std::vector<uint8_t> reads(ir.n_rules, 0);
  std::vector<std::vector<int32_t>> callers(ir.n_rules);
  std::vector<int32_t> stamp(n, -1), stack, todo;
  for (int32_t r = 0; r < ir.n_rules; ++r) {
    // Not into regions: a REGION's checks read its own text.
    each_body_node(ir, r, false, &stamp, &stack, [&](int32_t node) {
      if (ir.kind(node) == REF) callers[ir.args(node)[0]].push_back(r);
      if (ir.kind(node) == CHECK) reads[r] = 1;
    });
    if (reads[r]) todo.push_back(r);
  }
  while (!todo.empty()) {
    const int32_t r = todo.back();
    todo.pop_back();
    for (int32_t c : callers[r])
      if (!reads[c]) reads[c] = 1, todo.push_back(c);
  }
  // Children precede their parents in the words: one forward pass.
  std::vector<uint8_t> reach(n, 0), read(n, 0);
  for (int32_t pos = Ir::kFirstNode; pos < ir.table; pos += ir.size(pos)) {
    const int32_t* a = ir.args(pos);
    switch (ir.kind(pos)) {
      case SEQ: case ALT:
        for (int32_t i = 0; i < a[0] && !reach[pos]; ++i) reach[pos] = reach[a[1 + i]];
        break;
      case REPEAT: reach[pos] = reach[a[2]]; break;
      case MACHINE:
        for (const int32_t* e = machine_edges(a); e < machine_edges_end(a) && !reach[pos]; e += 3)
          reach[pos] = reach[e[1]];
        break;
      case REF: reach[pos] = reads[a[0]]; break;
      case CHECK: reach[pos] = 1; break;
      case REGION: read[pos] = reach[a[0]]; break;
      default: break;
    }
  }
  return read;
}

// How many places in the expanded rule bodies name each rule: shared subtrees count once per
// parent, and the item of a repetition once per copy the automaton makes of it (a rule repeated
// 200 times is better called than inlined 200 times).
std::vector<int32_t> count_uses(const Ir& ir) {
  const int32_t n = static_cast<int32_t>(ir.words.size());
  std::vector<int32_t> starts;
  for (int32_t pos = Ir::kFirstNode; pos < ir.table; pos += ir.size(pos)) starts.push_back(pos);
  // Parents come after their children, so one backward pass pushes counts down the DAG.
  std::vector<int32_t> occ(n, 0);  // (at most kMany)
  for (int32_t r = 0; r < ir.n_rules; ++r) occ[ir.body(r)] += 1;
  constexpr int64_t kMany = 1 << 20;  // counts saturate here: only "few or many" matters
  auto add = [&](int32_t child, int64_t k) { occ[child] = int32_t(std::min(kMany, occ[child] + k)); };
  std::vector<int32_t> uses(ir.n_rules, 0);
  for (auto it = starts.rbegin(); it != starts.rend(); ++it) {
    const int32_t pos = *it;
    const int32_t* a = ir.args(pos);
    const int64_t k = std::min<int64_t>(occ[pos], kMany);
    switch (ir.kind(pos)) {
      case SEQ: case ALT: for (int32_t i = 0; i < a[0]; ++i) add(a[1 + i], k); break;
      case REPEAT: {
        // RuleNfa builds min copies and then max - min optional ones, or one loop when unbounded.
        const int64_t copies = a[1] < 0 ? int64_t(a[0]) + 1 : int64_t(a[1]);
        add(a[2], std::min(kMany, k * std::min(copies, kMany)));
        break;
      }
      case REGION: add(a[0], k); break;
      case MACHINE:  // each edge's expression is built once
        for (const int32_t* e = machine_edges(a); e < machine_edges_end(a); e += 3) add(e[1], k);
        break;
      case REF: uses[a[0]] = static_cast<int32_t>(std::min<int64_t>(uses[a[0]] + k, kMany)); break;
      default: break;
    }
  }
  return uses;
}

// Tarjan's algorithm without recursion. Components come out callees first: component c is
// rules[begin[c] .. begin[c + 1]).
struct Components {
  std::vector<int32_t> rules, begin{0};
  int32_t size() const { return static_cast<int32_t>(begin.size()) - 1; }
  const int32_t* members(int32_t c) const { return rules.data() + begin[c]; }
  int32_t n_members(int32_t c) const { return begin[c + 1] - begin[c]; }
};
Components components(const RuleGraph& g) {
  const int32_t n = g.size();
  std::vector<int32_t> index(n, -1), low(n, 0), stack, edge(n, 0), call;
  std::vector<uint8_t> on_stack(n, 0);
  Components out;
  int32_t counter = 0;
  for (int32_t root = 0; root < n; ++root) {
    if (index[root] >= 0) continue;
    call.push_back(root);
    index[root] = low[root] = counter++;
    stack.push_back(root);
    on_stack[root] = 1;
    while (!call.empty()) {
      int32_t v = call.back();
      if (g.begin[v] + edge[v] < g.begin[v + 1]) {
        int32_t w = g.to[g.begin[v] + edge[v]++];
        if (index[w] < 0) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          on_stack[w] = 1;
          call.push_back(w);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      call.pop_back();
      if (!call.empty()) low[call.back()] = std::min(low[call.back()], low[v]);
      if (low[v] == index[v]) {
        int32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          out.rules.push_back(w);
        } while (w != v);
        out.begin.push_back(static_cast<int32_t>(out.rules.size()));
      }
    }
  }
  return out;
}

// The DFAs of the grammar's AND nodes, built before anything else (the planner sizes them)
// and then written into each rule that holds one, as NFA nodes.
struct Intersections {
  std::unordered_map<int32_t, ByteDfa> dfa;  // AND node -> its language

  Status build(const Ir& ir, const Limits& limits) {
    int64_t budget = std::min(limits.max_nfa_nodes, kMaxChildNfaNodes);  // the children's, all together
    for (int32_t pos = Ir::kFirstNode; pos < ir.table; pos += ir.size(pos)) {
      if (ir.kind(pos) != AND) continue;
      ByteDfa& d = dfa[pos];
      Status s = intersection_dfa(ir, pos, &budget, &d);
      if (!s.ok()) {
        s.rule = rule_holding(ir, pos);
        return s;
      }
    }
    return {};
  }

  // The NFA nodes AND node `node` writes (RuleNfa::intersection): a node per state and one end;
  // escaped, up to 6 more per state for the escapes' prefixes.
  int64_t nfa_size(const Ir& ir, int32_t node) const {
    const bool escaped = ir.args(node)[1] & kAndJsonEscaped;
    return 1 + int64_t(dfa.at(node).n_states()) * (escaped ? 7 : 1);
  }

  // The first rule whose body holds `node`, for an error's message.
  static int32_t rule_holding(const Ir& ir, int32_t node) {
    std::vector<int32_t> stamp(ir.words.size(), -1), stack;
    for (int32_t r = 0; r < ir.n_rules; ++r) {
      bool found = false;
      each_body_node(ir, r, true, &stamp, &stack, [&](int32_t at) { found |= at == node; });
      if (found) return r;
    }
    return -1;
  }
};

class InlinePlanner {
 public:
  InlinePlanner(const Ir& ir, const Limits& limits, const std::vector<uint8_t>& read_region,
                const Intersections& intersections)
      : ir_(ir), limits_(limits), read_region_(read_region), intersections_(intersections),
        memo_(ir.words.size(), -1), nothing_(ir.words.size(), -1) {}

  // Marks the rules that are not recursive and whose expansion is small.
  Status plan(std::vector<uint8_t>* inline_rule) {
    auto graph = call_graph(ir_);
    std::vector<int32_t> uses = count_uses(ir_);
    inline_rule->assign(ir_.n_rules, 0);
    inline_ = inline_rule;
    rule_size_.assign(ir_.n_rules, 1);
    // Estimating every rule's expanded size first refuses huge grammars before any
    // automaton memory is spent on them.
    const Components comps = components(graph);
    for (int32_t c = 0; c < comps.size(); ++c) {
      const int32_t* comp = comps.members(c);
      int32_t r = comp[0];
      bool recursive = comps.n_members(c) > 1 || std::binary_search(graph.edges_begin(r), graph.edges_end(r), r);
      for (const int32_t* member = comp; member != comp + comps.n_members(c); ++member) {
        int64_t size = 0;
        Status s = expr_size(ir_.body(*member), 0, &size);
        if (!s.ok()) return s;
        rule_size_[*member] = size;
      }
      // Small rules are always inlined; larger ones only when used once: a rule used in many
      // places keeps one automaton so that its token-mask caches are shared by every use.
      if (!recursive)
        (*inline_rule)[r] = rule_size_[r] <= limits_.inline_small ||
                            (uses[r] <= 1 && rule_size_[r] <= limits_.inline_size);
    }
    // Automata are built for the root and the rules not inlined; an inlined rule's nodes are
    // counted in the sizes of its callers already (counting them again made a chain of n
    // rules cost n^2).
    nodes_ = 0;
    for (int32_t r = 0; r < ir_.n_rules; ++r)
      if (r == ir_.root || !(*inline_rule)[r]) nodes_ = sat_add(nodes_, rule_size_[r]);
    if (nodes_ > limits_.max_nfa_nodes)
      return Status::error(Code::limit, "grammar too large: it expands to more than " +
                                            std::to_string(limits_.max_nfa_nodes) + " automaton nodes");
    return {};
  }

  // The NFA nodes of the automata to build, all together (known once planned).
  int64_t nodes() const { return nodes_; }

 private:
  Status expr_size(int32_t node, int32_t depth, int64_t* out) {
    if (depth > limits_.max_depth)
      return Status::error(Code::limit, "grammar nested deeper than " + std::to_string(limits_.max_depth));
    if (memo_[node] >= 0) { *out = memo_[node]; return {}; }
    const int32_t* a = ir_.args(node);
    int64_t size = 0, child = 0;
    switch (ir_.kind(node)) {
      case BYTES: size = 1 + a[0]; break;
      case BYTESET: size = 2; break;
      case SEQ: case ALT:
        size = 2;
        for (int32_t i = 0; i < a[0]; ++i) {
          Status s = expr_size(a[1 + i], depth + 1, &child);
          if (!s.ok()) return s;
          size = sat_add(size, child);
        }
        break;
      case REPEAT: {
        Status s = expr_size(a[2], depth + 1, &child);
        if (!s.ok()) return s;
        // As RuleNfa builds it: one copy of an item that builds nothing stands for all.
        int64_t copies = builds_nothing(a[2]) ? 1 : a[1] < 0 ? std::max<int64_t>(a[0], 1) : a[1];
        size = sat_add(sat_mul(child, copies), copies + 2);
        break;
      }
      case REF: size = (*inline_)[a[0]] ? rule_size_[a[0]] : 1; break;
      case REGION:
        if (!read_region_[node]) return expr_size(a[0], depth + 1, out);  // built as its body (memoized there)
        size = 1;  // a call to a rule of its own
        break;
      case CHECK: size = 1; break;
      case AND: size = intersections_.nfa_size(ir_, node); break;
      case AUTOMATON: size = 1 + a[0]; break;
      case MACHINE:
        size = 1 + a[0];
        for (const int32_t* e = machine_edges(a); e < machine_edges_end(a); e += 3) {
          Status s = expr_size(e[1], depth + 1, &child);
          if (!s.ok()) return s;
          size = sat_add(size, child);
        }
        break;
    }
    memo_[node] = size;
    *out = size;
    return {};
  }

  // No byte, or a sequence of nothing but such: RuleNfa adds no node for it. Memoized (the IR
  // is a DAG); expr_size has checked the depth on its way down.
  bool builds_nothing(int32_t node) {
    if (nothing_[node] >= 0) return nothing_[node];
    const int32_t* a = ir_.args(node);
    const int32_t kind = ir_.kind(node);
    bool nothing = kind == SEQ || (kind == BYTES && a[0] == 0);
    for (int32_t i = 0; nothing && kind == SEQ && i < a[0]; ++i) nothing = builds_nothing(a[1 + i]);
    if (kind == REGION && !read_region_[node]) nothing = builds_nothing(a[0]);
    nothing_[node] = nothing;
    return nothing;
  }

  const Ir& ir_;
  const Limits& limits_;
  const std::vector<uint8_t>& read_region_;
  const Intersections& intersections_;
  std::vector<int64_t> memo_;
  std::vector<int8_t> nothing_;  // builds_nothing's answers, -1 unknown
  std::vector<int64_t> rule_size_;
  std::vector<uint8_t>* inline_ = nullptr;
  int64_t nodes_ = 0;
};

// ---- Thompson construction of one rule's automaton -------------------------------------

using ByteEdge = ByteRun;

// The rules made for CHECK nodes and the REGION nodes a check reads (see Automaton), numbered
// after the IR's.
struct NodeRules {
  std::vector<int32_t> node_of_rule;  // (rule - n_rules) -> IR word offset, in increasing order
  int32_t n_rules;

  NodeRules(const Ir& ir, const std::vector<uint8_t>& read_region) : n_rules(ir.n_rules) {
    for (int32_t pos = Ir::kFirstNode; pos < ir.table; pos += ir.size(pos))
      if (ir.kind(pos) == CHECK || read_region[pos]) node_of_rule.push_back(pos);
  }
  // IR word offset -> its rule, -1 for other nodes (a search: a table by offset was a large
  // grammar's words over again, for a few such nodes)
  int32_t rule_of_node(int32_t pos) const {
    const auto at = std::lower_bound(node_of_rule.begin(), node_of_rule.end(), pos);
    return at != node_of_rule.end() && *at == pos ? n_rules + int32_t(at - node_of_rule.begin()) : -1;
  }
};

class RuleNfa {
 public:
  RuleNfa(const Ir& ir, const Limits& limits, const std::vector<uint8_t>& inline_rule, const NodeRules& node_rules,
          const Intersections& intersections, int64_t* budget)
      : ir_(ir), limits_(limits), inline_(inline_rule), node_rules_(node_rules), intersections_(intersections),
        budget_(budget) {}

  // Replaces the previous rule's automaton with `rule`'s.
  Status build(int32_t rule) {
    n_nodes_ = 0;
    eps_.clear();
    bytes_.clear();
    calls_.clear();
    start = add();
    if (rule < ir_.n_rules) {
      accept = expr(ir_.body(rule), start, 0);
    } else {
      const int32_t node = node_rules_.node_of_rule[rule - ir_.n_rules];
      accept = ir_.kind(node) == CHECK ? start : expr(ir_.args(node)[0], start, 0);
    }
    if (!status_.ok()) return status_;
    eps_.group(n_nodes_);
    bytes_.group(n_nodes_);
    calls_.group(n_nodes_);
    return {};
  }

  int32_t n_nodes() const { return n_nodes_; }
  const EdgeLists<int32_t>& eps() const { return eps_; }
  const EdgeLists<ByteEdge>& bytes() const { return bytes_; }
  const EdgeLists<Call>& calls() const { return calls_; }  // Call::next is an NFA node here
  int32_t start = 0, accept = 0;

 private:
  int32_t add() {
    if (--*budget_ < 0 && status_.ok())
      status_ = Status::error(Code::limit, "grammar too large: more than " +
                                               std::to_string(limits_.max_nfa_nodes) + " automaton nodes");
    return n_nodes_++;
  }
  void eps(int32_t from, int32_t to) { eps_.add(from, to); }
  void byte(int32_t from, int32_t lo, int32_t hi, int32_t to) { bytes_.add(from, {lo, hi, to}); }
  bool ok() const { return status_.ok(); }
  template <class B>
  friend int32_t tg::thompson(const Ir& ir, int32_t node, int32_t from, int32_t depth, B& b);

  // Builds `node` starting at state `from`; returns the state reached at its end.
  int32_t expr(int32_t node, int32_t from, int32_t depth) {
    if (!status_.ok()) return from;
    if (depth > limits_.max_depth) {
      status_ = Status::error(Code::limit, "grammar nested deeper than " + std::to_string(limits_.max_depth));
      return from;
    }
    return thompson(ir_, node, from, depth, *this);
  }

  // The kinds that are no regular expression: calls, checks and intersections.
  int32_t other(int32_t node, int32_t from, int32_t depth) {
    const int32_t* a = ir_.args(node);
    switch (ir_.kind(node)) {
      case REF: {
        int32_t callee = a[0];
        if (inline_[callee] && depth < limits_.max_depth / 2) return expr(ir_.body(callee), from, depth + 1);
        int32_t n = add();
        calls_.add(from, {callee, n});
        return n;
      }
      case REGION:
        if (node_rules_.rule_of_node(node) < 0) return expr(a[0], from, depth + 1);  // no check reads it
        [[fallthrough]];
      case CHECK: {
        int32_t n = add();
        calls_.add(from, {node_rules_.rule_of_node(node), n});
        return n;
      }
      case AND: return intersection(intersections_.dfa.at(node), a[1] & kAndJsonEscaped, from);
    }
    return from;
  }

  // An AND node's DFA written from `from`: a node per state. Escaped, a byte JSON escapes is
  // its escape instead: "\\" leads to nodes for the escapes' prefixes ("\\", "\\u", "\\u0",
  // "\\u00", "\\u000", "\\u001") shared by every state whose escaped bytes lead to the same
  // states (most of a string automaton's states: prefixes per state were 11,700 of cloudify's
  // 127,500 automaton states, and a row each for two of them).
  int32_t intersection(const ByteDfa& d, bool escaped, int32_t from) {
    std::vector<int32_t> id(d.n_states());
    for (int32_t& x : id) x = add();
    const int32_t end = add();
    if (!status_.ok()) return end;
    eps(from, id[0]);
    std::map<std::vector<int32_t>, int32_t> escapes;  // (escaped byte, target state)* -> its "\\" node
    std::vector<int32_t> escaped_to;
    for (int32_t s = 0; s < d.n_states(); ++s) {
      if (d.accept[s]) eps(id[s], end);
      escaped_to.clear();
      for (int32_t r = d.begin[s]; r < d.begin[s + 1]; ++r) {
        const ByteRun& run = d.runs[r];
        if (!escaped) {
          bytes_.add(id[s], {run.lo, run.hi, id[run.to]});
          continue;
        }
        for (int32_t b = run.lo; b <= run.hi; ++b) {
          if (json_escaped(b)) {
            escaped_to.push_back(b);
            escaped_to.push_back(run.to);
            continue;
          }
          int32_t e = b;
          while (e < run.hi && !json_escaped(e + 1)) ++e;
          bytes_.add(id[s], {b, e, id[run.to]});
          b = e;
        }
      }
      if (escaped_to.empty()) continue;
      auto [at, fresh] = escapes.try_emplace(escaped_to, -1);
      if (fresh) at->second = escape_prefixes(escaped_to, id);
      bytes_.add(id[s], {'\\', '\\', at->second});
    }
    return end;
  }

  // The nodes after "\\" for escaped bytes that lead to `targets` (pairs: byte, AND state), as
  // above: returns the first.
  int32_t escape_prefixes(const std::vector<int32_t>& targets, const std::vector<int32_t>& id) {
    int32_t prefix[6] = {add(), -1, -1, -1, -1, -1};
    for (size_t k = 0; k < targets.size(); k += 2) {
      const char* esc = json_escape_of(targets[k]);
      int32_t at = prefix[0], i = 1;
      for (; esc[i + 1] != '\0'; ++i) {
        const int32_t slot = i < 4 ? i : 4 + (esc[i] == '1');
        if (prefix[slot] < 0) {
          prefix[slot] = add();
          bytes_.add(at, {uint8_t(esc[i]), uint8_t(esc[i]), prefix[slot]});
        }
        at = prefix[slot];
      }
      bytes_.add(at, {uint8_t(esc[i]), uint8_t(esc[i]), id[targets[k + 1]]});
    }
    return prefix[0];
  }

  const Ir& ir_;
  const Limits& limits_;
  const std::vector<uint8_t>& inline_;
  const NodeRules& node_rules_;
  const Intersections& intersections_;
  int64_t* budget_;
  Status status_;
  int32_t n_nodes_ = 0;
  EdgeLists<int32_t> eps_;
  EdgeLists<ByteEdge> bytes_;
  EdgeLists<Call> calls_;
};

// ---- subset construction ---------------------------------------------------------------

// Each state's byte transitions as runs of bytes with one target, in state order: the
// compact form the whole-grammar passes work on before the 256-wide rows are written.
struct ByteRuns {
  std::vector<int32_t> begin;  // state -> first run; n_states + 1 entries once complete
  std::vector<ByteEdge> runs;
};

// Turns one rule's NFA after another into DFA states appended to the automaton. States are
// expanded in the order they are numbered, so each state's runs and calls are appended in
// state order. The buffers are kept from one rule to the next.
class Determinizer {
 public:
  Determinizer(const Limits& limits, Automaton* out, ByteRuns* runs) : limits_(limits), out_(out), runs_(runs) {}

  // Appends `rule`'s states; `called` receives the rules its states call.
  Status run(const RuleNfa& nfa, int32_t rule, std::vector<int32_t>* called) {
    nfa_ = &nfa;
    rule_ = rule;
    base_ = out_->n_states();
    mark_.assign(nfa.n_nodes(), 0);
    epoch_ = 0;
    set_data_.clear();
    set_begin_.assign(1, 0);
    set_hash_.clear();
    slots_.assign(64, -1);
    single_.assign(nfa.n_nodes(), -1);
    acts_.assign(nfa.n_nodes(), 0);
    for (int32_t n = 0; n < nfa.n_nodes(); ++n)
      acts_[n] = n == nfa.accept || nfa.bytes().begin(n) != nfa.bytes().end(n) ||
                 nfa.calls().begin(n) != nfa.calls().end(n);
    todo_.assign(1, nfa.start);
    int32_t id;
    Status s = target(&id);
    for (int32_t local = 0; s.ok() && local < n_sets(); ++local) s = expand(local, called);
    // The tables every state of the rule has alike, at once (expand wrote the others in order).
    out_->rule_of.insert(out_->rule_of.end(), n_sets(), rule_);
    out_->row.insert(out_->row.end(), n_sets(), -1);
    return s;
  }

 private:
  int32_t n_sets() const { return static_cast<int32_t>(set_begin_.size()) - 1; }

  // set_ = the NFA nodes reachable from todo_ by epsilon edges that do something (a byte edge,
  // a call, the accepting node), in the order reached; todo_ is emptied. The nodes passed
  // through on the way are left out: sets that differ only there behave alike, and keeping
  // them made one state per path (an object's members reached with or without a comma). The
  // set is never sorted: its hash does not depend on the order, and the marks of this closure
  // tell whether a set seen before holds the same nodes (sorting was a fifth of a compile).
  void closure() {
    set_.clear();
    ++epoch_;  // a node is in the set when its mark equals the epoch (far below 2^32 closures a rule)
    const EdgeLists<int32_t>& eps = nfa_->eps();
    while (!todo_.empty()) {
      const int32_t n = todo_.back();
      todo_.pop_back();
      if (mark_[n] == epoch_) continue;
      mark_[n] = epoch_;
      if (acts_[n]) set_.push_back(n);
      for (const int32_t* e = eps.begin(n); e != eps.end(n); ++e)
        if (mark_[*e] != epoch_) todo_.push_back(*e);
    }
  }

  // A sum of the members' mixed ids: the same whatever their order.
  static uint64_t hash_set(const std::vector<int32_t>& v) {
    uint64_t h = 0x9E3779B97F4A7C15ull * (v.size() + 1);
    for (int32_t x : v) {
      uint64_t k = (static_cast<uint64_t>(static_cast<uint32_t>(x)) + 1) * 0xff51afd7ed558ccdULL;
      h += k ^ (k >> 29);
    }
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
  }

  // Whether set `local` holds the nodes of set_, just built: as many, each marked by its closure
  // (a set holds acting nodes only, and set_ holds every acting node the closure marked).
  bool same_set(int32_t local) const {
    const int32_t b = set_begin_[local], e = set_begin_[local + 1];
    if (e - b != static_cast<int32_t>(set_.size())) return false;
    for (int32_t k = b; k < e; ++k)
      if (mark_[set_data_[k]] != epoch_) return false;
    return true;
  }

  void grow_slots() {
    slots_.assign(slots_.size() * 2, -1);
    const size_t mask = slots_.size() - 1;
    for (int32_t local = 0; local < n_sets(); ++local) {
      size_t k = set_hash_[local] & mask;
      while (slots_[k] >= 0) k = (k + 1) & mask;
      slots_[k] = local;
    }
  }

  // The local id of set_, a new state when it was not seen yet.
  Status intern(int32_t* id) {
    if (size_t(n_sets() + 1) * 2 > slots_.size()) grow_slots();
    const uint64_t h = hash_set(set_);
    const size_t mask = slots_.size() - 1;
    size_t k = h & mask;
    for (; slots_[k] >= 0; k = (k + 1) & mask) {
      const int32_t local = slots_[k];
      if (set_hash_[local] == h && same_set(local)) {
        *id = local;
        return {};
      }
    }
    if (base_ + n_sets() >= limits_.max_dfa_states)
      return Status::error(Code::limit, "grammar too large: more than " +
                                            std::to_string(limits_.max_dfa_states) + " automaton states");
    if (int64_t(set_data_.size() + set_.size()) > limits_.max_subset_nodes)
      return Status::error(Code::limit, "grammar too large: its automaton's states hold more than " +
                                            std::to_string(limits_.max_subset_nodes) + " NFA positions");
    *id = n_sets();
    slots_[k] = *id;
    set_hash_.push_back(h);
    set_data_.insert(set_data_.end(), set_.begin(), set_.end());
    set_begin_.push_back(static_cast<int32_t>(set_data_.size()));
    return {};
  }

  // The local id of the closure of todo_ (emptied). Most transitions lead to one NFA node,
  // and the same few nodes again and again (loops): their sets are remembered per node.
  Status target(int32_t* id) {
    const int32_t only = todo_.size() == 1 ? todo_[0] : -1;
    if (only >= 0 && single_[only] >= 0) {
      todo_.clear();
      *id = single_[only];
      return {};
    }
    closure();
    Status s = intern(id);
    if (s.ok() && only >= 0) single_[only] = *id;
    return s;
  }

  // Gathers the byte edges and calls leaving the NFA nodes of state `local`.
  void gather(int32_t local) {
    edges_.clear();
    calls_.clear();
    for (int32_t k = set_begin_[local]; k < set_begin_[local + 1]; ++k) {
      const int32_t n = set_data_[k];
      if (n == nfa_->accept) out_->final[base_ + local] = 1;
      edges_.insert(edges_.end(), nfa_->bytes().begin(n), nfa_->bytes().end(n));
      calls_.insert(calls_.end(), nfa_->calls().begin(n), nfa_->calls().end(n));
    }
  }

  // (states are expanded in the order they are numbered: each appends its own entries)
  Status expand(int32_t local, std::vector<int32_t>* called) {
    out_->final.push_back(0);
    gather(local);
    runs_->begin.push_back(static_cast<int32_t>(runs_->runs.size()));
    out_->call_begin.push_back(static_cast<int32_t>(out_->calls.size()));
    Status s = expand_bytes();
    if (s.ok()) s = expand_calls(called);
    return s;
  }

  // One run per stretch of bytes between consecutive edge boundaries that some edge covers,
  // its target the closure of the edges covering it. The boundaries are a RunBounds and each
  // edge is listed under every stretch it covers (counted first, then placed): no sort
  // (sorting the edges was a tenth of a compile).
  Status expand_bytes() {
    if (edges_.empty()) return {};
    if (edges_.size() == 1) {  // a literal's byte (most states): one run, no stretches to find
      todo_.push_back(edges_[0].to);
      int32_t id;
      Status s = target(&id);
      if (s.ok()) runs_->runs.push_back({edges_[0].lo, edges_[0].hi, base_ + id});
      return s;
    }
    RunBounds bounds;
    for (const auto& e : edges_) bounds.add(e);
    bounds.list(&cuts_);
    const int32_t n_stretches = static_cast<int32_t>(cuts_.size()) - 1;
    int16_t stretch_of[257];  // a boundary byte -> the stretch it starts
    for (int32_t k = 0; k <= n_stretches; ++k) stretch_of[cuts_[k]] = static_cast<int16_t>(k);
    cover_.assign(n_stretches + 1, 0);
    for (const auto& e : edges_)
      for (int32_t k = stretch_of[e.lo]; k < stretch_of[e.hi + 1]; ++k) ++cover_[k + 1];
    for (int32_t k = 0; k < n_stretches; ++k) cover_[k + 1] += cover_[k];
    covered_.resize(cover_[n_stretches]);
    fill_.assign(cover_.begin(), cover_.end() - 1);
    for (const auto& e : edges_)
      for (int32_t k = stretch_of[e.lo]; k < stretch_of[e.hi + 1]; ++k) covered_[fill_[k]++] = e.to;
    std::vector<ByteEdge>& runs = runs_->runs;
    const size_t first = runs.size();
    for (int32_t k = 0; k < n_stretches; ++k) {
      if (cover_[k] == cover_[k + 1]) continue;
      todo_.insert(todo_.end(), covered_.begin() + cover_[k], covered_.begin() + cover_[k + 1]);
      int32_t id;
      Status s = target(&id);
      if (!s.ok()) return s;
      const int32_t to = base_ + id, lo = cuts_[k], hi = cuts_[k + 1] - 1;
      if (runs.size() > first && runs.back().to == to && runs.back().hi + 1 == lo) runs.back().hi = hi;
      else runs.push_back({lo, hi, to});
    }
    return {};
  }

  // One call per called rule, continuing in the set of all its return points.
  Status expand_calls(std::vector<int32_t>* called) {
    std::sort(calls_.begin(), calls_.end(), [](const Call& x, const Call& y) { return x.rule < y.rule; });
    for (size_t i = 0; i < calls_.size();) {
      size_t j = i;
      for (; j < calls_.size() && calls_[j].rule == calls_[i].rule; ++j) todo_.push_back(calls_[j].next);
      int32_t id;
      Status s = target(&id);
      if (!s.ok()) return s;
      out_->calls.push_back({calls_[i].rule, base_ + id});
      called->push_back(calls_[i].rule);
      i = j;
    }
    return {};
  }

  const Limits& limits_;
  Automaton* out_;
  ByteRuns* runs_;
  const RuleNfa* nfa_ = nullptr;
  int32_t rule_ = 0, base_ = 0;
  std::vector<uint32_t> mark_;  // NFA node -> epoch of the last closure that reached it
  std::vector<int32_t> single_;  // NFA node -> local id of its closure, -1 not known yet
  std::vector<uint8_t> acts_;    // NFA node -> it has a byte edge or a call, or accepts
  uint32_t epoch_ = 0;
  // The rule's subsets, interned: set i is set_data_[set_begin_[i], set_begin_[i + 1]).
  std::vector<int32_t> set_data_, set_begin_;
  std::vector<uint64_t> set_hash_;
  std::vector<int32_t> slots_;  // open addressing over local set ids, -1 empty
  std::vector<int32_t> todo_, set_, cuts_;
  std::vector<int32_t> cover_, fill_, covered_;  // expand_bytes: stretch -> the targets of the edges over it
  std::vector<ByteEdge> edges_;
  std::vector<Call> calls_;
};

// ---- whole-grammar checks --------------------------------------------------------------

// Keeps only states from which the rule can still complete: then every live parser state
// has a completion, which is what makes "the mask is non-empty" mean "a valid prefix".
// Runs into dead states get target -1.
Status prune_dead(Automaton* a, ByteRuns* r) {
  const int32_t n = a->n_states();
  const int32_t n_rules = static_cast<int32_t>(a->start.size());
  const int32_t n_calls = static_cast<int32_t>(a->calls.size());
  // Predecessors by counting sort, in flat arrays (lists of pairs, grown and grouped, were half
  // of this pass's time): pred[pred_at[t] .. pred_at[t + 1]) are a state s >= 0 with a run into
  // t, or ~c for call c returning to t; by_rule[rule_at[q] .. rule_at[q + 1]) the calls of rule q.
  std::vector<int32_t> pred_at(n + 2, 0), rule_at(n_rules + 2, 0), call_from(n_calls);
  for (int32_t s = 0; s < n; ++s) {
    for (int32_t i = r->begin[s]; i < r->begin[s + 1]; ++i) ++pred_at[r->runs[i].to + 2];
    for (int32_t c = a->call_begin[s]; c < a->call_begin[s + 1]; ++c) {
      ++pred_at[a->calls[c].next + 2];
      ++rule_at[a->calls[c].rule + 2];
      call_from[c] = s;
    }
  }
  for (int32_t t = 1; t < n + 2; ++t) pred_at[t] += pred_at[t - 1];
  for (int32_t q = 1; q < n_rules + 2; ++q) rule_at[q] += rule_at[q - 1];
  std::vector<int32_t> pred(pred_at[n + 1]), by_rule(n_calls);
  for (int32_t s = 0; s < n; ++s) {  // pred_at[t + 1] is where t's next entry goes
    for (int32_t i = r->begin[s]; i < r->begin[s + 1]; ++i) pred[pred_at[r->runs[i].to + 1]++] = s;
    for (int32_t c = a->call_begin[s]; c < a->call_begin[s + 1]; ++c) {
      pred[pred_at[a->calls[c].next + 1]++] = ~c;
      by_rule[rule_at[a->calls[c].rule + 1]++] = c;
    }
  }
  std::vector<uint8_t> live(n, 0), productive(n_rules, 0);
  std::vector<int32_t> work;
  auto make_live = [&](int32_t s) { if (!live[s]) { live[s] = 1; work.push_back(s); } };
  for (int32_t s = 0; s < n; ++s)
    if (a->final[s]) make_live(s);
  while (!work.empty()) {
    int32_t t = work.back();
    work.pop_back();
    for (int32_t k = pred_at[t]; k < pred_at[t + 1]; ++k) {
      const int32_t p = pred[k];
      if (p >= 0) make_live(p);
      else if (productive[a->calls[~p].rule]) make_live(call_from[~p]);
    }
    int32_t rule = a->rule_of[t];
    if (a->start[rule] == t && !productive[rule]) {
      productive[rule] = 1;
      for (int32_t k = rule_at[rule]; k < rule_at[rule + 1]; ++k) {
        const int32_t c = by_rule[k];
        if (live[a->calls[c].next]) make_live(call_from[c]);
      }
    }
  }
  // An empty language is a grammar too (JSON Schema `false`): its matcher refuses every token.
  // Whoever generates from it must refuse first; the front-ends know the words for it.
  a->empty = !productive[a->root];
  for (ByteEdge& run : r->runs)
    if (!live[run.to]) run.to = -1;
  // The calls that lead somewhere, compacted where they are.
  int32_t kept = 0;
  for (int32_t s = 0; s < n; ++s) {
    const int32_t first = kept, end = a->call_begin[s + 1];
    for (int32_t c = a->call_begin[s]; c < end; ++c)
      if (productive[a->calls[c].rule] && live[a->calls[c].next]) a->calls[kept++] = a->calls[c];
    a->call_begin[s] = first;
  }
  a->call_begin[n] = kept;
  a->calls.resize(kept);
  return {};
}

// Keeps the runs that lead somewhere (prune_dead set the others' targets to -1) as the
// automaton's, and writes the rows (a target per byte class) of the states that more than one
// run leaves from them: the matcher's step table. The runs are compacted where they are and
// handed over, not copied: fresh pages cost a large grammar's compile more than the copying.
void write_runs_and_rows(ByteRuns* r, Automaton* a) {
  const int32_t n = a->n_states();
  std::vector<ByteEdge>& runs = r->runs;
  std::vector<int32_t>& begin = r->begin;
  int32_t n_rows = 0, kept = 0;
  for (int32_t s = 0; s < n; ++s) {
    const int32_t first = kept, end = begin[s + 1];
    for (int32_t i = begin[s]; i < end; ++i)
      if (runs[i].to >= 0) runs[kept++] = runs[i];
    begin[s] = first;
    const int32_t n_runs = kept - first;
    a->row[s] = n_runs == 0 ? -1 : n_runs <= 2 ? Automaton::runs_row(first, n_runs) : n_rows++;
  }
  begin[n] = kept;
  runs.resize(kept);
  a->runs.swap(runs);
  a->run_begin.swap(begin);
  // A class begins at every byte where some run begins or ends: each run is whole classes.
  bool cut[257] = {};
  for (const ByteRun& r : a->runs) cut[r.lo] = cut[r.hi + 1] = true;
  int32_t k = 0;
  for (int32_t b = 0; b < 256; ++b) {
    a->byte_class[b] = static_cast<uint8_t>(k += b > 0 && cut[b]);
    if (b == 0 || cut[b]) a->class_first[k] = static_cast<uint8_t>(b);
  }
  const int32_t width = a->n_classes = k + 1;
  a->next.resize(size_t(n_rows) * width);
  for (int32_t s = 0; s < n; ++s) {
    if (a->row[s] < 0) continue;  // no bytes, or one or two runs
    a->row[s] *= width;  // where the row begins: no multiply per step
    int32_t* row = &a->next[a->row[s]];
    int32_t c = 0;  // runs come in byte order: each entry is written once
    for (const ByteRun* run = a->runs_begin(s); run != a->runs_end(s); ++run) {
      const int32_t lo = a->byte_class[run->lo], hi = a->byte_class[run->hi];
      std::fill(row + c, row + lo, -1);
      std::fill(row + lo, row + hi + 1, run->to);
      c = hi + 1;
    }
    std::fill(row + c, row + width, -1);
  }
}

// States reachable from a rule's start without consuming bytes, given the nullable rules.
void null_reach(const Automaton& a, const std::vector<uint8_t>& nullable, int32_t rule, std::vector<int32_t>* seen,
                std::vector<int32_t>* scratch) {
  std::vector<int32_t>& todo = *scratch;
  todo.assign(1, a.start[rule]);
  seen->clear();
  while (!todo.empty()) {
    int32_t s = todo.back();
    todo.pop_back();
    if (std::find(seen->begin(), seen->end(), s) != seen->end()) continue;
    seen->push_back(s);
    for (const Call* c = a.calls_begin(s); c != a.calls_end(s); ++c)
      if (nullable[c->rule]) todo.push_back(c->next);
  }
}

// Per rule: whether it may complete without consuming a byte (a check rule among them).
std::vector<uint8_t> nullable_rules(const Automaton& a) {
  const int32_t n_rules = static_cast<int32_t>(a.start.size());
  std::vector<uint8_t> nullable(n_rules, 0);
  std::vector<int32_t> seen, todo;
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < n_rules; ++r) {
      if (a.start[r] < 0 || nullable[r]) continue;
      null_reach(a, nullable, r, &seen, &todo);
      for (int32_t s : seen)
        if (a.final[s]) { nullable[r] = 1; changed = true; break; }
    }
  }
  return nullable;
}

// A rule that can call itself before consuming a byte would make the parser push forever.
Status check_left_recursion(const Automaton& a) {
  const int32_t n_rules = static_cast<int32_t>(a.start.size());
  const std::vector<uint8_t>& nullable = a.nullable;
  std::vector<int32_t> seen, todo;
  RuleGraph left;  // the rules each rule may call before it consumes a byte
  for (int32_t r = 0; r < n_rules; ++r) {
    if (a.start[r] >= 0) {
      null_reach(a, nullable, r, &seen, &todo);
      for (int32_t s : seen)
        for (const Call* c = a.calls_begin(s); c != a.calls_end(s); ++c) left.to.push_back(c->rule);
    }
    left.end_rule(false);
  }
  const Components comps = components(left);
  for (int32_t c = 0; c < comps.size(); ++c) {
    const int32_t r = comps.members(c)[0];
    if (comps.n_members(c) > 1 || left.has_edge(r, r))
      return Status::error(Code::grammar, "left recursion: the rule can reach itself without consuming input", r);
  }
  return {};
}

}  // namespace

Status build_automaton(const Ir& ir, const Limits& limits, Automaton* out) {
  std::vector<uint8_t> inline_rule;
  const std::vector<uint8_t> read_region = read_regions(ir);
  Intersections intersections;
  Status s = intersections.build(ir, limits);
  if (!s.ok()) return s;
  InlinePlanner planner(ir, limits, read_region, intersections);
  s = planner.plan(&inline_rule);
  if (!s.ok()) return s;
  // Inlining the root would be pointless: it always gets an automaton of its own.
  Automaton& a = *out;
  a = Automaton{};
  a.root = ir.root;
  const NodeRules node_rules(ir, read_region);
  const int32_t n_rules = ir.n_rules + static_cast<int32_t>(node_rules.node_of_rule.size());
  inline_rule.resize(n_rules, 0);
  a.start.assign(n_rules, -1);
  a.first_node_rule = ir.n_rules;
  a.check_of.assign(n_rules, -1);
  a.region.assign(n_rules, 0);
  for (int32_t r = ir.n_rules; r < n_rules; ++r) {
    const int32_t node = node_rules.node_of_rule[r - ir.n_rules];
    const int32_t* args = ir.args(node);
    if (ir.kind(node) == REGION) {
      a.region[r] = 1;
      continue;
    }
    a.check_of[r] = static_cast<int32_t>(a.checks.size());
    a.checks.emplace_back(args[0], std::vector<int32_t>(args + 2, args + 2 + args[1]));
  }
  int64_t budget = limits.max_nfa_nodes;
  std::vector<int32_t> todo{ir.root}, called;
  ByteRuns runs;
  // Room for about as many states as the automata have NFA nodes, and runs for them: growing
  // the tables step by step (copies, fresh pages) cost a large grammar's build a tenth.
  const size_t hint = static_cast<size_t>(std::min<int64_t>(planner.nodes(), limits.max_dfa_states));
  runs.runs.reserve(2 * hint);
  for (std::vector<int32_t>* v : {&runs.begin, &a.rule_of, &a.row, &a.call_begin}) v->reserve(hint + 1);
  a.final.reserve(hint);
  RuleNfa nfa(ir, limits, inline_rule, node_rules, intersections, &budget);
  Determinizer det(limits, &a, &runs);
  while (!todo.empty()) {
    int32_t rule = todo.back();
    todo.pop_back();
    if (a.start[rule] >= 0) continue;
    s = nfa.build(rule);
    if (!s.ok()) return s;
    a.start[rule] = a.n_states();
    called.clear();
    s = det.run(nfa, rule, &called);
    if (!s.ok()) return s;
    for (int32_t r : called)
      if (a.start[r] < 0) todo.push_back(r);
  }
  a.call_begin.push_back(static_cast<int32_t>(a.calls.size()));
  runs.begin.push_back(static_cast<int32_t>(runs.runs.size()));
  s = prune_dead(&a, &runs);
  if (!s.ok()) return s;
  write_runs_and_rows(&runs, &a);
  a.tail.assign(a.n_states(), 0);
  a.plain.assign(a.n_states(), 0);
  for (int32_t st = 0; st < a.n_states(); ++st) {
    const bool no_calls = a.call_begin[st] == a.call_begin[st + 1];
    a.tail[st] = a.final[st] && !a.has_bytes(st) && no_calls;
    a.plain[st] = !a.final[st] && a.has_bytes(st) && no_calls;
  }
  a.nullable = nullable_rules(a);
  return check_left_recursion(a);
}

}  // namespace tg
