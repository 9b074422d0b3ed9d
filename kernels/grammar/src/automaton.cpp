#include "automaton.h"

#include <algorithm>
#include <string>
#include <unordered_map>

namespace tg {

namespace {

constexpr int64_t kHuge = int64_t(1) << 40;
int64_t sat_add(int64_t a, int64_t b) { return std::min(kHuge, a + b); }
int64_t sat_mul(int64_t a, int64_t b) { return (a != 0 && b > kHuge / a) ? kHuge : std::min(kHuge, a * b); }

// ---- call graph: which rules are recursive, which are small enough to inline ----------

std::vector<std::vector<int32_t>> call_graph(const Ir& ir) {
  std::vector<std::vector<int32_t>> refs(ir.n_rules);
  std::vector<int32_t> stamp(ir.words.size(), -1), stack;
  for (int32_t r = 0; r < ir.n_rules; ++r) {
    stack.assign(1, ir.body(r));
    while (!stack.empty()) {
      int32_t node = stack.back();
      stack.pop_back();
      if (stamp[node] == r) continue;
      stamp[node] = r;
      const int32_t* a = ir.args(node);
      switch (ir.kind(node)) {
        case SEQ: case ALT: stack.insert(stack.end(), a + 1, a + 1 + a[0]); break;
        case REPEAT: stack.push_back(a[2]); break;
        case REF: refs[r].push_back(a[0]); break;
        default: break;
      }
    }
    std::sort(refs[r].begin(), refs[r].end());
    refs[r].erase(std::unique(refs[r].begin(), refs[r].end()), refs[r].end());
  }
  return refs;
}

// How many places in the rule bodies (as written, shared subtrees expanded) name each rule.
std::vector<int32_t> count_uses(const Ir& ir) {
  const int32_t n = static_cast<int32_t>(ir.words.size());
  std::vector<int32_t> starts;
  for (int32_t pos = 4 + ir.n_rules; pos < n;) {
    starts.push_back(pos);
    const int32_t* a = ir.args(pos);
    switch (ir.kind(pos)) {
      case BYTESET: pos += 2 + 2 * a[0]; break;
      case BYTES: case SEQ: case ALT: pos += 2 + a[0]; break;
      case REPEAT: pos += 4; break;
      default: pos += 2; break;  // REF
    }
  }
  // Parents come after their children, so one backward pass pushes counts down the DAG.
  std::vector<int64_t> occ(n, 0);
  for (int32_t r = 0; r < ir.n_rules; ++r) occ[ir.body(r)] += 1;
  std::vector<int32_t> uses(ir.n_rules, 0);
  for (auto it = starts.rbegin(); it != starts.rend(); ++it) {
    const int32_t pos = *it;
    const int32_t* a = ir.args(pos);
    const int64_t k = std::min<int64_t>(occ[pos], 1 << 20);
    switch (ir.kind(pos)) {
      case SEQ: case ALT: for (int32_t i = 0; i < a[0]; ++i) occ[a[1 + i]] += k; break;
      case REPEAT: occ[a[2]] += k; break;
      case REF: uses[a[0]] = static_cast<int32_t>(std::min<int64_t>(uses[a[0]] + k, 1 << 20)); break;
      default: break;
    }
  }
  return uses;
}

// Tarjan's algorithm without recursion. Components come out callees first.
std::vector<std::vector<int32_t>> components(const std::vector<std::vector<int32_t>>& g) {
  const int32_t n = static_cast<int32_t>(g.size());
  std::vector<int32_t> index(n, -1), low(n, 0), stack, edge(n, 0), call;
  std::vector<uint8_t> on_stack(n, 0);
  std::vector<std::vector<int32_t>> out;
  int32_t counter = 0;
  for (int32_t root = 0; root < n; ++root) {
    if (index[root] >= 0) continue;
    call.push_back(root);
    index[root] = low[root] = counter++;
    stack.push_back(root);
    on_stack[root] = 1;
    while (!call.empty()) {
      int32_t v = call.back();
      if (edge[v] < static_cast<int32_t>(g[v].size())) {
        int32_t w = g[v][edge[v]++];
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
        out.emplace_back();
        int32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          out.back().push_back(w);
        } while (w != v);
      }
    }
  }
  return out;
}

class InlinePlanner {
 public:
  InlinePlanner(const Ir& ir, const Limits& limits) : ir_(ir), limits_(limits), memo_(ir.words.size(), -1) {}

