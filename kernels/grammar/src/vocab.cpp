#include "vocab.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>

namespace tg {

namespace {

Status arg(const std::string& what) { return Status::error(Code::argument, "vocabulary: " + what); }

// Fills v.below and the nodes' heights: children come after their parent in preorder, so a backward pass sees every
// child's set before its parent's. Equal sets share one entry.
void compute_below(Vocab& v) {
  const int32_t n = static_cast<int32_t>(v.trie.size());
  std::vector<ByteSet> sets(n);
  for (int32_t i = n - 1; i >= 0; --i)
    for (int32_t c = i + 1; c < v.trie[i].end; c = v.trie[c].end) {
      sets[i].add(v.trie[c].byte);
      v.trie[i].height = std::max(v.trie[i].height, v.trie[c].height + 1);
      for (int k = 0; k < 4; ++k) sets[i].bits[k] |= sets[c].bits[k];
    }
  struct Hash {
    size_t operator()(const ByteSet& s) const {
      uint64_t h = s.bits[0] * 0x9E3779B97F4A7C15ull ^ s.bits[1] * 0xC2B2AE3D27D4EB4Full ^
                   s.bits[2] * 0x165667B19E3779F9ull ^ s.bits[3] * 0x27D4EB2F165667C5ull;
      return static_cast<size_t>(h ^ (h >> 31));
    }
  };
  std::unordered_map<ByteSet, int32_t, Hash> ids;
  v.byte_sets.clear();
  v.below.assign(n, 0);
  for (int32_t i = 0; i < n; ++i) {
    auto it = ids.emplace(sets[i], static_cast<int32_t>(v.byte_sets.size())).first;
    if (it->second == static_cast<int32_t>(v.byte_sets.size())) v.byte_sets.push_back(sets[i]);
    v.below[i] = it->second;
  }
}

ByteSet byte_ranges(const char* ranges) {  // "azAZ": a-z and A-Z
  ByteSet s;
  for (; ranges[0] && ranges[1]; ranges += 2)
    for (int32_t b = static_cast<uint8_t>(ranges[0]); b <= static_cast<uint8_t>(ranges[1]); ++b) s.add(b);
  return s;
}

RunIndex build_run_index(const Vocab& v, const ByteSet& bytes) {
  RunIndex r;
  r.bytes = bytes;
  const int32_t n = static_cast<int32_t>(v.trie.size());
  r.node_anchor.assign(n, 0);
  r.token_anchor.assign(v.order.size(), 0);
  for (std::vector<uint64_t>& bits : r.anchored) bits.assign((v.order.size() + 63) / 64, 0);
  // Preorder: a node's parent is the last node seen one level up.
  std::vector<int32_t> path(v.max_len + 1, 0);
  std::vector<int32_t> count;  // per group, then where it begins
  int32_t deepest = 0;
  for (int32_t i = 1; i < n; ++i) {
    const TrieNode& node = v.trie[i];
    path[node.depth] = i;
    const uint8_t up = r.node_anchor[path[node.depth - 1]];
    const bool exit = !bytes.has(node.byte);
    r.node_anchor[i] = !exit ? up : node.depth < RunIndex::kDeep ? static_cast<uint8_t>(node.depth) : RunIndex::kDeep;
    if (exit && up != RunIndex::kDeep) {
      const size_t g = size_t(up) * 256 + node.byte;
      if (count.size() <= g) count.resize((size_t(up) + 1) * 256, 0);
      ++count[g];
      deepest = std::max<int32_t>(deepest, up);
    }
    for (int32_t p = node.tok_begin; p < node.tok_begin + node.n_here; ++p) {
      r.token_anchor[p] = r.node_anchor[i];
      if (r.node_anchor[i] <= 1) r.anchored[r.node_anchor[i]][p >> 6] |= uint64_t(1) << (p & 63);
    }
  }
  count.resize((size_t(deepest) + 1) * 256, 0);
  r.group_begin.assign(count.size() + 1, 0);
  for (size_t g = 0; g < count.size(); ++g) r.group_begin[g + 1] = r.group_begin[g] + count[g];
  r.exits.resize(r.group_begin.back());
  std::vector<int32_t> fill(r.group_begin.begin(), r.group_begin.end() - 1);
  for (int32_t i = 1; i < n; ++i) {
    const TrieNode& node = v.trie[i];
    path[node.depth] = i;
    const uint8_t up = r.node_anchor[path[node.depth - 1]];
    if (!bytes.has(node.byte) && up != RunIndex::kDeep) r.exits[fill[size_t(up) * 256 + node.byte]++] = i;
  }
  return r;
}

}  // namespace

std::pair<const int32_t*, const int32_t*> RunIndex::exits_below(const Vocab& v, int32_t i, uint8_t b) const {
  const size_t g = size_t(node_anchor[i]) * 256 + b;
  if (g + 1 >= group_begin.size()) return {nullptr, nullptr};
  const int32_t* first = exits.data() + group_begin[g];
  const int32_t* last = exits.data() + group_begin[g + 1];
  first = std::lower_bound(first, last, i + 1);
  return {first, std::lower_bound(first, last, v.trie[i].end)};
}

int32_t json_text_char(const uint8_t* b, int32_t n) {
  const uint8_t c = b[0];
  if (c < 0x80) return c >= 0x20 && c != '"' && c != '\\';
  // The second byte's range depends on the lead (shortest forms, no surrogates, <= U+10FFFF).
  int32_t len;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  if (n >= 2 && (b[1] < lo || b[1] > hi)) return 0;
  for (int32_t k = 2; k < len && k < n; ++k)
    if (b[k] < 0x80 || b[k] > 0xBF) return 0;
  return len;
}

Status build_vocab(int32_t vocab_size, const uint8_t* data, const int32_t* offsets, int32_t n_tokens,
                   const int32_t* special_ids, int32_t n_special, const int32_t* stop_ids,
                   int32_t n_stop, Vocab* out) {
  if (n_tokens < 0 || vocab_size < n_tokens || vocab_size > (1 << 24)) return arg("bad sizes");
  if (!offsets || (n_tokens > 0 && !data)) return arg("null buffer");
  if (n_special < 0 || n_stop < 0 || (n_special && !special_ids) || (n_stop && !stop_ids))
    return arg("bad special or stop list");
  if (offsets[0] != 0) return arg("offsets must start at 0");
  for (int32_t i = 0; i < n_tokens; ++i)
    if (offsets[i + 1] < offsets[i]) return arg("offsets must not decrease (token " + std::to_string(i) + ")");
  Vocab& v = *out;
  v.vocab_size = vocab_size;
  v.n_tokens = n_tokens;
  v.data.assign(data, data + offsets[n_tokens]);
  v.offsets.assign(offsets, offsets + n_tokens + 1);
  v.special.assign(vocab_size, 0);
  v.stop.assign(vocab_size, 0);
  for (int32_t i = 0; i < n_special; ++i) {
    if (special_ids[i] < 0 || special_ids[i] >= vocab_size) return arg("special id out of range");
    v.special[special_ids[i]] = 1;
  }
  v.stop_ids.clear();
  for (int32_t i = 0; i < n_stop; ++i) {
    if (stop_ids[i] < 0 || stop_ids[i] >= vocab_size) return arg("stop id out of range");
    if (!v.stop[stop_ids[i]]) v.stop_ids.push_back(stop_ids[i]);
    v.stop[stop_ids[i]] = 1;
  }
  v.order.clear();
  for (int32_t id = 0; id < n_tokens; ++id)
    if (v.ordinary(id) && !v.stop[id]) v.order.push_back(id);
  std::sort(v.order.begin(), v.order.end(), [&](int32_t a, int32_t b) {
    int32_t la = v.length(a), lb = v.length(b);
    int c = std::memcmp(v.bytes(a), v.bytes(b), std::min(la, lb));
    return c != 0 ? c < 0 : (la != lb ? la < lb : a < b);
  });
  // Preorder trie: in sorted order a token's path shares its longest common prefix with the
  // previous token's path, so only the rest needs new nodes.
  v.trie.assign(1, TrieNode{0, 0, 0, 0, 0, 0, 0});
  std::vector<int32_t> path{0};
  const uint8_t* prev = nullptr;
  int32_t prev_len = 0;
  v.max_len = 0;
  auto close = [&](int32_t node, int32_t tokens_so_far) {
    v.trie[node].end = static_cast<int32_t>(v.trie.size());
    v.trie[node].tok_end = tokens_so_far;
  };
  v.text_tail.assign(1, Vocab::kNoText);
  std::vector<uint8_t> text_from;  // per byte of the token: the rest is whole JSON text characters
  std::vector<uint8_t> tail;       // per byte of the token: its node's text_tail
  for (int32_t k = 0; k < static_cast<int32_t>(v.order.size()); ++k) {
    int32_t id = v.order[k], len = v.length(id);
    const uint8_t* b = v.bytes(id);
    int32_t lcp = 0;
    while (lcp < len && lcp < prev_len && b[lcp] == prev[lcp]) ++lcp;
    while (static_cast<int32_t>(path.size()) - 1 > lcp) {
      close(path.back(), k);
      path.pop_back();
    }
    text_from.assign(len + 1, 0);
    text_from[len] = 1;
    for (int32_t p = len - 1; p >= 0; --p) {
      // UTF-8 decodes one way: the character at p (maybe cut at the token's end), then the rest.
      const int32_t n = json_text_char(b + p, len - p);
      text_from[p] = n > 0 && (p + n > len || text_from[p + n]);
    }
    tail.assign(len, Vocab::kNoText);
    for (int32_t p = 0; p < len; ++p) {
      int32_t q = p;  // where the character holding byte p begins
      while (q > 0 && q > p - 3 && (b[q] & 0xC0) == 0x80) --q;
      const int32_t n = (b[q] & 0xC0) == 0x80 ? 0 : json_text_char(b + q, len - q);
      if (n > p - q && text_from[q]) tail[p] = static_cast<uint8_t>(q == p ? 0 : q + n - p);
    }
    for (int32_t d = 1; d <= lcp; ++d)  // the bytes before p decide k: a prefix's tokens agree, or one is not text
      if (v.text_tail[path[d]] != tail[d - 1]) v.text_tail[path[d]] = Vocab::kNoText;
    for (int32_t d = lcp; d < len; ++d) {
      path.push_back(static_cast<int32_t>(v.trie.size()));
      v.trie.push_back(TrieNode{d + 1, 0, k, 0, 0, 0, b[d]});
      v.text_tail.push_back(tail[d]);
    }
    v.trie[path.back()].n_here++;
    v.max_len = std::max(v.max_len, len);
    prev = b;
    prev_len = len;
  }
  while (!path.empty()) {
    close(path.back(), static_cast<int32_t>(v.order.size()));
    path.pop_back();
  }
  compute_below(v);
  v.first.assign(256, -1);
  for (int32_t c = 1; c < static_cast<int32_t>(v.trie.size()); c = v.trie[c].end) v.first[v.trie[c].byte] = c;
  v.order_mask.assign(v.words(), 0);
  for (int32_t id : v.order) v.order_mask[id >> 5] |= 1u << (id & 31);
  v.order_len.resize(v.order.size());
  for (size_t p = 0; p < v.order.size(); ++p)
    v.order_len[p] = static_cast<uint8_t>(std::min<int32_t>(v.length(v.order[p]), Vocab::kLongToken));
  // Classes that loops of regexes and string patterns often keep to, narrowest first.
  v.runs.clear();
  for (const char* ranges : {"az", "azAZ", "azAZ09", "azAZ09__"}) v.runs.push_back(build_run_index(v, byte_ranges(ranges)));
  return {};
}

}  // namespace tg
