// Replays grammars and construction programs that test_ir_build.py writes (one command a
// line on stdin) through tg::schema::IrBuilder, and prints what the Python prints for them.
//
//   grammar LABEL          a grammar, its nodes as built (raw constructors), then
//     n KIND OPERANDS      node i (numbered from 0 in order; operands name earlier nodes):
//                          B hex | S lo hi.. | Q ids.. | A ids.. | R id min max | F hexname |
//                          C kind params.. | G id | D escaped (id want).. |
//                          U n_states accepts.. (from lo hi to).. | M n_states accepts.. (from id to)..
//     rule HEXNAME ID      in the grammar's order       root HEXNAME
//     pexpr ID             prule HEXNAME ID             a prelude's expressions and rules
//   end                    -> "words W.." and "names HEX..", or "error CODE MESSAGE"
//
//   program LABEL          constructor calls; value k is the k-th op's result:
//     op literal hex | byte_set lo hi.. | char_class negate lo hi.. | seq ids.. | alt ids.. |
//        repeat id lo hi | folded id lo hi | nonempty id | nullable id | n KIND OPERANDS
//   end                    -> per op "none K", "nullable K N" or "error K CODE MESSAGE", then the
//                          words of a grammar with rule rK = value K for each expression and
//                          root = Seq of references to them all
//
// Each grammar is built in a fresh builder and again in one kept across the whole input (its
// arena and writer tables reused): both must write the same words. `--time N` also serializes
// each grammar N times more and prints "time LABEL WORDS NS_PER_SERIALIZE" (the median) on
// stderr. `--selftest` checks the API's conveniences instead.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "schema/ir_build.h"

using namespace tg::schema;

