// core/controller/quorum_controller.cc
#include "core/controller/quorum_controller.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>
#include <variant>

#include "core/configs/configs.h"
#include "core/controller/acls.h"
#include "core/controller/client_quotas.h"
#include "core/controller/scram.h"
#include "core/controller/partition_change.h"
#include "core/controller/topic_names.h"
#include "core/placement/placement.h"
#include "io/assert.h"
#include "io/status.h"
#include "net/kafka/messages/api_versions_request.h"
#include "net/kafka/messages/describe_configs_request.h"
#include "net/kafka/messages/describe_configs_response.h"
#include "net/kafka/messages/api_versions_response.h"
#include "net/kafka/messages/begin_quorum_epoch_request.h"
#include "net/kafka/messages/describe_quorum_request.h"
#include "net/kafka/messages/end_quorum_epoch_request.h"
#include "net/kafka/messages/fetch_request.h"
#include "net/kafka/messages/fetch_snapshot_request.h"
#include "net/kafka/messages/vote_request.h"
#include "net/kafka/record_batch.h"

namespace brook::controller {

namespace {

using namespace std::chrono_literals;
using metadata::MetadataRecord;

// IncrementalAlterConfigs operations.
constexpr int8_t kOpSet = 0;
constexpr int8_t kOpDelete = 1;
constexpr int8_t kOpAppend = 2;
constexpr int8_t kOpSubtract = 3;
constexpr std::string_view kNotControllerMessage = "This controller is not the active controller.";

int16_t err(net::Error e) { return net::code(e); }

// A placement failure as Kafka's controller words it.
std::string placement_message(const placement::PlacementError& error, int16_t rf) {
  if (error.error != net::Error::kInvalidReplicationFactor) return error.message;
  return fmt::format("Unable to replicate the partition {} time(s): {}", rf, error.message);
}

// Marks an answer that was waiting for its write's commit when the
// controller lost its leadership.
template <typename Result>
void refuse(Result& result) {
  result.error_code = err(net::Error::kNotController);
  result.error_message = std::string(kNotControllerMessage);
}

// Marks every item answered without error, in each topic's `items`, as
// refused (the write holding them lost its epoch before it committed).
template <typename Topic, typename Items>
void refuse_done(std::vector<Topic>& topics, Items Topic::*items) {
  for (Topic& t : topics) {
    for (auto& item : t.*items) {
      if (item.error_code == 0) refuse(item);
    }
  }
}

bool contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::vector<int32_t> without(const std::vector<int32_t>& v, int32_t x) {
  std::vector<int32_t> out;
  for (int32_t y : v) {
    if (y != x) out.push_back(y);
  }
  return out;
}

// The controller APIs and the versions served.
struct ServedApi {
  int16_t key;
  int16_t min;
  int16_t max;
};

template <typename M>
ServedApi served() {
  return ServedApi{M::kApiKey, M::kLowestVersion, M::kHighestVersion};
}

std::vector<ServedApi> served_apis() {
  return {served<net::ApiVersionsRequest>(),
          served<net::CreateTopicsRequest>(),
          served<net::DeleteTopicsRequest>(),
          served<net::AlterConfigsRequest>(),
          served<net::CreatePartitionsRequest>(),
          served<net::ElectLeadersRequest>(),
          served<net::IncrementalAlterConfigsRequest>(),
          served<net::AlterPartitionRequest>(),
          served<net::AlterPartitionReassignmentsRequest>(),
          served<net::ListPartitionReassignmentsRequest>(),
          served<net::BrokerRegistrationRequest>(),
          served<net::BrokerHeartbeatRequest>(),
          served<net::UnregisterBrokerRequest>(),
          served<net::AllocateProducerIdsRequest>(),
          served<net::CreateAclsRequest>(),
          served<net::DeleteAclsRequest>(),
          served<net::AlterClientQuotasRequest>(),
          served<net::AlterUserScramCredentialsRequest>(),
          served<net::UpdateFeaturesRequest>(),
          served<net::EnvelopeRequest>(),
          served<net::DescribeConfigsRequest>()};
}

}  // namespace

QuorumController::QuorumController(io::Context& ctx, raft::RaftNode& raft, ControllerConfig config)
    : ctx_(&ctx), raft_(&raft), config_(std::move(config)) {}

// --- replay -------------------------------------------------------------------

void QuorumController::handle_commit(const raft::CommittedBatch& batch) {
  if (!batch.control) {
    absl::StatusOr<metadata::MetadataImage> image =
        metadata::replay_batch(committed_, batch.bytes, batch.base_offset, batch.epoch);
    // A committed record that does not replay means the log and this code
    // disagree: every controller and broker would diverge.
    BROOK_ASSERT_MSG(image.ok(), "controller: {}", image.status().ToString());
    committed_ = std::move(*image);
  }
  committed_end_ = batch.last_offset + 1;
  bytes_since_snapshot_ += static_cast<int64_t>(batch.bytes.size());
  if (!active_ && raft_->role() == raft::Role::kLeader && raft_->leader_id() == config_.node_id &&
      batch.epoch == raft_->epoch() && committed_end_ == raft_->log_end_offset()) {
    // Everything before this epoch's LeaderChange is committed and replayed,
    // and nothing this controller wrote is still uncommitted.
    active_ = true;
    active_epoch_ = batch.epoch;
    latest_ = committed_;
    sessions_.clear();
    const io::Instant now = ctx_->clock().now();
    for (const auto& [id, broker] : latest_.cluster().brokers) sessions_[id].last_contact = now;
    ctx_->log().info("controller: active in epoch {} at offset {}", active_epoch_, committed_end_);
  }
  if (observer_ != nullptr) observer_->handle_commit(batch);
}

void QuorumController::handle_snapshot(raft::SnapshotId id, const std::vector<io::Buffer>& values) {
  absl::StatusOr<metadata::MetadataImage> image = metadata::load_snapshot_values(values, id.end_offset, id.epoch);
  BROOK_ASSERT_MSG(image.ok(), "controller: snapshot {} does not load: {}", raft::snapshot_file_name(id),
                   image.status().ToString());
  committed_ = std::move(*image);
  committed_end_ = id.end_offset;
  bytes_since_snapshot_ = 0;
  deactivate();
  if (observer_ != nullptr) observer_->handle_snapshot(id, values);
}

void QuorumController::handle_leader_change(int32_t leader_id, int32_t epoch) {
  if (active_ && (leader_id != config_.node_id || epoch != active_epoch_)) deactivate();
  if (observer_ != nullptr) observer_->handle_leader_change(leader_id, epoch);
}

void QuorumController::deactivate() {
  if (!active_) return;
  ctx_->log().info("controller: inactive (was active in epoch {})", active_epoch_);
  active_ = false;
  active_epoch_ = -1;
  latest_ = metadata::MetadataImage();
  sessions_.clear();
  next_balance_.reset();
}

bool QuorumController::active() const {
  return active_ && raft_->role() == raft::Role::kLeader && raft_->epoch() == active_epoch_;
}

bool QuorumController::check_active() {
  if (active_ && !active()) deactivate();
  return active_ && latest_.features().metadata_version != 0;
}

// --- writing ------------------------------------------------------------------

io::Task<absl::StatusOr<raft::AppendedBatch>> QuorumController::append(Records records,
                                                                       std::optional<int64_t> expected_base) {
  BROOK_ASSERT(!records.empty());
  std::vector<io::Buffer> values;
  values.reserve(records.size());
  for (const MetadataRecord& record : records) {
    absl::StatusOr<io::Buffer> value = metadata::encode_metadata_record(metadata::at_highest_version(record));
    BROOK_ASSERT_MSG(value.ok(), "controller: cannot encode {}: {}", metadata::to_string(record),
                     value.status().ToString());
    values.push_back(std::move(*value));
  }
  absl::StatusOr<raft::AppendedBatch> appended = co_await raft_->append(std::move(values), expected_base);
  if (!appended.ok()) {
    ctx_->log().info("controller: append failed: {}", appended.status().ToString());
    deactivate();
    co_return appended.status();
  }
  if (!active() || appended->epoch != active_epoch_) {
    deactivate();
    co_return absl::AbortedError("controller: leadership moved during the append");
  }
  metadata::MetadataDelta delta(latest_);
  absl::Status applied = delta.apply_batch(appended->base_offset, appended->epoch, records);
  BROOK_ASSERT_MSG(applied.ok(), "controller: its own records do not replay: {}", applied.ToString());
  latest_ = delta.build();
  co_return appended;
}

io::Task<absl::Status> QuorumController::write(Records records, io::SemaphoreUnits lock,
                                               std::optional<int64_t> expected_base,
                                               std::function<void(const raft::AppendedBatch&)> appended) {
  absl::StatusOr<raft::AppendedBatch> batch = co_await append(std::move(records), expected_base);
  if (batch.ok() && appended != nullptr) appended(*batch);
  lock.release();
  if (!batch.ok()) co_return batch.status();
  if (!config_.unsafe_answer_before_commit) {
    CO_RETURN_IF_ERROR(co_await raft_->wait_committed(
        batch->last_offset, batch->epoch, ctx_->clock().now() + config_.broker_session_timeout));
  }
  if (probe_ != nullptr) probe_->write_committed(*batch);
  co_return absl::OkStatus();
}

// --- record builders ----------------------------------------------------------

bool QuorumController::eligible(int32_t broker_id) const {
  const metadata::BrokerRegistration* b = latest_.cluster().broker(broker_id);
  return b != nullptr && !b->fenced && !b->in_controlled_shutdown;
}

configs::BrokerLayers QuorumController::broker_layers() const {
  configs::BrokerLayers layers;
  layers.dynamic_default =
      latest_.configs().find(metadata::ConfigResource{metadata::kConfigResourceBroker, ""});
  return layers;
}

bool QuorumController::unclean_allowed(const std::string& topic) const {
  const std::string_view name = "unclean.leader.election.enable";
  for (const metadata::ConfigResource& r :
       {metadata::ConfigResource{metadata::kConfigResourceTopic, topic},
        metadata::ConfigResource{metadata::kConfigResourceBroker, ""}}) {
    if (const metadata::ConfigMap* m = latest_.configs().find(r)) {
      auto it = m->find(name);
      if (it != m->end()) return it->second == "true";
    }
  }
  return config_.unclean_leader_election;
}

void QuorumController::remove_from_isrs(int32_t broker_id, Records& out) const {
  auto is_eligible = [&](int32_t id) { return id != broker_id && eligible(id); };
  for (const auto& [topic_id, topic] : latest_.topics().by_id) {
    const bool unclean = unclean_allowed(topic->name);
    for (const auto& [partition_id, p] : topic->partitions) {
      if (!contains(p.isr, broker_id) && p.leader != broker_id) continue;
      PartitionChangeRequest request;
      request.topic_id = topic_id;
      request.partition_id = partition_id;
      request.target_isr = without(p.isr, broker_id);
      request.unclean_allowed = unclean;
      if (auto change = build_partition_change(p, request, is_eligible)) out.emplace_back(std::move(*change));
    }
  }
}

void QuorumController::step_down_records(int32_t broker_id, StepDown how, Records& out) const {
  const metadata::BrokerRegistration* b = latest_.cluster().broker(broker_id);
  if (b == nullptr) return;
  const bool fence = how == StepDown::kFence;
  if (fence ? !b->fenced : !b->in_controlled_shutdown) {
    net::BrokerRegistrationChangeRecord change;
    change.broker_id = broker_id;
    change.broker_epoch = b->epoch;
    if (fence) {
      change.fenced = 1;
    } else {
      change.in_controlled_shutdown = 1;
    }
    out.emplace_back(change);
  }
  remove_from_isrs(broker_id, out);
}

void QuorumController::unfence_records(int32_t broker_id, Records& out) const {
  const metadata::BrokerRegistration* b = latest_.cluster().broker(broker_id);
  if (b == nullptr) return;
  net::BrokerRegistrationChangeRecord change;
  change.broker_id = broker_id;
  change.broker_epoch = b->epoch;
  change.fenced = -1;
  out.emplace_back(change);
  // Leaderless partitions whose ISR holds the broker get it as leader.
  auto is_eligible = [&](int32_t id) { return id == broker_id || eligible(id); };
  for (const auto& [topic_id, topic] : latest_.topics().by_id) {
    for (const auto& [partition_id, p] : topic->partitions) {
      if (p.leader != metadata::kNoLeader || !contains(p.replicas, broker_id)) continue;
      PartitionChangeRequest request;
      request.topic_id = topic_id;
      request.partition_id = partition_id;
      request.unclean_allowed = unclean_allowed(topic->name);
      if (auto c = build_partition_change(p, request, is_eligible)) out.emplace_back(std::move(*c));
    }
  }
}

bool QuorumController::preferred_can_lead(const metadata::PartitionRegistration& p) const {
  return !p.replicas.empty() && contains(p.isr, p.replicas.front()) && eligible(p.replicas.front());
}

bool QuorumController::leads_any(int32_t broker_id) const {
  for (const auto& [topic_id, topic] : latest_.topics().by_id) {
    for (const auto& [partition_id, p] : topic->partitions) {
      if (p.leader == broker_id) return true;
    }
  }
  return false;
}

net::Error QuorumController::check_broker_epoch(int32_t broker_id, int64_t epoch) const {
  const metadata::BrokerRegistration* b = latest_.cluster().broker(broker_id);
  if (b == nullptr || b->epoch != epoch) return net::Error::kStaleBrokerEpoch;
  return net::Error::kNone;
}

net::Uuid QuorumController::new_topic_id() {
  while (true) {
    net::Uuid id;
    for (uint8_t& b : id.bytes) b = static_cast<uint8_t>(ctx_->random().uniform(256));
    // Kafka's reserved ids (zero, the metadata topic's) and ids whose text
    // would start with '-' are never handed out.
    if (id == net::Uuid{} || id == raft::metadata_topic_id() || id.to_string().front() == '-') continue;
    if (latest_.topics().topic(id) != nullptr) continue;
    return id;
  }
}

// --- background ---------------------------------------------------------------

io::Task<void> QuorumController::run() {
  while (true) {
    co_await ctx_->clock().sleep_for(config_.fence_check_interval);
    co_await bootstrap();
    co_await fence_expired();
    co_await balance_leaders();
    co_await maybe_snapshot();
  }
}

io::Task<void> QuorumController::balance_leaders() {
  if (!active_ || !config_.auto_leader_rebalance) co_return;
  const io::Instant now = ctx_->clock().now();
  if (!next_balance_.has_value()) next_balance_ = now + config_.leader_imbalance_check_interval;
  if (now < *next_balance_) co_return;
  auto lock = co_await queue_.lock();
  if (!check_active()) co_return;
  next_balance_ = now + config_.leader_imbalance_check_interval;
  // Kafka's cap on the elections of one pass; the rest follow at once.
  constexpr size_t kMaxElections = 1000;
  Records records;
  auto is_eligible = [&](int32_t id) { return eligible(id); };
  for (const auto& [topic_id, topic] : latest_.topics().by_id) {
    for (const auto& [partition_id, p] : topic->partitions) {
      if (!preferred_can_lead(p) || p.leader == p.replicas.front()) continue;
      PartitionChangeRequest request;
      request.topic_id = topic_id;
      request.partition_id = partition_id;
      request.election = Election::kPreferred;
      request.unclean_allowed = unclean_allowed(topic->name);
      if (auto change = build_partition_change(p, request, is_eligible)) records.emplace_back(std::move(*change));
      if (records.size() == kMaxElections) break;
    }
    if (records.size() == kMaxElections) {
      next_balance_ = now;
      break;
    }
  }
  if (records.empty()) co_return;
  ctx_->log().info("controller: moving the leadership of {} partitions back to their preferred replicas",
                   records.size());
  (void)co_await write(std::move(records), std::move(lock));
}

io::Task<void> QuorumController::bootstrap() {
  if (!active_ || latest_.features().metadata_version != 0) co_return;
  auto lock = co_await queue_.lock();
  if (active_ && !active()) deactivate();
  if (!active_ || latest_.features().metadata_version != 0) co_return;
  net::FeatureLevelRecord feature;
  feature.name = std::string(metadata::kMetadataVersionFeature);
  feature.feature_level = config_.bootstrap_metadata_version;
  Records records;
  records.emplace_back(std::move(feature));
  for (const metadata::MetadataRecord& r : config_.bootstrap_records) records.push_back(r);
  absl::Status committed = co_await write(std::move(records), std::move(lock));
  ctx_->log().info("controller: bootstrap metadata.version={} and {} more records: {}",
                   config_.bootstrap_metadata_version, config_.bootstrap_records.size(), committed.ToString());
}

io::Task<void> QuorumController::fence_expired() {
  if (!active_) co_return;
  auto lock = co_await queue_.lock();
  if (!check_active()) co_return;
  const io::Instant now = ctx_->clock().now();
  Records records;
  for (const auto& [id, broker] : latest_.cluster().brokers) {
    if (broker.fenced) continue;
    Session& session = sessions_[id];
    if (now - session.last_contact < config_.broker_session_timeout) continue;
    ctx_->log().info("controller: fencing broker {}: no heartbeat for {} ms", id,
                     std::chrono::duration_cast<std::chrono::milliseconds>(now - session.last_contact).count());
    step_down_records(id, StepDown::kFence, records);
    // One broker per batch: its records are replayed before the next is
    // decided.
    break;
  }
  if (records.empty()) co_return;
  (void)co_await write(std::move(records), std::move(lock));
}

io::Task<void> QuorumController::maybe_snapshot() {
  if (config_.snapshot_max_new_record_bytes <= 0 ||
      bytes_since_snapshot_ < config_.snapshot_max_new_record_bytes) {
    co_return;
  }
  const int64_t end = committed_end_;
  const std::optional<raft::SnapshotId> latest = raft_->latest_snapshot();
  if (end <= 0 || (latest.has_value() && latest->end_offset >= end)) co_return;
  std::vector<io::Buffer> values;
  for (const metadata::MetadataRecordAndVersion& record : committed_.to_records()) {
    absl::StatusOr<io::Buffer> value = metadata::encode_metadata_record(record);
    BROOK_ASSERT(value.ok());
    values.push_back(std::move(*value));
  }
  absl::Status written = co_await raft_->snapshot(end, std::move(values));
  if (written.ok()) {
    bytes_since_snapshot_ = 0;
    ctx_->log().info("controller: snapshot at offset {}", end);
  } else {
    ctx_->log().info("controller: snapshot at offset {}: {}", end, written.ToString());
  }
}

// --- brokers ------------------------------------------------------------------

io::Task<net::BrokerRegistrationResponse> QuorumController::register_broker(
    net::BrokerRegistrationRequest request) {
  net::BrokerRegistrationResponse response;
  auto lock = co_await queue_.lock();
  if (!check_active()) {
    response.error_code = err(net::Error::kNotController);
    co_return response;
  }
  if (request.cluster_id != config_.cluster_id) {
    response.error_code = err(net::Error::kInconsistentClusterId);
    co_return response;
  }
  if (request.broker_id < 0) {
    response.error_code = err(net::Error::kInvalidRequest);
    co_return response;
  }
  const io::Instant now = ctx_->clock().now();
  if (const metadata::BrokerRegistration* existing = latest_.cluster().broker(request.broker_id)) {
    auto session = sessions_.find(request.broker_id);
    // A fenced broker has no session (Kafka's BrokerHeartbeatManager): it
    // may come back as a new incarnation at once.
    const bool live = !existing->fenced && session != sessions_.end() &&
                      now - session->second.last_contact < config_.broker_session_timeout;
    if (live && existing->incarnation_id != request.incarnation_id) {
      response.error_code = err(net::Error::kDuplicateBrokerRegistration);
      co_return response;
    }
  }
  const int16_t mv = latest_.features().metadata_version;
  bool supports_mv = false;
  for (const auto& f : request.features) {
    if (f.name == metadata::kMetadataVersionFeature) {
      supports_mv = f.min_supported_version <= mv && mv <= f.max_supported_version;
    }
  }
  if (!supports_mv) {
    response.error_code = err(net::Error::kUnsupportedVersion);
    co_return response;
  }
  // A registration replaces the broker's old one; whatever the old
  // incarnation led or held in an ISR moves away first, in the same batch
  // (the new incarnation may have lost its log).
  Records records;
  step_down_records(request.broker_id, StepDown::kFence, records);
  const int64_t base = raft_->log_end_offset();
  const int64_t epoch = base + static_cast<int64_t>(records.size());
  net::RegisterBrokerRecord record;
  record.broker_id = request.broker_id;
  record.is_migrating_zk_broker = request.is_migrating_zk_broker;
  record.incarnation_id = request.incarnation_id;
  record.broker_epoch = epoch;
  for (const auto& l : request.listeners) {
    net::RegisterBrokerRecord::BrokerEndpoint e;
    e.name = l.name;
    e.host = l.host;
    e.port = l.port;
    e.security_protocol = l.security_protocol;
    record.end_points.push_back(std::move(e));
  }
  for (const auto& f : request.features) {
    net::RegisterBrokerRecord::BrokerFeature feature;
    feature.name = f.name;
    feature.min_supported_version = f.min_supported_version;
    feature.max_supported_version = f.max_supported_version;
    record.features.push_back(std::move(feature));
  }
  record.rack = request.rack;
  record.fenced = true;
  record.log_dirs = request.log_dirs;
  records.emplace_back(std::move(record));
  sessions_[request.broker_id] = Session{.last_contact = now};
  if (!(co_await write(std::move(records), std::move(lock), base)).ok()) {
    response.error_code = err(net::Error::kNotController);
    co_return response;
  }
  response.broker_epoch = epoch;
  co_return response;
}

io::Task<net::BrokerHeartbeatResponse> QuorumController::heartbeat(net::BrokerHeartbeatRequest request) {
  net::BrokerHeartbeatResponse response;
  auto lock = co_await queue_.lock();
  if (!check_active()) {
    response.error_code = err(net::Error::kNotController);
    co_return response;
  }
  const net::Error epoch_error = check_broker_epoch(request.broker_id, request.broker_epoch);
  if (epoch_error != net::Error::kNone) {
    response.error_code = err(epoch_error);
    co_return response;
  }
  const metadata::BrokerRegistration& broker = *latest_.cluster().broker(request.broker_id);
  Session& session = sessions_[request.broker_id];
  session.last_contact = ctx_->clock().now();
  // The broker has replayed its own registration.
  response.is_caught_up = request.current_metadata_offset >= broker.epoch;
  Records records;
  bool fenced = broker.fenced;
  bool shut_down = false;
  if (broker.fenced) {
    if (request.want_shut_down) {
      shut_down = true;
    } else if (!request.want_fence && response.is_caught_up) {
      unfence_records(request.broker_id, records);
      fenced = false;
    }
  } else if (broker.in_controlled_shutdown || request.want_shut_down) {
    if (broker.in_controlled_shutdown && session.controlled_shutdown_offset < 0) {
      // It entered controlled shutdown under an earlier controller: it may
      // go once it has replayed everything written so far.
      session.controlled_shutdown_offset = raft_->log_end_offset() - 1;
    }
    if (!broker.in_controlled_shutdown || leads_any(request.broker_id)) {
      step_down_records(request.broker_id, StepDown::kControlledShutdown, records);
    }
    const bool settled = session.controlled_shutdown_offset >= 0 &&
                         committed_end_ > session.controlled_shutdown_offset &&
                         request.current_metadata_offset >= session.controlled_shutdown_offset;
    if (broker.in_controlled_shutdown && records.empty() && settled) {
      // Nothing left to move: the broker may go, and is fenced.
      step_down_records(request.broker_id, StepDown::kFence, records);
      fenced = true;
      shut_down = true;
    }
  } else if (request.want_fence) {
    step_down_records(request.broker_id, StepDown::kFence, records);
    fenced = true;
  }
  response.is_fenced = fenced;
  response.should_shut_down = shut_down;
  if (records.empty()) co_return response;
  const bool entering_shutdown = !fenced && !shut_down && request.want_shut_down;
  absl::Status committed = co_await write(
      std::move(records), std::move(lock), std::nullopt, [&](const raft::AppendedBatch& appended) {
        if (entering_shutdown) sessions_[request.broker_id].controlled_shutdown_offset = appended.last_offset;
      });
  if (!committed.ok()) {
    response = net::BrokerHeartbeatResponse();
    response.error_code = err(net::Error::kNotController);
  }
  co_return response;
}

io::Task<net::UnregisterBrokerResponse> QuorumController::unregister_broker(
    net::UnregisterBrokerRequest request) {
  net::UnregisterBrokerResponse response;
  response.error_message = std::nullopt;
  auto lock = co_await queue_.lock();
  if (!check_active()) {
    response.error_code = err(net::Error::kNotController);
    co_return response;
  }
  const metadata::BrokerRegistration* broker = latest_.cluster().broker(request.broker_id);
  if (broker == nullptr) {
    response.error_code = err(net::Error::kBrokerIdNotRegistered);
    response.error_message = fmt::format("Broker ID {} is not currently registered", request.broker_id);
    co_return response;
  }
  Records records;
  step_down_records(request.broker_id, StepDown::kFence, records);
  net::UnregisterBrokerRecord unregister;
  unregister.broker_id = request.broker_id;
  unregister.broker_epoch = broker->epoch;
  records.emplace_back(unregister);
  sessions_.erase(request.broker_id);
  if (!(co_await write(std::move(records), std::move(lock))).ok()) {
    response.error_code = err(net::Error::kNotController);
  }
  co_return response;
}

// --- topics -------------------------------------------------------------------

io::Task<net::CreateTopicsResponse> QuorumController::create_topics(net::CreateTopicsRequest request,
                                                                    int16_t version) {
  net::CreateTopicsResponse response;
  std::set<std::string> seen;
  std::set<std::string> duplicates;
  for (const auto& t : request.topics) {
    if (!seen.insert(t.name).second) duplicates.insert(t.name);
  }
  auto lock = co_await queue_.lock();
  const bool active_now = check_active();
  Records records;
  std::set<std::string, std::less<>> creating;  // names created earlier in this request
  std::vector<placement::UsableBroker> brokers;
  for (const auto& [id, b] : latest_.cluster().brokers) {
    brokers.push_back(placement::UsableBroker{
        .id = id, .rack = b.rack, .fenced = b.fenced || b.in_controlled_shutdown});
  }
  std::vector<size_t> written;  // results that need the commit
  for (const auto& t : request.topics) {
    net::CreateTopicsResponse::CreatableTopicResult result;
    result.name = t.name;
    result.error_message = std::nullopt;
    result.configs = std::nullopt;
    result.num_partitions = -1;
    result.replication_factor = -1;
    auto fail = [&](net::Error e, std::string message) {
      result.error_code = err(e);
      result.error_message = std::move(message);
    };
    if (!active_now) {
      fail(net::Error::kNotController, std::string(kNotControllerMessage));
    } else if (duplicates.contains(t.name)) {
      fail(net::Error::kInvalidRequest, "Duplicate topic name.");
    } else if (absl::Status valid = validate_topic_name(t.name); !valid.ok()) {
      fail(net::Error::kInvalidTopicException, std::string(valid.message()));
    } else if (latest_.topics().topic(t.name) != nullptr || creating.contains(t.name)) {
      fail(net::Error::kTopicAlreadyExists, fmt::format("Topic '{}' already exists.", t.name));
    } else if (std::optional<std::string> collision = colliding_topic(t.name, latest_.topics(), creating)) {
      fail(net::Error::kInvalidTopicException,
           fmt::format("Topic '{}' collides with existing topic: {}", t.name, *collision));
    } else {
      // Replicas: the request's assignment, or placed here.
      std::vector<std::vector<int32_t>> assignment;
      net::Error problem = net::Error::kNone;
      std::string message;
      if (!t.assignments.empty()) {
        if (t.num_partitions != -1 || t.replication_factor != -1) {
          problem = net::Error::kInvalidRequest;
          message = "A manual partition assignment was specified, but numPartitions or "
                    "replicationFactor was not set to -1.";
        }
        for (size_t i = 0; problem == net::Error::kNone && i < t.assignments.size(); ++i) {
          const auto& a = t.assignments[i];
          if (a.partition_index != static_cast<int32_t>(i)) {
            problem = net::Error::kInvalidReplicaAssignment;
            message = fmt::format("Partitions should be numbered 0 to {}, in order; found {}.",
                                  t.assignments.size() - 1, a.partition_index);
          } else if (a.broker_ids.empty()) {
            problem = net::Error::kInvalidReplicaAssignment;
            message = fmt::format("Partition {} has no replicas.", i);
          } else if (a.broker_ids.size() != t.assignments[0].broker_ids.size()) {
            problem = net::Error::kInvalidReplicaAssignment;
            message = "All partitions should have the same number of replicas.";
          } else {
            std::set<int32_t> ids(a.broker_ids.begin(), a.broker_ids.end());
            if (ids.size() != a.broker_ids.size()) {
              problem = net::Error::kInvalidReplicaAssignment;
              message = fmt::format("Partition {} lists a broker more than once.", i);
            }
            for (int32_t id : a.broker_ids) {
              if (problem == net::Error::kNone && latest_.cluster().broker(id) == nullptr) {
                problem = net::Error::kInvalidReplicaAssignment;
                message = fmt::format("The manual partition assignment includes broker {}, but no "
                                      "broker with that id is registered.", id);
              }
            }
          }
          assignment.push_back(a.broker_ids);
        }
      } else {
        const int32_t partitions = t.num_partitions == -1 ? config_.num_partitions : t.num_partitions;
        const int16_t rf =
            t.replication_factor == -1 ? config_.default_replication_factor : t.replication_factor;
        if (partitions <= 0) {
          problem = net::Error::kInvalidPartitions;
          message = "Number of partitions was set to an invalid non-positive value.";
        } else if (rf <= 0) {
          problem = net::Error::kInvalidReplicationFactor;
          message = "Replication factor must be larger than 0, or -1 to use the default value.";
        } else {
          placement::PlacementResult placed = placement::place(
              placement::PlacementSpec{.start_partition = 0, .num_partitions = partitions,
                                       .replication_factor = rf},
              brokers, ctx_->random());
          if (auto* error = std::get_if<placement::PlacementError>(&placed)) {
            problem = error->error;
            message = placement_message(*error, rf);
          } else {
            assignment = std::move(std::get<placement::Assignment>(placed));
          }
        }
      }
      // Configs.
      metadata::ConfigMap topic_configs;
      if (problem == net::Error::kNone) {
        for (const auto& c : t.configs) {
          if (topic_configs.contains(c.name)) {
            problem = net::Error::kInvalidConfig;
            message = fmt::format("Duplicate config {}.", c.name);
            break;
          }
          absl::Status valid = configs::validate(metadata::kConfigResourceTopic, c.name, c.value);
          if (!valid.ok()) {
            problem = configs::error_code(metadata::kConfigResourceTopic, valid);
            message = std::string(valid.message());
            break;
          }
          if (c.value.has_value()) topic_configs.emplace(c.name, *c.value);
        }
        if (problem == net::Error::kNone) {
          absl::Status valid = configs::validate_configs(
              metadata::ConfigResource{metadata::kConfigResourceTopic, t.name}, topic_configs, broker_layers());
          if (!valid.ok()) {
            problem = configs::error_code(metadata::kConfigResourceTopic, valid);
            message = std::string(valid.message());
          }
        }
      }
      if (problem != net::Error::kNone) {
        fail(problem, std::move(message));
      } else {
        // The initial ISR: the replicas that are unfenced.
        std::vector<Records::value_type> topic_records;
        net::TopicRecord topic;
        topic.name = t.name;
        topic.topic_id = new_topic_id();
        topic_records.emplace_back(topic);
        for (size_t i = 0; i < assignment.size() && problem == net::Error::kNone; ++i) {
          net::PartitionRecord p;
          p.partition_id = static_cast<int32_t>(i);
          p.topic_id = topic.topic_id;
          p.replicas = assignment[i];
          for (int32_t r : assignment[i]) {
            if (eligible(r)) p.isr.push_back(r);
          }
          if (p.isr.empty()) {
            problem = net::Error::kInvalidReplicationFactor;
            message = fmt::format("Unable to replicate the partition {} time(s): All brokers are "
                                  "currently fenced.", assignment[i].size());
            break;
          }
          p.leader = p.isr.front();
          p.leader_epoch = 0;
          p.partition_epoch = 0;
          p.directories.assign(p.replicas.size(), metadata::kDirectoryUnassigned);
          topic_records.emplace_back(std::move(p));
        }
        for (const auto& [name, value] : topic_configs) {
          net::ConfigRecord c;
          c.resource_type = metadata::kConfigResourceTopic;
          c.resource_name = t.name;
          c.name = name;
          c.value = value;
          topic_records.emplace_back(std::move(c));
        }
        if (problem != net::Error::kNone) {
          fail(problem, std::move(message));
        } else {
          result.topic_id = topic.topic_id;
          result.num_partitions = static_cast<int32_t>(assignment.size());
          result.replication_factor = static_cast<int16_t>(assignment.front().size());
          if (version >= 5) {
            std::vector<net::CreateTopicsResponse::CreatableTopicConfigs> shown;
            absl::StatusOr<std::vector<configs::DescribedConfig>> described = configs::describe(
                metadata::ConfigResource{metadata::kConfigResourceTopic, t.name}, &topic_configs,
                broker_layers(), configs::DescribeOptions{});
            BROOK_ASSERT_MSG(described.ok(), "controller: {}", described.status().ToString());
            for (const configs::DescribedConfig& d : *described) {
              net::CreateTopicsResponse::CreatableTopicConfigs c;
              c.name = d.name;
              c.value = d.value;
              c.read_only = d.read_only;
              c.config_source = static_cast<int8_t>(d.source);
              c.is_sensitive = d.is_sensitive;
              shown.push_back(std::move(c));
            }
            result.configs = std::move(shown);
          }
          creating.insert(t.name);
          records.insert(records.end(), topic_records.begin(), topic_records.end());
          written.push_back(response.topics.size());
        }
      }
    }
    response.topics.push_back(std::move(result));
  }
  if (records.empty() || request.validate_only) co_return response;
  if (!(co_await write(std::move(records), std::move(lock))).ok()) {
    for (size_t i : written) {
      auto& result = response.topics[i];
      result = net::CreateTopicsResponse::CreatableTopicResult{};
      result.name = request.topics[i].name;
      result.configs = std::nullopt;
      result.num_partitions = -1;
      result.replication_factor = -1;
      refuse(result);
    }
  }
  co_return response;
}

io::Task<net::DeleteTopicsResponse> QuorumController::delete_topics(net::DeleteTopicsRequest request,
                                                                    int16_t version) {
  net::DeleteTopicsResponse response;
  // Before v6 topics come by name only.
  std::vector<net::DeleteTopicsRequest::DeleteTopicState> wanted = request.topics;
  if (version < 6) {
    wanted.clear();
    for (const std::string& name : request.topic_names) {
      net::DeleteTopicsRequest::DeleteTopicState s;
      s.name = name;
      wanted.push_back(std::move(s));
    }
  }
  auto lock = co_await queue_.lock();
  const bool active_now = check_active();
  Records records;
  std::set<net::Uuid, metadata::UuidLess> removing;
  std::vector<size_t> written;
  for (const auto& w : wanted) {
    net::DeleteTopicsResponse::DeletableTopicResult result;
    result.name = w.name;
    result.topic_id = w.topic_id;
    result.error_message = std::nullopt;
    const bool by_name = w.name.has_value();
    const bool by_id = w.topic_id != net::Uuid{};
    const metadata::TopicImage* topic = nullptr;
    if (!active_now) {
      result.error_code = err(net::Error::kNotController);
    } else if (by_name == by_id) {
      result.error_code = err(net::Error::kInvalidRequest);
      result.error_message = "A topic must be named by exactly one of its name and id.";
    } else if (!config_.delete_topic_enable) {
      result.error_code = err(net::Error::kTopicDeletionDisabled);
    } else {
      topic = by_name ? latest_.topics().topic(*w.name) : latest_.topics().topic(w.topic_id);
      if (topic == nullptr) {
        result.error_code = err(by_name ? net::Error::kUnknownTopicOrPartition : net::Error::kUnknownTopicId);
      } else {
        result.name = topic->name;
        result.topic_id = topic->id;
        if (removing.insert(topic->id).second) {
          net::RemoveTopicRecord remove;
          remove.topic_id = topic->id;
          records.emplace_back(remove);
        }
        written.push_back(response.responses.size());
      }
    }
    if (version < 6 && result.error_code != 0) result.topic_id = net::Uuid{};
    response.responses.push_back(std::move(result));
  }
  if (records.empty()) co_return response;
  if (!(co_await write(std::move(records), std::move(lock))).ok()) {
    for (size_t i : written) refuse(response.responses[i]);
  }
  co_return response;
}

io::Task<net::ElectLeadersResponse> QuorumController::elect_leaders(net::ElectLeadersRequest request,
                                                                   int16_t version) {
  constexpr int8_t kPreferredElection = 0;
  constexpr int8_t kUncleanElection = 1;
  net::ElectLeadersResponse response;
  const int8_t type = version == 0 ? kPreferredElection : request.election_type;
  auto lock = co_await queue_.lock();
  const bool active_now = check_active();
  if (type != kPreferredElection && type != kUncleanElection) {
    // (Kafka refuses the whole request; the top-level code is v1+.)
    response.error_code = err(net::Error::kInvalidRequest);
    co_return response;
  }
  Records records;
  auto is_eligible = [&](int32_t id) { return eligible(id); };
  // One partition's election: the error to answer, records appended.
  auto elect = [&](const std::string& topic_name, int32_t partition_id) -> std::pair<net::Error, std::string> {
    const metadata::TopicImage* topic = latest_.topics().topic(topic_name);
    if (topic == nullptr) return {net::Error::kUnknownTopicOrPartition, fmt::format("No such topic as {}", topic_name)};
    auto it = topic->partitions.find(partition_id);
    if (it == topic->partitions.end()) {
      return {net::Error::kUnknownTopicOrPartition, fmt::format("No such partition as {}-{}", topic_name, partition_id)};
    }
    const metadata::PartitionRegistration& p = it->second;
    PartitionChangeRequest change;
    change.topic_id = topic->id;
    change.partition_id = partition_id;
    if (type == kPreferredElection) {
      if (!p.replicas.empty() && p.leader == p.replicas.front()) return {net::Error::kElectionNotNeeded, ""};
      // Only the preferred replica: a valid leader is not traded for
      // another replica that is not preferred either.
      if (!preferred_can_lead(p) && p.leader != metadata::kNoLeader) {
        return {net::Error::kPreferredLeaderNotAvailable, ""};
      }
      change.election = Election::kPreferred;
      change.unclean_allowed = unclean_allowed(topic_name);
    } else {
      if (p.leader != metadata::kNoLeader) return {net::Error::kElectionNotNeeded, ""};
      change.unclean_allowed = true;
    }
    std::optional<net::PartitionChangeRecord> record = build_partition_change(p, change, is_eligible);
    if (!record.has_value() || leader_after(p, *record) == metadata::kNoLeader) {
      return {type == kPreferredElection ? net::Error::kPreferredLeaderNotAvailable
                                         : net::Error::kEligibleLeadersNotAvailable,
              ""};
    }
    records.emplace_back(std::move(*record));
    return {net::Error::kNone, ""};
  };
  auto add = [](net::ElectLeadersResponse::ReplicaElectionResult& out, int32_t partition_id,
                std::pair<net::Error, std::string> result) {
    auto& r = out.partition_result.emplace_back();
    r.partition_id = partition_id;
    r.error_code = err(result.first);
    r.error_message = result.second.empty() ? std::nullopt : std::optional<std::string>(result.second);
  };
  if (!request.topic_partitions.has_value()) {
    for (const auto& [name, id] : latest_.topics().by_name) {
      auto& out = response.replica_election_results.emplace_back();
      out.topic = name;
      const metadata::TopicImage* topic = latest_.topics().topic(id);
      if (topic == nullptr || !active_now) continue;
      for (const auto& [partition_id, p] : topic->partitions) {
        std::pair<net::Error, std::string> result = elect(name, partition_id);
        if (result.first != net::Error::kElectionNotNeeded) add(out, partition_id, std::move(result));
      }
    }
  } else {
    for (const auto& t : *request.topic_partitions) {
      auto& out = response.replica_election_results.emplace_back();
      out.topic = t.topic;
      for (int32_t partition_id : t.partitions) {
        if (!active_now) {
          add(out, partition_id, {net::Error::kNotController, std::string(kNotControllerMessage)});
          continue;
        }
        add(out, partition_id, elect(t.topic, partition_id));
      }
    }
  }
  if (!active_now && !request.topic_partitions.has_value()) response.error_code = err(net::Error::kNotController);
  if (records.empty()) co_return response;
  if (!(co_await write(std::move(records), std::move(lock))).ok()) {
    refuse_done(response.replica_election_results, &net::ElectLeadersResponse::ReplicaElectionResult::partition_result);
  }
  co_return response;
}

io::Task<net::CreatePartitionsResponse> QuorumController::create_partitions(
    net::CreatePartitionsRequest request) {
  net::CreatePartitionsResponse response;
  std::set<std::string> seen;
  std::set<std::string> duplicates;
  for (const auto& t : request.topics) {
    if (!seen.insert(t.name).second) duplicates.insert(t.name);
  }
  auto lock = co_await queue_.lock();
  const bool active_now = check_active();
  Records records;
  std::vector<size_t> written;
  std::vector<placement::UsableBroker> brokers;
  for (const auto& [id, b] : latest_.cluster().brokers) {
    brokers.push_back(placement::UsableBroker{
        .id = id, .rack = b.rack, .fenced = b.fenced || b.in_controlled_shutdown});
  }
  for (const auto& t : request.topics) {
    net::CreatePartitionsResponse::CreatePartitionsTopicResult result;
    result.name = t.name;
    auto fail = [&](net::Error e, std::string message) {
      result.error_code = err(e);
      result.error_message = std::move(message);
    };
    const metadata::TopicImage* topic = active_now ? latest_.topics().topic(t.name) : nullptr;
    const int32_t current = topic == nullptr ? 0 : static_cast<int32_t>(topic->partitions.size());
    if (!active_now) {
      fail(net::Error::kNotController, std::string(kNotControllerMessage));
    } else if (duplicates.contains(t.name)) {
      fail(net::Error::kInvalidRequest, "Duplicate topic name.");
    } else if (topic == nullptr) {
      fail(net::Error::kUnknownTopicOrPartition, "This server does not host this topic-partition.");
    } else if (t.count < current) {
      fail(net::Error::kInvalidPartitions,
           fmt::format("The topic {} currently has {} partition(s); {} would not be an increase.",
                       t.name, current, t.count));
    } else if (t.count == current) {
      fail(net::Error::kInvalidPartitions, fmt::format("Topic already has {} partition(s).", current));
    } else {
      const int32_t adding = t.count - current;
      // (The replication factor a reassignment of the first partition is
      // going to, not counting the replicas it removes.)
      const auto& first = topic->partitions.begin()->second;
      const int16_t rf = static_cast<int16_t>(first.replicas.size() - first.removing_replicas.size());
      std::vector<std::vector<int32_t>> assignment;
      net::Error problem = net::Error::kNone;
      std::string message;
      if (t.assignments.has_value()) {
        if (static_cast<int32_t>(t.assignments->size()) != adding) {
          problem = net::Error::kInvalidReplicaAssignment;
          message = fmt::format("Attempted to add {} additional partition(s), but only {} assignment(s) "
                                "were specified.", adding, t.assignments->size());
        }
        for (const auto& a : *t.assignments) {
          if (problem != net::Error::kNone) break;
          std::set<int32_t> ids(a.broker_ids.begin(), a.broker_ids.end());
          if (a.broker_ids.empty() || ids.size() != a.broker_ids.size()) {
            problem = net::Error::kInvalidReplicaAssignment;
            message = "An assignment must list distinct brokers.";
          } else if (static_cast<int16_t>(a.broker_ids.size()) != rf) {
            problem = net::Error::kInvalidReplicaAssignment;
            message = fmt::format("The manual partition assignment includes a partition with {} "
                                  "replica(s), but this is not consistent with previous partitions, "
                                  "which have {} replica(s).", a.broker_ids.size(), rf);
          }
          for (int32_t id : a.broker_ids) {
            if (problem == net::Error::kNone && latest_.cluster().broker(id) == nullptr) {
              problem = net::Error::kInvalidReplicaAssignment;
              message = fmt::format("The manual partition assignment includes broker {}, but no broker "
                                    "with that id is registered.", id);
            }
          }
          assignment.push_back(a.broker_ids);
        }
      } else {
        placement::PlacementResult placed = placement::place(
            placement::PlacementSpec{.start_partition = current, .num_partitions = adding,
                                     .replication_factor = rf},
            brokers, ctx_->random());
        if (auto* error = std::get_if<placement::PlacementError>(&placed)) {
          problem = error->error;
          message = placement_message(*error, rf);
        } else {
          assignment = std::move(std::get<placement::Assignment>(placed));
        }
      }
      Records topic_records;
      for (size_t i = 0; problem == net::Error::kNone && i < assignment.size(); ++i) {
        net::PartitionRecord p;
        p.partition_id = current + static_cast<int32_t>(i);
        p.topic_id = topic->id;
        p.replicas = assignment[i];
        for (int32_t r : assignment[i]) {
          if (eligible(r)) p.isr.push_back(r);
        }
        if (p.isr.empty()) {
          problem = net::Error::kInvalidReplicaAssignment;
          message = fmt::format("All brokers specified in the partition assignment for partition {} "
                                "are fenced or in controlled shutdown.", p.partition_id);
          break;
        }
        p.leader = p.isr.front();
        p.leader_epoch = 0;
        p.partition_epoch = 0;
        p.directories.assign(p.replicas.size(), metadata::kDirectoryUnassigned);
        topic_records.emplace_back(std::move(p));
      }
      if (problem != net::Error::kNone) {
        fail(problem, std::move(message));
      } else if (!request.validate_only) {
        records.insert(records.end(), topic_records.begin(), topic_records.end());
        written.push_back(response.results.size());
      }
    }
    response.results.push_back(std::move(result));
  }
  if (records.empty()) co_return response;
  if (!(co_await write(std::move(records), std::move(lock))).ok()) {
    for (size_t i : written) refuse(response.results[i]);
  }
  co_return response;
}

io::Task<net::AlterPartitionResponse> QuorumController::alter_partition(net::AlterPartitionRequest request,
                                                                        int16_t version) {
  net::AlterPartitionResponse response;
  auto lock = co_await queue_.lock();
  if (!check_active()) {
    response.error_code = err(net::Error::kNotController);
    co_return response;
  }
  const net::Error epoch_error = check_broker_epoch(request.broker_id, request.broker_epoch);
  if (epoch_error != net::Error::kNone) {
    response.error_code = err(epoch_error);
    co_return response;
  }
  Records records;
  metadata::MetadataDelta pending(latest_);
  // (topic index, partition index) of the answers that need the commit.
  std::vector<std::pair<size_t, size_t>> written;
  for (const auto& t : request.topics) {
    net::AlterPartitionResponse::TopicData out_topic;
    out_topic.topic_name = t.topic_name;
    out_topic.topic_id = t.topic_id;
    const metadata::TopicImage* topic =
        version >= 2 ? latest_.topics().topic(t.topic_id) : latest_.topics().topic(t.topic_name);
    for (const auto& p : t.partitions) {
      net::AlterPartitionResponse::PartitionData out;
      out.partition_index = p.partition_index;
      const metadata::PartitionRegistration* partition =
          topic == nullptr ? nullptr : pending.topic(topic->id)->partition(p.partition_index);
      std::vector<int32_t> new_isr;
      std::vector<std::pair<int32_t, int64_t>> with_epochs;
      if (version >= 3) {
        for (const auto& b : p.new_isr_with_epochs) {
          new_isr.push_back(b.broker_id);
          with_epochs.emplace_back(b.broker_id, b.broker_epoch);
        }
      } else {
        new_isr = p.new_isr;
        for (int32_t b : new_isr) with_epochs.emplace_back(b, -1);
      }
      const int8_t recovery = version >= 1 ? p.leader_recovery_state : 0;
      net::Error e = net::Error::kNone;
      if (topic == nullptr) {
        e = version >= 2 ? net::Error::kUnknownTopicId : net::Error::kUnknownTopicOrPartition;
      } else if (partition == nullptr) {
        e = net::Error::kUnknownTopicOrPartition;
      } else if (p.leader_epoch > partition->leader_epoch || p.partition_epoch > partition->partition_epoch) {
        // The partition is newer where the broker looks: it should find the
        // controller that wrote that.
        e = net::Error::kNotController;
      } else if (request.broker_id != partition->leader) {
        e = net::Error::kInvalidRequest;
      } else if (p.leader_epoch < partition->leader_epoch) {
        e = net::Error::kFencedLeaderEpoch;
      } else if (p.partition_epoch != partition->partition_epoch) {
        e = net::Error::kInvalidUpdateVersion;
      } else {
        std::set<int32_t> distinct(new_isr.begin(), new_isr.end());
        bool subset = distinct.size() == new_isr.size();
        for (int32_t b : new_isr) subset = subset && contains(partition->replicas, b);
        if (!subset || !contains(new_isr, partition->leader) || (recovery != 0 && recovery != 1) ||
            (recovery == 1 && new_isr.size() > 1) ||
            (partition->leader_recovery_state == 0 && recovery == 1)) {
          e = net::Error::kInvalidRequest;
        } else {
          for (const auto& [b, b_epoch] : with_epochs) {
            const metadata::BrokerRegistration* reg = latest_.cluster().broker(b);
            if (b == partition->leader) continue;
            if (reg == nullptr || reg->fenced || reg->in_controlled_shutdown ||
                (b_epoch != -1 && reg->epoch != b_epoch)) {
              e = net::Error::kIneligibleReplica;
            }
          }
        }
      }
      if (e != net::Error::kNone) {
        out.error_code = err(e);
        out_topic.partitions.push_back(std::move(out));
        continue;
      }
      PartitionChangeRequest change_request;
      change_request.topic_id = topic->id;
      change_request.partition_id = p.partition_index;
      change_request.target_isr = new_isr;
      std::optional<net::PartitionChangeRecord> change =
          build_partition_change(*partition, change_request, [&](int32_t b) { return eligible(b); });
      if (recovery != partition->leader_recovery_state) {
        if (!change.has_value()) {
          change.emplace();
          change->topic_id = topic->id;
          change->partition_id = p.partition_index;
        }
        change->leader_recovery_state = recovery;
      }
      if (change.has_value()) {
        absl::Status applied = pending.apply(*change);
        BROOK_ASSERT_MSG(applied.ok(), "controller: {}", applied.ToString());
        records.emplace_back(std::move(*change));
        written.emplace_back(response.topics.size(), out_topic.partitions.size());
      }
      const metadata::PartitionRegistration& after = *pending.topic(topic->id)->partition(p.partition_index);
      out.leader_id = after.leader;
      out.leader_epoch = after.leader_epoch;
      out.isr = after.isr;
      out.partition_epoch = after.partition_epoch;
      out.leader_recovery_state = after.leader_recovery_state;
      out_topic.partitions.push_back(std::move(out));
    }
    response.topics.push_back(std::move(out_topic));
  }
  if (records.empty()) co_return response;
  if (!(co_await write(std::move(records), std::move(lock))).ok()) {
    for (const auto& [ti, pi] : written) {
      auto& out = response.topics[ti].partitions[pi];
      const int32_t index = out.partition_index;
      out = net::AlterPartitionResponse::PartitionData{};
      out.partition_index = index;
      out.error_code = err(net::Error::kNotController);
    }
  }
  co_return response;
}

// --- reassignment -------------------------------------------------------------

std::pair<net::Error, std::string> QuorumController::reassignment_change(
    const std::string& topic_name, int32_t partition_id, const std::optional<std::vector<int32_t>>& target,
    metadata::MetadataDelta& pending, Records& records) const {
  const metadata::TopicImage* topic = latest_.topics().topic(topic_name);
  if (topic == nullptr) {
    return {net::Error::kUnknownTopicOrPartition, fmt::format("Unable to find a topic named {}.", topic_name)};
  }
  const metadata::PartitionRegistration* p = pending.topic(topic->id)->partition(partition_id);
  if (p == nullptr) {
    return {net::Error::kUnknownTopicOrPartition,
            fmt::format("Unable to find partition {}:{}.", topic_name, partition_id)};
  }
  PartitionChangeRequest c;
  c.topic_id = topic->id;
  c.partition_id = partition_id;
  c.unclean_allowed = unclean_allowed(topic_name);
  if (!target.has_value()) {
    if (p->adding_replicas.empty() && p->removing_replicas.empty()) {
      return {net::Error::kNoReassignmentInProgress, "No partition reassignment is in progress."};
    }
    // Back to the replicas before it: the adding ones leave.
    std::vector<int32_t> replicas;
    std::vector<int32_t> isr;
    for (int32_t r : p->replicas) {
      if (!contains(p->adding_replicas, r)) replicas.push_back(r);
    }
    for (int32_t r : p->isr) {
      if (!contains(p->adding_replicas, r)) isr.push_back(r);
    }
    if (isr.empty() && !c.unclean_allowed) {
      return {net::Error::kInvalidReplicaAssignment,
              fmt::format("Unable to revert partition assignment for {}:{} because it would require an "
                          "unclean leader election.", topic_name, partition_id)};
    }
    c.target_replicas = std::move(replicas);
    c.target_isr = std::move(isr);
    c.target_adding = std::vector<int32_t>{};
    c.target_removing = std::vector<int32_t>{};
  } else {
    if (target->empty()) {
      return {net::Error::kInvalidReplicaAssignment,
              "The manual partition assignment includes an empty replica list."};
    }
    std::vector<int32_t> sorted = *target;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (latest_.cluster().broker(sorted[i]) == nullptr) {
        return {net::Error::kInvalidReplicaAssignment,
                fmt::format("The manual partition assignment includes broker {}, but no such broker is "
                            "registered.", sorted[i])};
      }
      if (i > 0 && sorted[i] == sorted[i - 1]) {
        return {net::Error::kInvalidReplicaAssignment,
                fmt::format("The manual partition assignment includes the broker {} more than once.",
                            sorted[i])};
      }
    }
    // The target, then the current replicas it drops, until they go.
    std::vector<int32_t> removing;
    std::vector<int32_t> adding;
    for (int32_t r : p->replicas) {
      if (!contains(*target, r)) removing.push_back(r);
    }
    for (int32_t r : *target) {
      if (!contains(p->replicas, r)) adding.push_back(r);
    }
    std::vector<int32_t> replicas = *target;
    replicas.insert(replicas.end(), removing.begin(), removing.end());
    c.target_replicas = std::move(replicas);
    c.target_adding = std::move(adding);
    c.target_removing = std::move(removing);
  }
  std::optional<net::PartitionChangeRecord> record =
      build_partition_change(*p, c, [&](int32_t id) { return eligible(id); });
  if (record.has_value()) {
    absl::Status applied = pending.apply(*record);
    BROOK_ASSERT_MSG(applied.ok(), "controller: {}", applied.ToString());
    records.emplace_back(std::move(*record));
  }
  return {net::Error::kNone, ""};
}

