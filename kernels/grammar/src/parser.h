// The byte-level parser: a graph-structured stack over the rule automata. A frame is
// (state, parent): the parent is a join, the point where the state's rule returns, or -1, the
// bottom (the start rule, or the rule a mask-cache walk began in). A join is made once per rule
// called in a closure (and per region start, below): every caller that calls the rule there
// adds its return frame to the join, so stacks that differ only below the call share their top.
// The live frames are then bounded by grammar states times input positions, however ambiguous
// the grammar: a tree of stacks would hold one frame per derivation, exponentially many.
// A join also records where the text of the region its rule is in starts: a check reads the text
// from there.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "automaton.h"
#include "signature_table.h"

namespace tg {

struct Frame {
  int32_t state;   // kJoin for a join
  int32_t parent;  // a frame's join (or -1); a join's index in its layer
};

constexpr int32_t kJoin = -1;
inline bool is_join(const Frame& f) { return f.state == kJoin; }

struct Join {
  int32_t node;           // its id among the pool's frames
  int32_t rule;
  int32_t serial;         // the closure that made it: only that closure adds returns
  int64_t from;           // where the region's text starts (0: the whole text; -1: not known)
  int32_t first_edge;     // this layer's edges, a list; -1 when none
  int32_t n_rets;
  bool region;            // its rule is a region: calling it marks where the region's text starts
  int32_t same = -1;      // same_join's answer, -1 not known yet
};

// How closures decide checks: on the text (the parser), or, where no text is known (mask-cache
// walks), all passing or all failing, which bounds what the text could decide.
enum class CheckMode : uint8_t { evaluate, pass, fail };

// Interned frames and joins. Ids below n_states are the bottom frames (state, -1), implicit.
// A pool may be layered on a base pool to hold speculative nodes that are thrown away
// together; joins get returns only in the layer that made them.
class FramePool {
 public:
  // The most frames, joins and return edges a pool holds (a few hundred MB): an ambiguous
  // grammar fed a long text (a counted repetition whose items have two lengths keeps every
  // count alive) would otherwise grow until the machine kills the process. Past it the pool
  // still works, and raises `*exceeded` (see watch) for its owner to stop and report.
  static constexpr size_t kMaxNodes = size_t(1) << 24;
  void watch(bool* exceeded) { exceeded_ = exceeded; }
  void init(int32_t n_states);
  void layer_on(const FramePool& base);
  void clear();
  Frame get(int32_t id) const {
    if (id >= offset_) return frames_[id - offset_];
    return base_ ? base_->get(id) : Frame{id, -1};
  }
  int32_t intern(int32_t state, int32_t parent);
  int32_t size() const { return static_cast<int32_t>(frames_.size()); }
  // Nodes in this layer and those below it: what a limit on the parser's memory counts.
  int64_t total() const { return int64_t(offset_) + size(); }

  // A closure's number: joins are shared within one closure only.
  int32_t begin_closure() { return ++serial_; }
  // The join of `rule` called in closure `serial` in the region starting at `from`; `*made`
  // says whether it is new (its rule's start frame is still to be pushed).
  int32_t join(int32_t rule, int32_t serial, int64_t from, bool region, bool* made);
  const Join& join_of(int32_t id) const {
    if (id >= offset_) return joins_[frames_[id - offset_].parent];
    return base_->join_of(id);
  }
  // The first join of this layer equal to `join` (same rule, region start and returns), made
  // by an earlier closure or this one; `join` must be closed (its closure over). A loop that
  // calls a rule anew at each position (an item repeated without bound, the callers in one
  // state) makes equal joins: frames under them are one frame, so the live frames stay
  // bounded (else each call's frames lived on beside the others: quadratic time). Joins of
  // the base pool, and -1 (the bottom), are left as they are.
  int32_t same_join(int32_t join);
  // Adds a return (a frame, a join or -1) to a join of this layer's current closure.
  void add_return(int32_t join, int32_t ret);
  template <class F>
  void for_each_return(int32_t join, F&& f) const {
    if (join < offset_) return base_->for_each_return(join, f);
    for (int32_t e = joins_[frames_[join - offset_].parent].first_edge; e >= 0; e = edges_[e].next) f(edges_[e].ret);
  }
  // The states where parsing goes on after a frame's rule completes, one per caller frame (into
  // `out`), when known without the text: false for the bottom, a region (its checks read the
  // text) or more than `max` callers.
  // `todo` is the caller's scratch (the mask path calls this per frame).
  bool return_states(int32_t frame, size_t max, std::vector<int32_t>* out, std::vector<int32_t>* todo) const;
  // Where the text of the region around `frame` starts.
  int64_t region_from(int32_t frame) const {
    const int32_t p = get(frame).parent;
    return p < 0 ? 0 : join_of(p).from;
  }

