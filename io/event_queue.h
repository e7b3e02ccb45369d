// io/event_queue.h
//
// EventQueue: the pending callbacks of an event loop, in one total order by
// (time, sequence). Shared by the simulator's scheduler and the real backends'
// loops, so both order events identically.
//
// - Callbacks due "now" (posts) go to a FIFO; since time never goes back and
//   sequence numbers grow, that FIFO is already sorted, and popping merges it
//   with the timer heap: posts cost O(1), timers O(log n).
// - Timers at one time form a bucket: a list of slots in sequence order
//   (sequence numbers only grow, so appending keeps it sorted). The heap
//   orders buckets by (time, sequence of the bucket's first event), which
//   merges the lists exactly into (time, sequence) order. A timer due at the
//   same time as the last bucket placed (the open bucket) joins it in O(1);
//   otherwise it starts a bucket of its own. Periodic timers of many nodes
//   in step and batches of timers with one deadline thus cost no heap work,
//   and running a bucket's next event leaves the bucket at the root (see
//   advance_root).
// - The heap holds its keys inline: (time, sequence) is one 128-bit unsigned
//   number (time with its sign bit flipped, then the sequence), compared with
//   one carry chain; the smaller child is picked without a branch. The slot
//   past the last entry holds a sentinel that never compares smaller, so a
//   missing right child needs no bounds check.
// - Popping a bucket's last event leaves the root vacant; the next bucket
//   pushed fills the vacancy directly (one sift instead of a pop and a push:
//   an event that schedules its successor, the common case, pays for one).
//   Anything else that reads the heap first fills the vacancy with the last
//   entry.
// - Cancellation is O(1): the slot is marked dead and skipped when it reaches
//   the front. Dead entries are swept when they outnumber live ones, so
//   cancelled long timeouts cannot grow the queue without bound.
// - An EventId packs a slot index and the slot's generation; a stale id never
//   cancels a newer event. A slot's generation is odd while its event is live
//   and even once it ran or was cancelled and while the slot is free, so
//   liveness is one bit and a cancel is one comparison. A slot belongs to
//   exactly one queued event from schedule() until it leaves the queue.
// Not thread-safe. Pure data structure: no clock, no syscalls.
#pragma once