io::Task<net::AlterPartitionReassignmentsResponse> QuorumController::alter_partition_reassignments(
    net::AlterPartitionReassignmentsRequest request) {
  net::AlterPartitionReassignmentsResponse response;
  response.error_message = std::nullopt;
  auto lock = co_await queue_.lock();
  if (!check_active()) {
    refuse(response);
    co_return response;
  }
  Records records;
  // A partition listed twice sees the first change.
  metadata::MetadataDelta pending(latest_);
  for (const auto& t : request.topics) {
    auto& out_topic = response.responses.emplace_back();
    out_topic.name = t.name;
    for (const auto& p : t.partitions) {
      auto& out = out_topic.partitions.emplace_back();
      out.partition_index = p.partition_index;
      auto [error, message] = reassignment_change(t.name, p.partition_index, p.replicas, pending, records);
      out.error_code = err(error);
      out.error_message = std::nullopt;
      if (error != net::Error::kNone) {
        out.error_message = std::move(message);
        ctx_->log().info("controller: reassignment of {}-{} refused: {}", t.name, p.partition_index,
                         out.error_message.value_or(""));
      }
    }
  }
  if (records.empty()) co_return response;
  if (!(co_await write(std::move(records), std::move(lock))).ok()) {
    refuse_done(response.responses, &net::AlterPartitionReassignmentsResponse::ReassignableTopicResponse::partitions);
  }
  co_return response;
}

