// net/kafka/scram.h
//
// SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka runs
// them: the credential a server keeps for a user (salt, iteration count,
// StoredKey, ServerKey; never the password), the server's and the client's
// side of the three-message exchange, and the key derivations an admin
// client and the controller use to make a credential from a password.
//
// The exchange, as bytes of the SaslAuthenticate tokens (or bare tokens
// after SaslHandshake v0):
//
//   client-first  n,,n=USER,r=CLIENT_NONCE
//   server-first  r=CLIENT_NONCE SERVER_NONCE,s=base64(SALT),i=ITERATIONS
//   client-final  c=biws,r=NONCE,p=base64(ClientKey XOR ClientSignature)
//   server-final  v=base64(ServerSignature)
//
// As Kafka's server does, the client-final nonce may repeat the client's
// nonce before the server-first one (librdkafka sends it so). Channel
// binding is not supported ("p=" in the GS2 header is refused, as
// Kafka refuses it); an authorization id ("a=") must name the user itself.
// A client-first extension tokenauth=true (delegation tokens) is refused:
// there are no delegation tokens to check it against. Other extensions are
// ignored. User names are sent with "," and "=" escaped as "=2C" and "=3D".
//
// Nonces come from the io::Random the caller gives (the node's generator,
// seeded from the operating system when a real backend starts, and from
// the run's seed in the simulator).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/random.h"

namespace brook::net {

// Kafka's ScramMechanism: the type numbers are the ones of
// UserScramCredentialRecord and the SCRAM admin requests.
enum class ScramMechanism : int8_t { kSha256 = 1, kSha512 = 2 };

inline constexpr std::string_view kScramSha256 = "SCRAM-SHA-256";
inline constexpr std::string_view kScramSha512 = "SCRAM-SHA-512";
// Kafka's bounds on a credential's iteration count.
inline constexpr int32_t kScramMinIterations = 4096;
inline constexpr int32_t kScramMaxIterations = 16384;

// "SCRAM-SHA-256" -> kSha256; nullopt for any other name.
std::optional<ScramMechanism> scram_mechanism(std::string_view name);
// A record's or request's mechanism type (1, 2); nullopt for others.
std::optional<ScramMechanism> scram_mechanism_of_type(int8_t type);
std::string_view scram_mechanism_name(ScramMechanism mechanism);
inline int8_t scram_type(ScramMechanism mechanism) { return static_cast<int8_t>(mechanism); }

// What a server keeps for one user and mechanism.
struct ScramCredential {
  std::string salt;
  std::string stored_key;  // H(HMAC(SaltedPassword, "Client Key"))
  std::string server_key;  // HMAC(SaltedPassword, "Server Key")
  int32_t iterations = 0;
  bool operator==(const ScramCredential&) const = default;
};

// Hi(password, salt, iterations): PBKDF2 with the mechanism's HMAC.
std::string scram_salted_password(ScramMechanism mechanism, std::string_view password, std::string_view salt,
                                  int32_t iterations);
// The credential of a salted password (what AlterUserScramCredentials
// carries) with its salt and iteration count.
ScramCredential scram_credential_from_salted(ScramMechanism mechanism, std::string_view salted_password,
                                             std::string_view salt, int32_t iterations);
ScramCredential scram_credential(ScramMechanism mechanism, std::string_view password, std::string_view salt,
                                 int32_t iterations);

// A nonce: 32 characters from [0-9A-Za-z] (printable, no ',').
std::string scram_nonce(io::Random& random);

// Where a server finds credentials (the broker: its metadata image).
class ScramCredentialLookup {
 public:
  virtual ~ScramCredentialLookup() = default;
  virtual std::optional<ScramCredential> find(ScramMechanism mechanism, std::string_view user) const = 0;
};

// The server's side of one exchange. Each client message gets the next
// server message, or an error: the exchange failed and the connection is
// to be closed. An error's message is what Kafka tells the client.
class ScramServer {
 public:
  ScramServer(ScramMechanism mechanism, const ScramCredentialLookup* credentials, io::Random* random)
      : mechanism_(mechanism), credentials_(credentials), random_(random) {}

  absl::StatusOr<std::string> step(std::string_view client_message);
  // After the server-final message: the user authenticated.
  bool complete() const { return state_ == State::kComplete; }
  const std::string& user() const { return user_; }

 private:
  enum class State { kClientFirst, kClientFinal, kComplete, kFailed };

  absl::StatusOr<std::string> on_client_first(std::string_view message);
  absl::StatusOr<std::string> on_client_final(std::string_view message);

  ScramMechanism mechanism_;
  const ScramCredentialLookup* credentials_;
  io::Random* random_;
  State state_ = State::kClientFirst;
  std::string user_;
  std::string gs2_header_;
  std::string client_first_bare_;
  std::string server_first_;
  std::string nonce_;
  ScramCredential credential_;
};

// The client's side of one exchange.
class ScramClient {
 public:
  ScramClient(ScramMechanism mechanism, std::string user, std::string password, std::string nonce);

  std::string first_message() const;
  // The server-first message -> the client-final message; an error when
  // the server's nonce does not extend ours or its parameters are bad.
  absl::StatusOr<std::string> final_message(std::string_view server_first);
  // Checks the server-final message: the server proved it knows the
  // credential.
  absl::Status check_server_final(std::string_view server_final) const;

 private:
  ScramMechanism mechanism_;
  std::string user_;
  std::string password_;
  std::string nonce_;
  std::string auth_message_;
  std::string salted_password_;
};

}  // namespace brook::net
