// core/configs/configs.cc
//
// The config tables, Java-compatible value parsing and rendering, validation
// and DescribeConfigs (see configs.h). Parsing follows Kafka's
// ConfigDef.parseType: values are trimmed as String.trim() does, numbers as
// Integer/Long/Short.parseX and Double.parseDouble, lists split on commas
// with the whitespace around them; rendering follows ConfigDef.convertToString
// (doubles as Double.toString). Error messages are Kafka's, word for word,
// since clients show them to users.
#include "core/configs/configs.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <system_error>
#include <utility>

#include "fmt/format.h"

namespace brook::configs {
namespace {

using T = ConfigType;
using U = Update;

inline constexpr auto kNull = std::nullopt;
inline constexpr int64_t kMsPerMinute = 60 * 1000;
inline constexpr int64_t kMsPerHour = 60 * kMsPerMinute;

constexpr Rule kNoRule{};
constexpr Rule at_least(int64_t min) { return {Check::kAtLeast, min, 0, {}}; }
constexpr Rule between(int64_t min, int64_t max) { return {Check::kBetween, min, max, {}}; }
constexpr Rule one_of(std::span<const std::string_view> choices) {
  return {Check::kOneOf, 0, 0, choices};
}
constexpr Rule each_one_of(std::span<const std::string_view> choices) {
  return {Check::kEachOneOf, 0, 0, choices};
}
constexpr Rule kGzipLevel{Check::kGzipLevel, 0, 0, {}};
constexpr Rule kThrottledReplicas{Check::kThrottledReplicas, 0, 0, {}};
constexpr Rule kMetadataVersion{Check::kMetadataVersion, 0, 0, {}};

constexpr std::string_view kCleanupPolicies[] = {"compact", "delete"};
constexpr std::string_view kCompressionTypes[] = {"uncompressed", "zstd", "lz4",
                                                  "snappy",       "gzip", "producer"};
constexpr std::string_view kTimestampTypes[] = {"CreateTime", "LogAppendTime"};
constexpr std::string_view kSslClientAuth[] = {"required", "requested", "none"};
constexpr std::string_view kProcessRoles[] = {"broker", "controller"};
constexpr std::string_view kSecurityProtocols[] = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT",
                                                   "SASL_SSL"};

constexpr ConfigDef topic(std::string_view name, ConfigType type,
                          std::optional<std::string_view> default_value, Rule rule,
                          std::initializer_list<Synonym> synonyms, std::string_view doc) {
  ConfigDef def{.name = name,
                .type = type,
                .default_value = default_value,
                .rule = rule,
                .update = Update::kClusterWide,
                .doc = doc};
  for (const Synonym& synonym : synonyms) def.synonym_slots[def.synonym_count++] = synonym;
  return def;
}

constexpr ConfigDef broker(std::string_view name, ConfigType type,
                           std::optional<std::string_view> default_value, Rule rule, Update update,
                           std::string_view doc) {
  return ConfigDef{.name = name,
                   .type = type,
                   .default_value = default_value,
                   .rule = rule,
                   .update = update,
                   .doc = doc};
}

// LogConfig's definitions, in Kafka's order (which is also the order values
// are parsed in, so the first bad value reported matches Kafka's).
constexpr ConfigDef kTopicConfigs[] = {
    topic("segment.bytes", T::kInt, "1073741824", at_least(14), {{"log.segment.bytes"}},
          "Size of one log segment file."),
    topic("segment.ms", T::kLong, "604800000", at_least(1),
          {{"log.roll.ms"}, {"log.roll.hours", kMsPerHour}},
          "Time after which the active segment is rolled even if not full."),
    topic("segment.jitter.ms", T::kLong, "0", at_least(0),
          {{"log.roll.jitter.ms"}, {"log.roll.jitter.hours", kMsPerHour}},
          "Largest random offset subtracted from segment.ms to spread segment rolls."),
    topic("segment.index.bytes", T::kInt, "10485760", at_least(4), {{"log.index.size.max.bytes"}},
          "Size of the offset index of one segment."),
    topic("flush.messages", T::kLong, "9223372036854775807", at_least(1),
          {{"log.flush.interval.messages"}}, "Messages appended between forced fsyncs."),
    topic("flush.ms", T::kLong, "9223372036854775807", at_least(0),
          {{"log.flush.interval.ms"}, {"log.flush.scheduler.interval.ms"}},
          "Milliseconds between forced fsyncs."),
    topic("retention.bytes", T::kLong, "-1", kNoRule, {{"log.retention.bytes"}},
          "Largest size a partition keeps before deleting old segments; -1: no limit."),
    topic("retention.ms", T::kLong, "604800000", at_least(-1),
          {{"log.retention.ms"},
           {"log.retention.minutes", kMsPerMinute},
           {"log.retention.hours", kMsPerHour}},
          "How long a segment is kept before it is deleted; -1: forever."),
    topic("max.message.bytes", T::kInt, "1048588", at_least(0), {{"message.max.bytes"}},
          "Largest record batch the topic accepts."),
    topic("index.interval.bytes", T::kInt, "4096", at_least(0), {{"log.index.interval.bytes"}},
          "Bytes appended between two entries of the offset index."),
    topic("delete.retention.ms", T::kLong, "86400000", at_least(0),
          {{"log.cleaner.delete.retention.ms"}}, "How long tombstones stay in a compacted topic."),
    topic("min.compaction.lag.ms", T::kLong, "0", at_least(0),
          {{"log.cleaner.min.compaction.lag.ms"}}, "Shortest time a record stays uncompacted."),
    topic("max.compaction.lag.ms", T::kLong, "9223372036854775807", at_least(1),
          {{"log.cleaner.max.compaction.lag.ms"}}, "Longest time a record may stay uncompacted."),
    topic("file.delete.delay.ms", T::kLong, "60000", at_least(0), {{"log.segment.delete.delay.ms"}},
          "Delay before a deleted segment's files are removed."),
    topic("min.cleanable.dirty.ratio", T::kDouble, "0.5", between(0, 1),
          {{"log.cleaner.min.cleanable.ratio"}},
          "Share of uncompacted bytes at which the log becomes eligible for cleaning."),
    topic("cleanup.policy", T::kList, "delete", each_one_of(kCleanupPolicies),
          {{"log.cleanup.policy"}}, "How old segments go: delete, compact, or both."),
    topic("unclean.leader.election.enable", T::kBoolean, "false", kNoRule,
          {{"unclean.leader.election.enable"}},
          "Whether a replica outside the ISR may become leader, losing data."),
    topic("min.insync.replicas", T::kInt, "1", at_least(1), {{"min.insync.replicas"}},
          "In-sync replicas an acks=all write needs."),
    topic("compression.type", T::kString, "producer", one_of(kCompressionTypes),
          {{"compression.type"}}, "Codec batches are stored with; producer keeps theirs."),
    topic("compression.gzip.level", T::kInt, "-1", kGzipLevel, {{"compression.gzip.level"}},
          "Level for gzip compression."),
    topic("compression.lz4.level", T::kInt, "9", between(1, 17), {{"compression.lz4.level"}},
          "Level for lz4 compression."),
    topic("compression.zstd.level", T::kInt, "3", between(-131072, 22),
          {{"compression.zstd.level"}}, "Level for zstd compression."),
    topic("preallocate", T::kBoolean, "false", kNoRule, {{"log.preallocate"}},
          "Whether segment files are preallocated when created."),
    topic("message.format.version", T::kString, "3.0-IV1", kMetadataVersion,
          {{"log.message.format.version"}}, "Deprecated; ignored since inter-broker protocol 3.0."),
    topic("message.timestamp.type", T::kString, "CreateTime", one_of(kTimestampTypes),
          {{"log.message.timestamp.type"}},
          "Whether record timestamps are the producer's or the append time."),
    topic("message.timestamp.difference.max.ms", T::kLong, "9223372036854775807", at_least(0),
          {{"log.message.timestamp.difference.max.ms"}},
          "Deprecated; largest gap allowed between a record's timestamp and the broker's."),
    topic("message.timestamp.before.max.ms", T::kLong, "9223372036854775807", at_least(0),
          {{"log.message.timestamp.before.max.ms"}},
          "How far in the past a CreateTime timestamp may be."),
    topic("message.timestamp.after.max.ms", T::kLong, "9223372036854775807", at_least(0),
          {{"log.message.timestamp.after.max.ms"}},
          "How far in the future a CreateTime timestamp may be."),
    topic("leader.replication.throttled.replicas", T::kList, "", kThrottledReplicas, {},
          "Replicas throttled on the leader side: partition:broker pairs or *."),
    topic("follower.replication.throttled.replicas", T::kList, "", kThrottledReplicas, {},
          "Replicas throttled on the follower side: partition:broker pairs or *."),
    topic("message.downconversion.enable", T::kBoolean, "true", kNoRule,
          {{"log.message.downconversion.enable"}},
          "Whether old fetch versions get down-converted batches."),
    topic("remote.storage.enable", T::kBoolean, "false", kNoRule, {},
          "Whether the topic uses tiered storage."),
    topic("local.retention.ms", T::kLong, "-2", at_least(-2), {{"log.local.retention.ms"}},
          "How long segments stay on local disk with tiered storage; -2: retention.ms."),
    topic("local.retention.bytes", T::kLong, "-2", at_least(-2), {{"log.local.retention.bytes"}},
          "Local bytes a partition keeps with tiered storage; -2: retention.bytes."),
    topic("remote.log.copy.disable", T::kBoolean, "false", kNoRule, {},
          "Stop copying segments to tiered storage; remote data stays readable."),
    topic("remote.log.delete.on.disable", T::kBoolean, "false", kNoRule, {},
          "Delete remote data when tiered storage is turned off."),
};

// The broker configs: dynamic ones first (as KafkaConfig defines them), then
// static ones. Names are unique across the table.
constexpr ConfigDef kBrokerConfigs[] = {
    // Log defaults behind topic configs (DynamicLogConfig).
    broker("log.segment.bytes", T::kInt, "1073741824", at_least(14), U::kClusterWide,
           "Default segment.bytes."),
    broker("log.roll.ms", T::kLong, kNull, kNoRule, U::kClusterWide,
           "Default segment.ms; overrides log.roll.hours."),
    broker("log.roll.jitter.ms", T::kLong, kNull, kNoRule, U::kClusterWide,
           "Default segment.jitter.ms; overrides log.roll.jitter.hours."),
    broker("log.index.size.max.bytes", T::kInt, "10485760", at_least(4), U::kClusterWide,
           "Default segment.index.bytes."),
    broker("log.flush.interval.messages", T::kLong, "9223372036854775807", at_least(1),
           U::kClusterWide, "Default flush.messages."),
    broker("log.flush.interval.ms", T::kLong, kNull, kNoRule, U::kClusterWide,
           "Default flush.ms; falls back to log.flush.scheduler.interval.ms."),
    broker("log.retention.bytes", T::kLong, "-1", kNoRule, U::kClusterWide,
           "Default retention.bytes."),
    broker("log.retention.ms", T::kLong, kNull, kNoRule, U::kClusterWide,
           "Default retention.ms; overrides log.retention.minutes and hours."),
    broker("message.max.bytes", T::kInt, "1048588", at_least(0), U::kClusterWide,
           "Default max.message.bytes; also bounds the cleaner's buffers."),
    broker("log.index.interval.bytes", T::kInt, "4096", at_least(0), U::kClusterWide,
           "Default index.interval.bytes."),
    broker("log.cleaner.delete.retention.ms", T::kLong, "86400000", at_least(0), U::kClusterWide,
           "Default delete.retention.ms."),
    broker("log.cleaner.min.compaction.lag.ms", T::kLong, "0", at_least(0), U::kClusterWide,
           "Default min.compaction.lag.ms."),
    broker("log.cleaner.max.compaction.lag.ms", T::kLong, "9223372036854775807", at_least(1),
           U::kClusterWide, "Default max.compaction.lag.ms."),
    broker("log.segment.delete.delay.ms", T::kLong, "60000", at_least(0), U::kClusterWide,
           "Default file.delete.delay.ms."),
    broker("log.cleaner.min.cleanable.ratio", T::kDouble, "0.5", between(0, 1), U::kClusterWide,
           "Default min.cleanable.dirty.ratio."),
    broker("log.cleanup.policy", T::kList, "delete", each_one_of(kCleanupPolicies), U::kClusterWide,
           "Default cleanup.policy."),
    broker("unclean.leader.election.enable", T::kBoolean, "false", kNoRule, U::kClusterWide,
           "Default unclean.leader.election.enable."),
    broker("min.insync.replicas", T::kInt, "1", at_least(1), U::kClusterWide,
           "Default min.insync.replicas."),
    broker("compression.type", T::kString, "producer", one_of(kCompressionTypes), U::kClusterWide,
           "Default compression.type."),
    broker("compression.gzip.level", T::kInt, "-1", kGzipLevel, U::kClusterWide,
           "Default compression.gzip.level."),
    broker("compression.lz4.level", T::kInt, "9", between(1, 17), U::kClusterWide,
           "Default compression.lz4.level."),
    broker("compression.zstd.level", T::kInt, "3", between(-131072, 22), U::kClusterWide,
           "Default compression.zstd.level."),
    broker("log.preallocate", T::kBoolean, "false", kNoRule, U::kClusterWide,
           "Default preallocate."),
    broker("log.message.timestamp.type", T::kString, "CreateTime", one_of(kTimestampTypes),
           U::kClusterWide, "Default message.timestamp.type."),
    broker("log.message.timestamp.difference.max.ms", T::kLong, "9223372036854775807", at_least(0),
           U::kClusterWide, "Default message.timestamp.difference.max.ms."),
    broker("log.message.timestamp.before.max.ms", T::kLong, "9223372036854775807", at_least(0),
           U::kClusterWide, "Default message.timestamp.before.max.ms."),
    broker("log.message.timestamp.after.max.ms", T::kLong, "9223372036854775807", at_least(0),
           U::kClusterWide, "Default message.timestamp.after.max.ms."),
    broker("log.message.downconversion.enable", T::kBoolean, "true", kNoRule, U::kClusterWide,
           "Default message.downconversion.enable."),
    broker("log.local.retention.ms", T::kLong, "-2", at_least(-2), U::kClusterWide,
           "Default local.retention.ms."),
    broker("log.local.retention.bytes", T::kLong, "-2", at_least(-2), U::kClusterWide,
           "Default local.retention.bytes."),
    // Log cleaner (LogCleaner.ReconfigurableConfigs).
    broker("log.cleaner.threads", T::kInt, "1", at_least(0), U::kClusterWide,
           "Threads compacting logs."),
    broker("log.cleaner.dedupe.buffer.size", T::kLong, "134217728", kNoRule, U::kClusterWide,
           "Memory all cleaner threads use to deduplicate keys."),
    broker("log.cleaner.io.buffer.load.factor", T::kDouble, "0.9", kNoRule, U::kClusterWide,
           "How full the cleaner's dedupe map may get."),
    broker("log.cleaner.io.buffer.size", T::kInt, "524288", at_least(0), U::kClusterWide,
           "Memory all cleaner threads use for I/O buffers."),
    broker("log.cleaner.io.max.bytes.per.second", T::kDouble, "1.7976931348623157E308", kNoRule,
           U::kClusterWide, "Throttle on the cleaner's reads plus writes."),
    broker("log.cleaner.backoff.ms", T::kLong, "15000", at_least(0), U::kClusterWide,
           "Sleep when the cleaner finds nothing to clean."),
    // Thread pools (DynamicThreadPool) and reporters.
    broker("num.io.threads", T::kInt, "8", at_least(1), U::kClusterWide,
           "Threads serving requests."),
    broker("num.replica.fetchers", T::kInt, "1", kNoRule, U::kClusterWide,
           "Fetcher threads per source broker."),
    broker("num.recovery.threads.per.data.dir", T::kInt, "1", at_least(1), U::kClusterWide,
           "Threads per log directory for recovery at startup and flush at shutdown."),
    broker("background.threads", T::kInt, "10", at_least(1), U::kClusterWide,
           "Threads for background tasks."),
    broker("metric.reporters", T::kList, "", kNoRule, U::kClusterWide,
           "Classes notified of new metrics."),
    // Connections (SocketServer, DynamicListenerConfig).
    broker("num.network.threads", T::kInt, "3", at_least(1), U::kClusterWide,
           "Threads reading requests and writing responses."),
    broker("max.connections.per.ip", T::kInt, "2147483647", at_least(0), U::kClusterWide,
           "Connections allowed from one address."),
    broker("max.connections.per.ip.overrides", T::kString, "", kNoRule, U::kClusterWide,
           "Per-address connection limits: host:count,..."),
    broker("max.connections", T::kInt, "2147483647", at_least(0), U::kClusterWide,
           "Connections allowed on the broker."),
    broker("max.connection.creation.rate", T::kInt, "2147483647", at_least(0), U::kClusterWide,
           "New connections allowed per second."),
    broker("listeners", T::kString, "PLAINTEXT://:9092", kNoRule, U::kPerBroker,
           "Addresses the broker listens on: NAME://host:port,..."),
    broker("advertised.listeners", T::kString, kNull, kNoRule, U::kPerBroker,
           "Addresses clients are told to use; defaults to listeners."),
    broker("listener.security.protocol.map", T::kString,
           "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", kNoRule,
           U::kPerBroker, "Security protocol of each listener name."),
    // Security (DynamicListenerConfig; the keystores only per listener).
    broker("principal.builder.class", T::kClass,
           "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", kNoRule,
           U::kPerBroker, "Builds the principal of an authenticated connection."),
    broker("ssl.protocol", T::kString, "TLSv1.3", kNoRule, U::kPerBroker,
           "TLS protocol of new connections."),
    broker("ssl.provider", T::kString, kNull, kNoRule, U::kPerBroker, "Security provider for TLS."),
    broker("ssl.cipher.suites", T::kList, "", kNoRule, U::kPerBroker,
           "Cipher suites allowed; empty: all."),
    broker("ssl.enabled.protocols", T::kList, "TLSv1.2,TLSv1.3", kNoRule, U::kPerBroker,
           "TLS protocols allowed."),
    broker("ssl.keystore.type", T::kString, "JKS", kNoRule, U::kPerListener,
           "Format of the key store."),
    broker("ssl.keystore.location", T::kString, kNull, kNoRule, U::kPerListener,
           "Path of the key store."),
    broker("ssl.keystore.password", T::kPassword, kNull, kNoRule, U::kPerListener,
           "Password of the key store."),
    broker("ssl.key.password", T::kPassword, kNull, kNoRule, U::kPerListener,
           "Password of the private key."),
    broker("ssl.keystore.key", T::kPassword, kNull, kNoRule, U::kPerListener,
           "Private key in PEM form."),
    broker("ssl.keystore.certificate.chain", T::kPassword, kNull, kNoRule, U::kPerListener,
           "Certificate chain in PEM form."),
    broker("ssl.truststore.type", T::kString, "JKS", kNoRule, U::kPerListener,
           "Format of the trust store."),
    broker("ssl.truststore.location", T::kString, kNull, kNoRule, U::kPerListener,
           "Path of the trust store."),
    broker("ssl.truststore.password", T::kPassword, kNull, kNoRule, U::kPerListener,
           "Password of the trust store."),
    broker("ssl.truststore.certificates", T::kPassword, kNull, kNoRule, U::kPerListener,
           "Trusted certificates in PEM form."),
    broker("ssl.keymanager.algorithm", T::kString, "SunX509", kNoRule, U::kPerBroker,
           "Key manager factory algorithm."),
    broker("ssl.trustmanager.algorithm", T::kString, "PKIX", kNoRule, U::kPerBroker,
           "Trust manager factory algorithm."),
    broker("ssl.endpoint.identification.algorithm", T::kString, "https", kNoRule, U::kPerBroker,
           "How peers' host names are checked against their certificates."),
    broker("ssl.secure.random.implementation", T::kString, kNull, kNoRule, U::kPerBroker,
           "SecureRandom implementation for TLS."),
    broker("ssl.client.auth", T::kString, "none", one_of(kSslClientAuth), U::kPerBroker,
           "Whether clients must present certificates."),
    broker("ssl.engine.factory.class", T::kClass, kNull, kNoRule, U::kPerBroker,
           "Custom factory of TLS engines."),
    broker("sasl.mechanism.inter.broker.protocol", T::kString, "GSSAPI", kNoRule, U::kPerBroker,
           "SASL mechanism between brokers."),
    broker("sasl.jaas.config", T::kPassword, kNull, kNoRule, U::kPerBroker,
           "JAAS login context for SASL."),
    broker("sasl.enabled.mechanisms", T::kList, "GSSAPI", kNoRule, U::kPerBroker,
           "SASL mechanisms the broker accepts."),
    broker("sasl.kerberos.service.name", T::kString, kNull, kNoRule, U::kPerBroker,
           "Kerberos principal name the broker runs as."),
    broker("sasl.kerberos.kinit.cmd", T::kString, "/usr/bin/kinit", kNoRule, U::kPerBroker,
           "Path of kinit."),
    broker("sasl.kerberos.ticket.renew.window.factor", T::kDouble, "0.8", kNoRule, U::kPerBroker,
           "Share of a ticket's life after which it is renewed."),
    broker("sasl.kerberos.ticket.renew.jitter", T::kDouble, "0.05", kNoRule, U::kPerBroker,
           "Random jitter added to the ticket renewal time."),
    broker("sasl.kerberos.min.time.before.relogin", T::kLong, "60000", kNoRule, U::kPerBroker,
           "Sleep between Kerberos refresh attempts."),
    broker("sasl.kerberos.principal.to.local.rules", T::kList, "DEFAULT", kNoRule, U::kPerBroker,
           "Rules mapping Kerberos principals to short names."),
    broker("sasl.login.refresh.window.factor", T::kDouble, "0.8", kNoRule, U::kPerBroker,
           "Share of a credential's life after which it is refreshed."),
    broker("sasl.login.refresh.window.jitter", T::kDouble, "0.05", kNoRule, U::kPerBroker,
           "Random jitter added to the credential refresh time."),
    broker("sasl.login.refresh.min.period.seconds", T::kShort, "60", kNoRule, U::kPerBroker,
           "Shortest wait between credential refreshes."),
    broker("sasl.login.refresh.buffer.seconds", T::kShort, "300", kNoRule, U::kPerBroker,
           "Time kept before a credential expires when refreshing it."),
    // Producer state (DynamicProducerStateManagerConfig).
    broker("producer.id.expiration.ms", T::kInt, "86400000", at_least(1), U::kClusterWide,
           "Idle time after which a producer id's state is dropped."),
    broker("transaction.partition.verification.enable", T::kBoolean, "true", kNoRule,
           U::kClusterWide, "Whether a transactional write checks its partition was added."),
    // Tiered storage (DynamicRemoteLogConfig).
    broker("remote.log.index.file.cache.total.size.bytes", T::kLong, "1073741824", at_least(1),
           U::kClusterWide, "Disk for cached remote segment indexes."),
    broker("remote.fetch.max.wait.ms", T::kInt, "500", at_least(1), U::kClusterWide,
           "Longest a fetch waits for remote data."),
    broker("remote.log.manager.copy.max.bytes.per.second", T::kLong, "9223372036854775807",
           at_least(1), U::kClusterWide, "Throttle on copies to remote storage."),
    broker("remote.log.manager.fetch.max.bytes.per.second", T::kLong, "9223372036854775807",
           at_least(1), U::kClusterWide, "Throttle on reads from remote storage."),
    // Replication quotas (QuotaConfigs.brokerQuotaConfigs).
    broker("leader.replication.throttled.rate", T::kLong, "9223372036854775807", at_least(0),
           U::kQuota, "Bytes per second leaders send to throttled replicas."),
    broker("follower.replication.throttled.rate", T::kLong, "9223372036854775807", at_least(0),
           U::kQuota, "Bytes per second throttled followers fetch."),
    broker("replica.alter.log.dirs.io.max.bytes.per.second", T::kLong, "9223372036854775807",
           at_least(0), U::kQuota, "Bytes per second moved between log directories."),

    // Static: node identity and KRaft.
    broker("broker.id", T::kInt, "-1", kNoRule, U::kReadOnly,
           "Id of the broker; same as node.id in KRaft."),
    broker("node.id", T::kInt, "-1", kNoRule, U::kReadOnly, "Id of this node in the cluster."),
    broker("process.roles", T::kList, "", each_one_of(kProcessRoles), U::kReadOnly,
           "Roles this node plays: broker, controller or both."),
    broker("controller.quorum.voters", T::kList, "", kNoRule, U::kReadOnly,
           "Controller quorum as id@host:port,..."),
    broker("controller.quorum.bootstrap.servers", T::kList, "", kNoRule, U::kReadOnly,
           "Addresses used to find the controller quorum."),
    broker("controller.listener.names", T::kString, kNull, kNoRule, U::kReadOnly,
           "Listener names the controllers use."),
    broker("controller.quorum.election.timeout.ms", T::kInt, "1000", kNoRule, U::kReadOnly,
           "Time without a leader before a controller stands for election."),
    broker("controller.quorum.fetch.timeout.ms", T::kInt, "2000", kNoRule, U::kReadOnly,
           "Time without a fetch from the leader before a voter suspects it."),
    broker("metadata.log.dir", T::kString, kNull, kNoRule, U::kReadOnly,
           "Directory of the metadata log; defaults to the first log directory."),
    broker("metadata.log.segment.bytes", T::kInt, "1073741824", at_least(12), U::kReadOnly,
           "Segment size of the metadata log."),
    broker("metadata.max.retention.bytes", T::kLong, "104857600", kNoRule, U::kReadOnly,
           "Metadata log bytes kept behind the latest snapshot."),
    broker("metadata.max.retention.ms", T::kLong, "604800000", kNoRule, U::kReadOnly,
           "How long metadata log segments are kept behind the latest snapshot."),
    broker("broker.heartbeat.interval.ms", T::kInt, "2000", kNoRule, U::kReadOnly,
           "Time between a broker's heartbeats to the controller."),
    broker("broker.session.timeout.ms", T::kInt, "9000", kNoRule, U::kReadOnly,
           "Time without heartbeats after which a broker is fenced."),
    broker("eligible.leader.replicas.enable", T::kBoolean, "false", kNoRule, U::kReadOnly,
           "Whether eligible leader replicas (KIP-966) are used."),
    broker("broker.rack", T::kString, kNull, kNoRule, U::kReadOnly,
           "Rack of the broker, for rack-aware placement."),
    // Static: listeners and security.
    broker("inter.broker.listener.name", T::kString, kNull, kNoRule, U::kReadOnly,
           "Listener brokers use to talk to each other."),
    broker("security.inter.broker.protocol", T::kString, "PLAINTEXT", one_of(kSecurityProtocols),
           U::kReadOnly, "Security protocol between brokers when no listener name is set."),
    broker("inter.broker.protocol.version", T::kString, "3.9-IV0", kMetadataVersion, U::kReadOnly,
           "Protocol version brokers use with each other."),
    broker("authorizer.class.name", T::kString, "", kNoRule, U::kReadOnly,
           "Authorizer class; empty: no authorization."),
    broker("password.encoder.secret", T::kPassword, kNull, kNoRule, U::kReadOnly,
           "Secret that encodes dynamically set passwords."),
    broker("delegation.token.secret.key", T::kPassword, kNull, kNoRule, U::kReadOnly,
           "Secret that signs delegation tokens."),
    // Static: sockets and requests.
    broker("socket.send.buffer.bytes", T::kInt, "102400", kNoRule, U::kReadOnly,
           "SO_SNDBUF of server sockets; -1: the OS default."),
    broker("socket.receive.buffer.bytes", T::kInt, "102400", kNoRule, U::kReadOnly,
           "SO_RCVBUF of server sockets; -1: the OS default."),
    broker("socket.request.max.bytes", T::kInt, "104857600", at_least(1), U::kReadOnly,
           "Largest request accepted."),
    broker("queued.max.requests", T::kInt, "500", at_least(1), U::kReadOnly,
           "Requests queued before network threads stop reading."),
    broker("connections.max.idle.ms", T::kLong, "600000", kNoRule, U::kReadOnly,
           "Idle time after which a connection is closed."),
    broker("request.timeout.ms", T::kInt, "30000", kNoRule, U::kReadOnly,
           "Time the broker waits for responses to its own requests."),
    broker("fetch.max.bytes", T::kInt, "57671680", at_least(1024), U::kReadOnly,
           "Largest fetch response for a consumer."),
    broker("max.incremental.fetch.session.cache.slots", T::kInt, "1000", at_least(0), U::kReadOnly,
           "Incremental fetch sessions kept."),
    // Static: logs.
    broker("log.dir", T::kString, "/tmp/kafka-logs", kNoRule, U::kReadOnly,
           "Log directory, when log.dirs is not set."),
    broker("log.dirs", T::kString, kNull, kNoRule, U::kReadOnly,
           "Comma-separated log directories."),
    broker("num.partitions", T::kInt, "1", at_least(1), U::kReadOnly,
           "Partitions of an auto-created topic."),
    broker("default.replication.factor", T::kInt, "1", kNoRule, U::kReadOnly,
           "Replication factor of an auto-created topic."),
    broker("auto.create.topics.enable", T::kBoolean, "true", kNoRule, U::kReadOnly,
           "Whether metadata requests create missing topics."),
    broker("delete.topic.enable", T::kBoolean, "true", kNoRule, U::kReadOnly,
           "Whether topics may be deleted."),
    broker("auto.leader.rebalance.enable", T::kBoolean, "true", kNoRule, U::kReadOnly,
           "Whether leadership moves back to preferred replicas."),
    broker("leader.imbalance.check.interval.seconds", T::kLong, "300", at_least(1), U::kReadOnly,
           "How often the controller moves leadership back to preferred replicas."),
    broker("log.roll.hours", T::kInt, "168", at_least(1), U::kReadOnly,
           "Default segment.ms in hours."),
    broker("log.roll.jitter.hours", T::kInt, "0", at_least(0), U::kReadOnly,
           "Default segment.jitter.ms in hours."),
    broker("log.retention.minutes", T::kInt, kNull, kNoRule, U::kReadOnly,
           "Default retention.ms in minutes; overrides log.retention.hours."),
    broker("log.retention.hours", T::kInt, "168", kNoRule, U::kReadOnly,
           "Default retention.ms in hours."),
    broker("log.flush.scheduler.interval.ms", T::kLong, "9223372036854775807", kNoRule,
           U::kReadOnly, "How often logs are checked for a due flush."),
    broker("log.retention.check.interval.ms", T::kLong, "300000", at_least(1), U::kReadOnly,
           "How often logs are checked for deletable segments."),
    broker("log.flush.offset.checkpoint.interval.ms", T::kInt, "60000", at_least(0), U::kReadOnly,
           "How often the recovery points are checkpointed."),
    broker("log.flush.start.offset.checkpoint.interval.ms", T::kInt, "60000", at_least(0),
           U::kReadOnly, "How often the log start offsets are checkpointed."),
    broker("log.cleaner.enable", T::kBoolean, "true", kNoRule, U::kReadOnly,
           "Whether the log cleaner runs."),
    broker("log.message.format.version", T::kString, "3.0-IV1", kMetadataVersion, U::kReadOnly,
           "Deprecated default message.format.version."),
    broker("log.dir.failure.timeout.ms", T::kLong, "30000", at_least(1), U::kReadOnly,
           "Time a broker waits before shutting down on an offline log directory."),
    broker("create.topic.policy.class.name", T::kClass, kNull, kNoRule, U::kReadOnly,
           "Policy that validates topic creations."),
    broker("alter.config.policy.class.name", T::kClass, kNull, kNoRule, U::kReadOnly,
           "Policy that validates config changes."),
    broker("remote.log.storage.system.enable", T::kBoolean, "false", kNoRule, U::kReadOnly,
           "Whether the broker supports tiered storage."),
    // Static: replication.
    broker("replica.lag.time.max.ms", T::kLong, "30000", kNoRule, U::kReadOnly,
           "Time without catching up after which a follower leaves the ISR."),
    broker("replica.fetch.max.bytes", T::kInt, "1048576", at_least(0), U::kReadOnly,
           "Bytes a follower fetches per partition."),
    broker("replica.fetch.wait.max.ms", T::kInt, "500", kNoRule, U::kReadOnly,
           "Longest wait of a follower's fetch."),
    broker("replica.fetch.min.bytes", T::kInt, "1", kNoRule, U::kReadOnly,
           "Bytes a follower's fetch waits for."),
    broker("replica.fetch.response.max.bytes", T::kInt, "10485760", at_least(0), U::kReadOnly,
           "Largest fetch response for a follower."),
    // Static: group and transaction coordinators.
    broker("offsets.topic.replication.factor", T::kShort, "3", at_least(1), U::kReadOnly,
           "Replication factor of __consumer_offsets."),
    broker("offsets.topic.num.partitions", T::kInt, "50", at_least(1), U::kReadOnly,
           "Partitions of __consumer_offsets."),
    broker("offsets.retention.minutes", T::kInt, "10080", at_least(1), U::kReadOnly,
           "How long committed offsets of an empty group are kept."),
    broker("group.initial.rebalance.delay.ms", T::kInt, "3000", kNoRule, U::kReadOnly,
           "Wait for more members before a new group's first rebalance."),
    broker("group.min.session.timeout.ms", T::kInt, "6000", kNoRule, U::kReadOnly,
           "Shortest session timeout a classic group member may ask for."),
    broker("group.max.session.timeout.ms", T::kInt, "1800000", kNoRule, U::kReadOnly,
           "Longest session timeout a classic group member may ask for."),
    broker("transaction.state.log.replication.factor", T::kShort, "3", at_least(1), U::kReadOnly,
           "Replication factor of __transaction_state."),
    broker("transaction.state.log.num.partitions", T::kInt, "50", at_least(1), U::kReadOnly,
           "Partitions of __transaction_state."),
    broker("transaction.state.log.min.isr", T::kInt, "2", at_least(1), U::kReadOnly,
           "min.insync.replicas of __transaction_state."),
    broker("transaction.max.timeout.ms", T::kInt, "900000", at_least(1), U::kReadOnly,
           "Longest transaction timeout a producer may ask for."),
    broker("transactional.id.expiration.ms", T::kInt, "604800000", at_least(1), U::kReadOnly,
           "Idle time after which a transactional id expires."),
    broker("transaction.abort.timed.out.transaction.cleanup.interval.ms", T::kInt, "10000", at_least(1),
           U::kReadOnly, "How often transactions past their timeout are looked for and aborted."),
    broker("transaction.remove.expired.transaction.cleanup.interval.ms", T::kInt, "3600000", at_least(1),
           U::kReadOnly, "How often expired transactional ids are looked for and removed."),
};

// Broker configs that name one setting in several units (Kafka's
// DynamicBrokerConfig.brokerConfigSynonyms), highest precedence first.
constexpr std::string_view kRollNames[] = {"log.roll.ms", "log.roll.hours"};
constexpr std::string_view kJitterNames[] = {"log.roll.jitter.ms", "log.roll.jitter.hours"};
constexpr std::string_view kRetentionNames[] = {"log.retention.ms", "log.retention.minutes",
                                                "log.retention.hours"};

// Listener configs whose override carries a SASL mechanism:
// listener.name.<l>.<mechanism>.<config>.
constexpr std::string_view kListenerMechanismConfigs[] = {
    "sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class",
    "sasl.server.callback.handler.class", "connections.max.reauth.ms"};

// Listener overrides of these may be set on the cluster default.
constexpr std::string_view kClusterLevelListenerConfigs[] = {
    "max.connections", "max.connection.creation.rate", "num.network.threads"};

constexpr std::string_view kListenerPrefix = "listener.name.";

// Metadata versions (Kafka 3.9's MetadataVersion): each release, then its
// inter-broker protocol versions.
struct Release {
  std::string_view release;
  int ivs;  // IV0..IV(n-1); 0: the release is its own version
  bool production;
};
constexpr Release kReleases[] = {
    {"0.8.0", 0, true},  {"0.8.1", 0, true},  {"0.8.2", 0, true},  {"0.9.0", 0, true},
    {"0.10.0", 2, true}, {"0.10.1", 3, true}, {"0.10.2", 1, true}, {"0.11.0", 3, true},
    {"1.0", 1, true},    {"1.1", 1, true},    {"2.0", 2, true},    {"2.1", 3, true},
    {"2.2", 2, true},    {"2.3", 2, true},    {"2.4", 2, true},    {"2.5", 1, true},
    {"2.6", 1, true},    {"2.7", 3, true},    {"2.8", 2, true},    {"3.0", 2, true},
    {"3.1", 1, true},    {"3.2", 1, true},    {"3.3", 4, true},    {"3.4", 1, true},
    {"3.5", 3, true},    {"3.6", 3, true},    {"3.7", 5, true},    {"3.8", 1, true},
    {"3.9", 1, true},    {"4.0", 2, false},
};

// ---------------------------------------------------------------------------
// Java-compatible text handling.

// String.trim(): drops every char <= ' ' at both ends.
std::string_view java_trim(std::string_view s) {
  while (!s.empty() && static_cast<unsigned char>(s.front()) <= ' ') s.remove_prefix(1);
  while (!s.empty() && static_cast<unsigned char>(s.back()) <= ' ') s.remove_suffix(1);
  return s;
}

bool is_regex_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\x0B' || c == '\f' || c == '\r';
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool equals_ignore_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

// Integer/Long/Short.parseX: an optional sign, then decimal digits, in range.
std::optional<int64_t> parse_java_integer(std::string_view s, int64_t min, int64_t max) {
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || !std::all_of(s.begin(), s.end(), is_digit)) return std::nullopt;
  std::string digits = negative ? fmt::format("-{}", s) : std::string(s);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  if (value < min || value > max) return std::nullopt;
  return value;
}

