#include "converter.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <tuple>
#include <memory>
#include <optional>
#include <unordered_set>

#include "../checks.h"
#include "patterns.h"
#include "string_schema.h"
#include "text.h"

namespace tg::schema {

namespace {

constexpr Expr kNothing = IrBuilder::kNothing;
constexpr int32_t kMaxRules = 15000;             // converter.MAX_RULES
constexpr size_t kMaxOrderedProperties = 3000;   // _object_schema.MAX_ORDERED_PROPERTIES
constexpr size_t kMachineStates = 64;            // _state_machine.MACHINE_STATES
constexpr int64_t kCountBlocksFrom = 256;        // _array_schema.COUNT_BLOCKS_FROM
constexpr int32_t kValidatorDepth = 200;         // Validator's depth_limit

bool in(std::string_view key, std::initializer_list<std::string_view> keys) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// TypeAnalysis.KNOWN_ALL less the reference keywords: what makes a subschema say something.
// (A set: every member of every subschema asked is looked up here.)
bool constraining(std::string_view k, bool draft7) {
  static const std::unordered_set<std::string_view> known{
      "type", "enum", "const", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "minimum", "maximum",
      "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern", "format", "items",
      "prefixItems", "additionalItems", "contains", "minContains", "maxContains", "minItems", "maxItems",
      "uniqueItems", "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
      "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
      "unevaluatedItems", "unevaluatedProperties", "$recursiveRef", "$trellis:notConst", "$trellis:notPattern",
      "$trellis:notFormat", "$trellis:notMultipleOf", "$trellis:someProperty"};
  return known.count(k) || (draft7 && (k == "contentMediaType" || k == "contentEncoding"));
}

// _negate.py's keywords for what JSON Schema cannot say: a value, pattern, format or multiple
// excluded, and some property.
constexpr std::string_view kNotConst = "$trellis:notConst", kNotPattern = "$trellis:notPattern",
                           kNotFormat = "$trellis:notFormat", kNotMultiple = "$trellis:notMultipleOf";
// "Some property whose key is in a region has a value valid against a schema": a negated
// properties/patternProperties/additionalProperties ({exclude, match, notMatch, schema}).
constexpr std::string_view kWitness = "$trellis:someProperty";

// The constraining keywords this port builds (README.md's first step); a subschema with any
// other declines the document.
bool covered(std::string_view k, const Value& v) {
  if (in(k, {"type", "enum", "const", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "properties",
             "required", "additionalProperties", "minProperties", "maxProperties", "dependentRequired",
             "dependentSchemas", "dependencies", "items", "prefixItems", "additionalItems", "minItems", "maxItems",
             "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
             "exclusiveMaximum", "multipleOf", "contains", "minContains", "maxContains", kNotConst, kNotPattern,
             kNotFormat, kNotMultiple}))
    return true;
  if (k == "patternProperties") return v.is_object();
  if (k == "propertyNames") return v.is_object() || v.is_bool();
  if (k == kWitness) return v.is_object();  // its shape checked where it is built
  if (k == "uniqueItems") return v.is_bool();
  return false;
}

// _keywords.NOTES: what a schema says to readers.
bool is_note(std::string_view k) {
  return in(k, {"title", "description", "examples", "default", "$comment", "deprecated", "readOnly", "writeOnly"});
}

// _keywords.ANNOTATIONS: accepted and ignored.
bool is_annotation(std::string_view k) {
  return is_note(k) || in(k, {"contentEncoding", "contentMediaType", "contentSchema", "$schema", "$id", "$anchor",
                              "$dynamicAnchor", "$recursiveAnchor", "$defs", "definitions", "$vocabulary"});
}

// _keywords.VALUE_LIST: a subschema of only these is a list of values with a type.
bool value_list_key(std::string_view k) { return is_annotation(k) || in(k, {"enum", "const", "type"}); }

// `k` appended to `keys` unless there already (the Python's dict.fromkeys and `if k not in`).
void add_new(std::vector<std::string>* keys, std::string_view k) {
  if (std::find(keys->begin(), keys->end(), k) == keys->end()) keys->emplace_back(k);
}

uint8_t type_atoms(const Value* schema) {
  if (!schema->is_object()) return kAllAtoms;
  const Value* t = schema->find("type");
  if (t == nullptr) return kAllAtoms;
  uint8_t out = 0;
  auto add = [&](std::string_view name) {
    if (name == "null") out |= kAtomNull;
    else if (name == "boolean") out |= kAtomBoolean;
    else if (name == "integer") out |= kAtomInt;
    else if (name == "number") out |= kAtomInt | kAtomFrac;
    else if (name == "string") out |= kAtomString;
    else if (name == "array") out |= kAtomArray;
    else if (name == "object") out |= kAtomObject;
  };
  if (t->is_string()) add(t->text());
  for (const Value& x : t->items()) add(x.text());
  return out;
}

// _validate.canon for scalars: equal keys for equal JSON values (1 and 1.0 alike). A number is
// its Decimal normalized, as Python's context does to 28 digits: longer ones have no key here
// (declined, as are arrays and objects).
std::optional<std::string> canon(const Value& v) {
  switch (v.kind()) {
    case Kind::string: return "s" + std::string(v.text());
    case Kind::null: return std::string("z");
    case Kind::boolean: return std::string(v.boolean() ? "bT" : "bF");
    case Kind::integer:
    case Kind::number: {
      Decimal d;
      if (!to_decimal(v, &d)) return std::nullopt;
      std::string digits = d.digits;
      size_t lead = digits.find_first_not_of('0');
      if (lead == std::string::npos) return std::string("#0");
      digits.erase(0, lead);
      int64_t exponent = d.exponent;
      while (digits.back() == '0') {
        digits.pop_back();
        ++exponent;
      }
      if (digits.size() > 28) return std::nullopt;
      return std::string(d.negative ? "#-" : "#") + digits + "e" + std::to_string(exponent);
    }
    default: return std::nullopt;
  }
}

// _state_machine.StateMachine: a counting automaton's states, numbered as they are first asked
// for; `edges` gives each state's edges in turn (an expression and the next state's number, or
// kAccept), dropping the NOTHING ones, while the body numbers the states that follow.
constexpr int32_t kAccept = -1;
using EdgeList = std::vector<std::pair<Expr, int32_t>>;  // (expression, next state or kAccept)
// Each state's edges, flat: state s's are edges[begin[s] .. begin[s + 1]).
struct StateEdges {
  std::vector<int32_t> begin{0};
  EdgeList edges;
  int32_t size() const { return int32_t(begin.size()) - 1; }
};
// A state's number by its key: `add` gives the key's number, `fresh` when it is new.
template <class Key>
struct MapNumbers {
  std::map<Key, int32_t> map;
  int32_t add(const Key& k, int32_t fresh, bool* is_new) {
    auto it = map.emplace(k, fresh);
    *is_new = it.second;
    return it.first->second;
  }
};
// members_in_order's keys (member, started) index a table: no node per state.
struct DenseNumbers {
  std::vector<int32_t> at;  // 2 * member + started -> number, -1 none yet
  int32_t add(const std::pair<int32_t, bool>& k, int32_t fresh, bool* is_new) {
    const size_t i = 2 * size_t(k.first) + k.second;
    if (at.size() <= i) at.resize(i + 1, -1);
    *is_new = at[i] < 0;
    if (*is_new) at[i] = fresh;
    return at[i];
  }
};
template <class Key, class Numbers = MapNumbers<Key>>
class States {
 public:
  explicit States(const Key& start) { state(start); }
  int32_t state(const Key& k) {
    bool is_new;
    const int32_t number = numbers_.add(k, int32_t(keys_.size()), &is_new);
    if (is_new) keys_.push_back(k);
    return number;
  }
  // `body(key, &out)` writes a state's edges into `out` (one list for all: a list per state was
  // most of an object's allocations).
  template <class Body>
  StateEdges edges(Body body) {
    StateEdges out;
    EdgeList e;
    while (size_t(out.size()) < keys_.size()) {
      e.clear();
      body(Key(keys_[out.size()]), &e);
      for (const auto& x : e)
        if (x.first != IrBuilder::kNothing) out.edges.push_back(x);
      out.begin.push_back(int32_t(out.edges.size()));
    }
    return out;
  }

 private:
  std::vector<Key> keys_;
  Numbers numbers_;
};

// The splits a context's cases have made (body's `done`): (node, kind) markers, sorted.
using Done = std::vector<uint64_t>;
// kDep: a dependent schema split on its key (`extra` numbers the key).
enum SplitKind : uint8_t { kIf = 0, kAnyOf = 1, kOneOf = 2, kNot = 3, kOneOfKey = 4, kDep = 5 };
uint64_t marker(NodeId n, uint8_t kind, uint32_t extra = 0) {
  return uint64_t(uint32_t(n)) << 32 | uint64_t(kind) << 24 | (extra & 0xFFFFFF);
}
NodeId marker_node(uint64_t m) { return NodeId(m >> 32); }
Done with(const Done& done, uint64_t m) {
  Done out(done);
  out.insert(std::lower_bound(out.begin(), out.end(), m), m);
  return out;
}

// A value's memo key is its address: std::hash of a pointer runs libc++'s string hash over its
// bytes, this mixes them once (cloudify's conversion 3% faster).
struct ValueHash {
  size_t operator()(const void* p) const {
    uint64_t x = reinterpret_cast<uintptr_t>(p);
    x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
    return static_cast<size_t>(x ^ (x >> 29));
  }
};

// What a conversion remembers per node, made as each node is first asked about: an entry stays
// where it is while nodes are added.
template <class T>
class NodeMemo {
 public:
  T* find(NodeId id) { return size_t(id) < slots_.size() ? slots_[id].get() : nullptr; }
  T& put(NodeId id, T value) {
    if (slots_.size() <= size_t(id)) slots_.resize(id + 1);
    slots_[id] = std::make_unique<T>(std::move(value));
    return *slots_[id];
  }

 private:
  std::vector<std::unique_ptr<T>> slots_;
};

// One conversion (converter.Converter and its object and array mixins). A second one with the
// prefix "any." builds the rules of any JSON value, the prelude (Converter.any_value).
class Conv : public TextHost, public NumberHost {
 public:
  Conv(IrBuilder& b, Resolver& r, const Options& opt, std::string prefix, std::string* declined)
      : b_(b), r_(r), opt_(opt), prefix_(std::move(prefix)), declined_(declined),
        patterns_(b, opt.unicode_version), strings_(b, *this, patterns_),
        numbers_(b, *this, NumberOptions{!(opt.canonical_integers || opt.integers_without_fraction),
                                         !opt.canonical_integers}) {
    if (opt.any_whitespace) {  // _layout.Layouts: one rule of whitespace that every place calls
      RuleId ws = b_.rule("ws");
      rules_.set(ws, b_.repeat(b_.byte_set({{0x20, 0x20}, {0x09, 0x0A}, {0x0D, 0x0D}}), 0, opt.max_whitespace));
      Expr w = b_.make_ref(ws);
      ws_ = close_ws_ = w;
      first_ = IrBuilder::kEmpty;
      sep_ = b_.seq(w, b_.literal(","), w);
      colon_ = b_.seq(w, b_.literal(":"), w);
    } else {
      Expr space = b_.repeat(b_.literal(" "), 0, 1);
      ws_ = close_ws_ = first_ = IrBuilder::kEmpty;
      sep_ = b_.seq(b_.literal(","), space);
      colon_ = b_.seq(b_.literal(":"), space);
    }
  }

  bool failed() const { return !declined_->empty() || !b_.ok(); }
  IrGrammar& rules() { return rules_; }

  // Converter.grammar: the root's rule, every body it names, then "root".
  bool grammar() {
    Expr root = value({r_.root()}, kAllAtoms);
    build_bodies();
    rules_.set(b_.rule("root"), root);
    rules_.root = b_.rule("root");
    return !failed();
  }

  // Converter.value: the rule of the values valid against all of `nodes` among `atoms`, after
  // the splits in `done`. A context is named by its subschemas, its atoms and the splits of the
  // subschemas still in it (a branch split off under many parents is one context).
  Expr value(const std::vector<NodeId>& nodes, uint8_t atoms, const Done& done = {}) {
    if (failed()) return IrBuilder::kNothing;
    const std::vector<NodeId>* found = expand(nodes);
    if (found == nullptr || atoms == 0) return IrBuilder::kNothing;
    const bool split = !done.empty();
    std::vector<NodeId> spent;
    if (split) spent = unspent(*found, done);
    const std::vector<NodeId>& ex = split ? spent : *found;
    // The context's key, in buffers kept between calls (most calls find a rule made already)
    std::vector<NodeId>& keys = key_nodes_;
    keys.assign(ex.begin(), ex.end());
    std::sort(keys.begin(), keys.end());
    std::string& key = key_text_;
    key.assign(reinterpret_cast<const char*>(keys.data()), keys.size() * sizeof(NodeId));
    key += static_cast<char>(atoms);
    bool splits = false;  // splits of subschemas still in the context
    auto k = keys.begin();  // both in order (a marker's high word is its node): one merge
    for (uint64_t m : done) {
      while (k != keys.end() && *k < marker_node(m)) ++k;
      if (k != keys.end() && *k == marker_node(m)) {
        key.append(reinterpret_cast<const char*>(&m), sizeof m);
        splits = true;
      }
    }
    auto known = names_.find(key);
    if (known != names_.end()) return b_.make_ref(known->second);
    if (keys.empty() && atoms == kAllAtoms && !splits && prefix_.empty()) {
      RuleId name = any_value();
      names_.emplace(key, name);
      return b_.make_ref(name);
    }
    if (split && (atoms & kAtomObject) && object_impossible(ex)) {
      // a case a combinator split off contradicts itself on a required key: no objects here
      atoms &= ~kAtomObject;
      if (atoms == 0) empty_.insert(key);
    }
    if (empty_.count(key)) return IrBuilder::kNothing;
    std::string hint;
    if (!rule_hint(ex.empty() ? std::string("any") : r_.node(ex[0]).pointer, &hint)) return IrBuilder::kNothing;
    RuleId name = fresh(hint);
    names_.emplace(key, name);
    rules_.set(name, IrBuilder::kNothing);  // its place now, its body once built
    bodies_.push_back({name, split ? std::move(spent) : ex, atoms, done});
    return b_.make_ref(name);
  }

  // Converter.unspent: the nodes less those that say nothing the splits in `done` have not
  // carried (an anyOf alone, once split).
  std::vector<NodeId> unspent(const std::vector<NodeId>& nodes, const Done& done) {
    std::vector<NodeId> keep;
    for (NodeId n : nodes) {
      const std::vector<uint8_t>* markers = spent_after(n);
      bool spent = markers != nullptr;
      if (spent)
        for (uint8_t m : *markers) spent = spent && std::binary_search(done.begin(), done.end(), marker(n, m));
      if (!spent) keep.push_back(n);
    }
    if (keep.size() < nodes.size()) {
      for (NodeId n : nodes) {
        const Value* s = r_.node(n).schema;
        if (s->is_object() && (s->find("unevaluatedProperties") || s->find("unevaluatedItems"))) return nodes;
      }
      return keep;
    }
    return nodes;
  }

  // Converter.spent_after: the splits after which `n` constrains nothing more, or nullptr.
  const std::vector<uint8_t>* spent_after(NodeId n) {
    if (const auto* known = spent_.find(n)) return *known ? &**known : nullptr;
    std::vector<std::string_view> said;
    const Value* s = r_.node(n).schema;
    for (const Member& m : s->members())
      if (constraining(m.key, opt_.draft7) && !dropped(m) && m.key != "allOf") said.push_back(m.key);
    // _SPLIT_KEYWORDS: the keywords a split carries whole, by its marker
    auto words_of = [](uint8_t kind, std::string_view k) {
      if (kind == kIf) return in(k, {"if", "then", "else"});
      return k == (kind == kAnyOf ? "anyOf" : kind == kOneOf ? "oneOf" : "not");
    };
    std::vector<uint8_t> markers;
    for (uint8_t kind : {kIf, kAnyOf, kOneOf, kNot}) {
      std::string_view first = kind == kIf ? "if" : kind == kAnyOf ? "anyOf" : kind == kOneOf ? "oneOf" : "not";
      if (std::find(said.begin(), said.end(), first) != said.end()) markers.push_back(kind);
    }
    bool covered_all = !markers.empty();
    for (std::string_view k : said) {
      bool in_some = false;
      for (uint8_t kind : markers) in_some = in_some || words_of(kind, k);
      covered_all = covered_all && in_some;
    }
    const auto& slot = spent_.put(n, covered_all ? std::optional(std::move(markers)) : std::nullopt);
    return slot ? &*slot : nullptr;
  }

  // converter.PRELUDE's expressions: a string's characters and numbers, written first in every grammar.
  std::vector<Expr> prelude_exprs() {
    const NumberTexts& n = numbers_.texts();
    return {strings_.text().json_char, strings_.text().any_string, n.number, n.integer, n.non_integer,
            IrBuilder::kEmpty};
  }

  // The prelude this grammar's words start with (Converter.prelude).
  const IrPrelude* prelude() const { return prelude_; }
  void set_prelude(const IrPrelude* p) { prelude_ = p; }

  // The rules of any JSON value, made by a conversion of `true` with the prefix "any.", as the
  // prelude of this grammar (Converter.any_value).
  RuleId any_value();

