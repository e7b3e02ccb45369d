// tools/client_commands.cc
//
// The client tools, after Kafka's shell tools, on the client library
// (net/client):
//
//   brook topics --bootstrap-server H:P [--command-config F] --list | --describe [--topic T]
//         | --create --topic T [--partitions N] [--replication-factor R] [--config K=V]... [--if-not-exists]
//         | --delete --topic T [--if-exists]
//         | --alter --topic T [--partitions N] [--config K=V]... [--delete-config K]...
//   brook produce --bootstrap-server H:P --topic T [--partition P] [--property parse.key=true]
//         [--property key.separator=SEP] [--producer-property K=V]... [--request-required-acks A]
//         [--compression-codec C] [--producer.config F]
//   brook consume --bootstrap-server H:P --topic T [--partition P] [--from-beginning]
//         [--offset N|earliest|latest] [--max-messages N] [--timeout-ms MS]
//         [--property print.key|print.offset|print.partition|print.timestamp=true]
//         [--property key.separator=SEP] [--consumer-property K=V]... [--isolation-level L]
//         [--consumer.config F]
//   brook configs --bootstrap-server H:P [--command-config F] --describe --entity-type users|topics|brokers
//         [--entity-name N] | --alter --entity-type E --entity-name N [--add-config K=V,...] [--delete-config K,...]
//   brook reassign-partitions --bootstrap-server H:P [--command-config F]
//         --execute | --verify | --cancel --reassignment-json-file F | --list
//   brook perf produce --bootstrap-server H:P --topic T --num-records N --record-size S
//         [--throughput RECORDS_PER_S] [--producer-props K=V ...]
//   brook perf consume --bootstrap-server H:P --topic T --messages N [--timeout-ms MS]
//         [--consumer-props K=V ...]
//
// produce reads one record per line of standard input and exits once every
// record has its outcome: 0 when all were acknowledged. consume prints one
// record per line (the value; key, offset, partition and timestamp first
// when asked) and exits after --max-messages, or after --timeout-ms without
// a record; "Processed a total of N messages" goes to standard error.
// Without a consumer group it reads every partition of the topic (or the
// one --partition names) from the end, or from the start with
// --from-beginning. The perf tools print what Kafka's perf-test tools print.
//
// Exit codes: 0 success, 1 a failure the cluster reported, 2 bad usage.
// Tools are not logic code: they read standard input and the real clock.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <ctime>
#include <climits>
#include <functional>
#include <initializer_list>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/bootstrap_records.h"
#include "io/when.h"
#include "net/client/admin.h"
#include "net/client/consumer.h"
#include "net/client/group.h"
#include "net/client/producer.h"
#include "net/client/transactions.h"
#include "net/kafka/errors.h"
#include "tools/client_tool.h"
#include "tools/commands.h"
#include "tools/json.h"

