// io/uring/network.cc
#include "io/uring/network.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "io/status.h"
#include "io/errno_status.h"

namespace brook::io::uring {
namespace {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t bytes = 0;
};

// IP literals only: "localhost" is 127.0.0.1 and "" the IPv4 any-address.
absl::StatusOr<SocketAddress> resolve(const Address& address) {
  std::string host = address.host;
  if (host == "localhost") host = "127.0.0.1";
  if (host.empty()) host = "0.0.0.0";
  SocketAddress out;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(address.port);
    out.bytes = sizeof(sockaddr_in);
    return out;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
  if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(address.port);
    out.bytes = sizeof(sockaddr_in6);
    return out;
  }
  return absl::InvalidArgumentError(
      fmt::format("cannot resolve '{}': only IP literals and localhost", address.host));
}

Address to_address(const sockaddr_storage& storage) {
  char text[INET6_ADDRSTRLEN] = {};
  if (storage.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    return Address{text, ntohs(v6->sin6_port)};
  }
  const auto* v4 = reinterpret_cast<const sockaddr_in*>(&storage);
  ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
  return Address{text, ntohs(v4->sin_port)};
}

absl::StatusOr<Address> local_address_of(int fd) {
  sockaddr_storage storage{};
  socklen_t bytes = sizeof(storage);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &bytes) != 0) {
    return network_error(errno, "getsockname");
  }
  return to_address(storage);
}

absl::StatusOr<Address> peer_address_of(int fd) {
  sockaddr_storage storage{};
  socklen_t bytes = sizeof(storage);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&storage), &bytes) != 0) {
    return network_error(errno, "getpeername");
  }
  return to_address(storage);
}

absl::Status set_int_option(int fd, int level, int name, int value, std::string_view what) {
  if (::setsockopt(fd, level, name, &value, sizeof(value)) != 0) return network_error(errno, what);
  return absl::OkStatus();
}

absl::Status closed_error() { return absl::CancelledError("connection closed"); }

// The state of one socket, shared by its Connection or Listener and the
// calls running on it, so a call suspended when its owner is destroyed
// touches no freed memory.
struct SocketState {
  Loop* loop;
  SharedFd fd;
  Address local;
  Address peer;
  bool closed = false;
  IntrusiveList<Operation> pending;  // operations in flight, for close()
  Buffer spare;                      // receive buffer kept for reuse
};

void close_socket(SocketState& s) {
  if (s.closed) return;
  s.closed = true;
  s.pending.for_each([](Operation* op) { op->cancel(); });
  s.fd.reset();
  s.spare = Buffer();
}

// The buffer for the next receive: the connection's own when nobody else
// holds a view of it any more, else a fresh one.
Buffer take_receive_buffer(SocketState& s) {
  Buffer out = std::move(s.spare);
  if (out.empty() || out.use_count() != 1) out = Buffer::allocate(kRecvBytesMax);
  return out;
}

// Turns the `n` bytes received into `buffer` into read_some's result. Small
// reads are copied out; large ones are handed over as a view of the buffer
// without a copy. Either way the connection keeps the buffer, to receive
// into again once the reader has dropped its view (see take_receive_buffer).
Buffer take_received(SocketState& s, Buffer buffer, size_t n) {
  Buffer out;
  if (n > kRecvCopyBytesMax) {
    out = buffer.slice(0, n);
  } else if (n > 0) {
    out = Buffer::copy_of(buffer.span().first(n));
  }
  if (s.spare.empty() && !s.closed) s.spare = std::move(buffer);
  return out;
}

