// core/configs/configs.h
//
// Kafka's config definitions for topic and broker resources, the validation
// the controller and the forwarding broker apply to config changes, and the
// entries DescribeConfigs returns. The tables follow Kafka 3.9: every topic
// config of LogConfig (deprecated ones included, since 3.9 still describes
// them), every broker config Kafka can change at run time
// (DynamicBrokerConfig.AllDynamicConfigs plus the replication quotas), and the
// static broker configs a Brook node reads or a client commonly inspects.
//
// Everything here is a pure function of its arguments: no metadata image, no
// node state. The tables are constant and shared by every node.
//
// Validation (Kafka's LogConfig.validate, DynamicBrokerConfig.validateConfigs):
//   * Topic configs must be known ("Unknown topic config name: x"); values
//     must parse as their type and pass their check ("Invalid value abc for
//     configuration retention.ms: Not a number of type LONG"). The whole-map
//     check adds the cross-config rules (compaction lags, tiered storage).
//   * Broker configs may have any name: Kafka allows custom broker configs
//     (DynamicConfig.Broker.validate with customPropsAllowed), so an unknown
//     name is stored as given. A known static config is refused ("Cannot
//     update these configs dynamically: Set(log.dirs)"), the keystore and
//     truststore configs only change per listener
//     ("listener.name.<l>.ssl.keystore.location"), and per-broker configs are
//     refused on the cluster-default resource (empty name).
//   * A null value deletes a config and is always allowed.
// error_code() turns a failure into the code Kafka answers: INVALID_CONFIG
// for topics, INVALID_REQUEST for brokers (Kafka's forwarding broker wraps
// broker config failures in InvalidRequestException, KAFKA-13609).
//
// Describe (Kafka's ConfigHelper): a topic lists every topic config with its
// effective value (topic override, else the broker configs behind it, else
// the default); a broker "<id>" lists every broker config plus any other name
// set in its layers; the cluster default "" lists only what is set there.
// Synonyms come in Kafka's order: topic override, dynamic broker, dynamic
// default broker, static broker, default. As in Kafka, the list is cut to
// start at the config's first broker synonym, so a topic whose retention
// comes only from log.retention.hours shows no synonyms and DEFAULT_CONFIG
// as its source. Sensitive values (PASSWORD, and names of unknown type) are
// null. Entries are sorted by name, so the answer is deterministic.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/metadata/image.h"
#include "net/kafka/messages/describe_configs_request.h"
#include "net/kafka/messages/describe_configs_response.h"
#include "net/kafka/errors.h"

namespace brook::configs {

// DescribeConfigs ConfigType codes.
enum class ConfigType : int8_t {
  kUnknown = 0,
  kBoolean = 1,
  kString = 2,
  kInt = 3,
  kShort = 4,
  kLong = 5,
  kDouble = 6,
  kList = 7,
  kClass = 8,
  kPassword = 9,
};

// DescribeConfigs ConfigSource codes.
enum class ConfigSource : int8_t {
  kUnknown = 0,
  kTopicConfig = 1,
  kDynamicBrokerConfig = 2,
  kDynamicDefaultBrokerConfig = 3,
  kStaticBrokerConfig = 4,
  kDefaultConfig = 5,
  kDynamicBrokerLoggerConfig = 6,
  kClientMetricsConfig = 7,
  kGroupConfig = 8,
};

// The type's name as Kafka's messages spell it: "LONG".
std::string_view type_name(ConfigType type);

// What a parsed value must satisfy.
enum class Check : uint8_t {
  kNone,
  kAtLeast,            // a number >= min
  kBetween,            // a number in [min, max]
  kOneOf,              // one of choices
  kEachOneOf,          // a list whose every element is one of choices
  kGzipLevel,          // 1..9, or -1 for the codec's default
  kThrottledReplicas,  // "*" or "partition:broker,..."
  kMetadataVersion,    // a Kafka release ("3.0") or IBP version ("3.0-IV1")
};

struct Rule {
  Check check = Check::kNone;
  int64_t min = 0;
  int64_t max = 0;
  std::span<const std::string_view> choices;
};

// Whether a broker config changes at run time, and where.
enum class Update : uint8_t {
  kReadOnly,     // static: read at startup only
  kPerBroker,    // dynamic on a broker id, not on the cluster default
  kPerListener,  // dynamic on a broker id only as "listener.name.<l>.<config>"
  kClusterWide,  // dynamic on a broker id and on the cluster default
  // A replication quota: dynamic everywhere but, as in Kafka, not a static
  // config, so a broker lists it only when set, and lists it read-only.
  kQuota,
};

// A broker config that supplies a topic config's default; its value is
// multiplied by `factor` (log.retention.hours -> retention.ms).
struct Synonym {
  std::string_view name;
  int64_t factor = 1;
};

inline constexpr size_t kSynonymsMax = 3;

struct ConfigDef {
  std::string_view name;
  ConfigType type = ConfigType::kString;
  std::optional<std::string_view> default_value;  // as Kafka renders it; nullopt: null
  Rule rule;
  Update update = Update::kReadOnly;  // topic configs: all kClusterWide
  std::array<Synonym, kSynonymsMax> synonym_slots{};
  uint8_t synonym_count = 0;
  std::string_view doc;