io::Task<net::ListPartitionReassignmentsResponse> QuorumController::list_partition_reassignments(
    net::ListPartitionReassignmentsRequest request) {
  net::ListPartitionReassignmentsResponse response;
  response.error_message = std::nullopt;
  auto lock = co_await queue_.lock();
  if (!check_active()) {
    refuse(response);
    co_return response;
  }
  auto list = [&](const metadata::TopicImage& topic, const std::vector<int32_t>* indexes) {
    net::ListPartitionReassignmentsResponse::OngoingTopicReassignment out;
    out.name = topic.name;
    auto add = [&](int32_t index, const metadata::PartitionRegistration& p) {
      if (p.adding_replicas.empty() && p.removing_replicas.empty()) return;
      auto& o = out.partitions.emplace_back();
      o.partition_index = index;
      o.replicas = p.replicas;
      o.adding_replicas = p.adding_replicas;
      o.removing_replicas = p.removing_replicas;
    };
    if (indexes == nullptr) {
      for (const auto& [index, p] : topic.partitions) add(index, p);
    } else {
      for (int32_t index : *indexes) {
        if (const metadata::PartitionRegistration* p = topic.partition(index)) add(index, *p);
      }
    }
    if (!out.partitions.empty()) response.topics.push_back(std::move(out));
  };
  if (!request.topics.has_value()) {
    for (const auto& [name, id] : latest_.topics().by_name) list(*latest_.topics().topic(id), nullptr);
  } else {
    for (const auto& t : *request.topics) {
      if (const metadata::TopicImage* topic = latest_.topics().topic(t.name)) list(*topic, &t.partition_indexes);
    }
  }
  co_return response;
}

