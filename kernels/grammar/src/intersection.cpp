#include "intersection.h"

#include <algorithm>
#include <string>

#include "edge_lists.h"
#include "signature_table.h"
#include "thompson.h"

namespace tg {

namespace {

using Run = ByteRun;

Status too_large(const std::string& what) {
  return Status::error(Code::limit, "string constraints combine to more than " + what);
}

// Thompson's construction of a regular expression (no references, checks or regions).
class Nfa {
 public:
  explicit Nfa(int64_t* budget) : budget_(budget) {}

  // The union of `nodes`' languages (one node: its own NFA).
  Status build(const Ir& ir, const std::vector<int32_t>& nodes) {
    ir_ = &ir;
    start = add();
    if (nodes.size() == 1) {
      accept = expr(nodes[0], start, 0);
    } else {
      accept = add();
      for (int32_t node : nodes) {
        const int32_t from = add();
        eps(start, from);
        eps(expr(node, from, 0), accept);
      }
    }
    eps_edges.group(n_nodes_);
    byte_edges.group(n_nodes_);
    return status_;
  }

  int32_t n_nodes() const { return n_nodes_; }
  int32_t start = 0, accept = 0;
  EdgeLists<int32_t> eps_edges;  // grouped by node once built
  EdgeLists<Run> byte_edges;

 private:
  template <class B>
  friend int32_t tg::thompson(const Ir& ir, int32_t node, int32_t from, int32_t depth, B& b);
  static constexpr int32_t kMaxDepth = 2'000;

  int32_t add() {
    if (--*budget_ < 0 && status_.ok())
      status_ = too_large(std::to_string(kMaxChildNfaNodes) + " automaton nodes in all");
    return n_nodes_++;
  }

  bool ok() const { return status_.ok(); }
  void eps(int32_t from, int32_t to) { eps_edges.add(from, to); }
  void byte(int32_t from, int32_t lo, int32_t hi, int32_t to) { byte_edges.add(from, {lo, hi, to}); }

  int32_t expr(int32_t node, int32_t from, int32_t depth) {
    if (!status_.ok()) return from;
    if (depth > kMaxDepth) {
      status_ = Status::error(Code::limit, "grammar nested deeper than " + std::to_string(kMaxDepth));
      return from;
    }
    return thompson(*ir_, node, from, depth, *this);
  }

  int32_t other(int32_t, int32_t from, int32_t) {  // read_ir let no other kind in
    status_ = Status::error(Code::internal, "an AND child that is not regular");
    return from;
  }

