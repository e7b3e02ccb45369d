// io/task.h
//
// Task<T>: a lazy, move-only coroutine. It does not start until awaited, so
// the awaiter owns it and nothing runs unowned. The awaiter runs the task's
// first slice inline: a task that completes there lets the awaiter go on at
// once, so long loops of synchronous completions do not grow the stack (this
// does not depend on the compiler turning symmetric transfer into a tail
// call, which sanitizer builds do not); a task that suspended resumes its
// awaiter by symmetric transfer when it finishes.
//
// Destroying a Task destroys its coroutine frame and, through the
// frame's locals, every task it is awaiting: this is how cancellation unwinds
// a whole task tree (see io/scope.h).
//
// Every Task carries the Executor it runs on, inherited from its awaiter (or
// given by the TaskScope that spawned its root). Awaiters in io/ read it from
// the promise to schedule resumption.
//
// Errors are values (absl::Status / absl::StatusOr<T> as T); logic code does
// not throw, and an exception escaping a task aborts the process.
#pragma once

#include <coroutine>
#include <optional>
#include <type_traits>
#include <utility>

#include "io/assert.h"
#include "io/executor.h"

namespace brook::io {

template <typename T = void>
class Task;

struct PromiseBase {
  std::coroutine_handle<> continuation;
  Executor* executor = nullptr;
  // Set while the awaiter runs the task's first slice inline (inside its
  // await_suspend); a task that completes during that slice only records it,
  // and the awaiter continues without suspending.
  bool running_inline = false;
  bool completed_inline = false;
};

namespace detail {

struct FinalAwaiter {
  bool await_ready() const noexcept { return false; }
  template <typename P>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) const noexcept {
    PromiseBase& p = h.promise();
    if (p.running_inline) {
      // Completed synchronously: return into the awaiter's await_suspend,
      // which continues the awaiting task without growing the stack.
      p.completed_inline = true;
      return std::noop_coroutine();
    }
    std::coroutine_handle<> next = p.continuation;
    return next ? next : std::noop_coroutine();
  }
  void await_resume() const noexcept {}
};

[[noreturn]] void task_exception_escaped();

template <typename T>
struct TaskPromise : PromiseBase {
  std::optional<T> value;

  Task<T> get_return_object() noexcept;
  std::suspend_always initial_suspend() const noexcept { return {}; }
  FinalAwaiter final_suspend() const noexcept { return {}; }
  template <typename U>
    requires std::is_convertible_v<U&&, T>
  void return_value(U&& v) {
    value.emplace(std::forward<U>(v));
  }
  void unhandled_exception() const noexcept { task_exception_escaped(); }
};

template <>
struct TaskPromise<void> : PromiseBase {
  Task<void> get_return_object() noexcept;
  std::suspend_always initial_suspend() const noexcept { return {}; }
  FinalAwaiter final_suspend() const noexcept { return {}; }
  void return_void() const noexcept {}
  void unhandled_exception() const noexcept { task_exception_escaped(); }
};

// Reads the executor of the awaiting coroutine. Every coroutine in Brook is a
// Task (or a root/driver frame whose promise derives from PromiseBase).
template <typename P>
Executor* executor_of(std::coroutine_handle<P> h) {
  static_assert(std::is_base_of_v<PromiseBase, P>,
                "Brook awaitables may only be awaited from Brook tasks");
  Executor* ex = h.promise().executor;
  BROOK_ASSERT(ex != nullptr);
  return ex;
}

}  // namespace detail

template <typename T>
class [[nodiscard]] Task {
 public:
  using promise_type = detail::TaskPromise<T>;
  using Handle = std::coroutine_handle<promise_type>;
  using value_type = T;

  Task() = default;
  explicit Task(Handle h) noexcept : h_(h) {}
  Task(Task&& other) noexcept : h_(std::exchange(other.h_, {})) {}
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      reset();
      h_ = std::exchange(other.h_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { reset(); }

  bool valid() const { return static_cast<bool>(h_); }
  bool done() const { return h_ && h_.done(); }

  class Awaiter {
   public:
    explicit Awaiter(Handle h) : h_(h) {}
    bool await_ready() const noexcept { return false; }
    // Runs the task's first slice inline. If it completes there, the caller
    // goes on without suspending (so a loop of synchronous completions never
    // deepens the stack, with or without tail calls, e.g. under ASan);
    // otherwise the task resumes the caller when it finishes.
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> caller) noexcept {
      PromiseBase& p = h_.promise();
      p.continuation = caller;
      p.executor = detail::executor_of(caller);
      p.running_inline = true;
      h_.resume();
      if (p.completed_inline) return false;
      p.running_inline = false;
      return true;
    }
    T await_resume() {
      if constexpr (!std::is_void_v<T>) {
        BROOK_ASSERT(h_.promise().value.has_value());
        return std::move(*h_.promise().value);
      }
    }

   private:
    Handle h_;
  };

  // Starts (or continues) the task when awaited; yields its result.
  Awaiter operator co_await() && noexcept {
    BROOK_ASSERT(h_);
    return Awaiter(h_);
  }

  // For drivers (scope roots, combinators): the raw frame.
  Handle handle() const { return h_; }
  Handle release() { return std::exchange(h_, {}); }

  // REQUIRES: done(). Moves the result out.
  T take_result() {
    BROOK_ASSERT(done());
    if constexpr (!std::is_void_v<T>) return std::move(*h_.promise().value);
  }

 private:
  void reset() {
    if (h_) std::exchange(h_, {}).destroy();
  }
  Handle h_;
};

namespace detail {
template <typename T>
Task<T> TaskPromise<T>::get_return_object() noexcept {
  return Task<T>(std::coroutine_handle<TaskPromise<T>>::from_promise(*this));
}
inline Task<void> TaskPromise<void>::get_return_object() noexcept {
  return Task<void>(std::coroutine_handle<TaskPromise<void>>::from_promise(*this));
}
}  // namespace detail

// co_await this_executor() yields the Executor the current task runs on.
struct ThisExecutor {
  Executor* ex = nullptr;
  bool await_ready() const noexcept { return false; }
  template <typename P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    ex = detail::executor_of(h);
    return false;  // do not actually suspend
  }
  Executor& await_resume() const noexcept { return *ex; }
};
inline ThisExecutor this_executor() { return {}; }

// co_await yield_now() lets every callback already posted run first. Long
// loops call it so one task cannot starve a node's event loop.
struct YieldNow {
  Executor* ex = nullptr;
  EventId id = kNoEvent;
  YieldNow() = default;
  YieldNow(YieldNow&& o) noexcept : ex(o.ex), id(std::exchange(o.id, kNoEvent)) {}
  YieldNow& operator=(YieldNow&&) = delete;
  ~YieldNow() {
    if (id != kNoEvent) ex->cancel(id);
  }
  bool await_ready() const noexcept { return false; }
  template <typename P>
  void await_suspend(std::coroutine_handle<P> h) {
    ex = detail::executor_of(h);
    id = ex->post(Callback::resume(h));
  }
  void await_resume() noexcept { id = kNoEvent; }
};
inline YieldNow yield_now() { return {}; }

}  // namespace brook::io
