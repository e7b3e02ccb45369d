// net/client/client_test.cc
//
// The client library against a `brook server` node in the simulator (one
// broker+controller node, a client node, no faults): what a record goes in
// as comes out, keys land where the Java client puts them, offsets reset as
// auto.offset.reset says, and the admin calls do what they say. The broker
// and replication scenarios (sim/broker.cc) run the same code under faults.
#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "absl/strings/match.h"
#include "net/client/admin.h"
#include "net/client/consumer.h"
#include "net/client/producer.h"
#include "net/client/transactions.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/add_partitions_to_txn_request.h"
#include "net/kafka/messages/add_partitions_to_txn_response.h"
#include "net/kafka/messages/end_txn_request.h"
#include "net/kafka/messages/end_txn_response.h"
#include "net/kafka/messages/find_coordinator_request.h"
#include "net/kafka/messages/find_coordinator_response.h"
#include "net/kafka/messages/init_producer_id_request.h"
#include "net/kafka/messages/init_producer_id_response.h"
#include "net/kafka/messages/produce_request.h"
#include "net/kafka/messages/produce_response.h"
#include "sim/broker.h"
#include "sim/world.h"

namespace brook::client {
namespace {

using namespace std::chrono_literals;

std::span<const std::byte> bytes(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }
std::string text(const std::optional<io::Buffer>& b) { return b.has_value() ? std::string(b->view()) : "<null>"; }

// The values Kafka's Java client computes (its Utils.murmur2 tests).
TEST(Murmur2Test, MatchesKafka) {
  EXPECT_EQ(murmur2(bytes("21")), -973932308);
  EXPECT_EQ(murmur2(bytes("foobar")), -790332482);
  EXPECT_EQ(murmur2(bytes("a-little-bit-long-string")), -985981536);
  EXPECT_EQ(murmur2(bytes("a-little-bit-longer-string")), -1486304829);
  EXPECT_EQ(murmur2(bytes("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8")), -58897971);
  EXPECT_EQ(murmur2(bytes("abc")), 479470107);
  EXPECT_EQ(murmur2(bytes("1")), -1993445489);
  EXPECT_EQ(murmur2(bytes("12")), 126087238);
  EXPECT_EQ(murmur2(bytes("123")), -267702483);
  EXPECT_EQ(murmur2(bytes("1234")), -1614185708);
}

TEST(Murmur2Test, PartitionForKeyIsPositiveModulo) {
  // murmur2("foobar") is negative: the sign bit is masked off first.
  const int32_t h = -790332482;
  EXPECT_EQ(partition_for_key(bytes("foobar"), 7), (h & 0x7fffffff) % 7);
  for (int n = 1; n < 20; ++n) {
    const int32_t p = partition_for_key(bytes("a-little-bit-long-string"), n);
    EXPECT_GE(p, 0);
    EXPECT_LT(p, n);
  }
}

// One server node and a client node; run() drives a client coroutine to
// its end in simulated time.
class ClientTest : public ::testing::Test {
 protected:
  using Body = std::function<io::Task<void>(io::Context&)>;

  ClientTest() : ClientTest(true) {}
  // `txn_partition_verification`: transaction.partition.verification.enable.
  explicit ClientTest(bool txn_partition_verification) : world_(7) {
    sim::Node& server = world_.add_node();
    broker_ = server.address(9092);
    controller_ = server.address(9093);
    sim::ServerNodeOptions o;
    o.brokers = {broker_};
    o.controllers = {controller_};
    o.partitions = 3;
    o.txn_partition_verification = txn_partition_verification;
    server.start([o](io::Context& ctx) { return sim::server_node_main(&ctx, o); });
  }

  ClientOptions options() const {
    ClientOptions o;
    o.bootstrap = {broker_};
    o.request_timeout = 5s;
    return o;
  }

  void run(Body body) {
    bool done = false;
    sim::Node& client = world_.add_node();
    client.start([&body, &done](io::Context& ctx) { return drive(&ctx, &body, &done); });
    ASSERT_TRUE(world_.run_until([&] { return done; }, 300s)) << "the client did not finish";
  }

  // Creates `name`, retrying while the node starts.
  static io::Task<void> create(Cluster& cluster, std::string name, int32_t partitions) {
    while (true) {
      NewTopic t;
      t.name = name;
      t.partitions = partitions;
      std::vector<NewTopic> topics{t};
      absl::StatusOr<std::map<std::string, CreatedTopic>> r = co_await create_topics(cluster, topics);
      if (r.ok() && (*r)[name].status.ok()) co_return;
      co_await cluster.context().clock().sleep_for(200ms);
    }
  }

