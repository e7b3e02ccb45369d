// coordinators/group/group_coordinator.h
//
// GroupCoordinator: Kafka's classic consumer group protocol (JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup) and committed offsets (OffsetCommit,
// OffsetFetch, OffsetDelete), with DescribeGroups, ListGroups and
// DeleteGroups, written against io::Context so it runs in the simulator and
// on real I/O alike.
//
// State lives in the partitions of `__consumer_offsets`: a group belongs to
// partition abs(java_hash(group id)) % offsets.topic.num.partitions, and
// its state changes are records of that partition (OffsetCommitKey/Value,
// GroupMetadataKey/Value in Kafka's formats, a null value deleting). The
// coordinator serves a partition only while this broker leads it: the
// broker calls begin_load() when it becomes leader, replays the partition's
// records through replay() and calls finish_load(); unload() drops the
// partition's groups when leadership moves away. Requests for a group of a
// partition not led here answer NOT_COORDINATOR, and during the load
// COORDINATOR_LOAD_IN_PROGRESS, which clients retry after finding the
// coordinator again.
//
// Records are written through CoordinatorLog::write, which returns once
// they are committed (replicated to the ISR). Committed offsets become
// visible to OffsetFetch only then; a group's assignment is handed to its
// members only once the GroupMetadata record carrying it is committed.
//
// Transactional offsets (TxnOffsetCommit, KIP-98) are the same OffsetCommit
// records, written in a transactional batch of the producer: they stay
// pending, per group, producer and topic partition, until the producer's
// commit or abort marker reaches the partition (complete_transaction; on a
// load, replay_marker). A commit then makes them the committed offsets
// unless a newer offset (a higher record offset) was committed meanwhile;
// an abort drops them. OffsetFetch with require_stable answers
// UNSTABLE_OFFSET_COMMIT for a partition with pending offsets.
//
// The group state machine follows Kafka's GroupCoordinator: Empty ->
// PreparingRebalance (members (re)join; completes when every known member
// has joined or the rebalance timeout passes, after
// group.initial.rebalance.delay.ms for a group that was empty) ->
// CompletingRebalance (the leader computes the assignment and sends it in
// SyncGroup) -> Stable. A member whose heartbeats stop for its session
// timeout is removed and the group rebalances. JoinGroup v4+ without a
// member id gets MEMBER_ID_REQUIRED with one to rejoin with; static members
// (group.instance.id, KIP-345) keep their place across restarts, and an old
// incarnation of one is fenced (FENCED_INSTANCE_ID).
//
// Groups of the consumer protocol (KIP-848, ConsumerGroupHeartbeat) share
// the group id space and the committed offsets; see consumer_groups.cc. The
// coordinator computes their assignments (assignors.h) and moves each
// member towards its target (reconciliation.h); their state is the
// ConsumerGroup* records of the partition, written before it is applied.
// Members of both protocols can share a group, which converts between the
// two as they come and go (mixed_groups.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "coordinators/group/assignors.h"
#include "coordinators/group/reconciliation.h"
#include "coordinators/runtime/loader.h"
#include "coordinators/runtime/record_log.h"
#include "coordinators/runtime/shards.h"
#include "io/buffer.h"
#include "io/context.h"
#include "io/scope.h"
#include "io/sync.h"
#include "io/task.h"
#include "io/time.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/consumer_group_describe_request.h"
#include "net/kafka/messages/consumer_group_describe_response.h"
#include "net/kafka/messages/consumer_group_heartbeat_request.h"
#include "net/kafka/messages/consumer_group_heartbeat_response.h"
#include "net/kafka/messages/delete_groups_request.h"
#include "net/kafka/messages/delete_groups_response.h"
#include "net/kafka/messages/describe_groups_request.h"
#include "net/kafka/messages/describe_groups_response.h"
#include "net/kafka/messages/heartbeat_request.h"
#include "net/kafka/messages/heartbeat_response.h"
#include "net/kafka/messages/join_group_request.h"
#include "net/kafka/messages/join_group_response.h"
#include "net/kafka/messages/leave_group_request.h"
#include "net/kafka/messages/leave_group_response.h"
#include "net/kafka/messages/list_groups_request.h"
#include "net/kafka/messages/list_groups_response.h"
#include "net/kafka/messages/offset_commit_request.h"
#include "net/kafka/messages/offset_commit_response.h"
#include "net/kafka/messages/offset_commit_value.h"
#include "net/kafka/messages/offset_delete_request.h"
#include "net/kafka/messages/offset_delete_response.h"
#include "net/kafka/messages/offset_fetch_request.h"
#include "net/kafka/messages/offset_fetch_response.h"
#include "net/kafka/messages/sync_group_request.h"
#include "net/kafka/messages/sync_group_response.h"
#include "net/kafka/messages/txn_offset_commit_request.h"
#include "net/kafka/messages/txn_offset_commit_response.h"