 private:
  struct Step {
    bool is_false = false;
    NodeId first = -1;            // draft-07: the $ref target to go on with instead
    std::vector<NodeId> then;     // the subschemas it brings in, in order
    NodeId said = -1;             // the node it adds to the context
  };
  struct Pending {
    RuleId name;
    std::vector<NodeId> nodes;
    uint8_t atoms;
    Done done;
  };

  bool decline(std::string why) {
    if (declined_->empty()) *declined_ = std::move(why);
    return false;
  }

  // A `format` that only annotates (format_assertion false): as if the schema did not have it.
  bool dropped(const Member& m) const { return r_.drops_formats() && m.key == "format" && m.value.is_string(); }

  RuleId fresh(std::string_view hint) override {
    int32_t n = counter_++;
    if (n > kMaxRules) decline("more rules than the limit");
    return b_.rule(prefix_ + std::string(hint) + "_" + std::to_string(n));
  }
  void set_rule(RuleId rule, Expr body) override { rules_.set(rule, body); }

  // "v" and the last 40 characters of the pointer, each not a letter or digit as "_".
  bool rule_hint(const std::string& pointer, std::string* out) {
    size_t start = pointer.size(), n = 0;
    while (start > 0 && n < 40) {
      --start;
      if ((static_cast<unsigned char>(pointer[start]) & 0xC0) != 0x80) ++n;
    }
    *out = "v";
    for (size_t i = start; i < pointer.size(); ++i) {
      unsigned char c = pointer[i];
      if (c >= 0x80) return decline("a rule name from a non-ASCII pointer");
      *out += ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) ? char(c) : '_';
    }
    return true;
  }

  // Converter.shared: one rule per distinct expression used in many places.
  Expr shared(Expr e, const char* hint) {
    if (e == IrBuilder::kNothing || b_.kind(e) == REF || b_.kind(e) == BYTES) return e;
    auto known = shared_.find(e);
    if (known != shared_.end()) return known->second;
    RuleId name = fresh(hint);
    rules_.set(name, e);
    Expr ref = b_.make_ref(name);
    shared_.emplace(e, ref);
    return ref;
  }

  NodeId child(NodeId n, std::string_view key, const Value* value, const std::string& token = "") {
    return child_with(n, key, value, [&] { return token; });
  }
  // The child that is item i of keyword `key`'s value, or its member `member`.
  NodeId child_item(NodeId n, std::string_view key, const Value* value, uint32_t i) {
    return child_with(n, key, value, [&] { return "/" + std::to_string(i); });
  }
  NodeId child_member(NodeId n, std::string_view key, const Value* value, std::string_view member) {
    return child_with(n, key, value, [&] { return "/" + escape_pointer(member); });
  }
  // (a value of n's schema has one place in it: its pointer follows from the pair, and is
  // written only for a new node: `token()` is the part below the keyword)
  template <class Token>
  NodeId child_with(NodeId n, std::string_view key, const Value* value, Token token) {
    auto [it, fresh] = children_.try_emplace({n, value}, -1);
    if (fresh) it->second = r_.child(r_.node(n).pointer + "/" + escape_pointer(key) + token(), value);
    return it->second;
  }

  // A subschema that is not in the document, with its pointer as identity (Converter.synth).
  NodeId synth(const std::string& pointer, const std::string& json) {
    auto known = synthetic_.find(pointer);
    if (known != synthetic_.end()) return known->second;
    docs_.emplace_back();
    if (!parse(json, &docs_.back()).ok()) {
      decline("a synthetic subschema");
      return r_.root();
    }
    NodeId id = r_.child(pointer, &docs_.back().root());
    synthetic_.emplace(pointer, id);
    return id;
  }

  // Converter.type_node: the one subschema of nothing but `"type": types`.
  NodeId type_node(const Value& types) {
    std::string text = dumps(types);
    return synth(r_.node(r_.root()).pointer + "/~type/" + text, "{\"type\": " + text + "}");
  }

  // Converter._step: what expanding meets at a subschema (the same in every context).
  const Step& step(NodeId id) {
    if (const Step* known = steps_.find(id)) return *known;
    Step st;
    const Value* s = r_.node(id).schema;
    if (s->is_bool()) {
      st.is_false = !s->boolean();
      return steps_.put(id, std::move(st));
    }
    if (s->find("$ref") != nullptr) {
      NodeId target;
      if (!r_.follow(id, &target)) decline(r_.declined());
      else if (opt_.draft7) st.first = target;
      else st.then.push_back(target);
      if (st.first >= 0) return steps_.put(id, std::move(st));
    }
    bool type_only = true, any = false;
    for (const Member& m : s->members()) {
      if (!constraining(m.key, opt_.draft7) || dropped(m)) continue;
      if (!covered(m.key, m.value)) decline(std::string(m.key) + " at " + r_.node(id).pointer);
      any = true;
      type_only &= m.key == "type";
    }
    NodeId node = id;
    if (any && type_only) st.said = type_node(*s->find("type"));
    else if (any) st.said = node = r_.canonical(id);
    const Value* all = s->find("allOf");
    if (all != nullptr && all->is_array()) {
      const Value* canon_all = r_.node(node).schema->find("allOf");
      for (uint32_t i = 0; i < all->size(); ++i)
        st.then.push_back(child_item(node, "allOf", &canon_all->items()[i], i));
    }
    return steps_.put(id, std::move(st));
  }

  // Converter.expand: allOf and $ref flattened; nullptr where some subschema is `false`.
  const std::vector<NodeId>* expand(const std::vector<NodeId>& nodes) {
    std::string& key = expand_key_;  // (step, below, expands nothing: the buffer holds till the end)
    key.assign(reinterpret_cast<const char*>(nodes.data()), nodes.size() * sizeof(NodeId));
    auto known = expanded_.find(key);
    if (known != expanded_.end()) return known->second ? &*known->second : nullptr;
    std::vector<NodeId> out;
    std::vector<NodeId>& todo = expand_todo_;  // a queue: todo[head] is its front
    todo.assign(nodes.begin(), nodes.end());
    bool is_false = false;
    ++expand_epoch_;  // a node is seen (kept) in this call when its stamp is the epoch
    auto mark = [this](std::vector<uint32_t>* v, NodeId id) {
      if (v->size() <= size_t(id)) v->resize(id + 1, 0);
      bool was = (*v)[id] == expand_epoch_;
      (*v)[id] = expand_epoch_;
      return was;
    };
    std::vector<uint32_t> *seen = &expand_seen_, *kept = &expand_kept_;
    for (size_t head = 0; head < todo.size() && !failed() && !is_false;) {
      NodeId n = todo[head++];
      // a draft-07 $ref goes on with its target at once (before the rest of the queue)
      for (; !mark(seen, n); n = step(n).first) {
        const Step& st = step(n);
        if (st.is_false) {
          is_false = true;
          break;
        }
        if (st.first >= 0) {
          if (failed()) break;
          continue;
        }
        if (st.said >= 0 && !mark(kept, st.said)) out.push_back(st.said);
        todo.insert(todo.end(), st.then.begin(), st.then.end());
        break;
      }
    }
    auto& slot = expanded_[key];
    if (!is_false) slot = std::move(out);
    return slot ? &*slot : nullptr;
  }

  // Converter.build_bodies: the rules named so far, and those their bodies name, depth first.
  void build_bodies() {
    std::vector<Pending> stack;
    while ((!bodies_.empty() || !stack.empty()) && !failed()) {
      for (auto it = bodies_.rbegin(); it != bodies_.rend(); ++it) stack.push_back(std::move(*it));
      bodies_.clear();
      Pending p = std::move(stack.back());
      stack.pop_back();
      rules_.set(p.name, body(p.nodes, p.atoms, p.done));
    }
  }

  // Converter.body for the covered keywords: the candidates of an enum or const, else the
  // values of each atom the context admits.
  Expr body(const std::vector<NodeId>& nodes, uint8_t atoms, const Done& done) {
    for (NodeId n : nodes) atoms &= type_atoms(r_.node(n).schema) & ~not_by_type(n);
    if (atoms == 0) return IrBuilder::kNothing;
    std::vector<const Value*> cands;
    if (finite_values(nodes, &cands)) {
      std::vector<NodeId> asked;
      std::unordered_set<std::string> excluded;  // a negated enum's values, one subschema each
      for (NodeId n : nodes) {
        const Value* s = r_.node(n).schema;
        if (const Value* x = s->size() == 1 ? s->find(kNotConst) : nullptr) {
          if (const auto& k = canon_of(*x)) excluded.insert(*k);
          continue;
        }
        for (const Member& m : s->members()) {
          if (!value_list_key(m.key)) {
            asked.push_back(n);
            break;
          }
        }
      }
      std::vector<Expr> keep;
      bool integer = !(atoms & kAtomFrac);
      for (const Value* v : cands) {
        if (v->is_string()) {
          if (!(atoms & kAtomString) || excluded.count(*canon_of(*v))) continue;
          bool ok = true;
          for (NodeId n : asked) ok = ok && holds(*v, n);
          if (ok) keep.push_back(string_literal(v->text()));
        } else if (atom_of(*v) & atoms) {
          bool ok = true;
          for (NodeId n : nodes) ok = ok && holds(*v, n);
          if (ok) keep.push_back(const_expr(*v, integer));
        }
      }
      return b_.alt(IrSpan<Expr>(keep));
    }
    // a `not` that is not about types alone: its negation joins the context first
    for (NodeId n : nodes) {
      const Value* nv = r_.node(n).schema->find("not");
      uint64_t m = marker(n, kNot);
      if (nv == nullptr || std::binary_search(done.begin(), done.end(), m)) continue;
      NodeId inner = child(n, "not", nv);
      if (type_only(inner) >= 0) continue;
      std::vector<NodeId> more(nodes);
      more.push_back(negation(inner));
      return value(more, atoms, with(done, m));
    }
    Expr switched;
    if (if_switch(nodes, atoms, done, &switched)) return switched;
    // if / then / else: per atom when the condition is about the type alone, else
    // (if and then) or (not if and else)
    for (NodeId n : nodes) {
      const Value* s = r_.node(n).schema;
      const Value* cond = s->find("if");
      uint64_t m = marker(n, kIf);
      if (cond == nullptr || std::binary_search(done.begin(), done.end(), m) || !(s->find("then") || s->find("else")))
        continue;
      distribute(2);
      Done after = with(done, m);
      NodeId if_node = child(n, "if", cond);
      auto branch = [&](const char* key, std::vector<NodeId> in_case) {
        if (const Value* b = s->find(key)) in_case.push_back(child(n, key, b));
        return in_case;
      };
      int32_t by_type = type_only(if_node);
      if (by_type >= 0) {
        std::vector<Expr> parts;
        if (atoms & by_type) parts.push_back(value(branch("then", nodes), atoms & by_type, after));
        if (atoms & ~by_type) parts.push_back(value(branch("else", nodes), atoms & ~by_type, after));
        return b_.alt(IrSpan<Expr>(parts));
      }
      std::vector<NodeId> yes(nodes), no(nodes);
      yes.push_back(if_node);
      no.push_back(negation(if_node));
      Expr holds_if = value(branch("then", yes), atoms, after);
      return b_.alt(holds_if, value(branch("else", no), atoms, after));
    }
    // anyOf / oneOf: a case per branch (a oneOf where no two branches can both hold)
    for (NodeId n : nodes) {
      const Value* s = r_.node(n).schema;
      for (uint8_t kind : {kAnyOf, kOneOf}) {
        const Value* list = s->find(kind == kAnyOf ? "anyOf" : "oneOf");
        uint64_t m = marker(n, kind);
        if (list == nullptr || std::binary_search(done.begin(), done.end(), m)) continue;
        std::vector<NodeId> branches;
        for (uint32_t i = 0; i < list->size(); ++i)
          branches.push_back(child_item(n, kind == kAnyOf ? "anyOf" : "oneOf", &list->items()[i], i));
        distribute(int32_t(branches.size()));
        uint8_t clear = kind == kAnyOf ? atoms : disjoint_atoms(nodes, branches, atoms);
        if ((atoms & ~clear & kAtomObject) && !std::binary_search(done.begin(), done.end(), marker(n, kOneOfKey))) {
          Expr by_key;
          if (split_on_key(n, nodes, branches, atoms, done, &by_key)) return by_key;
        }
        Done after = with(done, m);
        std::vector<Expr> parts;
        if (clear) {
          for (NodeId b : branches) {
            std::vector<NodeId> case_nodes(nodes);
            case_nodes.push_back(b);
            parts.push_back(value(case_nodes, clear, after));
          }
        }
        if (clear != atoms) {  // exactly one: b_i and not b_j for every other j, where branches may overlap
          std::vector<NodeId> negs;
          for (NodeId b : branches) negs.push_back(negation(b));
          for (size_t i = 0; i < branches.size(); ++i) {
            std::vector<NodeId> case_nodes(nodes);
            case_nodes.push_back(branches[i]);
            for (size_t j = 0; j < negs.size(); ++j)
              if (j != i) case_nodes.push_back(negs[j]);
            parts.push_back(value(case_nodes, atoms & ~clear, after));
          }
        }
        return b_.alt(IrSpan<Expr>(parts));
      }
    }
    // a dependent schema that is more than a type or required keys: the key absent, or present
    // and the dependent schema holding
    if (atoms & kAtomObject) {
      for (NodeId n : nodes) {
        for (const auto& [key, dnode] : dependent_schemas(n)) {
          const uint64_t m = marker(n, kDep, dep_key_id(key));
          if (std::binary_search(done.begin(), done.end(), m) || simple_dependency(dnode, nullptr, nullptr)) continue;
          if (failed()) return kNothing;
          const std::string at = r_.node(n).pointer, escaped = escape_pointer(key);
          const NodeId absent = synth(at + "/~absent/" + escaped, json_object({{"properties", json_object({{key, "false"}})}}));
          const NodeId present = synth(at + "/~present/" + escaped, json_object({{"required", json_list({quoted(key)})}}));
          const Done after = with(done, m);
          std::vector<NodeId> without(nodes), with_key(nodes);
          without.push_back(absent);
          with_key.push_back(present);
          with_key.push_back(dnode);
          const uint8_t rest = atoms & ~kAtomObject;
          Expr others = rest ? value(nodes, rest, after) : kNothing;
          Expr lacking = value(without, kAtomObject, after);
          return b_.alt(others, lacking, value(with_key, kAtomObject, after));
        }
      }
    }
    bool no_null = false, no_true = false, no_false = false;  // excluded by a negated const
    for (NodeId n : nodes) {
      const Value* x = r_.node(n).schema->find(kNotConst);
      if (x == nullptr) continue;
      if ((x->is_array() || x->is_object()) && (atom_of(*x) & atoms))
        return decline("excluding an array or object value"), kNothing;
      no_null |= x->is_null();
      no_true |= x->is_bool() && x->boolean();
      no_false |= x->is_bool() && !x->boolean();
    }
    std::vector<Expr> parts;
    if ((atoms & kAtomNull) && !no_null) parts.push_back(b_.literal("null"));
    if (atoms & kAtomBoolean) {
      if (!no_true) parts.push_back(b_.literal("true"));
      if (!no_false) parts.push_back(b_.literal("false"));
    }
    if (atoms & (kAtomInt | kAtomFrac)) parts.push_back(number(nodes, atoms));
    if (atoms & kAtomString) parts.push_back(string(nodes));
    if (atoms & kAtomArray) parts.push_back(array(nodes));
    if (atoms & kAtomObject) parts.push_back(object(nodes));
    return b_.alt(IrSpan<Expr>(parts));
  }

  // converter._key_test: (key, its values, whether required) where an `if` holds for an object
  // exactly when the key is absent (unless required) or its value is one of a few scalars.
  struct KeyTest {
    std::string key;
    std::vector<const Value*> values;
    bool required = false;
  };
  bool key_test(const Value& cond, KeyTest* out) {
    if (!cond.is_object()) return false;
    for (const Member& m : cond.members())
      if (!is_note(m.key) && m.key != "properties" && m.key != "required") return false;
    const Value* props = cond.find("properties");
    if (props == nullptr || !props->is_object() || props->size() != 1) return false;
    const Member& only = props->members()[0];
    const Value& sub = only.value;
    if (!sub.is_object()) return false;
    bool said = false;
    for (const Member& m : sub.members()) {
      if (is_note(m.key)) continue;
      if (m.key != "const" && m.key != "enum") return false;
      said = true;
    }
    if (!said) return false;
    out->key = std::string(only.key);
    out->values.clear();
    const Value* c = sub.find("const");
    if (c != nullptr) out->values.push_back(c);
    if (const Value* e = sub.find("enum")) {
      if (!e->is_array()) return false;
      std::optional<std::string> first;
      if (c != nullptr) {
        first = canon_of(*c);
        if (!first) return decline("an if's value");
        bool any = false;
        for (const Value& x : e->items()) any = any || canon_of(x) == first;
        if (!any) return false;
      }
      out->values.clear();
      for (const Value& x : e->items())
        if (!first || canon_of(x) == first) out->values.push_back(&x);
    }
    for (const Value* x : out->values) {
      if (x->is_array() || x->is_object()) return false;
      if (!canon_of(*x)) return decline("an if's value");
    }
    const Value* req = cond.find("required");
    out->required = req != nullptr && req->size() > 0;
    if (req != nullptr && (!req->is_array() || req->size() > 1 ||
                           (req->size() == 1 && !(req->items()[0].is_string() && req->items()[0].text() == out->key))))
      return false;
    return true;
  }