// --- producer ids -------------------------------------------------------------

io::Task<net::AllocateProducerIdsResponse> QuorumController::allocate_producer_ids(
    net::AllocateProducerIdsRequest request) {
  net::AllocateProducerIdsResponse response;
  auto lock = co_await queue_.lock();
  if (!check_active()) {
    response.error_code = err(net::Error::kNotController);
    co_return response;
  }
  const net::Error epoch_error = check_broker_epoch(request.broker_id, request.broker_epoch);
  if (epoch_error != net::Error::kNone) {
    response.error_code = err(epoch_error);
    co_return response;
  }
  const int64_t start = std::max<int64_t>(latest_.producer_ids().next_producer_id, 0);
  if (start > std::numeric_limits<int64_t>::max() - kProducerIdBlockSize) {
    response.error_code = err(net::Error::kUnknownServerError);
    co_return response;
  }
  net::ProducerIdsRecord record;
  record.broker_id = request.broker_id;
  record.broker_epoch = request.broker_epoch;
  record.next_producer_id = start + kProducerIdBlockSize;
  Records records;
  records.emplace_back(std::move(record));
  if (!(co_await write(std::move(records), std::move(lock))).ok()) {
    response.error_code = err(net::Error::kNotController);
    co_return response;
  }
  response.producer_id_start = start;
  response.producer_id_len = kProducerIdBlockSize;
  if (probe_ != nullptr) probe_->producer_ids_granted(request.broker_id, start, kProducerIdBlockSize);
  co_return response;
}

