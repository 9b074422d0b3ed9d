// C entry points over kernels/grammar/src/schema/numbers.{h,cpp} for test_numbers.py (ctypes).
// Each takes a JSON text and returns a JSON text (free it with probe_free).
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "schema/ir_build.h"
#include "schema/json.h"
#include "schema/numbers.h"
#include "probe.h"

using namespace tg::schema;

namespace {

std::string quoted(std::string_view s) {
  std::string out;
  dump_string(s, &out);
  return out;
}

// Converter.intersection's rules, named and numbered as the Python's fresh("and") names them.
class Host : public NumberHost {
 public:
  Host(IrBuilder& b, IrGrammar& g) : b_(b), g_(g) {}
  Expr intersection(IrSpan<Expr> items, IrSpan<uint8_t> wants, std::string_view keyword, std::string_view pointer,
                    bool escaped) override {
    const std::string name = "and_" + std::to_string(counter_++);
    const RuleId rule = b_.rule(name);
    g_.set(rule, b_.make_and(items, wants, escaped));
    sites += (sites.empty() ? "" : ", ") + quoted(name) + ": [" + quoted(keyword) + ", " + quoted(pointer) + "]";
    return b_.make_ref(rule);
  }
  std::string sites;

 private:
  IrBuilder& b_;
  IrGrammar& g_;
  int counter_ = 0;
};

std::string words_of(IrBuilder& b, IrGrammar& g, const std::string& extra) {
  std::vector<int32_t> words;
  std::vector<std::string> names;
  const tg::Status st = b.serialize(g, &words, &names);
  if (!st.ok()) return "{\"error\": " + quoted(st.message) + "}";
  std::string r = "{\"words\": [";
  for (size_t i = 0; i < words.size(); ++i) r += (i ? ", " : "") + std::to_string(words[i]);
  r += "], \"names\": [";
  for (size_t i = 0; i < names.size(); ++i) r += (i ? ", " : "") + quoted(names[i]);
  return r + "]" + extra + "}";
}

}  // namespace

extern "C" {

// {"zero_frac": bool, "const_zero_frac": bool, "calls": [{"nodes": [{"schema": {...}, "pointer": "..."}],
// "atoms": bits}, ...]} -> the words of a grammar of the rules the calls made and root = Seq(results),
// with "sites"; or {"declined": k}, k the first call that declined.
char* numbers_probe_number(const char* text, size_t n) {
  Document doc;
  if (!parse(std::string_view(text, n), &doc).ok()) return give("{\"error\": \"parse\"}");
  const Value& in = doc.root();
  IrBuilder b;
  IrGrammar g;
  Host host(b, g);
  NumberOptions opt;
  opt.zero_frac = in.find("zero_frac")->boolean();
  opt.const_zero_frac = in.find("const_zero_frac")->boolean();
  NumberSchema numbers(b, host, opt);
  std::vector<Expr> results;
  for (const Value& call : in.find("calls")->items()) {
    std::vector<const Value*> schemas;
    std::string_view pointer;
    for (const Value& node : call.find("nodes")->items()) {
      if (schemas.empty()) pointer = node.find("pointer")->text();
      schemas.push_back(node.find("schema"));
    }
    const Expr e = numbers.number(schemas, pointer, uint32_t(call.find("atoms")->int64()));
    if (e == kNoExpr) return give("{\"declined\": " + std::to_string(results.size()) + "}");
    results.push_back(e);
  }
  const RuleId root = b.rule("root");
  g.set(root, b.make_seq(results));
  g.root = root;
  return give(words_of(b, g, ", \"sites\": {" + host.sites + "}"));
}

// {"zero_frac": bool, "value": v} -> the words of a grammar root = number_const(v, zero_frac).
char* numbers_probe_const(const char* text, size_t n) {
  Document doc;
  if (!parse(std::string_view(text, n), &doc).ok()) return give("{\"error\": \"parse\"}");
  IrBuilder b;
  IrGrammar g;
  const NumberTexts t(b);
  const Expr zero_frac = doc.root().find("zero_frac")->boolean() ? t.zero_frac : IrBuilder::kEmpty;
  const Expr e = number_const(b, *doc.root().find("value"), zero_frac);
  if (e == kNoExpr) return give("{\"declined\": 0}");
  g.root = b.rule("root");
  g.set(g.root, e);
  return give(words_of(b, g, ""));
}

// The JSON number texts: a grammar with a rule per constant, in _numbers.py's order.
char* numbers_probe_texts() {
  IrBuilder b;
  IrGrammar g;
  const NumberTexts t(b);
  const Expr all[] = {t.digit,  t.nonzero,   t.uint,    t.frac,         t.exp,        t.minus,
                      t.number, t.zero_frac, t.integer, t.plain_number, t.non_integer};
  const char* names[] = {"DIGIT",  "NONZERO",   "UINT",    "FRAC",         "EXP",        "MINUS",
                         "NUMBER", "ZERO_FRAC", "INTEGER", "PLAIN_NUMBER", "NON_INTEGER"};
  std::vector<Expr> refs;
  for (size_t i = 0; i < 11; ++i) {
    g.set(b.rule(names[i]), all[i]);
    refs.push_back(b.make_ref(names[i]));
  }
  g.root = b.rule("root");
  g.set(g.root, b.make_seq(refs));
  return give(words_of(b, g, ""));
}

// [[op, a, b], ...] with integers (any size) or numbers -> [result text, ...]. Ops: add, sub, mul,
// divmod ("q r"), gcd, lcm (integers); neg ("sign digits exponent" of the rounded -Decimal),
// cmp (Decimals).
char* numbers_probe_arith(const char* text, size_t n) {
  Document doc;
  if (!parse(std::string_view(text, n), &doc).ok()) return give("{\"error\": \"parse\"}");
  std::string r = "[";
  for (const Value& op : doc.root().items()) {
    const std::string_view name = op.items()[0].text();
    const Value& x = op.items()[1];
    const Value& y = op.items()[op.items().size() > 2 ? 2 : 1];
    std::string out;
    if (name == "neg" || name == "cmp") {
      Decimal a, c;
      to_decimal(x, &a);
      to_decimal(y, &c);
      if (name == "neg") {
        const Decimal d = negate(a);
        out = std::string(d.negative ? "1 " : "0 ") + d.digits + " " + std::to_string(d.exponent);
      } else {
        out = std::to_string(compare(a, c));
      }
    } else {
      auto big = [](const Value& v) {
        const std::string_view t = v.text();
        return t[0] == '-' ? BigInt::from_digits(t.substr(1), true) : BigInt::from_digits(t);
      };
      const BigInt a = big(x), c = big(y);
      if (name == "add") out = (a + c).str();
      if (name == "sub") out = (a - c).str();
      if (name == "mul") out = (a * c).str();
      if (name == "gcd") out = BigInt::gcd(a, c).str();
      if (name == "lcm") out = BigInt::lcm(a, c).str();
      if (name == "divmod") {
        BigInt q, m;
        BigInt::divmod(a, c, &q, &m);
        out = q.str() + " " + m.str();
      }
    }
    r += (r.size() > 1 ? ", " : "") + quoted(out);
  }
  return give(r + "]");
}

}  // extern "C"
