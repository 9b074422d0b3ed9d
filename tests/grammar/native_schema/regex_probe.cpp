// Probes into kernels/grammar/src/schema/regex.* and patterns.* for test_regex.py, built into a
// shared library with json.cpp, ir_build.cpp, text.cpp, regex.cpp and patterns.cpp and called
// through ctypes. One call runs a JSON object {"fresh": bool, "version": unicode version,
// "programs": [...]} and answers a JSON array, one result per program. The programs share one
// IrBuilder and one Patterns (their caches, as in a conversion) unless "fresh" asks for new
// ones for each.
//
//   {"op": "regex", "pattern": p}     regex_expr(p)             a grammar {"root": expr}:
//   {"op": "pattern", "pattern": p}   pattern_expr(p)             {"words": [...], "names": [...]},
//   {"op": "search", "pattern": p}    pattern_search_expr(p)      {"declined": why}, or
//   {"op": "full", "pattern": p}      full_regex_expr(p)          {"error": message} when
//   {"op": "format", "name": n}       format_expr(n)              serialize failed;
//                                                                 format_expr's None: {"none": true}
//   {"op": "checked", "name": n}      checked_format(n): {"root": expr} and its rules, in order
//   {"op": "match", "pattern": p, "texts": [t, ...]}   pattern_search(p, t) for each: 1, 0 or -1
//   {"op": "lengths", "of": program}  regex_min_max_length of a program's expression and, when it
//                                     is a repetition, of its item: [[lo, hi], [lo, hi] or null]
//                                     (hi null: None), or {"declined": why}
//   {"op": "format_regex", "name": n} FORMATS[n] (format_names() and base64_regex() for n null)
//   {"op": "version"}                 regex_unicode_version()
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../../../kernels/grammar/src/schema/ir_build.h"
#include "../../../kernels/grammar/src/schema/json.h"
#include "../../../kernels/grammar/src/schema/patterns.h"
#include "../../../kernels/grammar/src/schema/regex.h"

using namespace tg::schema;

namespace {

char* give(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  std::memcpy(out, s.data(), s.size() + 1);
  return out;
}

std::string str(std::string_view s) {
  std::string out;
  dump_string(s, &out);
  return out;
}

std::string words_of(IrBuilder& ir, const IrGrammar& g) {
  std::vector<int32_t> words;
  std::vector<std::string> names;
  const tg::Status st = ir.serialize(g, &words, &names);
  if (!st.ok()) return "{\"error\": " + str(st.message) + "}";
  std::string out = "{\"words\": [";
  for (size_t i = 0; i < words.size(); ++i) out += (i ? "," : "") + std::to_string(words[i]);
  out += "], \"names\": [";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + str(names[i]);
  return out + "]}";
}

struct Session {
  explicit Session(std::string_view version) : patterns(ir, version) {}
  IrBuilder ir;
  Patterns patterns;
};

std::string declined(const std::string& why) { return "{\"declined\": " + str(why) + "}"; }

// The expression of an expression program (kNoExpr: declined; kNoFormat: None).
Expr expr_of(Session& s, const Value& program, std::string* why) {
  const std::string_view op = program.find("op")->text();
  Expr e = kNoExpr;
  if (op == "regex") {
    e = s.patterns.regex().regex_expr(program.find("pattern")->text());
    *why = s.patterns.regex().why();
    return e;
  }
  if (op == "pattern") e = s.patterns.pattern_expr(program.find("pattern")->text());
  if (op == "search") e = s.patterns.pattern_search_expr(program.find("pattern")->text());
  if (op == "full") e = s.patterns.full_regex_expr(program.find("pattern")->text());
  if (op == "format") e = s.patterns.format_expr(program.find("name")->text());
  *why = s.patterns.why();
  return e;
}

std::string lengths(Session& s, Expr e) {
  int64_t lo, hi;
  if (!s.patterns.regex_min_max_length(e, &lo, &hi)) return "null";
  return "[" + std::to_string(lo) + ", " + (hi == kUnbounded ? std::string("null") : std::to_string(hi)) + "]";
}

std::string run(Session& s, const Value& program) {
  const std::string_view op = program.find("op")->text();
  if (op == "version") return str(regex_unicode_version());
  if (op == "format_regex") {
    const Value* name = program.find("name");
    if (!name->is_null()) return str(format_regex(name->text()));
    std::string out = "[";
    for (std::string_view n : format_names()) out += (out.size() > 1 ? ", " : "") + str(n);
    return out + ", " + str(base64_regex()) + "]";
  }
  if (op == "match") {
    std::string out = "[";
    for (const Value& t : program.find("texts")->items())
      out += (out.size() > 1 ? ", " : "") + std::to_string(s.patterns.pattern_search(program.find("pattern")->text(), t.text()));
    return out + "]";
  }
  IrGrammar g;
  g.root = s.ir.rule("root");
  if (op == "checked") {
    Expr e;
    std::vector<std::pair<RuleId, Expr>> rules;
    if (!s.patterns.checked_format(program.find("name")->text(), &e, &rules)) return declined(s.patterns.why());
    g.set(g.root, e);
    for (const auto& [rule, body] : rules) g.set(rule, body);
    return words_of(s.ir, g);
  }
  std::string why;
  if (op == "lengths") {
    const Expr e = expr_of(s, *program.find("of"), &why);
    if (e == kNoExpr || e == kNoFormat) return declined(why);
    const std::string item = s.ir.kind(e) == tg::REPEAT ? lengths(s, s.ir.item(e)) : "null";
    return "[" + lengths(s, e) + ", " + item + "]";
  }
  const Expr e = expr_of(s, program, &why);
  if (e == kNoFormat) return "{\"none\": true}";
  if (e == kNoExpr) return declined(why);
  g.set(g.root, e);
  return words_of(s.ir, g);
}

}  // namespace

extern "C" {

void regex_probe_free(char* p) { std::free(p); }

char* regex_probe_run(const char* text, size_t n) {
  Document doc;
  if (!parse(std::string_view(text, n), &doc, 200).ok()) return give("null");
  const Value& root = doc.root();
  const bool fresh = root.find("fresh")->boolean();
  const std::string_view version = root.find("version")->text();
  std::unique_ptr<Session> session(new Session(version));
  std::string out = "[";
  for (const Value& program : root.find("programs")->items()) {
    if (fresh) session.reset(new Session(version));
    if (out.size() > 1) out += ", ";
    out += run(*session, program);
  }
  return give(out + "]");
}

}
