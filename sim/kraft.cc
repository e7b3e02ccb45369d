// sim/kraft.cc
//
// The kraft scenario's harness, node program and checkers (sim/kraft.h).
#include "sim/kraft.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "io/assert.h"
#include "io/scope.h"
#include "core/controller/quorum_controller.h"
#include "core/metadata/image.h"
#include "core/metadata/record_serde.h"
#include "io/status.h"
#include "net/kafka/messages/add_raft_voter_request.h"
#include "net/kafka/messages/add_raft_voter_response.h"
#include "net/kafka/messages/alter_partition_reassignments_request.h"
#include "net/kafka/messages/alter_partition_reassignments_response.h"
#include "net/kafka/messages/config_record.h"
#include "net/kafka/messages/feature_level_record.h"
#include "net/kafka/messages/partition_change_record.h"
#include "net/kafka/messages/partition_record.h"
#include "net/kafka/messages/remove_raft_voter_request.h"
#include "net/kafka/messages/remove_raft_voter_response.h"
#include "net/kafka/messages/topic_record.h"
#include "net/kafka/rpc.h"
#include "raft/raft_node.h"
#include "raft/snapshot.h"
#include "raft/voter_set.h"
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

  // Reconfiguration: the voter sets committed, by the offset of their
  // record (-1: the bootstrap set).
  void voters_committed(int64_t offset, std::set<int32_t> ids) {
    auto [it, fresh] = committed_voters.emplace(offset, ids);
    if (!fresh && it->second != ids) {
      violation(fmt::format("committed voter set changed at offset {}: [{}] and [{}]", offset,
                            fmt::join(it->second, ","), fmt::join(ids, ",")));
    }
  }
  // The voter sets that may have committed a batch ending at `last`: the
  // one in effect at it (a batch holding a voter set is committed by that
  // set) and every later one (the high watermark can pass the batch only
  // after a later change, counted by the later set).
  std::vector<const std::set<int32_t>*> voters_from(int64_t last) const {
    auto it = committed_voters.upper_bound(last);
    BROOK_ASSERT(it != committed_voters.begin());
    std::vector<const std::set<int32_t>*> out;
    for (--it; it != committed_voters.end(); ++it) out.push_back(&it->second);
    return out;
  }
  std::map<int64_t, std::set<int32_t>> committed_voters;
  uint64_t voter_changes_asked = 0;
  uint64_t voters_added = 0;
  uint64_t voters_removed = 0;

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

  // The controller scenarios.
  // A block of producer ids answered to a broker: no two may overlap.
  void producer_ids(int32_t broker, int64_t start, int32_t length) {
    ++producer_id_blocks;
    auto next = pid_blocks.lower_bound(start);
    if (next != pid_blocks.end() && next->first < start + length) {
      violation(fmt::format("producer ids: [{}, {}) given to broker {} overlaps [{}, {}) given to broker {}",
                            start, start + length, broker, next->first, next->first + next->second.first,
                            next->second.second));
    }
    if (next != pid_blocks.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second.first > start) {
        violation(fmt::format("producer ids: [{}, {}) given to broker {} overlaps [{}, {}) given to broker {}",
                              start, start + length, broker, prev->first, prev->first + prev->second.first,
                              prev->second.second));
      }
    }
    pid_blocks.emplace(start, std::make_pair(length, broker));
  }
  std::map<int64_t, std::pair<int32_t, int32_t>> pid_blocks;  // start -> (length, broker)
  uint64_t producer_id_blocks = 0;
  uint64_t admin_requests = 0;
  uint64_t admin_ok = 0;
  uint64_t reassignments = 0;
  uint64_t registrations = 0;
  uint64_t heartbeats = 0;
  uint64_t isr_changes = 0;
  int64_t last_admin_ok_ns = -1;
};

struct KraftShared {
  KraftShared(const KraftConfig& c, int nodes)
      : config(c), oracle(nodes), live(static_cast<size_t>(nodes), nullptr),
        images(static_cast<size_t>(nodes), nullptr) {}

  raft::RaftConfig raft_config(int index) const {
    raft::RaftConfig rc;
    rc.node_id = index + 1;
    if (config.reconfig) {
      rc.bootstrap_servers = addresses;
      rc.directory_id = directory_id(index);
      rc.advertised = address_of(index);
      rc.unsafe_concurrent_voter_changes = config.mutation == "concurrent-voter-changes";
    } else {
      rc.voters = voters;
    }
    rc.cluster_id = "brook-sim-cluster";
    rc.log_config.segment_bytes = config.segment_bytes;
    rc.election_timeout = config.election_timeout;
    rc.election_backoff_max = config.election_timeout;
    rc.fetch_timeout = config.election_timeout * 2;
    rc.unsafe_skip_vote_persist = config.mutation == "skip-vote-persist";
    rc.unsafe_ack_before_flush = config.mutation == "ack-before-flush";
    return rc;
  }

  controller::ControllerConfig controller_config(int index) const {
    controller::ControllerConfig cc;
    cc.node_id = index + 1;
    cc.cluster_id = "brook-sim-cluster";
    cc.broker_session_timeout = config.broker_session_timeout;
    cc.fence_check_interval = config.heartbeat_interval;
    cc.default_replication_factor = 1;
    cc.snapshot_max_new_record_bytes = config.controller_snapshot_bytes;
    cc.auto_leader_rebalance = config.leader_rebalance_interval > io::Duration{0};
    if (cc.auto_leader_rebalance) cc.leader_imbalance_check_interval = config.leader_rebalance_interval;
    cc.unsafe_answer_before_commit = config.mutation == "answer-before-commit";
    return cc;
  }

  io::Address address_of(int index) const { return addresses[static_cast<size_t>(index)]; }
  static net::Uuid directory_id(int index) {
    net::Uuid id;
    id.bytes[0] = 0xd1;
    id.bytes[15] = static_cast<uint8_t>(index + 1);
    return id;
  }
  // The voter set the scenario has committed last (reconfig), else the
  // static voters 1..voters.
  std::set<int32_t> final_voters() const {
    if (config.reconfig && !oracle.committed_voters.empty()) return oracle.committed_voters.rbegin()->second;
    std::set<int32_t> ids;
    for (int i = 1; i <= config.voters; ++i) ids.insert(i);
    return ids;
  }
  int lost() const { return faults == nullptr ? -1 : faults->lost_node(); }