// Double.parseDouble for decimal text: sign, digits with an optional point,
// an optional exponent and an optional f/d suffix; NaN and Infinity. Hex
// floats are not accepted (no Kafka config uses them).
std::optional<double> parse_java_double(std::string_view s) {
  s = java_trim(s);
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  const double sign = negative ? -1.0 : 1.0;
  if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (s == "Infinity") return sign * std::numeric_limits<double>::infinity();
  if (!s.empty() && std::string_view("fFdD").find(s.back()) != std::string_view::npos) {
    s.remove_suffix(1);
  }
  size_t i = 0;
  size_t mantissa_digits = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++mantissa_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i, ++mantissa_digits;
  }
  if (mantissa_digits == 0) return std::nullopt;
  bool exponent_negative = false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) exponent_negative = s[i++] == '-';
    const size_t exponent_start = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    if (i == exponent_start) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  // from_chars takes no '+' in the exponent's place either; it accepts the
  // shape checked above.
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec == std::errc::result_out_of_range) {
    value = exponent_negative ? 0.0 : std::numeric_limits<double>::infinity();
  } else if (ec != std::errc() || end != s.data() + s.size()) {
    return std::nullopt;
  }
  return sign * value;
}

// Double.toString: the shortest digits that round-trip, in plain notation
// for magnitudes in [1e-3, 1e7) and as d.dddE±n otherwise.
std::string java_double_string(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  char buffer[64];
  auto [end, ec] =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  if (ec != std::errc()) return fmt::format("{}", value);
  std::string_view text(buffer, static_cast<size_t>(end - buffer));
  std::string sign;
  if (text.front() == '-') {
    sign = "-";
    text.remove_prefix(1);
  }
  const size_t e = text.find('e');
  std::string digits(text.substr(0, e));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exponent = 0;
  std::string_view exponent_text = text.substr(e + 1);
  if (exponent_text.front() == '+') exponent_text.remove_prefix(1);
  std::from_chars(exponent_text.data(), exponent_text.data() + exponent_text.size(), exponent);
  const double magnitude = std::fabs(value);
  if (magnitude >= 1e-3 && magnitude < 1e7) {
    std::string whole;
    std::string fraction;
    if (exponent >= 0) {
      const size_t point = static_cast<size_t>(exponent) + 1;
      if (digits.size() < point) digits.append(point - digits.size(), '0');
      whole = digits.substr(0, point);
      fraction = digits.substr(point);
    } else {
      whole = "0";
      fraction = std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    }
    if (fraction.empty()) fraction = "0";
    return fmt::format("{}{}.{}", sign, whole, fraction);
  }
  std::string fraction = digits.size() > 1 ? digits.substr(1) : "0";
  return fmt::format("{}{}.{}E{}", sign, digits.front(), fraction, exponent);
}