namespace brook::group {

inline constexpr std::string_view kOffsetsTopic = "__consumer_offsets";

struct GroupCoordinatorConfig {
  // offsets.topic.num.partitions
  int32_t offsets_topic_partitions = 50;
  // group.initial.rebalance.delay.ms
  io::Duration initial_rebalance_delay{std::chrono::milliseconds(3000)};
  // group.min.session.timeout.ms, group.max.session.timeout.ms
  io::Duration min_session_timeout{std::chrono::milliseconds(6000)};
  io::Duration max_session_timeout{std::chrono::milliseconds(1800000)};
  // group.max.size
  int32_t max_group_size = INT32_MAX;
  // offset.metadata.max.bytes
  int32_t offset_metadata_max_bytes = 4096;
  // offsets.retention.minutes, offsets.retention.check.interval.ms
  io::Duration offsets_retention{std::chrono::minutes(7 * 24 * 60)};
  io::Duration offsets_retention_check_interval{std::chrono::milliseconds(600000)};
  // Mutation testing only (the groups-mutant-fence simulation): OffsetCommit
  // skips the member and generation checks, so a member of an old generation
  // can overwrite its successor's progress. The checkers must notice.
  bool mutant_unfenced_commits = false;
  // The consumer protocol: group.consumer.session.timeout.ms,
  // group.consumer.heartbeat.interval.ms, group.consumer.max.size and
  // group.consumer.assignors (the first is the default).
  io::Duration consumer_session_timeout{std::chrono::milliseconds(45000)};
  io::Duration consumer_heartbeat_interval{std::chrono::milliseconds(5000)};
  int32_t consumer_max_group_size = INT32_MAX;
  std::vector<std::string> consumer_assignors{"uniform", "range"};
  // group.consumer.migration.policy: whether a group with members converts
  // between the classic and the consumer protocol (an empty group always
  // does).
  enum class MigrationPolicy : uint8_t { kBidirectional, kUpgrade, kDowngrade, kDisabled };
  MigrationPolicy consumer_migration_policy = MigrationPolicy::kBidirectional;
};

// group.consumer.migration.policy's values (case-insensitive), and back.
std::optional<GroupCoordinatorConfig::MigrationPolicy> parse_migration_policy(std::string_view s);
std::string_view migration_policy_name(GroupCoordinatorConfig::MigrationPolicy p);

using CoordinatorRecord = runtime::Record;

// Where the coordinator's records go (the broker: its __consumer_offsets
// partitions; runtime::RecordLog::write), and what it reads of the
// cluster's topics.
class CoordinatorLog : public runtime::RecordLog {
 public:
  // Whether the topic partition exists (OffsetCommit refuses others).
  virtual bool partition_exists(const std::string& topic, int32_t partition) const = 0;
  // A topic as the cluster's metadata has it now (the consumer protocol
  // assigns partitions of existing topics by id).
  struct Topic {
    TopicId id;
    std::string name;
    int32_t partitions = 0;
  };
  virtual std::optional<Topic> topic(const std::string& name) const = 0;
  virtual std::optional<Topic> topic(const TopicId& id) const = 0;
  // The names of every topic (regular expression subscriptions).
  virtual std::vector<std::string> topic_names() const = 0;
  // Appends `records` as one transactional batch of `producer_id` /
  // `producer_epoch` (no sequence numbers) to `partition` as its leader in
  // `epoch`, alone in its batch, and returns once committed (as write()).
  // `verification` is the TxnOffsetCommit's verification guard (KIP-890;
  // 0 for none), passed on as the request came.
  virtual io::Task<Written> write_transactional(int32_t partition, int32_t epoch, int64_t producer_id,
                                                int16_t producer_epoch, uint64_t verification,
                                                std::vector<CoordinatorRecord> records) = 0;
};

// The error a group API answers when a coordinator write failed (Kafka's
// mapping for group metadata writes).
net::Error coordinator_write_error(net::Error e);

// The __consumer_offsets partition of a group: Kafka's
// Utils.abs(groupId.hashCode) % partitions (runtime::partition_for_key).
int32_t partition_for_group(std::string_view group_id, int32_t partitions);

// __consumer_offsets records in Kafka's formats.
io::Buffer offset_commit_key(const std::string& group, const std::string& topic, int32_t partition);
io::Buffer group_metadata_key(const std::string& group);

class GroupCoordinator final : public runtime::Coordinator {
 public:
  GroupCoordinator(io::Context& ctx, CoordinatorLog& log, GroupCoordinatorConfig config = {});
  ~GroupCoordinator() override;
  GroupCoordinator(const GroupCoordinator&) = delete;
  GroupCoordinator& operator=(const GroupCoordinator&) = delete;