#include <cstddef>
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
  [[gnu::always_inline]] EventId schedule(int64_t time_ns, Callback cb, uint32_t tag = 0) {
    if (time_ns < now_ns_) time_ns = now_ns_;
    const uint64_t key = key_of(time_ns);
    const uint32_t slot = free_head_;
    // Fast path: a timer joining the open bucket, with a free slot at hand.
    // Everything else is one call away (kept out so this path stays lean).
    if (key == open_key_ && time_ns != now_ns_ && slot != kNoSlot) [[likely]] {
      free_head_ = slots_[slot].next;
      fill_slot(slot, cb, tag, next_sequence_++);
      slots_[open_tail_].next = slot;
      open_tail_ = slot;
      ++live_;
      return make_id(slot, slots_[slot].generation);
    }
    return schedule_general(time_ns, cb, tag);
  }

  // Schedules at the current time, after everything already due now.
  EventId post(Callback cb, uint32_t tag = 0) { return schedule(now_ns_, cb, tag); }

  void cancel(EventId id) {
    const uint32_t slot = static_cast<uint32_t>(id) - 1;  // kNoEvent: UINT32_MAX
    const uint32_t generation = static_cast<uint32_t>(id >> 32);
    if (slot >= slots_.size()) return;
    Slot& s = slots_[slot];
    // Ids carry odd generations: a match means this very event is live.
    if (s.generation != generation) return;
    ++s.generation;  // dead; the slot is freed when it leaves the queue
    --live_;
    ++dead_;
    maybe_sweep();
  }

  // The time of the earliest live event, if any.
  std::optional<int64_t> next_time_ns() {
    skip_dead();
    const Entry* e = peek();
    if (e == nullptr) return std::nullopt;
    return time_of(e->key);
  }

  // Removes and returns the earliest live event if it is due at `limit_ns`
  // or earlier, advancing the queue's time to it.
  [[gnu::always_inline]] std::optional<Due> pop_due(int64_t limit_ns) {
    settle_root();
    // Fast path: no posts pending and a live timer first in the root bucket.
    if (fifo_.empty() && heap_size_ != 0) [[likely]] {
      const Entry& e = heap_[0];
      const uint32_t slot = e.slot;
      const Slot& s = slots_[slot];
      if (is_live(s)) [[likely]] {
        const int64_t time_ns = time_of(e.key);
        if (time_ns > limit_ns) return std::nullopt;
        BROOK_ASSERT_GE(time_ns, now_ns_);
        std::optional<Due> due(std::in_place, Due{time_ns, e.sequence, s.tag, s.callback});
        advance_root(slot);
        free_slot(slot);
        --live_;
        now_ns_ = time_ns;
        return due;
      }
    }
    return pop_due_general(limit_ns);
  }

  // Moves the queue's notion of "now" forward (never back) without popping.
  void advance_to(int64_t time_ns) {
    if (time_ns > now_ns_) now_ns_ = time_ns;
  }

  int64_t now_ns() const { return now_ns_; }
  size_t live() const { return live_; }
  bool empty() const { return live_ == 0; }

 private:
  // A FIFO entry is one event; a heap entry is a bucket, named by its first
  // slot. `key` is the time with its sign bit flipped, so unsigned order is
  // time order; (key, sequence) read as one 128-bit number is the order.
  struct Entry {
    uint64_t key;
    uint64_t sequence;
    uint32_t slot;
  };
  using Order = unsigned __int128;
  static uint64_t key_of(int64_t time_ns) {
    return static_cast<uint64_t>(time_ns) ^ (uint64_t{1} << 63);
  }
  static int64_t time_of(uint64_t key) { return static_cast<int64_t>(key ^ (uint64_t{1} << 63)); }
  static Order order(const Entry& e) { return (static_cast<Order>(e.key) << 64) | e.sequence; }
  static bool before(const Entry& a, const Entry& b) { return order(a) < order(b); }

  // A FIFO of entries in a power-of-two ring: no allocation once warm.
  class Ring {
   public:
    bool empty() const { return head_ == tail_; }
    size_t size() const { return tail_ - head_; }
    const Entry& front() const { return items_[head_ & mask_]; }
    const Entry& back() const { return items_[(tail_ - 1) & mask_]; }
    void pop_front() { ++head_; }
    void push_back(const Entry& e) {
      if (size() == capacity_) [[unlikely]] grow();
      items_[tail_ & mask_] = e;
      ++tail_;
    }

   private:
    [[gnu::noinline]] void grow() {
      std::vector<Entry> bigger(items_.empty() ? 64 : items_.size() * 2);
      const size_t n = size();
      for (size_t i = 0; i < n; ++i) bigger[i] = items_[(head_ + i) & mask_];
      items_.swap(bigger);
      capacity_ = items_.size();
      mask_ = capacity_ - 1;
      head_ = 0;
      tail_ = n;
    }
    std::vector<Entry> items_;
    size_t capacity_ = 0;
    size_t mask_ = 0;
    size_t head_ = 0;  // grows forever; positions are taken modulo the size
    size_t tail_ = 0;
  };

  // generation: odd while the event is live, even once it ran or was
  // cancelled (the slot stays taken until it leaves the queue) and while the
  // slot is free. `next`: the bucket's next slot (kNoSlot at its end), or
  // the free list's link while the slot is free.
  struct Slot {
    Callback callback;
    uint64_t sequence = 0;
    uint32_t generation = 0;
    uint32_t tag = 0;
    uint32_t next = 0;
  };
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  static constexpr size_t kSweepDeadMin = 1024;
  // No event has this key: times are clamped to now, which starts at 0.
  static constexpr uint64_t kNoKey = 0;
  // Fills heap_[heap_size_]: compares after every entry.
  static constexpr Entry kSentinel{UINT64_MAX, UINT64_MAX, kNoSlot};

  static bool is_live(const Slot& s) { return (s.generation & 1) != 0; }

  static EventId make_id(uint32_t slot, uint32_t generation) {
    return (static_cast<uint64_t>(generation) << 32) | (static_cast<uint64_t>(slot) + 1);
  }

  void fill_slot(uint32_t slot, Callback cb, uint32_t tag, uint64_t sequence) {
    Slot& s = slots_[slot];
    s.callback = cb;
    s.sequence = sequence;
    s.tag = tag;
    s.next = kNoSlot;
    ++s.generation;  // even (free) -> odd (live)
  }

  [[gnu::noinline]] EventId schedule_general(int64_t time_ns, Callback cb, uint32_t tag) {
    const uint64_t sequence = next_sequence_++;
    uint32_t slot = free_head_;
    if (slot != kNoSlot) {
      free_head_ = slots_[slot].next;
    } else {
      slot = add_slot();
    }
    fill_slot(slot, cb, tag, sequence);
    const uint64_t key = key_of(time_ns);
    ++live_;
    if (time_ns == now_ns_ && (fifo_.empty() || fifo_.back().key == key)) {
      fifo_.push_back(Entry{key, sequence, slot});
    } else if (key == open_key_) {
      slots_[open_tail_].next = slot;  // joins the last bucket placed
      open_tail_ = slot;
    } else {
      heap_push(Entry{key, sequence, slot});  // starts a bucket
      open_key_ = key;
      open_tail_ = slot;
    }
    return make_id(slot, slots_[slot].generation);
  }

  [[gnu::noinline]] uint32_t add_slot() {
    BROOK_ASSERT_LT(slots_.size(), size_t{kNoSlot});
    slots_.emplace_back();
    return static_cast<uint32_t>(slots_.size() - 1);
  }

  // REQUIRES: the slot just left the queue.
  void free_slot(uint32_t slot) {
    Slot& s = slots_[slot];
    s.generation += s.generation & 1;  // live -> even; dead stays even
    s.next = free_head_;
    free_head_ = slot;
  }

  // The general pop: posts pending, dead entries at the front, or nothing.
  [[gnu::noinline]] std::optional<Due> pop_due_general(int64_t limit_ns) {
    for (;;) {
      settle_root();
      const bool from_fifo = front_is_fifo();
      const Entry* e = from_fifo ? &fifo_.front() : heap_size_ == 0 ? nullptr : &heap_[0];
      if (e == nullptr) return std::nullopt;
      const uint32_t slot = e->slot;
      const Slot& s = slots_[slot];
      if (!is_live(s)) {
        drop_front(from_fifo, slot);
        release_dead(slot);
        continue;
      }
      const int64_t time_ns = time_of(e->key);
      if (time_ns > limit_ns) return std::nullopt;
      BROOK_ASSERT_GE(time_ns, now_ns_);
      std::optional<Due> due(std::in_place, Due{time_ns, e->sequence, s.tag, s.callback});
      drop_front(from_fifo, slot);
      free_slot(slot);
      --live_;
      now_ns_ = time_ns;
      return due;
    }
  }

  // REQUIRES (for the helpers below): the root is settled.
  // True when the earliest entry is the FIFO's front (false when the FIFO
  // is empty).
  bool front_is_fifo() const {
    if (fifo_.empty()) return false;
    return heap_size_ == 0 || before(fifo_.front(), heap_[0]);
  }

  const Entry* peek() const {
    if (front_is_fifo()) return &fifo_.front();
    return heap_size_ == 0 ? nullptr : &heap_[0];
  }

  // Takes the earliest event, `slot`, off the front (before freeing it).
  void drop_front(bool from_fifo, uint32_t slot) {
    if (from_fifo) {
      fifo_.pop_front();
    } else {
      advance_root(slot);
    }
  }

  // The root bucket's first event, `slot`, leaves: the bucket's next event
  // becomes its first, or the emptied bucket leaves the root vacant.
  // REQUIRES: `slot` is not freed yet.
  //
  // The bucket stays at the root: only the open bucket takes new events, a
  // bucket is open once (from its creation until another bucket is created,
  // its last event leaves or a sweep), so two buckets of one time hold
  // disjoint runs of sequence numbers. Any other bucket of the root's time
  // therefore starts after the root's whole run, and later times come later.
  void advance_root(uint32_t slot) {
    const uint32_t next = slots_[slot].next;
    if (next == kNoSlot) {
      if (slot == open_tail_) open_key_ = kNoKey;
      root_vacant_ = true;
      return;
    }
    heap_[0].sequence = slots_[next].sequence;
    heap_[0].slot = next;
  }

  // Drops dead entries at the fronts, freeing their slots.
  void skip_dead() {
    for (;;) {
      settle_root();
      const Entry* e = peek();
      if (e == nullptr || is_live(slots_[e->slot])) return;
      const uint32_t slot = e->slot;
      drop_front(front_is_fifo(), slot);
      release_dead(slot);
    }
  }

  // A cancelled event left the queue: its slot is free again.
  void release_dead(uint32_t slot) {
    free_slot(slot);
    BROOK_ASSERT_GT(dead_, 0u);
    --dead_;
  }

  void maybe_sweep() {
    if (dead_ < kSweepDeadMin || dead_ < live_) return;
    settle_root();
    open_key_ = kNoKey;
    size_t kept = 0;
    for (size_t i = 0; i < heap_size_; ++i) {
      const uint64_t key = heap_[i].key;
      uint32_t first = kNoSlot;
      uint32_t last = kNoSlot;
      for (uint32_t slot = heap_[i].slot; slot != kNoSlot;) {
        const uint32_t next = slots_[slot].next;
        if (is_live(slots_[slot])) {
          if (first == kNoSlot) {
            first = slot;
          } else {
            slots_[last].next = slot;
          }
          last = slot;
        } else {
          release_dead(slot);
        }
        slot = next;
      }
      if (first != kNoSlot) {
        slots_[last].next = kNoSlot;
        heap_[kept++] = Entry{key, slots_[first].sequence, first};
      }
    }
    heap_size_ = kept;
    if (heap_capacity_ != 0) heap_[heap_size_] = kSentinel;
    for (size_t i = heap_size_ / 2; i-- > 0;) sift_down(i);
    const size_t fifo_size = fifo_.size();
    for (size_t i = 0; i < fifo_size; ++i) {
      const Entry e = fifo_.front();
      fifo_.pop_front();
      if (is_live(slots_[e.slot])) {
        fifo_.push_back(e);
      } else {
        release_dead(e.slot);
      }
    }
  }

  // The heap is heap_[0, heap_size_), with kSentinel at heap_[heap_size_].
  // While root_vacant_, heap_[0] is a hole (its bucket was emptied).

  void heap_push(const Entry& e) {
    if (root_vacant_) {
      root_vacant_ = false;
      sink_from_root(e);
      return;
    }
    if (heap_size_ + 2 > heap_capacity_) [[unlikely]] grow_heap();
    Entry* h = heap_.data();
    size_t i = heap_size_++;
    h[heap_size_] = kSentinel;
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!before(e, h[parent])) break;
      h[i] = h[parent];
      i = parent;
    }
    h[i] = e;
  }

  [[gnu::noinline]] void grow_heap() {
    heap_.resize(heap_.empty() ? 64 : heap_.size() * 2, kSentinel);
    heap_capacity_ = heap_.size();
  }

  // Fills a vacant root with the last entry.
  void settle_root() {
    if (root_vacant_) [[unlikely]] fill_vacant_root();
  }
  [[gnu::noinline]] void fill_vacant_root() {
    root_vacant_ = false;
    const size_t n = --heap_size_;
    const Entry last = heap_[n];
    heap_[n] = kSentinel;
    if (n != 0) place_from_root(last);
  }

  // Places `e` into the hole at the root of heap_[0, heap_size_), top down:
  // the smaller child moves up while it is smaller than `e`. Offsets are in
  // bytes (child = 2 * hole + one entry).
  void sink_from_root(const Entry& e) {
    constexpr size_t kSize = sizeof(Entry);
    char* const base = reinterpret_cast<char*>(heap_.data());
    auto at = [base](size_t offset) { return reinterpret_cast<Entry*>(base + offset); };
    const Order order_e = order(e);
    const size_t end = heap_size_ * kSize;
    size_t hole = 0;
    size_t child = kSize;
    while (child < end) {
      const Entry* left = at(child);
      child += kSize & (size_t{0} - static_cast<size_t>(before(left[1], left[0])));
      if (!(order(*at(child)) < order_e)) break;
      *at(hole) = *at(child);
      hole = child;
      child = 2 * child + kSize;
    }
    *at(hole) = e;
  }

  // Places `e` into the hole at the root: the hole descends to a leaf along
  // the smaller children, then `e` rises from there (suits an `e` taken from
  // the end of the heap, which usually belongs near the bottom).
  void place_from_root(const Entry& e) {
    constexpr size_t kSize = sizeof(Entry);
    char* const base = reinterpret_cast<char*>(heap_.data());
    auto at = [base](size_t offset) { return reinterpret_cast<Entry*>(base + offset); };
    const size_t end = heap_size_ * kSize;
    size_t hole = 0;
    size_t child = kSize;
    while (child < end) {
      const Entry* left = at(child);
      child += kSize & (size_t{0} - static_cast<size_t>(before(left[1], left[0])));
      *at(hole) = *at(child);
      hole = child;
      child = 2 * child + kSize;
    }
    Entry* h = heap_.data();
    size_t i = hole / kSize;
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!before(e, h[parent])) break;
      h[i] = h[parent];
      i = parent;
    }
    h[i] = e;
  }

  // Classic sift-down (rebuilding the heap after a sweep).
  void sift_down(size_t i) {
    Entry* h = heap_.data();
    const size_t n = heap_size_;
    const Entry e = h[i];
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (before(h[child + 1], h[child])) ++child;  // h[n] is the sentinel
      if (!before(h[child], e)) break;
      h[i] = h[child];
      i = child;
    }
    h[i] = e;
  }

  int64_t now_ns_ = 0;
  uint64_t next_sequence_ = 0;
  std::vector<Entry> heap_;  // storage: heap_size_ buckets, then kSentinel
  size_t heap_size_ = 0;
  size_t heap_capacity_ = 0;
  bool root_vacant_ = false;
  // The last bucket placed, which a timer at the same time joins: its key
  // (kNoKey: none, e.g. once the bucket emptied) and last slot.
  uint64_t open_key_ = kNoKey;
  uint32_t open_tail_ = kNoSlot;
  Ring fifo_;
  std::vector<Slot> slots_;
  uint32_t free_head_ = kNoSlot;
  size_t live_ = 0;
  size_t dead_ = 0;  // cancelled, still queued
};

}  // namespace brook::io
