// net/kafka/rpc.h
//
// Kafka request/response over io::Network, for node-to-node traffic
// (controllers' Raft RPCs, later broker-to-controller calls).
//
// Client side: a Peer sends one request at a time per connection and keeps
// a few idle connections for reuse; calls from several tasks at once each
// take their own connection. Any failure (refused connect, reset, timeout,
// a malformed or mismatched response) closes that connection and is
// returned as Unavailable / DeadlineExceeded / DataLoss; the next call
// connects again.
//
// Server side: serve() accepts connections until it is cancelled and
// answers each connection's requests in order with `handler`, closing
// connections idle past ServeOptions::idle_timeout. A request the
// handler cannot answer (an error status) closes the connection, as Kafka
// does with requests it cannot parse; an empty answer sends nothing (Produce
// with acks=0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/clock.h"
#include "io/network.h"
#include "io/sync.h"
#include "io/task.h"
#include "io/time.h"
#include "net/kafka/frame.h"
#include "net/kafka/sasl.h"
#include "net/tls/tls.h"

namespace brook::net {

class Peer {
 public:
  Peer(io::Network& network, const io::Clock& clock, io::Address address, std::string client_id,
       int32_t max_response_bytes = kDefaultMaxRequestBytes)
      : network_(&network),
        clock_(&clock),
        address_(std::move(address)),
        client_id_(std::move(client_id)),
        max_response_bytes_(max_response_bytes) {}
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  // Sends `request` at `version` and decodes the response, all within
  // `timeout` (connecting included).
  template <Message Resp, Message Req>
  io::Task<absl::StatusOr<Resp>> call(const Req& request, int16_t version, io::Duration timeout) {
    const InFlight counted(&in_flight_);
    const int32_t correlation_id = next_correlation_id_++;
    absl::StatusOr<io::BufferChain> frame =
        encode_request(request, version, correlation_id, client_id_);
    if (!frame.ok()) co_return frame.status();
    absl::StatusOr<io::Buffer> bytes =
        co_await exchange(std::move(*frame), correlation_id, timeout);
    if (!bytes.ok()) co_return bytes.status();
    co_return decode_response<Resp>(*bytes, version);
  }

  // Sends `request` at `version` without waiting for an answer (Produce with
  // acks=0, which the broker does not answer): OK once it is written.
  template <Message Req>
  io::Task<absl::Status> send(const Req& request, int16_t version, io::Duration timeout) {
    const InFlight counted(&in_flight_);
    const int32_t correlation_id = next_correlation_id_++;
    absl::StatusOr<io::BufferChain> frame = encode_request(request, version, correlation_id, client_id_);
    if (!frame.ok()) co_return frame.status();
    co_return co_await write_only(std::move(*frame), timeout);
  }

  // Every new connection authenticates with SASL as `credentials` (nullptr:
  // none) before its first request; SCRAM's nonces come from `random`.
  // Both must outlive the Peer.
  void set_sasl(const SaslCredentials* credentials, io::Random* random) {
    sasl_ = credentials;
    random_ = random;
  }
  // Every new connection runs a TLS handshake with `context` (nullptr:
  // none) first, checking the certificate against the address's host. It
  // must outlive the Peer.
  void set_tls(const tls::Context* context) { tls_ = context; }
  // Drops the idle connections (e.g. when the peer is known to have moved).
  void reset() { idle_.clear(); }
  const io::Address& address() const { return address_; }
  // Calls and sends under way (or suspended): the Peer must outlive them.
  size_t in_flight() const { return in_flight_; }
  // When the last call or send to this peer failed (no answer in time, a
  // refused or broken connection), if none went through since; nullopt
  // when the last went through (or none was made).
  std::optional<io::Instant> last_failure() const { return last_failure_; }

 private:
  // Counts a call for as long as its coroutine frame lives.
  class InFlight {
   public:
    explicit InFlight(size_t* count) : count_(count) { ++*count_; }
    ~InFlight() { --*count_; }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    size_t* count_;
  };

  io::Task<absl::StatusOr<io::Buffer>> exchange(io::BufferChain frame, int32_t correlation_id,
                                                io::Duration timeout);
  io::Task<absl::Status> write_only(io::BufferChain frame, io::Duration timeout);
  io::Task<absl::StatusOr<io::Buffer>> exchange_on(std::unique_ptr<io::Connection>* slot,
                                                   io::BufferChain frame, int32_t correlation_id);
  void note(bool went_through) {
    if (went_through) {
      last_failure_.reset();
    } else {
      last_failure_ = clock_->now();
    }
  }