  const KraftConfig& config;
  std::map<int32_t, io::Address> voters;
  std::vector<io::Address> addresses;
  // Per node: how often it has started (reconfig: a restarted controller
  // may come back on another port and must tell the quorum).
  std::vector<int> boots;
  uint64_t port_moves = 0;
  int moved = -1;  // the node that moved (index), if one did
  // The run's faults, once they exist: lost() is the node lost for good
  // (index), or -1.
  const FaultSchedule* faults = nullptr;
  // The offset of the latest voter set committed when it moved, and
  // whether a voter set committed since names its new address (or no
  // longer names it).
  int64_t moved_after = -1;
  bool move_recorded = false;
  // AddRaftVoter and RemoveRaftVoter calls of the membership agents not
  // answered yet: a change the leader has taken but not yet appended.
  int membership_calls = 0;
  KraftOracle oracle;
  std::vector<raft::RaftNode*> live;  // per node, while its main task runs
  // Per node, while its main task runs: the image its listener replayed.
  std::vector<const metadata::MetadataImage*> images;
  bool writing = true;
  // Reconfig: the voter set the membership agents work towards, and
  // whether they are at it.
  std::set<int32_t> target_voters;
  bool reconfiguring = true;
};

// Images compare by contents; where the last record lay (provenance) is
// not part of it, since a snapshot ends at a batch boundary, not a record.
uint64_t image_hash(const metadata::MetadataImage& image) {
  return image.with_provenance(metadata::MetadataProvenance{}).hash();
}

// The controller scenario's partition and broker invariants, on an image
// at a batch boundary of the committed log.
void check_controller_invariants(KraftOracle& o, int index, int64_t end, const metadata::MetadataImage& image) {
  const metadata::ClusterImage& cluster = image.cluster();
  for (const auto& topic_entry : image.topics().by_id) {
    const metadata::TopicImage& topic = *topic_entry.second;
    for (const auto& partition_entry : topic.partitions) {
      const int32_t id = partition_entry.first;
      const metadata::PartitionRegistration& p = partition_entry.second;
      auto bad = [&](std::string_view what) {
        o.violation(fmt::format("partition invariant: node {} at offset {}: {}-{} {} (replicas [{}] isr [{}] leader {})",
                                index + 1, end, topic.name, id, what, fmt::join(p.replicas, ","),
                                fmt::join(p.isr, ","), p.leader));
      };
      std::set<int32_t> replicas(p.replicas.begin(), p.replicas.end());
      if (p.replicas.empty() || replicas.size() != p.replicas.size()) bad("has no or repeated replicas");
      if (p.isr.empty()) bad("has an empty ISR");
      for (int32_t b : p.isr) {
        if (!replicas.contains(b)) bad("has an ISR member that is not a replica");
      }
      // A reassignment's adding and removing replicas are replicas, apart,
      // and the adding ones not all in the ISR with a member that stays
      // (it would have completed).
      bool stays = false;
      for (int32_t b : p.isr) stays = stays || std::find(p.removing_replicas.begin(), p.removing_replicas.end(), b) ==
                                                   p.removing_replicas.end();
      bool all_added = true;
      for (int32_t b : p.adding_replicas) {
        if (!replicas.contains(b)) bad("has an adding replica that is not a replica");
        if (std::find(p.removing_replicas.begin(), p.removing_replicas.end(), b) != p.removing_replicas.end()) {
          bad("has a replica both adding and removing");
        }
        all_added = all_added && std::find(p.isr.begin(), p.isr.end(), b) != p.isr.end();
      }
      for (int32_t b : p.removing_replicas) {
        if (!replicas.contains(b)) bad("has a removing replica that is not a replica");
      }
      if ((!p.adding_replicas.empty() || !p.removing_replicas.empty()) && all_added && stays) {
        bad("has a reassignment that should have completed");
      }
      if (p.leader_recovery_state != 0) bad("was elected uncleanly");
      if (p.leader == metadata::kNoLeader) continue;
      if (std::find(p.isr.begin(), p.isr.end(), p.leader) == p.isr.end()) bad("has a leader outside the ISR");
      const metadata::BrokerRegistration* b = cluster.broker(p.leader);
      if (b == nullptr || b->fenced || b->in_controlled_shutdown) {
        bad("is led by a broker that is not registered, is fenced or is shutting down");
      }
    }
  }
}

class Checker final : public raft::RaftListener, public raft::RaftProbe, public controller::ControllerProbe {
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
    if (!batch.control) {
      replay(batch);
    } else if (shared_->config.reconfig) {
      absl::StatusOr<raft::KRaftControl> kraft = raft::read_kraft_control(batch.bytes);
      if (!kraft.ok()) {
        shared_->oracle.violation(fmt::format("node {}: control batch at {} does not decode: {}", index_ + 1,
                                              batch.base_offset, kraft.status().ToString()));
      } else if (kraft->voters.has_value()) {
        std::set<int32_t> ids;
        for (const auto& entry : *kraft->voters) ids.insert(entry.first);
        shared_->oracle.voters_committed(batch.last_offset, std::move(ids));
        if (shared_->moved >= 0 && batch.last_offset > shared_->moved_after) {
          const int32_t id = shared_->moved + 1;
          auto v = kraft->voters->find(id);
          if (v == kraft->voters->end() ||
              v->second.address(shared_->raft_config(shared_->moved).listener_name) ==
                  shared_->address_of(shared_->moved)) {
            shared_->move_recorded = true;
          }
        }
      }
    }
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
  void producer_ids_granted(int32_t broker_id, int64_t start, int32_t length) override {
    shared_->oracle.producer_ids(broker_id, start, length);
  }
  void write_committed(const raft::AppendedBatch& batch) override {
    KraftOracle& o = shared_->oracle;
    ++o.acks;
    o.acked.emplace(batch.base_offset, batch.epoch);
    o.acked_end = std::max(o.acked_end, batch.last_offset + 1);
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
      } else if (const auto* reg = std::get_if<net::RegisterBrokerRecord>(&decoded->record);
                 reg != nullptr && shared_->config.controller && reg->broker_epoch != offset) {
        shared_->oracle.violation(fmt::format("node {}: broker {} registered at offset {} with epoch {}",
                                              index_ + 1, reg->broker_id, offset, reg->broker_epoch));
      }
      ++shared_->oracle.records_replayed;
      ++offset;
    }
    image_ = delta.build();
    if (shared_->config.controller) {
      check_controller_invariants(shared_->oracle, index_, batch.last_offset + 1, image_);
    }
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
  ~LiveGuard() {
    shared->live[static_cast<size_t>(index)] = nullptr;
    shared->images[static_cast<size_t>(index)] = nullptr;
  }
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

// --- the controller scenario's brokers and admin clients ---------------------