  const GroupCoordinatorConfig& config() const { return config_; }
  int32_t partition_for(std::string_view group_id) const {
    return partition_for_group(group_id, config_.offsets_topic_partitions);
  }

  // Timers: rebalance and initial delays, session and sync timeouts, offset
  // expiry. Runs until cancelled.
  io::Task<void> run();

  // --- loading (runtime::Coordinator; see the file comment) ---
  // Beginning a load drops the partition's groups; a record that cannot be
  // decoded fails the replay (the partition is damaged).
  void begin_load(int32_t partition, int32_t epoch) override;
  absl::Status replay(int32_t partition, int64_t offset, const std::optional<io::Buffer>& key,
                      const std::optional<io::Buffer>& value) override;
  // An offset commit (or its tombstone) of a transaction: pending until
  // the producer's marker. Other records replay as they would outside one.
  absl::Status replay_transactional(int32_t partition, int64_t offset, int64_t producer_id,
                                    const std::optional<io::Buffer>& key,
                                    const std::optional<io::Buffer>& value) override;
  void replay_marker(int32_t partition, int64_t offset, int64_t producer_id, bool commit) override;
  void finish_load(int32_t partition, int32_t epoch) override;
  void unload(int32_t partition) override;
  std::optional<int32_t> loaded_epoch(int32_t partition) const override;
  bool loading(int32_t partition) const override;
  std::vector<int32_t> loaded_partitions() const override;

  // --- the group APIs; requests decoded at `version` ---
  io::Task<net::JoinGroupResponse> join_group(net::JoinGroupRequest request, int16_t version,
                                              std::string client_id, std::string client_host);
  io::Task<net::SyncGroupResponse> sync_group(net::SyncGroupRequest request, int16_t version);
  net::HeartbeatResponse heartbeat(const net::HeartbeatRequest& request, int16_t version);
  io::Task<net::LeaveGroupResponse> leave_group(net::LeaveGroupRequest request, int16_t version);
  io::Task<net::OffsetCommitResponse> commit_offsets(net::OffsetCommitRequest request, int16_t version);
  net::OffsetFetchResponse fetch_offsets(const net::OffsetFetchRequest& request, int16_t version);
  io::Task<net::OffsetDeleteResponse> delete_offsets(net::OffsetDeleteRequest request, int16_t version);
  net::DescribeGroupsResponse describe_groups(const net::DescribeGroupsRequest& request, int16_t version);
  net::ListGroupsResponse list_groups(const net::ListGroupsRequest& request, int16_t version);
  io::Task<net::DeleteGroupsResponse> delete_groups(net::DeleteGroupsRequest request, int16_t version);
  // TxnOffsetCommit v0-3: offsets written in a transactional batch of the
  // request's producer, pending until the transaction ends. `verification`
  // goes to CoordinatorLog::write_transactional.
  io::Task<net::TxnOffsetCommitResponse> txn_offset_commit(net::TxnOffsetCommitRequest request, int16_t version,
                                                           uint64_t verification = 0);
  // A commit or abort marker of `producer_id` was written to `partition`
  // (led here): its pending offsets there become committed, or are dropped.
  void complete_transaction(int32_t partition, int64_t producer_id, bool commit);
  // The consumer protocol (KIP-848).
  io::Task<net::ConsumerGroupHeartbeatResponse> consumer_group_heartbeat(net::ConsumerGroupHeartbeatRequest request,
                                                                         int16_t version, std::string client_id,
                                                                         std::string client_host);
  net::ConsumerGroupDescribeResponse consumer_group_describe(const net::ConsumerGroupDescribeRequest& request,
                                                             int16_t version) const;

