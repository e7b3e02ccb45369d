// io/uring/network.h
//
// TCP Network on io_uring. accept, connect, recv and sendmsg are ring
// operations; socket creation, bind, listen and socket options are plain
// system calls. Connections set TCP_NODELAY (Kafka's request/response traffic
// is latency-bound; batching happens above, in vectored writes).
//
// Contract: io/network.h. read_some yields at most kRecvBytesMax bytes per
// call, received into a per-connection buffer: small reads are copied out,
// large ones are returned as a view of that buffer without a copy, and the
// buffer is received into again once no reader holds a view of it (else a
// fresh one is allocated). write_all sends
// the chain's parts with sendmsg (MSG_NOSIGNAL), looping on partial sends.
// close() cancels the operations in flight, which then fail with Cancelled;
// the descriptor closes once the kernel is done with it.
//
// Hosts are IPv4 or IPv6 literals, "localhost" (127.0.0.1) or "" (any
// address); no name resolution happens here.
// Owned by the node; uses its Loop, which must outlive it and its sockets.
#pragma once

#include <memory>

#include "io/network.h"
#include "io/uring/loop.h"

namespace brook::io::uring {

// Bytes one read_some returns at most.
inline constexpr size_t kRecvBytesMax = size_t{64} << 10;
// Reads up to this size are copied out so the receive buffer can be reused.
inline constexpr size_t kRecvCopyBytesMax = size_t{8} << 10;
// Pending connections the kernel queues per listener.
inline constexpr int kListenBacklog = 1024;

class Network final : public io::Network {
 public:
  explicit Network(Loop& loop) : loop_(&loop) {}
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  Task<absl::StatusOr<std::unique_ptr<Listener>>> listen(Address address) override;
  Task<absl::StatusOr<std::unique_ptr<Connection>>> connect(Address address) override;

 private:
  Loop* loop_;
};

}  // namespace brook::io::uring
