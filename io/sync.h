// io/sync.h
//
// Coroutine synchronisation primitives for one event loop: WaitList (a
// condition to re-check), ChangeCount, Event, Mutex, Semaphore and a
// bounded Channel.
//
// Contract shared by all of them:
// - Waking never resumes a coroutine inline: it posts the resumption to the
//   waiter's executor, so no primitive runs foreign code in its own frame.
// - Every awaiter may be destroyed (its task cancelled) at any suspension.
//   Its destructor unlinks it and, when it had been handed something (a
//   notification, the mutex, semaphore units) but never resumed, hands that on
//   to the next waiter. Cancellation therefore loses nothing.
// - Waiters are served first-in, first-out: deterministic and starvation-free.
// Not thread-safe; every primitive belongs to one executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "io/list.h"
#include "io/task.h"

namespace brook::io {

// A waiter parked on some primitive. Owned by an awaiter in a coroutine frame.
class Waiter : public ListNode {
 public:
  Waiter() = default;
  ~Waiter() {
    if (posted_ != kNoEvent) ex_->cancel(posted_);
  }

  template <typename P>
  void park(std::coroutine_handle<P> h) {
    handle_ = h;
    ex_ = detail::executor_of(h);
  }
  // Unlinks and schedules the resumption.
  void wake() {
    unlink();
    BROOK_ASSERT(posted_ == kNoEvent);
    posted_ = ex_->post(Callback::resume(handle_));
  }
  bool woken() const { return posted_ != kNoEvent; }
  void resumed() { posted_ = kNoEvent; }

 private:
  std::coroutine_handle<> handle_;
  Executor* ex_ = nullptr;
  EventId posted_ = kNoEvent;
};

// Coroutines wait here until notified, then re-check their condition.
class WaitList {
 public:
  class Awaiter {
   public:
    explicit Awaiter(WaitList* list) : list_(list) {}
    Awaiter(Awaiter&& o) noexcept : list_(o.list_) { BROOK_ASSERT(!o.waiter_.linked()); }
    ~Awaiter() {
      // Notified but cancelled before running: pass the notification on.
      if (waiter_.woken()) list_->notify_one();
    }
    bool await_ready() const noexcept { return false; }
    template <typename P>
    void await_suspend(std::coroutine_handle<P> h) {
      waiter_.park(h);
      list_->waiters_.push_back(&waiter_);
    }
    void await_resume() noexcept { waiter_.resumed(); }

   private:
    WaitList* list_;
    Waiter waiter_;
  };

  WaitList() = default;
  WaitList(const WaitList&) = delete;
  WaitList& operator=(const WaitList&) = delete;

  Awaiter wait() { return Awaiter(this); }
  void notify_one() {
    if (!waiters_.empty()) waiters_.pop_front()->wake();
  }
  void notify_all() {
    while (!waiters_.empty()) waiters_.pop_front()->wake();
  }
  bool has_waiters() const { return !waiters_.empty(); }

 private:
  IntrusiveList<Waiter> waiters_;
};

// A count of changes to some state, and the coroutines waiting for the
// next one. A waiter takes seen() before it looks at the state, and waits
// with changed_since(seen): a change after its look is not missed, even one
// that came before it parked (a waiter spawned as a task starts on a later
// turn; one that looked across a suspension parks later still).
class ChangeCount {
 public:
  uint64_t seen() const { return changes_; }
  void notify() {
    ++changes_;
    waiters_.notify_all();
  }
  Task<void> changed_since(uint64_t seen) {
    while (changes_ == seen) co_await waiters_.wait();
  }

 private:
  uint64_t changes_ = 0;
  WaitList waiters_;
};

// A manual-reset event: wait() completes at once while set.
class Event {
 public:
  struct Awaiter {
    Event* event;
    WaitList::Awaiter inner;
    bool await_ready() const noexcept { return event->set_; }
    template <typename P>
    void await_suspend(std::coroutine_handle<P> h) {
      inner.await_suspend(h);
    }
    void await_resume() noexcept { inner.await_resume(); }
  };

  void set() {
    set_ = true;
    waiters_.notify_all();
  }
  void reset() { set_ = false; }
  bool is_set() const { return set_; }
  Awaiter wait() { return Awaiter{this, waiters_.wait()}; }

 private:
  bool set_ = false;
  WaitList waiters_;
};

// Units held from a Semaphore (or the lock of a Mutex); released on
// destruction.
class Semaphore;

class SemaphoreUnits {
 public:
  SemaphoreUnits() = default;
  SemaphoreUnits(Semaphore* sem, size_t units) : sem_(sem), units_(units) {}
  SemaphoreUnits(SemaphoreUnits&& o) noexcept
      : sem_(std::exchange(o.sem_, nullptr)), units_(std::exchange(o.units_, 0)) {}
  SemaphoreUnits& operator=(SemaphoreUnits&& o) noexcept {
    if (this != &o) {
      release();
      sem_ = std::exchange(o.sem_, nullptr);
      units_ = std::exchange(o.units_, 0);
    }
    return *this;
  }
  ~SemaphoreUnits() { release(); }
  size_t units() const { return units_; }
  void release();

