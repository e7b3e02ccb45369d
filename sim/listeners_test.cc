// sim/listeners_test.cc
//
// Brokers with two client listeners (PLAINTEXT, the inter-broker one, and
// EXTERNAL): a client is told of every broker's address on the listener
// its request came in on (Metadata, FindCoordinator, DescribeCluster), and
// a producer that bootstraps from the second listener writes with
// acks=all through it while the replicas fetch from each other on the
// first. An EXTERNAL listener with SASL PLAIN answers only ApiVersions and
// the SASL exchange until a client authenticates; brokers replicate over
// SASL and over SASL_SSL listeners.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "net/client/admin.h"
#include "net/client/cluster.h"
#include "net/client/producer.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/api_versions_request.h"
#include "net/kafka/messages/api_versions_response.h"
#include "net/kafka/messages/create_topics_request.h"
#include "net/kafka/messages/create_topics_response.h"
#include "net/kafka/messages/describe_cluster_request.h"
#include "net/kafka/messages/describe_cluster_response.h"
#include "net/kafka/messages/find_coordinator_request.h"
#include "net/kafka/messages/find_coordinator_response.h"
#include "net/kafka/messages/metadata_request.h"
#include "net/kafka/messages/metadata_response.h"
#include "net/kafka/messages/sasl_authenticate_request.h"
#include "net/kafka/messages/sasl_authenticate_response.h"
#include "net/kafka/messages/sasl_handshake_request.h"
#include "net/kafka/messages/sasl_handshake_response.h"
#include "net/kafka/frame.h"
#include "net/kafka/rpc.h"
#include "net/kafka/sasl.h"
#include "net/tls/test_certificates.h"
#include "net/tls/tls.h"
#include "sim/broker.h"
#include "sim/test_cluster.h"
#include "sim/world.h"

