#include "ir_build.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <unordered_map>

namespace tg::schema {

namespace {

constexpr size_t kMaxNonemptySeq = 8;  // ir.MAX_NONEMPTY_SEQ
constexpr int32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;
constexpr int32_t kUtf8Bounds[4][2] = {{0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xFFFF}, {0x10000, kMaxCodePoint}};

uint64_t mix(uint64_t h, uint32_t w) {
  h = (h ^ w) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

uint32_t hash_words(int32_t kind, const int32_t* w, size_t n) {
  uint64_t h = mix(0x243F6A8885A308D3ull, uint32_t(kind));
  for (size_t i = 0; i < n; ++i) h = mix(h, uint32_t(w[i]));
  return uint32_t(h ^ (h >> 32));
}

uint32_t hash_name(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return uint32_t(h ^ (h >> 32));
}

// A rule name as Python's repr writes it in error messages (quotes, escapes of controls).
std::string py_repr(std::string_view s) {
  const bool dq = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\' || c == q) {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  return out + q;
}

std::string undefined_rule(std::string_view name) { return "undefined rule " + py_repr(name); }

std::string bound_limit(int64_t bound) {
  return "repetition bound " + std::to_string(bound) + " exceeds the limit " + std::to_string(kMaxCount);
}

int utf8_encode(int32_t cp, uint8_t* out) {
  if (cp < 0x80) {
    out[0] = uint8_t(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = uint8_t(0xC0 | cp >> 6);
    out[1] = uint8_t(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = uint8_t(0xE0 | cp >> 12);
    out[1] = uint8_t(0x80 | (cp >> 6 & 0x3F));
    out[2] = uint8_t(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = uint8_t(0xF0 | cp >> 18);
  out[1] = uint8_t(0x80 | (cp >> 12 & 0x3F));
  out[2] = uint8_t(0x80 | (cp >> 6 & 0x3F));
  out[3] = uint8_t(0x80 | (cp & 0x3F));
  return 4;
}

// A node's children (ir.children): every `stride`-th operand from `first`.
struct Kids {
  const int32_t* first;
  size_t count, stride;
  Expr operator[](size_t i) const { return first[i * stride]; }
};

Kids kids_of(int32_t kind, const int32_t* a, size_t size) {
  switch (kind) {
    case SEQ: case ALT: return {a, size, 1};
    case REPEAT: case REGION: return {a, 1, 1};
    case AND: return {a + 1, (size - 1) / 2, 2};
    case MACHINE: return {a + 2 + a[0], (size - 1 - size_t(a[0])) / 3, 3};
    default: return {a, 0, 1};
  }
}

bool is_leaf(int32_t kind) { return kind == BYTES || kind == BYTESET || kind == REF; }

}  // namespace

std::vector<IrRange64> normalize_ranges(IrSpan<IrRange> ranges) {
  std::vector<IrRange64> sorted, out;
  sorted.reserve(ranges.size());
  for (const IrRange& r : ranges) sorted.push_back({r.lo, r.hi});
  std::sort(sorted.begin(), sorted.end(),
            [](const IrRange64& a, const IrRange64& b) { return a.lo != b.lo ? a.lo < b.lo : a.hi < b.hi; });
  for (const IrRange64& r : sorted) {
    if (r.lo > r.hi) continue;
    if (!out.empty() && r.lo <= out.back().hi + 1)
      out.back().hi = std::max(out.back().hi, r.hi);
    else
      out.push_back(r);
  }
  return out;
}

// ---- the arena ------------------------------------------------------------------------

IrBuilder::IrBuilder() {
  table_.assign(1024, -1);
  name_table_.assign(256, -1);
  make_seq({});       // kEmpty
  make_alt({});       // kNothing
  make_byte_set({});  // kEmptyByteSet
}

IrBuilder::~IrBuilder() = default;

Expr IrBuilder::fail(Code code, std::string message) {
  if (status_.ok()) status_ = Status::error(code, std::move(message));
  return kNothing;
}

Expr IrBuilder::intern(int32_t kind, Nullable nullable, const int32_t* words, size_t n) {
  if ((nodes_.size() + 1) * 2 > table_.size()) {
    std::vector<Expr> grown(table_.size() * 2, -1);
    const size_t mask = grown.size() - 1;
    for (size_t e = 0; e < nodes_.size(); ++e) {
      size_t slot = nodes_[e].hash & mask;
      while (grown[slot] >= 0) slot = (slot + 1) & mask;
      grown[slot] = Expr(e);
    }
    table_.swap(grown);
  }
  const uint32_t h = hash_words(kind, words, n);
  const size_t mask = table_.size() - 1;
  size_t slot = h & mask;
  for (; table_[slot] >= 0; slot = (slot + 1) & mask) {
    const Node& node = nodes_[table_[slot]];
    if (node.hash == h && node.kind == kind && node.size == n &&
        std::equal(words, words + n, pool_.data() + node.begin))
      return table_[slot];
  }
  if (pool_.size() + n > kMaxExprWords)
    return fail(Code::limit, "the grammar's expressions exceed " + std::to_string(kMaxExprWords) + " words (a limit)");
  // `words` may be operands of a node (a sequence's items): copied before the pool grows.
  const std::less<const int32_t*> before;
  if (n > 0 && !before(words, pool_.data()) && before(words, pool_.data() + pool_.size())) {
    std::vector<int32_t> copy(words, words + n);
    pool_.insert(pool_.end(), copy.begin(), copy.end());
  } else {
    pool_.insert(pool_.end(), words, words + n);
  }
  nodes_.push_back({uint32_t(pool_.size() - n), uint32_t(n), h, uint8_t(kind), int8_t(nullable)});
  // at most what serialize writes of it (a literal: a word per byte; `words` may be gone)
  ir_words_ += 3 + n + (kind == BYTES && n > 0 ? size_t(uint32_t(pool_[pool_.size() - n])) : 0);
  table_[slot] = Expr(nodes_.size() - 1);
  return table_[slot];
}

RuleId IrBuilder::rule(std::string_view name) {
  if ((names_.size() + 1) * 2 > name_table_.size()) {
    std::vector<RuleId> grown(name_table_.size() * 2, -1);
    const size_t mask = grown.size() - 1;
    for (size_t r = 0; r < names_.size(); ++r) {
      size_t slot = name_hashes_[r] & mask;
      while (grown[slot] >= 0) slot = (slot + 1) & mask;
      grown[slot] = RuleId(r);
    }
    name_table_.swap(grown);
  }
  const uint32_t h = hash_name(name);
  const size_t mask = name_table_.size() - 1;
  size_t slot = h & mask;
  for (; name_table_[slot] >= 0; slot = (slot + 1) & mask) {
    const RuleId r = name_table_[slot];
    if (name_hashes_[r] == h && names_[r] == name) return r;
  }
  if (names_.size() >= size_t(INT32_MAX / 2)) {
    fail(Code::limit, "too many rule names");
    return -1;
  }
  names_.emplace_back(name);
  name_hashes_.push_back(h);
  name_table_[slot] = RuleId(names_.size() - 1);
  return name_table_[slot];
}

void IrBuilder::children(Expr e, std::vector<Expr>* out) const {
  out->clear();
  const Kids k = kids_of(kind(e), pool_.data() + nodes_[e].begin, nodes_[e].size);
  for (size_t i = 0; i < k.count; ++i) out->push_back(k[i]);
}

// ---- nodes as given -------------------------------------------------------------------

Nullable IrBuilder::all_nullable(IrSpan<Expr> items, bool all) const {
  bool any_yes = false, all_yes = true;
  for (Expr x : items) {
    const Nullable n = nullable(x);
    if (n == Nullable::unknown) return Nullable::unknown;
    any_yes |= n == Nullable::yes;
    all_yes &= n == Nullable::yes;
  }
  return (all ? all_yes : any_yes) ? Nullable::yes : Nullable::no;
}

bool IrBuilder::all_exprs(IrSpan<Expr> items) const {
  return std::all_of(items.begin(), items.end(), [&](Expr x) { return is_expr(x); });
}

Expr IrBuilder::not_expr() { return fail(Code::argument, "not an expression of this builder"); }

Expr IrBuilder::make_bytes(std::string_view data) {
  if (data.size() >= kMaxExprWords * 4) return fail(Code::limit, "a literal exceeds the expressions' limit");
  scratch_.assign(1 + (data.size() + 3) / 4, 0);
  scratch_[0] = int32_t(data.size());
  if (!data.empty()) std::memcpy(scratch_.data() + 1, data.data(), data.size());
  return intern(BYTES, data.empty() ? Nullable::yes : Nullable::no, scratch_.data(), scratch_.size());
}

Expr IrBuilder::make_byte_set(IrSpan<IrRange> ranges) {
  scratch_.clear();
  for (const IrRange& r : ranges) {
    scratch_.push_back(r.lo);
    scratch_.push_back(r.hi);
  }
  return intern(BYTESET, Nullable::no, scratch_.data(), scratch_.size());
}

Expr IrBuilder::make_seq(IrSpan<Expr> items) {
  if (!all_exprs(items)) return not_expr();
  return intern(SEQ, all_nullable(items, true), items.data(), items.size());
}

Expr IrBuilder::make_alt(IrSpan<Expr> items) {
  if (!all_exprs(items)) return not_expr();
  return intern(ALT, all_nullable(items, false), items.data(), items.size());
}

Expr IrBuilder::make_repeat(Expr item, int64_t min, int64_t max) {
  if (!is_expr(item)) return not_expr();
  const int32_t words[5] = {item, int32_t(uint32_t(uint64_t(min))), int32_t(uint32_t(uint64_t(min) >> 32)),
                            int32_t(uint32_t(uint64_t(max))), int32_t(uint32_t(uint64_t(max) >> 32))};
  return intern(REPEAT, min == 0 ? Nullable::yes : nullable(item), words, 5);
}

Expr IrBuilder::make_ref(RuleId rule) {
  if (rule < 0 || rule >= n_rule_names()) return fail(Code::argument, "not a rule of this builder");
  return intern(REF, Nullable::unknown, &rule, 1);
}

Expr IrBuilder::make_check(int32_t kind, IrSpan<int32_t> params) {
  scratch_.assign(1, kind);
  scratch_.insert(scratch_.end(), params.begin(), params.end());
  return intern(CHECK, Nullable::unknown, scratch_.data(), scratch_.size());
}

Expr IrBuilder::make_region(Expr item) {
  if (!is_expr(item)) return not_expr();
  return intern(REGION, Nullable::unknown, &item, 1);
}

Expr IrBuilder::make_and(IrSpan<Expr> items, IrSpan<uint8_t> wants, bool escaped) {
  if (items.size() != wants.size() || std::none_of(wants.begin(), wants.end(), [](uint8_t w) { return w != 0; }))
    return fail(Code::grammar, "an intersection needs a wanted item and a want per item");
  scratch_.assign(1, escaped ? 1 : 0);
  for (size_t i = 0; i < items.size(); ++i) {
    if (!is_expr(items[i])) return not_expr();
    scratch_.push_back(items[i]);
    scratch_.push_back(wants[i] ? 1 : 0);
  }
  return intern(AND, Nullable::unknown, scratch_.data(), scratch_.size());
}

Expr IrBuilder::make_automaton(IrSpan<IrRun> runs, IrSpan<uint8_t> accept) {
  scratch_.assign(1, int32_t(accept.size()));
  for (uint8_t a : accept) scratch_.push_back(a ? 1 : 0);
  for (const IrRun& r : runs) scratch_.insert(scratch_.end(), {r.from, r.lo, r.hi, r.to});
  return intern(AUTOMATON, Nullable::unknown, scratch_.data(), scratch_.size());
}

Expr IrBuilder::make_machine(IrSpan<IrEdge> edges, IrSpan<uint8_t> accept) {
  scratch_.assign(1, int32_t(accept.size()));
  for (uint8_t a : accept) scratch_.push_back(a ? 1 : 0);
  for (const IrEdge& edge : edges) {
    if (!is_expr(edge.item)) return not_expr();
    scratch_.insert(scratch_.end(), {edge.from, edge.item, edge.to});
  }
  return intern(MACHINE, Nullable::unknown, scratch_.data(), scratch_.size());
}

// ---- the constructors -----------------------------------------------------------------

Expr IrBuilder::literal(std::string_view text) { return text.empty() ? kEmpty : make_bytes(text); }

// ir.seq and ir.alt: items of the same kind spliced in (one level), one item alone as itself.
Expr IrBuilder::flatten(int32_t k, IrSpan<Expr> items) {
  if (!all_exprs(items)) return not_expr();
  if (std::none_of(items.begin(), items.end(), [&](Expr x) { return kind(x) == k; }))
    return items.size() == 1 ? items[0] : k == SEQ ? make_seq(items) : make_alt(items);
  std::vector<Expr>& flat = flat_;  // make_seq and make_alt copy it and flatten nothing
  flat.clear();
  for (Expr x : items) {
    if (kind(x) == k) {
      const IrSpan<Expr> inner = this->items(x);
      flat.insert(flat.end(), inner.begin(), inner.end());
    } else {
      flat.push_back(x);
    }
  }
  return flat.size() == 1 ? flat[0] : k == SEQ ? make_seq(flat) : make_alt(flat);
}

Expr IrBuilder::seq(IrSpan<Expr> items) { return flatten(SEQ, items); }
Expr IrBuilder::alt(IrSpan<Expr> items) { return flatten(ALT, items); }

Expr IrBuilder::repeat(Expr item, int64_t lo, int64_t hi) {
  if (lo < 0 || (hi != kUnbounded && hi < lo))
    return fail(Code::grammar, "bad repetition bounds {" + std::to_string(lo) + "," +
                                   (hi == kUnbounded ? std::string("None") : std::to_string(hi)) + "}");
  const int64_t top = std::max(lo, hi == kUnbounded ? 0 : hi);
  if (top > kMaxCount) return fail(Code::limit, bound_limit(top));
  return make_repeat(item, lo, hi);
}

Expr IrBuilder::byte_set(IrSpan<IrRange> ranges) {
  const std::vector<IrRange64> merged = normalize_ranges(ranges);
  if (merged.empty()) return kNothing;
  std::vector<IrRange> narrow;
  for (const IrRange64& r : merged) narrow.push_back({int32_t(r.lo), int32_t(r.hi)});
  return make_byte_set(narrow);
}

// ir._utf8_sequences: code points lo..hi of one encoded length as sequences of byte ranges,
// split until each position is one range (depth at most twice the length: not the input's).
void IrBuilder::utf8_sequences(int32_t lo, int32_t hi, std::vector<Expr>* out) {
  uint8_t a[4], b[4];
  const int n = utf8_encode(lo, a);
  utf8_encode(hi, b);
  for (int i = n - 1; i >= 1; --i) {
    const int32_t mask = (int32_t(1) << (6 * (n - i))) - 1;
    if ((lo & ~mask) != (hi & ~mask)) {
      if ((lo & mask) != 0) {
        utf8_sequences(lo, lo | mask, out);
        utf8_sequences((lo | mask) + 1, hi, out);
        return;
      }
      if ((hi & mask) != mask) {
        utf8_sequences(lo, (hi & ~mask) - 1, out);
        utf8_sequences(hi & ~mask, hi, out);
        return;
      }
    }
  }
  Expr parts[4];
  for (int k = 0; k < n; ++k) {
    const IrRange r{a[k], b[k]};
    parts[k] = make_byte_set(IrSpan<IrRange>(&r, 1));
  }
  out->push_back(seq(IrSpan<Expr>(parts, size_t(n))));
}

Expr IrBuilder::char_class(IrSpan<IrRange> ranges, bool negate) {
  std::vector<IrRange64> set = normalize_ranges(ranges);
  if (negate) {  // ir.negate_ranges within [0, kMaxCodePoint]
    std::vector<IrRange64> out;
    int64_t start = 0;
    for (const IrRange64& r : set) {
      if (r.lo > start) out.push_back({start, r.lo - 1});
      start = r.hi + 1;
    }
    if (start <= kMaxCodePoint) out.push_back({start, kMaxCodePoint});
    set.swap(out);
  }
  // Surrogates have no UTF-8 encoding; then one encoded length at a time. The one-byte
  // alternatives merge into one byte set, written first (keeps ASCII classes compact).
  std::vector<IrRange> singles;
  std::vector<Expr> rest;
  for (const IrRange64& whole : set) {
    IrRange64 pieces[2] = {whole, {1, 0}};
    if (!(whole.hi < kSurrogateLo || whole.lo > kSurrogateHi))
      pieces[0] = {whole.lo, kSurrogateLo - 1}, pieces[1] = {kSurrogateHi + 1, whole.hi};
    for (const IrRange64& r : pieces) {
      if (r.lo > r.hi) continue;
      for (const auto& bound : kUtf8Bounds) {
        const int64_t lo = std::max<int64_t>(r.lo, bound[0]), hi = std::min<int64_t>(r.hi, bound[1]);
        if (lo > hi) continue;
        if (bound[1] == 0x7F)
          singles.push_back({int32_t(lo), int32_t(hi)});
        else
          utf8_sequences(int32_t(lo), int32_t(hi), &rest);
      }
    }
  }
  if (singles.empty() && rest.empty()) return kNothing;
  std::vector<Expr> parts;
  if (!singles.empty()) parts.push_back(byte_set(singles));
  parts.insert(parts.end(), rest.begin(), rest.end());
  return alt(parts);
}

// ir.nonempty without recursion (the nesting is the user's): each distinct subexpression's
// answer once, children in the order the Python asks them (a Seq's up to the first None).
Expr IrBuilder::nonempty(Expr top) {
  if (!is_expr(top)) return not_expr();
  std::unordered_map<Expr, Expr> done;
  std::vector<Expr> stack(1, top), xs, parts;
  const auto known = [&](Expr x, Expr* out) {
    const auto it = done.find(x);
    if (it == done.end()) {
      stack.push_back(x);
      return false;
    }
    *out = it->second;
    return true;
  };
  while (!stack.empty()) {
    const Expr e = stack.back();
    if (done.count(e)) {
      stack.pop_back();
      continue;
    }
    Expr result = kNoExpr;
    if (nullable(e) == Nullable::no) {
      result = e;
    } else if (kind(e) == BYTES) {
      result = kNothing;
    } else if (kind(e) == REPEAT) {
      const int64_t max = repeat_max(e);
      const Expr x = item(e);
      if (max == 0) {
        result = kNothing;
      } else if (nullable(x) == Nullable::yes) {  // (Y{lo,hi}) with Y nullable is (Y without ε){0,hi}
        Expr inner;
        if (!known(x, &inner)) continue;
        result = inner == kNoExpr ? kNoExpr : inner == kNothing ? kNothing : repeat(inner, 1, max);
      } else {
        result = repeat(x, 1, max);
      }
    } else if (kind(e) == ALT) {
      xs.assign(items(e).begin(), items(e).end());
      parts.clear();
      bool waiting = false, none = false;
      for (Expr x : xs) {
        Expr r;
        if (!known(x, &r)) {
          waiting = true;
          break;
        }
        none |= r == kNoExpr;
        if (r != kNoExpr && r != kNothing) parts.push_back(r);
      }
      if (waiting) continue;
      result = none ? kNoExpr : parts.empty() ? kNothing : alt(parts);
    } else if (kind(e) == SEQ && items(e).size() <= kMaxNonemptySeq) {
      // All items nullable: the first non-empty one starts it.
      xs.assign(items(e).begin(), items(e).end());
      std::vector<Expr> firsts;
      bool waiting = false, none = false;
      for (Expr x : xs) {
        Expr r;
        if (!known(x, &r)) {
          waiting = true;
          break;
        }
        if (r == kNoExpr) {
          none = true;
          break;
        }
        firsts.push_back(r);
      }
      if (waiting) continue;
      if (!none) {
        std::vector<Expr> options, rest;
        for (size_t i = 0; i < xs.size(); ++i) {
          if (firsts[i] == kNothing) continue;
          rest.assign(1, firsts[i]);
          rest.insert(rest.end(), xs.begin() + i + 1, xs.end());
          options.push_back(seq(rest));
        }
        result = options.empty() ? kNothing : alt(options);
      }
    }
    done.emplace(e, result);
    stack.pop_back();
  }
  return done[top];
}

Expr IrBuilder::folded_repeat(Expr atom, int64_t lo, int64_t hi) {
  if (!is_expr(atom)) return not_expr();
  if (hi != 0 && nullable(atom) == Nullable::yes) {
    const Expr body = nonempty(atom);
    if (body != kNoExpr) {
      if (body == kNothing) return kEmpty;  // only the empty text
      atom = body;
      lo = 0;
    }
  }
  if (kind(atom) != REPEAT || hi == 0) return repeat(atom, lo, hi);
  // Python's integers are unbounded: the products below, exactly.
  using Big = __int128;
  const int64_t a = repeat_min(atom), b = repeat_max(atom);
  const int64_t first = std::max<int64_t>(lo, 1);  // the fewest copies that write an X
  if (b == kUnbounded || hi == first || Big(first) * (Big(b) - a) >= Big(a) - 1) {
    const Big least = Big(a) * first;
    const bool open = b == kUnbounded || (b != 0 && hi == kUnbounded);
    const Big most = b == kUnbounded || b == 0 ? Big(b) : open ? Big(kUnbounded) : Big(hi) * b;
    if (least <= kMaxCount && (open || most <= kMaxCount)) {
      const Expr x = item(atom);
      if (lo > 0) return repeat(x, int64_t(least), int64_t(most));
      if (a <= 1) return repeat(x, 0, int64_t(most));
      return repeat(repeat(x, int64_t(least), int64_t(most)), 0, 1);
    }
  }
  return repeat(atom, lo, hi);
}

// ---- grammars -------------------------------------------------------------------------

bool IrGrammar::set(RuleId rule, Expr body) {
  if (rule < 0) return false;
  if (size_t(rule) >= position_.size()) position_.resize(size_t(rule) + 1, -1);
  if (position_[rule] >= 0) {
    bodies_[position_[rule]] = body;
  } else {
    position_[rule] = int32_t(rules_.size());
    rules_.push_back(rule);
    bodies_.push_back(body);
  }
  return true;
}

// ---- serialization (ir.serialize, ir._Writer) -----------------------------------------

// Writes expressions as IR nodes, children first, without recursion. Tables are stamped with a
// round number instead of cleared, so that a serialization costs what its grammar writes, not
// what the arena holds.
struct IrBuilder::Writer {
  const IrBuilder* b = nullptr;
  std::vector<int32_t>* words = nullptr;
  uint32_t round = 0;
  std::vector<int32_t> at;         // by expression: its offset, when stamped this round
  std::vector<uint32_t> at_round;
  std::vector<uint32_t> seen_round;  // by expression: check_refs' visits
  uint32_t seen = 0;
  std::unordered_map<int32_t, int32_t> owner;  // body offset -> the first rule written with it
  std::vector<int32_t> index;   // by rule id: its index, -1 when the grammar has no such rule
  std::vector<RuleId> order;    // by index: the rule
  std::vector<int32_t> ref_at;  // by index: the offset of the REF node to it, -1 not yet
  std::vector<uint8_t> marked;
  std::vector<int32_t> reached;  // rule indices referred to so far, in order
  std::vector<Expr> stack, waiting;
  int32_t limit = 0;  // rules a reference may name (the prelude's own while it is written)
  bool in_prelude = false;
  bool overflow = false;  // a number that is no int32 (the Python's OverflowError)
  Status status;

  bool fail(Code code, std::string message) {
    if (status.ok()) status = Status::error(code, std::move(message));
    return false;
  }
  int32_t error(Code code, std::string message) {
    fail(code, std::move(message));
    return -1;
  }

  void start(const IrBuilder& builder, std::vector<int32_t>* out) {
    b = &builder;
    words = out;
    status = Status{};
    overflow = false;
    if (++round == 0) {  // wrapped: the stamps cleared
      std::fill(at_round.begin(), at_round.end(), 0);
      round = 1;
    }
    at.resize(b->nodes_.size());
    at_round.resize(b->nodes_.size(), 0);
    seen_round.resize(b->nodes_.size(), 0);
    index.assign(size_t(b->n_rule_names()), -1);
    order.clear();
    reached.clear();
  }

  int32_t offset(Expr e) const { return at_round[e] == round ? at[e] : -1; }
  void put(Expr e, int32_t off) {
    at[e] = off;
    at_round[e] = round;
  }

  // A fresh first_with.
  void new_owners() { owner.clear(); }

  // The first rule written with body `off` since new_owners (first_with.setdefault).
  int32_t first_with(int32_t off, int32_t rule) { return owner.try_emplace(off, rule).first->second; }

  Kids kids(Expr e) const {
    const Node& n = b->nodes_[e];
    return kids_of(n.kind, b->pool_.data() + n.begin, n.size);
  }

  void reach(int32_t rule) {
    if (!marked[rule]) {
      marked[rule] = 1;
      reached.push_back(rule);
    }
  }

  void push(int64_t v) {
    if (v < INT32_MIN || v > INT32_MAX) overflow = true;
    words->push_back(int32_t(v));
  }

  int32_t ref_leaf(int32_t rule) {
    if (ref_at[rule] < 0) {
      ref_at[rule] = int32_t(words->size());
      words->insert(words->end(), {REF, rule});
      if (!in_prelude) reach(rule);
    }
    return ref_at[rule];
  }

  // A leaf (bytes, byte set, reference), looked up by its contents: -1 after an error.
  int32_t leaf(Expr e) {
    const Node& n = b->nodes_[e];
    const int32_t* a = b->pool_.data() + n.begin;
    int32_t off = int32_t(words->size());
    if (n.kind == REF) {
      const int32_t rule = index[a[0]];
      if (rule < 0 || rule >= limit) return error(Code::grammar, undefined_rule(b->names_[a[0]]));
      off = ref_leaf(rule);
    } else if (n.kind == BYTESET && n.size == 0) {  // no byte at all: the empty choice
      words->insert(words->end(), {ALT, 0});
    } else if (n.kind == BYTES) {
      words->insert(words->end(), {BYTES, a[0]});
      const auto* data = reinterpret_cast<const uint8_t*>(a + 1);
      for (int32_t i = 0; i < a[0]; ++i) words->push_back(data[i]);
    } else {
      words->insert(words->end(), {BYTESET, int32_t(n.size / 2)});
      words->insert(words->end(), a, a + n.size);
    }
    put(e, off);
    return off;
  }

  // An inner node from its children's offsets: -1 after an error. The Python looks inner nodes
  // up by their words, which name their children's offsets; here equal words come only from
  // equal expressions (each expression is written once, at one offset, and children are
  // handles), which are one handle already: the arena's hash-consing is that table.
  int32_t inner(Expr e) {
    const Node& n = b->nodes_[e];
    const int32_t* a = b->pool_.data() + n.begin;
    std::vector<int32_t>& w = *words;
    const size_t start = w.size();
    switch (n.kind) {
      case SEQ: case ALT:
        w.insert(w.end(), {int32_t(n.kind), int32_t(n.size)});
        for (size_t i = 0; i < n.size; ++i) w.push_back(offset(a[i]));
        break;
      case REPEAT: {
        const int64_t min = b->repeat_min(e), max = b->repeat_max(e);
        for (int64_t bound : {min, max})
          if (bound > kMaxCount) return error(Code::limit, bound_limit(bound));
        w.push_back(REPEAT);
        push(min);
        push(max);
        w.push_back(offset(a[0]));
        break;
      }
      case CHECK:
        w.insert(w.end(), {CHECK, a[0], int32_t(n.size - 1)});
        w.insert(w.end(), a + 1, a + n.size);
        break;
      case REGION:
        w.insert(w.end(), {REGION, offset(a[0])});
        break;
      case AUTOMATON:
        w.insert(w.end(), {AUTOMATON, a[0], int32_t((n.size - 1 - size_t(a[0])) / 4)});
        w.insert(w.end(), a + 1, a + n.size);
        break;
      case MACHINE: {
        const size_t edges = (n.size - 1 - size_t(a[0])) / 3;
        w.insert(w.end(), {MACHINE, a[0], int32_t(edges)});
        w.insert(w.end(), a + 1, a + 1 + a[0]);
        for (const int32_t* edge = a + 1 + a[0]; edge < a + n.size; edge += 3)
          w.insert(w.end(), {edge[0], offset(edge[1]), edge[2]});
        break;
      }
      case AND:
        w.insert(w.end(), {AND, int32_t(n.size / 2), a[0]});
        for (size_t i = 1; i < n.size; i += 2) w.insert(w.end(), {offset(a[i]), a[i + 1]});
        break;
      default:
        return error(Code::internal, "not an IR expression");
    }
    put(e, int32_t(start));
    return int32_t(start);
  }

  // _Writer.emit: -1 after an error. A node's leaf children are written as they are met; its
  // inner children not written yet go first (pushed last to first), then it is looked at again.
  int32_t emit(Expr top) {
    stack.assign(1, top);
    while (!stack.empty()) {
      const Expr e = stack.back();
      if (offset(e) >= 0) {
        stack.pop_back();
        continue;
      }
      const int32_t k = b->kind(e);
      if (is_leaf(k)) {
        stack.pop_back();
        if (leaf(e) < 0) return -1;
        continue;
      }
      waiting.clear();
      const Kids ks = kids(e);
      for (size_t i = 0; i < ks.count; ++i) {
        const Expr x = ks[i];
        if (offset(x) >= 0) continue;
        if (is_leaf(b->kind(x))) {
          if (leaf(x) < 0) return -1;
        } else {
          waiting.push_back(x);
        }
      }
      if (!waiting.empty()) {
        stack.insert(stack.end(), waiting.rbegin(), waiting.rend());
        continue;
      }
      stack.pop_back();
      if (inner(e) < 0) return -1;
    }
    return offset(top);
  }

  // _check_refs (and the Prelude's test that its expressions refer to no rule): each distinct
  // node under `top`, depth first as ir.distinct_nodes visits them.
  bool check_refs(Expr top, bool any_ref) {
    if (++seen == 0) {
      std::fill(seen_round.begin(), seen_round.end(), 0);
      seen = 1;
    }
    stack.assign(1, top);
    while (!stack.empty()) {
      const Expr e = stack.back();
      stack.pop_back();
      if (seen_round[e] == seen) continue;
      seen_round[e] = seen;
      if (b->kind(e) == REF) {
        const RuleId r = b->ref_rule(e);
        if (any_ref) return fail(Code::argument, "a prelude expression refers to a rule");
        if (index[r] < 0) return fail(Code::grammar, undefined_rule(b->names_[r]));
      }
      const Kids ks = kids(e);
      for (size_t i = 0; i < ks.count; ++i) stack.push_back(ks[i]);
    }
    return true;
  }

  // _write_rules: the rules `todo` lists from its k-th on (the list grows as references reach
  // rules), each body once; a rule whose body an earlier rule has becomes a reference to it.
  bool write_rules(const std::vector<int32_t>& todo, size_t k, const std::vector<Expr>& body_of,
                   std::vector<int32_t>* bodies) {
    for (; k < todo.size(); ++k) {
      const int32_t i = todo[k];
      const int32_t at = emit(body_of[i]);
      if (at < 0) return false;
      const int32_t first = first_with(at, i);
      (*bodies)[i] = first == i ? at : ref_leaf(first);
    }
    return true;
  }
};

Status IrBuilder::serialize(const IrGrammar& g, std::vector<int32_t>* out, std::vector<std::string>* names) {
  if (!status_.ok()) return status_;
  if (!writer_) writer_ = std::make_unique<Writer>();
  Writer& w = *writer_;
  w.start(*this, out);
  // Room for all the words at once (growing them step by step, each step a copy into fresh
  // pages, was a third of a large grammar's serialization)
  out->reserve(ir_words_ + 3 * size_t(g.size()) + 8);
  const auto bad_rule = [&](RuleId r) { return r < 0 || r >= n_rule_names(); };
  const auto bad_expr = [&](Expr e) { return !is_expr(e); };
  const IrPrelude* prelude = g.prelude;
  size_t n_fixed = 0;
  if (prelude != nullptr) {
    for (const auto& [r, body] : prelude->rules) {
      if (bad_rule(r) || bad_expr(body) || w.index[r] >= 0)
        return Status::error(Code::argument, "a prelude's rules are not distinct rules of this builder");
      if (g.get(r) != body) return Status::error(Code::grammar, "a grammar's rules differ from its prelude's");
      w.index[r] = int32_t(w.order.size());
      w.order.push_back(r);
    }
    for (Expr e : prelude->exprs)
      if (bad_expr(e)) return Status::error(Code::argument, "not an expression of this builder");
    n_fixed = w.order.size();
  }
  for (int32_t i = 0; i < g.size(); ++i) {
    const RuleId r = g.rule_at(i);
    if (bad_rule(r) || bad_expr(g.body_at(i))) return Status::error(Code::argument, "a rule not of this builder");
    if (w.index[r] < 0) {
      w.index[r] = int32_t(w.order.size());
      w.order.push_back(r);
    }
  }
  if (bad_rule(g.root) || w.index[g.root] < 0) {
    const std::string name = bad_rule(g.root) ? std::string("?") : py_repr(names_[g.root]);
    return Status::error(Code::grammar, "the start rule " + name + " is not defined");
  }
  const size_t n = w.order.size();
  std::vector<Expr> body_of(n);
  for (size_t i = 0; i < n; ++i) body_of[i] = g.get(w.order[i]);
  std::vector<int32_t> bodies(n, -1);  // the rule table, written after the nodes
  w.ref_at.assign(n, -1);
  w.marked.assign(n, 0);
  out->assign({kIrMagic, kIrVersion, int32_t(n), w.index[g.root]});

  // The prelude first, as ir.Prelude.start writes it on its own: its references name its rules
  // only, and its rules are written in order.
  if (prelude != nullptr) {
    w.in_prelude = true;
    w.limit = int32_t(n_fixed);
    for (Expr e : prelude->exprs)
      if (!w.check_refs(e, true) || w.emit(e) < 0) return w.status;
    w.new_owners();
    std::vector<int32_t> fixed(n_fixed);
    for (size_t i = 0; i < n_fixed; ++i) fixed[i] = int32_t(i);
    if (!w.write_rules(fixed, 0, body_of, &bodies)) return w.status;
    w.in_prelude = false;
  }
  w.limit = int32_t(n);
  w.new_owners();
  for (size_t i = 0; i < n_fixed; ++i) {
    w.first_with(bodies[i], int32_t(i));
    w.marked[i] = 1;
  }
  w.reach(w.index[g.root]);
  if (!w.write_rules(w.reached, 0, body_of, &bodies)) return w.status;
  if (n_fixed + w.reached.size() < n) {  // rules the root does not reach match nothing
    const int32_t nothing = w.offset(kEmptyByteSet) >= 0 ? w.offset(kEmptyByteSet) : w.leaf(kEmptyByteSet);
    for (size_t i = 0; i < n; ++i) {
      if (w.marked[i]) continue;
      if (!w.check_refs(body_of[i], false)) return w.status;
      bodies[i] = nothing;
    }
  }
  out->insert(out->end(), bodies.begin(), bodies.end());
  if (w.overflow)
    return Status::error(Code::limit, "a number in the grammar exceeds the IR's limit " + std::to_string(kMaxCount));
  if (names != nullptr) {
    names->clear();
    for (RuleId r : w.order) names->push_back(names_[r]);
  }
  return Status{};
}

}  // namespace tg::schema