 private:
  Semaphore* sem_ = nullptr;
  size_t units_ = 0;
};

// A counting semaphore with FIFO hand-off: released units go to the oldest
// waiter whose request fits, so a large request is not starved by small ones.
class Semaphore {
 public:
  explicit Semaphore(size_t units) : available_(units) {}
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;

  class Awaiter {
   public:
    Awaiter(Semaphore* sem, size_t units) : sem_(sem), units_(units) {}
    Awaiter(Awaiter&& o) noexcept : sem_(o.sem_), units_(o.units_) {
      BROOK_ASSERT(!o.node_.waiter.linked());
    }
    ~Awaiter() {
      if (node_.granted && node_.waiter.woken()) sem_->release(units_);
    }
    bool await_ready() {
      if (sem_->waiters_.empty() && sem_->available_ >= units_) {
        sem_->available_ -= units_;
        node_.granted = true;
        return true;
      }
      return false;
    }
    template <typename P>
    void await_suspend(std::coroutine_handle<P> h) {
      node_.waiter.park(h);
      node_.units = units_;
      sem_->waiters_.push_back(&node_);
    }
    SemaphoreUnits await_resume() noexcept {
      BROOK_ASSERT(node_.granted);
      node_.waiter.resumed();
      return SemaphoreUnits(sem_, units_);
    }

   private:
    friend class Semaphore;
    struct Node : ListNode {
      Waiter waiter;
      size_t units = 0;
      bool granted = false;
    };
    Semaphore* sem_;
    size_t units_;
    Node node_;
  };

  // REQUIRES: units > 0.
  Awaiter acquire(size_t units = 1) {
    BROOK_ASSERT(units > 0);
    return Awaiter(this, units);
  }
  std::optional<SemaphoreUnits> try_acquire(size_t units = 1) {
    if (!waiters_.empty() || available_ < units) return std::nullopt;
    available_ -= units;
    return SemaphoreUnits(this, units);
  }
  void release(size_t units) {
    available_ += units;
    while (!waiters_.empty() && waiters_.front()->units <= available_) {
      Awaiter::Node* n = waiters_.pop_front();
      available_ -= n->units;
      n->granted = true;
      n->waiter.wake();
    }
  }
  size_t available() const { return available_; }
  size_t waiting() const { return waiters_.size(); }

 private:
  size_t available_;
  IntrusiveList<Awaiter::Node> waiters_;
};

inline void SemaphoreUnits::release() {
  if (sem_ != nullptr && units_ > 0) sem_->release(units_);
  sem_ = nullptr;
  units_ = 0;
}

// A FIFO mutex: `auto lock = co_await mutex.lock();` holds it until `lock`
// is destroyed.
class Mutex {
 public:
  Semaphore::Awaiter lock() { return sem_.acquire(1); }
  std::optional<SemaphoreUnits> try_lock() { return sem_.try_acquire(1); }
  bool is_locked() const { return sem_.available() == 0; }

 private:
  Semaphore sem_{1};
};

// A bounded multi-producer multi-consumer channel. send() waits while the
// channel is full (back-pressure); receive() waits while it is empty.
// After close(), send() fails and receive() drains what is left, then yields
// std::nullopt.
template <typename T>
class Channel {
 public:
  // REQUIRES: capacity > 0.
  explicit Channel(size_t capacity) : capacity_(capacity) { BROOK_ASSERT(capacity > 0); }
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  Task<absl::Status> send(T value) {
    while (!closed_ && items_.size() >= capacity_) co_await not_full_.wait();
    if (closed_) co_return absl::FailedPreconditionError("channel closed");
    items_.push_back(std::move(value));
    not_empty_.notify_one();
    co_return absl::OkStatus();
  }

  // Fails with ResourceExhausted instead of waiting when full.
  absl::Status try_send(T value) {
    if (closed_) return absl::FailedPreconditionError("channel closed");
    if (items_.size() >= capacity_) return absl::ResourceExhaustedError("channel full");
    items_.push_back(std::move(value));
    not_empty_.notify_one();
    return absl::OkStatus();
  }

  Task<std::optional<T>> receive() {
    while (!closed_ && items_.empty()) co_await not_empty_.wait();
    if (items_.empty()) co_return std::nullopt;
    T value = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    co_return std::optional<T>(std::move(value));
  }

  void close() {
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }
  bool closed() const { return closed_; }
  size_t size() const { return items_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  bool closed_ = false;
  std::deque<T> items_;  // bounded by capacity_
  WaitList not_full_;
  WaitList not_empty_;
};

}  // namespace brook::io