namespace brook::tools {

namespace {

using namespace std::chrono_literals;

std::optional<int64_t> parse_number(std::string_view text) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

void fail_usage(std::string_view tool, std::string_view why, std::string_view usage) {
  std::fprintf(stderr, "brook %.*s: %.*s\nusage: %.*s\n", static_cast<int>(tool.size()), tool.data(),
               static_cast<int>(why.size()), why.data(), static_cast<int>(usage.size()), usage.data());
}

// Walks `args` as options: a name in `flags` stands alone, any other takes
// the next argument as its value. `on(name, value)` handles each (value
// empty for flags); the first error stops the walk.
absl::Status walk_options(Args args, std::initializer_list<std::string_view> flags,
                          const std::function<absl::Status(std::string_view, std::string_view)>& on) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view name = args[i];
    std::string_view value;
    if (std::find(flags.begin(), flags.end(), name) == flags.end()) {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError(fmt::format("{} needs a value", name));
      value = args[++i];
    }
    if (absl::Status s = on(name, value); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status bad_option(std::string_view name, std::string_view value) {
  return absl::InvalidArgumentError(fmt::format("bad argument {} {}", name, value));
}

// Every property of a --producer.config / --consumer.config file, through
// `set` (set_producer_property or set_consumer_property). A property the
// client does not know (a Java client's key.serializer, say) is ignored with
// a warning, as Kafka's console tools do; a known one with a bad value is an
// error.
template <typename Config>
absl::Status set_properties_from(std::string_view path, Config* config,
                                 absl::Status (*set)(std::string_view, std::string_view, Config*)) {
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> props = read_properties_file(std::string(path));
  if (!props.ok()) return props.status();
  for (const auto& [key, value] : *props) {
    absl::Status s = set(key, value, config);
    if (absl::IsNotFound(s)) {
      std::fprintf(stderr, "warning: %s: %s\n", std::string(path).c_str(), std::string(s.message()).c_str());
    } else if (!s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// The options every client tool takes: --bootstrap-server, --topic,
// --partition. Sets *handled when `name` is one of them.
struct CommonArgs {
  client::ClientOptions* client;
  std::string* topic;
  std::optional<int32_t>* partition;  // null: no --partition
  bool have_bootstrap = false;

  absl::Status take(std::string_view name, std::string_view value, bool* handled) {
    *handled = true;
    if (name == "--bootstrap-server") {
      have_bootstrap = true;
      return parse_bootstrap(value, client);
    }
    if (name == "--topic") {
      *topic = std::string(value);
      return absl::OkStatus();
    }
    if (name == "--command-config") {
      // Kafka's admin tools' client properties file (security settings).
      absl::StatusOr<std::vector<std::pair<std::string, std::string>>> props =
          read_properties_file(std::string(value));
      if (!props.ok()) return props.status();
      for (const auto& [key, v] : *props) {
        bool known = false;
        if (absl::Status s = set_client_property(key, v, client, &known); !s.ok()) return s;
        if (!known) std::fprintf(stderr, "warning: %s: %s is not a client property; ignored\n",
                                 std::string(value).c_str(), key.c_str());
      }
      return absl::OkStatus();
    }
    if (name == "--partition" && partition != nullptr) {
      if (parse_number(value).value_or(-1) < 0 || *parse_number(value) > INT32_MAX) return bad_option(name, value);
      *partition = static_cast<int32_t>(*parse_number(value));
      return absl::OkStatus();
    }
    *handled = false;
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// brook topics

constexpr std::string_view kTopicsUsage =
    "brook topics --bootstrap-server H:P [--command-config F] --list | --describe [--topic T]\n"
    "       | --create --topic T [--partitions N] [--replication-factor R] [--config K=V]... [--if-not-exists]\n"
    "       | --delete --topic T [--if-exists]\n"
    "       | --alter --topic T [--partitions N] [--config K=V]... [--delete-config K]...";

struct TopicsArgs {
  client::ClientOptions client;
  std::string action;
  std::string topic;
  int32_t partitions = -1;
  int16_t replication_factor = -1;
  std::map<std::string, std::string> configs;
  std::vector<std::string> delete_configs;
  bool if_not_exists = false;
  bool if_exists = false;
};

std::string join_ids(const std::vector<int32_t>& ids) { return absl::StrJoin(ids, ","); }

io::Task<int> topics_run(io::Context& ctx, const TopicsArgs* a) {
  client::Cluster cluster(ctx, a->client);
  if (a->action == "list") {
    std::vector<std::string> all;
    absl::StatusOr<std::vector<client::TopicInfo>> topics = co_await client::describe_topics(cluster, all);
    if (!topics.ok()) {
      std::fprintf(stderr, "brook topics: %s\n", topics.status().ToString().c_str());
      co_return 1;
    }
    for (const client::TopicInfo& t : *topics) std::printf("%s\n", t.name.c_str());
    co_return 0;
  }
  if (a->action == "create") {
    client::NewTopic t;
    t.name = a->topic;
    t.partitions = a->partitions;
    t.replication_factor = a->replication_factor;
    t.configs = a->configs;
    std::vector<client::NewTopic> topics{t};
    absl::StatusOr<std::map<std::string, client::CreatedTopic>> r = co_await client::create_topics(cluster, topics);
    absl::Status s = r.ok() ? (*r)[a->topic].status : r.status();
    if (!s.ok() && a->if_not_exists && absl::StrContains(s.message(), "TOPIC_ALREADY_EXISTS")) co_return 0;
    if (!s.ok()) {
      std::fprintf(stderr, "Error while executing topic command: %s\n", s.ToString().c_str());
      co_return 1;
    }
    std::printf("Created topic %s.\n", a->topic.c_str());
    co_return 0;
  }
  if (a->action == "delete") {
    std::vector<std::string> names{a->topic};
    absl::StatusOr<std::map<std::string, absl::Status>> r = co_await client::delete_topics(cluster, names);
    absl::Status s = r.ok() ? (*r)[a->topic] : r.status();
    if (!s.ok() && a->if_exists && absl::StrContains(s.message(), "UNKNOWN_TOPIC_OR_PARTITION")) co_return 0;
    if (!s.ok()) {
      std::fprintf(stderr, "Error while executing topic command: %s\n", s.ToString().c_str());
      co_return 1;
    }
    co_return 0;
  }
  if (a->action == "alter") {
    if (a->partitions > 0) {
      std::map<std::string, int32_t> counts{{a->topic, a->partitions}};
      absl::StatusOr<std::map<std::string, absl::Status>> r = co_await client::create_partitions(cluster, counts);
      absl::Status s = r.ok() ? (*r)[a->topic] : r.status();
      if (!s.ok()) {
        std::fprintf(stderr, "Error while executing topic command: %s\n", s.ToString().c_str());
        co_return 1;
      }
    }
    if (!a->configs.empty() || !a->delete_configs.empty()) {
      std::vector<client::AlterConfig> ops;
      for (const auto& [k, v] : a->configs) ops.push_back(client::AlterConfig{k, client::AlterOp::kSet, v});
      for (const std::string& k : a->delete_configs) {
        ops.push_back(client::AlterConfig{k, client::AlterOp::kDelete, std::nullopt});
      }
      absl::Status s = co_await client::incremental_alter_configs(cluster, client::ResourceType::kTopic, a->topic, ops);
      if (!s.ok()) {
        std::fprintf(stderr, "Error while executing topic command: %s\n", s.ToString().c_str());
        co_return 1;
      }
    }
    co_return 0;
  }
  // describe
  std::vector<std::string> names;
  if (!a->topic.empty()) names.push_back(a->topic);
  absl::StatusOr<std::vector<client::TopicInfo>> topics = co_await client::describe_topics(cluster, names);
  if (!topics.ok()) {
    std::fprintf(stderr, "brook topics: %s\n", topics.status().ToString().c_str());
    co_return 1;
  }
  // Reassignments in progress, shown as Kafka's describe shows them (none
  // when the cluster cannot list them).
  std::vector<client::TopicPartition> described;
  for (const client::TopicInfo& t : *topics) {
    for (const client::PartitionInfo& p : t.partitions) described.emplace_back(t.name, p.partition);
  }
  std::map<client::TopicPartition, client::OngoingReassignment> moving;
  if (!described.empty()) {
    absl::StatusOr<std::map<client::TopicPartition, client::OngoingReassignment>> listed =
        co_await client::list_partition_reassignments(cluster, described);
    if (listed.ok()) moving = *std::move(listed);
  }
  int code = 0;
  for (const client::TopicInfo& t : *topics) {
    if (t.error_code != 0) {
      std::fprintf(stderr, "Error while executing topic command: topic '%s': %s\n", t.name.c_str(),
                   client::error_text(t.error_code).c_str());
      code = 1;
      continue;
    }
    std::vector<std::string> configs;
    absl::StatusOr<std::vector<client::ConfigEntry>> entries =
        co_await client::describe_configs(cluster, client::ResourceType::kTopic, t.name);
    if (entries.ok()) {
      for (const client::ConfigEntry& e : *entries) {
        // Kafka's describe shows the topic's own settings.
        if (e.source == 1) configs.push_back(fmt::format("{}={}", e.name, e.value.value_or("")));
      }
    }
    // (Of the first partition, without the replicas a reassignment removes.)
    size_t rf = t.partitions.empty() ? 0 : t.partitions[0].replicas.size();
    if (auto it = t.partitions.empty() ? moving.end() : moving.find({t.name, t.partitions[0].partition});
        it != moving.end()) {
      rf = it->second.replicas.size() - std::min(it->second.replicas.size(), it->second.removing.size());
    }
    std::printf("Topic: %s\tTopicId: %s\tPartitionCount: %zu\tReplicationFactor: %zu\tConfigs: %s\n", t.name.c_str(),
                t.id.to_string().c_str(), t.partitions.size(), rf, absl::StrJoin(configs, ",").c_str());
    for (const client::PartitionInfo& p : t.partitions) {
      std::string extra;
      if (auto it = moving.find({t.name, p.partition}); it != moving.end()) {
        if (!it->second.adding.empty()) extra += "\tAdding Replicas: " + join_ids(it->second.adding);
        if (!it->second.removing.empty()) extra += "\tRemoving Replicas: " + join_ids(it->second.removing);
      }
      std::printf("\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s%s\n", t.name.c_str(), p.partition,
                  p.leader >= 0 ? std::to_string(p.leader).c_str() : "none", join_ids(p.replicas).c_str(),
                  join_ids(p.isr).c_str(), extra.c_str());
    }
  }
  co_return code;
}

}  // namespace

int topics_main(Args args) {
  TopicsArgs a;
  CommonArgs common{&a.client, &a.topic, nullptr};
  absl::Status parsed = walk_options(
      args, {"--list", "--describe", "--create", "--delete", "--alter", "--if-not-exists", "--if-exists"},
      [&](std::string_view name, std::string_view value) -> absl::Status {
        bool handled = false;
        if (absl::Status s = common.take(name, value, &handled); handled) return s;
        std::string key;
        std::string v;
        if (name == "--list" || name == "--describe" || name == "--create" || name == "--delete" || name == "--alter") {
          if (!a.action.empty()) return absl::InvalidArgumentError("one of --list, --describe, --create, --delete, --alter");
          a.action = std::string(name.substr(2));
        } else if (name == "--if-not-exists") {
          a.if_not_exists = true;
        } else if (name == "--if-exists") {
          a.if_exists = true;
        } else if (name == "--partitions" && parse_number(value).value_or(0) > 0 && *parse_number(value) <= INT32_MAX) {
          a.partitions = static_cast<int32_t>(*parse_number(value));
        } else if (name == "--replication-factor" && parse_number(value).value_or(0) > 0 &&
                   *parse_number(value) < 32768) {
          a.replication_factor = static_cast<int16_t>(*parse_number(value));
        } else if (name == "--config" && split_property(value, &key, &v)) {
          a.configs[key] = v;
        } else if (name == "--delete-config") {
          a.delete_configs.push_back(std::string(value));
        } else {
          return bad_option(name, value);
        }
        return absl::OkStatus();
      });
  if (parsed.ok()) parsed = finish_client_options(&a.client);
  if (!parsed.ok()) {
    fail_usage("topics", std::string(parsed.message()), kTopicsUsage);
    return 2;
  }
  const bool have_bootstrap = common.have_bootstrap;
  if (!have_bootstrap || a.action.empty()) {
    fail_usage("topics", "--bootstrap-server and an action are required", kTopicsUsage);
    return 2;
  }
  if ((a.action == "create" || a.action == "delete" || a.action == "alter") && a.topic.empty()) {
    fail_usage("topics", fmt::format("--{} needs --topic", a.action), kTopicsUsage);
    return 2;
  }
  return run_client_tool("topics", [&a](io::Context& ctx) { return topics_run(ctx, &a); });
}

// ---------------------------------------------------------------------------
// brook produce

namespace {

constexpr std::string_view kProduceUsage =
    "brook produce --bootstrap-server H:P --topic T [--partition P] [--property parse.key=true]\n"
    "       [--property key.separator=SEP] [--producer-property K=V]... [--request-required-acks A]\n"
    "       [--compression-codec C] [--producer.config F]";

struct ProduceArgs {
  client::ProducerConfig config;
  std::string topic;
  std::optional<int32_t> partition;
  bool parse_key = false;
  std::string key_separator = "\t";
};

bool stdin_readable() {
  pollfd p{STDIN_FILENO, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

// Lines of standard input, read without blocking the event loop: while no
// whole line is buffered it waits (on the loop's clock) for input.
class LineReader {
 public:
  io::Task<std::optional<std::string>> next(io::Context& ctx) {
    while (true) {
      const size_t nl = buffer_.find('\n', scanned_);
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        scanned_ = 0;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        co_return line;
      }
      scanned_ = buffer_.size();
      if (eof_) {
        if (buffer_.empty()) co_return std::nullopt;
        std::string last = std::move(buffer_);
        buffer_.clear();
        scanned_ = 0;
        co_return last;
      }
      if (!stdin_readable()) {
        co_await ctx.clock().sleep_for(5ms);
        continue;
      }
      fill();
    }
  }

 private:
  void fill() {
    char chunk[65536];
    const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
    if (n <= 0) {
      eof_ = true;
    } else {
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  std::string buffer_;
  size_t scanned_ = 0;
  bool eof_ = false;
};

io::Task<int> produce_run(io::Context& ctx, const ProduceArgs* a) {
  client::Producer producer(ctx, a->config);
  LineReader lines;
  uint64_t failed = 0;
  while (true) {
    std::optional<std::string> line = co_await lines.next(ctx);
    if (!line.has_value()) break;
    client::ProducerRecord r;
    r.topic = a->topic;
    r.partition = a->partition;
    std::string_view text = *line;
    if (a->parse_key) {
      const size_t sep = text.find(a->key_separator);
      if (sep == std::string_view::npos) {
        std::fprintf(stderr, "brook produce: no key separator in line '%s'\n", line->c_str());
        ++failed;
        continue;
      }
      r.key = io::Buffer::copy_of(text.substr(0, sep));
      text = text.substr(sep + a->key_separator.size());
    }
    r.value = io::Buffer::copy_of(text);
    client::DeliveryCallback done = [&failed](const absl::StatusOr<client::RecordMetadata>& md) {
      if (!md.ok()) {
        ++failed;
        std::fprintf(stderr, "brook produce: %s\n", md.status().ToString().c_str());
      }
    };
    (void)co_await producer.send(std::move(r), std::move(done));
  }
  co_await producer.flush();
  co_return failed == 0 ? 0 : 1;
}

}  // namespace

int produce_main(Args args) {
  ProduceArgs a;
  a.config.linger = 5ms;
  CommonArgs common{&a.config.client, &a.topic, &a.partition};
  absl::Status parsed = walk_options(args, {}, [&](std::string_view name, std::string_view value) -> absl::Status {
    bool handled = false;
    if (absl::Status s = common.take(name, value, &handled); handled) return s;
    std::string key;
    std::string v;
    if (name == "--request-required-acks") return set_producer_property("acks", value, &a.config);
    if (name == "--compression-codec") return set_producer_property("compression.type", value, &a.config);
    if (name == "--producer-property" && split_property(value, &key, &v)) return set_producer_property(key, v, &a.config);
    if (name == "--producer.config") return set_properties_from(value, &a.config, set_producer_property);
    if (name == "--property" && split_property(value, &key, &v)) {
      if (key == "parse.key") {
        a.parse_key = v == "true";
      } else if (key == "key.separator") {
        a.key_separator = v;
      } else {
        return absl::InvalidArgumentError(fmt::format("unknown property '{}'", key));
      }
      return absl::OkStatus();
    }
    return bad_option(name, value);
  });
  if (parsed.ok()) parsed = finish_client_options(&a.config.client);
  if (!parsed.ok()) {
    fail_usage("produce", std::string(parsed.message()), kProduceUsage);
    return 2;
  }
  const bool have_bootstrap = common.have_bootstrap;
  if (!have_bootstrap || a.topic.empty() || a.key_separator.empty()) {
    fail_usage("produce", "--bootstrap-server and --topic are required", kProduceUsage);
    return 2;
  }
  return run_client_tool("produce", [&a](io::Context& ctx) { return produce_run(ctx, &a); });
}

// ---------------------------------------------------------------------------
// brook consume

namespace {

constexpr std::string_view kConsumeUsage =
    "brook consume --bootstrap-server H:P --topic T [--partition P] [--from-beginning]\n"
    "       [--offset N|earliest|latest] [--max-messages N] [--timeout-ms MS]\n"
    "       [--property print.key|print.offset|print.partition|print.timestamp=true]\n"
    "       [--property key.separator=SEP] [--consumer-property K=V]... [--isolation-level L]\n"
    "       [--consumer.config F]";

struct ConsumeArgs {
  client::ConsumerConfig config;
  std::string topic;
  std::optional<int32_t> partition;
  bool from_beginning = false;
  std::optional<int64_t> offset;  // -2 earliest, -1 latest
  int64_t max_messages = -1;
  std::optional<io::Duration> timeout;
  bool print_key = false;
  bool print_offset = false;
  bool print_partition = false;
  bool print_timestamp = false;
  std::string key_separator = "\t";
};

std::string text_of(const std::optional<io::Buffer>& b) { return b.has_value() ? std::string(b->view()) : "null"; }

io::Task<int> consume_run(io::Context& ctx, const ConsumeArgs* a) {
  client::Consumer consumer(ctx, a->config);
  std::vector<std::string> names{a->topic};
  absl::StatusOr<std::vector<client::TopicInfo>> topics = co_await client::describe_topics(consumer.cluster(), names);
  if (!topics.ok() || topics->empty() || (*topics)[0].error_code != 0) {
    std::fprintf(stderr, "brook consume: topic '%s': %s\n", a->topic.c_str(),
                 !topics.ok() ? topics.status().ToString().c_str()
                              : client::error_text(topics->empty() ? int16_t{3} : (*topics)[0].error_code).c_str());
    co_return 1;
  }
  std::vector<client::TopicPartition> tps;
  for (const client::PartitionInfo& p : (*topics)[0].partitions) {
    if (!a->partition.has_value() || *a->partition == p.partition) tps.emplace_back(a->topic, p.partition);
  }
  if (tps.empty()) {
    std::fprintf(stderr, "brook consume: topic '%s' has no partition %d\n", a->topic.c_str(), a->partition.value_or(-1));
    co_return 1;
  }
  consumer.assign(tps);
  if (a->offset.has_value() && *a->offset >= 0) {
    for (const auto& tp : tps) consumer.seek(tp, *a->offset);
  } else if (a->from_beginning || a->offset == client::kEarliestOffset) {
    consumer.seek_to_beginning(tps);
  } else {
    consumer.seek_to_end(tps);
  }
  int64_t count = 0;
  io::Instant last = ctx.clock().now();
  int code = 0;
  while (a->max_messages < 0 || count < a->max_messages) {
    absl::StatusOr<std::vector<client::ConsumerRecord>> got = co_await consumer.poll(200ms);
    if (!got.ok()) {
      std::fprintf(stderr, "brook consume: %s\n", got.status().ToString().c_str());
      code = 1;
      break;
    }
    for (const client::ConsumerRecord& r : *got) {
      std::string line;
      if (a->print_timestamp) {
        line += fmt::format("{}:{}{}", r.timestamp_type == net::TimestampType::kLogAppendTime ? "LogAppendTime" : "CreateTime",
                            r.timestamp_ms, a->key_separator);
      }
      if (a->print_partition) line += fmt::format("Partition:{}{}", r.partition, a->key_separator);
      if (a->print_offset) line += fmt::format("Offset:{}{}", r.offset, a->key_separator);
      if (a->print_key) line += text_of(r.key) + a->key_separator;
      line += text_of(r.value);
      line += '\n';
      std::fwrite(line.data(), 1, line.size(), stdout);
      if (++count == a->max_messages) break;
    }
    std::fflush(stdout);
    if (!got->empty()) {
      last = ctx.clock().now();
    } else if (a->timeout.has_value() && ctx.clock().now() - last >= *a->timeout) {
      break;
    }
  }
  std::fprintf(stderr, "Processed a total of %lld messages\n", static_cast<long long>(count));
  co_return code;
}

}  // namespace

int consume_main(Args args) {
  ConsumeArgs a;
  CommonArgs common{&a.config.client, &a.topic, &a.partition};
  absl::Status parsed =
      walk_options(args, {"--from-beginning"}, [&](std::string_view name, std::string_view value) -> absl::Status {
        bool handled = false;
        if (absl::Status s = common.take(name, value, &handled); handled) return s;
        std::string key;
        std::string v;
        if (name == "--from-beginning") {
          a.from_beginning = true;
        } else if (name == "--offset") {
          if (value == "earliest") {
            a.offset = client::kEarliestOffset;
          } else if (value == "latest") {
            a.offset = client::kLatestOffset;
          } else if (parse_number(value).value_or(-1) >= 0) {
            a.offset = *parse_number(value);
          } else {
            return bad_option(name, value);
          }
        } else if (name == "--max-messages" && parse_number(value).value_or(-1) >= 0) {
          a.max_messages = *parse_number(value);
        } else if (name == "--timeout-ms" && parse_number(value).value_or(-1) >= 0) {
          a.timeout = std::chrono::milliseconds(*parse_number(value));
        } else if (name == "--isolation-level") {
          return set_consumer_property("isolation.level", value, &a.config);
        } else if (name == "--consumer-property" && split_property(value, &key, &v)) {
          return set_consumer_property(key, v, &a.config);
        } else if (name == "--consumer.config") {
          return set_properties_from(value, &a.config, set_consumer_property);
        } else if (name == "--property" && split_property(value, &key, &v)) {
          static const std::map<std::string, bool ConsumeArgs::*, std::less<>> kPrints = {
              {"print.key", &ConsumeArgs::print_key},
              {"print.offset", &ConsumeArgs::print_offset},
              {"print.partition", &ConsumeArgs::print_partition},
              {"print.timestamp", &ConsumeArgs::print_timestamp}};
          if (auto it = kPrints.find(key); it != kPrints.end()) {
            a.*(it->second) = v == "true";
          } else if (key == "key.separator") {
            a.key_separator = v;
          } else {
            return absl::InvalidArgumentError(fmt::format("unknown property '{}'", key));
          }
        } else {
          return bad_option(name, value);
        }
        return absl::OkStatus();
      });
  if (parsed.ok()) parsed = finish_client_options(&a.config.client);
  if (!parsed.ok()) {
    fail_usage("consume", std::string(parsed.message()), kConsumeUsage);
    return 2;
  }
  const bool have_bootstrap = common.have_bootstrap;
  if (!have_bootstrap || a.topic.empty()) {
    fail_usage("consume", "--bootstrap-server and --topic are required", kConsumeUsage);
    return 2;
  }
  return run_client_tool("consume", [&a](io::Context& ctx) { return consume_run(ctx, &a); });
}

// ---------------------------------------------------------------------------
// brook perf produce / consume

namespace {

constexpr std::string_view kPerfUsage =
    "brook perf produce --bootstrap-server H:P --topic T --num-records N --record-size S\n"
    "       [--throughput RECORDS_PER_S] [--producer-props K=V ...]\n"
    "brook perf consume --bootstrap-server H:P --topic T --messages N [--timeout-ms MS]\n"
    "       [--consumer-props K=V ...]";

struct PerfArgs {
  std::string mode;
  client::ProducerConfig producer;
  client::ConsumerConfig consumer;
  std::string topic;
  int64_t records = -1;
  int64_t record_size = 100;
  double throughput = -1;
  io::Duration timeout = 10s;
};

double ms_of(io::Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

io::Task<int> perf_produce_run(io::Context& ctx, const PerfArgs* a) {
  client::Producer producer(ctx, a->producer);
  std::vector<double> latencies;
  latencies.reserve(static_cast<size_t>(a->records));
  uint64_t failed = 0;
  std::string first_error;
  // Kafka's perf test: a fixed payload of random uppercase letters.
  std::string payload(static_cast<size_t>(a->record_size), 'A');
  for (char& c : payload) c = static_cast<char>('A' + ctx.random().uniform(26));
  const io::Buffer value = io::Buffer::copy_of(payload);
  const io::Instant start = ctx.clock().now();
  io::Instant window_start = start;
  uint64_t window_count = 0;
  double window_latency = 0;
  double window_max = 0;
  struct Window {
    uint64_t* count;
    double* latency;
    double* max;
  } window{&window_count, &window_latency, &window_max};
  for (int64_t i = 0; i < a->records; ++i) {
    // Paced from each record's intended send time.
    io::Instant intended = ctx.clock().now();
    if (a->throughput > 0) {
      intended = start + std::chrono::duration_cast<io::Duration>(std::chrono::duration<double>(static_cast<double>(i) / a->throughput));
      if (intended > ctx.clock().now()) co_await ctx.clock().sleep_until(intended);
    }
    client::ProducerRecord r;
    r.topic = a->topic;
    r.value = value;
    client::DeliveryCallback done = [&ctx, &latencies, &failed, &first_error, intended, window](
                                        const absl::StatusOr<client::RecordMetadata>& md) {
      if (!md.ok()) {
        if (failed++ == 0) first_error = md.status().ToString();
        return;
      }
      const double ms = ms_of(ctx.clock().now() - intended);
      latencies.push_back(ms);
      ++*window.count;
      *window.latency += ms;
      *window.max = std::max(*window.max, ms);
    };
    (void)co_await producer.send(std::move(r), std::move(done));
    const io::Instant now = ctx.clock().now();
    if (now - window_start >= 5s) {
      const double secs = std::chrono::duration<double>(now - window_start).count();
      std::printf("%llu records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.\n",
                  static_cast<unsigned long long>(window_count), static_cast<double>(window_count) / secs,
                  static_cast<double>(window_count) * static_cast<double>(a->record_size) / secs / (1024 * 1024),
                  window_count > 0 ? window_latency / static_cast<double>(window_count) : 0.0, window_max);
      std::fflush(stdout);
      window_start = now;
      window_count = 0;
      window_latency = 0;
      window_max = 0;
    }
  }
  co_await producer.flush();
  const double secs = std::chrono::duration<double>(ctx.clock().now() - start).count();
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double q) {
    if (latencies.empty()) return 0.0;
    return latencies[std::min(latencies.size() - 1, static_cast<size_t>(q * static_cast<double>(latencies.size())))];
  };
  double sum = 0;
  for (double l : latencies) sum += l;
  const double n = static_cast<double>(latencies.size());
  std::printf(
      "%zu records sent, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, %.0f ms 50th, "
      "%.0f ms 95th, %.0f ms 99th, %.0f ms 99.9th.\n",
      latencies.size(), n / secs, n * static_cast<double>(a->record_size) / secs / (1024 * 1024),
      latencies.empty() ? 0.0 : sum / n, latencies.empty() ? 0.0 : latencies.back(), pct(0.5), pct(0.95), pct(0.99),
      pct(0.999));
  if (failed > 0) {
    std::fprintf(stderr, "brook perf: %llu records failed; first: %s\n", static_cast<unsigned long long>(failed),
                 first_error.c_str());
    co_return 1;
  }
  co_return 0;
}

io::Task<int> perf_consume_run(io::Context& ctx, const PerfArgs* a) {
  client::Consumer consumer(ctx, a->consumer);
  std::vector<std::string> names{a->topic};
  absl::StatusOr<std::vector<client::TopicInfo>> topics = co_await client::describe_topics(consumer.cluster(), names);
  if (!topics.ok() || topics->empty() || (*topics)[0].error_code != 0) {
    std::fprintf(stderr, "brook perf: topic '%s' not found\n", a->topic.c_str());
    co_return 1;
  }
  std::vector<client::TopicPartition> tps;
  for (const client::PartitionInfo& p : (*topics)[0].partitions) tps.emplace_back(a->topic, p.partition);
  consumer.assign(tps);
  consumer.seek_to_beginning(tps);
  const io::WallTime wall_start = ctx.clock().wall_now();
  const io::Instant start = ctx.clock().now();
  io::Instant last = start;
  int64_t count = 0;
  uint64_t bytes = 0;
  while (count < a->records) {
    absl::StatusOr<std::vector<client::ConsumerRecord>> got = co_await consumer.poll(100ms);
    if (!got.ok()) {
      std::fprintf(stderr, "brook perf: %s\n", got.status().ToString().c_str());
      co_return 1;
    }
    for (const client::ConsumerRecord& r : *got) {
      bytes += (r.value.has_value() ? r.value->size() : 0) + (r.key.has_value() ? r.key->size() : 0);
    }
    count += static_cast<int64_t>(got->size());
    if (!got->empty()) {
      last = ctx.clock().now();
    } else if (ctx.clock().now() - last >= a->timeout) {
      std::fprintf(stderr, "brook perf: no record for %lld ms after %lld records\n",
                   static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(a->timeout).count()),
                   static_cast<long long>(count));
      break;
    }
  }
  const double secs = std::max(1e-9, std::chrono::duration<double>(last - start).count());
  const double mb = static_cast<double>(bytes) / (1024 * 1024);
  const io::WallTime wall_end = wall_start + (last - start);
  std::printf("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec\n");
  std::printf("%lld, %lld, %.4f, %.4f, %lld, %.4f\n", static_cast<long long>(io::to_ms(wall_start)),
              static_cast<long long>(io::to_ms(wall_end)), mb, mb / secs, static_cast<long long>(count),
              static_cast<double>(count) / secs);
  co_return count >= a->records ? 0 : 1;
}

}  // namespace

int perf_main(Args args) {
  PerfArgs a;
  a.producer.linger = 1ms;
  a.consumer.auto_offset_reset = client::OffsetReset::kEarliest;
  if (args.empty() || (args[0] != "produce" && args[0] != "consume")) {
    fail_usage("perf", "produce or consume?", kPerfUsage);
    return 2;
  }
  a.mode = std::string(args[0]);
  bool have_bootstrap = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    absl::Status s;
    if (arg == "--producer-props" || arg == "--consumer-props") {
      // Every following K=V up to the next option.
      while (i + 1 < args.size() && !args[i + 1].starts_with("--")) {
        std::string key;
        std::string v;
        if (!split_property(args[++i], &key, &v)) {
          s = absl::InvalidArgumentError(fmt::format("'{}' is not K=V", args[i]));
          break;
        }
        s = arg == "--producer-props" ? set_producer_property(key, v, &a.producer)
                                      : set_consumer_property(key, v, &a.consumer);
        if (key == "bootstrap.servers") have_bootstrap = true;
        if (!s.ok()) break;
      }
    } else if (i + 1 >= args.size()) {
      s = absl::InvalidArgumentError(fmt::format("{} needs a value", arg));
    } else {
      const std::string_view value = args[++i];
      if (arg == "--bootstrap-server") {
        s = parse_bootstrap(value, &a.producer.client);
        a.consumer.client.bootstrap = a.producer.client.bootstrap;
        have_bootstrap = true;
      } else if (arg == "--topic") {
        a.topic = std::string(value);
      } else if ((arg == "--num-records" || arg == "--messages") && parse_number(value).value_or(0) > 0) {
        a.records = *parse_number(value);
      } else if (arg == "--record-size" && parse_number(value).value_or(0) > 0) {
        a.record_size = *parse_number(value);
      } else if (arg == "--throughput" && parse_number(value).has_value()) {
        a.throughput = static_cast<double>(*parse_number(value));
      } else if (arg == "--timeout-ms" && parse_number(value).value_or(0) > 0) {
        a.timeout = std::chrono::milliseconds(*parse_number(value));
      } else {
        s = absl::InvalidArgumentError(fmt::format("bad argument {} {}", arg, value));
      }
    }
    if (!s.ok()) {
      fail_usage("perf", std::string(s.message()), kPerfUsage);
      return 2;
    }
  }
  for (client::ClientOptions* c : {&a.producer.client, &a.consumer.client}) {
    if (absl::Status s = finish_client_options(c); !s.ok()) {
      fail_usage("perf", std::string(s.message()), kPerfUsage);
      return 2;
    }
  }
  if (!have_bootstrap || a.topic.empty() || a.records <= 0) {
    fail_usage("perf", "--bootstrap-server, --topic and --num-records/--messages are required", kPerfUsage);
    return 2;
  }
  if (a.mode == "produce") return run_client_tool("perf", [&a](io::Context& ctx) { return perf_produce_run(ctx, &a); });
  return run_client_tool("perf", [&a](io::Context& ctx) { return perf_consume_run(ctx, &a); });
}

// ---------------------------------------------------------------------------
// brook groups (Kafka's kafka-consumer-groups)

namespace {

constexpr std::string_view kGroupsUsage =
    "brook groups --bootstrap-server H:P [--command-config F] --list\n"
    "       | --describe --group G [--state | --members]\n"
    "       | --delete --group G\n"
    "       | --reset-offsets --group G (--topic T | --all-topics)\n"
    "           (--to-earliest | --to-latest | --to-offset N | --shift-by N | --to-datetime YYYY-MM-DDTHH:MM:SS[.sss])\n"
    "           [--execute | --dry-run]";

struct GroupsArgs {
  client::ClientOptions client;
  std::string action;
  std::string group;
  std::string topic;
  bool all_topics = false;
  std::string view = "offsets";  // --describe: offsets, state or members
  std::string reset;             // earliest, latest, offset, shift, datetime
  int64_t reset_value = 0;
  bool execute = false;
};

// "2024-01-31T12:00:00[.123]" (UTC) in milliseconds since the epoch.
std::optional<int64_t> parse_datetime(std::string_view text) {
  std::tm tm{};
  int millis = 0;
  const std::string t(text);
  char* end = strptime(t.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) return std::nullopt;
  if (*end == '.') {
    char* after = nullptr;
    millis = static_cast<int>(std::strtol(end + 1, &after, 10));
    end = after;
  }
  if (*end != '\0' && std::string_view(end) != "Z") return std::nullopt;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + millis;
}

// The partitions of the named topics, sorted.
io::Task<absl::StatusOr<std::vector<client::TopicPartition>>> partitions_of(client::Cluster& cluster,
                                                                           std::vector<std::string> topics) {
  std::vector<client::TopicPartition> out;
  absl::StatusOr<std::vector<client::TopicInfo>> described = co_await client::describe_topics(cluster, topics);
  if (!described.ok()) co_return described.status();
  for (const client::TopicInfo& t : *described) {
    if (t.error_code != 0) co_return client::error_status(t.error_code, t.name);
    for (const client::PartitionInfo& p : t.partitions) out.emplace_back(t.name, p.partition);
  }
  std::sort(out.begin(), out.end());
  co_return out;
}

io::Task<int> groups_run(io::Context& ctx, const GroupsArgs* a) {
  client::Cluster cluster(ctx, a->client);
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "Error: %s\n", s.ToString().c_str());
    return 1;
  };
  if (a->action == "list") {
    absl::StatusOr<std::vector<client::GroupListing>> groups = co_await client::list_groups(cluster);
    if (!groups.ok()) co_return fail(groups.status());
    for (const client::GroupListing& g : *groups) std::printf("%s\n", g.group_id.c_str());
    co_return 0;
  }
  if (a->action == "delete") {
    absl::Status s = co_await client::delete_group(cluster, a->group);
    if (!s.ok()) co_return fail(s);
    std::printf("Deletion of requested consumer groups ('%s') was successful.\n", a->group.c_str());
    co_return 0;
  }
  absl::StatusOr<client::GroupDescription> d = co_await client::describe_group(cluster, a->group);
  if (!d.ok()) co_return fail(d.status());
  client::GroupOptions go;
  go.group_id = a->group;
  client::GroupMember reader(cluster, go);  // never joins: reads and commits as an admin
  if (a->action == "describe" && a->view == "state") {
    std::printf("%-30s %-20s %-20s %-20s %s\n", "GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS");
    const auto& b = cluster.brokers();
    auto it = b.find(d->coordinator);
    const std::string coordinator =
        it == b.end() ? fmt::format("({})", d->coordinator)
                      : fmt::format("{}:{} ({})", it->second.address.host, it->second.address.port, d->coordinator);
    std::printf("%-30s %-20s %-20s %-20s %zu\n", a->group.c_str(), coordinator.c_str(), d->protocol.c_str(),
                d->state.c_str(), d->members.size());
    co_return 0;
  }
  if (a->action == "describe" && a->view == "members") {
    std::printf("%-30s %-50s %-20s %-20s %s\n", "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS");
    for (const client::GroupMemberDescription& m : d->members) {
      std::printf("%-30s %-50s %-20s %-20s %zu\n", a->group.c_str(), m.member_id.c_str(),
                  m.client_host.empty() ? "-" : m.client_host.c_str(), m.client_id.c_str(), m.assignment.size());
    }
    co_return 0;
  }
  // Which partitions: for --describe those with a committed offset or an
  // owner; for a reset the topic's, or every one with an offset.
  std::map<client::TopicPartition, const client::GroupMemberDescription*> owner;
  for (const client::GroupMemberDescription& m : d->members) {
    for (const client::TopicPartition& tp : m.assignment) owner[tp] = &m;
  }
  absl::StatusOr<std::map<client::TopicPartition, int64_t>> committed = co_await reader.committed_all();
  if (!committed.ok()) co_return fail(committed.status());
  std::set<client::TopicPartition> chosen;
  if (a->action == "reset-offsets" && !a->all_topics) {
    std::vector<std::string> topics{a->topic};
    absl::StatusOr<std::vector<client::TopicPartition>> parts = co_await partitions_of(cluster, topics);
    if (!parts.ok()) co_return fail(parts.status());
    chosen.insert(parts->begin(), parts->end());
  } else {
    for (const auto& [tp, offset] : *committed) {
      if (offset >= 0) chosen.insert(tp);
    }
    if (a->action == "describe") {
      for (const auto& [tp, m] : owner) chosen.insert(tp);
    }
  }
  const std::vector<client::TopicPartition> shown(chosen.begin(), chosen.end());
  std::map<client::TopicPartition, absl::StatusOr<client::ListedOffset>> ends =
      co_await client::list_offsets(cluster, shown, client::kLatestOffset);
  if (a->action == "describe") {
    if (d->members.empty()) std::printf("\nConsumer group '%s' has no active members.\n", a->group.c_str());
    std::printf("\n%-30s %-30s %-10s %-15s %-15s %-10s %-50s %-20s %s\n", "GROUP", "TOPIC", "PARTITION",
                "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID");
    for (const client::TopicPartition& tp : shown) {
      const int64_t current = committed->contains(tp) ? committed->at(tp) : -1;
      const int64_t end = ends[tp].ok() ? ends[tp]->offset : -1;
      std::string member = "-", host = "-", client_id = "-";
      if (auto o = owner.find(tp); o != owner.end()) {
        member = o->second->member_id;
        host = o->second->client_host.empty() ? "-" : o->second->client_host;
        client_id = o->second->client_id;
      }
      const std::string cur = current >= 0 ? std::to_string(current) : "-";
      const std::string lag = current >= 0 && end >= 0 ? std::to_string(end - current) : "-";
      std::printf("%-30s %-30s %-10d %-15s %-15lld %-10s %-50s %-20s %s\n", a->group.c_str(), tp.topic.c_str(),
                  tp.partition, cur.c_str(), static_cast<long long>(end), lag.c_str(), member.c_str(), host.c_str(),
                  client_id.c_str());
    }
    co_return 0;
  }
  // --reset-offsets: only an inactive group, as Kafka's tool requires.
  if (d->state != "Empty" && d->state != "Dead") {
    std::fprintf(stderr,
                 "Error: Assignments can only be reset if the group '%s' is inactive, but the current state is %s.\n",
                 a->group.c_str(), d->state.c_str());
    co_return 1;
  }
  std::map<client::TopicPartition, absl::StatusOr<client::ListedOffset>> starts =
      co_await client::list_offsets(cluster, shown, client::kEarliestOffset);
  std::map<client::TopicPartition, absl::StatusOr<client::ListedOffset>> by_time;
  if (a->reset == "datetime") by_time = co_await client::list_offsets(cluster, shown, a->reset_value);
  std::map<client::TopicPartition, int64_t> target;
  for (const client::TopicPartition& tp : shown) {
    if (!starts[tp].ok() || !ends[tp].ok()) co_return fail(!starts[tp].ok() ? starts[tp].status() : ends[tp].status());
    const int64_t lo = starts[tp]->offset;
    const int64_t hi = ends[tp]->offset;
    const int64_t current = committed->contains(tp) && committed->at(tp) >= 0 ? committed->at(tp) : lo;
    int64_t t = current;
    if (a->reset == "earliest") t = lo;
    if (a->reset == "latest") t = hi;
    if (a->reset == "offset") t = a->reset_value;
    if (a->reset == "shift") t = current + a->reset_value;
    if (a->reset == "datetime") t = by_time[tp].ok() && by_time[tp]->offset >= 0 ? by_time[tp]->offset : hi;
    target[tp] = std::clamp(t, lo, hi);
  }
  std::printf("\n%-30s %-30s %-10s %s\n", "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET");
  for (const auto& [tp, off] : target) {
    std::printf("%-30s %-30s %-10d %lld\n", a->group.c_str(), tp.topic.c_str(), tp.partition,
                static_cast<long long>(off));
  }
  if (!a->execute) co_return 0;
  absl::Status s = co_await reader.commit(target);
  if (!s.ok()) co_return fail(s);
  co_return 0;
}

}  // namespace

int groups_main(Args args) {
  GroupsArgs a;
  CommonArgs common{&a.client, &a.topic, nullptr};
  absl::Status parsed = walk_options(
      args,
      {"--list", "--describe", "--delete", "--reset-offsets", "--state", "--members", "--offsets", "--all-topics",
       "--to-earliest", "--to-latest", "--execute", "--dry-run"},
      [&](std::string_view name, std::string_view value) -> absl::Status {
        bool handled = false;
        if (absl::Status st = common.take(name, value, &handled); handled) return st;
        auto set_reset = [&](std::string kind) -> absl::Status {
          if (!a.reset.empty()) return absl::InvalidArgumentError("one reset target only");
          a.reset = std::move(kind);
          return absl::OkStatus();
        };
        if (name == "--list" || name == "--describe" || name == "--delete" || name == "--reset-offsets") {
          if (!a.action.empty()) return absl::InvalidArgumentError("one of --list, --describe, --delete, --reset-offsets");
          a.action = std::string(name.substr(2));
        } else if (name == "--group") {
          a.group = std::string(value);
        } else if (name == "--state" || name == "--members" || name == "--offsets") {
          a.view = std::string(name.substr(2));
        } else if (name == "--all-topics") {
          a.all_topics = true;
        } else if (name == "--to-earliest") {
          return set_reset("earliest");
        } else if (name == "--to-latest") {
          return set_reset("latest");
        } else if (name == "--to-offset" && parse_number(value).has_value()) {
          a.reset_value = *parse_number(value);
          return set_reset("offset");
        } else if (name == "--shift-by" && (parse_number(value).has_value() ||
                                            (value.starts_with("-") && parse_number(value.substr(1)).has_value()))) {
          a.reset_value = value.starts_with("-") ? -*parse_number(value.substr(1)) : *parse_number(value);
          return set_reset("shift");
        } else if (name == "--to-datetime" && parse_datetime(value).has_value()) {
          a.reset_value = *parse_datetime(value);
          return set_reset("datetime");
        } else if (name == "--execute") {
          a.execute = true;
        } else if (name == "--dry-run") {
          a.execute = false;
        } else {
          return bad_option(name, value);
        }
        return absl::OkStatus();
      });
  if (parsed.ok()) parsed = finish_client_options(&a.client);
  if (!parsed.ok()) {
    fail_usage("groups", std::string(parsed.message()), kGroupsUsage);
    return 2;
  }
  if (!common.have_bootstrap || a.action.empty()) {
    fail_usage("groups", "--bootstrap-server and an action are required", kGroupsUsage);
    return 2;
  }
  if (a.action != "list" && a.group.empty()) {
    fail_usage("groups", fmt::format("--{} needs --group", a.action), kGroupsUsage);
    return 2;
  }
  if (a.action == "reset-offsets" && (a.reset.empty() || (a.topic.empty() && !a.all_topics))) {
    fail_usage("groups", "--reset-offsets needs a target and --topic or --all-topics", kGroupsUsage);
    return 2;
  }
  return run_client_tool("groups", [&a](io::Context& ctx) { return groups_run(ctx, &a); });
}

}  // namespace brook::tools

// ---------------------------------------------------------------------------
// brook transactions (Kafka's kafka-transactions)

namespace brook::tools {

namespace {

constexpr std::string_view kTransactionsUsage =
    "brook transactions --bootstrap-server H:P [--command-config F] list\n"
    "       | describe --transactional-id ID\n"
    "       | describe-producers --topic T --partition P\n"
    "       | find-hanging [--topic T [--partition P] | --broker-id N] [--max-transaction-timeout MINUTES]\n"
    "       | abort --topic T --partition P --start-offset N";

struct TransactionsArgs {
  client::ClientOptions client;
  std::string action;
  std::string transactional_id;
  std::string topic;
  std::optional<int32_t> partition;
  std::optional<int32_t> broker_id;
  int64_t max_timeout_minutes = 15;  // transaction.max.timeout.ms's default
  std::optional<int64_t> start_offset;
};

io::Task<int> transactions_run(io::Context& ctx, const TransactionsArgs* a) {
  client::Cluster cluster(ctx, a->client);
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "Error: %s\n", s.ToString().c_str());
    return 1;
  };
  if (a->action == "list") {
    absl::StatusOr<std::vector<client::TransactionListing>> listed = co_await client::list_transactions(cluster);
    if (!listed.ok()) co_return fail(listed.status());
    std::printf("%-40s %-12s %-20s %s\n", "TransactionalId", "Coordinator", "ProducerId", "TransactionState");
    for (const client::TransactionListing& t : *listed) {
      std::printf("%-40s %-12d %-20lld %s\n", t.transactional_id.c_str(), t.coordinator,
                  static_cast<long long>(t.producer_id), t.state.c_str());
    }
    co_return 0;
  }
  if (a->action == "describe") {
    absl::StatusOr<client::TransactionDescription> d =
        co_await client::describe_transaction(cluster, a->transactional_id);
    if (!d.ok()) co_return fail(d.status());
    std::vector<std::string> partitions;
    for (const client::TopicPartition& tp : d->partitions) partitions.push_back(fmt::format("{}-{}", tp.topic, tp.partition));
    const int64_t now_ms = io::to_ms(ctx.clock().wall_now());
    const std::string start = d->start_time_ms < 0 ? "None" : std::to_string(d->start_time_ms);
    const std::string duration = d->start_time_ms < 0 ? "None" : std::to_string(now_ms - d->start_time_ms);
    std::printf("%-13s %-30s %-12s %-13s %-20s %-20s %-29s %-21s %s\n", "CoordinatorId", "TransactionalId",
                "ProducerId", "ProducerEpoch", "TransactionState", "TransactionTimeoutMs",
                "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions");
    std::printf("%-13d %-30s %-12lld %-13d %-20s %-20d %-29s %-21s %s\n", d->coordinator, d->transactional_id.c_str(),
                static_cast<long long>(d->producer_id), d->producer_epoch, d->state.c_str(), d->timeout_ms,
                start.c_str(), duration.c_str(), absl::StrJoin(partitions, ",").c_str());
    co_return 0;
  }
  if (a->action == "find-hanging") {
    // The partitions: one, a topic's, those a broker holds, or every one.
    std::vector<client::TopicPartition> partitions;
    if (a->partition.has_value()) {
      partitions.emplace_back(a->topic, *a->partition);
    } else {
      std::vector<std::string> names;
      if (!a->topic.empty()) names.push_back(a->topic);
      absl::StatusOr<std::vector<client::TopicInfo>> topics = co_await client::describe_topics(cluster, names);
      if (!topics.ok()) co_return fail(topics.status());
      for (const client::TopicInfo& t : *topics) {
        if (t.error_code != 0) co_return fail(client::error_status(t.error_code, t.name));
        for (const client::PartitionInfo& p : t.partitions) {
          if (a->broker_id.has_value() && p.leader != *a->broker_id &&
              std::find(p.replicas.begin(), p.replicas.end(), *a->broker_id) == p.replicas.end()) {
            continue;
          }
          partitions.emplace_back(t.name, p.partition);
        }
      }
    }
    absl::StatusOr<std::vector<client::HangingTransaction>> hanging = co_await client::find_hanging_transactions(
        cluster, std::move(partitions), std::chrono::minutes(a->max_timeout_minutes));
    if (!hanging.ok()) co_return fail(hanging.status());
    const int64_t now_ms = io::to_ms(ctx.clock().wall_now());
    std::printf("%-30s %-10s %-20s %-14s %-17s %-12s %-15s %s\n", "Topic", "Partition", "ProducerId", "ProducerEpoch",
                "CoordinatorEpoch", "StartOffset", "LastTimestamp", "Duration(min)");
    for (const client::HangingTransaction& h : *hanging) {
      std::printf("%-30s %-10d %-20lld %-14d %-17d %-12lld %-15lld %lld\n", h.partition.topic.c_str(),
                  h.partition.partition, static_cast<long long>(h.producer.producer_id), h.producer.producer_epoch,
                  h.producer.coordinator_epoch, static_cast<long long>(h.producer.current_txn_start_offset),
                  static_cast<long long>(h.producer.last_timestamp_ms),
                  static_cast<long long>((now_ms - h.producer.last_timestamp_ms) / 60000));
    }
    co_return 0;
  }
  if (a->action == "abort") {
    absl::Status s =
        co_await client::abort_transaction(cluster, client::TopicPartition(a->topic, *a->partition), *a->start_offset);
    if (!s.ok()) co_return fail(s);
    std::printf("Aborted the transaction open on %s-%d from offset %lld.\n", a->topic.c_str(), *a->partition,
                static_cast<long long>(*a->start_offset));
    co_return 0;
  }
  absl::StatusOr<std::vector<client::ProducerState>> producers =
      co_await client::describe_producers(cluster, client::TopicPartition(a->topic, *a->partition));
  if (!producers.ok()) co_return fail(producers.status());
  std::printf("%-20s %-14s %-23s %-13s %-15s %s\n", "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch",
              "LastSequence", "LastTimestamp", "CurrentTransactionStartOffset");
  for (const client::ProducerState& p : *producers) {
    const std::string start = p.current_txn_start_offset < 0 ? "None" : std::to_string(p.current_txn_start_offset);
    std::printf("%-20lld %-14d %-23d %-13d %-15lld %s\n", static_cast<long long>(p.producer_id), p.producer_epoch,
                p.coordinator_epoch, p.last_sequence, static_cast<long long>(p.last_timestamp_ms), start.c_str());
  }
  co_return 0;
}

}  // namespace

int transactions_main(Args args) {
  TransactionsArgs a;
  CommonArgs common{&a.client, &a.topic, &a.partition};
  absl::Status parsed =
      walk_options(args, {"list", "describe", "describe-producers", "find-hanging", "abort"},
                   [&](std::string_view name, std::string_view value) -> absl::Status {
                     bool handled = false;
                     if (absl::Status st = common.take(name, value, &handled); handled) return st;
                     if (name == "list" || name == "describe" || name == "describe-producers" ||
                         name == "find-hanging" || name == "abort") {
                       if (!a.action.empty()) return absl::InvalidArgumentError("one action only");
                       a.action = std::string(name);
                     } else if (name == "--transactional-id") {
                       a.transactional_id = std::string(value);
                     } else if (name == "--broker-id" && parse_number(value).value_or(INT32_MAX + 1LL) <= INT32_MAX) {
                       a.broker_id = static_cast<int32_t>(*parse_number(value));
                     } else if (name == "--max-transaction-timeout" && parse_number(value).value_or(0) > 0) {
                       a.max_timeout_minutes = *parse_number(value);
                     } else if (name == "--start-offset" && parse_number(value).has_value()) {
                       a.start_offset = *parse_number(value);
                     } else {
                       return bad_option(name, value);
                     }
                     return absl::OkStatus();
                   });
  if (parsed.ok()) parsed = finish_client_options(&a.client);
  if (!parsed.ok()) {
    fail_usage("transactions", std::string(parsed.message()), kTransactionsUsage);
    return 2;
  }
  if (!common.have_bootstrap || a.action.empty()) {
    fail_usage("transactions", "--bootstrap-server and an action are required", kTransactionsUsage);
    return 2;
  }
  if (a.action == "describe" && a.transactional_id.empty()) {
    fail_usage("transactions", "describe needs --transactional-id", kTransactionsUsage);
    return 2;
  }
  if ((a.action == "describe-producers" || a.action == "abort") && (a.topic.empty() || !a.partition.has_value())) {
    fail_usage("transactions", fmt::format("{} needs --topic and --partition", a.action), kTransactionsUsage);
    return 2;
  }
  if (a.action == "abort" && !a.start_offset.has_value()) {
    fail_usage("transactions", "abort needs --start-offset", kTransactionsUsage);
    return 2;
  }
  if (a.action == "find-hanging" && a.partition.has_value() && a.topic.empty()) {
    fail_usage("transactions", "--partition needs --topic", kTransactionsUsage);
    return 2;
  }
  return run_client_tool("transactions", [&a](io::Context& ctx) { return transactions_run(ctx, &a); });
}

// ---------------------------------------------------------------------------
// brook configs

namespace {

constexpr std::string_view kConfigsUsage =
    "brook configs --bootstrap-server H:P [--command-config F]\n"
    "       --describe --entity-type users|topics|brokers [--entity-name N]\n"
    "       | --alter --entity-type users|topics|brokers --entity-name N [--add-config K=V,...] [--delete-config K,...]\n"
    "       (--user U, --topic T, --broker B stand for --entity-type and --entity-name;\n"
    "        users take SCRAM-SHA-256=[iterations=N,password=P] and SCRAM-SHA-512=[...])";

struct ConfigsArgs {
  client::ClientOptions client;
  std::string action;  // describe, alter
  std::string entity_type;
  std::optional<std::string> entity_name;
  std::vector<std::pair<std::string, std::string>> add;
  std::vector<std::string> remove;
};

// Kafka's --add-config: "k=v,k2=[a,b]" split at the commas outside
// brackets.
absl::Status parse_add_config(std::string_view text, std::vector<std::pair<std::string, std::string>>* out) {
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] == '[') ++depth;
    if (i < text.size() && text[i] == ']') --depth;
    if (i < text.size() && (text[i] != ',' || depth > 0)) continue;
    const std::string_view item = text.substr(start, i - start);
    start = i + 1;
    if (item.empty()) continue;
    std::string key;
    std::string value;
    if (!split_property(item, &key, &value)) return absl::InvalidArgumentError(fmt::format("--add-config: '{}' is not K=V", item));
    out->emplace_back(std::move(key), std::move(value));
  }
  if (depth != 0) return absl::InvalidArgumentError("--add-config: unbalanced brackets");
  return absl::OkStatus();
}

// "[iterations=8192,password=secret]" -> a SCRAM upsertion.
absl::StatusOr<client::ScramAlteration> scram_upsertion(const std::string& user, net::ScramMechanism mechanism,
                                                        std::string_view value) {
  const std::string_view name = net::scram_mechanism_name(mechanism);
  absl::StatusOr<std::map<std::string, std::string>> settings = core::parse_scram_settings(value);
  if (!settings.ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: {} (expected [iterations=N,password=P])", name,
                                                  std::string(settings.status().message())));
  }
  client::ScramAlteration a;
  a.user = user;
  a.mechanism = mechanism;
  for (const auto& [k, v] : *settings) {
    if (k == "password") {
      a.password = v;
    } else if (k == "iterations" && parse_number(v).value_or(0) > 0 && *parse_number(v) <= INT32_MAX) {
      a.iterations = static_cast<int32_t>(*parse_number(v));
    } else {
      return absl::InvalidArgumentError(fmt::format("{}: unknown or bad '{}={}'", name, k, v));
    }
  }
  if (!settings->contains("password")) return absl::InvalidArgumentError(fmt::format("{}: no password", name));
  return a;
}

