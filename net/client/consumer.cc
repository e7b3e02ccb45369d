// net/client/consumer.cc
#include "net/client/consumer.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "io/when.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/fetch_request.h"
#include "net/kafka/messages/fetch_response.h"

namespace brook::client {

namespace {

constexpr int16_t kFetchVersion = 12;
constexpr int32_t kSessionEpochFinal = -1;  // FINAL_EPOCH: no session

std::string tp_name(const TopicPartition& tp) { return fmt::format("{}-{}", tp.topic, tp.partition); }

}  // namespace

Consumer::Consumer(io::Context& ctx, ConsumerConfig config)
    : ctx_(&ctx), config_(std::move(config)), cluster_(ctx, config_.client) {}

void Consumer::assign(std::vector<TopicPartition> partitions) {
  std::sort(partitions.begin(), partitions.end());
  partitions.erase(std::unique(partitions.begin(), partitions.end()), partitions.end());
  std::set<TopicPartition> keep(partitions.begin(), partitions.end());
  std::erase_if(state_, [&](const auto& kv) { return !keep.contains(kv.first); });
  std::erase_if(buffered_, [&](const ConsumerRecord& r) { return !keep.contains(TopicPartition(r.topic, r.partition)); });
  for (const TopicPartition& tp : partitions) {
    auto [it, fresh] = state_.try_emplace(tp);
    if (fresh) it->second.reset = config_.auto_offset_reset;
  }
  assignment_ = std::move(partitions);
  metadata_wanted_ = true;
}

void Consumer::drop_buffered(const TopicPartition& tp, PartitionState& st) {
  if (st.buffered == 0) return;
  std::erase_if(buffered_, [&](const ConsumerRecord& r) { return r.topic == tp.topic && r.partition == tp.partition; });
  st.buffered = 0;
}

void Consumer::seek(const TopicPartition& tp, int64_t offset) {
  auto it = state_.find(tp);
  if (it == state_.end()) return;
  drop_buffered(tp, it->second);
  it->second.position = offset;
  it->second.fetch_offset = offset;
  it->second.reset.reset();
  it->second.out_of_range_at.reset();
}

void Consumer::reset_to(const std::vector<TopicPartition>& partitions, OffsetReset where) {
  for (const TopicPartition& tp : partitions) {
    auto it = state_.find(tp);
    if (it == state_.end()) continue;
    seek(tp, 0);
    it->second.position.reset();
    it->second.fetch_offset.reset();
    it->second.reset = where;
  }
}

void Consumer::seek_to_beginning(const std::vector<TopicPartition>& partitions) {
  reset_to(partitions, OffsetReset::kEarliest);
}

void Consumer::seek_to_end(const std::vector<TopicPartition>& partitions) { reset_to(partitions, OffsetReset::kLatest); }

std::optional<int64_t> Consumer::position(const TopicPartition& tp) const {
  auto it = state_.find(tp);
  if (it == state_.end()) return std::nullopt;
  return it->second.position;
}

std::optional<int64_t> Consumer::end_offset_seen(const TopicPartition& tp) const {
  auto it = state_.find(tp);
  if (it == state_.end()) return std::nullopt;
  return it->second.end_offset;
}

io::Task<absl::Status> Consumer::reset_positions() {
  std::vector<TopicPartition> earliest;
  std::vector<TopicPartition> latest;
  for (auto& [tp, st] : state_) {
    if (!st.reset.has_value()) continue;
    if (*st.reset == OffsetReset::kNone) {
      co_return absl::FailedPreconditionError(fmt::format(
          "OFFSET_OUT_OF_RANGE: no position for {} and auto.offset.reset is none", tp_name(tp)));
    }
    (*st.reset == OffsetReset::kEarliest ? earliest : latest).push_back(tp);
  }
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<TopicPartition>& tps = pass == 0 ? earliest : latest;
    if (tps.empty()) continue;
    std::map<TopicPartition, absl::StatusOr<ListedOffset>> found =
        co_await list_offsets(cluster_, tps, pass == 0 ? kEarliestOffset : kLatestOffset, config_.isolation);
    for (auto& [tp, lo] : found) {
      auto it = state_.find(tp);
      if (it == state_.end() || !it->second.reset.has_value()) continue;  // reassigned or sought meanwhile
      if (!lo.ok()) {
        ctx_->log().debug("consumer: offset lookup for {}: {}", tp_name(tp), lo.status().ToString());
        continue;
      }
      ++stats_.offset_resets;
      it->second.position = lo->offset;
      it->second.fetch_offset = lo->offset;
      it->second.reset.reset();
    }
  }
  co_return absl::OkStatus();
}

