#include "mask_walk.h"

#include <algorithm>
#include <climits>

namespace tg {

void FlatMap::put(uint64_t key, int32_t value) {
  if ((used_ + 1) * 2 > slots_.size()) {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(std::max<size_t>(64, old.size() * 2), Slot{});
    used_ = 0;
    for (const Slot& s : old)
      if (s.gen == gen_) put(s.key, s.value);
  }
  const size_t mask = slots_.size() - 1;
  size_t h = hash(key) & mask;
  while (slots_[h].gen == gen_ && slots_[h].key != key) h = (h + 1) & mask;
  if (slots_[h].gen != gen_) ++used_;
  slots_[h] = Slot{key, gen_, value};
}

void FlatMap::clear() {
  used_ = 0;
  if (++gen_ == 0) {  // wrapped: forget every old slot
    std::fill(slots_.begin(), slots_.end(), Slot{});
    gen_ = 1;
  }
}

namespace {

uint64_t hash_set(const std::vector<int32_t>& keys, bool can_end) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (keys.size() * 2 + can_end);
  for (int32_t x : keys) h = (h ^ static_cast<uint32_t>(x)) * 0x100000001B3ull;
  return h ^ (h >> 29);
}

}  // namespace

void MaskWalk::begin(int32_t state, const std::vector<int32_t>* after, const std::vector<int32_t>* beyond,
                     CheckMode mode) {
  after_ = after;
  beyond_ = beyond;
  stepper_.set_mode(mode);
  mode_ = mode;
  work_start_ = stepper_.work();
  over_work_ = false;
  pool_.init(a_.n_states());
  sets_.clear();
  set_keys_.clear();
  set_hashes_.clear();
  names_.clear();
  if (set_slots_.size() > 4096) set_slots_.assign(1024, -1);  // a big table is not kept forever
  else std::fill(set_slots_.begin(), set_slots_.end(), -1);
  with_after_.clear();
  with_beyond_.clear();
  configs_.clear();
  set_steps_.clear();
  pair_ids_.clear();
  n_pairs_ = 0;
  config_ids_.clear();
  config_steps_.clear();
  sets_.emplace_back();  // set 0: nothing alive
  set_keys_.emplace_back();
  set_hashes_.push_back(0);
  with_after_.push_back(-1);
  with_beyond_.push_back(-1);
  scratch_.frames.assign(1, state);  // no closure: the other frames of the real state are separate
  scratch_.can_end = false;
  intern_config(intern_set(&scratch_), 0, 0);
}

int32_t MaskWalk::intern_set(StateSet* set) {
  if (set->dead() && !set->can_end) return 0;
  keyed_.clear();
  for (int32_t f : set->frames) keyed_.push_back({names_.name(pool_, a_.n_states(), f), f});
  std::sort(keyed_.begin(), keyed_.end());
  std::vector<int32_t>& keys = keys_;
  keys.clear();
  set->frames.clear();
  for (size_t i = 0; i < keyed_.size(); ++i)
    if (i == 0 || keyed_[i].first != keyed_[i - 1].first) {  // equal frames: one does for both
      keys.push_back(keyed_[i].first);
      set->frames.push_back(keyed_[i].second);
    }
  const uint64_t h = hash_set(keys, set->can_end);
  if ((sets_.size() + 1) * 2 > set_slots_.size()) {
    set_slots_.assign(std::max<size_t>(1024, set_slots_.size() * 2), -1);
    for (int32_t id = 1; id < static_cast<int32_t>(sets_.size()); ++id) {
      size_t k = set_hashes_[id] & (set_slots_.size() - 1);
      while (set_slots_[k] >= 0) k = (k + 1) & (set_slots_.size() - 1);
      set_slots_[k] = id;
    }
  }
  const size_t mask = set_slots_.size() - 1;
  size_t k = h & mask;
  for (; set_slots_[k] >= 0; k = (k + 1) & mask) {
    const int32_t id = set_slots_[k];
    if (set_hashes_[id] == h && sets_[id].can_end == set->can_end && set_keys_[id] == keys) return id;
  }
  const int32_t id = static_cast<int32_t>(sets_.size());
  set_slots_[k] = id;
  sets_.push_back(*set);
  set_keys_.push_back(keys);
  set_hashes_.push_back(h);
  with_after_.push_back(-1);
  with_beyond_.push_back(-1);
  return id;
}