// ConfigDef's list parsing: empty text is the empty list; otherwise split on
// commas, dropping the whitespace around each, keeping empty elements.
std::vector<std::string> split_list(std::string_view trimmed) {
  std::vector<std::string> elements;
  if (trimmed.empty()) return elements;
  size_t start = 0;
  while (true) {
    const size_t comma = trimmed.find(',', start);
    std::string_view element = trimmed.substr(start, comma - start);
    while (!element.empty() && is_regex_space(element.front())) element.remove_prefix(1);
    while (!element.empty() && is_regex_space(element.back())) element.remove_suffix(1);
    elements.emplace_back(element);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return elements;
}

std::string join(std::span<const std::string> parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += separator;
    out += parts[i];
  }
  return out;
}

std::string join(std::span<const std::string_view> parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += separator;
    out += parts[i];
  }
  return out;
}

// A Java binary class name: identifiers separated by dots.
bool is_class_name(std::string_view s) {
  if (s.empty()) return false;
  bool at_start = true;
  for (char c : s) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$';
    if (c == '.') {
      if (at_start) return false;
      at_start = true;
    } else if (letter || (!at_start && is_digit(c))) {
      at_start = false;
    } else {
      return false;
    }
  }
  return !at_start;
}

// MetadataVersion.fromVersionString: the first three dot-separated parts of a
// 0.x version, the first two of any other, must name a release or version.
bool is_metadata_version(std::string_view version) {
  const size_t parts = version.starts_with("0.") ? 3 : 2;
  size_t cut = std::string_view::npos;
  size_t from = 0;
  for (size_t dots = 0; dots < parts; ++dots) {
    cut = version.find('.', from);
    if (cut == std::string_view::npos) break;
    from = cut + 1;
  }
  const std::string_view key = cut == std::string_view::npos ? version : version.substr(0, cut);
  for (const Release& r : kReleases) {
    if (r.production && key == r.release) return true;
    if (r.ivs == 0 && key == r.release) return true;
    for (int iv = 0; iv < r.ivs; ++iv) {
      if (key == fmt::format("{}-IV{}", r.release, iv)) return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------
// Values.

// A value parsed as its config's type.
struct Value {
  ConfigType type = ConfigType::kUnknown;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text{};               // STRING, PASSWORD, CLASS
  std::vector<std::string> list{};  // LIST
};

absl::Status invalid(std::string_view name, std::string_view value, std::string_view message) {
  return absl::InvalidArgumentError(
      fmt::format("Invalid value {} for configuration {}: {}", value, name, message));
}

absl::StatusOr<Value> parse_value(const ConfigDef& def, std::string_view raw) {
  const std::string_view trimmed = java_trim(raw);
  Value value{.type = def.type};
  auto integer = [&](int64_t min, int64_t max) -> absl::Status {
    std::optional<int64_t> n = parse_java_integer(trimmed, min, max);
    if (!n)
      return invalid(def.name, raw, fmt::format("Not a number of type {}", type_name(def.type)));
    value.integer = *n;
    return absl::OkStatus();
  };
  switch (def.type) {
    case ConfigType::kBoolean:
      if (equals_ignore_case(trimmed, "true")) {
        value.boolean = true;
      } else if (!equals_ignore_case(trimmed, "false")) {
        return invalid(def.name, raw, "Expected value to be either true or false");
      }
      return value;
    case ConfigType::kShort:
      if (absl::Status s = integer(INT16_MIN, INT16_MAX); !s.ok()) return s;
      return value;
    case ConfigType::kInt:
      if (absl::Status s = integer(INT32_MIN, INT32_MAX); !s.ok()) return s;
      return value;
    case ConfigType::kLong:
      if (absl::Status s = integer(INT64_MIN, INT64_MAX); !s.ok()) return s;
      return value;
    case ConfigType::kDouble: {
      std::optional<double> d = parse_java_double(trimmed);
      if (!d) return invalid(def.name, raw, "Not a number of type DOUBLE");
      value.real = *d;
      return value;
    }
    case ConfigType::kList:
      value.list = split_list(trimmed);
      return value;
    case ConfigType::kClass:
      if (!is_class_name(trimmed)) {
        return invalid(def.name, raw, fmt::format("Class {} could not be found.", raw));
      }
      value.text = std::string(trimmed);
      return value;
    case ConfigType::kString:
    case ConfigType::kPassword:
    case ConfigType::kUnknown:
      value.text = std::string(trimmed);
      return value;
  }
  return value;
}

// ConfigDef.convertToString of a parsed value.
std::string render(const Value& value) {
  switch (value.type) {
    case ConfigType::kBoolean:
      return value.boolean ? "true" : "false";
    case ConfigType::kShort:
    case ConfigType::kInt:
    case ConfigType::kLong:
      return fmt::format("{}", value.integer);
    case ConfigType::kDouble:
      return java_double_string(value.real);
    case ConfigType::kList:
      return join(value.list, ",");
    case ConfigType::kString:
    case ConfigType::kPassword:
    case ConfigType::kClass:
    case ConfigType::kUnknown:
      return value.text;
  }
  return value.text;
}

// A parsed number as Java prints its boxed value.
std::string render_number(const Value& value) {
  return value.type == ConfigType::kDouble ? java_double_string(value.real)
                                           : fmt::format("{}", value.integer);
}

bool is_choice(std::span<const std::string_view> choices, std::string_view s) {
  return std::find(choices.begin(), choices.end(), s) != choices.end();
}

bool is_throttled_replica(std::string_view element) {
  element = java_trim(element);
  if (element.empty()) return true;
  const size_t colon = element.find(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view partition = element.substr(0, colon);
  const std::string_view broker_id = element.substr(colon + 1);
  return !partition.empty() && !broker_id.empty() &&
         std::all_of(partition.begin(), partition.end(), is_digit) &&
         std::all_of(broker_id.begin(), broker_id.end(), is_digit);
}

absl::Status check_range(const ConfigDef& def, const Value& value) {
  const double n =
      value.type == ConfigType::kDouble ? value.real : static_cast<double>(value.integer);
  if (n < static_cast<double>(def.rule.min)) {
    return invalid(def.name, render_number(value),
                   fmt::format("Value must be at least {}", def.rule.min));
  }
  if (def.rule.check == Check::kBetween && n > static_cast<double>(def.rule.max)) {
    return invalid(def.name, render_number(value),
                   fmt::format("Value must be no more than {}", def.rule.max));
  }
  return absl::OkStatus();
}

absl::Status check_value(const ConfigDef& def, const Value& value) {
  switch (def.rule.check) {
    case Check::kNone:
      return absl::OkStatus();
    case Check::kAtLeast:
    case Check::kBetween:
      return check_range(def, value);
    case Check::kOneOf:
      if (is_choice(def.rule.choices, value.text)) return absl::OkStatus();
      return invalid(def.name, value.text,
                     fmt::format("String must be one of: {}", join(def.rule.choices, ", ")));
    case Check::kEachOneOf:
      for (const std::string& element : value.list) {
        if (!is_choice(def.rule.choices, element)) {
          return invalid(def.name, element,
                         fmt::format("String must be one of: {}", join(def.rule.choices, ", ")));
        }
      }
      return absl::OkStatus();
    case Check::kGzipLevel:
      if (value.integer > 9 || (value.integer < 1 && value.integer != -1)) {
        return invalid(def.name, render_number(value),
                       "Value must be between 1 and 9 or equal to -1");
      }
      return absl::OkStatus();
    case Check::kThrottledReplicas:
      if (std::all_of(value.list.begin(), value.list.end(), is_throttled_replica) ||
          join(value.list, "") == "*") {
        return absl::OkStatus();
      }
      return invalid(def.name, fmt::format("[{}]", join(value.list, ", ")),
                     fmt::format("{} must be the literal '*' or a list of replicas in the "
                                 "following format: [partitionId]:[brokerId],[partitionId]:"
                                 "[brokerId],...",
                                 def.name));
    case Check::kMetadataVersion:
      if (is_metadata_version(value.text)) return absl::OkStatus();
      return invalid(def.name, value.text,
                     fmt::format("Version {} is not a valid version", value.text));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> parse_and_check(const ConfigDef& def, std::string_view raw) {
  absl::StatusOr<Value> value = parse_value(def, raw);
  if (!value.ok()) return value.status();
  if (absl::Status s = check_value(def, *value); !s.ok()) return s;
  return value;
}

// The value as Kafka shows it once parsed; the raw text if it does not parse
// (a stored value Kafka would have ignored).
std::string canonical(const ConfigDef& def, std::string_view raw) {
  absl::StatusOr<Value> value = parse_value(def, raw);
  return value.ok() ? render(*value) : std::string(raw);
}

// ---------------------------------------------------------------------------
// Names.

std::string_view resource_type_name(int8_t resource_type) {
  switch (resource_type) {
    case metadata::kConfigResourceTopic:
      return "TOPIC";
    case metadata::kConfigResourceBroker:
      return "BROKER";
    case metadata::kConfigResourceBrokerLogger:
      return "BROKER_LOGGER";
    case metadata::kConfigResourceClientMetrics:
      return "CLIENT_METRICS";
    case metadata::kConfigResourceGroup:
      return "GROUP";
    default:
      return "UNKNOWN";
  }
}

// "listener.name.<l>.<config>" -> "<config>"; nullopt for other names.
std::optional<std::string_view> listener_base(std::string_view name) {
  if (!name.starts_with(kListenerPrefix)) return std::nullopt;
  const std::string_view rest = name.substr(kListenerPrefix.size());
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  return rest.substr(dot + 1);
}

// The names that share `name`'s setting, highest precedence first (Kafka's
// DynamicBrokerConfig.brokerConfigSynonyms with listener overrides matched).
std::vector<std::string> broker_synonym_names(std::string_view name) {
  for (std::span<const std::string_view> group :
       {std::span<const std::string_view>(kRollNames),
        std::span<const std::string_view>(kJitterNames),
        std::span<const std::string_view>(kRetentionNames)}) {
    if (is_choice(group, name)) return std::vector<std::string>(group.begin(), group.end());
  }
  if (name == "log.flush.interval.ms") {
    return {"log.flush.interval.ms", "log.flush.scheduler.interval.ms"};
  }
  if (std::optional<std::string_view> base = listener_base(name)) {
    for (std::string_view mechanism_config : kListenerMechanismConfigs) {
      if (base->ends_with(mechanism_config)) {
        return {std::string(name), std::string(mechanism_config)};
      }
    }
    return {std::string(name), std::string(*base)};
  }
  return {std::string(name)};
}

// The broker configs Kafka's KafkaConfig defines (the quotas are not).
const ConfigDef* find_kafka_config(std::string_view name) {
  const ConfigDef* def = find_broker_config(name);
  return def != nullptr && def->update != Update::kQuota ? def : nullptr;
}

bool is_dynamic(const ConfigDef* def) {
  return def != nullptr &&
         (def->update == Update::kPerBroker || def->update == Update::kPerListener ||
          def->update == Update::kClusterWide);
}

std::string scala_set(const std::set<std::string>& names) {
  return fmt::format("Set({})", join(std::vector<std::string>(names.begin(), names.end()), ", "));
}

absl::Status unsupported(int8_t resource_type) {
  return absl::UnimplementedError(
      fmt::format("Unsupported resource type: {}", resource_type_name(resource_type)));
}

// ---------------------------------------------------------------------------
// Broker layers, as one view.

class Layers {
 public:
  explicit Layers(const BrokerLayers& broker)
      : dynamic_broker_(broker.dynamic_broker), dynamic_default_(broker.dynamic_default) {
    if (broker.static_config != nullptr) static_ = *broker.static_config;
    // KafkaConfig.populateSynonyms: broker.id and node.id stand for each other.
    auto node_id = static_.find("node.id");
    auto broker_id = static_.find("broker.id");
    if (node_id != static_.end() && broker_id == static_.end()) {
      static_.emplace("broker.id", node_id->second);
    } else if (broker_id != static_.end() && node_id == static_.end()) {
      static_.emplace("node.id", broker_id->second);
    }
  }

  std::optional<std::string_view> find(ConfigSource source, std::string_view name) const {
    switch (source) {
      case ConfigSource::kDynamicBrokerConfig:
        return find_in(dynamic_broker_, name);
      case ConfigSource::kDynamicDefaultBrokerConfig:
        return find_in(dynamic_default_, name);
      case ConfigSource::kStaticBrokerConfig: {
        auto it = static_.find(std::string(name));
        if (it == static_.end()) return std::nullopt;
        return std::string_view(it->second);
      }
      case ConfigSource::kDefaultConfig:
        if (const ConfigDef* def = find_kafka_config(name)) return def->default_value;
        return std::nullopt;
      default:
        return std::nullopt;
    }
  }

  // The value set at the highest dynamic or static level.
  std::optional<std::string_view> find_set(std::string_view name) const {
    for (ConfigSource source :
         {ConfigSource::kDynamicBrokerConfig, ConfigSource::kDynamicDefaultBrokerConfig,
          ConfigSource::kStaticBrokerConfig}) {
      if (std::optional<std::string_view> value = find(source, name)) return value;
    }
    return std::nullopt;
  }

  // Every name set at some dynamic or static level.
  std::set<std::string> names_set() const {
    std::set<std::string> names;
    for (const metadata::ConfigMap* map : {dynamic_broker_, dynamic_default_}) {
      if (map == nullptr) continue;
      for (const auto& [name, value] : *map) names.insert(name);
    }
    for (const auto& [name, value] : static_) names.insert(name);
    return names;
  }

 private:
  static std::optional<std::string_view> find_in(const metadata::ConfigMap* map,
                                                 std::string_view name) {
    if (map == nullptr) return std::nullopt;
    auto it = map->find(name);
    if (it == map->end()) return std::nullopt;
    return std::string_view(it->second);
  }

  const metadata::ConfigMap* dynamic_broker_;
  const metadata::ConfigMap* dynamic_default_;
  StaticConfig static_;
};

std::optional<std::string> effective_topic_default(const ConfigDef& def, const Layers& layers) {
  const std::span<const Synonym> synonyms = def.synonyms();
  const Synonym* chosen = nullptr;
  std::optional<std::string_view> raw;
  for (const Synonym& synonym : synonyms) {
    if ((raw = layers.find_set(synonym.name))) {
      chosen = &synonym;
      break;
    }
  }
  for (size_t i = 0; chosen == nullptr && i < synonyms.size(); ++i) {
    if ((raw = layers.find(ConfigSource::kDefaultConfig, synonyms[i].name))) chosen = &synonyms[i];
  }
  if (chosen == nullptr)
    return def.default_value ? std::optional<std::string>(*def.default_value) : std::nullopt;
  const ConfigDef* broker_def = find_broker_config(chosen->name);
  if (broker_def == nullptr) return std::string(*raw);
  absl::StatusOr<Value> value = parse_value(*broker_def, *raw);
  if (!value.ok()) return std::string(*raw);
  if (chosen->factor != 1) value->integer *= chosen->factor;
  // KafkaConfig.logRetentionTimeMillis: any negative retention is unlimited.
  if (def.name == "retention.ms" && value->integer < 0) value->integer = -1;
  value->type = def.type;
  return render(*value);
}

// Kafka's ConfigHelper.configSynonyms: `names` looked up level by level, then
// cut to start at `name` (which drops, for one, listener overrides when
// describing their base config).
std::vector<DescribedSynonym> collect_synonyms(const Layers& layers, std::string_view name,
                                               std::span<const std::string> names, bool sensitive) {
  std::vector<DescribedSynonym> synonyms;
  for (ConfigSource source :
       {ConfigSource::kDynamicBrokerConfig, ConfigSource::kDynamicDefaultBrokerConfig,
        ConfigSource::kStaticBrokerConfig, ConfigSource::kDefaultConfig}) {
    for (const std::string& synonym : names) {
      std::optional<std::string_view> value = layers.find(source, synonym);
      if (!value) continue;
      synonyms.push_back(
          {synonym, sensitive ? std::nullopt : std::optional<std::string>(*value), source});
    }
  }
  auto first = std::find_if(synonyms.begin(), synonyms.end(),
                            [&](const DescribedSynonym& s) { return s.name == name; });
  synonyms.erase(synonyms.begin(), first);
  return synonyms;
}

bool wanted(const DescribeOptions& options, std::string_view name) {
  if (!options.names || options.names->empty()) return true;
  return std::find(options.names->begin(), options.names->end(), name) != options.names->end();
}

// Fills source, synonyms and documentation from the full synonym list.
void finish_entry(DescribedConfig& entry, std::vector<DescribedSynonym> synonyms,
                  std::string_view doc, const DescribeOptions& options) {
  entry.source = synonyms.empty() ? ConfigSource::kDefaultConfig : synonyms.front().source;
  if (options.include_synonyms) entry.synonyms = std::move(synonyms);
  if (options.include_documentation && !doc.empty()) entry.documentation = std::string(doc);
}

DescribedConfig describe_topic_config(const ConfigDef& def, const metadata::ConfigMap* configs,
                                      const Layers& layers, const DescribeOptions& options) {
  DescribedConfig entry{.name = std::string(def.name), .type = def.type};
  std::optional<std::string_view> override_value;
  if (configs != nullptr) {
    if (auto it = configs->find(def.name); it != configs->end()) override_value = it->second;
  }
  entry.value = override_value ? std::optional<std::string>(canonical(def, *override_value))
                               : effective_topic_default(def, layers);
  std::vector<DescribedSynonym> synonyms;
  if (def.synonym_count > 0) {
    std::vector<std::string> names;
    for (const Synonym& synonym : def.synonyms()) names.emplace_back(synonym.name);
    synonyms = collect_synonyms(layers, names.front(), names, /*sensitive=*/false);
  }
  if (override_value) {
    synonyms.insert(synonyms.begin(),
                    DescribedSynonym{entry.name, entry.value, ConfigSource::kTopicConfig});
  }
  finish_entry(entry, std::move(synonyms), def.doc, options);
  return entry;
}

std::vector<DescribedConfig> describe_topic(const metadata::ConfigMap* configs,
                                            const Layers& layers, const DescribeOptions& options) {
  std::vector<DescribedConfig> entries;
  for (const ConfigDef& def : kTopicConfigs) {
    if (wanted(options, def.name))
      entries.push_back(describe_topic_config(def, configs, layers, options));
  }
  // A stored name that is not a topic config (Kafka would list it too, with
  // an unknown type, so as a sensitive value).
  if (configs != nullptr) {
    for (const auto& [name, value] : *configs) {
      if (find_topic_config(name) != nullptr || !wanted(options, name)) continue;
      DescribedConfig entry{.name = name, .is_sensitive = true};
      std::vector<DescribedSynonym> synonyms{
          DescribedSynonym{name, std::nullopt, ConfigSource::kTopicConfig}};
      finish_entry(entry, std::move(synonyms), {}, options);
      entries.push_back(std::move(entry));
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const DescribedConfig& a, const DescribedConfig& b) { return a.name < b.name; });
  return entries;
}

DescribedConfig describe_broker_config(std::string_view name, const Layers& layers, bool per_broker,
                                       const DescribeOptions& options) {
  const ConfigDef* def = find_broker_config(name);
  const ConfigType type = broker_config_type(name);
  const bool sensitive = type == ConfigType::kUnknown || type == ConfigType::kPassword;
  DescribedConfig entry{.name = std::string(name),
                        .read_only = !is_dynamic(def),
                        .is_sensitive = sensitive,
                        .type = type};
  if (!sensitive) {
    if (per_broker) {
      std::optional<std::string_view> raw = layers.find_set(name);
      if (!raw) raw = layers.find(ConfigSource::kDefaultConfig, name);
      if (raw) entry.value = def != nullptr ? canonical(*def, *raw) : std::string(*raw);
    } else if (std::optional<std::string_view> raw =
                   layers.find(ConfigSource::kDynamicDefaultBrokerConfig, name)) {
      entry.value = std::string(*raw);
    }
  }
  std::vector<std::string> names = broker_synonym_names(name);
  std::vector<DescribedSynonym> synonyms = collect_synonyms(layers, name, names, sensitive);
  if (!per_broker) {
    std::erase_if(synonyms, [](const DescribedSynonym& s) {
      return s.source != ConfigSource::kDynamicDefaultBrokerConfig;
    });
  }
  const ConfigDef* doc_def = def;
  if (doc_def == nullptr) {
    if (std::optional<std::string_view> base = listener_base(name))
      doc_def = find_kafka_config(*base);
  }
  finish_entry(entry, std::move(synonyms), doc_def != nullptr ? doc_def->doc : "", options);
  return entry;
}

absl::StatusOr<std::vector<DescribedConfig>> describe_broker(
    const metadata::ConfigResource& resource, const metadata::ConfigMap* resource_configs,
    const BrokerLayers& broker, const DescribeOptions& options) {
  const bool per_broker = !resource.name.empty();
  BrokerLayers layers = broker;
  if (per_broker) {
    if (!parse_java_integer(resource.name, INT32_MIN, INT32_MAX)) {
      return absl::InvalidArgumentError(
          fmt::format("Broker id must be an integer, but it is: {}", resource.name));
    }
    layers.dynamic_broker = resource_configs;
  } else {
    layers.dynamic_default = resource_configs;
  }
  const Layers view(layers);
  std::set<std::string> names;
  if (per_broker) {
    names = view.names_set();
    for (const ConfigDef& def : kBrokerConfigs) {
      if (def.update != Update::kQuota) names.emplace(def.name);
    }
  } else if (resource_configs != nullptr) {
    for (const auto& [name, value] : *resource_configs) names.insert(name);
  }
  std::vector<DescribedConfig> entries;
  for (const std::string& name : names) {
    if (wanted(options, name))
      entries.push_back(describe_broker_config(name, view, per_broker, options));
  }
  return entries;
}

std::vector<DescribedConfig> describe_client_metrics(const metadata::ConfigMap* configs,
                                                     const DescribeOptions& options) {
  std::vector<DescribedConfig> entries;
  if (configs == nullptr) return entries;
  for (const auto& [name, value] : *configs) {
    if (!wanted(options, name)) continue;
    entries.push_back({.name = name, .value = value, .source = ConfigSource::kClientMetricsConfig});
  }
  return entries;
}

// ---------------------------------------------------------------------------
// Validation.

absl::Status validate_topic_entry(std::string_view name, std::optional<std::string_view> value) {
  if (!value) return absl::OkStatus();
  const ConfigDef* def = find_topic_config(name);
  if (def == nullptr) {
    return absl::InvalidArgumentError(fmt::format("Unknown topic config name: {}", name));
  }
  return parse_and_check(*def, *value).status();
}

// The problems DynamicBrokerConfig.validateConfigs reports, by kind.
struct BrokerProblems {
  std::set<std::string> non_dynamic;
  std::set<std::string> without_listener_prefix;
  std::set<std::string> per_broker;
};

void classify_broker_name(std::string_view name, BrokerProblems& problems) {
  const ConfigDef* def = find_kafka_config(name);
  if (def != nullptr && def->update == Update::kReadOnly) problems.non_dynamic.emplace(name);
  if (def != nullptr && def->update == Update::kPerListener) {
    problems.without_listener_prefix.emplace(name);
  }
  if (def != nullptr &&
      (def->update == Update::kPerBroker || def->update == Update::kPerListener)) {
    problems.per_broker.emplace(name);
  }
  if (std::optional<std::string_view> base = listener_base(name)) {
    if (!is_choice(kClusterLevelListenerConfigs, *base)) problems.per_broker.emplace(name);
  }
}

// The type check of one broker config, on its base name for a listener
// override; names Brook does not know are custom configs and pass.
absl::Status check_broker_value(std::string_view name, std::string_view value) {
  const std::string_view base = listener_base(name).value_or(name);
  const ConfigDef* def = find_broker_config(base);
  if (def == nullptr) return absl::OkStatus();
  return parse_and_check(*def, value).status();
}

// Where a broker config change is made.
enum class BrokerLevel : uint8_t { kBroker, kClusterDefault };

// DynamicBrokerConfig.validateConfigs: each kind of problem is checked over
// every name before the next kind, as Kafka does.
absl::Status validate_broker_configs(BrokerLevel level, const metadata::ConfigMap& configs) {
  BrokerProblems problems;
  for (const auto& [name, value] : configs) classify_broker_name(name, problems);
  if (!problems.non_dynamic.empty()) {
    return absl::InvalidArgumentError(fmt::format("Cannot update these configs dynamically: {}",
                                                  scala_set(problems.non_dynamic)));
  }
  if (!problems.without_listener_prefix.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "These security configs can be dynamically updated only per-listener using the listener "
        "prefix: {}",
        scala_set(problems.without_listener_prefix)));
  }
  for (const auto& [name, value] : configs) {
    if (absl::Status s = check_broker_value(name, value); !s.ok()) return s;
  }
  if (level == BrokerLevel::kClusterDefault && !problems.per_broker.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "Cannot update these configs at default cluster level, broker id must be specified: {}",
        scala_set(problems.per_broker)));
  }
  return absl::OkStatus();
}

absl::Status validate_broker_entry(std::string_view name, std::optional<std::string_view> value) {
  if (!value) return absl::OkStatus();
  const metadata::ConfigMap configs{{std::string(name), std::string(*value)}};
  return validate_broker_configs(BrokerLevel::kBroker, configs);
}

// A topic's parsed configs: its own values over the effective broker values.
class TopicValues {
 public:
  static absl::StatusOr<TopicValues> parse(const metadata::ConfigMap& configs,
                                           const Layers& layers) {
    TopicValues values;
    for (const ConfigDef& def : kTopicConfigs) {
      absl::StatusOr<Value> value;
      if (auto it = configs.find(def.name); it != configs.end()) {
        value = parse_and_check(def, it->second);
        if (!value.ok()) return value.status();
      } else {
        std::optional<std::string> fallback = effective_topic_default(def, layers);
        value = parse_value(def, fallback.value_or(""));
        if (!value.ok()) value = parse_value(def, def.default_value.value_or(""));
        if (!value.ok()) return value.status();
      }
      values.values_.emplace(def.name, *std::move(value));
    }
    return values;
  }

  int64_t integer(std::string_view name) const { return at(name).integer; }
  bool boolean(std::string_view name) const { return at(name).boolean; }
  const std::vector<std::string>& list(std::string_view name) const { return at(name).list; }

 private:
  const Value& at(std::string_view name) const {
    auto it = values_.find(name);
    return it->second;  // every topic config is present
  }

  std::map<std::string_view, Value> values_;
};

// LogConfig's tiered-storage rule for one retention pair: with the total
// limited, the local limit (unless -2, "same as the total") must be set and
// no larger.
absl::Status check_local_retention(const TopicValues& values, std::string_view total_name,
                                   std::string_view local_name, bool total_limited) {
  const int64_t total = values.integer(total_name);
  const int64_t local = values.integer(local_name);
  if (!total_limited || local == -2) return absl::OkStatus();
  if (local == -1) {
    return invalid(
        local_name, "-1",
        fmt::format("Value must not be -1 as {} value is set as {}.", total_name, total));
  }
  if (local > total) {
    return invalid(
        local_name, fmt::format("{}", local),
        fmt::format("Value must not be more than {} property value: {}", total_name, total));
  }
  return absl::OkStatus();
}

absl::Status check_remote_copy_disabled(const TopicValues& values) {
  if (!values.boolean("remote.log.copy.disable")) return absl::OkStatus();
  for (std::string_view unit : {"bytes", "ms"}) {
    const int64_t local = values.integer(fmt::format("local.retention.{}", unit));
    const int64_t total = values.integer(fmt::format("retention.{}", unit));
    if (local != -2 && local != total) {
      return absl::InvalidArgumentError(fmt::format(
          "When `remote.log.copy.disable` is set to true, the `local.retention.{0}` and "
          "`retention.{0}` must be set to the identical value because there will be no more logs "
          "copied to the remote storage.",
          unit));
    }
  }
  return absl::OkStatus();
}

absl::Status check_remote_storage(const TopicValues& values, const Layers& layers,
                                  const metadata::ConfigMap* previous) {
  if (!values.boolean("remote.storage.enable")) {
    bool was_enabled = false;
    if (previous != nullptr) {
      auto it = previous->find("remote.storage.enable");
      was_enabled = it != previous->end() && equals_ignore_case(it->second, "true");
    }
    if (was_enabled && !values.boolean("remote.log.delete.on.disable")) {
      return absl::InvalidArgumentError(
          "It is invalid to disable remote storage without deleting remote data. If you want to "
          "keep the remote data and turn to read only, please set "
          "`remote.storage.enable=true,remote.log.copy.disable=true`. If you want to disable "
          "remote storage and delete all remote data, please set "
          "`remote.storage.enable=false,remote.log.delete.on.disable=true`.");
    }
    return absl::OkStatus();
  }
  std::optional<std::string_view> system =
      layers.find(ConfigSource::kStaticBrokerConfig, "remote.log.storage.system.enable");
  if (!system || !equals_ignore_case(java_trim(*system), "true")) {
    return absl::InvalidArgumentError(
        "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with "
        "remote log storage.");
  }
  for (const std::string& policy : values.list("cleanup.policy")) {
    std::string lower = policy;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; });
    if (lower.find("compact") != std::string::npos) {
      return absl::InvalidArgumentError(
          "Remote log storage is unsupported for the compacted topics");
    }
  }
  // As in Kafka, retention.bytes counts as limited above -1, retention.ms
  // whenever it is not -1.
  const bool bytes_limited = values.integer("retention.bytes") > -1;
  if (absl::Status s =
          check_local_retention(values, "retention.bytes", "local.retention.bytes", bytes_limited);
      !s.ok()) {
    return s;
  }
  const bool time_limited = values.integer("retention.ms") != -1;
  if (absl::Status s =
          check_local_retention(values, "retention.ms", "local.retention.ms", time_limited);
      !s.ok()) {
    return s;
  }
  return check_remote_copy_disabled(values);
}

