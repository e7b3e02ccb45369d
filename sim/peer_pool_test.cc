// sim/peer_pool_test.cc
//
// net::PeerPool in the simulator: a node whose address changes gets a fresh
// Peer, while the one it replaces lives on until the call under way on it
// has its answer, and is dropped once that call is done.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>

#include "io/when.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/api_versions_request.h"
#include "net/kafka/messages/api_versions_response.h"
#include "net/kafka/rpc.h"
#include "sim/world.h"

namespace brook::sim {
namespace {

using namespace std::chrono_literals;

constexpr uint16_t kPort = 9092;
constexpr int32_t kNode = 7;

io::Task<absl::StatusOr<io::BufferChain>> respond(const io::Context* ctx, io::Duration delay, net::Error error,
                                                  net::RequestFrame frame) {
  co_await ctx->clock().sleep_for(delay);
  net::ApiVersionsResponse r;
  r.error_code = net::code(error);
  co_return net::encode_response(r, frame.header);
}

// Answers every ApiVersions request after `delay`, with `error` so the
// caller can tell the two servers apart.
io::Task<void> answer(io::Context* ctx, io::Address address, io::Duration delay, net::Error error) {
  absl::StatusOr<std::unique_ptr<io::Listener>> listener = co_await ctx->network().listen(address);
  BROOK_ASSERT(listener.ok());
  const io::Context* c = ctx;
  net::RequestHandler handler = [c, delay, error](net::RequestFrame frame) {
    return respond(c, delay, error, std::move(frame));
  };
  (void)co_await net::serve(**listener, std::move(handler));
}

struct Outcome {
  bool done = false;
  bool fresh_peer = false;       // the new address got another Peer
  size_t retired_during = 0;     // replaced Peers kept while the slow call ran
  size_t retired_after = 0;      // ... and once it was done
  bool reused = false;           // the same address gives the same Peer again
  std::optional<int16_t> slow;   // the slow call's answer (old address)
  std::optional<int16_t> quick;  // the quick call's answer (new address)
};

io::Task<std::optional<int16_t>> ask(net::Peer* peer) {
  const net::ApiVersionsRequest request;
  absl::StatusOr<net::ApiVersionsResponse> r = co_await peer->call<net::ApiVersionsResponse>(request, 0, 10s);
  if (!r.ok()) co_return std::nullopt;
  co_return r->error_code;
}

// After 100 ms, asks the node at its new address.
io::Task<std::optional<int16_t>> move_and_ask(io::Context* ctx, net::PeerPool* pool, net::Peer* old_peer,
                                              io::Address to, Outcome* out) {
  co_await ctx->clock().sleep_for(100ms);
  net::Peer* fresh = &pool->get(kNode, to);
  out->fresh_peer = fresh != old_peer && fresh->address() == to;
  out->retired_during = pool->retired();
  co_return co_await ask(fresh);
}

io::Task<void> client(io::Context* ctx, io::Address old_address, io::Address new_address, Outcome* out) {
  co_await ctx->clock().sleep_for(10ms);  // the servers listen first
  net::PeerPool pool(ctx->network(), ctx->clock(), "pool-test");
  net::Peer* old_peer = &pool.get(kNode, old_address);
  // The node moves while a call to its old address is under way.
  std::tuple<std::optional<int16_t>, std::optional<int16_t>> answers =
      co_await io::when_all(ask(old_peer), move_and_ask(ctx, &pool, old_peer, new_address, out));
  out->slow = std::get<0>(answers);
  out->quick = std::get<1>(answers);
  net::Peer* again = &pool.get(kNode, new_address);
  out->retired_after = pool.retired();
  out->reused = again->address() == new_address && &pool.get(kNode, new_address) == again;
  out->done = true;
}

TEST(PeerPool, KeepsAReplacedPeerUntilItsCallIsDone) {
  World world(11);
  Node& client_node = world.add_node();
  Node& old_server = world.add_node();
  Node& new_server = world.add_node();
  const io::Address old_address = old_server.address(kPort);
  const io::Address new_address = new_server.address(kPort);
  old_server.start([&](io::Context& ctx) {
    return answer(&ctx, old_address, 1s, net::Error::kCoordinatorLoadInProgress);
  });
  new_server.start([&](io::Context& ctx) { return answer(&ctx, new_address, 0s, net::Error::kNone); });
  Outcome out;
  client_node.start([&](io::Context& ctx) { return client(&ctx, old_address, new_address, &out); });
  ASSERT_TRUE(world.run_until([&] { return out.done; }, 1min));
  EXPECT_TRUE(out.fresh_peer);
  EXPECT_EQ(out.retired_during, 1u);
  // The old Peer answered its call after it was replaced.
  EXPECT_EQ(out.slow, net::code(net::Error::kCoordinatorLoadInProgress));
  EXPECT_EQ(out.quick, net::code(net::Error::kNone));
  EXPECT_EQ(out.retired_after, 0u);
  EXPECT_TRUE(out.reused);
}

}  // namespace
}  // namespace brook::sim
