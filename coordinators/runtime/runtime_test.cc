// coordinators/runtime/runtime_test.cc
//
// The coordinator runtime in the simulator: key placement, the shard
// table, batched writes (sharing, epochs, sizes, failures, cancellation)
// and loads (replay, transactions and their markers, control batches,
// superseded and damaged loads).
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coordinators/runtime/batched_writer.h"
#include "coordinators/runtime/loader.h"
#include "coordinators/runtime/record_log.h"
#include "coordinators/runtime/shards.h"
#include "io/when.h"
#include "net/kafka/record_batch.h"
#include "sim/world.h"

namespace brook::runtime {
namespace {

using namespace std::chrono_literals;
using net::Error;

io::Buffer bytes(std::string_view s) { return io::Buffer::copy_of(s); }

Record record(std::string_view key, std::optional<std::string_view> value) {
  return Record{bytes(key), value.has_value() ? std::optional<io::Buffer>(bytes(*value)) : std::nullopt};
}

TEST(Placement, MatchesJavaStringHash) {
  // Values of Java's String.hashCode, and abs(hash) % 50 as Kafka places
  // groups and transactional ids.
  EXPECT_EQ(java_string_hash("my-group"), -1906497762);
  EXPECT_EQ(java_string_hash("grüße"), 98768023);
  EXPECT_EQ(java_string_hash("😀g"), 54959972);
  EXPECT_EQ(java_string_hash(""), 0);
  // A negative hash: abs, not the sign bit cleared (which gives 36).
  EXPECT_EQ(partition_for_key("my-group", 50), 12);
  EXPECT_EQ(partition_for_key("nemesis-group", 50), 44);
  EXPECT_EQ(partition_for_key("test-group", 50), 12);
  EXPECT_EQ(partition_for_key("console-consumer-12345", 50), 6);
  // Integer.MIN_VALUE hashes go to partition 0, as Utils.abs takes them to 0.
  for (std::string_view k : {"polygenelubricants", "GydZG_", "DESIGNING WORKHOUSES"}) {
    EXPECT_EQ(java_string_hash(k), INT32_MIN) << k;
    EXPECT_EQ(partition_for_key(k, 50), 0) << k;
    EXPECT_EQ(partition_for_key(k, 7), 0) << k;
  }
}

TEST(ShardTable, LoadServeUnload) {
  ShardTable t;
  EXPECT_EQ(t.check(3), Error::kNotCoordinator);
  t.begin_load(3, 7);
  EXPECT_EQ(t.check(3), Error::kCoordinatorLoadInProgress);
  EXPECT_TRUE(t.loading(3));
  EXPECT_EQ(t.epoch(3), 7);
  EXPECT_FALSE(t.finish_load(3, 6));  // a stale load
  EXPECT_TRUE(t.finish_load(3, 7));
  EXPECT_FALSE(t.finish_load(3, 7));  // already done
  EXPECT_EQ(t.check(3), Error::kNone);
  EXPECT_TRUE(t.serving(3, 7));
  EXPECT_FALSE(t.serving(3, 8));
  t.begin_load(1, 2);
  EXPECT_EQ(t.partitions(), (std::vector<int32_t>{1, 3}));
  // A newer epoch starts the load again.
  t.begin_load(3, 8);
  EXPECT_EQ(t.check(3), Error::kCoordinatorLoadInProgress);
  EXPECT_TRUE(t.unload(3));
  EXPECT_FALSE(t.unload(3));
  EXPECT_EQ(t.check(3), Error::kNotCoordinator);
  EXPECT_EQ(t.epoch(3), std::nullopt);
  // The lock outlives loads (a waiter may still hold it).
  io::Mutex& m = t.lock(3);
  EXPECT_EQ(&t.lock(3), &m);
  EXPECT_NE(&t.lock(1), &m);
}

// Appends into memory after `delay`; the leader epoch, a failure and the
// commit wait can be set.
class MemoryAppender final : public BatchAppender {
 public:
  explicit MemoryAppender(io::Context& ctx) : ctx_(&ctx) {}
  Error check_leader(int32_t, int32_t e) override { return e == epoch ? Error::kNone : Error::kNotCoordinator; }
  io::Task<Appended> append(int32_t partition, int32_t e, std::vector<Record> records) override {
    co_await ctx_->clock().sleep_for(delay);
    if (e != epoch) co_return Appended{Error::kNotCoordinator, -1};
    if (fail_appends > 0) {
      --fail_appends;
      co_return Appended{Error::kKafkaStorageError, -1};
    }
    batch_sizes.push_back(records.size());
    std::vector<Record>& log = partitions[partition];
    const auto first = static_cast<int64_t>(log.size());
    for (Record& r : records) log.push_back(std::move(r));
    co_return Appended{Error::kNone, first};
  }
  io::Task<Error> wait_committed(int32_t, int32_t, int64_t end_offset) override {
    co_await ctx_->clock().sleep_for(1ms);
    co_return end_offset > commit_limit ? Error::kRequestTimedOut : Error::kNone;
  }