  // For tests and tools: a group's state name ("Empty", "Stable", ...;
  // "Dead" when unknown), generation (a consumer protocol group: its group
  // epoch) and member ids.
  std::string group_state(const std::string& group_id) const;
  int32_t group_generation(const std::string& group_id) const;
  std::vector<std::string> group_members(const std::string& group_id) const;
  // ConsumerGroupHeartbeats answered without copying the group's state
  // (a member at the group's epoch that changed nothing).
  uint64_t steady_heartbeats() const { return steady_heartbeats_; }

  enum class State : uint8_t { kEmpty, kPreparingRebalance, kCompletingRebalance, kStable, kDead };

 private:
  // A member's protocols (name, metadata) in its order of preference.
  using Protocols = std::vector<std::pair<std::string, io::Buffer>>;
  struct JoinWait {
    io::Event done;
    net::JoinGroupResponse response;
  };
  struct SyncWait {
    io::Event done;
    net::SyncGroupResponse response;
  };
  struct Member {
    std::string id;
    std::optional<std::string> instance_id;
    std::string client_id;
    std::string client_host;
    int32_t rebalance_timeout_ms = 0;
    int32_t session_timeout_ms = 0;
    std::string protocol_type;
    Protocols protocols;  // in preference order
    io::Buffer assignment;
    std::shared_ptr<JoinWait> awaiting_join;
    std::shared_ptr<SyncWait> awaiting_sync;
    bool is_new = false;
    io::Instant heartbeat_deadline{};
    // The metadata of `protocol`, if supported.
    const io::Buffer* metadata(const std::string& protocol) const;
  };
  struct OffsetEntry {
    int64_t offset = -1;
    int32_t leader_epoch = -1;
    std::string metadata;
    int64_t commit_timestamp_ms = -1;
    // Set by OffsetCommit v2-v4's retention time: the offset expires then,
    // whatever the group's state.
    int64_t expire_timestamp_ms = -1;
    int64_t record_offset = -1;  // where it is in the partition
  };
  // An offset commit of an open transaction: an offset, or (`deletes`) a
  // tombstone, at entry.record_offset.
  struct TxnOffset {
    OffsetEntry entry;
    bool deletes = false;
  };
  using TopicPartitionKey = std::pair<std::string, int32_t>;
  // What a member of a consumer protocol group that uses the classic
  // protocol (JoinGroup, SyncGroup, Heartbeat) sent in its JoinGroup.
  struct ClassicMetadata {
    int32_t session_timeout_ms = 0;
    Protocols protocols;  // in preference order
    bool operator==(const ClassicMetadata& o) const;
  };
  // A member of a consumer protocol group.
  struct ConsumerMember {
    std::string id;
    std::optional<std::string> instance_id;
    std::optional<std::string> rack_id;
    std::string client_id;
    std::string client_host;
    std::vector<std::string> subscribed_topic_names;  // sorted
    std::optional<std::string> subscribed_topic_regex;
    int32_t rebalance_timeout_ms = -1;
    std::optional<std::string> server_assignor;
    int32_t previous_member_epoch = 0;
    // Its epoch, reconciliation state and partitions.
    ReconciledMember current;
    io::Instant session_deadline{};
    // While it has partitions to revoke: until when, in which epoch.
    std::optional<io::Instant> revocation_deadline;
    // Set for a member that uses the classic protocol.
    std::optional<ClassicMetadata> classic;
    // The parts its ConsumerGroupMemberMetadata record holds are equal.
    bool same_metadata(const ConsumerMember& o) const;
  };
  // The consumer protocol state of a group.
  struct ConsumerGroup {
    int32_t group_epoch = 0;
    int32_t assignment_epoch = 0;
    std::map<std::string, ConsumerMember> members;
    std::map<std::string, TopicPartitions> target;  // member id -> target
    // The subscribed topics' metadata when the group epoch last changed:
    // name -> (id, partitions).
    std::map<std::string, std::pair<TopicId, int32_t>> subscribed;
    // A write of the group failed (and may still land): the next one
    // writes the whole state again (rewrite_records).
    bool rewrite = false;
    // Members whose records a failed write may have put in the log though
    // the group does not have them; the rewrite deletes them.
    std::set<std::string> maybe_logged;
  };
  struct Group {
    std::string id;
    int32_t partition = 0;
    State state = State::kEmpty;
    int32_t generation = 0;
    std::optional<std::string> protocol_type;
    std::optional<std::string> protocol;
    std::optional<std::string> leader;
    std::map<std::string, Member> members;
    std::vector<std::string> join_order;  // member ids in order of joining
    // MEMBER_ID_REQUIRED handed out, not yet rejoined: id -> deadline.
    std::map<std::string, io::Instant> pending_members;
    std::map<std::string, std::string> static_members;  // instance id -> member id
    // PreparingRebalance: when the join completes at the latest, and the
    // initial delay of a group that was empty.
    io::Instant join_deadline{};
    std::optional<io::Instant> initial_delay_until;
    io::Instant initial_delay_limit{};
    // CompletingRebalance: members yet to send SyncGroup, and until when.
    std::set<std::string> pending_sync;
    io::Instant sync_deadline{};
    int64_t state_timestamp_ms = -1;
    std::map<std::pair<std::string, int32_t>, OffsetEntry> offsets;
    // Commits being written, per partition: not expired meanwhile.
    std::map<std::pair<std::string, int32_t>, int> committing;
    // The offsets of open transactions: producer id -> partition -> offset.
    // While a partition has one, its committed offset does not expire, and
    // while the group has one, the group stays.
    std::map<int64_t, std::map<TopicPartitionKey, TxnOffset>> txn_offsets;
    // A member joined during the initial delay (which then extends).
    bool new_member_added = false;
    // Set when the group uses the consumer protocol (its classic members
    // and state are then unused: `state` stays kEmpty).
    std::shared_ptr<ConsumerGroup> consumer;
    // A conversion of the classic group to the consumer protocol is being
    // written: the classic state must not change meanwhile.
    bool converting = false;
    // Members of a conversion to the consumer protocol whose write failed
    // (and may land all the same) while the group stayed classic: the
    // classic group's next write deletes their records and the consumer
    // group's (conversion_tombstones), so that no later replay, compacted
    // or not, brings them back.
    std::set<std::string> conversion_maybe_logged;
    // The timers of the consumer group's classic members (kept out of
    // ConsumerGroup: their SyncGroups and Heartbeats move them without a
    // write). A member told to rejoin must do so, and one that joined must
    // send SyncGroup, within its rebalance timeout.
    struct ClassicTimers {
      io::Instant session_deadline{};
      std::optional<io::Instant> join_deadline;
      std::optional<io::Instant> sync_deadline;
    };
    std::map<std::string, ClassicTimers> classic_timers;
  };
  // The group's partition is served here: kNone; else NOT_COORDINATOR or
  // COORDINATOR_LOAD_IN_PROGRESS.
  net::Error check_coordinator(const std::string& group_id) const;
  // check_coordinator, and INVALID_GROUP_ID for an empty id.
  net::Error check_group(const std::string& group_id) const;
  // One partition of an OffsetCommit or TxnOffsetCommit: kNone, or
  // OFFSET_METADATA_TOO_LARGE past offset.metadata.max.bytes, or
  // UNKNOWN_TOPIC_OR_PARTITION.
  net::Error check_commit(const std::string& topic, int32_t partition, const std::string& metadata) const;
  Group* find(const std::string& group_id);
  const Group* find(const std::string& group_id) const;
  Group& create(const std::string& group_id);
  std::string new_member_id(const std::string& client_id);
  // A random Kafka Uuid in its text form (consumer protocol member ids).
  std::string new_uuid();
  int64_t now_ms() const;

