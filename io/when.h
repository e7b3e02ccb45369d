// io/when.h
//
// Combinators: wait for all of several tasks, wait for the first of several
// (cancelling the rest), and timeouts. Each runs its children in a private
// TaskScope, so cancelling the combinator cancels every child.
#pragma once

#include <optional>
#include <tuple>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/clock.h"
#include "io/scope.h"
#include "io/sync.h"
#include "io/task.h"

namespace brook::io {

namespace detail {

template <typename T>
using ResultOf = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <typename T>
Task<void> store_into(Task<T> task, std::optional<ResultOf<T>>* slot) {
  if constexpr (std::is_void_v<T>) {
    co_await std::move(task);
    slot->emplace();
  } else {
    slot->emplace(co_await std::move(task));
  }
}

template <typename T>
Task<void> store_first(Task<T> task, std::optional<ResultOf<T>>* slot, Event* done) {
  if constexpr (std::is_void_v<T>) {
    co_await std::move(task);
    if (done->is_set()) co_return;
    slot->emplace();
  } else {
    auto value = co_await std::move(task);
    if (done->is_set()) co_return;
    slot->emplace(std::move(value));
  }
  done->set();
}

}  // namespace detail

// Runs all tasks concurrently; yields their results in order.
template <typename T>
Task<std::vector<detail::ResultOf<T>>> when_all(std::vector<Task<T>> tasks) {
  std::vector<std::optional<detail::ResultOf<T>>> slots(tasks.size());
  {
    TaskScope scope(co_await this_executor());
    for (size_t i = 0; i < tasks.size(); ++i) {
      scope.spawn(detail::store_into(std::move(tasks[i]), &slots[i]));
    }
    co_await scope.join();
  }
  std::vector<detail::ResultOf<T>> results;
  results.reserve(slots.size());
  for (auto& s : slots) {
    BROOK_ASSERT(s.has_value());
    results.push_back(std::move(*s));
  }
  co_return results;
}

template <typename... Ts>
Task<std::tuple<detail::ResultOf<Ts>...>> when_all(Task<Ts>... tasks) {
  std::tuple<std::optional<detail::ResultOf<Ts>>...> slots;
  {
    TaskScope scope(co_await this_executor());
    [&]<size_t... I>(std::index_sequence<I...>) {
      (scope.spawn(detail::store_into(std::move(tasks), &std::get<I>(slots))), ...);
    }(std::index_sequence_for<Ts...>{});
    co_await scope.join();
  }
  co_return std::apply(
      [](auto&... s) { return std::tuple<detail::ResultOf<Ts>...>(std::move(*s)...); },
      slots);
}

// Runs all tasks concurrently until one completes; destroys the others.
// Yields the index of the winner and its result.
template <typename T>
Task<std::pair<size_t, detail::ResultOf<T>>> when_first(std::vector<Task<T>> tasks) {
  BROOK_ASSERT(!tasks.empty());
  std::vector<std::optional<detail::ResultOf<T>>> slots(tasks.size());
  Event done;
  TaskScope scope(co_await this_executor());
  for (size_t i = 0; i < tasks.size(); ++i) {
    scope.spawn(detail::store_first(std::move(tasks[i]), &slots[i], &done));
  }
  co_await done.wait();
  scope.cancel_all();
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].has_value()) co_return std::pair{i, std::move(*slots[i])};
  }
  BROOK_UNREACHABLE();
}

// Two-task form: yields a variant holding the winner's result.
template <typename A, typename B>
Task<std::variant<detail::ResultOf<A>, detail::ResultOf<B>>> when_first(Task<A> a, Task<B> b) {
  std::optional<detail::ResultOf<A>> ra;
  std::optional<detail::ResultOf<B>> rb;
  Event done;
  TaskScope scope(co_await this_executor());
  scope.spawn(detail::store_first(std::move(a), &ra, &done));
  scope.spawn(detail::store_first(std::move(b), &rb, &done));
  co_await done.wait();
  scope.cancel_all();
  using V = std::variant<detail::ResultOf<A>, detail::ResultOf<B>>;
  if (ra) co_return V(std::in_place_index<0>, std::move(*ra));
  co_return V(std::in_place_index<1>, std::move(*rb));
}

// The Event (or a notification of the WaitList) as a task, to race with others
// in when_first or with_timeout.
inline Task<void> wait_for(Event* event) { co_await event->wait(); }
inline Task<void> wait_for(WaitList* list) { co_await list->wait(); }

namespace detail {
inline Task<void> sleep_task(const Clock* clock, Instant deadline) {
  co_await clock->sleep_until(deadline);
}
}  // namespace detail

// Yields the task's result, or std::nullopt once `deadline` passes (the task
// is then destroyed).
template <typename T>
Task<std::optional<detail::ResultOf<T>>> with_deadline(const Clock& clock, Instant deadline,
                                                       Task<T> task) {
  auto r = co_await when_first(std::move(task), detail::sleep_task(&clock, deadline));
  if (r.index() == 1) co_return std::nullopt;
  co_return std::optional<detail::ResultOf<T>>(std::move(std::get<0>(r)));
}

template <typename T>
Task<std::optional<detail::ResultOf<T>>> with_timeout(const Clock& clock, Duration timeout,
                                                      Task<T> task) {
  return with_deadline(clock, clock.now() + timeout, std::move(task));
}

// Status-returning tasks fold the timeout into their status.
inline Task<absl::Status> with_timeout_status(const Clock& clock, Duration timeout,
                                              Task<absl::Status> task) {
  auto r = co_await with_timeout(clock, timeout, std::move(task));
  if (!r) co_return absl::DeadlineExceededError("timed out");
  co_return std::move(*r);
}

}  // namespace brook::io