constexpr io::Duration kRpcTimeout = 2s;

// Calls the active controller: the one this broker's Raft observer knows
// leads, else the voters in turn.
class ControllerChannel {
 public:
  ControllerChannel(io::Context* ctx, const KraftShared* s, const raft::RaftNode* node, std::string client)
      : ctx_(ctx), s_(s), node_(node), client_(std::move(client)) {}

  template <typename Resp, typename Req>
  io::Task<std::optional<Resp>> call(const Req& request, int16_t version) {
    const int32_t leader = node_->leader_id();
    if (leader >= 1 && s_->voters.contains(leader)) target_ = leader;
    net::Peer& peer = this->peer(target_);
    absl::StatusOr<Resp> response = co_await peer.call<Resp>(request, version, kRpcTimeout);
    if (!response.ok() || response->error_code != 0) {
      ctx_->log().debug("kraft: {} to controller {}: {}", Req::kName, target_,
                        response.ok() ? std::string(net::error_name(response->error_code))
                                      : response.status().ToString());
    }
    if (!response.ok() || response->error_code == net::code(net::Error::kNotController)) {
      target_ = target_ % static_cast<int32_t>(s_->voters.size()) + 1;
      co_return std::nullopt;
    }
    co_return std::move(*response);
  }

  // For requests whose errors are per item: answered at all.
  template <typename Resp, typename Req>
  io::Task<std::optional<Resp>> call_items(const Req& request, int16_t version) {
    const int32_t leader = node_->leader_id();
    if (leader >= 1 && s_->voters.contains(leader)) target_ = leader;
    absl::StatusOr<Resp> response = co_await peer(target_).call<Resp>(request, version, kRpcTimeout);
    if (!response.ok()) {
      ctx_->log().debug("kraft: {} to controller {}: {}", Req::kName, target_, response.status().ToString());
    }
    if (!response.ok()) {
      target_ = target_ % static_cast<int32_t>(s_->voters.size()) + 1;
      co_return std::nullopt;
    }
    co_return std::move(*response);
  }

 private:
  net::Peer& peer(int32_t id) {
    auto it = peers_.find(id);
    if (it == peers_.end()) {
      it = peers_.emplace(id, std::make_unique<net::Peer>(ctx_->network(), ctx_->clock(),
                                                          s_->voters.at(id), client_)).first;
    }
    return *it->second;
  }

  io::Context* ctx_;
  const KraftShared* s_;
  const raft::RaftNode* node_;
  std::string client_;
  int32_t target_ = 1;
  std::map<int32_t, std::unique_ptr<net::Peer>> peers_;
};

// A leader's ISR change: the leader and a random choice of the replicas the
// image shows eligible.
std::optional<net::AlterPartitionRequest> isr_change(io::Random& r, const metadata::MetadataImage& image,
                                                     int32_t broker_id, int64_t broker_epoch) {
  std::vector<std::pair<const metadata::TopicImage*, int32_t>> led;
  for (const auto& [id, topic] : image.topics().by_id) {
    for (const auto& [p, partition] : topic->partitions) {
      if (partition.leader == broker_id) led.emplace_back(topic.get(), p);
    }
  }
  if (led.empty()) return std::nullopt;
  const auto& [topic, p] = led[r.uniform(led.size())];
  const metadata::PartitionRegistration& partition = topic->partitions.at(p);
  net::AlterPartitionRequest request;
  request.broker_id = broker_id;
  request.broker_epoch = broker_epoch;
  net::AlterPartitionRequest::TopicData t;
  t.topic_id = topic->id;
  net::AlterPartitionRequest::PartitionData d;
  d.partition_index = p;
  d.leader_epoch = partition.leader_epoch;
  d.partition_epoch = partition.partition_epoch;
  for (int32_t replica : partition.replicas) {
    const metadata::BrokerRegistration* b = image.cluster().broker(replica);
    if (replica != broker_id && (b == nullptr || b->fenced || b->in_controlled_shutdown || r.bernoulli(0.3))) {
      continue;
    }
    net::AlterPartitionRequest::BrokerState state;
    state.broker_id = replica;
    state.broker_epoch = b == nullptr ? -1 : b->epoch;
    d.new_isr_with_epochs.push_back(state);
  }
  t.partitions.push_back(std::move(d));
  request.topics.push_back(std::move(t));
  return request;
}

// A broker: registers, heartbeats (reporting how far its observer has
// replayed), changes the ISRs of partitions it leads, takes producer ids,
// and now and then shuts down in a controlled way and registers again.
io::Task<void> broker_agent(io::Context* ctx, raft::RaftNode* node, const Checker* checker, KraftShared* s) {
  const KraftConfig& c = s->config;
  const int32_t broker_id = node->node_id();
  ControllerChannel channel(ctx, s, node, fmt::format("broker-{}", broker_id));
  const net::Uuid incarnation = random_uuid(ctx->random());
  int64_t epoch = -1;
  bool shutting_down = false;
  while (true) {
    co_await ctx->clock().sleep_for(c.heartbeat_interval);
    if (epoch < 0) {
      net::BrokerRegistrationRequest r;
      r.broker_id = broker_id;
      r.cluster_id = "brook-sim-cluster";
      r.incarnation_id = incarnation;
      r.rack = fmt::format("rack-{}", broker_id % 2);
      net::BrokerRegistrationRequest::Listener l;
      l.name = "PLAINTEXT";
      l.host = "broker";
      l.port = 9092;
      r.listeners.push_back(l);
      net::BrokerRegistrationRequest::Feature mv;
      mv.name = std::string(metadata::kMetadataVersionFeature);
      mv.min_supported_version = controller::kMetadataVersionMin;
      mv.max_supported_version = controller::kMetadataVersionLatest;
      r.features.push_back(mv);
      std::optional<net::BrokerRegistrationResponse> resp =
          co_await channel.call<net::BrokerRegistrationResponse>(r, 4);
      if (resp.has_value() && resp->error_code == 0) {
        epoch = resp->broker_epoch;
        ++s->oracle.registrations;
      }
      continue;
    }
    net::BrokerHeartbeatRequest h;
    h.broker_id = broker_id;
    h.broker_epoch = epoch;
    h.current_metadata_offset = checker->image_end() - 1;
    h.want_shut_down = shutting_down;
    std::optional<net::BrokerHeartbeatResponse> hb = co_await channel.call<net::BrokerHeartbeatResponse>(h, 1);
    if (!hb.has_value()) continue;
    ++s->oracle.heartbeats;
    if (hb->error_code == net::code(net::Error::kStaleBrokerEpoch)) {
      epoch = -1;
      continue;
    }
    if (hb->error_code != 0) continue;
    if (hb->should_shut_down) {
      // Shut down: register again (a new incarnation would come from a
      // restart; the same one re-registering is a broker retrying).
      shutting_down = false;
      epoch = -1;
      continue;
    }
    if (hb->is_fenced || shutting_down || !s->writing) continue;
    const uint64_t pick = ctx->random().uniform(100);
    if (pick < 30) {
      std::optional<net::AlterPartitionRequest> change =
          isr_change(ctx->random(), checker->image(), broker_id, epoch);
      if (!change.has_value()) continue;
      std::optional<net::AlterPartitionResponse> resp = co_await channel.call<net::AlterPartitionResponse>(*change, 3);
      if (resp.has_value() && resp->error_code == 0 && !resp->topics.empty() &&
          !resp->topics[0].partitions.empty() && resp->topics[0].partitions[0].error_code == 0) {
        ++s->oracle.isr_changes;
      }
    } else if (pick < 36) {
      net::AllocateProducerIdsRequest r;
      r.broker_id = broker_id;
      r.broker_epoch = epoch;
      (void)co_await channel.call<net::AllocateProducerIdsResponse>(r, 0);
    } else if (pick < 37) {
      shutting_down = true;
    }
  }
}

