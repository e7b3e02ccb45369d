// io/real/real_node_test.cc
//
// RealNode assembles a working Context on the backend it is asked for (or the
// best one available), creates its data directory, and runs tasks to
// completion on that backend's loop.
#include "io/real/real_node.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "io/status.h"

namespace brook::io::real {
namespace {

using namespace std::chrono_literals;

class RealNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/brook-real-node-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

Task<void> sleep_then_write(Context* ctx, bool* done) {
  const Instant before = ctx->clock().now();
  co_await ctx->clock().sleep_for(2ms);
  EXPECT_GE(ctx->clock().now() - before, 2ms);
  auto file = co_await ctx->disk().open("marker", OpenMode::kCreateExclusive);
  EXPECT_TRUE(file.ok()) << file.status();
  if (file.ok()) {
    EXPECT_TRUE((co_await (*file)->append(BufferChain(Buffer::copy_of("x")))).ok());
    EXPECT_TRUE((co_await (*file)->datasync()).ok());
    EXPECT_TRUE((co_await (*file)->close()).ok());
  }
  *done = true;
}

void run_on(BackendKind asked, BackendKind expected, const std::string& dir,
            std::optional<size_t> inline_write_bytes_max = std::nullopt) {
  RealNodeOptions options;
  options.backend = asked;
  options.data_dir = dir;
  options.inline_write_bytes_max = inline_write_bytes_max;
  auto node = RealNode::create(options);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ((*node)->backend(), expected);
  bool done = false;
  (*node)->scope().spawn(sleep_then_write(&(*node)->context(), &done));
  (*node)->run_until([&] { return done; });
  EXPECT_TRUE(std::filesystem::exists(dir + "/marker"));
}

TEST_F(RealNodeTest, EpollWhenAskedFor) { run_on(BackendKind::kEpoll, BackendKind::kEpoll, root_ + "/a/b"); }

TEST_F(RealNodeTest, AutoPrefersIoUringWhenTheKernelAllowsIt) {
  // Probe the kernel the same way the chooser does, so the expectation holds
  // both where io_uring is allowed and where a seccomp profile refuses it.
  RealNodeOptions probe;
  probe.backend = BackendKind::kUring;
  probe.data_dir = root_ + "/probe";
  const bool uring_ok = RealNode::create(probe).ok();
  run_on(BackendKind::kAuto, uring_ok ? BackendKind::kUring : BackendKind::kEpoll,
         root_ + "/auto");
}

// The inline write limit reaches the io_uring disk (0: every write through
// the ring); the epoll backend, whose writes are all plain calls, ignores it.
TEST_F(RealNodeTest, InlineWriteLimitIsOptional) {
  RealNodeOptions probe;
  probe.backend = BackendKind::kUring;
  probe.data_dir = root_ + "/probe";
  if (RealNode::create(probe).ok()) {
    run_on(BackendKind::kUring, BackendKind::kUring, root_ + "/ring", 0);
  }
  run_on(BackendKind::kEpoll, BackendKind::kEpoll, root_ + "/plain", 0);
}

TEST(RealNode, ParsesBackendNames) {
  EXPECT_EQ(*parse_backend_kind("uring"), BackendKind::kUring);
  EXPECT_EQ(*parse_backend_kind("epoll"), BackendKind::kEpoll);
  EXPECT_EQ(*parse_backend_kind("auto"), BackendKind::kAuto);
  EXPECT_EQ(parse_backend_kind("kqueue").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace brook::io::real
