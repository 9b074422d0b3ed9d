#include "converter.h"

#include <algorithm>
#include <cmath>
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
bool constraining(std::string_view k, bool draft7) {
  return in(k, {"type", "enum", "const", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "minimum",
                "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
                "pattern", "format", "items", "prefixItems", "additionalItems", "contains", "minContains",
                "maxContains", "minItems", "maxItems", "uniqueItems", "properties", "required",
                "additionalProperties", "patternProperties", "propertyNames", "minProperties", "maxProperties",
                "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedItems",
                "unevaluatedProperties", "$recursiveRef", "$trellis:notConst", "$trellis:notPattern",
                "$trellis:notFormat", "$trellis:notMultipleOf", "$trellis:someProperty"}) ||
         (draft7 && (k == "contentMediaType" || k == "contentEncoding"));
}

// The constraining keywords this port builds (README.md's first step); a subschema with any
// other declines the document.
bool covered(std::string_view k, const Value& v) {
  if (in(k, {"type", "enum", "const", "allOf", "anyOf", "oneOf", "properties", "required", "additionalProperties",
             "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
             "exclusiveMaximum", "multipleOf", "pattern", "format"}))
    return true;
  if (in(k, {"items", "prefixItems", "additionalItems"})) return true;
  if (k == "patternProperties") return v.is_object();
  if (k == "uniqueItems") return v.is_bool();
  return false;
}

