// core/broker/broker.h
//
// Broker: the data plane of one node (Kafka's BrokerServer: KafkaApis,
// ReplicaManager, BrokerLifecycleManager and the broker's MetadataLoader in
// one class), written against io::Context so it runs in the simulator and on
// real I/O alike.
//
// Metadata. The broker is a RaftListener: it replays every committed batch
// of the metadata log into its own MetadataImage (the same MetadataDelta
// code the controllers run). A background task then applies the image to
// the partitions: a partition this broker is a replica of gets its log
// opened (created in `<topic>-<partition>/` with a `partition.metadata`
// naming the topic id), learns its leader, leader epoch and ISR; a
// partition whose topic is gone is closed and its directory removed. A
// directory left over from a topic deleted while the broker was down (its
// partition.metadata names another topic id) is removed before reuse.
//
// Lifecycle (Kafka's BrokerLifecycleManager). The broker registers with the
// active controller (BrokerRegistration: its listener, rack, incarnation id
// and the metadata.version range it supports) and heartbeats every
// heartbeat_interval with the offset it has replayed; the controller
// unfences it once it has caught up. shutdown() asks for a controlled
// shutdown (leadership moves away) before the logs close.
//
// Controller calls go to the Raft leader, found through the Raft node
// (leader id and the voters' endpoints), with retries on NOT_CONTROLLER and
// unreachable controllers until the request's deadline.
//
// Client APIs (handle_request): ApiVersions, Metadata (with auto-creation),
// Produce (acks 0, 1 and all; idempotent producers), Fetch (long polling,
// read_committed, incremental fetch sessions), ListOffsets, OffsetsForLeaderEpoch,
// InitProducerId, DeleteRecords, DescribeConfigs,
// DescribeCluster, DescribeLogDirs, and CreateTopics, DeleteTopics, CreatePartitions,
// IncrementalAlterConfigs, AlterConfigs, CreateAcls, DeleteAcls,
// AlterClientQuotas forwarded to the controller.
//
// Consumer groups (groups.cc): the broker hosts a group::GroupCoordinator.
// FindCoordinator creates `__consumer_offsets` on first use (compacted,
// offsets.topic.num.partitions partitions, offsets.topic.replication.factor
// replicas) and names the leader of the group's partition. Whenever the
// image is applied, the coordinator loads the partitions this broker now
// leads (replaying their records) and unloads the others; its records are
// appended as this partition's leader and count once the ISR has them.
//
// Transactions (transactions.cc): the broker hosts a
// txn::TransactionCoordinator over `__transaction_state` the same way
// (FindCoordinator with key type 1 creates it), serves the transactional
// APIs, and writes the coordinator's commit and abort markers: to its own
// partitions directly, to other leaders by WriteTxnMarkers. A marker counts
// once the partition's ISR has it; a marker on __consumer_offsets also
// settles the transaction's offset commits in the group coordinator.
//
// Replication (replication.cc, Kafka's ReplicaManager and Partition). A
// follower replica is fetched by one fetcher task per leader broker: Fetch
// v15 with its replica id and broker epoch, the offset of its log end and
// the epoch of its last record. The leader answers a follower from its log
// end (not the high watermark), and tells a follower whose last epoch ends
// earlier on the leader where the logs diverge (KIP-320's DivergingEpoch);
// the follower truncates there and fetches again. The leader tracks each
// follower's log end and when it was last caught up; its high watermark is
// the least log end over the ISR (and over a replica being added to it:
// Kafka's "maximal ISR"). A follower that caught up to the high watermark
// (and into the leader's epoch) is added to the ISR, and one that was not
// caught up within replica.lag.time.max.ms is removed, both by AlterPartition
// to the controller, one change in flight per partition. acks=all answers
// when the high watermark passes the batch, NOT_ENOUGH_REPLICAS_AFTER_APPEND
// when the ISR meanwhile shrank below min.insync.replicas.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "net/kafka/errors.h"
#include "coordinators/group/group_coordinator.h"
#include "coordinators/runtime/batched_writer.h"
#include "coordinators/runtime/loader.h"
#include "coordinators/txn/transaction_coordinator.h"
#include "core/broker/fetch_session.h"
#include "core/metadata/image.h"
#include "io/buffer.h"
#include "io/context.h"
#include "io/scope.h"
#include "io/sync.h"
#include "io/task.h"
#include "io/time.h"
#include "net/kafka/frame.h"
#include "net/kafka/messages/fetch_request.h"
#include "net/kafka/messages/fetch_response.h"
#include "net/kafka/record_batch.h"
#include "net/kafka/rpc.h"
#include "raft/raft_node.h"
#include "storage/checkpoint.h"
#include "storage/log.h"