// --- configs ------------------------------------------------------------------

namespace {

// Checks a config resource named by a request; the error and message when
// it cannot be altered.
std::optional<std::pair<net::Error, std::string>> check_config_resource(
    const metadata::MetadataImage& image, int8_t type, const std::string& name) {
  switch (type) {
    case metadata::kConfigResourceTopic:
      if (image.topics().topic(name) == nullptr) {
        return std::make_pair(net::Error::kUnknownTopicOrPartition,
                              fmt::format("The topic '{}' does not exist.", name));
      }
      return std::nullopt;
    case metadata::kConfigResourceBroker: {
      if (name.empty()) return std::nullopt;  // the cluster-wide default
      int32_t id = 0;
      auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), id);
      if (ec != std::errc() || ptr != name.data() + name.size() || id < 0) {
        return std::make_pair(net::Error::kInvalidRequest, fmt::format("Illegal broker id: {}", name));
      }
      return std::nullopt;
    }
    default:
      return std::make_pair(net::Error::kInvalidRequest,
                            fmt::format("Unsupported resource type {} for configs.", type));
  }
}

std::vector<std::string> split_list(const std::string& value) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    if (comma == std::string::npos) comma = value.size();
    std::string item = value.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(std::move(item));
    start = comma + 1;
  }
  return out;
}

