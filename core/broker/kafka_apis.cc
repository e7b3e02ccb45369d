// core/broker/kafka_apis.cc: the client APIs of the broker (Kafka's
// KafkaApis), each decoding its request at the version sent and answering
// with Kafka's per-partition error codes.
#include <algorithm>
#include <array>
#include <set>

#include <fmt/format.h>

#include "core/broker/broker.h"
#include "core/configs/configs.h"
#include "core/controller/acls.h"
#include "core/controller/client_quotas.h"
#include "core/controller/scram.h"
#include "core/controller/quorum_controller.h"
#include "io/status.h"
#include "io/when.h"
#include "net/kafka/apis.h"
#include "net/kafka/message_set.h"
#include "net/kafka/messages/alter_client_quotas_request.h"
#include "net/kafka/messages/alter_client_quotas_response.h"
#include "net/kafka/messages/alter_configs_request.h"
#include "net/kafka/messages/alter_configs_response.h"
#include "net/kafka/messages/alter_user_scram_credentials_request.h"
#include "net/kafka/messages/alter_user_scram_credentials_response.h"
#include "net/kafka/messages/api_versions_request.h"
#include "net/kafka/messages/api_versions_response.h"
#include "net/kafka/messages/create_acls_request.h"
#include "net/kafka/messages/create_acls_response.h"
#include "net/kafka/messages/create_partitions_request.h"
#include "net/kafka/messages/create_partitions_response.h"
#include "net/kafka/messages/create_topics_request.h"
#include "net/kafka/messages/create_topics_response.h"
#include "net/kafka/messages/delete_acls_request.h"
#include "net/kafka/messages/delete_acls_response.h"
#include "net/kafka/messages/delete_records_request.h"
#include "net/kafka/messages/delete_records_response.h"
#include "net/kafka/messages/delete_topics_request.h"
#include "net/kafka/messages/delete_topics_response.h"
#include "net/kafka/messages/describe_producers_request.h"
#include "net/kafka/messages/describe_producers_response.h"
#include "net/kafka/messages/describe_cluster_request.h"
#include "net/kafka/messages/describe_cluster_response.h"
#include "net/kafka/messages/describe_configs_request.h"
#include "net/kafka/messages/describe_log_dirs_request.h"
#include "net/kafka/messages/describe_quorum_request.h"
#include "net/kafka/messages/describe_quorum_response.h"
#include "net/kafka/messages/describe_user_scram_credentials_request.h"
#include "net/kafka/messages/describe_user_scram_credentials_response.h"
#include "net/kafka/messages/describe_log_dirs_response.h"
#include "net/kafka/messages/describe_configs_response.h"
#include "net/kafka/messages/fetch_request.h"
#include "net/kafka/messages/find_coordinator_request.h"
#include "net/kafka/messages/fetch_response.h"
#include "net/kafka/messages/incremental_alter_configs_request.h"
#include "net/kafka/messages/incremental_alter_configs_response.h"
#include "net/kafka/messages/init_producer_id_request.h"
#include "net/kafka/messages/init_producer_id_response.h"
#include "net/kafka/messages/list_offsets_request.h"
#include "net/kafka/messages/list_offsets_response.h"
#include "net/kafka/messages/alter_partition_reassignments_request.h"
#include "net/kafka/messages/alter_partition_reassignments_response.h"
#include "net/kafka/messages/list_partition_reassignments_request.h"
#include "net/kafka/messages/list_partition_reassignments_response.h"
#include "net/kafka/messages/sasl_authenticate_request.h"
#include "net/kafka/messages/sasl_authenticate_response.h"
#include "net/kafka/messages/sasl_handshake_request.h"
#include "net/kafka/messages/sasl_handshake_response.h"
#include "net/kafka/messages/metadata_request.h"
#include "net/kafka/messages/metadata_response.h"
#include "net/kafka/messages/offset_for_leader_epoch_request.h"
#include "net/kafka/messages/offset_for_leader_epoch_response.h"
#include "net/kafka/messages/produce_request.h"
#include "net/kafka/messages/produce_response.h"
#include "net/kafka/messages/txn_offset_commit_request.h"
#include "net/kafka/messages/write_txn_markers_request.h"
#include "storage/checkpoint.h"

namespace brook::broker {

namespace {

using namespace std::chrono_literals;

// The client APIs and the versions served (clamped to the schemas').
//
// Every API is served from the version Kafka 3 served, below Kafka 4's
// floor (KIP-896), because clients still in use send them: sarama before
// 1.41 lists topics with DescribeConfigs v0 whatever broker version it is
// configured for, sends every ACL request at v0 (its pattern type always
// LITERAL), and, configured for a broker before 0.11 (its default before
// 1.41), produces with Produce v0-2 and fetches with Fetch v0-3, whose
// records are message sets (message formats 0 and 1): those are converted
// to record batches on the way in and back on the way out
// (net/kafka/message_set.h), as Kafka 3 did. (librdkafka before 2.11 also
// compresses only for a broker that lists Produce v0.)
constexpr net::ApiSupport kBrokerApis[] = {
    {net::ProduceRequest::kApiKey, 0, 11},
    {net::FetchRequest::kApiKey, 0, 17},
    {net::ListOffsetsRequest::kApiKey, 0, 8},
    {net::MetadataRequest::kApiKey, 0, 12},
    {net::OffsetForLeaderEpochRequest::kApiKey, 0, 4},
    {net::ApiVersionsRequest::kApiKey, 0, 4},
    {net::CreateTopicsRequest::kApiKey, 0, 7},
    {net::DeleteTopicsRequest::kApiKey, 0, 6},
    {net::DeleteRecordsRequest::kApiKey, 0, 2},
    {net::InitProducerIdRequest::kApiKey, 0, 5},
    {net::CreateAclsRequest::kApiKey, 0, 3},
    {net::DeleteAclsRequest::kApiKey, 0, 3},
    {net::DescribeAclsRequest::kApiKey, 0, 3},
    {net::DescribeConfigsRequest::kApiKey, 0, 4},
    {net::AlterConfigsRequest::kApiKey, 0, 2},
    {net::CreatePartitionsRequest::kApiKey, 0, 3},
    {net::ElectLeadersRequest::kApiKey, 0, 2},
    {net::AlterPartitionReassignmentsRequest::kApiKey, 0, 0},
    {net::ListPartitionReassignmentsRequest::kApiKey, 0, 0},
    {net::AlterClientQuotasRequest::kApiKey, 0, 1},
    {net::DescribeClientQuotasRequest::kApiKey, 0, 1},
    {net::DescribeUserScramCredentialsRequest::kApiKey, 0, 0},
    {net::AlterUserScramCredentialsRequest::kApiKey, 0, 0},
    {net::DescribeQuorumRequest::kApiKey, 0, 2},
    {net::IncrementalAlterConfigsRequest::kApiKey, 0, 1},
    {net::DescribeClusterRequest::kApiKey, 0, 1},
    {net::DescribeLogDirsRequest::kApiKey, 0, 4},
    {net::FindCoordinatorRequest::kApiKey, 0, 4},
    {net::JoinGroupRequest::kApiKey, 0, 9},
    {net::SyncGroupRequest::kApiKey, 0, 5},
    {net::HeartbeatRequest::kApiKey, 0, 4},
    {net::LeaveGroupRequest::kApiKey, 0, 5},
    {net::OffsetCommitRequest::kApiKey, 0, 9},
    {net::OffsetFetchRequest::kApiKey, 0, 9},
    {net::OffsetDeleteRequest::kApiKey, 0, 0},
    {net::DescribeGroupsRequest::kApiKey, 0, 5},
    {net::ListGroupsRequest::kApiKey, 0, 5},
    {net::DeleteGroupsRequest::kApiKey, 0, 2},
    {net::ConsumerGroupHeartbeatRequest::kApiKey, 0, 1},
    {net::ConsumerGroupDescribeRequest::kApiKey, 0, 0},
    {net::AddPartitionsToTxnRequest::kApiKey, 0, 4},
    {net::AddOffsetsToTxnRequest::kApiKey, 0, 3},
    {net::EndTxnRequest::kApiKey, 0, 3},
    {net::WriteTxnMarkersRequest::kApiKey, 0, 1},
    {net::TxnOffsetCommitRequest::kApiKey, 0, 3},
    {net::DescribeTransactionsRequest::kApiKey, 0, 0},
    {net::ListTransactionsRequest::kApiKey, 0, 1},
    {net::DescribeProducersRequest::kApiKey, 0, 0},
    // Answered by the listener's SASL exchange (net/kafka/sasl.h) before
    // authentication; here only when out of place (ILLEGAL_SASL_STATE).
    {net::SaslHandshakeRequest::kApiKey, 0, 1},
    {net::SaslAuthenticateRequest::kApiKey, 0, 2},
};

// How large a message set's records may grow when converted (a compressed
// Produce v0-2 message unpacked, a fetched batch decompressed for Fetch
// v0-3).
constexpr size_t kMessageSetMaxBytes = 128 << 20;

constexpr int64_t kListOffsetsLatest = -1;
constexpr int64_t kListOffsetsEarliest = -2;
constexpr int64_t kListOffsetsMaxTimestamp = -3;
constexpr int64_t kListOffsetsEarliestLocal = -4;

bool is_internal_topic(std::string_view name) {
  return name == "__consumer_offsets" || name == "__transaction_state";
}

// Kafka's all-operations bit set for a topic / the cluster (authorization is
// not enforced: every operation is allowed).
constexpr int32_t kTopicOperationsAll = (1 << 2) | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) |
                                        (1 << 8) | (1 << 10) | (1 << 11);
constexpr int32_t kClusterOperationsAll =
    (1 << 4) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);

