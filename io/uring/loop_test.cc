// io/uring/loop_test.cc
//
// Tests of the io_uring Loop: ordering of posts and timers, cancellation of
// timers, idle sleeping, and the lifetime of operations whose awaiting task
// is destroyed while the kernel still holds their memory.
#include "io/uring/loop.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/clock.h"
#include "io/scope.h"
#include "io/uring/test_support.h"

namespace brook::io::uring {
namespace {

using namespace std::chrono_literals;

struct Recorder {
  std::vector<int> order;
  struct Entry {
    Recorder* recorder;
    int value;
  };
  std::vector<std::unique_ptr<Entry>> entries;

  Callback record(int value) {
    entries.push_back(std::make_unique<Entry>(Entry{this, value}));
    return Callback{[](void* a) {
                      auto* e = static_cast<Entry*>(a);
                      e->recorder->order.push_back(e->value);
                    },
                    entries.back().get()};
  }
};

int64_t process_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

using LoopTimers = LoopTest;

// Timers fire in deadline order regardless of the order they were set in.
TEST_F(LoopTimers, FireInDeadlineOrder) {
  Recorder r;
  const Instant base = loop_->now();
  loop_->call_at(base + 30ms, r.record(3));
  loop_->call_at(base + 10ms, r.record(1));
  loop_->call_at(base + 20ms, r.record(2));
  loop_->run_until([&] { return r.order.size() == 3; }, base + 10s);
  EXPECT_EQ(r.order, (std::vector<int>{1, 2, 3}));
  EXPECT_GE(loop_->now(), base + 30ms);
}

// Posts run in FIFO order, all before a timer that is not yet due.
TEST_F(LoopTimers, PostsRunInOrderBeforeLaterTimers) {
  Recorder r;
  loop_->call_at(loop_->now() + 5ms, r.record(99));
  for (int i = 0; i < 100; ++i) loop_->post(r.record(i));
  loop_->run_until([&] { return r.order.size() == 101; }, loop_->now() + 10s);
  ASSERT_EQ(r.order.size(), 101u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(r.order[i], i);
  EXPECT_EQ(r.order.back(), 99);
}

// A cancelled timer never runs, and cancelling it twice is harmless.
TEST_F(LoopTimers, CancelledTimerNeverRuns) {
  Recorder r;
  const Instant base = loop_->now();
  const EventId cancelled = loop_->call_at(base + 5ms, r.record(1));
  loop_->call_at(base + 20ms, r.record(2));
  loop_->cancel(cancelled);
  loop_->cancel(cancelled);
  loop_->run_until([&] { return !r.order.empty(); }, base + 10s);
  loop_->run_for(10ms);
  EXPECT_EQ(r.order, (std::vector<int>{2}));
}

// An idle loop sleeps in the kernel: run_for spends almost no CPU time.
TEST_F(LoopTimers, IdleLoopDoesNotSpin) {
  const int64_t cpu_before = process_cpu_ns();
  const Instant before = loop_->now();
  loop_->run_for(100ms);
  EXPECT_GE(loop_->now() - before, 100ms);
  EXPECT_LT(process_cpu_ns() - cpu_before, 30'000'000);
}

Task<void> yield_forever(int64_t* count) {
  for (;;) {
    ++*count;
    co_await yield_now();
  }
}

// A task that yields in a loop cannot starve a timer that falls due: posts
// are stamped with the turn's time, so the due timer sorts before them.
TEST_F(LoopTimers, YieldingTaskDoesNotStarveTimers) {
  int64_t yields = 0;
  bool fired = false;
  TaskScope scope(*loop_);
  scope.spawn(yield_forever(&yields));
  loop_->call_at(loop_->now() + 5ms,
                 Callback{[](void* f) { *static_cast<bool*>(f) = true; }, &fired});
  // The yield bound turns starvation into a failure instead of a hang.
  loop_->run_until([&] { return fired || yields > 10'000'000; });
  EXPECT_TRUE(fired) << "the timer starved behind " << yields << " yields";
  EXPECT_GT(yields, 0);
}

Task<Duration> sleep_and_measure(const Clock* clock, Duration d) {
  const Instant start = clock->now();
  co_await clock->sleep_for(d);
  co_return clock->now() - start;
}

// sleep_for suspends a task for at least the duration, on the monotonic clock.
TEST_F(LoopTimers, SleepWaitsAtLeastItsDuration) {
  auto slept = run(sleep_and_measure(loop_.get(), 20ms));
  ASSERT_TRUE(slept.has_value());
  EXPECT_GE(*slept, 20ms);
  EXPECT_LT(*slept, 5s);
}

// The wall clock is the real calendar time (after 2020), unlike now().
TEST_F(LoopTimers, WallClockIsCalendarTime) {
  EXPECT_GT(to_ms(loop_->wall_now()), int64_t{1'577'836'800'000});
}

// Reads one pipe through a raw Operation that holds `buffer`.
Task<void> read_pipe(Loop* loop, int fd, Buffer buffer, int32_t* result) {
  Operation op(*loop);
  op.op().buffer = std::move(buffer);
  io_uring_sqe* sqe = op.prepare();
  io_uring_prep_read(sqe, fd, op.op().buffer.mutable_data(), 64, UINT64_MAX);
  *result = co_await op;
}

class Pipe {
 public:
  Pipe() { EXPECT_EQ(::pipe2(fds_, O_CLOEXEC), 0); }
  ~Pipe() {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  int reader() const { return fds_[0]; }
  int writer() const { return fds_[1]; }

 private:
  int fds_[2] = {-1, -1};
};

using LoopOperations = LoopTest;

// A completed operation resumes its task with the kernel's result.
TEST_F(LoopOperations, CompletionResumesTheTask) {
  Pipe pipe;
  ASSERT_EQ(::write(pipe.writer(), "hello", 5), 5);
  Buffer buffer = Buffer::allocate(64);
  int32_t result = -1;
  run(read_pipe(loop_.get(), pipe.reader(), buffer, &result));
  EXPECT_EQ(result, 5);
  EXPECT_EQ(buffer.view().substr(0, 5), "hello");
  EXPECT_EQ(loop_->ops_live(), 0u);
}

// Destroying a task while its read is in flight keeps the read's buffer
// alive until the kernel's completion arrives, then frees it (ASan checks
// that nothing touches freed memory), and cancels the read in the kernel.
TEST_F(LoopOperations, CancelledReadKeepsItsBufferUntilCompletion) {
  Pipe pipe;
  Buffer observer = Buffer::allocate(64);
  int32_t result = -1;
  {
    TaskScope scope(*loop_);
    scope.spawn(read_pipe(loop_.get(), pipe.reader(), observer, &result));
    loop_->run_for(10ms);  // the read is now parked in the kernel
    EXPECT_EQ(loop_->ops_in_flight(), 1u);
    EXPECT_EQ(observer.use_count(), 2u);
  }
  // The task is gone; the op still holds the buffer for the kernel.
  EXPECT_EQ(result, -1);
  EXPECT_EQ(observer.use_count(), 2u);
  EXPECT_EQ(loop_->ops_live(), 1u);
  loop_->run_until([&] { return loop_->ops_in_flight() == 0; }, loop_->now() + 10s);
  EXPECT_EQ(loop_->ops_live(), 0u);
  EXPECT_EQ(observer.use_count(), 1u);
  // The cancelled read consumed nothing: later bytes are still in the pipe.
  ASSERT_EQ(::write(pipe.writer(), "x", 1), 1);
  char c = 0;
  EXPECT_EQ(::read(pipe.reader(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
}

// Many operations in flight at once (more than the submission queue holds)
// are all submitted and all complete.
TEST_F(LoopOperations, MoreOperationsThanSubmissionSlots) {
  constexpr int kPipes = 600;
  std::vector<std::unique_ptr<Pipe>> pipes;
  std::vector<int32_t> results(kPipes, -1);
  TaskScope scope(*loop_);
  for (int i = 0; i < kPipes; ++i) {
    pipes.push_back(std::make_unique<Pipe>());
    scope.spawn(read_pipe(loop_.get(), pipes.back()->reader(), Buffer::allocate(64), &results[i]));
  }
  loop_->run_for(10ms);
  for (auto& p : pipes) ASSERT_EQ(::write(p->writer(), "ab", 2), 2);
  loop_->run_until([&] { return scope.empty(); }, loop_->now() + 10s);
  for (int32_t r : results) EXPECT_EQ(r, 2);
}

Task<void> spin_until(const bool* flag, int* turns) {
  while (!*flag) {
    ++*turns;
    co_await yield_now();
  }
}

Task<void> read_then_flag(Loop* loop, int fd, int32_t* result, bool* flag) {
  co_await read_pipe(loop, fd, Buffer::allocate(64), result);
  *flag = true;
}

// A task that keeps the loop busy posting (yielding in a loop) does not
// starve I/O: a completion still arrives and resumes its task.
TEST_F(LoopOperations, BusyTasksDoNotStarveCompletions) {
  Pipe pipe;
  bool flag = false;
  int turns = 0;
  int32_t result = -1;
  TaskScope scope(*loop_);
  scope.spawn(spin_until(&flag, &turns));
  scope.spawn(read_then_flag(loop_.get(), pipe.reader(), &result, &flag));
  loop_->run_for(5ms);
  EXPECT_FALSE(flag);
  ASSERT_EQ(::write(pipe.writer(), "abc", 3), 3);
  EXPECT_TRUE(loop_->run_until([&] { return scope.empty(); }, loop_->now() + 10s));
  EXPECT_EQ(result, 3);
  EXPECT_GT(turns, 10);
}

}  // namespace
}  // namespace brook::io::uring