io::Task<int> configs_users(client::Cluster& cluster, const ConfigsArgs* a) {
  if (a->action == "describe") {
    std::vector<std::string> users;
    if (a->entity_name.has_value()) users.push_back(*a->entity_name);
    auto described = co_await client::describe_user_scram_credentials(cluster, std::move(users));
    if (!described.ok()) {
      std::fprintf(stderr, "brook configs: %s\n", described.status().ToString().c_str());
      co_return 1;
    }
    int code = 0;
    for (const auto& [user, infos] : *described) {
      if (absl::IsNotFound(infos.status())) continue;  // no credentials: nothing to show, as Kafka's tool
      if (!infos.ok()) {
        std::fprintf(stderr, "brook configs: user %s: %s\n", user.c_str(), infos.status().ToString().c_str());
        code = 1;
        continue;
      }
      std::vector<std::string> parts;
      for (const client::ScramCredentialInfo& i : *infos) {
        parts.push_back(fmt::format("{}=iterations={}", net::scram_mechanism_name(i.mechanism), i.iterations));
      }
      std::printf("SCRAM credential configs for user-principal '%s' are %s\n", user.c_str(),
                  absl::StrJoin(parts, ", ").c_str());
    }
    co_return code;
  }
  std::vector<client::ScramAlteration> alterations;
  for (const auto& [key, value] : a->add) {
    std::optional<net::ScramMechanism> m = net::scram_mechanism(key);
    if (!m.has_value()) {
      std::fprintf(stderr, "brook configs: %s: users take SCRAM-SHA-256 and SCRAM-SHA-512 here\n", key.c_str());
      co_return 2;
    }
    absl::StatusOr<client::ScramAlteration> up = scram_upsertion(*a->entity_name, *m, value);
    if (!up.ok()) {
      std::fprintf(stderr, "brook configs: %s\n", std::string(up.status().message()).c_str());
      co_return 2;
    }
    alterations.push_back(std::move(*up));
  }
  for (const std::string& key : a->remove) {
    std::optional<net::ScramMechanism> m = net::scram_mechanism(key);
    if (!m.has_value()) {
      std::fprintf(stderr, "brook configs: %s: users take SCRAM-SHA-256 and SCRAM-SHA-512 here\n", key.c_str());
      co_return 2;
    }
    client::ScramAlteration d;
    d.user = *a->entity_name;
    d.mechanism = *m;
    d.remove = true;
    alterations.push_back(std::move(d));
  }
  auto altered = co_await client::alter_user_scram_credentials(cluster, std::move(alterations));
  if (!altered.ok()) {
    std::fprintf(stderr, "brook configs: %s\n", altered.status().ToString().c_str());
    co_return 1;
  }
  for (const auto& [user, status] : *altered) {
    if (!status.ok()) {
      std::fprintf(stderr, "brook configs: user %s: %s\n", user.c_str(), status.ToString().c_str());
      co_return 1;
    }
  }
  std::printf("Completed updating config for user %s.\n", a->entity_name->c_str());
  co_return 0;
}

