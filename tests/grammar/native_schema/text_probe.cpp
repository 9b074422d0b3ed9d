// Probes into kernels/grammar/src/schema/text.* for test_text.py, built into a shared library
// with json.cpp, ir_build.cpp and text.cpp and called through ctypes. One call runs a JSON array
// of programs and answers a JSON array, one result per program:
//
//   {"rules": [[name, expr], ...]}   a grammar of these rules (the first is the root), built and
//                                    serialized: {"words": [...], "names": [...]},
//                                    {"declined": true} when an expression gave kNoExpr, or
//                                    {"error": message} when serialize failed
//   {"strings": [[lo, hi, chars], ...], "counter": n, "prefix": p}
//                                    a StringSchema over a host whose fresh counts from n: step i
//                                    is string_of_length(lo, hi) (chars null) or
//                                    capped_count(lo, hi, json_escape(char_class(chars))), set as
//                                    rule "s<i>"; then "root" = alt of the steps' references.
//                                    The words, or {"declined": i} at the first step that declines
//
// Expressions are JSON arrays: ["lit", text], ["bytes", [b, ...]], ["set", [[lo, hi], ...]]
// (byte_set), ["rawset", ...] (make_byte_set), ["cc", ranges, negate], ["seq", e, ...],
// ["alt", e, ...], ["rep", e, lo, hi or null] (repeat), ["rawrep", ...] (make_repeat),
// ["ref", name], ["region", e], ["check", kind], ["esc", e] (json_escape),
// ["strlit", text, shared], ["encode", text] (Bytes of encode_string), ["escbyte", b] (its
// escape_byte as a literal, NOTHING for none), ["len", lo, hi], ["anychar"], ["anystring"],
// ["jsonchar"].
// Bounds (null: unbounded) are int64. The test's programs are shallow: the evaluator recurses.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../../kernels/grammar/src/schema/ir_build.h"
#include "../../../kernels/grammar/src/schema/json.h"
#include "../../../kernels/grammar/src/schema/string_schema.h"
#include "../../../kernels/grammar/src/schema/text.h"
#include "probe.h"

using namespace tg::schema;

namespace {

int64_t bound(const Value& v) { return v.is_null() ? kUnbounded : std::strtoll(std::string(v.text()).c_str(), nullptr, 10); }

std::vector<IrRange> ranges(const Value& v) {
  std::vector<IrRange> out;
  for (const Value& r : v.items()) out.push_back({int32_t(bound(r.items()[0])), int32_t(bound(r.items()[1]))});
  return out;
}

// kNoExpr when a part declined.
Expr eval(IrBuilder& ir, const Value& v) {
  const Span<Value> a = v.items();
  const std::string_view op = a[0].text();
  std::vector<Expr> kids;
  if (op == "seq" || op == "alt") {
    for (uint32_t i = 1; i < a.size(); ++i) {
      kids.push_back(eval(ir, a[i]));
      if (kids.back() == kNoExpr) return kNoExpr;
    }
    return op == "seq" ? ir.seq(kids) : ir.alt(kids);
  }
  if (op == "rep" || op == "rawrep" || op == "region" || op == "esc") {
    const Expr item = eval(ir, a[1]);
    if (item == kNoExpr) return kNoExpr;
    if (op == "rep") return ir.repeat(item, bound(a[2]), bound(a[3]));
    if (op == "rawrep") return ir.make_repeat(item, bound(a[2]), bound(a[3]));
    if (op == "region") return ir.make_region(item);
    return json_escape(ir, item);
  }
  if (op == "lit") return ir.literal(a[1].text());
  if (op == "bytes") {
    std::string data;
    for (const Value& b : a[1].items()) data += char(bound(b));
    return ir.make_bytes(data);
  }
  if (op == "set") return ir.byte_set(ranges(a[1]));
  if (op == "rawset") return ir.make_byte_set(ranges(a[1]));
  if (op == "cc") return ir.char_class(ranges(a[1]), a[2].boolean());
  if (op == "ref") return ir.make_ref(a[1].text());
  if (op == "check") return ir.make_check(int32_t(bound(a[1])));
  if (op == "strlit") return string_literal(ir, a[1].text(), a[2].boolean());
  if (op == "len") return length_expr(ir, bound(a[1]), bound(a[2]));
  if (op == "encode") {
    std::string text;
    encode_string(a[1].text(), &text);
    return ir.make_bytes(text);
  }
  if (op == "escbyte") {
    const std::string_view esc = escape_byte(uint8_t(bound(a[1])));
    return esc.empty() ? IrBuilder::kNothing : ir.literal(esc);
  }
  const TextExprs t = text_exprs(ir);
  if (op == "anychar") return t.any_char;
  if (op == "anystring") return t.any_string;
  if (op == "jsonchar") return t.json_char;
  return kNoExpr;
}

std::string words_of(IrBuilder& ir, const IrGrammar& g) {
  std::vector<int32_t> words;
  std::vector<std::string> names;
  const tg::Status st = ir.serialize(g, &words, &names);
  std::string out;
  if (!st.ok()) {
    out = "{\"error\": ";
    dump_string(st.message, &out);
    return out + "}";
  }
  out = "{\"words\": [";
  for (size_t i = 0; i < words.size(); ++i) out += (i ? ", " : "") + std::to_string(words[i]);
  out += "], \"names\": [";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += ", ";
    dump_string(names[i], &out);
  }
  return out + "]}";
}