// kBrokerApis indexed by API key, for the per-request version check (null
// for a key not served here).
constexpr int16_t kServedKeyLimit = [] {
  int16_t limit = 0;
  for (const net::ApiSupport& api : kBrokerApis) limit = std::max<int16_t>(limit, api.key + 1);
  return limit;
}();
constexpr std::array<const net::ApiSupport*, kServedKeyLimit> kServedByKey = [] {
  std::array<const net::ApiSupport*, kServedKeyLimit> out{};
  for (const net::ApiSupport& api : kBrokerApis) out[static_cast<size_t>(api.key)] = &api;
  return out;
}();

// A request at a version this broker does not serve (though its schema may
// know it, like Produce v0-2): Kafka closes the connection. ApiVersions is
// answered at any version (KIP-511).
absl::Status check_served_version(const net::RequestHeader& header) {
  const int16_t key = header.request_api_key;
  if (key == net::ApiVersionsRequest::kApiKey) return absl::OkStatus();
  // Not served at all: the switch below says so.
  if (key < 0 || key >= kServedKeyLimit || kServedByKey[static_cast<size_t>(key)] == nullptr) return absl::OkStatus();
  const net::ApiSupport& served = *kServedByKey[static_cast<size_t>(key)];
  const int16_t version = header.request_api_version;
  if (version < served.min_version || version > served.max_version) {
    return absl::UnimplementedError(fmt::format("broker: version {} of API key {} is not served (versions {}-{})",
                                                version, key, served.min_version, served.max_version));
  }
  return absl::OkStatus();
}

}  // namespace

io::Task<absl::StatusOr<io::BufferChain>> Broker::handle_request(net::RequestFrame frame) {
  if (absl::Status served = check_served_version(frame.header); !served.ok()) co_return served;
  switch (frame.header.request_api_key) {
    case net::ApiVersionsRequest::kApiKey:
      co_return co_await on_api_versions(frame);
    case net::SaslHandshakeRequest::kApiKey:
    case net::SaslAuthenticateRequest::kApiKey:
      co_return out_of_place_sasl(frame);
    case net::MetadataRequest::kApiKey:
      co_return co_await on_metadata(frame);
    case net::ProduceRequest::kApiKey:
      co_return co_await on_produce(frame);
    case net::FetchRequest::kApiKey:
      co_return co_await on_fetch(frame);
    case net::ListOffsetsRequest::kApiKey:
      co_return co_await on_list_offsets(frame);
    case net::OffsetForLeaderEpochRequest::kApiKey:
      co_return co_await on_offsets_for_leader_epoch(frame);
    case net::InitProducerIdRequest::kApiKey:
      co_return co_await on_init_producer_id(frame);
    case net::DeleteRecordsRequest::kApiKey:
      co_return co_await on_delete_records(frame);
    case net::DescribeConfigsRequest::kApiKey:
      co_return co_await on_describe_configs(frame);
    case net::DescribeClusterRequest::kApiKey:
      co_return co_await on_describe_cluster(frame);
    case net::DescribeLogDirsRequest::kApiKey:
      co_return co_await on_describe_log_dirs(frame);
    case net::DescribeProducersRequest::kApiKey:
      co_return co_await on_describe_producers(frame);
    case net::DescribeAclsRequest::kApiKey:
      co_return co_await on_describe_acls(frame);
    case net::DescribeClientQuotasRequest::kApiKey:
      co_return co_await on_describe_client_quotas(frame);
    case net::DescribeUserScramCredentialsRequest::kApiKey:
      co_return co_await on_describe_user_scram_credentials(frame);
    case net::CreateTopicsRequest::kApiKey:
      co_return co_await on_create_topics(frame);
    case net::FindCoordinatorRequest::kApiKey:
      co_return co_await on_find_coordinator(frame);
    case net::JoinGroupRequest::kApiKey:
    case net::SyncGroupRequest::kApiKey:
    case net::HeartbeatRequest::kApiKey:
    case net::LeaveGroupRequest::kApiKey:
    case net::OffsetCommitRequest::kApiKey:
    case net::OffsetFetchRequest::kApiKey:
    case net::OffsetDeleteRequest::kApiKey:
    case net::DescribeGroupsRequest::kApiKey:
    case net::ListGroupsRequest::kApiKey:
    case net::DeleteGroupsRequest::kApiKey:
    case net::ConsumerGroupHeartbeatRequest::kApiKey:
    case net::ConsumerGroupDescribeRequest::kApiKey:
    case net::TxnOffsetCommitRequest::kApiKey:
      co_return co_await on_group_request(frame);
    case net::AddPartitionsToTxnRequest::kApiKey:
    case net::AddOffsetsToTxnRequest::kApiKey:
    case net::EndTxnRequest::kApiKey:
    case net::WriteTxnMarkersRequest::kApiKey:
    case net::DescribeTransactionsRequest::kApiKey:
    case net::ListTransactionsRequest::kApiKey:
      co_return co_await on_txn_request(frame);
    case net::DeleteTopicsRequest::kApiKey:
      co_return co_await forward<net::DeleteTopicsRequest, net::DeleteTopicsResponse>(frame);
    case net::CreatePartitionsRequest::kApiKey:
      co_return co_await forward<net::CreatePartitionsRequest, net::CreatePartitionsResponse>(frame);
    case net::ElectLeadersRequest::kApiKey:
      co_return co_await forward<net::ElectLeadersRequest, net::ElectLeadersResponse>(frame);
    case net::AlterPartitionReassignmentsRequest::kApiKey:
      co_return co_await forward<net::AlterPartitionReassignmentsRequest, net::AlterPartitionReassignmentsResponse>(
          frame);
    case net::ListPartitionReassignmentsRequest::kApiKey:
      co_return co_await forward<net::ListPartitionReassignmentsRequest, net::ListPartitionReassignmentsResponse>(
          frame);
    case net::DescribeQuorumRequest::kApiKey:
      // (Answered by the metadata quorum's leader, the active controller.)
      co_return co_await forward<net::DescribeQuorumRequest, net::DescribeQuorumResponse>(frame);
    case net::IncrementalAlterConfigsRequest::kApiKey:
      co_return co_await forward<net::IncrementalAlterConfigsRequest, net::IncrementalAlterConfigsResponse>(frame);
    case net::AlterConfigsRequest::kApiKey:
      co_return co_await forward<net::AlterConfigsRequest, net::AlterConfigsResponse>(frame);
    case net::CreateAclsRequest::kApiKey:
      co_return co_await forward<net::CreateAclsRequest, net::CreateAclsResponse>(frame);
    case net::DeleteAclsRequest::kApiKey:
      co_return co_await forward<net::DeleteAclsRequest, net::DeleteAclsResponse>(frame);
    case net::AlterClientQuotasRequest::kApiKey:
      co_return co_await forward<net::AlterClientQuotasRequest, net::AlterClientQuotasResponse>(frame);
    case net::AlterUserScramCredentialsRequest::kApiKey:
      co_return co_await forward<net::AlterUserScramCredentialsRequest, net::AlterUserScramCredentialsResponse>(
          frame);
    default:
      // An API this listener does not serve: Kafka closes the connection.
      co_return absl::UnimplementedError(
          fmt::format("broker: API key {} is not served here", frame.header.request_api_key));
  }
}