  io::Context* ctx_;
  int32_t epoch = 1;
  io::Duration delay = 5ms;
  int fail_appends = 0;
  int64_t commit_limit = INT64_MAX;
  std::vector<size_t> batch_sizes;
  std::map<int32_t, std::vector<Record>> partitions;
};

// One simulated node that stays up; the derived harness's constructor
// starts it with what to set up on it.
struct NodeHarness {
  explicit NodeHarness(uint64_t seed) : world(seed) { node = &world.add_node(); }
  void start(std::function<void(io::Context&)> setup) {
    node->start([this, setup = std::move(setup)](io::Context& ctx) -> io::Task<void> {
      ctx_ = &ctx;
      setup(ctx);
      co_await ctx.clock().sleep_for(std::chrono::hours(1000));
    });
    world.run_for(1ms);
  }
  // Crashes the node: derived harnesses stop it before their members go.
  void stop() {
    if (stopped) return;
    stopped = true;
    node->crash();
    world.run_for(1ms);
  }
  ~NodeHarness() { stop(); }

  sim::World world;
  sim::Node* node = nullptr;
  io::Context* ctx_ = nullptr;
  bool stopped = false;
};

struct WriterHarness : NodeHarness {
  WriterHarness() : NodeHarness(11) {
    start([this](io::Context& ctx) {
      appender = std::make_unique<MemoryAppender>(ctx);
      writer = std::make_unique<BatchedWriter>(*appender, 64);
    });
  }
  ~WriterHarness() { stop(); }
  // Starts a write of `n` records (keys `name`-i, 8 bytes each).
  std::shared_ptr<std::optional<RecordLog::Written>> write(int32_t partition, int32_t epoch, std::string name,
                                                           int n = 1) {
    auto slot = std::make_shared<std::optional<RecordLog::Written>>();
    std::vector<Record> records;
    for (int i = 0; i < n; ++i) records.push_back(record(fmt::format("{}-{}", name, i), "v"));
    auto run = [](BatchedWriter* w, int32_t p, int32_t e, std::vector<Record> rs,
                  std::optional<RecordLog::Written>* out) -> io::Task<void> {
      *out = co_await w->write(p, e, std::move(rs));
    };
    node->spawn(run(writer.get(), partition, epoch, std::move(records), slot.get()));
    return slot;
  }
  void settle() { world.run_for(1s); }

