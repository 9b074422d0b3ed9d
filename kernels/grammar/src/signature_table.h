// Interns signatures (runs of int32 words) as dense ids: open addressing over one flat buffer,
// so interning allocates nothing per key once the buffers have grown.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace tg {

class SignatureTable {
 public:
  // Forgets every signature; room for `n_keys` of them before the slots grow.
  void clear(size_t n_keys = 0) {
    size_t cap = 16;
    while (cap < 2 * n_keys) cap *= 2;
    slots_.assign(cap, -1);
    words_.clear();
    spans_.clear();
  }
  int32_t size() const { return static_cast<int32_t>(spans_.size()); }
  // Signature `id`'s words: length(id) of them from data(id) (until words_ grows).
  const int32_t* data(int32_t id) const { return words_.data() + spans_[id].at; }
  size_t length(int32_t id) const { return spans_[id].len; }
  // The id of the signature words_[from, end) just appended by the caller; a repeat is taken
  // back off the buffer.
  int32_t intern(size_t from) {
    if (2 * (spans_.size() + 1) > slots_.size()) grow();
    const uint64_t h = hash(from, words_.size());
    const size_t len = words_.size() - from;
    const size_t mask = slots_.size() - 1;
    for (size_t k = h & mask;; k = (k + 1) & mask) {
      const int32_t id = slots_[k];
      if (id < 0) {
        slots_[k] = size();
        spans_.push_back({from, len, h});
        return slots_[k];
      }
      const Span& s = spans_[id];
      if (s.hash == h && s.len == len && std::memcmp(&words_[s.at], &words_[from], len * sizeof(int32_t)) == 0) {
        words_.resize(from);
        return id;
      }
    }
  }
  std::vector<int32_t> words_;

 private:
  struct Span {
    size_t at, len;
    uint64_t hash;
  };
  uint64_t hash(size_t from, size_t end) const {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = from; i < end; ++i) h = (h ^ uint32_t(words_[i])) * 1099511628211ull;
    return h ^ (h >> 31);
  }
  void grow() {
    slots_.assign(std::max<size_t>(16, slots_.size() * 2), -1);
    const size_t mask = slots_.size() - 1;
    for (int32_t id = 0; id < size(); ++id) {
      size_t k = spans_[id].hash & mask;
      while (slots_[k] >= 0) k = (k + 1) & mask;
      slots_[k] = id;
    }
  }
  std::vector<int32_t> slots_;
  std::vector<Span> spans_;
};

}  // namespace tg
