// tools/server_command.cc
//
// `brook server`: a Kafka node configured with Kafka's property names.
//
//   brook server [--config server.properties] [--override key=value ...]
//                [--data-dir DIR] [--cluster-id ID] [--backend auto|uring|epoll]
//                [--inline-write-bytes N] [--log-level info|debug]
//
// --inline-write-bytes (io_uring only): file writes of at most N bytes are
// made with a plain pwritev on the loop's thread, larger ones through the
// ring (default 1 MiB; 0 sends every write through the ring). See
// io/uring/README.md for the trade-off.
//
// With no arguments it is a single-node cluster: broker and controller in
// one process (process.roles=broker,controller), node id 1, clients on
// localhost:9092 (PLAINTEXT), the controller quorum of this node alone on
// localhost:9093 (CONTROLLER), data in ./data, formatted on first start
// with a new cluster id.
//
// Properties read (the rest are ignored, as unknown properties are by
// Kafka's tools with a warning):
//   process.roles                broker,controller | controller | broker
//   node.id
//   listeners                    NAME://host:port,...   (client listeners and CONTROLLER)
//   advertised.listeners         NAME://host:port,...
//   listener.security.protocol.map  NAME:PROTOCOL,...   (PLAINTEXT; SSL, SASL_PLAINTEXT and
//                                                        SASL_SSL for clients)
//   ssl.keystore.location / .password, ssl.key.password, ssl.keystore.certificate.chain,
//   ssl.keystore.key, ssl.truststore.location / .password / .certificates, ssl.client.auth,
//   ssl.enabled.protocols, ssl.cipher.suites, ssl.endpoint.identification.algorithm
//                                (each also as listener.name.NAME.ssl.*; PKCS12 or PEM stores)
//   sasl.enabled.mechanisms, listener.name.NAME.sasl.enabled.mechanisms
//                                (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)
//   listener.name.NAME.plain.sasl.jaas.config  (PlainLoginModule, user_NAME="PASSWORD";
//                                              username and password on the inter-broker one)
//   listener.name.NAME.scram-sha-256.sasl.jaas.config (and -512; ScramLoginModule: the
//                                inter-broker login's username and password)
//   sasl.mechanism.inter.broker.protocol         (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)
//   inter.broker.listener.name / security.inter.broker.protocol
//   controller.listener.names    the controller's listener name (first one)
//   controller.quorum.voters     id@host:port,...  (default: this node alone)
//   log.dirs / log.dir           the data directory (one)
//   num.partitions, default.replication.factor, auto.create.topics.enable,
//   min.insync.replicas, broker.rack, broker.heartbeat.interval.ms,
//   broker.session.timeout.ms, delete.topic.enable,
//   unclean.leader.election.enable, log.segment.bytes,
//   log.retention.ms / .minutes / .hours, log.retention.bytes,
//   message.max.bytes, log.flush.interval.messages, log.flush.interval.ms,
//   log.retention.check.interval.ms, log.cleaner.enable,
//   log.cleaner.backoff.ms, log.cleaner.dedupe.buffer.size,
//   connections.max.idle.ms, socket.request.max.bytes,
//   replica.lag.time.max.ms, replica.fetch.max.bytes,
//   replica.fetch.response.max.bytes, replica.fetch.wait.max.ms,
//   replica.fetch.backoff.ms, offsets.topic.num.partitions,
//   offsets.topic.replication.factor (1 in a single-node cluster, else 3),
//   offsets.commit.timeout.ms, offsets.retention.minutes,
//   offsets.retention.check.interval.ms, offset.metadata.max.bytes,
//   group.initial.rebalance.delay.ms, group.min.session.timeout.ms,
//   group.max.session.timeout.ms, group.max.size,
//   group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms,
//   group.consumer.max.size, group.consumer.assignors (uniform, range, or
//   Kafka's class names for them), group.consumer.migration.policy
//   (bidirectional, upgrade, downgrade, disabled),
//   transaction.state.log.num.partitions,
//   transaction.state.log.replication.factor and transaction.state.log.min.isr
//   (1 in a single-node cluster, else 3 and 2), transaction.max.timeout.ms,
//   transactional.id.expiration.ms,
//   transaction.abort.timed.out.transaction.cleanup.interval.ms,
//   transaction.remove.expired.transaction.cleanup.interval.ms,
//   transaction.partition.verification.enable
//
// SIGTERM or SIGINT: the broker asks the controller for a controlled
// shutdown (leadership moves away), the logs are closed, the controller
// resigns, and the process exits 0.
//
// Tools are not logic code: signals and files read directly are fine here.
#include <malloc.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/broker/broker.h"
#include "core/controller/quorum_controller.h"
#include "core/bootstrap_records.h"
#include "core/meta_properties.h"
#include "io/real/real_node.h"
#include "io/scope.h"
#include "io/status.h"
#include "io/sync.h"
#include "io/when.h"
#include "net/kafka/sasl.h"
#include "net/tls/tls.h"
#include "raft/raft_node.h"
#include "tools/client_tool.h"
#include "tools/commands.h"

namespace brook::tools {

namespace {

using namespace std::chrono_literals;

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

using Properties = std::map<std::string, std::string>;

void usage() {
  std::fprintf(stderr,
               "usage: brook server [--config FILE] [--override KEY=VALUE ...] [--data-dir DIR]\n"
               "                    [--cluster-id ID] [--backend auto|uring|epoll] [--inline-write-bytes N]\n"
               "                    [--log-level info|debug]\n");
}

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

// Java properties, the simple form: key=value (or key: value) lines, '#'
// and '!' comments.
absl::Status read_properties(const std::string& path, Properties* out) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("cannot read {}", path));
  std::string line;
  while (std::getline(in, line)) {
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#' || t[0] == '!') continue;
    const size_t eq = t.find_first_of("=:");
    if (eq == std::string::npos) {
      (*out)[t] = "";
      continue;
    }
    (*out)[trim(std::string_view(t).substr(0, eq))] = trim(std::string_view(t).substr(eq + 1));
  }
  return absl::OkStatus();
}

std::optional<int64_t> to_int(const std::string& text) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

// "a, b,,c" -> {"a", "b", "c"}: a comma-separated list, entries trimmed,
// empty ones skipped.
std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string entry = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (!entry.empty()) out.push_back(std::move(entry));
  }
  return out;
}

