// io/scope.h
//
// TaskScope: structured concurrency. Every spawned task belongs to a scope;
// no task outlives its scope. Destroying the scope (or cancel_all()) destroys
// every child's coroutine frame, which destroys whatever each child was
// awaiting, down the whole tree: this is cancellation. A node crash in the
// simulator is exactly the destruction of the node's root scope.
//
// Spawned tasks start on a later turn of the executor, never inline.
// Not thread-safe: a scope belongs to one executor.
#pragma once

#include <cstddef>

#include "io/list.h"
#include "io/sync.h"
#include "io/task.h"

namespace brook::io {

class TaskScope;

namespace detail {

struct RootPromise;
using RootHandle = std::coroutine_handle<RootPromise>;

struct RootFrame {
  using promise_type = RootPromise;
  RootHandle handle;
};

struct RootPromise : PromiseBase, ListNode {
  TaskScope* scope = nullptr;
  EventId start_event = kNoEvent;

  RootFrame get_return_object() noexcept { return {RootHandle::from_promise(*this)}; }
  std::suspend_always initial_suspend() const noexcept { return {}; }
  struct Final {
    bool await_ready() const noexcept { return false; }
    void await_suspend(RootHandle h) const noexcept;
    void await_resume() const noexcept {}
  };
  Final final_suspend() const noexcept { return {}; }
  void return_void() const noexcept {}
  void unhandled_exception() const noexcept { task_exception_escaped(); }
};

}  // namespace detail

class TaskScope {
 public:
  explicit TaskScope(Executor& executor) : executor_(&executor) { idle_.set(); }
  TaskScope(const TaskScope&) = delete;
  TaskScope& operator=(const TaskScope&) = delete;
  // REQUIRES: not called from inside a child of this scope.
  ~TaskScope() {
    cancel_all();
    BROOK_ASSERT(children_.empty());
  }

  // Starts `task` on a later turn of the executor, owned by this scope.
  void spawn(Task<void> task);

  // Destroys every child now. REQUIRES: not called from inside a child of
  // this scope (a frame cannot destroy itself while running); use
  // cancel_soon() there.
  void cancel_all();

  // Destroys every child on the next turn of the executor.
  void cancel_soon();

  // Completes when the scope has no children (a gate for shutdown).
  Task<void> join() {
    while (!children_.empty()) co_await idle_.wait();
  }

  size_t size() const { return children_.size(); }
  bool empty() const { return children_.empty(); }
  Executor& executor() const { return *executor_; }

 private:
  friend struct detail::RootPromise;
  void on_child_done();

  Executor* executor_;
  IntrusiveList<detail::RootPromise> children_;
  Event idle_;
  EventId cancel_event_ = kNoEvent;
};

}  // namespace brook::io
