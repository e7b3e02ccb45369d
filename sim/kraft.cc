// sim/kraft.cc
//
// The kraft scenario's harness, node program and checkers (sim/kraft.h).
#include "sim/kraft.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "io/assert.h"
#include "io/scope.h"
#include "core/metadata/image.h"
#include "core/metadata/record_serde.h"
#include "io/status.h"
#include "net/kafka/messages/config_record.h"
#include "net/kafka/messages/feature_level_record.h"
#include "net/kafka/messages/partition_change_record.h"
#include "net/kafka/messages/partition_record.h"
#include "net/kafka/messages/topic_record.h"
#include "raft/raft_node.h"
#include "sim/world.h"
#include "storage/log.h"

namespace brook::sim {

namespace {

using namespace std::chrono_literals;

constexpr uint16_t kControllerPort = 9093;
constexpr uint64_t kConfigSalt = 0x4B52414654ULL;  // "KRAFT"
constexpr io::Duration kCommitWait = 10s;
constexpr io::Duration kFinalReadLimit = 1min;
constexpr size_t kFailuresMax = 20;
constexpr size_t kFinalReadBytes = 1 << 20;
// Images are compared across nodes at every this many committed batches.
constexpr uint64_t kImageCompareEvery = 64;
constexpr size_t kRecordsDecodedMax = 64 << 20;
// The workload stops creating topics here (each batch's image is a copy of
// the topic maps, so the replay's cost grows with them).
constexpr size_t kTopicsMax = 64;

uint64_t fnv1a(std::span<const std::byte> bytes, uint64_t h = 0xcbf29ce484222325ULL) {
  for (std::byte b : bytes) {
    h ^= static_cast<uint8_t>(b);
    h *= 0x100000001b3ULL;
  }
  return h;
}

struct BatchId {
  int64_t last_offset = 0;
  int32_t epoch = 0;
  uint64_t hash = 0;
  bool operator==(const BatchId&) const = default;
};

std::string describe_batch(int64_t base, const BatchId& b) {
  return fmt::format("[{}..{}] epoch {} hash {:016x}", base, b.last_offset, b.epoch, b.hash);
}

// Ground truth outside the nodes.
struct KraftOracle {
  explicit KraftOracle(int nodes)
      : node_up_to(static_cast<size_t>(nodes), 0),
        final_logs(static_cast<size_t>(nodes)),
        final_read(static_cast<size_t>(nodes), false),
        final_snapshot_end(static_cast<size_t>(nodes), 0) {}

  void violation(std::string what) {
    if (violations.size() < kFailuresMax) violations.push_back(std::move(what));
  }

  void became_leader(int32_t node_id, int32_t epoch) {
    ++elections;
    auto [it, fresh] = leaders.emplace(epoch, node_id);
    if (!fresh && it->second != node_id) {
      violation(fmt::format("election safety: nodes {} and {} both led epoch {}", it->second,
                            node_id, epoch));
    }
  }

  void vote_granted(int32_t node_id, int32_t epoch, int32_t candidate) {
    auto [it, fresh] = votes.emplace(std::make_pair(node_id, epoch), candidate);
    if (!fresh && it->second != candidate) {
      violation(fmt::format("vote safety: node {} voted for {} and {} in epoch {}", node_id,
                            it->second, candidate, epoch));
    }
  }

  // A node (by index) handed a committed batch to its listener.
  void committed_batch(int index, int64_t base, const BatchId& id) {
    auto [it, fresh] = committed.emplace(base, id);
    if (!fresh && !(it->second == id)) {
      violation(fmt::format("committed entry changed: node {} delivered {} where {} was committed",
                            index + 1, describe_batch(base, id), describe_batch(base, it->second)));
    }
    int64_t& up_to = node_up_to.at(static_cast<size_t>(index));
    up_to = std::max(up_to, id.last_offset + 1);
  }

  // A node's metadata image after replaying everything below `end`.
  void image_at(int index, int64_t end, uint64_t hash) {
    ++images_compared;
    auto [it, fresh] = images.emplace(end, std::make_pair(hash, index));
    if (!fresh && it->second.first != hash) {
      violation(fmt::format("metadata image: node {} has image {:016x} at offset {}, node {} had {:016x}",
                            index + 1, hash, end, it->second.second + 1, it->second.first));
    }
  }

