// The byte-level parser: a set of stacks over the rule automata, shared as a tree of
// interned frames. A frame is (state, parent); the parent is the frame to resume once the
// state's rule completes, -1 being the bottom (the start rule, or the rule a mask-cache
// walk began in). Calling a region rule pushes a marker frame below it that records where the
// region's text starts; a check reads the text from its nearest marker.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "automaton.h"

namespace tg {

struct Frame {
  int32_t state;
  int32_t parent;
};

// A marker's state: -2 - the position of the region's first byte (-1: not known, in mask walks).
inline int32_t mark_state(int64_t pos) { return static_cast<int32_t>(-2 - pos); }
inline bool is_mark(int32_t state) { return state < 0; }
inline int64_t mark_pos(int32_t state) { return -2 - int64_t(state); }

// How closures decide checks: on the text (the parser), or, where no text is known (mask-cache
// walks), all passing or all failing, which bounds what the text could decide.
enum class CheckMode : uint8_t { evaluate, pass, fail };

// Interned frames. Ids below n_states are the bottom frames (state, -1), implicit. A pool may
// be layered on a base pool to hold speculative frames that are thrown away together.
class FramePool {
 public:
  void init(int32_t n_states);
  void layer_on(const FramePool& base);
  void clear();
  Frame get(int32_t id) const {
    if (id >= offset_) return frames_[id - offset_];
    return base_ ? base_->get(id) : Frame{id, -1};
  }
  int32_t intern(int32_t state, int32_t parent);
  int32_t size() const { return static_cast<int32_t>(frames_.size()); }

 private:
  void grow();
  const FramePool* base_ = nullptr;
  int32_t offset_ = 0;
  std::vector<Frame> frames_;
  std::vector<int32_t> slots_;  // open addressing: index into frames_, -1 empty
};

// The parser's position: frames whose states can consume a byte, and whether the bottom
// rule can complete here.
struct StateSet {
  std::vector<int32_t> frames;
  bool can_end = false;
  bool dead() const { return frames.empty(); }
};

// Frame ids seen in one closure: a hash set whose slots carry the generation that filled them,
// so clearing costs O(1) however large the frame ids are.
class SeenFrames {
 public:
  void clear() {
    count_ = 0;
    if (++gen_ == 0) {  // wrapped: forget every old slot
      std::fill(slots_.begin(), slots_.end(), Slot{});
      gen_ = 1;
    }
  }
  // True when `id` was not seen yet (it is now).
  bool insert(int32_t id);

 private:
  struct Slot {
    int32_t id = 0;
    uint32_t gen = 0;
  };
  void grow();
  std::vector<Slot> slots_;
  uint32_t gen_ = 1;
  size_t count_ = 0;
};

class Stepper {
 public:
  explicit Stepper(const Automaton& a) : a_(a) {}
  // The text consumed so far, up to and including the byte being stepped: checks read it.
  void set_text(const uint8_t* text, int64_t len) { text_ = text, len_ = len; }
  void set_mode(CheckMode mode) { mode_ = mode, met_check_ = false; }
  // A closure met a check since set_mode (in the pass and fail modes).
  bool met_check() const { return met_check_; }
  // Everything reachable from `frame` without consuming a byte.
  void start(FramePool& pool, int32_t frame, StateSet* out);
  void step(FramePool& pool, const StateSet& in, uint8_t byte, StateSet* out);
  // Adds to `out` everything reachable from each of `frames` without consuming a byte.
  void extend(FramePool& pool, const std::vector<int32_t>& frames, StateSet* out);

 private:
  void close(FramePool& pool, int32_t frame, StateSet* out);
  bool passes(FramePool& pool, const Frame& f, int32_t check);
  const Automaton& a_;
  const uint8_t* text_ = nullptr;
  int64_t len_ = 0;
  CheckMode mode_ = CheckMode::evaluate;
  bool met_check_ = false;
  std::vector<int32_t> todo_;
  SeenFrames visited_;
};

}  // namespace tg
