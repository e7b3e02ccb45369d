// net/client/cluster.h
//
// The client side of a Kafka cluster, shared by the producer, consumer and
// admin client: bootstrap addresses, a connection pool per broker (a
// net::Peer each) and the topic metadata learnt from Metadata answers.
//
// Like every client here it runs on an io::Context: the same code drives a
// real cluster from the `brook` tools and a simulated one in the simulator.
//
// Requests go out at fixed versions that Brook and Kafka 3.x brokers serve
// (Metadata v10, Produce v9, Fetch v12, ListOffsets v7, ...): the client does
// not negotiate versions with ApiVersions, so brokers older than Kafka 2.8
// are not supported.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/context.h"
#include "io/network.h"
#include "io/task.h"
#include "io/time.h"
#include "net/kafka/messages/metadata_response.h"
#include "net/kafka/rpc.h"
#include "net/kafka/sasl.h"
#include "net/kafka/wire.h"
#include "net/tls/tls.h"

namespace brook::client {

struct TopicPartition {
  std::string topic;
  int32_t partition = 0;
  TopicPartition() = default;
  TopicPartition(std::string t, int32_t p) : topic(std::move(t)), partition(p) {}
  friend auto operator<=>(const TopicPartition&, const TopicPartition&) = default;
};

struct PartitionInfo {
  int32_t partition = 0;
  int16_t error_code = 0;
  int32_t leader = -1;
  int32_t leader_epoch = -1;
  std::vector<int32_t> replicas;
  std::vector<int32_t> isr;
  std::vector<int32_t> offline;
};

struct TopicInfo {
  std::string name;
  net::Uuid id;
  int16_t error_code = 0;
  bool internal = false;
  std::vector<PartitionInfo> partitions;  // by partition index
};

struct BrokerInfo {
  int32_t id = -1;
  io::Address address;
  std::optional<std::string> rack;
};

struct ClientOptions {
  // bootstrap.servers
  std::vector<io::Address> bootstrap;
  // client.id
  std::string client_id = "brook-client";
  // request.timeout.ms: one request's answer, connecting included.
  io::Duration request_timeout = std::chrono::seconds(30);
  // retry.backoff.ms
  io::Duration retry_backoff = std::chrono::milliseconds(100);
  // allow.auto.create.topics: Metadata asks the broker to create the topics
  // it names when they do not exist (and auto.create.topics.enable allows).
  bool allow_auto_create_topics = true;
  // The largest answer read from a broker.
  int32_t max_response_bytes = 100 << 20;
  // security.protocol=SASL_PLAINTEXT or SASL_SSL: every connection
  // authenticates as these credentials (and with their mechanism) first.
  std::optional<net::SaslCredentials> sasl;
  // security.protocol=SSL or SASL_SSL: every connection runs a TLS
  // handshake first, with this context (net/tls/tls.h), checking each
  // broker's certificate against the host name it is reached at.
  std::shared_ptr<const net::tls::Context> tls;
  // What the tools make `tls` from (security.protocol and the ssl.*
  // client properties, tools/client_tool.h), and sasl.mechanism, which
  // they set as `sasl`'s mechanism.
  bool use_tls = false;
  net::tls::Settings tls_settings;
  std::string sasl_mechanism = std::string(net::kSaslPlain);
};

class Cluster {
 public:
  Cluster(io::Context& ctx, ClientOptions options);
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  io::Context& context() const { return *ctx_; }
  const ClientOptions& options() const { return options_; }

  // Asks a broker for the metadata of `topics` (every topic when nullopt),
  // trying each known broker and bootstrap address once, and caches what
  // it learns: brokers, and the topics answered (topics named but missing
  // from the answer or answered with an error are cached with that error).
  // `not_from`: a broker whose metadata is suspected stale, asked by none
  // but the last attempt when another broker is known.
  io::Task<absl::StatusOr<net::MetadataResponse>> fetch_metadata(
      std::optional<std::vector<std::string>> topics, bool allow_auto_create,
      std::optional<int32_t> not_from = std::nullopt);
  // fetch_metadata(topics, options().allow_auto_create_topics, not_from),
  // result dropped: the cache is what callers read.
  io::Task<absl::Status> refresh(std::vector<std::string> topics, std::optional<int32_t> not_from = std::nullopt);

  // The cached topic, or nullptr.
  const TopicInfo* topic(std::string_view name) const;
  // The cached leader of a partition, or -1.
  int32_t leader(const TopicPartition& tp) const;
  int32_t leader_epoch(const TopicPartition& tp) const;
  const std::map<int32_t, BrokerInfo>& brokers() const { return brokers_; }
  std::optional<std::string> cluster_id() const { return cluster_id_; }
  int32_t controller_id() const { return controller_id_; }

  // The connection pool of broker `id` (nullptr when the broker is not
  // known from metadata).
  net::Peer* broker(int32_t id);
  // Some broker to ask: the known brokers and the bootstrap addresses in
  // turn, passing over those whose last call failed while another one's
  // did not (the one that failed least recently when all did); not broker
  // `avoid` while there is another.
  net::Peer& any(std::optional<int32_t> avoid = std::nullopt);
  // Drops a broker's idle connections (after a failure on one).
  void reset(int32_t id);

 private:
  net::Peer& peer_for(const io::Address& address);
  void cache(const net::MetadataResponse& response, const std::optional<std::vector<std::string>>& asked);

  io::Context* ctx_;
  ClientOptions options_;
  std::map<io::Address, std::unique_ptr<net::Peer>> peers_;
  std::map<int32_t, BrokerInfo> brokers_;
  std::map<std::string, TopicInfo, std::less<>> topics_;
  std::optional<std::string> cluster_id_;
  int32_t controller_id_ = -1;
  size_t next_any_ = 0;
};

// How errors read in messages: "NOT_LEADER_OR_FOLLOWER (6)".
std::string error_text(int16_t code);
// A Kafka error code as a status (OK for 0): Unavailable for retriable
// codes, FailedPrecondition for the rest; the message names the code.
absl::Status error_status(int16_t code, std::string_view context = {});
// Whether `code` means the cached leader is stale.
bool is_stale_metadata(int16_t code);

}  // namespace brook::client