  // The connection to the leader of `tp`, once the metadata names one.
  static io::Task<net::Peer*> leader_of(Cluster& cluster, TopicPartition tp) {
    while (true) {
      std::vector<std::string> topics{tp.topic};
      (void)co_await cluster.refresh(std::move(topics));
      net::Peer* peer = cluster.broker(cluster.leader(tp));
      if (peer != nullptr) co_return peer;
      co_await cluster.context().clock().sleep_for(100ms);
    }
  }

  // InitProducerId of `tid` through `peer`, retried while the transaction
  // coordinator comes up (its topic is made on the first lookup).
  static io::Task<net::InitProducerIdResponse> init_transactional(io::Context& ctx, net::Peer* peer, std::string tid,
                                                                  int32_t timeout_ms) {
    net::InitProducerIdResponse ids;
    ids.error_code = -1;
    for (int attempt = 0; attempt < 100 && ids.error_code != 0; ++attempt) {
      net::FindCoordinatorRequest find;
      find.key = tid;
      find.key_type = 1;
      (void)co_await peer->call<net::FindCoordinatorResponse>(find, 2, 5s);
      net::InitProducerIdRequest init;
      init.transactional_id = tid;
      init.transaction_timeout_ms = timeout_ms;
      absl::StatusOr<net::InitProducerIdResponse> r = co_await peer->call<net::InitProducerIdResponse>(init, 4, 5s);
      if (r.ok()) ids = *r;
      if (ids.error_code != 0) co_await ctx.clock().sleep_for(200ms);
    }
    EXPECT_EQ(ids.error_code, 0);
    co_return ids;
  }

  // Produce (acks=all) of one transactional batch of `values` to `tp`.
  static io::Task<absl::StatusOr<net::ProduceResponse>> produce_transactional(
      net::Peer* peer, std::string tid, const net::InitProducerIdResponse& ids, int32_t sequence, TopicPartition tp,
      std::vector<std::string> values, int64_t timestamp_ms) {
    net::RecordBatchOptions options;
    options.producer_id = ids.producer_id;
    options.producer_epoch = ids.producer_epoch;
    options.base_sequence = sequence;
    options.transactional = true;
    net::RecordBatchBuilder builder(options);
    for (const std::string& v : values) {
      net::NewRecord record;
      record.timestamp_ms = timestamp_ms;
      record.value = io::Buffer::copy_of(v);
      builder.append(std::move(record));
    }
    net::ProduceRequest produce;
    produce.transactional_id = tid;
    produce.acks = -1;
    produce.timeout_ms = 5000;
    auto& pt = produce.topic_data.emplace_back();
    pt.name = tp.topic;
    auto& pp = pt.partition_data.emplace_back();
    pp.index = tp.partition;
    pp.records = *builder.build();
    co_return co_await peer->call<net::ProduceResponse>(produce, 7, 10s);
  }

  // Polls until `n` records came or 20 s passed.
  static io::Task<std::vector<ConsumerRecord>> read(Consumer& consumer, size_t n) {
    std::vector<ConsumerRecord> out;
    const io::Instant deadline = consumer.cluster().context().clock().now() + 20s;
    while (out.size() < n && consumer.cluster().context().clock().now() < deadline) {
      absl::StatusOr<std::vector<ConsumerRecord>> got = co_await consumer.poll(500ms);
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok()) break;
      for (ConsumerRecord& r : *got) out.push_back(std::move(r));
    }
    co_return out;
  }

 private:
  static io::Task<void> drive(io::Context* ctx, Body* body, bool* done) {
    co_await (*body)(*ctx);
    *done = true;
  }

