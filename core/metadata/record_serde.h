// core/metadata/record_serde.h
//
// KRaft metadata records (the values of the records in __cluster_metadata)
// and their framing, Kafka's MetadataRecordSerde:
//
//   frame version  unsigned varint, always 1
//   api key        unsigned varint, the record type (net/schemas/metadata)
//   version        unsigned varint, the record version
//   body           the record at that version
//
// MetadataRecord holds any one of the record types generated from
// net/schemas/metadata. The Raft control records that share the log
// (LeaderChangeMessage, SnapshotHeaderRecord, SnapshotFooterRecord,
// VotersRecord, KRaftVersionRecord) live in control batches and are not
// metadata records.
//
// Decoding checks the frame version, the api key, the version range and that
// the body fills the value exactly; every failure is InvalidArgument naming
// what was wrong. `bytes` fields of decoded records are slices of the input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "net/kafka/messages/abort_transaction_record.h"
#include "net/kafka/messages/access_control_entry_record.h"
#include "net/kafka/messages/begin_transaction_record.h"
#include "net/kafka/messages/broker_registration_change_record.h"
#include "net/kafka/messages/client_quota_record.h"
#include "net/kafka/messages/config_record.h"
#include "net/kafka/messages/delegation_token_record.h"
#include "net/kafka/messages/end_transaction_record.h"
#include "net/kafka/messages/feature_level_record.h"
#include "net/kafka/messages/fence_broker_record.h"
#include "net/kafka/messages/no_op_record.h"
#include "net/kafka/messages/partition_change_record.h"
#include "net/kafka/messages/partition_record.h"
#include "net/kafka/messages/producer_ids_record.h"
#include "net/kafka/messages/register_broker_record.h"
#include "net/kafka/messages/register_controller_record.h"
#include "net/kafka/messages/remove_access_control_entry_record.h"
#include "net/kafka/messages/remove_delegation_token_record.h"
#include "net/kafka/messages/remove_topic_record.h"
#include "net/kafka/messages/remove_user_scram_credential_record.h"
#include "net/kafka/messages/topic_record.h"
#include "net/kafka/messages/unfence_broker_record.h"
#include "net/kafka/messages/unregister_broker_record.h"
#include "net/kafka/messages/user_scram_credential_record.h"
#include "net/kafka/messages/zk_migration_state_record.h"

namespace brook::metadata {

// The frame version MetadataRecordSerde writes and accepts.
inline constexpr uint32_t kMetadataFrameVersion = 1;

// Every metadata record type, in api key order.
using MetadataRecord = std::variant<net::RegisterBrokerRecord,             // 0
                                    net::UnregisterBrokerRecord,           // 1
                                    net::TopicRecord,                      // 2
                                    net::PartitionRecord,                  // 3
                                    net::ConfigRecord,                     // 4
                                    net::PartitionChangeRecord,            // 5
                                    net::FenceBrokerRecord,                // 7
                                    net::UnfenceBrokerRecord,              // 8
                                    net::RemoveTopicRecord,                // 9
                                    net::DelegationTokenRecord,            // 10
                                    net::UserScramCredentialRecord,        // 11
                                    net::FeatureLevelRecord,               // 12
                                    net::ClientQuotaRecord,                // 14
                                    net::ProducerIdsRecord,                // 15
                                    net::BrokerRegistrationChangeRecord,   // 17
                                    net::AccessControlEntryRecord,         // 18
                                    net::RemoveAccessControlEntryRecord,   // 19
                                    net::NoOpRecord,                       // 20
                                    net::ZkMigrationStateRecord,           // 21
                                    net::RemoveUserScramCredentialRecord,  // 22
                                    net::BeginTransactionRecord,           // 23
                                    net::EndTransactionRecord,             // 24
                                    net::AbortTransactionRecord,           // 25
                                    net::RemoveDelegationTokenRecord,      // 26
                                    net::RegisterControllerRecord>;        // 27

// A record with the version it is (or was) encoded at: Kafka's
// ApiMessageAndVersion.
struct MetadataRecordAndVersion {
  MetadataRecord record;
  int16_t version = 0;
  bool operator==(const MetadataRecordAndVersion&) const = default;
};

int16_t api_key(const MetadataRecord& record);
std::string_view record_name(const MetadataRecord& record);
int16_t lowest_version(const MetadataRecord& record);
int16_t highest_version(const MetadataRecord& record);
// The record type's name for an api key, or nullopt when none has it.
std::optional<std::string_view> record_name(int16_t api_key);

// The record at its highest version.
MetadataRecordAndVersion at_highest_version(MetadataRecord record);

// One record value. InvalidArgument when the type has no such version or a
// field holds a value the version cannot carry.
absl::StatusOr<io::Buffer> encode_metadata_record(const MetadataRecord& record, int16_t version);
absl::StatusOr<io::Buffer> encode_metadata_record(const MetadataRecordAndVersion& record);

// Decodes all of `value`.
absl::StatusOr<MetadataRecordAndVersion> decode_metadata_record(const io::Buffer& value);

// Text form, for logs and test failures: `TopicRecord{name=...}`, with the
// version: `v0 TopicRecord{name=...}`.
std::string to_string(const MetadataRecord& record);
std::string to_string(const MetadataRecordAndVersion& record);

}  // namespace brook::metadata
