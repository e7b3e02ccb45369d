// sim/produce_acks_test.cc
//
// A partition leader's answers to an idempotent producer around replica
// changes, in the simulator:
// - an acks=all batch written while the ISR held min.insync.replicas, whose
//   ISR then shrinks below that before the answer, is answered only once
//   the ISR has grown back (success), not NOT_ENOUGH_REPLICAS_AFTER_APPEND
//   at once, which leaves the producer unsure whether it was written;
// - a batch whose sequence skips one that this replica refused before it
//   became the leader (the producer's requests were pipelined) is answered
//   NOT_LEADER_OR_FOLLOWER, which producers retry in order, never
//   OUT_OF_ORDER_SEQUENCE_NUMBER, on which librdkafka renumbers its
//   unacknowledged messages under a new epoch; and likewise
//   NOT_ENOUGH_REPLICAS after a batch refused for too small an ISR; a
//   refusal is remembered for broker::kRefusedBatchMemory and then
//   forgotten (the gap is then out of order, as Kafka answers it);
// - a request still unanswered after broker::kSlowRequest is logged as a
//   warning, and again with the time it took once answered.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/broker/broker.h"
#include "io/when.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/init_producer_id_request.h"
#include "net/kafka/messages/init_producer_id_response.h"
#include "net/kafka/messages/produce_response.h"
#include "net/kafka/rpc.h"
#include "sim/broker.h"
#include "sim/test_cluster.h"
#include "sim/world.h"

