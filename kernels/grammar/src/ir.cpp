#include "ir.h"

#include <string>

#include "checks.h"

namespace tg {

namespace {

Status bad(int64_t at, const std::string& what) {
  return Status::error(Code::ir, "invalid IR at word " + std::to_string(at) + ": " + what);
}

// Nodes are packed one after another and a child always precedes its parent, so one forward
// scan validates the whole tree without recursion and proves it acyclic.
Status check_ir(const int32_t* words, int32_t n_words) {
  if (words == nullptr || n_words < 4) return bad(0, "too short");
  if (n_words > kMaxIrWords) return Status::error(Code::limit, "grammar IR too large");
  if (words[0] != kIrMagic) return bad(0, "bad magic number");
  if (words[1] != kIrVersion) return bad(1, "unsupported IR version");
  if (words[2] < 1 || int64_t(words[2]) + 4 > n_words) return bad(2, "bad rule count");
  if (words[3] < 0 || words[3] >= words[2]) return bad(3, "root rule out of range");
  // The header, the nodes, then the rule table: one body offset per rule, in the last words.
  const int64_t n = n_words, first = Ir::kFirstNode, end = n - int64_t(words[2]);
  std::vector<uint8_t> is_node(n_words, 0);
  std::vector<uint8_t> regular(n_words, 0);  // bytes, byte sets, and sequences, choices, repetitions of them
  const auto child_ok = [&](int64_t child, int64_t parent) {
    return child >= first && child < parent && is_node[child];
  };
  for (int64_t pos = first; pos < end;) {
    const int32_t* a = words + pos + 1;
    const int64_t avail = end - pos - 1;  // operand words available, up to the rule table
    int64_t size;
    switch (words[pos]) {
      case BYTES:
        if (avail < 1 || a[0] < 0 || avail < 1 + int64_t(a[0])) return bad(pos, "truncated literal");
        for (int32_t i = 0; i < a[0]; ++i)
          if (a[1 + i] < 0 || a[1 + i] > 255) return bad(pos, "literal byte out of range");
        size = 2 + int64_t(a[0]);
        regular[pos] = 1;
        break;
      case BYTESET:
        if (avail < 1 || a[0] < 1 || avail < 1 + 2 * int64_t(a[0])) return bad(pos, "truncated byte set");
        for (int32_t i = 0; i < a[0]; ++i) {
          int32_t lo = a[1 + 2 * i], hi = a[2 + 2 * i];
          if (lo < 0 || hi > 255 || lo > hi) return bad(pos, "byte range out of order or range");
        }
        size = 2 + 2 * int64_t(a[0]);
        regular[pos] = 1;
        break;
      case SEQ:
      case ALT:
        if (avail < 1 || a[0] < 0 || avail < 1 + int64_t(a[0])) return bad(pos, "truncated node list");
        regular[pos] = 1;
        for (int32_t i = 0; i < a[0]; ++i) {
          if (!child_ok(a[1 + i], pos)) return bad(pos, "child offset is not an earlier node");
          regular[pos] &= regular[a[1 + i]];
        }
        size = 2 + int64_t(a[0]);
        break;
      case REPEAT:
        if (avail < 3) return bad(pos, "truncated repetition");
        if (a[0] < 0 || (a[1] != -1 && a[1] < a[0])) return bad(pos, "repetition bounds out of order");
        if (!child_ok(a[2], pos)) return bad(pos, "child offset is not an earlier node");
        regular[pos] = regular[a[2]];
        size = 4;
        break;
      case AUTOMATON: {
        if (avail < 2 || a[0] < 1 || a[1] < 0 || avail < 2 + int64_t(a[0]) + 4 * int64_t(a[1]))
          return bad(pos, "truncated automaton");
        for (int32_t i = 0; i < a[0]; ++i)
          if (a[2 + i] != 0 && a[2 + i] != 1) return bad(pos, "an automaton state neither accepting nor not");
        for (const int32_t* r = a + 2 + a[0]; r < a + 2 + a[0] + 4 * int64_t(a[1]); r += 4)
          if (r[0] < 0 || r[0] >= a[0] || r[3] < 0 || r[3] >= a[0] || r[1] < 0 || r[2] > 255 || r[1] > r[2])
            return bad(pos, "an automaton transition out of range");
        regular[pos] = 1;
        size = 3 + int64_t(a[0]) + 4 * int64_t(a[1]);
        break;
      }
      case MACHINE: {
        if (avail < 2 || a[0] < 1 || a[1] < 0 || avail < 2 + int64_t(a[0]) + 3 * int64_t(a[1]))
          return bad(pos, "truncated machine");
        for (int32_t i = 0; i < a[0]; ++i)
          if (a[2 + i] != 0 && a[2 + i] != 1) return bad(pos, "a machine state neither accepting nor not");
        regular[pos] = 1;
        for (const int32_t* e = machine_edges(a); e < machine_edges_end(a); e += 3) {
          if (e[0] < 0 || e[0] >= a[0] || e[2] < 0 || e[2] >= a[0])
            return bad(pos, "a machine edge's state out of range");
          if (!child_ok(e[1], pos)) return bad(pos, "child offset is not an earlier node");
          regular[pos] &= regular[e[1]];
        }
        size = 3 + int64_t(a[0]) + 3 * int64_t(a[1]);
        break;
      }
      case AND: {
        if (avail < 2 || a[0] < 1 || avail < 2 + 2 * int64_t(a[0])) return bad(pos, "truncated intersection");
        if (a[1] != 0 && a[1] != kAndJsonEscaped) return bad(pos, "unknown intersection flags");
        bool wanted = false;
        for (int32_t i = 0; i < a[0]; ++i) {
          const int32_t child = a[2 + 2 * i], want = a[3 + 2 * i];
          if (!child_ok(child, pos)) return bad(pos, "child offset is not an earlier node");
          if (!regular[child]) return bad(pos, "an intersection's child that is not regular");
          if (want != 0 && want != 1) return bad(pos, "an intersection's child neither wanted nor excluded");
          wanted |= want == 1;
        }
        if (!wanted) return bad(pos, "an intersection with no wanted child");
        size = 3 + 2 * int64_t(a[0]);
        break;
      }
      case REF:
        if (avail < 1 || a[0] < 0 || a[0] >= words[2]) return bad(pos, "rule reference out of range");
        size = 2;
        break;
      case CHECK:
        if (avail < 2 || a[1] < 0 || avail < 2 + int64_t(a[1])) return bad(pos, "truncated check");
        if (!check_valid(a[0], a + 2, a[1])) return bad(pos, "unknown check or bad parameters");
        size = 3 + int64_t(a[1]);
        break;
      case REGION:
        if (avail < 1 || !child_ok(a[0], pos)) return bad(pos, "child offset is not an earlier node");
        size = 2;
        break;
      default:
        return bad(pos, "unknown node kind " + std::to_string(words[pos]));
    }
    is_node[pos] = 1;
    pos += size;
  }
  for (int32_t r = 0; r < words[2]; ++r) {
    int32_t body = words[end + r];
    if (body < first || body >= end || !is_node[body]) return bad(end + r, "rule body is not a node");
  }
  return {};
}

// The header's fields of checked words, taken by `ir`.
void take(std::vector<int32_t>&& words, Ir* ir) {
  ir->words = std::move(words);
  ir->table = static_cast<int32_t>(ir->words.size()) - ir->words[2];
  ir->n_rules = ir->words[2];
  ir->root = ir->words[3];
}

}  // namespace

Status read_ir(const int32_t* words, int32_t n_words, Ir* ir) {
  Status s = check_ir(words, n_words);
  if (s.ok()) take(std::vector<int32_t>(words, words + n_words), ir);
  return s;
}

Status read_ir(std::vector<int32_t>&& words, Ir* ir) {
  if (words.size() > size_t(kMaxIrWords)) return Status::error(Code::limit, "grammar IR too large");
  Status s = check_ir(words.data(), static_cast<int32_t>(words.size()));
  if (s.ok()) take(std::move(words), ir);
  return s;
}

}  // namespace tg
