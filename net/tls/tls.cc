// net/tls/tls.cc
#include "net/tls/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/provider.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <deque>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace brook::net::tls {

namespace {

// Ciphertext read from the wrapped connection at a time.
constexpr size_t kReadChunkBytes = 64 * 1024;
// Plaintext handed to OpenSSL at a time: one full TLS record.
constexpr size_t kRecordBytes = 16 * 1024;
// Ciphertext gathered before it is written out.
constexpr size_t kFlushBytes = 256 * 1024;

// OpenSSL's error queue as text (emptied).
std::string openssl_errors() {
  std::string out;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? std::string("no detail from OpenSSL") : out;
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using CtxPtr = std::unique_ptr<SSL_CTX, CtxFree>;

absl::StatusOr<std::string> read_file(FileReader reader, const std::string& what, const std::string& path) {
  absl::StatusOr<std::string> bytes = reader(path);
  if (!bytes.ok()) {
    return absl::NotFoundError(
        fmt::format("{} {}: cannot be read ({})", what, path, std::string(bytes.status().message())));
  }
  return bytes;
}

enum class StoreKind { kPem, kPkcs12, kJks };

StoreKind kind_of(std::string_view bytes) {
  if (bytes.size() >= 4 && static_cast<unsigned char>(bytes[0]) == 0xfe &&
      static_cast<unsigned char>(bytes[1]) == 0xed && static_cast<unsigned char>(bytes[2]) == 0xfe &&
      static_cast<unsigned char>(bytes[3]) == 0xed) {
    return StoreKind::kJks;
  }
  if (!bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x30) return StoreKind::kPkcs12;
  return StoreKind::kPem;
}

absl::Status jks_refused(const std::string& what, const std::string& path) {
  return absl::InvalidArgumentError(fmt::format(
      "{} {} is a Java KeyStore (JKS), which is not supported: convert it to PKCS12 with keytool "
      "-importkeystore -srckeystore {} -destkeystore {}.p12 -deststoretype PKCS12",
      what, path, path, path));
}

int password_callback(char* buf, int size, int, void* password) {
  const std::string* p = static_cast<const std::string*>(password);
  if (p == nullptr || p->empty()) return 0;
  const int n = std::min(size, static_cast<int>(p->size()));
  std::memcpy(buf, p->data(), static_cast<size_t>(n));
  return n;
}

// Every certificate in PEM text.
absl::StatusOr<std::vector<X509Ptr>> pem_certificates(const std::string& what, std::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::vector<X509Ptr> certs;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(x);
  ERR_clear_error();  // the end of the text reads as an error
  if (certs.empty()) return absl::InvalidArgumentError(fmt::format("{}: no PEM certificate", what));
  return certs;
}

absl::StatusOr<PkeyPtr> pem_key(const std::string& what, std::string_view pem, const std::string& password) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, password_callback,
                                          const_cast<std::string*>(&password));
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        fmt::format("{}: no PEM private key, or a wrong ssl.key.password ({})", what, openssl_errors()));
  }
  return PkeyPtr(key);
}

struct Pkcs12 {
  PkeyPtr key;
  X509Ptr cert;
  std::vector<X509Ptr> others;
};

absl::StatusOr<Pkcs12> parse_pkcs12(const std::string& what, std::string_view der,
                                    const std::vector<const std::string*>& passwords) {
  // Java before 11.0.12 protects certificates with RC2, which OpenSSL 3
  // keeps in its legacy provider: loaded for a second attempt, and
  // unloaded once the file is read.
  struct Legacy {
    OSSL_PROVIDER* provider = nullptr;
    ~Legacy() {
      if (provider != nullptr) OSSL_PROVIDER_unload(provider);
    }
  } legacy;
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (const std::string* password : passwords) {
      BioPtr bio(BIO_new_mem_buf(der.data(), static_cast<int>(der.size())));
      PKCS12* p12 = d2i_PKCS12_bio(bio.get(), nullptr);
      if (p12 == nullptr) {
        return absl::InvalidArgumentError(fmt::format("{}: not a PKCS12 file ({})", what, openssl_errors()));
      }
      EVP_PKEY* key = nullptr;
      X509* cert = nullptr;
      STACK_OF(X509)* ca = nullptr;
      const int ok = PKCS12_parse(p12, password->c_str(), &key, &cert, &ca);
      PKCS12_free(p12);
      if (ok != 1) continue;
      Pkcs12 out;
      out.key.reset(key);
      out.cert.reset(cert);
      if (ca != nullptr) {
        while (X509* x = sk_X509_shift(ca)) out.others.emplace_back(x);
        sk_X509_free(ca);
      }
      return out;
    }
    if (attempt == 0 && (legacy.provider = OSSL_PROVIDER_try_load(nullptr, "legacy", 1)) == nullptr) break;
  }
  return absl::InvalidArgumentError(
      fmt::format("{}: cannot be opened: a wrong password, or a cipher OpenSSL lacks ({})", what, openssl_errors()));
}