  // State machine pieces (Kafka's GroupCoordinator).
  void transition(Group& g, State to);
  bool supports_protocols(const Group& g, const std::string& type,
                          const Protocols& protocols) const;
  std::vector<std::string> candidate_protocols(const Group& g) const;
  std::string select_protocol(const Group& g) const;
  void add_member_and_rebalance(Group& g, Member member, const std::shared_ptr<JoinWait>& wait);
  void update_member_and_rebalance(Group& g, Member& m, Protocols protocols,
                                   int32_t rebalance_timeout_ms, int32_t session_timeout_ms,
                                   const std::shared_ptr<JoinWait>& wait, const std::string& reason);
  void prepare_rebalance(Group& g, const std::string& reason);
  void maybe_prepare_rebalance(Group& g, const std::string& reason);
  // Completes the join when every member has rejoined (or `force`: the
  // deadline passed).
  void maybe_complete_join(Group& g, bool force);
  void complete_join(Group& g);
  void remove_member(Group& g, std::string member_id, const std::string& reason);
  void remove_member_and_update(Group& g, std::string member_id, const std::string& reason);
  void reset_and_propagate_assignment_error(Group& g, net::Error error);
  void propagate_assignment(Group& g, net::Error error);
  void schedule_heartbeat(Member& m);
  // Answers the member's waiting JoinGroup / SyncGroup with `error`.
  void answer_join(const Group& g, Member& m, net::Error error) const;
  static void answer_sync(Member& m, net::Error error);
  // A new member as its JoinGroup describes it.
  static Member member_from(const net::JoinGroupRequest& r, std::string id, std::string client_id,
                            std::string client_host);
  net::JoinGroupResponse join_response(const Group& g, const Member& m, bool with_members) const;
  bool static_member_fenced(const Group& g, const std::string& member_id,
                            const std::optional<std::string>& instance_id) const;
  int32_t rebalance_timeout_ms(const Group& g) const;
  // The group's metadata record (members with the selected protocol's
  // metadata and their assignment).
  CoordinatorRecord group_record(const Group& g) const;
  // Writes the group's metadata as it is now (an emptied group, a static
  // member's new id), in the background: a failure is only logged. (The
  // leader's SyncGroup writes the assignment itself and waits for it.)
  io::Task<void> store_group_metadata(std::string group_id);
  void wake_timers();
  void on_timers();
  io::Task<void> expire_offsets();
  // Kafka's offset expiry for group `g`: nullopt when none of its offsets
  // may expire now; else the topics it consumes (their offsets stay) and
  // whether the others' retention counts from when the group emptied.
  struct ExpiryRule {
    std::set<std::string> subscribed;
    bool from_empty = false;
  };
  std::optional<ExpiryRule> expiry_rule(const Group& g) const;

