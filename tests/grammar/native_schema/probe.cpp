// Test probes into the native schema port (kernels/grammar/src/schema/), built into a small
// shared library by the tests of this folder and called through ctypes.
#include <cstdlib>
#include <cstring>
#include <string>

#include "../../../kernels/grammar/src/schema/json.h"
#include "../../../kernels/grammar/src/schema/converter.h"
#include "../../../kernels/grammar/src/schema/regex.h"
#include "../../../kernels/grammar/src/schema/refs.h"
#include "probe.h"

using namespace tg::schema;

extern "C" {

void probe_free(char* p) { std::free(p); }

// The walk of a document as JSON: {"declined": why} or {"walked": {pointer: number or 0},
// "refs": {pointer of a subschema with $ref: target pointer}} after following every $ref of the
// walked subschemas in walk order (which walks the folders of definitions they reach).
char* probe_refs(const char* text, size_t n) {
  Document doc;
  if (!parse(std::string_view(text, n), &doc, 1990).ok()) return give("{\"declined\": \"parse\"}");
  Resolver r;
  if (!r.init(doc.root())) return give("{\"declined\": " + [&] { std::string s; dump_string(r.declined(), &s); return s; }() + "}");
  std::string refs;
  for (NodeId id = 0; id < static_cast<NodeId>(r.size()); ++id) {
    const Node& nd = r.node(id);
    if (!nd.schema->is_object() || nd.schema->find("$ref") == nullptr) continue;
    NodeId target;
    if (!r.follow(id, &target)) {
      std::string s;
      dump_string(r.declined(), &s);
      return give("{\"declined\": " + s + "}");
    }
    if (!refs.empty()) refs += ", ";
    dump_string(nd.pointer, &refs);
    refs += ": ";
    dump_string(r.node(target).pointer, &refs);
  }
  std::string walked;
  for (NodeId id = 0; id < static_cast<NodeId>(r.size()); ++id) {
    if (!walked.empty()) walked += ", ";
    dump_string(r.node(id).pointer, &walked);
    walked += ": " + std::to_string(r.number_of(id));
  }
  return give("{\"walked\": {" + walked + "}, \"refs\": {" + refs + "}}");
}

}

extern "C" {

// The port's conversion of a schema text: {"declined": why} or {"words": [...], "names": [...]}.
// flags: 1 any_whitespace, 2 strict, 4 draft7, 8 integers_without_fraction, 16 format_assertion,
// 32 canonical_integers; unicode_version as the C ABI's.
char* probe_convert(const char* text, size_t n, int flags, int max_whitespace, int unicode_version) {
  Document doc;
  if (!parse(std::string_view(text, n), &doc, 1990).ok() || doc.has_lone_surrogate())
    return give("{\"declined\": \"parse\"}");
  Options o;
  o.any_whitespace = flags & 1;
  o.strict = flags & 2;
  o.draft7 = flags & 4;
  o.integers_without_fraction = flags & 8;
  o.format_assertion = flags & 16;
  o.canonical_integers = flags & 32;
  o.max_whitespace = max_whitespace;
  o.unicode_version = unicode_version_name(unicode_version);
  Converted out;
  std::string why;
  if (!convert(doc.root(), o, &out, &why)) {
    std::string s;
    dump_string(why, &s);
    return give("{\"declined\": " + s + "}");
  }
  std::string r = "{\"words\": [";
  for (size_t i = 0; i < out.words.size(); ++i) r += (i ? ", " : "") + std::to_string(out.words[i]);
  r += "], \"names\": [";
  for (size_t i = 0; i < out.names.size(); ++i) {
    if (i) r += ", ";
    dump_string(out.names[i], &r);
  }
  return give(r + "]}");
}

}
