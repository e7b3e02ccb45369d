// net/tls/tls_test.cc
//
// TLS over simulated connections: data goes through both ways intact and
// closes as a stream does; an untrusted certificate, a host name the
// server's certificate does not name, a client without the certificate a
// server requires and versions with nothing in common fail the handshake
// with the reason; key stores load from PEM text, PEM files and PKCS12
// files, and a JKS file or a wrong password is refused with a clear error.
#include "net/tls/tls.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "io/scope.h"
#include "io/sync.h"
#include "net/kafka/messages/api_versions_request.h"
#include "net/kafka/messages/api_versions_response.h"
#include "net/kafka/rpc.h"
#include "net/tls/test_certificates.h"
#include "sim/world.h"

namespace brook::net::tls {
namespace {

using namespace std::chrono_literals;
namespace certs = testing;

constexpr uint16_t kPort = 9443;

// The files tests name are read as the tools read them.
absl::StatusOr<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("no such file");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Settings server_settings() {
  Settings s;
  s.keystore_certificate_chain = std::string(certs::kServerCertificate);
  s.keystore_key = std::string(certs::kServerKey);
  return s;
}

Settings client_settings() {
  Settings s;
  s.truststore_certificates = std::string(certs::kCaCertificate);
  return s;
}

std::shared_ptr<const Context> must(absl::StatusOr<std::shared_ptr<const Context>> c) {
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

// What each side of one connection saw.
struct Outcome {
  std::optional<absl::Status> server_handshake;
  std::optional<absl::Status> client_handshake;
  std::string server_read;  // what the server read until EOF or an error
  absl::Status server_read_status;
  std::string client_read;
  absl::Status client_read_status;
  bool server_done = false;
  bool client_done = false;
  uint64_t trace_hash = 0;  // the simulation's, at the end
};

io::Task<void> read_all(io::Connection* c, std::string* out, absl::Status* status, size_t until) {
  while (out->size() < until) {
    absl::StatusOr<io::Buffer> b = co_await c->read_some(64 * 1024);
    if (!b.ok()) {
      *status = b.status();
      co_return;
    }
    if (b->empty()) co_return;
    out->append(b->view());
  }
}

// `payload` is written by the client in parts of `part` bytes; the server
// echoes it back and closes.
io::Task<void> run_server(io::Context* ctx, io::Address address, const Context* tls, size_t bytes, Outcome* o) {
  auto listener = co_await ctx->network().listen(address);
  BROOK_ASSERT(listener.ok());
  auto conn = co_await (*listener)->accept();
  BROOK_ASSERT(conn.ok());
  absl::StatusOr<std::unique_ptr<io::Connection>> secure = co_await accept(tls, &*conn);
  o->server_handshake = secure.status();
  if (secure.ok()) {
    co_await read_all(secure->get(), &o->server_read, &o->server_read_status, bytes);
    if (o->server_read_status.ok() && !o->server_read.empty()) {
      absl::Status s = co_await (*secure)->write_all(io::BufferChain(io::Buffer::copy_of(o->server_read)));
      BROOK_ASSERT(s.ok());
    }
    co_await ctx->clock().sleep_for(10ms);
    (*secure)->close();
  }
  o->server_done = true;
  co_await ctx->clock().sleep_for(1000h);  // keeps the listener
}

io::Task<void> run_client(io::Context* ctx, io::Address address, const Context* tls, std::string host,
                          std::string payload, size_t part, Outcome* o) {
  co_await ctx->clock().sleep_for(1ms);
  auto conn = co_await ctx->network().connect(address);
  BROOK_ASSERT(conn.ok());
  absl::StatusOr<std::unique_ptr<io::Connection>> secure = co_await connect(tls, &*conn, &host);
  o->client_handshake = secure.status();
  if (secure.ok()) {
    io::BufferChain chain;
    for (size_t i = 0; i < payload.size(); i += part) {
      chain.append(io::Buffer::copy_of(std::string_view(payload).substr(i, part)));
    }
    if ((co_await (*secure)->write_all(std::move(chain))).ok()) {
      co_await read_all(secure->get(), &o->client_read, &o->client_read_status, payload.size() + 1);
    }
  }
  o->client_done = true;
}

Outcome exchange(const Context* server, const Context* client, std::string host, std::string payload,
                 size_t part = 1000, uint64_t seed = 1) {
  sim::World world(seed);
  sim::Node& a = world.add_node();
  sim::Node& b = world.add_node();
  Outcome o;
  const io::Address address = b.address(kPort);
  const size_t bytes = payload.size();
  b.start([&](io::Context& ctx) { return run_server(&ctx, address, server, bytes, &o); });
  a.start([&](io::Context& ctx) { return run_client(&ctx, address, client, host, payload, part, &o); });
  EXPECT_TRUE(world.run_until([&] { return o.server_done && o.client_done; }, 10min));
  o.trace_hash = world.trace_hash();
  return o;
}

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7919 + i / 251) & 0xff);
  return s;
}

