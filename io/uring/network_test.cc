// io/uring/network_test.cc
//
// Tests of the io_uring Network over loopback TCP: echo in both directions,
// end of stream, large vectored writes, close() cancelling a pending read,
// a read cancelled by destroying its task, and refused connections.
#include "io/uring/network.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "io/scope.h"
#include "io/status.h"
#include "io/sync.h"
#include "io/uring/test_support.h"
#include "io/when.h"

namespace brook::io::uring {
namespace {

using namespace std::chrono_literals;

using NetworkTest = LoopTest;

// Builds an Address. g++ 12 miscompiles a braced aggregate temporary inside
// a co_await expression (its std::string is freed twice), so coroutines here
// never write `co_await f(Address{...})`.
Address address_of(std::string host, uint16_t port) { return Address{std::move(host), port}; }

// Reads until `bytes` have arrived or the stream ends.
Task<absl::StatusOr<std::string>> read_exactly(Connection* c, size_t bytes) {
  std::string out;
  while (out.size() < bytes) {
    CO_ASSIGN_OR_RETURN(Buffer b, co_await c->read_some(bytes - out.size()));
    if (b.empty()) break;
    out.append(b.view());
  }
  co_return out;
}

Task<absl::Status> echo_once(Listener* listener) {
  CO_ASSIGN_OR_RETURN(auto conn, co_await listener->accept());
  for (;;) {
    CO_ASSIGN_OR_RETURN(Buffer b, co_await conn->read_some(1 << 16));
    if (b.empty()) co_return absl::OkStatus();
    CO_RETURN_IF_ERROR(co_await conn->write_all(BufferChain(b)));
  }
}

Task<absl::StatusOr<std::string>> echo_client(Network* net, std::string host) {
  CO_ASSIGN_OR_RETURN(auto listener, co_await net->listen(address_of(host, 0)));
  if (listener->address().port == 0) co_return absl::InternalError("port 0");
  TaskScope server(co_await this_executor());
  absl::Status server_status = absl::UnknownError("not run");
  server.spawn([](Listener* l, absl::Status* out) -> Task<void> {
    *out = co_await echo_once(l);
  }(listener.get(), &server_status));
  CO_ASSIGN_OR_RETURN(auto conn, co_await net->connect(listener->address()));
  if (conn->peer_address() != listener->address()) co_return absl::InternalError("peer");
  BufferChain request;
  request.append(Buffer::copy_of("ping "));
  request.append(Buffer::copy_of("pong"));
  CO_RETURN_IF_ERROR(co_await conn->write_all(std::move(request)));
  CO_ASSIGN_OR_RETURN(std::string reply, co_await read_exactly(conn.get(), 9));
  conn->close();
  co_await server.join();
  CO_RETURN_IF_ERROR(server_status);
  co_return reply;
}

// Bytes written to a loopback connection come back from an echo server.
TEST_F(NetworkTest, EchoOverIpv4) {
  Network net(*loop_);
  auto r = run(echo_client(&net, "127.0.0.1"));
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok()) << r->status();
  EXPECT_EQ(**r, "ping pong");
}

// The same over IPv6 loopback, when the machine has it.
TEST_F(NetworkTest, EchoOverIpv6) {
  Network net(*loop_);
  auto r = run(echo_client(&net, "::1"));
  ASSERT_TRUE(r.has_value());
  if (!r->ok() && absl::IsUnavailable(r->status())) GTEST_SKIP() << r->status();
  ASSERT_TRUE(r->ok()) << r->status();
  EXPECT_EQ(**r, "ping pong");
}

Task<absl::StatusOr<size_t>> big_transfer(Network* net, size_t parts, size_t part_bytes) {
  CO_ASSIGN_OR_RETURN(auto listener, co_await net->listen(address_of("localhost", 0)));
  CO_ASSIGN_OR_RETURN(auto client, co_await net->connect(listener->address()));
  CO_ASSIGN_OR_RETURN(auto server, co_await listener->accept());
  BufferChain chain;
  std::string expected;
  for (size_t i = 0; i < parts; ++i) {
    std::string part(part_bytes, static_cast<char>('a' + i % 26));
    expected += part;
    chain.append(Buffer::copy_of(part));
  }
  absl::Status write_status;
  TaskScope writer(co_await this_executor());
  writer.spawn([](Connection* c, BufferChain data, absl::Status* out) -> Task<void> {
    *out = co_await c->write_all(std::move(data));
    c->close();
  }(client.get(), std::move(chain), &write_status));
  CO_ASSIGN_OR_RETURN(std::string got, co_await read_exactly(server.get(), expected.size() + 1));
  co_await writer.join();
  CO_RETURN_IF_ERROR(write_status);
  if (got != expected) co_return absl::DataLossError("bytes differ");
  co_return got.size();
}

// A chain larger than the socket buffers, with more parts than one sendmsg
// takes, arrives whole and in order; then the stream ends.
TEST_F(NetworkTest, LargeVectoredWriteArrivesInOrder) {
  Network net(*loop_);
  auto r = run(big_transfer(&net, 2500, 3000));
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok()) << r->status();
  EXPECT_EQ(**r, 2500u * 3000u);
}