int32_t MaskWalk::intern_config(int32_t own, int32_t spec, int32_t far) {
  const uint64_t pair_key = (uint64_t(uint32_t(spec)) << 32) | uint32_t(far);
  int32_t pair = pair_ids_.find(pair_key);
  if (pair == FlatMap::kAbsent) pair_ids_.put(pair_key, pair = n_pairs_++);
  const uint64_t key = (uint64_t(uint32_t(own)) << 32) | uint32_t(pair);
  const int32_t known = config_ids_.find(key);
  if (known != FlatMap::kAbsent) return known;
  Config c{};
  c.own = own;
  c.spec = spec;
  c.far = far;
  c.own_alive = !sets_[own].dead();
  c.own_ends = sets_[own].can_end;
  c.spec_alive = !sets_[spec].dead();
  c.far_alive = !sets_[far].dead() || sets_[far].can_end;
  const StateSet& set = sets_[own];
  const bool lone = spec == 0 && far == 0 && !set.can_end && set.frames.size() == 1;
  c.lone_plain = lone && a_.plain[pool_.get(set.frames[0]).state] ? set.frames[0] : -1;
  const int32_t id = static_cast<int32_t>(configs_.size());
  configs_.push_back(c);
  config_ids_.put(key, id);
  return id;
}

int32_t MaskWalk::step_set(int32_t set, uint8_t byte) {
  if (sets_[set].dead()) return 0;
  const uint64_t key = uint64_t(set) * 256 + byte;
  int32_t next = set_steps_.find(key);
  if (next != FlatMap::kAbsent) return next;
  if (spent()) return 0;
  stepper_.step(pool_, sets_[set], byte, &scratch_);
  next = intern_set(&scratch_);
  set_steps_.put(key, next);
  return next;
}

int32_t MaskWalk::joined(int32_t set, const std::vector<int32_t>& states, std::vector<int32_t>* memo) {
  if ((*memo)[set] >= 0) return (*memo)[set];
  if (spent()) return 0;
  scratch_ = sets_[set];
  stepper_.extend(pool_, states, &scratch_);
  const int32_t out = intern_set(&scratch_);
  (*memo)[set] = out;  // intern_set may have grown the memo: index it again
  return out;
}

int32_t MaskWalk::step(int32_t config, uint8_t byte) {
  const uint64_t key = uint64_t(config) * 256 + byte;
  int32_t next = config_steps_.find(key);
  if (next != FlatMap::kAbsent) return next;
  const Config c = configs_[config];
  const int32_t own = step_set(c.own, byte);
  int32_t spec = step_set(c.spec, byte), far = step_set(c.far, byte);
  // The rule completed: it may be followed by any of its continuations anywhere in the grammar,
  // and when those complete theirs, by the continuations of any rule above.
  if (sets_[own].can_end) spec = joined(spec, *after_, &with_after_);
  if (sets_[spec].can_end || sets_[far].can_end) far = joined(far, *beyond_, &with_beyond_);
  const auto gone = [&](int32_t set) { return sets_[set].dead() && !sets_[set].can_end; };
  const bool dead = gone(own) && gone(spec) && gone(far);
  next = dead ? -1 : intern_config(own, spec, far);
  config_steps_.put(key, next);
  return next;
}

bool MaskWalk::loops_on(int32_t config, const ByteSet& bytes) {
  if (configs_[config].breaks.intersects(bytes)) return false;
  for (int w = 0; w < 4; ++w) {
    uint64_t todo = bytes.bits[w] & ~configs_[config].loops.bits[w];
    while (todo) {
      const uint8_t b = static_cast<uint8_t>(w * 64 + __builtin_ctzll(todo));
      todo &= todo - 1;
      const bool back = step(config, b) == config;  // may grow configs_: index again below
      (back ? configs_[config].loops : configs_[config].breaks).add(b);
      if (!back) return false;
    }
  }
  return true;
}

