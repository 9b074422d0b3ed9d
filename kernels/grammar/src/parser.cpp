#include "parser.h"

#include <algorithm>

#include "checks.h"

namespace tg {

namespace {

inline uint32_t hash_frame(int32_t state, int32_t parent) {
  uint64_t k = (uint64_t(uint32_t(state)) << 32) | uint32_t(parent);
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return static_cast<uint32_t>(k);
}

}  // namespace

bool SeenFrames::contains(int32_t id) const {
  if (slots_.empty()) return false;
  const uint32_t mask = static_cast<uint32_t>(slots_.size()) - 1;
  for (uint32_t h = hash_frame(id, 0) & mask;; h = (h + 1) & mask) {
    const Slot& s = slots_[h];
    if (s.gen != gen_) return false;
    if (s.id == id) return true;
  }
}

bool SeenFrames::insert(int32_t id) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  const uint32_t mask = static_cast<uint32_t>(slots_.size()) - 1;
  for (uint32_t h = hash_frame(id, 0) & mask;; h = (h + 1) & mask) {
    Slot& s = slots_[h];
    if (s.gen != gen_) {
      s = Slot{id, gen_};
      ++count_;
      return true;
    }
    if (s.id == id) return false;
  }
}

void SeenFrames::grow() {
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(std::max<size_t>(64, old.size() * 2), Slot{});
  count_ = 0;
  for (const Slot& s : old)
    if (s.gen == gen_) insert(s.id);
}

void FramePool::init(int32_t n_states) {
  base_ = nullptr;
  offset_ = n_states;
  clear();
}

void FramePool::layer_on(const FramePool& base) {
  base_ = &base;
  offset_ = base.offset_ + base.size();
  clear();
}

void FramePool::clear() {
  serial_ = 0;
  if (frames_.empty()) return;  // nothing was added: the tables are already empty
  frames_.clear();
  joins_.clear();
  edges_.clear();
  join_keys_.clear();
  first_with_key_.clear();
  // Huge tables are not kept forever.
  if (slots_.size() > 4096) slots_.assign(1024, -1);
  else std::fill(slots_.begin(), slots_.end(), -1);
  if (join_slots_.size() > 4096) join_slots_.assign(1024, -1);
  else std::fill(join_slots_.begin(), join_slots_.end(), -1);
}

void FramePool::grow() {
  slots_.assign(std::max<size_t>(1024, slots_.size() * 2), -1);
  const uint32_t mask = static_cast<uint32_t>(slots_.size()) - 1;
  for (int32_t i = 0; i < size(); ++i) {
    if (is_join(frames_[i])) continue;
    uint32_t h = hash_frame(frames_[i].state, frames_[i].parent) & mask;
    while (slots_[h] >= 0) h = (h + 1) & mask;
    slots_[h] = i;
  }
}

int32_t FramePool::intern(int32_t state, int32_t parent) {
  if (parent < 0) return state;
  if ((size() + 1) * 2 > static_cast<int32_t>(slots_.size())) grow();
  const uint32_t mask = static_cast<uint32_t>(slots_.size()) - 1;
  uint32_t h = hash_frame(state, parent) & mask;
  for (; slots_[h] >= 0; h = (h + 1) & mask) {
    const Frame& f = frames_[slots_[h]];
    if (f.state == state && f.parent == parent) return slots_[h] + offset_;
  }
  slots_[h] = size();
  count_node();
  frames_.push_back({state, parent});
  return size() - 1 + offset_;
}

namespace {

uint32_t hash_join(int32_t rule, int32_t serial, int64_t from) {
  const uint32_t mixed = uint32_t(rule) ^ (uint32_t(serial) * 0x9E3779B1u);
  return hash_frame(static_cast<int32_t>(mixed), static_cast<int32_t>(uint64_t(from) ^ (uint64_t(from) >> 32)));
}

}  // namespace

void FramePool::grow_joins() {
  join_slots_.assign(std::max<size_t>(1024, join_slots_.size() * 2), -1);
  const uint32_t mask = static_cast<uint32_t>(join_slots_.size()) - 1;
  for (int32_t i = 0; i < static_cast<int32_t>(joins_.size()); ++i) {
    const Join& j = joins_[i];
    uint32_t h = hash_join(j.rule, j.serial, j.from) & mask;
    while (join_slots_[h] >= 0) h = (h + 1) & mask;
    join_slots_[h] = i;
  }
}

