// io/runtime_test.cc
//
// Tests of the coroutine runtime against a minimal virtual-time executor:
// tasks, scopes and cancellation, the synchronisation primitives, and the
// combinators. Each test states the contract it proves.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/clock.h"
#include "io/status.h"
#include "io/scope.h"
#include "io/sync.h"
#include "io/task.h"
#include "io/when.h"

namespace brook::io {
namespace {

using namespace std::chrono_literals;

// FIFO posts plus timers ordered by (deadline, sequence), on a virtual clock.
class TestExecutor final : public Executor, public Clock {
 public:
  EventId post(Callback cb) override { return call_at(now_, cb); }
  EventId call_at(Instant deadline, Callback cb) override {
    EventId id = ++next_id_;
    events_.emplace(std::pair{std::max(deadline, now_), id}, cb);
    return id;
  }
  void cancel(EventId id) override {
    for (auto it = events_.begin(); it != events_.end(); ++it) {
      if (it->first.second == id) {
        events_.erase(it);
        return;
      }
    }
  }
  Instant now() const override { return now_; }
  WallTime wall_now() const override { return WallTime(now_.time_since_epoch()); }

  // Runs events until none is left; returns how many ran.
  size_t run() {
    size_t n = 0;
    while (run_one()) ++n;
    return n;
  }
  size_t pending() const { return events_.size(); }
  bool run_one() {
    if (events_.empty()) return false;
    auto it = events_.begin();
    now_ = it->first.first;
    Callback cb = it->second;
    events_.erase(it);
    cb();
    return true;
  }

