// net/kafka/rpc.cc
#include "net/kafka/rpc.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/scope.h"
#include "io/when.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/sasl_authenticate_request.h"
#include "net/kafka/messages/sasl_authenticate_response.h"
#include "net/kafka/messages/sasl_handshake_request.h"
#include "net/kafka/messages/sasl_handshake_response.h"

namespace brook::net {

namespace {

constexpr size_t kIdleConnectionsMax = 4;
constexpr size_t kReadChunkBytes = 64 * 1024;
// How long a connection this side ends may take to say so (shutdown()).
constexpr io::Duration kShutdownTimeout = std::chrono::seconds(1);

// Reads one whole frame from `conn` through `reader`.
io::Task<absl::StatusOr<io::Buffer>> read_frame(io::Connection& conn, FrameReader& reader) {
  while (true) {
    absl::StatusOr<std::optional<io::Buffer>> frame = reader.next();
    if (!frame.ok()) co_return absl::DataLossError(frame.status().message());
    if (frame->has_value()) co_return std::move(**frame);
    absl::StatusOr<io::Buffer> bytes = co_await conn.read_some(kReadChunkBytes);
    if (!bytes.ok()) co_return bytes.status();
    if (bytes->empty()) co_return absl::UnavailableError("connection closed by the peer");
    reader.feed(std::move(*bytes));
  }
}

// One SaslAuthenticate v1 round: sends `token`, returns the server's.
io::Task<absl::StatusOr<std::string>> sasl_round(io::Connection* conn, FrameReader* reader, std::string_view token,
                                                 int32_t correlation_id, const std::string* client_id) {
  SaslAuthenticateRequest authenticate;
  authenticate.auth_bytes = io::Buffer::copy_of(token);
  absl::StatusOr<io::BufferChain> frame = encode_request(authenticate, 1, correlation_id, *client_id);
  if (!frame.ok()) co_return frame.status();
  if (absl::Status s = co_await conn->write_all(std::move(*frame)); !s.ok()) co_return s;
  absl::StatusOr<io::Buffer> bytes = co_await read_frame(*conn, *reader);
  if (!bytes.ok()) co_return bytes.status();
  absl::StatusOr<SaslAuthenticateResponse> answer = decode_response<SaslAuthenticateResponse>(*bytes, 1);
  if (!answer.ok()) co_return absl::DataLossError(answer.status().message());
  if (answer->error_code != 0) {
    co_return absl::UnauthenticatedError(fmt::format("SASL authentication: {}: {}", error_name(answer->error_code),
                                                     answer->error_message.value_or("")));
  }
  co_return std::string(answer->auth_bytes.view());
}

// SASL as a client: SaslHandshake v1 naming the mechanism, then its tokens
// in SaslAuthenticate v1 (the versions every broker since Kafka 1.0
// takes): PLAIN's one token, or SCRAM's two rounds (nonce from `random`).
io::Task<absl::Status> authenticate(io::Connection& conn, const SaslCredentials& credentials, io::Random* random,
                                    const std::string& client_id) {
  SaslHandshakeRequest handshake;
  handshake.mechanism = credentials.mechanism;
  constexpr int32_t kHandshakeId = 0x5a5a0001;
  constexpr int32_t kAuthenticateId = 0x5a5a0002;
  const std::optional<ScramMechanism> scram = scram_mechanism(credentials.mechanism);
  if (!scram.has_value() && credentials.mechanism != kSaslPlain) {
    co_return absl::InvalidArgumentError(fmt::format("SASL mechanism {} is not supported", credentials.mechanism));
  }
  if (scram.has_value() && random == nullptr) {
    co_return absl::FailedPreconditionError("SCRAM needs a random source for its nonce");
  }
  absl::StatusOr<io::BufferChain> frame = encode_request(handshake, 1, kHandshakeId, client_id);
  if (!frame.ok()) co_return frame.status();
  if (absl::Status s = co_await conn.write_all(std::move(*frame)); !s.ok()) co_return s;
  FrameReader reader(kSaslMaxReceiveBytes);
  absl::StatusOr<io::Buffer> bytes = co_await read_frame(conn, reader);
  if (!bytes.ok()) co_return bytes.status();
  absl::StatusOr<SaslHandshakeResponse> shook = decode_response<SaslHandshakeResponse>(*bytes, 1);
  if (!shook.ok()) co_return absl::DataLossError(shook.status().message());
  if (shook->error_code != 0) {
    co_return absl::UnauthenticatedError(fmt::format("SASL handshake: {} (the server offers {})",
                                                     error_name(shook->error_code),
                                                     fmt::join(shook->mechanisms, ", ")));
  }
  if (!scram.has_value()) {
    std::string token;
    token.push_back('\0');
    token += credentials.username;
    token.push_back('\0');
    token += credentials.password;
    absl::StatusOr<std::string> answer = co_await sasl_round(&conn, &reader, token, kAuthenticateId, &client_id);
    co_return answer.status();
  }
  ScramClient client(*scram, credentials.username, credentials.password, scram_nonce(*random));
  const std::string first = client.first_message();
  absl::StatusOr<std::string> server_first = co_await sasl_round(&conn, &reader, first, kAuthenticateId, &client_id);
  if (!server_first.ok()) co_return server_first.status();
  absl::StatusOr<std::string> final_message = client.final_message(*server_first);
  if (!final_message.ok()) co_return final_message.status();
  absl::StatusOr<std::string> server_final =
      co_await sasl_round(&conn, &reader, *final_message, kAuthenticateId + 1, &client_id);
  if (!server_final.ok()) co_return server_final.status();
  co_return client.check_server_final(*server_final);
}

// Connects to `address`, with TLS when `tls` is set, then authenticating
// with `sasl` when set.
io::Task<absl::StatusOr<std::unique_ptr<io::Connection>>> connect_to(io::Network* network,
                                                                    const io::Address* address,
                                                                    const tls::Context* tls,
                                                                    const SaslCredentials* sasl,
                                                                    io::Random* random,
                                                                    const std::string* client_id) {
  absl::StatusOr<std::unique_ptr<io::Connection>> conn = co_await network->connect(*address);
  if (!conn.ok()) co_return conn;
  if (tls != nullptr) {
    conn = co_await tls::connect(tls, &*conn, &address->host);
    if (!conn.ok()) co_return conn;
  }
  if (sasl == nullptr) co_return conn;
  if (absl::Status s = co_await authenticate(**conn, *sasl, random, *client_id); !s.ok()) {
    (*conn)->close();
    co_return s;
  }
  co_return conn;
}

}  // namespace

io::Task<absl::StatusOr<io::Buffer>> Peer::exchange_on(std::unique_ptr<io::Connection>* slot,
                                                       io::BufferChain frame,
                                                       int32_t correlation_id) {
  if (*slot == nullptr) {
    absl::StatusOr<std::unique_ptr<io::Connection>> conn =
        co_await connect_to(network_, &address_, tls_, sasl_, random_, &client_id_);
    if (!conn.ok()) co_return conn.status();
    *slot = std::move(*conn);
  }
  io::Connection& conn = **slot;
  if (absl::Status s = co_await conn.write_all(std::move(frame)); !s.ok()) co_return s;
  FrameReader reader(max_response_bytes_);
  absl::StatusOr<io::Buffer> response = co_await read_frame(conn, reader);
  if (!response.ok()) co_return response.status();
  if (reader.buffered() != 0) co_return absl::DataLossError("bytes after the response");
  absl::StatusOr<int32_t> id = peek_correlation_id(*response);
  if (!id.ok()) co_return absl::DataLossError(id.status().message());
  if (*id != correlation_id) {
    co_return absl::DataLossError(
        fmt::format("response correlation id {} for request {}", *id, correlation_id));
  }
  co_return std::move(*response);
}

Peer& PeerPool::get(int32_t id, const io::Address& address) {
  std::erase_if(retired_, [](const std::unique_ptr<Peer>& p) { return p->in_flight() == 0; });
  std::unique_ptr<Peer>& slot = peers_[id];
  if (slot == nullptr || !(slot->address() == address)) {
    if (slot != nullptr && slot->in_flight() > 0) retired_.push_back(std::move(slot));
    slot = std::make_unique<Peer>(*network_, *clock_, address, client_id_);
    slot->set_sasl(sasl_, random_);
    slot->set_tls(tls_);
  }
  return *slot;
}

io::Task<absl::StatusOr<io::Buffer>> Peer::exchange(io::BufferChain frame, int32_t correlation_id,
                                                    io::Duration timeout) {
  std::unique_ptr<io::Connection> conn;
  if (!idle_.empty()) {
    conn = std::move(idle_.back());
    idle_.pop_back();
  }
  auto result = co_await io::with_timeout(*clock_, timeout,
                                          exchange_on(&conn, std::move(frame), correlation_id));
  note(result.has_value() && result->ok());
  if (!result.has_value()) {
    co_return absl::DeadlineExceededError(
        fmt::format("no response from {} within {} ms", address_.to_string(),
                    std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()));
  }
  if (result->ok() && conn != nullptr && idle_.size() < kIdleConnectionsMax) {
    idle_.push_back(std::move(conn));
  }
  co_return std::move(*result);
}

io::Task<absl::Status> Peer::write_only(io::BufferChain frame, io::Duration timeout) {
  std::unique_ptr<io::Connection> conn;
  if (!idle_.empty()) {
    conn = std::move(idle_.back());
    idle_.pop_back();
  }
  auto write = [](io::Network* network, const io::Address* address, const tls::Context* tls,
                  const SaslCredentials* sasl, io::Random* random, const std::string* client_id,
                  std::unique_ptr<io::Connection>* slot, io::BufferChain bytes) -> io::Task<absl::Status> {
    if (*slot == nullptr) {
      absl::StatusOr<std::unique_ptr<io::Connection>> c =
          co_await connect_to(network, address, tls, sasl, random, client_id);
      if (!c.ok()) co_return c.status();
      *slot = std::move(*c);
    }
    co_return co_await (*slot)->write_all(std::move(bytes));
  };
  auto result = co_await io::with_timeout(*clock_, timeout,
                                          write(network_, &address_, tls_, sasl_, random_, &client_id_, &conn, std::move(frame)));
  note(result.has_value() && result->ok());
  if (!result.has_value()) {
    co_return absl::DeadlineExceededError(fmt::format("writing to {} took over {} ms", address_.to_string(),
                                                      std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()));
  }
  if (result->ok() && conn != nullptr && idle_.size() < kIdleConnectionsMax) idle_.push_back(std::move(conn));
  co_return *result;
}

namespace {

// What races the read of the next request, in one when_first: the idle
// limit and the server's stop. Each yields an error the race's index tells
// apart from the read's own.
io::Task<absl::StatusOr<io::Buffer>> idle_past(const io::Clock* clock, io::Instant deadline) {
  co_await clock->sleep_until(deadline);
  co_return absl::DeadlineExceededError("idle");
}

io::Task<absl::StatusOr<io::Buffer>> stopped(io::Event* stopping) {
  co_await stopping->wait();
  co_return absl::CancelledError("the server is stopping");
}

io::Task<void> serve_connection(std::unique_ptr<io::Connection> conn, RequestHandler* handler,
                                ServeOptions options) {
  FrameReader reader(options.max_request_bytes);
  const std::string client_host = "/" + conn->peer_address().host;
  const bool idle_limit = options.clock != nullptr && options.idle_timeout > io::Duration::zero();
  if (options.tls != nullptr) {
    absl::StatusOr<std::unique_ptr<io::Connection>> secure = absl::UnavailableError("handshake");
    if (idle_limit) {
      std::optional<absl::StatusOr<std::unique_ptr<io::Connection>>> shook =
          co_await io::with_timeout(*options.clock, options.idle_timeout, tls::accept(options.tls, &conn));
      if (shook.has_value()) secure = std::move(*shook);
    } else {
      secure = co_await tls::accept(options.tls, &conn);
    }
    if (!secure.ok()) {
      if (conn != nullptr) conn->close();  // timed out before the handshake took it
      co_return;
    }
    conn = std::move(*secure);
  }
  std::optional<SaslServerSession> sasl;
  if (options.sasl != nullptr) {
    sasl.emplace(options.sasl);
    reader.set_max_frame_bytes(std::min(options.max_request_bytes, kSaslMaxReceiveBytes));
  }
  // Whether this side ends the connection (idle, a malformed request, a
  // failed authentication, the server stopping) with the stream intact:
  // then a TLS connection says so first (close_notify), as Kafka's broker
  // does.
  bool ours = false;
  auto stopping = [&options] { return options.stopping != nullptr && options.stopping->is_set(); };
  while (true) {
    if (stopping()) {
      ours = true;
      break;
    }
    absl::StatusOr<io::Buffer> frame = absl::UnavailableError("not read");
    io::Task<absl::StatusOr<io::Buffer>> read = read_frame(*conn, reader);
    if (!idle_limit && options.stopping == nullptr) {
      frame = co_await std::move(read);
    } else {
      std::vector<io::Task<absl::StatusOr<io::Buffer>>> race;
      race.push_back(std::move(read));
      if (idle_limit) race.push_back(idle_past(options.clock, options.clock->now() + options.idle_timeout));
      if (options.stopping != nullptr) race.push_back(stopped(options.stopping));
      std::pair<size_t, absl::StatusOr<io::Buffer>> first = co_await io::when_first(std::move(race));
      if (first.first != 0) {  // idle too long, or the server stopping
        ours = true;
        break;
      }
      frame = std::move(first.second);
    }
    if (!frame.ok()) {
      // A length out of bounds is ours to end; otherwise the peer closed or
      // the stream broke.
      ours = frame.status().code() == absl::StatusCode::kDataLoss;
      break;
    }
    if (sasl.has_value() && !sasl->authenticated()) {
      // Before authentication: the SASL exchange, and ApiVersions.
      std::optional<SaslServerSession::Step> step;
      if (sasl->expects_bare_token()) {
        step = sasl->on_bare_token(*frame);
      } else {
        absl::StatusOr<ParsedRequest> parsed = parse_request(*frame);
        if (!parsed.ok()) {
          ours = true;
          break;
        }
        if (!answered_before_authentication(parsed->frame.header.request_api_key)) {
          step = sasl->on_request(parsed->frame);
        }
      }
      if (step.has_value()) {
        if (step->response.has_value() && !(co_await conn->write_all(std::move(*step->response))).ok()) break;
        if (step->close) {
          ours = true;
          break;
        }
        if (sasl->authenticated()) reader.set_max_frame_bytes(options.max_request_bytes);
        continue;
      }
    }
    absl::StatusOr<ParsedRequest> parsed = parse_request(*frame);
    if (!parsed.ok()) {
      ours = true;
      break;
    }
    parsed->frame.client_host = client_host;
    parsed->frame.listener_name = std::string(options.listener_name);
    absl::StatusOr<io::BufferChain> response = co_await (*handler)(std::move(parsed->frame));
    if (!response.ok()) {
      ours = true;
      break;
    }
    if (response->size() == 0) continue;  // a request without an answer (Produce, acks=0)
    if (!(co_await conn->write_all(std::move(*response))).ok()) break;
  }
  if (ours && options.tls != nullptr && options.clock != nullptr) {
    (void)co_await io::with_timeout(*options.clock, kShutdownTimeout, conn->shutdown());
  }
  conn->close();
}

}  // namespace

io::Task<absl::Status> serve(io::Listener& listener, RequestHandler handler, ServeOptions options) {
  io::TaskScope connections(co_await io::this_executor());
  while (true) {
    absl::StatusOr<std::unique_ptr<io::Connection>> conn = absl::CancelledError("the server is stopping");
    if (options.stopping == nullptr) {
      conn = co_await listener.accept();
    } else {
      io::Task<absl::StatusOr<std::unique_ptr<io::Connection>>> accept = listener.accept();
      io::Task<void> stop = io::wait_for(options.stopping);
      auto first = co_await io::when_first(std::move(accept), std::move(stop));
      if (first.index() == 1) {
        co_await connections.join();  // each ends once it has answered what it holds
        co_return absl::OkStatus();
      }
      conn = std::move(std::get<0>(first));
    }
    if (!conn.ok()) co_return conn.status();
    connections.spawn(serve_connection(std::move(*conn), &handler, options));
  }
}

}  // namespace brook::net