namespace brook::sim {
namespace {

using namespace std::chrono_literals;

constexpr uint16_t kExternalPort = 9094;
constexpr io::Duration kCallTimeout = 10s;

// The (node id, "host:port") pairs an answer lists.
using Listed = std::vector<std::pair<int32_t, std::string>>;

struct Seen {
  Listed metadata_plain;
  Listed metadata_external;
  Listed cluster_external;
  std::optional<std::pair<int32_t, std::string>> coordinator_plain;
  std::optional<std::pair<int32_t, std::string>> coordinator_external;
  int acknowledged = 0;
  int failed = 0;
  bool done = false;
};

// The brokers a Metadata answer lists.
Listed listed_brokers(const net::MetadataResponse& r) {
  Listed out;
  for (const auto& b : r.brokers) out.emplace_back(b.node_id, fmt::format("{}:{}", b.host, b.port));
  return out;
}

io::Task<Listed> metadata_brokers(net::Peer* peer) {
  net::MetadataRequest request;
  request.topics = std::nullopt;
  absl::StatusOr<net::MetadataResponse> r = co_await peer->call<net::MetadataResponse>(request, 12, kCallTimeout);
  co_return r.ok() ? listed_brokers(*r) : Listed();
}

io::Task<Listed> cluster_brokers(net::Peer* peer) {
  const net::DescribeClusterRequest request;
  absl::StatusOr<net::DescribeClusterResponse> r =
      co_await peer->call<net::DescribeClusterResponse>(request, 1, kCallTimeout);
  Listed out;
  if (!r.ok() || r->error_code != 0) co_return out;
  for (const auto& b : r->brokers) out.emplace_back(b.broker_id, fmt::format("{}:{}", b.host, b.port));
  co_return out;
}

// The group's coordinator as FindCoordinator v4 on `peer` names it;
// retried while the offsets topic is being made.
io::Task<std::optional<std::pair<int32_t, std::string>>> coordinator(io::Context* ctx, net::Peer* peer) {
  net::FindCoordinatorRequest request;
  request.key_type = 0;
  request.coordinator_keys = {"a-group"};
  for (int attempt = 0; attempt < 100; ++attempt) {
    absl::StatusOr<net::FindCoordinatorResponse> r =
        co_await peer->call<net::FindCoordinatorResponse>(request, 4, kCallTimeout);
    if (r.ok() && r->coordinators.size() == 1 && r->coordinators[0].error_code == 0) {
      const auto& c = r->coordinators[0];
      co_return std::make_pair(c.node_id, fmt::format("{}:{}", c.host, c.port));
    }
    co_await ctx->clock().sleep_for(200ms);
  }
  co_return std::nullopt;
}

io::Task<void> clients(io::Context* ctx, io::Address plain, io::Address external, Seen* seen) {
  co_await ctx->clock().sleep_for(3s);  // the nodes register
  net::Peer p(ctx->network(), ctx->clock(), plain, "plain-client");
  net::Peer e(ctx->network(), ctx->clock(), external, "external-client");
  seen->metadata_plain = co_await metadata_brokers(&p);
  seen->metadata_external = co_await metadata_brokers(&e);
  seen->cluster_external = co_await cluster_brokers(&e);
  seen->coordinator_external = co_await coordinator(ctx, &e);
  seen->coordinator_plain = co_await coordinator(ctx, &p);

  client::ProducerConfig config;
  config.client = sim_client_options({external}, "external-producer");
  config.client.allow_auto_create_topics = true;
  client::Producer producer(*ctx, config);
  for (int i = 0; i < 20; ++i) {
    client::ProducerRecord record;
    record.topic = "through-external";
    record.value = io::Buffer::copy_of(std::to_string(i));
    absl::StatusOr<client::RecordMetadata> m = co_await producer.produce(std::move(record));
    if (m.ok()) {
      ++seen->acknowledged;
    } else {
      ++seen->failed;
    }
  }
  seen->done = true;
}

TEST(Listeners, EachClientIsToldOfTheListenerItCameInOn) {
  TestCluster cluster(7, 3, [](ServerNodeOptions& o) {
    for (const io::Address& plain : o.brokers) o.external.emplace_back(plain.host, kExternalPort);
    o.min_insync = 2;
    o.offsets_replication_factor = 3;
  });
  std::vector<io::Address> external;
  for (const io::Address& plain : cluster.brokers) external.emplace_back(plain.host, kExternalPort);
  Seen seen;
  cluster.client->start([&](io::Context& ctx) { return clients(&ctx, cluster.broker(1), external[0], &seen); });
  ASSERT_TRUE(cluster.world.run_until([&] { return seen.done; }, 120s));

  Listed plain_expected;
  Listed external_expected;
  for (int32_t id = 1; id <= 3; ++id) {
    plain_expected.emplace_back(id, cluster.broker(id).to_string());
    external_expected.emplace_back(id, external[static_cast<size_t>(id - 1)].to_string());
  }
  EXPECT_EQ(seen.metadata_plain, plain_expected);
  EXPECT_EQ(seen.metadata_external, external_expected);
  EXPECT_EQ(seen.cluster_external, external_expected);
  ASSERT_TRUE(seen.coordinator_plain.has_value());
  ASSERT_TRUE(seen.coordinator_external.has_value());
  EXPECT_EQ(seen.coordinator_plain->first, seen.coordinator_external->first);
  EXPECT_EQ(seen.coordinator_plain->second, cluster.broker(seen.coordinator_plain->first).to_string());
  EXPECT_EQ(seen.coordinator_external->second,
            external[static_cast<size_t>(seen.coordinator_external->first - 1)].to_string());
  // acks=all with min.insync.replicas=2 over 3 replicas: the followers
  // fetched (on the inter-broker listener).
  EXPECT_EQ(seen.acknowledged, 20);
  EXPECT_EQ(seen.failed, 0);
}

// Partitions as one Metadata answer lists them: (index, leader, error).
using Partitions = std::vector<std::tuple<int32_t, int32_t, int16_t>>;

struct UnreachableSeen {
  Listed external_brokers;
  Partitions plain;        // v12 on the PLAINTEXT listener
  Partitions external;     // v12 on EXTERNAL
  Partitions external_v5;  // v5 on EXTERNAL
  bool done = false;
};

io::Task<Partitions> partitions_of(net::Peer* peer, std::string_view topic, int16_t version, Listed* brokers = nullptr) {
  net::MetadataRequest request;
  net::MetadataRequest::MetadataRequestTopic t;
  t.name = std::string(topic);
  request.topics.emplace().push_back(std::move(t));
  request.allow_auto_topic_creation = false;
  absl::StatusOr<net::MetadataResponse> r = co_await peer->call<net::MetadataResponse>(request, version, kCallTimeout);
  Partitions out;
  if (!r.ok() || r->topics.size() != 1) co_return out;
  for (const auto& p : r->topics[0].partitions) out.emplace_back(p.partition_index, p.leader_id, p.error_code);
  std::sort(out.begin(), out.end());
  if (brokers != nullptr) *brokers = listed_brokers(*r);
  co_return out;
}

// A topic of 6 single-replica partitions, then Metadata for it on both
// listeners, once every partition has a leader.
io::Task<void> unreachable_leaders(io::Context* ctx, io::Address plain, io::Address external, UnreachableSeen* seen) {
  co_await ctx->clock().sleep_for(3s);  // the nodes register
  net::Peer p(ctx->network(), ctx->clock(), plain, "plain-client");
  net::Peer e(ctx->network(), ctx->clock(), external, "external-client");
  net::CreateTopicsRequest create;
  net::CreateTopicsRequest::CreatableTopic topic;
  topic.name = "spread";
  topic.num_partitions = 6;
  topic.replication_factor = 1;
  create.topics.push_back(std::move(topic));
  create.timeout_ms = 10000;
  (void)co_await p.call<net::CreateTopicsResponse>(create, 7, kCallTimeout);
  for (int attempt = 0; attempt < 100; ++attempt) {
    seen->plain = co_await partitions_of(&p, "spread", 12);
    if (seen->plain.size() == 6 &&
        std::all_of(seen->plain.begin(), seen->plain.end(), [](const auto& x) { return std::get<2>(x) == 0; })) {
      break;
    }
    co_await ctx->clock().sleep_for(200ms);
  }
  co_await ctx->clock().sleep_for(1s);  // every broker's image has the topic
  seen->external = co_await partitions_of(&e, "spread", 12, &seen->external_brokers);
  seen->external_v5 = co_await partitions_of(&e, "spread", 5);
  seen->done = true;
}

// A broker with no EXTERNAL listener: a client on EXTERNAL is not told of
// it, and the partitions it leads come with LISTENER_NOT_FOUND (Metadata
// v6 and later; LEADER_NOT_AVAILABLE before) and no leader, as Kafka
// answers, instead of a leader id the client has no address for.
TEST(Listeners, ALeaderWithoutTheClientsListenerIsListenerNotFound) {
  TestCluster cluster(11, 3, [](ServerNodeOptions& o) {
    for (const io::Address& plain : o.brokers) o.external.emplace_back(plain.host, kExternalPort);
    o.external.back().port = 0;  // node 3: none
  });
  const io::Address external(cluster.broker(1).host, kExternalPort);
  UnreachableSeen seen;
  cluster.client->start(
      [&](io::Context& ctx) { return unreachable_leaders(&ctx, cluster.broker(1), external, &seen); });
  ASSERT_TRUE(cluster.world.run_until([&] { return seen.done; }, 120s));

  ASSERT_EQ(seen.plain.size(), 6u);
  EXPECT_EQ(seen.external_brokers, (Listed{{1, external.to_string()},
                                           {2, io::Address(cluster.broker(2).host, kExternalPort).to_string()}}));
  ASSERT_EQ(seen.external.size(), 6u);
  ASSERT_EQ(seen.external_v5.size(), 6u);
  int on_node3 = 0;
  for (size_t i = 0; i < 6; ++i) {
    const auto [index, leader, error] = seen.plain[i];
    EXPECT_EQ(error, 0);
    if (leader == 3) {
      ++on_node3;
      EXPECT_EQ(seen.external[i], std::make_tuple(index, -1, net::code(net::Error::kListenerNotFound)));
      EXPECT_EQ(seen.external_v5[i], std::make_tuple(index, -1, net::code(net::Error::kLeaderNotAvailable)));
    } else {
      EXPECT_EQ(seen.external[i], seen.plain[i]);
      EXPECT_EQ(seen.external_v5[i], seen.plain[i]);
    }
  }
  EXPECT_GT(on_node3, 0);  // the placement put some leaders there
}

// One connection driven by hand: requests written, frames read back.
class Wire {
 public:
  explicit Wire(std::unique_ptr<io::Connection> conn) : conn_(std::move(conn)) {}
  // Writes `bytes`, then reads one frame; nullopt when the server closed
  // the connection instead of answering.
  io::Task<std::optional<io::Buffer>> exchange(io::BufferChain bytes) {
    if (!(co_await conn_->write_all(std::move(bytes))).ok()) co_return std::nullopt;
    while (true) {
      absl::StatusOr<std::optional<io::Buffer>> frame = reader_.next();
      if (!frame.ok()) co_return std::nullopt;
      if (frame->has_value()) co_return std::move(**frame);
      absl::StatusOr<io::Buffer> got = co_await conn_->read_some(64 << 10);
      if (!got.ok() || got->empty()) co_return std::nullopt;
      reader_.feed(std::move(*got));
    }
  }