io::Task<absl::StatusOr<io::BufferChain>> Broker::answer(net::RequestFrame frame) {
  const int16_t key = frame.header.request_api_key;
  const int16_t version = frame.header.request_api_version;
  const int32_t correlation_id = frame.header.correlation_id;
  const uint64_t id = requests_started_++;
  const io::Instant since = ctx_->clock().now();
  pending_requests_->emplace(
      id, PendingRequest{key, version, correlation_id, frame.header.client_id.value_or(""), since, false});
  // Also when the task is torn down unanswered (the broker stopping).
  struct Forget {
    std::shared_ptr<PendingRequests> pending;
    uint64_t id;
    ~Forget() { pending->erase(id); }
  } forget{pending_requests_, id};
  absl::StatusOr<io::BufferChain> response = co_await handle_request(std::move(frame));
  if (!response.ok()) {
    ctx_->log().warn("broker: request key={} v{} correlation id {} not answered (closing the connection): {}", key,
                     version, correlation_id, response.status().ToString());
  }
  const io::Duration took = ctx_->clock().now() - since;
  longest_answer_ = std::max(longest_answer_, took);
  if (auto it = pending_requests_->find(id); it != pending_requests_->end() && it->second.reported) {
    ctx_->log().warn("broker: {} answered after {} ms", it->second.describe(),
                     std::chrono::duration_cast<std::chrono::milliseconds>(took).count());
  }
  co_return response;
}

std::string Broker::PendingRequest::describe() const {
  return fmt::format("request key={} v{} correlation id {} from '{}'", key, version, correlation_id, client_id);
}

void Broker::report_slow_requests() {
  const io::Instant now = ctx_->clock().now();
  for (auto& [id, r] : *pending_requests_) {
    // By arrival: the rest are younger.
    if (now - r.since < kSlowRequest) break;
    if (r.reported) continue;
    r.reported = true;
    ctx_->log().warn("broker: {} unanswered after {} ms", r.describe(),
                     std::chrono::duration_cast<std::chrono::milliseconds>(now - r.since).count());
  }
}

std::optional<std::pair<Broker::PendingRequest, io::Duration>> Broker::oldest_pending_request() const {
  if (pending_requests_->empty()) return std::nullopt;
  const PendingRequest& r = pending_requests_->begin()->second;
  return std::make_pair(r, ctx_->clock().now() - r.since);
}

// --- ApiVersions ----------------------------------------------------------------

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_api_versions(const net::RequestFrame& frame) {
  net::ApiVersionsResponse response = net::make_api_versions_response(kBrokerApis, net::kListenerBroker);
  net::ApiVersionsResponse::SupportedFeatureKey mv;
  mv.name = std::string(metadata::kMetadataVersionFeature);
  mv.min_version = controller::kMetadataVersionMin;
  mv.max_version = controller::kMetadataVersionLatest;
  response.supported_features.push_back(mv);
  if (image_.features().metadata_version != 0) {
    net::ApiVersionsResponse::FinalizedFeatureKey f;
    f.name = mv.name;
    f.min_version_level = image_.features().metadata_version;
    f.max_version_level = image_.features().metadata_version;
    response.finalized_features.push_back(f);
    response.finalized_features_epoch = image_.provenance().last_offset;
  }
  co_return net::answer_api_versions(response, frame);
}

// --- Metadata -------------------------------------------------------------------

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_metadata(const net::RequestFrame& frame) {
  const int16_t version = frame.header.request_api_version;
  CO_ASSIGN_OR_RETURN(net::MetadataRequest request, net::decode_body<net::MetadataRequest>(frame));
  // Which topics: all (null; an empty list at v0), or the named ones.
  const bool all = !request.topics.has_value() || (version == 0 && request.topics->empty());
  std::vector<std::string> names;
  std::vector<net::Uuid> unknown_ids;
  if (!all) {
    for (const auto& t : *request.topics) {
      if (t.name.has_value()) {
        names.push_back(*t.name);
      } else if (const metadata::TopicImage* topic = image_.topics().topic(t.topic_id)) {
        names.push_back(topic->name);
      } else {
        unknown_ids.push_back(t.topic_id);
      }
    }
  }
  // Auto-creation of unknown topics (auto.create.topics.enable).
  const bool allow_create = config_.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
  std::vector<std::string> creating;
  if (allow_create) {
    net::CreateTopicsRequest create;
    create.timeout_ms = 30000;
    for (const std::string& name : names) {
      if (image_.topics().topic(name) != nullptr || !storage::is_legal_topic_name(name) ||
          is_internal_topic(name)) {
        continue;
      }
      net::CreateTopicsRequest::CreatableTopic t;
      t.name = name;
      t.num_partitions = config_.num_partitions;
      t.replication_factor = config_.default_replication_factor;
      create.topics.push_back(std::move(t));
      creating.push_back(name);
    }
    if (!create.topics.empty()) {
      const io::Instant deadline = ctx_->clock().now() + 10s;
      absl::StatusOr<net::CreateTopicsResponse> created =
          co_await call_controller<net::CreateTopicsResponse>(create, 7, deadline);
      if (created.ok()) {
        for (const auto& r : created->topics) {
          if (r.error_code == 0 || r.error_code == net::code(net::Error::kTopicAlreadyExists)) {
            (void)co_await wait_for_topic(r.name, true, 2s);
          }
        }
      }
    }
  }

  net::MetadataResponse response;
  response.cluster_id = config_.cluster_id;
  const std::string& listener = client_listener(frame);
  for (const auto& [id, b] : image_.cluster().brokers) {
    if (b.fenced) continue;
    auto l = b.listeners.find(listener);
    if (l == b.listeners.end()) continue;
    net::MetadataResponse::MetadataResponseBroker out;
    out.node_id = id;
    out.host = l->second.host;
    out.port = l->second.port;
    out.rack = b.rack;
    response.brokers.push_back(std::move(out));
  }
  // Clients send controller requests to this id; brokers forward them.
  response.controller_id = response.brokers.empty() ? -1 : response.brokers.front().node_id;
  if (version >= 8 && version <= 10 && request.include_cluster_authorized_operations) {
    response.cluster_authorized_operations = kClusterOperationsAll;
  }
  // A broker's registration when it is unfenced, else null.
  auto alive = [&](int32_t id) -> const metadata::BrokerRegistration* {
    const metadata::BrokerRegistration* b = image_.cluster().broker(id);
    return b != nullptr && !b->fenced ? b : nullptr;
  };
  auto describe_topic = [&](const metadata::TopicImage& topic) {
    net::MetadataResponse::MetadataResponseTopic t;
    t.name = topic.name;
    t.topic_id = topic.id;
    t.is_internal = is_internal_topic(topic.name);
    if (request.include_topic_authorized_operations) t.topic_authorized_operations = kTopicOperationsAll;
    for (const auto& [index, reg] : topic.partitions) {
      net::MetadataResponse::MetadataResponsePartition p;
      p.partition_index = index;
      p.leader_id = reg.leader;
      p.leader_epoch = reg.leader_epoch;
      p.replica_nodes = reg.replicas;
      p.isr_nodes = reg.isr;
      for (int32_t r : reg.replicas) {
        if (alive(r) == nullptr) p.offline_replicas.push_back(r);
      }
      const metadata::BrokerRegistration* leader = reg.leader < 0 ? nullptr : alive(reg.leader);
      if (leader == nullptr) {
        p.error_code = net::code(net::Error::kLeaderNotAvailable);
        p.leader_id = -1;
      } else if (!leader->listeners.contains(listener)) {
        // The leader is not reachable on the listener the client came in
        // on (a misconfigured cluster): Kafka's answer, from version 6.
        p.error_code = net::code(version >= 6 ? net::Error::kListenerNotFound : net::Error::kLeaderNotAvailable);
        p.leader_id = -1;
      }
      t.partitions.push_back(std::move(p));
    }
    return t;
  };
  if (all) {
    for (const auto& [name, id] : image_.topics().by_name) {
      if (const metadata::TopicImage* topic = image_.topics().topic(id)) {
        response.topics.push_back(describe_topic(*topic));
      }
    }
  } else {
    for (const std::string& name : names) {
      if (const metadata::TopicImage* topic = image_.topics().topic(name)) {
        response.topics.push_back(describe_topic(*topic));
        continue;
      }
      net::MetadataResponse::MetadataResponseTopic t;
      t.name = name;
      if (!storage::is_legal_topic_name(name)) {
        t.error_code = net::code(net::Error::kInvalidTopicException);
      } else if (std::find(creating.begin(), creating.end(), name) != creating.end()) {
        t.error_code = net::code(net::Error::kLeaderNotAvailable);
      } else {
        t.error_code = net::code(net::Error::kUnknownTopicOrPartition);
      }
      response.topics.push_back(std::move(t));
    }
    for (const net::Uuid& id : unknown_ids) {
      net::MetadataResponse::MetadataResponseTopic t;
      t.name = std::nullopt;
      t.topic_id = id;
      t.error_code = net::code(net::Error::kUnknownTopicId);
      response.topics.push_back(std::move(t));
    }
  }
  co_return net::encode_response(response, frame.header);
}