absl::Status validate_topic_configs(const metadata::ConfigMap& configs, const Layers& layers,
                                    const metadata::ConfigMap* previous) {
  for (const auto& [name, value] : configs) {
    if (find_topic_config(name) == nullptr) {
      return absl::InvalidArgumentError(fmt::format("Unknown topic config name: {}", name));
    }
  }
  absl::StatusOr<TopicValues> values = TopicValues::parse(configs, layers);
  if (!values.ok()) return values.status();
  const int64_t min_lag = values->integer("min.compaction.lag.ms");
  const int64_t max_lag = values->integer("max.compaction.lag.ms");
  if (min_lag > max_lag) {
    return absl::InvalidArgumentError(fmt::format(
        "conflict topic config setting min.compaction.lag.ms ({}) > max.compaction.lag.ms ({})",
        min_lag, max_lag));
  }
  return check_remote_storage(*values, layers, previous);
}

}  // namespace

// ---------------------------------------------------------------------------
// Public API.

std::string_view type_name(ConfigType type) {
  switch (type) {
    case ConfigType::kUnknown:
      return "UNKNOWN";
    case ConfigType::kBoolean:
      return "BOOLEAN";
    case ConfigType::kString:
      return "STRING";
    case ConfigType::kInt:
      return "INT";
    case ConfigType::kShort:
      return "SHORT";
    case ConfigType::kLong:
      return "LONG";
    case ConfigType::kDouble:
      return "DOUBLE";
    case ConfigType::kList:
      return "LIST";
    case ConfigType::kClass:
      return "CLASS";
    case ConfigType::kPassword:
      return "PASSWORD";
  }
  return "UNKNOWN";
}