// "NAME://host:port,..." -> name -> address. An empty host means all
// interfaces; it is advertised as localhost.
absl::StatusOr<std::map<std::string, io::Address>> parse_listeners(const std::string& text) {
  std::map<std::string, io::Address> out;
  for (const std::string& entry : split_list(text)) {
    const size_t sep = entry.find("://");
    if (sep == std::string::npos) return absl::InvalidArgumentError(fmt::format("bad listener '{}'", entry));
    std::string hostport = entry.substr(sep + 3);
    if (!hostport.empty() && hostport[0] == ':') hostport = "0.0.0.0" + hostport;
    absl::StatusOr<io::Address> a = io::Address::parse(hostport);
    if (!a.ok()) return absl::InvalidArgumentError(fmt::format("bad listener '{}': {}", entry, a.status().ToString()));
    out.emplace(entry.substr(0, sep), *a);
  }
  return out;
}

// "listener.name.<name in lower case>.", the prefix of a listener's own
// settings.
std::string listener_prefix(std::string_view name) {
  std::string prefix = "listener.name.";
  for (char ch : name) prefix.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  prefix += ".";
  return prefix;
}

// The JAAS property of `mechanism` on a listener:
// listener.name.NAME.MECHANISM.sasl.jaas.config, mechanism in lower case.
std::string jaas_key(const std::string& listener, std::string_view mechanism) {
  std::string key = listener_prefix(listener);
  for (char ch : mechanism) key.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  return key + ".sasl.jaas.config";
}

// A SASL_PLAINTEXT or SASL_SSL listener's settings, as Kafka's broker
// reads them: sasl.enabled.mechanisms (its listener.name.NAME. form first)
// among PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512. With PLAIN,
// listener.name.NAME.plain.sasl.jaas.config names the users (a
// PlainLoginModule with user_NAME="PASSWORD" options). SCRAM's users are
// the cluster's credentials (AlterUserScramCredentials, `brook format
// --add-scram`); its JAAS entry (a ScramLoginModule) is needed only for
// the inter-broker login, and checked when given.
template <typename Get>
absl::StatusOr<net::SaslServerConfig> sasl_listener(const std::string& name, const Get& get) {
  const std::string prefix = listener_prefix(name);
  std::optional<std::string> mechanisms = get(prefix + "sasl.enabled.mechanisms");
  if (!mechanisms.has_value()) mechanisms = get("sasl.enabled.mechanisms");
  net::SaslServerConfig config;
  config.mechanisms = split_list(mechanisms.value_or("GSSAPI"));
  for (const std::string& m : config.mechanisms) {
    if (m != net::kSaslPlain && !net::scram_mechanism(m).has_value()) {
      return absl::InvalidArgumentError(fmt::format(
          "listener {}: SASL mechanism {} is not supported (sasl.enabled.mechanisms may list PLAIN, "
          "SCRAM-SHA-256 and SCRAM-SHA-512){}",
          name, m, mechanisms.has_value() ? "" : "; Kafka's default is GSSAPI"));
    }
    if (m == net::kSaslPlain) continue;
    if (std::optional<std::string> jaas = get(jaas_key(name, m))) {
      absl::StatusOr<std::map<std::string, std::string>> options = net::parse_jaas_options(*jaas, net::kScramLoginModule);
      if (!options.ok()) {
        return absl::InvalidArgumentError(
            fmt::format("{}: {}", jaas_key(name, m), std::string(options.status().message())));
      }
    }
  }
  if (config.mechanisms.empty()) {
    return absl::InvalidArgumentError(fmt::format("listener {}: no SASL mechanism enabled", name));
  }
  if (!config.enabled(net::kSaslPlain)) return config;
  const std::string key = jaas_key(name, net::kSaslPlain);
  std::optional<std::string> jaas = get(key);
  if (!jaas.has_value()) {
    return absl::InvalidArgumentError(fmt::format(
        "listener {} enables SASL PLAIN and {} is not set (org.apache.kafka.common.security.plain.PlainLoginModule "
        "required user_NAME=\"PASSWORD\" ...;)",
        name, key));
  }
  absl::StatusOr<net::SaslPlainUsers> users = net::parse_plain_jaas(*jaas);
  if (!users.ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", key, std::string(users.status().message())));
  }
  config.plain = std::move(*users);
  return config;
}

// An SSL or SASL_SSL listener's TLS settings: the ssl.* properties, each
// in its listener.name.NAME. form first, as Kafka's broker reads them. As
// in Kafka (KIP-684), a SASL_SSL listener asks for client certificates
// only when its own ssl.client.auth says so.
template <typename Get>
absl::StatusOr<net::tls::Settings> tls_settings(const std::string& name, bool sasl, const Get& get) {
  const std::string prefix = listener_prefix(name);
  absl::StatusOr<net::tls::Settings> settings =
      net::tls::settings_from([&](std::string_view key) -> std::optional<std::string> {
        if (std::optional<std::string> own = get(prefix + std::string(key))) return own;
        if (sasl && key == "ssl.client.auth") return std::nullopt;
        return get(std::string(key));
      });
  if (!settings.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("listener {}: {}", name, std::string(settings.status().message())));
  }
  return settings;
}

struct ServerArgs {
  Properties props;
  std::string data_dir;
  std::string cluster_id;
  io::real::BackendKind backend = io::real::BackendKind::kAuto;
  std::optional<size_t> inline_write_bytes_max;
  bool debug = false;
};

struct ServerConfig {
  bool broker = true;
  bool controller = true;
  int32_t node_id = 1;
  std::string data_dir = "data";
  std::string controller_listener = "CONTROLLER";
  io::Address controller_listen{"localhost", 9093};
  io::Address controller_advertised{"localhost", 9093};
  // The broker's client listeners, the inter-broker one first.
  struct BrokerListener {
    std::string name;
    io::Address listen;
    io::Address advertised;
    // SASL_PLAINTEXT and SASL_SSL: its mechanisms, and the PLAIN users
    // its clients authenticate as.
    std::optional<net::SaslServerConfig> sasl;
    // SSL and SASL_SSL: the server side of TLS, and the settings it came
    // from.
    std::shared_ptr<const net::tls::Context> tls;
    net::tls::Settings tls_settings;
  };
  std::vector<BrokerListener> broker_listeners;
  // The credentials brokers log in with when the inter-broker listener is
  // SASL_PLAINTEXT or SASL_SSL.
  std::optional<net::SaslCredentials> inter_broker_sasl;
  // The client side of TLS brokers connect to each other with when the
  // inter-broker listener is SSL or SASL_SSL.
  std::shared_ptr<const net::tls::Context> inter_broker_tls;
  std::map<int32_t, io::Address> voters;
  broker::BrokerConfig broker_config;
  controller::ControllerConfig controller_config;
};