  // Marks the rules that are not recursive and whose expansion is small.
  Status plan(std::vector<uint8_t>* inline_rule) {
    auto graph = call_graph(ir_);
    std::vector<int32_t> uses = count_uses(ir_);
    inline_rule->assign(ir_.n_rules, 0);
    inline_ = inline_rule;
    rule_size_.assign(ir_.n_rules, 1);
    // Estimating every rule's expanded size first refuses huge grammars before any
    // automaton memory is spent on them.
    int64_t total = 0;
    for (const auto& comp : components(graph)) {
      int32_t r = comp[0];
      bool recursive = comp.size() > 1 || std::binary_search(graph[r].begin(), graph[r].end(), r);
      for (int32_t member : comp) {
        int64_t size = 0;
        Status s = expr_size(ir_.body(member), 0, &size);
        if (!s.ok()) return s;
        rule_size_[member] = size;
        total = sat_add(total, size);
      }
      // Small rules are always inlined; larger ones only when used once: a rule used in many
      // places keeps one automaton so that its token-mask caches are shared by every use.
      if (!recursive)
        (*inline_rule)[r] = rule_size_[r] <= limits_.inline_small ||
                            (uses[r] <= 1 && rule_size_[r] <= limits_.inline_size);
    }
    if (total > limits_.max_nfa_nodes)
      return Status::error(Code::limit, "grammar too large: it expands to more than " +
                                            std::to_string(limits_.max_nfa_nodes) + " automaton nodes");
    return {};
  }

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
        int64_t copies = a[1] < 0 ? std::max<int64_t>(a[0], 1) : a[1];
        size = sat_add(sat_mul(child, copies), copies + 2);
        break;
      }
      case REF: size = (*inline_)[a[0]] ? rule_size_[a[0]] : 1; break;
    }
    memo_[node] = size;
    *out = size;
    return {};
  }

  const Ir& ir_;
  const Limits& limits_;
  std::vector<int64_t> memo_;
  std::vector<int64_t> rule_size_;
  std::vector<uint8_t>* inline_ = nullptr;
};

// ---- Thompson construction of one rule's automaton -------------------------------------

struct ByteEdge { int32_t lo, hi, to; };
struct NfaNode {
  std::vector<int32_t> eps;
  std::vector<ByteEdge> bytes;
  std::vector<Call> calls;  // Call::next is an NFA node here
};

class RuleNfa {
 public:
  RuleNfa(const Ir& ir, const Limits& limits, const std::vector<uint8_t>& inline_rule, int64_t* budget)
      : ir_(ir), limits_(limits), inline_(inline_rule), budget_(budget) {}

  Status build(int32_t rule) {
    start = add();
    accept = expr(ir_.body(rule), start, 0);
    return status_;
  }

  std::vector<NfaNode> nodes;
  int32_t start = 0, accept = 0;

 private:
  int32_t add() {
    if (--*budget_ < 0 && status_.ok())
      status_ = Status::error(Code::limit, "grammar too large: more than " +
                                               std::to_string(limits_.max_nfa_nodes) + " automaton nodes");
    nodes.emplace_back();
    return static_cast<int32_t>(nodes.size()) - 1;
  }
  void eps(int32_t from, int32_t to) { nodes[from].eps.push_back(to); }

