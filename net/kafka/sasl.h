// net/kafka/sasl.h
//
// The server side of SASL authentication on a client listener
// (SASL_PLAINTEXT), mechanism PLAIN (RFC 4616), as Kafka's broker runs it:
//
// - A connection starts unauthenticated. ApiVersions is answered as usual
//   (clients ask it first); SaslHandshake names the mechanism; any other
//   request closes the connection.
// - After SaslHandshake v1 the client sends its token in SaslAuthenticate
//   (v0-2) requests; after SaslHandshake v0 it sends the token bare, as a
//   size-prefixed frame with no request header, and is answered the same
//   way (kafka-python and clients before Kafka 1.0 do this).
// - A wrong user name or password is answered SASL_AUTHENTICATION_FAILED
//   (bare tokens get no answer) and the connection closes.
// - Until authenticated, a frame may hold at most kSaslMaxReceiveBytes
//   (Kafka's sasl.server.max.receive.size): a client that has not
//   authenticated cannot make the server buffer large frames.
//
// The credentials are the `user_NAME="PASSWORD"` entries of the listener's
// PlainLoginModule JAAS configuration
// (listener.name.NAME.plain.sasl.jaas.config), as Kafka's
// PlainServerCallbackHandler reads them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "net/kafka/frame.h"

namespace brook::net {

inline constexpr int32_t kSaslMaxReceiveBytes = 512 * 1024;
inline constexpr std::string_view kSaslPlain = "PLAIN";

struct SaslPlainUsers {
  // user name -> password
  std::map<std::string, std::string> passwords;
};

// A client's PLAIN credentials (sasl.username / sasl.password, or the
// username and password options of its sasl.jaas.config).
struct SaslCredentials {
  std::string username;
  std::string password;
};

// The options of a JAAS configuration naming
// org.apache.kafka.common.security.plain.PlainLoginModule. An error for
// text that is not one login module entry ("Module required
// key=\"value\" ...;") or names another module.
absl::StatusOr<std::map<std::string, std::string>> parse_plain_jaas_options(std::string_view jaas);
// Its user_NAME="PASSWORD" options (a server's users); an error when there
// are none.
absl::StatusOr<SaslPlainUsers> parse_plain_jaas(std::string_view jaas);
// Its username and password options (a client's, or a broker's on the
// inter-broker listener); an error when either is missing.
absl::StatusOr<SaslCredentials> parse_plain_jaas_credentials(std::string_view jaas);

// Checks a PLAIN token ("authzid\0authcid\0password"): the authenticated
// user name, or an error saying why not (a malformed token, an unknown
// user or a wrong password, an authorization id other than the user).
absl::StatusOr<std::string> check_plain_token(const SaslPlainUsers& users, std::string_view token);

// One connection's exchange until it authenticates.
class SaslServerSession {
 public:
  explicit SaslServerSession(const SaslPlainUsers* users) : users_(users) {}

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

  const SaslPlainUsers* users_;
  State state_ = State::kHandshake;
  std::optional<std::string> user_;
};

// Whether a request may be sent before authentication completes and is
// answered by the server's handler as usual (ApiVersions).
inline bool answered_before_authentication(int16_t api_key) { return api_key == 18; }
// Whether a request belongs to the SASL exchange (SaslHandshake,
// SaslAuthenticate).
inline bool is_sasl_request(int16_t api_key) { return api_key == 17 || api_key == 36; }

}  // namespace brook::net