  io::Network* network_;
  const io::Clock* clock_;
  io::Address address_;
  std::string client_id_;
  int32_t max_response_bytes_;
  const SaslCredentials* sasl_ = nullptr;
  io::Random* random_ = nullptr;
  const tls::Context* tls_ = nullptr;
  int32_t next_correlation_id_ = 1;
  size_t in_flight_ = 0;
  std::optional<io::Instant> last_failure_;
  std::vector<std::unique_ptr<io::Connection>> idle_;
};

// One Peer per node id, for a node that calls several others (a broker's
// fetchers, coordinators and transaction markers). A node whose address
// changes gets a fresh Peer; the replaced one is kept while calls are still
// under way on it (their coroutines hold it) and dropped by a later get()
// once they are done.
class PeerPool {
 public:
  // Each Peer's client id is `client_id`.
  PeerPool(io::Network& network, const io::Clock& clock, std::string client_id)
      : network_(&network), clock_(&clock), client_id_(std::move(client_id)) {}
  PeerPool(const PeerPool&) = delete;
  PeerPool& operator=(const PeerPool&) = delete;

  // The Peer for node `id` at `address`. The reference is valid until a
  // get() of the same id at another address; a call under way on it keeps
  // it alive past that.
  Peer& get(int32_t id, const io::Address& address);
  // Replaced Peers still kept for their calls.
  size_t retired() const { return retired_.size(); }
  // Peer::set_sasl for the Peers made from now on.
  void set_sasl(const SaslCredentials* credentials, io::Random* random) {
    sasl_ = credentials;
    random_ = random;
  }
  // Peer::set_tls for the Peers made from now on.
  void set_tls(const tls::Context* context) { tls_ = context; }

 private:
  io::Network* network_;
  const io::Clock* clock_;
  std::string client_id_;
  const SaslCredentials* sasl_ = nullptr;
  io::Random* random_ = nullptr;
  const tls::Context* tls_ = nullptr;
  std::map<int32_t, std::unique_ptr<Peer>> peers_;
  std::vector<std::unique_ptr<Peer>> retired_;
};

// Answers one request frame; the response frame (size prefix included).
using RequestHandler = std::function<io::Task<absl::StatusOr<io::BufferChain>>(RequestFrame)>;

struct ServeOptions {
  // socket.request.max.bytes: a larger request closes the connection.
  int32_t max_request_bytes = kDefaultMaxRequestBytes;
  // connections.max.idle.ms: a connection that sends no request for this
  // long is closed (0, or no clock: never).
  const io::Clock* clock = nullptr;
  io::Duration idle_timeout{0};
  // Set as every request's RequestFrame::listener_name; it must outlive
  // serve(). (A view: ServeOptions stays trivially destructible, as GCC 12
  // destroys a coroutine's by-value class parameter twice when the
  // argument is a temporary.)
  std::string_view listener_name;
  // A SASL_PLAINTEXT or SASL_SSL listener's SASL settings
  // (net/kafka/sasl.h): every connection authenticates before its requests
  // reach the handler. nullptr: no SASL. It must outlive serve().
  const SaslServerConfig* sasl = nullptr;
  // An SSL or SASL_SSL listener's server context: every connection's TLS
  // handshake comes first (within idle_timeout when set). nullptr: none.
  // It must outlive serve().
  const tls::Context* tls = nullptr;
  // Set when the server stops (a broker's shutdown): serve() stops
  // accepting, each connection ends once it has answered the request in
  // hand (at once if it is waiting for one), a TLS connection with
  // close_notify as Kafka's broker closes its channels, and serve()
  // returns OK once all have ended. nullptr: the connections end only when
  // serve() is cancelled. It must outlive serve().
  io::Event* stopping = nullptr;
};

// Accepts on `listener` and serves every connection until cancelled (the
// connections' tasks die with it) or ServeOptions::stopping is set.
// Returns when accept fails (the listener closed). A connection's requests
// are answered one at a time, in order, and the next request is read only
// once the answer is written (Kafka's socket server mutes a connection the
// same way): a client that sends faster than it reads its answers is held
// back by TCP. The wait for a request is one race of the read, the idle
// limit and the stop.
io::Task<absl::Status> serve(io::Listener& listener, RequestHandler handler, ServeOptions options = {});

}  // namespace brook::net