absl::Status load_keystore(SSL_CTX* ctx, const Settings& s, FileReader reader) {
  std::vector<X509Ptr> chain;
  PkeyPtr key;
  if (!s.keystore_location.empty()) {
    const std::string what = "ssl.keystore.location " + s.keystore_location;
    absl::StatusOr<std::string> bytes = read_file(reader, "ssl.keystore.location", s.keystore_location);
    if (!bytes.ok()) return bytes.status();
    switch (kind_of(*bytes)) {
      case StoreKind::kJks:
        return jks_refused("ssl.keystore.location", s.keystore_location);
      case StoreKind::kPkcs12: {
        absl::StatusOr<Pkcs12> p = parse_pkcs12(what, *bytes, {&s.keystore_password, &s.key_password});
        if (!p.ok()) return p.status();
        if (p->key == nullptr || p->cert == nullptr) {
          return absl::InvalidArgumentError(fmt::format("{}: holds no private key with its certificate", what));
        }
        key = std::move(p->key);
        chain.push_back(std::move(p->cert));
        for (X509Ptr& x : p->others) chain.push_back(std::move(x));
        break;
      }
      case StoreKind::kPem: {
        absl::StatusOr<std::vector<X509Ptr>> certs = pem_certificates(what, *bytes);
        if (!certs.ok()) return certs.status();
        chain = std::move(*certs);
        const std::string& password = s.key_password.empty() ? s.keystore_password : s.key_password;
        absl::StatusOr<PkeyPtr> k = pem_key(what, *bytes, password);
        if (!k.ok()) return k.status();
        key = std::move(*k);
        break;
      }
    }
  } else if (!s.keystore_certificate_chain.empty() || !s.keystore_key.empty()) {
    if (s.keystore_certificate_chain.empty() || s.keystore_key.empty()) {
      return absl::InvalidArgumentError("ssl.keystore.certificate.chain and ssl.keystore.key go together");
    }
    absl::StatusOr<std::vector<X509Ptr>> certs =
        pem_certificates("ssl.keystore.certificate.chain", s.keystore_certificate_chain);
    if (!certs.ok()) return certs.status();
    chain = std::move(*certs);
    absl::StatusOr<PkeyPtr> k = pem_key("ssl.keystore.key", s.keystore_key, s.key_password);
    if (!k.ok()) return k.status();
    key = std::move(*k);
  } else if (!s.certificate_location.empty() || !s.key_location.empty()) {
    if (s.certificate_location.empty() || s.key_location.empty()) {
      return absl::InvalidArgumentError("ssl.certificate.location and ssl.key.location go together");
    }
    absl::StatusOr<std::string> cert_text = read_file(reader, "ssl.certificate.location", s.certificate_location);
    if (!cert_text.ok()) return cert_text.status();
    absl::StatusOr<std::string> key_text = read_file(reader, "ssl.key.location", s.key_location);
    if (!key_text.ok()) return key_text.status();
    absl::StatusOr<std::vector<X509Ptr>> certs =
        pem_certificates("ssl.certificate.location " + s.certificate_location, *cert_text);
    if (!certs.ok()) return certs.status();
    chain = std::move(*certs);
    absl::StatusOr<PkeyPtr> k = pem_key("ssl.key.location " + s.key_location, *key_text, s.key_password);
    if (!k.ok()) return k.status();
    key = std::move(*k);
  } else {
    return absl::OkStatus();
  }
  if (SSL_CTX_use_certificate(ctx, chain.front().get()) != 1) {
    return absl::InvalidArgumentError(fmt::format("the key store's certificate: {}", openssl_errors()));
  }
  for (size_t i = 1; i < chain.size(); ++i) {
    if (SSL_CTX_add1_chain_cert(ctx, chain[i].get()) != 1) {
      return absl::InvalidArgumentError(fmt::format("the key store's certificate chain: {}", openssl_errors()));
    }
  }
  if (SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    return absl::InvalidArgumentError(
        fmt::format("the key store's private key does not match its certificate ({})", openssl_errors()));
  }
  return absl::OkStatus();
}

