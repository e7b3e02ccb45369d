// io/posix/test_support.h
//
// Test helper for this folder's unit tests: runs one task on a posix Loop to
// completion, with a wall-clock limit so a broken backend fails the test
// instead of hanging it.
#pragma once

#include <chrono>
#include <optional>
#include <utility>

#include "io/posix/loop.h"
#include "io/scope.h"
#include "io/task.h"
#include "io/when.h"

namespace brook::io::posix {

inline constexpr Duration kTestTaskLimit = std::chrono::seconds(30);

// Runs `task` on `loop`; std::nullopt when it did not finish within `limit`
// (the task is then destroyed).
template <typename T>
std::optional<detail::ResultOf<T>> run_task(Loop& loop, Task<T> task,
                                            Duration limit = kTestTaskLimit) {
  std::optional<detail::ResultOf<T>> result;
  TaskScope scope(loop);
  scope.spawn(detail::store_into(std::move(task), &result));
  // On expiry the scope's destruction cancels the task.
  loop.run_until([&] { return scope.empty(); }, loop.now() + limit);
  return result;
}

}  // namespace brook::io::posix
