// net/client/admin.h
//
// Admin operations on a Cluster, as Kafka's Admin client offers them:
// topics (create, delete, add partitions, describe), configs (describe,
// incremental alter), offsets (list by time, delete records), partition
// reassignments (alter, cancel, list), SCRAM credentials (describe, alter). Requests that
// the controller decides go to any broker, which forwards them; a
// retriable answer (NOT_CONTROLLER, a broker going away) is retried until
// the request timeout. Per-item outcomes come back per item.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/task.h"
#include "net/client/cluster.h"
#include "net/kafka/scram.h"

namespace brook::client {

struct NewTopic {
  std::string name;
  int32_t partitions = -1;           // -1: the broker's num.partitions
  int16_t replication_factor = -1;  // -1: default.replication.factor
  std::map<std::string, std::string> configs;
};

struct CreatedTopic {
  absl::Status status;
  int32_t partitions = -1;
  int16_t replication_factor = -1;
};

// Kafka's ConfigResource.Type ids.
enum class ResourceType : int8_t { kTopic = 2, kBroker = 4 };

struct ConfigEntry {
  std::string name;
  std::optional<std::string> value;
  bool read_only = false;
  bool is_default = false;
  bool is_sensitive = false;
  int8_t source = -1;
};

// IncrementalAlterConfigs operations.
enum class AlterOp : int8_t { kSet = 0, kDelete = 1, kAppend = 2, kSubtract = 3 };
struct AlterConfig {
  std::string name;
  AlterOp op = AlterOp::kSet;
  std::optional<std::string> value;
};

enum class IsolationLevel : int8_t { kReadUncommitted = 0, kReadCommitted = 1 };

// ListOffsets targets besides a timestamp.
inline constexpr int64_t kLatestOffset = -1;
inline constexpr int64_t kEarliestOffset = -2;
inline constexpr int64_t kMaxTimestamp = -3;

struct ListedOffset {
  int64_t offset = -1;
  int64_t timestamp_ms = -1;
  int32_t leader_epoch = -1;
};

// One SCRAM credential change: an upsertion (the password, salted here with
// a fresh random salt, so that only the salted password is sent) or a
// deletion.
struct ScramAlteration {
  std::string user;
  net::ScramMechanism mechanism = net::ScramMechanism::kSha256;
  bool remove = false;
  std::string password;
  int32_t iterations = net::kScramMinIterations;
};

struct ScramCredentialInfo {
  net::ScramMechanism mechanism = net::ScramMechanism::kSha256;
  int32_t iterations = 0;
  friend bool operator==(const ScramCredentialInfo&, const ScramCredentialInfo&) = default;
};

io::Task<absl::StatusOr<std::map<std::string, CreatedTopic>>> create_topics(Cluster& cluster,
                                                                            std::vector<NewTopic> topics,
                                                                            bool validate_only = false);
io::Task<absl::StatusOr<std::map<std::string, absl::Status>>> delete_topics(Cluster& cluster,
                                                                           std::vector<std::string> names);
// Grows each named topic to the given partition count.
io::Task<absl::StatusOr<std::map<std::string, absl::Status>>> create_partitions(
    Cluster& cluster, std::map<std::string, int32_t> counts);
// The named topics (all topics when empty), fresh from a broker; internal
// topics only when listed by name.
io::Task<absl::StatusOr<std::vector<TopicInfo>>> describe_topics(Cluster& cluster, std::vector<std::string> names);
io::Task<absl::StatusOr<std::vector<ConfigEntry>>> describe_configs(Cluster& cluster, ResourceType type,
                                                                    std::string name);
io::Task<absl::Status> incremental_alter_configs(Cluster& cluster, ResourceType type, std::string name,
                                                 std::vector<AlterConfig> ops);
// ListOffsets to each partition's leader: `target` is a timestamp or one of
// kLatestOffset, kEarliestOffset, kMaxTimestamp. Retries stale leaders
// until the request timeout.
io::Task<std::map<TopicPartition, absl::StatusOr<ListedOffset>>> list_offsets(
    Cluster& cluster, std::vector<TopicPartition> partitions, int64_t target,
    IsolationLevel isolation = IsolationLevel::kReadUncommitted);
// DeleteRecords: each partition's log start moves up to the offset (-1:
// the high watermark). The new low watermark per partition.
io::Task<std::map<TopicPartition, absl::StatusOr<int64_t>>> delete_records(Cluster& cluster,
                                                                           std::map<TopicPartition, int64_t> offsets);

// AlterPartitionReassignments: each partition's target replicas, or
// nullopt to cancel its ongoing reassignment; the outcome per partition.
io::Task<absl::StatusOr<std::map<TopicPartition, absl::Status>>> alter_partition_reassignments(
    Cluster& cluster, std::map<TopicPartition, std::optional<std::vector<int32_t>>> targets);

struct OngoingReassignment {
  std::vector<int32_t> replicas;
  std::vector<int32_t> adding;
  std::vector<int32_t> removing;
  friend bool operator==(const OngoingReassignment&, const OngoingReassignment&) = default;
};
// ListPartitionReassignments: the ongoing reassignments among `partitions`
// (of every partition when empty).
io::Task<absl::StatusOr<std::map<TopicPartition, OngoingReassignment>>> list_partition_reassignments(
    Cluster& cluster, std::vector<TopicPartition> partitions);

// AlterUserScramCredentials: the outcome per user (a user may be altered
// once per call).
io::Task<absl::StatusOr<std::map<std::string, absl::Status>>> alter_user_scram_credentials(
    Cluster& cluster, std::vector<ScramAlteration> alterations);
// DescribeUserScramCredentials: each user's credentials (all users with
// one when `users` is empty); NotFound for a named user with none.
io::Task<absl::StatusOr<std::map<std::string, absl::StatusOr<std::vector<ScramCredentialInfo>>>>>
describe_user_scram_credentials(Cluster& cluster, std::vector<std::string> users);

}  // namespace brook::client
