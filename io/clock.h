// io/clock.h
//
// Clock: a node's view of time. now() is monotonic (never goes back, the base
// of timers and deadlines); wall_now() is calendar time for record timestamps
// and may jump, step or skew (the simulator makes it do so). Logic code reads
// time only here.
//
// Timers are run by the awaiting task's Executor, whose clock is this node's
// monotonic clock: `co_await ctx.clock().sleep_for(d)`.
#pragma once

#include <utility>

#include "io/executor.h"
#include "io/task.h"
#include "io/time.h"

namespace brook::io {

// Suspends the awaiting task until the deadline; cancels its timer when the
// task is destroyed first.
class SleepAwaiter {
 public:
  explicit SleepAwaiter(Instant deadline) : deadline_(deadline) {}
  SleepAwaiter(SleepAwaiter&& o) noexcept
      : deadline_(o.deadline_), ex_(o.ex_), timer_(std::exchange(o.timer_, kNoEvent)) {}
  SleepAwaiter& operator=(SleepAwaiter&&) = delete;
  ~SleepAwaiter() {
    if (timer_ != kNoEvent) ex_->cancel(timer_);
  }

  bool await_ready() const noexcept { return false; }
  template <typename P>
  void await_suspend(std::coroutine_handle<P> h) {
    ex_ = detail::executor_of(h);
    timer_ = ex_->call_at(deadline_, Callback::resume(h));
  }
  void await_resume() noexcept { timer_ = kNoEvent; }

 private:
  Instant deadline_;
  Executor* ex_ = nullptr;
  EventId timer_ = kNoEvent;
};

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Instant now() const = 0;
  virtual WallTime wall_now() const = 0;

  SleepAwaiter sleep_until(Instant deadline) const { return SleepAwaiter(deadline); }
  SleepAwaiter sleep_for(Duration d) const { return SleepAwaiter(now() + d); }
};

}  // namespace brook::io