Task<absl::StatusOr<absl::StatusCode>> close_cancels_read(Network* net) {
  CO_ASSIGN_OR_RETURN(auto listener, co_await net->listen(address_of("127.0.0.1", 0)));
  CO_ASSIGN_OR_RETURN(auto client, co_await net->connect(listener->address()));
  CO_ASSIGN_OR_RETURN(auto server, co_await listener->accept());
  absl::StatusCode code = absl::StatusCode::kUnknown;
  TaskScope reader(co_await this_executor());
  reader.spawn([](Connection* c, absl::StatusCode* out) -> Task<void> {
    *out = (co_await c->read_some(100)).status().code();
  }(server.get(), &code));
  co_await yield_now();
  co_await yield_now();
  server->close();
  server->close();  // idempotent
  co_await reader.join();
  // Later calls fail the same way.
  if ((co_await server->write_all(BufferChain(Buffer::copy_of("x")))).code() !=
      absl::StatusCode::kCancelled) {
    co_return absl::InternalError("write after close");
  }
  // The peer sees the end of the stream.
  CO_ASSIGN_OR_RETURN(Buffer eof, co_await client->read_some(10));
  if (!eof.empty()) co_return absl::InternalError("expected end of stream");
  co_return code;
}

// close() makes a pending read fail with Cancelled and the peer see EOF.
TEST_F(NetworkTest, CloseCancelsPendingRead) {
  Network net(*loop_);
  auto r = run(close_cancels_read(&net));
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok()) << r->status();
  EXPECT_EQ(**r, absl::StatusCode::kCancelled);
  EXPECT_EQ(loop_->ops_in_flight(), 0u);
}

Task<absl::Status> destroyed_reader(Network* net, Loop* loop) {
  CO_ASSIGN_OR_RETURN(auto listener, co_await net->listen(address_of("127.0.0.1", 0)));
  CO_ASSIGN_OR_RETURN(auto client, co_await net->connect(listener->address()));
  CO_ASSIGN_OR_RETURN(auto server, co_await listener->accept());
  {
    TaskScope reader(co_await this_executor());
    reader.spawn([](Connection* c) -> Task<void> { (void)co_await c->read_some(100); }(
        server.get()));
    co_await loop->sleep_for(5ms);  // the recv is parked in the kernel
  }  // the reader's frame is destroyed here, recv still in flight
  CO_RETURN_IF_ERROR(co_await client->write_all(BufferChain(Buffer::copy_of("after"))));
  // The cancelled recv took nothing: the next read sees every byte.
  CO_ASSIGN_OR_RETURN(std::string got, co_await read_exactly(server.get(), 5));
  if (got != "after") co_return absl::DataLossError(got);
  co_return absl::OkStatus();
}

