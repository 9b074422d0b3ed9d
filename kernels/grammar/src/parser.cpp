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
  if (frames_.empty()) return;  // nothing was added: the table is already empty
  frames_.clear();
  if (slots_.size() > 4096) slots_.assign(1024, -1);  // do not keep a huge table forever
  else std::fill(slots_.begin(), slots_.end(), -1);
}

void FramePool::grow() {
  slots_.assign(std::max<size_t>(1024, slots_.size() * 2), -1);
  const uint32_t mask = static_cast<uint32_t>(slots_.size()) - 1;
  for (int32_t i = 0; i < size(); ++i) {
    uint32_t h = hash_frame(frames_[i].state, frames_[i].parent) & mask;
    while (slots_[h] >= 0) h = (h + 1) & mask;
    slots_[h] = i;
  }
}

int32_t FramePool::intern(int32_t state, int32_t parent) {
  if (parent < 0 && !is_mark(state)) return state;
  if ((size() + 1) * 2 > static_cast<int32_t>(slots_.size())) grow();
  const uint32_t mask = static_cast<uint32_t>(slots_.size()) - 1;
  uint32_t h = hash_frame(state, parent) & mask;
  for (; slots_[h] >= 0; h = (h + 1) & mask) {
    const Frame& f = frames_[slots_[h]];
    if (f.state == state && f.parent == parent) return slots_[h] + offset_;
  }
  slots_[h] = size();
  frames_.push_back({state, parent});
  return size() - 1 + offset_;
}

void Stepper::close(FramePool& pool, int32_t frame, StateSet* out) {
  todo_.push_back(frame);
  while (!todo_.empty()) {
    int32_t id = todo_.back();
    todo_.pop_back();
    if (!visited_.insert(id)) continue;
    const Frame f = pool.get(id);
    if (is_mark(f.state)) {  // a region completed
      if (f.parent < 0) out->can_end = true;
      else todo_.push_back(f.parent);
      continue;
    }
    if (a_.has_bytes(f.state)) out->frames.push_back(id);
    for (const Call* c = a_.calls_begin(f.state); c != a_.calls_end(f.state); ++c) {
      int32_t ret = a_.tail[c->next] ? f.parent : pool.intern(c->next, f.parent);
      if (c->rule >= a_.first_node_rule) {
        const int32_t check = a_.check_of[c->rule];
        if (check >= 0) {  // zero-width: go on where the call returns, if the check holds
          if (!passes(pool, f, check)) continue;
          if (ret < 0) out->can_end = true;
          else todo_.push_back(ret);
          continue;
        }
        ret = pool.intern(mark_state(mode_ == CheckMode::evaluate ? len_ : -1), ret);  // a region
      }
      todo_.push_back(pool.intern(a_.start[c->rule], ret));
    }
    if (a_.final[f.state]) {
      if (f.parent < 0) out->can_end = true;
      else todo_.push_back(f.parent);
    }
  }
}

bool Stepper::passes(FramePool& pool, const Frame& f, int32_t check) {
  if (mode_ != CheckMode::evaluate) {
    met_check_ = true;
    return mode_ == CheckMode::pass;
  }
  int64_t from = 0;  // no region around the check: the whole text
  for (int32_t p = f.parent; p >= 0;) {
    const Frame g = pool.get(p);
    if (is_mark(g.state)) {
      from = mark_pos(g.state);
      break;
    }
    p = g.parent;
  }
  if (from < 0 || from > len_) return false;
  const CheckSpec& c = a_.checks[check];
  return run_check(c.kind, c.params.data(), static_cast<int32_t>(c.params.size()), text_ + from, len_ - from);
}

void Stepper::start(FramePool& pool, int32_t frame, StateSet* out) {
  out->frames.clear();
  out->can_end = false;
  visited_.clear();
  close(pool, frame, out);
}

void Stepper::extend(FramePool& pool, const std::vector<int32_t>& frames, StateSet* out) {
  visited_.clear();
  for (int32_t id : out->frames) visited_.insert(id);
  for (int32_t id : frames) close(pool, id, out);
}

void Stepper::step(FramePool& pool, const StateSet& in, uint8_t byte, StateSet* out) {
  out->frames.clear();
  out->can_end = false;
  visited_.clear();
  for (int32_t id : in.frames) {
    const Frame f = pool.get(id);
    int32_t next = a_.step(f.state, byte);
    if (next < 0) continue;
    if (f.parent < 0 && a_.plain[next]) {
      // The common case inside a rule: nothing to push or pop, the frame is the state.
      if (visited_.insert(next)) out->frames.push_back(next);
      continue;
    }
    close(pool, pool.intern(next, f.parent), out);
  }
}

}  // namespace tg