  // The end of what is known committed: delivered by a listener, or
  // acknowledged to a writer (whose leader may not have delivered it yet).
  int64_t committed_end() const {
    return std::max(acked_end, committed.empty() ? 0 : committed.rbegin()->second.last_offset + 1);
  }

  std::map<int32_t, int32_t> leaders;  // epoch -> node id
  std::map<std::pair<int32_t, int32_t>, int32_t> votes;  // (node, epoch) -> candidate
  std::map<int64_t, BatchId> committed;                  // base offset -> batch
  std::map<int64_t, int32_t> acked;                      // base offset -> epoch
  std::map<int64_t, std::pair<uint64_t, int>> images;    // end offset -> (image hash, node)
  std::vector<int64_t> node_up_to;  // per node: the end of what it delivered
  std::vector<std::map<int64_t, BatchId>> final_logs;
  std::vector<bool> final_read;
  std::vector<std::string> violations;
  int64_t last_ack_ns = -1;
  int64_t acked_end = 0;
  uint64_t elections = 0;
  uint64_t appends = 0;
  uint64_t appends_rejected = 0;
  uint64_t acks = 0;
  uint64_t commit_timeouts = 0;
  uint64_t batches_delivered = 0;
  uint64_t images_compared = 0;
  uint64_t records_replayed = 0;
  uint64_t snapshots_taken = 0;
  uint64_t snapshots_loaded = 0;
  std::vector<int64_t> final_snapshot_end;
};

struct KraftShared {
  KraftShared(const KraftConfig& c, int nodes) : config(c), oracle(nodes), live(static_cast<size_t>(nodes), nullptr) {}

  raft::RaftConfig raft_config(int index) const {
    raft::RaftConfig rc;
    rc.node_id = index + 1;
    rc.voters = voters;
    rc.cluster_id = "brook-sim-cluster";
    rc.log_config.segment_bytes = config.segment_bytes;
    rc.election_timeout = config.election_timeout;
    rc.election_backoff_max = config.election_timeout;
    rc.fetch_timeout = config.election_timeout * 2;
    rc.unsafe_skip_vote_persist = config.mutation == "skip-vote-persist";
    rc.unsafe_ack_before_flush = config.mutation == "ack-before-flush";
    return rc;
  }

  io::Address address_of(int index) const { return addresses[static_cast<size_t>(index)]; }

  const KraftConfig& config;
  std::map<int32_t, io::Address> voters;
  std::vector<io::Address> addresses;
  KraftOracle oracle;
  std::vector<raft::RaftNode*> live;  // per node, while its main task runs
  bool writing = true;
};

// Images compare by contents; where the last record lay (provenance) is
// not part of it, since a snapshot ends at a batch boundary, not a record.
uint64_t image_hash(const metadata::MetadataImage& image) {
  return image.with_provenance(metadata::MetadataProvenance{}).hash();
}

class Checker final : public raft::RaftListener, public raft::RaftProbe {
 public:
  Checker(KraftShared* shared, int index) : shared_(shared), index_(index) {}

  void handle_commit(const raft::CommittedBatch& batch) override {
    if (batch.base_offset != next_) {
      shared_->oracle.violation(fmt::format("listener order: node {} delivered offset {} after {}",
                                            index_ + 1, batch.base_offset, next_));
    }
    next_ = batch.last_offset + 1;
    ++shared_->oracle.batches_delivered;
    shared_->oracle.committed_batch(
        index_, batch.base_offset,
        BatchId{.last_offset = batch.last_offset, .epoch = batch.epoch, .hash = fnv1a(batch.bytes.span())});
    if (!batch.control) replay(batch);
    ++batches_since_snapshot;
  }