namespace {

// Whether a control batch is an abort marker (its one record's key says so).
bool is_abort_marker(const net::BatchView& batch) {
  absl::StatusOr<std::vector<net::Record>> records = net::decode_records(batch.bytes, 1 << 16);
  if (!records.ok() || records->empty() || !(*records)[0].key.has_value()) return false;
  absl::StatusOr<net::ControlRecordKey> key = net::decode_control_record_key((*records)[0].key->span());
  return key.ok() && key->type == net::ControlRecordType::kAbort;
}

}  // namespace

absl::Status Consumer::take_records(const TopicPartition& tp, const io::Buffer& records, int64_t high_watermark,
                                    const std::vector<net::FetchResponse::AbortedTransaction>* aborted) {
  PartitionState& st = state_[tp];
  if (!st.fetch_offset.has_value()) return absl::OkStatus();
  net::BatchIteratorOptions options;
  options.crc = config_.check_crcs ? net::CrcCheck::kVerify : net::CrcCheck::kSkip;
  net::BatchIterator it(records, options);
  int64_t next = *st.fetch_offset;
  // read_committed (Kafka's consumer): the fetch names each aborted
  // transaction that overlaps it by producer id and first offset; from
  // that offset a producer's transactional batches are skipped until its
  // abort marker.
  std::vector<net::FetchResponse::AbortedTransaction> pending;
  if (aborted != nullptr) {
    pending = *aborted;
    std::sort(pending.begin(), pending.end(),
              [](const auto& a, const auto& b) { return a.first_offset > b.first_offset; });
  }
  std::set<int64_t> aborting;
  while (true) {
    absl::StatusOr<std::optional<net::BatchView>> batch = it.next();
    if (!batch.ok()) {
      return absl::DataLossError(fmt::format("{} at offset {}: {}", tp_name(tp), next, std::string(batch.status().message())));
    }
    if (!batch->has_value()) break;
    const net::RecordBatchHeader& h = (*batch)->header;
    stats_.bytes += (*batch)->bytes.size();
    if (h.next_offset() <= next) continue;  // already returned
    bool skip = false;
    if (aborted != nullptr && h.producer_id >= 0) {
      while (!pending.empty() && pending.back().first_offset <= h.last_offset()) {
        aborting.insert(pending.back().producer_id);
        pending.pop_back();
      }
      if (h.is_control()) {
        if (aborting.contains(h.producer_id) && is_abort_marker(**batch)) aborting.erase(h.producer_id);
      } else {
        skip = h.is_transactional() && aborting.contains(h.producer_id);
      }
    }
    if (!h.is_control() && !skip) {
      absl::StatusOr<std::vector<net::Record>> decoded = net::decode_records((*batch)->bytes, std::numeric_limits<int32_t>::max());
      if (!decoded.ok()) {
        return absl::DataLossError(fmt::format("{} at offset {}: {}", tp_name(tp), h.base_offset, std::string(decoded.status().message())));
      }
      for (net::Record& r : *decoded) {
        const int64_t offset = net::record_offset(h, r);
        if (offset < next) continue;
        ConsumerRecord out;
        out.topic = tp.topic;
        out.partition = tp.partition;
        out.offset = offset;
        out.timestamp_ms = net::record_timestamp(h, r);
        out.timestamp_type = h.timestamp_type();
        out.leader_epoch = h.partition_leader_epoch;
        out.key = std::move(r.key);
        out.value = std::move(r.value);
        out.headers = std::move(r.headers);
        buffered_.push_back(std::move(out));
        ++st.buffered;
        ++stats_.records;
      }
    }
    next = h.next_offset();
  }
  st.fetch_offset = next;
  st.end_offset = high_watermark;
  // A partition with nothing buffered has its position where fetching is.
  if (st.buffered == 0) st.position = next;
  return absl::OkStatus();
}