std::string run_rules(const Value& program) {
  IrBuilder ir;
  IrGrammar g;
  for (const Value& rule : program.find("rules")->items()) {
    const Expr body = eval(ir, rule.items()[1]);
    if (body == kNoExpr) return "{\"declined\": true}";
    const RuleId id = ir.rule(rule.items()[0].text());
    if (g.root < 0) g.root = id;
    g.set(id, body);
  }
  return words_of(ir, g);
}

// Converter.fresh and self.rules, with the converter's MAX_RULES.
class Host : public TextHost {
 public:
  Host(IrBuilder& ir, IrGrammar& g, int64_t counter, std::string prefix)
      : ir_(ir), g_(g), counter_(counter), prefix_(std::move(prefix)) {}
  RuleId fresh(std::string_view hint) override {
    const int64_t n = counter_++;
    if (n > 15000) return -1;
    return ir_.rule(prefix_ + std::string(hint) + "_" + std::to_string(n));
  }
  void set_rule(RuleId rule, Expr body) override { g_.set(rule, body); }
  Expr intersection(IrSpan<Expr> items, IrSpan<uint8_t> wants, std::string_view, std::string_view,
                    bool escaped) override {
    const RuleId name = fresh("and");
    if (name < 0) return kNoExpr;
    g_.set(name, ir_.make_and(items, wants, escaped));
    return ir_.make_ref(name);
  }

 private:
  IrBuilder& ir_;
  IrGrammar& g_;
  int64_t counter_;
  std::string prefix_;
};

std::string run_strings(const Value& program) {
  IrBuilder ir;
  IrGrammar g;
  Host host(ir, g, bound(*program.find("counter")), std::string(program.find("prefix")->text()));
  Patterns patterns(ir, "");
  StringSchema strings(ir, host, patterns);
  std::vector<Expr> refs;
  uint32_t i = 0;
  for (const Value& step : program.find("strings")->items()) {
    const Span<Value> s = step.items();
    Expr body;
    if (s[2].is_null()) {
      body = strings.string_of_length(bound(s[0]), bound(s[1]));
    } else {
      const Expr ch = json_escape(ir, ir.char_class(ranges(s[2])));
      body = strings.capped_count(bound(s[0]), bound(s[1]), ch);
    }
    if (body == kNoExpr) return "{\"declined\": " + std::to_string(i) + "}";
    const RuleId id = ir.rule("s" + std::to_string(i++));
    g.set(id, body);
    refs.push_back(ir.make_ref(id));
  }
  g.root = ir.rule("root");
  g.set(g.root, ir.alt(refs));
  return words_of(ir, g);
}

}  // namespace

extern "C" {

char* text_probe_run(const char* text, size_t n) {
  Document doc;
  if (!parse(std::string_view(text, n), &doc, 200).ok()) return give("null");
  std::string out = "[";
  for (const Value& program : doc.root().items()) {
    if (out.size() > 1) out += ", ";
    out += program.find("rules") ? run_rules(program) : run_strings(program);
  }
  return give(out + "]");
}

}
