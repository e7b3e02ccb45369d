// io/assert.cc
//
// The assertion handler: prints the failed expression, both operands when
// known, and the failure context (seed and replay command under simulation),
// then aborts.
#include "io/assert.h"

#include <cstdio>
#include <cstdlib>

namespace brook::io {
namespace {
thread_local const AssertContext* g_assert_context = nullptr;
}  // namespace

AssertContext::AssertContext(std::string text)
    : text_(std::move(text)), previous_(g_assert_context) {
  g_assert_context = this;
}

AssertContext::~AssertContext() { g_assert_context = previous_; }

const AssertContext* AssertContext::current() { return g_assert_context; }

void assert_fail(const char* file, int line, const char* expr,
                 std::string_view detail) {
  std::fprintf(stderr, "assertion failed at %s:%d: %s\n", file, line, expr);
  if (!detail.empty()) {
    std::fprintf(stderr, "  values: %.*s\n", static_cast<int>(detail.size()),
                 detail.data());
  }
  if (const AssertContext* ctx = AssertContext::current()) {
    std::fprintf(stderr, "%s\n", ctx->text().c_str());
  }
  std::fflush(stderr);
  std::abort();
}

}  // namespace brook::io