// --- Produce --------------------------------------------------------------------

void Broker::note_refused(Partition& p, const io::Buffer& records, net::Error error) {
  absl::StatusOr<net::RecordBatchHeader> h = net::parse_batch_header(records.span(), net::BatchExtent::kHeaderOnly);
  if (!h.ok() || h->producer_id < 0 || h->base_sequence < 0) return;
  const io::Instant now = ctx_->clock().now();
  auto it = p.refused_batches.find(h->producer_id);
  if (it != p.refused_batches.end()) {
    // The earliest refused batch of the producer's epoch is the one it must
    // resend first.
    const Partition::RefusedBatch& r = it->second;
    if (r.epoch == h->producer_epoch && r.base_sequence <= h->base_sequence && now - r.at < kRefusedBatchMemory) return;
  } else if (p.refused_batches.size() >= kMaxRefusedBatches) {
    // Bounded: a flood of producers refused at once forgets some.
    p.refused_batches.erase(p.refused_batches.begin());
  }
  p.refused_batches.insert_or_assign(h->producer_id,
                                     Partition::RefusedBatch{h->producer_epoch, h->base_sequence, now, error});
}

bool Broker::follows_refused(Partition& p, const net::RecordBatchHeader& header) {
  auto it = p.refused_batches.find(header.producer_id);
  if (it == p.refused_batches.end()) return false;
  const Partition::RefusedBatch& r = it->second;
  if (ctx_->clock().now() - r.at >= kRefusedBatchMemory || r.epoch != header.producer_epoch) {
    p.refused_batches.erase(it);
    return false;
  }
  return r.base_sequence < header.base_sequence;
}