namespace brook::broker {

// The client id prefix of an OffsetFetch one broker forwards to the group's
// coordinator; a request carrying it is answered locally, never forwarded
// again.
inline constexpr std::string_view kOffsetFetchForwardClientId = "brook-offset-fetch-forward";

// How long a replica remembers an idempotent producer's batch it refused
// (Partition::refused_batches): longer than a producer takes to resend it,
// short enough that a producer that gave it up is not refused for long.
// The log maintenance loop forgets older ones. At most kMaxRefusedBatches
// producers are remembered per partition.
inline constexpr io::Duration kRefusedBatchMemory = std::chrono::seconds(30);
inline constexpr size_t kMaxRefusedBatches = 4096;

// A request still unanswered this long is logged as a warning (once), and
// how long it took when it is answered. Longer than the waits clients ask
// for by default: Produce waits at most its timeout (clients' 30 s), Fetch
// its max wait; JoinGroup and SyncGroup wait up to the group's rebalance
// timeout, and a Produce with a longer timeout may wait as long.
inline constexpr io::Duration kSlowRequest = std::chrono::seconds(60);

// After the controller refuses a leader's AlterPartition
// (Partition::alter_refused_at), the leader sends no other for that
// partition until its metadata changes, or for this long (the interval at
// which Kafka's controller writes a no-op record, which is what brings a
// lagging broker's metadata up to date there).
inline constexpr io::Duration kAlterPartitionRetryBackoff = std::chrono::milliseconds(500);

struct BrokerConfig {
  int32_t node_id = 1;
  std::string cluster_id;
  // The listener brokers reach each other on (inter.broker.listener.name),
  // and its advertised address: replicas fetch from it, requests are
  // forwarded to it, and clients whose connection names no listener are
  // told of it.
  std::string listener_name = "PLAINTEXT";
  io::Address advertised{"localhost", 9092};
  // The node's other client listeners (listeners / advertised.listeners),
  // registered beside it. A client is told of each broker's address on
  // the listener its request came in on (RequestFrame::listener_name).
  std::vector<std::pair<std::string, io::Address>> other_listeners;
  // When the inter-broker listener is SASL_PLAINTEXT: the PLAIN
  // credentials this broker authenticates with to the others (and to
  // itself) on it.
  std::optional<net::SaslCredentials> inter_broker_sasl;
  // When the inter-broker listener is SSL or SASL_SSL: the client side of
  // TLS this broker connects to the others (and to itself) with.
  std::shared_ptr<const net::tls::Context> inter_broker_tls;
  std::optional<std::string> rack;  // broker.rack
  // The data directory as DescribeLogDirs names it (log.dirs).
  std::string log_dir = "data";
  net::Uuid incarnation_id;
  net::Uuid directory_id;
  // broker.heartbeat.interval.ms
  io::Duration heartbeat_interval{std::chrono::milliseconds(2000)};
  // How long a forwarded request may wait for the controller.
  io::Duration controller_timeout{std::chrono::milliseconds(30000)};
  // auto.create.topics.enable, num.partitions, default.replication.factor
  bool auto_create_topics = true;
  int32_t num_partitions = 1;
  int16_t default_replication_factor = 1;
  // log.* and message.max.bytes: the broker defaults every topic's log
  // starts from (topic configs override them).
  storage::LogConfig log_defaults;
  // log.retention.check.interval.ms, log.cleaner.enable,
  // log.cleaner.backoff.ms and log.cleaner.dedupe.buffer.size: the log
  // maintenance log_loop() runs.
  io::Duration log_retention_check_interval{std::chrono::milliseconds(300000)};
  bool log_cleaner_enable = true;
  io::Duration log_cleaner_backoff{std::chrono::milliseconds(15000)};
  size_t log_cleaner_dedupe_buffer_size = size_t{128} << 20;
  // min.insync.replicas (broker default).
  int32_t min_insync_replicas = 1;
  // replica.lag.time.max.ms, replica.fetch.max.bytes,
  // replica.fetch.response.max.bytes, replica.fetch.wait.max.ms,
  // replica.fetch.backoff.ms
  io::Duration replica_lag_time_max{std::chrono::milliseconds(30000)};
  int32_t replica_fetch_max_bytes = 1 << 20;
  int32_t replica_fetch_response_max_bytes = 10 << 20;
  io::Duration replica_fetch_wait_max{std::chrono::milliseconds(500)};
  io::Duration replica_fetch_backoff{std::chrono::milliseconds(1000)};
  // The client listener: connections.max.idle.ms, socket.request.max.bytes.
  io::Duration connections_max_idle{std::chrono::milliseconds(600000)};
  int32_t socket_request_max_bytes = 100 * 1024 * 1024;
  // The group coordinator (offsets.topic.num.partitions, group.* and
  // offsets.retention.*), offsets.topic.replication.factor and
  // offsets.commit.timeout.ms.
  group::GroupCoordinatorConfig group;
  int16_t offsets_topic_replication_factor = 3;
  io::Duration offsets_commit_timeout{std::chrono::milliseconds(5000)};
  // The transaction coordinator (transaction.*, transactional.id.*), and
  // __transaction_state's replication factor and min.insync.replicas.
  txn::TransactionCoordinatorConfig txn;
  int16_t transaction_state_replication_factor = 3;
  int32_t transaction_state_min_isr = 2;
  // transaction.partition.verification.enable (KIP-890): a partition
  // leader asks the transaction coordinator whether a producer's first
  // transactional batch belongs to an ongoing transaction that added the
  // partition before appending it.
  bool transaction_partition_verification = true;
  // The node's server.properties as DescribeConfigs shows them
  // (STATIC_BROKER_CONFIG).
  std::map<std::string, std::string> static_configs;
};

// What a leader knows of one follower replica.
struct FollowerState {
  int64_t log_end_offset = -1;  // unknown until it fetches
  io::Instant last_caught_up{};
  io::Instant last_fetch{};
  int64_t leader_end_at_last_fetch = -1;
};

inline bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// One partition replica on this broker.
struct Partition {
  std::string topic;
  net::Uuid topic_id;
  int32_t index = 0;
  std::unique_ptr<storage::Log> log;
  int32_t leader = -1;
  int32_t leader_epoch = -1;
  int32_t partition_epoch = -1;
  std::vector<int32_t> replicas;
  std::vector<int32_t> isr;
  int32_t min_insync_replicas = 1;
  // As leader: the followers, the ISR change in flight (AlterPartition)
  // and the log end when this leader epoch began.
  std::map<int32_t, FollowerState> followers;
  // The ISR proposed to the controller, and the partition epoch the
  // proposal was made in. Until the answer or the metadata log says what
  // the controller holds, the high watermark counts the replicas of both
  // the current and the proposed ISR (Kafka's maximal ISR): the controller
  // may have committed the proposal, and may elect any of its members.
  std::optional<std::vector<int32_t>> pending_isr;
  int32_t pending_isr_epoch = -1;
  // When the controller last refused this leader's AlterPartition with
  // INELIGIBLE_REPLICA (a replica fenced or shutting down that this
  // broker's metadata still shows eligible): asking again at once, at
  // every follower fetch, is refused the same way; the next metadata
  // update (which clears this) or kAlterPartitionRetryBackoff is waited for.
  std::optional<io::Instant> alter_refused_at;
  int64_t leader_epoch_start_offset = 0;
  // As follower: the fetcher backs off until then after an error.
  io::Instant fetch_backoff_until{};
  // As leader, by producer id: the transaction verifications (KIP-890)
  // under way for a producer's first transactional write here. A marker
  // for the producer, or a new leader epoch, removes its entry, so a write
  // verified for a transaction that ended meanwhile finds its guard gone.
  struct TxnVerification {
    uint64_t guard = 0;
    int in_flight = 0;
    // The coordinator confirmed the transaction under this guard.
    bool verified = false;
  };
  std::map<int64_t, TxnVerification> txn_verifications;
  // By producer id: an idempotent producer's batch this replica refused
  // before appending it (not the leader yet, or too small an ISR). A
  // producer pipelines its requests, so the ones it sent after that batch
  // may arrive once the refusal no longer holds (this replica became the
  // leader meanwhile); their sequences then skip the refused batch. Kafka
  // answers them OUT_OF_ORDER_SEQUENCE_NUMBER, on which librdkafka bumps
  // its epoch and renumbers every partition's unacknowledged messages,
  // duplicating any that an earlier attempt did write. Brook answers such
  // a batch with the refused one's error instead (NOT_LEADER_OR_FOLLOWER or
  // NOT_ENOUGH_REPLICAS), which every client retries, in order after the
  // refused one. An entry goes once the producer's sequence passes it, at
  // a new epoch, or after kRefusedBatchMemory.
  struct RefusedBatch {
    int16_t epoch = 0;
    int32_t base_sequence = 0;
    io::Instant at{};
    net::Error error = net::Error::kNone;
  };
  std::map<int64_t, RefusedBatch> refused_batches;