  // Builds `node` starting at state `from`; returns the state reached at its end.
  int32_t expr(int32_t node, int32_t from, int32_t depth) {
    if (!status_.ok()) return from;
    if (depth > limits_.max_depth) {
      status_ = Status::error(Code::limit, "grammar nested deeper than " + std::to_string(limits_.max_depth));
      return from;
    }
    const int32_t* a = ir_.args(node);
    switch (ir_.kind(node)) {
      case BYTES: {
        int32_t cur = from;
        for (int32_t i = 0; i < a[0] && status_.ok(); ++i) {
          int32_t n = add();
          nodes[cur].bytes.push_back({a[1 + i], a[1 + i], n});
          cur = n;
        }
        return cur;
      }
      case BYTESET: {
        int32_t n = add();
        for (int32_t i = 0; i < a[0]; ++i) nodes[from].bytes.push_back({a[1 + 2 * i], a[2 + 2 * i], n});
        return n;
      }
      case SEQ: {
        int32_t cur = from;
        for (int32_t i = 0; i < a[0]; ++i) cur = expr(a[1 + i], cur, depth + 1);
        return cur;
      }
      case ALT: {
        // Alternatives share `from`: constructions only add edges leaving their start, and
        // loops go back to fresh nodes, so sharing cannot create false paths.
        int32_t end = add();
        for (int32_t i = 0; i < a[0]; ++i) eps(expr(a[1 + i], from, depth + 1), end);
        return end;
      }
      case REPEAT: {
        int32_t cur = from;
        for (int32_t i = 0; i < a[0] && status_.ok(); ++i) cur = expr(a[2], cur, depth + 1);
        if (a[1] < 0) {
          int32_t loop = add();
          eps(cur, loop);
          eps(expr(a[2], loop, depth + 1), loop);
          return loop;
        }
        int32_t end = add();
        for (int32_t i = a[0]; i < a[1] && status_.ok(); ++i) {
          eps(cur, end);
          cur = expr(a[2], cur, depth + 1);
        }
        eps(cur, end);
        return end;
      }
      case REF: {
        int32_t callee = a[0];
        if (inline_[callee] && depth < limits_.max_depth / 2) return expr(ir_.body(callee), from, depth + 1);
        int32_t n = add();
        nodes[from].calls.push_back({callee, n});
        return n;
      }
    }
    return from;
  }

  const Ir& ir_;
  const Limits& limits_;
  const std::vector<uint8_t>& inline_;
  int64_t* budget_;
  Status status_;
};

// ---- subset construction ---------------------------------------------------------------

class Determinizer {
 public:
  Determinizer(const RuleNfa& nfa, int32_t rule, const Limits& limits, Automaton* out)
      : nfa_(nfa), rule_(rule), limits_(limits), out_(out), mark_(nfa.nodes.size(), 0) {}

  // Appends this rule's states to `out`; calls keep NFA-local targets resolved here.
  Status run(std::vector<int32_t>* called) {
    base_ = out_->n_states();
    std::vector<int32_t> set{nfa_.start};
    Status s = intern(closure(set), nullptr);
    if (!s.ok()) return s;
    for (size_t i = 0; i < sets_.size(); ++i) {
      s = expand(static_cast<int32_t>(i), called);
      if (!s.ok()) return s;
    }
    return {};
  }

 private:
  std::vector<int32_t> closure(std::vector<int32_t> todo) {
    std::vector<int32_t> out;
    while (!todo.empty()) {
      int32_t n = todo.back();
      todo.pop_back();
      if (mark_[n]) continue;
      mark_[n] = 1;
      out.push_back(n);
      for (int32_t m : nfa_.nodes[n].eps) todo.push_back(m);
    }
    for (int32_t n : out) mark_[n] = 0;
    std::sort(out.begin(), out.end());
    return out;
  }

  Status intern(std::vector<int32_t> set, int32_t* id) {
    auto it = ids_.find(set);
    if (it != ids_.end()) {
      if (id) *id = it->second;
      return {};
    }
    if (out_->n_states() >= limits_.max_dfa_states)
      return Status::error(Code::limit, "grammar too large: more than " +
                                            std::to_string(limits_.max_dfa_states) + " automaton states");
    int32_t local = static_cast<int32_t>(sets_.size());
    ids_.emplace(set, local);
    sets_.push_back(std::move(set));
    out_->rule_of.push_back(rule_);
    out_->final.push_back(0);
    out_->row.push_back(-1);
    out_->call_begin.push_back(0);
    pending_calls_.emplace_back();
    if (id) *id = local;
    return {};
  }