  const Ir* ir_ = nullptr;
  int64_t* budget_;
  Status status_;
  int32_t n_nodes_ = 0;
};

// Appends a run, joined to the state's last one when they touch and agree.
void put_run(ByteDfa* d, size_t first, int32_t lo, int32_t hi, int32_t to) {
  if (d->runs.size() > first && d->runs.back().to == to && d->runs.back().hi + 1 == lo) d->runs.back().hi = hi;
  else d->runs.push_back({lo, hi, to});
}

// Nodes from which every byte string reaches acceptance: a loop on every byte (the node and its
// target each one empty step from the other) whose target reaches acceptance by empty steps
// (the end of `x.*`). A subset holding one accepts everything, so all such subsets are one
// state: the search for several words does not track which of them it has seen. Linear.
std::vector<uint8_t> universal_nodes(const Nfa& nfa) {
  const int32_t n = nfa.n_nodes();
  EdgeLists<int32_t> back;
  for (int32_t s = 0; s < n; ++s)
    for (const int32_t* t = nfa.eps_edges.begin(s); t != nfa.eps_edges.end(s); ++t) back.add(*t, s);
  back.group(n);
  std::vector<uint8_t> ends(n, 0), u(n, 0);  // ends: reaches acceptance by empty steps
  std::vector<int32_t> todo{nfa.accept};
  ends[nfa.accept] = 1;
  while (!todo.empty()) {
    const int32_t t = todo.back();
    todo.pop_back();
    for (const int32_t* s = back.begin(t); s != back.end(t); ++s)
      if (!ends[*s]) ends[*s] = 1, todo.push_back(*s);
  }
  for (int32_t s = 0; s < n; ++s)
    for (const Run* e = nfa.byte_edges.begin(s); e != nfa.byte_edges.end(s); ++e) {
      const int32_t *out = nfa.eps_edges.begin(e->to), *out_end = nfa.eps_edges.end(e->to);
      if (e->lo == 0 && e->hi == 255 && ends[e->to] && (e->to == s || std::find(out, out_end, s) != out_end))
        u[s] = 1;
    }
  return u;
}

// The subset construction. A state's pieces are swept in byte order with the edges that cover
// them (edges join as the sweep reaches their first byte and leave past their last).
Status determinize(const Nfa& nfa, ByteDfa* out) {
  SignatureTable sets;  // by id: the sorted NFA nodes of each state
  sets.clear();
  std::vector<uint32_t> mark(nfa.n_nodes(), 0);
  uint32_t epoch = 0;
  int64_t held = 0;  // NFA nodes in all sets together: the construction's memory
  const std::vector<uint8_t> universal = universal_nodes(nfa);
  int32_t everything = -1;  // the state of the subsets that hold a universal node
  std::vector<int32_t> todo;
  const auto intern = [&](int32_t* id) {
    std::vector<int32_t>& set = sets.words_;
    const size_t from = set.size();
    ++epoch;
    bool all = false;
    while (!todo.empty()) {
      const int32_t n = todo.back();
      todo.pop_back();
      if (mark[n] == epoch) continue;
      mark[n] = epoch;
      // Only nodes that read a byte, and acceptance, tell sets apart: the ends of a class's
      // hundreds of UTF-8 sequences (`\p{L}`) join in one set instead of one set each.
      if (nfa.byte_edges.begin(n) != nfa.byte_edges.end(n) || n == nfa.accept) set.push_back(n);
      all |= universal[n] != 0;
      todo.insert(todo.end(), nfa.eps_edges.begin(n), nfa.eps_edges.end(n));
    }
    if (all && everything >= 0) {
      set.resize(from);
      *id = everything;
      return Status{};
    }
    std::sort(set.begin() + from, set.end());
    const int32_t n_before = sets.size();
    const int64_t size = static_cast<int64_t>(set.size() - from);
    *id = sets.intern(from);
    if (*id < n_before) return Status{};
    if (n_before >= kMaxExploredStates)
      return too_large(std::to_string(kMaxExploredStates) + " automaton states in one part");
    held += size;
    if (held > kMaxSubsetNodes)
      return too_large(std::to_string(kMaxSubsetNodes) + " NFA positions in one part's states together");
    if (all) everything = *id;
    return Status{};
  };
  *out = ByteDfa{};
  todo.push_back(nfa.start);
  int32_t id;
  Status s = intern(&id);
  std::vector<Run> edges, active;
  std::vector<int32_t> cuts, set;
  RunBounds bounds;
  for (int32_t k = 0; s.ok() && k < sets.size(); ++k) {
    out->begin.push_back(static_cast<int32_t>(out->runs.size()));
    set.assign(sets.data(k), sets.data(k) + sets.length(k));  // a copy: interning grows the table
    out->accept.push_back(std::binary_search(set.begin(), set.end(), nfa.accept));
    edges.clear();
    bounds.clear();
    for (int32_t n : set)
      for (const Run* e = nfa.byte_edges.begin(n); e != nfa.byte_edges.end(n); ++e) {
        edges.push_back(*e);
        bounds.add(*e);
      }
    bounds.list(&cuts);
    std::sort(edges.begin(), edges.end(), [](const Run& x, const Run& y) { return x.lo < y.lo; });
    active.clear();
    size_t joined = 0;
    const size_t first = out->runs.size();
    for (size_t c = 0; s.ok() && c + 1 < cuts.size(); ++c) {
      const int32_t lo = cuts[c];
      for (; joined < edges.size() && edges[joined].lo == lo; ++joined) active.push_back(edges[joined]);
      active.erase(std::remove_if(active.begin(), active.end(), [lo](const Run& e) { return e.hi < lo; }),
                   active.end());
      if (active.empty()) continue;
      for (const Run& e : active) todo.push_back(e.to);
      s = intern(&id);
      if (s.ok()) put_run(out, first, lo, cuts[c + 1] - 1, id);
    }
  }
  out->begin.push_back(static_cast<int32_t>(out->runs.size()));
  return s;
}

// Per state: it accepts every string from here on (accepting, and every byte leads to such a
// state). A product state where an unwanted child stands in one accepts nothing ever after.
std::vector<uint8_t> universal_states(const ByteDfa& d) {
  const int32_t n = d.n_states();
  std::vector<uint8_t> u(n);
  for (int32_t s = 0; s < n; ++s) {
    int32_t next = 0;
    for (int32_t r = d.begin[s]; r < d.begin[s + 1] && next == d.runs[r].lo; ++r) next = d.runs[r].hi + 1;
    u[s] = d.accept[s] && next == 256;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t s = 0; s < n; ++s) {
      if (!u[s]) continue;
      for (int32_t r = d.begin[s]; r < d.begin[s + 1]; ++r)
        if (!u[d.runs[r].to]) {
          u[s] = 0, changed = true;
          break;
        }
    }
  }
  return u;
}

// Keeps the states from which an accepting one is reachable, in their order (state 0 first).
void trim(ByteDfa* d) {
  const int32_t n = d->n_states();
  std::vector<std::vector<int32_t>> preds(n);
  for (int32_t s = 0; s < n; ++s)
    for (int32_t r = d->begin[s]; r < d->begin[s + 1]; ++r) preds[d->runs[r].to].push_back(s);
  std::vector<uint8_t> live(n, 0);
  std::vector<int32_t> work;
  for (int32_t s = 0; s < n; ++s)
    if (d->accept[s]) live[s] = 1, work.push_back(s);
  while (!work.empty()) {
    const int32_t t = work.back();
    work.pop_back();
    for (int32_t s : preds[t])
      if (!live[s]) live[s] = 1, work.push_back(s);
  }
  ByteDfa out;
  if (n == 0 || !live[0]) {  // the empty language
    out.begin = {0, 0};
    out.accept = {0};
    *d = std::move(out);
    return;
  }
  std::vector<int32_t> index(n, -1);
  int32_t kept = 0;
  for (int32_t s = 0; s < n; ++s)
    if (live[s]) index[s] = kept++;
  for (int32_t s = 0; s < n; ++s) {
    if (!live[s]) continue;
    out.begin.push_back(static_cast<int32_t>(out.runs.size()));
    out.accept.push_back(d->accept[s]);
    const size_t first = out.runs.size();
    for (int32_t r = d->begin[s]; r < d->begin[s + 1]; ++r) {
      const Run& run = d->runs[r];
      if (live[run.to]) put_run(&out, first, run.lo, run.hi, index[run.to]);
    }
  }
  out.begin.push_back(static_cast<int32_t>(out.runs.size()));
  *d = std::move(out);
}

// Whether `node` is bytes, or sequences and choices of nothing else (a finite set of strings).
bool literal_only(const Ir& ir, int32_t node, int32_t depth) {
  const int32_t kind = ir.kind(node);
  if (kind == BYTES) return true;
  if ((kind != SEQ && kind != ALT) || depth > 64) return false;
  const int32_t* a = ir.args(node);
  for (int32_t i = 0; i < a[0]; ++i)
    if (!literal_only(ir, a[1 + i], depth + 1)) return false;
  return true;
}

// The run of `d`'s state `s` holding byte `b`, searched from `*r` on (bytes come in order).
int32_t target_at(const ByteDfa& d, int32_t s, int32_t b, int32_t* r) {
  while (*r < d.begin[s + 1] && d.runs[*r].hi < b) ++*r;
  return *r < d.begin[s + 1] && d.runs[*r].lo <= b ? d.runs[*r].to : -1;
}

}  // namespace

