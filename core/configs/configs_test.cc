// core/configs/configs_test.cc
//
// Tests of the config tables, validation and the DescribeConfigs view. The
// expected messages, defaults and synonym lists are Kafka 3.9's.
#include "core/configs/configs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace brook::configs {
namespace {

using metadata::ConfigMap;
using metadata::ConfigResource;
using metadata::kConfigResourceBroker;
using metadata::kConfigResourceBrokerLogger;
using metadata::kConfigResourceClientMetrics;
using metadata::kConfigResourceGroup;
using metadata::kConfigResourceTopic;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr ConfigSource kTopic = ConfigSource::kTopicConfig;
constexpr ConfigSource kDynamicBroker = ConfigSource::kDynamicBrokerConfig;
constexpr ConfigSource kDynamicDefault = ConfigSource::kDynamicDefaultBrokerConfig;
constexpr ConfigSource kStatic = ConfigSource::kStaticBrokerConfig;
constexpr ConfigSource kDefault = ConfigSource::kDefaultConfig;

DescribedSynonym syn(std::string name, std::optional<std::string> value, ConfigSource source) {
  return {std::move(name), std::move(value), source};
}

std::string message(const absl::Status& status) { return std::string(status.message()); }

absl::Status topic_status(std::string_view name, std::string_view value) {
  return validate(kConfigResourceTopic, name, value);
}

absl::Status broker_status(std::string_view name, std::string_view value) {
  return validate(kConfigResourceBroker, name, value);
}

// Describes and returns the entries by name; fails the test on an error.
std::map<std::string, DescribedConfig> describe_map(const ConfigResource& resource,
                                                    const ConfigMap* configs,
                                                    const BrokerLayers& broker,
                                                    DescribeOptions options = {}) {
  absl::StatusOr<std::vector<DescribedConfig>> entries =
      describe(resource, configs, broker, options);
  EXPECT_TRUE(entries.ok()) << entries.status();
  std::map<std::string, DescribedConfig> by_name;
  if (!entries.ok()) return by_name;
  for (DescribedConfig& entry : *entries) by_name.emplace(entry.name, std::move(entry));
  return by_name;
}

DescribeOptions with_synonyms() { return {.include_synonyms = true}; }

// ---------------------------------------------------------------------------
// Tables.

// Every topic config of Kafka 3.9's LogConfig is defined, with a default.
TEST(ConfigTables, TopicConfigsCoverKafka) {
  const std::vector<std::string_view> kafka = {
      "cleanup.policy",
      "compression.gzip.level",
      "compression.lz4.level",
      "compression.type",
      "compression.zstd.level",
      "delete.retention.ms",
      "file.delete.delay.ms",
      "flush.messages",
      "flush.ms",
      "follower.replication.throttled.replicas",
      "index.interval.bytes",
      "leader.replication.throttled.replicas",
      "local.retention.bytes",
      "local.retention.ms",
      "max.compaction.lag.ms",
      "max.message.bytes",
      "message.downconversion.enable",
      "message.format.version",
      "message.timestamp.after.max.ms",
      "message.timestamp.before.max.ms",
      "message.timestamp.difference.max.ms",
      "message.timestamp.type",
      "min.cleanable.dirty.ratio",
      "min.compaction.lag.ms",
      "min.insync.replicas",
      "preallocate",
      "remote.log.copy.disable",
      "remote.log.delete.on.disable",
      "remote.storage.enable",
      "retention.bytes",
      "retention.ms",
      "segment.bytes",
      "segment.index.bytes",
      "segment.jitter.ms",
      "segment.ms",
      "unclean.leader.election.enable",
  };
  EXPECT_EQ(topic_configs().size(), kafka.size());
  for (std::string_view name : kafka) {
    const ConfigDef* def = find_topic_config(name);
    ASSERT_NE(def, nullptr) << name;
    EXPECT_TRUE(def->default_value.has_value()) << name;
    EXPECT_FALSE(def->doc.empty()) << name;
    EXPECT_NE(def->type, ConfigType::kUnknown) << name;
  }
  EXPECT_EQ(find_topic_config("retention.hours"), nullptr);
  EXPECT_EQ(find_broker_config("retention.ms"), nullptr);
}

// A few defaults and types, as Kafka renders them.
TEST(ConfigTables, KafkaDefaults) {
  auto expect = [](std::string_view name, ConfigType type, std::string_view value) {
    const ConfigDef* def = find_topic_config(name);
    ASSERT_NE(def, nullptr);
    EXPECT_EQ(def->type, type) << name;
    EXPECT_EQ(def->default_value, value) << name;
  };
  expect("retention.ms", ConfigType::kLong, "604800000");
  expect("segment.bytes", ConfigType::kInt, "1073741824");
  expect("max.message.bytes", ConfigType::kInt, "1048588");
  expect("cleanup.policy", ConfigType::kList, "delete");
  expect("compression.type", ConfigType::kString, "producer");
  expect("min.cleanable.dirty.ratio", ConfigType::kDouble, "0.5");
  expect("leader.replication.throttled.replicas", ConfigType::kList, "");
  expect("local.retention.ms", ConfigType::kLong, "-2");
  EXPECT_EQ(find_broker_config("log.retention.ms")->default_value, std::nullopt);
  EXPECT_EQ(find_broker_config("log.retention.hours")->default_value, "168");
}

// Names are unique, every default passes its own config's check, and every
// default is already in Kafka's rendering (a broker describes it unchanged).
TEST(ConfigTables, DefaultsAreValidAndCanonical) {
  for (std::span<const ConfigDef> table : {topic_configs(), broker_configs()}) {
    std::set<std::string_view> names;
    for (const ConfigDef& def : table) EXPECT_TRUE(names.insert(def.name).second) << def.name;
  }
  for (const ConfigDef& def : topic_configs()) {
    EXPECT_TRUE(topic_status(def.name, *def.default_value).ok()) << def.name;
  }
  StaticConfig empty;
  auto entries = describe_map({kConfigResourceBroker, "1"}, nullptr, {.static_config = &empty});
  for (const ConfigDef& def : broker_configs()) {
    if (def.update == Update::kQuota) {
      EXPECT_FALSE(entries.contains(std::string(def.name))) << def.name;
      continue;
    }
    ASSERT_TRUE(entries.contains(std::string(def.name))) << def.name;
    const DescribedConfig& entry = entries.at(std::string(def.name));
    if (def.is_sensitive()) {
      EXPECT_EQ(entry.value, std::nullopt) << def.name;
    } else {
      EXPECT_EQ(entry.value, def.default_value) << def.name;
    }
    EXPECT_EQ(entry.source, kDefault) << def.name;
  }
}

// Topic synonyms name broker configs, and with no broker overrides the
// broker defaults yield exactly the topic defaults.
TEST(ConfigTables, TopicSynonymsAreBrokerConfigs) {
  for (const ConfigDef& def : topic_configs()) {
    for (const Synonym& synonym : def.synonyms()) {
      const ConfigDef* broker = find_broker_config(synonym.name);
      ASSERT_NE(broker, nullptr) << def.name << " <- " << synonym.name;
      EXPECT_NE(broker->update, Update::kQuota);
    }
    EXPECT_EQ(topic_default_value(def, {}), def.default_value) << def.name;
  }
  std::vector<std::string_view> retention;
  for (const Synonym& s : find_topic_config("retention.ms")->synonyms())
    retention.push_back(s.name);
  EXPECT_THAT(retention,
              ElementsAre("log.retention.ms", "log.retention.minutes", "log.retention.hours"));
  EXPECT_EQ(find_topic_config("max.message.bytes")->synonyms()[0].name, "message.max.bytes");
  EXPECT_EQ(find_topic_config("cleanup.policy")->synonyms()[0].name, "log.cleanup.policy");
  EXPECT_EQ(find_topic_config("segment.bytes")->synonyms()[0].name, "log.segment.bytes");
  EXPECT_THAT(find_topic_config("remote.storage.enable")->synonyms(), IsEmpty());
}

// Dynamic broker configs are alterable; the static ones DescribeConfigs shows
// are read-only, as Kafka's DynamicBrokerConfig has them.
TEST(ConfigTables, BrokerUpdateModes) {
  for (std::string_view name :
       {"num.io.threads", "num.network.threads", "num.replica.fetchers", "background.threads",
        "message.max.bytes", "min.insync.replicas", "unclean.leader.election.enable",
        "log.retention.ms", "log.retention.bytes", "log.segment.bytes", "log.cleanup.policy",
        "compression.type", "log.cleaner.threads", "max.connections", "metric.reporters"}) {
    ASSERT_NE(find_broker_config(name), nullptr) << name;
    EXPECT_EQ(find_broker_config(name)->update, Update::kClusterWide) << name;
  }
  for (std::string_view name : {"listeners", "advertised.listeners", "ssl.client.auth"}) {
    EXPECT_EQ(find_broker_config(name)->update, Update::kPerBroker) << name;
  }
  EXPECT_EQ(find_broker_config("ssl.keystore.password")->update, Update::kPerListener);
  for (std::string_view name :
       {"broker.id", "node.id", "process.roles", "log.dirs", "num.partitions",
        "default.replication.factor", "auto.create.topics.enable",
        "offsets.topic.replication.factor", "transaction.state.log.replication.factor",
        "controller.quorum.voters", "log.retention.hours", "log.retention.minutes",
        "log.roll.hours", "log.message.format.version"}) {
    ASSERT_NE(find_broker_config(name), nullptr) << name;
    EXPECT_EQ(find_broker_config(name)->update, Update::kReadOnly) << name;
  }
}

// Listener overrides take their base config's type; custom names have none.
TEST(ConfigTables, BrokerConfigType) {
  EXPECT_EQ(broker_config_type("num.io.threads"), ConfigType::kInt);
  EXPECT_EQ(broker_config_type("listener.name.external.ssl.keystore.password"),
            ConfigType::kPassword);
  EXPECT_EQ(broker_config_type("listener.name.sasl_ssl.plain.sasl.jaas.config"),
            ConfigType::kPassword);
  EXPECT_EQ(broker_config_type("leader.replication.throttled.rate"), ConfigType::kLong);
  EXPECT_EQ(broker_config_type("my.custom.config"), ConfigType::kUnknown);
}

// ---------------------------------------------------------------------------
// Validation of single values.

// Values Kafka accepts, including its lenient parsing.
TEST(Validate, AcceptsTopicValues) {
  for (auto [name, value] : std::vector<std::pair<std::string_view, std::string_view>>{
           {"retention.ms", "86400000"},
           {"retention.ms", " 1000 "},
           {"retention.ms", "-1"},
           {"retention.ms", "+5"},
           {"retention.bytes", "-100"},
           {"segment.bytes", "14"},
           {"cleanup.policy", "compact, delete"},
           {"cleanup.policy", "compact"},
           {"cleanup.policy", ""},
           {"compression.type", "zstd"},
           {"compression.gzip.level", "-1"},
           {"compression.gzip.level", "9"},
           {"compression.zstd.level", "-5"},
           {"message.timestamp.type", "LogAppendTime"},
           {"min.cleanable.dirty.ratio", "0.75"},
           {"min.cleanable.dirty.ratio", "1"},
           {"min.cleanable.dirty.ratio", "5e-1"},
           {"preallocate", "TRUE"},
           {"leader.replication.throttled.replicas", "0:1,1:2"},
           {"leader.replication.throttled.replicas", "*"},
           {"follower.replication.throttled.replicas", ""},
           {"message.format.version", "2.8"},
           {"message.format.version", "3.0-IV1"},
           {"message.format.version", "0.10.0"},
           {"message.format.version", "0.10.2.1"},
       }) {
    EXPECT_TRUE(topic_status(name, value).ok())
        << name << "=" << value << ": " << topic_status(name, value);
  }
}

// Kafka's messages, word for word, and INVALID_CONFIG on topics.
TEST(Validate, RejectsTopicValuesWithKafkasMessages) {
  for (auto [name, value, expected] :
       std::vector<std::tuple<std::string_view, std::string_view, std::string_view>>{
           {"retention.ms", "abc",
            "Invalid value abc for configuration retention.ms: Not a number "
            "of type LONG"},
           {"retention.ms", "1.5",
            "Invalid value 1.5 for configuration retention.ms: Not a "
            "number of type LONG"},
           {"retention.ms", "-2",
            "Invalid value -2 for configuration retention.ms: Value must be "
            "at least -1"},
           {"segment.bytes", "0",
            "Invalid value 0 for configuration segment.bytes: Value must be "
            "at least 14"},
           {"segment.bytes", "2147483648",
            "Invalid value 2147483648 for configuration "
            "segment.bytes: Not a number of type INT"},
           {"min.cleanable.dirty.ratio", "1.5",
            "Invalid value 1.5 for configuration "
            "min.cleanable.dirty.ratio: Value must be no more "
            "than 1"},
           {"min.cleanable.dirty.ratio", "x",
            "Invalid value x for configuration "
            "min.cleanable.dirty.ratio: Not a number of type "
            "DOUBLE"},
           {"cleanup.policy", "compact,foo",
            "Invalid value foo for configuration "
            "cleanup.policy: String must be one of: compact, "
            "delete"},
           {"compression.type", "brotli",
            "Invalid value brotli for configuration "
            "compression.type: String must be one of: "
            "uncompressed, zstd, lz4, snappy, gzip, producer"},
           {"message.timestamp.type", "createtime",
            "Invalid value createtime for configuration "
            "message.timestamp.type: String must be one "
            "of: CreateTime, LogAppendTime"},
           {"preallocate", "yes",
            "Invalid value yes for configuration preallocate: Expected "
            "value to be either true or false"},
           {"compression.gzip.level", "0",
            "Invalid value 0 for configuration "
            "compression.gzip.level: Value must be between 1 and "
            "9 or equal to -1"},
           {"compression.lz4.level", "18",
            "Invalid value 18 for configuration "
            "compression.lz4.level: Value must be no more than 17"},
           {"leader.replication.throttled.replicas", "0-1,2:3",
            "Invalid value [0-1, 2:3] for configuration leader.replication.throttled.replicas: "
            "leader.replication.throttled.replicas must be the literal '*' or a list of replicas "
            "in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."},
           {"message.format.version", "9.9",
            "Invalid value 9.9 for configuration "
            "message.format.version: Version 9.9 is not a valid "
            "version"},
           {"local.retention.bytes", "-3",
            "Invalid value -3 for configuration "
            "local.retention.bytes: Value must be at least -2"},
       }) {
    absl::Status status = topic_status(name, value);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name << "=" << value;
    EXPECT_EQ(message(status), expected);
    EXPECT_EQ(error_code(kConfigResourceTopic, status), net::Error::kInvalidConfig);
  }
}

// Topics take only Kafka's topic config names.
TEST(Validate, UnknownTopicConfig) {
  absl::Status status = topic_status("retention.hours", "1");
  EXPECT_EQ(message(status), "Unknown topic config name: retention.hours");
  EXPECT_EQ(error_code(kConfigResourceTopic, status), net::Error::kInvalidConfig);
}

// Deleting a config is always allowed, as in Kafka (an unknown name is a no-op).
TEST(Validate, DeletesPass) {
  EXPECT_TRUE(validate(kConfigResourceTopic, "retention.ms", std::nullopt).ok());
  EXPECT_TRUE(validate(kConfigResourceTopic, "no.such.config", std::nullopt).ok());
  EXPECT_TRUE(validate(kConfigResourceBroker, "log.dirs", std::nullopt).ok());
}

// Kafka allows custom broker configs; static ones are refused; keystores
// change only per listener; values are type-checked (on the base name of a
// listener override); failures answer INVALID_REQUEST as Kafka's forwarding
// broker does.
TEST(Validate, BrokerConfigs) {
  EXPECT_TRUE(broker_status("my.custom.config", "anything").ok());
  EXPECT_TRUE(broker_status("num.io.threads", "16").ok());
  EXPECT_TRUE(broker_status("log.retention.ms", "3600000").ok());
  EXPECT_TRUE(broker_status("leader.replication.throttled.rate", "1000000").ok());
  EXPECT_TRUE(broker_status("listener.name.external.ssl.keystore.location", "/ks.jks").ok());

  absl::Status status = broker_status("log.dirs", "/data");
  EXPECT_EQ(message(status), "Cannot update these configs dynamically: Set(log.dirs)");
  EXPECT_EQ(error_code(kConfigResourceBroker, status), net::Error::kInvalidRequest);
  EXPECT_EQ(message(broker_status("log.retention.hours", "1")),
            "Cannot update these configs dynamically: Set(log.retention.hours)");
  EXPECT_EQ(message(broker_status("ssl.keystore.location", "/ks.jks")),
            "These security configs can be dynamically updated only per-listener using the "
            "listener prefix: Set(ssl.keystore.location)");
  EXPECT_EQ(message(broker_status("num.io.threads", "abc")),
            "Invalid value abc for configuration num.io.threads: Not a number of type INT");
  EXPECT_EQ(message(broker_status("num.io.threads", "0")),
            "Invalid value 0 for configuration num.io.threads: Value must be at least 1");
  EXPECT_EQ(message(broker_status("listener.name.internal.max.connections", "x")),
            "Invalid value x for configuration max.connections: Not a number of type INT");
  EXPECT_EQ(message(broker_status("leader.replication.throttled.rate", "-1")),
            "Invalid value -1 for configuration leader.replication.throttled.rate: Value must be "
            "at least 0");
}

// Resource types without config validation here answer INVALID_REQUEST; other
// failures map as documented.
TEST(Validate, UnsupportedResourceTypes) {
  for (int8_t type : {kConfigResourceBrokerLogger, kConfigResourceGroup, int8_t{0}}) {
    absl::Status status = validate(type, "x", "y");
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
    EXPECT_EQ(error_code(type, status), net::Error::kInvalidRequest);
  }
  EXPECT_EQ(error_code(kConfigResourceTopic, absl::OkStatus()), net::Error::kNone);
  EXPECT_EQ(error_code(kConfigResourceTopic, absl::InternalError("x")),
            net::Error::kUnknownServerError);
}

// ---------------------------------------------------------------------------
// Validation of whole config maps.

// Per-broker configs are refused on the cluster default, listener overrides
// too unless their base is a cluster-level listener config.
TEST(ValidateConfigs, BrokerClusterDefault) {
  const ConfigResource cluster{kConfigResourceBroker, ""};
  const ConfigResource broker1{kConfigResourceBroker, "1"};
  const ConfigMap listeners{{"listeners", "PLAINTEXT://:9093"}, {"num.io.threads", "4"}};
  EXPECT_TRUE(validate_configs(broker1, listeners, {}).ok());
  EXPECT_EQ(message(validate_configs(cluster, listeners, {})),
            "Cannot update these configs at default cluster level, broker id must be specified: "
            "Set(listeners)");
  EXPECT_TRUE(
      validate_configs(cluster, {{"listener.name.external.max.connections", "10"}}, {}).ok());
  EXPECT_EQ(message(validate_configs(cluster,
                                     {{"listener.name.b.ssl.keystore.location", "/b"},
                                      {"listener.name.a.ssl.keystore.location", "/a"}},
                                     {})),
            "Cannot update these configs at default cluster level, broker id must be specified: "
            "Set(listener.name.a.ssl.keystore.location, listener.name.b.ssl.keystore.location)");
  // The kinds are checked in Kafka's order: static names first.
  EXPECT_EQ(message(validate_configs(cluster, {{"num.io.threads", "x"}, {"log.dirs", "/d"}}, {})),
            "Cannot update these configs dynamically: Set(log.dirs)");
}

// The whole-map check applies the single-value checks to every entry.
TEST(ValidateConfigs, TopicNamesAndValues) {
  const ConfigResource t{kConfigResourceTopic, "t"};
  EXPECT_TRUE(
      validate_configs(t, {{"retention.ms", "1000"}, {"cleanup.policy", "compact"}}, {}).ok());
  EXPECT_EQ(message(validate_configs(t, {{"retention.ms", "1000"}, {"bogus", "1"}}, {})),
            "Unknown topic config name: bogus");
  EXPECT_EQ(message(validate_configs(t, {{"segment.bytes", "1"}}, {})),
            "Invalid value 1 for configuration segment.bytes: Value must be at least 14");
}

// min.compaction.lag.ms may not exceed max.compaction.lag.ms, taking the
// broker's default into account as Kafka's controller does.
TEST(ValidateConfigs, CompactionLags) {
  const ConfigResource t{kConfigResourceTopic, "t"};
  EXPECT_EQ(message(validate_configs(
                t, {{"min.compaction.lag.ms", "10"}, {"max.compaction.lag.ms", "5"}}, {})),
            "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)");
  const ConfigMap cluster{{"log.cleaner.max.compaction.lag.ms", "5"}};
  const absl::Status status =
      validate_configs(t, {{"min.compaction.lag.ms", "10"}}, {.dynamic_default = &cluster});
  EXPECT_EQ(message(status),
            "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)");
  EXPECT_EQ(error_code(kConfigResourceTopic, status), net::Error::kInvalidConfig);
}

// Kafka's tiered-storage rules: the broker must support it, compacted topics
// cannot use it, local retention must fit in the total, and turning it off
// must delete the remote data.
TEST(ValidateConfigs, TieredStorage) {
  const ConfigResource t{kConfigResourceTopic, "t"};
  const StaticConfig disabled;
  const StaticConfig enabled{{"remote.log.storage.system.enable", "true"}};
  const BrokerLayers off{.static_config = &disabled};
  const BrokerLayers on{.static_config = &enabled};
  const ConfigMap remote{{"remote.storage.enable", "true"}};

  EXPECT_EQ(message(validate_configs(t, remote, off)),
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
            "with remote log storage.");
  EXPECT_TRUE(validate_configs(t, remote, on).ok());
  EXPECT_EQ(message(validate_configs(
                t, {{"remote.storage.enable", "true"}, {"cleanup.policy", "compact,delete"}}, on)),
            "Remote log storage is unsupported for the compacted topics");
  EXPECT_EQ(message(validate_configs(t,
                                     {{"remote.storage.enable", "true"},
                                      {"retention.bytes", "100"},
                                      {"local.retention.bytes", "-1"}},
                                     on)),
            "Invalid value -1 for configuration local.retention.bytes: Value must not be -1 as "
            "retention.bytes value is set as 100.");
  EXPECT_EQ(message(validate_configs(t,
                                     {{"remote.storage.enable", "true"},
                                      {"retention.ms", "1000"},
                                      {"local.retention.ms", "2000"}},
                                     on)),
            "Invalid value 2000 for configuration local.retention.ms: Value must not be more than "
            "retention.ms property value: 1000");
  EXPECT_EQ(message(validate_configs(t,
                                     {{"remote.storage.enable", "true"},
                                      {"remote.log.copy.disable", "true"},
                                      {"local.retention.ms", "1000"}},
                                     on)),
            "When `remote.log.copy.disable` is set to true, the `local.retention.ms` and "
            "`retention.ms` must be set to the identical value because there will be no more logs "
            "copied to the remote storage.");
  // Turning remote storage off needs remote.log.delete.on.disable.
  EXPECT_EQ(message(validate_configs(t, {}, on, &remote)),
            "It is invalid to disable remote storage without deleting remote data. If you want "
            "to keep the remote data and turn to read only, please set "
            "`remote.storage.enable=true,remote.log.copy.disable=true`. If you want to disable "
            "remote storage and delete all remote data, please set "
            "`remote.storage.enable=false,remote.log.delete.on.disable=true`.");
  EXPECT_TRUE(validate_configs(t, {{"remote.log.delete.on.disable", "true"}}, on, &remote).ok());
}

// ---------------------------------------------------------------------------
// DescribeConfigs of topics.

// With nothing set anywhere: every topic config, sorted, at its default, with
// Kafka's synonyms (retention.ms has none: its only set synonym,
// log.retention.hours, comes after log.retention.ms and is cut).
TEST(DescribeTopic, Defaults) {
  absl::StatusOr<std::vector<DescribedConfig>> entries =
      describe({kConfigResourceTopic, "t"}, nullptr, {}, with_synonyms());
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), topic_configs().size());
  EXPECT_TRUE(std::is_sorted(
      entries->begin(), entries->end(),
      [](const DescribedConfig& a, const DescribedConfig& b) { return a.name < b.name; }));
  for (const DescribedConfig& entry : *entries) {
    const ConfigDef* def = find_topic_config(entry.name);
    ASSERT_NE(def, nullptr);
    EXPECT_EQ(entry.value, def->default_value) << entry.name;
    EXPECT_EQ(entry.source, kDefault) << entry.name;
    EXPECT_TRUE(entry.is_default());
    EXPECT_FALSE(entry.read_only);
    EXPECT_FALSE(entry.is_sensitive);
    EXPECT_EQ(entry.type, def->type);
    EXPECT_EQ(entry.documentation, std::nullopt);
  }
  auto by_name = describe_map({kConfigResourceTopic, "t"}, nullptr, {}, with_synonyms());
  EXPECT_THAT(by_name.at("retention.ms").synonyms, IsEmpty());
  EXPECT_THAT(by_name.at("max.message.bytes").synonyms,
              ElementsAre(syn("message.max.bytes", "1048588", kDefault)));
  EXPECT_THAT(by_name.at("cleanup.policy").synonyms,
              ElementsAre(syn("log.cleanup.policy", "delete", kDefault)));
  EXPECT_THAT(by_name.at("remote.storage.enable").synonyms, IsEmpty());
  EXPECT_EQ(by_name.at("retention.ms").type, ConfigType::kLong);
}