  bool is_leader(int32_t self) const { return leader == self; }
  bool is_follower(int32_t self) const {
    return leader != self && contains(replicas, self);
  }
};

class Broker final : public raft::RaftListener, public net::ScramCredentialLookup, private group::CoordinatorLog {
 public:
  // `raft` is the node's metadata log replica (a voter in combined mode).
  Broker(io::Context& ctx, raft::RaftNode& raft, BrokerConfig config);
  ~Broker() override;
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  // Registration, heartbeats and applying metadata to the partitions; runs
  // until cancelled, or returns the error that took a log offline: like a
  // Kafka broker whose only log directory failed, the broker then stops
  // (the process exits and is restarted; recovery sorts out the log).
  io::Task<absl::Status> run();
  // Controlled shutdown (bounded by `timeout`), then every log is closed.
  // Yields the first error a log's close met (its unwritten records may be
  // lost). Once the logs begin to close, the errors that requests and
  // replica fetchers still running get from them are the close's own and
  // do not count as a failed log.
  io::Task<absl::Status> shutdown(io::Duration timeout);

  // Answers one client request frame. An empty chain means no response
  // (Produce with acks=0).
  io::Task<absl::StatusOr<io::BufferChain>> handle_request(net::RequestFrame frame);
  // handle_request, logging a request it cannot answer (the connection is
  // then closed) and one slow to answer (kSlowRequest).
  io::Task<absl::StatusOr<io::BufferChain>> answer(net::RequestFrame frame);