// An admin client: creates, deletes and grows topics and alters their
// configs through the active controller.
io::Task<void> admin_client(io::Context* ctx, raft::RaftNode* node, const Checker* checker, KraftShared* s) {
  const KraftConfig& c = s->config;
  ControllerChannel channel(ctx, s, node, fmt::format("admin-{}", node->node_id()));
  uint64_t created = 0;
  while (true) {
    co_await ctx->clock().sleep_for(io::Duration(ctx->random().uniform_range(
        c.write_interval_min.count(), c.write_interval_max.count())));
    if (!s->writing) continue;
    const metadata::MetadataImage& image = checker->image();
    const auto& topics = image.topics().by_name;
    const uint64_t pick = ctx->random().uniform(100);
    bool ok = false;
    ++s->oracle.admin_requests;
    if (pick >= 82) {
      // ACLs and client quotas.
      const std::string principal = fmt::format("User:u{}", ctx->random().uniform(4));
      if (pick < 88) {
        net::CreateAclsRequest r;
        net::CreateAclsRequest::AclCreation c;
        c.resource_type = 2;  // TOPIC
        c.resource_name = fmt::format("t{}", ctx->random().uniform(8));
        c.resource_pattern_type = ctx->random().bernoulli(0.5) ? 3 : 4;  // LITERAL, PREFIXED
        c.principal = principal;
        c.host = "*";
        c.operation = static_cast<int8_t>(ctx->random().uniform_range(2, 14));
        c.permission_type = 3;  // ALLOW
        r.creations.push_back(c);
        std::optional<net::CreateAclsResponse> resp = co_await channel.call_items<net::CreateAclsResponse>(r, 3);
        ok = resp.has_value() && resp->results.size() == 1 && resp->results[0].error_code == 0;
      } else if (pick < 92) {
        net::DeleteAclsRequest r;
        net::DeleteAclsRequest::DeleteAclsFilter f;
        f.resource_type_filter = 1;  // ANY
        f.resource_name_filter = std::nullopt;
        f.pattern_type_filter = 1;
        f.principal_filter = principal;
        f.host_filter = std::nullopt;
        f.operation = 1;
        f.permission_type = 1;
        r.filters.push_back(f);
        std::optional<net::DeleteAclsResponse> resp = co_await channel.call_items<net::DeleteAclsResponse>(r, 3);
        ok = resp.has_value() && resp->filter_results.size() == 1 && resp->filter_results[0].error_code == 0;
      } else {
        net::AlterClientQuotasRequest r;
        net::AlterClientQuotasRequest::EntryData e;
        net::AlterClientQuotasRequest::EntityData entity;
        entity.entity_type = ctx->random().bernoulli(0.5) ? "user" : "client-id";
        entity.entity_name = fmt::format("c{}", ctx->random().uniform(4));
        e.entity.push_back(entity);
        net::AlterClientQuotasRequest::OpData op;
        op.key = "producer_byte_rate";
        op.value = static_cast<double>(ctx->random().uniform_range(1024, 1 << 20));
        op.remove = ctx->random().bernoulli(0.3);
        e.ops.push_back(op);
        r.entries.push_back(e);
        std::optional<net::AlterClientQuotasResponse> resp =
            co_await channel.call_items<net::AlterClientQuotasResponse>(r, 1);
        ok = resp.has_value() && resp->entries.size() == 1 && resp->entries[0].error_code == 0;
      }
    } else if (pick < 40 || topics.empty()) {
      if (topics.size() >= kTopicsMax) continue;
      net::CreateTopicsRequest r;
      net::CreateTopicsRequest::CreatableTopic t;
      t.name = fmt::format("t{}-{}", node->node_id(), created++);
      t.num_partitions = static_cast<int32_t>(ctx->random().uniform_range(1, 4));
      t.replication_factor = static_cast<int16_t>(ctx->random().uniform_range(1, 3));
      if (ctx->random().bernoulli(0.3)) {
        net::CreateTopicsRequest::CreatableTopicConfig config;
        config.name = "cleanup.policy";
        config.value = "compact";
        t.configs.push_back(config);
      }
      r.topics.push_back(t);
      std::optional<net::CreateTopicsResponse> resp;
      if (ctx->random().bernoulli(0.3)) {
        // As a broker forwards it.
        absl::StatusOr<io::BufferChain> inner = net::encode_request(r, 7, 1, std::string("admin"));
        BROOK_ASSERT(inner.ok());
        net::EnvelopeRequest envelope;
        envelope.request_data = inner->linearize().slice(4);
        envelope.request_principal = io::Buffer::copy_of("User:admin");
        envelope.client_host_address = io::Buffer::copy_of(std::string("\x0a\x00\x00\x09", 4));
        std::optional<net::EnvelopeResponse> answered =
            co_await channel.call_items<net::EnvelopeResponse>(envelope, 0);
        if (answered.has_value() && answered->error_code == 0 && answered->response_data.has_value()) {
          absl::StatusOr<net::CreateTopicsResponse> decoded =
              net::decode_response<net::CreateTopicsResponse>(*answered->response_data, 7);
          if (decoded.ok()) resp = std::move(*decoded);
        }
      } else {
        resp = co_await channel.call_items<net::CreateTopicsResponse>(r, 7);
      }
      ok = resp.has_value() && resp->topics.size() == 1 && resp->topics[0].error_code == 0;
    } else {
      auto it = topics.begin();
      std::advance(it, static_cast<long>(ctx->random().uniform(topics.size())));
      const std::string name = it->first;
      if (pick < 55) {
        net::DeleteTopicsRequest r;
        net::DeleteTopicsRequest::DeleteTopicState t;
        t.topic_id = it->second;
        r.topics.push_back(t);
        std::optional<net::DeleteTopicsResponse> resp = co_await channel.call_items<net::DeleteTopicsResponse>(r, 6);
        ok = resp.has_value() && resp->responses.size() == 1 && resp->responses[0].error_code == 0;
      } else if (pick < 70) {
        net::CreatePartitionsRequest r;
        net::CreatePartitionsRequest::CreatePartitionsTopic t;
        t.name = name;
        t.count = static_cast<int32_t>(image.topics().topic(name)->partitions.size()) + 1;
        t.assignments = std::nullopt;
        r.topics.push_back(t);
        std::optional<net::CreatePartitionsResponse> resp =
            co_await channel.call_items<net::CreatePartitionsResponse>(r, 3);
        ok = resp.has_value() && resp->results.size() == 1 && resp->results[0].error_code == 0;
      } else if (pick < 76) {
        // A reassignment of one partition to 1-3 of the brokers in a
        // random order, or the cancellation of its ongoing one.
        const metadata::TopicImage* topic = image.topics().topic(name);
        net::AlterPartitionReassignmentsRequest r;
        auto& rt = r.topics.emplace_back();
        rt.name = name;
        auto& rp = rt.partitions.emplace_back();
        rp.partition_index = static_cast<int32_t>(ctx->random().uniform(topic->partitions.size()));
        rp.replicas = std::nullopt;
        if (!ctx->random().bernoulli(0.2)) {
          std::vector<int32_t> ids;
          for (const auto& [id, b] : image.cluster().brokers) ids.push_back(id);
          ctx->random().shuffle(ids);
          ids.resize(std::min<size_t>(ids.size(), static_cast<size_t>(ctx->random().uniform_range(1, 3))));
          if (!ids.empty()) rp.replicas = std::move(ids);
        }
        std::optional<net::AlterPartitionReassignmentsResponse> resp =
            co_await channel.call_items<net::AlterPartitionReassignmentsResponse>(r, 0);
        ok = resp.has_value() && resp->error_code == 0 && resp->responses.size() == 1 &&
             resp->responses[0].partitions.size() == 1 && resp->responses[0].partitions[0].error_code == 0;
        if (ok) ++s->oracle.reassignments;
      } else {
        net::IncrementalAlterConfigsRequest r;
        net::IncrementalAlterConfigsRequest::AlterConfigsResource res;
        res.resource_type = metadata::kConfigResourceTopic;
        res.resource_name = name;
        net::IncrementalAlterConfigsRequest::AlterableConfig config;
        config.name = ctx->random().bernoulli(0.5) ? "retention.ms" : "max.message.bytes";
        config.config_operation = ctx->random().bernoulli(0.8) ? 0 : 1;
        config.value = std::to_string(ctx->random().uniform_range(1000, 1'000'000));
        res.configs.push_back(config);
        r.resources.push_back(res);
        std::optional<net::IncrementalAlterConfigsResponse> resp =
            co_await channel.call_items<net::IncrementalAlterConfigsResponse>(r, 1);
        ok = resp.has_value() && resp->responses.size() == 1 && resp->responses[0].error_code == 0;
      }
    }
    if (ok) {
      ++s->oracle.admin_ok;
      s->oracle.last_admin_ok_ns = World::running()->now_ns();
    }
  }
}