  sim::World world_;
  io::Address broker_;
  io::Address controller_;
};

// A bootstrap server that is gone (its host never answers) costs a
// metadata request its timeout once; then the client asks the broker that
// answers, as Kafka's clients prefer a node they can reach, until that one
// fails too.
TEST_F(ClientTest, ABrokerThatIsGoneIsNotAskedWhileAnotherAnswers) {
  run([&](io::Context& ctx) -> io::Task<void> {
    ClientOptions o = options();
    o.bootstrap = {io::Address("10.0.0.99", 9092), o.bootstrap.front()};
    o.request_timeout = 2s;
    Cluster cluster(ctx, o);
    // (Until the server runs.)
    while (!(co_await cluster.fetch_metadata(std::nullopt, false)).ok()) co_await ctx.clock().sleep_for(100ms);
    const io::Instant start = ctx.clock().now();
    int answered = 0;
    for (int i = 0; i < 20; ++i) {
      if ((co_await cluster.fetch_metadata(std::nullopt, false)).ok()) ++answered;
    }
    EXPECT_EQ(answered, 20);
    // Asked in turn regardless, the gone one would cost 2 s every other
    // request: 20 s.
    EXPECT_LT(ctx.clock().now() - start, 1s);
  });
}

TEST_F(ClientTest, EveryCodecKeysHeadersTimestampsRoundTrip) {
  run([this](io::Context& ctx) -> io::Task<void> {
    ProducerConfig pc;
    pc.client = options();
    pc.linger = 2ms;
    Producer producer(ctx, pc);
    co_await create(producer.cluster(), "rt", 3);
    const codec::Compression codecs[] = {codec::Compression::kNone, codec::Compression::kGzip,
                                         codec::Compression::kSnappy, codec::Compression::kLz4,
                                         codec::Compression::kZstd};
    std::map<std::pair<int32_t, int64_t>, int> where;  // (partition, offset) -> record number
    int failures = 0;
    int n = 0;
    for (codec::Compression c : codecs) {
      ProducerConfig cc = pc;
      cc.compression = c;
      Producer p(ctx, cc);
      for (int i = 0; i < 100; ++i, ++n) {
        ProducerRecord r;
        r.topic = "rt";
        r.key = io::Buffer::copy_of(fmt::format("key-{}", n % 17));
        r.value = io::Buffer::copy_of(fmt::format("value-{}-{}", n, codec::compression_name(c)));
        r.headers.push_back(net::RecordHeader{"h", io::Buffer::copy_of(fmt::format("{}", n))});
        r.timestamp_ms = 1'600'000'000'000 + n;
        const int number = n;
        DeliveryCallback done = [&where, &failures, number](const absl::StatusOr<RecordMetadata>& md) {
          if (!md.ok()) {
            ++failures;
            return;
          }
          where[{md->partition, md->offset}] = number;
        };
        (void)co_await p.send(std::move(r), std::move(done));
      }
      co_await p.flush();
      EXPECT_EQ(p.pending(), 0u);
    }
    EXPECT_EQ(failures, 0);
    EXPECT_EQ(where.size(), 500u);

    ConsumerConfig ccfg;
    ccfg.client = options();
    ccfg.auto_offset_reset = OffsetReset::kEarliest;
    Consumer consumer(ctx, ccfg);
    consumer.assign({TopicPartition("rt", 0), TopicPartition("rt", 1), TopicPartition("rt", 2)});
    std::vector<ConsumerRecord> got = co_await read(consumer, 500);
    EXPECT_EQ(got.size(), 500u);
    std::map<int32_t, int64_t> last;
    for (const ConsumerRecord& r : got) {
      auto it = where.find({r.partition, r.offset});
      EXPECT_NE(it, where.end()) << r.partition << "/" << r.offset;
      if (it == where.end()) continue;
      const int k = it->second;
      const std::string key = fmt::format("key-{}", k % 17);
      EXPECT_EQ(text(r.key), key);
      EXPECT_TRUE(absl::StartsWith(text(r.value), fmt::format("value-{}-", k)));
      EXPECT_EQ(r.timestamp_ms, 1'600'000'000'000 + k);
      EXPECT_EQ(r.headers.size(), 1u);
      if (r.headers.size() == 1) {
        EXPECT_EQ(text(r.headers[0].value), fmt::format("{}", k));
      }
      EXPECT_EQ(r.partition, partition_for_key(bytes(key), 3));
      if (last.contains(r.partition)) {
        EXPECT_GT(r.offset, last[r.partition]);
      }
      last[r.partition] = r.offset;
    }
    for (int32_t p = 0; p < 3; ++p) {
      EXPECT_EQ(consumer.position(TopicPartition("rt", p)), consumer.end_offset_seen(TopicPartition("rt", p)));
    }
  });
}

// A transactional producer's aborted transaction between two committed
// ones (raw requests, as librdkafka sends them): a read_committed consumer
// skips the aborted batch by the fetch's aborted-transaction list, a
// read_uncommitted one returns everything.
// Transactions committed and aborted; DescribeProducers shows the open one
// while it is open; read_committed consumers skip the aborted one.
TEST_F(ClientTest, TransactionsDescribeProducersAndReadCommitted) {
  run([this](io::Context& ctx) -> io::Task<void> {
    Cluster cluster(ctx, options());
    co_await create(cluster, "tx", 1);
    const std::string tid = "client-test-tx";
    net::Peer* peer = co_await leader_of(cluster, TopicPartition("tx", 0));
    const net::InitProducerIdResponse ids = co_await init_transactional(ctx, peer, tid, 60000);
    int32_t sequence = 0;
    // One transaction of three records, committed or aborted.
    auto transaction = [&](std::string name, bool commit) -> io::Task<void> {
      net::AddPartitionsToTxnRequest add;
      add.v3_and_below_transactional_id = tid;
      add.v3_and_below_producer_id = ids.producer_id;
      add.v3_and_below_producer_epoch = ids.producer_epoch;
      auto& t = add.v3_and_below_topics.emplace_back();
      t.name = "tx";
      t.partitions = {0};
      int16_t added = -1;
      for (int attempt = 0; attempt < 50 && added != 0; ++attempt) {
        absl::StatusOr<net::AddPartitionsToTxnResponse> r = co_await peer->call<net::AddPartitionsToTxnResponse>(add, 3, 5s);
        added = r.ok() && !r->results_by_topic_v3_and_below.empty()
                    ? r->results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
                    : int16_t{-1};
        if (added != 0) co_await ctx.clock().sleep_for(100ms);
      }
      EXPECT_EQ(added, 0) << name;
      std::vector<std::string> values;
      for (int i = 0; i < 3; ++i) values.push_back(fmt::format("{}-{}", name, i));
      absl::StatusOr<net::ProduceResponse> produced = co_await produce_transactional(
          peer, tid, ids, sequence, TopicPartition("tx", 0), std::move(values), 1'600'000'000'000);
      sequence += 3;
      EXPECT_TRUE(produced.ok() && produced->responses[0].partition_responses[0].error_code == 0) << name;
      // Open: the partition's leader shows the producer's transaction
      // starting at the batch just written; its coordinator shows it
      // ongoing over the partition.
      absl::StatusOr<std::vector<ProducerState>> open = co_await describe_producers(cluster, TopicPartition("tx", 0));
      EXPECT_TRUE(open.ok()) << open.status();
      if (!open.ok()) co_return;
      EXPECT_EQ(open->size(), 1u) << name;
      if (produced.ok() && open->size() == 1) {
        const ProducerState& state = open->front();
        EXPECT_EQ(state.producer_id, ids.producer_id);
        EXPECT_EQ(state.producer_epoch, ids.producer_epoch);
        EXPECT_EQ(state.last_sequence, sequence - 1);
        EXPECT_EQ(state.last_timestamp_ms, 1'600'000'000'000);
        EXPECT_EQ(state.current_txn_start_offset, produced->responses[0].partition_responses[0].base_offset) << name;
      }
      absl::StatusOr<TransactionDescription> described = co_await describe_transaction(cluster, tid);
      EXPECT_TRUE(described.ok()) << described.status();
      if (!described.ok()) co_return;
      EXPECT_EQ(described->state, "Ongoing");
      EXPECT_EQ(described->producer_id, ids.producer_id);
      EXPECT_EQ(described->timeout_ms, 60000);
      EXPECT_GE(described->start_time_ms, 0);
      EXPECT_EQ(described->partitions, std::vector<TopicPartition>{TopicPartition("tx", 0)});
      // Its records are years old (their timestamps), but the coordinator
      // holds it ongoing there: not hanging.
      std::vector<TopicPartition> partitions{TopicPartition("tx", 0)};
      absl::StatusOr<std::vector<HangingTransaction>> hanging =
          co_await find_hanging_transactions(cluster, partitions, 1min);
      EXPECT_TRUE(hanging.ok()) << hanging.status();
      if (hanging.ok()) {
        EXPECT_TRUE(hanging->empty()) << name;
      }
      net::EndTxnRequest end;
      end.transactional_id = tid;
      end.producer_id = ids.producer_id;
      end.producer_epoch = ids.producer_epoch;
      end.committed = commit;
      int16_t ended = -1;
      for (int attempt = 0; attempt < 50 && ended != 0; ++attempt) {
        absl::StatusOr<net::EndTxnResponse> r = co_await peer->call<net::EndTxnResponse>(end, 1, 5s);
        ended = r.ok() ? r->error_code : int16_t{-1};
        if (ended != 0) co_await ctx.clock().sleep_for(100ms);
      }
      EXPECT_EQ(ended, 0) << name;
    };
    co_await transaction("first", true);
    co_await transaction("aborted", false);
    co_await transaction("second", true);
    // Every transaction ended: none open; the marker keeps the coordinator
    // epoch.
    absl::StatusOr<std::vector<ProducerState>> ended = co_await describe_producers(cluster, TopicPartition("tx", 0));
    EXPECT_TRUE(ended.ok()) << ended.status();
    if (!ended.ok()) co_return;
    EXPECT_EQ(ended->size(), 1u);
    if (ended->size() == 1) {
      EXPECT_EQ(ended->front().last_sequence, 8);
      EXPECT_EQ(ended->front().current_txn_start_offset, -1);
      EXPECT_GE(ended->front().coordinator_epoch, 0);
    }
    absl::StatusOr<std::vector<TransactionListing>> listed = co_await list_transactions(cluster);
    EXPECT_TRUE(listed.ok()) << listed.status();
    if (!listed.ok()) co_return;
    EXPECT_EQ(listed->size(), 1u);
    if (listed->size() == 1) {
      EXPECT_EQ(listed->front().transactional_id, tid);
      EXPECT_EQ(listed->front().producer_id, ids.producer_id);
      EXPECT_EQ(listed->front().state, "CompleteCommit");
    }
    absl::StatusOr<TransactionDescription> done = co_await describe_transaction(cluster, tid);
    EXPECT_TRUE(done.ok()) << done.status();
    if (!done.ok()) co_return;
    EXPECT_EQ(done->state, "CompleteCommit");
    EXPECT_TRUE(done->partitions.empty());
    absl::StatusOr<TransactionDescription> unknown = co_await describe_transaction(cluster, "no-such-id");
    EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound) << unknown.status();
    absl::StatusOr<std::vector<ProducerState>> no_partition =
        co_await describe_producers(cluster, TopicPartition("tx", 1));
    EXPECT_TRUE(absl::StrContains(no_partition.status().message(), "UNKNOWN_TOPIC_OR_PARTITION"))
        << no_partition.status();
    absl::StatusOr<std::vector<ProducerState>> no_topic =
        co_await describe_producers(cluster, TopicPartition("no-such-topic", 0));
    EXPECT_TRUE(absl::StrContains(no_topic.status().message(), "UNKNOWN_TOPIC_OR_PARTITION")) << no_topic.status();

    const std::array<IsolationLevel, 2> isolations{IsolationLevel::kReadCommitted, IsolationLevel::kReadUncommitted};
    for (const IsolationLevel isolation : isolations) {
      ConsumerConfig cc;
      cc.client = options();
      cc.auto_offset_reset = OffsetReset::kEarliest;
      cc.isolation = isolation;
      Consumer consumer(ctx, cc);
      consumer.assign({TopicPartition("tx", 0)});
      const bool committed = isolation == IsolationLevel::kReadCommitted;
      std::vector<ConsumerRecord> got = co_await read(consumer, committed ? 6 : 9);
      std::vector<std::string> values;
      for (const ConsumerRecord& r : got) values.push_back(text(r.value));
      const std::vector<std::string> want =
          committed ? std::vector<std::string>{"first-0", "first-1", "first-2", "second-0", "second-1", "second-2"}
                    : std::vector<std::string>{"first-0",   "first-1",   "first-2",  "aborted-0", "aborted-1",
                                               "aborted-2", "second-0", "second-1", "second-2"};
      EXPECT_EQ(values, want) << (committed ? "read_committed" : "read_uncommitted");
    }
  });
}