std::string join_list(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += ',';
    out += item;
  }
  return out;
}

}  // namespace

io::Task<net::IncrementalAlterConfigsResponse> QuorumController::incremental_alter_configs(
    net::IncrementalAlterConfigsRequest request) {
  net::IncrementalAlterConfigsResponse response;
  auto lock = co_await queue_.lock();
  const bool active_now = check_active();
  Records records;
  std::vector<size_t> written;
  for (const auto& resource : request.resources) {
    net::IncrementalAlterConfigsResponse::AlterConfigsResourceResponse out;
    out.resource_type = resource.resource_type;
    out.resource_name = resource.resource_name;
    out.error_message = std::nullopt;
    auto fail = [&](net::Error e, std::string message) {
      out.error_code = err(e);
      out.error_message = std::move(message);
    };
    const metadata::ConfigResource key{resource.resource_type, resource.resource_name};
    if (!active_now) {
      fail(net::Error::kNotController, std::string(kNotControllerMessage));
    } else if (auto bad = check_config_resource(latest_, resource.resource_type, resource.resource_name)) {
      fail(bad->first, bad->second);
    } else {
      const metadata::ConfigMap* current = latest_.configs().find(key);
      metadata::ConfigMap after = current == nullptr ? metadata::ConfigMap{} : *current;
      Records changes;
      std::set<std::string> names;
      for (const auto& c : resource.configs) {
        if (!names.insert(c.name).second) {
          fail(net::Error::kInvalidConfig, fmt::format("Duplicate alteration of config {}.", c.name));
          break;
        }
        std::optional<std::string> value;
        if (c.config_operation == kOpSet) {
          value = c.value;
        } else if (c.config_operation == kOpDelete) {
          value = std::nullopt;
        } else if (c.config_operation == kOpAppend || c.config_operation == kOpSubtract) {
          const configs::ConfigDef* def = resource.resource_type == metadata::kConfigResourceTopic
                                              ? configs::find_topic_config(c.name)
                                              : configs::find_broker_config(c.name);
          if (def == nullptr || def->type != configs::ConfigType::kList) {
            fail(net::Error::kInvalidConfig,
                 fmt::format("Config {} is not a list: it cannot be appended to or subtracted from.", c.name));
            break;
          }
          auto it = after.find(c.name);
          std::vector<std::string> items =
              split_list(it != after.end() ? it->second : std::string(def->default_value.value_or("")));
          const std::vector<std::string> operand = split_list(c.value.value_or(""));
          for (const std::string& item : operand) {
            auto found = std::find(items.begin(), items.end(), item);
            if (c.config_operation == kOpAppend && found == items.end()) items.push_back(item);
            if (c.config_operation == kOpSubtract && found != items.end()) items.erase(found);
          }
          value = join_list(items);
        } else {
          fail(net::Error::kInvalidRequest, fmt::format("Unknown config operation {}.", c.config_operation));
          break;
        }
        absl::Status valid = configs::validate(resource.resource_type, c.name, value);
        if (!valid.ok()) {
          fail(configs::error_code(resource.resource_type, valid), std::string(valid.message()));
          break;
        }
        if (value.has_value()) {
          after.insert_or_assign(c.name, *value);
        } else {
          after.erase(c.name);
        }
        net::ConfigRecord record;
        record.resource_type = resource.resource_type;
        record.resource_name = resource.resource_name;
        record.name = c.name;
        record.value = value;
        changes.emplace_back(std::move(record));
      }
      if (out.error_code == 0) {
        absl::Status valid = configs::validate_configs(key, after, broker_layers(), current);
        if (!valid.ok()) fail(configs::error_code(resource.resource_type, valid), std::string(valid.message()));
      }
      if (out.error_code == 0 && !request.validate_only) {
        records.insert(records.end(), changes.begin(), changes.end());
        if (!changes.empty()) written.push_back(response.responses.size());
      }
    }
    response.responses.push_back(std::move(out));
  }
  if (records.empty()) co_return response;
  if (!(co_await write(std::move(records), std::move(lock))).ok()) {
    for (size_t i : written) refuse(response.responses[i]);
  }
  co_return response;
}