// One call of a membership agent, counted in membership_calls while it is
// unanswered, its node's crash included. (The count lives in this
// coroutine's outermost scope: g++ 12 destroys the locals of a block scope
// in a coroutine that dies while suspended twice.)
template <typename Response, typename Request>
io::Task<absl::StatusOr<Response>> membership_call(KraftShared* s, net::Peer* peer, Request request) {
  struct Counted {
    explicit Counted(int* n) : n(n) { ++*n; }
    Counted(const Counted&) = delete;
    Counted& operator=(const Counted&) = delete;
    ~Counted() { --*n; }
    int* n;
  };
  Counted counted(&s->membership_calls);
  co_return co_await peer->call<Response>(request, 0, 4s);
}

// Reconfig: moves the voter set towards s->target_voters, one change at a
// time as this node sees it, by asking the leader it knows. Agents on
// every node do this at once, so a leader gets concurrent requests.
io::Task<void> membership_agent(io::Context* ctx, raft::RaftNode* node, KraftShared* s) {
  std::map<int32_t, std::unique_ptr<net::Peer>> peers;
  while (true) {
    co_await ctx->clock().sleep_for(io::Duration(ctx->random().uniform_range(
        s->config.agent_interval_max.count() / 15, s->config.agent_interval_max.count())));
    const int32_t leader = node->leader_id();
    if (!s->reconfiguring || leader < 1) continue;
    std::vector<std::pair<bool, int32_t>> changes;  // (add?, id)
    const raft::VoterSet& voters = node->voters();
    for (int32_t id : s->target_voters) {
      if (!voters.contains(id)) changes.emplace_back(true, id);
    }
    // No voter change while a moved voter's new address is not committed
    // yet: the others must stay a majority that can reach each other. (The
    // operator's view, not this node's: a node whose log is behind, the
    // moved one among them, may not know the moved voter is one.)
    if (s->moved >= 0 && !s->move_recorded) continue;
    for (const auto& entry : voters) {
      if (!s->target_voters.contains(entry.first)) changes.emplace_back(false, entry.first);
    }
    if (changes.empty()) continue;
    const auto [add, id] = changes[ctx->random().uniform(changes.size())];
    auto it = peers.find(leader);
    if (it != peers.end() && it->second->address() != s->address_of(leader - 1)) {
      peers.erase(it);  // the leader moved (no call of this agent is in flight)
      it = peers.end();
    }
    if (it == peers.end()) {
      it = peers.emplace(leader, std::make_unique<net::Peer>(ctx->network(), ctx->clock(),
                                                             s->address_of(leader - 1),
                                                             fmt::format("membership-{}", node->node_id())))
               .first;
    }
    ++s->oracle.voter_changes_asked;
    if (add) {
      net::AddRaftVoterRequest request;
      request.cluster_id = node->config().cluster_id;
      request.timeout_ms = 3000;
      request.voter_id = id;
      request.voter_directory_id = KraftShared::directory_id(id - 1);
      net::AddRaftVoterRequest::Listener listener;
      listener.name = "CONTROLLER";
      listener.host = s->address_of(id - 1).host;
      listener.port = s->address_of(id - 1).port;
      request.listeners.push_back(std::move(listener));
      absl::StatusOr<net::AddRaftVoterResponse> response =
          co_await membership_call<net::AddRaftVoterResponse>(s, it->second.get(), std::move(request));
      if (response.ok() && response->error_code == 0) ++s->oracle.voters_added;
    } else {
      net::RemoveRaftVoterRequest request;
      request.cluster_id = node->config().cluster_id;
      request.voter_id = id;
      request.voter_directory_id = KraftShared::directory_id(id - 1);
      absl::StatusOr<net::RemoveRaftVoterResponse> response =
          co_await membership_call<net::RemoveRaftVoterResponse>(s, it->second.get(), std::move(request));
      if (response.ok() && response->error_code == 0) ++s->oracle.voters_removed;
    }
  }
}