// Without transaction.partition.verification.enable a transactional batch
// that no AddPartitionsToTxn announced (as one held up in the network until
// after its transaction ended) opens a transaction no coordinator knows:
// find_hanging_transactions finds it once it is older than the longest
// transaction timeout, and abort_transaction ends it.
class HangingTransactionTest : public ClientTest {
 protected:
  HangingTransactionTest() : ClientTest(false) {}
};

TEST_F(HangingTransactionTest, FoundOnceOlderThanTheLongestTimeoutAndAborted) {
  run([this](io::Context& ctx) -> io::Task<void> {
    Cluster cluster(ctx, options());
    co_await create(cluster, "hang", 1);
    const TopicPartition tp("hang", 0);
    const std::string tid = "hanging-tx";
    net::Peer* peer = co_await leader_of(cluster, tp);
    const net::InitProducerIdResponse ids = co_await init_transactional(ctx, peer, tid, 10000);
    std::vector<std::string> values{"stray"};
    absl::StatusOr<net::ProduceResponse> produced =
        co_await produce_transactional(peer, tid, ids, 0, tp, std::move(values), io::to_ms(ctx.clock().wall_now()));
    EXPECT_TRUE(produced.ok() && produced->responses[0].partition_responses[0].error_code == 0);
    if (!produced.ok()) co_return;
    const int64_t start = produced->responses[0].partition_responses[0].base_offset;

    std::vector<TopicPartition> partitions{tp};
    // Younger than the longest timeout: its coordinator may yet end it.
    absl::StatusOr<std::vector<HangingTransaction>> young =
        co_await find_hanging_transactions(cluster, partitions, 1min);
    EXPECT_TRUE(young.ok()) << young.status();
    if (young.ok()) { EXPECT_TRUE(young->empty()); }
    co_await ctx.clock().sleep_for(61s);
    absl::StatusOr<std::vector<HangingTransaction>> hanging =
        co_await find_hanging_transactions(cluster, partitions, 1min);
    EXPECT_TRUE(hanging.ok()) << hanging.status();
    if (!hanging.ok()) co_return;
    EXPECT_EQ(hanging->size(), 1u);
    if (hanging->size() == 1) {
      EXPECT_EQ(hanging->front().partition, tp);
      EXPECT_EQ(hanging->front().producer.producer_id, ids.producer_id);
      EXPECT_EQ(hanging->front().producer.current_txn_start_offset, start);
    }
    // Nothing is open from any other offset.
    absl::Status wrong = co_await abort_transaction(cluster, tp, start + 1);
    EXPECT_EQ(wrong.code(), absl::StatusCode::kNotFound) << wrong;
    absl::Status aborted = co_await abort_transaction(cluster, tp, start);
    EXPECT_TRUE(aborted.ok()) << aborted;
    absl::StatusOr<std::vector<ProducerState>> after = co_await describe_producers(cluster, tp);
    EXPECT_TRUE(after.ok()) << after.status();
    if (after.ok() && after->size() == 1) { EXPECT_EQ(after->front().current_txn_start_offset, -1); }
    absl::StatusOr<std::vector<HangingTransaction>> none = co_await find_hanging_transactions(cluster, partitions, 1min);
    EXPECT_TRUE(none.ok() && none->empty());
    // read_committed consumers get past it: the stray record is aborted.
    ConsumerConfig cc;
    cc.client = options();
    cc.auto_offset_reset = OffsetReset::kEarliest;
    cc.isolation = IsolationLevel::kReadCommitted;
    Consumer consumer(ctx, cc);
    consumer.assign({tp});
    ProducerConfig pc;
    pc.client = options();
    Producer plain(ctx, pc);
    ProducerRecord r;
    r.topic = "hang";
    r.partition = 0;
    r.value = io::Buffer::copy_of("after");
    bool delivered = false;
    DeliveryCallback done = [&delivered](const absl::StatusOr<RecordMetadata>& md) { delivered = md.ok(); };
    (void)co_await plain.send(std::move(r), std::move(done));
    co_await plain.flush();
    EXPECT_TRUE(delivered);
    std::vector<ConsumerRecord> got = co_await read(consumer, 1);
    EXPECT_EQ(got.size(), 1u);
    if (got.size() == 1) { EXPECT_EQ(text(got[0].value), "after"); }
  });
}

