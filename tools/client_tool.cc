// tools/client_tool.cc
#include "tools/client_tool.h"

#include <malloc.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <memory>

#include <fmt/format.h>

#include "absl/strings/str_split.h"
#include "io/real/real_node.h"
#include "net/kafka/sasl.h"
#include "net/tls/tls.h"

namespace brook::tools {

namespace {

io::Task<void> run_main(std::function<io::Task<int>(io::Context&)>* main, io::Context* ctx, int* code, bool* done) {
  *code = co_await (*main)(*ctx);
  *done = true;
}

template <typename T>
absl::Status parse_int(std::string_view key, std::string_view value, T min, T* out) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  const uint64_t max = std::min<uint64_t>(static_cast<uint64_t>(std::numeric_limits<T>::max()),
                                          static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  if (ec != std::errc() || p != value.data() + value.size() || v < static_cast<int64_t>(min) ||
      static_cast<uint64_t>(v) > max) {
    return absl::InvalidArgumentError(fmt::format("{}: '{}' is not a number >= {}", key, value, min));
  }
  *out = static_cast<T>(v);
  return absl::OkStatus();
}

absl::Status parse_ms(std::string_view key, std::string_view value, io::Duration* out) {
  int64_t ms = 0;
  if (absl::Status s = parse_int<int64_t>(key, value, 0, &ms); !s.ok()) return s;
  *out = std::chrono::milliseconds(ms);
  return absl::OkStatus();
}

absl::Status parse_bool(std::string_view key, std::string_view value, bool* out) {
  if (value == "true") {
    *out = true;
  } else if (value == "false") {
    *out = false;
  } else {
    return absl::InvalidArgumentError(fmt::format("{}: '{}' is not true or false", key, value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status set_client_property(std::string_view key, std::string_view value, client::ClientOptions* c,
                                 bool* known) {
  *known = true;
  if (key == "bootstrap.servers") return parse_bootstrap(value, c);
  if (key == "client.id") {
    c->client_id = std::string(value);
    return absl::OkStatus();
  }
  if (key == "request.timeout.ms") return parse_ms(key, value, &c->request_timeout);
  if (key == "retry.backoff.ms") return parse_ms(key, value, &c->retry_backoff);
  if (key == "allow.auto.create.topics") return parse_bool(key, value, &c->allow_auto_create_topics);
  // SASL PLAIN and SCRAM-SHA-256/512 (librdkafka's sasl.mechanisms,
  // sasl.username and sasl.password, or the Java clients' sasl.mechanism
  // and sasl.jaas.config; credentials imply SASL) and TLS (the ssl.* names
  // of both).
  if (key == "security.protocol") {
    if (value != "PLAINTEXT" && value != "SSL" && value != "SASL_PLAINTEXT" && value != "SASL_SSL") {
      return absl::InvalidArgumentError(
          fmt::format("security.protocol={}: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", value));
    }
    const bool sasl = value.starts_with("SASL_");
    if (!sasl) c->sasl.reset();
    if (sasl && !c->sasl.has_value()) c->sasl.emplace();
    c->use_tls = value.ends_with("SSL");
    return absl::OkStatus();
  }
  if (key.starts_with("ssl.") || key == "enable.ssl.certificate.verification") {
    bool tls_known = false;
    absl::Status s = net::tls::set_setting(&c->tls_settings, key, value, &tls_known);
    if (!tls_known) return absl::InvalidArgumentError(fmt::format("{}: not supported", key));
    return s;
  }
  if (key == "sasl.mechanism" || key == "sasl.mechanisms") {
    if (value != net::kSaslPlain && !net::scram_mechanism(value).has_value()) {
      return absl::InvalidArgumentError(
          fmt::format("{}={}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 are supported", key, value));
    }
    c->sasl_mechanism = std::string(value);
    return absl::OkStatus();
  }
  if (key == "sasl.username" || key == "sasl.password") {
    if (!c->sasl.has_value()) c->sasl.emplace();
    (key == "sasl.username" ? c->sasl->username : c->sasl->password) = std::string(value);
    return absl::OkStatus();
  }
  if (key == "sasl.jaas.config") {
    // A PlainLoginModule or a ScramLoginModule entry; sasl.mechanism says
    // which mechanism logs in.
    absl::StatusOr<net::SaslCredentials> credentials = net::parse_plain_jaas_credentials(value);
    if (!credentials.ok() && value.find(net::kScramLoginModule) != std::string_view::npos) {
      credentials = net::parse_jaas_credentials(value, net::kScramSha256);
    }
    if (!credentials.ok()) {
      return absl::InvalidArgumentError(fmt::format("sasl.jaas.config: {}", std::string(credentials.status().message())));
    }
    c->sasl = std::move(*credentials);
    return absl::OkStatus();
  }
  *known = false;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> read_properties_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("cannot read {}", path));
  std::vector<std::pair<std::string, std::string>> out;
  auto trim = [](std::string_view t) {
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
    return std::string(t);
  };
  std::string line;
  while (std::getline(in, line)) {
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#' || t[0] == '!') continue;
    const size_t eq = t.find_first_of("=:");
    if (eq == std::string::npos) return absl::InvalidArgumentError(fmt::format("{}: '{}' is not key=value", path, t));
    out.emplace_back(trim(std::string_view(t).substr(0, eq)), trim(std::string_view(t).substr(eq + 1)));
  }
  return out;
}

int run_client_tool(std::string_view name, std::function<io::Task<int>(io::Context&)> main) {
  // Answers are read in pieces and joined into one frame: keep those
  // blocks on the heap and the freed heap mapped (as `brook server` does),
  // rather than have glibc map, unmap and fault in large blocks again on
  // every answer.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  io::real::RealNodeOptions options;
  options.log_level_min = io::LogLevel::kWarn;
  absl::StatusOr<std::unique_ptr<io::real::RealNode>> node = io::real::RealNode::create(options);
  if (!node.ok()) {
    std::fprintf(stderr, "brook %.*s: %s\n", static_cast<int>(name.size()), name.data(),
                 node.status().ToString().c_str());
    return 1;
  }
  bool done = false;
  int code = 0;
  (*node)->scope().spawn(run_main(&main, &(*node)->context(), &code, &done));
  (*node)->run_until([&] { return done; });
  return code;
}

absl::StatusOr<std::string> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("cannot open {}", path));
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return absl::DataLossError(fmt::format("reading {} failed", path));
  return s.str();
}

absl::Status finish_client_options(client::ClientOptions* c) {
  if (c->sasl.has_value()) c->sasl->mechanism = c->sasl_mechanism;
  if (!c->use_tls) {
    c->tls.reset();
    return absl::OkStatus();
  }
  absl::StatusOr<std::shared_ptr<const net::tls::Context>> context = net::tls::Context::client(c->tls_settings, read_whole_file);
  if (!context.ok()) return absl::InvalidArgumentError(fmt::format("TLS: {}", std::string(context.status().message())));
  c->tls = std::move(*context);
  return absl::OkStatus();
}

absl::Status parse_bootstrap(std::string_view text, client::ClientOptions* out) {
  out->bootstrap.clear();
  for (absl::string_view part : absl::StrSplit(absl::string_view(text.data(), text.size()), ',', absl::SkipEmpty())) {
    absl::StatusOr<io::Address> a = io::Address::parse(std::string_view(part.data(), part.size()));
    if (!a.ok()) return absl::InvalidArgumentError(fmt::format("bootstrap server '{}': {}", std::string(part), std::string(a.status().message())));
    out->bootstrap.push_back(*a);
  }
  if (out->bootstrap.empty()) return absl::InvalidArgumentError("no bootstrap server");
  return absl::OkStatus();
}

bool split_property(std::string_view text, std::string* key, std::string* value) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) return false;
  *key = std::string(text.substr(0, eq));
  *value = std::string(text.substr(eq + 1));
  return true;
}

absl::Status set_producer_property(std::string_view key, std::string_view value, client::ProducerConfig* c) {
  bool known = false;
  if (absl::Status s = set_client_property(key, value, &c->client, &known); known) return s;
  if (key == "acks") {
    if (value == "all" || value == "-1") {
      c->acks = -1;
    } else if (value == "0" || value == "1") {
      c->acks = static_cast<int16_t>(value[0] - '0');
    } else {
      return absl::InvalidArgumentError(fmt::format("acks: '{}' is not 0, 1, -1 or all", value));
    }
    return absl::OkStatus();
  }
  if (key == "linger.ms") return parse_ms(key, value, &c->linger);
  if (key == "delivery.timeout.ms") return parse_ms(key, value, &c->delivery_timeout);
  if (key == "max.block.ms") return parse_ms(key, value, &c->max_block);
  if (key == "batch.size") return parse_int<size_t>(key, value, 1, &c->batch_size);
  if (key == "max.request.size") return parse_int<size_t>(key, value, 1, &c->max_request_size);
  if (key == "buffer.memory") return parse_int<size_t>(key, value, 1, &c->buffer_memory);
  if (key == "max.in.flight.requests.per.connection") return parse_int<int>(key, value, 1, &c->max_in_flight);
  if (key == "enable.idempotence") return parse_bool(key, value, &c->enable_idempotence);
  if (key == "compression.type") {
    for (codec::Compression codec : {codec::Compression::kNone, codec::Compression::kGzip, codec::Compression::kSnappy,
                                     codec::Compression::kLz4, codec::Compression::kZstd}) {
      if (codec::compression_name(codec) == value) {
        c->compression = codec;
        return absl::OkStatus();
      }
    }
    return absl::InvalidArgumentError(fmt::format("compression.type: '{}' is not none, gzip, snappy, lz4 or zstd", value));
  }
  return absl::NotFoundError(fmt::format("unknown producer property '{}'", key));
}

absl::Status set_consumer_property(std::string_view key, std::string_view value, client::ConsumerConfig* c) {
  bool known = false;
  if (absl::Status s = set_client_property(key, value, &c->client, &known); known) return s;
  if (key == "fetch.max.wait.ms") return parse_ms(key, value, &c->fetch_max_wait);
  if (key == "fetch.min.bytes") return parse_int<int32_t>(key, value, 0, &c->fetch_min_bytes);
  if (key == "fetch.max.bytes") return parse_int<int32_t>(key, value, 1, &c->fetch_max_bytes);
  if (key == "max.partition.fetch.bytes") return parse_int<int32_t>(key, value, 1, &c->max_partition_fetch_bytes);
  if (key == "max.poll.records") return parse_int<size_t>(key, value, 1, &c->max_poll_records);
  if (key == "check.crcs") return parse_bool(key, value, &c->check_crcs);
  if (key == "isolation.level") {
    if (value == "read_uncommitted") {
      c->isolation = client::IsolationLevel::kReadUncommitted;
    } else if (value == "read_committed") {
      c->isolation = client::IsolationLevel::kReadCommitted;
    } else {
      return absl::InvalidArgumentError(fmt::format("isolation.level: '{}'", value));
    }
    return absl::OkStatus();
  }
  if (key == "auto.offset.reset") {
    if (value == "earliest") {
      c->auto_offset_reset = client::OffsetReset::kEarliest;
    } else if (value == "latest") {
      c->auto_offset_reset = client::OffsetReset::kLatest;
    } else if (value == "none") {
      c->auto_offset_reset = client::OffsetReset::kNone;
    } else {
      return absl::InvalidArgumentError(fmt::format("auto.offset.reset: '{}'", value));
    }
    return absl::OkStatus();
  }
  return absl::NotFoundError(fmt::format("unknown consumer property '{}'", key));
}

}  // namespace brook::tools