io::Task<int> configs_resource(client::Cluster& cluster, const ConfigsArgs* a) {
  const bool topic = a->entity_type == "topics";
  const client::ResourceType type = topic ? client::ResourceType::kTopic : client::ResourceType::kBroker;
  const std::string name = a->entity_name.value_or("");
  if (a->action == "describe") {
    auto entries = co_await client::describe_configs(cluster, type, name);
    if (!entries.ok()) {
      std::fprintf(stderr, "brook configs: %s\n", entries.status().ToString().c_str());
      co_return 1;
    }
    // As kafka-configs: the resource's own dynamic configs, a topic's
    // (source 1), a broker's (2) or, for the cluster-wide default broker
    // (no name), the dynamic defaults (3); not the static (4) or default
    // (5) ones.
    std::printf("Dynamic configs for %s %s are:\n", topic ? "topic" : "broker", name.c_str());
    const int8_t wanted = topic ? 1 : name.empty() ? 3 : 2;
    const char* source = topic ? "DYNAMIC_TOPIC_CONFIG" : name.empty() ? "DYNAMIC_DEFAULT_BROKER_CONFIG"
                                                                       : "DYNAMIC_BROKER_CONFIG";
    for (const client::ConfigEntry& e : *entries) {
      if (e.source != wanted) continue;
      const std::string value = e.is_sensitive ? "null" : e.value.value_or("null");
      std::printf("  %s=%s sensitive=%s synonyms={%s:%s=%s}\n", e.name.c_str(), value.c_str(),
                  e.is_sensitive ? "true" : "false", source, e.name.c_str(), value.c_str());
    }
    co_return 0;
  }
  std::vector<client::AlterConfig> ops;
  for (const auto& [key, value] : a->add) {
    std::string v = value;
    // A list value in brackets ("k=[a,b]") is the list "a,b".
    if (v.size() >= 2 && v.front() == '[' && v.back() == ']') v = v.substr(1, v.size() - 2);
    ops.push_back(client::AlterConfig{key, client::AlterOp::kSet, std::move(v)});
  }
  for (const std::string& key : a->remove) ops.push_back(client::AlterConfig{key, client::AlterOp::kDelete, std::nullopt});
  absl::Status s = co_await client::incremental_alter_configs(cluster, type, name, std::move(ops));
  if (!s.ok()) {
    std::fprintf(stderr, "brook configs: %s\n", s.ToString().c_str());
    co_return 1;
  }
  std::printf("Completed updating config for %s %s.\n", topic ? "topic" : "broker", name.c_str());
  co_return 0;
}