 private:
  std::unique_ptr<io::Connection> conn_;
  net::FrameReader reader_;
};

template <typename Response, typename Request>
io::Task<std::optional<Response>> call_on(Wire* wire, Request request, int16_t version) {
  absl::StatusOr<io::BufferChain> encoded = net::encode_request(request, version, 1, std::optional<std::string>("w"));
  if (!encoded.ok()) co_return std::nullopt;
  std::optional<io::Buffer> frame = co_await wire->exchange(std::move(*encoded));
  if (!frame.has_value()) co_return std::nullopt;
  absl::StatusOr<Response> r = net::decode_response<Response>(*frame, version);
  if (!r.ok()) co_return std::nullopt;
  co_return *std::move(r);
}

struct SaslSeen {
  std::optional<net::ApiVersionsResponse> versions;
  std::optional<net::SaslHandshakeResponse> handshake;
  std::optional<net::SaslAuthenticateResponse> authenticated;
  std::optional<net::MetadataResponse> metadata;
  bool unauthenticated_metadata_answered = true;
  std::optional<net::SaslAuthenticateResponse> wrong_password;
  bool after_wrong_password_answered = true;
  std::optional<net::SaslHandshakeResponse> handshake_on_plaintext;
  bool done = false;
};

// A SASL listener with PLAIN only, its users those of `jaas`.
net::SaslServerConfig plain_listener(std::string_view jaas) {
  net::SaslServerConfig config;
  config.mechanisms = {"PLAIN"};
  config.plain = *net::parse_plain_jaas(jaas);
  return config;
}

net::SaslAuthenticateRequest plain_token(std::string_view user, std::string_view password) {
  net::SaslAuthenticateRequest r;
  r.auth_bytes = io::Buffer::copy_of(fmt::format("{}{}{}{}", '\0', user, '\0', password));
  return r;
}

io::Task<std::unique_ptr<Wire>> connect_wire(io::Context* ctx, io::Address address) {
  absl::StatusOr<std::unique_ptr<io::Connection>> conn = co_await ctx->network().connect(std::move(address));
  if (!conn.ok()) co_return nullptr;
  co_return std::make_unique<Wire>(std::move(*conn));
}

io::Task<void> sasl_clients(io::Context* ctx, io::Address plain, io::Address external, SaslSeen* seen) {
  co_await ctx->clock().sleep_for(3s);
  net::SaslHandshakeRequest handshake;
  handshake.mechanism = "PLAIN";
  net::MetadataRequest metadata;
  metadata.topics = std::nullopt;
  {
    std::unique_ptr<Wire> w = co_await connect_wire(ctx, external);
    if (w != nullptr) {
      net::ApiVersionsRequest versions;
      versions.client_software_name = "brook-sim";
      versions.client_software_version = "1";
      seen->versions = co_await call_on<net::ApiVersionsResponse>(w.get(), versions, 3);
      seen->handshake = co_await call_on<net::SaslHandshakeResponse>(w.get(), handshake, 1);
      seen->authenticated =
          co_await call_on<net::SaslAuthenticateResponse>(w.get(), plain_token("alice", "alice-secret"), 2);
      seen->metadata = co_await call_on<net::MetadataResponse>(w.get(), metadata, 12);
    }
  }
  {
    std::unique_ptr<Wire> w = co_await connect_wire(ctx, external);
    if (w != nullptr) {
      seen->unauthenticated_metadata_answered =
          (co_await call_on<net::MetadataResponse>(w.get(), metadata, 12)).has_value();
    }
  }
  {
    std::unique_ptr<Wire> w = co_await connect_wire(ctx, external);
    if (w != nullptr) {
      (void)co_await call_on<net::SaslHandshakeResponse>(w.get(), handshake, 1);
      seen->wrong_password =
          co_await call_on<net::SaslAuthenticateResponse>(w.get(), plain_token("alice", "guess"), 1);
      seen->after_wrong_password_answered =
          (co_await call_on<net::MetadataResponse>(w.get(), metadata, 12)).has_value();
    }
  }
  {
    std::unique_ptr<Wire> w = co_await connect_wire(ctx, plain);
    if (w != nullptr) seen->handshake_on_plaintext = co_await call_on<net::SaslHandshakeResponse>(w.get(), handshake, 1);
  }
  seen->done = true;
}

TEST(Listeners, ASaslListenerServesOnlyAuthenticatedClients) {
  static const net::SaslServerConfig users = plain_listener(
      R"(org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";)");
  TestCluster cluster(11, 1, [](ServerNodeOptions& o) {
    for (const io::Address& plain : o.brokers) o.external.emplace_back(plain.host, kExternalPort);
    o.external_sasl = &users;
  });
  const io::Address external(cluster.broker(1).host, kExternalPort);
  SaslSeen seen;
  cluster.client->start([&](io::Context& ctx) { return sasl_clients(&ctx, cluster.broker(1), external, &seen); });
  ASSERT_TRUE(cluster.world.run_until([&] { return seen.done; }, 120s));

  ASSERT_TRUE(seen.versions.has_value());
  EXPECT_EQ(seen.versions->error_code, 0);
  bool handshake_listed = false;
  for (const auto& k : seen.versions->api_keys) handshake_listed |= k.api_key == 17 && k.max_version >= 1;
  EXPECT_TRUE(handshake_listed);
  ASSERT_TRUE(seen.handshake.has_value());
  EXPECT_EQ(seen.handshake->error_code, 0);
  ASSERT_TRUE(seen.authenticated.has_value());
  EXPECT_EQ(seen.authenticated->error_code, 0);
  ASSERT_TRUE(seen.metadata.has_value());
  ASSERT_EQ(seen.metadata->brokers.size(), 1u);
  EXPECT_EQ(seen.metadata->brokers[0].port, kExternalPort);
  EXPECT_FALSE(seen.unauthenticated_metadata_answered);
  ASSERT_TRUE(seen.wrong_password.has_value());
  EXPECT_EQ(seen.wrong_password->error_code, net::code(net::Error::kSaslAuthenticationFailed));
  EXPECT_FALSE(seen.after_wrong_password_answered);
  ASSERT_TRUE(seen.handshake_on_plaintext.has_value());
  EXPECT_EQ(seen.handshake_on_plaintext->error_code, net::code(net::Error::kIllegalSaslState));
}

struct Produced {
  int acknowledged = 0;
  std::string first_error;
  bool refused_wrong_password = false;
  bool untrusted_refused = false;
  std::string untrusted_error;
  bool done = false;
};

// One record to "over-sasl" from a producer made with `config`.
io::Task<absl::Status> produce_one(io::Context* ctx, const client::ProducerConfig* config) {
  client::Producer producer(*ctx, *config);
  client::ProducerRecord record;
  record.topic = "over-sasl";
  record.value = io::Buffer::copy_of(std::string_view("x"));
  absl::StatusOr<client::RecordMetadata> m = co_await producer.produce(std::move(record));
  co_return m.status();
}

// 20 records to `topic` from a producer made with `config`: counts the
// acknowledged ones and keeps the first error.
io::Task<void> produce_twenty(io::Context* ctx, const client::ProducerConfig* config, std::string_view topic,
                              int* acknowledged, std::string* first_error) {
  client::Producer producer(*ctx, *config);
  for (int i = 0; i < 20; ++i) {
    client::ProducerRecord record;
    record.topic = std::string(topic);
    record.value = io::Buffer::copy_of(std::to_string(i));
    absl::StatusOr<client::RecordMetadata> m = co_await producer.produce(std::move(record));
    if (m.ok()) {
      ++*acknowledged;
    } else if (first_error->empty()) {
      *first_error = m.status().ToString();
    }
  }
}

// 20 records with acks=all as alice, then one with a wrong password;
// over TLS trusting `tls` when set, and then once more with a context that
// does not trust the brokers' certificates (`untrusting`).
io::Task<void> sasl_producer(io::Context* ctx, std::vector<io::Address> brokers, Produced* out,
                             const net::tls::Context* tls = nullptr, const net::tls::Context* untrusting = nullptr) {
  co_await ctx->clock().sleep_for(3s);
  {
    client::ProducerConfig config;
    config.client = sim_client_options(brokers, "sasl-producer");
    config.client.allow_auto_create_topics = true;
    config.client.sasl = net::SaslCredentials{"alice", "alice-secret"};
    if (tls != nullptr) config.client.tls = net::tls::Context::unowned(tls);
    co_await produce_twenty(ctx, &config, "over-sasl", &out->acknowledged, &out->first_error);
  }
  {
    client::ProducerConfig config;
    config.client = sim_client_options(brokers, "guessing-producer");
    config.client.sasl = net::SaslCredentials{"alice", "guess"};
    if (tls != nullptr) config.client.tls = net::tls::Context::unowned(tls);
    absl::Status s = co_await produce_one(ctx, &config);
    out->refused_wrong_password = absl::IsUnauthenticated(s);
  }
  if (untrusting != nullptr) {
    client::ProducerConfig config;
    config.client = sim_client_options(brokers, "untrusting-producer");
    config.client.sasl = net::SaslCredentials{"alice", "alice-secret"};
    config.client.tls = net::tls::Context::unowned(untrusting);
    absl::Status s = co_await produce_one(ctx, &config);
    out->untrusted_refused = absl::IsUnauthenticated(s);
    out->untrusted_error = s.ToString();
  }
  out->done = true;
}

TEST(Listeners, BrokersReplicateOverASaslInterBrokerListener) {
  static const net::SaslServerConfig users = plain_listener(
      R"(org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="b-secret"
         user_broker="b-secret" user_alice="alice-secret";)");
  static const net::SaslCredentials broker_login = *net::parse_plain_jaas_credentials(
      R"(org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="b-secret"
         user_broker="b-secret" user_alice="alice-secret";)");
  TestCluster cluster(13, 3, [](ServerNodeOptions& o) {
    o.sasl = &users;
    o.inter_broker_sasl = &broker_login;
    o.min_insync = 2;
    o.offsets_replication_factor = 3;
  });
  Produced produced;
  cluster.client->start([&](io::Context& ctx) { return sasl_producer(&ctx, cluster.brokers, &produced); });
  ASSERT_TRUE(cluster.world.run_until([&] { return produced.done; }, 300s));
  // acks=all, min.insync.replicas=2: followers fetched over SASL.
  EXPECT_EQ(produced.acknowledged, 20) << produced.first_error;
  EXPECT_TRUE(produced.refused_wrong_password);
}

// SASL_SSL between brokers and for clients: the followers fetch over TLS
// (their certificates checked against the addresses they are reached at)
// and log in; a client that does not trust the brokers' certificate is
// refused at once.
TEST(Listeners, BrokersReplicateOverATlsInterBrokerListener) {
  static const net::SaslServerConfig users = plain_listener(
      R"(org.apache.kafka.common.security.plain.PlainLoginModule required user_broker="b-secret"
         user_alice="alice-secret";)");
  static const net::SaslCredentials broker_login{"broker", "b-secret"};
  // Every store here is PEM text: no file is read.
  auto no_files = [](const std::string& path) -> absl::StatusOr<std::string> {
    return absl::NotFoundError(path);
  };
  net::tls::Settings server;
  server.keystore_certificate_chain = std::string(net::tls::testing::kSimCertificate);
  server.keystore_key = std::string(net::tls::testing::kSimKey);
  static const std::shared_ptr<const net::tls::Context> server_tls = *net::tls::Context::server(server, no_files);
  net::tls::Settings client;
  client.truststore_certificates = std::string(net::tls::testing::kCaCertificate);
  static const std::shared_ptr<const net::tls::Context> client_tls = *net::tls::Context::client(client, no_files);
  net::tls::Settings stranger;
  stranger.truststore_certificates = std::string(net::tls::testing::kOtherCertificate);
  static const std::shared_ptr<const net::tls::Context> stranger_tls = *net::tls::Context::client(stranger, no_files);
  TestCluster cluster(17, 3, [](ServerNodeOptions& o) {
    o.sasl = &users;
    o.inter_broker_sasl = &broker_login;
    o.tls = server_tls.get();
    o.inter_broker_tls = client_tls.get();
    o.min_insync = 2;
    o.offsets_replication_factor = 3;
  });
  Produced produced;
  cluster.client->start([&](io::Context& ctx) {
    return sasl_producer(&ctx, cluster.brokers, &produced, client_tls.get(), stranger_tls.get());
  });
  ASSERT_TRUE(cluster.world.run_until([&] { return produced.done; }, 300s));
  EXPECT_EQ(produced.acknowledged, 20) << produced.first_error;
  EXPECT_TRUE(produced.refused_wrong_password);
  EXPECT_TRUE(produced.untrusted_refused) << produced.untrusted_error;
  EXPECT_NE(produced.untrusted_error.find("certificate verification"), std::string::npos) << produced.untrusted_error;
}

struct ScramSeen {
  absl::StatusOr<std::map<std::string, absl::Status>> first = absl::UnknownError("not run");
  absl::StatusOr<std::map<std::string, absl::Status>> second = absl::UnknownError("not run");
  absl::StatusOr<std::map<std::string, absl::Status>> removed = absl::UnknownError("not run");
  absl::StatusOr<std::map<std::string, absl::StatusOr<std::vector<client::ScramCredentialInfo>>>> described =
      absl::UnknownError("not run");
  absl::StatusOr<std::map<std::string, absl::StatusOr<std::vector<client::ScramCredentialInfo>>>> named =
      absl::UnknownError("not run");
  int acknowledged = 0;
  std::string first_error;
  absl::Status wrong_password;
  absl::Status removed_mechanism;
  absl::Status kept_mechanism;
  bool done = false;
};

client::ProducerConfig scram_producer(const std::vector<io::Address>& brokers, std::string_view mechanism,
                                      std::string password) {
  client::ProducerConfig config;
  config.client = sim_client_options(brokers, "scram-producer");
  config.client.allow_auto_create_topics = true;
  config.client.sasl = net::SaslCredentials{"alice", std::move(password), std::string(mechanism)};
  return config;
}

// An admin (PLAIN) makes SCRAM credentials; alice produces with them, a
// wrong password is refused, and a deleted credential stops working.
io::Task<void> scram_clients(io::Context* ctx, std::vector<io::Address> brokers, ScramSeen* out) {
  co_await ctx->clock().sleep_for(3s);
  client::ClientOptions admin_options = sim_client_options(brokers, "admin");
  admin_options.sasl = net::SaslCredentials{"admin", "admin-secret"};
  client::Cluster admin(*ctx, admin_options);
  using M = net::ScramMechanism;
  std::vector<client::ScramAlteration> first = {
      {"alice", M::kSha256, false, "alice-256", 4096},
      {"bob", M::kSha512, false, "bob-secret", 8192},
      {"carol", M::kSha256, false, "x", 100},       // too few iterations
      {"dave", M::kSha256, true, "", 0},            // nothing to delete
      {"erin", M::kSha256, false, "e", 4096},       // twice
      {"erin", M::kSha256, false, "e", 8192},
      {"frank", M::kSha256, false, "f", 4096},      // both mechanisms at once
      {"frank", M::kSha512, false, "f", 4096},
  };
  out->first = co_await client::alter_user_scram_credentials(admin, std::move(first));
  std::vector<client::ScramAlteration> second = {{"alice", M::kSha512, false, "alice-512", 4096}};
  out->second = co_await client::alter_user_scram_credentials(admin, std::move(second));
  // Every broker's image holds the credentials once it has replayed them.
  co_await ctx->clock().sleep_for(2s);
  std::vector<std::string> everyone;
  out->described = co_await client::describe_user_scram_credentials(admin, std::move(everyone));
  std::vector<std::string> named = {"alice", "nobody"};
  out->named = co_await client::describe_user_scram_credentials(admin, std::move(named));
  {
    const client::ProducerConfig config = scram_producer(brokers, net::kScramSha512, "alice-512");
    co_await produce_twenty(ctx, &config, "over-scram", &out->acknowledged, &out->first_error);
  }
  {
    const client::ProducerConfig config = scram_producer(brokers, net::kScramSha256, "alice-512");
    out->wrong_password = co_await produce_one(ctx, &config);
  }
  std::vector<client::ScramAlteration> remove = {{"alice", M::kSha512, true, "", 0}};
  out->removed = co_await client::alter_user_scram_credentials(admin, std::move(remove));
  co_await ctx->clock().sleep_for(2s);
  {
    const client::ProducerConfig config = scram_producer(brokers, net::kScramSha512, "alice-512");
    out->removed_mechanism = co_await produce_one(ctx, &config);
  }
  {
    const client::ProducerConfig config = scram_producer(brokers, net::kScramSha256, "alice-256");
    out->kept_mechanism = co_await produce_one(ctx, &config);
  }
  out->done = true;
}

// SASL/SCRAM on a three-broker cluster: credentials made through
// AlterUserScramCredentials (forwarded to the controller) reach every
// broker's image, acks=all records go through SCRAM-authenticated
// connections while the brokers replicate over PLAIN on the same listener.
TEST(Listeners, ScramCredentialsFromTheMetadataLogAuthenticateClients) {
  static const net::SaslServerConfig config = [] {
    net::SaslServerConfig c = plain_listener(
        R"(org.apache.kafka.common.security.plain.PlainLoginModule required user_broker="b-secret"
           user_admin="admin-secret";)");
    c.mechanisms = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"};
    return c;
  }();
  static const net::SaslCredentials broker_login{"broker", "b-secret"};
  TestCluster cluster(19, 3, [](ServerNodeOptions& o) {
    o.sasl = &config;
    o.inter_broker_sasl = &broker_login;
    o.min_insync = 2;
    o.offsets_replication_factor = 3;
  });
  ScramSeen seen;
  cluster.client->start([&](io::Context& ctx) { return scram_clients(&ctx, cluster.brokers, &seen); });
  ASSERT_TRUE(cluster.world.run_until([&] { return seen.done; }, 300s));

  ASSERT_TRUE(seen.first.ok()) << seen.first.status();
  EXPECT_EQ(seen.first->size(), 6u);
  EXPECT_TRUE(seen.first->at("alice").ok()) << seen.first->at("alice");
  EXPECT_TRUE(seen.first->at("bob").ok());
  EXPECT_NE(seen.first->at("carol").message().find("Too few iterations"), std::string_view::npos)
      << seen.first->at("carol");
  EXPECT_NE(seen.first->at("dave").message().find("does not exist"), std::string_view::npos) << seen.first->at("dave");
  EXPECT_NE(seen.first->at("erin").message().find("twice"), std::string_view::npos) << seen.first->at("erin");
  EXPECT_TRUE(seen.first->at("frank").ok()) << seen.first->at("frank");
  ASSERT_TRUE(seen.second.ok()) << seen.second.status();
  EXPECT_TRUE(seen.second->at("alice").ok());

  using Info = client::ScramCredentialInfo;
  using M = net::ScramMechanism;
  ASSERT_TRUE(seen.described.ok()) << seen.described.status();
  ASSERT_EQ(seen.described->size(), 3u);  // alice, bob and frank
  EXPECT_EQ(*seen.described->at("alice"), (std::vector<Info>{{M::kSha256, 4096}, {M::kSha512, 4096}}));
  EXPECT_EQ(*seen.described->at("bob"), (std::vector<Info>{{M::kSha512, 8192}}));
  EXPECT_EQ(*seen.described->at("frank"), (std::vector<Info>{{M::kSha256, 4096}, {M::kSha512, 4096}}));
  ASSERT_TRUE(seen.named.ok()) << seen.named.status();
  EXPECT_TRUE(seen.named->at("alice").ok());
  EXPECT_TRUE(absl::IsNotFound(seen.named->at("nobody").status())) << seen.named->at("nobody").status();

  // acks=all with min.insync.replicas=2: the followers fetched over PLAIN.
  EXPECT_EQ(seen.acknowledged, 20) << seen.first_error;
  EXPECT_TRUE(absl::IsUnauthenticated(seen.wrong_password)) << seen.wrong_password;
  ASSERT_TRUE(seen.removed.ok()) << seen.removed.status();
  EXPECT_TRUE(seen.removed->at("alice").ok());
  EXPECT_TRUE(absl::IsUnauthenticated(seen.removed_mechanism)) << seen.removed_mechanism;
  EXPECT_TRUE(seen.kept_mechanism.ok()) << seen.kept_mechanism;
}

}  // namespace
}  // namespace brook::sim
