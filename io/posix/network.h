// io/posix/network.h
//
// Network: TCP over non-blocking sockets watched by the Loop's epoll
// (edge-triggered). Every operation first tries its system call and parks on
// the descriptor only on EAGAIN, so an edge can never be missed: data that
// arrived before the park was consumed by the attempt, and data arriving after
// it raises a new edge.
//
// Addresses: IPv4 and IPv6 literals, and "localhost" (127.0.0.1). Other host
// names are refused with InvalidArgument: resolving them would block the loop.
// Errors follow io/network.h: a refused, reset or unreachable peer is
// Unavailable; an operation on (or pending during) close() is Cancelled.
// listen() on an address in use is AlreadyExists.
//
// Lifetimes: a Connection's or Listener's state is shared with its pending
// operations, so destroying the object while an operation is pending only
// closes it (the operation completes Cancelled). A destroyed task unparks
// itself (no dangling waiter). The Loop must outlive everything here.
// Not thread-safe: used on the Loop's thread only.
#pragma once

#include <memory>

#include "io/network.h"
#include "io/posix/loop.h"

namespace brook::io::posix {

class Network final : public io::Network {
 public:
  explicit Network(Loop& loop) : loop_(&loop) {}
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  // Binds with SO_REUSEADDR and listens; port 0 picks a free port, which
  // Listener::address() reports.
  Task<absl::StatusOr<std::unique_ptr<io::Listener>>> listen(Address address) override;
  // Non-blocking connect; accepted and connected sockets use TCP_NODELAY.
  Task<absl::StatusOr<std::unique_ptr<io::Connection>>> connect(Address address) override;

 private:
  Loop* loop_;
};

}  // namespace brook::io::posix
