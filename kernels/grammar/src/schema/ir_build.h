// Grammar IR built natively: the expressions, constructors and serialize of
// py/trellis/grammar/ir.py, writing the very words its serialize writes (layout: that module's
// docstring; ../ir.h reads them). The same construction calls give the same words, so every
// constructor here applies exactly the Python one's simplifications.
//
// Expressions live in an IrBuilder's arena (one per conversion) and are named by a handle.
// They are hash-consed: building an expression equal to an existing one returns its handle,
// so equality is handle equality and no hash or comparison walks a subtree (the converter keys
// tables by expressions). This cannot change the words: Python's writer already gives equal
// subtrees one offset (leaves by their contents, inner nodes by their words), and walking a
// second, equal copy writes nothing and reaches no new rule, so skipping it leaves every first
// write where it was. Conversely distinct handles never write equal words, so serialize keeps
// one offset per handle and no table of the words written. The one place where the Python
// compares identity, a prelude's rules (Prelude.fits: the grammar holds these very objects),
// compares handles here. tests/grammar/native_schema/test_ir_build.py replays real grammars.
//
// Handles and rule ids are one builder's; the constructors check the ones they are given.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../ir.h"
#include "../status.h"

namespace tg::schema {

using Expr = int32_t;    // an expression: a handle into its builder's arena
using RuleId = int32_t;  // a rule name's number in its builder, given on first mention

constexpr Expr kNoExpr = -1;          // no expression (nonempty's None)
constexpr int64_t kUnbounded = -1;    // a repetition's maximum when there is none (None)
constexpr int64_t kMaxCount = 2147483647;  // ir.MAX_COUNT: bounds above it cannot be written
constexpr int32_t kMaxCodePoint = 0x10FFFF;
// The arena's words, all expressions together (a bound on memory, far above any real schema's).
constexpr size_t kMaxExprWords = size_t{1} << 28;

// A read-only run of values (pointer and size). One that views a builder's storage is valid
// until the builder next constructs an expression or names a rule.
template <class T>
class IrSpan {
 public:
  IrSpan() = default;
  IrSpan(const T* data, size_t size) : data_(data), size_(size) {}
  IrSpan(const std::vector<T>& v) : data_(v.data()), size_(v.size()) {}
  IrSpan(std::initializer_list<T> l) : data_(l.begin()), size_(l.size()) {}
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  const T* data_ = nullptr;
  size_t size_ = 0;
};

struct IrRange {  // inclusive: bytes, or code points for char_class
  int32_t lo, hi;
};
struct IrRun {  // an automaton's transition on the bytes lo..hi
  int32_t from, lo, hi, to;
};
struct IrEdge {  // a machine's edge: a string of `item` leads from `from` to `to`
  int32_t from;
  Expr item;
  int32_t to;
};

// ir.nullable's three answers: whether an expression matches the empty string, or unknown
// (references, checks and the nodes the front-ends build whole).
enum class Nullable : int8_t { no = 0, yes = 1, unknown = 2 };

// ir.normalize_ranges: sorted, empty ones dropped, overlapping or adjacent ones merged (as
// 64-bit bounds: an int32 range's end plus one must not overflow).
struct IrRange64 {
  int64_t lo, hi;
};
std::vector<IrRange64> normalize_ranges(IrSpan<IrRange> ranges);

class IrGrammar;
struct IrPrelude;

class IrBuilder {
 public:
  static constexpr Expr kEmpty = 0;    // ir.EMPTY, Seq(()): the empty string
  static constexpr Expr kNothing = 1;  // ir.NOTHING, Alt(()): no string

  IrBuilder();
  ~IrBuilder();
  IrBuilder(const IrBuilder&) = delete;
  IrBuilder& operator=(const IrBuilder&) = delete;

  // ---- rule names
  RuleId rule(std::string_view name);  // the name's id, a new one on its first mention
  const std::string& rule_name(RuleId rule) const { return names_[rule]; }
  int32_t n_rule_names() const { return int32_t(names_.size()); }