io::Task<net::AlterConfigsResponse> QuorumController::alter_configs(net::AlterConfigsRequest request) {
  net::AlterConfigsResponse response;
  auto lock = co_await queue_.lock();
  const bool active_now = check_active();
  Records records;
  std::vector<size_t> written;
  for (const auto& resource : request.resources) {
    net::AlterConfigsResponse::AlterConfigsResourceResponse out;
    out.resource_type = resource.resource_type;
    out.resource_name = resource.resource_name;
    out.error_message = std::nullopt;
    auto fail = [&](net::Error e, std::string message) {
      out.error_code = err(e);
      out.error_message = std::move(message);
    };
    const metadata::ConfigResource key{resource.resource_type, resource.resource_name};
    if (!active_now) {
      fail(net::Error::kNotController, std::string(kNotControllerMessage));
    } else if (auto bad = check_config_resource(latest_, resource.resource_type, resource.resource_name)) {
      fail(bad->first, bad->second);
    } else {
      // The request's configs replace every config the resource has.
      Records changes;
      metadata::ConfigMap wanted;
      for (const auto& c : resource.configs) {
        if (wanted.contains(c.name)) {
          fail(net::Error::kInvalidRequest, fmt::format("Duplicate config {}.", c.name));
          break;
        }
        absl::Status valid = configs::validate(resource.resource_type, c.name, c.value);
        if (!valid.ok()) {
          fail(configs::error_code(resource.resource_type, valid), std::string(valid.message()));
          break;
        }
        if (c.value.has_value()) wanted.emplace(c.name, *c.value);
      }
      const metadata::ConfigMap* current = latest_.configs().find(key);
      if (out.error_code == 0) {
        absl::Status valid = configs::validate_configs(key, wanted, broker_layers(), current);
        if (!valid.ok()) fail(configs::error_code(resource.resource_type, valid), std::string(valid.message()));
      }
      if (out.error_code == 0) {
        if (current != nullptr) {
          for (const auto& [name, value] : *current) {
            if (wanted.contains(name)) continue;
            net::ConfigRecord record;
            record.resource_type = resource.resource_type;
            record.resource_name = resource.resource_name;
            record.name = name;
            record.value = std::nullopt;
            changes.emplace_back(std::move(record));
          }
        }
        for (const auto& [name, value] : wanted) {
          net::ConfigRecord record;
          record.resource_type = resource.resource_type;
          record.resource_name = resource.resource_name;
          record.name = name;
          record.value = value;
          changes.emplace_back(std::move(record));
        }
        if (!request.validate_only && !changes.empty()) {
          records.insert(records.end(), changes.begin(), changes.end());
          written.push_back(response.responses.size());
        }
      }
    }
    response.responses.push_back(std::move(out));
  }
  if (records.empty()) co_return response;
  if (!(co_await write(std::move(records), std::move(lock))).ok()) {
    for (size_t i : written) refuse(response.responses[i]);
  }
  co_return response;
}

// --- SCRAM credentials -------------------------------------------------------

io::Task<net::AlterUserScramCredentialsResponse> QuorumController::alter_user_scram_credentials(
    net::AlterUserScramCredentialsRequest request) {
  auto lock = co_await queue_.lock();
  if (!check_active()) {
    net::AlterUserScramCredentialsResponse response;
    std::set<std::string> users;
    for (const auto& d : request.deletions) users.insert(d.name);
    for (const auto& u : request.upsertions) users.insert(u.name);
    for (const std::string& user : users) {
      auto& result = response.results.emplace_back();
      result.user = user;
      refuse(result);
    }
    co_return response;
  }
  ScramChanges changes = alter_scram_credentials(latest_.scram(), request);
  if (changes.records.empty()) co_return std::move(changes.response);
  // All of a request's changes commit together, as Kafka's do.
  if (!(co_await write(std::move(changes.records), std::move(lock))).ok()) {
    for (size_t i : changes.written) refuse(changes.response.results[i]);
  }
  co_return std::move(changes.response);
}

// --- ACLs and client quotas --------------------------------------------------

io::Task<net::CreateAclsResponse> QuorumController::create_acls(net::CreateAclsRequest request) {
  net::CreateAclsResponse response;
  auto lock = co_await queue_.lock();
  const bool active_now = check_active();
  Records records;
  std::vector<size_t> written;
  std::vector<metadata::StandardAcl> adding;
  for (const auto& c : request.creations) {
    net::CreateAclsResponse::AclCreationResult result;
    result.error_message = std::nullopt;
    metadata::StandardAcl acl;
    acl.resource_type = c.resource_type;
    acl.resource_name = c.resource_name;
    acl.pattern_type = c.resource_pattern_type;
    acl.principal = c.principal;
    acl.host = c.host;
    acl.operation = c.operation;
    acl.permission_type = c.permission_type;
    if (!active_now) {
      refuse(result);
    } else if (std::optional<AclProblem> problem = check_new_acl(acl)) {
      result.error_code = err(problem->error);
      result.error_message = problem->message;
    } else {
      // An ACL that exists already is not written again (Kafka's too).
      bool exists = std::find(adding.begin(), adding.end(), acl) != adding.end();
      for (const auto& [id, existing] : latest_.acls().acls) {
        exists = exists || existing == acl;
      }
      if (!exists) {
        net::AccessControlEntryRecord record;
        do {
          for (uint8_t& b : record.id.bytes) b = static_cast<uint8_t>(ctx_->random().uniform(256));
        } while (record.id == net::Uuid{} || latest_.acls().acls.contains(record.id));
        record.resource_type = acl.resource_type;
        record.resource_name = acl.resource_name;
        record.pattern_type = acl.pattern_type;
        record.principal = acl.principal;
        record.host = acl.host;
        record.operation = acl.operation;
        record.permission_type = acl.permission_type;
        records.emplace_back(std::move(record));
        adding.push_back(acl);
        written.push_back(response.results.size());
      }
    }
    response.results.push_back(std::move(result));
  }
  if (records.empty()) co_return response;
  if (!(co_await write(std::move(records), std::move(lock))).ok()) {
    for (size_t i : written) refuse(response.results[i]);
  }
  co_return response;
}

io::Task<net::DeleteAclsResponse> QuorumController::delete_acls(net::DeleteAclsRequest request) {
  net::DeleteAclsResponse response;
  auto lock = co_await queue_.lock();
  const bool active_now = check_active();
  Records records;
  std::set<net::Uuid, metadata::UuidLess> removing;
  std::vector<size_t> written;
  for (const auto& f : request.filters) {
    net::DeleteAclsResponse::DeleteAclsFilterResult result;
    result.error_message = std::nullopt;
    const AclFilter filter = acl_filter_of(f);
    if (!active_now) {
      refuse(result);
    } else if (std::optional<AclProblem> problem = check_acl_filter(filter)) {
      result.error_code = err(problem->error);
      result.error_message = problem->message;
    } else {
      for (const auto& [id, acl] : latest_.acls().acls) {
        if (!acl_matches(filter, acl)) continue;
        net::DeleteAclsResponse::DeleteAclsMatchingAcl m;
        m.error_message = std::nullopt;
        m.resource_type = acl.resource_type;
        m.resource_name = acl.resource_name;
        m.pattern_type = acl.pattern_type;
        m.principal = acl.principal;
        m.host = acl.host;
        m.operation = acl.operation;
        m.permission_type = acl.permission_type;
        result.matching_acls.push_back(std::move(m));
        if (removing.insert(id).second) {
          net::RemoveAccessControlEntryRecord remove;
          remove.id = id;
          records.emplace_back(remove);
        }
      }
      if (!result.matching_acls.empty()) written.push_back(response.filter_results.size());
    }
    response.filter_results.push_back(std::move(result));
  }
  if (records.empty()) co_return response;
  if (!(co_await write(std::move(records), std::move(lock))).ok()) {
    for (size_t i : written) {
      refuse(response.filter_results[i]);
      response.filter_results[i].matching_acls.clear();
    }
  }
  co_return response;
}

io::Task<net::AlterClientQuotasResponse> QuorumController::alter_client_quotas(
    net::AlterClientQuotasRequest request) {
  net::AlterClientQuotasResponse response;
  auto lock = co_await queue_.lock();
  const bool active_now = check_active();
  Records records;
  std::vector<size_t> written;
  for (const auto& entry : request.entries) {
    net::AlterClientQuotasResponse::EntryData out;
    out.error_message = std::nullopt;
    QuotaEntityList list;
    for (const auto& e : entry.entity) {
      net::AlterClientQuotasResponse::EntityData d;
      d.entity_type = e.entity_type;
      d.entity_name = e.entity_name;
      out.entity.push_back(std::move(d));
      list.emplace_back(e.entity_type, e.entity_name);
    }
    std::variant<metadata::ClientQuotaEntity, std::string> checked = check_quota_entity(list);
    if (!active_now) {
      refuse(out);
    } else if (auto* problem = std::get_if<std::string>(&checked)) {
      out.error_code = err(net::Error::kInvalidRequest);
      out.error_message = *problem;
    } else {
      const metadata::ClientQuotaEntity& entity = std::get<metadata::ClientQuotaEntity>(checked);
      auto current = latest_.client_quotas().entities.find(entity);
      Records changes;
      std::set<std::string> keys;
      for (const auto& op : entry.ops) {
        std::optional<std::string> problem;
        if (!keys.insert(op.key).second) {
          problem = fmt::format("Duplicate quota key {}", op.key);
        } else if (!op.remove) {
          problem = check_quota_value(entity, op.key, op.value);
        } else if (!check_quota_value(entity, op.key, 0).has_value()) {
          problem = std::nullopt;
        } else {
          problem = fmt::format("Invalid configuration key {}", op.key);
        }
        if (problem.has_value()) {
          out.error_code = err(net::Error::kInvalidRequest);
          out.error_message = *problem;
          break;
        }
        const std::optional<double> now =
            current == latest_.client_quotas().entities.end() || !current->second.contains(op.key)
                ? std::nullopt
                : std::optional<double>(current->second.at(op.key));
        if (op.remove ? !now.has_value() : (now.has_value() && *now == op.value)) continue;
        net::ClientQuotaRecord record;
        for (const auto& [type, name] : entity) {
          net::ClientQuotaRecord::EntityData d;
          d.entity_type = type;
          d.entity_name = name;
          record.entity.push_back(std::move(d));
        }
        record.key = op.key;
        record.value = op.remove ? 0 : op.value;
        record.remove = op.remove;
        changes.emplace_back(std::move(record));
      }
      if (out.error_code == 0 && !request.validate_only && !changes.empty()) {
        records.insert(records.end(), changes.begin(), changes.end());
        written.push_back(response.entries.size());
      }
    }
    response.entries.push_back(std::move(out));
  }
  if (records.empty()) co_return response;
  if (!(co_await write(std::move(records), std::move(lock))).ok()) {
    for (size_t i : written) refuse(response.entries[i]);
  }
  co_return response;
}