namespace {

std::string unhex(const std::string& s) {
  std::string out;
  if (s == "-") return out;
  for (size_t i = 0; i + 1 < s.size(); i += 2) out += char(std::strtol(s.substr(i, 2).c_str(), nullptr, 16));
  return out;
}

std::string hex(const std::string& s) {
  if (s.empty()) return "-";
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

int64_t num(const std::string& s) { return std::strtoll(s.c_str(), nullptr, 10); }

// One node line's operands (after "n"), built raw; ids index `values`.
Expr build_node(IrBuilder& b, const std::vector<std::string>& t, size_t at, const std::vector<Expr>& values) {
  const std::string& k = t[at];
  std::vector<int64_t> v;
  for (size_t i = at + 1; i < t.size(); ++i) v.push_back(k == "B" || k == "F" ? 0 : num(t[i]));
  const auto id = [&](int64_t x) { return values[size_t(x)]; };
  if (k == "B") return b.make_bytes(unhex(t[at + 1]));
  if (k == "F") return b.make_ref(unhex(t[at + 1]));
  if (k == "S") {
    std::vector<IrRange> r;
    for (size_t i = 0; i + 1 < v.size(); i += 2) r.push_back({int32_t(v[i]), int32_t(v[i + 1])});
    return b.make_byte_set(r);
  }
  if (k == "Q" || k == "A") {
    std::vector<Expr> items;
    for (int64_t x : v) items.push_back(id(x));
    return k == "Q" ? b.make_seq(items) : b.make_alt(items);
  }
  if (k == "R") return b.make_repeat(id(v[0]), v[1], v[2]);
  if (k == "C") {
    std::vector<int32_t> params(v.begin() + 1, v.end());
    return b.make_check(int32_t(v[0]), params);
  }
  if (k == "G") return b.make_region(id(v[0]));
  if (k == "D") {
    std::vector<Expr> items;
    std::vector<uint8_t> wants;
    for (size_t i = 1; i + 1 < v.size(); i += 2) {
      items.push_back(id(v[i]));
      wants.push_back(uint8_t(v[i + 1]));
    }
    return b.make_and(items, wants, v[0] != 0);
  }
  if (k == "U" || k == "M") {
    const size_t n = size_t(v[0]);
    std::vector<uint8_t> accept;
    for (size_t i = 0; i < n; ++i) accept.push_back(uint8_t(v[1 + i]));
    if (k == "U") {
      std::vector<IrRun> runs;
      for (size_t i = 1 + n; i + 3 < v.size(); i += 4)
        runs.push_back({int32_t(v[i]), int32_t(v[i + 1]), int32_t(v[i + 2]), int32_t(v[i + 3])});
      return b.make_automaton(runs, accept);
    }
    std::vector<IrEdge> edges;
    for (size_t i = 1 + n; i + 2 < v.size(); i += 3) edges.push_back({int32_t(v[i]), id(v[i + 1]), int32_t(v[i + 2])});
    return b.make_machine(edges, accept);
  }
  std::fprintf(stderr, "unknown node kind %s\n", k.c_str());
  std::exit(2);
}

std::vector<IrRange> ranges_from(const std::vector<std::string>& t, size_t at) {
  std::vector<IrRange> r;
  for (size_t i = at; i + 1 < t.size(); i += 2) r.push_back({int32_t(num(t[i])), int32_t(num(t[i + 1]))});
  return r;
}

// A block's lines replayed into `b`: the words (or the error) as printed lines.
std::string replay(IrBuilder& b, const std::vector<std::vector<std::string>>& block, int repeats,
                   const std::string& label) {
  std::ostringstream out;
  std::vector<Expr> values;
  IrGrammar g;
  IrPrelude prelude;
  bool has_prelude = false;
  const bool program = block[0][0] == "program";
  for (size_t li = 1; li < block.size(); ++li) {
    const auto& t = block[li];
    const std::string& c = t[0];
    if (c == "n") {
      values.push_back(build_node(b, t, 1, values));
    } else if (c == "rule") {
      g.set(b.rule(unhex(t[1])), values[size_t(num(t[2]))]);
    } else if (c == "root") {
      g.root = b.rule(unhex(t[1]));
    } else if (c == "pexpr") {
      prelude.exprs.push_back(values[size_t(num(t[1]))]);
      has_prelude = true;
    } else if (c == "prule") {
      prelude.rules.emplace_back(b.rule(unhex(t[1])), values[size_t(num(t[2]))]);
      has_prelude = true;
    } else if (c == "op") {
      const std::string& op = t[1];
      const size_t k = values.size();
      Expr r = kNoExpr;
      if (op == "literal") {
        r = b.literal(unhex(t[2]));
      } else if (op == "byte_set") {
        r = b.byte_set(ranges_from(t, 2));
      } else if (op == "char_class") {
        r = b.char_class(ranges_from(t, 3), num(t[2]) != 0);
      } else if (op == "seq" || op == "alt") {
        std::vector<Expr> items;
        for (size_t i = 2; i < t.size(); ++i) items.push_back(values[size_t(num(t[i]))]);
        r = op == "seq" ? b.seq(items) : b.alt(items);
      } else if (op == "repeat" || op == "folded") {
        const Expr x = values[size_t(num(t[2]))];
        r = op == "repeat" ? b.repeat(x, num(t[3]), num(t[4])) : b.folded_repeat(x, num(t[3]), num(t[4]));
      } else if (op == "nonempty") {
        r = b.nonempty(values[size_t(num(t[2]))]);
        if (r == kNoExpr) out << "none " << k << "\n";
      } else if (op == "nullable") {
        out << "nullable " << k << " " << int(b.nullable(values[size_t(num(t[2]))])) << "\n";
      } else if (op == "n") {
        r = build_node(b, t, 2, values);
      } else {
        std::fprintf(stderr, "unknown op %s\n", op.c_str());
        std::exit(2);
      }
      if (!b.ok()) {
        const tg::Status st = b.take_status();
        out << "error " << k << " " << int(st.code) << " " << st.message << "\n";
        r = kNoExpr;
      }
      values.push_back(r);
    } else {
      std::fprintf(stderr, "unknown line %s\n", c.c_str());
      std::exit(2);
    }
  }
  if (program) {  // every expression a rule, all reached from the root
    std::vector<Expr> refs;
    for (size_t k = 0; k < values.size(); ++k) {
      if (values[k] == kNoExpr) continue;
      const RuleId r = b.rule("r" + std::to_string(k));
      g.set(r, values[k]);
      refs.push_back(b.make_ref(r));
    }
    g.root = b.rule("root");
    g.set(g.root, b.make_seq(refs));
  }
  if (has_prelude) g.prelude = &prelude;
  std::vector<int32_t> words;
  std::vector<std::string> names;
  const tg::Status st = b.serialize(g, &words, &names);
  (void)b.take_status();  // a construction error, which serialize returned: the next block starts clean
  if (!st.ok()) {
    out << "error " << int(st.code) << " " << st.message << "\n";
    return out.str();
  }
  out << "words";
  for (int32_t w : words) out << " " << w;
  out << "\nnames";
  for (const std::string& n : names) out << " " << hex(n);
  out << "\n";
  if (repeats > 0) {
    std::vector<double> ns;
    for (int i = 0; i < repeats; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      (void)b.serialize(g, &words, &names);
      const auto spent = std::chrono::steady_clock::now() - t0;
      ns.push_back(double(std::chrono::duration_cast<std::chrono::nanoseconds>(spent).count()));
    }
    std::sort(ns.begin(), ns.end());
    std::fprintf(stderr, "time %s %zu %.0f\n", label.c_str(), words.size(), ns[ns.size() / 2]);
  }
  return out.str();
}

// The API as the converter will use it: the variadic constructors, the readers, the sticky
// error, IrGrammar::set keeping a rule's place. Prints each failed check, then "selftest N".
int selftest() {
  int failed = 0;
  const auto check = [&](bool ok, const char* what) {
    if (!ok) std::printf("FAILED %s\n", what), ++failed;
  };
  IrBuilder b;
  const Expr a = b.literal("ab"), c = b.literal("c");
  check(a == b.make_bytes("ab") && b.bytes(a) == "ab" && b.kind(a) == tg::BYTES, "literal");
  check(b.literal("") == IrBuilder::kEmpty && b.seq() == IrBuilder::kEmpty && b.alt() == IrBuilder::kNothing, "empty");
  check(b.seq(a) == a && b.seq(a, c) == b.make_seq({a, c}) && b.seq(b.seq(a, c), c, IrBuilder::kEmpty) ==
        b.make_seq({a, c, c}), "seq");
  check(b.alt(a, b.alt(c, IrBuilder::kNothing)) == b.make_alt({a, c}) && b.alt(a, c) != b.alt(c, a), "alt");
  const Expr r = b.repeat(a, 2, kUnbounded);
  check(b.kind(r) == tg::REPEAT && b.item(r) == a && b.repeat_min(r) == 2 && b.repeat_max(r) == kUnbounded, "repeat");
  check(b.make_repeat(a, 1, kMaxCount + 1) != b.make_repeat(a, 1, 1) && b.repeat_max(b.make_repeat(a, 1, kMaxCount + 1))
        == kMaxCount + 1, "wide bounds");
  check(b.nullable(IrBuilder::kEmpty) == Nullable::yes && b.nullable(IrBuilder::kNothing) == Nullable::no &&
        b.nullable(b.make_ref("x")) == Nullable::unknown && b.nullable(b.repeat(a, 0, 1)) == Nullable::yes, "nullable");
  check(b.ok() && b.repeat(a, 3, 2) == IrBuilder::kNothing && !b.ok() && b.repeat(a, 0, 1) != IrBuilder::kNothing &&
        b.status().message == "bad repetition bounds {3,2}", "sticky error");
  check(b.take_status().code == tg::Code::grammar && b.ok(), "take_status");
  check(b.char_class({{'a', 'z'}}) == b.byte_set({{'x', 'z'}, {'a', 'w'}}) &&
        b.char_class({{0, 0x10FFFF}}, true) == IrBuilder::kNothing, "char_class");
  const Expr m = b.make_machine({{0, a, 1}, {1, c, 0}}, {0, 1});
  std::vector<Expr> kids;
  b.children(m, &kids);
  check(kids == std::vector<Expr>{a, c}, "children");
  IrGrammar g;
  const RuleId root = b.rule("root"), x = b.rule("x");
  check(b.rule("x") == x && b.rule_name(x) == "x" && b.make_ref(x) == b.make_ref("x"), "rules");
  g.set(x, c);
  g.set(root, b.seq(a, b.make_ref(x)));
  g.set(x, a);  // replaced in place: x stays rule 0
  g.root = root;
  std::vector<int32_t> w1, w2;
  std::vector<std::string> names;
  check(b.serialize(g, &w1, &names).ok() && names == std::vector<std::string>{"x", "root"} && w1[3] == 1, "serialize");
  check(b.serialize(g, &w2, &names).ok() && w1 == w2, "serialize twice");
  b.make_and({a}, {0});
  check(b.serialize(g, &w2, &names).code == tg::Code::grammar, "a construction error ends serialize");
  std::printf("selftest %d\n", failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--selftest") == 0) return selftest();
    if (std::strcmp(argv[i], "--time") == 0 && i + 1 < argc) repeats = std::atoi(argv[i + 1]);
  }
  std::ios::sync_with_stdio(false);
  IrBuilder kept;  // one builder across the input: reuse must not change a word
  std::vector<std::vector<std::string>> block;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<std::string> t = split(line);
    if (t.empty()) continue;
    if (t[0] != "end") {
      block.push_back(std::move(t));
      continue;
    }
    const std::string label = block.empty() || block[0].size() < 2 ? "?" : block[0][1];
    IrBuilder fresh;
    const std::string first = replay(fresh, block, repeats, label);
    const std::string again = replay(kept, block, 0, label);
    std::cout << "result " << label << "\n" << first;
    if (again != first) std::cout << "kept-builder-differs\n";
    block.clear();
  }
  return 0;
}