// A topic override comes first, then every level of the broker, in Kafka's
// order: dynamic broker, dynamic default, static, default.
TEST(DescribeTopic, OverrideThenEveryBrokerLevel) {
  const ConfigMap topic{{"retention.ms", "1000"}};
  const ConfigMap broker{{"log.retention.ms", "2000"}};
  const ConfigMap cluster{{"log.retention.ms", "3000"}};
  const StaticConfig server{{"log.retention.ms", "4000"}, {"log.retention.hours", "5"}};
  const BrokerLayers layers{
      .dynamic_broker = &broker, .dynamic_default = &cluster, .static_config = &server};
  auto entries = describe_map({kConfigResourceTopic, "t"}, &topic, layers, with_synonyms());
  const DescribedConfig& retention = entries.at("retention.ms");
  EXPECT_EQ(retention.value, "1000");
  EXPECT_EQ(retention.source, kTopic);
  EXPECT_FALSE(retention.is_default());
  EXPECT_THAT(retention.synonyms, ElementsAre(syn("retention.ms", "1000", kTopic),
                                              syn("log.retention.ms", "2000", kDynamicBroker),
                                              syn("log.retention.ms", "3000", kDynamicDefault),
                                              syn("log.retention.ms", "4000", kStatic),
                                              syn("log.retention.hours", "5", kStatic),
                                              syn("log.retention.hours", "168", kDefault)));
  // Without an override the dynamic broker value wins.
  auto plain = describe_map({kConfigResourceTopic, "u"}, nullptr, layers, with_synonyms());
  EXPECT_EQ(plain.at("retention.ms").value, "2000");
  EXPECT_EQ(plain.at("retention.ms").source, kDynamicBroker);
}