  // A request answer() has not answered yet.
  struct PendingRequest {
    int16_t key = 0;
    int16_t version = 0;
    int32_t correlation_id = 0;
    std::string client_id;
    io::Instant since{};
    bool reported = false;  // logged as slow
    // "request key=K vV correlation id C from 'CLIENT'", for log lines.
    std::string describe() const;
  };
  // The oldest of them and how long it has waited, if any (checkers).
  std::optional<std::pair<PendingRequest, io::Duration>> oldest_pending_request() const;
  // The longest any request took to be answered (checkers).
  io::Duration longest_answer() const { return longest_answer_; }

  const metadata::MetadataImage& image() const { return image_; }
  int64_t broker_epoch() const { return broker_epoch_; }
  int32_t node_id() const { return config_.node_id; }
  // How a client listener serves connections (idle timeout, request size),
  // `listener` its name (the inter-broker listener's when empty; it must
  // outlive the serving).
  net::ServeOptions serve_options(std::string_view listener = {}) const {
    net::ServeOptions o;
    o.max_request_bytes = config_.socket_request_max_bytes;
    o.clock = &ctx_->clock();
    o.idle_timeout = config_.connections_max_idle;
    o.listener_name = listener.empty() ? std::string_view(config_.listener_name) : listener;
    return o;
  }
  // A SASL listener's settings with this broker's SCRAM credentials (its
  // image's) and nonce source filled in.
  net::SaslServerConfig sasl_config(net::SaslServerConfig listener) {
    listener.scram = this;
    listener.random = &ctx_->random();
    return listener;
  }
  // The image's SCRAM credential of `user` (SASL/SCRAM on the listeners).
  std::optional<net::ScramCredential> find(net::ScramMechanism mechanism, std::string_view user) const override;
  // Registered and unfenced in the replayed image.
  bool serving() const;
  const std::map<std::pair<std::string, int32_t>, std::shared_ptr<Partition>>& partitions() const {
    return partitions_;
  }

  // raft::RaftListener
  void handle_commit(const raft::CommittedBatch& batch) override;
  void handle_snapshot(raft::SnapshotId id, const std::vector<io::Buffer>& values) override;

  const group::GroupCoordinator& groups() const { return groups_; }
  // Coordinator writes asked for, and the record batches they were
  // appended in (several writes share a batch when they queue up).
  using CoordinatorWriteStats = runtime::BatchedWriter::Stats;
  CoordinatorWriteStats coordinator_write_stats() const { return offsets_writer_.stats(); }

 private:
  using PartitionKey = std::pair<std::string, int32_t>;