io::Task<absl::Status> Consumer::fetch_from(int32_t broker, std::vector<TopicPartition> partitions, io::Duration wait) {
  net::Peer* peer = cluster_.broker(broker);
  if (peer == nullptr) {
    metadata_wanted_ = true;
    co_return absl::OkStatus();
  }
  Session& session = sessions_[broker];
  const bool sessions = config_.fetch_sessions;
  const bool incremental = sessions && session.epoch > 0;
  net::FetchRequest r;
  r.replica_id = -1;
  r.max_wait_ms = static_cast<int32_t>(std::chrono::duration_cast<std::chrono::milliseconds>(wait).count());
  r.min_bytes = config_.fetch_min_bytes;
  r.max_bytes = config_.fetch_max_bytes;
  r.isolation_level = static_cast<int8_t>(config_.isolation);
  r.session_id = incremental ? session.id : 0;
  r.session_epoch = sessions ? session.epoch : kSessionEpochFinal;
  std::map<TopicPartition, SessionPartition> wanted;
  for (const TopicPartition& tp : partitions) {
    SessionPartition sp;
    sp.fetch_offset = *state_[tp].fetch_offset;
    sp.leader_epoch = cluster_.leader_epoch(tp);
    wanted[tp] = sp;
    if (incremental) {
      auto it = session.partitions.find(tp);
      if (it != session.partitions.end() && it->second.fetch_offset == sp.fetch_offset &&
          it->second.leader_epoch == sp.leader_epoch) {
        continue;  // unchanged: the session has it
      }
    }
    if (r.topics.empty() || r.topics.back().topic != tp.topic) r.topics.emplace_back().topic = tp.topic;
    auto& p = r.topics.back().partitions.emplace_back();
    p.partition = tp.partition;
    p.fetch_offset = sp.fetch_offset;
    p.current_leader_epoch = sp.leader_epoch;
    p.partition_max_bytes = config_.max_partition_fetch_bytes;
  }
  if (incremental) {
    for (const auto& [tp, sp] : session.partitions) {
      if (wanted.contains(tp)) continue;
      if (r.forgotten_topics_data.empty() || r.forgotten_topics_data.back().topic != tp.topic) {
        r.forgotten_topics_data.emplace_back().topic = tp.topic;
      }
      r.forgotten_topics_data.back().partitions.push_back(tp.partition);
    }
  }
  ++stats_.fetches;
  if (incremental) ++stats_.incremental_fetches;
  absl::StatusOr<net::FetchResponse> resp =
      co_await peer->call<net::FetchResponse>(r, kFetchVersion, config_.client.request_timeout + wait);
  if (!resp.ok()) {
    peer->reset();
    session = Session{};
    metadata_wanted_ = true;
    ctx_->log().debug("consumer: fetch from broker {}: {}", broker, resp.status().ToString());
    co_return absl::OkStatus();
  }
  if (resp->error_code == net::code(net::Error::kFetchSessionIdNotFound) ||
      resp->error_code == net::code(net::Error::kInvalidFetchSessionEpoch)) {
    session = Session{};
    ++stats_.session_resets;
    co_return absl::OkStatus();
  }
  if (resp->error_code != 0) {
    session = Session{};
    ctx_->log().debug("consumer: fetch from broker {}: {}", broker, error_text(resp->error_code));
    co_return absl::OkStatus();
  }
  if (sessions) {
    if (resp->session_id == 0) {
      session = Session{};  // the broker keeps no session: full fetches from now on
      session.epoch = 0;
    } else {
      session.id = resp->session_id;
      session.epoch = incremental ? (session.epoch == std::numeric_limits<int32_t>::max() ? 1 : session.epoch + 1) : 1;
      session.partitions = wanted;
    }
  }
  absl::Status result = absl::OkStatus();
  for (const auto& t : resp->responses) {
    for (const auto& p : t.partitions) {
      TopicPartition tp(t.topic, p.partition_index);
      auto st = state_.find(tp);
      auto w = wanted.find(tp);
      if (st == state_.end() || w == wanted.end() || st->second.fetch_offset != w->second.fetch_offset) {
        continue;  // reassigned or sought while the fetch was out
      }
      using net::Error;
      if (p.error_code == 0) {
        if (p.records.has_value()) {
          static const std::vector<net::FetchResponse::AbortedTransaction> kNoneAborted;
          const bool committed = config_.isolation == IsolationLevel::kReadCommitted;
          const std::vector<net::FetchResponse::AbortedTransaction>* aborted =
              !committed                           ? nullptr
              : p.aborted_transactions.has_value() ? &*p.aborted_transactions
                                                   : &kNoneAborted;
          absl::Status taken = take_records(
              tp, *p.records, committed && p.last_stable_offset >= 0 ? p.last_stable_offset : p.high_watermark, aborted);
          if (!taken.ok() && result.ok()) result = taken;
        } else {
          st->second.end_offset = p.high_watermark;
        }
      } else if (p.error_code == net::code(Error::kOffsetOutOfRange)) {
        ctx_->log().debug("consumer: {} offset {} out of range at broker {} (log start {}, high watermark {})",
                          tp_name(tp), w->second.fetch_offset, broker, p.log_start_offset, p.high_watermark);
        session.partitions.erase(tp);
        if (st->second.out_of_range_at != w->second.fetch_offset) {
          // A leader that lost leadership without knowing it may be behind:
          // look the leader up again, at another broker, and ask once more
          // before resetting.
          st->second.out_of_range_at = w->second.fetch_offset;
          metadata_wanted_ = true;
          metadata_not_from_ = broker;
        } else {
          drop_buffered(tp, st->second);
          st->second.out_of_range_at.reset();
          st->second.position.reset();
          st->second.fetch_offset.reset();
          st->second.reset = config_.auto_offset_reset;
        }
      } else {
        if (is_stale_metadata(p.error_code)) metadata_wanted_ = true;
        session.partitions.erase(tp);  // fetch it afresh next time
        ctx_->log().debug("consumer: fetch {}: {}", tp_name(tp), error_text(p.error_code));
      }
    }
  }
  co_return result;
}