TEST_F(ClientTest, AcksZeroAndOneAndUnkeyedStickyBatches) {
  run([this](io::Context& ctx) -> io::Task<void> {
    Cluster admin(ctx, options());
    co_await create(admin, "acks", 3);
    const std::array<int16_t, 2> levels{0, 1};
    for (int16_t acks : levels) {
      ProducerConfig pc;
      pc.client = options();
      pc.acks = acks;
      pc.linger = 20ms;
      Producer p(ctx, pc);
      std::vector<RecordMetadata> mds;
      for (int i = 0; i < 50; ++i) {
        ProducerRecord r;
        r.topic = "acks";
        r.value = io::Buffer::copy_of(fmt::format("a{}-{}", acks, i));
        DeliveryCallback done = [&mds](const absl::StatusOr<RecordMetadata>& md) {
          EXPECT_TRUE(md.ok()) << md.status();
          if (md.ok()) mds.push_back(*md);
        };
        (void)co_await p.send(std::move(r), std::move(done));
      }
      co_await p.flush();
      EXPECT_EQ(mds.size(), 50u);
      std::set<int32_t> partitions;
      for (const RecordMetadata& md : mds) {
        partitions.insert(md.partition);
        if (acks == 0) {
          EXPECT_EQ(md.offset, -1);
        }
        if (acks == 1) {
          EXPECT_GE(md.offset, 0);
        }
      }
      // Records sent within one linger go to one sticky partition.
      EXPECT_EQ(partitions.size(), 1u);
    }
    std::vector<TopicPartition> tps{TopicPartition("acks", 0), TopicPartition("acks", 1), TopicPartition("acks", 2)};
    std::map<TopicPartition, absl::StatusOr<ListedOffset>> ends = co_await list_offsets(admin, tps, kLatestOffset);
    int64_t total = 0;
    for (const auto& [tp, lo] : ends) {
      EXPECT_TRUE(lo.ok()) << lo.status();
      if (lo.ok()) total += lo->offset;
    }
    EXPECT_EQ(total, 100);
  });
}