io::Task<int> configs_run(io::Context& ctx, const ConfigsArgs* a) {
  client::Cluster cluster(ctx, a->client);
  if (a->entity_type == "users") co_return co_await configs_users(cluster, a);
  co_return co_await configs_resource(cluster, a);
}

}  // namespace

int configs_main(Args args) {
  ConfigsArgs a;
  std::string unused_topic;
  CommonArgs common{&a.client, &unused_topic, nullptr};
  absl::Status parsed = walk_options(
      args, {"--describe", "--alter"}, [&](std::string_view name, std::string_view value) -> absl::Status {
        if (name == "--topic") {
          a.entity_type = "topics";
          a.entity_name = std::string(value);
          return absl::OkStatus();
        }
        bool handled = false;
        if (absl::Status s = common.take(name, value, &handled); handled) return s;
        if (name == "--describe" || name == "--alter") {
          if (!a.action.empty()) return absl::InvalidArgumentError("one of --describe, --alter");
          a.action = std::string(name.substr(2));
        } else if (name == "--entity-type" && (value == "users" || value == "topics" || value == "brokers")) {
          a.entity_type = std::string(value);
        } else if (name == "--entity-name") {
          a.entity_name = std::string(value);
        } else if (name == "--user" || name == "--broker") {
          a.entity_type = name == "--user" ? "users" : "brokers";
          a.entity_name = std::string(value);
        } else if (name == "--add-config") {
          return parse_add_config(value, &a.add);
        } else if (name == "--delete-config") {
          for (absl::string_view k : absl::StrSplit(absl::string_view(value.data(), value.size()), ',', absl::SkipEmpty())) {
            a.remove.emplace_back(k.data(), k.size());
          }
        } else {
          return bad_option(name, value);
        }
        return absl::OkStatus();
      });
  if (parsed.ok()) parsed = finish_client_options(&a.client);
  if (!parsed.ok()) {
    fail_usage("configs", std::string(parsed.message()), kConfigsUsage);
    return 2;
  }
  if (!common.have_bootstrap || a.action.empty() || a.entity_type.empty()) {
    fail_usage("configs", "--bootstrap-server, an action and --entity-type are required", kConfigsUsage);
    return 2;
  }
  if ((a.action == "alter" || a.entity_type != "users") && !a.entity_name.has_value()) {
    fail_usage("configs", "--entity-name is required here", kConfigsUsage);
    return 2;
  }
  if (a.action == "alter" && a.add.empty() && a.remove.empty()) {
    fail_usage("configs", "--alter needs --add-config or --delete-config", kConfigsUsage);
    return 2;
  }
  return run_client_tool("configs", [&a](io::Context& ctx) { return configs_run(ctx, &a); });
}

}  // namespace brook::tools


