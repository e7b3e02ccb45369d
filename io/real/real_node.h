// io/real/real_node.h
//
// RealNode: one node's Context on real I/O. It picks the backend — io_uring
// when the kernel allows it, epoll and blocking file calls when io_uring_setup
// is refused (Docker's default seccomp profile refuses it) — or the one a flag
// names, and owns the loop, disk, network, random source and logger that the
// Context hands to logic code.
//
// Owned by the process's main function; used only on the thread that runs it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "io/context.h"
#include "io/scope.h"

namespace brook::io::real {

enum class BackendKind { kAuto, kUring, kEpoll };

absl::StatusOr<BackendKind> parse_backend_kind(std::string_view text);
std::string_view backend_kind_name(BackendKind kind);

struct RealNodeOptions {
  BackendKind backend = BackendKind::kAuto;
  std::string data_dir;  // the Disk's root; created when missing
  NodeId node_id{0};
  LogLevel log_level_min = LogLevel::kInfo;
  // io_uring only: file writes of at most this many bytes are made inline
  // (io::uring::DiskOptions); 0 sends every write through the ring. Unset:
  // the backend's default.
  std::optional<size_t> inline_write_bytes_max;
};

class RealNode {
 public:
  static absl::StatusOr<std::unique_ptr<RealNode>> create(const RealNodeOptions& options);
  virtual ~RealNode() = default;

  // The backend actually in use (never kAuto).
  virtual BackendKind backend() const = 0;
  virtual Context& context() = 0;
  // Tasks spawned here live until the node is destroyed.
  virtual TaskScope& scope() = 0;
  // Runs the event loop until done() returns true.
  virtual void run_until(std::function<bool()> done) = 0;
};

}  // namespace brook::io::real