  void handle_snapshot(raft::SnapshotId id, const std::vector<io::Buffer>& values) override {
    if (id.end_offset < next_) {
      shared_->oracle.violation(fmt::format("listener order: node {} got snapshot at {} after offset {}",
                                            index_ + 1, id.end_offset, next_));
    }
    std::vector<metadata::MetadataRecordAndVersion> records;
    for (const io::Buffer& value : values) {
      absl::StatusOr<metadata::MetadataRecordAndVersion> decoded = metadata::decode_metadata_record(value);
      if (!decoded.ok()) {
        shared_->oracle.violation(fmt::format("node {}: snapshot {} holds a bad record: {}", index_ + 1,
                                              raft::snapshot_file_name(id), decoded.status().ToString()));
        return;
      }
      records.push_back(std::move(*decoded));
    }
    absl::StatusOr<metadata::MetadataImage> image = metadata::load_snapshot(
        records, metadata::MetadataProvenance{.last_offset = id.end_offset - 1, .last_epoch = id.epoch});
    if (!image.ok()) {
      shared_->oracle.violation(fmt::format("node {}: snapshot {} does not load: {}", index_ + 1,
                                            raft::snapshot_file_name(id), image.status().ToString()));
      return;
    }
    image_ = std::move(*image);
    next_ = id.end_offset;
    int64_t& up_to = shared_->oracle.node_up_to.at(static_cast<size_t>(index_));
    up_to = std::max(up_to, id.end_offset);
    ++shared_->oracle.snapshots_loaded;
    shared_->oracle.image_at(index_, id.end_offset, image_hash(image_));
  }

  const metadata::MetadataImage& image() const { return image_; }
  // The end of what the image holds (the next offset to deliver).
  int64_t image_end() const { return next_; }
  uint64_t batches_since_snapshot = 0;
  void became_leader(int32_t node_id, int32_t epoch) override {
    shared_->oracle.became_leader(node_id, epoch);
  }
  void vote_granted(int32_t node_id, int32_t epoch, int32_t candidate) override {
    shared_->oracle.vote_granted(node_id, epoch, candidate);
  }

 private:
  // The same replay code a broker's metadata loader runs.
  void replay(const raft::CommittedBatch& batch) {
    absl::StatusOr<std::vector<net::Record>> records = net::decode_records(batch.bytes, kRecordsDecodedMax);
    if (!records.ok()) {
      shared_->oracle.violation(fmt::format("node {}: committed batch at {} does not decode: {}",
                                            index_ + 1, batch.base_offset, records.status().ToString()));
      return;
    }
    metadata::MetadataDelta delta(image_);
    int64_t offset = batch.base_offset;
    for (const net::Record& record : *records) {
      if (!record.value.has_value()) continue;
      absl::StatusOr<metadata::MetadataRecordAndVersion> decoded =
          metadata::decode_metadata_record(*record.value);
      absl::Status applied = decoded.ok() ? delta.apply(decoded->record, offset, batch.epoch)
                                          : decoded.status();
      if (!applied.ok()) {
        shared_->oracle.violation(fmt::format("node {}: metadata record at {} does not replay: {}",
                                              index_ + 1, offset, applied.ToString()));
      }
      ++shared_->oracle.records_replayed;
      ++offset;
    }
    image_ = delta.build();
    if (++replayed_batches_ % kImageCompareEvery == 0) {
      shared_->oracle.image_at(index_, batch.last_offset + 1, image_hash(image_));
    }
  }

