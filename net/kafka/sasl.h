// net/kafka/sasl.h
//
// The server side of SASL authentication on a client listener
// (SASL_PLAINTEXT, SASL_SSL), mechanisms PLAIN (RFC 4616) and
// SCRAM-SHA-256/512 (net/kafka/scram.h), as Kafka's broker runs it:
//
// - A connection starts unauthenticated. ApiVersions is answered as usual
//   (clients ask it first); SaslHandshake names the mechanism; any other
//   request closes the connection.
// - After SaslHandshake v1 the client sends its token in SaslAuthenticate
//   (v0-2) requests; after SaslHandshake v0 it sends the token bare, as a
//   size-prefixed frame with no request header, and is answered the same
//   way (kafka-python and clients before Kafka 1.0 do this).
// - SaslHandshake lists the listener's enabled mechanisms; naming another
//   is UNSUPPORTED_SASL_MECHANISM.
// - A wrong user name or password is answered SASL_AUTHENTICATION_FAILED
//   (bare tokens get no answer) and the connection closes.
// - Until authenticated, a frame may hold at most kSaslMaxReceiveBytes
//   (Kafka's sasl.server.max.receive.size): a client that has not
//   authenticated cannot make the server buffer large frames.
//
// PLAIN's credentials are the `user_NAME="PASSWORD"` entries of the
// listener's PlainLoginModule JAAS configuration
// (listener.name.NAME.plain.sasl.jaas.config), as Kafka's
// PlainServerCallbackHandler reads them. SCRAM's are the cluster's
// (UserScramCredentialRecord in the metadata log, written by
// AlterUserScramCredentials or `brook format --add-scram`).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "net/kafka/frame.h"
#include "net/kafka/scram.h"

namespace brook::net {

inline constexpr int32_t kSaslMaxReceiveBytes = 512 * 1024;
inline constexpr std::string_view kSaslPlain = "PLAIN";

struct SaslPlainUsers {
  // user name -> password
  std::map<std::string, std::string> passwords;
};

// A listener's SASL settings.
struct SaslServerConfig {
  // sasl.enabled.mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), in the
  // order SaslHandshake answers them.
  std::vector<std::string> mechanisms;
  // PLAIN's users, when PLAIN is enabled.
  SaslPlainUsers plain;
  // SCRAM's credentials and the nonces' source, when a SCRAM mechanism is
  // enabled: without them every SCRAM exchange fails. They must outlive
  // the connections.
  const ScramCredentialLookup* scram = nullptr;
  io::Random* random = nullptr;

  bool enabled(std::string_view mechanism) const;
};

// A client's credentials: sasl.mechanism, and sasl.username /
// sasl.password or the username and password options of its
// sasl.jaas.config.
struct SaslCredentials {
  std::string username;
  std::string password;
  std::string mechanism = std::string(kSaslPlain);
};

// The user_NAME="PASSWORD" options of a JAAS configuration naming
// org.apache.kafka.common.security.plain.PlainLoginModule (a server's
// users); an error when there are none.
absl::StatusOr<SaslPlainUsers> parse_plain_jaas(std::string_view jaas);
// Its username and password options (a client's, or a broker's on the
// inter-broker listener); an error when either is missing.
absl::StatusOr<SaslCredentials> parse_plain_jaas_credentials(std::string_view jaas);
// The options of a JAAS configuration naming `login_module`. An error for
// text that is not one login module entry ("Module required
// key=\"value\" ...;") or names another module.
absl::StatusOr<std::map<std::string, std::string>> parse_jaas_options(std::string_view jaas,
                                                                      std::string_view login_module);
inline constexpr std::string_view kPlainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule";
inline constexpr std::string_view kScramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule";
// The username and password options of a JAAS configuration for
// `mechanism` (PlainLoginModule for PLAIN, ScramLoginModule for SCRAM),
// with credentials' mechanism set.
absl::StatusOr<SaslCredentials> parse_jaas_credentials(std::string_view jaas, std::string_view mechanism);

// Checks a PLAIN token ("authzid\0authcid\0password"): the authenticated
// user name, or an error saying why not (a malformed token, an unknown
// user or a wrong password, an authorization id other than the user).
absl::StatusOr<std::string> check_plain_token(const SaslPlainUsers& users, std::string_view token);

// One connection's exchange until it authenticates.
class SaslServerSession {
 public:
  explicit SaslServerSession(const SaslServerConfig* config) : config_(config) {}

  bool authenticated() const { return user_.has_value(); }
  // The user it authenticated as.
  const std::optional<std::string>& user() const { return user_; }
  // After SaslHandshake v0: the next frame is a bare token.
  bool expects_bare_token() const { return state_ == State::kBareToken; }

  struct Step {
    // Written before anything else happens (nullopt: nothing).
    std::optional<io::BufferChain> response;
    // Close the connection (after writing `response`).
    bool close = false;
  };
  // A SaslHandshake or SaslAuthenticate request frame.
  Step on_request(const RequestFrame& frame);
  // The frame after SaslHandshake v0.
  Step on_bare_token(const io::Buffer& frame);

 private:
  enum class State { kHandshake, kAuthenticate, kBareToken, kDone };

  Step on_handshake(const RequestFrame& frame);
  Step on_authenticate(const RequestFrame& frame);
  // One token of the chosen mechanism: the server's answer token, or an
  // error (authentication failed). Sets user_ once it is complete.
  absl::StatusOr<std::string> on_token(std::string_view token);

  const SaslServerConfig* config_;
  State state_ = State::kHandshake;
  // The exchange of a SCRAM mechanism (none for PLAIN).
  std::optional<ScramServer> scram_;
  std::optional<std::string> user_;
};

// Whether a request may be sent before authentication completes and is
// answered by the server's handler as usual (ApiVersions).
inline bool answered_before_authentication(int16_t api_key) { return api_key == 18; }
// Whether a request belongs to the SASL exchange (SaslHandshake,
// SaslAuthenticate).
inline bool is_sasl_request(int16_t api_key) { return api_key == 17 || api_key == 36; }

}  // namespace brook::net
