// sim/test_executor.h
//
// TestExecutor: a deterministic virtual-time executor for unit tests of
// logic that runs on one node without a whole World: FIFO posts plus timers
// ordered by (deadline, sequence); time jumps to the next event. run() drives
// a task to completion and hands back its result. Test-only (header-only, no
// library needed beyond brook_io).
#pragma once

#include <map>
#include <optional>
#include <type_traits>
#include <utility>

#include <gtest/gtest.h>

#include "io/assert.h"
#include "io/clock.h"
#include "io/executor.h"
#include "io/scope.h"
#include "io/task.h"
#include "io/when.h"

namespace brook::sim {

// FIFO posts plus timers ordered by (deadline, sequence), on a virtual clock.
class TestExecutor final : public io::Executor {
 public:
  io::EventId post(io::Callback cb) override { return call_at(now_, cb); }
  io::EventId call_at(io::Instant deadline, io::Callback cb) override {
    const io::EventId id = ++next_id_;
    events_.emplace(std::pair{std::max(deadline, now_), id}, cb);
    return id;
  }
  void cancel(io::EventId id) override {
    for (auto it = events_.begin(); it != events_.end(); ++it) {
      if (it->first.second == id) {
        events_.erase(it);
        return;
      }
    }
  }
  io::Instant now() const override { return now_; }

  void run() { run_until(io::Instant::max()); }
  // Runs every event due at or before `limit`.
  void run_until(io::Instant limit) {
    while (!events_.empty() && events_.begin()->first.first <= limit) {
      auto it = events_.begin();
      now_ = it->first.first;
      const io::Callback cb = it->second;
      events_.erase(it);
      cb();
    }
  }

 private:
  io::Instant now_{};
  io::EventId next_id_ = 0;
  std::map<std::pair<io::Instant, io::EventId>, io::Callback> events_;
};

// A Clock on a TestExecutor's virtual time. The wall clock starts at
// `wall_start` and moves with virtual time; jump_wall() steps it.
class TestClock final : public io::Clock {
 public:
  explicit TestClock(const TestExecutor& ex,
                     io::WallTime wall_start = io::WallTime(std::chrono::milliseconds(1'700'000'000'000)))
      : ex_(&ex), wall_start_(wall_start) {}
  io::Instant now() const override { return ex_->now(); }
  io::WallTime wall_now() const override {
    return wall_start_ + ex_->now().time_since_epoch() + wall_jump_;
  }
  void jump_wall(io::Duration d) { wall_jump_ += d; }

 private:
  const TestExecutor* ex_;
  io::WallTime wall_start_;
  io::Duration wall_jump_{0};
};

// Runs `task` to completion on `ex` and returns its result.
template <typename T>
T run(TestExecutor& ex, io::Task<T> task) {
  std::optional<io::detail::ResultOf<T>> result;
  {
    io::TaskScope scope(ex);
    scope.spawn(io::detail::store_into(std::move(task), &result));
    ex.run();
    EXPECT_TRUE(scope.empty());
  }
  BROOK_ASSERT(result.has_value());
  if constexpr (!std::is_void_v<T>) return std::move(*result);
}

}  // namespace brook::sim