  // JoinGroup for a member without an id.
  void join_unknown_member(Group& g, const net::JoinGroupRequest& r, int16_t version, const std::string& client_id,
                           const std::string& client_host, const std::shared_ptr<JoinWait>& wait);
  void join_known_member(Group& g, const net::JoinGroupRequest& r, const std::string& client_id,
                         const std::string& client_host, const std::shared_ptr<JoinWait>& wait);

  // --- the consumer protocol (consumer_groups.cc) ---
  // A heartbeat's outcome: the error, or the member's id and epoch, the
  // records to write and whether to send its assignment.
  struct HeartbeatResult {
    net::Error error = net::Error::kNone;
    std::string message;
    std::vector<CoordinatorRecord> records;
    std::string member_id;
    int32_t member_epoch = 0;
    bool send_assignment = false;
  };
  // The ConsumerGroup* records: the whole group's state (a rewrite), one
  // member's, and the single records.
  static std::vector<CoordinatorRecord> consumer_group_records(const std::string& group_id, const ConsumerGroup& cg);
  static void member_records(const std::string& group_id, const ConsumerGroup& cg, const ConsumerMember& m,
                             std::vector<CoordinatorRecord>& out);
  static CoordinatorRecord current_assignment_record(const std::string& group_id, const ConsumerMember& m);
  static CoordinatorRecord group_epoch_record(const std::string& group_id, int32_t epoch);
  static CoordinatorRecord subscription_record(const std::string& group_id, const ConsumerGroup& cg);
  static CoordinatorRecord target_epoch_record(const std::string& group_id, int32_t epoch);
  // The records of a write that carries the whole group `next` again after
  // a failed write: tombstones for every member the log may hold that
  // `next` does not have (`committed`'s members, and maybe_logged), then
  // consumer_group_records(next). Clears next's rewrite and maybe_logged.
  static std::vector<CoordinatorRecord> rewrite_records(const std::string& group_id, const ConsumerGroup* committed,
                                                        ConsumerGroup& next);
  // What deletes one member's records.
  static void member_tombstones(const std::string& group_id, const std::string& member_id,
                                std::vector<CoordinatorRecord>& out);
  // Writes a consumer group's `records`: kNone once committed (and this
  // broker still serves the partition in `epoch`), else the error to
  // answer; a failed write makes the group's next write carry its whole
  // state.
  io::Task<net::Error> write_consumer_records(const std::string& group_id, int32_t partition, int32_t epoch,
                                              std::vector<CoordinatorRecord> records);
  // What deletes an empty consumer group.
  static std::vector<CoordinatorRecord> consumer_group_tombstones(const std::string& group_id);
  // For a classic group's write: what deletes the records a failed
  // conversion of `g` may have left (appended to `out`; nothing when there
  // was none). Returns the members covered, for conversion_tombstones_written.
  static std::set<std::string> conversion_tombstones(const Group& g, std::vector<CoordinatorRecord>& out);
  // A write carrying conversion_tombstones(...) = `covered` succeeded.
  void conversion_tombstones_written(const std::string& group_id, const std::set<std::string>& covered);
  absl::Status replay_consumer(int16_t type, const io::Buffer& key, const std::optional<io::Buffer>& value);
  // An empty classic group taken over by the consumer protocol: the classic
  // state is dropped (its offsets stay); the caller sets `consumer`.
  void become_consumer_group(Group& g);
  // The heartbeat's state change on `next` (a copy of the group's state),
  // with the records that persist it. `classic`: the member uses the
  // classic protocol (a JoinGroup made into a heartbeat) with this
  // metadata.
  void consumer_heartbeat_step(const std::string& group_id, ConsumerGroup& next,
                               const net::ConsumerGroupHeartbeatRequest& r, int16_t version,
                               const std::string& client_id, const std::string& client_host,
                               HeartbeatResult& out, const ClassicMetadata* classic = nullptr);
  // group.consumer.heartbeat.interval.ms, as heartbeat responses carry it.
  int32_t heartbeat_interval_ms() const;
  // A heartbeat of a member at the group's epoch that changes nothing:
  // answered in `out` with only its session renewed (no copy of the
  // group's state, no write). False when the full path must run.
  bool steady_heartbeat(ConsumerGroup& cg, const net::ConsumerGroupHeartbeatRequest& r, const std::string& client_id,
                        const std::string& client_host, net::ConsumerGroupHeartbeatResponse& out);
  // Removes member `member_id` from `next` (left, or fenced), with records.
  void remove_consumer_member(const std::string& group_id, ConsumerGroup& next, std::string member_id,
                              std::vector<CoordinatorRecord>& records) const;
  // Recomputes the subscribed topics' metadata; true when it changed.
  bool refresh_subscriptions(const std::string& group_id, ConsumerGroup& next,
                             std::vector<CoordinatorRecord>& records) const;
  // The existing topics the member subscribes to (by name or regex).
  std::set<TopicId, TopicIdLess> subscribed_ids(const ConsumerGroup& cg, const ConsumerMember& m) const;
  std::string preferred_assignor(const ConsumerGroup& cg) const;
  // Writes `records` of `group_id` and, once committed, makes `next` its
  // state. kNone or the error to answer.
  io::Task<net::Error> commit_consumer_state(std::string group_id, int32_t partition, int32_t epoch,
                                             std::shared_ptr<ConsumerGroup> next,
                                             std::vector<CoordinatorRecord> records);
  // Fences members whose session or revocation ran out (in the background).
  void expire_consumer_members(Group& g, io::Instant now);
  // Why a consumer group member is to be fenced at `now` (nullptr: it is
  // not), and when it will be at the earliest.
  const char* consumer_member_expired(const Group& g, const ConsumerMember& m, io::Instant now) const;
  io::Instant consumer_member_deadline(const Group& g, const ConsumerMember& m) const;
  // Brings the classic members' timers in line with the group's members
  // (new classic members: their session starts now).
  void sync_classic_timers(Group& g);
  io::Task<void> fence_consumer_member(std::string group_id, std::string member_id, std::string reason);
  std::string consumer_state(const ConsumerGroup& cg) const;