// ---------------------------------------------------------------------------
// brook reassign-partitions

namespace brook::tools {

namespace {

constexpr std::string_view kReassignUsage =
    "brook reassign-partitions --bootstrap-server H:P [--command-config F]\n"
    "       --execute | --verify | --cancel --reassignment-json-file F\n"
    "       | --list\n"
    "       (the file: {\"version\":1,\"partitions\":[{\"topic\":\"T\",\"partition\":P,\"replicas\":[B,...]},...]})";

using Plan = std::map<client::TopicPartition, std::vector<int32_t>>;

struct ReassignArgs {
  client::ClientOptions client;
  std::string action;  // execute, verify, cancel, list
  std::string file;
  Plan plan;
};

// The partitions and replicas of a reassignment file (Kafka's format:
// version 1; "log_dirs", when given, may only say "any").
absl::StatusOr<Plan> read_plan(const std::string& path) {
  absl::StatusOr<std::string> text = read_whole_file(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<JsonValue> root = parse_json(*text);
  if (!root.ok()) return absl::InvalidArgumentError(fmt::format("{}: {}", path, std::string(root.status().message())));
  auto bad = [&](std::string_view why) { return absl::InvalidArgumentError(fmt::format("{}: {}", path, why)); };
  if (root->kind != JsonValue::Kind::kObject) return bad("not a JSON object");
  const JsonValue* version = root->field("version");
  if (version == nullptr || version->integer() != 1) return bad("\"version\" must be 1");
  const JsonValue* partitions = root->field("partitions");
  if (partitions == nullptr || partitions->kind != JsonValue::Kind::kArray) return bad("no \"partitions\" array");
  Plan plan;
  for (const JsonValue& p : partitions->items) {
    const JsonValue* topic = p.field("topic");
    const JsonValue* partition = p.field("partition");
    const JsonValue* replicas = p.field("replicas");
    if (topic == nullptr || topic->kind != JsonValue::Kind::kString || partition == nullptr ||
        partition->integer().value_or(-1) < 0 || *partition->integer() > INT32_MAX || replicas == nullptr ||
        replicas->kind != JsonValue::Kind::kArray) {
      return bad("each partition needs \"topic\", \"partition\" and \"replicas\"");
    }
    std::vector<int32_t> ids;
    for (const JsonValue& r : replicas->items) {
      if (r.integer().value_or(-1) < 0 || *r.integer() > INT32_MAX) return bad("replicas are broker ids");
      ids.push_back(static_cast<int32_t>(*r.integer()));
    }
    if (const JsonValue* dirs = p.field("log_dirs")) {
      if (dirs->kind != JsonValue::Kind::kArray || dirs->items.size() != ids.size()) {
        return bad("\"log_dirs\" must name one directory per replica");
      }
      for (const JsonValue& d : dirs->items) {
        if (d.kind != JsonValue::Kind::kString || d.text != "any") return bad("log directories other than \"any\" are not supported");
      }
    }
    const client::TopicPartition tp(topic->text, static_cast<int32_t>(*partition->integer()));
    if (!plan.emplace(tp, std::move(ids)).second) {
      return bad(fmt::format("partition {}-{} is listed twice", tp.topic, tp.partition));
    }
  }
  if (plan.empty()) return bad("no partitions to reassign");
  return plan;
}

std::string partition_name(const client::TopicPartition& tp) { return fmt::format("{}-{}", tp.topic, tp.partition); }

// A plan in the file's format (topic names need no escaping).
std::string plan_json(const Plan& plan) {
  std::vector<std::string> parts;
  for (const auto& [tp, replicas] : plan) {
    std::vector<std::string> dirs(replicas.size(), "\"any\"");
    parts.push_back(fmt::format("{{\"topic\":\"{}\",\"partition\":{},\"replicas\":[{}],\"log_dirs\":[{}]}}", tp.topic,
                                tp.partition, join_ids(replicas), fmt::join(dirs, ",")));
  }
  return fmt::format("{{\"version\":1,\"partitions\":[{}]}}", fmt::join(parts, ","));
}

io::Task<int> reassign_run(io::Context& ctx, const ReassignArgs* a) {
  client::Cluster cluster(ctx, a->client);
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "Error: %s\n", s.ToString().c_str());
    return 1;
  };
  if (a->action == "list") {
    absl::StatusOr<std::map<client::TopicPartition, client::OngoingReassignment>> ongoing =
        co_await client::list_partition_reassignments(cluster, {});
    if (!ongoing.ok()) co_return fail(ongoing.status());
    if (ongoing->empty()) {
      std::printf("No partition reassignments found.\n");
      co_return 0;
    }
    std::printf("Current partition reassignments:\n");
    for (const auto& [tp, r] : *ongoing) {
      std::string line = fmt::format("{}: replicas: {}.", partition_name(tp), join_ids(r.replicas));
      if (!r.adding.empty()) line += fmt::format(" adding: {}.", join_ids(r.adding));
      if (!r.removing.empty()) line += fmt::format(" removing: {}.", join_ids(r.removing));
      std::printf("%s\n", line.c_str());
    }
    co_return 0;
  }
  // The plan's partitions as they are now.
  std::set<std::string> names;
  for (const auto& [tp, _] : a->plan) names.insert(tp.topic);
  absl::StatusOr<std::vector<client::TopicInfo>> topics =
      co_await client::describe_topics(cluster, std::vector<std::string>(names.begin(), names.end()));
  if (!topics.ok()) co_return fail(topics.status());
  Plan current;
  for (const client::TopicInfo& t : *topics) {
    if (t.error_code != 0) co_return fail(client::error_status(t.error_code, fmt::format("topic {}", t.name)));
    for (const client::PartitionInfo& p : t.partitions) {
      const client::TopicPartition tp(t.name, p.partition);
      if (a->plan.contains(tp)) current[tp] = p.replicas;
    }
  }
  for (const auto& [tp, _] : a->plan) {
    if (!current.contains(tp)) co_return fail(absl::NotFoundError(fmt::format("partition {} does not exist", partition_name(tp))));
  }
  std::vector<client::TopicPartition> partitions;
  for (const auto& [tp, _] : a->plan) partitions.push_back(tp);
  if (a->action == "verify") {
    absl::StatusOr<std::map<client::TopicPartition, client::OngoingReassignment>> ongoing =
        co_await client::list_partition_reassignments(cluster, partitions);
    if (!ongoing.ok()) co_return fail(ongoing.status());
    std::printf("Status of partition reassignment:\n");
    for (const auto& [tp, target] : a->plan) {
      if (ongoing->contains(tp)) {
        std::printf("Reassignment of partition %s is still in progress.\n", partition_name(tp).c_str());
      } else if (current[tp] == target) {
        std::printf("Reassignment of partition %s is completed.\n", partition_name(tp).c_str());
      } else {
        std::printf("There is no active reassignment of partition %s, but replica set is %s rather than %s.\n",
                    partition_name(tp).c_str(), join_ids(current[tp]).c_str(),
                    join_ids(target).c_str());
      }
    }
    co_return 0;
  }
  std::map<client::TopicPartition, std::optional<std::vector<int32_t>>> targets;
  for (const auto& [tp, replicas] : a->plan) {
    targets.emplace(tp, a->action == "execute" ? std::optional<std::vector<int32_t>>(replicas) : std::nullopt);
  }
  if (a->action == "execute") {
    std::printf("Current partition replica assignment\n\n%s\n\nSave this to use as the --reassignment-json-file "
                "option during rollback\n", plan_json(current).c_str());
  }
  absl::StatusOr<std::map<client::TopicPartition, absl::Status>> done =
      co_await client::alter_partition_reassignments(cluster, std::move(targets));
  if (!done.ok()) co_return fail(done.status());
  std::vector<std::string> ok;
  std::vector<std::string> errors;
  for (const auto& [tp, status] : *done) {
    if (status.ok()) {
      ok.push_back(partition_name(tp));
    } else if (a->action == "cancel" && absl::StrContains(status.message(), "NO_REASSIGNMENT_IN_PROGRESS")) {
      continue;  // nothing to cancel there
    } else {
      errors.push_back(fmt::format("{}: {}", partition_name(tp), status.ToString()));
    }
  }
  if (a->action == "execute" && !ok.empty()) {
    std::printf("Successfully started partition reassignment%s for %s\n", ok.size() == 1 ? "" : "s",
                absl::StrJoin(ok, ",").c_str());
  } else if (a->action == "cancel") {
    if (ok.empty()) {
      std::printf("None of the specified partition reassignments are active.\n");
    } else {
      std::printf("Successfully cancelled partition reassignment%s for: %s\n", ok.size() == 1 ? "" : "s",
                  absl::StrJoin(ok, ",").c_str());
    }
  }
  if (!errors.empty()) {
    std::fprintf(stderr, "Error reassigning partition(s):\n%s\n", absl::StrJoin(errors, "\n").c_str());
    co_return 1;
  }
  co_return 0;
}

}  // namespace