int32_t FramePool::join(int32_t rule, int32_t serial, int64_t from, bool region, bool* made) {
  if ((joins_.size() + 1) * 2 > join_slots_.size()) grow_joins();
  const uint32_t mask = static_cast<uint32_t>(join_slots_.size()) - 1;
  uint32_t h = hash_join(rule, serial, from) & mask;
  for (; join_slots_[h] >= 0; h = (h + 1) & mask) {
    const Join& j = joins_[join_slots_[h]];
    if (j.rule == rule && j.serial == serial && j.from == from) {
      *made = false;
      return j.node;
    }
  }
  *made = true;
  const int32_t index = static_cast<int32_t>(joins_.size());
  join_slots_[h] = index;
  count_node();
  frames_.push_back({kJoin, index});
  joins_.push_back(Join{size() - 1 + offset_, rule, serial, from, -1, 0, region});
  return joins_.back().node;
}

void FramePool::add_return(int32_t join, int32_t ret) {
  Join& j = joins_[frames_[join - offset_].parent];
  count_node();
  edges_.push_back({ret, j.first_edge});
  j.first_edge = static_cast<int32_t>(edges_.size()) - 1;
  ++j.n_rets;
}

int32_t FramePool::same_join(int32_t join) {
  if (join < offset_) return join;
  const int32_t index = frames_[join - offset_].parent;
  if (joins_[index].same >= 0) return joins_[index].same;
  const Join& j = joins_[index];
  std::vector<int32_t>& w = join_keys_.words_;
  const size_t from = w.size();
  w.insert(w.end(), {j.rule, int32_t(j.from), int32_t(j.from >> 32), j.region});
  const size_t rets = w.size();
  for_each_return(join, [&](int32_t ret) { w.push_back(ret); });
  std::sort(w.begin() + rets, w.end());
  w.erase(std::unique(w.begin() + rets, w.end()), w.end());
  const int32_t key = join_keys_.intern(from);
  if (key == static_cast<int32_t>(first_with_key_.size())) first_with_key_.push_back(join);
  return joins_[index].same = first_with_key_[key];
}

bool FramePool::return_states(int32_t frame, size_t max, std::vector<int32_t>* out,
                              std::vector<int32_t>* todo) const {
  out->clear();
  todo->assign(1, get(frame).parent);
  for (size_t visited = 0; !todo->empty(); ++visited) {
    const int32_t p = todo->back();
    todo->pop_back();
    if (p < 0 || visited > 2 * max) return false;
    const Frame f = get(p);
    if (!is_join(f)) {
      out->push_back(f.state);
      if (out->size() > max) return false;
      continue;
    }
    if (join_of(p).region) return false;
    for_each_return(p, [&](int32_t ret) { todo->push_back(ret); });
  }
  return true;
}

void Stepper::close(FramePool& pool, int32_t frame, StateSet* out) {
  todo_.push_back(frame);
  while (!todo_.empty()) {
    int32_t id = todo_.back();
    todo_.pop_back();
    ++work_;
    if (!visited_.insert(id)) continue;
    const Frame f = pool.get(id);
    if (is_join(f)) {  // a rule completed: every caller goes on
      pool.for_each_return(id, [&](int32_t ret) { resume(ret, out); });
      continue;
    }
    if (a_.has_bytes(f.state)) out->frames.push_back(id);
    for (const Call* c = a_.calls_begin(f.state); c != a_.calls_end(f.state); ++c) {
      const bool tail = a_.tail[c->next];
      const int32_t ret = tail ? f.parent : pool.intern(c->next, f.parent);
      int64_t from = 0;
      bool region = false;
      if (c->rule >= a_.first_node_rule) {
        const int32_t check = a_.check_of[c->rule];
        if (check >= 0) {  // zero-width: go on where the call returns, if the check holds
          if (passes(pool, id, check)) resume(ret, out);
          continue;
        }
        region = true;
        from = mode_ == CheckMode::evaluate ? len_ : -1;
      } else if (tail) {
        // A tail call returns where its caller does: the stack does not grow, so a rule that
        // repeats by right recursion stays one frame (a join per repetition would chain).
        todo_.push_back(pool.intern(a_.start[c->rule], f.parent));
        continue;
      } else {
        from = pool.region_from(id);
      }
      bool made = false;
      const int32_t join = pool.join(c->rule, serial_, from, region, &made);
      pool.add_return(join, ret);
      if (made) todo_.push_back(pool.intern(a_.start[c->rule], join));
      // The rule already completed empty in this closure: this caller goes on at once too.
      else if (visited_.contains(join)) resume(ret, out);
    }
    if (a_.final[f.state]) resume(f.parent, out);
  }
}