TEST_F(ClientTest, OffsetResetAndDeleteRecords) {
  run([this](io::Context& ctx) -> io::Task<void> {
    ProducerConfig pc;
    pc.client = options();
    Producer producer(ctx, pc);
    co_await create(producer.cluster(), "reset", 1);
    for (int i = 0; i < 10; ++i) {
      ProducerRecord r;
      r.topic = "reset";
      r.partition = 0;
      r.value = io::Buffer::copy_of(fmt::format("r{}", i));
      absl::StatusOr<RecordMetadata> md = co_await producer.produce(std::move(r));
      EXPECT_TRUE(md.ok() && md->offset == i) << md.status();
    }
    const TopicPartition tp("reset", 0);
    std::map<TopicPartition, int64_t> to{{tp, 5}};
    std::map<TopicPartition, absl::StatusOr<int64_t>> deleted = co_await delete_records(producer.cluster(), to);
    EXPECT_TRUE(deleted.at(tp).ok() && *deleted.at(tp) == 5) << deleted.at(tp).status();
    std::vector<TopicPartition> tps{tp};
    std::map<TopicPartition, absl::StatusOr<ListedOffset>> earliest =
        co_await list_offsets(producer.cluster(), tps, kEarliestOffset);
    EXPECT_TRUE(earliest.at(tp).ok() && earliest.at(tp)->offset == 5) << earliest.at(tp).status();

    // Below the log start: earliest resets to it.
    ConsumerConfig cc;
    cc.client = options();
    cc.auto_offset_reset = OffsetReset::kEarliest;
    Consumer consumer(ctx, cc);
    consumer.assign({tp});
    consumer.seek(tp, 0);
    std::vector<ConsumerRecord> got = co_await read(consumer, 5);
    EXPECT_EQ(got.size(), 5u);
    if (!got.empty()) {
      EXPECT_EQ(got[0].offset, 5);
    }
    EXPECT_EQ(consumer.position(tp), 10);

    // auto.offset.reset=none: the poll fails and names the partition.
    cc.auto_offset_reset = OffsetReset::kNone;
    Consumer strict(ctx, cc);
    strict.assign({tp});
    strict.seek(tp, 2);
    absl::StatusOr<std::vector<ConsumerRecord>> r = co_await strict.poll(2s);
    EXPECT_FALSE(r.ok());
    EXPECT_TRUE(absl::StrContains(r.status().message(), "OFFSET_OUT_OF_RANGE")) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "reset-0")) << r.status();

    // seek_to_end: nothing until something new is written.
    strict.seek_to_end({tp});
    absl::StatusOr<std::vector<ConsumerRecord>> none = co_await strict.poll(300ms);
    EXPECT_TRUE(none.ok() && none->empty());
    EXPECT_EQ(strict.position(tp), 10);
  });
}

