// A model's vocabulary as byte strings, plus a byte trie over the ordinary tokens.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "status.h"

namespace tg {

// A set of byte values.
struct ByteSet {
  uint64_t bits[4] = {0, 0, 0, 0};
  void add(uint8_t b) { bits[b >> 6] |= uint64_t(1) << (b & 63); }
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  bool intersects(const ByteSet& o) const {
    return ((bits[0] & o.bits[0]) | (bits[1] & o.bits[1]) | (bits[2] & o.bits[2]) | (bits[3] & o.bits[3])) != 0;
  }
  bool operator==(const ByteSet& o) const {
    return bits[0] == o.bits[0] && bits[1] == o.bits[1] && bits[2] == o.bits[2] && bits[3] == o.bits[3];
  }
};

struct TrieNode {
  int32_t depth;      // bytes from the root
  int32_t end;        // preorder index just past this node's subtree
  int32_t tok_begin;  // subtree tokens are order[tok_begin, tok_end); those ending here come first
  int32_t tok_end;
  int32_t n_here;     // tokens whose bytes end exactly at this node
  int32_t height;     // bytes from this node to its deepest descendant
  uint8_t byte;       // the byte leading to this node
};

struct Vocab;

// The vocabulary seen through one byte class C, for a walk in a plain state that every byte of C
// leads back to (the loop of `[a-z]+`): below a trie node, a token either keeps to C's bytes, and
// is accepted with the node, or leaves C at an exit (a node whose byte is not in C), and only the
// exits whose byte the state takes need walking. The walk then costs the exits it takes, not the
// tokens it accepts: a vocabulary of 262,144 tokens has 33,189 of lower-case letters only.
struct RunIndex {
  ByteSet bytes;  // C
  static constexpr uint8_t kDeep = 0xFF;  // anchors this deep are not indexed
  // The anchor of a node: the depth of the deepest node on its path, itself included, whose
  // byte is not in C (0: none, the root); per node, and per trie position (its token's last node).
  std::vector<uint8_t> node_anchor, token_anchor;
  std::vector<uint64_t> anchored[2];  // the positions anchored at depth 0 (the root) and 1, as bits
  // Exit nodes grouped by (their parent's anchor k, their byte b), each group increasing:
  // exits[group_begin[k * 256 + b], group_begin[k * 256 + b + 1]).
  std::vector<int32_t> exits, group_begin;
  // The exits below node i (its subtree, anchored where i is) with byte b.
  std::pair<const int32_t*, const int32_t*> exits_below(const Vocab& v, int32_t i, uint8_t b) const;
};

struct Vocab {
  int32_t vocab_size = 0;
  int32_t n_tokens = 0;
  std::vector<uint8_t> data;
  std::vector<int32_t> offsets;       // n_tokens + 1
  std::vector<uint8_t> special;       // per id < vocab_size: never grammar text
  std::vector<uint8_t> stop;          // per id < vocab_size
  std::vector<int32_t> stop_ids;
  std::vector<int32_t> order;         // ordinary token ids sorted by bytes (trie preorder)
  std::vector<uint32_t> order_mask;  // bitmask (by id) of the tokens in `order`
  std::vector<TrieNode> trie;         // preorder; node 0 is the root
  // byte -> the root's child for it, or -1: a walk goes straight to the first bytes its state
  // takes, instead of reading every child of the root (scattered over a 16 MB trie for 262,144
  // tokens: a cache miss each).
  std::vector<int32_t> first;
  // node -> the bytes on the edges below it, as an index into byte_sets (few distinct sets):
  // a walk that every one of them leaves unchanged accepts the whole subtree at once.
  std::vector<int32_t> below;
  std::vector<ByteSet> byte_sets;
  // node -> k when every token below it is, from the node's own byte on, the last k bytes of a
  // UTF-8 character (k = 0: none; the node's byte begins a character), then characters that a
  // JSON string holds unescaped (U+0020 and up but `"` and `\`), the last maybe cut short;
  // kNoText otherwise. A string body's loop state (MaskWalk::text_loop) accepts the whole
  // subtree of a node with k = 0, and a state inside a character of the body one with k > 0
  // (MaskWalk::text_after): most of a multilingual vocabulary's tokens, without visiting them.
  static constexpr uint8_t kNoText = 0xFF;
  std::vector<uint8_t> text_tail;
  int32_t max_len = 0;
  std::vector<RunIndex> runs;  // a few common classes (letters, word characters), narrowest first
  std::vector<uint8_t> order_len;  // per trie position: its token's length (kLongToken when longer)
  static constexpr uint8_t kLongToken = 0xFF;

  int32_t words() const { return (vocab_size + 31) / 32; }
  const uint8_t* bytes(int32_t id) const { return data.data() + offsets[id]; }
  int32_t length(int32_t id) const { return id < n_tokens ? offsets[id + 1] - offsets[id] : 0; }
  // An ordinary token: has bytes and is neither special nor padding.
  bool ordinary(int32_t id) const { return id < n_tokens && !special[id] && length(id) > 0; }
};

// The length of the character at `b` when it is valid UTF-8 (shortest form, no surrogates) and
// a JSON string holds it unescaped; 0 otherwise. Only its first `n` bytes are read: a length
// above `n` means they begin such a character.
int32_t json_text_char(const uint8_t* b, int32_t n);

Status build_vocab(int32_t vocab_size, const uint8_t* data, const int32_t* offsets, int32_t n_tokens,
                   const int32_t* special_ids, int32_t n_special, const int32_t* stop_ids,
                   int32_t n_stop, Vocab* out);

}  // namespace tg