absl::Status load_truststore(SSL_CTX* ctx, const Settings& s, FileReader reader) {
  std::vector<X509Ptr> trusted;
  if (!s.truststore_location.empty()) {
    const std::string what = "ssl.truststore.location " + s.truststore_location;
    absl::StatusOr<std::string> bytes = read_file(reader, "ssl.truststore.location", s.truststore_location);
    if (!bytes.ok()) return bytes.status();
    switch (kind_of(*bytes)) {
      case StoreKind::kJks:
        return jks_refused("ssl.truststore.location", s.truststore_location);
      case StoreKind::kPkcs12: {
        const std::string none;
        absl::StatusOr<Pkcs12> p = parse_pkcs12(what, *bytes, {&s.truststore_password, &none});
        if (!p.ok()) return p.status();
        if (p->cert != nullptr) trusted.push_back(std::move(p->cert));
        for (X509Ptr& x : p->others) trusted.push_back(std::move(x));
        if (trusted.empty()) return absl::InvalidArgumentError(fmt::format("{}: holds no certificate", what));
        break;
      }
      case StoreKind::kPem: {
        absl::StatusOr<std::vector<X509Ptr>> certs = pem_certificates(what, *bytes);
        if (!certs.ok()) return certs.status();
        trusted = std::move(*certs);
        break;
      }
    }
  } else if (!s.truststore_certificates.empty()) {
    absl::StatusOr<std::vector<X509Ptr>> certs =
        pem_certificates("ssl.truststore.certificates", s.truststore_certificates);
    if (!certs.ok()) return certs.status();
    trusted = std::move(*certs);
  } else {
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) ERR_clear_error();
    return absl::OkStatus();
  }
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  for (const X509Ptr& x : trusted) {
    if (X509_STORE_add_cert(store, x.get()) != 1) {
      return absl::InvalidArgumentError(fmt::format("the trust store: {}", openssl_errors()));
    }
  }
  return absl::OkStatus();
}

absl::Status set_protocols(SSL_CTX* ctx, const std::vector<std::string>& names) {
  static const std::map<std::string, int, std::less<>> kVersions = {
      {"TLSv1", TLS1_VERSION}, {"TLSv1.1", TLS1_1_VERSION}, {"TLSv1.2", TLS1_2_VERSION}, {"TLSv1.3", TLS1_3_VERSION}};
  int low = 0;
  int high = 0;
  for (const std::string& name : names) {
    auto it = kVersions.find(name);
    if (it == kVersions.end()) {
      return absl::InvalidArgumentError(
          fmt::format("ssl.enabled.protocols: {} is not one of TLSv1.2, TLSv1.3 (or TLSv1, TLSv1.1)", name));
    }
    low = low == 0 ? it->second : std::min(low, it->second);
    high = std::max(high, it->second);
  }
  if (high == 0) return absl::InvalidArgumentError("ssl.enabled.protocols is empty");
  SSL_CTX_set_min_proto_version(ctx, low);
  SSL_CTX_set_max_proto_version(ctx, high);
  return absl::OkStatus();
}