  Status expand(int32_t local, std::vector<int32_t>* called) {
    const int32_t state = base_ + local;
    std::vector<ByteEdge> edges;
    std::vector<Call> calls;
    for (int32_t n : sets_[local]) {
      if (n == nfa_.accept) out_->final[state] = 1;
      const NfaNode& node = nfa_.nodes[n];
      edges.insert(edges.end(), node.bytes.begin(), node.bytes.end());
      calls.insert(calls.end(), node.calls.begin(), node.calls.end());
    }
    if (!edges.empty()) {
      std::vector<int32_t> cuts;
      for (const auto& e : edges) { cuts.push_back(e.lo); cuts.push_back(e.hi + 1); }
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      // The row is written in place (intern() never touches `next`).
      const size_t at = out_->next.size();
      out_->next.resize(at + 256, -1);
      std::vector<int32_t> targets;
      for (size_t k = 0; k + 1 < cuts.size(); ++k) {
        targets.clear();
        for (const auto& e : edges)
          if (e.lo <= cuts[k] && cuts[k] <= e.hi) targets.push_back(e.to);
        if (targets.empty()) continue;
        int32_t id;
        Status s = intern(closure(targets), &id);
        if (!s.ok()) return s;
        std::fill(out_->next.begin() + at + cuts[k], out_->next.begin() + at + cuts[k + 1], base_ + id);
      }
      out_->row[state] = static_cast<int32_t>(at / 256);
    }
    std::sort(calls.begin(), calls.end(), [](const Call& x, const Call& y) { return x.rule < y.rule; });
    for (size_t i = 0; i < calls.size();) {
      size_t j = i;
      std::vector<int32_t> targets;
      for (; j < calls.size() && calls[j].rule == calls[i].rule; ++j) targets.push_back(calls[j].next);
      int32_t id;
      Status s = intern(closure(std::move(targets)), &id);
      if (!s.ok()) return s;
      pending_calls_[local].push_back({calls[i].rule, base_ + id});
      called->push_back(calls[i].rule);
      i = j;
    }
    return {};
  }

 public:
  std::vector<std::vector<Call>> pending_calls_;  // per local state

 private:
  const RuleNfa& nfa_;
  int32_t rule_;
  const Limits& limits_;
  Automaton* out_;
  std::vector<uint8_t> mark_;
  struct SetHash {
    size_t operator()(const std::vector<int32_t>& v) const {
      uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
      for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 0x100000001B3ull;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  std::unordered_map<std::vector<int32_t>, int32_t, SetHash> ids_;
  std::vector<std::vector<int32_t>> sets_;
  int32_t base_ = 0;
};

// ---- whole-grammar checks --------------------------------------------------------------

// Keeps only states from which the rule can still complete: then every live parser state
// has a completion, which is what makes "the mask is non-empty" mean "a valid prefix".
Status prune_dead(Automaton* a) {
  const int32_t n = a->n_states();
  std::vector<std::vector<int32_t>> byte_pred(n);
  std::vector<std::vector<std::pair<int32_t, int32_t>>> call_pred(n);  // target -> (source, rule)
  std::vector<std::vector<std::pair<int32_t, int32_t>>> by_rule(a->start.size());  // rule -> (source, target)
  for (int32_t s = 0; s < n; ++s) {
    if (a->row[s] >= 0) {
      const int32_t* r = &a->next[a->row[s] * 256];
      for (int32_t b = 0; b < 256; ++b)
        if (r[b] >= 0 && (b == 0 || r[b] != r[b - 1])) byte_pred[r[b]].push_back(s);
    }
    for (const Call* c = a->calls_begin(s); c != a->calls_end(s); ++c) {
      call_pred[c->next].push_back({s, c->rule});
      by_rule[c->rule].push_back({s, c->next});
    }
  }
  std::vector<uint8_t> live(n, 0), productive(a->start.size(), 0);
  std::vector<int32_t> work;
  auto make_live = [&](int32_t s) { if (!live[s]) { live[s] = 1; work.push_back(s); } };
  for (int32_t s = 0; s < n; ++s)
    if (a->final[s]) make_live(s);
  while (!work.empty()) {
    int32_t t = work.back();
    work.pop_back();
    for (int32_t s : byte_pred[t]) make_live(s);
    for (auto [s, rule] : call_pred[t])
      if (productive[rule]) make_live(s);
    int32_t rule = a->rule_of[t];
    if (a->start[rule] == t && !productive[rule]) {
      productive[rule] = 1;
      for (auto [s, next] : by_rule[rule])
        if (live[next]) make_live(s);
    }
  }
  if (!productive[a->root]) return Status::error(Code::grammar, "the grammar matches no string", a->root);
  for (int32_t s = 0; s < n; ++s) {
    if (a->row[s] >= 0) {
      int32_t* r = &a->next[a->row[s] * 256];
      bool any = false;
      for (int32_t b = 0; b < 256; ++b) {
        if (r[b] >= 0 && !live[r[b]]) r[b] = -1;
        any = any || r[b] >= 0;
      }
      if (!any) a->row[s] = -1;
    }
  }
  std::vector<Call> kept;
  std::vector<int32_t> begin(n + 1, 0);
  for (int32_t s = 0; s < n; ++s) {
    begin[s] = static_cast<int32_t>(kept.size());
    for (const Call* c = a->calls_begin(s); c != a->calls_end(s); ++c)
      if (productive[c->rule] && live[c->next]) kept.push_back(*c);
  }
  begin[n] = static_cast<int32_t>(kept.size());
  a->calls.swap(kept);
  a->call_begin.swap(begin);
  return {};
}

// A rule that can call itself before consuming a byte would make the parser push forever.
Status check_left_recursion(const Automaton& a) {
  const int32_t n_rules = static_cast<int32_t>(a.start.size());
  std::vector<uint8_t> nullable(n_rules, 0);
  // States reachable from a rule's start without consuming bytes.
  auto null_reach = [&](int32_t rule, std::vector<int32_t>* seen) {
    std::vector<int32_t> todo{a.start[rule]};
    seen->clear();
    while (!todo.empty()) {
      int32_t s = todo.back();
      todo.pop_back();
      if (std::find(seen->begin(), seen->end(), s) != seen->end()) continue;
      seen->push_back(s);
      for (const Call* c = a.calls_begin(s); c != a.calls_end(s); ++c)
        if (nullable[c->rule]) todo.push_back(c->next);
    }
  };
  std::vector<int32_t> seen;
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t r = 0; r < n_rules; ++r) {
      if (a.start[r] < 0 || nullable[r]) continue;
      null_reach(r, &seen);
      for (int32_t s : seen)
        if (a.final[s]) { nullable[r] = 1; changed = true; break; }
    }
  }
  std::vector<std::vector<int32_t>> left(n_rules);
  for (int32_t r = 0; r < n_rules; ++r) {
    if (a.start[r] < 0) continue;
    null_reach(r, &seen);
    for (int32_t s : seen)
      for (const Call* c = a.calls_begin(s); c != a.calls_end(s); ++c) left[r].push_back(c->rule);
  }
  for (const auto& comp : components(left)) {
    int32_t r = comp[0];
    if (comp.size() > 1 || std::find(left[r].begin(), left[r].end(), r) != left[r].end())
      return Status::error(Code::grammar, "left recursion: the rule can reach itself without consuming input", r);
  }
  return {};
}

}  // namespace