absl::StatusOr<ServerConfig> configure(const ServerArgs& args) {
  const Properties& p = args.props;
  ServerConfig c;
  auto get = [&](const std::string& key) -> std::optional<std::string> {
    auto it = p.find(key);
    if (it == p.end()) return std::nullopt;
    return it->second;
  };
  auto get_int = [&](const std::string& key) -> absl::StatusOr<std::optional<int64_t>> {
    std::optional<std::string> v = get(key);
    if (!v.has_value()) return std::optional<int64_t>();
    std::optional<int64_t> n = to_int(*v);
    if (!n.has_value()) return absl::InvalidArgumentError(fmt::format("{}={} is not a number", key, *v));
    return n;
  };
  auto get_bool = [&](const std::string& key, bool fallback) -> absl::StatusOr<bool> {
    std::optional<std::string> v = get(key);
    if (!v.has_value()) return fallback;
    if (*v == "true") return true;
    if (*v == "false") return false;
    return absl::InvalidArgumentError(fmt::format("{}={} is not true or false", key, *v));
  };
  if (std::optional<std::string> roles = get("process.roles")) {
    const std::string r = *roles;
    c.broker = r.find("broker") != std::string::npos;
    c.controller = r.find("controller") != std::string::npos;
    if (!c.broker && !c.controller) {
      return absl::InvalidArgumentError("process.roles must be broker, controller or broker,controller");
    }
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> node_id, get_int("node.id"));
  if (node_id.has_value()) {
    if (*node_id < 0 || *node_id > INT32_MAX) return absl::InvalidArgumentError("node.id out of range");
    c.node_id = static_cast<int32_t>(*node_id);
  }
  if (std::optional<std::string> names = get("controller.listener.names")) {
    c.controller_listener = trim(std::string_view(*names).substr(0, names->find(',')));
  }
  std::map<std::string, io::Address> listeners;
  if (std::optional<std::string> l = get("listeners")) {
    ASSIGN_OR_RETURN(listeners, parse_listeners(*l));
  } else {
    if (c.broker) listeners.emplace("PLAINTEXT", io::Address("localhost", 9092));
    if (c.controller) listeners.emplace(c.controller_listener, io::Address("localhost", 9093));
  }
  std::map<std::string, io::Address> advertised = listeners;
  if (std::optional<std::string> a = get("advertised.listeners")) {
    absl::StatusOr<std::map<std::string, io::Address>> given = parse_listeners(*a);
    if (!given.ok()) return given.status();
    for (auto& [name, address] : *given) {
      if (!listeners.contains(name)) {
        return absl::InvalidArgumentError(
            fmt::format("advertised.listeners names {}, which is not one of listeners", name));
      }
      advertised[name] = address;
    }
  }
  // Every listener's security protocol (listener.security.protocol.map;
  // as in Kafka, the controller's listener is PLAINTEXT when the map is
  // not given). Client listeners may be PLAINTEXT, SSL, SASL_PLAINTEXT or
  // SASL_SSL (SASL with PLAIN); the controller's is PLAINTEXT.
  std::map<std::string, std::string> protocols;
  const std::optional<std::string> protocol_map = get("listener.security.protocol.map");
  for (const std::string& entry : split_list(
           protocol_map.value_or("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"))) {
    const size_t colon = entry.find(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError(fmt::format("listener.security.protocol.map: bad entry '{}'", entry));
    }
    protocols[trim(std::string_view(entry).substr(0, colon))] = trim(std::string_view(entry).substr(colon + 1));
  }
  if (!protocol_map.has_value()) protocols.emplace(c.controller_listener, "PLAINTEXT");
  for (const auto& [name, address] : listeners) {
    auto it = protocols.find(name);
    if (it == protocols.end()) {
      return absl::InvalidArgumentError(
          fmt::format("no security protocol for listener {} (listener.security.protocol.map)", name));
    }
    const std::string& protocol = it->second;
    if (name == c.controller_listener ? protocol != "PLAINTEXT"
                                      : protocol != "PLAINTEXT" && protocol != "SSL" &&
                                            protocol != "SASL_PLAINTEXT" && protocol != "SASL_SSL") {
      return absl::InvalidArgumentError(fmt::format(
          "listener {} is {}: client listeners may be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, and the "
          "controller's listener is PLAINTEXT",
          name, protocol));
    }
  }
  for (auto& [name, address] : advertised) {
    if (address.host == "0.0.0.0" || address.host.empty()) address.host = "localhost";
  }
  auto controller_it = listeners.find(c.controller_listener);
  if (c.controller) {
    if (controller_it == listeners.end()) {
      return absl::InvalidArgumentError(
          fmt::format("listeners has no {} listener (controller.listener.names)", c.controller_listener));
    }
    c.controller_listen = controller_it->second;
    c.controller_advertised = advertised.at(c.controller_listener);
  } else if (controller_it != listeners.end()) {
    return absl::InvalidArgumentError(fmt::format(
        "a broker without the controller role has no {} listener (controller.listener.names)", c.controller_listener));
  }
  if (c.broker) {
    for (const auto& [name, address] : listeners) {
      if (name == c.controller_listener) continue;
      ServerConfig::BrokerListener& l = c.broker_listeners.emplace_back();
      l.name = name;
      l.listen = address;
      l.advertised = advertised.at(name);
      const std::string& protocol = protocols.at(name);
      if (protocol == "SASL_PLAINTEXT" || protocol == "SASL_SSL") {
        ASSIGN_OR_RETURN(l.sasl, sasl_listener(name, get));
      }
      if (protocol == "SSL" || protocol == "SASL_SSL") {
        ASSIGN_OR_RETURN(l.tls_settings, tls_settings(name, protocol == "SASL_SSL", get));
        absl::StatusOr<std::shared_ptr<const net::tls::Context>> context =
            net::tls::Context::server(l.tls_settings, read_whole_file);
        if (!context.ok()) {
          return absl::InvalidArgumentError(
              fmt::format("listener {}: {}", name, std::string(context.status().message())));
        }
        l.tls = std::move(*context);
      }
    }
    if (c.broker_listeners.empty()) {
      return absl::InvalidArgumentError("listeners has no broker listener (e.g. PLAINTEXT://:9092)");
    }
    // The inter-broker listener: inter.broker.listener.name, else the one
    // named after security.inter.broker.protocol (PLAINTEXT), as in Kafka;
    // a broker with a single client listener uses that one whatever its
    // name.
    std::optional<std::string> inter = get("inter.broker.listener.name");
    const bool named = inter.has_value();
    if (!named) inter = get("security.inter.broker.protocol").value_or("PLAINTEXT");
    auto it = std::find_if(c.broker_listeners.begin(), c.broker_listeners.end(),
                           [&](const ServerConfig::BrokerListener& l) { return l.name == *inter; });
    if (it == c.broker_listeners.end() && (named || c.broker_listeners.size() > 1)) {
      std::vector<std::string> names;
      for (const ServerConfig::BrokerListener& l : c.broker_listeners) names.push_back(l.name);
      return absl::InvalidArgumentError(fmt::format(
          "{} names {}, which is not one of the broker's listeners (set inter.broker.listener.name to one of {})",
          named ? "inter.broker.listener.name" : "security.inter.broker.protocol", *inter, fmt::join(names, ", ")));
    }
    if (it != c.broker_listeners.end()) std::rotate(c.broker_listeners.begin(), it, it + 1);
    if (c.broker_listeners.front().tls != nullptr) {
      // Brokers connect to each other with the listener's own settings:
      // its trust store checks the other's certificate (and host name,
      // ssl.endpoint.identification.algorithm), its key store answers a
      // listener that requires client certificates.
      const ServerConfig::BrokerListener& l = c.broker_listeners.front();
      absl::StatusOr<std::shared_ptr<const net::tls::Context>> context =
          net::tls::Context::client(l.tls_settings, read_whole_file);
      if (!context.ok()) {
        return absl::InvalidArgumentError(fmt::format("the inter-broker listener {}, as a client: {}", l.name,
                                                      std::string(context.status().message())));
      }
      c.inter_broker_tls = std::move(*context);
    }
    if (c.broker_listeners.front().sasl.has_value()) {
      // Brokers authenticate to each other as the username and password
      // options of that listener's JAAS entry, with
      // sasl.mechanism.inter.broker.protocol (Kafka's default is GSSAPI).
      const ServerConfig::BrokerListener& l = c.broker_listeners.front();
      const std::string& name = l.name;
      const std::string mechanism = get("sasl.mechanism.inter.broker.protocol").value_or("GSSAPI");
      if (!l.sasl->enabled(mechanism)) {
        return absl::InvalidArgumentError(fmt::format(
            "the inter-broker listener {} uses SASL and sasl.mechanism.inter.broker.protocol is {}, which the "
            "listener does not enable ({})",
            name, mechanism, fmt::join(l.sasl->mechanisms, ",")));
      }
      const std::string key = jaas_key(name, mechanism);
      absl::StatusOr<net::SaslCredentials> credentials = net::parse_jaas_credentials(get(key).value_or(""), mechanism);
      if (!credentials.ok()) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: the inter-broker listener needs the username and password brokers log in with: {}", key,
            std::string(credentials.status().message())));
      }
      c.inter_broker_sasl = std::move(*credentials);
    }
  }
  if (std::optional<std::string> v = get("controller.quorum.voters")) {
    for (const std::string& entry : split_list(*v)) {
      const size_t at = entry.find('@');
      std::optional<int64_t> id = at == std::string::npos ? std::nullopt : to_int(entry.substr(0, at));
      absl::StatusOr<io::Address> address =
          at == std::string::npos ? absl::InvalidArgumentError("no @") : io::Address::parse(entry.substr(at + 1));
      if (!id.has_value() || !address.ok()) {
        return absl::InvalidArgumentError(fmt::format("bad controller.quorum.voters entry '{}'", entry));
      }
      c.voters[static_cast<int32_t>(*id)] = *address;
    }
    if (c.controller && !c.voters.contains(c.node_id)) {
      return absl::InvalidArgumentError("controller.quorum.voters must name this node (node.id)");
    }
    if (!c.controller && c.voters.contains(c.node_id)) {
      return absl::InvalidArgumentError(
          "a broker without the controller role must not be in controller.quorum.voters (node.id)");
    }
  } else if (c.controller) {
    c.voters[c.node_id] = c.controller_advertised;
  } else {
    return absl::InvalidArgumentError("process.roles=broker needs controller.quorum.voters");
  }
  if (std::optional<std::string> dirs = get("log.dirs")) {
    c.data_dir = trim(std::string_view(*dirs).substr(0, dirs->find(',')));
  } else if (std::optional<std::string> dir = get("log.dir")) {
    c.data_dir = *dir;
  }
  if (!args.data_dir.empty()) c.data_dir = args.data_dir;

  broker::BrokerConfig& b = c.broker_config;
  b.node_id = c.node_id;
  if (c.broker) {
    b.inter_broker_sasl = c.inter_broker_sasl;
    b.inter_broker_tls = c.inter_broker_tls;
    b.listener_name = c.broker_listeners.front().name;
    b.advertised = c.broker_listeners.front().advertised;
    for (size_t i = 1; i < c.broker_listeners.size(); ++i) {
      b.other_listeners.emplace_back(c.broker_listeners[i].name, c.broker_listeners[i].advertised);
    }
  }
  b.rack = get("broker.rack");
  b.log_dir = std::filesystem::absolute(c.data_dir).lexically_normal().string();
  controller::ControllerConfig& k = c.controller_config;
  k.node_id = c.node_id;
  ASSIGN_OR_RETURN(std::optional<int64_t> partitions, get_int("num.partitions"));
  if (partitions) {
    if (*partitions < 1 || *partitions > INT32_MAX) return absl::InvalidArgumentError("num.partitions must be >= 1");
    b.num_partitions = k.num_partitions = static_cast<int32_t>(*partitions);
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> rf, get_int("default.replication.factor"));
  if (rf) {
    if (*rf < 1 || *rf > INT16_MAX) return absl::InvalidArgumentError("default.replication.factor must be >= 1");
    b.default_replication_factor = k.default_replication_factor = static_cast<int16_t>(*rf);
  }
  ASSIGN_OR_RETURN(b.auto_create_topics, get_bool("auto.create.topics.enable", true));
  ASSIGN_OR_RETURN(k.delete_topic_enable, get_bool("delete.topic.enable", true));
  ASSIGN_OR_RETURN(k.unclean_leader_election, get_bool("unclean.leader.election.enable", false));
  ASSIGN_OR_RETURN(k.auto_leader_rebalance, get_bool("auto.leader.rebalance.enable", true));
  ASSIGN_OR_RETURN(std::optional<int64_t> imbalance, get_int("leader.imbalance.check.interval.seconds"));
  if (imbalance) {
    if (*imbalance < 1) return absl::InvalidArgumentError("leader.imbalance.check.interval.seconds must be >= 1");
    k.leader_imbalance_check_interval = std::chrono::seconds(*imbalance);
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> isr, get_int("min.insync.replicas"));
  if (isr) b.min_insync_replicas = static_cast<int32_t>(std::max<int64_t>(1, *isr));
  ASSIGN_OR_RETURN(std::optional<int64_t> heartbeat, get_int("broker.heartbeat.interval.ms"));
  if (heartbeat) b.heartbeat_interval = std::chrono::milliseconds(std::max<int64_t>(10, *heartbeat));
  ASSIGN_OR_RETURN(std::optional<int64_t> session, get_int("broker.session.timeout.ms"));
  if (session) k.broker_session_timeout = std::chrono::milliseconds(std::max<int64_t>(100, *session));
  // A duration in milliseconds (at least `min_ms`), and a positive size
  // clamped to int32.
  auto get_ms = [&](const std::string& key, int64_t min_ms, io::Duration* out) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<int64_t> v, get_int(key));
    if (v) *out = std::chrono::milliseconds(std::max(min_ms, *v));
    return absl::OkStatus();
  };
  auto get_size = [&](const std::string& key, int32_t* out) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<int64_t> v, get_int(key));
    if (v && *v > 0) *out = static_cast<int32_t>(std::min<int64_t>(*v, INT32_MAX));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(get_ms("connections.max.idle.ms", 0, &b.connections_max_idle));
  RETURN_IF_ERROR(get_size("socket.request.max.bytes", &b.socket_request_max_bytes));
  RETURN_IF_ERROR(get_ms("replica.lag.time.max.ms", 100, &b.replica_lag_time_max));
  RETURN_IF_ERROR(get_size("replica.fetch.max.bytes", &b.replica_fetch_max_bytes));
  RETURN_IF_ERROR(get_size("replica.fetch.response.max.bytes", &b.replica_fetch_response_max_bytes));
  RETURN_IF_ERROR(get_ms("replica.fetch.wait.max.ms", 0, &b.replica_fetch_wait_max));
  RETURN_IF_ERROR(get_ms("replica.fetch.backoff.ms", 0, &b.replica_fetch_backoff));
  // The group coordinator. A single-node cluster (this node the only
  // controller and a broker) keeps __consumer_offsets on its one broker, as
  // Kafka's single-node example configuration does.
  group::GroupCoordinatorConfig& g = b.group;
  ASSIGN_OR_RETURN(std::optional<int64_t> offsets_partitions, get_int("offsets.topic.num.partitions"));
  if (offsets_partitions) {
    if (*offsets_partitions < 1 || *offsets_partitions > 10000) {
      return absl::InvalidArgumentError("offsets.topic.num.partitions must be in 1..10000");
    }
    g.offsets_topic_partitions = static_cast<int32_t>(*offsets_partitions);
  }
  if (c.broker && c.controller && c.voters.size() == 1) b.offsets_topic_replication_factor = 1;
  ASSIGN_OR_RETURN(std::optional<int64_t> offsets_rf, get_int("offsets.topic.replication.factor"));
  if (offsets_rf) {
    if (*offsets_rf < 1 || *offsets_rf > INT16_MAX) {
      return absl::InvalidArgumentError("offsets.topic.replication.factor must be >= 1");
    }
    b.offsets_topic_replication_factor = static_cast<int16_t>(*offsets_rf);
  }
  RETURN_IF_ERROR(get_ms("offsets.commit.timeout.ms", 1, &b.offsets_commit_timeout));
  // The transaction coordinator.
  txn::TransactionCoordinatorConfig& t = b.txn;
  t.offsets_topic_partitions = g.offsets_topic_partitions;
  ASSIGN_OR_RETURN(std::optional<int64_t> txn_partitions, get_int("transaction.state.log.num.partitions"));
  if (txn_partitions) {
    if (*txn_partitions < 1 || *txn_partitions > 10000) {
      return absl::InvalidArgumentError("transaction.state.log.num.partitions must be in 1..10000");
    }
    t.state_topic_partitions = static_cast<int32_t>(*txn_partitions);
  }
  if (c.broker && c.controller && c.voters.size() == 1) {
    b.transaction_state_replication_factor = 1;
    b.transaction_state_min_isr = 1;
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> txn_rf, get_int("transaction.state.log.replication.factor"));
  if (txn_rf) {
    if (*txn_rf < 1 || *txn_rf > INT16_MAX) {
      return absl::InvalidArgumentError("transaction.state.log.replication.factor must be >= 1");
    }
    b.transaction_state_replication_factor = static_cast<int16_t>(*txn_rf);
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> txn_min_isr, get_int("transaction.state.log.min.isr"));
  if (txn_min_isr) {
    if (*txn_min_isr < 1 || *txn_min_isr > INT16_MAX) {
      return absl::InvalidArgumentError("transaction.state.log.min.isr must be >= 1");
    }
    b.transaction_state_min_isr = static_cast<int32_t>(*txn_min_isr);
  }
  RETURN_IF_ERROR(get_ms("transaction.max.timeout.ms", 1, &t.max_timeout));
  RETURN_IF_ERROR(get_ms("transactional.id.expiration.ms", 1, &t.id_expiration));
  RETURN_IF_ERROR(get_ms("transaction.abort.timed.out.transaction.cleanup.interval.ms", 1, &t.abort_check_interval));
  RETURN_IF_ERROR(get_ms("transaction.remove.expired.transaction.cleanup.interval.ms", 1, &t.expire_check_interval));
  ASSIGN_OR_RETURN(b.transaction_partition_verification, get_bool("transaction.partition.verification.enable", true));
  RETURN_IF_ERROR(get_ms("group.initial.rebalance.delay.ms", 0, &g.initial_rebalance_delay));
  RETURN_IF_ERROR(get_ms("group.min.session.timeout.ms", 0, &g.min_session_timeout));
  RETURN_IF_ERROR(get_ms("group.max.session.timeout.ms", 0, &g.max_session_timeout));
  RETURN_IF_ERROR(get_size("group.max.size", &g.max_group_size));
  RETURN_IF_ERROR(get_size("offset.metadata.max.bytes", &g.offset_metadata_max_bytes));
  RETURN_IF_ERROR(get_ms("group.consumer.session.timeout.ms", 1, &g.consumer_session_timeout));
  RETURN_IF_ERROR(get_ms("group.consumer.heartbeat.interval.ms", 1, &g.consumer_heartbeat_interval));
  if (g.consumer_heartbeat_interval >= g.consumer_session_timeout) {
    return absl::InvalidArgumentError(
        "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms");
  }
  RETURN_IF_ERROR(get_size("group.consumer.max.size", &g.consumer_max_group_size));
  if (std::optional<std::string> assignors = get("group.consumer.assignors")) {
    g.consumer_assignors.clear();
    for (const std::string& name : split_list(*assignors)) {
      if (name == "uniform" || name == "org.apache.kafka.coordinator.group.assignor.UniformAssignor") {
        g.consumer_assignors.emplace_back("uniform");
      } else if (name == "range" || name == "org.apache.kafka.coordinator.group.assignor.RangeAssignor") {
        g.consumer_assignors.emplace_back("range");
      } else {
        return absl::InvalidArgumentError(
            fmt::format("group.consumer.assignors: unknown assignor '{}' (uniform, range)", name));
      }
    }
    if (g.consumer_assignors.empty()) return absl::InvalidArgumentError("group.consumer.assignors is empty");
  }
  if (std::optional<std::string> policy = get("group.consumer.migration.policy")) {
    std::optional<group::GroupCoordinatorConfig::MigrationPolicy> p = group::parse_migration_policy(*policy);
    if (!p.has_value()) {
      return absl::InvalidArgumentError(fmt::format(
          "group.consumer.migration.policy: '{}' is not one of bidirectional, upgrade, downgrade, disabled", *policy));
    }
    g.consumer_migration_policy = *p;
  }
  RETURN_IF_ERROR(get_ms("offsets.retention.check.interval.ms", 1, &g.offsets_retention_check_interval));
  ASSIGN_OR_RETURN(std::optional<int64_t> retention_minutes, get_int("offsets.retention.minutes"));
  if (retention_minutes && *retention_minutes > 0) g.offsets_retention = std::chrono::minutes(*retention_minutes);
  storage::LogConfig& log = b.log_defaults;
  ASSIGN_OR_RETURN(std::optional<int64_t> segment, get_int("log.segment.bytes"));
  if (segment && *segment > 0) log.segment_bytes = static_cast<uint64_t>(*segment);
  ASSIGN_OR_RETURN(std::optional<int64_t> hours, get_int("log.retention.hours"));
  ASSIGN_OR_RETURN(std::optional<int64_t> minutes, get_int("log.retention.minutes"));
  ASSIGN_OR_RETURN(std::optional<int64_t> ms, get_int("log.retention.ms"));
  if (ms) {
    log.retention_ms = *ms;
  } else if (minutes) {
    log.retention_ms = *minutes * 60'000;
  } else if (hours) {
    log.retention_ms = *hours * 3'600'000;
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> retention_bytes, get_int("log.retention.bytes"));
  if (retention_bytes) log.retention_bytes = *retention_bytes;
  ASSIGN_OR_RETURN(std::optional<int64_t> max_message, get_int("message.max.bytes"));
  if (max_message && *max_message > 0) log.max_message_bytes = static_cast<size_t>(*max_message);
  ASSIGN_OR_RETURN(std::optional<int64_t> flush_messages, get_int("log.flush.interval.messages"));
  if (flush_messages && *flush_messages > 0) log.flush_messages = *flush_messages;
  // Every message synced: appends sync before they acknowledge, sharing
  // datasyncs (group commit) rather than one per append.
  if (log.flush_messages == 1) {
    log.flush_mode = storage::FlushMode::kBeforeAck;
    log.flush_messages = storage::kNoLimit;
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> flush_ms, get_int("log.flush.interval.ms"));
  if (flush_ms && *flush_ms >= 0) log.flush_ms = *flush_ms;
  RETURN_IF_ERROR(get_ms("log.retention.check.interval.ms", 1, &b.log_retention_check_interval));
  ASSIGN_OR_RETURN(b.log_cleaner_enable, get_bool("log.cleaner.enable", true));
  RETURN_IF_ERROR(get_ms("log.cleaner.backoff.ms", 0, &b.log_cleaner_backoff));
  ASSIGN_OR_RETURN(std::optional<int64_t> dedupe, get_int("log.cleaner.dedupe.buffer.size"));
  if (dedupe && *dedupe > 0) b.log_cleaner_dedupe_buffer_size = static_cast<size_t>(*dedupe);

  // DescribeConfigs' STATIC_BROKER_CONFIG layer: the properties as given,
  // plus what this node decided where none was given.
  std::map<std::string, std::string> statics = p;
  statics["node.id"] = std::to_string(c.node_id);
  statics["process.roles"] = c.broker && c.controller ? "broker,controller" : c.broker ? "broker" : "controller";
  statics["log.dirs"] = b.log_dir;
  if (!statics.contains("listeners")) {
    std::vector<std::string> named;
    for (const auto& [name, address] : listeners) named.push_back(fmt::format("{}://{}:{}", name, address.host, address.port));
    statics["listeners"] = fmt::format("{}", fmt::join(named, ","));
  }
  statics["offsets.topic.replication.factor"] = std::to_string(b.offsets_topic_replication_factor);
  statics["transaction.state.log.replication.factor"] = std::to_string(b.transaction_state_replication_factor);
  statics["transaction.state.log.min.isr"] = std::to_string(b.transaction_state_min_isr);
  b.static_configs = statics;
  k.static_configs = std::move(statics);
  return c;
}