ByteSet MaskWalk::next_bytes(int32_t config) {
  if (out_known_.empty()) out_known_.assign(a_.n_states(), 0), out_bytes_.assign(a_.n_states(), ByteSet{});
  ByteSet out;
  const Config c = configs_[config];
  for (int32_t set : {c.own, c.spec, c.far})
    for (int32_t frame : sets_[set].frames) {
      const int32_t s = pool_.get(frame).state;
      if (!out_known_[s]) {
        for (int32_t b = 0; b < 256; ++b)
          if (a_.step(s, static_cast<uint8_t>(b)) >= 0) out_bytes_[s].add(static_cast<uint8_t>(b));
        out_known_[s] = 1;
      }
      for (int w = 0; w < 4; ++w) out.bits[w] |= out_bytes_[s].bits[w];
    }
  return out;
}

bool MaskWalk::uniform(int32_t config, int32_t run, const ByteSet& bytes) {
  if (run >= kRuns) return false;
  if (uniform_.empty()) uniform_.assign(size_t(a_.n_states()) * kRuns, 0);
  const Config c = configs_[config];
  for (int32_t set : {c.own, c.spec, c.far})
    for (int32_t frame : sets_[set].frames) {
      const int32_t s = pool_.get(frame).state;
      uint8_t& known = uniform_[size_t(s) * kRuns + run];
      if (!known) {
        int32_t first = -2;
        known = 1;
        for (int32_t b = 0; b < 256 && known == 1; ++b) {
          if (!bytes.has(static_cast<uint8_t>(b))) continue;
          const int32_t t = a_.step(s, static_cast<uint8_t>(b));
          if (first == -2) first = t;
          if (t != first) known = 2;
        }
      }
      if (known == 2) return false;
    }
  return true;
}

const ByteSet& MaskWalk::safe_bytes(int32_t state) {
  if (main_.empty()) {
    safe_.assign(a_.n_states(), ByteSet{});
    main_bytes_.assign(a_.n_states(), ByteSet{});
    main_.assign(a_.n_states(), -2);
  }
  if (main_[state] != -2) return safe_[state];
  // Rows hold runs of equal targets: the longest run names the main target (for a string
  // body, the printable ASCII bytes).
  int32_t best = -1, best_count = 0;
  for (int32_t b = 0; b < 256;) {
    const int32_t t = a_.step(state, static_cast<uint8_t>(b));
    int32_t e = b + 1;
    while (e < 256 && a_.step(state, static_cast<uint8_t>(e)) == t) ++e;
    if (t >= 0 && a_.plain[t]) {
      for (int32_t x = b; x < e; ++x) safe_[state].add(static_cast<uint8_t>(x));
      if (e - b > best_count) best = t, best_count = e - b;
    }
    b = e;
  }
  main_[state] = best;
  for (int32_t b = 0; b < 256 && best >= 0; ++b)
    if (a_.step(state, static_cast<uint8_t>(b)) == best) main_bytes_[state].add(static_cast<uint8_t>(b));
  return safe_[state];
}

// Breadth first over automaton states: every state reached within `height` bytes must lead
// on every byte of `bytes` to a plain state. Returns the height proven, `height` or more
// (INT32_MAX when the states reached are closed under `bytes`), or -1 (not proven: failed, or
// too costly to tell).
int32_t MaskWalk::plain_reach(int32_t state, const ByteSet& bytes, int32_t height) {
  constexpr size_t kMaxFrontier = 16;
  int32_t budget = 1024;  // byte steps; beyond them the walk itself is cheaper
  frontier_.assign(1, state);
  reached_.clear();
  reached_.insert(state);
  for (int32_t k = 0; k < height; ++k) {
    next_frontier_.clear();
    for (int32_t t : frontier_) {
      const ByteSet& safe = safe_bytes(t);
      for (int w = 0; w < 4; ++w)
        if (bytes.bits[w] & ~safe.bits[w]) return -1;
      const ByteSet& main = main_bytes_[t];
      for (int w = 0; w < 4; ++w) {
        uint64_t rest = bytes.bits[w] & ~main.bits[w];  // bytes that go elsewhere than the main target
        budget -= __builtin_popcountll(rest);
        for (; rest; rest &= rest - 1) {
          const int32_t u = a_.step(t, static_cast<uint8_t>(w * 64 + __builtin_ctzll(rest)));
          if (reached_.insert(u)) next_frontier_.push_back(u);
        }
      }
      if (main.intersects(bytes) && reached_.insert(main_[t])) next_frontier_.push_back(main_[t]);
      if (budget < 0) return -1;
    }
    if (next_frontier_.empty()) return INT32_MAX;  // closed: every state reached was checked
    if (next_frontier_.size() > kMaxFrontier) return -1;
    frontier_.swap(next_frontier_);
  }
  return height;
}

