// io/event_queue.h
//
// EventQueue: the pending callbacks of an event loop, in one total order by
// (time, sequence). Shared by the simulator's scheduler and the real backends'
// loops, so both order events identically.
//
// - Callbacks due "now" (posts) go to a FIFO; since time never goes back and
//   sequence numbers grow, that FIFO is already sorted, and popping merges it
//   with the timer heap: posts cost O(1), timers O(log n).
// - Cancellation is O(1): the slot is marked dead and skipped when popped.
//   Dead heap entries are swept when they outnumber live ones, so cancelled
//   long timeouts cannot grow the heap without bound.
// - An EventId packs a slot index and the slot's generation; a stale id never
//   cancels a newer event.
// Not thread-safe. Pure data structure: no clock, no syscalls.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "io/assert.h"
#include "io/executor.h"

namespace brook::io {

class EventQueue {
 public:
  struct Due {
    int64_t time_ns;
    uint64_t sequence;
    uint32_t tag;  // the owner's label (the simulator's node index)
    Callback callback;
  };

  EventQueue() = default;
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // Schedules `cb` at `time_ns`. Times earlier than the last popped time are
  // clamped to it (a deadline in the past is due now).
  EventId schedule(int64_t time_ns, Callback cb, uint32_t tag = 0) {
    if (time_ns < now_ns_) time_ns = now_ns_;
    const uint32_t slot = allocate_slot(cb, tag);
    const Entry e{time_ns, next_sequence_++, slot, slots_[slot].generation};
    if (time_ns == now_ns_ && (fifo_.empty() || fifo_.back().time_ns == time_ns)) {
      fifo_.push_back(e);
    } else {
      heap_.push_back(e);
      sift_up(heap_.size() - 1);
    }
    ++live_;
    return make_id(slot, e.generation);
  }

  // Schedules at the current time, after everything already due now.
  EventId post(Callback cb, uint32_t tag = 0) { return schedule(now_ns_, cb, tag); }

  void cancel(EventId id) {
    if (id == kNoEvent) return;
    const uint32_t slot = static_cast<uint32_t>(id) - 1;
    const uint32_t generation = static_cast<uint32_t>(id >> 32);
    if (slot >= slots_.size()) return;
    Slot& s = slots_[slot];
    if (s.generation != generation || !s.live) return;
    s.live = false;
    --live_;
    ++dead_;
    maybe_sweep();
  }

  // The time of the earliest live event, if any.
  std::optional<int64_t> next_time_ns() {
    skip_dead();
    const Entry* e = peek();
    if (e == nullptr) return std::nullopt;
    return e->time_ns;
  }

  // Removes and returns the earliest live event if it is due at `limit_ns`
  // or earlier, advancing the queue's time to it.
  std::optional<Due> pop_due(int64_t limit_ns) {
    for (;;) {
      const bool from_fifo = front_is_fifo();
      const Entry* e = from_fifo ? &fifo_.front() : heap_.empty() ? nullptr : &heap_.front();
      if (e == nullptr) return std::nullopt;
      Slot& s = slots_[e->slot];
      if (!s.live || s.generation != e->generation) [[unlikely]] {
        const Entry dead = *e;
        drop_front(from_fifo);
        release_dead(dead);
        continue;
      }
      if (e->time_ns > limit_ns) return std::nullopt;
      BROOK_ASSERT_GE(e->time_ns, now_ns_);
      Due due{e->time_ns, e->sequence, s.tag, s.callback};
      const uint32_t slot = e->slot;
      drop_front(from_fifo);
      free_slot(slot);
      --live_;
      now_ns_ = due.time_ns;
      return due;
    }
  }

  // Moves the queue's notion of "now" forward (never back) without popping.
  void advance_to(int64_t time_ns) {
    if (time_ns > now_ns_) now_ns_ = time_ns;
  }

  int64_t now_ns() const { return now_ns_; }
  size_t live() const { return live_; }
  bool empty() const { return live_ == 0; }

 private:
  struct Entry {
    int64_t time_ns;
    uint64_t sequence;
    uint32_t slot;
    uint32_t generation;
    bool before(const Entry& o) const {
      return time_ns < o.time_ns || (time_ns == o.time_ns && sequence < o.sequence);
    }
  };
  // A FIFO of entries in a power-of-two ring: no allocation once warm.
  class Ring {
   public:
    bool empty() const { return head_ == tail_; }
    size_t size() const { return tail_ - head_; }
    const Entry& front() const { return items_[head_ & mask_]; }
    const Entry& back() const { return items_[(tail_ - 1) & mask_]; }
    void pop_front() { ++head_; }
    void push_back(const Entry& e) {
      if (size() == items_.size()) grow();
      items_[tail_ & mask_] = e;
      ++tail_;
    }

