// core/broker/broker.cc: metadata replay, partitions, lifecycle and the
// controller channel. The client APIs are in kafka_apis.cc.
#include "core/broker/broker.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "core/controller/quorum_controller.h"
#include "core/metadata/record_serde.h"
#include "io/assert.h"
#include "io/status.h"
#include "io/when.h"
#include "net/kafka/messages/allocate_producer_ids_request.h"
#include "net/kafka/messages/allocate_producer_ids_response.h"
#include "net/kafka/messages/broker_heartbeat_request.h"
#include "net/kafka/messages/broker_heartbeat_response.h"
#include "net/kafka/messages/broker_registration_request.h"
#include "net/kafka/messages/broker_registration_response.h"
#include "net/kafka/record_batch.h"
#include "core/configs/configs.h"
#include "storage/checkpoint.h"
#include "storage/log_manager.h"

namespace brook::broker {

namespace {

using namespace std::chrono_literals;

std::optional<int64_t> parse_long(std::string_view text) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

Broker::Broker(io::Context& ctx, raft::RaftNode& raft, BrokerConfig config)
    : ctx_(&ctx),
      raft_(&raft),
      config_(std::move(config)),
      offsets_partitions_(*this, std::string(group::kOffsetsTopic)),
      offsets_writer_(offsets_partitions_),
      groups_(ctx, *this, config_.group),
      txn_partitions_(*this, std::string(txn::kTransactionStateTopic)),
      txn_writer_(txn_partitions_),
      txn_host_(*this),
      txns_(ctx, txn_host_, config_.txn) {
  // The inter-broker listener's security for every pool (null: none).
  for (net::PeerPool* pool : {&replica_peers_, &marker_peers_, &verify_peers_, &group_peers_}) {
    pool->set_sasl(config_.inter_broker_sasl.has_value() ? &*config_.inter_broker_sasl : nullptr, &ctx_->random());
    pool->set_tls(config_.inter_broker_tls.get());
  }
}

Broker::~Broker() = default;

// --- metadata -----------------------------------------------------------------

void Broker::handle_commit(const raft::CommittedBatch& batch) {
  image_end_ = batch.last_offset + 1;
  if (batch.control) return;
  absl::StatusOr<metadata::MetadataImage> image =
      metadata::replay_batch(image_, batch.bytes, batch.base_offset, batch.epoch);
  // A committed record that does not replay means the log and this code
  // disagree: this broker would serve a cluster that does not exist.
  BROOK_ASSERT_MSG(image.ok(), "broker: {}", image.status().ToString());
  set_image(std::move(*image));
}

void Broker::handle_snapshot(raft::SnapshotId id, const std::vector<io::Buffer>& values) {
  absl::StatusOr<metadata::MetadataImage> image = metadata::load_snapshot_values(values, id.end_offset, id.epoch);
  BROOK_ASSERT_MSG(image.ok(), "broker: snapshot {} does not load: {}", raft::snapshot_file_name(id),
                   image.status().ToString());
  image_end_ = id.end_offset;
  set_image(std::move(*image));
}

void Broker::set_image(metadata::MetadataImage image) {
  image_ = std::move(image);
  image_changed_.set();
}

bool Broker::serving() const {
  const metadata::BrokerRegistration* b = image_.cluster().broker(config_.node_id);
  return b != nullptr && !b->fenced && broker_epoch_ >= 0 && b->epoch == broker_epoch_;
}

std::shared_ptr<Partition> Broker::find(const std::string& topic, int32_t index) {
  auto it = partitions_.find(PartitionKey(topic, index));
  return it == partitions_.end() ? nullptr : it->second;
}

bool Broker::downconversion_enabled(const std::string& topic) const {
  const metadata::ConfigMap* t =
      image_.configs().find(metadata::ConfigResource{metadata::kConfigResourceTopic, topic});
  if (t != nullptr) {
    if (auto it = t->find("message.downconversion.enable"); it != t->end()) return it->second != "false";
  }
  const metadata::ConfigMap* d = image_.configs().find(metadata::ConfigResource{metadata::kConfigResourceBroker, ""});
  if (d != nullptr) {
    if (auto it = d->find("log.message.downconversion.enable"); it != d->end()) return it->second != "false";
  }
  return true;
}

storage::LogConfig Broker::log_config_for(const std::string& topic) const {
  storage::LogConfig c = config_.log_defaults;
  // The topic's own configs, and for the others the broker configs behind
  // their defaults where any is set (log.roll.ms, log.cleanup.policy, ...:
  // statically, or dynamically for this broker or the cluster), as
  // DescribeConfigs shows a topic's configs.
  configs::BrokerLayers layers;
  layers.static_config = &config_.static_configs;
  layers.dynamic_default = image_.configs().find(metadata::ConfigResource{metadata::kConfigResourceBroker, ""});
  layers.dynamic_broker = image_.configs().find(
      metadata::ConfigResource{metadata::kConfigResourceBroker, std::to_string(config_.node_id)});
  auto set_anywhere = [&](std::string_view name) {
    auto in = [&](const metadata::ConfigMap* layer) { return layer != nullptr && layer->find(name) != layer->end(); };
    return config_.static_configs.contains(std::string(name)) || in(layers.dynamic_default) ||
           in(layers.dynamic_broker);
  };
  const metadata::ConfigMap* own =
      image_.configs().find(metadata::ConfigResource{metadata::kConfigResourceTopic, topic});
  metadata::ConfigMap effective;
  for (const configs::ConfigDef& def : configs::topic_configs()) {
    if (own != nullptr) {
      if (auto it = own->find(def.name); it != own->end()) {
        effective.emplace(def.name, it->second);
        continue;
      }
    }
    // Only where a synonym is set: else the defaults this broker was
    // given (BrokerConfig::log_defaults) stand.
    const auto synonyms = def.synonyms();
    auto set = [&](const configs::Synonym& synonym) { return set_anywhere(synonym.name); };
    if (std::any_of(synonyms.begin(), synonyms.end(), set)) {
      if (std::optional<std::string> v = configs::topic_default_value(def, layers)) effective.emplace(def.name, *v);
    }
  }
  const metadata::ConfigMap* m = &effective;
  auto num = [&](std::string_view name) -> std::optional<int64_t> {
    auto it = m->find(name);
    if (it == m->end()) return std::nullopt;
    return parse_long(it->second);
  };
  if (auto v = num("segment.bytes"); v && *v > 0) c.segment_bytes = static_cast<uint64_t>(*v);
  if (auto v = num("segment.ms"); v && *v > 0) c.segment_ms = *v;
  if (auto v = num("segment.jitter.ms"); v && *v >= 0) c.segment_jitter_ms = *v;
  if (auto v = num("segment.index.bytes"); v && *v > 0) c.segment_index_bytes = static_cast<uint64_t>(*v);
  if (auto v = num("index.interval.bytes"); v && *v >= 0) c.index_interval_bytes = static_cast<uint64_t>(*v);
  if (auto v = num("flush.messages"); v && *v > 0) {
    // 1: every message synced before it is acknowledged (group commit).
    c.flush_messages = *v == 1 ? storage::kNoLimit : *v;
    c.flush_mode = *v == 1 ? storage::FlushMode::kBeforeAck : storage::FlushMode::kBackground;
  }
  if (auto v = num("flush.ms"); v && *v >= 0) c.flush_ms = *v;
  if (auto v = num("retention.ms")) c.retention_ms = *v;
  if (auto v = num("retention.bytes")) c.retention_bytes = *v;
  if (auto v = num("delete.retention.ms"); v && *v >= 0) c.delete_retention_ms = *v;
  if (auto v = num("min.compaction.lag.ms"); v && *v >= 0) c.min_compaction_lag_ms = *v;
  if (auto v = num("max.compaction.lag.ms"); v && *v > 0) c.max_compaction_lag_ms = *v;
  if (auto v = num("max.message.bytes"); v && *v >= 0) c.max_message_bytes = static_cast<size_t>(*v);
  if (auto v = num("message.timestamp.before.max.ms"); v && *v >= 0) c.timestamp_before_max_ms = *v;
  if (auto v = num("message.timestamp.after.max.ms"); v && *v >= 0) c.timestamp_after_max_ms = *v;
  if (auto it = m->find("cleanup.policy"); it != m->end()) {
    c.cleanup_delete = it->second.find("delete") != std::string::npos;
    c.cleanup_compact = it->second.find("compact") != std::string::npos;
  }
  if (auto it = m->find("message.timestamp.type"); it != m->end()) {
    c.timestamp_type = it->second == "LogAppendTime" ? net::TimestampType::kLogAppendTime
                                                     : net::TimestampType::kCreateTime;
  }
  if (auto it = m->find("min.cleanable.dirty.ratio"); it != m->end()) {
    char* end = nullptr;
    const double r = std::strtod(it->second.c_str(), &end);
    if (end != it->second.c_str()) c.min_cleanable_dirty_ratio = r;
  }
  return c;
}

int32_t Broker::min_insync_for(const std::string& topic) const {
  const metadata::ConfigMap* m =
      image_.configs().find(metadata::ConfigResource{metadata::kConfigResourceTopic, topic});
  if (m != nullptr) {
    auto it = m->find("min.insync.replicas");
    if (it != m->end()) {
      if (auto v = parse_long(it->second); v && *v >= 1 && *v <= INT32_MAX) return static_cast<int32_t>(*v);
    }
  }
  return config_.min_insync_replicas;
}

io::Task<void> Broker::apply_loop() {
  while (true) {
    co_await image_changed_.wait();
    image_changed_.reset();
    absl::Status s = co_await apply_image();
    if (!s.ok()) {
      ctx_->log().warn("broker: applying metadata at offset {}: {}", image_end_, s.ToString());
      // A partition directory whose removal or creation failed may be
      // left behind: the apply that succeeds next looks for strays again.
      strays_removed_ = false;
      co_await ctx_->clock().sleep_for(1s);
      image_changed_.set();  // try again
    }
  }
}

io::Task<absl::Status> Broker::apply_image() {
  io::SemaphoreUnits lock = co_await apply_mu_.lock();
  const metadata::MetadataImage image = image_;  // a consistent view while we wait on the disk
  // Partitions whose topic is gone (or was replaced by another of the same
  // name), or that no longer have a replica here.
  std::vector<PartitionKey> gone;
  for (const auto& [key, p] : partitions_) {
    const metadata::TopicImage* t = image.topics().topic(key.first);
    const metadata::PartitionRegistration* reg = t == nullptr ? nullptr : t->partition(key.second);
    if (t == nullptr || !(t->id == p->topic_id) || reg == nullptr ||
        std::find(reg->replicas.begin(), reg->replicas.end(), config_.node_id) == reg->replicas.end()) {
      gone.push_back(key);
    }
  }
  for (const PartitionKey& key : gone) {
    CO_RETURN_IF_ERROR(co_await remove_partition(key));
  }
  for (const auto& [id, topic] : image.topics().by_id) {
    // Resolved once per topic, for its replicas here (none: not at all).
    std::optional<storage::LogConfig> log_config;
    for (const auto& [index, reg] : topic->partitions) {
      if (std::find(reg.replicas.begin(), reg.replicas.end(), config_.node_id) == reg.replicas.end()) continue;
      std::shared_ptr<Partition> p = find(topic->name, index);
      if (p == nullptr) {
        CO_RETURN_IF_ERROR(co_await open_partition(*topic, index));
        p = find(topic->name, index);
        if (p == nullptr) continue;
      }
      const bool becomes_leader = reg.leader == config_.node_id &&
                                  (p->leader != config_.node_id || p->leader_epoch != reg.leader_epoch);
      const bool new_epoch = p->leader_epoch != reg.leader_epoch || p->leader != reg.leader;
      // Markers written while this broker was not the leader did not pass
      // through it: transaction checks begun before do not carry over.
      if (new_epoch) p->txn_verifications.clear();
      p->leader = reg.leader;
      p->leader_epoch = reg.leader_epoch;
      // An AlterPartition answer may be newer than this image.
      if (new_epoch || reg.partition_epoch >= p->partition_epoch) {
        p->partition_epoch = reg.partition_epoch;
        p->isr = reg.isr;
      }
      // A newer partition epoch holds the proposal in flight or refuses it.
      if (p->pending_isr.has_value() && reg.partition_epoch > p->pending_isr_epoch) p->pending_isr.reset();
      p->replicas = reg.replicas;
      p->alter_refused_at.reset();  // the refusal's reason may be in this update
      p->min_insync_replicas = min_insync_for(topic->name);
      if (!log_config.has_value()) log_config = log_config_for(topic->name);
      p->log->set_config(*log_config);
      if (becomes_leader) {
        ctx_->log().info("broker: leader of {}-{} in epoch {} (log end {}, ISR [{}])", topic->name, index,
                         reg.leader_epoch, p->log->log_end_offset(), fmt::join(reg.isr, ","));
        CO_RETURN_IF_ERROR(co_await become_leader(*p));
      } else if (new_epoch) {
        p->followers.clear();
        p->pending_isr.reset();
        p->fetch_backoff_until = io::Instant{};
        if (p->is_follower(config_.node_id)) {
          ctx_->log().info("broker: follower of {}-{} in epoch {} (leader {}, log end {})", topic->name, index,
                           reg.leader_epoch, reg.leader, p->log->log_end_offset());
        }
      }
      if (p->is_leader(config_.node_id)) {
        // Replicas added or removed by a reassignment.
        for (auto it = p->followers.begin(); it != p->followers.end();) {
          it = contains(p->replicas, it->first) ? std::next(it) : p->followers.erase(it);
        }
        for (int32_t r : p->replicas) {
          if (r != config_.node_id && !p->followers.contains(r)) {
            FollowerState f;
            f.last_caught_up = ctx_->clock().now();
            p->followers.emplace(r, f);
          }
        }
        maybe_advance_high_watermark(*p);
      }
    }
  }
  ensure_fetchers();
  sync_coordinator();
  sync_txn_coordinator();
  appended_.notify();
  // Once the image holds this broker's own registration, it holds every
  // change made before the broker came back.
  const metadata::BrokerRegistration* self = image.cluster().broker(config_.node_id);
  if (!strays_removed_ && self != nullptr && broker_epoch_ >= 0 && self->epoch == broker_epoch_) {
    CO_RETURN_IF_ERROR(co_await remove_stray_partitions(image));
    strays_removed_ = true;
  }
  co_return absl::OkStatus();
}

io::Task<absl::Status> Broker::remove_stray_partitions(const metadata::MetadataImage& image) {
  CO_ASSIGN_OR_RETURN(std::vector<std::string> names, co_await ctx_->disk().list(""));
  bool swept_deleted = false;
  for (const std::string& name : names) {
    if (name.ends_with(storage::kDeleteDirSuffix)) {  // a removal cut short
      ctx_->log().info("broker: removing {}: left by a removal cut short", name);
      CO_RETURN_IF_ERROR(co_await storage::remove_tree(ctx_->disk(), name));
      swept_deleted = true;
      continue;
    }
    const std::optional<storage::TopicPartition> key = storage::parse_partition_dir_name(name);
    if (!key.has_value() || key->topic == raft::kMetadataTopic || partitions_.contains({key->topic, key->partition})) {
      continue;
    }
    absl::StatusOr<std::optional<net::Uuid>> stored = co_await storage::read_partition_metadata(
        ctx_->disk(), name + "/" + std::string(storage::kPartitionMetadataFileName));
    if (!stored.ok()) continue;
    if (!stored->has_value()) {
      // No metadata file: a creation that stopped before it leaves the
      // directory empty or with the file's temporary copy (as did a
      // removal that stopped after it, when removals took the files in
      // place). Anything else is not this broker's and stays.
      const std::string temporary =
          std::string(storage::kPartitionMetadataFileName) + std::string(storage::kTempFileSuffix);
      absl::StatusOr<std::vector<std::string>> inside = co_await ctx_->disk().list(name);
      if (!inside.ok() ||
          !std::all_of(inside->begin(), inside->end(), [&](const std::string& n) { return n == temporary; })) {
        continue;
      }
      ctx_->log().info("broker: removing {}: a partition directory left unfinished", name);
      CO_RETURN_IF_ERROR(co_await remove_dir(name));
      continue;
    }
    const metadata::TopicImage* t = image.topics().topic(**stored);
    const metadata::PartitionRegistration* reg = t == nullptr ? nullptr : t->partition(key->partition);
    const bool ours = reg != nullptr && t->name == key->topic &&
                      std::find(reg->replicas.begin(), reg->replicas.end(), config_.node_id) != reg->replicas.end();
    if (ours) continue;  // opened by the next apply
    ctx_->log().info("broker: removing {}: topic id {} {}", name, (*stored)->to_string(),
                     t == nullptr ? "was deleted while this broker was away" : "has no replica here");
    CO_RETURN_IF_ERROR(co_await remove_dir(name));
  }
  // Durable, so that a crash cannot bring a swept `-delete` directory back
  // (remove_dir syncs its own).
  if (swept_deleted) CO_RETURN_IF_ERROR(co_await ctx_->disk().sync_dir(""));
  co_return absl::OkStatus();
}

io::Task<absl::Status> Broker::open_partition(const metadata::TopicImage& topic, int32_t index) {
  const std::string dir = storage::partition_dir_name(storage::TopicPartition{topic.name, index});
  const std::string metadata_path = dir + "/" + std::string(storage::kPartitionMetadataFileName);
  CO_ASSIGN_OR_RETURN(std::optional<net::Uuid> stored,
                      co_await storage::read_partition_metadata(ctx_->disk(), metadata_path));
  if (stored.has_value() && !(*stored == topic.id)) {
    // A directory of an earlier topic of this name, deleted while this
    // broker was away.
    ctx_->log().info("broker: removing {} (it belonged to topic id {})", dir, stored->to_string());
    CO_RETURN_IF_ERROR(co_await remove_dir(dir));
    stored.reset();
  }
  CO_RETURN_IF_ERROR(co_await ctx_->disk().make_dir(dir));
  if (!stored.has_value()) {
    CO_RETURN_IF_ERROR(co_await storage::write_partition_metadata(ctx_->disk(), metadata_path, topic.id));
  }
  storage::LogOptions options;
  options.dir = dir;
  options.config = log_config_for(topic.name);
  if (!log_starts_.has_value()) {
    const std::string name(storage::kLogStartOffsetCheckpointFileName);
    absl::StatusOr<storage::OffsetCheckpoint> starts = co_await storage::read_offset_checkpoint(ctx_->disk(), name);
    if (!starts.ok() && absl::IsDataLoss(starts.status())) {
      // As Kafka: a corrupt checkpoint counts as none.
      ctx_->log().warn("broker: ignoring {}: {}", name, starts.status().ToString());
      starts = storage::OffsetCheckpoint{};
    }
    if (!starts.ok()) co_return starts.status();
    if (!log_starts_.has_value()) log_starts_ = *std::move(starts);
  }
  // An entry counts only for the directory it was written for: one made
  // just now (its topic new here, or an earlier topic's removed above)
  // starts where its log does. It stays among the entries written until
  // the partition is open, and then gives way to the log's own start.
  const storage::TopicPartition tp{topic.name, index};
  if (auto it = log_starts_->find(tp); it != log_starts_->end() && stored.has_value()) {
    options.log_start_offset = it->second;
  }
  CO_ASSIGN_OR_RETURN(std::unique_ptr<storage::Log> log,
                      co_await storage::Log::open(ctx_->disk(), ctx_->clock(), options));
  auto p = std::make_shared<Partition>();
  p->topic = topic.name;
  p->topic_id = topic.id;
  p->index = index;
  p->log = std::move(log);
  partitions_[PartitionKey(topic.name, index)] = std::move(p);
  log_starts_->erase(tp);
  co_return absl::OkStatus();
}

io::Task<absl::Status> Broker::checkpoint_log_starts() {
  auto lock = co_await log_starts_mutex_.lock();  // the writes share `<name>.tmp`
  // Entries not read yet stay in the file until a partition opens.
  if (!log_starts_.has_value()) co_return absl::OkStatus();
  storage::OffsetCheckpoint offsets = *log_starts_;
  for (const auto& [key, p] : partitions_) {
    const int64_t start = p->log->log_start_offset();
    if (start > 0) offsets[storage::TopicPartition{key.first, key.second}] = start;
  }
  co_return co_await storage::write_offset_checkpoint(
      ctx_->disk(), std::string(storage::kLogStartOffsetCheckpointFileName), std::move(offsets));
}

io::Task<absl::Status> Broker::remove_partition(PartitionKey key) {
  auto it = partitions_.find(key);
  if (it == partitions_.end()) co_return absl::OkStatus();
  std::shared_ptr<Partition> p = std::move(it->second);
  partitions_.erase(it);
  appended_.notify();
  (void)co_await p->log->close();
  const std::string dir = p->log->dir();
  ctx_->log().info("broker: removing partition {}", dir);
  co_return co_await remove_dir(dir);
}

// As Kafka deletes a log: the directory is renamed to a `-delete` name,
// made durable, before any file goes. A removal cut short (a failed
// remove, a crash) then leaves either the whole partition or a `-delete`
// directory, never a partition directory missing some of its segments,
// which a later assignment of the partition here would open as a log
// whose start had moved past records it had acknowledged.
io::Task<absl::Status> Broker::remove_dir(std::string dir) {
  const std::optional<storage::TopicPartition> key = storage::parse_partition_dir_name(dir);
  BROOK_ASSERT(key.has_value());
  // A name no earlier removal took: the calendar time and this broker's
  // count of removals (not the node's random stream, whose draws would
  // shift every later one of a simulated run).
  const auto wall_ns = static_cast<uint64_t>(ctx_->clock().wall_now().time_since_epoch().count());
  const std::string deleted = storage::deleted_partition_dir_name(*key,
                                                                  fmt::format("{:016x}{:016x}", wall_ns, ++removals_));
  const absl::Status renamed = co_await ctx_->disk().rename(dir, deleted);
  if (absl::IsNotFound(renamed)) co_return absl::OkStatus();
  CO_RETURN_IF_ERROR(renamed);
  CO_RETURN_IF_ERROR(co_await ctx_->disk().sync_dir(""));
  CO_RETURN_IF_ERROR(co_await storage::remove_tree(ctx_->disk(), deleted));
  co_return co_await ctx_->disk().sync_dir("");
}

io::Task<bool> Broker::wait_for_topic(std::string topic, bool present, io::Duration timeout) {
  const io::Instant deadline = ctx_->clock().now() + timeout;
  auto ready = [&] {
    const metadata::TopicImage* t = image_.topics().topic(topic);
    if (!present) return t == nullptr;
    if (t == nullptr) return false;
    for (const auto& [index, reg] : t->partitions) {
      if (reg.leader < 0) return false;
      if (reg.leader == config_.node_id) {
        // Our own partitions: opened too.
        std::shared_ptr<Partition> p = find(topic, index);
        if (p == nullptr || p->leader_epoch != reg.leader_epoch) return false;
      }
    }
    return true;
  };
  while (true) {
    const uint64_t seen = appended_.seen();
    if (ready()) co_return true;
    if (ctx_->clock().now() >= deadline) co_return false;
    (void)co_await io::with_deadline(ctx_->clock(), deadline, appended_.changed_since(seen));
  }
}

// --- lifecycle ----------------------------------------------------------------

io::Task<absl::Status> Broker::run() {
  // Fetchers and ISR changes run in `background`, which outlives neither
  // this call nor the broker (nor the tasks that spawn into it).
  io::TaskScope background(co_await io::this_executor());
  io::TaskScope tasks(co_await io::this_executor());
  background_ = &background;
  struct Unset {
    io::TaskScope** slot;
    ~Unset() { *slot = nullptr; }
  } unset{&background_};
  tasks.spawn(apply_loop());
  tasks.spawn(lifecycle_loop());
  tasks.spawn(isr_loop());
  tasks.spawn(log_loop());
  tasks.spawn(groups_.run());
  tasks.spawn(txns_.run());
  co_await failed_.wait();
  co_return failure_;
}

io::Task<void> Broker::log_loop() {
  // Short enough that a partition's unwritten bytes stay a few MB at the
  // rates one broker takes, so the sync at a roll finds little to do.
  constexpr io::Duration kLogMaintenanceInterval = std::chrono::milliseconds(250);
  constexpr io::Duration kLogInitialTaskDelay = std::chrono::milliseconds(30000);
  const io::Instant started = ctx_->clock().now();
  io::Instant next_retention = started + std::min(kLogInitialTaskDelay, config_.log_retention_check_interval);
  io::Instant next_cleaning = started + std::min(kLogInitialTaskDelay, config_.log_cleaner_backoff);
  while (true) {
    co_await ctx_->clock().sleep_for(kLogMaintenanceInterval);
    report_slow_requests();
    std::vector<std::shared_ptr<Partition>> snapshot;
    for (const auto& [key, p] : partitions_) snapshot.push_back(p);
    // A partition removed meanwhile has a closed log: skip it.
    const io::Instant now = ctx_->clock().now();
    for (const std::shared_ptr<Partition>& p : snapshot) {
      if (find(p->topic, p->index) != p) continue;
      // Forgotten here rather than when the producer comes back, so that
      // produce stops parsing headers for refusals once they are old.
      std::erase_if(p->refused_batches, [&](const auto& e) { return now - e.second.at >= kRefusedBatchMemory; });
      co_await p->log->start_writeback();
      if (find(p->topic, p->index) != p) continue;
      const absl::Status flushed = co_await p->log->maybe_flush_by_time();
      if (!flushed.ok()) (void)partition_log_failed(p, flushed);
    }
    if (now >= next_retention) {
      co_await run_retention(snapshot);
      next_retention = now + config_.log_retention_check_interval;
    }
    if (config_.log_cleaner_enable && now >= next_cleaning) {
      co_await run_cleaner(std::move(snapshot));
      next_cleaning = now + config_.log_cleaner_backoff;
    }
  }
}

// Each replica applies retention to its own log, as Kafka's do: only
// segments wholly below its high watermark go (storage::Log::delete_old_segments).
io::Task<void> Broker::run_retention(std::vector<std::shared_ptr<Partition>> partitions) {
  for (const std::shared_ptr<Partition>& p : partitions) {
    if (find(p->topic, p->index) != p) continue;
    const absl::StatusOr<size_t> deleted = co_await p->log->delete_old_segments();
    if (!deleted.ok()) {
      (void)partition_log_failed(p, deleted.status());
    } else if (*deleted > 0) {
      ctx_->log().debug("broker: retention deleted {} segments of {}-{}", *deleted, p->topic, p->index);
    }
  }
}

// cleanup.policy=compact logs whose dirty share reached
// min.cleanable.dirty.ratio get one cleaning pass each (storage::Log::compact;
// nothing at or past the last stable offset or in the active segment).
io::Task<void> Broker::run_cleaner(std::vector<std::shared_ptr<Partition>> partitions) {
  for (const std::shared_ptr<Partition>& p : partitions) {
    if (find(p->topic, p->index) != p) continue;
    const storage::LogConfig& config = p->log->config();
    if (!config.cleanup_compact || p->log->dirty_ratio() < config.min_cleanable_dirty_ratio) continue;
    const absl::StatusOr<storage::CompactionResult> cleaned =
        co_await p->log->compact(config_.log_cleaner_dedupe_buffer_size);
    if (!cleaned.ok()) {
      (void)partition_log_failed(p, cleaned.status());
    } else if (cleaned->records_removed > 0) {
      ctx_->log().debug("broker: cleaned {} segments of {}-{}: {} records removed, {} -> {} bytes",
                        cleaned->segments_cleaned, p->topic, p->index, cleaned->records_removed,
                        cleaned->bytes_before, cleaned->bytes_after);
    }
  }
}

void Broker::log_failed(const absl::Status& status) {
  if (closing_) {
    ctx_->log().debug("broker: while the logs close: {}", status.ToString());
    return;
  }
  if (failed_.is_set()) return;
  ctx_->log().error("broker: a partition log failed, stopping: {}", status.ToString());
  failure_ = status;
  failed_.set();
}

net::Error Broker::partition_log_failed(const std::shared_ptr<Partition>& p, const absl::Status& status) {
  if (find(p->topic, p->index) == p) {
    log_failed(status);
    return net::Error::kKafkaStorageError;
  }
  ctx_->log().debug("broker: {}-{} was removed under a log operation: {}", p->topic, p->index, status.ToString());
  const metadata::TopicImage* t = image_.topics().topic(p->topic);
  if (t == nullptr || t->id != p->topic_id || t->partition(p->index) == nullptr) {
    return net::Error::kUnknownTopicOrPartition;
  }
  return net::Error::kNotLeaderOrFollower;
}

io::Task<bool> Broker::register_once() {
  net::BrokerRegistrationRequest r;
  r.broker_id = config_.node_id;
  r.cluster_id = config_.cluster_id;
  r.incarnation_id = config_.incarnation_id;
  r.rack = config_.rack;
  auto add_listener = [&r](const std::string& name, const io::Address& address) {
    net::BrokerRegistrationRequest::Listener l;
    l.name = name;
    l.host = address.host;
    l.port = address.port;
    l.security_protocol = 0;  // PLAINTEXT
    r.listeners.push_back(std::move(l));
  };
  add_listener(config_.listener_name, config_.advertised);
  for (const auto& [name, address] : config_.other_listeners) add_listener(name, address);
  net::BrokerRegistrationRequest::Feature mv;
  mv.name = std::string(metadata::kMetadataVersionFeature);
  mv.min_supported_version = controller::kMetadataVersionMin;
  mv.max_supported_version = controller::kMetadataVersionLatest;
  r.features.push_back(mv);
  if (!config_.directory_id.is_zero()) r.log_dirs.push_back(config_.directory_id);
  absl::StatusOr<net::BrokerRegistrationResponse> resp = co_await call_controller<net::BrokerRegistrationResponse>(
      r, 2, ctx_->clock().now() + kControllerRpcTimeout);
  if (!resp.ok()) co_return false;
  if (resp->error_code != 0) {
    ctx_->log().warn("broker: registration refused: {}", net::error_name(resp->error_code));
    co_return false;
  }
  broker_epoch_ = resp->broker_epoch;
  ctx_->log().info("broker: registered as broker {} with epoch {}", config_.node_id, broker_epoch_);
  co_return true;
}

io::Task<void> Broker::lifecycle_loop() {
  while (true) {
    if (broker_epoch_ < 0) {
      if (!co_await register_once()) {
        co_await ctx_->clock().sleep_for(500ms);
        continue;
      }
    }
    net::BrokerHeartbeatRequest h;
    h.broker_id = config_.node_id;
    h.broker_epoch = broker_epoch_;
    h.current_metadata_offset = image_end_ - 1;
    h.want_fence = false;
    h.want_shut_down = want_shut_down_;
    absl::StatusOr<net::BrokerHeartbeatResponse> hb = co_await call_controller<net::BrokerHeartbeatResponse>(
        h, 1, ctx_->clock().now() + kControllerRpcTimeout);
    if (hb.ok()) {
      if (hb->error_code == net::code(net::Error::kStaleBrokerEpoch)) {
        broker_epoch_ = -1;
        continue;
      }
      if (hb->error_code == 0 && hb->should_shut_down && want_shut_down_) {
        shut_down_ = true;
        controlled_shutdown_done_.set();
        co_return;
      }
    }
    // Faster while waiting for the controller (to be unfenced, or to let us
    // shut down).
    const bool waiting = want_shut_down_ || !serving();
    co_await ctx_->clock().sleep_for(waiting ? std::min<io::Duration>(config_.heartbeat_interval, 200ms)
                                             : config_.heartbeat_interval);
  }
}

io::Task<absl::Status> Broker::shutdown(io::Duration timeout) {
  if (broker_epoch_ >= 0 && !shut_down_) {
    want_shut_down_ = true;
    (void)co_await io::with_timeout(ctx_->clock(), timeout, io::wait_for(&controlled_shutdown_done_));
  }
  io::SemaphoreUnits lock = co_await apply_mu_.lock();
  closing_ = true;
  absl::Status first;
  for (auto& [key, p] : partitions_) {
    absl::Status closed = co_await p->log->close();
    if (!closed.ok() && first.ok()) first = std::move(closed);
  }
  co_return first;
}

std::optional<io::Address> Broker::controller_address() const {
  const int32_t leader = raft_->leader_id();
  if (leader < 0) return std::nullopt;
  const raft::VoterSet& voters = raft_->voters();
  auto it = voters.find(leader);
  if (it != voters.end() && !it->second.endpoints.empty()) return it->second.endpoints.front().address;
  auto st = raft_->config().voters.find(leader);
  if (st != raft_->config().voters.end()) return st->second;
  return std::nullopt;
}

net::Peer& Broker::controller_peer(const io::Address& address) {
  const std::string key = address.to_string();
  auto it = controller_peers_.find(key);
  if (it == controller_peers_.end()) {
    it = controller_peers_
             .emplace(key, std::make_unique<net::Peer>(ctx_->network(), ctx_->clock(), address,
                                                       fmt::format("broker-{}", config_.node_id)))
             .first;
  }
  return *it->second;
}

io::Task<absl::StatusOr<int64_t>> Broker::next_producer_id(io::Instant deadline) {
  io::SemaphoreUnits lock = co_await producer_id_mu_.lock();
  while (producer_id_next_ >= producer_id_end_) {
    net::AllocateProducerIdsRequest r;
    r.broker_id = config_.node_id;
    r.broker_epoch = broker_epoch_;
    CO_ASSIGN_OR_RETURN(net::AllocateProducerIdsResponse resp,
                        co_await call_controller<net::AllocateProducerIdsResponse>(r, 0, deadline));
    if (resp.error_code != 0) {
      co_return absl::UnavailableError(
          fmt::format("AllocateProducerIds: {}", net::error_name(resp.error_code)));
    }
    producer_id_next_ = resp.producer_id_start;
    producer_id_end_ = resp.producer_id_start + resp.producer_id_len;
  }
  co_return producer_id_next_++;
}

}  // namespace brook::broker