// `format --standalone` on first start: the node alone is the first voter.
// (Its own coroutine: locals of a block scope in a coroutine that dies
// while suspended are destroyed twice by g++ 12.)
io::Task<absl::Status> format_standalone(io::Context* ctx, const KraftShared* s, int index) {
  const raft::RaftConfig rc = s->raft_config(index);
  CO_RETURN_IF_ERROR(co_await ctx->disk().make_dir(rc.log_dir));
  CO_ASSIGN_OR_RETURN(std::vector<raft::SnapshotId> existing, co_await raft::list_snapshots(ctx->disk(), rc.log_dir));
  if (!existing.empty()) co_return absl::OkStatus();
  raft::Voter self;
  self.id = rc.node_id;
  self.directory_id = rc.directory_id;
  self.endpoints.push_back(raft::VoterEndpoint{rc.listener_name, *rc.advertised});
  raft::VoterSet first;
  first.emplace(self.id, std::move(self));
  co_return co_await raft::write_bootstrap_checkpoint(ctx->disk(), rc.log_dir, std::move(first));
}

// Three or more voters, every node but `restarting` running, and every
// running node's latest voter set the committed one. (A node that is down
// may hold a voter set that never committed, and win an election with it.)
bool settled_voters(const KraftShared* s, int restarting) {
  const std::set<int32_t> committed = s->final_voters();
  if (committed.size() < 3) return false;
  for (size_t i = 0; i < s->addresses.size(); ++i) {
    const raft::RaftNode* n = i < s->live.size() ? s->live[i] : nullptr;
    if (n == nullptr) {
      if (static_cast<int>(i) != restarting) return false;
      continue;
    }
    std::set<int32_t> ids;
    for (const auto& entry : n->voters()) ids.insert(entry.first);
    if (ids != committed) return false;
  }
  return true;
}

io::Task<void> kraft_node_main(io::Context* ctx, KraftShared* s, int index) {
  if (s->boots.size() <= static_cast<size_t>(index)) s->boots.resize(static_cast<size_t>(index) + 1, 0);
  const int boot = ++s->boots[static_cast<size_t>(index)];
  if (s->config.reconfig && boot > 1 && s->port_moves == 0 && settled_voters(s, index) &&
      ctx->random().bernoulli(0.3) && s->membership_calls == 0) {
    // Back on another port: the voter set still names the old one until
    // this node's UpdateRaftVoter commits, and a leader elected meanwhile
    // must still be reachable (it tells its followers in BeginQuorumEpoch).
    // Once per run, among three or more voters, with every other node up
    // and no voter change under way (none in a voter set not committed, and
    // none asked of a leader and not answered: seed 83677 moved a voter of
    // three while a removal was on its way, and the removal left it one of
    // two), and the agents change no voter until
    // a voter set naming the new address commits: the others can still
    // reach a majority. (A quorum in which most voters moved at once, or
    // one of two, can elect no leader that would record the new
    // addresses; Kafka's quorum is no different.)
    io::Address& a = s->addresses[static_cast<size_t>(index)];
    a = io::Address(a.host, static_cast<uint16_t>(kControllerPort + boot));
    ++s->port_moves;
    s->moved = index;
    s->moved_after = s->oracle.committed_voters.empty() ? -1 : s->oracle.committed_voters.rbegin()->first;
  }
  if (s->config.reconfig && index == 0) {
    absl::Status formatted = co_await format_standalone(ctx, s, index);
    if (!formatted.ok()) {
      ctx->log().error("kraft: bootstrap checkpoint: {}", formatted.ToString());
      co_return;
    }
  }
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
  s->images[static_cast<size_t>(index)] = &checker.image();
  LiveGuard guard{s, index};
  io::TaskScope tasks(ctx->executor());
  if (s->config.controller) {
    if (node->is_voter()) {
      // Declared before the tasks that use it: the scope dies first.
      auto controller = std::make_unique<controller::QuorumController>(*ctx, *node, s->controller_config(index));
      controller->set_observer(&checker);
      controller->set_probe(&checker);
      node->set_listener(controller.get());
      io::TaskScope controller_tasks(ctx->executor());
      controller_tasks.spawn(controller->run());
      controller::QuorumController* c = controller.get();
      absl::Status ended =
          co_await node->run(**listener, [c](net::RequestFrame f) { return c->handle_request(std::move(f)); });
      ctx->log().error("kraft: replica stopped: {}", ended.ToString());
      co_return;
    }
    tasks.spawn(broker_agent(ctx, node.get(), &checker, s));
    tasks.spawn(admin_client(ctx, node.get(), &checker, s));
    tasks.spawn(snapshotter(ctx, node.get(), &checker, s));
  } else {
    if (node->is_voter() || s->config.reconfig) tasks.spawn(writer(ctx, node.get(), &checker, s));
    if (s->config.reconfig) tasks.spawn(membership_agent(ctx, node.get(), s));
    tasks.spawn(snapshotter(ctx, node.get(), &checker, s));
  }
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
  for (int32_t id : s.final_voters()) {
    const int i = id - 1;
    if (i == s.lost()) continue;
    const raft::RaftNode* node = s.live[static_cast<size_t>(i)];
    if (node == nullptr || node->high_watermark() < end) return false;
    if (s.oracle.node_up_to[static_cast<size_t>(i)] < end) return false;
  }
  return true;
}