void Broker::forget_refused(Partition& p, const net::RecordBatchHeader& header) {
  auto it = p.refused_batches.find(header.producer_id);
  if (it == p.refused_batches.end()) return;
  const Partition::RefusedBatch& r = it->second;
  if (r.epoch != header.producer_epoch || r.base_sequence <= header.base_sequence) p.refused_batches.erase(it);
}

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_produce(const net::RequestFrame& frame) {
  const int16_t version = frame.header.request_api_version;
  CO_ASSIGN_OR_RETURN(net::ProduceRequest request, net::decode_body<net::ProduceRequest>(frame));
  const int16_t acks = request.acks;
  const io::Instant deadline = ctx_->clock().now() + std::chrono::milliseconds(std::max(0, request.timeout_ms));
  net::ProduceResponse response;
  // Offsets that must reach the high watermark before acks=all answers.
  struct Pending {
    net::ProduceResponse::PartitionProduceResponse* out;
    std::shared_ptr<Partition> partition;
    int64_t end;
    int32_t leader_epoch;
  };
  std::vector<Pending> pending;
  // KIP-890: a producer's first transactional batch on a partition is
  // appended only once its coordinator confirms the transaction is ongoing
  // and added the partition; otherwise a batch that arrives after its
  // transaction ended (a retry, a request held up in the network) would
  // open a transaction no coordinator knows, and the partition's last
  // stable offset would wait for it for good.
  std::map<txn::TopicPartition, TxnCheck> checks;
  int64_t txn_producer_id = net::kNoProducerId;
  if (config_.transaction_partition_verification && request.transactional_id.has_value() &&
      !request.transactional_id->empty()) {
    int16_t producer_epoch = net::kNoProducerEpoch;
    std::vector<std::shared_ptr<Partition>> partitions;
    for (const auto& topic : request.topic_data) {
      for (const auto& data : topic.partition_data) {
        std::shared_ptr<Partition> p = find(topic.name, data.index);
        if (p == nullptr || p->leader != config_.node_id || !data.records.has_value()) continue;
        absl::StatusOr<net::RecordBatchHeader> h =
            net::parse_batch_header(data.records->span(), net::BatchExtent::kHeaderOnly);
        if (!h.ok() || !h->is_transactional() || h->producer_id < 0) continue;
        if (txn_producer_id == net::kNoProducerId) {
          txn_producer_id = h->producer_id;
          producer_epoch = h->producer_epoch;
        }
        // One producer per request: a batch of another is not verified,
        // so it is refused.
        if (h->producer_id != txn_producer_id) {
          checks.insert_or_assign(txn::TopicPartition{topic.name, data.index},
                                  TxnCheck{p, 0, net::Error::kInvalidTxnState});
          continue;
        }
        partitions.push_back(std::move(p));
      }
    }
    if (!partitions.empty()) {
      std::map<txn::TopicPartition, TxnCheck> verified = co_await verify_first_txn_writes(
          *request.transactional_id, txn_producer_id, producer_epoch, std::move(partitions));
      checks.merge(verified);
    }
  }
  response.responses.reserve(request.topic_data.size());
  for (auto& topic : request.topic_data) {
    auto& topic_out = response.responses.emplace_back();
    topic_out.name = topic.name;
    topic_out.partition_responses.reserve(topic.partition_data.size());
    for (auto& data : topic.partition_data) {
      auto& out = topic_out.partition_responses.emplace_back();
      out.index = data.index;
      out.base_offset = -1;
      auto fail = [&](net::Error e) { out.error_code = net::code(e); };
      if (acks != 0 && acks != 1 && acks != -1) {
        fail(net::Error::kInvalidRequiredAcks);
        continue;
      }
      if (version < 3 && data.records.has_value() && data.records->size() > 0) {
        // A message set: appended as the one record batch of its records.
        absl::StatusOr<io::Buffer> batch = net::message_set_to_batch(data.records->span(), kMessageSetMaxBytes);
        if (!batch.ok()) {
          ctx_->log().debug("broker: Produce v{} to {}-{}: {}", version, topic.name, data.index,
                            batch.status().ToString());
          fail(absl::IsResourceExhausted(batch.status()) ? net::Error::kMessageTooLarge
                                                         : net::Error::kCorruptMessage);
          continue;
        }
        data.records = *std::move(batch);
      }
      std::shared_ptr<Partition> p = find(topic.name, data.index);
      const metadata::TopicImage* t = image_.topics().topic(topic.name);
      if (t == nullptr || t->partition(data.index) == nullptr) {
        fail(net::Error::kUnknownTopicOrPartition);
        continue;
      }
      if (p == nullptr || p->leader != config_.node_id) {
        fail(net::Error::kNotLeaderOrFollower);
        if (p != nullptr && data.records.has_value()) note_refused(*p, *data.records, net::Error::kNotLeaderOrFollower);
        if (version >= 10) {
          const metadata::PartitionRegistration* reg = t->partition(data.index);
          out.current_leader.leader_id = reg->leader;
          out.current_leader.leader_epoch = reg->leader_epoch;
        }
        continue;
      }
      if (!data.records.has_value() || data.records->size() == 0) {
        fail(net::Error::kCorruptMessage);
        out.error_message = "no records";
        continue;
      }
      if (acks == -1 && static_cast<int32_t>(p->isr.size()) < p->min_insync_replicas) {
        note_refused(*p, *data.records, net::Error::kNotEnoughReplicas);
        fail(net::Error::kNotEnoughReplicas);
        out.error_message = fmt::format("the ISR has {} replicas; min.insync.replicas is {}", p->isr.size(),
                                        p->min_insync_replicas);
        continue;
      }
      if (auto c = checks.find(txn::TopicPartition{topic.name, data.index}); c != checks.end()) {
        if (c->second.error != net::Error::kNone) {
          fail(c->second.error);
          continue;
        }
        // Verified, but a marker for the producer (or a new leadership) may
        // have come since: then the transaction it was verified for is over.
        if (!still_verified(c->second, txn_producer_id)) {
          fail(net::Error::kInvalidTxnState);
          out.error_message = "the transaction ended while the batch was verified";
          continue;
        }
      }
      // The first batch's header, while this replica remembers refused
      // batches (the records move into the log).
      std::optional<net::RecordBatchHeader> header;
      if (!p->refused_batches.empty()) {
        absl::StatusOr<net::RecordBatchHeader> h =
            net::parse_batch_header(data.records->span(), net::BatchExtent::kHeaderOnly);
        if (h.ok() && h->producer_id >= 0) header = *h;
      }
      const int32_t leader_epoch = p->leader_epoch;
      const std::shared_ptr<Partition> appended_to = p;
      absl::StatusOr<storage::AppendResult> appended =
          co_await p->log->append_as_leader(std::move(*data.records), leader_epoch);
      // The partition may have gone while the append ran.
      p = find(topic.name, data.index);
      if (!appended.ok()) {
        fail(partition_log_failed(appended_to, appended.status()));
        out.error_message = std::string(appended.status().message());
        continue;
      }
      if (p != appended_to) {
        // Removed (a reassignment moved the replica away, the topic was
        // deleted) while the append ran: the batch went with the log.
        fail(net::Error::kNotLeaderOrFollower);
        continue;
      }
      const storage::AppendResult& r = *appended;
      out.log_start_offset = r.log_start_offset;
      if (!r.ok()) {
        if (r.error == net::Error::kOutOfOrderSequenceNumber && header.has_value() &&
            follows_refused(*p, *header)) {
          const Partition::RefusedBatch& refused = p->refused_batches[header->producer_id];
          fail(refused.error);
          out.error_message = fmt::format(
              "sequence {} of producer {} follows a batch this broker refused (sequence {}): resend that first",
              header->base_sequence, header->producer_id, refused.base_sequence);
          if (version >= 10 && refused.error == net::Error::kNotLeaderOrFollower) {
            out.current_leader.leader_id = config_.node_id;
            out.current_leader.leader_epoch = leader_epoch;
          }
          continue;
        }
        out.error_code = net::code(r.error);
        if (!r.error_message.empty()) out.error_message = r.error_message;
        for (const storage::RecordError& e : r.record_errors) {
          if (version < 8) break;
          net::ProduceResponse::BatchIndexAndErrorMessage m;
          m.batch_index = e.record_index < 0 ? e.batch_index : e.record_index;
          m.batch_index_error_message = e.message;
          out.record_errors.push_back(std::move(m));
        }
        continue;
      }
      out.base_offset = r.first_offset;
      out.log_append_time_ms = r.log_append_time_ms;
      if (header.has_value()) forget_refused(*p, *header);
      maybe_advance_high_watermark(*p);
      if (acks == -1) pending.push_back(Pending{&out, p, r.last_offset + 1, leader_epoch});
    }
  }
  appended_.notify();
  // acks=all: wait for the high watermark (the ISR's followers fetching
  // past the batch).
  for (const Pending& w : pending) {
    while (true) {
      const uint64_t seen = appended_.seen();
      std::shared_ptr<Partition> p = find(w.partition->topic, w.partition->index);
      if (p != w.partition || p->leader != config_.node_id || p->leader_epoch != w.leader_epoch) {
        w.out->error_code = net::code(net::Error::kNotLeaderOrFollower);
        break;
      }
      // On the whole ISR, and the ISR holds min.insync.replicas: written.
      // Had the ISR shrunk below that meanwhile (a follower fell behind or
      // shut down), Kafka answers NOT_ENOUGH_REPLICAS_AFTER_APPEND at once;
      // the producer may not know whether its batch was written, and the
      // retry of an idempotent producer whose epoch changed meanwhile
      // (librdkafka bumps it on other partitions' errors) writes it again.
      // Brook waits for the ISR to grow back instead: a replica joins it
      // only once it holds the log to the high watermark, so it holds the
      // batch too. Only at the deadline does it answer that error.
      const bool replicated = p->log->high_watermark() >= w.end;
      if (replicated && static_cast<int32_t>(p->isr.size()) >= p->min_insync_replicas) break;
      if (ctx_->clock().now() >= deadline) {
        w.out->error_code =
            net::code(replicated ? net::Error::kNotEnoughReplicasAfterAppend : net::Error::kRequestTimedOut);
        break;
      }
      (void)co_await io::with_deadline(ctx_->clock(), deadline, appended_.changed_since(seen));
    }
  }
  if (acks == 0) co_return io::BufferChain();  // no response at all
  co_return net::encode_response(response, frame.header);
}

