// tests/backends/uring_backend.cc
//
// Conformance harness factory for the io_uring backend: two nodes on ONE
// uring::Loop (so a test drives both from one thread), each with its own
// Disk rooted at a fresh directory under /tmp that is removed afterwards,
// one shared Network on loopback, a Random seeded by the kernel, and a
// Logger writing to stderr. nullptr when the kernel refuses io_uring.
#include <stdlib.h>
#include <sys/random.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "io/log.h"
#include "io/random.h"
#include "io/scope.h"
#include "io/uring/disk.h"
#include "io/uring/loop.h"
#include "io/uring/network.h"
#include "tests/io_conformance.h"

namespace brook::testing {
namespace {

// A real backend that has not finished a test task by then is broken.
constexpr io::Duration kRunLimit = std::chrono::seconds(60);

uint64_t kernel_seed() {
  uint64_t seed = 0;
  if (::getrandom(&seed, sizeof(seed), 0) != static_cast<ssize_t>(sizeof(seed))) {
    seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  return seed;
}

std::string make_temp_dir(int index) {
  std::string pattern = "/tmp/brook-uring-node" + std::to_string(index) + "-XXXXXX";
  const char* made = ::mkdtemp(pattern.data());
  BROOK_ASSERT_MSG(made != nullptr, "mkdtemp failed for {}", pattern);
  return pattern;
}

io::Task<void> mark_done(io::Task<void> task, bool* done) {
  co_await std::move(task);
  *done = true;
}

class UringBackend final : public Backend {
 public:
  explicit UringBackend(std::unique_ptr<io::uring::Loop> loop)
      : loop_(std::move(loop)), network_(*loop_) {
    for (int i = 0; i < 2; ++i) nodes_[i] = std::make_unique<Node>(*loop_, network_, i);
  }
  ~UringBackend() override {
    for (auto& node : nodes_) {
      const std::string dir = node->dir;
      node.reset();
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  }

  std::string name() const override { return "uring"; }

  io::Context& node(int index) override {
    BROOK_ASSERT(index == 0 || index == 1);
    return nodes_[index]->context;
  }

  io::Address any_address(int) override { return io::Address{"127.0.0.1", 0}; }

  bool run(io::Task<void> task) override {
    bool done = false;
    {
      io::TaskScope scope(*loop_);
      scope.spawn(mark_done(std::move(task), &done));
      loop_->run_until([&] { return done; }, loop_->now() + kRunLimit);
    }
    return done;
  }

 private:
  struct Node {
    Node(io::uring::Loop& loop, io::uring::Network& network, int index)
        : dir(make_temp_dir(index)),
          disk(loop, dir),
          random(kernel_seed()),
          log(index, loop, io::stderr_log_sink()),
          context(io::NodeId{index}, loop, loop, disk, network, random, log) {}
    std::string dir;
    io::uring::Disk disk;
    io::Random random;
    io::Logger log;
    io::Context context;
  };

  std::unique_ptr<io::uring::Loop> loop_;
  io::uring::Network network_;
  std::array<std::unique_ptr<Node>, 2> nodes_;
};

}  // namespace

std::unique_ptr<Backend> make_uring_backend() {
  if (!io::uring::Loop::supported()) return nullptr;
  auto loop = io::uring::Loop::create();
  if (!loop.ok()) return nullptr;
  return std::make_unique<UringBackend>(std::move(*loop));
}

}  // namespace brook::testing