// A cluster-wide dynamic default supplies the value and heads the synonyms.
TEST(DescribeTopic, ClusterDefault) {
  const ConfigMap cluster{{"log.retention.ms", "3000"}, {"message.max.bytes", "2000000"}};
  auto entries = describe_map({kConfigResourceTopic, "t"}, nullptr, {.dynamic_default = &cluster},
                              with_synonyms());
  EXPECT_EQ(entries.at("retention.ms").value, "3000");
  EXPECT_EQ(entries.at("retention.ms").source, kDynamicDefault);
  EXPECT_THAT(entries.at("retention.ms").synonyms,
              ElementsAre(syn("log.retention.ms", "3000", kDynamicDefault),
                          syn("log.retention.hours", "168", kDefault)));
  EXPECT_EQ(entries.at("max.message.bytes").value, "2000000");
  EXPECT_THAT(entries.at("max.message.bytes").synonyms,
              ElementsAre(syn("message.max.bytes", "2000000", kDynamicDefault),
                          syn("message.max.bytes", "1048588", kDefault)));
}

// Static values apply, converted to the topic's unit; as in Kafka, a value
// from log.retention.hours alone leaves retention.ms without synonyms and
// reported as DEFAULT_CONFIG.
TEST(DescribeTopic, StaticBrokerValue) {
  const StaticConfig server{{"log.segment.bytes", "2000"},
                            {"log.retention.hours", "1"},
                            {"log.cleanup.policy", "compact , delete"}};
  auto entries = describe_map({kConfigResourceTopic, "t"}, nullptr, {.static_config = &server},
                              with_synonyms());
  EXPECT_EQ(entries.at("segment.bytes").value, "2000");
  EXPECT_EQ(entries.at("segment.bytes").source, kStatic);
  EXPECT_THAT(entries.at("segment.bytes").synonyms,
              ElementsAre(syn("log.segment.bytes", "2000", kStatic),
                          syn("log.segment.bytes", "1073741824", kDefault)));
  EXPECT_EQ(entries.at("retention.ms").value, "3600000");
  EXPECT_EQ(entries.at("retention.ms").source, kDefault);
  EXPECT_THAT(entries.at("retention.ms").synonyms, IsEmpty());
  EXPECT_EQ(entries.at("cleanup.policy").value, "compact,delete");
  EXPECT_THAT(entries.at("cleanup.policy").synonyms,
              ElementsAre(syn("log.cleanup.policy", "compact , delete", kStatic),
                          syn("log.cleanup.policy", "delete", kDefault)));
  // segment.ms comes from log.roll.hours the same way.
  const StaticConfig roll{{"log.roll.hours", "2"}};
  auto rolled = describe_map({kConfigResourceTopic, "t"}, nullptr, {.static_config = &roll});
  EXPECT_EQ(rolled.at("segment.ms").value, "7200000");
}