// --- features and forwarding --------------------------------------------------

io::Task<net::UpdateFeaturesResponse> QuorumController::update_features(net::UpdateFeaturesRequest request,
                                                                        int16_t version) {
  // Downgrades of metadata.version are refused whatever the request's
  // upgrade type (v1) or allow_downgrade flag (v0) says, as in Kafka.
  (void)version;
  net::UpdateFeaturesResponse response;
  response.error_message = std::nullopt;
  auto lock = co_await queue_.lock();
  if (!check_active()) {
    refuse(response);
    co_return response;
  }
  Records records;
  std::vector<size_t> written;
  std::set<std::string> seen;
  for (const auto& u : request.feature_updates) {
    net::UpdateFeaturesResponse::UpdatableFeatureResult result;
    result.feature = u.feature;
    result.error_message = std::nullopt;
    auto fail = [&](net::Error e, std::string message) {
      result.error_code = err(e);
      result.error_message = std::move(message);
    };
    const int16_t current = latest_.features().metadata_version;
    if (!seen.insert(u.feature).second) {
      fail(net::Error::kInvalidRequest, fmt::format("Feature {} was specified more than once.", u.feature));
    } else if (u.feature != metadata::kMetadataVersionFeature) {
      fail(net::Error::kInvalidUpdateVersion,
           fmt::format("Invalid update version {} for feature {}. The controller does not support "
                       "the given feature.", u.max_version_level, u.feature));
    } else if (u.max_version_level == current) {
      // Nothing to change.
    } else if (u.max_version_level < current) {
      fail(net::Error::kInvalidUpdateVersion,
           fmt::format("Invalid metadata.version {}. Refusing to perform the requested downgrade "
                       "because it might delete metadata information.", u.max_version_level));
    } else if (u.max_version_level < kMetadataVersionMin || u.max_version_level > kMetadataVersionLatest) {
      fail(net::Error::kInvalidUpdateVersion,
           fmt::format("Invalid update version {} for feature metadata.version. Local controller {} only "
                       "supports versions {}-{}", u.max_version_level, config_.node_id, kMetadataVersionMin,
                       kMetadataVersionLatest));
    } else {
      // Every registered broker must support the new level.
      for (const auto& [id, broker] : latest_.cluster().brokers) {
        auto f = broker.supported_features.find(metadata::kMetadataVersionFeature);
        if (f == broker.supported_features.end() || u.max_version_level < f->second.min ||
            u.max_version_level > f->second.max) {
          fail(net::Error::kInvalidUpdateVersion,
               fmt::format("Invalid update version {} for feature metadata.version. Broker {} does not "
                           "support this feature.", u.max_version_level, id));
          break;
        }
      }
      if (result.error_code == 0 && !request.validate_only) {
        net::FeatureLevelRecord record;
        record.name = u.feature;
        record.feature_level = u.max_version_level;
        records.emplace_back(std::move(record));
        written.push_back(response.results.size());
      }
    }
    response.results.push_back(std::move(result));
  }
  if (records.empty()) co_return response;
  if (!(co_await write(std::move(records), std::move(lock))).ok()) {
    for (size_t i : written) refuse(response.results[i]);
  }
  co_return response;
}

namespace {

// The requests a broker may forward (Kafka's "forwardable" APIs that this
// controller serves).
bool forwardable(int16_t api_key) {
  switch (api_key) {
    case net::CreateTopicsRequest::kApiKey:
    case net::DeleteTopicsRequest::kApiKey:
    case net::CreatePartitionsRequest::kApiKey:
    case net::ElectLeadersRequest::kApiKey:
    case net::AlterPartitionReassignmentsRequest::kApiKey:
    case net::ListPartitionReassignmentsRequest::kApiKey:
    case net::AlterConfigsRequest::kApiKey:
    case net::IncrementalAlterConfigsRequest::kApiKey:
    case net::CreateAclsRequest::kApiKey:
    case net::DeleteAclsRequest::kApiKey:
    case net::AlterClientQuotasRequest::kApiKey:
    case net::AlterUserScramCredentialsRequest::kApiKey:
    case net::UpdateFeaturesRequest::kApiKey:
      return true;
    default:
      return false;
  }
}

}  // namespace

io::Task<net::EnvelopeResponse> QuorumController::envelope(net::EnvelopeRequest request) {
  net::EnvelopeResponse response;
  if (!request.request_principal.has_value()) {
    response.error_code = err(net::Error::kPrincipalDeserializationFailure);
    co_return response;
  }
  if (request.client_host_address.size() != 4 && request.client_host_address.size() != 16) {
    response.error_code = err(net::Error::kInvalidRequest);
    co_return response;
  }
  absl::StatusOr<net::ParsedRequest> parsed = net::parse_request(request.request_data);
  if (!parsed.ok() || parsed->problem != net::RequestProblem::kNone ||
      !forwardable(parsed->frame.header.request_api_key)) {
    response.error_code = err(net::Error::kInvalidRequest);
    co_return response;
  }
  absl::StatusOr<io::BufferChain> answered = co_await handle_request(std::move(parsed->frame));
  if (!answered.ok()) {
    response.error_code = err(net::Error::kInvalidRequest);
    co_return response;
  }
  // The inner response without its size prefix.
  response.response_data = answered->linearize().slice(4, answered->size() - 4);
  co_return response;
}

// --- dispatch -----------------------------------------------------------------

bool QuorumController::serves(int16_t api_key) {
  for (const ServedApi& api : served_apis()) {
    if (api.key == api_key) return true;
  }
  return false;
}

io::Task<absl::StatusOr<io::BufferChain>> QuorumController::handle_request(net::RequestFrame frame) {
  const int16_t version = frame.header.request_api_version;
  switch (frame.header.request_api_key) {
    case net::ApiVersionsRequest::kApiKey: {
      net::ApiVersionsResponse response;
      for (const ServedApi& api : served_apis()) {
        net::ApiVersionsResponse::ApiVersion v;
        v.api_key = api.key;
        v.min_version = api.min;
        v.max_version = api.max;
        response.api_keys.push_back(v);
      }
      // The Raft APIs share the listener.
      for (const ServedApi& api :
           {served<net::VoteRequest>(), served<net::BeginQuorumEpochRequest>(),
            served<net::EndQuorumEpochRequest>(), served<net::DescribeQuorumRequest>(),
            served<net::FetchRequest>(), served<net::FetchSnapshotRequest>()}) {
        net::ApiVersionsResponse::ApiVersion v;
        v.api_key = api.key;
        v.min_version = api.min;
        v.max_version = api.max;
        response.api_keys.push_back(v);
      }
      std::sort(response.api_keys.begin(), response.api_keys.end(),
                [](const auto& a, const auto& b) { return a.api_key < b.api_key; });
      // As a broker answers: a version it does not know (KIP-511), and
      // v3's client software labels.
      co_return net::answer_api_versions(response, frame);
    }
    case net::DescribeConfigsRequest::kApiKey: {
      // KIP-919: answered from the committed image, as a broker would.
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::DescribeConfigsRequest>(frame));
      co_return net::encode_response(configs::describe_configs(committed_, config_.node_id, request, version,
                                                                &config_.static_configs),
                                     frame.header);
    }
    case net::BrokerRegistrationRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::BrokerRegistrationRequest>(frame));
      co_return net::encode_response(co_await register_broker(std::move(request)), frame.header);
    }
    case net::BrokerHeartbeatRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::BrokerHeartbeatRequest>(frame));
      co_return net::encode_response(co_await heartbeat(std::move(request)), frame.header);
    }
    case net::UnregisterBrokerRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::UnregisterBrokerRequest>(frame));
      co_return net::encode_response(co_await unregister_broker(std::move(request)), frame.header);
    }
    case net::CreateTopicsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::CreateTopicsRequest>(frame));
      co_return net::encode_response(co_await create_topics(std::move(request), version), frame.header);
    }
    case net::DeleteTopicsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::DeleteTopicsRequest>(frame));
      co_return net::encode_response(co_await delete_topics(std::move(request), version), frame.header);
    }
    case net::CreatePartitionsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::CreatePartitionsRequest>(frame));
      co_return net::encode_response(co_await create_partitions(std::move(request)), frame.header);
    }
    case net::ElectLeadersRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::ElectLeadersRequest>(frame));
      co_return net::encode_response(co_await elect_leaders(std::move(request), version), frame.header);
    }
    case net::AlterPartitionRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::AlterPartitionRequest>(frame));
      co_return net::encode_response(co_await alter_partition(std::move(request), version), frame.header);
    }
    case net::AlterPartitionReassignmentsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::AlterPartitionReassignmentsRequest>(frame));
      co_return net::encode_response(co_await alter_partition_reassignments(std::move(request)), frame.header);
    }
    case net::ListPartitionReassignmentsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::ListPartitionReassignmentsRequest>(frame));
      co_return net::encode_response(co_await list_partition_reassignments(std::move(request)), frame.header);
    }
    case net::AllocateProducerIdsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::AllocateProducerIdsRequest>(frame));
      co_return net::encode_response(co_await allocate_producer_ids(std::move(request)), frame.header);
    }
    case net::IncrementalAlterConfigsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::IncrementalAlterConfigsRequest>(frame));
      co_return net::encode_response(co_await incremental_alter_configs(std::move(request)), frame.header);
    }
    case net::AlterConfigsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::AlterConfigsRequest>(frame));
      co_return net::encode_response(co_await alter_configs(std::move(request)), frame.header);
    }
    case net::CreateAclsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::CreateAclsRequest>(frame));
      co_return net::encode_response(co_await create_acls(std::move(request)), frame.header);
    }
    case net::DeleteAclsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::DeleteAclsRequest>(frame));
      co_return net::encode_response(co_await delete_acls(std::move(request)), frame.header);
    }
    case net::AlterClientQuotasRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::AlterClientQuotasRequest>(frame));
      co_return net::encode_response(co_await alter_client_quotas(std::move(request)), frame.header);
    }
    case net::AlterUserScramCredentialsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::AlterUserScramCredentialsRequest>(frame));
      co_return net::encode_response(co_await alter_user_scram_credentials(std::move(request)), frame.header);
    }
    case net::UpdateFeaturesRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::UpdateFeaturesRequest>(frame));
      co_return net::encode_response(co_await update_features(std::move(request), version), frame.header);
    }
    case net::EnvelopeRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(auto request, net::decode_body<net::EnvelopeRequest>(frame));
      co_return net::encode_response(co_await envelope(std::move(request)), frame.header);
    }
    default:
      co_return absl::UnimplementedError(
          fmt::format("controller: API key {} is not served here", frame.header.request_api_key));
  }
}

}  // namespace brook::controller