bool MaskWalk::alive_within(int32_t config, const ByteSet& bytes, int32_t bytes_id, int32_t height) {
  const Config& c = configs_[config];
  const StateSet& own = sets_[c.own];
  // Only a lone bottom frame with nothing speculative: its future is the automaton's alone.
  if (c.spec != 0 || c.far != 0 || own.frames.size() != 1 || own.frames[0] >= a_.n_states()) return false;
  return alive_within_state(own.frames[0], bytes, bytes_id, height);
}

int32_t MaskWalk::config_of(int32_t plain_frame) {
  scratch_.frames.assign(1, plain_frame);  // its closure is itself: no calls, not final
  scratch_.can_end = false;
  return intern_config(intern_set(&scratch_), 0, 0);
}

bool MaskWalk::loops_on_state(int32_t state, const ByteSet& bytes) {
  if (state_loops_.empty()) {
    state_loops_.assign(a_.n_states(), ByteSet{});
    state_breaks_.assign(a_.n_states(), ByteSet{});
  }
  if (state_breaks_[state].intersects(bytes)) return false;
  for (int w = 0; w < 4; ++w) {
    uint64_t todo = bytes.bits[w] & ~state_loops_[state].bits[w];
    for (; todo; todo &= todo - 1) {
      const uint8_t b = static_cast<uint8_t>(w * 64 + __builtin_ctzll(todo));
      const bool back = a_.step(state, b) == state;
      (back ? state_loops_[state] : state_breaks_[state]).add(b);
      if (!back) return false;
    }
  }
  return true;
}

bool MaskWalk::text_loop(int32_t state) {
  if (text_loops_.empty()) text_loops_.assign(a_.n_states(), -1);
  if (text_loops_[state] < 0) {
    // A string body is a few states (its start, after a plain byte, after an escape, ...) that
    // every character leads between: all of them loop, or the answer is no for this one.
    std::vector<int32_t> body{state}, met;
    const bool loops = text_closed(&body, &met);
    if (loops)
      for (int32_t s : met) text_loops_[s] = 1;
    text_loops_[state] = loops;
  }
  return text_loops_[state] == 1;
}

namespace {

// Per first byte of a character that a JSON string holds unescaped: its length, and the range
// of its second byte (later ones are any continuation byte). Length 0: not a first byte.
struct TextLead {
  uint8_t len = 0, lo = 0, hi = 0;
};

const TextLead* text_leads() {
  static const std::vector<TextLead> leads = [] {
    std::vector<TextLead> out(256);
    for (int32_t first = 0x20; first < 256; ++first) {
      uint8_t c[4] = {static_cast<uint8_t>(first), 0x80, 0x80, 0x80};
      for (int32_t second = 0x80; second <= 0xBF; ++second) {
        c[1] = static_cast<uint8_t>(second);
        const int32_t n = json_text_char(c, 4);
        if (n == 0) continue;
        TextLead& l = out[first];
        if (l.len == 0) l.lo = static_cast<uint8_t>(second);
        l.len = static_cast<uint8_t>(n), l.hi = static_cast<uint8_t>(second);
      }
      if (first < 0x80 && json_text_char(c, 1)) out[first] = TextLead{1, 0, 0};
    }
    return out;
  }();
  return leads.data();
}

}  // namespace