std::optional<ServerArgs> parse(Args args) {
  ServerArgs out;
  std::vector<std::pair<std::string, std::string>> overrides;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (i + 1 >= args.size()) return std::nullopt;
    const std::string value(args[++i]);
    if (arg == "--config") {
      absl::Status s = read_properties(value, &out.props);
      if (!s.ok()) {
        std::fprintf(stderr, "brook server: %s\n", std::string(s.message()).c_str());
        return std::nullopt;
      }
    } else if (arg == "--override") {
      const size_t eq = value.find('=');
      if (eq == std::string::npos) return std::nullopt;
      overrides.emplace_back(trim(value.substr(0, eq)), trim(value.substr(eq + 1)));
    } else if (arg == "--data-dir") {
      out.data_dir = value;
    } else if (arg == "--cluster-id") {
      out.cluster_id = value;
    } else if (arg == "--backend") {
      auto b = io::real::parse_backend_kind(value);
      if (!b.ok()) return std::nullopt;
      out.backend = *b;
    } else if (arg == "--inline-write-bytes") {
      size_t bytes = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), bytes);
      if (ec != std::errc() || end != value.data() + value.size()) {
        std::fprintf(stderr, "brook server: --inline-write-bytes needs a byte count, not '%s'\n",
                     value.c_str());
        return std::nullopt;
      }
      out.inline_write_bytes_max = bytes;
    } else if (arg == "--log-level") {
      if (value != "debug" && value != "info") return std::nullopt;
      out.debug = value == "debug";
    } else {
      return std::nullopt;
    }
  }
  for (auto& [k, v] : overrides) out.props[k] = v;
  return out;
}