TEST_F(ClientTest, AdminTopicsAndConfigs) {
  run([this](io::Context& ctx) -> io::Task<void> {
    Cluster cluster(ctx, options());
    co_await create(cluster, "adm", 2);
    NewTopic again;
    again.name = "adm";
    std::vector<NewTopic> dup{again};
    absl::StatusOr<std::map<std::string, CreatedTopic>> r = co_await create_topics(cluster, dup);
    EXPECT_TRUE(r.ok());
    if (r.ok()) {
      EXPECT_TRUE(absl::StrContains((*r)["adm"].status.message(), "TOPIC_ALREADY_EXISTS"));
    }

    NewTopic bad;
    bad.name = "bad";
    bad.configs["retention.ms"] = "not-a-number";
    std::vector<NewTopic> bads{bad};
    r = co_await create_topics(cluster, bads);
    EXPECT_TRUE(r.ok() && !(*r)["bad"].status.ok());

    std::map<std::string, int32_t> grow{{"adm", 4}};
    absl::StatusOr<std::map<std::string, absl::Status>> grown = co_await create_partitions(cluster, grow);
    EXPECT_TRUE(grown.ok() && (*grown)["adm"].ok());
    std::vector<std::string> names{"adm"};
    absl::StatusOr<std::vector<TopicInfo>> described = co_await describe_topics(cluster, names);
    EXPECT_TRUE(described.ok() && described->size() == 1 && (*described)[0].partitions.size() == 4);
    if (described.ok() && !described->empty()) {
      for (const PartitionInfo& p : (*described)[0].partitions) EXPECT_EQ(p.leader, 1);
    }

    std::vector<AlterConfig> ops{AlterConfig{"retention.ms", AlterOp::kSet, "3600000"}};
    absl::Status altered = co_await incremental_alter_configs(cluster, ResourceType::kTopic, "adm", ops);
    EXPECT_TRUE(altered.ok()) << altered;
    absl::StatusOr<std::vector<ConfigEntry>> configs = co_await describe_configs(cluster, ResourceType::kTopic, "adm");
    EXPECT_TRUE(configs.ok()) << configs.status();
    bool found = false;
    if (configs.ok()) {
      for (const ConfigEntry& e : *configs) {
        if (e.name == "retention.ms") {
          found = true;
          EXPECT_EQ(e.value, "3600000");
          EXPECT_FALSE(e.is_default);
        }
      }
    }
    EXPECT_TRUE(found);

    std::vector<std::string> gone{"adm", "missing"};
    absl::StatusOr<std::map<std::string, absl::Status>> deleted = co_await delete_topics(cluster, gone);
    EXPECT_TRUE(deleted.ok());
    if (deleted.ok()) {
      EXPECT_TRUE((*deleted)["adm"].ok()) << (*deleted)["adm"];
      EXPECT_TRUE(absl::StrContains((*deleted)["missing"].message(), "UNKNOWN_TOPIC_OR_PARTITION"));
    }
    std::vector<std::string> all;
    absl::StatusOr<std::vector<TopicInfo>> listed = co_await describe_topics(cluster, all);
    EXPECT_TRUE(listed.ok());
    if (listed.ok()) {
      for (const TopicInfo& t : *listed) EXPECT_NE(t.name, "adm");
    }
  });
}

TEST_F(ClientTest, SendFailsFastForBadRecords) {
  run([this](io::Context& ctx) -> io::Task<void> {
    ProducerConfig pc;
    pc.client = options();
    pc.client.allow_auto_create_topics = false;
    pc.max_request_size = 1000;
    pc.max_block = 2s;
    Producer producer(ctx, pc);
    co_await create(producer.cluster(), "small", 1);
    ProducerRecord big;
    big.topic = "small";
    big.value = io::Buffer::copy_of(std::string(2000, 'x'));
    absl::StatusOr<RecordMetadata> r = co_await producer.produce(std::move(big));
    EXPECT_TRUE(absl::StrContains(r.status().message(), "MESSAGE_TOO_LARGE")) << r.status();
    ProducerRecord wrong;
    wrong.topic = "small";
    wrong.partition = 3;
    r = co_await producer.produce(std::move(wrong));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    ProducerRecord unknown;
    unknown.topic = "no-such-topic";
    r = co_await producer.produce(std::move(unknown));
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(producer.stats().records_failed, 3u);
  });
}

}  // namespace
}  // namespace brook::client