// --- Fetch ----------------------------------------------------------------------

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_fetch(const net::RequestFrame& frame) {
  const int16_t version = frame.header.request_api_version;
  CO_ASSIGN_OR_RETURN(net::FetchRequest request, net::decode_body<net::FetchRequest>(frame));
  const bool by_id = version >= 13;
  // A follower replica (Kafka's replica id, in ReplicaState from v15) reads
  // up to the log end; consumers up to the high watermark or the LSO.
  const int32_t replica_id = version >= 15 ? request.replica_state.replica_id : request.replica_id;
  const bool from_follower = replica_id >= 0;
  const storage::ReadBound bound = from_follower                 ? storage::ReadBound::kLogEnd
                                   : request.isolation_level == 1 ? storage::ReadBound::kCommitted
                                                                  : storage::ReadBound::kHighWatermark;
  bool first_pass = true;
  const io::Instant deadline = ctx_->clock().now() + std::chrono::milliseconds(std::max(0, request.max_wait_ms));
  const int64_t max_bytes = request.max_bytes <= 0 ? INT32_MAX : request.max_bytes;
  net::FetchResponse response;
  // Incremental fetch sessions (KIP-227): begin() folds the request into
  // its session; the answer then covers every partition of the session.
  FetchSessionCache::Use session;
  if (const net::Error e = fetch_sessions_.begin(&request, version, ctx_->clock().now(), ctx_->random(), &session);
      e != net::Error::kNone) {
    response.error_code = net::code(e);
    co_return net::encode_response(response, frame.header);
  }
  while (true) {
    // (Taken before the reads: an append while they are under way is not
    // waited for.)
    const uint64_t seen = appended_.seen();
    response.responses.clear();
    int64_t bytes = 0;
    bool errors = false;
    for (const auto& topic : request.topics) {
      auto& topic_out = response.responses.emplace_back();
      std::string name = topic.topic;
      if (by_id) {
        topic_out.topic_id = topic.topic_id;
        const metadata::TopicImage* t = image_.topics().topic(topic.topic_id);
        name = t == nullptr ? std::string() : t->name;
      } else {
        topic_out.topic = topic.topic;
      }
      for (const auto& part : topic.partitions) {
        auto& out = topic_out.partitions.emplace_back();
        out.partition_index = part.partition;
        out.high_watermark = -1;
        out.last_stable_offset = -1;
        out.log_start_offset = -1;
        out.aborted_transactions = std::nullopt;
        out.records = io::Buffer();
        auto fail = [&](net::Error e) {
          out.error_code = net::code(e);
          errors = true;
        };
        const metadata::TopicImage* t = image_.topics().topic(name);
        if (t == nullptr) {
          fail(by_id ? net::Error::kUnknownTopicId : net::Error::kUnknownTopicOrPartition);
          continue;
        }
        if (t->partition(part.partition) == nullptr) {
          fail(net::Error::kUnknownTopicOrPartition);
          continue;
        }
        std::shared_ptr<Partition> p = find(name, part.partition);
        if (p == nullptr || p->leader != config_.node_id) {
          fail(net::Error::kNotLeaderOrFollower);
          if (version >= 12) {
            const metadata::PartitionRegistration* reg = t->partition(part.partition);
            out.current_leader.leader_id = reg->leader;
            out.current_leader.leader_epoch = reg->leader_epoch;
          }
          continue;
        }
        if (part.current_leader_epoch >= 0 && part.current_leader_epoch != p->leader_epoch) {
          fail(part.current_leader_epoch < p->leader_epoch ? net::Error::kFencedLeaderEpoch
                                                           : net::Error::kUnknownLeaderEpoch);
          continue;
        }
        if (from_follower && !p->followers.contains(replica_id)) {
          fail(net::Error::kNotLeaderOrFollower);
          continue;
        }
        if (version >= 12 && part.last_fetched_epoch >= 0) {
          // KIP-320: where the fetcher's last epoch ends here. Ending before
          // its fetch offset (or an older epoch) means the logs diverge.
          const storage::EpochEndOffset e = p->log->end_offset_for_epoch(part.last_fetched_epoch);
          if (e.epoch >= 0 && (e.epoch < part.last_fetched_epoch || e.end_offset < part.fetch_offset)) {
            out.diverging_epoch.epoch = e.epoch;
            out.diverging_epoch.end_offset = e.end_offset;
            out.high_watermark = p->log->high_watermark();
            out.last_stable_offset = p->log->last_stable_offset();
            out.log_start_offset = p->log->log_start_offset();
            errors = true;  // answer now
            continue;
          }
        }
        if (version < 4 && !downconversion_enabled(name)) {
          fail(net::Error::kUnsupportedVersion);
          continue;
        }
        if (from_follower && first_pass) update_follower(p, replica_id, part.fetch_offset);
        const int64_t room = std::max<int64_t>(0, max_bytes - bytes);
        const size_t limit = static_cast<size_t>(std::min<int64_t>(room, std::max(0, part.partition_max_bytes)));
        const std::shared_ptr<Partition> read_from = p;
        absl::StatusOr<storage::ReadResult> read =
            co_await p->log->read(part.fetch_offset, limit, bound, bytes == 0);
        p = find(name, part.partition);
        if (!read.ok()) {
          fail(partition_log_failed(read_from, read.status()));
          continue;
        }
        out.high_watermark = read->high_watermark;
        out.last_stable_offset = read->last_stable_offset;
        out.log_start_offset = read->log_start_offset;
        if (read->error != net::Error::kNone) {
          fail(read->error);
          continue;
        }
        if (bound == storage::ReadBound::kCommitted) {
          std::vector<net::FetchResponse::AbortedTransaction> aborted;
          for (const storage::AbortedTxn& a : read->aborted_transactions) {
            net::FetchResponse::AbortedTransaction x;
            x.producer_id = a.producer_id;
            x.first_offset = a.first_offset;
            aborted.push_back(x);
          }
          out.aborted_transactions = std::move(aborted);
        }
        if (version < 4 && read->records.size() > 0) {
          // Before record batches: a message set, magic 1 from Fetch v2,
          // magic 0 before.
          absl::StatusOr<io::Buffer> set = net::batches_to_message_set(
              read->records, part.fetch_offset, version >= 2 ? 1 : 0, kMessageSetMaxBytes);
          if (!set.ok()) {
            ctx_->log().warn("broker: Fetch v{} of {}-{} at {}: {}", version, name, part.partition,
                             part.fetch_offset, set.status().ToString());
            fail(net::Error::kCorruptMessage);
            continue;
          }
          read->records = *std::move(set);
        }
        bytes += static_cast<int64_t>(read->records.size());
        out.records = std::move(read->records);
      }
    }
    first_pass = false;
    // An incremental answer waits for something to report, like min_bytes.
    const bool news = fetch_sessions_.has_news(session, response);
    if (errors || (news && bytes >= std::max(1, request.min_bytes)) || ctx_->clock().now() >= deadline) break;
    (void)co_await io::with_deadline(ctx_->clock(), deadline, appended_.changed_since(seen));
  }
  fetch_sessions_.finish(session, &response);
  co_return net::encode_response(response, frame.header);
}

// --- ListOffsets ----------------------------------------------------------------

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_list_offsets(const net::RequestFrame& frame) {
  const int16_t version = frame.header.request_api_version;
  CO_ASSIGN_OR_RETURN(net::ListOffsetsRequest request, net::decode_body<net::ListOffsetsRequest>(frame));
  net::ListOffsetsResponse response;
  for (const auto& topic : request.topics) {
    auto& topic_out = response.topics.emplace_back();
    topic_out.name = topic.name;
    for (const auto& part : topic.partitions) {
      auto& out = topic_out.partitions.emplace_back();
      out.partition_index = part.partition_index;
      auto fail = [&](net::Error e) { out.error_code = net::code(e); };
      const metadata::TopicImage* t = image_.topics().topic(topic.name);
      if (t == nullptr || t->partition(part.partition_index) == nullptr) {
        fail(net::Error::kUnknownTopicOrPartition);
        continue;
      }
      std::shared_ptr<Partition> p = find(topic.name, part.partition_index);
      if (p == nullptr || p->leader != config_.node_id) {
        fail(net::Error::kNotLeaderOrFollower);
        continue;
      }
      if (part.current_leader_epoch >= 0 && part.current_leader_epoch != p->leader_epoch) {
        fail(part.current_leader_epoch < p->leader_epoch ? net::Error::kFencedLeaderEpoch
                                                         : net::Error::kUnknownLeaderEpoch);
        continue;
      }
      storage::Log& log = *p->log;
      const int64_t fetchable = request.isolation_level == 1 ? log.last_stable_offset() : log.high_watermark();
      int64_t offset = -1;
      int64_t timestamp = -1;
      if (part.timestamp == kListOffsetsLatest) {
        offset = fetchable;
      } else if (part.timestamp == kListOffsetsEarliest || part.timestamp == kListOffsetsEarliestLocal) {
        offset = log.log_start_offset();
      } else if (part.timestamp == kListOffsetsMaxTimestamp) {
        for (const auto& [base, segment] : log.segments()) {
          if (segment->max_timestamp_ms() >= timestamp && segment->offset_of_max_timestamp() >= 0 &&
              segment->offset_of_max_timestamp() < fetchable) {
            timestamp = segment->max_timestamp_ms();
            offset = segment->offset_of_max_timestamp();
          }
        }
      } else if (part.timestamp >= 0) {
        absl::StatusOr<std::optional<storage::TimestampOffset>> found = co_await log.offset_for_timestamp(part.timestamp);
        if (!found.ok()) {
          fail(partition_log_failed(p, found.status()));
          continue;
        }
        if (found->has_value() && (*found)->offset < fetchable) {
          offset = (*found)->offset;
          timestamp = (*found)->timestamp_ms;
        }
      } else {
        fail(net::Error::kInvalidRequest);
        continue;
      }
      if (version == 0) {
        // v0 answers a list of at most max_num_offsets offsets. Kafka's
        // listed the base offsets of the segments written before the time;
        // this one lists the offset v1 answers (for a time after every
        // record, the end of the log), where a consumer starting at that
        // time begins.
        if (part.max_num_offsets > 0) out.old_style_offsets.push_back(offset >= 0 ? offset : fetchable);
        continue;
      }
      out.offset = offset;
      out.timestamp = timestamp;
      if (offset >= 0) {
        // The epoch of the record before `offset` (of the one at it for a
        // timestamp lookup).
        const int64_t at = part.timestamp >= 0 || part.timestamp == kListOffsetsMaxTimestamp
                               ? offset
                               : std::max<int64_t>(0, offset - 1);
        if (version >= 4) out.leader_epoch = log.leader_epochs().epoch_for_offset(at).value_or(-1);
      }
    }
  }
  co_return net::encode_response(response, frame.header);
}