  // --- groups of both protocols (mixed_groups.cc) ---
  // A classic group with members that a consumer protocol member joins
  // (online upgrade): whether it may convert, and its state as a consumer
  // group (each member keeps its assignment at epoch = the generation),
  // with the records that replace the classic group's. nullopt when the
  // embedded consumer protocol does not parse.
  bool upgrade_allowed(const Group& g) const;
  std::optional<ConsumerGroup> consumer_group_from_classic(const Group& g,
                                                           std::vector<CoordinatorRecord>& records) const;
  // The last consumer protocol member `leaving` leaves a group whose other
  // members all use the classic protocol: whether it becomes a classic
  // group again (online downgrade).
  bool downgrade_allowed(const ConsumerGroup& cg, const std::string& leaving) const;
  // Writes the downgrade of `group_id` (without `leaving`) and, once
  // committed, makes it a classic group that rebalances. kNone or the
  // error of the write.
  io::Task<net::Error> commit_downgrade(std::string group_id, int32_t partition, int32_t epoch,
                                        std::shared_ptr<ConsumerGroup> cg, std::string leaving);
  // The classic APIs for a member of a consumer protocol group.
  io::Task<net::JoinGroupResponse> classic_join_consumer_group(net::JoinGroupRequest r, int16_t version,
                                                               std::string client_id, std::string client_host);
  net::SyncGroupResponse classic_sync_consumer_group(Group& g, const net::SyncGroupRequest& r);
  net::HeartbeatResponse classic_heartbeat_consumer_group(Group& g, const net::HeartbeatRequest& r);
  io::Task<net::LeaveGroupResponse> classic_leave_consumer_group(net::LeaveGroupRequest r, int16_t version);
  // The member of `cg` a classic request names: kNone, UNKNOWN_MEMBER_ID
  // or FENCED_INSTANCE_ID (static members); consumer protocol members are
  // unknown to the classic APIs.
  net::Error find_classic_member(ConsumerGroup& cg, const std::string& member_id,
                                 const std::optional<std::string>& instance_id, ConsumerMember** out);
  // Whether a classic member must rejoin to move towards its target.
  bool classic_member_must_rejoin(const ConsumerGroup& cg, const ConsumerMember& m) const;
  // Waits until a conversion of `group_id` being written is done.
  io::Task<void> await_conversion(const std::string& group_id);

