// tools/client_tool.h
//
// What the client tools (`brook topics`, `produce`, `consume`, `perf`)
// share: running a client coroutine on a real node, and parsing Kafka's
// client property names into the client library's settings.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/context.h"
#include "io/task.h"
#include "net/client/consumer.h"
#include "net/client/producer.h"

namespace brook::tools {

// Runs `main` on a real node (io_uring or epoll) until it returns; its value
// is the exit code.
int run_client_tool(std::string_view name, std::function<io::Task<int>(io::Context&)> main);

// bootstrap.servers: "host:port[,host:port...]".
absl::Status parse_bootstrap(std::string_view text, client::ClientOptions* out);

// Sets one producer / consumer property by its Kafka name (acks, linger.ms,
// batch.size, compression.type, enable.idempotence, delivery.timeout.ms,
// request.timeout.ms, retry.backoff.ms, max.in.flight.requests.per.connection,
// max.request.size, buffer.memory, client.id, bootstrap.servers; fetch.*,
// max.partition.fetch.bytes, isolation.level, auto.offset.reset, check.crcs,
// max.poll.records; security.protocol, sasl.*, ssl.*). NotFound for an
// unknown name, InvalidArgument for a bad value.
absl::Status set_producer_property(std::string_view key, std::string_view value, client::ProducerConfig* config);
absl::Status set_consumer_property(std::string_view key, std::string_view value, client::ConsumerConfig* config);

// Sets one property every client takes (bootstrap.servers, client.id,
// request.timeout.ms, retry.backoff.ms, allow.auto.create.topics,
// security.protocol, sasl.*, ssl.*); *known is false, and nothing
// changes, for any other name.
absl::Status set_client_property(std::string_view key, std::string_view value, client::ClientOptions* client,
                                 bool* known);

// The key=value lines of a Java properties file (--command-config,
// --producer.config, --consumer.config), '#' and '!' lines skipped.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> read_properties_file(const std::string& path);

// A whole file (key and trust stores, for net::tls::Context).
absl::StatusOr<std::string> read_whole_file(const std::string& path);

// After the properties: makes the TLS context security.protocol=SSL or
// SASL_SSL asks for from the ssl.* properties (ssl.ca.location or
// ssl.truststore.location, ssl.certificate.location and ssl.key.location
// or ssl.keystore.*, ssl.endpoint.identification.algorithm,
// enable.ssl.certificate.verification). InvalidArgument when a file
// cannot be loaded.
absl::Status finish_client_options(client::ClientOptions* client);

// "key=value" split at the first '='.
bool split_property(std::string_view text, std::string* key, std::string* value);

}  // namespace brook::tools
