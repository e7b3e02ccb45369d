// io/posix/loop_test.cc
//
// Tests of the posix Loop: posts, timers, cancellation, tasks on the loop,
// and that waiting blocks in the kernel instead of spinning.
#include "io/posix/loop.h"

#include <time.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/clock.h"
#include "io/posix/test_support.h"
#include "io/scope.h"
#include "io/task.h"

namespace brook::io::posix {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Loop> make_loop() {
  absl::StatusOr<std::unique_ptr<Loop>> loop = Loop::create();
  BROOK_ASSERT(loop.ok());
  return std::move(*loop);
}

struct Recorder {
  std::vector<int> order;
  Loop* loop = nullptr;
};

struct Mark {
  Recorder* recorder;
  int value;
  Instant deadline{};
  bool on_time = true;
};

void record(void* arg) {
  auto* mark = static_cast<Mark*>(arg);
  mark->recorder->order.push_back(mark->value);
  mark->on_time = mark->recorder->loop->now() >= mark->deadline;
}

// Posted callbacks run in FIFO order, and a post made by a running callback
// runs after everything posted before it.
TEST(PosixLoop, PostsRunInFifoOrder) {
  auto loop = make_loop();
  Recorder rec{{}, loop.get()};
  Mark a{&rec, 1}, b{&rec, 2}, c{&rec, 3};
  struct Reposter {
    Loop* loop;
    Mark* mark;
  } reposter{loop.get(), &c};
  loop->post(Callback{record, &a});
  loop->post(Callback{[](void* r) {
                        auto* self = static_cast<Reposter*>(r);
                        self->loop->post(Callback{record, self->mark});
                      },
                      &reposter});
  loop->post(Callback{record, &b});
  loop->run_until([&] { return rec.order.size() == 3; });
  EXPECT_EQ(rec.order, (std::vector<int>{1, 2, 3}));
}

// Timers run in deadline order, never before their deadline, whatever the
// order they were scheduled in.
TEST(PosixLoop, TimersRunInDeadlineOrderNotEarly) {
  auto loop = make_loop();
  Recorder rec{{}, loop.get()};
  const Instant start = loop->now();
  Mark m30{&rec, 30, start + 30ms}, m10{&rec, 10, start + 10ms}, m20{&rec, 20, start + 20ms};
  Mark m0{&rec, 0, start};
  for (Mark* m : {&m30, &m10, &m20, &m0}) loop->call_at(m->deadline, Callback{record, m});
  loop->run_until([&] { return rec.order.size() == 4; });
  EXPECT_EQ(rec.order, (std::vector<int>{0, 10, 20, 30}));
  for (Mark* m : {&m30, &m10, &m20, &m0}) EXPECT_TRUE(m->on_time) << m->value;
}

// A cancelled timer never runs; cancelling a stale id (already run) does not
// disturb a newer event that may reuse its slot.
TEST(PosixLoop, CancelledTimersDoNotRun) {
  auto loop = make_loop();
  Recorder rec{{}, loop.get()};
  Mark cancelled{&rec, 1}, kept{&rec, 2}, later{&rec, 3};
  const EventId id = loop->call_at(loop->now() + 5ms, Callback{record, &cancelled});
  loop->call_at(loop->now() + 10ms, Callback{record, &kept});
  loop->cancel(id);
  loop->run_for(20ms);
  EXPECT_EQ(rec.order, (std::vector<int>{2}));
  const EventId ran = loop->post(Callback{record, &kept});
  loop->run_until([&] { return rec.order.size() == 2; });
  loop->post(Callback{record, &later});
  loop->cancel(ran);  // stale: must not cancel `later`
  loop->run_until([&] { return rec.order.size() == 3; });
  EXPECT_EQ(rec.order, (std::vector<int>{2, 2, 3}));
}

Task<void> yield_forever(int64_t* count) {
  for (;;) {
    ++*count;
    co_await yield_now();
  }
}

// A task that yields in a loop cannot starve a timer that falls due.
TEST(PosixLoop, YieldingTaskDoesNotStarveTimers) {
  auto loop = make_loop();
  int64_t yields = 0;
  bool fired = false;
  TaskScope scope(*loop);
  scope.spawn(yield_forever(&yields));
  loop->call_at(loop->now() + 5ms, Callback{[](void* f) { *static_cast<bool*>(f) = true; }, &fired});
  // The yield bound turns starvation into a failure instead of a hang.
  loop->run_until([&] { return fired || yields > 10'000'000; });
  EXPECT_TRUE(fired) << "the timer starved behind " << yields << " yields";
  EXPECT_GT(yields, 0);
}

int64_t cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Waiting for a far timer blocks in the kernel: 200 ms of loop time cost far
// less than 200 ms of CPU.
TEST(PosixLoop, IdleLoopDoesNotSpin) {
  auto loop = make_loop();
  loop->call_at(loop->now() + 1h, Callback{[](void*) {}, nullptr});
  const int64_t cpu_before = cpu_ns();
  const Instant before = loop->now();
  loop->run_for(200ms);
  EXPECT_GE(loop->now() - before, 200ms);
  EXPECT_LT(cpu_ns() - cpu_before, 50'000'000);
}

Task<void> sleep_and_note(const Clock* clock, Duration d, std::vector<int>* log, int value) {
  const Instant deadline = clock->now() + d;
  co_await clock->sleep_for(d);
  EXPECT_GE(clock->now(), deadline);
  log->push_back(value);
}

// Tasks sleeping on the loop's clock wake in deadline order; destroying a
// sleeping task cancels its timer so it never resumes.
TEST(PosixLoop, SleepingTasksWakeInOrderAndCancelCleanly) {
  auto loop = make_loop();
  std::vector<int> log;
  TaskScope doomed(*loop);
  doomed.spawn(sleep_and_note(loop.get(), 15ms, &log, 99));
  TaskScope scope(*loop);
  scope.spawn(sleep_and_note(loop.get(), 20ms, &log, 2));
  scope.spawn(sleep_and_note(loop.get(), 10ms, &log, 1));
  scope.spawn(sleep_and_note(loop.get(), 0ms, &log, 0));
  loop->run_for(1ms);  // every task is now asleep
  doomed.cancel_all();
  loop->run_until([&] { return scope.empty(); });
  loop->run_for(10ms);
  EXPECT_EQ(log, (std::vector<int>{0, 1, 2}));
}

// wall_now() is calendar time (after 2020), now() is monotonic.
TEST(PosixLoop, ClocksReadTheSystemClocks) {
  auto loop = make_loop();
  EXPECT_GT(to_ms(loop->wall_now()), int64_t{1'577'836'800'000});
  const Instant a = loop->now();
  const Instant b = loop->now();
  EXPECT_LE(a, b);
}

Task<int> answer_after(const Clock* clock, Duration d) {
  co_await clock->sleep_for(d);
  co_return 42;
}

// The test helper itself reports a task that outlives its limit.
TEST(PosixLoop, RunTaskReportsTimeouts) {
  auto loop = make_loop();
  EXPECT_EQ(run_task(*loop, answer_after(loop.get(), 1ms)), std::optional<int>(42));
  EXPECT_EQ(run_task(*loop, answer_after(loop.get(), 1h), 10ms), std::nullopt);
}

}  // namespace
}  // namespace brook::io::posix
