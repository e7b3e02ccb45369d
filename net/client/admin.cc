// net/client/admin.cc
#include "net/client/admin.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

#include "net/kafka/errors.h"
#include "net/kafka/messages/alter_user_scram_credentials_request.h"
#include "net/kafka/messages/alter_user_scram_credentials_response.h"
#include "net/kafka/messages/alter_partition_reassignments_request.h"
#include "net/kafka/messages/alter_partition_reassignments_response.h"
#include "net/kafka/messages/create_partitions_request.h"
#include "net/kafka/messages/create_partitions_response.h"
#include "net/kafka/messages/create_topics_request.h"
#include "net/kafka/messages/create_topics_response.h"
#include "net/kafka/messages/delete_records_request.h"
#include "net/kafka/messages/delete_records_response.h"
#include "net/kafka/messages/delete_topics_request.h"
#include "net/kafka/messages/delete_topics_response.h"
#include "net/kafka/messages/describe_configs_request.h"
#include "net/kafka/messages/describe_configs_response.h"
#include "net/kafka/messages/describe_user_scram_credentials_request.h"
#include "net/kafka/messages/describe_user_scram_credentials_response.h"
#include "net/kafka/messages/incremental_alter_configs_request.h"
#include "net/kafka/messages/incremental_alter_configs_response.h"
#include "net/kafka/messages/list_offsets_request.h"
#include "net/kafka/messages/list_offsets_response.h"
#include "net/kafka/messages/list_partition_reassignments_request.h"
#include "net/kafka/messages/list_partition_reassignments_response.h"
#include "net/kafka/messages/metadata_response.h"