  // --- metadata and partitions (broker.cc) ---
  void set_image(metadata::MetadataImage image);
  io::Task<void> apply_loop();
  io::Task<absl::Status> apply_image();
  io::Task<absl::Status> open_partition(const metadata::TopicImage& topic, int32_t index);
  io::Task<absl::Status> remove_partition(PartitionKey key);
  io::Task<absl::Status> remove_dir(std::string dir);
  uint64_t removals_ = 0;  // remove_dir's calls, to name each one's `-delete` directory
  // The data directory's log-start-offset-checkpoint (Kafka's file), so
  // that a log start moved by DeleteRecords survives a restart: read when
  // the first partition opens, and each opening partition whose directory
  // was there before starts from its entry. checkpoint_log_starts() writes
  // every open partition's log start, plus the entries of partitions not
  // opened (yet), before DeleteRecords answers and after a follower
  // follows its leader's start.
  io::Task<absl::Status> checkpoint_log_starts();
  std::optional<storage::OffsetCheckpoint> log_starts_;
  io::Mutex log_starts_mutex_;
  // Partition directories with no partition here in `image` (their topic
  // deleted, or their replica moved, while this broker was away), as
  // Kafka removes stray replicas: removed when the image first holds this
  // broker's registration, and again after an apply failed (a removal or
  // a creation may have left a directory behind).
  io::Task<absl::Status> remove_stray_partitions(const metadata::MetadataImage& image);
  storage::LogConfig log_config_for(const std::string& topic) const;
  // message.downconversion.enable of the topic, else the cluster-wide
  // dynamic log.message.downconversion.enable, else true: whether Fetch
  // v0-3 may read the topic.
  bool downconversion_enabled(const std::string& topic) const;
  int32_t min_insync_for(const std::string& topic) const;
  // Waits (up to `timeout`) until the image holds `topic` with a leader for
  // every partition, or until it is gone when `present` is false.
  io::Task<bool> wait_for_topic(std::string topic, bool present, io::Duration timeout);
  // Handlers keep the shared_ptr across their waits: a partition removed
  // meanwhile (its topic deleted) stays alive until they let go.
  std::shared_ptr<Partition> find(const std::string& topic, int32_t index);

  // --- replication (replication.cc) ---
  // The partition became leader in a new epoch: followers start unknown
  // (those in the ISR count as caught up now), the epoch starts at the log end.
  io::Task<absl::Status> become_leader(Partition& p);
  // Raises the leader's high watermark to the least log end over the
  // maximal ISR; wakes waiters when it moved.
  void maybe_advance_high_watermark(Partition& p);
  // A follower fetched at `fetch_offset` (the leader's log end was
  // `leader_end` when the fetch was read).
  void update_follower(const std::shared_ptr<Partition>& p, int32_t replica, int64_t fetch_offset);
  // Whether this leader may ask to change p's ISR now: none in flight,
  // and no refusal still waiting for metadata (Partition::alter_refused_at).
  bool may_alter_isr(const Partition& p) const;
  void maybe_expand_isr(const std::shared_ptr<Partition>& p, int32_t replica);
  // Every half lag time: followers not caught up within the lag time leave the ISR.
  io::Task<void> isr_loop();
  // Every kLogMaintenanceInterval, for each partition log: starts the device
  // write of its newest bytes (storage::Log::start_writeback) and runs the
  // flush.ms policy. Every log.retention.check.interval.ms it deletes the
  // segments retention lets go, and every log.cleaner.backoff.ms it
  // compacts the compacted logs dirty enough (each first after at most
  // kLogInitialTaskDelay, as Kafka's log.initial.task.delay.ms).
  io::Task<void> log_loop();
  io::Task<void> run_retention(std::vector<std::shared_ptr<Partition>> partitions);
  io::Task<void> run_cleaner(std::vector<std::shared_ptr<Partition>> partitions);
  // Logs each request pending for kSlowRequest or longer, once.
  void report_slow_requests();
  // AlterPartition to the controller; applies the answer.
  io::Task<void> alter_isr(std::shared_ptr<Partition> p, std::vector<int32_t> new_isr);
  // Starts a fetcher for every leader this broker follows a partition of.
  void ensure_fetchers();
  io::Task<void> fetcher_loop(int32_t leader);
  // One partition of a fetcher's answer; false when the fetcher should back off.
  io::Task<bool> apply_fetched(std::shared_ptr<Partition> p, int32_t leader_epoch, int64_t fetch_offset,
                               net::FetchResponse::PartitionData data);
  // A broker's address on `listener` (the inter-broker listener when
  // empty), if registered.
  std::optional<io::Address> broker_address(int32_t id, std::string_view listener = {}) const;
  // The listener whose addresses answer a client's request: the one it
  // came in on.
  const std::string& client_listener(const net::RequestFrame& frame) const {
    return frame.listener_name.empty() ? config_.listener_name : frame.listener_name;
  }
  // The image's registration of a partition (its leader, epoch and
  // replicas), or nullptr when the image has no such partition.
  const metadata::PartitionRegistration* registration(std::string_view topic, int32_t partition) const;

