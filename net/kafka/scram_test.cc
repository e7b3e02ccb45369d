// net/kafka/scram_test.cc
#include "net/kafka/scram.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <string>
#include <utility>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/strings/escaping.h"

namespace brook::net {
namespace {

std::string b64(std::string_view text) {
  std::string out;
  EXPECT_TRUE(absl::Base64Unescape(absl::string_view(text.data(), text.size()), &out));
  return out;
}

// RFC 7677's example (SCRAM-SHA-256), and the same exchange with SHA-512
// (expected values from Python's hashlib and hmac).
constexpr std::string_view kSalt = "W22ZaJ0SNY7soEsUEjb6gQ==";
constexpr std::string_view kClientNonce = "rOprNGfwEbeRWgbNEkqO";
constexpr std::string_view kServerFirst =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";

struct Vector {
  ScramMechanism mechanism;
  std::string_view client_final;
  std::string_view server_final;
  std::string_view stored_key;
  std::string_view server_key;
};

const Vector kVectors[] = {
    {ScramMechanism::kSha256,
     "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
     "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", "WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=",
     "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="},
    {ScramMechanism::kSha512,
     "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=gMGXRcevScNtxZ6/"
     "8lQYpGtnsNAc3mGcmNomv+xnoOMw+3R2xNJdMNnzMlTN8PPC6wdp6dybEmDYXYTxwnYPJQ==",
     "v=ZQnYEgWQMFmmsM8aQMF0nDDCy/AgCzkwk8CmMZYcMg0vSVlKDanekLtifDSeVGT4+5ZxXnJq199RVG2rR7N7Zw==",
     "6AAub3065EYRmyFpM2RNwqK+eGnrkYuEWbXn19LsEmBqzu8QaCXNc1FwpnX9NhH2hK/60dzj9DoO5DvVkOHbvg==",
     "jZHbYjC1aHh0/hKbxyBuGFjDrgjgKTT1esA7awWiKcRZ0o/0b1yWEebBeSVkkCFewf91nLDfKF24mvD5nmE6rA=="},
};

TEST(Scram, TheClientFollowsTheKnownExchanges) {
  for (const Vector& v : kVectors) {
    ScramClient client(v.mechanism, "user", "pencil", std::string(kClientNonce));
    EXPECT_EQ(client.first_message(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    absl::StatusOr<std::string> final_message = client.final_message(kServerFirst);
    ASSERT_TRUE(final_message.ok()) << final_message.status();
    EXPECT_EQ(*final_message, v.client_final);
    EXPECT_TRUE(client.check_server_final(v.server_final).ok());
    std::string forged(v.server_final);
    forged[4] = forged[4] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(client.check_server_final(forged).ok());
    EXPECT_FALSE(client.check_server_final("e=invalid-proof").ok());
  }
}

TEST(Scram, CredentialsAreTheKnownKeys) {
  for (const Vector& v : kVectors) {
    const ScramCredential c = scram_credential(v.mechanism, "pencil", b64(kSalt), 4096);
    EXPECT_EQ(c.stored_key, b64(v.stored_key));
    EXPECT_EQ(c.server_key, b64(v.server_key));
    EXPECT_EQ(c.salt, b64(kSalt));
    EXPECT_EQ(c.iterations, 4096);
  }
}

TEST(Scram, TheClientRefusesBadServerFirstMessages) {
  const std::string_view bad[] = {
      "r=someoneelse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",       // does not extend our nonce
      "r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",  // adds nothing
      "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1024",  // too few iterations
      "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=x",
      "r=rOprNGfwEbeRWgbNEkqOx,i=4096",
      "m=ext,r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
      "e=unknown-user",
  };
  for (std::string_view message : bad) {
    ScramClient client(ScramMechanism::kSha256, "user", "pencil", std::string(kClientNonce));
    EXPECT_FALSE(client.final_message(message).ok()) << message;
  }
}

class Credentials : public ScramCredentialLookup {
 public:
  std::optional<ScramCredential> find(ScramMechanism mechanism, std::string_view user) const override {
    auto it = map.find({mechanism, std::string(user)});
    if (it == map.end()) return std::nullopt;
    return it->second;
  }
  void add(ScramMechanism mechanism, const std::string& user, std::string_view password) {
    map[{mechanism, user}] = scram_credential(mechanism, password, "salt-of-" + user, 4096);
  }
  std::map<std::pair<ScramMechanism, std::string>, ScramCredential> map;
};

// Runs a whole exchange: the server's error, if any, at the step it came.
absl::Status exchange(ScramServer& server, ScramClient& client) {
  absl::StatusOr<std::string> first = server.step(client.first_message());
  if (!first.ok()) return first.status();
  absl::StatusOr<std::string> final_message = client.final_message(*first);
  if (!final_message.ok()) return final_message.status();
  absl::StatusOr<std::string> last = server.step(*final_message);
  if (!last.ok()) return last.status();
  return client.check_server_final(*last);
}

TEST(Scram, TheServerAuthenticatesTheRightPasswordOnly) {
  Credentials credentials;
  credentials.add(ScramMechanism::kSha256, "alice", "alice-secret");
  credentials.add(ScramMechanism::kSha512, "alice", "other-secret");
  credentials.add(ScramMechanism::kSha256, "a,b=c", "odd");
  io::Random random(7);
  for (ScramMechanism m : {ScramMechanism::kSha256, ScramMechanism::kSha512}) {
    ScramServer server(m, &credentials, &random);
    ScramClient client(m, "alice", m == ScramMechanism::kSha256 ? "alice-secret" : "other-secret",
                       scram_nonce(random));
    EXPECT_TRUE(exchange(server, client).ok());
    EXPECT_TRUE(server.complete());
    EXPECT_EQ(server.user(), "alice");
    EXPECT_FALSE(server.step("n,,n=alice,r=again").ok());  // the exchange is over
  }
  {
    // A user name with ',' and '=' goes escaped.
    ScramServer server(ScramMechanism::kSha256, &credentials, &random);
    ScramClient client(ScramMechanism::kSha256, "a,b=c", "odd", "nonce");
    EXPECT_EQ(client.first_message(), "n,,n=a=2Cb=3Dc,r=nonce");
    EXPECT_TRUE(exchange(server, client).ok());
    EXPECT_EQ(server.user(), "a,b=c");
  }
  // A wrong password, another mechanism's password, an unknown user.
  const std::tuple<ScramMechanism, std::string, std::string> wrong[] = {
      {ScramMechanism::kSha256, "alice", "nope"},
      {ScramMechanism::kSha256, "alice", "other-secret"},
      {ScramMechanism::kSha512, "bob", "alice-secret"},
  };
  for (const auto& [m, user, password] : wrong) {
    ScramServer server(m, &credentials, &random);
    ScramClient client(m, user, password, "nonce");
    absl::Status s = exchange(server, client);
    EXPECT_TRUE(absl::IsUnauthenticated(s)) << s;
    EXPECT_NE(s.message().find("invalid credentials with SASL mechanism"), std::string_view::npos) << s;
    EXPECT_FALSE(server.complete());
  }
}

TEST(Scram, TheServerRefusesMalformedAndTamperedMessages) {
  Credentials credentials;
  credentials.add(ScramMechanism::kSha256, "user", "pencil");
  io::Random random(11);
  const std::string_view bad_first[] = {
      "p=tls-unique,,n=user,r=abc",   // channel binding
      "n,a=other,n=user,r=abc",       // another authorization id
      "n,,n=user",                    // no nonce
      "n,,r=abc,n=user",              // out of order
      "n,,n=us=er,r=abc",             // a bad escape
      "n,,n=,r=abc",                  // no user
      "n,,n=user,r=abc,tokenauth=true",
      "x,,n=user,r=abc",
      "n=user,r=abc",
      "",
  };
  for (std::string_view message : bad_first) {
    ScramServer server(ScramMechanism::kSha256, &credentials, &random);
    EXPECT_FALSE(server.step(message).ok()) << message;
    EXPECT_FALSE(server.step("c=biws,r=abc,p=AAAA").ok()) << message;  // a failed exchange stays failed
  }
  {
    ScramServer server(ScramMechanism::kSha256, &credentials, &random);
    EXPECT_TRUE(server.step("n,a=user,n=user,r=abc,ext=1").ok());  // its own authzid; an unknown extension
  }
  // Tampering with the client-final message: the nonce, the channel
  // binding, the proof.
  const auto tamper = [](std::string final_message, int which) {
    switch (which) {
      case 0:
        return final_message.replace(final_message.find(",r=") + 3, 1, "X");
      case 1:
        return final_message.replace(0, 6, "c=eSws");  // "y,,"
      case 2:
        return final_message.replace(final_message.find(",p=") + 3, 2, "AA");
      default:
        return final_message.substr(0, final_message.find(",p="));
    }
  };
  for (int which = 0; which < 4; ++which) {
    ScramServer server(ScramMechanism::kSha256, &credentials, &random);
    ScramClient client(ScramMechanism::kSha256, "user", "pencil", "abc");
    absl::StatusOr<std::string> first = server.step(client.first_message());
    ASSERT_TRUE(first.ok());
    absl::StatusOr<std::string> final_message = client.final_message(*first);
    ASSERT_TRUE(final_message.ok());
    EXPECT_FALSE(server.step(tamper(*final_message, which)).ok()) << which;
    EXPECT_FALSE(server.complete());
  }
}

std::string hmac256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &size);
  return std::string(reinterpret_cast<const char*>(out), size);
}

// librdkafka 2.0.2's client-final message repeats its own nonce before the
// server-first nonce ("r=" CLIENT_NONCE CLIENT_NONCE SERVER_NONCE), and
// signs that. Kafka's server accepts it (the nonce ends with the server's);
// a server that wanted the nonce exactly refused every librdkafka client.
TEST(Scram, TheServerTakesLibrdkafkasRepeatedNonce) {
  Credentials credentials;
  credentials.add(ScramMechanism::kSha256, "user", "pencil");
  io::Random random(13);
  ScramServer server(ScramMechanism::kSha256, &credentials, &random);
  const std::string client_first_bare = "n=user,r=abc";
  absl::StatusOr<std::string> server_first = server.step("n,," + client_first_bare);
  ASSERT_TRUE(server_first.ok());
  const std::string nonce = server_first->substr(2, server_first->find(',') - 2);
  const std::string without_proof = "c=biws,r=abc" + nonce;
  const std::string auth = client_first_bare + "," + *server_first + "," + without_proof;
  const std::string salted = scram_salted_password(ScramMechanism::kSha256, "pencil", "salt-of-user", 4096);
  const std::string client_key = hmac256(salted, "Client Key");
  unsigned char stored[EVP_MAX_MD_SIZE];
  unsigned int stored_size = 0;
  EVP_Digest(client_key.data(), client_key.size(), stored, &stored_size, EVP_sha256(), nullptr);
  const std::string signature = hmac256(std::string_view(reinterpret_cast<const char*>(stored), stored_size), auth);
  std::string proof(client_key.size(), '\0');
  for (size_t i = 0; i < proof.size(); ++i) proof[i] = static_cast<char>(client_key[i] ^ signature[i]);
  absl::StatusOr<std::string> last =
      server.step(without_proof + ",p=" + absl::Base64Escape(absl::string_view(proof.data(), proof.size())));
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_TRUE(server.complete());
  const std::string server_signature = hmac256(hmac256(salted, "Server Key"), auth);
  EXPECT_EQ(*last, "v=" + absl::Base64Escape(absl::string_view(server_signature.data(), server_signature.size())));
}

TEST(Scram, MechanismNamesAndTypes) {
  EXPECT_EQ(scram_mechanism("SCRAM-SHA-256"), ScramMechanism::kSha256);
  EXPECT_EQ(scram_mechanism("SCRAM-SHA-512"), ScramMechanism::kSha512);
  EXPECT_EQ(scram_mechanism("PLAIN"), std::nullopt);
  EXPECT_EQ(scram_mechanism_of_type(1), ScramMechanism::kSha256);
  EXPECT_EQ(scram_mechanism_of_type(2), ScramMechanism::kSha512);
  EXPECT_EQ(scram_mechanism_of_type(0), std::nullopt);
  EXPECT_EQ(scram_mechanism_name(ScramMechanism::kSha512), "SCRAM-SHA-512");
}

// Any user and password authenticate with their own credential and with
// no other password.
RC_GTEST_PROP(ScramProperty, AnExchangeSucceedsExactlyWithTheRightPassword,
              (std::string user, std::string password, std::string other, bool sha512, uint64_t seed)) {
  RC_PRE(!user.empty());
  const ScramMechanism m = sha512 ? ScramMechanism::kSha512 : ScramMechanism::kSha256;
  Credentials credentials;
  credentials.map[{m, user}] = scram_credential(m, password, "salt", kScramMinIterations);
  io::Random random(seed);
  ScramServer good(m, &credentials, &random);
  ScramClient right(m, user, password, scram_nonce(random));
  RC_ASSERT(exchange(good, right).ok());
  RC_ASSERT(good.user() == user);
  ScramServer bad(m, &credentials, &random);
  ScramClient wrong(m, user, other, scram_nonce(random));
  RC_ASSERT(exchange(bad, wrong).ok() == (other == password));
}

}  // namespace
}  // namespace brook::net
