// net/client/transactions.cc
#include "net/client/transactions.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "io/status.h"
#include "net/client/group.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/describe_producers_request.h"
#include "net/kafka/messages/describe_producers_response.h"
#include "net/kafka/messages/describe_transactions_request.h"
#include "net/kafka/messages/describe_transactions_response.h"
#include "net/kafka/messages/list_transactions_request.h"
#include "net/kafka/messages/list_transactions_response.h"
#include "net/kafka/messages/metadata_response.h"
#include "net/kafka/messages/write_txn_markers_request.h"
#include "net/kafka/messages/write_txn_markers_response.h"

namespace brook::client {

namespace {

constexpr int16_t kListTransactionsVersion = 0;
constexpr int16_t kDescribeTransactionsVersion = 0;
constexpr int16_t kDescribeProducersVersion = 0;
constexpr int16_t kWriteTxnMarkersVersion = 1;
constexpr int8_t kTransactionKey = 1;

}  // namespace

io::Task<absl::StatusOr<std::vector<TransactionListing>>> list_transactions(Cluster& cluster,
                                                                           std::vector<int64_t> producer_ids) {
  CO_RETURN_IF_ERROR(co_await cluster.refresh({}));
  std::vector<int32_t> ids;
  for (const auto& [id, b] : cluster.brokers()) ids.push_back(id);
  std::vector<TransactionListing> out;
  for (const int32_t id : ids) {
    net::Peer* peer = cluster.broker(id);
    if (peer == nullptr) continue;
    net::ListTransactionsRequest r;
    r.producer_id_filters = producer_ids;
    absl::StatusOr<net::ListTransactionsResponse> listed = co_await coordinator_call<net::ListTransactionsResponse>(
        peer, r, kListTransactionsVersion, cluster.options().request_timeout);
    if (!listed.ok()) co_return listed.status();
    if (listed->error_code != 0) co_return error_status(listed->error_code, fmt::format("ListTransactions to {}", id));
    for (const auto& t : listed->transaction_states) {
      out.push_back(TransactionListing{t.transactional_id, t.producer_id, t.transaction_state, id});
    }
  }
  std::sort(out.begin(), out.end(), [](const TransactionListing& a, const TransactionListing& b) {
    return a.transactional_id < b.transactional_id;
  });
  co_return out;
}

io::Task<absl::StatusOr<TransactionDescription>> describe_transaction(Cluster& cluster,
                                                                      const std::string& transactional_id) {
  const io::Clock& clock = cluster.context().clock();
  const io::Instant deadline = clock.now() + cluster.options().request_timeout;
  while (true) {
    CO_ASSIGN_OR_RETURN(auto coordinator, co_await find_coordinator(cluster, transactional_id, kTransactionKey));
    net::DescribeTransactionsRequest r;
    r.transactional_ids.push_back(transactional_id);
    absl::StatusOr<net::DescribeTransactionsResponse> described =
        co_await coordinator_call<net::DescribeTransactionsResponse>(coordinator.second, r,
                                                                     kDescribeTransactionsVersion,
                                                                     cluster.options().request_timeout);
    if (!described.ok()) co_return described.status();
    if (described->transaction_states.size() != 1) {
      co_return absl::DataLossError("DescribeTransactions: not one transaction in the answer");
    }
    const auto& t = described->transaction_states[0];
    if (coordinator_error(t.error_code) && clock.now() + cluster.options().retry_backoff < deadline) {
      co_await clock.sleep_for(cluster.options().retry_backoff);
      continue;
    }
    if (t.error_code == net::code(net::Error::kTransactionalIdNotFound)) {
      co_return absl::NotFoundError(fmt::format("transactional id {} is not known", transactional_id));
    }
    if (t.error_code != 0) co_return error_status(t.error_code, "DescribeTransactions");
    TransactionDescription out;
    out.transactional_id = t.transactional_id;
    out.coordinator = coordinator.first;
    out.state = t.transaction_state;
    out.producer_id = t.producer_id;
    out.producer_epoch = t.producer_epoch;
    out.timeout_ms = t.transaction_timeout_ms;
    out.start_time_ms = t.transaction_start_time_ms;
    for (const auto& topic : t.topics) {
      for (const int32_t p : topic.partitions) out.partitions.emplace_back(topic.topic, p);
    }
    std::sort(out.partitions.begin(), out.partitions.end());
    co_return out;
  }
}

io::Task<absl::StatusOr<std::vector<ProducerState>>> describe_producers(Cluster& cluster, TopicPartition tp) {
  const io::Clock& clock = cluster.context().clock();
  const io::Instant deadline = clock.now() + cluster.options().request_timeout;
  while (true) {
    // (An admin call: it never creates the topic.)
    std::vector<std::string> topics{tp.topic};
    absl::StatusOr<net::MetadataResponse> metadata = co_await cluster.fetch_metadata(std::move(topics), false);
    if (!metadata.ok()) co_return metadata.status();
    // Without a known leader any broker answers: UNKNOWN_TOPIC_OR_PARTITION
    // for a partition the cluster does not have, NOT_LEADER_OR_FOLLOWER
    // (retried) for one whose leader is on its way.
    const int32_t leader = cluster.leader(tp);
    net::Peer* peer = leader < 0 ? nullptr : cluster.broker(leader);
    if (peer == nullptr) peer = &cluster.any();
    net::DescribeProducersRequest r;
    auto& t = r.topics.emplace_back();
    t.name = tp.topic;
    t.partition_indexes.push_back(tp.partition);
    absl::StatusOr<net::DescribeProducersResponse> described = co_await coordinator_call<net::DescribeProducersResponse>(
        peer, r, kDescribeProducersVersion, cluster.options().request_timeout);
    if (!described.ok()) co_return described.status();
    if (described->topics.size() != 1 || described->topics[0].partitions.size() != 1) {
      co_return absl::DataLossError("DescribeProducers: not one partition in the answer");
    }
    const auto& answer = described->topics[0].partitions[0];
    if (answer.error_code == net::code(net::Error::kNotLeaderOrFollower) &&
        clock.now() + cluster.options().retry_backoff < deadline) {
      co_await clock.sleep_for(cluster.options().retry_backoff);
      continue;
    }
    if (answer.error_code != 0) {
      co_return error_status(answer.error_code, answer.error_message.value_or("DescribeProducers"));
    }
    std::vector<ProducerState> out;
    for (const auto& p : answer.active_producers) {
      out.push_back(ProducerState{p.producer_id, p.producer_epoch, p.last_sequence, p.last_timestamp,
                                  p.coordinator_epoch, p.current_txn_start_offset});
    }
    co_return out;
  }
}

io::Task<absl::StatusOr<std::vector<HangingTransaction>>> find_hanging_transactions(
    Cluster& cluster, std::vector<TopicPartition> partitions, io::Duration max_transaction_timeout) {
  const int64_t now_ms = io::to_ms(cluster.context().clock().wall_now());
  const int64_t max_ms = std::chrono::duration_cast<std::chrono::milliseconds>(max_transaction_timeout).count();
  // Open transactions whose producer has been quiet past the longest
  // timeout a coordinator allows.
  std::vector<HangingTransaction> candidates;
  std::set<int64_t> producer_ids;
  for (const TopicPartition& tp : partitions) {
    absl::StatusOr<std::vector<ProducerState>> producers = co_await describe_producers(cluster, tp);
    if (!producers.ok()) co_return producers.status();
    for (const ProducerState& p : *producers) {
      if (p.current_txn_start_offset < 0 || now_ms - p.last_timestamp_ms <= max_ms) continue;
      candidates.push_back(HangingTransaction{tp, p});
      producer_ids.insert(p.producer_id);
    }
  }
  if (candidates.empty()) co_return candidates;
  // What the coordinators hold for those producers.
  absl::StatusOr<std::vector<TransactionListing>> listed =
      co_await list_transactions(cluster, std::vector<int64_t>(producer_ids.begin(), producer_ids.end()));
  if (!listed.ok()) co_return listed.status();
  std::set<std::pair<int64_t, TopicPartition>> held;  // producer id, partition: ongoing at a coordinator
  for (const TransactionListing& t : *listed) {
    absl::StatusOr<TransactionDescription> d = co_await describe_transaction(cluster, t.transactional_id);
    if (absl::IsNotFound(d.status())) continue;  // expired meanwhile
    if (!d.ok()) co_return d.status();
    if (d->state != "Ongoing" && d->state != "PrepareCommit" && d->state != "PrepareAbort" &&
        d->state != "PrepareEpochFence") {
      continue;
    }
    for (const TopicPartition& tp : d->partitions) held.emplace(d->producer_id, tp);
  }
  std::erase_if(candidates, [&held](const HangingTransaction& h) {
    return held.contains(std::make_pair(h.producer.producer_id, h.partition));
  });
  co_return candidates;
}

io::Task<absl::Status> abort_transaction(Cluster& cluster, TopicPartition tp, int64_t start_offset) {
  absl::StatusOr<std::vector<ProducerState>> producers = co_await describe_producers(cluster, tp);
  if (!producers.ok()) co_return producers.status();
  auto open = std::find_if(producers->begin(), producers->end(),
                           [start_offset](const ProducerState& p) { return p.current_txn_start_offset == start_offset; });
  if (open == producers->end()) {
    co_return absl::NotFoundError(
        fmt::format("no transaction is open on {}-{} from offset {}", tp.topic, tp.partition, start_offset));
  }
  net::WriteTxnMarkersRequest r;
  auto& marker = r.markers.emplace_back();
  marker.producer_id = open->producer_id;
  marker.producer_epoch = static_cast<int16_t>(open->producer_epoch);
  marker.transaction_result = false;
  marker.coordinator_epoch = std::max(open->coordinator_epoch, 0);
  auto& topic = marker.topics.emplace_back();
  topic.name = tp.topic;
  topic.partition_indexes.push_back(tp.partition);
  const int32_t leader = cluster.leader(tp);
  net::Peer* peer = leader < 0 ? nullptr : cluster.broker(leader);
  if (peer == nullptr) co_return absl::UnavailableError(fmt::format("{}-{} has no leader", tp.topic, tp.partition));
  absl::StatusOr<net::WriteTxnMarkersResponse> written = co_await peer->call<net::WriteTxnMarkersResponse>(
      r, kWriteTxnMarkersVersion, cluster.options().request_timeout);
  if (!written.ok()) co_return written.status();
  if (written->markers.size() != 1 || written->markers[0].topics.size() != 1 ||
      written->markers[0].topics[0].partitions.size() != 1) {
    co_return absl::DataLossError("WriteTxnMarkers: not one partition in the answer");
  }
  const int16_t e = written->markers[0].topics[0].partitions[0].error_code;
  if (e != 0) co_return error_status(e, "WriteTxnMarkers");
  co_return absl::OkStatus();
}

}  // namespace brook::client