Status build_automaton(const Ir& ir, const Limits& limits, Automaton* out) {
  std::vector<uint8_t> inline_rule;
  InlinePlanner planner(ir, limits);
  Status s = planner.plan(&inline_rule);
  if (!s.ok()) return s;
  // Inlining the root would be pointless: it always gets an automaton of its own.
  Automaton& a = *out;
  a = Automaton{};
  a.root = ir.root;
  a.start.assign(ir.n_rules, -1);
  int64_t budget = limits.max_nfa_nodes;
  std::vector<int32_t> todo{ir.root}, called;
  std::vector<std::vector<Call>> calls_of_state;
  while (!todo.empty()) {
    int32_t rule = todo.back();
    todo.pop_back();
    if (a.start[rule] >= 0) continue;
    RuleNfa nfa(ir, limits, inline_rule, &budget);
    s = nfa.build(rule);
    if (!s.ok()) return s;
    a.start[rule] = a.n_states();
    Determinizer det(nfa, rule, limits, &a);
    called.clear();
    s = det.run(&called);
    if (!s.ok()) return s;
    for (auto& c : det.pending_calls_) calls_of_state.push_back(std::move(c));
    for (int32_t r : called)
      if (a.start[r] < 0) todo.push_back(r);
  }
  a.call_begin.assign(a.n_states() + 1, 0);
  for (int32_t st = 0; st < a.n_states(); ++st) {
    a.call_begin[st] = static_cast<int32_t>(a.calls.size());
    a.calls.insert(a.calls.end(), calls_of_state[st].begin(), calls_of_state[st].end());
  }
  a.call_begin[a.n_states()] = static_cast<int32_t>(a.calls.size());
  s = prune_dead(&a);
  if (!s.ok()) return s;
  a.tail.assign(a.n_states(), 0);
  a.plain.assign(a.n_states(), 0);
  for (int32_t st = 0; st < a.n_states(); ++st) {
    const bool no_calls = a.call_begin[st] == a.call_begin[st + 1];
    a.tail[st] = a.final[st] && a.row[st] < 0 && no_calls;
    a.plain[st] = !a.final[st] && a.row[st] >= 0 && no_calls;
  }
  return check_left_recursion(a);
}

}  // namespace tg