absl::Status set_cipher_suites(SSL_CTX* ctx, const std::vector<std::string>& names) {
  if (names.empty()) return absl::OkStatus();
  // Every cipher this OpenSSL knows, by standard and by OpenSSL name.
  CtxPtr all(SSL_CTX_new(TLS_method()));
  if (all == nullptr || SSL_CTX_set_cipher_list(all.get(), "ALL:COMPLEMENTOFALL") != 1) {
    return absl::InternalError(fmt::format("OpenSSL's cipher list: {}", openssl_errors()));
  }
  std::map<std::string, std::string, std::less<>> known;
  STACK_OF(SSL_CIPHER)* ciphers = SSL_CTX_get_ciphers(all.get());
  for (int i = 0; i < sk_SSL_CIPHER_num(ciphers); ++i) {
    const SSL_CIPHER* c = sk_SSL_CIPHER_value(ciphers, i);
    known[SSL_CIPHER_standard_name(c)] = SSL_CIPHER_get_name(c);
    known[SSL_CIPHER_get_name(c)] = SSL_CIPHER_get_name(c);
  }
  std::vector<std::string> tls13;
  std::vector<std::string> older;
  for (const std::string& name : names) {
    auto it = known.find(name);
    if (it == known.end()) return absl::InvalidArgumentError(fmt::format("ssl.cipher.suites: {} is not known", name));
    const bool is_tls13 = name == "TLS_AES_128_GCM_SHA256" || name == "TLS_AES_256_GCM_SHA384" ||
                          name == "TLS_CHACHA20_POLY1305_SHA256" || name == "TLS_AES_128_CCM_SHA256" ||
                          name == "TLS_AES_128_CCM_8_SHA256";
    (is_tls13 ? tls13 : older).push_back(is_tls13 ? name : it->second);
  }
  if (SSL_CTX_set_ciphersuites(ctx, fmt::format("{}", fmt::join(tls13, ":")).c_str()) != 1 ||
      (!older.empty() && SSL_CTX_set_cipher_list(ctx, fmt::format("{}", fmt::join(older, ":")).c_str()) != 1)) {
    return absl::InvalidArgumentError(fmt::format("ssl.cipher.suites: {}", openssl_errors()));
  }
  // As in Java, the list is all that is enabled: with no TLS 1.2 suite in
  // it, TLS 1.2 is not offered (OpenSSL would keep its own 1.2 defaults),
  // and with no TLS 1.3 suite, TLS 1.3 is not.
  const long min = SSL_CTX_get_min_proto_version(ctx);  // 0: the lowest
  const long max = SSL_CTX_get_max_proto_version(ctx);  // 0: the highest
  if (older.empty()) {
    if (max != 0 && max < TLS1_3_VERSION) {
      return absl::InvalidArgumentError("ssl.cipher.suites: only TLS 1.3 suites, but TLS 1.3 is not enabled");
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  }
  if (tls13.empty()) {
    if (min >= TLS1_3_VERSION) {
      return absl::InvalidArgumentError("ssl.cipher.suites: no TLS 1.3 suite, but only TLS 1.3 is enabled");
    }
    SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
  }
  return absl::OkStatus();
}

absl::StatusOr<CtxPtr> make_context(const Settings& s, bool server, FileReader reader) {
  ERR_clear_error();
  CtxPtr ctx(SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()));
  if (ctx == nullptr) return absl::InternalError(fmt::format("SSL_CTX_new: {}", openssl_errors()));
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION);
  // Kafka's clients do not resume sessions; no tickets, no cache.
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  if (server) SSL_CTX_set_num_tickets(ctx.get(), 0);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS);
  if (absl::Status st = set_protocols(ctx.get(), s.enabled_protocols); !st.ok()) return st;
  if (absl::Status st = set_cipher_suites(ctx.get(), s.cipher_suites); !st.ok()) return st;
  if (absl::Status st = load_keystore(ctx.get(), s, reader); !st.ok()) return st;
  if (absl::Status st = load_truststore(ctx.get(), s, reader); !st.ok()) return st;
  int verify = SSL_VERIFY_NONE;
  if (server) {
    if (SSL_CTX_get0_certificate(ctx.get()) == nullptr) {
      return absl::InvalidArgumentError(
          "a TLS listener needs a key store: ssl.keystore.location (PKCS12 or PEM), or "
          "ssl.keystore.certificate.chain and ssl.keystore.key");
    }
    if (s.client_auth == ClientAuth::kRequested) verify = SSL_VERIFY_PEER;
    if (s.client_auth == ClientAuth::kRequired) verify = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  } else if (s.verify_certificate) {
    verify = SSL_VERIFY_PEER;
  }
  SSL_CTX_set_verify(ctx.get(), verify, nullptr);
  return ctx;
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.front()))) part.remove_prefix(1);
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.back()))) part.remove_suffix(1);
    if (!part.empty()) out.emplace_back(part);
  }
  return out;
}