  // ---- nodes as given (Python's classes). Each returns the one handle of an equal node.
  Expr make_bytes(std::string_view data);                  // Bytes
  Expr make_byte_set(IrSpan<IrRange> ranges);               // ByteSet (not normalized)
  Expr make_seq(IrSpan<Expr> items);                        // Seq
  Expr make_alt(IrSpan<Expr> items);                        // Alt
  Expr make_repeat(Expr item, int64_t min, int64_t max);    // Repeat, max kUnbounded for None
  Expr make_ref(RuleId rule);                               // Ref
  Expr make_ref(std::string_view name) { return make_ref(rule(name)); }
  Expr make_check(int32_t kind, IrSpan<int32_t> params = {});  // Check
  Expr make_region(Expr item);                              // Region
  // And: an error (sticky, see status) unless one want per item and one of them set.
  Expr make_and(IrSpan<Expr> items, IrSpan<uint8_t> wants, bool escaped = false);
  Expr make_automaton(IrSpan<IrRun> runs, IrSpan<uint8_t> accept);   // Automaton
  Expr make_machine(IrSpan<IrEdge> edges, IrSpan<uint8_t> accept);   // Machine

  // ---- the constructors (ir.literal, ir.seq, ...), with their simplifications
  Expr literal(std::string_view text);  // UTF-8 text or bytes alike
  Expr seq(IrSpan<Expr> items);
  Expr alt(IrSpan<Expr> items);
  template <class... E, class = std::enable_if_t<(std::is_same_v<E, Expr> && ...)>>
  Expr seq(E... items) {
    const Expr list[] = {items..., kNoExpr};
    return seq(IrSpan<Expr>(list, sizeof...(E)));
  }
  template <class... E, class = std::enable_if_t<(std::is_same_v<E, Expr> && ...)>>
  Expr alt(E... items) {
    const Expr list[] = {items..., kNoExpr};
    return alt(IrSpan<Expr>(list, sizeof...(E)));
  }
  // An error (sticky) for bounds out of order, or above kMaxCount; hi kUnbounded for None.
  Expr repeat(Expr item, int64_t lo, int64_t hi);
  Expr byte_set(IrSpan<IrRange> ranges);
  Expr char_class(IrSpan<IrRange> ranges, bool negate = false);
  Nullable nullable(Expr e) const { return Nullable(nodes_[e].nullable); }
  Expr nonempty(Expr e);  // kNoExpr where the Python returns None
  Expr folded_repeat(Expr atom, int64_t lo, int64_t hi);

  // ---- reading. Operands are a node's words after its kind, children as handles:
  //   BYTES n, the bytes packed 4 a word        BYTESET lo, hi, ...      SEQ, ALT items
  //   REPEAT item, min, max (int64 as low, high words)    REF rule       CHECK kind, params
  //   REGION item      AND escaped, (item, want) * n
  //   AUTOMATON n_states, accept * n_states, (from, lo, hi, to) * n_runs
  //   MACHINE n_states, accept * n_states, (from, item, to) * n_edges
  int32_t kind(Expr e) const { return nodes_[e].kind; }  // tg::Kind
  IrSpan<int32_t> operands(Expr e) const { return {pool_.data() + nodes_[e].begin, nodes_[e].size}; }
  IrSpan<Expr> items(Expr e) const { return operands(e); }  // a Seq's or an Alt's
  Expr item(Expr e) const { return pool_[nodes_[e].begin]; }  // a Repeat's or a Region's
  int64_t repeat_min(Expr e) const { return wide(nodes_[e].begin + 1); }
  int64_t repeat_max(Expr e) const { return wide(nodes_[e].begin + 3); }  // kUnbounded: none
  std::string_view bytes(Expr e) const {  // a Bytes node's data
    const int32_t* a = pool_.data() + nodes_[e].begin;
    return {reinterpret_cast<const char*>(a + 1), size_t(a[0])};
  }
  RuleId ref_rule(Expr e) const { return pool_[nodes_[e].begin]; }
  void children(Expr e, std::vector<Expr>* out) const;  // ir.children's order
  size_t n_exprs() const { return nodes_.size(); }