// Values read back as Kafka renders them once parsed.
TEST(DescribeTopic, ValuesAreCanonical) {
  const ConfigMap topic{{"cleanup.policy", " compact ,delete"},
                        {"preallocate", "TRUE"},
                        {"min.cleanable.dirty.ratio", "1"},
                        {"retention.ms", " 42 "}};
  auto entries = describe_map({kConfigResourceTopic, "t"}, &topic, {}, with_synonyms());
  EXPECT_EQ(entries.at("cleanup.policy").value, "compact,delete");
  EXPECT_EQ(entries.at("preallocate").value, "true");
  EXPECT_EQ(entries.at("min.cleanable.dirty.ratio").value, "1.0");
  EXPECT_EQ(entries.at("retention.ms").value, "42");
  EXPECT_EQ(entries.at("retention.ms").synonyms.front(), syn("retention.ms", "42", kTopic));
}

TEST(DescribeTopic, NameFilterAndDocumentation) {
  DescribeOptions options{.names = std::vector<std::string>{"retention.ms", "no.such.config"},
                          .include_documentation = true};
  absl::StatusOr<std::vector<DescribedConfig>> entries =
      describe({kConfigResourceTopic, "t"}, nullptr, {}, options);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ(entries->front().name, "retention.ms");
  EXPECT_EQ(entries->front().documentation, std::string(find_topic_config("retention.ms")->doc));
  EXPECT_THAT(entries->front().synonyms, IsEmpty());  // not asked for
  // An empty list means every config, as in Kafka.
  options.names = std::vector<std::string>{};
  entries = describe({kConfigResourceTopic, "t"}, nullptr, {}, options);
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(entries->size(), topic_configs().size());
}