  bool is_sensitive() const { return type == ConfigType::kPassword; }
  // Topic configs: the broker configs behind the default, highest precedence first.
  std::span<const Synonym> synonyms() const { return {synonym_slots.data(), synonym_count}; }
};

// Every topic config, in Kafka's definition order.
std::span<const ConfigDef> topic_configs();
// Every broker config Brook knows.
std::span<const ConfigDef> broker_configs();
// nullptr for a name that is not a topic config.
const ConfigDef* find_topic_config(std::string_view name);
// nullptr for a name that is not a known broker config. A listener override
// ("listener.name.<l>.<config>") is not found here; see broker_config_type().
const ConfigDef* find_broker_config(std::string_view name);
// The type Kafka gives a broker config name, resolving listener overrides to
// their base config; kUnknown for custom names (which describe as sensitive).
ConfigType broker_config_type(std::string_view name);

// ---------------------------------------------------------------------------
// Broker config layers.

// What a broker was started with (server.properties and command line).
using StaticConfig = std::map<std::string, std::string>;

// The broker configs a value falls back on, highest precedence first. Any
// may be null (nothing set at that level).
struct BrokerLayers {
  const metadata::ConfigMap* dynamic_broker = nullptr;   // resource (BROKER, "<this node id>")
  const metadata::ConfigMap* dynamic_default = nullptr;  // resource (BROKER, "")
  const StaticConfig* static_config = nullptr;
};

// The value a topic config takes on a topic that does not override it, as
// Kafka renders it: the first broker synonym (in precedence order) set at any
// level, its highest level winning, converted to the topic's unit; else the
// first synonym's default; else the topic default. REQUIRES: def is a topic
// config.
std::optional<std::string> topic_default_value(const ConfigDef& def, const BrokerLayers& broker);

// ---------------------------------------------------------------------------
// Validation.

// Checks one config change on a resource of `resource_type`
// (metadata::kConfigResource*): the name must be allowed there, the value
// must parse and pass the config's check. A null value (a delete) passes.
// Broker configs are checked as on a broker id; validate_configs() adds the
// cluster-default rule. Other resource types: Unimplemented.
absl::Status validate(int8_t resource_type, std::string_view name,
                      std::optional<std::string_view> value);

// Checks the configs `resource` would hold after a change: every entry as
// validate() does, then the rules that span configs. For a topic these use
// the effective broker values in `broker` (min.compaction.lag.ms <=
// max.compaction.lag.ms; the tiered-storage rules, which need the static
// remote.log.storage.system.enable) and `previous`, the configs the topic
// held before (turning remote storage off). REQUIRES: the resource name is
// valid for its type (the caller checks topic names and broker ids).
absl::Status validate_configs(const metadata::ConfigResource& resource,
                              const metadata::ConfigMap& configs, const BrokerLayers& broker,
                              const metadata::ConfigMap* previous = nullptr);

// The Kafka error for a status from validate(), validate_configs() or
// describe() on a resource of `resource_type`: kNone when ok, kInvalidConfig
// for a bad topic config, kInvalidRequest for a bad broker config, a bad
// broker resource name or an unsupported resource type.
net::Error error_code(int8_t resource_type, const absl::Status& status);

// ---------------------------------------------------------------------------
// DescribeConfigs.

struct DescribedSynonym {
  std::string name;
  std::optional<std::string> value{};  // null when sensitive
  ConfigSource source = ConfigSource::kUnknown;
  bool operator==(const DescribedSynonym&) const = default;
};

// One DescribeConfigsResourceResult, ready to copy into the wire message.
struct DescribedConfig {
  std::string name;
  std::optional<std::string> value{};  // null when sensitive or unset
  bool read_only = false;
  ConfigSource source = ConfigSource::kDefaultConfig;
  bool is_sensitive = false;
  std::vector<DescribedSynonym> synonyms{};  // empty unless asked for
  ConfigType type = ConfigType::kUnknown;
  std::optional<std::string> documentation{};  // null unless asked for

  // DescribeConfigs v0's IsDefault.
  bool is_default() const { return source == ConfigSource::kDefaultConfig; }
};

struct DescribeOptions {
  // The configs to return; nullopt or empty: all.
  std::optional<std::vector<std::string>> names{};
  bool include_synonyms = false;
  bool include_documentation = false;
};

// The entries DescribeConfigs returns for `resource`, sorted by name.
// `resource_configs` are the dynamic configs stored for the resource (null:
// none). For a broker resource they are the layer it names and take the
// place of broker.dynamic_broker ("<id>") or broker.dynamic_default ("").
// Errors: a broker name that is not an integer (InvalidArgument); a resource
// type other than topic, broker and client metrics (Unimplemented). The
// caller checks that the topic exists and that a broker id is its own.
absl::StatusOr<std::vector<DescribedConfig>> describe(const metadata::ConfigResource& resource,
                                                      const metadata::ConfigMap* resource_configs,
                                                      const BrokerLayers& broker,
                                                      const DescribeOptions& options);

// A whole DescribeConfigs answer from a metadata image, as node `node_id`
// (a broker, or a controller since KIP-919) gives it: topics must exist
// (UNKNOWN_TOPIC_OR_PARTITION); a broker resource names this node or ""
// (the cluster-wide default), else INVALID_REQUEST. Fields are set only at
// the versions that carry them. `static_config` is the node's own
// server.properties (null: none), the STATIC_BROKER_CONFIG layer.
net::DescribeConfigsResponse describe_configs(const metadata::MetadataImage& image, int32_t node_id,
                                              const net::DescribeConfigsRequest& request, int16_t version,
                                              const StaticConfig* static_config = nullptr);

}  // namespace brook::configs
