// tests/backends/posix_backend.cc
//
// Conformance harness factory for the posix (epoll) backend: two nodes as
// two io::Contexts on ONE posix::Loop, sharing one posix::Network (both reach
// each other over loopback), each with its own posix::Disk rooted in a fresh
// temporary directory that the backend removes when destroyed.
#include <stdlib.h>
#include <sys/random.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "io/posix/disk.h"
#include "io/posix/loop.h"
#include "io/posix/network.h"
#include "io/scope.h"
#include "tests/io_conformance.h"

namespace brook::testing {
namespace {

// A real backend gives up on a task after this much monotonic time.
constexpr io::Duration kRunLimit = std::chrono::seconds(60);

uint64_t os_seed() {
  uint64_t seed = 0;
  const ssize_t n = ::getrandom(&seed, sizeof(seed), 0);
  BROOK_ASSERT_EQ(n, static_cast<ssize_t>(sizeof(seed)));
  return seed;
}

// A fresh directory under the system's temporary directory, or "" on error.
std::string make_temp_dir() {
  std::error_code ec;
  const std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) return "";
  std::string pattern = (base / "brook-conformance-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) return "";
  return pattern;
}

struct Node {
  Node(int index, io::posix::Loop& loop, io::posix::Network& network, std::string dir)
      : root(std::move(dir)),
        disk(loop, root),
        random(os_seed()),
        log(index, loop, io::stderr_log_sink()),
        context(io::NodeId{index}, loop, loop, disk, network, random, log) {}
  ~Node() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);  // best effort: a test dir
  }

  std::string root;
  io::posix::Disk disk;
  io::Random random;
  io::Logger log;
  io::Context context;
};

class PosixBackend final : public Backend {
 public:
  explicit PosixBackend(std::unique_ptr<io::posix::Loop> loop)
      : loop_(std::move(loop)), network_(*loop_) {}

  // False when a temporary directory cannot be made.
  bool init() {
    for (int i = 0; i < 2; ++i) {
      std::string dir = make_temp_dir();
      if (dir.empty()) return false;
      nodes_[i] = std::make_unique<Node>(i, *loop_, network_, std::move(dir));
    }
    return true;
  }

  std::string name() const override { return "epoll"; }

  io::Context& node(int index) override {
    BROOK_ASSERT(index == 0 || index == 1);
    return nodes_[index]->context;
  }

  io::Address any_address(int index) override {
    BROOK_ASSERT(index == 0 || index == 1);
    return io::Address{"127.0.0.1", 0};
  }

  bool run(io::Task<void> task) override {
    io::TaskScope scope(*loop_);
    scope.spawn(std::move(task));
    // On expiry the scope's destruction cancels the task tree.
    return loop_->run_until([&] { return scope.empty(); }, loop_->now() + kRunLimit);
  }

 private:
  std::unique_ptr<io::posix::Loop> loop_;
  io::posix::Network network_;
  std::array<std::unique_ptr<Node>, 2> nodes_;
};

}  // namespace

std::unique_ptr<Backend> make_posix_backend() {
  absl::StatusOr<std::unique_ptr<io::posix::Loop>> loop = io::posix::Loop::create();
  if (!loop.ok()) return nullptr;
  auto backend = std::make_unique<PosixBackend>(std::move(*loop));
  if (!backend->init()) return nullptr;
  return backend;
}

}  // namespace brook::testing
