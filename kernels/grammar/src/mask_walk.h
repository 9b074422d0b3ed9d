// The parser configurations of one token-mask cache walk (see grammar.h), interned, with
// memoized byte steps. The walk visits up to every trie node (~100k for a 49k vocabulary) but
// meets few distinct configurations: stepping one costs a table look-up, and a configuration
// that every byte below a trie node leads back to itself accepts that node's whole subtree
// without visiting it (the body of a JSON string, for most of the vocabulary).
#pragma once
#include <cstdint>
#include <vector>

#include "automaton.h"
#include "parser.h"
#include "signature_table.h"
#include "vocab.h"

namespace tg {

// Open addressing from 64-bit keys to int32 values. Slots carry the generation that filled
// them, so clearing costs O(1) however large an earlier walk made the table.
class FlatMap {
 public:
  static constexpr int32_t kAbsent = -2;
  int32_t find(uint64_t key) const {
    if (slots_.empty()) return kAbsent;
    const size_t mask = slots_.size() - 1;
    for (size_t h = hash(key) & mask;; h = (h + 1) & mask) {
      const Slot& s = slots_[h];
      if (s.gen != gen_) return kAbsent;
      if (s.key == key) return s.value;
    }
  }
  void put(uint64_t key, int32_t value);
  void clear();

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t gen = 0;
    int32_t value = 0;
  };
  static size_t hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    return static_cast<size_t>(key ^ (key >> 33));
  }
  std::vector<Slot> slots_;
  uint32_t gen_ = 1;
  size_t used_ = 0;
};

class MaskWalk {
 public:
  // `rep`: per state, the state of its cache class (cache_classes.h), -1 where not known yet.
  // A walk looks no further than a token's length, within which a state and its class's agree:
  // the walk names frames by class and steps lone plain frames into class states, so that a
  // long count (a string's maxLength) meets its own configuration again after a character, as
  // an unbounded string body does, instead of a new one per position.
  MaskWalk(const Automaton& a, const int32_t* rep) : a_(a), rep_(rep), stepper_(a) {
    names_.name_states_by(rep);
  }
  // Starts the walk from the bottom frame `state`; `after` are the states that may follow its
  // rule, `beyond` those that may follow any rule above (closed: once one of them completes
  // its rule, what follows is among them again). The tables of the previous walk are cleared,
  // their memory kept. `mode` decides the checks met (the walk has no text).
  void begin(int32_t state, const std::vector<int32_t>* after, const std::vector<int32_t>* beyond, CheckMode mode);
  bool met_check() const { return stepper_.met_check(); }
  // The frames one walk may look at (Stepper::work). Past them the walk stops, every path from
  // then on dead, and its cache is refused: a count of thousands of copies of an item that is
  // empty when a check holds keeps every copy in each configuration (seconds per mask).
  static constexpr int64_t kMaxWork = int64_t(1) << 25;
  // The walk since begin() passed kMaxWork: what it found is incomplete.
  bool over_work() const { return over_work_; }

  int32_t start() const { return 0; }
  // The configuration after `byte`, or -1 when nothing is alive any more (no token going on
  // from here can be accepted or uncertain).
  int32_t step(int32_t config, uint8_t byte);
  // The rule of the walk's state is still consuming the bytes.
  bool own_alive(int32_t c) const { return configs_[c].own_alive; }
  // The rule completed exactly here.
  bool own_ends(int32_t c) const { return configs_[c].own_ends; }
  // A speculative continuation (after the rule completed earlier) is still alive.
  bool spec_alive(int32_t c) const { return configs_[c].spec_alive; }
  // A speculative continuation completed exactly here.
  bool spec_ends(int32_t c) const { return sets_[configs_[c].spec].can_end; }
  // A continuation beyond the speculative one (it completed its rule too) is alive or complete:
  // only the real stack can tell (a token `},` after a string); when none is, a token that
  // leaves the speculative rule is refused whatever the stack (`}$`).
  bool far_alive(int32_t c) const { return configs_[c].far_alive; }
  // The frame in a plain state that is all of the configuration (see config_of), or -1.
  int32_t lone_plain(int32_t c) const { return configs_[c].lone_plain; }
  // Every byte of `bytes` leads from `config` back to `config`.
  bool loops_on(int32_t config, const ByteSet& bytes);
  // The bytes that some frame of `config` takes: no other byte leads anywhere from it.
  ByteSet next_bytes(int32_t config);
  // Every byte of `bytes` (the vocabulary's run `run`) takes each frame of `config` to one
  // state: stepping `config` on any of them gives one configuration.
  bool uniform(int32_t config, int32_t run, const ByteSet& bytes);
  // Every string over `bytes` of at most `height` bytes keeps the rule's own parse alive from
  // `config`, through states that only consume bytes (a counted or searching string body).
  bool alive_within(int32_t config, const ByteSet& bytes, int32_t bytes_id, int32_t height);