// Destroying a task with a recv in flight cancels it without losing bytes or
// touching freed memory (run under ASan).
TEST_F(NetworkTest, DestroyedReaderCancelsItsRecv) {
  Network net(*loop_);
  auto r = run(destroyed_reader(&net, loop_.get()));
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->ok()) << *r;
  loop_->run_until([&] { return loop_->ops_in_flight() == 0; }, loop_->now() + 5s);
  EXPECT_EQ(loop_->ops_live(), 0u);
}

Task<absl::Status> held_views_survive(Network* net) {
  CO_ASSIGN_OR_RETURN(auto listener, co_await net->listen(address_of("127.0.0.1", 0)));
  CO_ASSIGN_OR_RETURN(auto client, co_await net->connect(listener->address()));
  CO_ASSIGN_OR_RETURN(auto server, co_await listener->accept());
  std::vector<Buffer> held;
  for (char fill : {'a', 'b', 'c'}) {
    CO_RETURN_IF_ERROR(co_await client->write_all(
        BufferChain(Buffer::copy_of(std::string(kRecvCopyBytesMax * 4, fill)))));
    size_t got = 0;
    while (got < kRecvCopyBytesMax * 4) {
      CO_ASSIGN_OR_RETURN(Buffer b, co_await server->read_some(kRecvBytesMax));
      if (b.empty()) co_return absl::DataLossError("early end of stream");
      got += b.size();
      held.push_back(b);  // keep every view, large ones included
    }
  }
  std::string all;
  for (const Buffer& b : held) all.append(b.view());
  const size_t part = kRecvCopyBytesMax * 4;
  if (all != std::string(part, 'a') + std::string(part, 'b') + std::string(part, 'c')) {
    co_return absl::DataLossError("a held buffer was overwritten");
  }
  co_return absl::OkStatus();
}

// Buffers returned by read_some stay intact while the reader holds them,
// even though the connection reuses its receive buffer once they are gone.
TEST_F(NetworkTest, HeldReadBuffersAreNeverOverwritten) {
  Network net(*loop_);
  auto r = run(held_views_survive(&net));
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->ok()) << *r;
}

Task<absl::StatusOr<absl::StatusCode>> refused(Network* net) {
  // Bind a port, then free it: nothing listens there any more.
  uint16_t port;
  {
    CO_ASSIGN_OR_RETURN(auto l, co_await net->listen(address_of("127.0.0.1", 0)));
    port = l->address().port;
    l->close();
  }
  co_await yield_now();
  co_return (co_await net->connect(address_of("127.0.0.1", port))).status().code();
}

// Connecting where nobody listens fails with Unavailable.
TEST_F(NetworkTest, RefusedConnectIsUnavailable) {
  Network net(*loop_);
  auto r = run(refused(&net));
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok()) << r->status();
  EXPECT_EQ(**r, absl::StatusCode::kUnavailable);
}

Task<absl::StatusCode> accept_after_close(Network* net) {
  auto l = co_await net->listen(address_of("127.0.0.1", 0));
  if (!l.ok()) co_return l.status().code();
  absl::StatusCode code = absl::StatusCode::kUnknown;
  TaskScope acceptor(co_await this_executor());
  acceptor.spawn([](Listener* listener, absl::StatusCode* out) -> Task<void> {
    *out = (co_await listener->accept()).status().code();
  }((*l).get(), &code));
  co_await yield_now();
  co_await yield_now();
  (*l)->close();
  co_await acceptor.join();
  co_return code;
}

// Closing a listener fails its pending accept with Cancelled.
TEST_F(NetworkTest, ListenerCloseCancelsAccept) {
  Network net(*loop_);
  auto r = run(accept_after_close(&net));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, absl::StatusCode::kCancelled);
}

// Host names other than localhost are refused rather than resolved.
TEST_F(NetworkTest, OnlyLiteralsResolve) {
  Network net(*loop_);
  auto r = run(net.connect(address_of("example.invalid", 9)));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace brook::io::uring
