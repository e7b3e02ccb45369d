// core/broker/replication.cc: followers fetching from leaders, the leader's
// view of its followers, the high watermark and ISR changes (see broker.h).
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/broker/broker.h"
#include "io/status.h"
#include "io/when.h"
#include "net/kafka/messages/alter_partition_request.h"
#include "net/kafka/messages/alter_partition_response.h"
#include "net/kafka/messages/fetch_request.h"

namespace brook::broker {

namespace {

using namespace std::chrono_literals;

// The Fetch version followers send: topic ids, and the replica's id and
// broker epoch in ReplicaState.
constexpr int16_t kReplicaFetchVersion = 15;
// The AlterPartition version: the new ISR with broker epochs.
constexpr int16_t kAlterPartitionVersion = 3;

}  // namespace

// --- the leader's side ------------------------------------------------------------

io::Task<absl::Status> Broker::become_leader(Partition& p) {
  const io::Instant now = ctx_->clock().now();
  p.followers.clear();
  for (int32_t r : p.replicas) {
    if (r == config_.node_id) continue;
    FollowerState f;
    // An ISR member is given the lag time to show it is caught up.
    if (contains(p.isr, r)) f.last_caught_up = now;
    p.followers.emplace(r, f);
  }
  p.pending_isr.reset();
  // Where this leadership starts (a follower's log end counts towards the
  // ISR only from there, as in Kafka): the log end once a truncation or
  // append begun as a follower is done. The log end now may be about to
  // move back, and taken from it no follower could ever reach it. No
  // follower joins the ISR meanwhile.
  p.leader_epoch_start_offset = std::numeric_limits<int64_t>::max();
  CO_ASSIGN_OR_RETURN(p.leader_epoch_start_offset, co_await p.log->assign_leader_epoch(p.leader_epoch));
  // Syncing before acknowledging, the high watermark counts only durable
  // records (maybe_advance_high_watermark): what this replica appended as a
  // follower and had not synced yet is synced now.
  if (p.log->config().flush_mode == storage::FlushMode::kBeforeAck &&
      p.log->recovery_point() < p.log->log_end_offset()) {
    co_return co_await p.log->flush();
  }
  co_return absl::OkStatus();
}

void Broker::maybe_advance_high_watermark(Partition& p) {
  if (!p.is_leader(config_.node_id)) return;
  // Syncing before acknowledging, the leader counts only its durable
  // records, as followers report only theirs: the high watermark never
  // covers a record a crash of the leader can take (one appended while
  // another append's sync ran would otherwise be served, then lost).
  int64_t hw = p.log->log_end_offset();
  if (p.log->config().flush_mode == storage::FlushMode::kBeforeAck) hw = std::min(hw, p.log->recovery_point());
  auto include = [&](int32_t r) {
    if (r == config_.node_id) return;
    auto it = p.followers.find(r);
    hw = std::min(hw, it == p.followers.end() ? -1 : it->second.log_end_offset);
  };
  for (int32_t r : p.isr) include(r);
  if (p.pending_isr.has_value()) {
    for (int32_t r : *p.pending_isr) include(r);
  }
  if (hw > p.log->high_watermark()) {
    p.log->set_high_watermark(hw);
    appended_.notify();
  }
}

void Broker::update_follower(const std::shared_ptr<Partition>& p, int32_t replica, int64_t fetch_offset) {
  auto it = p->followers.find(replica);
  if (it == p->followers.end()) return;
  FollowerState& f = it->second;
  const io::Instant now = ctx_->clock().now();
  const int64_t leader_end = p->log->log_end_offset();
  // Kafka's rule: caught up now if it fetched from the log end, or caught
  // up as of its previous fetch if it fetched from where the log ended then.
  if (fetch_offset >= leader_end) {
    f.last_caught_up = now;
  } else if (f.leader_end_at_last_fetch >= 0 && fetch_offset >= f.leader_end_at_last_fetch) {
    f.last_caught_up = std::max(f.last_caught_up, f.last_fetch);
  }
  f.log_end_offset = fetch_offset;
  f.last_fetch = now;
  f.leader_end_at_last_fetch = leader_end;
  maybe_advance_high_watermark(*p);
  maybe_expand_isr(p, replica);
}

bool Broker::may_alter_isr(const Partition& p) const {
  return p.is_leader(config_.node_id) && !p.pending_isr.has_value() &&
         (!p.alter_refused_at.has_value() || ctx_->clock().now() - *p.alter_refused_at >= kAlterPartitionRetryBackoff);
}

void Broker::maybe_expand_isr(const std::shared_ptr<Partition>& p, int32_t replica) {
  if (!may_alter_isr(*p) || contains(p->isr, replica)) return;
  if (background_ == nullptr) return;
  auto it = p->followers.find(replica);
  if (it == p->followers.end()) return;
  const int64_t end = it->second.log_end_offset;
  if (end < p->log->high_watermark() || end < p->leader_epoch_start_offset) return;
  const metadata::BrokerRegistration* b = image_.cluster().broker(replica);
  if (b == nullptr || b->fenced || b->in_controlled_shutdown) return;
  std::vector<int32_t> isr = p->isr;
  isr.push_back(replica);
  std::sort(isr.begin(), isr.end());
  ctx_->log().info("broker: {}-{}: adding {} to the ISR (its log end {}, high watermark {})", p->topic, p->index,
                   replica, end, p->log->high_watermark());
  p->pending_isr = isr;
  p->pending_isr_epoch = p->partition_epoch;
  background_->spawn(alter_isr(p, std::move(isr)));
}

io::Task<void> Broker::isr_loop() {
  while (true) {
    co_await ctx_->clock().sleep_for(config_.replica_lag_time_max / 2);
    if (background_ == nullptr) continue;
    const io::Instant now = ctx_->clock().now();
    for (const auto& [key, p] : partitions_) {
      if (!may_alter_isr(*p)) continue;
      std::vector<int32_t> kept;
      for (int32_t r : p->isr) {
        if (r != config_.node_id) {
          auto it = p->followers.find(r);
          const bool caught_up = it != p->followers.end() &&
                                 (it->second.log_end_offset >= p->log->log_end_offset() ||
                                  now - it->second.last_caught_up <= config_.replica_lag_time_max);
          if (!caught_up) continue;
        }
        kept.push_back(r);
      }
      if (kept.size() == p->isr.size()) continue;
      ctx_->log().info("broker: {}-{}: shrinking the ISR from [{}] to [{}]", p->topic, p->index,
                       fmt::join(p->isr, ","), fmt::join(kept, ","));
      p->pending_isr = kept;
      p->pending_isr_epoch = p->partition_epoch;
      background_->spawn(alter_isr(p, std::move(kept)));
    }
  }
}

io::Task<void> Broker::alter_isr(std::shared_ptr<Partition> p, std::vector<int32_t> new_isr) {
  net::AlterPartitionRequest request;
  request.broker_id = config_.node_id;
  request.broker_epoch = broker_epoch_;
  auto& topic = request.topics.emplace_back();
  topic.topic_id = p->topic_id;
  auto& part = topic.partitions.emplace_back();
  part.partition_index = p->index;
  part.leader_epoch = p->leader_epoch;
  part.partition_epoch = p->partition_epoch;
  part.leader_recovery_state = 0;
  for (int32_t r : new_isr) {
    auto& b = part.new_isr_with_epochs.emplace_back();
    b.broker_id = r;
    const metadata::BrokerRegistration* reg = image_.cluster().broker(r);
    b.broker_epoch = reg == nullptr ? -1 : reg->epoch;
  }
  const int32_t leader_epoch = p->leader_epoch;
  const int32_t partition_epoch = p->partition_epoch;
  // Whether the metadata log settled the proposal meanwhile: a new leader
  // epoch or partition epoch (which holds the proposal or refuses it), or
  // the partition gone. Its state is then the controller's.
  auto settled = [&] {
    return find(p->topic, p->index) != p || p->leader_epoch != leader_epoch ||
           p->partition_epoch != partition_epoch || !p->pending_isr.has_value();
  };
  while (true) {
    const io::Instant deadline = ctx_->clock().now() + config_.controller_timeout;
    absl::StatusOr<net::AlterPartitionResponse> response =
        co_await call_controller<net::AlterPartitionResponse>(request, kAlterPartitionVersion, deadline);
    if (settled()) co_return;
    int16_t error = 0;
    if (!response.ok()) {
      ctx_->log().warn("broker: {}-{}: AlterPartition: {}", p->topic, p->index, response.status().ToString());
      error = net::code(net::Error::kRequestTimedOut);
    } else if (response->error_code != 0) {
      error = response->error_code;
    } else if (response->topics.size() != 1 || response->topics[0].partitions.size() != 1) {
      ctx_->log().warn("broker: {}-{}: AlterPartition answered for other partitions", p->topic, p->index);
      error = net::code(net::Error::kUnknownServerError);
    } else {
      const auto& out = response->topics[0].partitions[0];
      error = out.error_code;
      if (error == 0 && out.leader_epoch == p->leader_epoch) {
        p->isr = out.isr;
        p->partition_epoch = out.partition_epoch;
        p->pending_isr.reset();
        ctx_->log().info("broker: {}-{}: ISR [{}] (partition epoch {})", p->topic, p->index,
                         fmt::join(p->isr, ","), p->partition_epoch);
        break;
      }
      // Taken, in a change that also moved leadership (a reassignment
      // completed): this leader's epoch is over once the metadata log
      // says so; until then it keeps its maximal ISR.
      if (error == 0) error = net::code(net::Error::kFencedLeaderEpoch);
    }
    if (error == net::code(net::Error::kIneligibleReplica)) {
      // Decided on this broker's partition epoch: not taken.
      ctx_->log().info("broker: {}-{}: AlterPartition refused: {}", p->topic, p->index, net::error_name(error));
      p->pending_isr.reset();
      p->alter_refused_at = ctx_->clock().now();
      break;
    }
    // Not answered (the proposal may have been committed), or refused on
    // a state newer than this broker's (the metadata log brings it): asked
    // again after a while until the answer or the metadata settles it.
    ctx_->log().info("broker: {}-{}: AlterPartition not taken ({}); asking again", p->topic, p->index,
                     net::error_name(error));
    co_await ctx_->clock().sleep_for(kAlterPartitionRetryBackoff);
    if (settled()) co_return;
  }
  maybe_advance_high_watermark(*p);
  appended_.notify();
}

// --- the follower's side ----------------------------------------------------------

std::optional<io::Address> Broker::broker_address(int32_t id, std::string_view listener) const {
  const metadata::BrokerRegistration* b = image_.cluster().broker(id);
  if (b == nullptr) return std::nullopt;
  auto l = b->listeners.find(listener.empty() ? config_.listener_name : std::string(listener));
  if (l == b->listeners.end()) return std::nullopt;
  return io::Address{l->second.host, static_cast<uint16_t>(l->second.port)};
}

void Broker::ensure_fetchers() {
  if (background_ == nullptr) return;
  for (const auto& [key, p] : partitions_) {
    if (!p->is_follower(config_.node_id) || p->leader < 0) continue;
    if (fetchers_.insert(p->leader).second) background_->spawn(fetcher_loop(p->leader));
  }
}

io::Task<void> Broker::fetcher_loop(int32_t leader) {
  ctx_->log().info("broker: fetching from broker {}", leader);
  while (true) {
    // The partitions this broker follows with `leader` as their leader.
    const io::Instant now = ctx_->clock().now();
    std::vector<std::shared_ptr<Partition>> parts;
    bool any = false;
    for (const auto& [key, p] : partitions_) {
      if (!p->is_follower(config_.node_id) || p->leader != leader) continue;
      any = true;
      if (p->fetch_backoff_until <= now) parts.push_back(p);
    }
    if (!any) break;
    std::optional<io::Address> address = broker_address(leader);
    if (parts.empty() || !address.has_value() || !serving()) {
      co_await ctx_->clock().sleep_for(std::min<io::Duration>(config_.replica_fetch_backoff, 100ms));
      continue;
    }
    net::FetchRequest request;
    request.replica_state.replica_id = config_.node_id;
    request.replica_state.replica_epoch = broker_epoch_;
    request.max_wait_ms = static_cast<int32_t>(std::chrono::duration_cast<std::chrono::milliseconds>(config_.replica_fetch_wait_max).count());
    request.min_bytes = 1;
    request.max_bytes = config_.replica_fetch_response_max_bytes;
    request.isolation_level = 0;
    request.session_id = 0;
    request.session_epoch = -1;
    struct Sent {
      std::shared_ptr<Partition> p;
      int32_t leader_epoch;
      int64_t fetch_offset;
    };
    std::vector<Sent> sent;
    for (const std::shared_ptr<Partition>& p : parts) {
      if (request.topics.empty() || !(request.topics.back().topic_id == p->topic_id)) {
        request.topics.emplace_back().topic_id = p->topic_id;
      }
      auto& fp = request.topics.back().partitions.emplace_back();
      fp.partition = p->index;
      fp.current_leader_epoch = p->leader_epoch;
      fp.fetch_offset = p->log->log_end_offset();
      fp.last_fetched_epoch = p->log->leader_epochs().latest_epoch().value_or(-1);
      fp.log_start_offset = p->log->log_start_offset();
      fp.partition_max_bytes = config_.replica_fetch_max_bytes;
      sent.push_back(Sent{p, p->leader_epoch, fp.fetch_offset});
    }
    net::Peer& peer = replica_peers_.get(leader, *address);
    const io::Duration timeout = config_.replica_fetch_wait_max + 10s;
    absl::StatusOr<net::FetchResponse> response =
        co_await peer.call<net::FetchResponse>(request, kReplicaFetchVersion, timeout);
    if (!response.ok() || response->error_code != 0) {
      if (!response.ok()) {
        ctx_->log().debug("broker: fetch from {}: {}", leader, response.status().ToString());
      }
      co_await ctx_->clock().sleep_for(config_.replica_fetch_backoff);
      continue;
    }
    for (auto& topic : response->responses) {
      for (auto& data : topic.partitions) {
        for (const Sent& s : sent) {
          if (!(s.p->topic_id == topic.topic_id) || s.p->index != data.partition_index) continue;
          if (!co_await apply_fetched(s.p, s.leader_epoch, s.fetch_offset, std::move(data))) {
            s.p->fetch_backoff_until = ctx_->clock().now() + config_.replica_fetch_backoff;
          }
          break;
        }
      }
    }
    // Sync before the next fetch reports the new log ends (kBeforeAck),
    // every partition's log at once.
    std::vector<io::Task<absl::Status>> syncs;
    std::vector<std::shared_ptr<Partition>> synced_partitions;
    for (const Sent& s : sent) {
      if (find(s.p->topic, s.p->index) != s.p) continue;  // removed meanwhile (its log is closed)
      storage::Log& log = *s.p->log;
      if (log.config().flush_mode == storage::FlushMode::kBeforeAck && log.recovery_point() < log.log_end_offset()) {
        syncs.push_back(log.flush());
        synced_partitions.push_back(s.p);
      }
    }
    if (!syncs.empty()) {
      std::vector<absl::Status> synced = co_await io::when_all(std::move(syncs));
      for (size_t i = 0; i < synced.size(); ++i) {
        if (!synced[i].ok()) (void)partition_log_failed(synced_partitions[i], synced[i]);
      }
    }
  }
  fetchers_.erase(leader);
  ctx_->log().info("broker: no longer fetching from broker {}", leader);
}

io::Task<bool> Broker::apply_fetched(std::shared_ptr<Partition> p, int32_t leader_epoch, int64_t fetch_offset,
                                     net::FetchResponse::PartitionData data) {
  // Still this partition, following the same leader epoch, at the same end?
  if (find(p->topic, p->index) != p || !p->is_follower(config_.node_id) || p->leader_epoch != leader_epoch ||
      p->log->log_end_offset() != fetch_offset) {
    co_return true;
  }
  storage::Log& log = *p->log;
  if (data.error_code == net::code(net::Error::kOffsetOutOfRange)) {
    // Below the leader's log start: start over there. Past its log end
    // (only after an unclean election): back to its high watermark.
    if (data.log_start_offset >= 0 && fetch_offset < data.log_start_offset) {
      ctx_->log().info("broker: {}-{}: fetch offset {} below the leader's log start {}: starting there", p->topic,
                       p->index, fetch_offset, data.log_start_offset);
      absl::Status s = co_await log.truncate_fully_and_start_at(data.log_start_offset);
      if (!s.ok()) (void)partition_log_failed(p, s);
      co_return s.ok();
    }
    if (data.high_watermark >= 0 && data.high_watermark < fetch_offset) {
      ctx_->log().warn("broker: {}-{}: fetch offset {} past the leader's log: truncating to its high watermark {}",
                       p->topic, p->index, fetch_offset, data.high_watermark);
      absl::Status s = co_await log.truncate_to(std::max(data.high_watermark, log.log_start_offset()));
      if (!s.ok()) (void)partition_log_failed(p, s);
      co_return s.ok();
    }
    co_return false;
  }
  if (data.error_code != 0) {
    // NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, ...: the
    // metadata log will tell.
    co_return false;
  }
  if (data.diverging_epoch.epoch >= 0 || data.diverging_epoch.end_offset >= 0) {
    // KIP-320: our last epoch ends earlier on the leader. Truncate to where
    // both logs agree (storage::follower_truncation); if we do not hold the
    // leader's epoch, to the end of our largest one below it, and the next
    // fetch, naming that epoch, asks again.
    const storage::FollowerTruncation t = storage::follower_truncation(
        log.leader_epochs(), log.log_end_offset(),
        storage::EpochEndOffset{data.diverging_epoch.epoch, data.diverging_epoch.end_offset});
    const int64_t to = t.offset;
    ctx_->log().info("broker: {}-{}: diverging at epoch {} end {}: truncating from {} to {}{}", p->topic, p->index,
                     data.diverging_epoch.epoch, data.diverging_epoch.end_offset, log.log_end_offset(), to,
                     t.complete ? "" : " (the leader's epoch is not ours: the next fetch asks about an earlier one)");
    const int64_t end_before = log.log_end_offset();
    const int32_t epoch_before = log.leader_epochs().latest_epoch().value_or(-1);
    absl::Status s = co_await log.truncate_to(std::max<int64_t>(to, 0));
    if (!s.ok()) {
      (void)partition_log_failed(p, s);
      co_return false;
    }
    // Nothing moved: fetching again at once would get the same answer.
    co_return log.log_end_offset() != end_before || log.leader_epochs().latest_epoch().value_or(-1) != epoch_before;
  }
  if (data.records.has_value() && data.records->size() > 0) {
    // Synced by the fetcher, all partitions of the answer at once.
    absl::StatusOr<storage::AppendResult> appended =
        co_await log.append_as_follower(std::move(*data.records), /*sync=*/false);
    if (!appended.ok()) {
      (void)partition_log_failed(p, appended.status());
      co_return false;
    }
    if (!appended->ok()) {
      ctx_->log().warn("broker: {}-{}: fetched records at {} do not append: {} {}", p->topic, p->index,
                       fetch_offset, net::error_name(net::code(appended->error)), appended->error_message);
      co_return false;
    }
  }
  // The follower's high watermark: the leader's, as far as this log goes.
  if (data.high_watermark >= 0) log.set_high_watermark(std::min(data.high_watermark, log.log_end_offset()));
  if (data.log_start_offset > log.log_start_offset() && data.log_start_offset <= log.high_watermark()) {
    absl::StatusOr<net::Error> moved = co_await log.delete_records_before(data.log_start_offset);
    if (!moved.ok()) {
      (void)partition_log_failed(p, moved.status());
      co_return false;
    }
    if (absl::Status s = co_await checkpoint_log_starts(); !s.ok()) {
      (void)partition_log_failed(p, s);
      co_return false;
    }
  }
  co_return true;
}

}  // namespace brook::broker