bool MaskWalk::text_closed(std::vector<int32_t>* body, std::vector<int32_t>* met) {
  constexpr size_t kMaxBody = 8;
  const TextLead* leads = text_leads();
  std::vector<int32_t> at, next;
  std::vector<uint64_t> done;  // (state after a first byte, its lead) already followed
  // Every character, byte by byte: the states after each of its bytes (every byte of the range
  // there) must be plain, and after its last byte be states of `body`, which grows to hold them.
  // The sets are tiny (a string body's states after k bytes of a character). Plain states with
  // equal rows have the same future: the automaton keeps copies of a body's state (one after
  // each kind of character), which count once; `met` gets every state of the body met.
  const auto same = [&](int32_t s, int32_t t) {
    return class_state(rep_, s) == class_state(rep_, t) || a_.same_steps(s, t);
  };
  const auto arrive = [&](int32_t t) {
    if (t < 0 || !a_.plain[t]) return false;
    if (std::find(met->begin(), met->end(), t) == met->end()) met->push_back(t);
    for (int32_t s : *body)
      if (same(s, t)) return true;
    body->push_back(t);
    return body->size() <= kMaxBody;
  };
  for (size_t i = 0; i < body->size(); ++i) {
    const int32_t from = (*body)[i];
    for (int32_t first = 0x20; first <= 0xF4; ++first) {
      const TextLead& lead = leads[first];
      if (lead.len == 0) continue;
      const int32_t t = a_.step(from, static_cast<uint8_t>(first));
      if (lead.len == 1) {
        if (!arrive(t)) return false;
        continue;
      }
      // Leads of a kind (all two-byte ones, say) mostly reach the same state: follow it once.
      const uint64_t key = (uint64_t(uint32_t(t)) << 32) | (lead.len << 16) | (lead.lo << 8) | lead.hi;
      if (std::find(done.begin(), done.end(), key) != done.end()) continue;
      done.push_back(key);
      at.assign(1, t);
      for (int32_t k = 1; k < lead.len; ++k) {
        next.clear();
        for (int32_t u : at) {
          if (u < 0 || !a_.plain[u]) return false;  // a token may end here: it must be accepted
          for (int32_t b = k == 1 ? lead.lo : 0x80; b <= (k == 1 ? lead.hi : 0xBF); ++b) {
            const int32_t w = a_.step(u, static_cast<uint8_t>(b));
            if (std::find(next.begin(), next.end(), w) == next.end()) next.push_back(w);
          }
        }
        at.swap(next);
      }
      for (int32_t u : at)
        if (!arrive(u)) return false;
    }
  }
  return true;
}

bool MaskWalk::text_after(int32_t frame, int32_t r) {
  const int32_t state = pool_.get(frame).state;
  if (r == 0) return text_loop(state);
  // Checks met through a call are decided by the walk's mode: part of the question.
  const uint64_t key = (uint64_t(uint32_t(state)) << 4) | (uint64_t(mode_) << 2) | uint64_t(r);
  const int32_t known = text_afters_.find(key);
  if (known != FlatMap::kAbsent) return known == 1;
  // Configurations, not automaton states: the character may end in a call. Each is a lone plain
  // frame, so its rule cannot complete meanwhile and the answer holds whatever the parent.
  std::vector<int32_t> at{config_of(frame)}, next;
  bool ok = true;
  for (int32_t j = 0; j < r && ok; ++j) {
    next.clear();
    for (size_t x = 0; x < at.size() && ok; ++x)
      for (int32_t c = 0x80; c <= 0xBF && ok; ++c) {
        const int32_t to = step(at[x], static_cast<uint8_t>(c));
        ok = to >= 0 && lone_plain(to) >= 0;  // a token may end here: it must be accepted
        if (ok && std::find(next.begin(), next.end(), to) == next.end()) next.push_back(to);
      }
    at.swap(next);
  }
  for (size_t x = 0; x < at.size() && ok; ++x) ok = text_loop(pool_.get(lone_plain(at[x])).state);
  text_afters_.put(key, ok);
  return ok;
}

bool MaskWalk::alive_within_state(int32_t state, const ByteSet& bytes, int32_t bytes_id, int32_t height) {
  const uint64_t key = (uint64_t(uint32_t(state)) << 32) | uint32_t(bytes_id);
  const int32_t known = reach_.find(key);
  if (known != FlatMap::kAbsent) {
    if (known >= height) return true;
    if (known < 0 && -known <= height) return false;
  }
  const int32_t proven = plain_reach(state, bytes, height);
  reach_.put(key, proven >= 0 ? proven : -height);
  return proven >= height;
}

}  // namespace tg