// Controller scenarios: every voter's image shows every broker registered
// and unfenced (but the node lost for good).
bool brokers_unfenced(const KraftShared& s) {
  for (int i = 0; i < s.config.voters; ++i) {
    if (i == s.lost()) continue;
    const metadata::MetadataImage* image = s.images[static_cast<size_t>(i)];
    if (image == nullptr) return false;
    for (int b = 0; b < s.config.brokers; ++b) {
      if (s.config.voters + b == s.lost()) continue;
      const metadata::BrokerRegistration* reg = image->cluster().broker(s.config.voters + b + 1);
      if (reg == nullptr || reg->fenced || reg->in_controlled_shutdown) return false;
    }
  }
  return true;
}

void check_final(const KraftShared& s, bool live, std::vector<std::string>& failures) {
  auto add = [&](std::string what) {
    if (failures.size() < kFailuresMax) failures.push_back(std::move(what));
  };
  const KraftOracle& o = s.oracle;
  const std::set<int32_t> final_voters = s.final_voters();
  for (int i = 0; i < static_cast<int>(o.final_read.size()); ++i) {
    if (!o.final_read[static_cast<size_t>(i)]) add(fmt::format("node {}: final read did not finish", i + 1));
  }
  for (const auto& entry : o.committed) {
    const int64_t base = entry.first;
    const BatchId& id = entry.second;
    auto holds = [&](int32_t voter) {
      const size_t i = static_cast<size_t>(voter - 1);
      const auto& log = o.final_logs[i];
      auto it = log.find(base);
      // In the log, or in a snapshot (whose image was compared).
      return (it != log.end() && it->second == id) || id.last_offset < o.final_snapshot_end[i];
    };
    // A majority of the voters that committed it holds it: all of them in a
    // static quorum; one of the sets in effect from it on in a dynamic one.
    std::vector<const std::set<int32_t>*> sets{&final_voters};
    if (s.config.reconfig) sets = o.voters_from(id.last_offset);
    bool durable = false;
    for (const std::set<int32_t>* voters : sets) {
      int holders = 0;
      for (int32_t voter : *voters) holders += holds(voter) ? 1 : 0;
      durable = durable || holders >= static_cast<int>(voters->size()) / 2 + 1;
    }
    if (!durable) {
      add(fmt::format("durability: committed {} is on no majority of the voters [{}] (or of a later voter set) "
                      "after power loss",
                      describe_batch(base, id), fmt::join(*sets.front(), ",")));
    }
    if (!live) continue;
    for (int32_t voter : final_voters) {
      if (voter - 1 == s.lost()) continue;  // (lost for good: not expected to catch up)
      if (!holds(voter)) add(fmt::format("agreement: voter {} lacks committed {}", voter, describe_batch(base, id)));
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
  c.faults.draw_full_disks(seed);
  return c;
}

std::string KraftConfig::describe() const {
  const std::string controller_text =
      controller ? fmt::format("controller: brokers={} session={} heartbeat every {} controller snapshot every {}B "
                               "leader-rebalance={}\n",
                               brokers, seconds(broker_session_timeout), seconds(heartbeat_interval),
                               controller_snapshot_bytes,
                               leader_rebalance_interval > io::Duration{0} ? seconds(leader_rebalance_interval)
                                                                           : std::string("off"))
                 : "";
  const std::string reconfig_text =
      reconfig ? fmt::format("reconfig: dynamic quorum from node 1, target redrawn every <={}, agents every <={}\n",
                             seconds(reconfig_every_max), seconds(agent_interval_max))
               : "";
  return controller_text + reconfig_text + fmt::format("swarm: voters={} observers={} election timeout {} snapshot every {} batches segment {}B "
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
  } else if (options.name.starts_with("kraft-reconfig")) {
    io::Random r(options.seed ^ (kConfigSalt << 4));
    config.reconfig = true;
    config.voters = r.bernoulli(0.5) ? 3 : 5;  // nodes that may become voters
    config.observers = 0;
    config.reconfig_every_max = 8s;
    config.agent_interval_max = 1500ms;
    if (options.name != "kraft-reconfig") {
      // Changes pile up: targets move every second or so, agents press,
      // leaders crash and come back quickly.
      config.reconfig_every_max = uniform_duration(r, 600ms, 2s);
      config.agent_interval_max = uniform_duration(r, 100ms, 400ms);
      config.faults.crash_interval = uniform_duration(r, 500ms, 3s);
      config.faults.restart_delay_max = uniform_duration(r, 10ms, 500ms);
      config.faults.crash_all_probability = 0;
    }
    if (options.name == "kraft-reconfig-mutant-concurrent") config.mutation = "concurrent-voter-changes";
  } else if (options.name.starts_with("controller")) {
    io::Random r(options.seed ^ (kConfigSalt << 3));
    config.controller = true;
    config.brokers = static_cast<int>(r.uniform_range(3, 4));
    config.observers = config.brokers;
    config.broker_session_timeout = config.election_timeout * 3;
    config.heartbeat_interval = config.broker_session_timeout / 6;
    config.controller_snapshot_bytes = r.bernoulli(0.3) ? 0 : static_cast<int64_t>(r.uniform_range(4 << 10, 64 << 10));
    config.write_interval_min = uniform_duration(r, 20ms, 100ms);
    config.write_interval_max = config.write_interval_min * 2;
    if (options.name == "controller-mutant-commit") config.mutation = "answer-before-commit";
    // (A stream of its own: the draws above stay each seed's.)
    io::Random rebalance(options.seed ^ (kConfigSalt << 4));
    if (rebalance.bernoulli(0.5)) config.leader_rebalance_interval = uniform_duration(rebalance, 500ms, 5s);
  }
  if (options.name.ends_with("-loss")) config.faults.draw_node_loss(options.seed);
  const WorldOptions world_options = scenario_world_options(options, config.faults.network);
  const int nodes = config.voters + config.observers;
  // Declared before the World: node tasks still alive when the World goes
  // touch it as they die.
  KraftShared shared(config, nodes);
  World world(options.seed, world_options);
  print_run_start(options, world, config.describe());
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
  shared.faults = &faults;
  if (config.faults.node_loss_after.count() > 0) {
    // One node, a voter or not, may be lost for good: the voters left are
    // a majority, and the checkers judge the nodes left (its disk is read
    // back at the end all the same, as a dead machine's could be).
    faults.pick_lost = [&]() -> std::optional<int> {
      for (int i = 0; i < nodes; ++i) {
        if (!world.node(i).up()) return std::nullopt;
      }
      return static_cast<int>(world.random().uniform(static_cast<uint64_t>(nodes)));
    };
  }
  faults.start();
  if (config.reconfig) {
    // Grow from node 1 to every node, then redraw the target every few
    // seconds: any non-empty subset.
    shared.oracle.committed_voters.emplace(-1, std::set<int32_t>{1});
    for (int i = 1; i <= config.voters; ++i) shared.target_voters.insert(i);
    io::Random r(options.seed ^ (kConfigSalt << 5));
    io::Duration left = config.workload;
    while (left > io::Duration(0)) {
      const io::Duration step = std::min(left, uniform_duration(r, config.reconfig_every_max / 4,
                                                                 config.reconfig_every_max));
      world.run_for(step);
      left -= step;
      shared.target_voters.clear();
      for (int i = 1; i <= config.voters; ++i) {
        if (r.bernoulli(0.6)) shared.target_voters.insert(i);
      }
      if (shared.target_voters.empty()) {
        shared.target_voters.insert(static_cast<int32_t>(r.uniform_range(1, config.voters)));
      }
    }
    shared.reconfiguring = false;
  } else {
    world.run_for(config.workload);
  }
  faults.stop();
  const int64_t heal_ns = world.now_ns();
  // Liveness: a write made after the heal commits, then (writes stopped)
  // every voter catches up, all within the quiet phase.
  bool live = world.run_until(
      [&] {
        return (config.controller ? shared.oracle.last_admin_ok_ns : shared.oracle.last_ack_ns) > heal_ns;
      },
      config.quiet_max);
  shared.writing = false;
  std::string voter_states;
  if (live) {
    const io::Duration left = config.quiet_max - io::Duration(world.now_ns() - heal_ns);
    live = world.run_until(
        [&] { return caught_up(shared) && (!config.controller || brokers_unfenced(shared)); }, left);
  }
  if (config.controller) {
    for (int i = 0; i < config.voters; ++i) {
      const metadata::MetadataImage* image = shared.images[static_cast<size_t>(i)];
      if (image == nullptr) continue;
      voter_states += fmt::format("brokers as voter {} sees them:", i + 1);
      for (int b = 0; b < config.brokers; ++b) {
        const int32_t id = config.voters + b + 1;
        const metadata::BrokerRegistration* reg = image->cluster().broker(id);
        voter_states += fmt::format(" {} {}", id,
                                    reg == nullptr ? "unregistered"
                                    : reg->fenced  ? "fenced"
                                    : reg->in_controlled_shutdown ? "shutting-down"
                                                                  : "unfenced");
      }
      voter_states += "; ";
      break;
    }
  }
  for (int i = 0; i < config.voters; ++i) {
    const raft::RaftNode* node = shared.live[static_cast<size_t>(i)];
    if (!voter_states.empty() && !voter_states.ends_with("; ")) voter_states += ", ";
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
        "liveness: no leader committed a new write and caught every voter up{} within {} of the heal "
        "(committed end {}, last ack at {}; voters: {})",
        config.controller ? " (and unfenced every broker)" : "", seconds(config.quiet_max),
        shared.oracle.committed_end(),
        seconds(io::Duration(std::max<int64_t>(shared.oracle.last_ack_ns, 0))), voter_states));
  }
  result.passed = result.failures.empty();
  result.trace_hash = world.trace_hash();
  result.events = world.events_run();
  result.simulated = world.elapsed();
  result.replay_command = world.replay_command();
  const KraftOracle& o = shared.oracle;
  if (config.controller) {
    result.summary = fmt::format(
        "controller: registrations={} heartbeats={} isr-changes={} producer-id-blocks={} admin={}/{} ok "
        "(reassignments {}); ",
        o.registrations, o.heartbeats, o.isr_changes, o.producer_id_blocks, o.admin_ok, o.admin_requests,
        o.reassignments);
  }
  if (config.reconfig) {
    result.summary = fmt::format("reconfig: changes asked={} added={} removed={} port-moves={} final voters=[{}]; ",
                                 o.voter_changes_asked, o.voters_added, o.voters_removed, shared.port_moves,
                                 fmt::join(shared.final_voters(), ","));
  }
  result.summary += fmt::format(
      "epochs={} elections={} appends={} rejected={} acked={} commit-timeouts={} committed-batches={} "
      "committed-end={} delivered={} records-replayed={} images-compared={} snapshots={}/{}; faults: {} "
      "buggify-fired={}",
      o.leaders.empty() ? 0 : o.leaders.rbegin()->first, o.elections, o.appends, o.appends_rejected,
      o.acks, o.commit_timeouts, o.committed.size(), o.committed_end(), o.batches_delivered,
      o.records_replayed, o.images_compared, o.snapshots_taken, o.snapshots_loaded,
      faults.counters(), world.buggify().fired());
  return result;
}