// _keywords.VALUE_LIST: a subschema of only these is a list of values with a type.
bool value_list_key(std::string_view k) {
  return in(k, {"title", "description", "examples", "default", "$comment", "deprecated", "readOnly", "writeOnly",
                "contentEncoding", "contentMediaType", "contentSchema", "$schema", "$id", "$anchor",
                "$dynamicAnchor", "$recursiveAnchor", "$defs", "definitions", "$vocabulary", "enum", "const",
                "type"});
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

// The splits a context's cases have made (body's `done`): (node, kind) markers, sorted.
using Done = std::vector<uint64_t>;
enum SplitKind : uint8_t { kIf = 0, kAnyOf = 1, kOneOf = 2, kNot = 3 };
uint64_t marker(NodeId n, uint8_t kind) { return uint64_t(uint32_t(n)) << 8 | kind; }
Done with(const Done& done, uint64_t m) {
  Done out(done);
  out.insert(std::lower_bound(out.begin(), out.end(), m), m);
  return out;
}

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
    std::vector<NodeId> ex = split ? unspent(*found, done) : *found;
    std::vector<NodeId> keys(ex);
    std::sort(keys.begin(), keys.end());
    Done splits;
    for (uint64_t m : done)
      if (std::binary_search(keys.begin(), keys.end(), NodeId(m >> 8))) splits.push_back(m);
    std::string key(reinterpret_cast<const char*>(keys.data()), keys.size() * sizeof(NodeId));
    key += static_cast<char>(atoms);
    key.append(reinterpret_cast<const char*>(splits.data()), splits.size() * sizeof(uint64_t));
    auto known = names_.find(key);
    if (known != names_.end()) return b_.make_ref(known->second);
    if (keys.empty() && atoms == kAllAtoms && splits.empty() && prefix_.empty()) {
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
    bodies_.push_back({name, std::move(ex), atoms, done});
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
    auto known = spent_.find(n);
    if (known != spent_.end()) return known->second ? &*known->second : nullptr;
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
    auto& slot = spent_[n];
    if (covered_all) slot = std::move(markers);
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
    return r_.child(r_.node(n).pointer + "/" + escape_pointer(key) + token, value);
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
    auto known = steps_.find(id);
    if (known != steps_.end()) return known->second;
    Step st;
    const Value* s = r_.node(id).schema;
    if (s->is_bool()) {
      st.is_false = !s->boolean();
      return steps_.emplace(id, st).first->second;
    }
    if (s->find("$ref") != nullptr) {
      NodeId target;
      if (!r_.follow(id, &target)) decline(r_.declined());
      else if (opt_.draft7) st.first = target;
      else st.then.push_back(target);
      if (st.first >= 0) return steps_.emplace(id, st).first->second;
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
        st.then.push_back(child(node, "allOf", &canon_all->items()[i], "/" + std::to_string(i)));
    }
    return steps_.emplace(id, st).first->second;
  }

  // Converter.expand: allOf and $ref flattened; nullptr where some subschema is `false`.
  const std::vector<NodeId>* expand(const std::vector<NodeId>& nodes) {
    std::string key(reinterpret_cast<const char*>(nodes.data()), nodes.size() * sizeof(NodeId));
    auto known = expanded_.find(key);
    if (known != expanded_.end()) return known->second ? &*known->second : nullptr;
    std::vector<NodeId> out;
    std::vector<char> seen, kept;
    std::deque<NodeId> todo(nodes.begin(), nodes.end());
    bool is_false = false;
    auto mark = [](std::vector<char>* v, NodeId id) {
      if (v->size() <= size_t(id)) v->resize(id + 1, 0);
      bool was = (*v)[id];
      (*v)[id] = 1;
      return was;
    };
    while (!todo.empty() && !failed()) {
      NodeId n = todo.front();
      todo.pop_front();
      if (mark(&seen, n)) continue;
      const Step& st = step(n);
      if (st.is_false) {
        is_false = true;
        break;
      }
      if (st.first >= 0) {
        todo.push_front(st.first);
        continue;
      }
      if (st.said >= 0 && !mark(&kept, st.said)) out.push_back(st.said);
      todo.insert(todo.end(), st.then.begin(), st.then.end());
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
    for (NodeId n : nodes) atoms &= type_atoms(r_.node(n).schema);
    if (atoms == 0) return IrBuilder::kNothing;
    std::vector<const Value*> cands;
    if (finite_values(nodes, &cands)) {
      std::vector<NodeId> asked;
      for (NodeId n : nodes) {
        for (const Member& m : r_.node(n).schema->members()) {
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
          if (!(atoms & kAtomString)) continue;
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
    // anyOf / oneOf: a case per branch (a oneOf where no two branches can both hold)
    for (NodeId n : nodes) {
      const Value* s = r_.node(n).schema;
      for (uint8_t kind : {kAnyOf, kOneOf}) {
        const Value* list = s->find(kind == kAnyOf ? "anyOf" : "oneOf");
        uint64_t m = marker(n, kind);
        if (list == nullptr || std::binary_search(done.begin(), done.end(), m)) continue;
        std::vector<NodeId> branches;
        for (uint32_t i = 0; i < list->size(); ++i)
          branches.push_back(child(n, kind == kAnyOf ? "anyOf" : "oneOf", &list->items()[i], "/" + std::to_string(i)));
        distribute(int32_t(branches.size()));
        uint8_t clear = kind == kAnyOf ? atoms : disjoint_atoms(nodes, branches, atoms);
        if (clear != atoms) {  // overlapping oneOf branches need negations: not ported yet
          decline("oneOf with overlapping branches");
          return IrBuilder::kNothing;
        }
        Done after = with(done, m);
        std::vector<Expr> parts;
        for (NodeId b : branches) {
          std::vector<NodeId> case_nodes(nodes);
          case_nodes.push_back(b);
          parts.push_back(value(case_nodes, clear, after));
        }
        return b_.alt(IrSpan<Expr>(parts));
      }
    }
    std::vector<Expr> parts;
    if (atoms & kAtomNull) parts.push_back(b_.literal("null"));
    if (atoms & kAtomBoolean) {
      parts.push_back(b_.literal("true"));
      parts.push_back(b_.literal("false"));
    }
    if (atoms & (kAtomInt | kAtomFrac)) parts.push_back(number(nodes, atoms));
    if (atoms & kAtomString) parts.push_back(string(nodes));
    if (atoms & kAtomArray) parts.push_back(array(nodes));
    if (atoms & kAtomObject) parts.push_back(object(nodes));
    return b_.alt(IrSpan<Expr>(parts));
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
      if (s->find("not") != nullptr) decline("not");
      if (depth < 8) {
        for (const char* comb : {"anyOf", "oneOf"}) {
          const Value* bs = s->find(comb);
          if (bs == nullptr || !bs->is_array()) continue;
          uint8_t any = 0;
          for (uint32_t i = 0; i < bs->size(); ++i)
            any |= static_atoms({child(n, comb, &bs->items()[i], "/" + std::to_string(i))}, depth + 1);
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
          for (const Value* v : values) keys.push_back(canon(*v).value_or(""));
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
  // patterns_disjoint (the product of the two sides' `pattern` automata) is not ported: where
  // the Python finds two such sides disjoint this says false, and the oneOf then declines.
  bool objects_disjoint(const Shape& a, const Shape& b) {
    std::vector<std::string> keys(a.required);
    for (const std::string& k : b.required)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    for (const std::string& k : keys) {
      std::vector<NodeId> ea, eb;
      for (NodeId n : a.expanded) member_nodes(n, k, &ea);
      for (NodeId n : b.expanded) member_nodes(n, k, &eb);
      std::vector<NodeId> both(ea);
      both.insert(both.end(), eb.begin(), eb.end());
      if (no_value(both)) return true;
      // patterns_disjoint's first answer: a side with no value at all
      if (!ea.empty() && !eb.empty() && expand(ea) == nullptr) return true;
    }
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
        if (v != nullptr) entries.push_back(child(n, "properties", v, "/" + escape_pointer(k)));
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
    for (NodeId n : list)
      if (r_.node(n).schema->find("not") != nullptr) decline("not");
    std::vector<const Value*> cands;
    return finite_values(list, &cands) && cands.empty();
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
          auto k = canon(*x);
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
            if (have.count(*canon(*c))) still.push_back(c);
          *out = std::move(still);
        }
      }
    }
    return any;
  }

  // Validator.valid for a scalar candidate and the covered keywords (what is not a scalar's,
  // such as `properties`, holds for every scalar).
  bool holds(const Value& v, NodeId id, int32_t depth = 0) {
    const Value* s = r_.node(id).schema;
    if (s->is_bool()) return s->boolean();
    if (depth > kValidatorDepth) {
      decline("a reference chain too deep to evaluate");
      return false;
    }
    if (s->find("$ref") != nullptr) {
      NodeId target;
      if (!r_.follow(id, &target)) return decline(r_.declined());
      if (!holds(v, target, depth + 1)) return false;
      if (opt_.draft7) return true;
    }
    if (type_atoms(s) != kAllAtoms && !(type_atoms(s) & atom_of(v))) return false;
    auto key = canon(v);
    if (const Value* c = s->find("const")) {
      auto ck = canon(*c);
      if (!ck) return decline("a const that is not a scalar");
      if (*ck != *key) return false;
    }
    if (const Value* e = s->find("enum")) {
      bool found = false;
      for (const Value& x : e->items()) {
        auto xk = canon(x);  // (a float could equal an integer: not covered)
        if (!xk) return decline("an enum that is not of strings, null, booleans and integers");
        if (*xk == *key) found = true;
      }
      if (!found) return false;
    }
    if (v.is_integer() || v.is_number()) {  // bounds compared exactly, as Decimals
      Decimal d;
      if (!to_decimal(v, &d)) return decline("a candidate number");
      for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
        const Value* b = s->find(key);
        if (b == nullptr) continue;
        Decimal bound;
        if (b->is_bool() || !to_decimal(*b, &bound)) return decline("a bound");
        int c = compare(d, bound);
        std::string_view k(key);
        if ((k == "minimum" && c < 0) || (k == "maximum" && c > 0) || (k == "exclusiveMinimum" && c <= 0) ||
            (k == "exclusiveMaximum" && c >= 0))
          return false;
      }
      if (s->find("multipleOf") != nullptr) return decline("multipleOf of a candidate");
    }
    if (v.is_string()) {  // lengths in code points (Python's len)
      int64_t n = 0, lo = 0, hi = -1;
      for (unsigned char c : v.text()) n += (c & 0xC0) != 0x80;
      if (!count_bounds(id, "minLength", "maxLength", &lo, &hi)) return false;
      if (n < lo || (hi >= 0 && n > hi)) return false;
      if (const Value* p = s->find("pattern")) {
        if (!p->is_string()) return decline("a pattern that is not a string");
        int found = patterns_.pattern_search(p->text(), v.text());
        if (found < 0) return decline("a pattern's search: " + patterns_.why());
        if (!found) return false;
      }
      const Value* fm = s->find("format");
      if (fm != nullptr && !(r_.drops_formats() && fm->is_string())) return decline("validation of format");
    }
    if (const Value* all = s->find("allOf")) {
      for (uint32_t i = 0; i < all->size(); ++i)
        if (!holds(v, child(id, "allOf", &all->items()[i], "/" + std::to_string(i)), depth + 1)) return false;
    }
    for (const char* comb : {"anyOf", "oneOf"}) {
      const Value* list = s->find(comb);
      if (list == nullptr) continue;
      bool listed = true, both = false;  // Validator._listed_values: every branch a list of values
      for (const Value& b : list->items()) {
        bool values = b.is_object() && (b.find("enum") || b.find("const"));
        for (const Member& m : b.members()) values = values && value_list_key(m.key);
        listed = listed && values;
        both = both || (values && b.find("enum") && b.find("const"));
      }
      if (listed && both) return decline("a listed branch with enum and const");  // (the Python reads its enum alone)
      int32_t held = 0;
      for (uint32_t i = 0; i < list->size(); ++i)
        held += holds(v, child(id, comb, &list->items()[i], "/" + std::to_string(i)), depth + 1);
      if (failed()) return false;
      if (std::string_view(comb) == "anyOf" ? held < 1 : held != 1) return false;
    }
    for (const Member& m : s->members())
      if (constraining(m.key, opt_.draft7) && !dropped(m) && !covered(m.key, m.value))
        return decline("validation of " + std::string(m.key));
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
  // StringSchema.string_facts and string: lengths, patterns and enforced formats.
  Expr string(const std::vector<NodeId>& nodes) {
    StringFacts f;
    int64_t hi = -1;
    for (NodeId n : nodes) {
      if (!count_bounds(n, "minLength", "maxLength", &f.lo, &hi)) return IrBuilder::kNothing;
      const Value* s = r_.node(n).schema;
      if (!s->is_object()) continue;
      if (const Value* p = s->find("pattern")) {
        if (!p->is_string()) return decline("a pattern that is not a string"), IrBuilder::kNothing;
        f.parts.push_back({false, std::string(p->text())});
      }
      const Value* fm = s->find("format");
      if (fm == nullptr || (r_.drops_formats() && fm->is_string())) continue;
      if (!fm->is_string()) return decline("a format that is not a string"), IrBuilder::kNothing;
      if (fm->text() != "regex") {
        Expr e = patterns_.format_expr(fm->text());
        if (e == kNoExpr) return decline("format " + std::string(fm->text())), IrBuilder::kNothing;
        if (e == kNoFormat) continue;  // an annotation: a format nobody defines
      }
      f.parts.push_back({true, std::string(fm->text())});
    }
    f.hi = hi < 0 ? kUnbounded : hi;
    Expr e = strings_.string(f);
    if (e == kNoExpr) decline("string keywords: " + patterns_.why());
    return e == kNoExpr ? IrBuilder::kNothing : e;
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
          p.items.push_back(child(n, tuple_key, &tuple->items()[i], "/" + std::to_string(i)));
        const char* rest_key = tuple == items ? "additionalItems" : "items";
        const Value* rest = s->find(rest_key);
        if (rest != nullptr && (rest->is_object() || rest->is_bool())) p.rest = child(n, rest_key, rest);
        else if (rest != nullptr && tuple == items) return decline("additionalItems that is not a schema"), kNothing;
      } else if (items != nullptr && (items->is_object() || items->is_bool())) {
        p.rest = child(n, "items", items);
      }
      if (!p.items.empty() || p.rest >= 0) prefixes.push_back(std::move(p));
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
    Expr item_end = IrBuilder::kEmpty;
    if (unique) {
      std::vector<std::vector<NodeId>> positions;
      for (size_t i = 0; i < width; ++i) positions.push_back(position_nodes(i));
      positions.push_back(rest_nodes);
      if (!open_values(positions)) return decline("uniqueItems over a small finite set"), kNothing;
      item_end = b_.make_check(kUniqueItem);  // each item checked against the ones before it
    }
    std::vector<Expr> elems;
    for (size_t i = 0; i < width; ++i) elems.push_back(b_.seq(value(position_nodes(i), kAllAtoms), item_end));
    Expr rest = b_.seq(value(rest_nodes, kAllAtoms), item_end);
    Expr out = array_shape(elems, rest, lo, hi);
    return unique ? b_.make_region(out) : out;
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

  // Whether array_unique refuses (unique_candidates): some position's values are not few and
  // known, or all of them together are more than 8. False where it would build its machine.
  bool open_values(const std::vector<std::vector<NodeId>>& positions) {
    std::vector<std::string> seen;
    for (const std::vector<NodeId>& nodes : positions) {
      const std::vector<NodeId>* ex = expand(nodes);
      if (ex == nullptr) continue;
      const std::vector<NodeId> expanded(*ex);
      std::vector<const Value*> cands;
      if (!finite_values(expanded, &cands)) {
        if ((static_atoms(expanded) & ~(kAtomNull | kAtomBoolean)) == 0)
          return decline("uniqueItems over nulls and booleans"), false;  // (type_only is not ported)
        return true;
      }
      size_t kept = 0;
      for (const Value* v : cands) {
        bool all = true;
        for (NodeId n : expanded) all = all && holds(*v, n);
        if (failed()) return false;
        if (!all) continue;
        ++kept;
        std::string k = *canon(*v);
        if (std::find(seen.begin(), seen.end(), k) == seen.end()) seen.push_back(k);
      }
      if (kept > 8) return true;
    }
    return seen.size() > 8;
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
      if (const Value* v = props->find(k)) out->push_back(child(n, "properties", v, "/" + escape_pointer(k)));
    const Value* pats = s->find("patternProperties");
    if (pats != nullptr && pats->is_object())
      for (const Member& m : pats->members())
        if (matches(m.key, k)) out->push_back(child(n, "patternProperties", &m.value, "/" + escape_pointer(m.key)));
    if (out->size() == before)
      if (const Value* a = s->find("additionalProperties")) out->push_back(child(n, "additionalProperties", a));
  }

  // _text.pattern_search: whether a pattern matches anywhere in a key (false where it declines).
  bool matches(std::string_view pattern, std::string_view key) {
    int found = patterns_.pattern_search(pattern, key);
    if (found < 0) decline("a pattern's search: " + patterns_.why());
    return found > 0;
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
    auto add = [](std::vector<std::string>* v, std::string_view k) {
      if (std::find(v->begin(), v->end(), k) == v->end()) v->emplace_back(k);
    };
    std::vector<Pattern> patterns;  // ObjectFacts.patterns: (node, pattern) in the nodes' order
    for (NodeId n : nodes) {
      const Value* s = r_.node(n).schema;
      if (!s->is_object()) continue;
      if (const Value* props = s->find("properties"))
        for (const Member& m : props->members()) add(&order, m.key);
      if (const Value* req = s->find("required"))
        for (const Value& k : req->items()) add(&required, k.text());
      if (const Value* pats = s->find("patternProperties")) {
        for (const Member& m : pats->members()) {
          if (patterns_.pattern_expr(m.key) == kNoExpr) return decline("patternProperties: " + patterns_.why()), kNothing;
          patterns.push_back({n, &m});
        }
      }
    }
    for (const std::string& k : required) add(&order, k);
    for (const std::string& k : required)  // the Python's witnesses of negations are such keys
      if (!k.empty() && k[0] == '\0') return decline("a required key starting with NUL"), kNothing;
    NodeId closed = strict_close(nodes);
    std::vector<std::pair<std::string, Expr>> members;
    for (const std::string& k : order) {
      std::vector<NodeId> knodes;
      for (NodeId n : nodes) member_nodes(n, k, &knodes);
      if (closed >= 0 && !names_property(nodes, k)) {
        bool matched = false;
        for (const Pattern& p : patterns) matched = matched || matches(p.member->key, k);
        if (!matched) knodes.push_back(closed);
      }
      Expr v = value(knodes, kAllAtoms);
      if (v == IrBuilder::kNothing) {
        if (std::find(required.begin(), required.end(), k) != required.end()) return IrBuilder::kNothing;
        continue;
      }
      Expr lit = string_literal(k);
      members.emplace_back(k, shared(b_.seq(lit, colon_, v), "member"));
    }
    if (members.size() > kMaxOrderedProperties) {
      decline("more properties than the limit");
      return IrBuilder::kNothing;
    }
    Expr additional = shared(additional_member(nodes, order, patterns, closed), "extra");
    Expr out = members_in_order(members, additional, required);
    return additional == IrBuilder::kNothing ? out : b_.make_region(out);
  }

  struct Pattern {
    NodeId node;
    const Member* member;  // the patternProperties entry: the pattern and its schema
  };

  // ObjectSchema.additional_member: members whose key is not a known one, one alternative per
  // set of the patterns it matches (its key the product of the patterns, matched or not, and of
  // "none of the known keys"); each key is checked to differ from the keys before it.
  Expr additional_member(const std::vector<NodeId>& nodes, const std::vector<std::string>& known,
                         const std::vector<Pattern>& patterns, NodeId closed) {
    if (patterns.size() > 4) return decline("more than 4 patternProperties in one place"), kNothing;
    std::vector<Expr> parts;
    for (uint32_t mask = 0; mask < (1u << patterns.size()); ++mask) {
      std::vector<NodeId> vnodes;
      for (NodeId n : nodes) {
        bool mine = false;
        for (size_t i = 0; i < patterns.size(); ++i) {
          if (!(mask >> i & 1) || patterns[i].node != n) continue;
          const Member& m = *patterns[i].member;
          vnodes.push_back(child(n, "patternProperties", &m.value, "/" + escape_pointer(m.key)));
          mine = true;
        }
        const Value* s = r_.node(n).schema;
        if (!mine && s->is_object())
          if (const Value* a = s->find("additionalProperties")) vnodes.push_back(child(n, "additionalProperties", a));
      }
      if (closed >= 0 && mask == 0) vnodes.push_back(closed);  // the keys no pattern of the place takes
      Expr v = value(vnodes, kAllAtoms);
      if (v == kNothing) continue;
      if (patterns.empty()) {
        parts.push_back(b_.seq(any_key(), distinct_key(known), colon_, v));
        continue;
      }
      std::string sig = std::to_string(mask);
      for (const std::string& k : known) sig += "\1" + std::to_string(k.size()) + ":" + k;
      for (const Pattern& p : patterns) sig += "\2" + std::to_string(p.member->key.size()) + ":" + std::string(p.member->key);
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
        Expr key = intersection(IrSpan<Expr>(items), IrSpan<uint8_t>(wants), "patternProperties", "", true);
        cached = key_bodies_.emplace(std::move(sig), b_.seq(key, b_.literal("\""))).first;
      }
      parts.push_back(b_.seq(b_.literal("\""), cached->second, distinct_key({}), colon_, v));
    }
    return b_.alt(IrSpan<Expr>(parts));
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
  Expr members_in_order(const std::vector<std::pair<std::string, Expr>>& members, Expr additional,
                        const std::vector<std::string>& required) {
    const int32_t n = static_cast<int32_t>(members.size());
    Expr close = b_.literal("}");
    Expr ws_close = b_.seq(close_ws_, close);
    Expr more = additional != IrBuilder::kNothing ? b_.seq(sep_, additional) : kNoExpr;
    std::vector<std::pair<int32_t, bool>> order{{0, false}};
    std::map<std::pair<int32_t, bool>, int32_t> numbers{{{0, false}, 0}};
    auto number = [&](int32_t i, bool started) {
      auto it = numbers.emplace(std::make_pair(i, started), int32_t(order.size()));
      if (it.second) order.emplace_back(i, started);
      return it.first->second;
    };
    constexpr int32_t kAccept = -1;
    std::vector<std::vector<std::pair<Expr, int32_t>>> edges;
    while (edges.size() < order.size()) {
      auto [i, started] = order[edges.size()];
      std::vector<std::pair<Expr, int32_t>> out;
      if (i < n) {
        const std::string& k = members[i].first;
        if (std::find(required.begin(), required.end(), k) == required.end())
          out.emplace_back(IrBuilder::kEmpty, number(i + 1, started));
        Expr m = members[i].second;
        out.emplace_back(started ? b_.seq(sep_, m) : b_.seq(first_, m), number(i + 1, true));
      } else {
        out.emplace_back(started ? ws_close : close, kAccept);
        if (more != kNoExpr) out.emplace_back(started ? more : b_.seq(first_, additional), number(n + 1, true));
      }
      edges.push_back(std::move(out));
    }
    return b_.seq(b_.literal("{"), ws_, automaton("obj", edges));
  }

  // _state_machine.automaton: one machine, or a rule per state when there are many states.
  Expr automaton(const char* hint, const std::vector<std::vector<std::pair<Expr, int32_t>>>& edges) {
    const int32_t n = static_cast<int32_t>(edges.size());
    if (size_t(n) <= kMachineStates) {
      std::vector<IrEdge> list;
      for (int32_t s = 0; s < n; ++s)
        for (auto& [e, t] : edges[s]) list.push_back({s, e, t < 0 ? n : t});
      std::vector<uint8_t> accept(n + 1, 0);
      accept[n] = 1;
      return b_.make_machine(IrSpan<IrEdge>(list), IrSpan<uint8_t>(accept));
    }
    std::vector<RuleId> names;
    for (int32_t s = 0; s < n; ++s) names.push_back(fresh(hint));
    for (int32_t s = 0; s < n; ++s) {
      std::vector<Expr> alts;
      for (auto& [e, t] : edges[s]) alts.push_back(t < 0 ? e : b_.seq(e, b_.make_ref(names[t])));
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
  std::unordered_map<std::string, RuleId> names_;  // a context's key -> its rule
  std::unordered_set<std::string> empty_;          // contexts found empty before a body
  std::unordered_map<NodeId, std::optional<std::vector<uint8_t>>> spent_;
  int32_t contexts_ = 0;
  std::vector<Pending> bodies_;
  std::unordered_map<Expr, Expr> shared_;
  std::unordered_map<NodeId, Step> steps_;
  std::unordered_map<std::string, std::optional<std::vector<NodeId>>> expanded_;
  std::unordered_map<std::string, NodeId> synthetic_;
  std::unordered_map<std::string, Expr> key_bodies_;  // Converter.key_cache: additional keys' automata
  std::deque<Document> docs_;
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