std::span<const ConfigDef> topic_configs() { return kTopicConfigs; }
std::span<const ConfigDef> broker_configs() { return kBrokerConfigs; }

const ConfigDef* find_topic_config(std::string_view name) {
  for (const ConfigDef& def : kTopicConfigs) {
    if (def.name == name) return &def;
  }
  return nullptr;
}

const ConfigDef* find_broker_config(std::string_view name) {
  for (const ConfigDef& def : kBrokerConfigs) {
    if (def.name == name) return &def;
  }
  return nullptr;
}

ConfigType broker_config_type(std::string_view name) {
  if (const ConfigDef* def = find_broker_config(name)) return def->type;
  for (const std::string& synonym : broker_synonym_names(name)) {
    if (const ConfigDef* def = find_kafka_config(synonym)) return def->type;
  }
  return ConfigType::kUnknown;
}

std::optional<std::string> topic_default_value(const ConfigDef& def, const BrokerLayers& broker) {
  return effective_topic_default(def, Layers(broker));
}

absl::Status validate(int8_t resource_type, std::string_view name,
                      std::optional<std::string_view> value) {
  switch (resource_type) {
    case metadata::kConfigResourceTopic:
      return validate_topic_entry(name, value);
    case metadata::kConfigResourceBroker:
      return validate_broker_entry(name, value);
    default:
      return unsupported(resource_type);
  }
}