  // An I/O error on a partition's log: the broker stops (see run()).
  void log_failed(const absl::Status& status);
  // An operation on `p`'s log failed with `status`. While `p` is still this
  // broker's partition that is log_failed, and the answer is
  // KAFKA_STORAGE_ERROR. A partition removed meanwhile (its topic deleted,
  // its replica stopped or replaced) had its log closed under the operation,
  // which is no disk's fault: the answer is UNKNOWN_TOPIC_OR_PARTITION when
  // its topic is gone, NOT_LEADER_OR_FOLLOWER otherwise.
  net::Error partition_log_failed(const std::shared_ptr<Partition>& p, const absl::Status& status);

  // --- the group coordinator (groups.cc) ---
  // group::CoordinatorLog: appends to a __consumer_offsets partition led
  // here (batched with the writes queued meanwhile) and waits for the ISR.
  io::Task<Written> write(int32_t partition, int32_t epoch, std::vector<group::CoordinatorRecord> records) override;
  // group::CoordinatorLog: TxnOffsetCommit's records, alone in a
  // transactional batch of the producer, and the wait for the ISR. With
  // transaction.partition.verification.enable, a producer without an open
  // transaction there needs `verification` to be the guard its request was
  // verified under (verify_first_txn_writes), still unended by a marker.
  io::Task<Written> write_transactional(int32_t partition, int32_t epoch, int64_t producer_id, int16_t producer_epoch,
                                        uint64_t verification, std::vector<group::CoordinatorRecord> records) override;
  // The partitions of a coordinator's internal topic as the runtime sees
  // them: appends as their leader, the wait for the high watermark, and
  // reads for the loads.
  class CoordinatorPartitions final : public runtime::BatchAppender, public runtime::PartitionReader {
   public:
    CoordinatorPartitions(Broker& broker, std::string topic) : broker_(&broker), topic_(std::move(topic)) {}
    const std::string& topic() const { return topic_; }
    net::Error check_leader(int32_t partition, int32_t epoch) override;
    io::Task<Appended> append(int32_t partition, int32_t epoch, std::vector<runtime::Record> records) override;
    // Appends `records` as one transactional batch of the producer (base
    // sequence -1: coordinators use no sequences), which opens its
    // transaction in the partition.
    io::Task<Appended> append_transactional(int32_t partition, int32_t epoch, int64_t producer_id,
                                            int16_t producer_epoch, std::vector<runtime::Record> records);
    io::Task<net::Error> wait_committed(int32_t partition, int32_t epoch, int64_t end_offset) override;
    std::optional<std::pair<int64_t, int64_t>> bounds(int32_t partition) override;
    io::Task<absl::StatusOr<Chunk>> read(int32_t partition, int64_t offset, size_t max_bytes) override;

    // The partition when this broker leads it in `epoch`.
    std::shared_ptr<Partition> led(int32_t partition, int32_t epoch) const;

   private:
    // Appends `records` as one batch built with `options`.
    io::Task<Appended> append_batch(int32_t partition, int32_t epoch, net::RecordBatchOptions options,
                                    std::vector<runtime::Record> records);
    Broker* broker_;
    std::string topic_;
  };
  bool partition_exists(const std::string& topic, int32_t partition) const override;
  std::optional<Topic> topic(const std::string& name) const override;
  std::optional<Topic> topic(const net::Uuid& id) const override;
  std::vector<std::string> topic_names() const override;
  // After the image is applied: the coordinator loads the __consumer_offsets
  // partitions this broker now leads and unloads the others.
  void sync_coordinator();
  // Loads the shards of `coordinator` this broker now leads (partitions of
  // `partitions`' topic) and unloads the others.
  void sync_shards(runtime::Coordinator& coordinator, CoordinatorPartitions& partitions, std::string_view what);
  // Creates __consumer_offsets when missing and waits (briefly) for its
  // leaders; false when it is not there (yet).
  io::Task<bool> ensure_offsets_topic();
  // The same for any internal topic of a coordinator.
  io::Task<bool> ensure_internal_topic(std::string name, int32_t partitions, int16_t replication_factor,
                                       std::vector<std::pair<std::string, std::string>> configs);

  // --- the transaction coordinator (transactions.cc) ---
  // What the transaction coordinator uses of this broker: its
  // __transaction_state partitions, producer ids, and the partition leaders
  // it writes markers to.
  class TxnHost final : public txn::TransactionHost {
   public:
    explicit TxnHost(Broker& broker) : broker_(&broker) {}
    io::Task<Written> write(int32_t partition, int32_t epoch, std::vector<runtime::Record> records) override;
    io::Task<absl::StatusOr<int64_t>> allocate_producer_id() override;
    io::Task<net::Error> write_markers(const txn::TxnMarkers& markers, std::function<bool()> still_coordinator) override;
    bool partition_exists(const std::string& topic, int32_t partition) const override;