Task<absl::StatusOr<Buffer>> read_some_impl(std::shared_ptr<SocketState> s, size_t bytes_max) {
  if (s->closed) co_return closed_error();
  if (bytes_max == 0) co_return absl::InvalidArgumentError("read_some of 0 bytes");
  const size_t want = std::min(bytes_max, kRecvBytesMax);
  Operation op(*s->loop);
  s->pending.push_back(&op);
  Op& o = op.op();
  o.fd = s->fd;
  o.buffer = take_receive_buffer(*s);
  int32_t res;
  do {
    io_uring_sqe* sqe = op.prepare();
    io_uring_prep_recv(sqe, o.fd.get(), o.buffer.mutable_data(), want, 0);
    res = co_await op;
  } while (!s->closed && (res == -EINTR || res == -EAGAIN));
  if (s->closed) co_return closed_error();
  if (res < 0) co_return network_error(-res, "recv");
  co_return take_received(*s, std::move(o.buffer), static_cast<size_t>(res));
}

// Prepares one send of the front of op.chain: send for one part, sendmsg
// with up to kIovecsPerCallMax vectors otherwise.
void prepare_send(Operation& op) {
  Op& o = op.op();
  const auto parts = o.chain.parts();
  if (parts.size() == 1) {
    io_uring_sqe* sqe = op.prepare();
    io_uring_prep_send(sqe, o.fd.get(), parts[0].data(), parts[0].size(), MSG_NOSIGNAL);
    return;
  }
  fill_iovecs(o.chain, o.iovecs);
  o.message = msghdr{};
  o.message.msg_iov = o.iovecs.data();
  o.message.msg_iovlen = o.iovecs.size();
  io_uring_sqe* sqe = op.prepare();
  io_uring_prep_sendmsg(sqe, o.fd.get(), &o.message, MSG_NOSIGNAL);
}

Task<absl::Status> write_all_impl(std::shared_ptr<SocketState> s, BufferChain data) {
  if (s->closed) co_return closed_error();
  if (data.empty()) co_return absl::OkStatus();
  Operation op(*s->loop);
  s->pending.push_back(&op);
  Op& o = op.op();
  o.fd = s->fd;
  o.chain = std::move(data);
  while (!o.chain.empty()) {
    prepare_send(op);
    const int32_t res = co_await op;
    if (s->closed) co_return closed_error();
    if (res == -EINTR || res == -EAGAIN) continue;
    if (res < 0) co_return network_error(-res, "send");
    o.chain.consume(static_cast<size_t>(res));
  }
  co_return absl::OkStatus();
}

class TcpConnection final : public Connection {
 public:
  explicit TcpConnection(std::shared_ptr<SocketState> state) : state_(std::move(state)) {}
  ~TcpConnection() override { close_socket(*state_); }

  Task<absl::StatusOr<Buffer>> read_some(size_t bytes_max) override {
    return read_some_impl(state_, bytes_max);
  }
  Task<absl::Status> write_all(BufferChain data) override {
    return write_all_impl(state_, std::move(data));
  }
  void close() override { close_socket(*state_); }
  Address local_address() const override { return state_->local; }
  Address peer_address() const override { return state_->peer; }

 private:
  std::shared_ptr<SocketState> state_;
};