absl::Status validate_configs(const metadata::ConfigResource& resource,
                              const metadata::ConfigMap& configs, const BrokerLayers& broker,
                              const metadata::ConfigMap* previous) {
  switch (resource.type) {
    case metadata::kConfigResourceTopic:
      return validate_topic_configs(configs, Layers(broker), previous);
    case metadata::kConfigResourceBroker:
      return validate_broker_configs(
          resource.name.empty() ? BrokerLevel::kClusterDefault : BrokerLevel::kBroker, configs);
    default:
      return unsupported(resource.type);
  }
}

net::Error error_code(int8_t resource_type, const absl::Status& status) {
  if (status.ok()) return net::Error::kNone;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return resource_type == metadata::kConfigResourceTopic ||
                     resource_type == metadata::kConfigResourceClientMetrics
                 ? net::Error::kInvalidConfig
                 : net::Error::kInvalidRequest;
    case absl::StatusCode::kUnimplemented:
      return net::Error::kInvalidRequest;
    default:
      return net::Error::kUnknownServerError;
  }
}

absl::StatusOr<std::vector<DescribedConfig>> describe(const metadata::ConfigResource& resource,
                                                      const metadata::ConfigMap* resource_configs,
                                                      const BrokerLayers& broker,
                                                      const DescribeOptions& options) {
  switch (resource.type) {
    case metadata::kConfigResourceTopic:
      return describe_topic(resource_configs, Layers(broker), options);
    case metadata::kConfigResourceBroker:
      return describe_broker(resource, resource_configs, broker, options);
    case metadata::kConfigResourceClientMetrics:
      return describe_client_metrics(resource_configs, options);
    default:
      return unsupported(resource.type);
  }
}