  // --- transactional offsets ---
  // A committed offset as its OffsetCommitValue record at `record_offset`
  // says.
  static OffsetEntry offset_entry(const net::OffsetCommitValue& v, int64_t record_offset);
  // TxnOffsetCommit's member checks (Kafka's validateOffsetCommit for a
  // transactional commit): kNone or the error to answer.
  net::Error check_txn_member(const Group& g, const net::TxnOffsetCommitRequest& r) const;
  // `producer_id`'s offset of `key` in `g` is pending.
  void add_txn_offset(Group& g, int64_t producer_id, const TopicPartitionKey& key, TxnOffset offset);
  // Whether any open transaction has an offset of `key` in `g`.
  static bool has_txn_offset(const Group& g, const TopicPartitionKey& key);
  // A tombstone at `tombstone_offset` (outside a transaction): the committed
  // offset of `key` and the pending ones written before it are gone.
  static void erase_offset(Group& g, const TopicPartitionKey& key, int64_t tombstone_offset);
  // A transactional offset written to the log whose writer has not yet
  // learnt its offsets: a marker of its producer that comes meanwhile (an
  // abort after the client gave up waiting) applies to it too.
  struct TxnWrite {
    int32_t partition = -1;
    int64_t producer_id = -1;
    std::optional<bool> ended;  // commit (true) or abort, when a marker came
  };

  io::Context* ctx_;
  CoordinatorLog* log_;
  std::set<std::pair<std::string, std::string>> fencing_;
  GroupCoordinatorConfig config_;
  runtime::ShardTable shards_;
  std::map<std::string, std::unique_ptr<Group>> groups_;
  // Counts wake_timers() calls; run() takes seen() before it looks at the
  // timers, so a wake that comes while it is not yet waiting (a fence
  // spawned by the loop failing at once) is not lost.
  io::ChangeCount timer_wake_;
  uint64_t steady_heartbeats_ = 0;
  // Background writes (an emptied group's metadata); set while run() runs.
  io::TaskScope* scope_ = nullptr;
  io::Instant next_expiry_check_{};
  // The groups with pending offsets of each (partition, producer id); may
  // name groups whose offsets went since (their marker finds none).
  std::map<std::pair<int32_t, int64_t>, std::set<std::string>> open_transactions_;
  // TxnOffsetCommit writes under way, by a sequence number.
  std::map<uint64_t, TxnWrite> txn_writes_;
  uint64_t next_txn_write_ = 0;
};

std::string_view state_name(GroupCoordinator::State state);

}  // namespace brook::group