// The ciphertext on its way in and out, behind a BIO of Brook's own:
// OpenSSL reads straight from the buffers the wrapped connection
// delivered, and writes into buffers that go out as they are (a memory BIO
// would copy every byte once more each way).
struct Wire {
  std::deque<io::Buffer> in;  // received, not yet read by OpenSSL
  io::BufferChain out;        // written by OpenSSL, not yet sent
  // The buffer OpenSSL writes into: bytes [0, sent) were handed out,
  // [sent, used) are in none of `out`'s parts yet.
  io::Buffer chunk;
  size_t sent = 0;
  size_t used = 0;

  size_t pending_out() const { return out.size() + (used - sent); }
  io::BufferChain take_out() {
    if (used > sent) {
      out.append(chunk.slice(sent, used - sent));
      sent = used;
    }
    return std::exchange(out, io::BufferChain());
  }
  void write(const char* data, size_t size) {
    while (size > 0) {
      if (used == chunk.size()) {
        if (used > sent) out.append(chunk.slice(sent, used - sent));
        chunk = io::Buffer::allocate(kChunkBytes);
        sent = used = 0;
      }
      const size_t n = std::min(size, chunk.size() - used);
      std::memcpy(chunk.mutable_data() + used, data, n);
      used += n;
      data += n;
      size -= n;
    }
  }
  size_t read(char* data, size_t size) {
    size_t done = 0;
    while (done < size && !in.empty()) {
      io::Buffer& front = in.front();
      const size_t n = std::min(size - done, front.size());
      std::memcpy(data + done, front.data(), n);
      front.trim_front(n);
      if (front.empty()) in.pop_front();
      done += n;
    }
    return done;
  }
  static constexpr size_t kChunkBytes = 64 * 1024;
};

int wire_write(BIO* b, const char* data, size_t size, size_t* written) {
  BIO_clear_retry_flags(b);
  static_cast<Wire*>(BIO_get_data(b))->write(data, size);
  *written = size;
  return 1;
}

int wire_read(BIO* b, char* data, size_t size, size_t* read) {
  BIO_clear_retry_flags(b);
  Wire* w = static_cast<Wire*>(BIO_get_data(b));
  if (w->in.empty()) {
    BIO_set_retry_read(b);  // "want more", not the end of the stream
    *read = 0;
    return 0;
  }
  *read = w->read(data, size);
  return 1;
}

long wire_ctrl(BIO* b, int cmd, long, void*) {
  Wire* w = static_cast<Wire*>(BIO_get_data(b));
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;  // written out by the connection
    case BIO_CTRL_PENDING: {
      size_t n = 0;
      for (const io::Buffer& buffer : w->in) n += buffer.size();
      return static_cast<long>(n);
    }
    case BIO_CTRL_WPENDING:
      return static_cast<long>(w->pending_out());
    default:
      return 0;
  }
}

int wire_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

BIO* new_wire_bio(Wire* wire) {
  static BIO_METHOD* const kMethod = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "brook connection");
    BIO_meth_set_write_ex(m, wire_write);
    BIO_meth_set_read_ex(m, wire_read);
    BIO_meth_set_ctrl(m, wire_ctrl);
    BIO_meth_set_create(m, wire_create);
    return m;
  }();
  BIO* b = BIO_new(kMethod);
  if (b != nullptr) BIO_set_data(b, wire);
  return b;
}

// A connection with TLS over `inner_`.
class TlsConnection final : public io::Connection {
 public:
  explicit TlsConnection(std::unique_ptr<io::Connection> inner) : inner_(std::move(inner)) {}
  ~TlsConnection() override { SSL_free(ssl_); }  // and its BIO