struct Run {
  const ServerArgs* args;
  const ServerConfig* config;
  bool done = false;
  int exit_code = 0;
};

void fail(Run* run, const std::string& message) {
  std::fprintf(stderr, "brook server: %s\n", message.c_str());
  run->exit_code = 1;
  run->done = true;
}

io::Task<void> server_main(io::Context* ctx, Run* run) {
  const ServerConfig& c = *run->config;
  // Format on first start (a quorum of more than this node needs one
  // cluster id everywhere: `brook format`, or --cluster-id).
  std::string cluster_id = run->args->cluster_id;
  if (cluster_id.empty() && (c.voters.size() != 1 || !c.controller)) {
    absl::StatusOr<std::optional<core::MetaProperties>> stored = co_await core::read_meta_properties(ctx->disk(), "");
    if (!stored.ok() || !stored->has_value()) {
      fail(run, fmt::format("{}: no meta.properties and no --cluster-id: every node of a cluster of more than "
                            "one must share a cluster id (`brook format --cluster-id ID ...` on each node, or "
                            "--cluster-id)",
                            c.data_dir));
      co_return;
    }
  }
  std::vector<std::string> dirs(1);
  absl::StatusOr<core::MetaProperties> meta =
      co_await core::ensure_formatted(ctx->disk(), std::move(dirs), cluster_id, c.node_id, true, ctx->random());
  if (!meta.ok()) {
    fail(run, fmt::format("{}: {}", c.data_dir, std::string(meta.status().message())));
    co_return;
  }
  absl::StatusOr<std::optional<core::MetaProperties>> stored = co_await core::read_meta_properties(ctx->disk(), "");
  net::Uuid directory_id;
  if (stored.ok() && stored->has_value() && (*stored)->directory_id.has_value()) {
    directory_id = *(*stored)->directory_id;
  }

  raft::RaftConfig raft_config;
  raft_config.node_id = c.node_id;
  raft_config.voters = c.voters;
  raft_config.directory_id = directory_id;
  raft_config.listener_name = c.controller_listener;
  if (c.controller) raft_config.advertised = c.controller_advertised;
  raft_config.cluster_id = meta->cluster_id;
  if (c.voters.size() == 1) {
    // A quorum of one: nobody to wait for.
    raft_config.election_timeout = 200ms;
    raft_config.election_backoff_max = 200ms;
  }
  absl::StatusOr<std::unique_ptr<raft::RaftNode>> node = co_await raft::RaftNode::open(*ctx, raft_config);
  if (!node.ok()) {
    fail(run, node.status().ToString());
    co_return;
  }
  // A broker alone follows the metadata log as an observer: nobody calls
  // its Raft listener, which takes any free port on the broker's host.
  const io::Address raft_listen =
      c.controller ? c.controller_listen : io::Address(c.broker_listeners.front().listen.host, 0);
  absl::StatusOr<std::unique_ptr<io::Listener>> controller_listener = co_await ctx->network().listen(raft_listen);
  if (!controller_listener.ok()) {
    fail(run, fmt::format("listen on {}: {}", raft_listen.to_string(),
                          controller_listener.status().ToString()));
    co_return;
  }
  std::vector<std::unique_ptr<io::Listener>> broker_listeners;
  for (const ServerConfig::BrokerListener& bl : c.broker_listeners) {
    absl::StatusOr<std::unique_ptr<io::Listener>> l = co_await ctx->network().listen(bl.listen);
    if (!l.ok()) {
      fail(run, fmt::format("listen on {} ({}): {}", bl.listen.to_string(), bl.name, l.status().ToString()));
      co_return;
    }
    broker_listeners.push_back(std::move(*l));
  }
  controller::ControllerConfig controller_config = c.controller_config;
  controller_config.cluster_id = meta->cluster_id;
  if (c.controller) {
    // SCRAM credentials from `brook format --add-scram`, written if this
    // controller starts the cluster's metadata log.
    absl::StatusOr<std::vector<metadata::MetadataRecord>> bootstrap =
        co_await core::read_bootstrap_records(ctx->disk(), "");
    if (!bootstrap.ok()) {
      fail(run, fmt::format("{}: {}", c.data_dir, std::string(bootstrap.status().message())));
      co_return;
    }
    controller_config.bootstrap_records = std::move(*bootstrap);
  }
  controller::QuorumController controller(*ctx, **node, controller_config);
  if (c.controller) (*node)->set_listener(&controller);
  std::unique_ptr<broker::Broker> broker;
  if (c.broker) {
    broker::BrokerConfig broker_config = c.broker_config;
    broker_config.cluster_id = meta->cluster_id;
    broker_config.directory_id = directory_id;
    broker_config.incarnation_id = core::random_uuid(ctx->random());
    broker = std::make_unique<broker::Broker>(*ctx, **node, broker_config);
    if (c.controller) {
      controller.set_observer(broker.get());
    } else {
      (*node)->set_listener(broker.get());
    }
  }
  std::printf("brook server: node %d, cluster %s, data in %s\n", c.node_id, meta->cluster_id.c_str(),
              c.data_dir.c_str());
  if (c.controller) {
    std::printf("brook server: controller listening on %s\n", (*controller_listener)->address().to_string().c_str());
  }
  for (size_t i = 0; i < broker_listeners.size(); ++i) {
    const std::string sasl = c.broker_listeners[i].sasl.has_value()
                                 ? fmt::format(", SASL {}", fmt::join(c.broker_listeners[i].sasl->mechanisms, ","))
                                 : std::string();
    std::printf("brook server: broker listening on %s (%s%s%s, advertised as %s)\n",
                broker_listeners[i]->address().to_string().c_str(), c.broker_listeners[i].name.c_str(),
                c.broker_listeners[i].tls ? ", TLS" : "", sasl.c_str(),
                c.broker_listeners[i].advertised.to_string().c_str());
  }
  std::fflush(stdout);

  raft::RaftNode* raw = node->get();
  bool failed = false;
  io::TaskScope tasks(ctx->executor());
  if (c.controller) tasks.spawn(controller.run());
  auto run_raft = [](raft::RaftNode* n, io::Listener* l, controller::QuorumController* k,
                     bool* stopped) -> io::Task<void> {
    net::RequestHandler others = nullptr;
    if (k != nullptr) others = [k](net::RequestFrame f) { return k->handle_request(std::move(f)); };
    absl::Status s = co_await n->run(*l, std::move(others));
    std::fprintf(stderr, "brook server: metadata log stopped: %s\n", s.ToString().c_str());
    *stopped = true;
  };
  tasks.spawn(run_raft(raw, controller_listener->get(), c.controller ? &controller : nullptr, &failed));
  io::TaskScope broker_tasks(ctx->executor());
  io::TaskScope listener_tasks(ctx->executor());
  io::Event stopping;
  if (broker) {
    auto run_broker = [](broker::Broker* b, bool* stopped) -> io::Task<void> {
      absl::Status s = co_await b->run();
      std::fprintf(stderr, "brook server: broker stopped: %s\n", s.ToString().c_str());
      *stopped = true;
    };
    broker_tasks.spawn(run_broker(broker.get(), &failed));
    auto serve = [](io::Context* ctx, io::Listener* l, const ServerConfig::BrokerListener* listener,
                    broker::Broker* b, io::Event* stopping, bool* stopped) -> io::Task<void> {
      const std::string& name = listener->name;
      // As Kafka's brokers do, clients are served once the controller has
      // unfenced this broker: before that, Metadata would list no broker.
      // Connections made meanwhile wait in the listen backlog.
      while (!b->serving()) {
        if (stopping->is_set()) co_return;
        co_await ctx->clock().sleep_for(10ms);
      }
      std::printf("brook server: broker %d is serving clients on %s\n", b->node_id(), name.c_str());
      std::fflush(stdout);
      net::ServeOptions options = b->serve_options(name);
      std::optional<net::SaslServerConfig> sasl;
      if (listener->sasl.has_value()) options.sasl = &sasl.emplace(b->sasl_config(*listener->sasl));
      options.tls = listener->tls.get();
      options.stopping = stopping;
      absl::Status s =
          co_await net::serve(*l, [b](net::RequestFrame f) { return b->answer(std::move(f)); }, options);
      if (stopping->is_set()) co_return;  // stopped as asked
      std::fprintf(stderr, "brook server: broker listener %s stopped: %s\n", name.c_str(), s.ToString().c_str());
      *stopped = true;
    };
    for (size_t i = 0; i < broker_listeners.size(); ++i) {
      listener_tasks.spawn(
          serve(ctx, broker_listeners[i].get(), &c.broker_listeners[i], broker.get(), &stopping, &failed));
    }
  }
  while (!g_stop && !failed) co_await ctx->clock().sleep_for(50ms);
  bool logs_failed = false;
  std::fprintf(stderr, "brook server: shutting down\n");
  if (broker) {
    const absl::Status closed = co_await broker->shutdown(5s);
    // The listeners stop: each connection ends once it has answered the
    // request in hand, a TLS one with close_notify (Kafka's broker closes
    // its channels so), rather than being cut off.
    stopping.set();
    (void)co_await io::with_timeout(ctx->clock(), 2s, listener_tasks.join());
    listener_tasks.cancel_all();
    broker_tasks.cancel_all();
    if (!closed.ok()) {
      std::fprintf(stderr, "brook server: closing the logs: %s\n", closed.ToString().c_str());
      logs_failed = true;
    }
  }
  if (!failed) {
    co_await raw->resign();
    co_await ctx->clock().sleep_for(100ms);
  }
  tasks.cancel_all();
  (void)co_await raw->log().close();
  run->exit_code = failed || logs_failed ? 1 : 0;
  run->done = true;
}

}  // namespace