TEST(TlsTest, CarriesBytesBothWaysAndEndsLikeAStream) {
  auto server = must(Context::server(server_settings(), read_file));
  auto client = must(Context::client(client_settings(), read_file));
  // Small parts gathered into records, and a large transfer of many
  // records and flushes; then the server's close reads as end of stream.
  for (auto [size, part] : {std::pair<size_t, size_t>{1, 1}, {100'000, 7}, {3'000'000, 200'000}}) {
    const std::string payload = pattern(size);
    Outcome o = exchange(server.get(), client.get(), "localhost", payload, part);
    ASSERT_TRUE(o.server_handshake.has_value() && o.server_handshake->ok()) << *o.server_handshake;
    ASSERT_TRUE(o.client_handshake->ok()) << *o.client_handshake;
    EXPECT_TRUE(o.server_read == payload) << size;
    EXPECT_TRUE(o.client_read == payload) << size;
    EXPECT_TRUE(o.client_read_status.ok()) << o.client_read_status;
  }
}

// OpenSSL's randomness changes the ciphertext, never its sizes (TLS 1.3,
// Ed25519 signatures): the same seed gives the same run, event for event.
TEST(TlsTest, ASeedDecidesTheRun) {
  Settings s = server_settings();
  s.client_auth = ClientAuth::kRequired;
  s.truststore_certificates = std::string(certs::kCaCertificate);
  auto server = must(Context::server(s, read_file));
  Settings c = client_settings();
  c.keystore_certificate_chain = std::string(certs::kClientCertificate);
  c.keystore_key = std::string(certs::kClientKey);
  auto client = must(Context::client(c, read_file));
  const std::string payload = pattern(200'000);
  const Outcome a = exchange(server.get(), client.get(), "localhost", payload, 3000, 7);
  const Outcome b = exchange(server.get(), client.get(), "localhost", payload, 3000, 7);
  const Outcome other = exchange(server.get(), client.get(), "localhost", payload, 3000, 8);
  EXPECT_TRUE(a.client_read == payload);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_NE(a.trace_hash, other.trace_hash);
}

TEST(TlsTest, AClientRefusesAServerItDoesNotTrust) {
  Settings s;
  s.keystore_certificate_chain = std::string(certs::kOtherCertificate);
  s.keystore_key = std::string(certs::kOtherKey);
  auto server = must(Context::server(s, read_file));
  auto client = must(Context::client(client_settings(), read_file));
  Outcome o = exchange(server.get(), client.get(), "localhost", "hello");
  EXPECT_EQ(o.client_handshake->code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(o.client_handshake->message().find("certificate verification"), std::string::npos)
      << *o.client_handshake;
  EXPECT_FALSE(o.server_handshake->ok());  // told by the client's alert
  EXPECT_TRUE(o.server_read.empty());

  // Trusting no one's certificate in particular (enable.ssl.certificate.verification=false).
  Settings lax = client_settings();
  lax.verify_certificate = false;
  auto lax_client = must(Context::client(lax, read_file));
  o = exchange(server.get(), lax_client.get(), "localhost", "hello");
  EXPECT_TRUE(o.client_handshake->ok()) << *o.client_handshake;
  EXPECT_EQ(o.client_read, "hello");
}

TEST(TlsTest, TheServerCertificateMustNameTheHost) {
  auto server = must(Context::server(server_settings(), read_file));
  auto client = must(Context::client(client_settings(), read_file));
  for (std::string host : {"localhost", "127.0.0.1"}) {
    Outcome o = exchange(server.get(), client.get(), host, "x");
    EXPECT_TRUE(o.client_handshake->ok()) << host << ": " << *o.client_handshake;
  }
  for (std::string host : {"broker1.example", "127.0.0.2"}) {
    Outcome o = exchange(server.get(), client.get(), host, "x");
    EXPECT_EQ(o.client_handshake->code(), absl::StatusCode::kUnauthenticated) << host;
    EXPECT_NE(o.client_handshake->message().find("mismatch"), std::string::npos) << *o.client_handshake;
  }
  // ssl.endpoint.identification.algorithm= (empty): the chain is still checked.
  Settings no_host = client_settings();
  no_host.verify_hostname = false;
  auto client2 = must(Context::client(no_host, read_file));
  Outcome o = exchange(server.get(), client2.get(), "broker1.example", "x");
  EXPECT_TRUE(o.client_handshake->ok()) << *o.client_handshake;
}

// The three clients a server that asks for certificates meets: one without
// a certificate (refused when `required`, served when `requested`), one
// with a trusted certificate (served), one with a certificate from outside
// the trust store (refused either way).
void client_certificate_checks(ClientAuth auth) {
  Settings s = server_settings();
  s.client_auth = auth;
  s.truststore_certificates = std::string(certs::kCaCertificate);
  auto server = must(Context::server(s, read_file));

  auto anonymous = must(Context::client(client_settings(), read_file));
  Outcome o = exchange(server.get(), anonymous.get(), "localhost", "hello");
  if (auth == ClientAuth::kRequired) {
    EXPECT_EQ(o.server_handshake->code(), absl::StatusCode::kUnauthenticated) << *o.server_handshake;
    EXPECT_TRUE(o.server_read.empty());
    EXPECT_TRUE(o.client_read.empty());  // TLS 1.3: the client learns it on reading
  } else {
    EXPECT_TRUE(o.server_handshake->ok()) << *o.server_handshake;
    EXPECT_EQ(o.client_read, "hello");
  }

  Settings with_cert = client_settings();
  with_cert.keystore_certificate_chain = std::string(certs::kClientCertificate);
  with_cert.keystore_key = std::string(certs::kClientKey);
  auto known = must(Context::client(with_cert, read_file));
  o = exchange(server.get(), known.get(), "localhost", "hello");
  EXPECT_TRUE(o.server_handshake->ok()) << *o.server_handshake;
  EXPECT_EQ(o.client_read, "hello");

  Settings stranger = client_settings();
  stranger.keystore_certificate_chain = std::string(certs::kOtherCertificate);
  stranger.keystore_key = std::string(certs::kOtherKey);
  auto unknown = must(Context::client(stranger, read_file));
  o = exchange(server.get(), unknown.get(), "localhost", "hello");
  EXPECT_FALSE(o.server_handshake->ok());
  EXPECT_TRUE(o.server_read.empty());
}

TEST(TlsTest, ARequiredClientCertificate) { client_certificate_checks(ClientAuth::kRequired); }

TEST(TlsTest, ARequestedClientCertificate) { client_certificate_checks(ClientAuth::kRequested); }

TEST(TlsTest, VersionsWithNothingInCommon) {
  Settings s = server_settings();
  s.enabled_protocols = {"TLSv1.2"};
  auto server = must(Context::server(s, read_file));
  Settings c = client_settings();
  c.enabled_protocols = {"TLSv1.3"};
  auto client = must(Context::client(c, read_file));
  Outcome o = exchange(server.get(), client.get(), "localhost", "x");
  EXPECT_EQ(o.client_handshake->code(), absl::StatusCode::kUnauthenticated);
  EXPECT_FALSE(o.server_handshake->ok());

  // TLS 1.2 on both sides works.
  c.enabled_protocols = {"TLSv1.2", "TLSv1.3"};
  auto client12 = must(Context::client(c, read_file));
  o = exchange(server.get(), client12.get(), "localhost", "x");
  EXPECT_TRUE(o.client_handshake->ok()) << *o.client_handshake;
  EXPECT_EQ(o.client_read, "x");
}

io::Task<absl::StatusOr<io::BufferChain>> unanswered() { co_return absl::UnavailableError("no request expected"); }

// net::serve on a TLS listener with connections.max.idle.ms at 5 s.
io::Task<void> serve_tls(io::Context* ctx, io::Address address, const Context* tls) {
  auto listener = co_await ctx->network().listen(address);
  BROOK_ASSERT(listener.ok());
  ServeOptions options;
  options.clock = &ctx->clock();
  options.idle_timeout = 5s;
  options.tls = tls;
  (void)co_await serve(**listener, [](RequestFrame) { return unanswered(); }, options);
}

// Connects, sends nothing, and notes how long until the server closes.
io::Task<void> silent_client(io::Context* ctx, io::Address address, std::optional<io::Duration>* closed_after) {
  co_await ctx->clock().sleep_for(1ms);
  const io::Instant start = ctx->clock().now();
  auto conn = co_await ctx->network().connect(address);
  BROOK_ASSERT(conn.ok());
  while (true) {
    absl::StatusOr<io::Buffer> b = co_await (*conn)->read_some(4096);
    if (!b.ok() || b->empty()) break;
  }
  *closed_after = ctx->clock().now() - start;
}

// connections.max.idle.ms covers the handshake: a client that connects to
// a TLS listener and never starts one is closed when the time runs out.
TEST(TlsTest, AClientThatNeverShakesHandsIsClosedWhenIdleTooLong) {
  auto server = must(Context::server(server_settings(), read_file));
  sim::World world(1);
  sim::Node& a = world.add_node();
  sim::Node& b = world.add_node();
  const io::Address address = b.address(kPort);
  std::optional<io::Duration> closed_after;
  b.start([&](io::Context& ctx) { return serve_tls(&ctx, address, server.get()); });
  a.start([&](io::Context& ctx) { return silent_client(&ctx, address, &closed_after); });
  ASSERT_TRUE(world.run_until([&] { return closed_after.has_value(); }, 1min));
  EXPECT_GE(*closed_after, 5s);
  EXPECT_LT(*closed_after, 6s);
}

// A connection that keeps a copy of what it reads once `recording` is set.
class Recording final : public io::Connection {
 public:
  explicit Recording(std::unique_ptr<io::Connection> inner, std::string* seen, const bool* recording)
      : inner_(std::move(inner)), seen_(seen), recording_(recording) {}
  io::Task<absl::StatusOr<io::Buffer>> read_some(size_t bytes_max) override {
    absl::StatusOr<io::Buffer> b = co_await inner_->read_some(bytes_max);
    if (b.ok() && *recording_) seen_->append(b->view());
    co_return b;
  }
  io::Task<absl::Status> write_all(io::BufferChain data) override { return inner_->write_all(std::move(data)); }
  void close() override { inner_->close(); }
  io::Address local_address() const override { return inner_->local_address(); }
  io::Address peer_address() const override { return inner_->peer_address(); }

 private:
  std::unique_ptr<io::Connection> inner_;
  std::string* seen_;
  const bool* recording_;
};

struct IdleClose {
  bool done = false;
  bool handshake_ok = false;
  std::string after_handshake;  // the ciphertext that came after it
};

// Shakes hands over TLS 1.2 (whose records show their type; nothing
// follows its handshake unasked), sends nothing, and keeps what arrives
// until the server closes.
io::Task<void> idle_tls_client(io::Context* ctx, io::Address address, const Context* tls, IdleClose* out) {
  co_await ctx->clock().sleep_for(1ms);
  auto conn = co_await ctx->network().connect(address);
  BROOK_ASSERT(conn.ok());
  bool recording = false;
  std::unique_ptr<io::Connection> wrapped =
      std::make_unique<Recording>(std::move(*conn), &out->after_handshake, &recording);
  const std::string host = "localhost";
  absl::StatusOr<std::unique_ptr<io::Connection>> secure = co_await connect(tls, &wrapped, &host);
  out->handshake_ok = secure.ok();
  if (secure.ok()) {
    recording = true;
    while (true) {
      absl::StatusOr<io::Buffer> b = co_await (*secure)->read_some(4096);
      if (!b.ok() || b->empty()) break;
    }
  }
  out->done = true;
}

// A server that ends a connection (here: idle past connections.max.idle.ms)
// sends close_notify first, as Kafka's does; a client then tells the end
// from a connection cut short (OpenSSL 3: "unexpected eof while reading").
std::shared_ptr<const Context> tls12_client() {
  Settings c = client_settings();
  c.enabled_protocols = {"TLSv1.2"};
  return must(Context::client(c, read_file));
}

// What reached idle_tls_client after its handshake is one record: an alert
// (type 21) of TLS 1.2 (3,3), encrypted.
void expect_one_alert(const IdleClose& out) {
  ASSERT_TRUE(out.handshake_ok);
  ASSERT_GE(out.after_handshake.size(), 5u);
  EXPECT_EQ(static_cast<uint8_t>(out.after_handshake[0]), 21);
  EXPECT_EQ(static_cast<uint8_t>(out.after_handshake[1]), 3);
  EXPECT_EQ(static_cast<uint8_t>(out.after_handshake[2]), 3);
  const size_t length =
      static_cast<uint8_t>(out.after_handshake[3]) * 256u + static_cast<uint8_t>(out.after_handshake[4]);
  EXPECT_EQ(out.after_handshake.size(), 5 + length);
}

TEST(TlsTest, AServerThatClosesAnIdleConnectionSendsCloseNotify) {
  auto server = must(Context::server(server_settings(), read_file));
  auto client = tls12_client();
  sim::World world(1);
  sim::Node& a = world.add_node();
  sim::Node& b = world.add_node();
  const io::Address address = b.address(kPort);
  IdleClose out;
  b.start([&](io::Context& ctx) { return serve_tls(&ctx, address, server.get()); });
  a.start([&](io::Context& ctx) { return idle_tls_client(&ctx, address, client.get(), &out); });
  ASSERT_TRUE(world.run_until([&] { return out.done; }, 1min));
  expect_one_alert(out);
}

// net::serve with ServeOptions::stopping set `stop_after` into the run; it
// answers ApiVersions after `answer_delay`.
struct Stopped {
  bool returned = false;
  absl::Status status;
  io::Duration returned_after{};  // from the start of serving
};

io::Task<absl::StatusOr<io::BufferChain>> answer_after(io::Clock* clock, io::Duration delay, RequestFrame frame) {
  co_await clock->sleep_for(delay);
  co_return encode_response(ApiVersionsResponse{}, frame.header);
}

io::Task<void> set_after(io::Clock* clock, io::Duration after, io::Event* event) {
  co_await clock->sleep_for(after);
  event->set();
}

io::Task<void> serve_then_stop(io::Context* ctx, io::Address address, const Context* tls, io::Duration answer_delay,
                               io::Duration stop_after, Stopped* out) {
  auto listener = co_await ctx->network().listen(address);
  BROOK_ASSERT(listener.ok());
  const io::Instant start = ctx->clock().now();
  io::Event stopping;
  io::TaskScope timer(ctx->executor());
  timer.spawn(set_after(&ctx->clock(), stop_after, &stopping));
  ServeOptions options;
  options.clock = &ctx->clock();
  options.idle_timeout = 5s;
  options.tls = tls;
  options.stopping = &stopping;
  io::Clock* clock = &ctx->clock();
  RequestHandler handler = [clock, answer_delay](RequestFrame f) {
    return answer_after(clock, answer_delay, std::move(f));
  };
  out->status = co_await serve(**listener, std::move(handler), options);
  out->returned_after = ctx->clock().now() - start;
  out->returned = true;
}

// A server that stops ends its connections with close_notify too, rather
// than cutting them off, as Kafka's broker closes its channels at shutdown.
TEST(TlsTest, AServerThatStopsSendsCloseNotify) {
  auto server = must(Context::server(server_settings(), read_file));
  auto client = tls12_client();
  sim::World world(1);
  sim::Node& a = world.add_node();
  sim::Node& b = world.add_node();
  const io::Address address = b.address(kPort);
  IdleClose out;
  Stopped stopped;
  b.start([&](io::Context& ctx) { return serve_then_stop(&ctx, address, server.get(), 0s, 2s, &stopped); });
  a.start([&](io::Context& ctx) { return idle_tls_client(&ctx, address, client.get(), &out); });
  ASSERT_TRUE(world.run_until([&] { return out.done && stopped.returned; }, 1min));
  EXPECT_TRUE(stopped.status.ok()) << stopped.status;
  EXPECT_LT(stopped.returned_after, 3s);  // at the stop, not the 5 s idle limit
  expect_one_alert(out);
}

struct InFlight {
  bool done = false;
  std::string received;  // everything read until the end of the stream
  bool clean_end = false;
};

// Sends one ApiVersions request at 1 s and reads until the server closes.
io::Task<void> one_request(io::Context* ctx, io::Address address, InFlight* out) {
  co_await ctx->clock().sleep_for(1s);
  auto conn = co_await ctx->network().connect(address);
  BROOK_ASSERT(conn.ok());
  absl::StatusOr<io::BufferChain> request = encode_request(ApiVersionsRequest{}, 0, 7, std::string("c"));
  BROOK_ASSERT(request.ok());
  const absl::Status written = co_await (*conn)->write_all(std::move(*request));
  BROOK_ASSERT(written.ok());
  while (true) {
    absl::StatusOr<io::Buffer> b = co_await (*conn)->read_some(4096);
    if (!b.ok()) break;
    if (b->empty()) {
      out->clean_end = true;
      break;
    }
    out->received.append(b->view());
  }
  out->done = true;
}

// A request in hand when the server stops is answered before its connection
// ends: the stop does not turn into a lost response.
TEST(TlsTest, AServerThatStopsAnswersTheRequestInHandFirst) {
  sim::World world(1);
  sim::Node& a = world.add_node();
  sim::Node& b = world.add_node();
  const io::Address address = b.address(kPort);
  InFlight out;
  Stopped stopped;
  // The request arrives at about 1 s, its answer at about 3 s; the stop is at 2 s.
  b.start([&](io::Context& ctx) { return serve_then_stop(&ctx, address, nullptr, 2s, 2s, &stopped); });
  a.start([&](io::Context& ctx) { return one_request(&ctx, address, &out); });
  ASSERT_TRUE(world.run_until([&] { return out.done && stopped.returned; }, 1min));
  EXPECT_TRUE(stopped.status.ok()) << stopped.status;
  EXPECT_GE(stopped.returned_after, 3s);
  EXPECT_TRUE(out.clean_end);
  ASSERT_GE(out.received.size(), 4u);
  const size_t length = (static_cast<uint8_t>(out.received[0]) << 24) | (static_cast<uint8_t>(out.received[1]) << 16) |
                        (static_cast<uint8_t>(out.received[2]) << 8) | static_cast<uint8_t>(out.received[3]);
  EXPECT_EQ(out.received.size(), 4 + length);
}

// ssl.cipher.suites is all that is enabled, as in Java: a server listing
// only TLS 1.3 suites does not fall back on OpenSSL's TLS 1.2 defaults.
TEST(TlsTest, CipherSuitesAreAllThatIsEnabled) {
  Settings s = server_settings();
  s.cipher_suites = {"TLS_AES_256_GCM_SHA384"};
  auto server = must(Context::server(s, read_file));

  Settings c = client_settings();
  c.cipher_suites = {"TLS_AES_256_GCM_SHA384"};
  auto same = must(Context::client(c, read_file));
  Outcome o = exchange(server.get(), same.get(), "localhost", "x");
  EXPECT_TRUE(o.client_handshake->ok()) << *o.client_handshake;
  EXPECT_EQ(o.client_read, "x");

  c.cipher_suites = {"TLS_AES_128_GCM_SHA256"};
  auto other = must(Context::client(c, read_file));
  o = exchange(server.get(), other.get(), "localhost", "x");
  EXPECT_EQ(o.client_handshake->code(), absl::StatusCode::kUnauthenticated);
  EXPECT_FALSE(o.server_handshake->ok());

  // A TLS 1.2 client finds no suite at this server.
  c = client_settings();
  c.enabled_protocols = {"TLSv1.2"};
  auto old = must(Context::client(c, read_file));
  o = exchange(server.get(), old.get(), "localhost", "x");
  EXPECT_EQ(o.client_handshake->code(), absl::StatusCode::kUnauthenticated);
  EXPECT_FALSE(o.server_handshake->ok());

  // Only a TLS 1.2 suite on the client: TLS 1.2 with it.
  c = client_settings();
  c.cipher_suites = {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"};
  auto twelve = must(Context::client(c, read_file));
  auto open_server = must(Context::server(server_settings(), read_file));
  o = exchange(open_server.get(), twelve.get(), "localhost", "x");
  EXPECT_TRUE(o.client_handshake->ok()) << *o.client_handshake;
  EXPECT_EQ(o.client_read, "x");

  // Suites for no enabled version are refused when the context is made.
  c.cipher_suites = {"TLS_AES_128_GCM_SHA256"};
  c.enabled_protocols = {"TLSv1.2"};
  EXPECT_EQ(Context::client(c, read_file).status().code(), absl::StatusCode::kInvalidArgument);
  c.cipher_suites = {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"};
  c.enabled_protocols = {"TLSv1.3"};
  EXPECT_EQ(Context::client(c, read_file).status().code(), absl::StatusCode::kInvalidArgument);
}

class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("brook_tls_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, std::string_view bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  // A PKCS12 file holding the server's key and certificate, and the CA.
  std::string pkcs12(const std::string& name, const char* password) {
    BIO* kb = BIO_new_mem_buf(certs::kServerKey.data(), static_cast<int>(certs::kServerKey.size()));
    EVP_PKEY* key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
    BIO* cb = BIO_new_mem_buf(certs::kServerCertificate.data(), static_cast<int>(certs::kServerCertificate.size()));
    X509* cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
    BIO* ab = BIO_new_mem_buf(certs::kCaCertificate.data(), static_cast<int>(certs::kCaCertificate.size()));
    X509* ca = PEM_read_bio_X509(ab, nullptr, nullptr, nullptr);
    STACK_OF(X509)* others = sk_X509_new_null();
    sk_X509_push(others, ca);
    PKCS12* p12 = PKCS12_create(password, "brook", key, cert, others, 0, 0, 0, 0, 0);
    EXPECT_NE(p12, nullptr);
    unsigned char* der = nullptr;
    const int n = i2d_PKCS12(p12, &der);
    const std::string path = write(name, std::string_view(reinterpret_cast<const char*>(der), n));
    OPENSSL_free(der);
    PKCS12_free(p12);
    sk_X509_pop_free(others, X509_free);
    X509_free(cert);
    EVP_PKEY_free(key);
    BIO_free(kb);
    BIO_free(cb);
    BIO_free(ab);
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(Files, KeyStoresFromPemAndPkcs12Files) {
  auto client = must(Context::client(client_settings(), read_file));
  // PEM: the key and the chain in one file; the trust store a PEM file.
  Settings pem;
  pem.keystore_location =
      write("server.pem", std::string(certs::kServerKey) + std::string(certs::kServerCertificate));
  auto server = must(Context::server(pem, read_file));
  Settings trusting;
  trusting.truststore_location = write("ca.pem", certs::kCaCertificate);
  auto client_from_file = must(Context::client(trusting, read_file));
  Outcome o = exchange(server.get(), client_from_file.get(), "localhost", "pem");
  EXPECT_EQ(o.client_read, "pem");

  // PKCS12 with its password (declared JKS, as keytool's files are).
  Settings p12;
  p12.keystore_location = pkcs12("server.p12", "secret");
  p12.keystore_password = "secret";
  server = must(Context::server(p12, read_file));
  o = exchange(server.get(), client.get(), "localhost", "p12");
  EXPECT_EQ(o.client_read, "p12");

  // The PKCS12 file as a trust store (its CA certificate).
  Settings p12_trust;
  p12_trust.truststore_location = p12.keystore_location;
  p12_trust.truststore_password = "secret";
  auto client_p12 = must(Context::client(p12_trust, read_file));
  o = exchange(server.get(), client_p12.get(), "localhost", "trusted");
  EXPECT_EQ(o.client_read, "trusted");

  // librdkafka's separate certificate and key files, for a client.
  Settings s = server_settings();
  s.client_auth = ClientAuth::kRequired;
  s.truststore_certificates = std::string(certs::kCaCertificate);
  auto strict = must(Context::server(s, read_file));
  Settings files = client_settings();
  files.certificate_location = write("client.pem", certs::kClientCertificate);
  files.key_location = write("client.key", certs::kClientKey);
  auto client_with_files = must(Context::client(files, read_file));
  o = exchange(strict.get(), client_with_files.get(), "localhost", "files");
  EXPECT_EQ(o.client_read, "files");
}

TEST_F(Files, BadKeyStoresAreRefusedWithTheReason) {
  auto error = [](const Settings& s) {
    absl::StatusOr<std::shared_ptr<const Context>> c = Context::server(s, read_file);
    EXPECT_FALSE(c.ok());
    return c.ok() ? std::string() : std::string(c.status().message());
  };
  Settings none;
  EXPECT_NE(error(none).find("needs a key store"), std::string::npos);

  Settings jks;
  jks.keystore_location = write("server.jks", std::string("\xfe\xed\xfe\xed\x00\x00\x00\x02", 8));
  EXPECT_NE(error(jks).find("keytool -importkeystore"), std::string::npos) << error(jks);

  Settings wrong;
  wrong.keystore_location = pkcs12("server.p12", "secret");
  wrong.keystore_password = "not-it";
  EXPECT_NE(error(wrong).find("wrong password"), std::string::npos) << error(wrong);

  Settings missing;
  missing.keystore_location = (dir_ / "absent.p12").string();
  EXPECT_NE(error(missing).find("cannot be read"), std::string::npos);

  Settings mismatched = server_settings();
  mismatched.keystore_key = std::string(certs::kClientKey);
  EXPECT_NE(error(mismatched).find("does not match"), std::string::npos) << error(mismatched);

  Settings half = server_settings();
  half.keystore_key.clear();
  EXPECT_NE(error(half).find("go together"), std::string::npos);
}

TEST(TlsSettingsTest, ReadsKafkasNames) {
  std::map<std::string, std::string, std::less<>> props = {
      {"ssl.keystore.location", "/k.p12"},
      {"ssl.keystore.password", "kp"},
      {"ssl.key.password", "k"},
      {"ssl.truststore.location", "/t.p12"},
      {"ssl.client.auth", "required"},
      {"ssl.enabled.protocols", "TLSv1.3"},
      {"ssl.cipher.suites", "TLS_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"},
      {"ssl.endpoint.identification.algorithm", ""},
  };
  auto get = [&](std::string_view key) -> std::optional<std::string> {
    auto it = props.find(key);
    if (it == props.end()) return std::nullopt;
    return it->second;
  };
  absl::StatusOr<Settings> s = settings_from(get);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->keystore_location, "/k.p12");
  EXPECT_EQ(s->keystore_password, "kp");
  EXPECT_EQ(s->key_password, "k");
  EXPECT_EQ(s->truststore_location, "/t.p12");
  EXPECT_EQ(s->client_auth, ClientAuth::kRequired);
  EXPECT_EQ(s->enabled_protocols, std::vector<std::string>{"TLSv1.3"});
  EXPECT_EQ(s->cipher_suites.size(), 2u);
  EXPECT_FALSE(s->verify_hostname);

  // The cipher suites by standard name build a context.
  Settings c = client_settings();
  c.cipher_suites = s->cipher_suites;
  EXPECT_TRUE(Context::client(c, read_file).ok());
  c.cipher_suites = {"TLS_NO_SUCH_SUITE"};
  EXPECT_FALSE(Context::client(c, read_file).ok());
  c = client_settings();
  c.enabled_protocols = {"SSLv3"};
  EXPECT_FALSE(Context::client(c, read_file).ok());

  for (auto [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"ssl.client.auth", "always"},
           {"ssl.keystore.type", "BCFKS"},
           {"ssl.endpoint.identification.algorithm", "ldap"},
           {"enable.ssl.certificate.verification", "yes"}}) {
    props = {{key, value}};
    absl::StatusOr<Settings> bad = settings_from(get);
    EXPECT_FALSE(bad.ok()) << key;
    if (!bad.ok()) {
      EXPECT_NE(bad.status().message().find(key), std::string::npos) << bad.status();
    }
  }
  // librdkafka's name for the CA file.
  props = {{"ssl.ca.location", "/ca.pem"}};
  EXPECT_EQ(settings_from(get)->truststore_location, "/ca.pem");
}

}  // namespace
}  // namespace brook::net::tls