  // Converter.if_switch: if/then pairs that test one key's value, split once: a case per value
  // they name, one where the key is absent and one for any other value. False where fewer than
  // two test one key.
  bool if_switch(const std::vector<NodeId>& nodes, uint8_t atoms, const Done& done, Expr* out) {
    struct Test {
      NodeId node;
      KeyTest test;
    };
    std::vector<std::pair<std::string, std::vector<Test>>> groups;  // by key, in first appearance
    for (NodeId n : nodes) {
      const Value* s = r_.node(n).schema;
      const Value* cond = s->find("if");
      if (cond == nullptr || std::binary_search(done.begin(), done.end(), marker(n, kIf)) ||
          !(s->find("then") || s->find("else")))
        continue;
      KeyTest t;
      if (!key_test(*cond, &t)) continue;
      auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == t.key; });
      if (g == groups.end()) g = groups.insert(groups.end(), {t.key, {}});
      g->second.push_back({n, std::move(t)});
    }
    const std::vector<Test>* group = nullptr;
    const std::string* key = nullptr;
    for (const auto& [k, g] : groups)
      if (group == nullptr || g.size() > group->size()) group = &g, key = &k;
    if (group == nullptr || group->size() < 2) return false;
    const NodeId first = (*group)[0].node;
    std::vector<std::string> named_keys;  // canon, in first appearance; the last value of each
    std::vector<const Value*> named;
    std::vector<std::vector<size_t>> names_of(group->size());  // per test: the named values it names
    for (size_t i = 0; i < group->size(); ++i)
      for (const Value* v : (*group)[i].test.values) {
        const std::string& c = *canon_of(*v);
        const size_t j = std::find(named_keys.begin(), named_keys.end(), c) - named_keys.begin();
        if (j == named_keys.size()) named_keys.push_back(c), named.push_back(v);
        else named[j] = v;
        names_of[i].push_back(j);
      }
    Done after = done;
    for (const Test& t : *group) after = with(after, marker(t.node, kIf));
    // Each test's then and else nodes, made as first asked (a case per value asks every test)
    std::vector<NodeId> branch_nodes(2 * group->size(), -2);  // -2: not asked yet, -1: no such keyword
    auto outcome = [&](const std::function<bool(size_t, bool)>& holds_if, std::vector<NodeId> in_case) {
      for (size_t i = 0; i < group->size(); ++i) {
        const Test& t = (*group)[i];
        const bool yes = holds_if(i, t.test.required);
        NodeId& b = branch_nodes[2 * i + !yes];
        if (b == -2) {
          const char* key = yes ? "then" : "else";
          const Value* v = r_.node(t.node).schema->find(key);
          b = v != nullptr ? child(t.node, key, v) : -1;
        }
        if (b >= 0) in_case.push_back(b);
      }
      return in_case;
    };
    const std::string k = escape_pointer(*key), at = r_.node(first).pointer + "/~switch/" + k;
    std::vector<std::pair<std::vector<NodeId>, uint8_t>> cases;
    if (atoms & ~kAtomObject) cases.push_back({outcome([](size_t, bool) { return true; }, nodes), atoms & ~kAtomObject});
    if (atoms & kAtomObject) {
      std::vector<NodeId> base(nodes);
      base.push_back(synth(at + "/absent", json_object({{"properties", json_object({{*key, "false"}})}})));
      cases.push_back({outcome([](size_t, bool required) { return !required; }, base), kAtomObject});
      std::vector<std::string> texts;
      for (size_t j = 0; j < named.size(); ++j) {
        texts.push_back(dumps(*named[j]));
        std::vector<NodeId> is_v(nodes);
        is_v.push_back(synth(at + "/is/" + escape_pointer(texts.back()),
                             json_object({{"required", json_list({quoted(*key)})},
                                          {"properties", json_object({{*key, json_object({{"const", texts.back()}})}})}})));
        auto named_by = [&](size_t i, bool) {
          return std::find(names_of[i].begin(), names_of[i].end(), j) != names_of[i].end();
        };
        cases.push_back({outcome(named_by, is_v), kAtomObject});
      }
      const std::string all = json_list(texts);
      std::vector<NodeId> other(nodes);
      other.push_back(synth(at + "/other/" + escape_pointer(all),
                            json_object({{"required", json_list({quoted(*key)})},
                                         {"properties", json_object({{*key, json_object({{"not", json_object({{"enum", all}})}})}})}})));
      cases.push_back({outcome([](size_t, bool) { return false; }, other), kAtomObject});
    }
    distribute(int32_t(cases.size()));
    std::vector<Expr> parts;
    for (const auto& [c, a] : cases) parts.push_back(value(c, a, after));
    *out = b_.alt(IrSpan<Expr>(parts));
    return true;
  }

  // Converter.split_on_key: a oneOf whose object branches differ in one key's value where the
  // key is there (a discriminator the schema does not require): the objects with the key, where
  // the oneOf is an anyOf, and those without it. False where no key tells the branches apart.
  bool split_on_key(NodeId n, const std::vector<NodeId>& nodes, const std::vector<NodeId>& branches, uint8_t atoms,
                    const Done& done, Expr* out) {
    std::vector<std::string> names;  // the keys every branch names, in the first one's order
    for (size_t i = 0; i < branches.size(); ++i) {
      std::vector<std::string> here;
      if (const std::vector<NodeId>* ex = expand({branches[i]})) {
        const std::vector<NodeId> list(*ex);
        for (NodeId x : list) {
          const Value* props = r_.node(x).schema->find("properties");
          if (props == nullptr || !props->is_object()) continue;
          for (const Member& m : props->members()) add_new(&here, m.key);
        }
      }
      if (i == 0) {
        names = std::move(here);
      } else {
        std::vector<std::string> kept;
        for (std::string& k : names)
          if (std::find(here.begin(), here.end(), k) != here.end()) kept.push_back(std::move(k));
        names = std::move(kept);
      }
    }
    const std::string& at = r_.node(n).pointer;
    for (size_t t = 0; t < names.size() && t < 8; ++t) {  // MAX_KEY_TRIES
      const std::string& k = names[t];
      NodeId present = synth(at + "/~oneOf/has/" + escape_pointer(k), json_object({{"required", json_list({quoted(k)})}}));
      std::vector<NodeId> with_present(nodes);
      with_present.push_back(present);
      if (!(disjoint_atoms(with_present, branches, kAtomObject) & kAtomObject)) continue;
      NodeId absent = synth(at + "/~oneOf/lacks/" + escape_pointer(k), json_object({{"properties", json_object({{k, "false"}})}}));
      distribute(2);
      Done after = with(done, marker(n, kOneOfKey));
      const uint8_t rest = atoms & ~kAtomObject;
      std::vector<NodeId> with_absent(nodes);
      with_absent.push_back(absent);
      Expr others = rest ? value(nodes, rest, after) : kNothing;
      Expr has = value(with_present, kAtomObject, after);
      *out = b_.alt(others, has, value(with_absent, kAtomObject, after));
      return true;
    }
    return false;
  }

  // Converter.distribute: the cases combinators split contexts into, bounded (MAX_CONTEXTS).
  void distribute(int32_t ways) {
    contexts_ += ways;
    if (contexts_ > 800) decline("combinations beyond the limit of cases");
  }

  // TypeAnalysis.static_atoms: an over-approximation of the atoms a context admits.
  uint8_t static_atoms(const std::vector<NodeId>& nodes, int32_t depth = 0) {
    const std::vector<NodeId>* ex = expand(nodes);
    if (ex == nullptr) return 0;
    uint8_t atoms = kAllAtoms;
    const std::vector<NodeId> list(*ex);  // (expand's table may grow below)
    for (NodeId n : list) {
      const Value* s = r_.node(n).schema;
      atoms &= type_atoms(s);
      for (const char* key : {"const", "enum"}) {
        const Value* v = s->find(key);
        if (v == nullptr) continue;
        uint8_t of = 0;
        if (std::string_view(key) == "const") of = atom_of(*v);
        else for (const Value& x : v->items()) of |= atom_of(x);
        atoms &= of;
      }
      atoms &= ~not_by_type(n);
      if (depth < 8) {
        for (const char* comb : {"anyOf", "oneOf"}) {
          const Value* bs = s->find(comb);
          if (bs == nullptr || !bs->is_array()) continue;
          uint8_t any = 0;
          for (uint32_t i = 0; i < bs->size(); ++i)
            any |= static_atoms({child_item(n, comb, &bs->items()[i], i)}, depth + 1);
          atoms &= any;
        }
      }
    }
    return atoms;
  }

  // TypeAnalysis.disjoint_atoms: the atoms on which no value satisfies two of the branches (by
  // type, or by distinct finite values); objects told apart by their keys decline for now.
  uint8_t disjoint_atoms(const std::vector<NodeId>& nodes, const std::vector<NodeId>& branches, uint8_t atoms) {
    std::vector<uint8_t> branch_atoms;
    for (NodeId b : branches) {
      std::vector<NodeId> with_b(nodes);
      with_b.push_back(b);
      branch_atoms.push_back(static_atoms(with_b) & atoms);
    }
    std::vector<std::optional<Shape>> shapes(branches.size());
    auto shape = [&](size_t k) -> const Shape& {
      if (!shapes[k]) {
        std::vector<NodeId> with_b(nodes);
        with_b.push_back(branches[k]);
        shapes[k] = object_shape(with_b);
      }
      return *shapes[k];
    };
    std::vector<std::optional<std::vector<std::string>>> finite(branches.size());
    std::vector<char> asked(branches.size(), 0);
    auto fin = [&](size_t k) -> const std::optional<std::vector<std::string>>& {
      if (!asked[k]) {
        asked[k] = 1;
        std::vector<const Value*> values;
        if (finite_values({branches[k]}, &values)) {
          std::vector<std::string> keys;
          for (const Value* v : values) keys.push_back(canon_of(*v).value_or(""));
          std::sort(keys.begin(), keys.end());
          finite[k] = std::move(keys);
        }
      }
      return finite[k];
    };
    uint8_t clear = atoms;
    for (size_t i = 0; i < branches.size(); ++i) {
      for (size_t j = i + 1; j < branches.size(); ++j) {
        uint8_t shared = branch_atoms[i] & branch_atoms[j] & clear;
        if (!shared) continue;
        if (fin(i) && fin(j)) {
          std::vector<std::string> both;
          std::set_intersection(fin(i)->begin(), fin(i)->end(), fin(j)->begin(), fin(j)->end(),
                                std::back_inserter(both));
          if (both.empty()) continue;
          clear &= ~shared;
        } else if ((shared & kAtomObject) && objects_disjoint(shape(i), shape(j))) {
          clear &= ~(shared & ~kAtomObject);
        } else {
          clear &= ~shared;
        }
      }
    }
    return clear;
  }

  // TypeAnalysis.object_shape: (the keys a context requires, its expanded nodes).
  struct Shape {
    std::vector<std::string> required;
    std::vector<NodeId> expanded;
  };
  Shape object_shape(const std::vector<NodeId>& nodes) {
    Shape out;
    if (const std::vector<NodeId>* ex = expand(nodes)) out.expanded = *ex;
    for (NodeId n : out.expanded)
      if (const Value* req = r_.node(n).schema->find("required"))
        for (const Value& k : req->items())
          if (k.is_string() && std::find(out.required.begin(), out.required.end(), k.text()) == out.required.end())
            out.required.emplace_back(k.text());
    return out;
  }

  // TypeAnalysis.objects_disjoint: a key one shape requires has no value both admit.
  bool objects_disjoint(const Shape& a, const Shape& b) {
    std::vector<std::string> keys(a.required);
    for (const std::string& k : b.required) add_new(&keys, k);
    for (const std::string& k : keys) {
      std::vector<NodeId> ea, eb;
      for (NodeId n : a.expanded) member_nodes(n, k, &ea);
      for (NodeId n : b.expanded) member_nodes(n, k, &eb);
      std::vector<NodeId> both(ea);
      both.insert(both.end(), eb.begin(), eb.end());
      if (no_value(both) || (!ea.empty() && !eb.empty() && patterns_disjoint(ea, eb))) return true;
    }
    return false;
  }

  // TypeAnalysis.patterns_disjoint, up to the product of the two sides' `pattern` automata,
  // which is not ported: where it would be built, the port declines.
  bool patterns_disjoint(const std::vector<NodeId>& a, const std::vector<NodeId>& b) {
    for (const std::vector<NodeId>* side : {&a, &b}) {
      const std::vector<NodeId>* ex = expand(*side);
      if (ex == nullptr) return true;
      const std::vector<NodeId> list(*ex);
      bool patterns = false;
      for (NodeId n : list) {
        const Value* p = r_.node(n).schema->find("pattern");
        patterns = patterns || (p != nullptr && p->is_string());
      }
      if (!patterns || (static_atoms(list) & ~kAtomString)) return false;
    }
    decline("oneOf branches told apart by their patterns");
    return false;
  }

  // TypeAnalysis.object_impossible: a key the context requires has no value all its entries admit.
  bool object_impossible(const std::vector<NodeId>& expanded) {
    std::vector<std::string> required;
    for (NodeId n : expanded) {
      const Value* req = r_.node(n).schema->find("required");
      if (req == nullptr) continue;
      for (const Value& k : req->items())
        if (k.is_string() && std::find(required.begin(), required.end(), k.text()) == required.end())
          required.emplace_back(k.text());
    }
    for (const std::string& k : required) {
      std::vector<NodeId> entries;
      for (NodeId n : expanded) {
        const Value* props = r_.node(n).schema->find("properties");
        const Value* v = props != nullptr && props->is_object() ? props->find(k) : nullptr;
        if (v != nullptr) entries.push_back(child_member(n, "properties", v, k));
      }
      if (!entries.empty() && no_value(entries)) return true;
    }
    return false;
  }

  // TypeAnalysis.no_value: no value satisfies every node, seen cheaply (True is certain).
  bool no_value(const std::vector<NodeId>& nodes) {
    const std::vector<NodeId>* ex = expand(nodes);
    if (ex == nullptr) return true;
    const std::vector<NodeId> list(*ex);
    if (static_atoms(list) == 0) return true;
    std::vector<const Value*> cands;
    if (!finite_values(list, &cands)) return false;
    std::unordered_set<std::string> excluded;
    for (NodeId n : list) {
      if (const Value* x = r_.node(n).schema->find(kNotConst))
        if (const auto& k = canon_of(*x)) excluded.insert(*k);
      names_excluded(n, &excluded);
    }
    for (const Value* c : cands)
      if (!excluded.count(*canon_of(*c))) return false;
    return true;
  }

  // TypeAnalysis.names_excluded: the strings n's `not` refuses by name (`not: {enum: [...]}`,
  // perhaps with `type: string`), by canon.
  void names_excluded(NodeId n, std::unordered_set<std::string>* out) {
    const Value* inner = r_.node(n).schema->find("not");
    if (inner == nullptr || !inner->is_object() || !(inner->find("enum") || inner->find("const"))) return;
    for (const Member& m : inner->members())
      if (!in(m.key, {"enum", "const", "type"}) && !is_annotation(m.key)) return;
    if (!(type_atoms(inner) & kAtomString)) return;
    std::vector<const Value*> values;
    if (!finite_values({child(n, "not", inner)}, &values)) return;
    for (const Value* v : values)
      if (v->is_string()) out->insert(*canon_of(*v));
  }

  // The atoms n's `not` refuses when it is about types alone (else none).
  uint8_t not_by_type(NodeId n) {
    const Value* s = r_.node(n).schema;
    const Value* nv = s->is_object() ? s->find("not") : nullptr;
    const int32_t inner = nv != nullptr ? type_only(child(n, "not", nv)) : -1;
    return inner >= 0 ? uint8_t(inner) : 0;
  }

  // TypeAnalysis.type_only: the atoms a schema admits when it constrains nothing but the type;
  // else -1. Remembered by (node, depth).
  int32_t type_only(NodeId node, int32_t depth = 0) {
    const uint64_t key = uint64_t(uint32_t(node)) << 8 | uint32_t(depth);
    auto known = type_only_.find(key);
    if (known != type_only_.end()) return known->second;
    const int32_t atoms = type_only_uncached(node, depth);
    type_only_[key] = atoms;
    return atoms;
  }

  int32_t type_only_uncached(NodeId node, int32_t depth) {
    if (depth > 20) return -1;
    const std::vector<NodeId>* ex = expand({node});
    if (ex == nullptr) return 0;
    uint8_t atoms = kAllAtoms;
    const std::vector<NodeId> list(*ex);
    for (NodeId n : list) {
      const Value* s = r_.node(n).schema;
      if (!s->is_object()) continue;
      for (const Member& m : s->members()) {
        if (is_annotation(m.key) || dropped(m) ||
            in(m.key, {"type", "allOf", "$ref", "$dynamicRef", "not", "anyOf", "oneOf"}))
          continue;
        if (in(m.key, {"then", "else"}) && s->find("if") == nullptr) continue;
        if (constraining(m.key, false)) return -1;
      }
      atoms &= type_atoms(s);
      if (const Value* nv = s->find("not")) {
        int32_t inner = type_only(child(n, "not", nv), depth + 1);
        if (inner < 0) return -1;
        atoms &= uint8_t(~inner);
      }
      for (const char* comb : {"anyOf", "oneOf"}) {
        const Value* bs = s->find(comb);
        if (bs == nullptr) continue;
        if (!bs->is_array()) return decline(std::string(comb) + " that is not an array"), -1;
        std::vector<int32_t> sets;
        for (uint32_t i = 0; i < bs->size(); ++i) {
          sets.push_back(type_only(child_item(n, comb, &bs->items()[i], i), depth + 1));
          if (sets.back() < 0) return -1;
        }
        uint8_t keep = 0;
        for (uint8_t a = 1; a <= kAllAtoms; a <<= 1) {
          int32_t count = 0;
          for (int32_t x : sets) count += (x & a) != 0;
          if (std::string_view(comb) == "anyOf" ? count >= 1 : count == 1) keep |= a;
        }
        atoms &= keep;
      }
    }
    return atoms;
  }

  static uint8_t atom_of(const Value& v) {
    switch (v.kind()) {
      case Kind::null: return kAtomNull;
      case Kind::boolean: return kAtomBoolean;
      case Kind::integer: return kAtomInt;
      case Kind::string: return kAtomString;
      case Kind::array: return kAtomArray;
      case Kind::object: return kAtomObject;
      default: return std::isfinite(v.number()) && std::floor(v.number()) == v.number() ? kAtomInt : kAtomFrac;
    }
  }

  // TypeAnalysis.finite_values: false where the context has no enum or const; else the
  // candidates of the first, kept where every later one has them, without repeats.
  bool finite_values(const std::vector<NodeId>& nodes, std::vector<const Value*>* out) {
    const std::vector<NodeId>* ex = expand(nodes);
    if (ex == nullptr) return true;
    bool any = false;
    for (NodeId n : *ex) {
      const Value* s = r_.node(n).schema;
      if (!s->is_object()) continue;
      for (const char* key : {"const", "enum"}) {
        const Value* v = s->find(key);
        if (v == nullptr) continue;
        std::vector<const Value*> values;
        if (std::string_view(key) == "const") values.push_back(v);
        else for (const Value& x : v->items()) values.push_back(&x);
        std::vector<std::string> keys;
        for (const Value* x : values) {
          const auto& k = canon_of(*x);
          if (!k) {
            decline("an enum or const that is not a string, null, boolean or integer");
            return true;
          }
          keys.push_back(*k);
        }
        if (!any) {
          std::unordered_map<std::string, size_t> first;
          for (size_t i = 0; i < values.size(); ++i)
            if (first.emplace(keys[i], i).second) out->push_back(values[i]);
          any = true;
        } else {
          std::unordered_map<std::string, char> have;
          for (auto& k : keys) have.emplace(k, 1);
          std::vector<const Value*> still;
          for (const Value* c : *out)
            if (have.count(*canon_of(*c))) still.push_back(c);
          *out = std::move(still);
        }
      }
    }
    return any;
  }

  // Validator.valid for a scalar candidate and the covered keywords (what is not a scalar's,
  // such as `properties`, holds for every scalar).
  bool holds(const Value& v, NodeId id, int32_t depth = 0) {
    if (depth > 0) return validate(v, id, depth);
    // remembered, as the Python's Validator.holds: a switch asks about the same candidates
    // against the same nodes in every case it splits off
    auto [it, fresh] = held_.try_emplace({id, &v}, false);
    if (fresh) it->second = validate(v, id, 0);
    return it->second;
  }
  // What validate reads of a subschema, looked up once per node: a switch validates every
  // candidate against the same subschemas (cloudify: 128 candidates against 125 negated
  // values each, a tenth of its conversion in keyword look-ups and child look-ups).
  struct Said {
    const Value *ref = nullptr, *cnst = nullptr, *enm = nullptr, *not_const = nullptr, *not_pattern = nullptr,
                *not_format = nullptr, *not_multiple = nullptr, *multiple = nullptr, *pattern = nullptr,
                *format = nullptr, *all = nullptr, *lists[2] = {nullptr, nullptr}, *not_ = nullptr, *cond = nullptr;
    const Value* bounds[4] = {nullptr, nullptr, nullptr, nullptr};  // kBoundKeys'
    uint8_t types = kAllAtoms;
    bool lengths = false;              // minLength or maxLength
    bool listed_with_both[2] = {false, false};  // anyOf, oneOf: Validator._listed_values with enum and const
    const Member* uncovered = nullptr;  // the first keyword validation does not cover
    // canon_of the const's and the negated const's values, once asked (canon_of remembers one
    // value at a time, the candidate's)
    const std::optional<std::string>* canons[2] = {nullptr, nullptr};
    std::vector<NodeId> kids[3];        // allOf, anyOf, oneOf items' nodes, made as first asked (-1: not yet)
  };
  static constexpr const char* kBoundKeys[4] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

  const Said& said(NodeId id) {
    if (const Said* known = said_.find(id)) return *known;
    Said& d = said_.put(id, Said{});
    const Value* s = r_.node(id).schema;
    d.ref = s->find("$ref");
    d.types = type_atoms(s);
    d.cnst = s->find("const");
    d.enm = s->find("enum");
    d.not_const = s->find(kNotConst);
    d.not_pattern = s->find(kNotPattern);
    d.not_format = s->find(kNotFormat);
    d.not_multiple = s->find(kNotMultiple);
    for (int k = 0; k < 4; ++k) d.bounds[k] = s->find(kBoundKeys[k]);
    d.multiple = s->find("multipleOf");
    d.lengths = s->find("minLength") != nullptr || s->find("maxLength") != nullptr;
    d.pattern = s->find("pattern");
    d.format = s->find("format");
    d.all = s->find("allOf");
    const char* combs[2] = {"anyOf", "oneOf"};
    for (int c = 0; c < 2; ++c) {
      const Value* list = d.lists[c] = s->find(combs[c]);
      if (list == nullptr) continue;
      bool listed = true, both = false;  // Validator._listed_values: every branch a list of values
      for (const Value& b : list->items()) {
        bool values = b.is_object() && (b.find("enum") || b.find("const"));
        for (const Member& m : b.members()) values = values && value_list_key(m.key);
        listed = listed && values;
        both = both || (values && b.find("enum") && b.find("const"));
      }
      d.listed_with_both[c] = listed && both;
    }
    d.not_ = s->find("not");
    d.cond = s->find("if");
    for (const Member& m : s->members())
      if (constraining(m.key, opt_.draft7) && !dropped(m) && !covered(m.key, m.value)) {
        d.uncovered = &m;
        break;
      }
    for (int k = 0; k < 3; ++k) {
      const Value* list = k == 0 ? d.all : d.lists[k - 1];
      if (list != nullptr) d.kids[k].assign(list->size(), -1);
    }
    return d;
  }
  const std::optional<std::string>& said_canon(NodeId id, int k, const Value& x) {
    const std::optional<std::string>*& slot = said_.find(id)->canons[k];
    if (slot == nullptr) slot = &canon_of(x);
    return *slot;
  }
  // Item i of the node's allOf (k 0), anyOf (1) or oneOf (2), through child_item as first asked.
  NodeId said_kid(NodeId id, int k, const Value* list, uint32_t i) {
    NodeId& slot = said_.find(id)->kids[k][i];
    if (slot < 0) slot = child_item(id, k == 0 ? "allOf" : k == 1 ? "anyOf" : "oneOf", &list->items()[i], i);
    return slot;
  }

  bool validate(const Value& v, NodeId id, int32_t depth) {
    const Value* s = r_.node(id).schema;
    if (s->is_bool()) return s->boolean();
    if (depth > kValidatorDepth) {
      decline("a reference chain too deep to evaluate");
      return false;
    }
    const Said& d = said(id);
    if (d.ref != nullptr) {
      NodeId target;
      if (!r_.follow(id, &target)) return decline(r_.declined());
      if (!holds(v, target, depth + 1)) return false;
      if (opt_.draft7) return true;
    }
    if (d.types != kAllAtoms && !(d.types & atom_of(v))) return false;
    const std::string* vkey = nullptr;  // asked only where compared
    const auto key = [&]() -> const std::string& {
      if (vkey == nullptr) vkey = &*canon_of(v);
      return *vkey;
    };
    if (const Value* c = d.cnst) {
      const std::optional<std::string>& ck = said_canon(id, 0, *c);
      if (!ck) return decline("a const that is not a scalar");
      if (*ck != key()) return false;
    }
    if (const Value* e = d.enm) {
      const std::optional<std::unordered_set<std::string>>& keys = enum_keys(*e);
      if (!keys) return decline("an enum that is not of strings, null, booleans and integers");
      if (!keys->count(key())) return false;
    }
    if (const Value* x = d.not_const) {  // json_equal: scalars by canon, no scalar equals a container
      if (x->is_array() || x->is_object()) {
      } else if (const std::optional<std::string>& xk = said_canon(id, 1, *x)) {
        if (*xk == key()) return false;
      } else {
        return decline("a negated const");
      }
    }
    if (v.is_string()) {
      if (const Value* p = d.not_pattern) {
        int found = search(*p, v.text());
        if (found != 0) return false;  // found, or declined
      }
      if (d.not_format != nullptr) return decline("validation of a negated format");
    }
    if (d.not_multiple != nullptr && (v.is_integer() || v.is_number()))
      return decline("validation of a negated multipleOf");
    if (v.is_integer() || v.is_number()) {  // bounds compared exactly, as Decimals
      Decimal dv;
      if (!to_decimal(v, &dv)) return decline("a candidate number");
      for (int k = 0; k < 4; ++k) {
        const Value* b = d.bounds[k];
        if (b == nullptr) continue;
        Decimal bound;
        if (b->is_bool() || !to_decimal(*b, &bound)) return decline("a bound");
        int c = compare(dv, bound);
        if ((k == 0 && c < 0) || (k == 1 && c > 0) || (k == 2 && c <= 0) || (k == 3 && c >= 0)) return false;
      }
      if (d.multiple != nullptr) return decline("multipleOf of a candidate");
    }
    if (v.is_string()) {  // lengths in code points (Python's len)
      if (d.lengths) {
        int64_t n = 0, lo = 0, hi = -1;
        for (unsigned char c : v.text()) n += (c & 0xC0) != 0x80;
        if (!count_bounds(id, "minLength", "maxLength", &lo, &hi)) return false;
        if (n < lo || (hi >= 0 && n > hi)) return false;
      }
      if (const Value* p = d.pattern; p != nullptr && search(*p, v.text()) != 1) return false;
      if (d.format != nullptr && !(r_.drops_formats() && d.format->is_string())) return decline("validation of format");
    }
    if (const Value* all = d.all) {
      for (uint32_t i = 0; i < all->size(); ++i)
        if (!holds(v, said_kid(id, 0, all, i), depth + 1)) return false;
    }
    for (int c = 0; c < 2; ++c) {
      const Value* list = d.lists[c];
      if (list == nullptr) continue;
      if (d.listed_with_both[c]) return decline("a listed branch with enum and const");  // (the Python reads its enum alone)
      int32_t held = 0;
      for (uint32_t i = 0; i < list->size(); ++i) held += holds(v, said_kid(id, c + 1, list, i), depth + 1);
      if (failed()) return false;
      if (c == 0 ? held < 1 : held != 1) return false;
    }
    if (const Value* nv = d.not_) {
      bool inner = holds(v, child(id, "not", nv), depth + 1);
      if (failed()) return false;
      if (inner) return false;
    }
    if (const Value* cond = d.cond) {
      bool yes = holds(v, child(id, "if", cond), depth + 1);
      const char* key = yes ? "then" : "else";
      if (failed()) return false;
      if (const Value* b = s->find(key); b != nullptr && !holds(v, child(id, key, b), depth + 1)) return false;
    }
    if (d.uncovered != nullptr) return decline("validation of " + std::string(d.uncovered->key));
    return true;
  }

  // canon, remembered per value: a switch compares the same candidates in every case it splits
  // off, and validation the same values against many subschemas (a quarter of a large schema's
  // conversion allocations were these keys, made again each time).
  const std::optional<std::string>& canon_of(const Value& v) {
    if (&v == last_canon_value_) return *last_canon_;  // (validation asks of one value against many nodes)
    auto [it, fresh] = canon_.try_emplace(&v);
    if (fresh) it->second = canon(v);
    last_canon_value_ = &v;
    last_canon_ = &it->second;
    return it->second;
  }

  // The canon keys of an enum's values, none where one has no key (a float could equal an
  // integer: not covered). Memoized: a switch tests every candidate against the same enums.
  const std::optional<std::unordered_set<std::string>>& enum_keys(const Value& e) {
    auto [it, fresh] = enum_keys_.try_emplace(&e);
    if (fresh) {
      std::unordered_set<std::string> keys;
      bool all = true;
      for (const Value& x : e.items()) {
        auto k = canon(x);
        all = all && k.has_value();
        if (k) keys.insert(std::move(*k));
      }
      if (all) it->second = std::move(keys);
    }
    return it->second;
  }

  // ---- negation (_negate.py's Negator) ---------------------------------------------------
  // The negation of a subschema, written as the JSON text of a new subschema placed at the
  // negated one's base, exactly as the Python's dict: keyword by keyword, each negated to what
  // constrains only the values it applies to, joined by anyOf. Keywords whose negation needs
  // "some property" (patternProperties, additionalProperties), contains or if decline.

  // Converter.negation: the synthetic subschema that holds exactly where `node` does not.
  NodeId negation(NodeId node) {
    const std::string pointer = r_.node(node).pointer + "/~not";
    auto known = synthetic_.find(pointer);
    if (known != synthetic_.end()) return known->second;
    std::string text;
    if (!neg(node, 0, &text)) text = "false";  // (declined: the conversion fails)
    return synth(pointer, text);
  }

  static std::string json_object(std::initializer_list<std::pair<std::string_view, std::string>> members) {
    std::string out = "{";
    for (const auto& [k, v] : members) {
      if (out.size() > 1) out += ", ";
      dump_string(k, &out);
      out += ": " + v;
    }
    return out + "}";
  }
  static std::string json_list(const std::vector<std::string>& items) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
    return out + "]";
  }
  // A negation's alternatives: the one, or anyOf them.
  static std::string any_of(const std::vector<std::string>& alts) {
    return alts.size() == 1 ? alts[0] : json_object({{"anyOf", json_list(alts)}});
  }
  static std::string quoted(std::string_view s) {
    std::string out;
    dump_string(s, &out);
    return out;
  }

  // Negator.neg: false where it declines (why in declined_).
  bool neg(NodeId node, int32_t depth, std::string* out) {
    const Value* s = r_.node(node).schema;
    if (s->is_bool()) return *out = s->boolean() ? "false" : "true", true;
    if (depth > 12) return decline("not: negation nested too deeply");
    if (opt_.draft7 && s->find("$ref") != nullptr) {
      NodeId target;
      if (!r_.follow(node, &target)) return decline(r_.declined());
      return neg(target, depth + 1, out);
    }
    std::vector<std::string> parts;
    for (const Member& m : s->members()) {
      if (is_annotation(m.key) || dropped(m) || !(constraining(m.key, false) || m.key == "$ref" || m.key == "$dynamicRef"))
        continue;
      std::string part;
      bool none = false;
      if (!negate_keyword(node, m, depth, &part, &none)) return false;
      if (!none) parts.push_back(std::move(part));
    }
    *out = parts.empty() ? "false" : any_of(parts);
    return true;
  }

  // Negator.keyword: one keyword's negation (`*none`: it says nothing alone).
  bool negate_keyword(NodeId node, const Member& m, int32_t depth, std::string* out, bool* none) {
    const Value* s = r_.node(node).schema;
    const std::string_view k = m.key;
    const Value& v = m.value;
    auto sub = [&](std::string_view key, const Value* value, const std::string& token = "") {
      return child(node, key, value, token);
    };
    auto count = [&](const char* type, const char* other, int64_t delta) {  // min*/max* bounds
      if (!v.is_integer() || !v.fits_int64() || v.int64() == INT64_MAX) return decline("a count's negation");
      if (delta < 0 && v.int64() <= 0) return *out = "false", true;
      *out = json_object({{"type", quoted(type)}, {other, std::to_string(v.int64() + delta)}});
      return true;
    };
    if (k == "$ref") {
      NodeId target;
      if (!r_.follow(node, &target)) return decline(r_.declined());
      return neg(target, depth + 1, out);
    }
    if (k == "type") {
      std::vector<std::string_view> types;
      if (v.is_string()) types.push_back(v.text());
      else if (v.is_array()) for (const Value& t : v.items()) types.push_back(t.is_string() ? t.text() : "");
      else return decline("a type's negation");
      auto has = [&](std::string_view t) { return std::find(types.begin(), types.end(), t) != types.end(); };
      const bool number = has("number"), integer = has("integer") || number;
      std::vector<std::string> rest;
      for (std::string_view t : {"null", "boolean", "number", "string", "array", "object"})
        if (!has(t) && !(t == "number" && integer)) rest.push_back(quoted(t));
      if (integer && !number)  // non-integer numbers: numbers that are not integers
        return *out = json_object({{"anyOf", json_list({json_object({{"type", json_list(rest)}}),
                                                        R"({"type": "number", "not": {"type": "integer"}})"})}}),
               true;
      *out = rest.empty() ? "false" : json_object({{"type", json_list(rest)}});
      return true;
    }
    if (k == "const") return *out = json_object({{kNotConst, dumps(v)}}), true;
    if (k == "enum") {
      if (!v.is_array()) return decline("enum that is not an array");
      if (v.size() == 0) return *out = "true", true;
      std::vector<std::string> alts;
      for (const Value& x : v.items()) alts.push_back(json_object({{kNotConst, dumps(x)}}));
      return *out = json_object({{"allOf", json_list(alts)}}), true;
    }
    if (in(k, {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) {
      std::string_view flip = k == "minimum" ? "exclusiveMaximum" : k == "maximum" ? "exclusiveMinimum"
                              : k == "exclusiveMinimum" ? "maximum" : "minimum";
      return *out = json_object({{"type", "\"number\""}, {flip, dumps(v)}}), true;
    }
    if (k == "multipleOf") return *out = json_object({{"type", "\"number\""}, {kNotMultiple, dumps(v)}}), true;
    if (k == "minLength") return count("string", "maxLength", -1);
    if (k == "maxLength") return count("string", "minLength", 1);
    if (k == "minItems") return count("array", "maxItems", -1);
    if (k == "maxItems") return count("array", "minItems", 1);
    if (k == "minProperties") return count("object", "maxProperties", -1);
    if (k == "maxProperties") return count("object", "minProperties", 1);
    if (k == "pattern") return *out = json_object({{"type", "\"string\""}, {kNotPattern, dumps(v)}}), true;
    if (k == "format") {
      const int enforced = enforced_format(v);
      if (enforced < 0) return false;
      if (!enforced) return *none = true, true;
      return *out = json_object({{"type", "\"string\""}, {kNotFormat, dumps(v)}}), true;
    }
    if (k == kNotConst) return *out = json_object({{"const", dumps(v)}}), true;
    if (k == kNotPattern) return *out = json_object({{"type", "\"string\""}, {"pattern", dumps(v)}}), true;
    if (k == kNotFormat) return *out = json_object({{"type", "\"string\""}, {"format", dumps(v)}}), true;
    if (k == kNotMultiple) return *out = json_object({{"type", "\"number\""}, {"multipleOf", dumps(v)}}), true;
    if (k == "required") {
      if (!v.is_array()) return decline("required that is not an array");
      if (v.size() == 0) return *none = true, true;
      std::vector<std::string> alts;
      for (const Value& x : v.items()) {
        if (!x.is_string()) return decline("a required key that is not a string");
        alts.push_back(json_object({{"type", "\"object\""}, {"properties", json_object({{x.text(), "false"}})}}));
      }
      return *out = any_of(alts), true;
    }
    if (in(k, {"properties", "patternProperties", "additionalProperties"})) {
      if (k != "properties" && s->find("properties") != nullptr) return *none = true, true;
      if (k == "additionalProperties" && s->find("patternProperties") != nullptr) return *none = true, true;
      const Value* props = s->find("properties");
      const Value* pats = s->find("patternProperties");
      const Value* addl = s->find("additionalProperties");
      if ((props && !props->is_object()) || (pats && !pats->is_object()))
        return decline("properties or patternProperties that is not an object");
      std::vector<std::string> alts, names, patterns;
      // "some property whose key is in a region has a value the region's schema refuses"
      auto witness = [&](const std::string& exclude, const std::string& match, const std::string& not_match,
                         const std::string& schema) {
        alts.push_back(json_object({{"type", "\"object\""}, {kWitness, json_object({{"exclude", exclude},
            {"match", match}, {"notMatch", not_match}, {"schema", schema}})}}));
      };
      for (const Member& p : props ? props->members() : Span<Member>()) {
        std::string n;
        names.push_back(quoted(p.key));
        if (!neg(sub("properties", &p.value, "/" + escape_pointer(p.key)), depth + 1, &n)) return false;
        if (n == "false") continue;
        alts.push_back(json_object({{"type", "\"object\""}, {"required", json_list({quoted(p.key)})},
                                    {"properties", json_object({{p.key, n}})}}));
      }
      for (const Member& p : pats ? pats->members() : Span<Member>()) {
        std::string n;
        patterns.push_back(quoted(p.key));
        if (!neg(sub("patternProperties", &p.value, "/" + escape_pointer(p.key)), depth + 1, &n)) return false;
        if (n != "false") witness("[]", quoted(p.key), "[]", n);
      }
      if (addl != nullptr) {
        std::string n;
        if (!neg(sub("additionalProperties", addl), depth + 1, &n)) return false;
        if (n != "false") witness(json_list(names), "null", json_list(patterns), n);
      }
      if (alts.empty()) return *none = true, true;
      return *out = any_of(alts), true;
    }
    if (k == "additionalItems") {
      const Value* items = s->find("items");
      if (items == nullptr || !items->is_array() || (v.is_bool() && v.boolean())) return *none = true, true;
      return decline("additionalItems: its negation is not supported");
    }
    if (k == "prefixItems" || (k == "items" && v.is_array())) {
      if (!v.is_array()) return decline("prefixItems that is not an array");
      std::vector<std::string> alts;
      for (uint32_t i = 0; i < v.size(); ++i) {
        std::string n;
        if (!neg(sub(k, &v.items()[i], "/" + std::to_string(i)), depth + 1, &n)) return false;
        if (n == "false") continue;
        std::vector<std::string> tuple(i, "true");
        tuple.push_back(n);
        alts.push_back(json_object({{"type", "\"array\""}, {"minItems", std::to_string(i + 1)},
                                    {opt_.draft7 ? "items" : "prefixItems", json_list(tuple)}}));
      }
      if (alts.empty()) return *none = true, true;
      return *out = any_of(alts), true;
    }
    if (k == "items") {  // every item: "some item that is not", contains
      std::string n;
      if (!neg(sub("items", &v), depth + 1, &n)) return false;
      if (n == "false") return *none = true, true;
      const Value* tuple = opt_.draft7 ? nullptr : s->find("prefixItems");
      if (tuple != nullptr && (!tuple->is_array() || tuple->size() > 0))
        return decline("negating items after prefixItems");
      return *out = json_object({{"type", "\"array\""}, {"contains", n}}), true;
    }
    if (k == "contains") {  // no item is: every item is not
      const Value* mn = s->find("minContains");
      if (s->find("maxContains") != nullptr || (mn != nullptr && !(mn->is_integer() && mn->fits_int64() && mn->int64() == 1)))
        return decline("the negation of contains with counts");
      std::string n;
      if (!neg(sub("contains", &v), depth + 1, &n)) return false;
      return *out = json_object({{"type", "\"array\""}, {"items", n}}), true;
    }
    if (in(k, {"minContains", "maxContains", "then", "else"})) return *none = true, true;  // (with contains, if)
    if (k == "uniqueItems" && v.is_bool() && !v.boolean()) return *none = true, true;
    if (in(k, {"unevaluatedItems", "unevaluatedProperties"}) && v.is_bool() && v.boolean()) return *none = true, true;
    if (in(k, {"allOf", "anyOf"})) {
      if (!v.is_array()) return decline(std::string(k) + " that is not an array");
      std::vector<std::string> alts;
      for (uint32_t i = 0; i < v.size(); ++i) {
        std::string n;
        if (!neg(sub(k, &v.items()[i], "/" + std::to_string(i)), depth + 1, &n)) return false;
        alts.push_back(std::move(n));
      }
      return *out = json_object({{k == "allOf" ? "anyOf" : "allOf", json_list(alts)}}), true;
    }
    if (k == "oneOf" && v.is_array() && v.size() > 0 && v.size() <= 8) {  // none, or some two
      std::vector<std::string> negs, pieces, alts;
      for (uint32_t i = 0; i < v.size(); ++i) {
        NodeId b = sub("oneOf", &v.items()[i], "/" + std::to_string(i));
        std::string n, p;
        if (!neg(b, depth + 1, &n) || !piece(b, &p)) return false;
        negs.push_back(std::move(n));
        pieces.push_back(std::move(p));
      }
      alts.push_back(json_object({{"allOf", json_list(negs)}}));
      for (size_t i = 0; i < pieces.size(); ++i)
        for (size_t j = i + 1; j < pieces.size(); ++j) alts.push_back(json_object({{"allOf", json_list({pieces[i], pieces[j]})}}));
      return *out = json_object({{"anyOf", json_list(alts)}}), true;
    }
    if (k == "not") return piece(sub("not", &v), out);
    if (k == "if") {  // (if and not then) or (not if and not else)
      const Value* then = s->find("then");
      const Value* other = s->find("else");
      if (then == nullptr && other == nullptr) return *none = true, true;
      std::vector<std::string> alts;
      NodeId cond = sub("if", &v);
      if (then != nullptr) {
        std::string p, n;
        if (!piece(cond, &p) || !neg(sub("then", then), depth + 1, &n)) return false;
        alts.push_back(json_object({{"allOf", json_list({p, n})}}));
      }
      if (other != nullptr) {
        std::string ni, ne;
        if (!neg(cond, depth + 1, &ni) || !neg(sub("else", other), depth + 1, &ne)) return false;
        alts.push_back(json_object({{"allOf", json_list({ni, ne})}}));
      }
      return *out = any_of(alts), true;
    }
    return decline(std::string(k) + ": its negation is not supported");
  }

  // Negator.piece: a subschema as it is, inlined (this port's documents have one resource, so a
  // $ref in it resolves alike at the negation's place, unless an $id in it moves its base).
  bool piece(NodeId node, std::string* out) {
    const Value* s = r_.node(node).schema;
    if (s->is_bool()) return *out = s->boolean() ? "true" : "false", true;
    bool refs = false, ids = false;
    std::vector<const Value*> todo{s};
    while (!todo.empty()) {
      const Value* x = todo.back();
      todo.pop_back();
      if (x->is_object()) {
        refs = refs || x->find("$ref") || x->find("$dynamicRef");
        ids = ids || x->find("$id");
        for (const Member& m : x->members()) todo.push_back(&m.value);
      } else if (x->is_array()) {
        for (const Value& y : x->items()) todo.push_back(&y);
      }
    }
    if (refs && ids) return decline("a negation's piece with $ref and $id");
    *out = dumps(*s);
    return true;
  }

  // ---- the parts ported with the helpers' modules: strings, numbers, constants ----------

  Expr string_literal(std::string_view text) {
    Expr e = schema::string_literal(b_, text, false);
    if (e == kNoExpr) decline("a string that UTF-8 cannot hold");
    return e == kNoExpr ? IrBuilder::kNothing : e;
  }
  // Converter.const_expr for scalars (strings go through string_literal).
  Expr const_expr(const Value& v, bool integer) {
    if (v.is_null()) return b_.literal("null");
    if (v.is_bool()) return b_.literal(v.boolean() ? "true" : "false");
    Expr e = number_const(b_, v, integer ? numbers_.zero_frac() : numbers_.const_zero_frac());
    if (e == kNoExpr) decline("a number constant");
    return e == kNoExpr ? IrBuilder::kNothing : e;
  }

  // NumberSchema.number: the numbers of `atoms` the nodes' number keywords allow.
  Expr number(const std::vector<NodeId>& nodes, uint8_t atoms) {
    std::vector<const Value*> schemas;
    for (NodeId n : nodes) schemas.push_back(r_.node(n).schema);
    Expr e = numbers_.number(IrSpan<const Value*>(schemas), nodes.empty() ? "" : r_.node(nodes[0]).pointer, atoms);
    if (e == kNoExpr) decline("number keywords");
    return e == kNoExpr ? IrBuilder::kNothing : e;
  }

  // Converter.intersection: a rule for the strings every wanted item matches and no other does.
  Expr intersection(IrSpan<Expr> items, IrSpan<uint8_t> wants, std::string_view, std::string_view,
                    bool escaped) override {
    RuleId name = fresh("and");
    rules_.set(name, b_.make_and(items, wants, escaped));
    return b_.make_ref(name);
  }
  // StringSchema.string_facts: lengths, patterns and enforced formats; false where it declines.
  bool string_facts(const std::vector<NodeId>& nodes, StringFacts* f) {
    int64_t hi = -1;
    for (NodeId n : nodes) {
      if (!count_bounds(n, "minLength", "maxLength", &f->lo, &hi)) return false;
      const Value* s = r_.node(n).schema;
      if (!s->is_object()) continue;
      if (const Value* p = s->find("pattern")) {
        if (!p->is_string()) return decline("a pattern that is not a string");
        f->parts.push_back({StringPart::kPattern, std::string(p->text())});
      }
      const Value* fm = s->find("format");
      if (fm != nullptr && !(r_.drops_formats() && fm->is_string())) {
        // ("regex" is built only as a string's one constraint: format_expr refuses it elsewhere)
        const int enforced = fm->is_string() && fm->text() == "regex" ? 1 : enforced_format(*fm);
        if (enforced < 0) return false;
        if (enforced) f->parts.push_back({StringPart::kFormat, std::string(fm->text())});
      }
      if (const Value* p = s->find(kNotPattern)) {
        if (!p->is_string()) return decline("a pattern that is not a string");
        f->parts.push_back({StringPart::kNotPattern, std::string(p->text())});
      }
      if (const Value* nf = s->find(kNotFormat)) {
        const int enforced = enforced_format(*nf);
        if (enforced < 0) return false;
        if (enforced) f->parts.push_back({StringPart::kNotFormat, std::string(nf->text())});
      }
      if (const Value* x = s->find(kNotConst); x != nullptr && x->is_string())
        f->parts.push_back({StringPart::kNotLiteral, std::string(x->text())});
    }
    f->hi = hi < 0 ? kUnbounded : hi;
    return true;
  }

  // StringSchema.string.
  Expr string(const std::vector<NodeId>& nodes) {
    StringFacts f;
    if (!string_facts(nodes, &f)) return kNothing;
    Expr e = strings_.string(f);
    if (e == kNoExpr) decline("string keywords: " + patterns_.why());
    return e == kNoExpr ? IrBuilder::kNothing : e;
  }
  // _text.format_expr's verdict on a format: 1 enforced, 0 an annotation (a format nobody
  // defines), -1 declined (not a string, or a format the Python refuses).
  int enforced_format(const Value& name) {
    if (!name.is_string()) return decline("a format that is not a string"), -1;
    const Expr e = patterns_.format_expr(name.text());
    if (e == kNoExpr) return decline("format " + std::string(name.text())), -1;
    return e != kNoFormat;
  }

  // _object_schema._ANY_KEY: any key, quoted.
  Expr any_key() {
    Expr quote = b_.literal("\"");
    return b_.seq(quote, b_.repeat(strings_.text().json_char, 0, kUnbounded), quote);
  }

  // ---- arrays (_array_schema.py) ---------------------------------------------------------

  bool count_bounds(NodeId n, const char* lo_key, const char* hi_key, int64_t* lo, int64_t* hi) {
    const Value* s = r_.node(n).schema;
    for (const char* key : {lo_key, hi_key}) {
      const Value* v = s->find(key);
      if (v == nullptr) continue;
      int64_t x;
      if (v->is_number()) x = static_cast<int64_t>(v->number());
      else if (v->fits_int64()) x = v->int64();
      else return decline(std::string("a huge ") + key);
      if (key == lo_key) *lo = std::max(*lo, x);
      else *hi = *hi < 0 ? x : std::min(*hi, x);
    }
    return true;
  }

  // ArraySchema.array: the items in order (each subschema's prefix items, then the schema of
  // the items after them), exact counts, and uniqueItems over an open set of values as a check
  // on each item (over a small finite set the Python builds a state machine: declined).
  Expr array(const std::vector<NodeId>& nodes) {
    int64_t lo = 0, hi = -1;  // hi -1: none
    struct Prefix {
      std::vector<NodeId> items;
      NodeId rest = -1;
    };
    std::vector<Prefix> prefixes;
    bool unique_at = false;
    struct Contains {
      NodeId node;
      const Value *mn, *mx;  // minContains, maxContains as written (nullptr: absent, or null for mx)
    };
    std::vector<Contains> contains;
    for (NodeId n : nodes) {
      if (!count_bounds(n, "minItems", "maxItems", &lo, &hi)) return kNothing;
      const Value* s = r_.node(n).schema;
      if (!s->is_object()) continue;
      const Value* items = s->find("items");
      const Value* tuple = opt_.draft7 ? nullptr : s->find("prefixItems");
      const char* tuple_key = "prefixItems";
      if (tuple == nullptr && items != nullptr && items->is_array()) tuple = items, tuple_key = "items";
      Prefix p;
      if (tuple != nullptr) {
        if (!tuple->is_array()) return decline("prefixItems that is not an array"), kNothing;
        for (uint32_t i = 0; i < tuple->size(); ++i)
          p.items.push_back(child_item(n, tuple_key, &tuple->items()[i], i));
        const char* rest_key = tuple == items ? "additionalItems" : "items";
        const Value* rest = s->find(rest_key);
        if (rest != nullptr && (rest->is_object() || rest->is_bool())) p.rest = child(n, rest_key, rest);
        else if (rest != nullptr && tuple == items) return decline("additionalItems that is not a schema"), kNothing;
      } else if (items != nullptr && (items->is_object() || items->is_bool())) {
        p.rest = child(n, "items", items);
      }
      if (!p.items.empty() || p.rest >= 0) prefixes.push_back(std::move(p));
      if (s->find("contains") != nullptr) {
        const Value* mx = s->find("maxContains");
        // (without maxContains, a minContains of 0 asks nothing: the Python's `mn == 0`, false too)
        const Value* mn = s->find("minContains");
        const bool zero = mn != nullptr && ((mn->is_integer() && mn->fits_int64() && mn->int64() == 0) ||
                                            (mn->is_number() && mn->number() == 0) || (mn->is_bool() && !mn->boolean()));
        if (!(zero && (mx == nullptr || mx->kind() == Kind::null)))
          contains.push_back({n, mn, mx != nullptr && mx->kind() == Kind::null ? nullptr : mx});
      }
      const Value* u = s->find("uniqueItems");
      unique_at = unique_at || (u != nullptr && u->is_bool() && u->boolean());
    }
    if (hi >= 0 && hi < lo) return kNothing;
    const bool unique = unique_at && (hi < 0 || hi > 1);
    size_t width = 0;
    for (const Prefix& p : prefixes) width = std::max(width, p.items.size());
    if (hi >= 0) width = std::min<size_t>(width, hi);
    size_t closed_from = 0;  // strict mode: items past every tuple are closed
    NodeId closed = strict_close_items(nodes, &closed_from);
    if (closed >= 0) width = hi < 0 ? std::max(width, closed_from) : std::min<size_t>(std::max(width, closed_from), hi);
    auto position_nodes = [&](size_t i) {
      std::vector<NodeId> out;
      for (const Prefix& p : prefixes)
        if (i < p.items.size()) out.push_back(p.items[i]);
        else if (p.rest >= 0) out.push_back(p.rest);
      if (closed >= 0 && i >= closed_from) out.push_back(closed);
      return out;
    };
    std::vector<NodeId> rest_nodes;
    for (const Prefix& p : prefixes)
      if (p.rest >= 0) rest_nodes.push_back(p.rest);
    if (closed >= 0) rest_nodes.push_back(closed);
    std::vector<std::vector<NodeId>> positions;  // each prefix position's nodes, then the rest's
    for (size_t i = 0; i < width; ++i) positions.push_back(position_nodes(i));
    positions.push_back(rest_nodes);
    Expr item_end = IrBuilder::kEmpty;
    if (unique) {
      if (!contains.empty()) return decline("uniqueItems together with contains"), kNothing;
      std::vector<const Value*> values;
      std::vector<std::vector<int32_t>> choices;
      const bool open = open_values(positions, &values, &choices);
      if (failed()) return kNothing;
      if (!open) return array_unique(values, choices, lo, hi);
      item_end = b_.make_check(kUniqueItem);  // each item checked against the ones before it
    }
    if (!contains.empty()) {
      if (contains.size() > 1) return decline("more than one contains in one place"), kNothing;
      if (width) return decline("contains together with prefixItems"), kNothing;
      return array_contains(contains[0].node, contains[0].mn, contains[0].mx, rest_nodes, lo, hi);
    }
    std::vector<Expr> elems;
    for (size_t i = 0; i < width; ++i) elems.push_back(b_.seq(value(positions[i], kAllAtoms), item_end));
    Expr rest = b_.seq(value(rest_nodes, kAllAtoms), item_end);
    Expr out = array_shape(elems, rest, lo, hi);
    return unique ? b_.make_region(out) : out;
  }

  // ArraySchema.contains_bounds: a count as an integer (a float with no fraction counts), -1
  // absent; false where the Python refuses it.
  bool contains_bound(const Value* v, int64_t* out) {
    *out = -1;
    if (v == nullptr) return true;
    if (v->is_integer() && v->fits_int64() && v->int64() >= 0) return *out = v->int64(), true;
    if (v->is_number() && v->number() >= 0 && v->number() < 9e15 && v->number() == std::floor(v->number()))
      return *out = static_cast<int64_t>(v->number()), true;
    return decline("minContains or maxContains that is not a non-negative integer");
  }

  // ArraySchema.array_contains (no tuple, no uniqueItems): a counting automaton of (items so far,
  // items the contains subschema takes so far), both capped; with maxContains the other items
  // are those it refuses.
  Expr array_contains(NodeId n, const Value* mn_v, const Value* mx_v, const std::vector<NodeId>& rest_nodes,
                      int64_t lo, int64_t hi) {
    int64_t mn, mx;
    if (!contains_bound(mn_v, &mn) || !contains_bound(mx_v, &mx)) return kNothing;
    if (mn_v == nullptr) mn = 1;
    const Value* cv = r_.node(n).schema->find("contains");
    const NodeId cnode = child(n, "contains", cv);
    std::vector<NodeId> with(rest_nodes);
    with.push_back(cnode);
    Expr hit = value(with, kAllAtoms), miss;
    const bool exact = mx >= 0;
    if (exact) {
      const int32_t cond = type_only(cnode);
      if (cond >= 0) {
        miss = value(rest_nodes, uint8_t(kAllAtoms & ~cond));
      } else {
        std::vector<NodeId> without(rest_nodes);
        without.push_back(negation(cnode));
        miss = value(without, kAllAtoms);
      }
    } else {
      miss = value(rest_nodes, kAllAtoms);
    }
    if (failed() || (exact && mx < mn)) return kNothing;
    const int64_t t_cap = hi >= 0 ? hi : std::max<int64_t>({lo, mn, 1}), c_cap = exact ? mx : mn;
    if (double(t_cap + 1) * double(c_cap + 1) > 6000)  // MAX_ORDERED_STATES
      return decline("contains with counts past the limit of states"), kNothing;
    States<std::pair<int64_t, int64_t>> states({0, 0});  // (items so far, hits so far)
    const StateEdges edges = states.edges([&](std::pair<int64_t, int64_t> at, EdgeList* outp) {
      const auto [t, c] = at;
      EdgeList& out = *outp;
      if (t >= lo && c >= mn) out.emplace_back(t ? b_.seq(close_ws_, b_.literal("]")) : b_.literal("]"), kAccept);
      if (hi < 0 || t < hi) {
        const Expr sep = t ? sep_ : first_;
        const int64_t nt = hi < 0 ? std::min(t + 1, t_cap) : t + 1;
        if (!exact || c < mx)
          out.emplace_back(b_.seq(sep, hit), states.state({nt, exact ? c + 1 : std::min(c + 1, c_cap)}));
        out.emplace_back(b_.seq(sep, miss), states.state({nt, c}));
      }
    });
    return b_.seq(b_.literal("["), ws_, automaton("arr", edges));
  }

  // Evaluation.strict_close for arrays: the false node that closes the items past the tuples of
  // a place that has tuples and says nothing of later items, in strict mode; `*from`: the
  // longest tuple's length.
  NodeId strict_close_items(const std::vector<NodeId>& nodes, size_t* from) {
    if (!opt_.strict) return -1;
    const char* key = opt_.draft7 ? "items" : "prefixItems";
    NodeId first = -1;
    for (NodeId n : nodes) {
      const Value* s = r_.node(n).schema;
      if (!s->is_object()) continue;
      const Value* tuple = s->find(key);
      if (tuple != nullptr && (!opt_.draft7 || tuple->is_array()) && first < 0) first = n;
      if (tuple != nullptr && tuple->is_array()) *from = std::max<size_t>(*from, tuple->size());
      const Value* items = s->find("items");
      if ((items != nullptr && !items->is_array()) || s->find("additionalItems") || s->find("unevaluatedItems"))
        return -1;
    }
    if (first < 0) return -1;
    return synth(r_.node(first).pointer + "/unevaluated", "false");
  }

  // ArraySchema.unique_candidates over every position: true where array_unique refuses (some
  // position's values are not few and known, or all of them together are more than 8), else
  // the values (`*values`, each once) and the numbers of those each position allows.
  bool open_values(const std::vector<std::vector<NodeId>>& positions, std::vector<const Value*>* values,
                   std::vector<std::vector<int32_t>>* choices) {
    std::vector<std::string> seen;  // the values' canon keys
    for (const std::vector<NodeId>& nodes : positions) {
      choices->emplace_back();
      const std::vector<NodeId>* ex = expand(nodes);
      if (ex == nullptr) continue;
      const std::vector<NodeId> expanded(*ex);
      std::vector<const Value*> cands;
      if (!finite_values(expanded, &cands)) {
        if ((static_atoms(expanded) & ~(kAtomNull | kAtomBoolean)) == 0)
          return decline("uniqueItems over nulls and booleans"), false;  // (maybe few values: not built)
        return true;
      }
      std::vector<const Value*> kept;
      for (const Value* v : cands) {
        bool all = true;
        for (NodeId n : expanded) all = all && holds(*v, n);
        if (failed()) return false;
        if (all) kept.push_back(v);
      }
      if (kept.size() > 8) return true;
      for (const Value* v : kept) {
        const std::string& key = *canon_of(*v);
        const size_t i = std::find(seen.begin(), seen.end(), key) - seen.begin();
        if (i == seen.size()) seen.push_back(key), values->push_back(v);
        choices->back().push_back(int32_t(i));
      }
    }
    return seen.size() > 8;
  }

  // ArraySchema.array_unique without contains: items from a few known values, a state per
  // (position, values used so far).
  Expr array_unique(const std::vector<const Value*>& values, const std::vector<std::vector<int32_t>>& choices,
                    int64_t lo, int64_t hi) {
    std::vector<Expr> exprs;
    for (const Value* v : values) exprs.push_back(v->is_string() ? string_literal(v->text()) : const_expr(*v, false));
    const int32_t last = int32_t(choices.size()) - 1;
    const Expr close = b_.literal("]");
    States<std::pair<int32_t, uint32_t>> states({0, 0});  // (position, values used so far)
    const StateEdges edges = states.edges([&](std::pair<int32_t, uint32_t> at, EdgeList* outp) {
      const auto [pos, used] = at;
      const int64_t n_used = __builtin_popcount(used);
      EdgeList& out = *outp;
      if (n_used >= lo) out.emplace_back(used ? b_.seq(close_ws_, close) : close, kAccept);
      if (hi < 0 || n_used < hi) {
        const Expr sep = used ? sep_ : first_;
        for (int32_t i : choices[pos])
          if (!(used >> i & 1))
            out.emplace_back(b_.seq(sep, exprs[i]), states.state({std::min(pos + 1, last), used | 1u << i}));
      }
    });
    return b_.seq(b_.literal("["), ws_, automaton("uniq", edges));
  }

  // ArraySchema.array_shape: `[`, the prefix items, then items of `rest`, `]`, lo..hi of them.
  Expr array_shape(const std::vector<Expr>& elems, Expr rest, int64_t lo, int64_t hi) {
    Expr content;
    if (!elems.empty()) {
      content = b_.seq(elems[0], array_tail(elems, rest, lo, hi));
    } else if (hi == 0) {
      content = kNothing;
    } else {
      Expr more = counted(b_.seq(sep_, rest), std::max<int64_t>(0, lo - 1), hi < 0 ? -1 : hi - 1);
      content = b_.seq(rest, more);
    }
    Expr open = b_.literal("["), close = b_.literal("]");
    Expr full = b_.seq(open, ws_, first_, content, close_ws_, close);
    if (lo == 0) return b_.alt(b_.seq(open, ws_, close), full);
    return full;
  }

  // ArraySchema.array_tail: the items after the first, each after a separator, built from the
  // end, a rule every 8 items (so that no expression nests deeply).
  Expr array_tail(const std::vector<Expr>& elems, Expr rest, int64_t lo, int64_t hi) {
    const int64_t n = int64_t(elems.size()), mn = std::max<int64_t>(0, lo - n), mx = hi < 0 ? -1 : hi - n;
    Expr expr;
    if (mx >= 0 && mx < mn) expr = kNothing;
    else if (mx == 0) expr = IrBuilder::kEmpty;
    else expr = counted(b_.seq(sep_, rest), mn, mx);
    for (int64_t i = n - 1; i > 0; --i) {
      Expr step = b_.seq(sep_, elems[i], expr);
      expr = i < lo ? step : b_.alt(IrBuilder::kEmpty, step);
      if ((n - i) % 8 == 0 && i > 1) expr = shared(expr, "items");
    }
    return expr;
  }

  // ArraySchema.counted: lo..hi copies of `unit` (hi -1: unbounded), base-16 blocks past 256.
  Expr counted(Expr unit, int64_t lo, int64_t hi) {
    int64_t top = std::max(lo, hi < 0 ? 0 : hi);
    if (top <= kCountBlocksFrom) return b_.repeat(unit, lo, hi < 0 ? kUnbounded : hi);
    std::vector<Expr> blocks{unit};
    for (int64_t size = 16; size <= top; size *= 16)
      blocks.push_back(shared(b_.repeat(blocks.back(), 16, 16), "block"));
    auto digit = [&](int64_t n, size_t j) { return (n >> (4 * j)) & 15; };
    std::vector<Expr> parts;
    for (size_t j = blocks.size(); j-- > 0;)
      if (int64_t d = digit(lo, j)) parts.push_back(b_.repeat(blocks[j], d, d));
    Expr exactly = b_.seq(IrSpan<Expr>(parts));
    if (hi < 0) return b_.seq(exactly, b_.repeat(unit, 0, kUnbounded));
    Expr up_to = IrBuilder::kEmpty, below = IrBuilder::kEmpty;
    for (size_t j = 0; j < blocks.size(); ++j) {
      int64_t d = digit(hi - lo, j);
      if (d) {
        up_to = b_.alt(b_.seq(b_.repeat(blocks[j], 0, d - 1), below), b_.seq(b_.repeat(blocks[j], d, d), up_to));
        up_to = shared(up_to, "upto");
      }
      below = shared(b_.seq(b_.repeat(blocks[j], 0, 15), below), "below");
    }
    return b_.seq(exactly, up_to);
  }

  // ---- objects (_object_schema.py) -------------------------------------------------------

  // TypeAnalysis.member_nodes: the schemas of n a value for key k meets, its `properties` entry
  // and the `patternProperties` that match k, else its `additionalProperties`.
  void member_nodes(NodeId n, const std::string& k, std::vector<NodeId>* out) {
    const Value* s = r_.node(n).schema;
    if (!s->is_object()) return;
    const size_t before = out->size();
    const Value* props = s->find("properties");
    if (props != nullptr && props->is_object())
      if (const Value* v = props->find(k)) out->push_back(child_member(n, "properties", v, k));
    const Value* pats = s->find("patternProperties");
    if (pats != nullptr && pats->is_object())
      for (const Member& m : pats->members())
        if (matches(m.key, k)) out->push_back(child_member(n, "patternProperties", &m.value, m.key));
    if (out->size() == before)
      if (const Value* a = s->find("additionalProperties")) out->push_back(child(n, "additionalProperties", a));
  }

  // _text.pattern_search: whether a pattern matches anywhere in a key (false where it declines).
  bool matches(std::string_view pattern, std::string_view key) { return search(pattern, key) > 0; }

  // _text.pattern_search: 1 where the pattern matches anywhere in `text`, 0 where not, -1 where
  // the port declines (a pattern that is not a string, or the search's own declines).
  int search(const Value& pattern, std::string_view text) {
    if (!pattern.is_string()) return decline("a pattern that is not a string"), -1;
    return search(pattern.text(), text);
  }
  int search(std::string_view pattern, std::string_view text) {
    int found = patterns_.pattern_search(pattern, text);
    if (found < 0) decline("a pattern's search: " + patterns_.why());
    return found;
  }

  // Evaluation.strict_close for objects: the false node that closes a place that names
  // properties and says nothing of others, in strict mode.
  NodeId strict_close(const std::vector<NodeId>& nodes) {
    if (!opt_.strict) return -1;
    NodeId first = -1;
    for (NodeId n : nodes) {
      const Value* s = r_.node(n).schema;
      if (!s->is_object()) continue;
      if (first < 0 && (s->find("properties") || s->find("patternProperties"))) first = n;
      if (s->find("additionalProperties") || s->find("unevaluatedProperties")) return -1;
    }
    if (first < 0) return -1;
    return synth(r_.node(first).pointer + "/unevaluated", "false");
  }

  Expr distinct_key(const std::vector<std::string>& known) {
    std::vector<int32_t> params;
    for (const std::string& k : known) {
      params.push_back(static_cast<int32_t>(k.size()));
      for (unsigned char c : k) params.push_back(c);
    }
    return b_.make_check(kDistinctKey, IrSpan<int32_t>(params));
  }

  Expr object(const std::vector<NodeId>& nodes) {
    std::vector<std::string> order, required;
    std::vector<Pattern> patterns;  // ObjectFacts.patterns: (node, pattern) in the nodes' order
    int64_t min_p = 0, max_p = -1;  // max_p -1: none
    Deps deps;                      // key -> the keys it requires, in first mention
    std::vector<std::string> forbidden;
    std::vector<NodeId> name_nodes;  // the propertyNames subschemas
    for (NodeId n : nodes) {
      const Value* s = r_.node(n).schema;
      if (!s->is_object()) continue;
      if (const Value* props = s->find("properties"))
        for (const Member& m : props->members()) add_new(&order, m.key);
      if (const Value* req = s->find("required"))
        for (const Value& k : req->items()) add_new(&required, k.text());
      if (!count_bounds(n, "minProperties", "maxProperties", &min_p, &max_p)) return kNothing;
      if (const Value* pats = s->find("patternProperties")) {
        for (const Member& m : pats->members()) {
          if (patterns_.pattern_expr(m.key) == kNoExpr) return decline("patternProperties: " + patterns_.why()), kNothing;
          patterns.push_back({n, &m});
        }
      }
      if (const Value* pn = s->find("propertyNames")) name_nodes.push_back(child(n, "propertyNames", pn));
      if (!dependencies(n, &deps, &forbidden)) return kNothing;
    }
    std::sort(forbidden.begin(), forbidden.end());
    for (const std::string& k : required) add_new(&order, k);
    for (const std::string& k : forbidden) add_new(&order, k);
    for (auto& [k, names] : deps) {
      add_new(&order, k);
      std::vector<std::string> sorted(names);
      std::sort(sorted.begin(), sorted.end());
      for (const std::string& x : sorted) add_new(&order, x);
    }
    for (const std::string& k : required)  // the Python's witnesses of negations are such keys
      if (!k.empty() && k[0] == '\0') return decline("a required key starting with NUL"), kNothing;
    NodeId closed = strict_close(nodes);
    Members members;
    KnownKeys known;  // key -> its nodes, its value
    for (const std::string& k : order) {
      std::vector<NodeId> knodes;
      for (NodeId n : nodes) member_nodes(n, k, &knodes);
      if (closed >= 0 && !names_property(nodes, k)) {
        bool matched = false;
        for (const Pattern& p : patterns) matched = matched || matches(p.member->key, k);
        if (!matched) knodes.push_back(closed);
      }
      bool ok = !std::binary_search(forbidden.begin(), forbidden.end(), k);
      for (size_t i = 0; ok && i < name_nodes.size(); ++i) ok = holds(key_value(k), name_nodes[i]);
      if (failed()) return kNothing;
      Expr v = ok ? value(knodes, kAllAtoms) : kNothing;
      if (v == IrBuilder::kNothing) {
        if (std::find(required.begin(), required.end(), k) != required.end()) return IrBuilder::kNothing;
        continue;
      }
      Expr lit = string_literal(k);
      members.emplace_back(k, shared(b_.seq(lit, colon_, v), "member"));
      known.emplace(k, std::make_pair(std::move(knodes), v));
    }
    auto member = [&](const std::string& k) { return find_member(members, k); };
    for (size_t i = 0; i < deps.size();) {  // a key that cannot appear, or would require one that cannot
      const std::string& k = deps[i].first;
      bool present = member(k) != members.end(), blocked = false;
      for (const std::string& x : deps[i].second) blocked = blocked || member(x) == members.end();
      if (present && blocked) {
        members.erase(member(k));
        if (std::find(required.begin(), required.end(), k) != required.end()) return kNothing;
      }
      if (!present || blocked) deps.erase(deps.begin() + i);
      else ++i;
    }
    if (members.size() > kMaxOrderedProperties) {
      decline("more properties than the limit");
      return IrBuilder::kNothing;
    }
    Expr additional = shared(additional_member(nodes, order, patterns, name_nodes, closed), "extra");
    const int64_t eff_min = min_p > int64_t(required.size()) ? min_p : 0;
    const size_t n_required = required.size();
    if (!witnesses(nodes, order, patterns, name_nodes, closed, known, &members, &required)) return kNothing;
    if (required.size() > n_required) {  // witnessed: only the any-order form tracks them
      std::vector<std::string> tracked(required);
      for (const auto& [k, names] : deps) {
        add_new(&tracked, k);
        std::vector<std::string> sorted(names);
        std::sort(sorted.begin(), sorted.end());
        for (const std::string& x : sorted) add_new(&tracked, x);
      }
      if (eff_min != 0 || tracked.size() > 8 || (max_p >= 0 && double(1u << tracked.size()) * double(max_p + 1) > 4096))
        return decline("a negated additionalProperties with counts or many required keys"), kNothing;
      for (auto& [k, m] : members) {  // in any order a known key could come again: each is checked
        auto it = known.find(k);
        if (it != known.end()) m = shared(b_.seq(string_literal(k), distinct_key({}), colon_, it->second.second), "member");
      }
      return b_.make_region(object_any_order(members, additional, required, deps, tracked, max_p));
    }
    std::vector<std::string> watched;
    for (const auto& [k, names] : deps) {
      add_new(&watched, k);
      for (const std::string& x : names) add_new(&watched, x);
    }
    if (watched.size() > 8) return decline("dependencies over more than 8 keys"), kNothing;  // MAX_TRACKED_KEYS
    Expr out = max_p < 0 && eff_min == 0 && deps.empty()
                   ? members_in_order(members, additional, required)
                   : object_counted(members, additional, required, eff_min, max_p, deps, watched);
    return additional == IrBuilder::kNothing ? out : b_.make_region(out);
  }

  struct Pattern {
    NodeId node;
    const Member* member;  // the patternProperties entry: the pattern and its schema
  };

  using Deps = std::vector<std::pair<std::string, std::vector<std::string>>>;
  using KnownKeys = std::unordered_map<std::string, std::pair<std::vector<NodeId>, Expr>>;
  using Members = std::vector<std::pair<std::string, Expr>>;

  static Members::const_iterator find_member(const Members& members, const std::string& k) {
    return std::find_if(members.begin(), members.end(), [&](const auto& m) { return m.first == k; });
  }

  // Keys a counting automaton's states track as bits (object_ordered's watched keys,
  // object_any_order's tracked ones), and per key the keys its dependencies require.
  struct TrackedKeys {
    std::vector<std::string> keys;
    std::vector<uint32_t> needs;
    TrackedKeys(std::vector<std::string> tracked, const Deps& deps) : keys(std::move(tracked)), needs(keys.size(), 0) {
      for (const auto& [k, names] : deps)
        if (index(k) < keys.size())
          for (const std::string& x : names) needs[index(k)] |= bit(x);
    }
    size_t index(const std::string& k) const { return size_t(std::find(keys.begin(), keys.end(), k) - keys.begin()); }
    uint32_t bit(const std::string& k) const { return index(k) < keys.size() ? 1u << index(k) : 0u; }
    // Whether every key seen has the keys it requires seen too.
    bool deps_met(uint32_t seen) const {
      for (size_t w = 0; w < keys.size(); ++w)
        if ((seen >> w & 1) && (needs[w] & ~seen) != 0) return false;
      return true;
    }
  };

  // ObjectSchema.object's witnesses (negations' "some property"): each a pseudo-key member,
  // required, that is a member in the witness's region with a value also valid against its
  // schema. False where the object is NOTHING or it declines.
  bool witnesses(const std::vector<NodeId>& nodes, const std::vector<std::string>& order,
                 const std::vector<Pattern>& patterns, const std::vector<NodeId>& name_nodes, NodeId closed,
                 const KnownKeys& known, Members* members,
                 std::vector<std::string>* required) {
    int32_t i = 0;
    for (NodeId n : nodes) {
      const Value* s = r_.node(n).schema;
      const Value* spec = s->is_object() ? s->find(kWitness) : nullptr;
      if (spec == nullptr) continue;
      const Value *exclude = spec->find("exclude"), *match = spec->find("match"), *not_match = spec->find("notMatch"),
                  *schema = spec->find("schema");
      bool shaped = spec->size() == 4 && exclude && exclude->is_array() && match && (match->is_string() ||
                    match->kind() == Kind::null) && not_match && not_match->is_array() && schema;
      for (const Value& x : shaped ? exclude->items() : Span<Value>()) shaped = shaped && x.is_string();
      for (const Value& x : shaped ? not_match->items() : Span<Value>()) shaped = shaped && x.is_string();
      if (!shaped) return decline("a $trellis:someProperty not of its negation's shape");
      const NodeId wnode = child(n, kWitness, schema, "/schema");
      auto in_region = [&](std::string_view k) {
        for (const Value& x : exclude->items())
          if (x.text() == k) return false;
        if (match->is_string() && search(match->text(), k) != 1) return false;
        for (const Value& q : not_match->items())
          if (search(q.text(), k) != 0) return false;
        return true;
      };
      std::vector<Expr> parts;
      for (const std::string& k : order) {
        auto it = known.find(k);
        if (it == known.end() || find_member(*members, k) == members->end() || !in_region(k) || failed()) continue;
        std::vector<NodeId> knodes(it->second.first);
        knodes.push_back(wnode);
        parts.push_back(b_.seq(string_literal(k), distinct_key({}), colon_, value(knodes, kAllAtoms)));
      }
      if (failed()) return false;
      std::vector<std::string> around(order);
      for (const Value& x : exclude->items()) add_new(&around, x.text());
      std::vector<std::string_view> outside;
      for (const Value& q : not_match->items()) outside.push_back(q.text());
      parts.push_back(additional_member(nodes, around, patterns, name_nodes, closed, {wnode},
                                        match->is_string() ? &*match : nullptr, outside));
      const Expr witness = shared(b_.alt(IrSpan<Expr>(parts)), "witness");
      if (failed() || witness == kNothing) return false;
      std::string pseudo("\0witness", 8);
      pseudo += std::to_string(i++);
      members->emplace_back(pseudo, witness);
      required->push_back(pseudo);
    }
    return true;
  }

  // ObjectSchema.object_any_order: members in any order; the required and dependency keys seen
  // so far are tracked, and with maxProperties the number of members (the witnessed objects'
  // form: `tracked` holds their pseudo-keys).
  Expr object_any_order(const Members& members, Expr additional,
                        const std::vector<std::string>& required, const Deps& deps,
                        std::vector<std::string> tracked, int64_t max_p) {
    auto is_tracked = [&](const std::string& k) { return std::find(tracked.begin(), tracked.end(), k) != tracked.end(); };
    std::vector<Expr> rest;
    for (const auto& [k, m] : members)
      if (!is_tracked(k)) rest.push_back(m);
    rest.push_back(additional);
    const Expr others = shared(b_.alt(IrSpan<Expr>(rest)), "others");
    auto absent = [&](const std::string& k) { return find_member(members, k) == members.end(); };
    tracked.erase(std::remove_if(tracked.begin(), tracked.end(), absent), tracked.end());
    for (const std::string& k : required)
      if (absent(k)) return kNothing;
    const TrackedKeys keys(std::move(tracked), deps);
    uint32_t must = 0;
    for (const std::string& k : required) must |= keys.bit(k);
    struct Key {
      uint32_t seen;
      int64_t c;
      bool started;
      bool operator<(const Key& o) const { return std::tie(seen, c, started) < std::tie(o.seen, o.c, o.started); }
    };
    const Expr close = b_.literal("}");
    const Expr ws_close = b_.seq(close_ws_, close);
    States<Key> states({0, 0, false});
    const StateEdges edges = states.edges([&](const Key& k, EdgeList* outp) {
      EdgeList& out = *outp;
      if ((k.seen & must) == must && keys.deps_met(k.seen)) out.emplace_back(k.started ? ws_close : close, kAccept);
      if (max_p < 0 || k.c < max_p) {
        const int64_t nc = max_p >= 0 ? k.c + 1 : 0;
        const Expr sep = k.started ? sep_ : first_;
        for (const std::string& t : keys.keys)
          out.emplace_back(b_.seq(sep, find_member(members, t)->second), states.state({k.seen | keys.bit(t), nc, true}));
        if (others != kNothing) out.emplace_back(b_.seq(sep, others), states.state({k.seen, nc, true}));
      }
    });
    return b_.seq(b_.literal("{"), ws_, automaton("obj", edges));
  }

  // ObjectFacts' dependencies of one subschema: dependentRequired and the list form of
  // dependencies into `deps`; a dependent schema that is a type (or `required` alone) forbids
  // its key or adds to `deps`; the others body() has split the context on.
  bool dependencies(NodeId n, Deps* deps, std::vector<std::string>* forbidden) {
    const Value* s = r_.node(n).schema;
    Deps mine;  // dict(dependentRequired), the list-valued dependencies set into it
    auto set = [&](std::string_view k, const Value& names) {
      auto it = std::find_if(mine.begin(), mine.end(), [&](const auto& d) { return d.first == k; });
      if (it == mine.end()) it = mine.insert(mine.end(), {std::string(k), {}});
      it->second.clear();
      for (const Value& x : names.items()) it->second.emplace_back(x.text());
    };
    if (const Value* dr = s->find("dependentRequired"))
      for (const Member& m : dr->members()) set(m.key, m.value);
    if (const Value* d = s->find("dependencies"))
      for (const Member& m : d->members())
        if (m.value.is_array()) set(m.key, m.value);
    auto into = [&](std::string_view k, const std::vector<std::string>& names) {
      auto it = std::find_if(deps->begin(), deps->end(), [&](const auto& d) { return d.first == k; });
      if (it == deps->end()) it = deps->insert(deps->end(), {std::string(k), {}});
      for (const std::string& x : names) add_new(&it->second, x);
    };
    for (const auto& [k, names] : mine) into(k, names);
    for (const auto& [key, dnode] : dependent_schemas(n)) {
      bool forbid = false;
      std::vector<std::string> names;
      if (!simple_dependency(dnode, &forbid, &names)) continue;
      if (forbid) add_new(forbidden, key);
      else into(key, names);
    }
    return !failed();
  }

  // ObjectSchema.dependent_schemas: (key, subschema) of dependentSchemas, then of the schema
  // values of dependencies.
  std::vector<std::pair<std::string, NodeId>> dependent_schemas(NodeId n) {
    const Value* s = r_.node(n).schema;
    std::vector<std::pair<std::string, NodeId>> out;
    if (!s->is_object()) return out;
    for (const char* where : {"dependentSchemas", "dependencies"})
      if (const Value* d = s->find(where))
        for (const Member& m : d->members())
          if (!m.value.is_array()) out.emplace_back(std::string(m.key), child_member(n, where, &m.value, m.key));
    return out;
  }

  // ObjectSchema.simple_dependency: whether a dependent schema is a type (`*forbid` where it
  // is not the object type) or `required` alone (`*names`, the keys it requires).
  bool simple_dependency(NodeId dnode, bool* forbid, std::vector<std::string>* names) {
    const int32_t t = type_only(dnode);
    if (t >= 0) {
      if (forbid) *forbid = !(t & kAtomObject);
      return true;
    }
    const Value* ds = r_.node(dnode).schema;
    bool required_only = ds->is_object();
    if (required_only)
      for (const Member& x : ds->members()) required_only = required_only && (x.key == "required" || is_annotation(x.key));
    const Value* req = required_only ? ds->find("required") : nullptr;
    if (req == nullptr || !req->is_array()) return false;
    if (names)
      for (const Value& x : req->items()) names->emplace_back(x.text());
    return true;
  }

  // A dependent key's number in kDep markers.
  uint32_t dep_key_id(const std::string& key) {
    return dep_keys_.try_emplace(key, uint32_t(dep_keys_.size())).first->second;
  }

  // ObjectSchema.object_ordered with counts or dependencies: known members in schema order, each
  // at most once, then additional ones; a state is (next known key, members counted (for
  // maxProperties), members certainly distinct (for minProperties), started, an additional
  // member came, the watched keys seen).
  Expr object_counted(const Members& members, Expr additional,
                      const std::vector<std::string>& required, int64_t eff_min, int64_t max_p, const Deps& deps,
                      const std::vector<std::string>& watched) {
    const int64_t n = int64_t(members.size());
    // (c_cap + 1) * (eff_min + 1) * 2^watched, as a double: a huge maxProperties is past the limit
    const double counted = (double(max_p >= 0 ? max_p : 0) + 1) * double(eff_min + 1) * double(1u << watched.size());
    if (counted > 1 && (double(n) + 1) * counted * 4 > 6000)  // MAX_ORDERED_STATES
      return decline("counting properties past the limit of states"), kNothing;
    const bool distinct = additional != kNothing;
    const TrackedKeys keys(watched, deps);
    struct Key {
      int64_t i, c, m;
      bool started, extra;
      uint32_t seen;
      bool operator<(const Key& o) const {
        return std::tie(i, c, m, started, extra, seen) < std::tie(o.i, o.c, o.m, o.started, o.extra, o.seen);
      }
    };
    const Expr close = b_.literal("}");
    States<Key> states({0, 0, 0, false, false, 0});
    auto state = [&](const Key& k) { return states.state(k); };
    const StateEdges edges = states.edges([&](const Key& k, EdgeList* outp) {
      const Expr sep = k.started ? sep_ : first_;
      const bool room = max_p < 0 || k.c < max_p;
      const int64_t nc = max_p >= 0 ? k.c + 1 : 0;
      EdgeList& out = *outp;
      if (k.i < n) {
        const std::string& key = members[k.i].first;
        if (std::find(required.begin(), required.end(), key) == required.end())
          out.emplace_back(IrBuilder::kEmpty, state({k.i + 1, k.c, k.m, k.started, k.extra, k.seen}));
        if (room)
          out.emplace_back(b_.seq(sep, members[k.i].second),
                           state({k.i + 1, nc, std::min(k.m + 1, eff_min), true, k.extra, k.seen | keys.bit(key)}));
      } else {
        if (k.m >= eff_min && keys.deps_met(k.seen)) out.emplace_back(k.started ? b_.seq(close_ws_, close) : close, kAccept);
        if (additional != kNothing && room) {
          const int64_t nm = k.extra && !distinct ? k.m : std::min(k.m + 1, eff_min);
          out.emplace_back(b_.seq(sep, additional), state({k.i, nc, nm, true, true, k.seen}));
        }
      }
    });
    return b_.seq(b_.literal("{"), ws_, automaton("obj", edges));
  }

  // ObjectSchema.additional_member: members whose key is not a known one, one alternative per
  // set of the patterns it matches (its key the product of the patterns, matched or not, and of
  // "none of the known keys"); each key is checked to differ from the keys before it.
  // A witness's region narrows it: its schema joins each value (`value_extra`), and its keys
  // match `match` (when given) and none of `not_match`.
  Expr additional_member(const std::vector<NodeId>& nodes, const std::vector<std::string>& known,
                         const std::vector<Pattern>& patterns, const std::vector<NodeId>& name_nodes, NodeId closed,
                         const std::vector<NodeId>& value_extra = {}, const Value* match = nullptr,
                         const std::vector<std::string_view>& not_match = {}) {
    if (patterns.size() > 4) return decline("more than 4 patternProperties in one place"), kNothing;
    KeyNames names;
    if (!name_nodes.empty() && !key_names(name_nodes, &names)) return kNothing;
    std::vector<Expr> parts;
    for (uint32_t mask = 0; mask < (1u << patterns.size()); ++mask) {
      std::vector<NodeId> vnodes;
      for (NodeId n : nodes) {
        bool mine = false;
        for (size_t i = 0; i < patterns.size(); ++i) {
          if (!(mask >> i & 1) || patterns[i].node != n) continue;
          const Member& m = *patterns[i].member;
          vnodes.push_back(child_member(n, "patternProperties", &m.value, m.key));
          mine = true;
        }
        const Value* s = r_.node(n).schema;
        if (!mine && s->is_object())
          if (const Value* a = s->find("additionalProperties")) vnodes.push_back(child(n, "additionalProperties", a));
      }
      if (closed >= 0 && mask == 0) vnodes.push_back(closed);  // the keys no pattern of the place takes
      vnodes.insert(vnodes.end(), value_extra.begin(), value_extra.end());
      Expr v = value(vnodes, kAllAtoms);
      if (v == kNothing) continue;
      if (patterns.empty() && name_nodes.empty() && match == nullptr && not_match.empty()) {
        parts.push_back(b_.seq(any_key(), distinct_key(known), colon_, v));
        continue;
      }
      auto field = [](std::string* sig, char tag, std::string_view text) {
        *sig += tag + std::to_string(text.size()) + ":";
        sig->append(text);
      };
      std::string sig = std::to_string(mask);
      for (const std::string& k : known) field(&sig, '\1', k);
      for (const Pattern& p : patterns) field(&sig, '\2', p.member->key);
      if (!name_nodes.empty()) {
        sig += "\3" + std::to_string(names.facts.lo) + "," + std::to_string(names.facts.hi);
        for (const StringPart& p : names.facts.parts) field(&sig, char(0x10 + p.kind), p.value);
        if (names.finite) {
          sig += "\4";
          for (const Value* x : names.values) field(&sig, '\5', x->text());
        }
      }
      if (match != nullptr) field(&sig, '\6', match->text());
      for (std::string_view q : not_match) field(&sig, '\7', q);
      auto cached = key_bodies_.find(sig);
      if (cached == key_bodies_.end()) {
        std::vector<Expr> items{strings_.text().any_string};
        std::vector<uint8_t> wants{1};
        if (!known.empty()) {
          std::vector<Expr> names;
          for (const std::string& k : known) names.push_back(b_.literal(k));
          items.push_back(b_.alt(IrSpan<Expr>(names)));
          wants.push_back(0);
        }
        for (size_t i = 0; i < patterns.size(); ++i) {
          Expr e = patterns_.pattern_search_expr(patterns[i].member->key);
          if (e == kNoExpr) return decline("patternProperties: " + patterns_.why()), kNothing;
          items.push_back(e);
          wants.push_back(mask >> i & 1);
        }
        auto search_expr = [&](std::string_view pattern, bool want) {
          const Expr e = patterns_.pattern_search_expr(pattern);
          if (e == kNoExpr) return decline("patternProperties: " + patterns_.why());
          items.push_back(e);
          wants.push_back(want);
          return true;
        };
        if (match != nullptr && !search_expr(match->text(), true)) return kNothing;
        for (std::string_view q : not_match)
          if (!search_expr(q, false)) return kNothing;
        if (!name_nodes.empty() && !names_language(names, &items, &wants)) return kNothing;
        Expr key = intersection(IrSpan<Expr>(items), IrSpan<uint8_t>(wants), "patternProperties", "", true);
        cached = key_bodies_.emplace(std::move(sig), b_.seq(key, b_.literal("\""))).first;
      }
      parts.push_back(b_.seq(b_.literal("\""), cached->second, distinct_key({}), colon_, v));
    }
    return b_.alt(IrSpan<Expr>(parts));
  }

  // additional_member's view of a place's propertyNames: a key's string facts, or the few
  // values it may be (`finite`).
  struct KeyNames {
    StringFacts facts;
    bool finite = false;
    std::vector<const Value*> values;
  };

  // false where there is no other key (the names say nothing of strings, or are `false`) or it
  // declines (a keyword the Python refuses inside propertyNames, an unknown type).
  bool key_names(const std::vector<NodeId>& name_nodes, KeyNames* out) {
    const std::vector<NodeId>* ex = expand(name_nodes);
    if (ex == nullptr || failed()) return false;
    const std::vector<NodeId> expanded(*ex);
    uint8_t atoms = kAllAtoms;
    for (NodeId n : expanded) {
      const Value* s = r_.node(n).schema;
      if (!s->is_object()) continue;
      if (const Value* t = s->find("type")) {
        bool known = t->is_string() || t->is_array();
        for (const Value& x : t->is_array() ? t->items() : Span<Value>(t, 1))
          known = known && x.is_string() &&
                  in(x.text(), {"null", "boolean", "integer", "number", "string", "array", "object"});
        if (!known) return decline("an unknown type inside propertyNames");
      }
      if (const Value* e = s->find("enum"); e != nullptr && !e->is_array()) return decline("enum must be an array");
      atoms &= type_atoms(s);
      for (const Member& m : s->members()) {
        if (!constraining(m.key, false) || m.key.substr(0, 9) == "$trellis:") continue;
        if (!in(m.key, {"type", "allOf", "minLength", "maxLength", "pattern", "format", "enum", "const", "minimum",
                        "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "items", "prefixItems",
                        "minItems", "maxItems", "properties", "required", "minProperties", "maxProperties",
                        "additionalProperties"}))
          return decline(std::string(m.key) + " inside propertyNames");
      }
    }
    if (!(atoms & kAtomString)) return false;
    std::vector<const Value*> cands;
    if (finite_values(expanded, &cands)) {
      out->finite = true;
      for (const Value* v : cands) {
        bool all = v->is_string();
        for (size_t i = 0; all && i < expanded.size(); ++i) all = holds(*v, expanded[i]);
        if (all) out->values.push_back(v);
      }
    }
    return !failed() && string_facts(expanded, &out->facts);
  }

  // The names' language for a key's And: its values, or its string parts past any string.
  bool names_language(const KeyNames& names, std::vector<Expr>* items, std::vector<uint8_t>* wants) {
    if (names.finite) {
      std::vector<Expr> values;
      for (const Value* v : names.values) values.push_back(b_.literal(v->text()));
      items->push_back(values.empty() ? kNothing : b_.alt(IrSpan<Expr>(values)));
      wants->push_back(1);
      return true;
    }
    std::vector<Expr> more;
    std::vector<uint8_t> more_wants;
    if (!strings_.string_parts(names.facts, &more, &more_wants)) return decline("propertyNames: " + patterns_.why());
    items->insert(items->end(), more.begin() + 1, more.end());
    wants->insert(wants->end(), more_wants.begin() + 1, more_wants.end());
    return true;
  }

  // A key as a JSON string value (for the validator), one per key.
  const Value& key_value(const std::string& k) {
    auto [it, fresh] = key_values_.try_emplace(k, nullptr);
    if (fresh) {
      std::string text;
      dump_string(k, &text);
      docs_.emplace_back();
      if (!parse(text, &docs_.back()).ok()) decline("a key that is not text");
      it->second = &docs_.back().root();
    }
    return *it->second;
  }

  bool names_property(const std::vector<NodeId>& nodes, const std::string& k) {
    for (NodeId n : nodes) {
      const Value* s = r_.node(n).schema;
      const Value* props = s->is_object() ? s->find("properties") : nullptr;
      if (props != nullptr && props->find(k) != nullptr) return true;
    }
    return false;
  }

  // ObjectSchema.members_in_order: known members in schema order, each at most once, then
  // additional ones. A state is (next known key's index, whether a member came).
  Expr members_in_order(const Members& members, Expr additional,
                        const std::vector<std::string>& required) {
    const int32_t n = static_cast<int32_t>(members.size());
    Expr close = b_.literal("}");
    Expr ws_close = b_.seq(close_ws_, close);
    Expr more = additional != IrBuilder::kNothing ? b_.seq(sep_, additional) : kNoExpr;
    States<std::pair<int32_t, bool>, DenseNumbers> states({0, false});
    const StateEdges edges = states.edges([&](std::pair<int32_t, bool> at, EdgeList* outp) {
      const auto [i, started] = at;
      EdgeList& out = *outp;
      if (i < n) {
        const std::string& k = members[i].first;
        if (std::find(required.begin(), required.end(), k) == required.end())
          out.emplace_back(IrBuilder::kEmpty, states.state({i + 1, started}));
        Expr m = members[i].second;
        out.emplace_back(started ? b_.seq(sep_, m) : b_.seq(first_, m), states.state({i + 1, true}));
      } else {
        out.emplace_back(started ? ws_close : close, kAccept);
        if (more != kNoExpr) out.emplace_back(started ? more : b_.seq(first_, additional), states.state({n + 1, true}));
      }
    });
    return b_.seq(b_.literal("{"), ws_, automaton("obj", edges));
  }

  // _state_machine.automaton: one machine, or a rule per state when there are many states.
  Expr automaton(const char* hint, const StateEdges& edges) {
    const int32_t n = edges.size();
    if (size_t(n) <= kMachineStates) {
      std::vector<IrEdge> list;
      list.reserve(edges.edges.size());
      for (int32_t s = 0; s < n; ++s)
        for (int32_t i = edges.begin[s]; i < edges.begin[s + 1]; ++i) {
          const auto& [e, t] = edges.edges[i];
          list.push_back({s, e, t < 0 ? n : t});
        }
      std::vector<uint8_t> accept(n + 1, 0);
      accept[n] = 1;
      return b_.make_machine(IrSpan<IrEdge>(list), IrSpan<uint8_t>(accept));
    }
    std::vector<RuleId> names;
    for (int32_t s = 0; s < n; ++s) names.push_back(fresh(hint));
    for (int32_t s = 0; s < n; ++s) {
      std::vector<Expr> alts;
      for (int32_t i = edges.begin[s]; i < edges.begin[s + 1]; ++i) {
        const auto& [e, t] = edges.edges[i];
        alts.push_back(t < 0 ? e : b_.seq(e, b_.make_ref(names[t])));
      }
      rules_.set(names[s], b_.alt(IrSpan<Expr>(alts)));
    }
    return b_.make_ref(names[0]);
  }

  IrBuilder& b_;
  Resolver& r_;
  Options opt_;
  std::string prefix_;
  std::string* declined_;
  IrGrammar rules_;
  const IrPrelude* prelude_ = nullptr;
  Expr ws_, first_, sep_, close_ws_, colon_;
  int32_t counter_ = 0;
  std::unordered_map<const Value*, std::optional<std::string>, ValueHash> canon_;  // canon_of's
  const Value* last_canon_value_ = nullptr;  // canon_of's last answer (canon_ keeps it where it is)
  const std::optional<std::string>* last_canon_ = nullptr;
  std::vector<NodeId> key_nodes_;  // value()'s buffers for a context's key
  std::string key_text_;
  std::unordered_map<std::string, RuleId> names_;  // a context's key -> its rule
  std::unordered_set<std::string> empty_;          // contexts found empty before a body
  NodeMemo<std::optional<std::vector<uint8_t>>> spent_;
  int32_t contexts_ = 0;
  std::vector<Pending> bodies_;
  std::unordered_map<Expr, Expr> shared_;
  NodeMemo<Step> steps_;
  std::unordered_map<std::string, std::optional<std::vector<NodeId>>> expanded_;
  std::vector<uint32_t> expand_seen_, expand_kept_;  // expand's marks: node -> epoch of its last call
  uint32_t expand_epoch_ = 0;
  std::vector<NodeId> expand_todo_;
  std::string expand_key_;
  std::unordered_map<std::string, NodeId> synthetic_;
  std::unordered_map<std::string, Expr> key_bodies_;  // Converter.key_cache: additional keys' automata
  std::unordered_map<const Value*, std::optional<std::unordered_set<std::string>>, ValueHash> enum_keys_;
  std::unordered_map<uint64_t, int32_t> type_only_;  // (node, depth) -> atoms, or -1
  struct PairHash {
    size_t operator()(const std::pair<NodeId, const Value*>& p) const {
      return ValueHash()(p.second) * 31 + std::hash<NodeId>()(p.first);
    }
  };
  std::unordered_map<std::pair<NodeId, const Value*>, NodeId, PairHash> children_;  // child's memo
  std::unordered_map<std::pair<NodeId, const Value*>, bool, PairHash> held_;  // holds' answers
  NodeMemo<Said> said_;  // validate's look-ups
  std::deque<Document> docs_;
  std::unordered_map<std::string, const Value*> key_values_;  // key_value's documents
  std::unordered_map<std::string, uint32_t> dep_keys_;         // dep_key_id's numbers
  Patterns patterns_;     // the regex front-end's tables and caches
  StringSchema strings_;  // its character rules and intersections, one table per conversion
  NumberSchema numbers_;  // its number grammars by what the keywords say
  std::unique_ptr<IrPrelude> any_prelude_;
  std::unique_ptr<Document> true_doc_;
  std::unique_ptr<Resolver> true_resolver_;
};

// Converter.any_value: a conversion of `true` with the prefix "any." names the rules of any value;
// they join this grammar (a rule it has already, "ws", keeps its place) as its prelude, after the
// expressions every grammar's words start with.
RuleId Conv::any_value() {
  true_doc_ = std::make_unique<Document>();
  true_resolver_ = std::make_unique<Resolver>();
  if (!parse("true", true_doc_.get()).ok() || !true_resolver_->init(true_doc_->root())) {
    decline("the any-value conversion");
    return b_.rule("root");
  }
  Conv any(b_, *true_resolver_, opt_, "any.", declined_);
  RuleId root = b_.ref_rule(any.value({}, kAllAtoms));
  any.build_bodies();
  any_prelude_ = std::make_unique<IrPrelude>();
  any_prelude_->exprs = prelude_exprs();
  for (int32_t i = 0; i < any.rules_.size(); ++i) {
    any_prelude_->rules.emplace_back(any.rules_.rule_at(i), any.rules_.body_at(i));
    rules_.set(any.rules_.rule_at(i), any.rules_.body_at(i));
  }
  prelude_ = any_prelude_.get();
  return root;
}

}  // namespace