int server_main(Args args) {
  // Fetches read up to max.partition.fetch.bytes per partition into fresh
  // buffers: keep them on the heap and the heap's freed memory mapped,
  // instead of glibc's default of mapping and unmapping large blocks (and
  // faulting their pages in again) on every read.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  const std::optional<ServerArgs> parsed = parse(args);
  if (!parsed) {
    usage();
    return 2;
  }
  absl::StatusOr<ServerConfig> config = configure(*parsed);
  if (!config.ok()) {
    std::fprintf(stderr, "brook server: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  io::real::RealNodeOptions options;
  options.backend = parsed->backend;
  options.data_dir = config->data_dir;
  options.inline_write_bytes_max = parsed->inline_write_bytes_max;
  options.node_id = io::NodeId{config->node_id};
  if (parsed->debug) options.log_level_min = io::LogLevel::kDebug;
  absl::StatusOr<std::unique_ptr<io::real::RealNode>> node = io::real::RealNode::create(options);
  if (!node.ok()) {
    std::fprintf(stderr, "brook server: %s\n", node.status().ToString().c_str());
    return 1;
  }
  Run run{&*parsed, &*config};
  (*node)->scope().spawn(server_main(&(*node)->context(), &run));
  (*node)->run_until([&] { return run.done; });
  return run.exit_code;
}

}  // namespace brook::tools
