// io/uring/test_support.h
//
// Helpers for this folder's unit tests: a Loop (or a skip when the kernel
// refuses io_uring), running one task to completion with a wall-clock limit
// so a broken backend fails a test instead of hanging it, and a temporary
// directory removed afterwards.
#pragma once

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "io/scope.h"
#include "io/task.h"
#include "io/uring/loop.h"
#include "io/when.h"

namespace brook::io::uring {

inline constexpr Duration kTestTaskLimit = std::chrono::seconds(30);

// Runs `task` on `loop`; std::nullopt when it did not finish within `limit`
// (the task is then destroyed).
template <typename T>
std::optional<detail::ResultOf<T>> run_task(Loop& loop, Task<T> task,
                                            Duration limit = kTestTaskLimit) {
  std::optional<detail::ResultOf<T>> result;
  {
    TaskScope scope(loop);
    scope.spawn(detail::store_into(std::move(task), &result));
    loop.run_until([&] { return scope.empty(); }, loop.now() + limit);
  }
  return result;
}

// A fresh directory under /tmp, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/brook-uring-test-XXXXXX";
    const char* made = ::mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Base fixture: a fresh Loop per test, or a skip where io_uring is refused.
class LoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = Loop::create();
    if (!loop.ok()) GTEST_SKIP() << "io_uring unavailable: " << loop.status();
    loop_ = std::move(*loop);
  }
  template <typename T>
  std::optional<detail::ResultOf<T>> run(Task<T> task, Duration limit = kTestTaskLimit) {
    return run_task(*loop_, std::move(task), limit);
  }

  std::unique_ptr<Loop> loop_;
};

}  // namespace brook::io::uring