  // Takes `ssl`, reading and writing through this connection's wire.
  bool attach(SSL* ssl) {
    ssl_ = ssl;
    BIO* bio = new_wire_bio(&wire_);
    if (bio == nullptr) return false;
    SSL_set_bio(ssl_, bio, bio);
    return true;
  }

  io::Task<absl::StatusOr<io::Buffer>> read_some(size_t bytes_max) override {
    if (bytes_max == 0) bytes_max = 1;
    io::Buffer out = io::Buffer::allocate(bytes_max);
    while (true) {
      // As much as the ciphertext at hand decrypts to.
      size_t filled = 0;
      int r = 1;
      int err = SSL_ERROR_NONE;
      while (filled < bytes_max) {
        ERR_clear_error();
        size_t n = 0;
        r = SSL_read_ex(ssl_, out.mutable_data() + filled, bytes_max - filled, &n);
        if (r != 1) {
          err = SSL_get_error(ssl_, r);
          break;
        }
        filled += n;
      }
      if (filled > 0) {
        out.trim_back(bytes_max - filled);
        co_return out;
      }
      if (err == SSL_ERROR_ZERO_RETURN) co_return io::Buffer();  // close_notify
      if (err != SSL_ERROR_WANT_READ) {
        fatal_ = true;
        co_return absl::DataLossError(fmt::format("TLS: {}", openssl_errors()));
      }
      absl::StatusOr<io::Buffer> bytes = co_await inner_->read_some(kReadChunkBytes);
      if (!bytes.ok()) co_return bytes.status();
      // The peer closed without close_notify: the end of the stream all
      // the same (the framing above notices a cut frame).
      if (bytes->empty()) co_return io::Buffer();
      wire_.in.push_back(std::move(*bytes));
    }
  }

  io::Task<absl::Status> write_all(io::BufferChain data) override {
    // Whole records: small parts of a response (its header, small record
    // batches) are gathered rather than each made a record; large ones
    // are encrypted where they lie.
    std::byte* record = record_.data();
    size_t held = 0;
    for (const io::Buffer& part : data.parts()) {
      size_t done = 0;
      while (done < part.size()) {
        if (held == 0 && part.size() - done >= kRecordBytes) {
          const size_t n = std::min(part.size() - done, kFlushBytes);
          if (absl::Status s = encrypt(part.data() + done, n); !s.ok()) co_return s;
          done += n;
        } else {
          const size_t n = std::min(part.size() - done, kRecordBytes - held);
          std::memcpy(record + held, part.data() + done, n);
          held += n;
          done += n;
          if (held == kRecordBytes) {
            if (absl::Status s = encrypt(record, held); !s.ok()) co_return s;
            held = 0;
          }
        }
        if (wire_.pending_out() >= kFlushBytes) {
          if (absl::Status s = co_await flush(); !s.ok()) co_return s;
        }
      }
    }
    if (held > 0) {
      if (absl::Status s = encrypt(record, held); !s.ok()) co_return s;
    }
    co_return co_await flush();
  }

  void close() override { inner_->close(); }
  // close_notify, so that the peer tells the end of the stream from a
  // connection cut short (OpenSSL 3 reports the latter as "unexpected eof
  // while reading"). Not after a fatal error, which OpenSSL forbids.
  io::Task<absl::Status> shutdown() override {
    if (fatal_) co_return absl::OkStatus();
    ERR_clear_error();
    if (SSL_shutdown(ssl_) < 0) co_return absl::DataLossError(fmt::format("TLS: {}", openssl_errors()));
    co_return co_await flush();
  }
  io::Address local_address() const override { return inner_->local_address(); }
  io::Address peer_address() const override { return inner_->peer_address(); }

