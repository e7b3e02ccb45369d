// io/posix/loop.h
//
// Loop: the event loop of the epoll fallback backend, one per thread. It is
// the node's Executor (posts and timers, ordered by io::EventQueue exactly as
// in the simulator) and its Clock (CLOCK_MONOTONIC for now(), CLOCK_REALTIME
// for wall_now()). File descriptors are watched edge-triggered: readiness only
// wakes the tasks parked on the descriptor (FdWaiters), which then retry their
// system call.
//
// Owned by whoever builds the node (a server's main, a test harness); it must
// outlive every Network, Disk, Connection and task that uses it. Not
// thread-safe: every method is called on the loop's own thread.
#pragma once

#include <sys/epoll.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/clock.h"
#include "io/event_queue.h"
#include "io/executor.h"
#include "io/list.h"
#include "io/sync.h"
#include "io/time.h"

namespace brook::io::posix {

// Bytes one synchronous read may copy through the loop's scratch area: the
// largest Buffer a single Connection::read_some yields.
inline constexpr size_t kReadScratchBytes = 64 * 1024;
// Readiness events taken from the kernel per epoll wait.
inline constexpr size_t kPollEventsMax = 256;
// Callbacks run per turn before the loop polls descriptors again, so a task
// that yields in a loop cannot starve I/O.
inline constexpr size_t kCallbacksPerTurnMax = 1024;

// The tasks parked on one file descriptor, by direction. An edge on the
// descriptor wakes every task parked in that direction (they retry and park
// again on EAGAIN). Parking is cancellation-safe: a destroyed task unlinks its
// Waiter and cancels its posted resumption (see io/sync.h).
class FdWaiters {
 public:
  class Awaiter {
   public:
    explicit Awaiter(IntrusiveList<Waiter>* list) : list_(list) {}
    Awaiter(const Awaiter&) = delete;
    Awaiter& operator=(const Awaiter&) = delete;
    bool await_ready() const noexcept { return false; }
    template <typename P>
    void await_suspend(std::coroutine_handle<P> h) {
      waiter_.park(h);
      list_->push_back(&waiter_);
    }
    void await_resume() noexcept { waiter_.resumed(); }

   private:
    IntrusiveList<Waiter>* list_;
    Waiter waiter_;
  };

  FdWaiters() = default;
  FdWaiters(const FdWaiters&) = delete;
  FdWaiters& operator=(const FdWaiters&) = delete;

  Awaiter readable() { return Awaiter(&readers_); }
  Awaiter writable() { return Awaiter(&writers_); }

  // Wakes the tasks an epoll event set concerns. Runs no task inline.
  void notify(uint32_t events);
  // Wakes every parked task (the descriptor was closed).
  void notify_all() {
    readers_.notify_all();
    writers_.notify_all();
  }

 private:
  // A WaitList-like queue of raw Waiters; woken waiters are unlinked.
  class List : public IntrusiveList<Waiter> {
   public:
    void notify_all() {
      while (!empty()) pop_front()->wake();
    }
  };
  List readers_;
  List writers_;
};

class Loop final : public io::Executor, public io::Clock {
 public:
  static absl::StatusOr<std::unique_ptr<Loop>> create();
  ~Loop() override;
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  // io::Executor. Times are CLOCK_MONOTONIC nanoseconds.
  EventId post(Callback cb) override;
  EventId call_at(Instant deadline, Callback cb) override;
  void cancel(EventId id) override;

  // io::Clock (now() also serves io::Executor).
  Instant now() const override;
  WallTime wall_now() const override;

  // Runs due callbacks and readiness events until done() is true; done() is
  // checked before the first turn and after each turn. Blocks in epoll while
  // nothing is due, waking at the next timer deadline (nanosecond precision
  // through epoll_pwait2; millisecond round-up where it is unavailable).
  // Blocks forever when nothing is pending and nothing can arrive.
  // REQUIRES: not called from inside a callback of this loop.
  void run_until(std::function<bool()> done);
  // The same, giving up at `deadline`. True when done() became true.
  bool run_until(std::function<bool()> done, Instant deadline);
  // Runs the loop for `duration` of monotonic time.
  void run_for(Duration duration);

  // Starts watching `fd` edge-triggered for input, output and hang-up;
  // events go to `waiters` until unwatch(fd).
  // REQUIRES: `waiters` outlives the watch.
  absl::Status watch(int fd, FdWaiters* waiters);
  // Stops watching `fd`. REQUIRES: fd is watched.
  void unwatch(int fd);

  // Scratch memory for a synchronous read on the loop thread; its contents
  // do not survive a suspension.
  std::span<std::byte> read_scratch() { return {scratch_.get(), kReadScratchBytes}; }

 private:
  explicit Loop(int epoll_fd);
  // Waits up to `timeout_ns` (negative: forever), starts a turn and wakes
  // the tasks parked on ready descriptors.
  void poll(int64_t timeout_ns);
  int wait(int64_t timeout_ns);
  // Runs callbacks due by the turn's time, at most kCallbacksPerTurnMax.
  void run_due();

  int epoll_fd_;
  bool pwait2_available_ = true;
  bool running_ = false;
  // CLOCK_MONOTONIC when the current turn began: the due limit of the turn
  // and the time stamp of its posts.
  int64_t turn_ns_ = 0;
  EventQueue queue_;
  std::array<epoll_event, kPollEventsMax> events_{};
  std::unique_ptr<std::byte[]> scratch_;
};

}  // namespace brook::io::posix
