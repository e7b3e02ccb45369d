// sim/network_test.cc
//
// Tests of the simulated network: TCP semantics per connection under random
// latency, refused and timed-out connects, partitions (symmetric, one-way,
// healed, timed out), resets seen by both ends, crashes, clogs, close/EOF,
// flow control and zero-copy delivery. Each test states what it proves.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/scope.h"
#include "io/status.h"
#include "io/when.h"
#include "sim/mesh.h"
#include "sim/world.h"

namespace brook::sim {
namespace {

using namespace std::chrono_literals;

constexpr uint16_t kPort = 9000;

// Both ends of one connection, set up by the test's driver tasks.
struct Pair {
  std::unique_ptr<io::Connection> client;  // on node 0
  std::unique_ptr<io::Connection> server;  // on node 1
  std::unique_ptr<io::Listener> listener;
};

io::Task<void> serve(io::Context* ctx, io::Address address, Pair* pair) {
  auto listener = co_await ctx->network().listen(address);
  BROOK_ASSERT(listener.ok());
  pair->listener = std::move(*listener);
  auto conn = co_await pair->listener->accept();
  BROOK_ASSERT(conn.ok());
  pair->server = std::move(*conn);
  co_await ctx->clock().sleep_for(1000h);  // keep the node's scope alive
}

io::Task<void> dial(io::Context* ctx, io::Address address, Pair* pair) {
  co_await ctx->clock().sleep_for(1ms);  // let the server listen first
  auto conn = co_await ctx->network().connect(address);
  BROOK_ASSERT(conn.ok());
  pair->client = std::move(*conn);
  co_await ctx->clock().sleep_for(1000h);
}

// A world of `nodes` nodes with a connection from node 0 to node 1.
struct Fixture {
  explicit Fixture(uint64_t seed, NetworkOptions network = {}, int nodes = 2)
      : world(seed, options_with(network)) {
    for (int i = 0; i < nodes; ++i) world.add_node();
  }
  static WorldOptions options_with(NetworkOptions network) {
    WorldOptions o;
    o.network = network;
    return o;
  }
  void connect() {
    Node& a = world.node(0);
    Node& b = world.node(1);
    b.start([this, &b](io::Context& ctx) { return serve(&ctx, b.address(kPort), &pair); });
    a.start([this, &b](io::Context& ctx) { return dial(&ctx, b.address(kPort), &pair); });
    ASSERT_TRUE(world.run_until([&] { return pair.client && pair.server; }, 1min));
  }
  // Runs `task` on node `index` (in its root scope) until it finishes.
  template <typename T>
  T run(int index, io::Task<T> task, io::Duration limit = 1h) {
    std::optional<T> result;
    world.node(index).spawn(store(std::move(task), &result));
    EXPECT_TRUE(world.run_until([&] { return result.has_value(); }, limit));
    return result.has_value() ? std::move(*result) : T{};
  }
  template <typename T>
  static io::Task<void> store(io::Task<T> task, std::optional<T>* out) {
    out->emplace(co_await std::move(task));
  }
  World world;
  Pair pair;
};

io::Task<absl::Status> write_text(io::Connection* c, std::string text) {
  co_return co_await c->write_all(io::BufferChain(io::Buffer::copy_of(text)));
}

// Reads until `bytes` bytes arrived, EOF or an error; returns what came and
// the final status (OK, or the error).
struct ReadResult {
  std::string data;
  absl::Status status;
  bool eof = false;
};
io::Task<ReadResult> read_bytes(io::Connection* c, size_t bytes) {
  ReadResult r;
  while (r.data.size() < bytes) {
    auto b = co_await c->read_some(bytes - r.data.size());
    if (!b.ok()) {
      r.status = b.status();
      co_return r;
    }
    if (b->empty()) {
      r.eof = true;
      co_return r;
    }
    r.data.append(b->view());
  }
  co_return r;
}

io::Task<absl::Status> write_numbered(io::Connection* c, io::Context* ctx, int count) {
  for (int i = 0; i < count; ++i) {
    const size_t n = 1 + ctx->random().uniform(300);
    std::string chunk(n, static_cast<char>('a' + i % 26));
    CO_RETURN_IF_ERROR(co_await c->write_all(io::BufferChain(io::Buffer::copy_of(chunk))));
    if (ctx->random().bernoulli(0.3))
      co_await ctx->clock().sleep_for(io::Duration(1 + ctx->random().uniform(500'000)));
  }
  co_return absl::OkStatus();
}

std::string expected_numbered(uint64_t seed, int count) {
  // Replays the writer's choices: a fresh world with the same seed draws the
  // same values from node 0's stream.
  World world(seed);
  io::Random& r = world.add_node().random();
  std::string out;
  for (int i = 0; i < count; ++i) {
    const size_t n = 1 + r.uniform(300);
    out.append(n, static_cast<char>('a' + i % 26));
    if (r.bernoulli(0.3)) r.uniform(500'000);
  }
  return out;
}

// Bytes arrive in order, once, whatever the per-segment latency: writes with
// heavily varying delays (and stalls) are read back as exactly the stream
// that was written.
TEST(Network, OrderHoldsUnderRandomLatency) {
  NetworkOptions options;
  options.latency.min = 10us;
  options.latency.jitter = 5ms;
  options.latency.stall_probability = 0.05;
  Fixture f(21, options);
  f.connect();
  Node& a = f.world.node(0);
  const std::string expected = expected_numbered(21, 500);
  // The fixture's node 0 drew nothing before: its stream starts identically.
  a.spawn([](Fixture* fx, Node* node) -> io::Task<void> {
    BROOK_ASSERT((co_await write_numbered(fx->pair.client.get(), &node->context(), 500)).ok());
  }(&f, &a));
  ReadResult r = f.run(1, read_bytes(f.pair.server.get(), expected.size()));
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.data, expected);
}

io::Task<void> idle(io::Context* ctx) { co_await ctx->clock().sleep_for(1000h); }

io::Task<absl::Status> connect_status(io::Context* ctx, io::Address address) {
  auto c = co_await ctx->network().connect(address);
  co_return c.status();
}

// A host that is up but has no listener refuses the connection
// (Unavailable) after a round trip.
TEST(Network, ConnectWithoutListenerIsRefused) {
  Fixture f(22);
  f.world.node(0).start([](io::Context& ctx) { return idle(&ctx); });
  f.world.node(1).start([](io::Context& ctx) { return idle(&ctx); });
  const absl::Status s =
      f.run(0, connect_status(&f.world.node(0).context(), f.world.node(1).address(1)));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_LT(f.world.elapsed(), 10ms);
}

// A host that is down drops the SYN: connect retries until connect_timeout,
// then fails with DeadlineExceeded.
TEST(Network, ConnectToADownHostTimesOut) {
  NetworkOptions options;
  options.connect_timeout = 3s;
  Fixture f(23, options);
  f.world.node(0).start([](io::Context& ctx) { return idle(&ctx); });
  const absl::Status s =
      f.run(0, connect_status(&f.world.node(0).context(), f.world.node(1).address(kPort)));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_GE(f.world.elapsed(), 3s);
  EXPECT_LT(f.world.elapsed(), 4s);
}

// A symmetric partition holds bytes in flight; healing before the reset
// timeout delivers them, in order, on the same connection.
TEST(Network, PartitionHoldsBytesAndHealDeliversThem) {
  Fixture f(24);
  f.connect();
  f.world.partition({0}, {1}, PartitionMode::kSymmetric);
  EXPECT_TRUE(f.run(0, write_text(f.pair.client.get(), "held-bytes")).ok());
  f.world.run_for(5s);
  EXPECT_EQ(f.pair.server.get() != nullptr, true);
  std::optional<ReadResult> got;
  f.world.node(1).spawn(Fixture::store(read_bytes(f.pair.server.get(), 10), &got));
  f.world.run_for(1s);
  EXPECT_FALSE(got.has_value());  // still held
  f.world.heal();
  ASSERT_TRUE(f.world.run_until([&] { return got.has_value(); }, 1s));
  EXPECT_TRUE(got->status.ok());
  EXPECT_EQ(got->data, "held-bytes");
}

// Bytes held longer than partition_reset_after time out the sending end
// (Unavailable); the receiving end learns only when its own bytes reach the
// dead end after the heal and a reset comes back.
TEST(Network, LongPartitionResetsTheSenderThenThePeerOnItsNextWrite) {
  NetworkOptions options;
  options.partition_reset_after = 2s;
  Fixture f(25, options);
  f.connect();
  f.world.partition({0}, {1}, PartitionMode::kSymmetric);
  EXPECT_TRUE(f.run(0, write_text(f.pair.client.get(), "lost")).ok());
  f.world.run_for(3s);
  EXPECT_EQ(f.run(0, write_text(f.pair.client.get(), "x")).code(), absl::StatusCode::kUnavailable);
  f.world.heal();
  // The server end is half-open: a write still succeeds locally ...
  EXPECT_TRUE(f.run(1, write_text(f.pair.server.get(), "hello?")).ok());
  // ... and the reset the dead end answers with arrives shortly.
  ReadResult r = f.run(1, read_bytes(f.pair.server.get(), 1));
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnavailable) << r.status;
  EXPECT_LT(f.world.elapsed(), 10s);
}

// A reset lost in a partition (held past partition_reset_after, then
// dropped) does not leave the peer half-open forever: its next bytes reach
// the dead end, which answers each with a reset.
TEST(Network, PeerLearnsOfALostResetOnItsNextWrite) {
  NetworkOptions options;
  options.partition_reset_after = 1s;
  Fixture f(34, options);
  f.connect();
  f.world.partition({1}, {0}, PartitionMode::kOneWay);  // the server's reset cannot get out
  f.world.reset_connections(1);
  f.world.run_for(3s);  // the held reset times out and is dropped
  f.world.heal();
  // The client still thinks the connection is open: its write is accepted,
  // reaches the dead end, and the reset comes back.
  EXPECT_TRUE(f.run(0, write_text(f.pair.client.get(), "anyone?")).ok());
  f.world.run_for(100ms);
  EXPECT_EQ(f.run(0, write_text(f.pair.client.get(), "x")).code(), absl::StatusCode::kUnavailable);
}

// A one-way partition a -> b blocks only that direction: b's bytes still
// reach a while a's are held.
TEST(Network, OneWayPartitionBlocksOneDirectionOnly) {
  Fixture f(26);
  f.connect();
  f.world.partition({0}, {1}, PartitionMode::kOneWay);
  EXPECT_TRUE(f.run(1, write_text(f.pair.server.get(), "b-to-a")).ok());
  ReadResult at_a = f.run(0, read_bytes(f.pair.client.get(), 6), 1s);
  EXPECT_EQ(at_a.data, "b-to-a");
  EXPECT_TRUE(f.run(0, write_text(f.pair.client.get(), "a-to-b")).ok());
  std::optional<ReadResult> at_b;
  f.world.node(1).spawn(Fixture::store(read_bytes(f.pair.server.get(), 6), &at_b));
  f.world.run_for(5s);
  EXPECT_FALSE(at_b.has_value());
  f.world.heal();
  ASSERT_TRUE(f.world.run_until([&] { return at_b.has_value(); }, 1s));
  EXPECT_EQ(at_b->data, "a-to-b");
}

// reset_connections(node) fails the node's own end at once and the peer's
// end one latency later, both with Unavailable.
TEST(Network, ResetIsSeenByBothEnds) {
  Fixture f(27);
  f.connect();
  std::optional<ReadResult> at_server;
  f.world.node(1).spawn(Fixture::store(read_bytes(f.pair.server.get(), 1), &at_server));
  f.world.run_for(1ms);
  f.world.reset_connections(0);
  ReadResult at_client = f.run(0, read_bytes(f.pair.client.get(), 1), 1ms);
  EXPECT_EQ(at_client.status.code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(f.world.run_until([&] { return at_server.has_value(); }, 1s));
  EXPECT_EQ(at_server->status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(f.run(1, write_text(f.pair.server.get(), "x")).code(), absl::StatusCode::kUnavailable);
}

// A crash resets the crashed node's connections: its peer sees Unavailable.
TEST(Network, CrashResetsThePeersConnection) {
  Fixture f(28);
  f.connect();
  std::optional<ReadResult> at_server;
  f.world.node(1).spawn(Fixture::store(read_bytes(f.pair.server.get(), 1), &at_server));
  f.world.run_for(1ms);
  f.world.node(0).crash();
  ASSERT_TRUE(f.world.run_until([&] { return at_server.has_value(); }, 1s));
  EXPECT_EQ(at_server->status.code(), absl::StatusCode::kUnavailable) << at_server->status;
  EXPECT_FALSE(at_server->eof);
}

// close() delivers queued bytes, then EOF (an empty Buffer) to the peer;
// the closed end's own calls fail with Cancelled.
TEST(Network, CloseDeliversDataThenEof) {
  Fixture f(29);
  f.connect();
  EXPECT_TRUE(f.run(0, write_text(f.pair.client.get(), "last words")).ok());
  f.pair.client->close();
  ReadResult r = f.run(1, read_bytes(f.pair.server.get(), 100));
  EXPECT_EQ(r.data, "last words");
  EXPECT_TRUE(r.eof);
  EXPECT_EQ(f.run(0, write_text(f.pair.client.get(), "x")).code(), absl::StatusCode::kCancelled);
  ReadResult closed = f.run(0, read_bytes(f.pair.client.get(), 1));
  EXPECT_EQ(closed.status.code(), absl::StatusCode::kCancelled);
}

// A clog holds traffic of a node until it ends: nothing is lost, it is late.
TEST(Network, ClogDelaysTraffic) {
  Fixture f(30);
  f.connect();
  const int64_t start = f.world.now_ns();
  f.world.clog(1, 2s);
  EXPECT_TRUE(f.run(0, write_text(f.pair.client.get(), "late")).ok());
  ReadResult r = f.run(1, read_bytes(f.pair.server.get(), 4));
  EXPECT_EQ(r.data, "late");
  EXPECT_GE(f.world.now_ns() - start, 2'000'000'000);
}

// Flow control: with a reader that does not read, write_all blocks once the
// window is full, and resumes when the reader drains it.
TEST(Network, WriterBlocksWhenTheWindowIsFull) {
  NetworkOptions options;
  options.window_bytes = 1000;
  Fixture f(31, options);
  f.connect();
  std::optional<absl::Status> wrote;
  f.world.node(0).spawn(
      Fixture::store(write_text(f.pair.client.get(), std::string(5000, 'w')), &wrote));
  f.world.run_for(1s);
  EXPECT_FALSE(wrote.has_value());
  ReadResult r = f.run(1, read_bytes(f.pair.server.get(), 5000));
  EXPECT_EQ(r.data.size(), 5000u);
  ASSERT_TRUE(f.world.run_until([&] { return wrote.has_value(); }, 1s));
  EXPECT_TRUE(wrote->ok());
}

// Two tasks reading one end at once both get bytes (the first is resumed by
// the delivery itself, the second through the fallback wait list), and
// nothing is lost or duplicated.
TEST(Network, ConcurrentReadersShareTheStream) {
  Fixture f(35);
  f.connect();
  std::optional<ReadResult> first;
  std::optional<ReadResult> second;
  f.world.node(1).spawn(Fixture::store(read_bytes(f.pair.server.get(), 3), &first));
  f.world.node(1).spawn(Fixture::store(read_bytes(f.pair.server.get(), 3), &second));
  f.world.run_for(1ms);
  for (const char* part : {"ab", "cd", "ef"}) {
    EXPECT_TRUE(f.run(0, write_text(f.pair.client.get(), part)).ok());
    f.world.run_for(1ms);
  }
  ASSERT_TRUE(f.world.run_until([&] { return first && second; }, 1s));
  std::string all = first->data + second->data;
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, "abcdef");
}

io::Task<io::Buffer> read_one(io::Connection* c) {
  auto b = co_await c->read_some(1 << 20);
  co_return b.ok() ? *b : io::Buffer();
}

// Payload bytes are not copied: the receiver gets a slice of the sender's
// own allocation.
TEST(Network, DeliveryIsZeroCopy) {
  Fixture f(32);
  f.connect();
  io::Buffer sent = io::Buffer::copy_of("zero-copy payload");
  f.world.node(0).spawn([](io::Connection* c, io::Buffer b) -> io::Task<void> {
    BROOK_ASSERT((co_await c->write_all(io::BufferChain(b))).ok());
  }(f.pair.client.get(), sent));
  io::Buffer got = f.run(1, read_one(f.pair.server.get()));
  EXPECT_EQ(got.view(), sent.view());
  EXPECT_EQ(got.data(), sent.data());
}

// Mesh traffic across five nodes with jittery latency and stalls keeps
// every connection's messages in order, once and intact.
TEST(Network, MeshKeepsPerConnectionOrder) {
  WorldOptions options;
  options.network.latency.jitter = 2ms;
  options.network.latency.stall_probability = 0.01;
  World world(33, options);
  for (int i = 0; i < 5; ++i) world.add_node();
  MeshStats stats;
  start_mesh(world, MeshOptions{}, &stats);
  world.run_for(2s);
  EXPECT_TRUE(stats.violations.empty()) << stats.violations.front();
  EXPECT_GT(stats.messages_received, 5u * 4 * 1000);
}

}  // namespace
}  // namespace brook::sim
