#include "ir.h"

#include <string>

#include "checks.h"

namespace tg {

namespace {

Status bad(int64_t at, const std::string& what) {
  return Status::error(Code::ir, "invalid IR at word " + std::to_string(at) + ": " + what);
}

}  // namespace

// Nodes are packed one after another and a child always precedes its parent, so one forward
// scan validates the whole tree without recursion and proves it acyclic.
Status read_ir(const int32_t* words, int32_t n_words, Ir* ir) {
  if (words == nullptr || n_words < 4) return bad(0, "too short");
  if (n_words > kMaxIrWords) return Status::error(Code::limit, "grammar IR too large");
  if (words[0] != kIrMagic) return bad(0, "bad magic number");
  if (words[1] != kIrVersion) return bad(1, "unsupported IR version");
  if (words[2] < 1 || int64_t(words[2]) + 4 > n_words) return bad(2, "bad rule count");
  if (words[3] < 0 || words[3] >= words[2]) return bad(3, "root rule out of range");
  const int64_t n = n_words, first = 4 + int64_t(words[2]);
  std::vector<uint8_t> is_node(n_words, 0);
  const auto child_ok = [&](int64_t child, int64_t parent) {
    return child >= first && child < parent && is_node[child];
  };
  for (int64_t pos = first; pos < n;) {
    const int32_t* a = words + pos + 1;
    const int64_t avail = n - pos - 1;  // operand words available
    int64_t size;
    switch (words[pos]) {
      case BYTES:
        if (avail < 1 || a[0] < 0 || avail < 1 + int64_t(a[0])) return bad(pos, "truncated literal");
        for (int32_t i = 0; i < a[0]; ++i)
          if (a[1 + i] < 0 || a[1 + i] > 255) return bad(pos, "literal byte out of range");
        size = 2 + int64_t(a[0]);
        break;
      case BYTESET:
        if (avail < 1 || a[0] < 1 || avail < 1 + 2 * int64_t(a[0])) return bad(pos, "truncated byte set");
        for (int32_t i = 0; i < a[0]; ++i) {
          int32_t lo = a[1 + 2 * i], hi = a[2 + 2 * i];
          if (lo < 0 || hi > 255 || lo > hi) return bad(pos, "byte range out of order or range");
        }
        size = 2 + 2 * int64_t(a[0]);
        break;
      case SEQ:
      case ALT:
        if (avail < 1 || a[0] < 0 || avail < 1 + int64_t(a[0])) return bad(pos, "truncated node list");
        for (int32_t i = 0; i < a[0]; ++i)
          if (!child_ok(a[1 + i], pos)) return bad(pos, "child offset is not an earlier node");
        size = 2 + int64_t(a[0]);
        break;
      case REPEAT:
        if (avail < 3) return bad(pos, "truncated repetition");
        if (a[0] < 0 || (a[1] != -1 && a[1] < a[0])) return bad(pos, "repetition bounds out of order");
        if (!child_ok(a[2], pos)) return bad(pos, "child offset is not an earlier node");
        size = 4;
        break;
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
    int32_t body = words[4 + r];
    if (body < first || body >= n || !is_node[body]) return bad(4 + r, "rule body is not a node");
  }
  ir->words.assign(words, words + n_words);
  ir->n_rules = words[2];
  ir->root = words[3];
  return {};
}

}  // namespace tg