   private:
    Broker* broker_;
  };
  // After the image is applied: loads and unloads __transaction_state partitions.
  void sync_txn_coordinator();
  io::Task<bool> ensure_txn_topic();
  // AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions,
  // ListTransactions, WriteTxnMarkers.
  io::Task<absl::StatusOr<io::BufferChain>> on_txn_request(const net::RequestFrame& frame);
  // KIP-890: asks the coordinator of `transactional_id` whether each
  // partition belongs to the producer's ongoing transaction. The answer,
  // by partition, is Produce's error for it (NONE when verified).
  io::Task<std::map<txn::TopicPartition, net::Error>> verify_txn_partitions(std::string transactional_id,
                                                                           int64_t producer_id, int16_t producer_epoch,
                                                                           std::set<txn::TopicPartition> partitions);
  // A transactional write's check with its coordinator (KIP-890), for a
  // partition led here.
  struct TxnCheck {
    std::shared_ptr<Partition> partition;
    uint64_t guard = 0;
    // Produce's error for the partition (NONE: verified).
    net::Error error = net::Error::kNone;
  };
  // Verifies, in one request to the coordinator, each of `partitions` on
  // which the producer has no transaction open yet; the others need no
  // check and are left out of the answer.
  io::Task<std::map<txn::TopicPartition, TxnCheck>> verify_first_txn_writes(
      std::string transactional_id, int64_t producer_id, int16_t producer_epoch,
      std::vector<std::shared_ptr<Partition>> partitions);
  // Whether a verified check still holds: no marker for the producer, and
  // no new leadership, since it began.
  bool still_verified(const TxnCheck& check, int64_t producer_id);
  // Partition::refused_batches: note a batch refused before its append;
  // whether an OUT_OF_ORDER_SEQUENCE_NUMBER batch follows a refused one;
  // forget the refusals an appended batch passes.
  void note_refused(Partition& p, const io::Buffer& records, net::Error error);
  bool follows_refused(Partition& p, const net::RecordBatchHeader& header);
  void forget_refused(Partition& p, const net::RecordBatchHeader& header);
  // The client id of this broker's connections for `purpose`.
  std::string peer_client_id(std::string_view purpose) const {
    return std::string(purpose) + "-" + std::to_string(config_.node_id);
  }
  // Appends a commit or abort marker to a partition led here and waits
  // until the ISR has it (WriteTxnMarkers for one partition).
  io::Task<net::Error> append_marker(std::string topic, int32_t index, int64_t producer_id, int16_t producer_epoch,
                                     bool commit, int32_t coordinator_epoch);

  // --- lifecycle and the controller (broker.cc) ---
  io::Task<void> lifecycle_loop();
  io::Task<bool> register_once();
  // The active controller's address, if known.
  std::optional<io::Address> controller_address() const;
  net::Peer& controller_peer(const io::Address& address);
  // Sends `request` to the active controller, retrying on NOT_CONTROLLER
  // (top-level error code), unreachable controllers and timeouts until
  // `deadline`. DeadlineExceeded when no controller answered in time.
  template <typename Resp, typename Req>
  io::Task<absl::StatusOr<Resp>> call_controller(const Req& request, int16_t version, io::Instant deadline);
  io::Task<absl::StatusOr<int64_t>> next_producer_id(io::Instant deadline);

