// core/broker/transactions.cc: the broker's side of the transaction
// coordinator: the __transaction_state partitions it leads, the
// transactional APIs, and commit and abort markers (WriteTxnMarkers).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/broker/broker.h"
#include "io/status.h"
#include "io/when.h"
#include "net/kafka/messages/add_offsets_to_txn_request.h"
#include "net/kafka/messages/add_offsets_to_txn_response.h"
#include "net/kafka/messages/add_partitions_to_txn_request.h"
#include "net/kafka/messages/add_partitions_to_txn_response.h"
#include "net/kafka/messages/describe_transactions_request.h"
#include "net/kafka/messages/describe_transactions_response.h"
#include "net/kafka/messages/end_txn_request.h"
#include "net/kafka/messages/end_txn_response.h"
#include "net/kafka/messages/list_transactions_request.h"
#include "net/kafka/messages/list_transactions_response.h"
#include "net/kafka/messages/write_txn_markers_request.h"
#include "net/kafka/messages/write_txn_markers_response.h"
#include "net/kafka/record_batch.h"

namespace brook::broker {

namespace {

using namespace std::chrono_literals;
using net::Error;

const std::string& txn_topic() {
  static const std::string name(txn::kTransactionStateTopic);
  return name;
}

// How long one WriteTxnMarkers to another broker may take.
constexpr io::Duration kMarkerRequestTimeout = 30s;
// How long a transaction coordinator may take to verify a partition.
constexpr io::Duration kVerifyRequestTimeout = 10s;

}  // namespace

// --- the coordinator's host -------------------------------------------------------

io::Task<runtime::RecordLog::Written> Broker::TxnHost::write(int32_t partition, int32_t epoch,
                                                             std::vector<runtime::Record> records) {
  co_return co_await broker_->txn_writer_.write(partition, epoch, std::move(records));
}

io::Task<absl::StatusOr<int64_t>> Broker::TxnHost::allocate_producer_id() {
  co_return co_await broker_->next_producer_id(broker_->ctx_->clock().now() + 10s);
}

bool Broker::TxnHost::partition_exists(const std::string& topic, int32_t partition) const {
  return broker_->partition_exists(topic, partition);
}

io::Task<Error> Broker::TxnHost::write_markers(const txn::TxnMarkers& markers, std::function<bool()> still_coordinator) {
  Broker& b = *broker_;
  std::set<txn::TopicPartition> left = markers.partitions;
  while (!left.empty()) {
    if (!still_coordinator()) co_return Error::kNotCoordinator;
    // The partitions by their leader now; a partition whose topic is gone
    // needs no marker. AddPartitionsToTxn takes only partitions this
    // broker knows, but AddOffsetsToTxn may name __consumer_offsets before
    // it is made (clients look up the group's coordinator, which makes it,
    // afterwards): that topic is made here if need be, never taken as gone.
    std::map<int32_t, std::vector<txn::TopicPartition>> by_leader;
    bool offsets_topic_missing = false;
    for (auto it = left.begin(); it != left.end();) {
      const metadata::PartitionRegistration* reg = b.registration(it->first, it->second);
      if (reg == nullptr && it->first == group::kOffsetsTopic) {
        offsets_topic_missing = true;
        ++it;
        continue;
      }
      if (reg == nullptr) {
        it = left.erase(it);
        continue;
      }
      if (reg->leader >= 0) by_leader[reg->leader].push_back(*it);
      ++it;
    }
    if (offsets_topic_missing) (void)co_await b.ensure_offsets_topic();
    for (const auto& [leader, partitions] : by_leader) {
      std::vector<std::pair<txn::TopicPartition, Error>> results;
      if (leader == b.config_.node_id) {
        for (const txn::TopicPartition& tp : partitions) {
          const Error e = co_await b.append_marker(tp.first, tp.second, markers.producer_id, markers.producer_epoch,
                                                   markers.commit, markers.coordinator_epoch);
          results.emplace_back(tp, e);
        }
      } else {
        std::optional<io::Address> address = b.broker_address(leader);
        if (!address.has_value()) continue;
        net::Peer& peer = b.marker_peers_.get(leader, *address);
        net::WriteTxnMarkersRequest request;
        auto& m = request.markers.emplace_back();
        m.producer_id = markers.producer_id;
        m.producer_epoch = markers.producer_epoch;
        m.transaction_result = markers.commit;
        m.coordinator_epoch = markers.coordinator_epoch;
        for (const txn::TopicPartition& tp : partitions) {
          if (m.topics.empty() || m.topics.back().name != tp.first) m.topics.emplace_back().name = tp.first;
          m.topics.back().partition_indexes.push_back(tp.second);
        }
        absl::StatusOr<net::WriteTxnMarkersResponse> response =
            co_await peer.call<net::WriteTxnMarkersResponse>(request, 1, kMarkerRequestTimeout);
        if (!response.ok()) {
          b.ctx_->log().debug("transaction coordinator: markers to {}: {}", leader, response.status().ToString());
          continue;
        }
        for (const auto& mr : response->markers) {
          for (const auto& tr : mr.topics) {
            for (const auto& pr : tr.partitions) {
              results.emplace_back(txn::TopicPartition{tr.name, pr.partition_index}, static_cast<Error>(pr.error_code));
            }
          }
        }
      }
      for (const auto& [tp, e] : results) {
        switch (e) {
          case Error::kNone:
            left.erase(tp);
            break;
          // A newer coordinator or producer epoch already wrote there: this
          // transaction is no longer ours to mark (as Kafka's
          // TransactionMarkerRequestCompletionHandler).
          case Error::kTransactionCoordinatorFenced:
          case Error::kInvalidProducerEpoch:
            co_return e;
          default:
            b.ctx_->log().debug("transaction coordinator: marker for {}-{}: {}", tp.first, tp.second,
                                net::error_name(net::code(e)));
            break;
        }
      }
    }
    if (!left.empty()) co_await b.ctx_->clock().sleep_for(b.config_.txn.marker_retry_backoff);
  }
  co_return Error::kNone;
}

io::Task<Error> Broker::append_marker(std::string topic, int32_t index, int64_t producer_id, int16_t producer_epoch,
                                      bool commit, int32_t coordinator_epoch) {
  std::shared_ptr<Partition> p = find(topic, index);
  if (p == nullptr) {
    co_return partition_exists(topic, index) ? Error::kNotLeaderOrFollower : Error::kUnknownTopicOrPartition;
  }
  if (!p->is_leader(config_.node_id)) co_return Error::kNotLeaderOrFollower;
  // Markers are written with acks=all.
  if (static_cast<int32_t>(p->isr.size()) < p->min_insync_replicas) co_return Error::kNotEnoughReplicas;
  // The producer's transaction here ends with this marker: a batch verified
  // for it but not yet appended must not start another (KIP-890).
  p->txn_verifications.erase(producer_id);
  net::TxnMarkerBatch marker;
  marker.type = commit ? net::ControlRecordType::kCommit : net::ControlRecordType::kAbort;
  marker.producer_id = producer_id;
  marker.producer_epoch = producer_epoch;
  marker.coordinator_epoch = coordinator_epoch;
  marker.timestamp_ms = io::to_ms(ctx_->clock().wall_now());
  const int32_t leader_epoch = p->leader_epoch;
  absl::StatusOr<storage::AppendResult> appended = co_await p->log->append_as_leader(
      net::build_txn_marker_batch(marker), leader_epoch, storage::AppendOrigin::kCoordinator);
  if (!appended.ok()) co_return partition_log_failed(p, appended.status());
  if (!appended->ok()) co_return appended->error;
  maybe_advance_high_watermark(*p);
  appended_.notify();
  const int64_t end = appended->last_offset + 1;
  const io::Instant deadline = ctx_->clock().now() + kMarkerRequestTimeout;
  while (true) {
    const uint64_t seen = appended_.seen();
    if (p->log->high_watermark() >= end) break;
    if (find(topic, index) != p || p->leader_epoch != leader_epoch) co_return Error::kNotLeaderOrFollower;
    if (ctx_->clock().now() >= deadline) co_return Error::kRequestTimedOut;
    (void)co_await io::with_deadline(ctx_->clock(), deadline, appended_.changed_since(seen));
  }
  if (topic == group::kOffsetsTopic) groups_.complete_transaction(index, producer_id, commit);
  co_return Error::kNone;
}

// --- verification (KIP-890) -------------------------------------------------------

io::Task<std::map<txn::TopicPartition, Error>> Broker::verify_txn_partitions(std::string transactional_id,
                                                                             int64_t producer_id,
                                                                             int16_t producer_epoch,
                                                                             std::set<txn::TopicPartition> partitions) {
  std::map<txn::TopicPartition, Error> out;
  auto all = [&](Error e) {
    for (const txn::TopicPartition& tp : partitions) out[tp] = e;
    return out;
  };
  // The coordinator is the leader of the id's __transaction_state partition.
  // Only the leader is kept: the image that holds the registration is
  // replaced by any metadata change while the call is under way.
  const metadata::PartitionRegistration* reg = registration(txn_topic(), txns_.partition_for(transactional_id));
  const int32_t leader = reg == nullptr ? -1 : reg->leader;
  if (leader < 0) co_return all(Error::kNotEnoughReplicas);
  net::AddPartitionsToTxnRequest request;
  auto& txn = request.transactions.emplace_back();
  txn.transactional_id = transactional_id;
  txn.producer_id = producer_id;
  txn.producer_epoch = producer_epoch;
  txn.verify_only = true;
  for (const txn::TopicPartition& tp : partitions) {
    if (txn.topics.empty() || txn.topics.back().name != tp.first) txn.topics.emplace_back().name = tp.first;
    txn.topics.back().partitions.push_back(tp.second);
  }
  constexpr int16_t kVersion = 4;
  net::AddPartitionsToTxnResponse response;
  if (leader == config_.node_id) {
    response = co_await txns_.add_partitions(std::move(request), kVersion);
  } else {
    std::optional<io::Address> address = broker_address(leader);
    if (!address.has_value()) co_return all(Error::kNotEnoughReplicas);
    net::Peer& peer = verify_peers_.get(leader, *address);
    absl::StatusOr<net::AddPartitionsToTxnResponse> answer =
        co_await peer.call<net::AddPartitionsToTxnResponse>(request, kVersion, kVerifyRequestTimeout);
    if (!answer.ok()) {
      ctx_->log().debug("broker: verifying {} with {}: {}", transactional_id, leader,
                        answer.status().ToString());
      co_return all(Error::kNotEnoughReplicas);
    }
    response = *std::move(answer);
  }
  // Produce's answers, as Kafka gives them to producers before KIP-890's
  // second part: a coordinator that is busy, moving or unreachable is
  // NOT_ENOUGH_REPLICAS (retriable for every client); a fenced producer is
  // INVALID_PRODUCER_EPOCH.
  auto for_produce = [](Error e) {
    switch (e) {
      case Error::kNotCoordinator:
      case Error::kCoordinatorNotAvailable:
      case Error::kCoordinatorLoadInProgress:
      case Error::kConcurrentTransactions:
        return Error::kNotEnoughReplicas;
      case Error::kProducerFenced:
        return Error::kInvalidProducerEpoch;
      default:
        return e;
    }
  };
  if (response.error_code != 0) co_return all(for_produce(static_cast<Error>(response.error_code)));
  // A partition the answer leaves out is not verified.
  all(Error::kInvalidTxnState);
  for (const auto& result : response.results_by_transaction) {
    if (result.transactional_id != transactional_id) continue;
    for (const auto& topic : result.topic_results) {
      for (const auto& pr : topic.results_by_partition) {
        auto it = out.find(txn::TopicPartition{topic.name, pr.partition_index});
        if (it != out.end()) it->second = for_produce(static_cast<Error>(pr.partition_error_code));
      }
    }
  }
  co_return out;
}

io::Task<std::map<txn::TopicPartition, Broker::TxnCheck>> Broker::verify_first_txn_writes(
    std::string transactional_id, int64_t producer_id, int16_t producer_epoch,
    std::vector<std::shared_ptr<Partition>> partitions) {
  std::map<txn::TopicPartition, TxnCheck> checks;
  std::set<txn::TopicPartition> asked;
  for (const std::shared_ptr<Partition>& p : partitions) {
    if (p->log->producer_state().has_ongoing_transaction(producer_id)) continue;
    // Checks of one producer's writes share a guard until a marker for it
    // ends them.
    auto [entry, fresh] = p->txn_verifications.try_emplace(producer_id);
    if (fresh) entry->second.guard = ++next_verification_guard_;
    ++entry->second.in_flight;
    const txn::TopicPartition tp{p->topic, p->index};
    checks.insert_or_assign(tp, TxnCheck{p, entry->second.guard, Error::kNone});
    asked.insert(tp);
  }
  if (asked.empty()) co_return checks;
  std::map<txn::TopicPartition, Error> answers =
      co_await verify_txn_partitions(std::move(transactional_id), producer_id, producer_epoch, std::move(asked));
  for (auto& [tp, check] : checks) {
    auto answer = answers.find(tp);
    check.error = answer == answers.end() ? Error::kInvalidTxnState : answer->second;
    auto entry = check.partition->txn_verifications.find(producer_id);
    if (entry == check.partition->txn_verifications.end() || entry->second.guard != check.guard) continue;
    --entry->second.in_flight;
    if (check.error == Error::kNone) {
      entry->second.verified = true;
    } else if (entry->second.in_flight == 0 && !entry->second.verified) {
      // A failed check's entry goes once no other one shares it.
      check.partition->txn_verifications.erase(entry);
    }
  }
  co_return checks;
}

bool Broker::still_verified(const TxnCheck& check, int64_t producer_id) {
  if (check.error != Error::kNone) return false;
  if (find(check.partition->topic, check.partition->index) != check.partition) return false;
  auto entry = check.partition->txn_verifications.find(producer_id);
  return entry != check.partition->txn_verifications.end() && entry->second.guard == check.guard;
}

// --- loading ----------------------------------------------------------------------

void Broker::sync_txn_coordinator() { sync_shards(txns_, txn_partitions_, "transaction coordinator"); }

io::Task<bool> Broker::ensure_txn_topic() {
  std::vector<std::pair<std::string, std::string>> configs;
  configs.emplace_back("cleanup.policy", "compact");
  configs.emplace_back("compression.type", "uncompressed");
  configs.emplace_back("segment.bytes", "104857600");
  configs.emplace_back("min.insync.replicas", std::to_string(config_.transaction_state_min_isr));
  configs.emplace_back("unclean.leader.election.enable", "false");
  co_return co_await ensure_internal_topic(txn_topic(), config_.txn.state_topic_partitions,
                                           config_.transaction_state_replication_factor, std::move(configs));
}

// --- the APIs ---------------------------------------------------------------------

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_txn_request(const net::RequestFrame& frame) {
  const int16_t version = frame.header.request_api_version;
  switch (frame.header.request_api_key) {
    case net::AddPartitionsToTxnRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::AddPartitionsToTxnRequest request,
                          net::decode_body<net::AddPartitionsToTxnRequest>(frame));
      net::AddPartitionsToTxnResponse response = co_await txns_.add_partitions(std::move(request), version);
      co_return net::encode_response(response, frame.header);
    }
    case net::AddOffsetsToTxnRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::AddOffsetsToTxnRequest request, net::decode_body<net::AddOffsetsToTxnRequest>(frame));
      net::AddOffsetsToTxnResponse response = co_await txns_.add_offsets(std::move(request), version);
      co_return net::encode_response(response, frame.header);
    }
    case net::EndTxnRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::EndTxnRequest request, net::decode_body<net::EndTxnRequest>(frame));
      net::EndTxnResponse response = co_await txns_.end_txn(std::move(request), version);
      co_return net::encode_response(response, frame.header);
    }
    case net::DescribeTransactionsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::DescribeTransactionsRequest request,
                          net::decode_body<net::DescribeTransactionsRequest>(frame));
      co_return net::encode_response(txns_.describe(request), frame.header);
    }
    case net::ListTransactionsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::ListTransactionsRequest request, net::decode_body<net::ListTransactionsRequest>(frame));
      co_return net::encode_response(txns_.list(request), frame.header);
    }
    case net::WriteTxnMarkersRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::WriteTxnMarkersRequest request, net::decode_body<net::WriteTxnMarkersRequest>(frame));
      net::WriteTxnMarkersResponse response;
      for (const auto& m : request.markers) {
        auto& mr = response.markers.emplace_back();
        mr.producer_id = m.producer_id;
        for (const auto& t : m.topics) {
          auto& tr = mr.topics.emplace_back();
          tr.name = t.name;
          for (int32_t index : t.partition_indexes) {
            auto& pr = tr.partitions.emplace_back();
            pr.partition_index = index;
            const Error e = co_await append_marker(t.name, index, m.producer_id, m.producer_epoch, m.transaction_result,
                                                   m.coordinator_epoch);
            pr.error_code = net::code(e);
          }
        }
      }
      co_return net::encode_response(response, frame.header);
    }
    default:
      co_return absl::InternalError(fmt::format("broker: API key {} is not a transaction API",
                                                frame.header.request_api_key));
  }
}

}  // namespace brook::broker