Status intersection_dfa(const Ir& ir, int32_t node, int64_t* budget, ByteDfa* out) {
  // A part per child, except that the unwanted children that are literals share one: their
  // union is a trie no larger than their bytes (a set of excluded values, a part each, made
  // the product's tuples as long as the set). Other unwanted children stay parts of their own,
  // where the wanted parts bound what the product explores of them.
  const int32_t* a = ir.args(node);
  std::vector<std::vector<int32_t>> part_nodes;
  std::vector<int32_t> literals;
  int32_t n_wanted = 0;
  for (int32_t k = 0; k < a[0]; ++k) {
    const int32_t child = a[2 + 2 * k];
    if (a[3 + 2 * k] != 0) part_nodes.insert(part_nodes.begin() + n_wanted++, {child});
    else if (literal_only(ir, child, 0)) literals.push_back(child);
    else part_nodes.push_back({child});
  }
  if (!literals.empty()) part_nodes.push_back(std::move(literals));
  const int32_t n = static_cast<int32_t>(part_nodes.size());
  std::vector<ByteDfa> parts(n);
  std::vector<uint8_t> wants(n);
  std::vector<std::vector<uint8_t>> universal(n);
  for (int32_t k = 0; k < n; ++k) {
    Nfa nfa(budget);
    Status s = nfa.build(ir, part_nodes[k]);
    if (s.ok()) s = determinize(nfa, &parts[k]);
    if (!s.ok()) return s;
    wants[k] = k < n_wanted;
    if (!wants[k]) universal[k] = universal_states(parts[k]);
  }
  SignatureTable tuples;  // product state i: the parts' states, tuples.data(i)[0, n)
  tuples.clear();
  std::vector<int32_t> tuple(n, 0), cur(n), cuts, at(n);
  tuples.words_ = tuple;
  tuples.intern(0);
  RunBounds bounds;
  ByteDfa d;
  for (int32_t p = 0; p < tuples.size(); ++p) {
    cur.assign(tuples.data(p), tuples.data(p) + n);  // a copy: interning grows the table
    bool accept = true;
    for (int32_t k = 0; k < n; ++k) {
      const bool in = cur[k] >= 0 && parts[k].accept[cur[k]];
      accept &= in == bool(wants[k]);
    }
    d.begin.push_back(static_cast<int32_t>(d.runs.size()));
    d.accept.push_back(accept);
    // Pieces: the bytes cut at every part's run boundaries (within one, each part has one target).
    bounds.clear();
    for (int32_t k = 0; k < n; ++k) {
      if (cur[k] < 0) continue;
      const ByteDfa& c = parts[k];
      for (int32_t r = c.begin[cur[k]]; r < c.begin[cur[k] + 1]; ++r) bounds.add(c.runs[r]);
    }
    bounds.list(&cuts);
    for (int32_t k = 0; k < n; ++k) at[k] = cur[k] < 0 ? 0 : parts[k].begin[cur[k]];
    const size_t first = d.runs.size();
    for (size_t c = 0; c + 1 < cuts.size(); ++c) {
      const int32_t b = cuts[c];
      bool dead = false;
      for (int32_t k = 0; k < n && !dead; ++k) {
        tuple[k] = cur[k] < 0 ? -1 : target_at(parts[k], cur[k], b, &at[k]);
        dead = wants[k] ? tuple[k] < 0 : tuple[k] >= 0 && universal[k][tuple[k]];
      }
      if (dead) continue;
      const size_t from = tuples.words_.size();
      tuples.words_.insert(tuples.words_.end(), tuple.begin(), tuple.end());
      const int32_t id = tuples.intern(from);
      if (tuples.size() > kMaxExploredStates)
        return too_large(std::to_string(kMaxExploredStates) + " automaton states while they are combined");
      put_run(&d, first, b, cuts[c + 1] - 1, id);
    }
  }
  d.begin.push_back(static_cast<int32_t>(d.runs.size()));
  trim(&d);
  if (d.n_states() > kMaxProductStates) return too_large(std::to_string(kMaxProductStates) + " automaton states");
  *out = std::move(d);
  return {};
}

bool json_escaped(int32_t byte) { return byte < 0x20 || byte == '"' || byte == '\\'; }

const char* json_escape_of(int32_t byte) {
  switch (byte) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case 0x08: return "\\b";
    case 0x0C: return "\\f";
    case 0x0A: return "\\n";
    case 0x0D: return "\\r";
    case 0x09: return "\\t";
    default: break;
  }
  static const char* const kLong[32] = {
      "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
      "\\u0008", "\\u0009", "\\u000a", "\\u000b", "\\u000c", "\\u000d", "\\u000e", "\\u000f",
      "\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
      "\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f"};
  return byte >= 0 && byte < 0x20 ? kLong[byte] : nullptr;
}

}  // namespace tg