// --- OffsetsForLeaderEpoch ------------------------------------------------------

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_offsets_for_leader_epoch(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::OffsetForLeaderEpochRequest request,
                      net::decode_body<net::OffsetForLeaderEpochRequest>(frame));
  net::OffsetForLeaderEpochResponse response;
  for (const auto& topic : request.topics) {
    auto& topic_out = response.topics.emplace_back();
    topic_out.topic = topic.topic;
    for (const auto& part : topic.partitions) {
      auto& out = topic_out.partitions.emplace_back();
      out.partition = part.partition;
      const metadata::TopicImage* t = image_.topics().topic(topic.topic);
      std::shared_ptr<Partition> p = find(topic.topic, part.partition);
      if (t == nullptr || t->partition(part.partition) == nullptr) {
        out.error_code = net::code(net::Error::kUnknownTopicOrPartition);
      } else if (p == nullptr || p->leader != config_.node_id) {
        out.error_code = net::code(net::Error::kNotLeaderOrFollower);
      } else if (part.current_leader_epoch >= 0 && part.current_leader_epoch != p->leader_epoch) {
        out.error_code = net::code(part.current_leader_epoch < p->leader_epoch ? net::Error::kFencedLeaderEpoch
                                                                               : net::Error::kUnknownLeaderEpoch);
      } else {
        const storage::EpochEndOffset e = p->log->end_offset_for_epoch(part.leader_epoch);
        out.leader_epoch = e.epoch;
        out.end_offset = e.end_offset;
      }
    }
  }
  co_return net::encode_response(response, frame.header);
}

// --- InitProducerId -------------------------------------------------------------

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_init_producer_id(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::InitProducerIdRequest request, net::decode_body<net::InitProducerIdRequest>(frame));
  net::InitProducerIdResponse response;
  if (request.transactional_id.has_value()) {
    response = co_await txns_.init_producer_id(std::move(request), frame.header.request_api_version);
    co_return net::encode_response(response, frame.header);
  }
  absl::StatusOr<int64_t> id = co_await next_producer_id(ctx_->clock().now() + 10s);
  if (!id.ok()) {
    ctx_->log().warn("broker: InitProducerId: {}", id.status().ToString());
    response.error_code = net::code(net::Error::kCoordinatorNotAvailable);
  } else {
    response.producer_id = *id;
    response.producer_epoch = 0;
  }
  co_return net::encode_response(response, frame.header);
}

// --- DeleteRecords --------------------------------------------------------------

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_delete_records(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::DeleteRecordsRequest request, net::decode_body<net::DeleteRecordsRequest>(frame));
  net::DeleteRecordsResponse response;
  // The answers whose log start moved (topic and partition index in the
  // response): made durable before they go.
  struct Moved {
    std::shared_ptr<Partition> p;
    size_t topic;
    size_t partition;
  };
  std::vector<Moved> moved;
  for (const auto& topic : request.topics) {
    auto& topic_out = response.topics.emplace_back();
    topic_out.name = topic.name;
    for (const auto& part : topic.partitions) {
      auto& out = topic_out.partitions.emplace_back();
      out.partition_index = part.partition_index;
      out.low_watermark = -1;
      const metadata::TopicImage* t = image_.topics().topic(topic.name);
      std::shared_ptr<Partition> p = find(topic.name, part.partition_index);
      if (t == nullptr || t->partition(part.partition_index) == nullptr) {
        out.error_code = net::code(net::Error::kUnknownTopicOrPartition);
        continue;
      }
      if (p == nullptr || p->leader != config_.node_id) {
        out.error_code = net::code(net::Error::kNotLeaderOrFollower);
        continue;
      }
      const int64_t offset = part.offset == -1 ? p->log->high_watermark() : part.offset;
      if (offset < 0) {
        out.error_code = net::code(net::Error::kOffsetOutOfRange);
        continue;
      }
      storage::Log* log = p->log.get();
      const int64_t start = log->log_start_offset();
      absl::StatusOr<net::Error> deleted = co_await log->delete_records_before(offset);
      if (!deleted.ok()) {
        out.error_code = net::code(partition_log_failed(p, deleted.status()));
        continue;
      }
      out.error_code = net::code(*deleted);
      out.low_watermark = log->log_start_offset();
      if (out.low_watermark > start) {
        moved.push_back(Moved{p, response.topics.size() - 1, topic_out.partitions.size() - 1});
      }
    }
  }
  if (!moved.empty()) {
    if (absl::Status s = co_await checkpoint_log_starts(); !s.ok()) {
      for (const Moved& m : moved) {
        auto& out = response.topics[m.topic].partitions[m.partition];
        out.error_code = net::code(partition_log_failed(m.p, s));
        out.low_watermark = -1;
      }
    }
  }
  co_return net::encode_response(response, frame.header);
}

// --- DescribeConfigs / DescribeCluster -----------------------------------------

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_describe_configs(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::DescribeConfigsRequest request, net::decode_body<net::DescribeConfigsRequest>(frame));
  co_return net::encode_response(
      configs::describe_configs(image_, config_.node_id, request, frame.header.request_api_version,
                                &config_.static_configs),
      frame.header);
}

// A SASL request the listener did not take: on a PLAINTEXT listener, or
// after the connection authenticated. Kafka answers these the same way.
absl::StatusOr<io::BufferChain> Broker::out_of_place_sasl(const net::RequestFrame& frame) {
  if (frame.header.request_api_key == net::SaslHandshakeRequest::kApiKey) {
    ASSIGN_OR_RETURN(net::SaslHandshakeRequest request, net::decode_body<net::SaslHandshakeRequest>(frame));
    (void)request;
    net::SaslHandshakeResponse response;
    response.error_code = net::code(net::Error::kIllegalSaslState);
    return net::encode_response(response, frame.header);
  }
  ASSIGN_OR_RETURN(net::SaslAuthenticateRequest request, net::decode_body<net::SaslAuthenticateRequest>(frame));
  (void)request;
  net::SaslAuthenticateResponse response;
  response.error_code = net::code(net::Error::kIllegalSaslState);
  response.error_message = "SaslAuthenticate request received after successful authentication or on a listener "
                           "without SASL";
  return net::encode_response(response, frame.header);
}

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_describe_cluster(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::DescribeClusterRequest request, net::decode_body<net::DescribeClusterRequest>(frame));
  net::DescribeClusterResponse response;
  response.cluster_id = config_.cluster_id;
  if (request.endpoint_type != 1) {
    response.error_code = net::code(net::Error::kUnsupportedEndpointType);
    response.error_message = "only broker endpoints are described here";
    co_return net::encode_response(response, frame.header);
  }
  for (const auto& [id, b] : image_.cluster().brokers) {
    if (b.fenced) continue;
    auto l = b.listeners.find(client_listener(frame));
    if (l == b.listeners.end()) continue;
    auto& out = response.brokers.emplace_back();
    out.broker_id = id;
    out.host = l->second.host;
    out.port = l->second.port;
    out.rack = b.rack;
  }
  response.controller_id = response.brokers.empty() ? -1 : response.brokers.front().broker_id;
  if (request.include_cluster_authorized_operations) response.cluster_authorized_operations = kClusterOperationsAll;
  co_return net::encode_response(response, frame.header);
}