// A connected socket as a Connection: TCP_NODELAY on, addresses recorded.
absl::StatusOr<std::unique_ptr<Connection>> make_connection(Loop* loop, SharedFd fd) {
  RETURN_IF_ERROR(set_int_option(fd.get(), IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY"));
  ASSIGN_OR_RETURN(Address local, local_address_of(fd.get()));
  ASSIGN_OR_RETURN(Address peer, peer_address_of(fd.get()));
  auto state = std::make_shared<SocketState>();
  state->loop = loop;
  state->fd = std::move(fd);
  state->local = std::move(local);
  state->peer = std::move(peer);
  return std::unique_ptr<Connection>(std::make_unique<TcpConnection>(std::move(state)));
}

// Errors after which a listener keeps accepting: the failed connection was
// the peer's problem, or the call was interrupted.
bool accept_error_is_transient(int err) {
  return err == EINTR || err == EAGAIN || err == ECONNABORTED || err == EPROTO ||
         err == EPERM || err == ENETDOWN || err == EHOSTUNREACH || err == ENETUNREACH;
}

Task<absl::StatusOr<std::unique_ptr<Connection>>> accept_impl(std::shared_ptr<SocketState> l) {
  for (;;) {
    if (l->closed) co_return absl::CancelledError("listener closed");
    Operation op(*l->loop);
    l->pending.push_back(&op);
    Op& o = op.op();
    o.fd = l->fd;
    o.result_is_fd = true;
    o.address_bytes = sizeof(o.address);
    io_uring_sqe* sqe = op.prepare();
    io_uring_prep_accept(sqe, o.fd.get(), reinterpret_cast<sockaddr*>(&o.address),
                         &o.address_bytes, SOCK_CLOEXEC);
    const int32_t res = co_await op;
    // A descriptor not taken here is closed when `op` is released.
    if (l->closed) co_return absl::CancelledError("listener closed");
    if (res < 0 && accept_error_is_transient(-res)) continue;
    if (res < 0) co_return network_error(-res, "accept");
    auto connection = make_connection(l->loop, SharedFd::adopt(op.take_fd()));
    // The peer may already have reset; that is its problem, not the listener's.
    if (!connection.ok() && absl::IsUnavailable(connection.status())) continue;
    co_return connection;
  }
}

class TcpListener final : public Listener {
 public:
  explicit TcpListener(std::shared_ptr<SocketState> state) : state_(std::move(state)) {}
  ~TcpListener() override { close_socket(*state_); }

  Task<absl::StatusOr<std::unique_ptr<Connection>>> accept() override {
    return accept_impl(state_);
  }
  Address address() const override { return state_->local; }
  void close() override { close_socket(*state_); }

 private:
  std::shared_ptr<SocketState> state_;
};

absl::StatusOr<std::unique_ptr<Listener>> listen_now(Loop* loop, const Address& address) {
  ASSIGN_OR_RETURN(const SocketAddress sa, resolve(address));
  const int raw = ::socket(sa.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (raw < 0) return network_error(errno, "socket");
  SharedFd fd = SharedFd::adopt(raw);
  RETURN_IF_ERROR(set_int_option(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR"));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&sa.storage), sa.bytes) != 0) {
    return network_error(errno, fmt::format("bind {}", address.to_string()));
  }
  if (::listen(fd.get(), kListenBacklog) != 0) {
    return network_error(errno, fmt::format("listen {}", address.to_string()));
  }
  ASSIGN_OR_RETURN(Address local, local_address_of(fd.get()));
  auto state = std::make_shared<SocketState>();
  state->loop = loop;
  state->fd = std::move(fd);
  state->local = std::move(local);
  return std::unique_ptr<Listener>(std::make_unique<TcpListener>(std::move(state)));
}

Task<absl::StatusOr<std::unique_ptr<Connection>>> connect_impl(Loop* loop, Address address) {
  CO_ASSIGN_OR_RETURN(const SocketAddress sa, resolve(address));
  const int raw = ::socket(sa.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (raw < 0) co_return network_error(errno, "socket");
  Operation op(*loop);
  Op& o = op.op();
  o.fd = SharedFd::adopt(raw);
  o.address = sa.storage;
  o.address_bytes = sa.bytes;
  io_uring_sqe* sqe = op.prepare();
  io_uring_prep_connect(sqe, o.fd.get(), reinterpret_cast<const sockaddr*>(&o.address),
                        o.address_bytes);
  const int32_t res = co_await op;
  if (res < 0) co_return network_error(-res, fmt::format("connect {}", address.to_string()));
  co_return make_connection(loop, o.fd);
}

}  // namespace

Task<absl::StatusOr<std::unique_ptr<Listener>>> Network::listen(Address address) {
  co_return listen_now(loop_, address);
}

Task<absl::StatusOr<std::unique_ptr<Connection>>> Network::connect(Address address) {
  return connect_impl(loop_, std::move(address));
}

}  // namespace brook::io::uring
