#include "refs.h"

#include <algorithm>

namespace tg::schema {

namespace {

constexpr size_t kMinNumbered = 64;  // _refs.MIN_NUMBERED

bool in(std::string_view key, std::initializer_list<std::string_view> keys) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// _keywords.NOTES, and _refs._SILENT (notes and definitions).
bool is_note(std::string_view k) {
  return in(k, {"title", "description", "examples", "default", "$comment", "deprecated", "readOnly", "writeOnly"});
}
bool is_silent(std::string_view k) { return is_note(k) || k == "$defs" || k == "definitions"; }

bool is_schema(const Value& v) { return v.is_object() || v.is_bool(); }

bool all_schemas(const Value& v) {
  for (const Value& x : v.items())
    if (!is_schema(x)) return false;
  return true;
}

bool is_strings(const Value& v) {
  if (!v.is_array()) return false;
  for (const Value& x : v.items())
    if (!x.is_string()) return false;
  return true;
}

bool is_type_name(const Value& v) {
  return v.is_string() && in(v.text(), {"null", "boolean", "integer", "number", "string", "array", "object"});
}

bool is_number(const Value& v) { return v.is_integer() || v.is_number(); }

bool is_count(const Value& v) {  // a non-negative integer, 2.0 counting as 2
  if (v.is_number()) return v.number() >= 0 && v.number() == static_cast<double>(static_cast<int64_t>(v.number()));
  return v.is_integer() && v.text()[0] != '-';
}

// _keywords.SHAPES: whether `key`'s value has the shape the specification gives it (keywords
// that are not listed are notes or unknown: any value).
bool shape_ok(std::string_view key, const Value& v) {
  if (in(key, {"not", "if", "then", "else", "contains", "propertyNames", "additionalProperties",
               "additionalItems", "unevaluatedItems", "unevaluatedProperties"}))
    return is_schema(v);
  if (in(key, {"allOf", "anyOf", "oneOf"})) return v.is_array() && v.size() > 0 && all_schemas(v);
  if (key == "prefixItems") return v.is_array() && all_schemas(v);
  if (key == "items") return is_schema(v) || (v.is_array() && all_schemas(v));
  if (in(key, {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})) {
    if (!v.is_object()) return false;
    for (const Member& m : v.members())
      if (!is_schema(m.value)) return false;
    return true;
  }
  if (key == "dependentRequired" || key == "dependencies") {
    if (!v.is_object()) return false;
    for (const Member& m : v.members())
      if (!is_strings(m.value) && !(key == "dependencies" && is_schema(m.value))) return false;
    return true;
  }
  if (key == "required") return is_strings(v);
  if (key == "enum") return v.is_array();
  if (key == "type") {
    if (v.is_string()) return is_type_name(v);
    if (!v.is_array() || v.size() == 0) return false;
    for (const Value& x : v.items())
      if (!is_type_name(x)) return false;
    return true;
  }
  if (in(key, {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains",
               "maxContains"}))
    return is_count(v);
  if (key == "minimum" || key == "maximum") return is_number(v);
  if (key == "exclusiveMinimum" || key == "exclusiveMaximum") return is_number(v) || v.is_bool();
  if (key == "multipleOf") {
    if (v.is_number()) return v.number() > 0;
    return v.is_integer() && v.text()[0] != '-' && v.text() != "0";
  }
  if (key == "uniqueItems") return v.is_bool();
  if (in(key, {"pattern", "format", "contentEncoding", "contentMediaType", "$ref", "$dynamicRef", "$id", "$anchor",
               "$dynamicAnchor", "$schema", "$recursiveRef"}))
    return v.is_string();
  return true;
}

// Keywords that name resources, anchors or dynamic scopes: not covered yet.
bool names_scope(std::string_view key) {
  return in(key, {"$id", "$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveRef", "$recursiveAnchor"});
}

// _keywords.SCHEMA_KEYWORDS, SCHEMA_LIST_KEYWORDS, SCHEMA_MAP_KEYWORDS: where subschemas are (a
// keyword's value, its items, or its values).
bool schema_keyword(std::string_view k) {
  return in(k, {"additionalProperties", "propertyNames", "additionalItems", "contains", "not", "if", "then", "else",
                "unevaluatedItems", "unevaluatedProperties", "contentSchema", "items"});
}
bool schema_list_keyword(std::string_view k) { return in(k, {"allOf", "anyOf", "oneOf", "prefixItems", "items"}); }
bool schema_map_keyword(std::string_view k) {
  return in(k, {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"});
}

// _keywords.subschemas: the subschemas of one keyword, as (token below the keyword, value).
void subschemas(std::string_view key, const Value& v, std::vector<Kid>* out) {
  out->clear();
  if (schema_keyword(key) && is_schema(v)) {
    out->push_back({"", &v});
    return;
  }
  if (schema_list_keyword(key) && v.is_array() && all_schemas(v)) {
    uint32_t i = 0;
    for (const Value& s : v.items()) out->push_back({"/" + std::to_string(i++), &s});
    return;
  }
  if (schema_map_keyword(key) && v.is_object()) {
    for (const Member& m : v.members())
      if (is_schema(m.value)) out->push_back({"/" + escape_pointer(m.key), &m.value});
  }
}

void put(std::string* out, std::string_view s) {
  *out += std::to_string(s.size());
  *out += ':';
  *out += s;
}


// _dialect._rewrite's places: a keyword's value that is one schema, a list of them, or a map of them.
enum Place : uint8_t { kNoPlace, kSchemaPlace, kListPlace, kMapPlace };
Place place_of(std::string_view key, const Value& v) {
  if (v.is_object() && schema_keyword(key)) return kSchemaPlace;
  if (v.is_array() && schema_list_keyword(key)) return kListPlace;
  if (v.is_object() && schema_map_keyword(key)) return kMapPlace;
  return kNoPlace;
}

// json.dumps of keyword `key`'s value as without_formats leaves it: a string `format` dropped
// from every schema object in its places, everything else as it is. Without recursion (the
// nesting is the document's).
void dump_without_formats(std::string_view key, const Value& value, std::string* out) {
  struct Frame {
    const Value* v;
    uint32_t i;
    Place place;
    bool any;
  };
  const Place top = place_of(key, value);
  if (top == kNoPlace) return dump(value, out);
  *out += top == kListPlace ? '[' : '{';
  std::vector<Frame> stack{{&value, 0, top, false}};
  while (!stack.empty()) {
    Frame& f = stack.back();
    const bool list = f.place == kListPlace;
    if (f.i == f.v->size()) {
      *out += list ? ']' : '}';
      stack.pop_back();
      continue;
    }
    const Value* x;
    Place inner;
    if (list) {
      x = &f.v->items()[f.i++];
      inner = x->is_object() ? kSchemaPlace : kNoPlace;
    } else {
      const Member& m = f.v->members()[f.i++];
      if (f.place == kSchemaPlace && m.key == "format" && m.value.is_string()) continue;
      x = &m.value;
      inner = f.place == kMapPlace ? (x->is_object() ? kSchemaPlace : kNoPlace) : place_of(m.key, *x);
      if (f.any) *out += ", ";
      dump_string(m.key, out);
      *out += ": ";
    }
    if (list && f.any) *out += ", ";
    f.any = true;
    if (inner == kNoPlace) {
      dump(*x, out);
      continue;
    }
    *out += inner == kListPlace ? '[' : '{';
    stack.push_back({x, 0, inner, false});  // (f is not used past this)
  }
}
}  // namespace

std::string escape_pointer(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (char c : token) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

bool Resolver::decline(std::string why) {
  if (declined_.empty()) declined_ = std::move(why);
  return false;
}

NodeId Resolver::intern(const Value* value, std::string pointer) {
  auto it = ids_.find(pointer);
  if (it != ids_.end()) return it->second;
  NodeId id = static_cast<NodeId>(nodes_.size());
  nodes_.push_back({value, std::move(pointer)});
  ids_.emplace(nodes_.back().pointer, id);  // (a view of the node's string, which stays where it is)
  return id;
}

bool Resolver::init(const Value& root, bool drop_formats, std::function<bool(const Member&)> uncovered) {
  drop_formats_ = drop_formats;
  uncovered_ = std::move(uncovered);
  if (!walk(&root, "", false)) return false;
  root_ = intern(&root, "");
  return true;
}

NodeId Resolver::child(std::string pointer, const Value* value) { return intern(value, std::move(pointer)); }

// Resolver._walk: every subschema below `root`, depth first in document order, its keywords
// checked; then numbered by what it says (Resolver._content) when there are enough of them.
bool Resolver::walk(const Value* root, const std::string& pointer, bool late) {
  struct Todo {
    const Value* schema;
    std::string pointer;
    Kid* kid;  // where the parent's kids list it (its node is written there), or null
  };
  std::vector<Todo> todo{{root, pointer, nullptr}};
  std::vector<NodeId> walked;
  std::vector<Kids> kids;  // per walked subschema
  std::vector<Kid> subs;
  std::vector<Todo> children;
  // The subschema's node, walked, and written where its parent lists it.
  const auto reach = [this](Todo* t) {
    const NodeId id = intern(t->schema, std::move(t->pointer));
    set_walked(id);
    if (t->kid != nullptr) t->kid->id = id;
    return id;
  };
  while (!todo.empty()) {
    Todo t = std::move(todo.back());
    todo.pop_back();
    const Value& s = *t.schema;
    if (!s.is_object()) {  // a boolean subschema
      reach(&t);
      continue;
    }
    children.clear();
    Kids mine;
    uint32_t index = 0;
    for (const Member& m : s.members()) {
      uint32_t at_member = index++;
      // the document's own `$id` names the one resource every reference here stays in
      if (names_scope(m.key) && !(m.key == "$id" && t.pointer.empty() && !late && m.value.is_string()))
        return decline(std::string(m.key) + " at " + t.pointer);
      // without_formats rewrites the schema's own places only, not a folder of definitions
      if (late && drop_formats_ && m.key == "format") return decline("format in a folder of definitions");
      if (m.value.is_string() && is_note(m.key)) continue;
      if (uncovered_ && !late && uncovered_(m)) return decline(std::string(m.key) + " at " + t.pointer);
      if (!shape_ok(m.key, m.value)) return decline("malformed " + std::string(m.key) + " at " + t.pointer);
      subschemas(m.key, m.value, &subs);
      if (subs.empty()) continue;
      std::string at = t.pointer + "/" + escape_pointer(m.key);
      for (const Kid& k : subs) children.push_back({k.value, at + k.token, nullptr});
      mine.emplace_back(at_member, subs);
    }
    walked.push_back(reach(&t));
    kids.push_back(std::move(mine));
    // the children, each told where its node goes: into kids' lists, whose elements stay where
    // they are as kids grows (a moved vector keeps its elements)
    size_t c = 0;
    for (auto& [index, list] : kids.back())
      for (Kid& k : list) children[c++].kid = &k;
    for (auto it = children.rbegin(); it != children.rend(); ++it) todo.push_back(std::move(*it));
  }
  if (walked.size() >= kMinNumbered || (late && !content_.empty())) number(walked, kids);
  return true;
}

// Resolver._content: equal numbers for subschemas that say the same (the same keywords in the
// same order, with equal values and subschemas of equal numbers), notes and definitions aside.
// Children come after their parents in `walked`, so they are numbered from the end.
void Resolver::number(const std::vector<NodeId>& walked, const std::vector<Kids>& kids) {
  content_.resize(nodes_.size(), 0);  // (a walk interns its nodes before numbering them)
  std::string said;
  for (size_t w = walked.size(); w-- > 0;) {
    const Node& n = nodes_[walked[w]];
    said.clear();
    const auto& mine = kids[w];
    size_t next = 0;
    uint32_t index = 0;
    for (const Member& m : n.schema->members()) {
      uint32_t at_member = index++;
      const std::vector<Kid>* subs = nullptr;
      while (next < mine.size() && mine[next].first < at_member) ++next;
      if (next < mine.size() && mine[next].first == at_member) subs = &mine[next].second;
      if (is_silent(m.key) || (drop_formats_ && m.key == "format" && m.value.is_string())) continue;
      put(&said, m.key);
      const Value& v = m.value;
      // (the Python compares with the value's size after without_formats: one schema's string format dropped)
      const Value* f = drop_formats_ && place_of(m.key, v) == kSchemaPlace ? v.find("format") : nullptr;
      const size_t size = v.is_object() ? v.size() - (f != nullptr && f->is_string()) : 0;
      if (subs != nullptr && (!v.is_object() || subs->size() == size)) {
        said += 'S';
        said += std::to_string(subs->size());
        for (const Kid& k : *subs) {
          put(&said, k.token);
          if (k.value->is_bool()) {
            said += k.value->boolean() ? 'T' : 'F';
          } else {
            said += '#';
            said += std::to_string(content_[k.id]);
          }
          said += ';';
        }
      } else if (v.is_string()) {
        said += 's';
        put(&said, v.text());
      } else {
        // the type tells 1, 1.0, true and "1" apart (Python's tuple holds the type)
        switch (v.kind()) {
          case Kind::null: said += "n"; break;
          case Kind::boolean: said += v.boolean() ? "bT" : "bF"; break;
          case Kind::integer: said += 'i'; put(&said, v.text()); break;
          case Kind::number: said += 'f'; put(&said, v.text()); break;
          default: {
            // the text of the schema as without_formats leaves it (the Python numbers that copy)
            said += v.is_array() ? 'l' : 'd';
            std::string text;
            if (drop_formats_) dump_without_formats(m.key, v, &text);
            else dump(v, &text);
            put(&said, text);
            break;
          }
        }
      }
    }
    auto it = numbers_.emplace(said, static_cast<int32_t>(numbers_.size()) + 1).first;
    content_[walked[w]] = it->second;
  }
}

int32_t Resolver::number_of(NodeId id) const {
  return size_t(id) < content_.size() ? content_[id] : 0;
}

NodeId Resolver::canonical(NodeId id) {
  const int32_t number = number_of(id);  // (only walked nodes are numbered)
  if (number == 0) return id;
  return canonical_.emplace(number, id).first->second;
}

bool Resolver::follow(NodeId id, NodeId* target) {
  const Value* ref = nodes_[id].schema->find("$ref");
  if (ref == nullptr || !ref->is_string()) return decline("$ref is not a string at " + nodes_[id].pointer);
  std::string key(ref->text());
  auto known = resolved_.find(key);
  if (known != resolved_.end()) {
    *target = known->second;
    return true;
  }
  // Only a fragment that is a JSON pointer (or empty) in this document; no percent-escapes.
  if (key.empty() || key[0] != '#' || key.find('%') != std::string::npos)
    return decline("reference " + key + " at " + nodes_[id].pointer);
  std::string fragment = key.substr(1);
  if (!fragment.empty() && fragment[0] != '/') return decline("anchor reference " + key);
  if (!pointer_target(fragment, target)) return false;
  resolved_.emplace(key, *target);
  return true;
}

// Resolver._pointer from the document root: the walked node there, or the subschema inside an
// unknown keyword (a folder of definitions), walked now.
bool Resolver::pointer_target(const std::string& fragment, NodeId* target) {
  const Value* value = nodes_[root_].schema;
  std::string pointer;
  size_t at = fragment.empty() ? std::string::npos : 1;
  while (at != std::string::npos) {
    size_t end = fragment.find('/', at);
    std::string raw = fragment.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? end : end + 1;
    std::string token;  // "~1" -> "/", then "~0" -> "~", as Python's two replaces
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '~' && i + 1 < raw.size() && raw[i + 1] == '1') {
        token += '/';
        ++i;
      } else {
        token += raw[i];
      }
    }
    for (size_t i = 0; (i = token.find("~0", i)) != std::string::npos; ++i) token.replace(i, 2, "~");
    pointer += "/" + escape_pointer(token);
    if (value->is_object()) {
      value = value->find(token);
      if (value == nullptr) return decline("reference to nothing at " + pointer);
    } else if (value->is_array()) {
      // digits only, no leading zero: Python would also take "01" (a pointer of its own)
      bool digits = !token.empty() && token.size() < 10 && (token == "0" || token[0] != '0') &&
                    std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits || std::stoul(token) >= value->size()) return decline("reference to nothing at " + pointer);
      value = &value->items()[static_cast<uint32_t>(std::stoul(token))];
    } else {
      return decline("reference to nothing at " + pointer);
    }
  }
  const auto known = ids_.find(pointer);
  if (known != ids_.end() && is_walked(known->second) && nodes_[known->second].schema == value) {
    *target = known->second;
    return true;
  }
  if (!is_schema(*value)) return decline("reference to a non-schema at " + pointer);
  if (value->is_object() && value->find("$id") != nullptr) return decline("$id at " + pointer);
  if (!walk(value, pointer, true)) return false;
  *target = ids_.at(pointer);
  return true;
}

}  // namespace tg::schema
