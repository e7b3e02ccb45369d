// net/tls/tls.h
//
// TLS (the SSL and SASL_SSL security protocols) over any io::Connection,
// with OpenSSL working on memory buffers: the ciphertext goes through the
// wrapped Connection, so the same code runs on io_uring, epoll and the
// simulated network.
//
// - A Context holds what every connection of one side shares: its
//   certificate chain and key (the key store), the certificates it trusts
//   (the trust store), the TLS versions and cipher suites, and whether the
//   peer must show a certificate. It is loaded once, from Kafka's ssl.*
//   settings (settings_from()).
// - accept() and connect() run the handshake on a connection and return one
//   that carries plaintext: read_some() decrypts, write_all() encrypts.
//   A handshake that fails (an untrusted or expired certificate, a host
//   name the certificate does not name, no common version or cipher) is an
//   Unauthenticated error and the connection is closed. shutdown() sends
//   close_notify (net::serve does before it ends a connection itself).
// - Key stores and trust stores are PKCS12 or PEM files (or PEM text in
//   ssl.keystore.certificate.chain / ssl.keystore.key /
//   ssl.truststore.certificates). The kind is read from the file itself,
//   so a PKCS12 file declared JKS (keytool's default since Java 9) loads;
//   a Java KeyStore (JKS) file is refused with the keytool command that
//   converts it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "io/network.h"
#include "io/task.h"

struct ssl_ctx_st;

namespace brook::net::tls {

// ssl.client.auth: whether a server asks clients for a certificate.
enum class ClientAuth { kNone, kRequested, kRequired };

struct Settings {
  // The key store: this side's certificate chain and private key. Either a
  // file (PKCS12 or PEM; PEM may hold the key and the chain together) or
  // PEM text, or PEM files for each (librdkafka's ssl.certificate.location
  // and ssl.key.location).
  std::string keystore_location;
  std::string keystore_password;
  std::string key_password;
  std::string keystore_certificate_chain;
  std::string keystore_key;
  std::string certificate_location;
  std::string key_location;
  // The trust store: the certificates the peer's chain must end at. None:
  // the system's default CAs.
  std::string truststore_location;
  std::string truststore_password;
  std::string truststore_certificates;
  ClientAuth client_auth = ClientAuth::kNone;
  // ssl.enabled.protocols
  std::vector<std::string> enabled_protocols = {"TLSv1.2", "TLSv1.3"};
  // ssl.cipher.suites, by their standard (IANA) or OpenSSL names; empty:
  // OpenSSL's defaults.
  std::vector<std::string> cipher_suites;
  // A client checks that the server's certificate names the host it
  // connected to (ssl.endpoint.identification.algorithm=https, the
  // default) and that the chain is trusted
  // (enable.ssl.certificate.verification).
  bool verify_hostname = true;
  bool verify_certificate = true;
};

// Reads the ssl.* settings through `get` (a property's value, or nullopt
// when not set; a listener's server reads them with its
// listener.name.NAME. prefix first). Java's names, plus librdkafka's
// ssl.ca.location, ssl.certificate.location, ssl.key.location and
// enable.ssl.certificate.verification. An error for a value that is not
// one of the setting's choices.
using Getter = absl::FunctionRef<std::optional<std::string>(std::string_view key)>;
absl::StatusOr<Settings> settings_from(Getter get);
// Sets the one setting `key` names; *known is false (and nothing changes)
// when it names none.
absl::Status set_setting(Settings* settings, std::string_view key, std::string_view value, bool* known);

// Reads a whole key or trust store file. Stores are read once, when a
// context is made at start-up, by the caller (the tools), not by the logic
// code that uses the context.
using FileReader = absl::FunctionRef<absl::StatusOr<std::string>(const std::string& path)>;

class Context {
 public:
  // A server needs a key store; a client uses one only to answer a
  // server that asks for a certificate. Files named by `settings` are
  // read through `read_file`.
  static absl::StatusOr<std::shared_ptr<const Context>> server(const Settings& settings, FileReader read_file);
  static absl::StatusOr<std::shared_ptr<const Context>> client(const Settings& settings, FileReader read_file);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // A handle that does not own `context`, which must outlive every copy
  // (for a context kept elsewhere, handed to settings that hold contexts by
  // shared_ptr).
  static std::shared_ptr<const Context> unowned(const Context* context) {
    return std::shared_ptr<const Context>(std::shared_ptr<const Context>(), context);
  }

  bool is_server() const { return server_; }
  bool verify_hostname() const { return verify_hostname_; }
  ssl_ctx_st* native() const { return ctx_; }

 private:
  Context(ssl_ctx_st* ctx, bool server, bool verify_hostname)
      : ctx_(ctx), server_(server), verify_hostname_(verify_hostname) {}
  ssl_ctx_st* ctx_;
  bool server_;
  bool verify_hostname_;
};

// The server side of the handshake on `*conn` (taken). On failure the
// connection is closed.
io::Task<absl::StatusOr<std::unique_ptr<io::Connection>>> accept(const Context* context,
                                                                 std::unique_ptr<io::Connection>* conn);
// The client side, to `*host` (its name is sent as SNI and, with
// verify_hostname, must be named by the server's certificate).
io::Task<absl::StatusOr<std::unique_ptr<io::Connection>>> connect(const Context* context,
                                                                  std::unique_ptr<io::Connection>* conn,
                                                                  const std::string* host);

}  // namespace brook::net::tls