// ACLs are kept in the metadata log (CreateAcls and DeleteAcls go to the
// controller) and described from this broker's image, as Kafka's
// StandardAuthorizer does; they are not enforced (docs/architecture.md).
io::Task<absl::StatusOr<io::BufferChain>> Broker::on_describe_acls(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::DescribeAclsRequest request, net::decode_body<net::DescribeAclsRequest>(frame));
  co_return net::encode_response(controller::describe_acls(image_.acls(), request), frame.header);
}

// Client quotas, like ACLs, are kept in the metadata log and described
// from the image; they are not enforced yet (docs/architecture.md).
io::Task<absl::StatusOr<io::BufferChain>> Broker::on_describe_client_quotas(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::DescribeClientQuotasRequest request,
                      net::decode_body<net::DescribeClientQuotasRequest>(frame));
  co_return net::encode_response(controller::describe_client_quotas(image_.client_quotas(), request), frame.header);
}

// SCRAM credentials, like ACLs, are kept in the metadata log
// (AlterUserScramCredentials goes to the controller) and described from the
// image (core/controller/scram.h); the SASL listeners authenticate against
// the same image (Broker::find).
io::Task<absl::StatusOr<io::BufferChain>> Broker::on_describe_user_scram_credentials(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::DescribeUserScramCredentialsRequest request,
                      net::decode_body<net::DescribeUserScramCredentialsRequest>(frame));
  co_return net::encode_response(controller::describe_scram_credentials(image_.scram(), request), frame.header);
}

std::optional<net::ScramCredential> Broker::find(net::ScramMechanism mechanism, std::string_view user) const {
  const auto& mechanisms = image_.scram().mechanisms;
  auto m = mechanisms.find(net::scram_type(mechanism));
  if (m == mechanisms.end()) return std::nullopt;
  auto c = m->second.find(std::string(user));
  if (c == m->second.end()) return std::nullopt;
  return c->second;
}

// The producers a partition's leader keeps state for (KIP-664), as
// `kafka-transactions describe-producers` and the Java admin client's
// describeProducers read them: an open transaction's first offset shows a
// transaction that may hang.
io::Task<absl::StatusOr<io::BufferChain>> Broker::on_describe_producers(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::DescribeProducersRequest request, net::decode_body<net::DescribeProducersRequest>(frame));
  net::DescribeProducersResponse response;
  for (const auto& topic : request.topics) {
    auto& topic_out = response.topics.emplace_back();
    topic_out.name = topic.name;
    const metadata::TopicImage* t = image_.topics().topic(topic.name);
    for (const int32_t index : topic.partition_indexes) {
      auto& out = topic_out.partitions.emplace_back();
      out.partition_index = index;
      if (t == nullptr || t->partition(index) == nullptr) {
        out.error_code = net::code(net::Error::kUnknownTopicOrPartition);
        continue;
      }
      const std::shared_ptr<Partition> p = find(topic.name, index);
      if (p == nullptr || !p->is_leader(config_.node_id) || p->log == nullptr) {
        out.error_code = net::code(net::Error::kNotLeaderOrFollower);
        continue;
      }
      for (const auto& [producer_id, entry] : p->log->producer_state().producers()) {
        auto& producer = out.active_producers.emplace_back();
        producer.producer_id = producer_id;
        producer.producer_epoch = entry.producer_epoch;
        producer.last_sequence = entry.last_sequence();
        producer.last_timestamp = entry.last_timestamp_ms;
        producer.coordinator_epoch = entry.coordinator_epoch;
        producer.current_txn_start_offset = entry.current_txn_first_offset.value_or(-1);
      }
    }
  }
  co_return net::encode_response(response, frame.header);
}

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_describe_log_dirs(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::DescribeLogDirsRequest request, net::decode_body<net::DescribeLogDirsRequest>(frame));
  // One directory holds every partition. Its capacity is not known here
  // (total and usable bytes stay -1: unknown).
  net::DescribeLogDirsResponse response;
  auto& dir = response.results.emplace_back();
  dir.log_dir = config_.log_dir;
  auto wanted = [&](const std::string& topic, int32_t index) {
    if (!request.topics.has_value()) return true;
    for (const auto& t : *request.topics) {
      if (t.topic == topic && std::find(t.partitions.begin(), t.partitions.end(), index) != t.partitions.end()) {
        return true;
      }
    }
    return false;
  };
  for (const auto& [key, p] : partitions_) {
    if (!wanted(key.first, key.second)) continue;
    if (dir.topics.empty() || dir.topics.back().name != key.first) dir.topics.emplace_back().name = key.first;
    auto& out = dir.topics.back().partitions.emplace_back();
    out.partition_index = key.second;
    out.partition_size = static_cast<int64_t>(p->log->size_bytes());
    out.offset_lag = std::max<int64_t>(0, p->log->high_watermark() - p->log->log_end_offset());
  }
  co_return net::encode_response(response, frame.header);
}

// --- forwarded to the controller -------------------------------------------------

template <typename Req, typename Resp>
io::Task<absl::StatusOr<io::BufferChain>> Broker::forward(const net::RequestFrame& frame) {
  const int16_t version = frame.header.request_api_version;
  CO_ASSIGN_OR_RETURN(Req request, net::decode_body<Req>(frame));
  const io::Instant deadline = ctx_->clock().now() + config_.controller_timeout;
  absl::StatusOr<Resp> response = co_await call_controller<Resp>(request, version, deadline);
  if (!response.ok()) {
    ctx_->log().warn("broker: forwarding {}: {}", Req::kName, response.status().ToString());
    co_return absl::UnavailableError(fmt::format("{}: {}", Req::kName, response.status().ToString()));
  }
  co_return net::encode_response(*response, frame.header);
}

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_create_topics(const net::RequestFrame& frame) {
  const int16_t version = frame.header.request_api_version;
  CO_ASSIGN_OR_RETURN(net::CreateTopicsRequest request, net::decode_body<net::CreateTopicsRequest>(frame));
  const io::Instant deadline = ctx_->clock().now() + config_.controller_timeout;
  absl::StatusOr<net::CreateTopicsResponse> response =
      co_await call_controller<net::CreateTopicsResponse>(request, version, deadline);
  if (!response.ok()) {
    net::CreateTopicsResponse timed_out;
    for (const auto& t : request.topics) {
      auto& out = timed_out.topics.emplace_back();
      out.name = t.name;
      out.error_code = net::code(net::Error::kRequestTimedOut);
      out.error_message = std::string(response.status().message());
    }
    co_return net::encode_response(timed_out, frame.header);
  }
  if (!request.validate_only) {
    // Answer once this broker serves the new topics, so that a client's
    // next request finds them.
    for (const auto& t : response->topics) {
      if (t.error_code == 0) (void)co_await wait_for_topic(t.name, true, 2s);
    }
  }
  co_return net::encode_response(*response, frame.header);
}

}  // namespace brook::broker