// A stored name that is not a topic config has an unknown type, so Kafka
// reports it as sensitive with a null value.
TEST(DescribeTopic, UnknownStoredName) {
  const ConfigMap topic{{"some.legacy.config", "1"}};
  auto entries = describe_map({kConfigResourceTopic, "t"}, &topic, {}, with_synonyms());
  const DescribedConfig& entry = entries.at("some.legacy.config");
  EXPECT_EQ(entry.value, std::nullopt);
  EXPECT_TRUE(entry.is_sensitive);
  EXPECT_EQ(entry.source, kTopic);
  EXPECT_EQ(entry.type, ConfigType::kUnknown);
  EXPECT_THAT(entry.synonyms, ElementsAre(syn("some.legacy.config", std::nullopt, kTopic)));
}

// ---------------------------------------------------------------------------
// DescribeConfigs of brokers.

// A broker id lists every broker config and every name set in its layers, with
// Kafka's values, sources, sensitivity and read-only flags.
TEST(DescribeBroker, PerBroker) {
  const ConfigMap broker{{"num.io.threads", "16"},
                         {"listener.name.external.ssl.keystore.type", "PKCS12"},
                         {"listener.name.sasl_ssl.plain.sasl.jaas.config", "secret"},
                         {"leader.replication.throttled.rate", "1000"},
                         {"log.cleaner.io.buffer.load.factor", "1e7"}};
  const ConfigMap cluster{{"num.io.threads", "12"}, {"log.retention.ms", "1000"}};
  const StaticConfig server{{"node.id", "1"},
                            {"process.roles", "broker"},
                            {"ssl.keystore.password", "hunter2"},
                            {"my.custom.key", "v"}};
  auto entries = describe_map({kConfigResourceBroker, "1"}, &broker,
                              {.dynamic_default = &cluster, .static_config = &server},
                              {.include_synonyms = true, .include_documentation = true});

  const DescribedConfig& io = entries.at("num.io.threads");
  EXPECT_EQ(io.value, "16");
  EXPECT_EQ(io.source, kDynamicBroker);
  EXPECT_FALSE(io.read_only);
  EXPECT_EQ(io.type, ConfigType::kInt);
  EXPECT_TRUE(io.documentation.has_value());
  EXPECT_THAT(io.synonyms, ElementsAre(syn("num.io.threads", "16", kDynamicBroker),
                                       syn("num.io.threads", "12", kDynamicDefault),
                                       syn("num.io.threads", "8", kDefault)));

  const DescribedConfig& password = entries.at("ssl.keystore.password");
  EXPECT_EQ(password.value, std::nullopt);
  EXPECT_TRUE(password.is_sensitive);
  EXPECT_EQ(password.source, kStatic);
  EXPECT_THAT(password.synonyms, ElementsAre(syn("ssl.keystore.password", std::nullopt, kStatic)));

  const DescribedConfig& custom = entries.at("my.custom.key");
  EXPECT_EQ(custom.value, std::nullopt);
  EXPECT_TRUE(custom.is_sensitive);
  EXPECT_TRUE(custom.read_only);
  EXPECT_EQ(custom.type, ConfigType::kUnknown);
  EXPECT_EQ(custom.source, kStatic);
  EXPECT_EQ(custom.documentation, std::nullopt);

  // broker.id stands for node.id.
  EXPECT_EQ(entries.at("broker.id").value, "1");
  EXPECT_EQ(entries.at("broker.id").source, kStatic);
  EXPECT_TRUE(entries.at("broker.id").read_only);
  EXPECT_EQ(entries.at("process.roles").value, "broker");

  EXPECT_EQ(entries.at("log.dirs").value, std::nullopt);
  EXPECT_EQ(entries.at("log.dirs").source, kDefault);
  EXPECT_THAT(entries.at("log.dirs").synonyms, IsEmpty());

  EXPECT_EQ(entries.at("log.retention.ms").value, "1000");
  EXPECT_THAT(entries.at("log.retention.ms").synonyms,
              ElementsAre(syn("log.retention.ms", "1000", kDynamicDefault),
                          syn("log.retention.hours", "168", kDefault)));
  EXPECT_EQ(entries.at("log.retention.hours").value, "168");
  EXPECT_TRUE(entries.at("log.retention.hours").read_only);
  EXPECT_THAT(entries.at("log.retention.hours").synonyms,
              ElementsAre(syn("log.retention.hours", "168", kDefault)));

  // A listener override: typed by its base config, followed by the base's
  // synonyms; Kafka lists it read-only.
  const DescribedConfig& keystore = entries.at("listener.name.external.ssl.keystore.type");
  EXPECT_EQ(keystore.value, "PKCS12");
  EXPECT_EQ(keystore.type, ConfigType::kString);
  EXPECT_TRUE(keystore.read_only);
  EXPECT_THAT(keystore.synonyms,
              ElementsAre(syn("listener.name.external.ssl.keystore.type", "PKCS12", kDynamicBroker),
                          syn("ssl.keystore.type", "JKS", kDefault)));
  const DescribedConfig& jaas = entries.at("listener.name.sasl_ssl.plain.sasl.jaas.config");
  EXPECT_EQ(jaas.value, std::nullopt);
  EXPECT_TRUE(jaas.is_sensitive);
  EXPECT_EQ(jaas.type, ConfigType::kPassword);

  // Quotas appear only when set, read-only as in Kafka.
  EXPECT_EQ(entries.at("leader.replication.throttled.rate").value, "1000");
  EXPECT_TRUE(entries.at("leader.replication.throttled.rate").read_only);
  EXPECT_FALSE(entries.contains("follower.replication.throttled.rate"));

  // Doubles render as Java's Double.toString.
  EXPECT_EQ(entries.at("log.cleaner.io.buffer.load.factor").value, "1.0E7");
  EXPECT_EQ(entries.at("log.cleaner.io.max.bytes.per.second").value, "1.7976931348623157E308");
  EXPECT_EQ(entries.at("sasl.kerberos.ticket.renew.jitter").value, "0.05");
}

