// io/real/real_node.cc
#include "io/real/real_node.h"

#include <sys/random.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <type_traits>

#include <unistd.h>

#include <fmt/format.h>

#include "io/status.h"
#include "io/posix/disk.h"
#include "io/posix/loop.h"
#include "io/posix/network.h"
#include "io/uring/disk.h"
#include "io/uring/loop.h"
#include "io/uring/network.h"

namespace brook::io::real {
namespace {

uint64_t os_random_seed() {
  uint64_t seed = 0;
  if (::getrandom(&seed, sizeof(seed), 0) != static_cast<ssize_t>(sizeof(seed))) {
    seed = static_cast<uint64_t>(::time(nullptr)) ^ static_cast<uint64_t>(::getpid());
  }
  return seed;
}

absl::Status make_dirs(const std::string& path) {
  std::string partial;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      partial = path.substr(0, i);
      if (partial.empty()) continue;
      if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        return absl::InternalError(
            fmt::format("cannot create directory {}: {}", partial, std::strerror(errno)));
      }
    }
  }
  return absl::OkStatus();
}

template <typename DiskT, typename LoopT>
std::unique_ptr<DiskT> make_disk(LoopT& loop, const RealNodeOptions& options) {
  if constexpr (std::is_same_v<DiskT, uring::Disk>) {
    uring::DiskOptions disk_options;
    if (options.inline_write_bytes_max.has_value()) {
      disk_options.inline_write_bytes_max = *options.inline_write_bytes_max;
    }
    return std::make_unique<DiskT>(loop, options.data_dir, disk_options);
  } else {
    return std::make_unique<DiskT>(loop, options.data_dir);
  }
}

// The same assembly for either backend: a loop, a disk, a network, and the
// Context over them.
template <typename LoopT, typename DiskT, typename NetworkT>
class NodeOn final : public RealNode {
 public:
  NodeOn(BackendKind kind, std::unique_ptr<LoopT> loop, const RealNodeOptions& options)
      : kind_(kind),
        loop_(std::move(loop)),
        disk_(make_disk<DiskT>(*loop_, options)),
        network_(*loop_),
        random_(os_random_seed()),
        logger_(options.node_id.value, *loop_, stderr_log_sink(), options.log_level_min),
        context_(options.node_id, *loop_, *loop_, *disk_, network_, random_, logger_),
        scope_(*loop_) {}

  BackendKind backend() const override { return kind_; }
  Context& context() override { return context_; }
  TaskScope& scope() override { return scope_; }
  void run_until(std::function<bool()> done) override { loop_->run_until(std::move(done)); }

 private:
  BackendKind kind_;
  std::unique_ptr<LoopT> loop_;
  std::unique_ptr<DiskT> disk_;
  NetworkT network_;
  Random random_;
  Logger logger_;
  Context context_;
  TaskScope scope_;  // last: destroyed first, before what its tasks use
};

}  // namespace

absl::StatusOr<BackendKind> parse_backend_kind(std::string_view text) {
  if (text == "auto") return BackendKind::kAuto;
  if (text == "uring" || text == "io_uring") return BackendKind::kUring;
  if (text == "epoll" || text == "posix") return BackendKind::kEpoll;
  return absl::InvalidArgumentError(
      fmt::format("unknown io backend '{}' (expected auto, uring or epoll)", text));
}

std::string_view backend_kind_name(BackendKind kind) {
  switch (kind) {
    case BackendKind::kAuto:
      return "auto";
    case BackendKind::kUring:
      return "uring";
    case BackendKind::kEpoll:
      return "epoll";
  }
  BROOK_UNREACHABLE();
}

absl::StatusOr<std::unique_ptr<RealNode>> RealNode::create(const RealNodeOptions& options) {
  RETURN_IF_ERROR(make_dirs(options.data_dir));
  if (options.backend != BackendKind::kEpoll) {
    auto loop = uring::Loop::create();
    if (loop.ok()) {
      return std::unique_ptr<RealNode>(
          new NodeOn<uring::Loop, uring::Disk, uring::Network>(BackendKind::kUring,
                                                              std::move(*loop), options));
    }
    if (options.backend == BackendKind::kUring) return loop.status();
  }
  ASSIGN_OR_RETURN(auto loop, posix::Loop::create());
  return std::unique_ptr<RealNode>(new NodeOn<posix::Loop, posix::Disk, posix::Network>(
      BackendKind::kEpoll, std::move(loop), options));
}

}  // namespace brook::io::real