  std::unique_ptr<MemoryAppender> appender;
  std::unique_ptr<BatchedWriter> writer;
};

std::string key_of(const Record& r) { return std::string(r.key.view().begin(), r.key.view().end()); }

TEST(BatchedWriter, QueuedWritesShareTheNextBatchAndLearnTheirOffsets) {
  WriterHarness h;
  std::vector<std::shared_ptr<std::optional<RecordLog::Written>>> writes;
  for (int i = 0; i < 5; ++i) writes.push_back(h.write(0, 1, fmt::format("w{}", i), i + 1));
  h.settle();
  // The first write appends alone; the four that queued meanwhile share
  // batches of up to 64 bytes (records of 5 bytes: 2+3+4 records, then 5).
  EXPECT_EQ(h.writer->stats().writes, 5);
  EXPECT_EQ(h.writer->stats().batches, 3);
  EXPECT_EQ(h.appender->batch_sizes, (std::vector<size_t>{1, 9, 5}));
  const std::vector<Record>& log = h.appender->partitions[0];
  ASSERT_EQ(log.size(), 15u);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(writes[i]->has_value());
    const RecordLog::Written& w = **writes[i];
    EXPECT_EQ(w.error, Error::kNone);
    // Each write's records are contiguous at its own offset.
    for (int j = 0; j <= i; ++j) EXPECT_EQ(key_of(log[w.base_offset + j]), fmt::format("w{}-{}", i, j));
  }
}

TEST(BatchedWriter, BatchesHoldOneEpochAndAtMostTheByteLimit) {
  WriterHarness h;
  auto first = h.write(0, 1, "a");
  auto stale = h.write(0, 0, "s");  // refused before it queues
  auto b = h.write(0, 1, "b", 5);   // 5 records of 4 bytes: 20
  auto c = h.write(0, 1, "c", 5);
  auto d = h.write(0, 1, "dd", 20);  // larger than a batch: goes alone
  h.settle();
  EXPECT_EQ((*stale)->error, Error::kNotCoordinator);
  for (auto* w : {&first, &b, &c, &d}) EXPECT_EQ((**w)->error, Error::kNone);
  EXPECT_EQ(h.appender->batch_sizes, (std::vector<size_t>{1, 10, 20}));
  // Writes of another partition queue on their own.
  auto other = h.write(1, 1, "o");
  h.settle();
  EXPECT_EQ((*other)->base_offset, 0);
}

TEST(BatchedWriter, AFailedAppendFailsEveryWriteItCarried) {
  WriterHarness h;
  auto first = h.write(0, 1, "a");
  auto b = h.write(0, 1, "b");
  auto c = h.write(0, 1, "c");
  h.appender->fail_appends = 2;  // the first and the shared second batch
  h.settle();
  EXPECT_EQ((*first)->error, Error::kKafkaStorageError);
  EXPECT_EQ((*b)->error, Error::kKafkaStorageError);
  EXPECT_EQ((*c)->error, Error::kKafkaStorageError);
  EXPECT_TRUE(h.appender->partitions[0].empty());
  // Leadership moved on mid-queue: the append says NOT_COORDINATOR.
  auto d = h.write(0, 1, "d");
  h.world.run_for(1ms);
  h.appender->epoch = 2;
  h.settle();
  EXPECT_EQ((*d)->error, Error::kNotCoordinator);
  // A write appended but not committed in time fails too.
  h.appender->epoch = 1;
  h.appender->commit_limit = 0;
  auto e = h.write(0, 1, "e");
  h.settle();
  EXPECT_EQ((*e)->error, Error::kRequestTimedOut);
}

TEST(BatchedWriter, ACancelledAppenderFailsItsBatchAndAWaiterTakesOver) {
  WriterHarness h;
  h.appender->delay = 50ms;
  // The first write is abandoned 10 ms into its append.
  auto abandoned = std::make_shared<std::optional<bool>>();
  auto run = [](WriterHarness* hh, std::optional<bool>* out) -> io::Task<void> {
    std::vector<Record> rs;
    rs.push_back(record("x", "v"));
    auto r = co_await io::with_timeout(hh->ctx_->clock(), 10ms, hh->writer->write(0, 1, std::move(rs)));
    *out = r.has_value();
  };
  h.node->spawn(run(&h, abandoned.get()));
  h.world.run_for(1ms);
  auto queued = h.write(0, 1, "q");
  h.settle();
  ASSERT_TRUE(abandoned->has_value());
  EXPECT_FALSE(**abandoned);
  // The queued write did not wait forever: it appended on its own.
  ASSERT_TRUE(queued->has_value());
  EXPECT_EQ((*queued)->error, Error::kNone);
  ASSERT_EQ(h.appender->partitions[0].size(), 1u);
  EXPECT_EQ(key_of(h.appender->partitions[0][0]), "q-0");
}

// A coordinator that keeps what it replays.
class RecordingCoordinator final : public Coordinator {
 public:
  void begin_load(int32_t partition, int32_t epoch) override {
    shards.begin_load(partition, epoch);
    replayed[partition].clear();
  }
  absl::Status replay(int32_t partition, int64_t offset, const std::optional<io::Buffer>& key,
                      const std::optional<io::Buffer>& value) override {
    if (!key.has_value()) return absl::DataLossError("a record without a key");
    std::string k(key->view().begin(), key->view().end());
    if (k == "poison") return absl::DataLossError("poison");
    replayed[partition].push_back(
        fmt::format("{}:{}={}", offset, k, value ? std::string(value->view().begin(), value->view().end()) : "null"));
    return absl::OkStatus();
  }
  absl::Status replay_transactional(int32_t partition, int64_t offset, int64_t producer_id,
                                    const std::optional<io::Buffer>& key,
                                    const std::optional<io::Buffer>& value) override {
    absl::Status s = replay(partition, offset, key, value);
    if (s.ok()) replayed[partition].back() += fmt::format(" (txn {})", producer_id);
    return s;
  }
  void replay_marker(int32_t partition, int64_t offset, int64_t producer_id, bool commit) override {
    replayed[partition].push_back(fmt::format("{}:{} {}", offset, commit ? "commit" : "abort", producer_id));
  }
  void finish_load(int32_t partition, int32_t epoch) override { shards.finish_load(partition, epoch); }
  void unload(int32_t partition) override {
    shards.unload(partition);
    ++unloads;
  }
  std::optional<int32_t> loaded_epoch(int32_t partition) const override { return shards.epoch(partition); }
  bool loading(int32_t partition) const override { return shards.loading(partition); }
  std::vector<int32_t> loaded_partitions() const override { return shards.partitions(); }