  io::Task<absl::Status> handshake() {
    while (true) {
      ERR_clear_error();
      const int r = SSL_do_handshake(ssl_);
      const int err = r == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl_, r);
      std::string failure;
      if (r != 1 && err != SSL_ERROR_WANT_READ) failure = describe_failure(err);
      // Send what OpenSSL wrote (the next flight, or the alert that
      // tells the peer why the handshake failed).
      absl::Status flushed = co_await flush();
      if (!failure.empty()) co_return absl::UnauthenticatedError(fmt::format("TLS handshake failed: {}", failure));
      if (!flushed.ok()) co_return flushed;
      if (r == 1) co_return absl::OkStatus();
      absl::StatusOr<io::Buffer> bytes = co_await inner_->read_some(kReadChunkBytes);
      if (!bytes.ok()) co_return bytes.status();
      if (bytes->empty()) co_return absl::UnavailableError("TLS handshake: the peer closed the connection");
      wire_.in.push_back(std::move(*bytes));
    }
  }

 private:
  absl::Status encrypt(const std::byte* data, size_t size) {
    ERR_clear_error();
    size_t written = 0;
    if (SSL_write_ex(ssl_, data, size, &written) != 1 || written != size) {
      fatal_ = true;
      return absl::DataLossError(fmt::format("TLS: {}", openssl_errors()));
    }
    return absl::OkStatus();
  }

  // Writes out the ciphertext OpenSSL has produced.
  io::Task<absl::Status> flush() {
    if (wire_.pending_out() == 0) co_return absl::OkStatus();
    co_return co_await inner_->write_all(wire_.take_out());
  }

  std::string describe_failure(int err) {
    const long verified = SSL_get_verify_result(ssl_);
    std::string errors = openssl_errors();
    if (verified != X509_V_OK) {
      return fmt::format("certificate verification: {} ({})", X509_verify_cert_error_string(verified), errors);
    }
    if (err == SSL_ERROR_SYSCALL) return fmt::format("the peer broke the handshake off ({})", errors);
    return errors;
  }

  std::unique_ptr<io::Connection> inner_;
  SSL* ssl_ = nullptr;
  bool fatal_ = false;  // OpenSSL reported an error: no close_notify
  Wire wire_;
  std::vector<std::byte> record_ = std::vector<std::byte>(kRecordBytes);
};

bool is_ip_literal(const std::string& host) {
  ASN1_OCTET_STRING* ip = a2i_IPADDRESS(host.c_str());
  if (ip == nullptr) {
    ERR_clear_error();
    return false;
  }
  ASN1_OCTET_STRING_free(ip);
  return true;
}

io::Task<absl::StatusOr<std::unique_ptr<io::Connection>>> handshake(const Context* context,
                                                                    std::unique_ptr<io::Connection>* conn,
                                                                    const std::string* host) {
  SSL* ssl = SSL_new(context->native());
  if (ssl == nullptr) {
    (*conn)->close();
    co_return absl::InternalError(fmt::format("SSL_new: {}", openssl_errors()));
  }
  auto tls = std::make_unique<TlsConnection>(std::move(*conn));
  if (!tls->attach(ssl)) {
    tls->close();
    co_return absl::InternalError(fmt::format("BIO_new: {}", openssl_errors()));
  }
  if (context->is_server()) {
    SSL_set_accept_state(ssl);
  } else {
    SSL_set_connect_state(ssl);
    const bool ip = is_ip_literal(*host);
    if (!ip) SSL_set_tlsext_host_name(ssl, host->c_str());
    if (context->verify_hostname()) {
      X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
      const int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host->c_str()) : SSL_set1_host(ssl, host->c_str());
      if (ok != 1) {
        tls->close();
        co_return absl::InvalidArgumentError(fmt::format("TLS: cannot check host name {}", *host));
      }
    }
  }
  if (absl::Status s = co_await tls->handshake(); !s.ok()) {
    tls->close();
    co_return s;
  }
  co_return std::unique_ptr<io::Connection>(std::move(tls));
}

}  // namespace

