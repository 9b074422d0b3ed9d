// The subschemas of one document and `$ref` between them: json_schema/_refs.py (Resolver) and
// _keywords.py (the shapes checked on the walk), for the documents this port covers: no `$id`,
// anchors or dynamic references, references that are JSON pointers into the document. Any other
// document, and any keyword the Python walk would refuse, is declined (see README.md): the
// Python converter then runs and raises its own error.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "json.h"

namespace tg::schema {

using NodeId = int32_t;

// A subschema where it is: its value and its JSON pointer from the document root (Python's Node
// with the default base and no dynamic scope). Equal pointers are one node.
struct Node {
  const Value* schema;
  std::string pointer;
};

// Where a walked subschema's own subschemas are: per keyword (the member's index in the
// subschema), the pointer tokens below the keyword and the values (_keywords.subschemas).
struct Kid {
  std::string token;  // "" (the keyword's value), "/3" or "/name" (escaped)
  const Value* value;
  NodeId id = -1;  // its node, once the walk reaches it
};

class Resolver {
 public:
  // Walks the document: false (and `declined()` says why) where this port does not cover it.
  // `drop_formats`: a string `format` is an annotation, as if absent (_dialect.without_formats).
  // `uncovered`: a keyword the caller does not build, which declines the document at once (the
  // walk meets every subschema before any is built: a declined schema costs only the walk).
  bool init(const Value& root, bool drop_formats = false,
            std::function<bool(const Member&)> uncovered = nullptr);
  bool drops_formats() const { return drop_formats_; }
  const std::string& declined() const { return declined_; }

  NodeId root() const { return root_; }
  const Node& node(NodeId id) const { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }
  // A walked subschema's number (what it says), 0 when it has none.
  int32_t number_of(NodeId id) const;
  // The node of the subschema `value` at `pointer` (Resolver.child: the walked one when there is one).
  NodeId child(std::string pointer, const Value* value);
  // The target of the node's `$ref` (a string there); false: declined.
  bool follow(NodeId id, NodeId* target);
  // The first node asked about that says what `id` says (Resolver.canonical).
  NodeId canonical(NodeId id);

 private:
  bool walk(const Value* root, const std::string& pointer, bool late);
  // Per walked subschema: (member index, its subschemas) for each keyword that has some.
  using Kids = std::vector<std::pair<uint32_t, std::vector<Kid>>>;
  void number(const std::vector<NodeId>& walked, const std::vector<Kids>& kids);
  bool pointer_target(const std::string& fragment, NodeId* target);
  bool decline(std::string why);
  NodeId intern(const Value* value, std::string pointer);

  std::deque<Node> nodes_;  // stable: references to nodes stay valid as nodes are added
  // pointer (the node's own string) -> node (walked, or made since)
  std::unordered_map<std::string_view, NodeId> ids_;
  // By node (a pointer is one node): walked (Python's by_pointer), and a walked subschema's
  // number (0: none).
  std::vector<uint8_t> walked_;
  std::vector<int32_t> content_;  // empty until a walk numbers its subschemas
  void set_walked(NodeId id) {
    if (walked_.size() <= size_t(id)) walked_.resize(id + 1, 0);
    walked_[id] = 1;
  }
  bool is_walked(NodeId id) const { return size_t(id) < walked_.size() && walked_[id]; }
  std::unordered_map<std::string, int32_t> numbers_;  // what a subschema says -> its number
  std::unordered_map<int32_t, NodeId> canonical_;     // number -> the first node asked about
  std::unordered_map<std::string, NodeId> resolved_;  // reference -> target
  NodeId root_ = -1;
  bool drop_formats_ = false;
  std::function<bool(const Member&)> uncovered_;
  std::string declined_;
};

// JSON pointer escaping of one reference token ("~" -> "~0", "/" -> "~1").
std::string escape_pointer(std::string_view token);

}  // namespace tg::schema