// The cluster default lists only what is set there, with only its own synonyms.
TEST(DescribeBroker, ClusterDefault) {
  const ConfigMap broker{{"num.io.threads", "16"}};
  const ConfigMap cluster{{"num.io.threads", "12"}, {"my.custom", "x"}};
  auto entries = describe_map({kConfigResourceBroker, ""}, &cluster, {.dynamic_broker = &broker},
                              with_synonyms());
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries.at("num.io.threads").value, "12");
  EXPECT_EQ(entries.at("num.io.threads").source, kDynamicDefault);
  EXPECT_THAT(entries.at("num.io.threads").synonyms,
              ElementsAre(syn("num.io.threads", "12", kDynamicDefault)));
  EXPECT_EQ(entries.at("my.custom").value, std::nullopt);
  EXPECT_TRUE(entries.at("my.custom").is_sensitive);
}

// Only the requested names come back.
TEST(DescribeBroker, NameFilter) {
  auto entries = describe_map({kConfigResourceBroker, "1"}, nullptr, {},
                              {.names = std::vector<std::string>{"num.io.threads", "log.dirs"}});
  EXPECT_EQ(entries.size(), 2u);
  EXPECT_TRUE(entries.contains("num.io.threads"));
  EXPECT_TRUE(entries.contains("log.dirs"));
}