absl::Status set_setting(Settings* s, std::string_view key, std::string_view value, bool* known) {
  *known = true;
  const std::map<std::string_view, std::string*> strings = {
      {"ssl.keystore.location", &s->keystore_location},
      {"ssl.keystore.password", &s->keystore_password},
      {"ssl.key.password", &s->key_password},
      {"ssl.keystore.certificate.chain", &s->keystore_certificate_chain},
      {"ssl.keystore.key", &s->keystore_key},
      {"ssl.certificate.location", &s->certificate_location},
      {"ssl.key.location", &s->key_location},
      {"ssl.truststore.location", &s->truststore_location},
      {"ssl.ca.location", &s->truststore_location},
      {"ssl.truststore.password", &s->truststore_password},
      {"ssl.truststore.certificates", &s->truststore_certificates},
  };
  if (auto it = strings.find(key); it != strings.end()) {
    *it->second = std::string(value);
    return absl::OkStatus();
  }
  if (key == "ssl.keystore.type" || key == "ssl.truststore.type") {
    // The kind is read from the file; the declared type is checked only
    // for being one Kafka knows.
    if (value != "JKS" && value != "PKCS12" && value != "PEM") {
      return absl::InvalidArgumentError(fmt::format("{}={}: JKS, PKCS12 or PEM", key, value));
    }
    return absl::OkStatus();
  }
  if (key == "ssl.client.auth") {
    if (value == "none") {
      s->client_auth = ClientAuth::kNone;
    } else if (value == "requested") {
      s->client_auth = ClientAuth::kRequested;
    } else if (value == "required") {
      s->client_auth = ClientAuth::kRequired;
    } else {
      return absl::InvalidArgumentError(fmt::format("ssl.client.auth={}: none, requested or required", value));
    }
    return absl::OkStatus();
  }
  if (key == "ssl.enabled.protocols") {
    s->enabled_protocols = split_list(value);
    return absl::OkStatus();
  }
  if (key == "ssl.cipher.suites") {
    s->cipher_suites = split_list(value);
    return absl::OkStatus();
  }
  if (key == "ssl.endpoint.identification.algorithm") {
    if (value == "https") {
      s->verify_hostname = true;
    } else if (value.empty() || value == "none") {
      s->verify_hostname = false;
    } else {
      return absl::InvalidArgumentError(
          fmt::format("ssl.endpoint.identification.algorithm={}: https, or empty for none", value));
    }
    return absl::OkStatus();
  }
  if (key == "enable.ssl.certificate.verification") {
    if (value != "true" && value != "false") {
      return absl::InvalidArgumentError(
          fmt::format("enable.ssl.certificate.verification={} is not true or false", value));
    }
    s->verify_certificate = value == "true";
    return absl::OkStatus();
  }
  *known = false;
  return absl::OkStatus();
}

absl::StatusOr<Settings> settings_from(Getter get) {
  Settings s;
  // ssl.ca.location (librdkafka's) first, so that Java's name wins.
  for (std::string_view key :
       {"ssl.ca.location", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
        "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.certificate.location", "ssl.key.location",
        "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates", "ssl.keystore.type",
        "ssl.truststore.type", "ssl.client.auth", "ssl.enabled.protocols", "ssl.cipher.suites",
        "ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification"}) {
    std::optional<std::string> value = get(key);
    if (!value.has_value()) continue;
    bool known = false;
    if (absl::Status st = set_setting(&s, key, *value, &known); !st.ok()) return st;
  }
  return s;
}

absl::StatusOr<std::shared_ptr<const Context>> Context::server(const Settings& settings, FileReader read_file) {
  absl::StatusOr<CtxPtr> ctx = make_context(settings, true, read_file);
  if (!ctx.ok()) return ctx.status();
  return std::shared_ptr<const Context>(new Context(ctx->release(), true, false));
}

absl::StatusOr<std::shared_ptr<const Context>> Context::client(const Settings& settings, FileReader read_file) {
  absl::StatusOr<CtxPtr> ctx = make_context(settings, false, read_file);
  if (!ctx.ok()) return ctx.status();
  return std::shared_ptr<const Context>(
      new Context(ctx->release(), false, settings.verify_hostname && settings.verify_certificate));
}

Context::~Context() { SSL_CTX_free(ctx_); }

io::Task<absl::StatusOr<std::unique_ptr<io::Connection>>> accept(const Context* context,
                                                                 std::unique_ptr<io::Connection>* conn) {
  static const std::string kNoHost;
  co_return co_await handshake(context, conn, &kNoHost);
}

io::Task<absl::StatusOr<std::unique_ptr<io::Connection>>> connect(const Context* context,
                                                                  std::unique_ptr<io::Connection>* conn,
                                                                  const std::string* host) {
  co_return co_await handshake(context, conn, host);
}

}  // namespace brook::net::tls