 private:
  Instant now_{};
  EventId next_id_ = 0;
  std::map<std::pair<Instant, EventId>, Callback> events_;
};

// Runs `task` to completion on `ex` and returns its result.
template <typename T>
T run(TestExecutor& ex, Task<T> task) {
  std::optional<detail::ResultOf<T>> result;
  {
    TaskScope scope(ex);
    scope.spawn(detail::store_into(std::move(task), &result));
    ex.run();
    EXPECT_TRUE(scope.empty());
  }
  EXPECT_TRUE(result.has_value());
  if constexpr (!std::is_void_v<T>) return std::move(*result);
}

Task<int> add_one(int x) { co_return x + 1; }

Task<int> chain(int depth) {
  int v = 0;
  for (int i = 0; i < depth; ++i) v = co_await add_one(v);
  co_return v;
}

TEST(Task, ReturnsValuesThroughAwait) {
  TestExecutor ex;
  EXPECT_EQ(run(ex, chain(3)), 3);
}

// Symmetric transfer: a million synchronous completions in a loop must not
// grow the stack (ASan's stack limit would catch it).
TEST(Task, LongSynchronousChainsDoNotGrowTheStack) {
  TestExecutor ex;
  EXPECT_EQ(run(ex, chain(1'000'000)), 1'000'000);
}

Task<absl::StatusOr<int>> maybe(bool ok) {
  if (!ok) co_return absl::NotFoundError("nope");
  co_return 7;
}

Task<absl::StatusOr<int>> propagate(bool ok) {
  CO_ASSIGN_OR_RETURN(int v, co_await maybe(ok));
  co_return v * 2;
}

TEST(Task, StatusMacrosPropagateErrors) {
  TestExecutor ex;
  EXPECT_EQ(*run(ex, propagate(true)), 14);
  EXPECT_EQ(run(ex, propagate(false)).status().code(), absl::StatusCode::kNotFound);
}

TEST(Task, IsLazy) {
  bool started = false;
  auto body = [](bool* s) -> Task<void> {
    *s = true;
    co_return;
  };
  { Task<void> t = body(&started); }
  EXPECT_FALSE(started);
}

// A guard whose destructor records that its frame was unwound.
struct Tracer {
  std::vector<std::string>* log;
  std::string name;
  ~Tracer() { log->push_back(name); }
};

Task<void> sleeper(std::vector<std::string>* log, std::string name, Duration d,
                   const Clock* clock) {
  Tracer t{log, name + ".unwound"};
  co_await clock->sleep_for(d);
  log->push_back(name + ".woke");
}

Task<void> parent_of_sleeper(std::vector<std::string>* log, const Clock* clock) {
  Tracer t{log, "parent.unwound"};
  co_await sleeper(log, "child", 10s, clock);
  log->push_back("parent.after");
}

// Destroying a scope destroys each child and, through it, the whole tree it
// awaits; the pending timer is cancelled so nothing runs afterwards.
TEST(Scope, DestroyingTheScopeUnwindsTheWholeTree) {
  TestExecutor ex;
  std::vector<std::string> log;
  {
    TaskScope scope(ex);
    scope.spawn(parent_of_sleeper(&log, &ex));
    ex.post(Callback{[](void* s) { static_cast<TaskScope*>(s)->cancel_all(); }, &scope});
    ex.run();  // start, then cancel before the 10 s timer
  }
  EXPECT_EQ(log, (std::vector<std::string>{"child.unwound", "parent.unwound"}));
  EXPECT_EQ(ex.pending(), 0u);
  EXPECT_EQ(ex.now(), Instant{});
}

TEST(Scope, ChildrenRunToCompletionAndLeave) {
  TestExecutor ex;
  std::vector<std::string> log;
  TaskScope scope(ex);
  scope.spawn(sleeper(&log, "a", 2s, &ex));
  scope.spawn(sleeper(&log, "b", 1s, &ex));
  EXPECT_EQ(scope.size(), 2u);
  ex.run();
  EXPECT_TRUE(scope.empty());
  EXPECT_EQ(log, (std::vector<std::string>{"b.woke", "b.unwound", "a.woke", "a.unwound"}));
  EXPECT_EQ(ex.now(), Instant{} + 2s);
}

Task<void> cancel_own_scope(TaskScope* scope, std::vector<std::string>* log, const Clock* c) {
  Tracer t{log, "self.unwound"};
  scope->cancel_soon();
  co_await c->sleep_for(1s);
  log->push_back("self.woke");
}

TEST(Scope, CancelSoonIsSafeFromInsideAChild) {
  TestExecutor ex;
  std::vector<std::string> log;
  TaskScope scope(ex);
  scope.spawn(cancel_own_scope(&scope, &log, &ex));
  scope.spawn(sleeper(&log, "sibling", 5s, &ex));
  ex.run();
  EXPECT_TRUE(scope.empty());
  EXPECT_EQ(log, (std::vector<std::string>{"self.unwound", "sibling.unwound"}));
}

Task<void> join_scope(TaskScope* scope, std::vector<std::string>* log) {
  co_await scope->join();
  log->push_back("joined");
}

TEST(Scope, JoinWaitsForEveryChild) {
  TestExecutor ex;
  std::vector<std::string> log;
  TaskScope inner(ex);
  inner.spawn(sleeper(&log, "a", 3s, &ex));
  TaskScope outer(ex);
  outer.spawn(join_scope(&inner, &log));
  ex.run();
  EXPECT_EQ(log.back(), "joined");
  EXPECT_EQ(ex.now(), Instant{} + 3s);
}

Task<void> wait_event(Event* e, std::vector<std::string>* log, std::string name) {
  co_await e->wait();
  log->push_back(name);
}

TEST(Event, WakesAllWaitersInOrder) {
  TestExecutor ex;
  std::vector<std::string> log;
  Event e;
  TaskScope scope(ex);
  scope.spawn(wait_event(&e, &log, "1"));
  scope.spawn(wait_event(&e, &log, "2"));
  ex.run();
  EXPECT_TRUE(log.empty());
  e.set();
  ex.run();
  EXPECT_EQ(log, (std::vector<std::string>{"1", "2"}));
  scope.spawn(wait_event(&e, &log, "3"));  // already set: no wait
  ex.run();
  EXPECT_EQ(log.size(), 3u);
}

Task<void> wait_change(ChangeCount* c, uint64_t seen, std::vector<std::string>* log, std::string name) {
  co_await c->changed_since(seen);
  log->push_back(name);
}

TEST(ChangeCount, AChangeBeforeTheWaiterParksIsNotMissed) {
  TestExecutor ex;
  std::vector<std::string> log;
  ChangeCount c;
  TaskScope scope(ex);
  // Looked before the change; starts waiting (on a later turn) after it.
  scope.spawn(wait_change(&c, c.seen(), &log, "early"));
  c.notify();
  ex.run();
  EXPECT_EQ(log, (std::vector<std::string>{"early"}));
  // Looked after it: waits for the next.
  scope.spawn(wait_change(&c, c.seen(), &log, "late"));
  ex.run();
  EXPECT_EQ(log.size(), 1u);
  c.notify();
  ex.run();
  EXPECT_EQ(log, (std::vector<std::string>{"early", "late"}));
}

Task<void> hold_mutex(Mutex* m, std::vector<std::string>* log, std::string name, Duration d,
                      const Clock* c) {
  auto lock = co_await m->lock();
  log->push_back(name + ".in");
  co_await c->sleep_for(d);
  log->push_back(name + ".out");
}

TEST(Mutex, IsExclusiveAndFifo) {
  TestExecutor ex;
  std::vector<std::string> log;
  Mutex m;
  TaskScope scope(ex);
  for (std::string n : {"a", "b", "c"}) scope.spawn(hold_mutex(&m, &log, n, 1s, &ex));
  ex.run();
  EXPECT_EQ(log, (std::vector<std::string>{"a.in", "a.out", "b.in", "b.out", "c.in", "c.out"}));
  EXPECT_FALSE(m.is_locked());
}

// A waiter that was handed the lock but destroyed before it ran must pass the
// lock on, or every later locker would hang.
TEST(Mutex, CancelledWaiterHandsTheLockOn) {
  TestExecutor ex;
  std::vector<std::string> log;
  Mutex m;
  TaskScope holder(ex);
  TaskScope victim(ex);
  TaskScope last(ex);
  holder.spawn(hold_mutex(&m, &log, "a", 1s, &ex));
  victim.spawn(hold_mutex(&m, &log, "b", 1s, &ex));
  last.spawn(hold_mutex(&m, &log, "c", 1s, &ex));
  // Step until "a" releases: the lock is then handed to "b", whose resumption
  // is posted but has not run.
  while (log.empty() || log.back() != "a.out") ASSERT_TRUE(ex.run_one());
  victim.cancel_all();
  ex.run();
  EXPECT_EQ(log, (std::vector<std::string>{"a.in", "a.out", "c.in", "c.out"}));
  EXPECT_FALSE(m.is_locked());
}

Task<void> acquire_units(Semaphore* s, size_t n, std::vector<std::string>* log, std::string name,
                         const Clock* c) {
  auto units = co_await s->acquire(n);
  log->push_back(name);
  co_await c->sleep_for(1s);
}

TEST(Semaphore, LargeRequestIsNotStarvedBySmallOnes) {
  TestExecutor ex;
  std::vector<std::string> log;
  Semaphore s(2);
  TaskScope scope(ex);
  scope.spawn(acquire_units(&s, 1, &log, "small1", &ex));
  scope.spawn(acquire_units(&s, 2, &log, "big", &ex));
  scope.spawn(acquire_units(&s, 1, &log, "small2", &ex));
  ex.run();
  EXPECT_EQ(log, (std::vector<std::string>{"small1", "big", "small2"}));
  EXPECT_EQ(s.available(), 2u);
}

Task<void> produce(Channel<int>* ch, int n) {
  for (int i = 0; i < n; ++i) EXPECT_TRUE((co_await ch->send(i)).ok());
  ch->close();
}

Task<void> consume(Channel<int>* ch, std::vector<int>* got, size_t* max_size) {
  while (auto v = co_await ch->receive()) {
    *max_size = std::max(*max_size, ch->size() + 1);
    got->push_back(*v);
  }
}

TEST(Channel, DeliversInOrderWithinCapacity) {
  TestExecutor ex;
  Channel<int> ch(3);
  std::vector<int> got;
  size_t max_size = 0;
  TaskScope scope(ex);
  scope.spawn(produce(&ch, 100));
  scope.spawn(consume(&ch, &got, &max_size));
  ex.run();
  ASSERT_EQ(got.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(got[i], i);
  EXPECT_LE(max_size, 3u);
  EXPECT_EQ(ch.try_send(1).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Channel, TrySendReportsBackPressure) {
  Channel<int> ch(1);
  EXPECT_TRUE(ch.try_send(1).ok());
  EXPECT_EQ(ch.try_send(2).code(), absl::StatusCode::kResourceExhausted);
}

Task<int> value_after(const Clock* c, Duration d, int v) {
  co_await c->sleep_for(d);
  co_return v;
}

TEST(When, AllCollectsResultsInOrder) {
  TestExecutor ex;
  std::vector<Task<int>> tasks;
  tasks.push_back(value_after(&ex, 3s, 1));
  tasks.push_back(value_after(&ex, 1s, 2));
  tasks.push_back(value_after(&ex, 2s, 3));
  auto r = run(ex, when_all(std::move(tasks)));
  EXPECT_EQ(r, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(ex.now(), Instant{} + 3s);
}

TEST(When, AllOfHeterogeneousTasks) {
  TestExecutor ex;
  std::vector<std::string> log;
  auto [a, b] = run(ex, when_all(value_after(&ex, 1s, 4), sleeper(&log, "s", 2s, &ex)));
  EXPECT_EQ(a, 4);
  (void)b;
  EXPECT_EQ(log, (std::vector<std::string>{"s.woke", "s.unwound"}));
}

TEST(When, FirstCancelsTheLosers) {
  TestExecutor ex;
  std::vector<Task<int>> tasks;
  tasks.push_back(value_after(&ex, 3s, 1));
  tasks.push_back(value_after(&ex, 1s, 2));
  auto [index, value] = run(ex, when_first(std::move(tasks)));
  EXPECT_EQ(index, 1u);
  EXPECT_EQ(value, 2);
  EXPECT_EQ(ex.now(), Instant{} + 1s);  // the 3 s timer was cancelled
}

TEST(When, TimeoutFiresAndDestroysTheTask) {
  TestExecutor ex;
  auto late = run(ex, with_timeout(ex, 1s, value_after(&ex, 5s, 9)));
  EXPECT_FALSE(late.has_value());
  EXPECT_EQ(ex.now(), Instant{} + 1s);
  auto early = run(ex, with_timeout(ex, 10s, value_after(&ex, 1s, 9)));
  EXPECT_EQ(early, std::optional<int>(9));
}

Task<absl::Status> slow_status(const Clock* c) {
  co_await c->sleep_for(1h);
  co_return absl::OkStatus();
}

TEST(When, StatusTimeoutIsDeadlineExceeded) {
  TestExecutor ex;
  EXPECT_EQ(run(ex, with_timeout_status(ex, 1ms, slow_status(&ex))).code(),
            absl::StatusCode::kDeadlineExceeded);
}

Task<void> count_turns(int* mine, const int* other, int turns) {
  for (int i = 0; i < turns; ++i) {
    ++*mine;
    EXPECT_LE(std::abs(*mine - *other), 1);
    co_await yield_now();
  }
}

TEST(Yield, InterleavesTasksFairly) {
  TestExecutor ex;
  int a = 0;
  int b = 0;
  TaskScope scope(ex);
  scope.spawn(count_turns(&a, &b, 10));
  scope.spawn(count_turns(&b, &a, 10));
  ex.run();
  EXPECT_EQ(a, 10);
  EXPECT_EQ(b, 10);
}

}  // namespace
}  // namespace brook::io