 private:
  struct Edge {
    int32_t ret, next;
  };
  void grow();
  void grow_joins();
  void count_node() {
    if (exceeded_ && frames_.size() + edges_.size() >= kMaxNodes) *exceeded_ = true;
  }
  bool* exceeded_ = nullptr;
  const FramePool* base_ = nullptr;
  int32_t offset_ = 0;
  int32_t serial_ = 0;
  std::vector<Frame> frames_;
  std::vector<int32_t> slots_;  // open addressing: index into frames_, -1 empty
  std::vector<Join> joins_;
  std::vector<int32_t> join_slots_;  // open addressing over joins_, -1 empty
  std::vector<Edge> edges_;
  SignatureTable join_keys_;   // same_join's: (rule, from, region, sorted returns)
  std::vector<int32_t> first_with_key_;  // per key: the first join that has it
};

// The state standing for `s` in `rep` (per state, its cache class's representative, -1 itself;
// no table: every state itself).
inline int32_t class_state(const int32_t* rep, int32_t s) { return rep && rep[s] >= 0 ? rep[s] : s; }

// Names for a pool's frames that say what they do, not when they were made. Each closure makes
// joins of its own, so equal stacks reached by two closures have distinct frame ids but one name:
// a frame's is (state, its parent's name); a join's, (where its region starts, region, its
// returns' names). Bottom frames (and -1) are their own names. Joins are immutable once their
// closure is over, and the join graph is acyclic (no left recursion).
class FrameNames {
 public:
  // Without `region_starts`, joins that differ only in where their region starts share a name:
  // for answers that no check read (checks read from there).
  explicit FrameNames(bool region_starts) : region_starts_(region_starts) {}
  // Names states by `rep` (per state, the state standing for it, -1 itself): states that no
  // token can tell apart (cache_classes.h) then give frames one name, for answers within a
  // token's length. Kept until set again.
  void name_states_by(const int32_t* rep) { rep_ = rep; }
  void clear() {
    names_.clear();
    table_.clear();
  }
  int32_t name(const FramePool& pool, int32_t n_states, int32_t frame);

 private:
  bool region_starts_;
  const int32_t* rep_ = nullptr;
  std::vector<int32_t> names_;  // per pool frame (id - n_states): its name, -1 not known yet
  std::vector<int32_t> todo_;
  SignatureTable table_;
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
  bool contains(int32_t id) const;

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
  // A closure met a check since set_mode.
  bool met_check() const { return met_check_; }
  // Frames looked at so far, by every call (stepped, and visited by closures): the work done.
  int64_t work() const { return work_; }
  // Everything reachable from `frame` without consuming a byte.
  void start(FramePool& pool, int32_t frame, StateSet* out);
  void step(FramePool& pool, const StateSet& in, uint8_t byte, StateSet* out);
  // Adds to `out` everything reachable from each of `frames` without consuming a byte.
  void extend(FramePool& pool, const std::vector<int32_t>& frames, StateSet* out);

 private:
  void close(FramePool& pool, int32_t frame, StateSet* out);
  // Pushes `ret` (a frame or a join; -1: the bottom rule completed) to be closed.
  void resume(int32_t ret, StateSet* out) {
    if (ret < 0) out->can_end = true;
    else todo_.push_back(ret);
  }
  bool passes(FramePool& pool, int32_t frame, int32_t check);
  const Automaton& a_;
  const uint8_t* text_ = nullptr;
  int64_t len_ = 0;
  CheckMode mode_ = CheckMode::evaluate;
  bool met_check_ = false;
  int32_t serial_ = 0;
  int64_t work_ = 0;
  std::vector<int32_t> todo_;
  SeenFrames visited_;
};

}  // namespace tg