bool Stepper::passes(FramePool& pool, int32_t frame, int32_t check) {
  met_check_ = true;
  if (mode_ != CheckMode::evaluate) return mode_ == CheckMode::pass;
  const int64_t from = pool.region_from(frame);  // no region around the check: the whole text
  if (from < 0 || from > len_) return false;
  return run_check(a_.checks[check], text_ + from, len_ - from);
}

void Stepper::start(FramePool& pool, int32_t frame, StateSet* out) {
  out->frames.clear();
  out->can_end = false;
  visited_.clear();
  serial_ = pool.begin_closure();
  close(pool, frame, out);
}

void Stepper::extend(FramePool& pool, const std::vector<int32_t>& frames, StateSet* out) {
  visited_.clear();
  serial_ = pool.begin_closure();
  for (int32_t id : out->frames) visited_.insert(id);
  for (int32_t id : frames) close(pool, id, out);
}

void Stepper::step(FramePool& pool, const StateSet& in, uint8_t byte, StateSet* out) {
  out->frames.clear();
  out->can_end = false;
  visited_.clear();
  serial_ = pool.begin_closure();
  work_ += static_cast<int64_t>(in.frames.size());
  for (int32_t id : in.frames) {
    const Frame f = pool.get(id);
    int32_t next = a_.step(f.state, byte);
    if (next < 0) continue;
    if (f.parent < 0 && a_.plain[next]) {
      // The common case inside a rule: nothing to push or pop, the frame is the state.
      if (visited_.insert(next)) out->frames.push_back(next);
      continue;
    }
    // f's closure is over: its join is closed.
    close(pool, pool.intern(next, pool.same_join(f.parent)), out);
  }
}

int32_t FrameNames::name(const FramePool& pool, int32_t n_states, int32_t frame) {
  const int32_t n = n_states;
  if (frame < n) return frame < 0 ? frame : class_state(rep_, frame);  // the bottom (-1) or a bottom frame
  if (names_.size() < size_t(pool.size())) names_.resize(pool.size(), -1);
  if (names_[frame - n] >= 0) return names_[frame - n];
  // Depth first without recursion: a node is named once the nodes it points to are.
  todo_.assign(1, frame);
  std::vector<int32_t>& w = table_.words_;
  while (!todo_.empty()) {
    const int32_t id = todo_.back();
    if (names_[id - n] >= 0) {
      todo_.pop_back();
      continue;
    }
    const Frame f = pool.get(id);
    const size_t from = w.size();
    bool ready = true;
    const auto name_of = [&](int32_t x) {
      if (x >= n && names_[x - n] < 0) {
        todo_.push_back(x);
        ready = false;
      }
      return x < 0 ? x : x < n ? class_state(rep_, x) : names_[x - n];
    };
    if (!is_join(f)) {
      w.insert(w.end(), {0, class_state(rep_, f.state), name_of(f.parent)});
    } else {
      const Join& j = pool.join_of(id);
      const int64_t start = region_starts_ ? j.from : 0;
      w.insert(w.end(), {1, int32_t(start), int32_t(start >> 32), j.region});
      const size_t rets = w.size();
      pool.for_each_return(id, [&](int32_t ret) { w.push_back(name_of(ret)); });
      std::sort(w.begin() + rets, w.end());
      w.erase(std::unique(w.begin() + rets, w.end()), w.end());
    }
    if (!ready) {
      w.resize(from);
      continue;
    }
    names_[id - n] = n + table_.intern(from);
    todo_.pop_back();
  }
  return names_[frame - n];
}

}  // namespace tg