namespace brook::sim {
namespace {

using namespace std::chrono_literals;
using net::Error;

// Partition 0 of t as `broker`'s metadata has it.
io::Task<std::optional<PartitionState>> partition_state(io::Context* ctx, io::Address broker) {
  std::vector<PartitionState> states = co_await partition_states(ctx, std::move(broker), "t");
  if (states.empty()) co_return std::nullopt;
  co_return std::move(states.front());
}

// Asks `broker` until its metadata satisfies `done` (or a minute passed).
template <typename Done>
io::Task<std::optional<PartitionState>> wait_for_state(io::Context* ctx, io::Address broker, Done done) {
  const io::Instant until = ctx->clock().now() + 60s;
  while (ctx->clock().now() < until) {
    std::optional<PartitionState> s = co_await partition_state(ctx, broker);
    if (s.has_value() && done(*s)) co_return s;
    co_await ctx->clock().sleep_for(100ms);
  }
  co_return std::nullopt;
}

io::Task<int64_t> init_producer_id(io::Context* ctx, io::Address broker) {
  net::Peer peer(ctx->network(), ctx->clock(), broker, "producer");
  for (int attempt = 0; attempt < 100; ++attempt) {
    net::InitProducerIdRequest r;
    r.transactional_id.reset();
    r.transaction_timeout_ms = 60000;
    absl::StatusOr<net::InitProducerIdResponse> out = co_await peer.call<net::InitProducerIdResponse>(r, 4, 5s);
    if (out.ok() && out->error_code == 0) co_return out->producer_id;
    co_await ctx->clock().sleep_for(200ms);
  }
  co_return -1;
}

struct Answer {
  int16_t error = -1;  // -1: no answer
  std::string message;
};

// One batch of one record of producer `producer_id` (epoch 0) at
// `sequence`, to partition 0 of t at `broker`, acks=all, with the request
// timeout `timeout`.
io::Task<Answer> produce(io::Context* ctx, io::Address broker, int64_t producer_id, int32_t sequence,
                         std::chrono::milliseconds timeout = 30s) {
  net::RecordBatchOptions o;
  o.producer_id = producer_id;
  o.producer_epoch = 0;
  o.base_sequence = sequence;
  std::optional<net::ProduceResponse::PartitionProduceResponse> out = co_await produce_one(
      ctx, std::move(broker), "t", 0, o, "v" + std::to_string(sequence), std::nullopt, timeout);
  Answer answer;
  if (out.has_value()) {
    answer.error = out->error_code;
    answer.message = out->error_message.value_or("");
  }
  co_return answer;
}

using broker::contains;

// Five voters, so that two replicas of t can be down with the quorum up.
constexpr int kFiveNodes = 5;
void three_replicas_two_insync(ServerNodeOptions& o) {
  o.replication_factor = 3;
  o.min_insync = 2;
}

// Creates t (one partition, three replicas) once the cluster is up; yields
// its state once all three are in its ISR.
io::Task<std::optional<PartitionState>> create_t(io::Context* ctx, const TestCluster* cluster) {
  co_await ctx->clock().sleep_for(3s);
  client::Cluster admin(*ctx, sim_client_options(cluster->brokers, "admin"));
  co_await create_topic_until_done(ctx, &admin, "t", 1, 3);
  co_return co_await wait_for_state(ctx, cluster->brokers.front(),
                                    [](const PartitionState& s) { return s.leader > 0 && s.isr.size() == 3; });
}

// --- acks=all while the ISR dips below min.insync.replicas ------------------------

struct DipOutcome {
  bool done = false;
  int32_t leader = -1;
  std::vector<int32_t> isr_alone;  // the ISR while the batch waited
  Answer answer;
  io::Duration took{0};
  io::Duration restarted_after{0};  // when the follower restarted
  bool back_in_isr = false;
};

// produce() of sequence 0, and how long after `start` its answer came.
io::Task<Answer> timed_produce(io::Context* ctx, io::Address broker, int64_t producer_id, io::Instant start,
                               io::Duration* took, std::chrono::milliseconds timeout = 30s) {
  Answer answer = co_await produce(ctx, std::move(broker), producer_id, 0, timeout);
  *took = ctx->clock().now() - start;
  co_return answer;
}

// Yields how long after `start` the follower restarted.
io::Task<io::Duration> restart_when_alone(io::Context* ctx, TestCluster* cluster, int32_t leader,
                                          int32_t follower, DipOutcome* out, io::Instant start) {
  std::optional<PartitionState> alone = co_await wait_for_state(
      ctx, cluster->broker(leader), [&](const PartitionState& s) { return s.isr == std::vector<int32_t>{leader}; });
  if (alone.has_value()) out->isr_alone = alone->isr;
  // Long enough that the leader has applied the shrunk ISR and moved its
  // high watermark past the batch.
  co_await ctx->clock().sleep_for(1s);
  cluster->server(follower).restart();
  const io::Duration restarted = ctx->clock().now() - start;
  std::optional<PartitionState> back = co_await wait_for_state(
      ctx, cluster->broker(leader), [&](const PartitionState& s) { return contains(s.isr, follower); });
  out->back_in_isr = back.has_value();
  co_return restarted;
}

// t made; its leader, its followers and a producer id, after one follower
// crashed and the ISR became the leader and the other; then the other
// crashes, so that a batch sent at once is written while the ISR holds
// min.insync.replicas and the ISR then shrinks to the leader alone.
// Nullopt when the cluster did not get there.
struct Dip {
  int32_t leader = -1;
  std::vector<int32_t> followers;
  int64_t producer_id = -1;
};
io::Task<std::optional<Dip>> dip_below_min_insync(io::Context* ctx, TestCluster* cluster) {
  std::optional<PartitionState> s = co_await create_t(ctx, cluster);
  if (!s.has_value()) co_return std::nullopt;
  Dip dip;
  dip.leader = s->leader;
  for (int32_t r : s->replicas) {
    if (r != s->leader) dip.followers.push_back(r);
  }
  dip.producer_id = co_await init_producer_id(ctx, cluster->broker(dip.leader));
  // One follower goes; the ISR is the leader and the other one.
  cluster->server(dip.followers[0]).crash();
  const int32_t gone = dip.followers[0];
  if (!(co_await wait_for_state(ctx, cluster->broker(dip.leader), [gone](const PartitionState& state) {
        return state.isr.size() == 2 && !contains(state.isr, gone);
      })).has_value()) {
    co_return std::nullopt;
  }
  cluster->server(dip.followers[1]).crash();
  co_return dip;
}

TEST(ProduceAcks, AllWaitsForTheIsrToGrowBack) {
  TestCluster cluster(41, kFiveNodes, three_replicas_two_insync);
  DipOutcome out;
  cluster.client->start([&](io::Context& ctx) -> io::Task<void> {
    std::optional<Dip> dip = co_await dip_below_min_insync(&ctx, &cluster);
    if (!dip.has_value()) {
      out.done = true;
      co_return;
    }
    out.leader = dip->leader;
    // The leader writes the batch (the ISR still holds two), and the ISR
    // then shrinks to the leader alone. The first follower comes back once
    // it has.
    const io::Instant start = ctx.clock().now();
    std::tuple<Answer, io::Duration> both = co_await io::when_all(
        timed_produce(&ctx, cluster.broker(out.leader), dip->producer_id, start, &out.took),
        restart_when_alone(&ctx, &cluster, out.leader, dip->followers[0], &out, start));
    out.answer = std::get<0>(both);
    out.restarted_after = std::get<1>(both);
    out.done = true;
  });
  ASSERT_TRUE(cluster.world.run_until([&] { return out.done; }, 600s));
  ASSERT_GT(out.leader, 0);
  EXPECT_EQ(out.isr_alone, std::vector<int32_t>{out.leader});
  EXPECT_EQ(out.answer.error, 0) << net::error_name(out.answer.error) << ": " << out.answer.message;
  EXPECT_TRUE(out.back_in_isr);
  // Answered once the follower was back, not when the ISR shrank.
  EXPECT_GT(out.took, out.restarted_after);
}

// --- a request that waits past broker::kSlowRequest is logged ------------------

// The warnings logged, each line whole.
struct Warnings : io::LogSink {
  std::vector<std::string> lines;
  void write(io::LogLevel level, std::string_view line) override {
    if (level == io::LogLevel::kWarn) lines.emplace_back(line);
  }
  // The milliseconds of the first line with `what` and then
  // "<what>... after N ms"; -1 when there is none.
  int64_t millis_after(std::string_view what) const {
    for (const std::string& l : lines) {
      const size_t at = l.find(what);
      if (at == std::string::npos) continue;
      const size_t after = l.find(" after ", at);
      if (after == std::string::npos) continue;
      return std::stoll(l.substr(after + 7));
    }
    return -1;
  }
};

TEST(ProduceAcks, ARequestWaitingPastTheSlowLimitIsLogged) {
  Warnings warnings;
  TestCluster cluster(41, kFiveNodes, three_replicas_two_insync, &warnings);
  struct {
    bool done = false;
    int32_t leader = -1;
    Answer answer;
    io::Duration took{0};
  } out;
  cluster.client->start([&](io::Context& ctx) -> io::Task<void> {
    std::optional<Dip> dip = co_await dip_below_min_insync(&ctx, &cluster);
    if (!dip.has_value()) {
      out.done = true;
      co_return;
    }
    out.leader = dip->leader;
    // No follower comes back, so the Produce waits its whole timeout, 90 s.
    out.answer =
        co_await timed_produce(&ctx, cluster.broker(out.leader), dip->producer_id, ctx.clock().now(), &out.took, 90s);
    out.done = true;
  });
  ASSERT_TRUE(cluster.world.run_until([&] { return out.done; }, 600s));
  ASSERT_GT(out.leader, 0);
  EXPECT_EQ(out.answer.error, net::code(Error::kNotEnoughReplicasAfterAppend)) << net::error_name(out.answer.error);
  EXPECT_GE(out.took, 90s);
  // Warned about once it had waited 60 s, and again when answered.
  const int64_t pending = warnings.millis_after("from 'producer' unanswered");
  const int64_t answered = warnings.millis_after("from 'producer' answered");
  EXPECT_GE(pending, 60000);
  EXPECT_LT(pending, 61000);
  EXPECT_GE(answered, 90000);
  EXPECT_LT(answered, 91000);
}

// --- a batch after one refused before the leadership came ----------------------

struct RefusalOutcome {
  bool done = false;
  int32_t leader = -1;  // the broker that answered the batches after the refusal
  Answer first, refused, after_refusal, resent, in_order, gap;
  io::Instant refused_sent{}, refused_answered{};  // the refused batch's round trip
};

// The batches after the refusal at `at`: the one the producer had pipelined
// after the refused one, the refused one resent, that one again, and then
// a gap that follows no refused batch.
io::Task<void> after_the_refusal(io::Context* ctx, io::Address at, int64_t producer_id, RefusalOutcome* out) {
  out->after_refusal = co_await produce(ctx, at, producer_id, 2);
  out->resent = co_await produce(ctx, at, producer_id, 1);
  out->in_order = co_await produce(ctx, at, producer_id, 2);
  out->gap = co_await produce(ctx, at, producer_id, 5);
  out->done = true;
}

// The batch after the refused one gets the refusal's error; in order, both
// are then written; a real gap is still out of order.
void expect_retriable_after_refusal(const RefusalOutcome& out, Error refusal) {
  EXPECT_EQ(out.first.error, 0);
  EXPECT_EQ(out.refused.error, net::code(refusal));
  EXPECT_EQ(out.after_refusal.error, net::code(refusal)) << out.after_refusal.message;
  EXPECT_NE(out.after_refusal.message.find("refused"), std::string::npos) << out.after_refusal.message;
  EXPECT_EQ(out.resent.error, 0) << out.resent.message;
  EXPECT_EQ(out.in_order.error, 0) << out.in_order.message;
  EXPECT_EQ(out.gap.error, net::code(Error::kOutOfOrderSequenceNumber)) << out.gap.message;
}

TEST(ProduceAcks, ABatchAfterOneRefusedBeforeTheLeadershipIsRetriable) {
  TestCluster cluster(43, 3, [](ServerNodeOptions&) {});
  RefusalOutcome out;
  cluster.client->start([&](io::Context& ctx) -> io::Task<void> {
    std::optional<PartitionState> s = co_await create_t(&ctx, &cluster);
    if (!s.has_value()) {
      out.done = true;
      co_return;
    }
    const int32_t leader = s->leader;
    const int64_t producer_id = co_await init_producer_id(&ctx, cluster.broker(leader));
    out.first = co_await produce(&ctx, cluster.broker(leader), producer_id, 0);
    // The producer's next batch reaches the followers early (a client
    // with newer metadata than theirs would send it there): refused.
    for (int32_t r : s->replicas) {
      if (r != leader) out.refused = co_await produce(&ctx, cluster.broker(r), producer_id, 1);
    }
    cluster.server(leader).crash();
    // The partition's new leader, as it sees itself.
    for (int32_t r : s->replicas) {
      if (r == leader) continue;
      std::optional<PartitionState> moved = co_await wait_for_state(
          &ctx, cluster.broker(r), [&](const PartitionState& s) { return s.leader > 0 && s.leader != leader; });
      if (moved.has_value() && moved->leader == r) out.leader = r;
      if (out.leader > 0) break;
    }
    if (out.leader < 0) {
      out.done = true;
      co_return;
    }
    co_await after_the_refusal(&ctx, cluster.broker(out.leader), producer_id, &out);
  });
  ASSERT_TRUE(cluster.world.run_until([&] { return out.done; }, 600s));
  ASSERT_GT(out.leader, 0);
  expect_retriable_after_refusal(out, Error::kNotLeaderOrFollower);
}

// At a leader of t (five nodes, min.insync.replicas 2): a first batch of
// a new producer is written, the next (sequence 1) is refused
// NOT_ENOUGH_REPLICAS while both followers are down, and one follower comes
// back into the ISR. Yields the producer, or nothing (out->done set) if the
// cluster never got there.
io::Task<std::optional<int64_t>> refuse_for_the_isr(io::Context* ctx, TestCluster* cluster, RefusalOutcome* out) {
  std::optional<PartitionState> s = co_await create_t(ctx, cluster);
  if (!s.has_value()) {
    out->done = true;
    co_return std::nullopt;
  }
  const int32_t leader = s->leader;
  const io::Address at = cluster->broker(leader);
  const int64_t producer_id = co_await init_producer_id(ctx, at);
  out->first = co_await produce(ctx, at, producer_id, 0);
  // Both followers go; the ISR is the leader alone.
  int32_t back = -1;
  for (int32_t r : s->replicas) {
    if (r == leader) continue;
    cluster->server(r).crash();
    back = r;
  }
  if (!(co_await wait_for_state(ctx, at, [&](const PartitionState& s) {
        return s.isr == std::vector<int32_t>{leader};
      })).has_value()) {
    out->done = true;
    co_return std::nullopt;
  }
  out->refused_sent = ctx->clock().now();
  out->refused = co_await produce(ctx, at, producer_id, 1);
  out->refused_answered = ctx->clock().now();
  // One follower comes back and rejoins the ISR.
  cluster->server(back).restart();
  if (!(co_await wait_for_state(ctx, at, [&](const PartitionState& s) { return contains(s.isr, back); }))
           .has_value()) {
    out->done = true;
    co_return std::nullopt;
  }
  out->leader = leader;
  co_return producer_id;
}

// The same at a leader that refused a batch for too small an ISR, whose
// ISR then grew back: the batch after it gets NOT_ENOUGH_REPLICAS too.
TEST(ProduceAcks, ABatchAfterOneRefusedForTheIsrIsRetriable) {
  TestCluster cluster(47, kFiveNodes, three_replicas_two_insync);
  RefusalOutcome out;
  cluster.client->start([&](io::Context& ctx) -> io::Task<void> {
    const std::optional<int64_t> producer_id = co_await refuse_for_the_isr(&ctx, &cluster, &out);
    if (!producer_id.has_value()) co_return;
    co_await after_the_refusal(&ctx, cluster.broker(out.leader), *producer_id, &out);
  });
  ASSERT_TRUE(cluster.world.run_until([&] { return out.done; }, 600s));
  ASSERT_GT(out.leader, 0);
  expect_retriable_after_refusal(out, Error::kNotEnoughReplicas);
}

// A refusal is remembered for broker::kRefusedBatchMemory, no longer: a
// producer that has not resent the refused batch by then gets Kafka's own
// answer to the gap, OUT_OF_ORDER_SEQUENCE_NUMBER.
TEST(ProduceAcks, ARefusalIsForgottenAfterItsMemory) {
  TestCluster cluster(53, kFiveNodes, three_replicas_two_insync);
  RefusalOutcome out;
  Answer before, after;
  bool in_time = false;
  cluster.client->start([&](io::Context& ctx) -> io::Task<void> {
    const std::optional<int64_t> producer_id = co_await refuse_for_the_isr(&ctx, &cluster, &out);
    if (!producer_id.has_value()) co_return;
    const io::Address at = cluster.broker(out.leader);
    // The leader noted the refusal between these two instants: ask a
    // second before its memory can have ended, then a second after it
    // must have.
    const io::Instant last_remembered = out.refused_sent + broker::kRefusedBatchMemory - 1s;
    in_time = ctx.clock().now() <= last_remembered;
    if (in_time) co_await ctx.clock().sleep_for(last_remembered - ctx.clock().now());
    before = co_await produce(&ctx, at, *producer_id, 2);
    const io::Instant forgotten = out.refused_answered + broker::kRefusedBatchMemory + 1s;
    if (ctx.clock().now() < forgotten) co_await ctx.clock().sleep_for(forgotten - ctx.clock().now());
    after = co_await produce(&ctx, at, *producer_id, 2);
    out.done = true;
  });
  ASSERT_TRUE(cluster.world.run_until([&] { return out.done; }, 600s));
  ASSERT_GT(out.leader, 0);
  EXPECT_EQ(out.refused.error, net::code(Error::kNotEnoughReplicas));
  ASSERT_TRUE(in_time) << "the follower took too long to rejoin";
  EXPECT_EQ(before.error, net::code(Error::kNotEnoughReplicas)) << before.message;
  EXPECT_EQ(after.error, net::code(Error::kOutOfOrderSequenceNumber)) << after.message;
  EXPECT_EQ(after.message.find("refused"), std::string::npos) << after.message;
}

}  // namespace
}  // namespace brook::sim