// A broker name that is not an id, and an unsupported type, answer INVALID_REQUEST.
TEST(DescribeBroker, Errors) {
  absl::StatusOr<std::vector<DescribedConfig>> entries =
      describe({kConfigResourceBroker, "abc"}, nullptr, {}, {});
  ASSERT_FALSE(entries.ok());
  EXPECT_EQ(message(entries.status()), "Broker id must be an integer, but it is: abc");
  EXPECT_EQ(error_code(kConfigResourceBroker, entries.status()), net::Error::kInvalidRequest);
  entries = describe({kConfigResourceGroup, "g"}, nullptr, {}, {});
  ASSERT_FALSE(entries.ok());
  EXPECT_EQ(message(entries.status()), "Unsupported resource type: GROUP");
  EXPECT_EQ(error_code(kConfigResourceGroup, entries.status()), net::Error::kInvalidRequest);
}

// Client metrics subscriptions list their stored configs as they are.
TEST(DescribeClientMetrics, StoredConfigs) {
  const ConfigMap configs{{"interval.ms", "1000"}, {"metrics", "org.apache.kafka."}};
  auto entries = describe_map({kConfigResourceClientMetrics, "sub"}, &configs, {});
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries.at("interval.ms").value, "1000");
  EXPECT_EQ(entries.at("interval.ms").source, ConfigSource::kClientMetricsConfig);
  EXPECT_FALSE(entries.at("interval.ms").read_only);
  EXPECT_FALSE(entries.at("interval.ms").is_sensitive);
}

}  // namespace
}  // namespace brook::configs