bool convert(const Value& root, const Options& options, Converted* out, std::string* declined) {
  declined->clear();
  // What the Python walk refuses anywhere in a keyword's value (a non-finite number, an integer
  // of more than 1,000 digits) is declined wherever it is.
  std::vector<const Value*> todo{&root};
  while (!todo.empty()) {
    const Value* v = todo.back();
    todo.pop_back();
    if ((v->is_number() && !std::isfinite(v->number())) ||
        (v->is_integer() && v->text().size() - (v->text()[0] == '-') > 1000)) {
      *declined = "a non-finite number or a huge integer";
      return false;
    }
    for (const Value& x : v->items()) todo.push_back(&x);
    for (const Member& m : v->members()) todo.push_back(&m.value);
  }
  Resolver r;
  const bool drop = !options.format_assertion, draft7 = options.draft7;
  auto uncovered = [drop, draft7](const Member& m) {
    // without_formats drops a string format, and moves any other to the end (or drops a null):
    // such an order is not this port's
    if (drop && m.key == "format") return !m.value.is_string();
    return constraining(m.key, draft7) && !covered(m.key, m.value);
  };
  if (!r.init(root, drop, uncovered)) {
    *declined = r.declined();
    return false;
  }
  IrBuilder b;
  Conv conv(b, r, options, "", declined);
  if (!conv.grammar()) return false;
  IrPrelude plain;  // converter.PRELUDE, where no rule of any value came in
  if (conv.prelude() == nullptr) plain.exprs = conv.prelude_exprs();
  conv.rules().prelude = conv.prelude() != nullptr ? conv.prelude() : &plain;
  Status s = b.serialize(conv.rules(), &out->words, &out->names);
  if (!s.ok()) {
    *declined = "serialize: " + s.message;
    return false;
  }
  return true;
}

}  // namespace tg::schema