  // --- client APIs (kafka_apis.cc) ---
  io::Task<absl::StatusOr<io::BufferChain>> on_api_versions(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_metadata(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_produce(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_fetch(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_list_offsets(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_offsets_for_leader_epoch(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_init_producer_id(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_delete_records(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_describe_configs(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_describe_cluster(const net::RequestFrame& frame);
  absl::StatusOr<io::BufferChain> out_of_place_sasl(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_describe_log_dirs(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_describe_producers(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_describe_acls(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_describe_client_quotas(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_describe_user_scram_credentials(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_create_topics(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_find_coordinator(const net::RequestFrame& frame);
  // JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
  // OffsetDelete, DescribeGroups, ListGroups, DeleteGroups (groups.cc).
  io::Task<absl::StatusOr<io::BufferChain>> on_group_request(const net::RequestFrame& frame);
  // OffsetFetch for a group this broker does not coordinate: asks the
  // broker that does, once, and answers with its answer (`local`, this
  // broker's NOT_COORDINATOR, when it cannot tell who does).
  io::Task<net::OffsetFetchResponse> forward_offset_fetch(net::OffsetFetchRequest request, int16_t version,
                                                          net::OffsetFetchResponse local);
  // Forwards a controller API request as it came and answers with the
  // controller's answer (a timeout answers REQUEST_TIMED_OUT).
  template <typename Req, typename Resp>
  io::Task<absl::StatusOr<io::BufferChain>> forward(const net::RequestFrame& frame);

  io::Context* ctx_;
  raft::RaftNode* raft_;
  BrokerConfig config_;

  metadata::MetadataImage image_;
  int64_t image_end_ = 0;  // the metadata log offset replayed up to
  io::Event image_changed_;     // set on every replay; the apply loop resets it
  // Partitions by (topic, index).
  std::map<PartitionKey, std::shared_ptr<Partition>> partitions_;
  io::Mutex apply_mu_;
  bool strays_removed_ = false;
  // Counts every append and high watermark move (long-polling fetches,
  // acks=all produces): a waiter takes seen() before it reads.
  io::ChangeCount appended_;
  // __consumer_offsets, and the group coordinator's writes to it.
  CoordinatorPartitions offsets_partitions_;
  runtime::BatchedWriter offsets_writer_;

  absl::Status failure_;
  io::Event failed_;

  int64_t broker_epoch_ = -1;
  bool want_shut_down_ = false;
  bool shut_down_ = false;
  bool closing_ = false;
  io::Event controlled_shutdown_done_;
  std::map<std::string, std::unique_ptr<net::Peer>> controller_peers_;

  // Producer ids handed out by InitProducerId: the current block.
  int64_t producer_id_next_ = 0;
  int64_t producer_id_end_ = 0;
  io::Mutex producer_id_mu_;

  // Incremental fetch sessions by id.
  FetchSessionCache fetch_sessions_;
  // A new session (evicting the least recently used one when full).

  // Replica fetchers by leader id, and the scope they (and ISR changes) run in.
  std::set<int32_t> fetchers_;
  net::PeerPool replica_peers_{ctx_->network(), ctx_->clock(), peer_client_id("replica")};
  io::TaskScope* background_ = nullptr;

  group::GroupCoordinator groups_;

  // __transaction_state, the transaction coordinator's writes to it, and
  // connections to the partition leaders it sends markers to.
  CoordinatorPartitions txn_partitions_;
  runtime::BatchedWriter txn_writer_;
  TxnHost txn_host_;
  txn::TransactionCoordinator txns_;
  // Connections to other brokers for markers, for verifications, and for
  // forwarded OffsetFetch requests.
  net::PeerPool marker_peers_{ctx_->network(), ctx_->clock(), peer_client_id("txn-markers")};
  net::PeerPool verify_peers_{ctx_->network(), ctx_->clock(), peer_client_id("txn-verify")};
  net::PeerPool group_peers_{ctx_->network(), ctx_->clock(), peer_client_id(kOffsetFetchForwardClientId)};
  uint64_t next_verification_guard_ = 0;

  // The requests answer() is answering, by arrival. Each answer() call
  // holds it too: its coroutine may be destroyed after the broker when
  // connections are torn down after it.
  using PendingRequests = std::map<uint64_t, PendingRequest>;
  std::shared_ptr<PendingRequests> pending_requests_ = std::make_shared<PendingRequests>();
  uint64_t requests_started_ = 0;
  io::Duration longest_answer_{0};
};

// --- implementation -------------------------------------------------------

inline constexpr io::Duration kControllerRpcTimeout{std::chrono::seconds(5)};
inline constexpr io::Duration kControllerRetryBackoff{std::chrono::milliseconds(100)};

template <typename Resp, typename Req>
inline io::Task<absl::StatusOr<Resp>> Broker::call_controller(const Req& request, int16_t version, io::Instant deadline) {
  absl::Status last = absl::UnavailableError("no active controller known");
  while (ctx_->clock().now() < deadline) {
    std::optional<io::Address> address = controller_address();
    if (!address.has_value()) {
      co_await ctx_->clock().sleep_for(kControllerRetryBackoff);
      continue;
    }
    const io::Duration left = deadline - ctx_->clock().now();
    absl::StatusOr<Resp> response =
        co_await controller_peer(*address).template call<Resp>(request, version, std::min(left, kControllerRpcTimeout));
    if (response.ok()) {
      if constexpr (requires { response->error_code; }) {
        if (response->error_code == net::code(net::Error::kNotController)) {
          last = absl::UnavailableError("NOT_CONTROLLER");
          co_await ctx_->clock().sleep_for(kControllerRetryBackoff);
          continue;
        }
      }
      co_return response;
    }
    last = response.status();
    co_await ctx_->clock().sleep_for(kControllerRetryBackoff);
  }
  co_return absl::DeadlineExceededError(fmt::format("{}: no controller answered: {}", Req::kName, last.ToString()));
}

}  // namespace brook::broker