absl::StatusOr<io::Duration> simulated_failover(uint64_t seed, int voters, int observers) {
  KraftConfig config;
  config.voters = voters;
  config.observers = observers;
  config.write_interval_min = 10ms;
  config.write_interval_max = 10ms;
  config.records_per_batch_max = 1;
  config.election_timeout = 1s;
  WorldOptions world_options;
  world_options.scenario = "kraft-failover";
  const int nodes = voters + observers;
  KraftShared shared(config, nodes);  // before the World, as in run_kraft
  World world(seed, world_options);
  for (int i = 0; i < nodes; ++i) {
    Node& node = world.add_node();
    shared.addresses.push_back(node.address(kControllerPort));
    if (i < voters) shared.voters.emplace(i + 1, node.address(kControllerPort));
  }
  KraftShared* s = &shared;
  for (int i = 0; i < nodes; ++i) {
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
  // A new leader has committed a write, and every observer follows it and
  // knows that write committed.
  const bool ok = world.run_until(
      [&] {
        if (shared.oracle.last_ack_ns <= crashed) return false;
        const raft::RaftNode* next = nullptr;
        for (int i = 0; i < voters; ++i) {
          const raft::RaftNode* n = shared.live[static_cast<size_t>(i)];
          if (n != nullptr && n->role() == raft::Role::kLeader && n->epoch() > old_epoch) next = n;
        }
        if (next == nullptr) return false;
        for (int i = voters; i < nodes; ++i) {
          const raft::RaftNode* n = shared.live[static_cast<size_t>(i)];
          if (n == nullptr || n->leader_id() != next->node_id() || n->epoch() != next->epoch() ||
              n->high_watermark() < shared.oracle.acked_end) {
            return false;
          }
        }
        return true;
      },
      60s);
  if (!ok) {
    return absl::DeadlineExceededError(observers == 0
                                           ? "no new leader committed within 60 s"
                                           : "no new leader committed and reached every observer within 60 s");
  }
  return io::Duration(world.now_ns() - crashed);
}

}  // namespace brook::sim