  KraftShared* shared_;
  int index_;
  int64_t next_ = 0;
  metadata::MetadataImage image_;
  uint64_t replayed_batches_ = 0;
};

// Clears the node's entry in KraftShared::live when the main task dies.
struct LiveGuard {
  KraftShared* shared;
  int index;
  ~LiveGuard() { shared->live[static_cast<size_t>(index)] = nullptr; }
};

net::Uuid random_uuid(io::Random& r) {
  net::Uuid id;
  for (uint8_t& b : id.bytes) b = static_cast<uint8_t>(r.uniform(256));
  return id;
}

std::vector<int32_t> random_subset(io::Random& r, const std::vector<int32_t>& from) {
  std::vector<int32_t> out;
  for (int32_t x : from) {
    if (r.bernoulli(0.7)) out.push_back(x);
  }
  if (out.empty()) out.push_back(from[r.uniform(from.size())]);
  return out;
}

// Metadata changes that are valid whatever else commits around them: new
// topics (with their partitions, atomically), ISR and leader changes of
// committed partitions, configs, feature levels. Topics are never removed,
// so a committed partition always exists.
std::vector<metadata::MetadataRecord> metadata_changes(io::Random& r, const metadata::MetadataImage& committed,
                                                       int voters, int max_records) {
  std::vector<metadata::MetadataRecord> out;
  const auto& topics = committed.topics().by_id;
  const int n = 1 + static_cast<int>(r.uniform(static_cast<uint64_t>(max_records)));
  std::vector<int32_t> brokers;
  for (int i = 1; i <= voters; ++i) brokers.push_back(i);
  while (static_cast<int>(out.size()) < n) {
    const uint64_t kind = r.uniform(10);
    if ((kind < 2 && topics.size() < kTopicsMax) || topics.empty()) {
      net::TopicRecord topic;
      topic.topic_id = random_uuid(r);
      topic.name = "topic-" + topic.topic_id.to_string();
      out.emplace_back(topic);
      const int partitions = 1 + static_cast<int>(r.uniform(3));
      for (int p = 0; p < partitions; ++p) {
        net::PartitionRecord partition;
        partition.partition_id = p;
        partition.topic_id = topic.topic_id;
        partition.replicas = random_subset(r, brokers);
        partition.isr = partition.replicas;
        partition.leader = partition.replicas.front();
        partition.leader_epoch = 0;
        partition.partition_epoch = 0;
        out.emplace_back(partition);
      }
      continue;
    }
    auto it = topics.begin();
    std::advance(it, static_cast<long>(r.uniform(topics.size())));
    const metadata::TopicImage& topic = *it->second;
    if (kind < 6 && !topic.partitions.empty()) {
      auto p = topic.partitions.begin();
      std::advance(p, static_cast<long>(r.uniform(topic.partitions.size())));
      net::PartitionChangeRecord change;
      change.topic_id = topic.id;
      change.partition_id = p->first;
      std::vector<int32_t> isr = random_subset(r, p->second.replicas);
      change.isr = isr;
      if (r.bernoulli(0.5)) change.leader = isr[r.uniform(isr.size())];
      out.emplace_back(change);
    } else if (kind < 9) {
      net::ConfigRecord config;
      config.resource_type = metadata::kConfigResourceTopic;
      config.resource_name = topic.name;
      config.name = r.bernoulli(0.5) ? "retention.ms" : "cleanup.policy";
      if (r.bernoulli(0.8)) {
        config.value = std::to_string(r.uniform(1'000'000));
      } else {
        config.value = std::nullopt;
      }
      out.emplace_back(config);
    } else {
      net::FeatureLevelRecord feature;
      feature.name = std::string(metadata::kMetadataVersionFeature);
      feature.feature_level = static_cast<int16_t>(1 + r.uniform(20));
      out.emplace_back(feature);
    }
  }
  return out;
}

io::Task<void> writer(io::Context* ctx, raft::RaftNode* node, const Checker* checker, KraftShared* s) {
  const KraftConfig& c = s->config;
  while (true) {
    co_await ctx->clock().sleep_for(io::Duration(ctx->random().uniform_range(
        c.write_interval_min.count(), c.write_interval_max.count())));
    if (!s->writing || node->role() != raft::Role::kLeader) continue;
    std::vector<io::Buffer> values;
    for (const metadata::MetadataRecord& record :
         metadata_changes(ctx->random(), checker->image(), c.voters, c.records_per_batch_max)) {
      absl::StatusOr<io::Buffer> value =
          metadata::encode_metadata_record(metadata::at_highest_version(record));
      BROOK_ASSERT(value.ok());
      values.push_back(std::move(*value));
    }
    ++s->oracle.appends;
    absl::StatusOr<raft::AppendedBatch> appended = co_await node->append(std::move(values));
    if (!appended.ok()) {
      ++s->oracle.appends_rejected;
      continue;
    }
    absl::Status committed = co_await node->wait_committed(
        appended->last_offset, appended->epoch, ctx->clock().now() + kCommitWait);
    if (!committed.ok()) {
      ++s->oracle.commit_timeouts;
      continue;
    }
    ++s->oracle.acks;
    s->oracle.acked.emplace(appended->base_offset, appended->epoch);
    s->oracle.acked_end = std::max(s->oracle.acked_end, appended->last_offset + 1);
    s->oracle.last_ack_ns = World::running()->now_ns();
  }
}

// Takes a snapshot of the node's metadata image every `snapshot_every`
// committed batches, as a controller does.
io::Task<void> snapshotter(io::Context* ctx, raft::RaftNode* node, Checker* checker, KraftShared* s) {
  const uint64_t every = s->config.snapshot_every;
  if (every == 0) co_return;
  while (true) {
    co_await ctx->clock().sleep_for(100ms);
    if (checker->batches_since_snapshot < every) continue;
    const int64_t end = checker->image_end();
    const std::optional<raft::SnapshotId> latest = node->latest_snapshot();
    if (end <= 0 || (latest.has_value() && latest->end_offset >= end)) continue;
    std::vector<io::Buffer> values;
    for (const metadata::MetadataRecordAndVersion& record : checker->image().to_records()) {
      absl::StatusOr<io::Buffer> value = metadata::encode_metadata_record(record);
      BROOK_ASSERT(value.ok());
      values.push_back(std::move(*value));
    }
    const uint64_t hash = image_hash(checker->image());
    absl::Status written = co_await node->snapshot(end, std::move(values));
    if (!written.ok()) {
      ctx->log().info("kraft: snapshot at {}: {}", end, written.ToString());
      continue;
    }
    checker->batches_since_snapshot = 0;
    ++s->oracle.snapshots_taken;
    s->oracle.image_at(static_cast<int>(node->node_id() - 1), end, hash);
  }
}

io::Task<void> kraft_node_main(io::Context* ctx, KraftShared* s, int index) {
  absl::StatusOr<std::unique_ptr<raft::RaftNode>> opened =
      co_await raft::RaftNode::open(*ctx, s->raft_config(index));
  if (!opened.ok()) {
    ctx->log().error("kraft: open failed: {}", opened.status().ToString());
    co_return;
  }
  std::unique_ptr<raft::RaftNode> node = std::move(*opened);
  absl::StatusOr<std::unique_ptr<io::Listener>> listener =
      co_await ctx->network().listen(s->address_of(index));
  if (!listener.ok()) {
    ctx->log().error("kraft: listen failed: {}", listener.status().ToString());
    co_return;
  }
  Checker checker(s, index);
  node->set_listener(&checker);
  node->set_probe(&checker);
  s->live[static_cast<size_t>(index)] = node.get();
  LiveGuard guard{s, index};
  io::TaskScope tasks(ctx->executor());
  if (node->is_voter()) tasks.spawn(writer(ctx, node.get(), &checker, s));
  tasks.spawn(snapshotter(ctx, node.get(), &checker, s));
  absl::Status ended = co_await node->run(**listener);
  ctx->log().error("kraft: replica stopped: {}", ended.ToString());
}

// After the final power loss: recover the log and read it all back.
io::Task<void> kraft_check_main(io::Context* ctx, KraftShared* s, int index) {
  const raft::RaftConfig rc = s->raft_config(index);
  storage::LogOptions options;
  options.dir = rc.log_dir;
  options.config = rc.log_config;
  absl::StatusOr<std::unique_ptr<storage::Log>> log =
      co_await storage::Log::open(ctx->disk(), ctx->clock(), options);
  if (!log.ok()) {
    s->oracle.violation(fmt::format("node {}: final recovery failed: {}", index + 1,
                                    log.status().ToString()));
    co_return;
  }
  absl::StatusOr<std::vector<raft::SnapshotId>> snapshots = co_await raft::list_snapshots(ctx->disk(), rc.log_dir);
  if (snapshots.ok() && !snapshots->empty()) {
    s->oracle.final_snapshot_end[static_cast<size_t>(index)] = snapshots->back().end_offset;
  }
  std::map<int64_t, BatchId>& out = s->oracle.final_logs[static_cast<size_t>(index)];
  int64_t offset = (*log)->log_start_offset();
  while (offset < (*log)->log_end_offset()) {
    absl::StatusOr<storage::ReadResult> read =
        co_await (*log)->read(offset, kFinalReadBytes, storage::ReadBound::kLogEnd, true);
    if (!read.ok() || read->error != net::Error::kNone || read->records.empty()) {
      s->oracle.violation(fmt::format("node {}: final read at {} failed", index + 1, offset));
      co_return;
    }
    net::BatchIterator it(read->records);
    while (true) {
      absl::StatusOr<std::optional<net::BatchView>> next = it.next();
      if (!next.ok() || !next->has_value()) break;
      const net::RecordBatchHeader& h = (*next)->header;
      out.emplace(h.base_offset, BatchId{.last_offset = h.last_offset(),
                                         .epoch = h.partition_leader_epoch,
                                         .hash = fnv1a((*next)->bytes.span())});
      offset = h.next_offset();
    }
  }
  (void)co_await (*log)->close();
  s->oracle.final_read[static_cast<size_t>(index)] = true;
}

// Every voter holds and has delivered everything committed so far.
bool caught_up(const KraftShared& s) {
  const int64_t end = s.oracle.committed_end();
  for (int i = 0; i < s.config.voters; ++i) {
    const raft::RaftNode* node = s.live[static_cast<size_t>(i)];
    if (node == nullptr || node->high_watermark() < end) return false;
    if (s.oracle.node_up_to[static_cast<size_t>(i)] < end) return false;
  }
  return true;
}

void check_final(const KraftShared& s, bool live, std::vector<std::string>& failures) {
  auto add = [&](std::string what) {
    if (failures.size() < kFailuresMax) failures.push_back(std::move(what));
  };
  const KraftOracle& o = s.oracle;
  const int voters = s.config.voters;
  const int majority = voters / 2 + 1;
  for (int i = 0; i < static_cast<int>(o.final_read.size()); ++i) {
    if (!o.final_read[static_cast<size_t>(i)]) add(fmt::format("node {}: final read did not finish", i + 1));
  }
  for (const auto& [base, id] : o.committed) {
    int holders = 0;
    for (int i = 0; i < voters; ++i) {
      const auto& log = o.final_logs[static_cast<size_t>(i)];
      auto it = log.find(base);
      if ((it != log.end() && it->second == id) || id.last_offset < o.final_snapshot_end[static_cast<size_t>(i)]) {
        ++holders;  // in the log, or in a snapshot (whose image was compared)
      } else if (live) {
        add(fmt::format("agreement: voter {} lacks committed {}", i + 1, describe_batch(base, id)));
      }
    }
    if (holders < majority) {
      add(fmt::format("durability: committed {} is on {} of {} voters after power loss",
                      describe_batch(base, id), holders, voters));
    }
  }
  for (const auto& [base, epoch] : o.acked) {
    auto it = o.committed.find(base);
    if (it == o.committed.end() || it->second.epoch != epoch) {
      add(fmt::format("acknowledged write at offset {} (epoch {}) is not in the committed log", base,
                      epoch));
    }
  }
}

}  // namespace

KraftConfig KraftConfig::draw(uint64_t seed) {
  io::Random r(seed ^ kConfigSalt);
  KraftConfig c;
  c.voters = r.bernoulli(0.6) ? 3 : 5;
  c.observers = r.bernoulli(0.3) ? 1 : 0;
  c.write_interval_min = uniform_duration(r, 5ms, 50ms);
  c.write_interval_max = c.write_interval_min * r.uniform_range(1, 5);
  c.records_per_batch_max = static_cast<int>(r.uniform_range(1, 8));
  c.election_timeout = uniform_duration(r, 150ms, 1500ms);
  c.snapshot_every = r.bernoulli(0.3) ? 0 : static_cast<uint64_t>(r.uniform_range(5, 200));
  c.segment_bytes = static_cast<uint64_t>(r.uniform_range(2 << 10, 64 << 10));
  c.workload = 30s;
  c.quiet_max = 60s;
  c.faults = FaultConfig::draw(r);
  return c;
}

std::string KraftConfig::describe() const {
  return fmt::format("swarm: voters={} observers={} election timeout {} snapshot every {} batches segment {}B "
                     "write every {}..{} records<={} workload={} quiet<={}{}\n{}",
                     voters, observers, seconds(election_timeout), snapshot_every, segment_bytes,
                     seconds(write_interval_min), seconds(write_interval_max),
                     records_per_batch_max, seconds(workload), seconds(quiet_max),
                     mutation.empty() ? "" : fmt::format(" MUTATION={}", mutation), faults.describe());
}

absl::StatusOr<ScenarioResult> run_kraft(const ScenarioOptions& options) {
  KraftConfig config = KraftConfig::draw(options.seed);
  if (options.name == "kraft-mutant-vote" || options.name == "kraft-harsh") {
    // Crashes come often, restarts fast and messages slowly, so that a
    // voter is back within the same election. With a replica that forgets
    // its votes (the mutant) the checkers must fail; "kraft-harsh" is the
    // same weather for the healthy replica, which must pass.
    if (options.name == "kraft-mutant-vote") config.mutation = "skip-vote-persist";
    io::Random r(options.seed ^ (kConfigSalt << 2));
    config.faults.crash_interval = uniform_duration(r, 300ms, 2s);
    config.faults.restart_delay_max = uniform_duration(r, 10ms, 300ms);
    config.faults.crash_all_probability = 0;
    config.faults.network.latency.min = uniform_duration(r, 5ms, 30ms);
    config.faults.network.latency.jitter = uniform_duration(r, 10ms, 60ms);
    config.election_timeout = uniform_duration(r, 300ms, 800ms);
  } else if (options.name == "kraft-mutant-flush") {
    config.mutation = "ack-before-flush";
  }
  WorldOptions world_options;
  world_options.scenario = options.name;
  world_options.network = config.faults.network;
  world_options.trace = options.trace;
  world_options.log_sink = options.log_sink;
  const int nodes = config.voters + config.observers;
  // Declared before the World: node tasks still alive when the World goes
  // touch it as they die.
  KraftShared shared(config, nodes);
  World world(options.seed, world_options);
  if (options.out != nullptr) {
    fmt::print(options.out, "brook sim: scenario={} seed={}\n{}\nbuggify: {}\n", options.name,
               options.seed, config.describe(), world.buggify().enabled() ? "on" : "off");
  }
  io::Random node_random(options.seed ^ (kConfigSalt << 1));
  for (int i = 0; i < nodes; ++i) {
    Node& node = world.add_node(config.faults.node_options(node_random));
    shared.addresses.push_back(node.address(kControllerPort));
    if (i < config.voters) shared.voters.emplace(i + 1, node.address(kControllerPort));
  }
  KraftShared* s = &shared;
  for (int i = 0; i < nodes; ++i) {
    world.node(i).start([s, i](io::Context& ctx) { return kraft_node_main(&ctx, s, i); });
  }
  FaultSchedule faults(world, config.faults);
  faults.start();
  world.run_for(config.workload);
  faults.stop();
  const int64_t heal_ns = world.now_ns();
  // Liveness: a write made after the heal commits, then (writes stopped)
  // every voter catches up, all within the quiet phase.
  bool live = world.run_until([&] { return shared.oracle.last_ack_ns > heal_ns; }, config.quiet_max);
  shared.writing = false;
  std::string voter_states;
  if (live) {
    const io::Duration left = config.quiet_max - io::Duration(world.now_ns() - heal_ns);
    live = world.run_until([&] { return caught_up(shared); }, left);
  }
  for (int i = 0; i < config.voters; ++i) {
    const raft::RaftNode* node = shared.live[static_cast<size_t>(i)];
    if (!voter_states.empty()) voter_states += ", ";
    if (node == nullptr) {
      voter_states += fmt::format("{} down", i + 1);
    } else {
      voter_states += fmt::format("{} {} epoch {} hw {} delivered {}", i + 1, raft::role_name(node->role()),
                                  node->epoch(), node->high_watermark(),
                                  shared.oracle.node_up_to[static_cast<size_t>(i)]);
    }
  }

  // Power loss everywhere, then every node reads its log back.
  faults.finish();
  for (int i = 0; i < nodes; ++i) world.node(i).crash();
  for (int i = 0; i < nodes; ++i) {
    world.node(i).start([s, i](io::Context& ctx) { return kraft_check_main(&ctx, s, i); });
  }
  world.run_until(
      [&] {
        for (int i = 0; i < nodes; ++i) {
          if (!world.node(i).main_done()) return false;
        }
        return true;
      },
      kFinalReadLimit);

  ScenarioResult result;
  for (const std::string& v : shared.oracle.violations) {
    if (result.failures.size() < kFailuresMax) result.failures.push_back(v);
  }
  check_final(shared, live, result.failures);
  if (!live && result.failures.size() < kFailuresMax) {
    result.failures.push_back(fmt::format(
        "liveness: no leader committed a new write and caught every voter up within {} of the heal "
        "(committed end {}, last ack at {}; voters: {})",
        seconds(config.quiet_max), shared.oracle.committed_end(),
        seconds(io::Duration(std::max<int64_t>(shared.oracle.last_ack_ns, 0))), voter_states));
  }
  result.passed = result.failures.empty();
  result.trace_hash = world.trace_hash();
  result.events = world.events_run();
  result.simulated = world.elapsed();
  result.replay_command = world.replay_command();
  const KraftOracle& o = shared.oracle;
  result.summary = fmt::format(
      "epochs={} elections={} appends={} rejected={} acked={} commit-timeouts={} committed-batches={} "
      "committed-end={} delivered={} records-replayed={} images-compared={} snapshots={}/{}; faults: crashes={} partitions={} clogs={} resets={} "
      "wall-jumps={} revivals={} buggify-fired={}",
      o.leaders.empty() ? 0 : o.leaders.rbegin()->first, o.elections, o.appends, o.appends_rejected,
      o.acks, o.commit_timeouts, o.committed.size(), o.committed_end(), o.batches_delivered,
      o.records_replayed, o.images_compared, o.snapshots_taken, o.snapshots_loaded,
      faults.crashes, faults.partitions, faults.clogs, faults.resets, faults.wall_jumps,
      faults.revivals, world.buggify().fired());
  return result;
}

absl::StatusOr<io::Duration> simulated_failover(uint64_t seed, int voters) {
  KraftConfig config;
  config.voters = voters;
  config.write_interval_min = 10ms;
  config.write_interval_max = 10ms;
  config.records_per_batch_max = 1;
  config.election_timeout = 1s;
  WorldOptions world_options;
  world_options.scenario = "kraft-failover";
  KraftShared shared(config, voters);  // before the World, as in run_kraft
  World world(seed, world_options);
  for (int i = 0; i < voters; ++i) {
    Node& node = world.add_node();
    shared.addresses.push_back(node.address(kControllerPort));
    shared.voters.emplace(i + 1, node.address(kControllerPort));
  }
  KraftShared* s = &shared;
  for (int i = 0; i < voters; ++i) {
    world.node(i).start([s, i](io::Context& ctx) { return kraft_node_main(&ctx, s, i); });
  }
  world.run_for(5s);
  int leader = -1;
  for (int i = 0; i < voters; ++i) {
    if (shared.live[static_cast<size_t>(i)] != nullptr &&
        shared.live[static_cast<size_t>(i)]->role() == raft::Role::kLeader) {
      leader = i;
    }
  }
  if (leader < 0) return absl::InternalError("no leader after 5 s");
  const int32_t old_epoch = shared.live[static_cast<size_t>(leader)]->epoch();
  world.node(leader).crash();
  const int64_t crashed = world.now_ns();
  const bool ok = world.run_until(
      [&] {
        if (shared.oracle.last_ack_ns <= crashed) return false;
        for (int i = 0; i < voters; ++i) {
          const raft::RaftNode* n = shared.live[static_cast<size_t>(i)];
          if (n != nullptr && n->role() == raft::Role::kLeader && n->epoch() > old_epoch) return true;
        }
        return false;
      },
      60s);
  if (!ok) return absl::DeadlineExceededError("no new leader committed within 60 s");
  return io::Duration(world.now_ns() - crashed);
}

}  // namespace brook::sim