  // ---- errors. Constructors cannot fail in place: the first error is kept (later ones are
  // dropped), the failed call returns kNothing, and serialize returns the error.
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  Status take_status() { return std::exchange(status_, Status{}); }  // and clear it (Python's except)

  // ir.serialize: the words and the rule names by index, or the Python's error (undefined
  // rule, a repetition bound or number over the limit, a prelude the grammar does not fit; then
  // `words` holds no grammar). A construction error kept since take_status comes first.
  Status serialize(const IrGrammar& grammar, std::vector<int32_t>* words, std::vector<std::string>* names);

 private:
  struct Node {
    uint32_t begin;  // operands in pool_
    uint32_t size;
    uint32_t hash;
    uint8_t kind;
    int8_t nullable;
  };
  struct Writer;

  Expr intern(int32_t kind, Nullable nullable, const int32_t* words, size_t n);
  Expr fail(Code code, std::string message);
  bool is_expr(Expr e) const { return e >= 0 && size_t(e) < nodes_.size(); }
  bool all_exprs(IrSpan<Expr> items) const;
  Expr not_expr();
  int64_t wide(uint32_t at) const {
    return int64_t(uint64_t(uint32_t(pool_[at])) | uint64_t(uint32_t(pool_[at + 1])) << 32);
  }
  Nullable all_nullable(IrSpan<Expr> items, bool all) const;
  void utf8_sequences(int32_t lo, int32_t hi, std::vector<Expr>* out);
  Expr flatten(int32_t kind, IrSpan<Expr> items);

  static constexpr Expr kEmptyByteSet = 2;  // ByteSet(()): the unreached rules' body
  std::vector<Node> nodes_;
  std::vector<int32_t> pool_;
  std::vector<Expr> table_;  // open addressing over nodes_ by hash; -1 free
  size_t ir_words_ = 0;      // the IR words of every node, as serialize writes them, at most
  std::vector<std::string> names_;
  std::vector<RuleId> name_table_;  // open addressing over names_; -1 free
  std::vector<uint32_t> name_hashes_;
  std::vector<int32_t> scratch_;
  // flatten's items, kept between calls (a fresh list each was a tenth of a large schema's
  // conversion allocations)
  std::vector<Expr> flat_;
  Status status_;
  std::unique_ptr<Writer> writer_;  // serialize's tables, kept between calls
};

// A grammar: rules by name in the order first set (which gives their indices), the start
// rule, and the prelude written first (ir.Grammar). Rule ids and bodies are one builder's.
class IrGrammar {
 public:
  RuleId root = -1;
  const IrPrelude* prelude = nullptr;

  // rules[name] = body: a new rule goes last, a known one keeps its place. False for no rule id.
  bool set(RuleId rule, Expr body);
  Expr get(RuleId rule) const {  // kNoExpr when there is no such rule
    return rule >= 0 && size_t(rule) < position_.size() && position_[rule] >= 0 ? bodies_[position_[rule]] : kNoExpr;
  }
  bool has(RuleId rule) const { return get(rule) != kNoExpr; }
  int32_t size() const { return int32_t(rules_.size()); }
  RuleId rule_at(int32_t i) const { return rules_[i]; }
  Expr body_at(int32_t i) const { return bodies_[i]; }

 private:
  std::vector<RuleId> rules_;
  std::vector<Expr> bodies_;
  std::vector<int32_t> position_;  // by rule id, -1 when absent
};

// ir.Prelude: expressions (no rule references) and rules (referring to each other only) that
// a grammar's words start with, so that they sit at the same offsets in every grammar that
// names it. A grammar naming one holds its rules with these very bodies, as its first rules.
struct IrPrelude {
  std::vector<Expr> exprs;
  std::vector<std::pair<RuleId, Expr>> rules;  // in order, no rule twice
};

}  // namespace tg::schema
