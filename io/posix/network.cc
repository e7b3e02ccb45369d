// io/posix/network.cc
#include "io/posix/network.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "io/errno_status.h"
#include "io/status.h"

namespace brook::io::posix {
namespace {

// Pending connections the kernel queues per listener (capped by somaxconn).
constexpr int kListenBacklog = 1024;
// Buffers handed to one sendmsg (IOV_MAX is 1024 on Linux).
constexpr size_t kIovecsPerCallMax = 64;
static_assert(kIovecsPerCallMax <= 1024);

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

absl::StatusOr<SockAddr> to_sockaddr(const Address& address) {
  const std::string host = address.host == "localhost" ? "127.0.0.1" : address.host;
  SockAddr out;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(address.port);
    out.length = sizeof(sockaddr_in);
    return out;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
  if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(address.port);
    out.length = sizeof(sockaddr_in6);
    return out;
  }
  return absl::InvalidArgumentError(
      fmt::format("not an IP literal or localhost (names are not resolved): {}", address.host));
}

Address from_sockaddr(const sockaddr_storage& storage) {
  char text[INET6_ADDRSTRLEN] = {};
  if (storage.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    return Address{text, ntohs(v6->sin6_port)};
  }
  BROOK_ASSERT_EQ(storage.ss_family, AF_INET);
  const auto* v4 = reinterpret_cast<const sockaddr_in*>(&storage);
  ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
  return Address{text, ntohs(v4->sin_port)};
}

absl::Status closed_error(const char* op) {
  return absl::CancelledError(fmt::format("{} on a closed socket", op));
}

bool would_block(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

// One socket descriptor and the tasks parked on it, shared by its owner
// (Connection or Listener) and its pending operations, so that destroying the
// owner cannot free what a suspended operation still uses.
class Socket {
 public:
  Socket(Loop* loop, int fd) : loop_(loop), fd_(fd) { BROOK_ASSERT_GE(fd, 0); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  absl::Status watch() {
    BROOK_ASSERT(!watched_);
    absl::Status status = loop_->watch(fd_, &waiters_);
    watched_ = status.ok();
    return status;
  }

  // Idempotent. Parked operations wake and fail with Cancelled.
  void close() {
    if (fd_ < 0) return;
    if (watched_) loop_->unwatch(fd_);
    watched_ = false;
    ::close(fd_);  // the descriptor is released even when close reports an error
    fd_ = -1;
    waiters_.notify_all();
  }

  bool closed() const { return fd_ < 0; }
  int fd() const {
    BROOK_ASSERT_GE(fd_, 0);
    return fd_;
  }
  Loop* loop() const { return loop_; }
  FdWaiters& waiters() { return waiters_; }
  Mutex& write_lock() { return write_lock_; }

 private:
  Loop* loop_;
  int fd_;
  bool watched_ = false;
  FdWaiters waiters_;
  Mutex write_lock_;  // keeps concurrent write_all calls from interleaving
};

absl::Status set_int_option(int fd, int level, int name, int value, const char* what) {
  if (::setsockopt(fd, level, name, &value, sizeof(value)) != 0) {
    return network_error(errno, what);
  }
  return absl::OkStatus();
}

absl::StatusOr<Address> local_address_of(int fd) {
  sockaddr_storage storage{};
  socklen_t length = sizeof(storage);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) {
    return network_error(errno, "getsockname");
  }
  return from_sockaddr(storage);
}

Task<absl::StatusOr<Buffer>> read_some_on(std::shared_ptr<Socket> socket, size_t bytes_max) {
  BROOK_ASSERT_GT(bytes_max, 0u);
  const size_t want = std::min(bytes_max, kReadScratchBytes);
  for (;;) {  // ends at data, end of stream, an error or close
    if (socket->closed()) co_return closed_error("read");
    const std::span<std::byte> scratch = socket->loop()->read_scratch();
    const ssize_t n = ::recv(socket->fd(), scratch.data(), want, 0);
    if (n > 0) co_return Buffer::copy_of(scratch.first(static_cast<size_t>(n)));
    if (n == 0) co_return Buffer();
    const int err = errno;
    if (err == EINTR) continue;
    if (!would_block(err)) co_return network_error(err, "read");
    co_await socket->waiters().readable();
  }
}

// One sendmsg over the first parts of `data`.
ssize_t send_parts(int fd, const BufferChain& data) {
  std::array<iovec, kIovecsPerCallMax> iov;
  size_t count = 0;
  for (const Buffer& part : data.parts()) {
    if (count == iov.size()) break;
    iov[count++] = iovec{const_cast<std::byte*>(part.data()), part.size()};
  }
  msghdr message{};
  message.msg_iov = iov.data();
  message.msg_iovlen = count;
  return ::sendmsg(fd, &message, MSG_NOSIGNAL);
}

Task<absl::Status> write_all_on(std::shared_ptr<Socket> socket, BufferChain data) {
  if (socket->closed()) co_return closed_error("write");
  SemaphoreUnits lock = co_await socket->write_lock().lock();
  while (!data.empty()) {
    if (socket->closed()) co_return closed_error("write");
    const ssize_t n = send_parts(socket->fd(), data);
    if (n >= 0) {
      data.consume(static_cast<size_t>(n));
      continue;
    }
    const int err = errno;
    if (err == EINTR) continue;
    if (!would_block(err)) co_return network_error(err, "write");
    co_await socket->waiters().writable();
  }
  co_return absl::OkStatus();
}

class PosixConnection final : public io::Connection {
 public:
  PosixConnection(std::shared_ptr<Socket> socket, Address local, Address peer)
      : socket_(std::move(socket)), local_(std::move(local)), peer_(std::move(peer)) {}
  ~PosixConnection() override { socket_->close(); }

  Task<absl::StatusOr<Buffer>> read_some(size_t bytes_max) override {
    return read_some_on(socket_, bytes_max);
  }
  Task<absl::Status> write_all(BufferChain data) override {
    return write_all_on(socket_, std::move(data));
  }
  void close() override { socket_->close(); }
  Address local_address() const override { return local_; }
  Address peer_address() const override { return peer_; }

 private:
  std::shared_ptr<Socket> socket_;
  Address local_;
  Address peer_;
};

// Wraps a connected descriptor: TCP_NODELAY, addresses, epoll watch.
absl::StatusOr<std::unique_ptr<io::Connection>> make_connection(std::shared_ptr<Socket> socket,
                                                                Address peer) {
  RETURN_IF_ERROR(set_int_option(socket->fd(), IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY"));
  ASSIGN_OR_RETURN(Address local, local_address_of(socket->fd()));
  return std::unique_ptr<io::Connection>(
      std::make_unique<PosixConnection>(std::move(socket), std::move(local), std::move(peer)));
}

// accept4 errors that concern only the connection being accepted (see
// accept(2)): the listener stays usable, so the accept is retried.
bool accept_retryable(int err) {
  switch (err) {
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
      return true;
    default:
      return false;
  }
}

Task<absl::StatusOr<std::unique_ptr<io::Connection>>> accept_on(std::shared_ptr<Socket> listener) {
  for (;;) {  // ends at a connection, an error or close
    if (listener->closed()) co_return closed_error("accept");
    sockaddr_storage peer{};
    socklen_t length = sizeof(peer);
    const int fd = ::accept4(listener->fd(), reinterpret_cast<sockaddr*>(&peer), &length,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      auto socket = std::make_shared<Socket>(listener->loop(), fd);
      CO_RETURN_IF_ERROR(socket->watch());
      co_return make_connection(std::move(socket), from_sockaddr(peer));
    }
    const int err = errno;
    if (accept_retryable(err)) continue;
    if (!would_block(err)) co_return network_error(err, "accept");
    co_await listener->waiters().readable();
  }
}

class PosixListener final : public io::Listener {
 public:
  PosixListener(std::shared_ptr<Socket> socket, Address address)
      : socket_(std::move(socket)), address_(std::move(address)) {}
  ~PosixListener() override { socket_->close(); }

  Task<absl::StatusOr<std::unique_ptr<io::Connection>>> accept() override {
    return accept_on(socket_);
  }
  Address address() const override { return address_; }
  void close() override { socket_->close(); }

 private:
  std::shared_ptr<Socket> socket_;
  Address address_;
};

absl::StatusOr<std::unique_ptr<io::Listener>> open_listener(Loop* loop, const Address& address) {
  ASSIGN_OR_RETURN(const SockAddr bind_to, to_sockaddr(address));
  const int fd = ::socket(bind_to.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return network_error(errno, "socket");
  auto socket = std::make_shared<Socket>(loop, fd);
  RETURN_IF_ERROR(set_int_option(fd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR"));
  const std::string where = address.to_string();
  if (::bind(fd, bind_to.get(), bind_to.length) != 0) {
    return network_error(errno, fmt::format("bind {}", where));
  }
  if (::listen(fd, kListenBacklog) != 0) return network_error(errno, fmt::format("listen {}", where));
  ASSIGN_OR_RETURN(Address bound, local_address_of(fd));
  RETURN_IF_ERROR(socket->watch());
  return std::unique_ptr<io::Listener>(
      std::make_unique<PosixListener>(std::move(socket), std::move(bound)));
}

Task<absl::StatusOr<std::unique_ptr<io::Listener>>> listen_on(Loop* loop, Address address) {
  co_return open_listener(loop, address);
}

// Waits for a non-blocking connect to finish. A wake-up without a result
// (the socket neither failed nor connected yet) parks again.
Task<absl::Status> wait_connected(std::shared_ptr<Socket> socket, std::string where) {
  for (;;) {  // ends when the connect succeeds or fails
    co_await socket->waiters().writable();
    if (socket->closed()) co_return closed_error("connect");
    int err = 0;
    socklen_t length = sizeof(err);
    if (::getsockopt(socket->fd(), SOL_SOCKET, SO_ERROR, &err, &length) != 0) err = errno;
    if (err != 0) co_return network_error(err, fmt::format("connect {}", where));
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof(peer);
    if (::getpeername(socket->fd(), reinterpret_cast<sockaddr*>(&peer), &peer_length) == 0) {
      co_return absl::OkStatus();
    }
    if (errno != ENOTCONN) co_return network_error(errno, fmt::format("connect {}", where));
  }
}

Task<absl::StatusOr<std::unique_ptr<io::Connection>>> connect_to(Loop* loop, Address address) {
  CO_ASSIGN_OR_RETURN(const SockAddr target, to_sockaddr(address));
  const int fd = ::socket(target.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) co_return network_error(errno, "socket");
  // Owned from here on: if this task is destroyed while connecting, the
  // socket is unwatched and closed with it.
  auto socket = std::make_shared<Socket>(loop, fd);
  const int rc = ::connect(fd, target.get(), target.length);
  // After EINTR a non-blocking connect carries on in the background.
  const int err = rc == 0 ? 0 : errno;
  if (err != 0 && err != EINPROGRESS && err != EINTR) {
    co_return network_error(err, fmt::format("connect {}", address.to_string()));
  }
  CO_RETURN_IF_ERROR(socket->watch());
  if (err != 0) CO_RETURN_IF_ERROR(co_await wait_connected(socket, address.to_string()));
  co_return make_connection(std::move(socket), from_sockaddr(target.storage));
}

}  // namespace

Task<absl::StatusOr<std::unique_ptr<io::Listener>>> Network::listen(Address address) {
  return listen_on(loop_, std::move(address));
}

Task<absl::StatusOr<std::unique_ptr<io::Connection>>> Network::connect(Address address) {
  return connect_to(loop_, std::move(address));
}

}  // namespace brook::io::posix