  ShardTable shards;
  std::map<int32_t, std::vector<std::string>> replayed;
  int unloads = 0;
};

// A partition of record batches; reads take `delay` and return one batch.
class MemoryReader final : public PartitionReader {
 public:
  explicit MemoryReader(io::Context& ctx) : ctx_(&ctx) {}
  void add(std::vector<std::pair<std::string, std::optional<std::string>>> records, bool control = false) {
    net::RecordBatchOptions o;
    o.control = control;
    add_batch(std::move(records), o);
  }
  // A transactional batch of `producer_id`.
  void add_transactional(std::vector<std::pair<std::string, std::optional<std::string>>> records,
                         int64_t producer_id) {
    net::RecordBatchOptions o;
    o.producer_id = producer_id;
    o.producer_epoch = 0;
    o.transactional = true;
    add_batch(std::move(records), o);
  }
  // A commit or abort marker of `producer_id`, or another control batch.
  void add_marker(net::ControlRecordType type, int64_t producer_id) {
    net::RecordBatchOptions o;
    o.base_offset = end;
    o.producer_id = producer_id;
    o.producer_epoch = 0;
    o.control = true;
    o.transactional = type == net::ControlRecordType::kCommit || type == net::ControlRecordType::kAbort;
    net::RecordBatchBuilder b(o);
    net::NewRecord r;
    r.key = net::encode_control_record_key(net::ControlRecordKey{net::kControlRecordKeyVersion, type});
    r.value = net::encode_end_txn_marker(net::EndTxnMarker{});
    b.append(std::move(r));
    absl::StatusOr<io::Buffer> built = b.build();
    ASSERT_TRUE(built.ok());
    batches.emplace_back(end, *built);
    end += 1;
  }
  void add_batch(std::vector<std::pair<std::string, std::optional<std::string>>> records,
                 net::RecordBatchOptions o) {
    o.base_offset = end;
    net::RecordBatchBuilder b(o);
    for (auto& [k, v] : records) {
      net::NewRecord r;
      r.key = bytes(k);
      if (v.has_value()) r.value = bytes(*v);
      b.append(std::move(r));
    }
    absl::StatusOr<io::Buffer> built = b.build();
    ASSERT_TRUE(built.ok());
    batches.emplace_back(end, *built);
    end += static_cast<int64_t>(records.size());
  }
  std::optional<std::pair<int64_t, int64_t>> bounds(int32_t) override {
    return std::pair<int64_t, int64_t>{start, end};
  }
  io::Task<absl::StatusOr<Chunk>> read(int32_t, int64_t offset, size_t) override {
    co_await ctx_->clock().sleep_for(delay);
    ++reads;
    Chunk out;
    if (empty_reads > 0) {
      // A read that found nothing (the disk garbled it).
      --empty_reads;
      co_return out;
    }
    if (offset < start) {
      out.out_of_range = true;
      co_return out;
    }
    // The batch holding `offset` (the last one starting at or below it).
    const io::Buffer* found = nullptr;
    for (const auto& [base, batch] : batches) {
      if (base <= offset) found = &batch;
    }
    if (found != nullptr) out.records = damaged ? bytes("garbage that is no batch at all") : *found;
    co_return out;
  }
  // Each call waits `delay`, then reports what `high_watermark` and
  // `led` say.
  io::Task<Error> wait_committed(int32_t, int32_t, int64_t end_offset) override {
    co_await ctx_->clock().sleep_for(delay);
    ++commit_waits;
    if (!led) co_return Error::kNotCoordinator;
    co_return high_watermark >= end_offset ? Error::kNone : Error::kRequestTimedOut;
  }