std::vector<ConsumerRecord> Consumer::drain() {
  std::vector<ConsumerRecord> out;
  while (!buffered_.empty() && out.size() < config_.max_poll_records) {
    out.push_back(std::move(buffered_.front()));
    buffered_.pop_front();
  }
  // Positions move past what is handed out; a partition left with nothing
  // buffered has its position where fetching is.
  for (const ConsumerRecord& r : out) {
    auto it = state_.find(TopicPartition(r.topic, r.partition));
    if (it == state_.end()) continue;
    PartitionState& st = it->second;
    st.position = r.offset + 1;
    BROOK_ASSERT(st.buffered > 0);
    if (--st.buffered == 0 && st.fetch_offset.has_value()) st.position = st.fetch_offset;
  }
  return out;
}

io::Task<absl::StatusOr<std::vector<ConsumerRecord>>> Consumer::poll(io::Duration timeout) {
  const io::Clock& clock = ctx_->clock();
  const io::Instant deadline = clock.now() + timeout;
  while (true) {
    if (!buffered_.empty()) co_return drain();
    if (metadata_wanted_ && !assignment_.empty()) {
      std::set<std::string> topics;
      for (const TopicPartition& tp : assignment_) topics.insert(tp.topic);
      absl::Status s =
          co_await cluster_.refresh(std::vector<std::string>(topics.begin(), topics.end()), metadata_not_from_);
      if (absl::IsUnauthenticated(s)) co_return s;
      if (s.ok()) {
        metadata_wanted_ = false;
        metadata_not_from_.reset();
      }
    }
    if (absl::Status s = co_await reset_positions(); !s.ok()) co_return s;
    std::map<int32_t, std::vector<TopicPartition>> by_leader;
    for (const TopicPartition& tp : assignment_) {
      const PartitionState& st = state_[tp];
      if (!st.fetch_offset.has_value()) continue;
      const int32_t leader = cluster_.leader(tp);
      if (leader < 0) {
        metadata_wanted_ = true;
        continue;
      }
      by_leader[leader].push_back(tp);
    }
    const io::Instant now = clock.now();
    const io::Duration left = std::max(deadline - now, io::Duration::zero());
    if (by_leader.empty()) {
      if (now >= deadline) co_return drain();
      co_await clock.sleep_for(std::min(left, config_.client.retry_backoff));
      continue;
    }
    const io::Duration wait = std::min(left, config_.fetch_max_wait);
    std::vector<io::Task<absl::Status>> fetches;
    for (auto& [broker, tps] : by_leader) fetches.push_back(fetch_from(broker, std::move(tps), wait));
    std::vector<absl::Status> results = co_await io::when_all(std::move(fetches));
    for (const absl::Status& s : results) {
      if (!s.ok()) co_return s;
    }
    if (!buffered_.empty()) co_return drain();
    if (clock.now() >= deadline) co_return drain();
    if (metadata_wanted_) co_await clock.sleep_for(std::min(deadline - clock.now(), config_.client.retry_backoff));
  }
}

}  // namespace brook::client