int reassign_partitions_main(Args args) {
  ReassignArgs a;
  std::string unused_topic;
  CommonArgs common{&a.client, &unused_topic, nullptr};
  absl::Status parsed = walk_options(
      args, {"--execute", "--verify", "--cancel", "--list"},
      [&](std::string_view name, std::string_view value) -> absl::Status {
        bool handled = false;
        if (absl::Status s = common.take(name, value, &handled); handled) return s;
        if (name == "--execute" || name == "--verify" || name == "--cancel" || name == "--list") {
          if (!a.action.empty()) return absl::InvalidArgumentError("one of --execute, --verify, --cancel, --list");
          a.action = std::string(name.substr(2));
        } else if (name == "--reassignment-json-file") {
          a.file = std::string(value);
        } else {
          return bad_option(name, value);
        }
        return absl::OkStatus();
      });
  if (parsed.ok()) parsed = finish_client_options(&a.client);
  if (!parsed.ok()) {
    fail_usage("reassign-partitions", std::string(parsed.message()), kReassignUsage);
    return 2;
  }
  if (!common.have_bootstrap || a.action.empty()) {
    fail_usage("reassign-partitions", "--bootstrap-server and an action are required", kReassignUsage);
    return 2;
  }
  if (a.action != "list") {
    if (a.file.empty()) {
      fail_usage("reassign-partitions", fmt::format("--{} needs --reassignment-json-file", a.action), kReassignUsage);
      return 2;
    }
    absl::StatusOr<Plan> plan = read_plan(a.file);
    if (!plan.ok()) {
      fail_usage("reassign-partitions", std::string(plan.status().message()), kReassignUsage);
      return 2;
    }
    a.plan = *std::move(plan);
  }
  return run_client_tool("reassign-partitions", [&a](io::Context& ctx) { return reassign_run(ctx, &a); });
}

}  // namespace brook::tools