  io::Context* ctx_;
  io::Duration delay = 1ms;
  int64_t start = 0;
  int64_t end = 0;
  bool damaged = false;
  int empty_reads = 0;
  int reads = 0;
  int64_t high_watermark = INT64_MAX;
  bool led = true;
  int commit_waits = 0;
  std::vector<std::pair<int64_t, io::Buffer>> batches;
};

struct LoadHarness : NodeHarness {
  LoadHarness() : NodeHarness(5) {
    start([this](io::Context& ctx) { reader = std::make_unique<MemoryReader>(ctx); });
  }
  ~LoadHarness() { stop(); }
  void load(int32_t partition, int32_t epoch) {
    node->spawn(load_partition(coordinator, *reader, ctx_->clock(), ctx_->log(), "__internal", partition, epoch));
  }

  RecordingCoordinator coordinator;
  std::unique_ptr<MemoryReader> reader;
};

TEST(Loader, ReplaysEveryRecordInOrderSkippingControlBatches) {
  LoadHarness h;
  h.reader->add({{"a", "1"}, {"b", "2"}});
  h.reader->add({{"commit", "marker"}}, /*control=*/true);
  h.reader->add({{"a", std::nullopt}});
  const LeadershipChange c = sync_leadership(h.coordinator, {{4, 9}});
  EXPECT_EQ(c.loads, std::vector<int32_t>{4});
  EXPECT_TRUE(c.unloaded.empty());
  EXPECT_EQ(h.coordinator.shards.check(4), Error::kCoordinatorLoadInProgress);
  h.load(4, 9);
  h.world.run_for(1s);
  EXPECT_EQ(h.coordinator.shards.check(4), Error::kNone);
  EXPECT_EQ(h.coordinator.replayed[4], (std::vector<std::string>{"0:a=1", "1:b=2", "3:a=null"}));
  // The same leadership again changes nothing; losing it unloads.
  EXPECT_TRUE(sync_leadership(h.coordinator, {{4, 9}}).loads.empty());
  const LeadershipChange lost = sync_leadership(h.coordinator, {{5, 9}});
  EXPECT_EQ(lost.loads, std::vector<int32_t>{5});
  EXPECT_EQ(lost.unloaded, std::vector<int32_t>{4});
  EXPECT_EQ(h.coordinator.shards.check(4), Error::kNotCoordinator);
}

TEST(Loader, DeliversTransactionalRecordsAndTheirMarkers) {
  LoadHarness h;
  h.reader->add({{"a", "1"}});
  h.reader->add_transactional({{"t", "2"}, {"u", "3"}}, 7);
  h.reader->add_marker(net::ControlRecordType::kCommit, 7);
  h.reader->add_transactional({{"v", "4"}}, 8);
  h.reader->add_marker(net::ControlRecordType::kAbort, 8);
  // A leader change marker means nothing to a coordinator.
  h.reader->add_marker(net::ControlRecordType::kLeaderChange, 9);
  h.reader->add({{"b", "5"}});
  sync_leadership(h.coordinator, {{1, 1}});
  h.load(1, 1);
  h.world.run_for(1s);
  EXPECT_EQ(h.coordinator.shards.check(1), Error::kNone);
  EXPECT_EQ(h.coordinator.replayed[1], (std::vector<std::string>{"0:a=1", "1:t=2 (txn 7)", "2:u=3 (txn 7)",
                                                                 "3:commit 7", "4:v=4 (txn 8)", "5:abort 8",
                                                                 "7:b=5"}));
  // A control batch whose key cannot be read damages the partition.
  LoadHarness h2;
  h2.reader->add({{"a", "1"}});
  h2.reader->add({{"x", "marker"}}, /*control=*/true);
  sync_leadership(h2.coordinator, {{1, 1}});
  h2.load(1, 1);
  h2.world.run_for(1s);
  EXPECT_EQ(h2.coordinator.shards.check(1), Error::kNotCoordinator);
  EXPECT_EQ(h2.coordinator.unloads, 1);
}

TEST(Loader, ASupersededLoadStopsAndTheNewerOneServes) {
  LoadHarness h;
  for (int i = 0; i < 5; ++i) h.reader->add({{fmt::format("k{}", i), "v"}});
  h.reader->delay = 10ms;
  sync_leadership(h.coordinator, {{0, 1}});
  h.load(0, 1);
  h.world.run_for(15ms);
  // A new leader epoch arrives mid-load: the old load gives way.
  sync_leadership(h.coordinator, {{0, 2}});
  h.load(0, 2);
  h.world.run_for(1s);
  EXPECT_EQ(h.coordinator.shards.epoch(0), 2);
  EXPECT_EQ(h.coordinator.shards.check(0), Error::kNone);
  EXPECT_EQ(h.coordinator.replayed[0].size(), 5u);
  EXPECT_EQ(h.coordinator.unloads, 0);
  // An unload during a load leaves nothing served.
  sync_leadership(h.coordinator, {{0, 3}});
  h.load(0, 3);
  h.world.run_for(15ms);
  sync_leadership(h.coordinator, {});
  h.world.run_for(1s);
  EXPECT_EQ(h.coordinator.shards.check(0), Error::kNotCoordinator);
}

// A shard is served only once all it replayed is committed: records past
// the high watermark may yet be truncated away by another leader.
TEST(Loader, ServesOnlyOnceWhatItReplayedIsCommitted) {
  LoadHarness h;
  h.reader->add({{"a", "1"}});
  h.reader->add({{"b", "2"}});
  h.reader->add({{"c", "3"}});
  h.reader->high_watermark = 2;
  sync_leadership(h.coordinator, {{0, 1}});
  h.load(0, 1);
  h.world.run_for(1s);
  EXPECT_EQ(h.coordinator.replayed[0].size(), 3u);
  EXPECT_EQ(h.coordinator.shards.check(0), Error::kCoordinatorLoadInProgress);
  EXPECT_GT(h.reader->commit_waits, 10);
  h.reader->high_watermark = 3;
  h.world.run_for(1s);
  EXPECT_EQ(h.coordinator.shards.check(0), Error::kNone);
  // Leadership lost while waiting: never served, and unloaded by the sync.
  LoadHarness h2;
  h2.reader->add({{"a", "1"}});
  h2.reader->high_watermark = 0;
  sync_leadership(h2.coordinator, {{0, 1}});
  h2.load(0, 1);
  h2.world.run_for(100ms);
  h2.reader->led = false;
  h2.world.run_for(1s);
  EXPECT_EQ(h2.coordinator.shards.check(0), Error::kCoordinatorLoadInProgress);
  const int waits = h2.reader->commit_waits;
  h2.world.run_for(1s);
  EXPECT_EQ(h2.reader->commit_waits, waits);  // the load has ended
  sync_leadership(h2.coordinator, {});
  EXPECT_EQ(h2.coordinator.shards.check(0), Error::kNotCoordinator);
}

TEST(Loader, ADamagedPartitionIsNotServed) {
  LoadHarness h;
  h.reader->add({{"a", "1"}});
  h.reader->damaged = true;
  sync_leadership(h.coordinator, {{2, 1}});
  h.load(2, 1);
  h.world.run_for(1s);
  EXPECT_EQ(h.coordinator.shards.check(2), Error::kNotCoordinator);
  // A record the coordinator cannot apply stops the load the same way.
  LoadHarness h2;
  h2.reader->add({{"a", "1"}, {"poison", "x"}});
  sync_leadership(h2.coordinator, {{2, 1}});
  h2.load(2, 1);
  h2.world.run_for(1s);
  EXPECT_EQ(h2.coordinator.shards.check(2), Error::kNotCoordinator);
  EXPECT_EQ(h2.coordinator.unloads, 1);
}

TEST(Loader, ReadsThatFindNothingBelowTheEndAreRetried) {
  LoadHarness h;
  h.reader->add({{"a", "1"}});
  h.reader->add({{"b", "2"}});
  h.reader->empty_reads = 5;
  sync_leadership(h.coordinator, {{0, 1}});
  h.load(0, 1);
  h.world.run_for(100ms);
  // Not served with part of its records.
  EXPECT_EQ(h.coordinator.shards.check(0), Error::kCoordinatorLoadInProgress);
  h.world.run_for(2s);
  EXPECT_EQ(h.coordinator.shards.check(0), Error::kNone);
  EXPECT_EQ(h.coordinator.replayed[0], (std::vector<std::string>{"0:a=1", "1:b=2"}));
  // One that never reads anything is given up (and not served).
  LoadHarness h2;
  h2.reader->add({{"a", "1"}});
  h2.reader->empty_reads = 1000;
  sync_leadership(h2.coordinator, {{0, 1}});
  h2.load(0, 1);
  h2.world.run_for(60s);
  EXPECT_EQ(h2.coordinator.shards.check(0), Error::kNotCoordinator);
  EXPECT_TRUE(h2.coordinator.replayed[0].empty());
}

TEST(Loader, ALogStartMovedByRetentionIsFollowed) {
  LoadHarness h;
  h.reader->add({{"a", "1"}});
  h.reader->add({{"b", "2"}});
  sync_leadership(h.coordinator, {{0, 1}});
  h.load(0, 1);
  h.world.run_for(std::chrono::microseconds(500));
  // Retention removes the first batch during the first read.
  h.reader->start = 1;
  h.reader->batches.erase(h.reader->batches.begin());
  h.world.run_for(1s);
  EXPECT_EQ(h.coordinator.shards.check(0), Error::kNone);
  EXPECT_EQ(h.coordinator.replayed[0], (std::vector<std::string>{"1:b=2"}));
}

}  // namespace
}  // namespace brook::runtime