   private:
    void grow() {
      std::vector<Entry> bigger(items_.empty() ? 64 : items_.size() * 2);
      const size_t n = size();
      for (size_t i = 0; i < n; ++i) bigger[i] = items_[(head_ + i) & mask_];
      items_.swap(bigger);
      mask_ = items_.size() - 1;
      head_ = 0;
      tail_ = n;
    }
    std::vector<Entry> items_;
    size_t mask_ = 0;
    size_t head_ = 0;  // grows forever; positions are taken modulo the size
    size_t tail_ = 0;
  };

  struct Slot {
    Callback callback;
    uint32_t generation = 1;
    uint32_t tag = 0;
    uint32_t next_free = kNoSlot;
    bool live = false;
  };
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  static constexpr size_t kSweepDeadMin = 1024;

  static EventId make_id(uint32_t slot, uint32_t generation) {
    return (static_cast<uint64_t>(generation) << 32) | (static_cast<uint64_t>(slot) + 1);
  }

  uint32_t allocate_slot(Callback cb, uint32_t tag) {
    uint32_t slot;
    if (free_head_ != kNoSlot) {
      slot = free_head_;
      free_head_ = slots_[slot].next_free;
    } else {
      BROOK_ASSERT_LT(slots_.size(), size_t{kNoSlot});
      slot = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    Slot& s = slots_[slot];
    s.callback = cb;
    s.tag = tag;
    s.live = true;
    return slot;
  }

  void free_slot(uint32_t slot) {
    Slot& s = slots_[slot];
    s.live = false;
    s.callback = {};
    ++s.generation;
    if (s.generation == 0) s.generation = 1;
    s.next_free = free_head_;
    free_head_ = slot;
  }

  bool entry_live(const Entry& e) const {
    const Slot& s = slots_[e.slot];
    return s.live && s.generation == e.generation;
  }

  // True when the earliest entry is the FIFO's front (REQUIRES: not both
  // empty, or returns false with the heap empty).
  bool front_is_fifo() const {
    if (fifo_.empty()) return false;
    return heap_.empty() || fifo_.front().before(heap_.front());
  }

  const Entry* peek() const {
    if (front_is_fifo()) return &fifo_.front();
    return heap_.empty() ? nullptr : &heap_.front();
  }

  void drop_front(bool from_fifo) {
    if (from_fifo) {
      fifo_.pop_front();
    } else {
      pop_heap_front();
    }
  }

  Entry take() {
    const bool from_fifo = front_is_fifo();
    Entry e = from_fifo ? fifo_.front() : heap_.front();
    drop_front(from_fifo);
    return e;
  }

  // Drops dead entries at the fronts, freeing their slots.
  void skip_dead() {
    for (;;) {
      const Entry* e = peek();
      if (e == nullptr || entry_live(*e)) return;
      const Entry dead = take();
      release_dead(dead);
    }
  }

  void release_dead(const Entry& e) {
    if (slots_[e.slot].generation == e.generation) {
      free_slot(e.slot);
      BROOK_ASSERT_GT(dead_, 0u);
      --dead_;
    }
  }

  void maybe_sweep() {
    if (dead_ < kSweepDeadMin || dead_ < live_) return;
    std::vector<Entry> kept;
    kept.reserve(heap_.size());
    for (const Entry& e : heap_) {
      if (entry_live(e)) {
        kept.push_back(e);
      } else {
        release_dead(e);
      }
    }
    heap_.swap(kept);
    for (size_t i = heap_.size() / 2; i-- > 0;) sift_down(i);
    const size_t fifo_size = fifo_.size();
    for (size_t i = 0; i < fifo_size; ++i) {
      const Entry e = fifo_.front();
      fifo_.pop_front();
      if (entry_live(e)) {
        fifo_.push_back(e);
      } else {
        release_dead(e);
      }
    }
  }

  void sift_up(size_t i) {
    const Entry e = heap_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!e.before(heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

  void sift_down(size_t i) {
    const size_t n = heap_.size();
    const Entry e = heap_[i];
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && heap_[child + 1].before(heap_[child])) ++child;
      if (!heap_[child].before(e)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = e;
  }

  void pop_heap_front() {
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0);
  }

  int64_t now_ns_ = 0;
  uint64_t next_sequence_ = 0;
  std::vector<Entry> heap_;
  Ring fifo_;
  std::vector<Slot> slots_;
  uint32_t free_head_ = kNoSlot;
  size_t live_ = 0;
  size_t dead_ = 0;  // cancelled, still in heap_ or fifo_
};

}  // namespace brook::io
