#include "ir.h"

#include <algorithm>
#include <string>

#include "checks.h"

namespace tg {

namespace {

Status bad(int64_t at, const std::string& what) {
  return Status::error(Code::ir, "invalid IR at word " + std::to_string(at) + ": " + what);
}

// The bytes a KEYS key may hold: JSON's plain string bytes (no control byte, quote or
// backslash, ASCII), each one character as JSON writes it.
bool plain_key_byte(int32_t b) { return b >= 0x20 && b <= 0x7F && b != '"' && b != '\\'; }

// Appends a node, returning its offset.
int32_t put(std::vector<int32_t>* out, std::initializer_list<int32_t> node) {
  const int32_t at = static_cast<int32_t>(out->size());
  out->insert(out->end(), node);
  return at;
}

// KEYS n, rest, heavy, (len, bytes)*n: two tries of the keys,
//   ALT( SEQ(leave, rest), stay )
//   leave: per trie node ALT( SEQ(byte, child) per child byte, BYTESET(plain bytes but the children's) )
//   stay:  per trie node ALT( SEQ(byte, child) per child byte, heavy, '"' unless a key ends here )
// Leaving the trie anywhere, by a plain byte no key continues with or by any other character
// (`heavy`, which must lead to `rest`), makes an unknown key, whose rest and closing quote
// `rest` matches. One `rest` after every plain way out makes them one automaton state (a
// `rest` per trie node made a state per node, each calling `rest` alike). Tries are written
// children first (a trie node's children come after it in `trie`, so in reverse). Returns the
// offset of the whole.
int32_t expand_keys(const int32_t* a, int32_t rest, int32_t heavy, std::vector<int32_t>* out) {
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // byte -> trie node
    bool ends = false;
  };
  std::vector<Node> trie(1);
  const int32_t* k = a + 3;
  for (int32_t i = 0; i < a[0]; ++i, k += 1 + k[0]) {
    int32_t t = 0;
    for (int32_t j = 0; j < k[0]; ++j) {
      const uint8_t b = static_cast<uint8_t>(k[1 + j]);
      auto& ch = trie[t].children;
      auto it = std::find_if(ch.begin(), ch.end(), [b](const auto& e) { return e.first == b; });
      if (it == ch.end()) {
        ch.push_back({b, static_cast<int32_t>(trie.size())});
        t = static_cast<int32_t>(trie.size());
        trie.emplace_back();
      } else {
        t = it->second;
      }
    }
    trie[t].ends = true;
  }
  for (auto& node : trie) std::sort(node.children.begin(), node.children.end());
  int32_t byte_node[256], way_out_but[256];  // shared: one literal per byte, one way out per single child
  std::fill(byte_node, byte_node + 256, -1);
  std::fill(way_out_but, way_out_but + 256, -1);
  const auto literal = [&](uint8_t b) {
    if (byte_node[b] < 0) byte_node[b] = put(out, {BYTES, 1, b});
    return byte_node[b];
  };
  const auto way_out = [&](const std::vector<std::pair<uint8_t, int32_t>>& children) {
    if (children.size() == 1 && way_out_but[children[0].first] >= 0) return way_out_but[children[0].first];
    bool taken[256] = {};
    for (const auto& [b, _] : children) taken[b] = true;
    std::vector<int32_t> set{BYTESET, 0};
    for (int32_t b = 0; b < 256; ++b) {
      if (!plain_key_byte(b) || taken[b]) continue;
      if (set[1] > 0 && set.back() == b - 1) {
        set.back() = b;
      } else {
        set.insert(set.end(), {b, b});
        ++set[1];
      }
    }
    int32_t at = -1;
    if (set[1] > 0) {
      at = static_cast<int32_t>(out->size());
      out->insert(out->end(), set.begin(), set.end());
    }
    if (children.size() == 1) way_out_but[children[0].first] = at;
    return at;
  };
  std::vector<int32_t> at(trie.size()), items;
  const auto write_trie = [&](bool leaving) {
    for (int32_t t = static_cast<int32_t>(trie.size()) - 1; t >= 0; --t) {
      const auto& ch = trie[t].children;
      items.clear();
      for (const auto& [b, child] : ch) items.push_back(put(out, {SEQ, 2, literal(b), at[child]}));
      if (leaving) {
        const int32_t leave = way_out(ch);
        if (leave >= 0) items.push_back(leave);
      } else {
        items.push_back(heavy);
        if (!trie[t].ends) items.push_back(literal('"'));
      }
      at[t] = static_cast<int32_t>(out->size());
      out->insert(out->end(), {ALT, static_cast<int32_t>(items.size())});
      out->insert(out->end(), items.begin(), items.end());
    }
    return at[0];
  };
  const int32_t leave = put(out, {SEQ, 2, write_trie(true), rest});
  const int32_t stay = write_trie(false);
  return put(out, {ALT, 2, leave, stay});
}

// The words again with every KEYS node written out where it stood (offsets renumbered): the
// header, the nodes in [first, end), then the rule table.
Status expand(const int32_t* words, int64_t n, int64_t first, int64_t end, const std::vector<uint8_t>& is_node,
              std::vector<int32_t>* out) {
  out->assign(words, words + first);
  std::vector<int32_t> moved(n, -1);
  for (int64_t pos = first; pos < end; ++pos) {
    if (!is_node[pos]) continue;
    const int32_t* a = words + pos + 1;
    const int32_t at = static_cast<int32_t>(out->size());
    switch (words[pos]) {
      case KEYS:
        moved[pos] = expand_keys(a, moved[a[1]], moved[a[2]], out);
        break;
      case SEQ:
      case ALT:
        out->insert(out->end(), {words[pos], a[0]});
        for (int32_t i = 0; i < a[0]; ++i) out->push_back(moved[a[1 + i]]);
        moved[pos] = at;
        break;
      case REPEAT:
        out->insert(out->end(), {REPEAT, a[0], a[1], moved[a[2]]});
        moved[pos] = at;
        break;
      case REGION:
        out->insert(out->end(), {REGION, moved[a[0]]});
        moved[pos] = at;
        break;
      case MACHINE:
        out->insert(out->end(), words + pos, words + pos + Ir::node_size(words + pos));
        for (int32_t* e = out->data() + at + 3 + a[0]; e < out->data() + out->size(); e += 3) e[1] = moved[e[1]];
        moved[pos] = at;
        break;
      case AND:
        out->insert(out->end(), {AND, a[0], a[1]});
        for (int32_t i = 0; i < a[0]; ++i) out->insert(out->end(), {moved[a[2 + 2 * i]], a[3 + 2 * i]});
        moved[pos] = at;
        break;
      default:  // leaves: copied as they are
        out->insert(out->end(), words + pos, words + pos + Ir::node_size(words + pos));
        moved[pos] = at;
    }
    if (out->size() > static_cast<size_t>(kMaxIrWords)) return Status::error(Code::limit, "grammar IR too large");
  }
  for (int64_t r = end; r < n; ++r) out->push_back(moved[words[r]]);
  return {};
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
  // The header, the nodes, then the rule table: one body offset per rule, in the last words.
  const int64_t n = n_words, first = Ir::kFirstNode, end = n - int64_t(words[2]);
  std::vector<uint8_t> is_node(n_words, 0);
  std::vector<uint8_t> regular(n_words, 0);  // bytes, byte sets, and sequences, choices, repetitions of them
  int64_t key_bytes = 0;  // in all KEYS nodes: their tries' size, bounded before any is built
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
      case KEYS: {
        if (avail < 3 || a[0] < 0) return bad(pos, "truncated key set");
        if (!child_ok(a[1], pos) || !child_ok(a[2], pos)) return bad(pos, "child offset is not an earlier node");
        size = 4;
        for (int32_t i = 0; i < a[0]; ++i) {
          if (avail < size || a[size - 1] < 0 || avail < size + a[size - 1]) return bad(pos, "truncated key set");
          for (int32_t j = 0; j < a[size - 1]; ++j)
            if (!plain_key_byte(a[size + j])) return bad(pos, "a key byte that JSON does not write plain");
          key_bytes += a[size - 1];
          size += 1 + a[size - 1];
        }
        key_bytes += 1;  // a KEYS node with no key still writes a node
        break;
      }
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
  if (key_bytes > kMaxKeyBytes)
    return Status::error(Code::limit, "grammar IR too large: its KEYS nodes hold more than " +
                                          std::to_string(kMaxKeyBytes) + " key bytes");
  if (key_bytes > 0) {
    Status s = expand(words, n, first, end, is_node, &ir->words);
    if (!s.ok()) return s;
  } else {
    ir->words.assign(words, words + n_words);
  }
  ir->table = static_cast<int32_t>(ir->words.size()) - words[2];
  ir->n_rules = words[2];
  ir->root = words[3];
  return {};
}

}  // namespace tg