namespace brook::client {

namespace {

constexpr int16_t kCreateTopicsVersion = 5;
constexpr int16_t kDeleteTopicsVersion = 4;
constexpr int16_t kCreatePartitionsVersion = 2;
constexpr int16_t kDescribeConfigsVersion = 4;
constexpr int16_t kIncrementalAlterConfigsVersion = 1;
constexpr int16_t kDeleteRecordsVersion = 2;
constexpr int16_t kListOffsetsVersion = 7;

int32_t timeout_ms(const Cluster& c) {
  return static_cast<int32_t>(std::chrono::duration_cast<std::chrono::milliseconds>(c.options().request_timeout).count());
}

// Sends `request` to some broker, trying others (after the retry backoff)
// while connections fail, until the request timeout has passed.
template <typename Resp, typename Req>
io::Task<absl::StatusOr<Resp>> call_any(Cluster& cluster, const Req& request, int16_t version,
                                        io::Instant deadline) {
  const io::Clock& clock = cluster.context().clock();
  absl::Status last = absl::UnavailableError("no broker answered");
  while (true) {
    net::Peer& peer = cluster.any();
    absl::StatusOr<Resp> response = co_await peer.call<Resp>(request, version, cluster.options().request_timeout);
    if (response.ok()) co_return response;
    peer.reset();
    last = response.status();
    if (clock.now() + cluster.options().retry_backoff >= deadline) co_return last;
    co_await clock.sleep_for(cluster.options().retry_backoff);
  }
}

absl::Status item_status(int16_t code, const std::optional<std::string>& message) {
  if (code == 0) return absl::OkStatus();
  return error_status(code, message.value_or(""));
}

bool retry_item(int16_t code) {
  return code == net::code(net::Error::kNotController) || code == net::code(net::Error::kRequestTimedOut) ||
         code == net::code(net::Error::kLeaderNotAvailable);
}

}  // namespace

io::Task<absl::StatusOr<std::map<std::string, CreatedTopic>>> create_topics(Cluster& cluster,
                                                                            std::vector<NewTopic> topics,
                                                                            bool validate_only) {
  const io::Clock& clock = cluster.context().clock();
  const io::Instant deadline = clock.now() + cluster.options().request_timeout;
  std::map<std::string, CreatedTopic> out;
  while (!topics.empty()) {
    net::CreateTopicsRequest r;
    r.timeout_ms = timeout_ms(cluster);
    r.validate_only = validate_only;
    for (const NewTopic& t : topics) {
      auto& ct = r.topics.emplace_back();
      ct.name = t.name;
      ct.num_partitions = t.partitions;
      ct.replication_factor = t.replication_factor;
      for (const auto& [k, v] : t.configs) {
        auto& c = ct.configs.emplace_back();
        c.name = k;
        c.value = v;
      }
    }
    absl::StatusOr<net::CreateTopicsResponse> resp =
        co_await call_any<net::CreateTopicsResponse>(cluster, r, kCreateTopicsVersion, deadline);
    if (!resp.ok()) co_return resp.status();
    std::vector<NewTopic> again;
    for (NewTopic& t : topics) {
      const net::CreateTopicsResponse::CreatableTopicResult* result = nullptr;
      for (const auto& x : resp->topics) {
        if (x.name == t.name) result = &x;
      }
      if (result == nullptr) {
        out[t.name].status = absl::DataLossError("the answer left the topic out");
      } else if (retry_item(result->error_code) && clock.now() + cluster.options().retry_backoff < deadline) {
        again.push_back(std::move(t));
      } else {
        CreatedTopic& c = out[t.name];
        c.status = item_status(result->error_code, result->error_message);
        c.partitions = result->num_partitions;
        c.replication_factor = result->replication_factor;
      }
    }
    topics = std::move(again);
    if (!topics.empty()) co_await clock.sleep_for(cluster.options().retry_backoff);
  }
  co_return out;
}

io::Task<absl::StatusOr<std::map<std::string, absl::Status>>> delete_topics(Cluster& cluster,
                                                                           std::vector<std::string> names) {
  const io::Clock& clock = cluster.context().clock();
  const io::Instant deadline = clock.now() + cluster.options().request_timeout;
  std::map<std::string, absl::Status> out;
  while (!names.empty()) {
    net::DeleteTopicsRequest r;
    r.timeout_ms = timeout_ms(cluster);
    r.topic_names = names;
    absl::StatusOr<net::DeleteTopicsResponse> resp =
        co_await call_any<net::DeleteTopicsResponse>(cluster, r, kDeleteTopicsVersion, deadline);
    if (!resp.ok()) co_return resp.status();
    std::vector<std::string> again;
    for (std::string& name : names) {
      const net::DeleteTopicsResponse::DeletableTopicResult* result = nullptr;
      for (const auto& x : resp->responses) {
        if (x.name == name) result = &x;
      }
      if (result == nullptr) {
        out[name] = absl::DataLossError("the answer left the topic out");
      } else if (retry_item(result->error_code) && clock.now() + cluster.options().retry_backoff < deadline) {
        again.push_back(std::move(name));
      } else {
        out[name] = item_status(result->error_code, result->error_message);
      }
    }
    names = std::move(again);
    if (!names.empty()) co_await clock.sleep_for(cluster.options().retry_backoff);
  }
  co_return out;
}

io::Task<absl::StatusOr<std::map<std::string, absl::Status>>> create_partitions(
    Cluster& cluster, std::map<std::string, int32_t> counts) {
  const io::Clock& clock = cluster.context().clock();
  const io::Instant deadline = clock.now() + cluster.options().request_timeout;
  std::map<std::string, absl::Status> out;
  while (!counts.empty()) {
    net::CreatePartitionsRequest r;
    r.timeout_ms = timeout_ms(cluster);
    for (const auto& [name, count] : counts) {
      auto& t = r.topics.emplace_back();
      t.name = name;
      t.count = count;
      t.assignments = std::nullopt;
    }
    absl::StatusOr<net::CreatePartitionsResponse> resp =
        co_await call_any<net::CreatePartitionsResponse>(cluster, r, kCreatePartitionsVersion, deadline);
    if (!resp.ok()) co_return resp.status();
    std::map<std::string, int32_t> again;
    for (const auto& [name, count] : counts) {
      const net::CreatePartitionsResponse::CreatePartitionsTopicResult* result = nullptr;
      for (const auto& x : resp->results) {
        if (x.name == name) result = &x;
      }
      if (result == nullptr) {
        out[name] = absl::DataLossError("the answer left the topic out");
      } else if (retry_item(result->error_code) && clock.now() + cluster.options().retry_backoff < deadline) {
        again[name] = count;
      } else {
        out[name] = item_status(result->error_code, result->error_message);
      }
    }
    counts = std::move(again);
    if (!counts.empty()) co_await clock.sleep_for(cluster.options().retry_backoff);
  }
  co_return out;
}

io::Task<absl::StatusOr<std::map<TopicPartition, absl::Status>>> alter_partition_reassignments(
    Cluster& cluster, std::map<TopicPartition, std::optional<std::vector<int32_t>>> targets) {
  const io::Clock& clock = cluster.context().clock();
  const io::Instant deadline = clock.now() + cluster.options().request_timeout;
  std::map<TopicPartition, absl::Status> out;
  while (!targets.empty()) {
    net::AlterPartitionReassignmentsRequest r;
    r.timeout_ms = timeout_ms(cluster);
    for (const auto& [tp, replicas] : targets) {
      if (r.topics.empty() || r.topics.back().name != tp.topic) r.topics.emplace_back().name = tp.topic;
      auto& p = r.topics.back().partitions.emplace_back();
      p.partition_index = tp.partition;
      p.replicas = replicas;
    }
    absl::StatusOr<net::AlterPartitionReassignmentsResponse> resp =
        co_await call_any<net::AlterPartitionReassignmentsResponse>(cluster, r, 0, deadline);
    if (!resp.ok()) co_return resp.status();
    if (resp->error_code != 0) co_return item_status(resp->error_code, resp->error_message);
    std::map<TopicPartition, std::optional<std::vector<int32_t>>> again;
    for (auto& [tp, replicas] : targets) {
      const net::AlterPartitionReassignmentsResponse::ReassignablePartitionResponse* result = nullptr;
      for (const auto& t : resp->responses) {
        for (const auto& p : t.partitions) {
          if (t.name == tp.topic && p.partition_index == tp.partition) result = &p;
        }
      }
      if (result == nullptr) {
        out[tp] = absl::DataLossError("the answer left the partition out");
      } else if (retry_item(result->error_code) && clock.now() + cluster.options().retry_backoff < deadline) {
        again.emplace(tp, std::move(replicas));
      } else {
        out[tp] = item_status(result->error_code, result->error_message);
      }
    }
    targets = std::move(again);
    if (!targets.empty()) co_await clock.sleep_for(cluster.options().retry_backoff);
  }
  co_return out;
}

io::Task<absl::StatusOr<std::map<TopicPartition, OngoingReassignment>>> list_partition_reassignments(
    Cluster& cluster, std::vector<TopicPartition> partitions) {
  const io::Instant deadline = cluster.context().clock().now() + cluster.options().request_timeout;
  net::ListPartitionReassignmentsRequest r;
  r.timeout_ms = timeout_ms(cluster);
  if (partitions.empty()) {
    r.topics = std::nullopt;
  } else {
    r.topics.emplace();
    std::sort(partitions.begin(), partitions.end());
    for (const TopicPartition& tp : partitions) {
      if (r.topics->empty() || r.topics->back().name != tp.topic) r.topics->emplace_back().name = tp.topic;
      r.topics->back().partition_indexes.push_back(tp.partition);
    }
  }
  absl::StatusOr<net::ListPartitionReassignmentsResponse> resp =
      co_await call_any<net::ListPartitionReassignmentsResponse>(cluster, r, 0, deadline);
  if (!resp.ok()) co_return resp.status();
  if (resp->error_code != 0) co_return item_status(resp->error_code, resp->error_message);
  std::map<TopicPartition, OngoingReassignment> out;
  for (const auto& t : resp->topics) {
    for (const auto& p : t.partitions) {
      out[TopicPartition(t.name, p.partition_index)] =
          OngoingReassignment{.replicas = p.replicas, .adding = p.adding_replicas, .removing = p.removing_replicas};
    }
  }
  co_return out;
}

io::Task<absl::StatusOr<std::vector<TopicInfo>>> describe_topics(Cluster& cluster, std::vector<std::string> names) {
  std::optional<std::vector<std::string>> asked;
  if (!names.empty()) asked = names;
  absl::StatusOr<net::MetadataResponse> resp = co_await cluster.fetch_metadata(asked, false);
  if (!resp.ok()) co_return resp.status();
  std::vector<TopicInfo> out;
  if (names.empty()) {
    for (const auto& t : resp->topics) {
      if (!t.name.has_value() || t.is_internal) continue;
      names.push_back(*t.name);
    }
    std::sort(names.begin(), names.end());
  }
  for (const std::string& name : names) {
    const TopicInfo* t = cluster.topic(name);
    if (t != nullptr) {
      out.push_back(*t);
    } else {
      TopicInfo missing;
      missing.name = name;
      missing.error_code = net::code(net::Error::kUnknownTopicOrPartition);
      out.push_back(std::move(missing));
    }
  }
  co_return out;
}

io::Task<absl::StatusOr<std::vector<ConfigEntry>>> describe_configs(Cluster& cluster, ResourceType type,
                                                                    std::string name) {
  const io::Instant deadline = cluster.context().clock().now() + cluster.options().request_timeout;
  net::DescribeConfigsRequest r;
  auto& res = r.resources.emplace_back();
  res.resource_type = static_cast<int8_t>(type);
  res.resource_name = name;
  res.configuration_keys = std::nullopt;
  absl::StatusOr<net::DescribeConfigsResponse> resp =
      co_await call_any<net::DescribeConfigsResponse>(cluster, r, kDescribeConfigsVersion, deadline);
  if (!resp.ok()) co_return resp.status();
  if (resp->results.size() != 1) co_return absl::DataLossError("DescribeConfigs answered for another resource count");
  const auto& result = resp->results[0];
  if (result.error_code != 0) co_return item_status(result.error_code, result.error_message);
  std::vector<ConfigEntry> out;
  for (const auto& c : result.configs) {
    ConfigEntry e;
    e.name = c.name;
    e.value = c.value;
    e.read_only = c.read_only;
    e.is_default = c.config_source == 5 || c.is_default;  // DEFAULT_CONFIG
    e.is_sensitive = c.is_sensitive;
    e.source = c.config_source;
    out.push_back(std::move(e));
  }
  co_return out;
}

io::Task<absl::Status> incremental_alter_configs(Cluster& cluster, ResourceType type, std::string name,
                                                 std::vector<AlterConfig> ops) {
  const io::Clock& clock = cluster.context().clock();
  const io::Instant deadline = clock.now() + cluster.options().request_timeout;
  net::IncrementalAlterConfigsRequest r;
  auto& res = r.resources.emplace_back();
  res.resource_type = static_cast<int8_t>(type);
  res.resource_name = name;
  for (const AlterConfig& op : ops) {
    auto& c = res.configs.emplace_back();
    c.name = op.name;
    c.config_operation = static_cast<int8_t>(op.op);
    c.value = op.value;
  }
  while (true) {
    absl::StatusOr<net::IncrementalAlterConfigsResponse> resp =
        co_await call_any<net::IncrementalAlterConfigsResponse>(cluster, r, kIncrementalAlterConfigsVersion, deadline);
    if (!resp.ok()) co_return resp.status();
    if (resp->responses.size() != 1) co_return absl::DataLossError("IncrementalAlterConfigs answered another count");
    const auto& result = resp->responses[0];
    if (retry_item(result.error_code) && clock.now() + cluster.options().retry_backoff < deadline) {
      co_await clock.sleep_for(cluster.options().retry_backoff);
      continue;
    }
    co_return item_status(result.error_code, result.error_message);
  }
}

namespace {

// Calls `report(partition, error code, value)` for each partition a leader's
// answer names.
template <typename Value>
using Report = std::function<void(const TopicPartition&, int16_t, Value)>;

// Sends per-partition requests to each partition's leader (one request per
// leader, made by `build`), and reads the answers with `answers`. Stale
// leaders, broken connections and retriable errors are retried, with fresh
// metadata, until the request timeout.
template <typename Value, typename Resp, typename Req>
io::Task<std::map<TopicPartition, absl::StatusOr<Value>>> to_leaders(
    Cluster& cluster, std::vector<TopicPartition> partitions, int16_t version,
    std::function<Req(const std::vector<TopicPartition>&)> build,
    std::function<void(const Resp&, const Report<Value>&)> answers) {
  const io::Clock& clock = cluster.context().clock();
  const io::Instant deadline = clock.now() + cluster.options().request_timeout;
  std::map<TopicPartition, absl::StatusOr<Value>> out;
  std::set<TopicPartition> left(partitions.begin(), partitions.end());
  absl::Status last = absl::UnavailableError("no leader known");
  bool refresh = false;
  for (const TopicPartition& tp : left) refresh = refresh || cluster.leader(tp) < 0;
  while (!left.empty()) {
    if (refresh) {
      std::set<std::string> topics;
      for (const TopicPartition& tp : left) topics.insert(tp.topic);
      last = co_await cluster.refresh(std::vector<std::string>(topics.begin(), topics.end()));
      refresh = false;
    }
    std::map<int32_t, std::vector<TopicPartition>> by_leader;
    for (const TopicPartition& tp : left) {
      const int32_t leader = cluster.leader(tp);
      if (leader >= 0 && cluster.broker(leader) != nullptr) {
        by_leader[leader].push_back(tp);
        continue;
      }
      refresh = true;
      // A topic or partition that does not exist fails now.
      const TopicInfo* t = cluster.topic(tp.topic);
      if (t != nullptr && t->error_code != 0 && !net::error_retriable(t->error_code)) {
        out.insert_or_assign(tp, absl::StatusOr<Value>(error_status(t->error_code, tp.topic)));
      } else if (t != nullptr && t->error_code == 0 && tp.partition >= static_cast<int32_t>(t->partitions.size())) {
        out.insert_or_assign(tp, absl::StatusOr<Value>(error_status(net::code(net::Error::kUnknownTopicOrPartition),
                                                                    fmt::format("{}-{}", tp.topic, tp.partition))));
      }
    }
    for (const auto& [tp, r] : out) left.erase(tp);
    for (auto& [leader, tps] : by_leader) {
      const Req request = build(tps);
      net::Peer* peer = cluster.broker(leader);
      absl::StatusOr<Resp> resp = co_await peer->call<Resp>(request, version, cluster.options().request_timeout);
      if (!resp.ok()) {
        peer->reset();
        last = resp.status();
        refresh = true;
        continue;
      }
      const Report<Value> report = [&](const TopicPartition& tp, int16_t code, Value value) {
        if (!left.contains(tp)) return;
        const std::string name = fmt::format("{}-{}", tp.topic, tp.partition);
        if (code == 0) {
          out.insert_or_assign(tp, absl::StatusOr<Value>(std::move(value)));
          left.erase(tp);
        } else if (net::error_retriable(code)) {
          last = error_status(code, name);
          refresh = refresh || is_stale_metadata(code);
        } else {
          out.insert_or_assign(tp, absl::StatusOr<Value>(error_status(code, name)));
          left.erase(tp);
        }
      };
      answers(*resp, report);
    }
    if (left.empty()) break;
    if (clock.now() + cluster.options().retry_backoff >= deadline) {
      for (const TopicPartition& tp : left) {
        out.insert_or_assign(tp, absl::StatusOr<Value>(last.ok() ? absl::DeadlineExceededError("timed out") : last));
      }
      break;
    }
    co_await clock.sleep_for(cluster.options().retry_backoff);
  }
  co_return out;
}

// Appends tp to a request's per-topic list (partitions come sorted by topic).
template <typename Topics>
auto& partition_entry(Topics& topics, const TopicPartition& tp) {
  if (topics.empty() || topics.back().name != tp.topic) topics.emplace_back().name = tp.topic;
  return topics.back().partitions.emplace_back();
}

}  // namespace

io::Task<std::map<TopicPartition, absl::StatusOr<ListedOffset>>> list_offsets(Cluster& cluster,
                                                                              std::vector<TopicPartition> partitions,
                                                                              int64_t target, IsolationLevel isolation) {
  std::function<net::ListOffsetsRequest(const std::vector<TopicPartition>&)> build =
      [&cluster, target, isolation](const std::vector<TopicPartition>& tps) {
        net::ListOffsetsRequest r;
        r.replica_id = -1;
        r.isolation_level = static_cast<int8_t>(isolation);
        for (const TopicPartition& tp : tps) {
          auto& p = partition_entry(r.topics, tp);
          p.partition_index = tp.partition;
          p.current_leader_epoch = cluster.leader_epoch(tp);
          p.timestamp = target;
        }
        return r;
      };
  std::function<void(const net::ListOffsetsResponse&, const Report<ListedOffset>&)> answers =
      [](const net::ListOffsetsResponse& resp, const Report<ListedOffset>& report) {
        for (const auto& t : resp.topics) {
          for (const auto& p : t.partitions) {
            ListedOffset lo;
            lo.offset = p.offset;
            lo.timestamp_ms = p.timestamp;
            lo.leader_epoch = p.leader_epoch;
            report(TopicPartition(t.name, p.partition_index), p.error_code, lo);
          }
        }
      };
  co_return co_await to_leaders<ListedOffset, net::ListOffsetsResponse, net::ListOffsetsRequest>(
      cluster, std::move(partitions), kListOffsetsVersion, std::move(build), std::move(answers));
}

io::Task<std::map<TopicPartition, absl::StatusOr<int64_t>>> delete_records(Cluster& cluster,
                                                                           std::map<TopicPartition, int64_t> offsets) {
  std::vector<TopicPartition> partitions;
  for (const auto& [tp, o] : offsets) partitions.push_back(tp);
  std::function<net::DeleteRecordsRequest(const std::vector<TopicPartition>&)> build =
      [&cluster, &offsets](const std::vector<TopicPartition>& tps) {
        net::DeleteRecordsRequest r;
        r.timeout_ms = timeout_ms(cluster);
        for (const TopicPartition& tp : tps) {
          auto& p = partition_entry(r.topics, tp);
          p.partition_index = tp.partition;
          p.offset = offsets.at(tp);
        }
        return r;
      };
  std::function<void(const net::DeleteRecordsResponse&, const Report<int64_t>&)> answers =
      [](const net::DeleteRecordsResponse& resp, const Report<int64_t>& report) {
        for (const auto& t : resp.topics) {
          for (const auto& p : t.partitions) {
            report(TopicPartition(t.name, p.partition_index), p.error_code, p.low_watermark);
          }
        }
      };
  co_return co_await to_leaders<int64_t, net::DeleteRecordsResponse, net::DeleteRecordsRequest>(
      cluster, std::move(partitions), kDeleteRecordsVersion, std::move(build), std::move(answers));
}

io::Task<absl::StatusOr<std::map<std::string, absl::Status>>> alter_user_scram_credentials(
    Cluster& cluster, std::vector<ScramAlteration> alterations) {
  const io::Clock& clock = cluster.context().clock();
  const io::Instant deadline = clock.now() + cluster.options().request_timeout;
  net::AlterUserScramCredentialsRequest r;
  for (const ScramAlteration& a : alterations) {
    if (a.remove) {
      auto& d = r.deletions.emplace_back();
      d.name = a.user;
      d.mechanism = net::scram_type(a.mechanism);
      continue;
    }
    std::string salt(32, '\0');
    for (char& c : salt) c = static_cast<char>(cluster.context().random().uniform(256));
    auto& u = r.upsertions.emplace_back();
    u.name = a.user;
    u.mechanism = net::scram_type(a.mechanism);
    u.iterations = a.iterations;
    // Too few or too many iterations are the controller's to refuse; the
    // salting is bounded so that a typo does not spin here.
    const int32_t rounds = std::clamp(a.iterations, 1, net::kScramMaxIterations);
    u.salted_password = io::Buffer::copy_of(std::string_view(net::scram_salted_password(a.mechanism, a.password, salt, rounds)));
    u.salt = io::Buffer::copy_of(std::string_view(salt));
  }
  while (true) {
    absl::StatusOr<net::AlterUserScramCredentialsResponse> resp =
        co_await call_any<net::AlterUserScramCredentialsResponse>(cluster, r, 0, deadline);
    if (!resp.ok()) co_return resp.status();
    bool retry = false;
    for (const auto& result : resp->results) retry |= retry_item(result.error_code);
    if (retry && clock.now() + cluster.options().retry_backoff < deadline) {
      co_await clock.sleep_for(cluster.options().retry_backoff);
      continue;
    }
    std::map<std::string, absl::Status> out;
    for (const auto& result : resp->results) out[result.user] = item_status(result.error_code, result.error_message);
    co_return out;
  }
}

io::Task<absl::StatusOr<std::map<std::string, absl::StatusOr<std::vector<ScramCredentialInfo>>>>>
describe_user_scram_credentials(Cluster& cluster, std::vector<std::string> users) {
  const io::Instant deadline = cluster.context().clock().now() + cluster.options().request_timeout;
  net::DescribeUserScramCredentialsRequest r;
  if (!users.empty()) {
    r.users.emplace();
    for (std::string& user : users) r.users->emplace_back().name = std::move(user);
  }
  absl::StatusOr<net::DescribeUserScramCredentialsResponse> resp =
      co_await call_any<net::DescribeUserScramCredentialsResponse>(cluster, r, 0, deadline);
  if (!resp.ok()) co_return resp.status();
  if (resp->error_code != 0) co_return item_status(resp->error_code, resp->error_message);
  std::map<std::string, absl::StatusOr<std::vector<ScramCredentialInfo>>> out;
  for (const auto& result : resp->results) {
    if (result.error_code == net::code(net::Error::kResourceNotFound)) {
      out.emplace(result.user, absl::NotFoundError(result.error_message.value_or("no SCRAM credential")));
      continue;
    }
    if (result.error_code != 0) {
      out.emplace(result.user, item_status(result.error_code, result.error_message));
      continue;
    }
    std::vector<ScramCredentialInfo> infos;
    for (const auto& info : result.credential_infos) {
      std::optional<net::ScramMechanism> m = net::scram_mechanism_of_type(info.mechanism);
      if (m.has_value()) infos.push_back(ScramCredentialInfo{*m, info.iterations});
    }
    out.emplace(result.user, std::move(infos));
  }
  co_return out;
}

}  // namespace brook::client