net::DescribeConfigsResponse describe_configs(const metadata::MetadataImage& image, int32_t node_id,
                                              const net::DescribeConfigsRequest& request, int16_t version,
                                              const StaticConfig* static_config) {
  net::DescribeConfigsResponse response;
  BrokerLayers layers;
  layers.static_config = static_config;
  layers.dynamic_default = image.configs().find(metadata::ConfigResource{metadata::kConfigResourceBroker, ""});
  const std::string own = std::to_string(node_id);
  layers.dynamic_broker = image.configs().find(metadata::ConfigResource{metadata::kConfigResourceBroker, own});
  for (const auto& resource : request.resources) {
    auto& out = response.results.emplace_back();
    out.resource_type = resource.resource_type;
    out.resource_name = resource.resource_name;
    out.error_message = std::nullopt;
    const metadata::ConfigResource r{resource.resource_type, resource.resource_name};
    if (r.type == metadata::kConfigResourceTopic && image.topics().topic(r.name) == nullptr) {
      out.error_code = net::code(net::Error::kUnknownTopicOrPartition);
      out.error_message = fmt::format("Topic {} does not exist", r.name);
      continue;
    }
    if (r.type == metadata::kConfigResourceBroker && !r.name.empty() && r.name != own) {
      out.error_code = net::code(net::Error::kInvalidRequest);
      out.error_message = fmt::format("Unexpected broker id, expected {} but received {}", own, r.name);
      continue;
    }
    DescribeOptions options;
    if (resource.configuration_keys.has_value() && !resource.configuration_keys->empty()) {
      options.names = *resource.configuration_keys;
    }
    options.include_synonyms = version >= 1 && request.include_synonyms;
    options.include_documentation = version >= 3 && request.include_documentation;
    absl::StatusOr<std::vector<DescribedConfig>> described = describe(r, image.configs().find(r), layers, options);
    if (!described.ok()) {
      out.error_code = net::code(error_code(r.type, described.status()));
      out.error_message = std::string(described.status().message());
      continue;
    }
    for (const DescribedConfig& c : *described) {
      auto& entry = out.configs.emplace_back();
      entry.name = c.name;
      entry.value = c.value;
      entry.read_only = c.read_only;
      if (version == 0) entry.is_default = c.is_default();
      entry.config_source = static_cast<int8_t>(c.source);
      entry.is_sensitive = c.is_sensitive;
      entry.config_type = static_cast<int8_t>(c.type);
      entry.documentation = c.documentation;
      for (const DescribedSynonym& s : c.synonyms) {
        auto& syn = entry.synonyms.emplace_back();
        syn.name = s.name;
        syn.value = s.value;
        syn.source = static_cast<int8_t>(s.source);
      }
    }
  }
  return response;
}

}  // namespace brook::configs
