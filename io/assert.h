// io/assert.h
//
// Always-on assertions for programmer errors. BROOK_ASSERT stays enabled in
// release builds: a broken invariant stops the process at once instead of
// corrupting a log. Never assert on bytes from the network or the disk;
// validate those and return a Status.
//
// Under simulation the simulator installs a failure context (seed and replay
// command) that the assertion handler prints before aborting, so every failed
// assertion in a simulated run tells how to replay it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace brook::io {

// Extra lines printed when an assertion fails. One per thread: a simulation
// runs on one thread, and nested contexts restore the previous one.
class AssertContext {
 public:
  explicit AssertContext(std::string text);
  ~AssertContext();
  AssertContext(const AssertContext&) = delete;
  AssertContext& operator=(const AssertContext&) = delete;

  static const AssertContext* current();
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  const AssertContext* previous_;
};

[[noreturn]] void assert_fail(const char* file, int line, const char* expr,
                              std::string_view detail);

}  // namespace brook::io

#define BROOK_ASSERT(cond)                                         \
  do {                                                             \
    if (!(cond)) [[unlikely]] {                                    \
      ::brook::io::assert_fail(__FILE__, __LINE__, #cond, "");     \
    }                                                              \
  } while (0)

#define BROOK_ASSERT_MSG(cond, ...)                                        \
  do {                                                                     \
    if (!(cond)) [[unlikely]] {                                            \
      ::brook::io::assert_fail(__FILE__, __LINE__, #cond,                  \
                               ::fmt::format(__VA_ARGS__));                \
    }                                                                      \
  } while (0)

#define BROOK_ASSERT_OP_(a, b, op)                                         \
  do {                                                                     \
    const auto& brook_a_ = (a);                                            \
    const auto& brook_b_ = (b);                                            \
    if (!(brook_a_ op brook_b_)) [[unlikely]] {                            \
      ::brook::io::assert_fail(                                            \
          __FILE__, __LINE__, #a " " #op " " #b,                           \
          ::fmt::format("{} vs {}", brook_a_, brook_b_));                  \
    }                                                                      \
  } while (0)

#define BROOK_ASSERT_EQ(a, b) BROOK_ASSERT_OP_(a, b, ==)
#define BROOK_ASSERT_NE(a, b) BROOK_ASSERT_OP_(a, b, !=)
#define BROOK_ASSERT_LT(a, b) BROOK_ASSERT_OP_(a, b, <)
#define BROOK_ASSERT_LE(a, b) BROOK_ASSERT_OP_(a, b, <=)
#define BROOK_ASSERT_GT(a, b) BROOK_ASSERT_OP_(a, b, >)
#define BROOK_ASSERT_GE(a, b) BROOK_ASSERT_OP_(a, b, >=)

// Marks code that must not be reached (an exhausted switch, say).
#define BROOK_UNREACHABLE() \
  ::brook::io::assert_fail(__FILE__, __LINE__, "unreachable", "")
