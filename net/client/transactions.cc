// net/client/transactions.cc
#include "net/client/transactions.h"

#include <algorithm>
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

namespace brook::client {

namespace {

constexpr int16_t kListTransactionsVersion = 0;
constexpr int16_t kDescribeTransactionsVersion = 0;
constexpr int16_t kDescribeProducersVersion = 0;
constexpr int8_t kTransactionKey = 1;

bool coordinator_error(int16_t code) {
  return code == net::code(net::Error::kNotCoordinator) || code == net::code(net::Error::kCoordinatorNotAvailable) ||
         code == net::code(net::Error::kCoordinatorLoadInProgress);
}

}  // namespace

io::Task<absl::StatusOr<std::vector<TransactionListing>>> list_transactions(Cluster& cluster) {
  CO_RETURN_IF_ERROR(co_await cluster.refresh({}));
  std::vector<int32_t> ids;
  for (const auto& [id, b] : cluster.brokers()) ids.push_back(id);
  std::vector<TransactionListing> out;
  for (const int32_t id : ids) {
    net::Peer* peer = cluster.broker(id);
    if (peer == nullptr) continue;
    net::ListTransactionsRequest r;
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

}  // namespace brook::client
