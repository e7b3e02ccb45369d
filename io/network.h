// io/network.h
//
// Network, Listener and Connection: all networking of logic code. A
// Connection is a byte stream with TCP semantics: ordered, no duplicates, and
// it can stall, be reset, or time out. Implemented by io/uring, io/posix and
// the simulator (which adds latency, stalls, resets, refused connects and
// partitions).
//
// Conventions:
// - read_some() yields at least one byte, or an empty Buffer at end of stream
//   (the peer closed its side cleanly).
// - A reset, refused or unreachable peer is Unavailable; a closed local
//   endpoint is Cancelled; a timeout is DeadlineExceeded.
// - close() is idempotent and makes pending and later calls fail.
// - shutdown() ends the stream in order, for protocols that say so on the
//   wire (TLS sends close_notify); close() follows it. A plain stream has
//   nothing to send.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/task.h"

namespace brook::io {

struct Address {
  // Not an aggregate on purpose: g++ 12 destroys a braced aggregate temporary
  // built inside a co_await's arguments twice; a constructor avoids that.
  Address() = default;
  Address(std::string host_in, uint16_t port_in) : host(std::move(host_in)), port(port_in) {}

  std::string host;  // an IPv4 or IPv6 literal, or a host name
  uint16_t port = 0;

  std::string to_string() const;
  // Parses "host:port" or "[v6]:port".
  static absl::StatusOr<Address> parse(std::string_view text);
  friend auto operator<=>(const Address&, const Address&) = default;
};

class Connection {
 public:
  virtual ~Connection() = default;
  virtual Task<absl::StatusOr<Buffer>> read_some(size_t bytes_max) = 0;
  virtual Task<absl::Status> write_all(BufferChain data) = 0;
  virtual void close() = 0;
  virtual Task<absl::Status> shutdown() { co_return absl::OkStatus(); }
  virtual Address local_address() const = 0;
  virtual Address peer_address() const = 0;
};

class Listener {
 public:
  virtual ~Listener() = default;
  virtual Task<absl::StatusOr<std::unique_ptr<Connection>>> accept() = 0;
  // The bound address (with the real port when port 0 was asked for).
  virtual Address address() const = 0;
  virtual void close() = 0;
};

class Network {
 public:
  virtual ~Network() = default;
  virtual Task<absl::StatusOr<std::unique_ptr<Listener>>> listen(Address address) = 0;
  virtual Task<absl::StatusOr<std::unique_ptr<Connection>>> connect(Address address) = 0;
};

}  // namespace brook::io