  // A frame in a plain state (one that only consumes bytes: no calls, not final), alone and
  // with nothing speculative, is a configuration of its own: stepping it into another plain
  // state needs no parser, so a walk through counted strings and literals is table look-ups.
  // While the walk stays in plain states the rule cannot complete, so the frame's parent
  // plays no part: these answer the questions above from the frame's state.
  int32_t config_of(int32_t plain_frame);
  // The frame after `byte`: -1 when nothing follows, -2 when the state reached is not plain.
  int32_t step_plain(int32_t frame, uint8_t byte) {
    const Frame f = pool_.get(frame);
    const int32_t to = a_.step(f.state, byte);
    if (to < 0) return -1;
    return a_.plain[to] ? pool_.intern(class_state(rep_, to), f.parent) : -2;
  }
  int32_t state_of(int32_t frame) const { return pool_.get(frame).state; }
  bool loops_on_state(int32_t state, const ByteSet& bytes);
  // Every string of characters that a JSON string holds unescaped, the last maybe cut short
  // (see Vocab::text_tail), keeps the rule consuming from `state`, through plain states: an
  // unbounded string body.
  bool text_loop(int32_t state);
  // From the plain frame `frame`, any `r` continuation bytes (the rest of a character) keep the
  // rule's own parse alive and then reach one plain frame of a text_loop state (through a call,
  // say, to the rest of a string body). r = 0: the frame's state is text_loop's.
  bool text_after(int32_t frame, int32_t r);
  bool alive_within_state(int32_t state, const ByteSet& bytes, int32_t bytes_id, int32_t height);

 private:
  struct Config {
    int32_t own, spec, far;  // set ids
    bool own_alive, own_ends, spec_alive, far_alive;
    int32_t lone_plain;
    ByteSet loops, breaks;  // bytes known to lead back here, and known not to
  };
  // Sets are interned by their frames' names (FrameNames), frames kept in that order: without
  // them a walk would never meet a configuration again (a string body calling a rule per
  // character would visit every trie node).
  int32_t intern_set(StateSet* set);
  const ByteSet& safe_bytes(int32_t state);
  int32_t plain_reach(int32_t state, const ByteSet& bytes, int32_t height);
  bool text_closed(std::vector<int32_t>* body, std::vector<int32_t>* met);
  int32_t intern_config(int32_t own, int32_t spec, int32_t far);
  int32_t step_set(int32_t set, uint8_t byte);
  // The set joined with the closure of `states`, memoized in `memo` (per set, -1 unknown).
  int32_t joined(int32_t set, const std::vector<int32_t>& states, std::vector<int32_t>* memo);
  // Whether the walk has passed kMaxWork (then it steps nothing more).
  bool spent() {
    if (!over_work_ && stepper_.work() - work_start_ > kMaxWork) over_work_ = true;
    return over_work_;
  }
  int64_t work_start_ = 0;
  bool over_work_ = false;

  const Automaton& a_;
  const int32_t* rep_;
  const std::vector<int32_t>* after_ = nullptr;
  const std::vector<int32_t>* beyond_ = nullptr;
  FramePool pool_;
  Stepper stepper_;
  StateSet scratch_;
  std::vector<StateSet> sets_;  // frames sorted by name
  std::vector<std::vector<int32_t>> set_keys_;  // their names
  std::vector<uint64_t> set_hashes_;
  FrameNames names_{true};
  std::vector<std::pair<int32_t, int32_t>> keyed_;  // intern_set's scratch: (name, frame)
  std::vector<int32_t> keys_;
  std::vector<int32_t> set_slots_;  // open addressing over set ids, -1 empty
  FlatMap set_steps_, pair_ids_, config_ids_, config_steps_;
  int32_t n_pairs_ = 0;  // (spec, far) pairs named in pair_ids_
  std::vector<int32_t> with_after_, with_beyond_;  // set -> the set joined with `after_`'s, `beyond_`'s
  std::vector<Config> configs_;
  // Per automaton state, kept across walks: the bytes that lead to a plain state; the state
  // most of them lead to (-1 when none does, -2 before it is computed) and the bytes that do.
  std::vector<ByteSet> safe_, main_bytes_;
  std::vector<int32_t> main_;
  std::vector<ByteSet> state_loops_, state_breaks_;  // loops_on_state's findings, kept across walks
  std::vector<ByteSet> out_bytes_;  // per state, the bytes it takes, kept across walks
  std::vector<uint8_t> out_known_;
  std::vector<uint8_t> uniform_;  // per (state, run): 0 not known, 1 uniform, 2 not; kept across walks
  static constexpr int32_t kRuns = 8;
  std::vector<int8_t> text_loops_;  // text_loop's answers, -1 not known yet
  CheckMode mode_ = CheckMode::pass;
  FlatMap text_afters_;  // text_after's answers (0, 1) by (state, mode, r): the frame's parent plays no part
  FlatMap reach_;  // (state, byte set) -> heights proven alive (>= 0) or known to fail (< 0)
  std::vector<int32_t> frontier_, next_frontier_;
  SeenFrames reached_;
};

}  // namespace tg
