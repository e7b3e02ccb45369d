// net/kafka/sasl_test.cc
#include "net/kafka/sasl.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "net/kafka/errors.h"
#include "net/kafka/messages/api_versions_request.h"
#include "net/kafka/messages/sasl_authenticate_request.h"
#include "net/kafka/messages/sasl_authenticate_response.h"
#include "net/kafka/messages/sasl_handshake_request.h"
#include "net/kafka/messages/sasl_handshake_response.h"

namespace brook::net {
namespace {

using namespace std::string_literals;

constexpr std::string_view kJaas =
    R"(org.apache.kafka.common.security.plain.PlainLoginModule required
       username="admin" password="admin-secret"
       user_admin="admin-secret"
       user_alice="alice \"quoted\" secret";)";

TEST(SaslJaas, PlainUsersAreTheUserOptions) {
  absl::StatusOr<SaslPlainUsers> users = parse_plain_jaas(kJaas);
  ASSERT_TRUE(users.ok()) << users.status();
  EXPECT_EQ(users->passwords.size(), 2u);
  EXPECT_EQ(users->passwords.at("admin"), "admin-secret");
  EXPECT_EQ(users->passwords.at("alice"), "alice \"quoted\" secret");
}

TEST(SaslJaas, MalformedEntriesAreRefused) {
  const std::string_view bad[] = {
      "",
      "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"x\"",  // no ';'
      "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"x;",   // unclosed quote
      "org.apache.kafka.common.security.plain.PlainLoginModule mandatory user_a=\"x\";",
      "org.apache.kafka.common.security.scram.ScramLoginModule required user_a=\"x\";",
      "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\";",  // no user
      "org.apache.kafka.common.security.plain.PlainLoginModule required user_a;",
      "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"x\"; another",
  };
  for (std::string_view text : bad) EXPECT_FALSE(parse_plain_jaas(text).ok()) << text;
}

TEST(SaslPlain, TokensAreCheckedAgainstTheUsers) {
  const SaslPlainUsers users = *parse_plain_jaas(kJaas);
  EXPECT_EQ(*check_plain_token(users, "\0admin\0admin-secret"s), "admin");
  EXPECT_EQ(*check_plain_token(users, "admin\0admin\0admin-secret"s), "admin");
  EXPECT_EQ(*check_plain_token(users, "\0alice\0alice \"quoted\" secret"s), "alice");
  EXPECT_FALSE(check_plain_token(users, "\0admin\0wrong"s).ok());
  EXPECT_FALSE(check_plain_token(users, "\0nobody\0admin-secret"s).ok());
  EXPECT_FALSE(check_plain_token(users, "alice\0admin\0admin-secret"s).ok());  // another authorization id
  EXPECT_FALSE(check_plain_token(users, "\0admin\0"s).ok());
  EXPECT_FALSE(check_plain_token(users, "\0\0admin-secret"s).ok());
  EXPECT_FALSE(check_plain_token(users, "admin-secret"s).ok());
  EXPECT_FALSE(check_plain_token(users, "\0admin\0admin-secret\0"s).ok());
  EXPECT_FALSE(check_plain_token(users, ""s).ok());
}

// A request frame as a server reads it.
template <typename M>
RequestFrame frame_of(const M& body, int16_t version) {
  absl::StatusOr<io::BufferChain> encoded = encode_request(body, version, 7, std::optional<std::string>("test"));
  EXPECT_TRUE(encoded.ok());
  const io::Buffer whole = encoded->linearize();
  absl::StatusOr<ParsedRequest> parsed = parse_request(whole.slice(4));
  EXPECT_TRUE(parsed.ok());
  return parsed->frame;
}

template <typename M>
M response_of(const SaslServerSession::Step& step, int16_t version) {
  EXPECT_TRUE(step.response.has_value());
  const io::Buffer whole = step.response->linearize();
  int32_t correlation = -1;
  absl::StatusOr<M> decoded = decode_response<M>(whole.slice(4), version, &correlation);
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(correlation, 7);
  return decoded.ok() ? *decoded : M{};
}

SaslServerConfig plain_config() {
  SaslServerConfig config;
  config.mechanisms = {"PLAIN"};
  config.plain = *parse_plain_jaas(kJaas);
  return config;
}

SaslAuthenticateRequest authenticate(std::string token) {
  SaslAuthenticateRequest r;
  r.auth_bytes = io::Buffer::copy_of(std::string_view(token));
  return r;
}

TEST(SaslSession, HandshakeV1ThenAuthenticate) {
  const SaslServerConfig config = plain_config();
  for (int16_t version = 0; version <= 2; ++version) {
    SaslServerSession session(&config);
    SaslHandshakeRequest hs;
    hs.mechanism = "PLAIN";
    SaslServerSession::Step step = session.on_request(frame_of(hs, 1));
    EXPECT_FALSE(step.close);
    SaslHandshakeResponse hr = response_of<SaslHandshakeResponse>(step, 1);
    EXPECT_EQ(hr.error_code, 0);
    EXPECT_EQ(hr.mechanisms, std::vector<std::string>{"PLAIN"});
    EXPECT_FALSE(session.expects_bare_token());
    step = session.on_request(frame_of(authenticate("\0admin\0admin-secret"s), version));
    EXPECT_FALSE(step.close);
    EXPECT_EQ(response_of<SaslAuthenticateResponse>(step, version).error_code, 0);
    EXPECT_TRUE(session.authenticated());
    EXPECT_EQ(session.user(), "admin");
  }
}

TEST(SaslSession, AWrongPasswordIsAnsweredAndCloses) {
  const SaslServerConfig config = plain_config();
  SaslServerSession session(&config);
  SaslHandshakeRequest hs;
  hs.mechanism = "PLAIN";
  (void)session.on_request(frame_of(hs, 1));
  SaslServerSession::Step step = session.on_request(frame_of(authenticate("\0admin\0nope"s), 1));
  EXPECT_TRUE(step.close);
  SaslAuthenticateResponse r = response_of<SaslAuthenticateResponse>(step, 1);
  EXPECT_EQ(r.error_code, code(Error::kSaslAuthenticationFailed));
  EXPECT_NE(r.error_message.value_or("").find("Invalid username or password"), std::string::npos);
  EXPECT_FALSE(session.authenticated());
}

TEST(SaslSession, UnknownMechanismsAndOutOfOrderRequestsClose) {
  const SaslServerConfig config = plain_config();
  {
    SaslServerSession session(&config);
    SaslHandshakeRequest hs;
    hs.mechanism = "SCRAM-SHA-256";
    SaslServerSession::Step step = session.on_request(frame_of(hs, 1));
    EXPECT_TRUE(step.close);
    SaslHandshakeResponse r = response_of<SaslHandshakeResponse>(step, 1);
    EXPECT_EQ(r.error_code, code(Error::kUnsupportedSaslMechanism));
    EXPECT_EQ(r.mechanisms, std::vector<std::string>{"PLAIN"});
  }
  {
    // SaslAuthenticate with no handshake first.
    SaslServerSession session(&config);
    SaslServerSession::Step step = session.on_request(frame_of(authenticate("\0admin\0admin-secret"s), 1));
    EXPECT_TRUE(step.close);
    EXPECT_EQ(response_of<SaslAuthenticateResponse>(step, 1).error_code, code(Error::kIllegalSaslState));
    EXPECT_FALSE(session.authenticated());
  }
  {
    // Any other request before authenticating closes without an answer.
    SaslServerSession session(&config);
    SaslServerSession::Step step = session.on_request(frame_of(ApiVersionsRequest{}, 0));
    EXPECT_TRUE(step.close);
    EXPECT_FALSE(step.response.has_value());
  }
  {
    // SaslAuthenticate after a v0 handshake (which promised a bare token).
    SaslServerSession session(&config);
    SaslHandshakeRequest hs;
    hs.mechanism = "PLAIN";
    (void)session.on_request(frame_of(hs, 0));
    SaslServerSession::Step step = session.on_request(frame_of(authenticate("\0admin\0admin-secret"s), 1));
    EXPECT_TRUE(step.close);
    EXPECT_FALSE(session.authenticated());
  }
}

TEST(SaslSession, HandshakeV0ThenABareToken) {
  const SaslServerConfig config = plain_config();
  SaslServerSession session(&config);
  SaslHandshakeRequest hs;
  hs.mechanism = "PLAIN";
  SaslServerSession::Step step = session.on_request(frame_of(hs, 0));
  EXPECT_EQ(response_of<SaslHandshakeResponse>(step, 0).error_code, 0);
  EXPECT_TRUE(session.expects_bare_token());
  step = session.on_bare_token(io::Buffer::copy_of(std::string_view("\0alice\0alice \"quoted\" secret"s)));
  EXPECT_FALSE(step.close);
  ASSERT_TRUE(step.response.has_value());
  EXPECT_EQ(step.response->linearize().view(), std::string_view("\0\0\0\0", 4));  // an empty challenge
  EXPECT_EQ(session.user(), "alice");

  SaslServerSession wrong(&config);
  (void)wrong.on_request(frame_of(hs, 0));
  step = wrong.on_bare_token(io::Buffer::copy_of(std::string_view("\0alice\0nope"s)));
  EXPECT_TRUE(step.close);
  EXPECT_FALSE(step.response.has_value());
  EXPECT_FALSE(wrong.authenticated());
}

class OneUser : public ScramCredentialLookup {
 public:
  std::optional<ScramCredential> find(ScramMechanism mechanism, std::string_view user) const override {
    if (user != "alice") return std::nullopt;
    return scram_credential(mechanism, "alice-secret", "salt", 4096);
  }
};

TEST(SaslSession, ScramOverSaslAuthenticate) {
  OneUser users;
  io::Random random(3);
  SaslServerConfig config = plain_config();
  config.mechanisms = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"};
  config.scram = &users;
  config.random = &random;
  for (const std::string_view mechanism : {kScramSha256, kScramSha512}) {
    for (const std::string_view password : {"alice-secret", "wrong"}) {
      SaslServerSession session(&config);
      SaslHandshakeRequest hs;
      hs.mechanism = std::string(mechanism);
      SaslServerSession::Step step = session.on_request(frame_of(hs, 1));
      SaslHandshakeResponse hr = response_of<SaslHandshakeResponse>(step, 1);
      EXPECT_EQ(hr.error_code, 0);
      EXPECT_EQ(hr.mechanisms, config.mechanisms);
      ScramClient client(*scram_mechanism(mechanism), "alice", std::string(password), "client-nonce");
      step = session.on_request(frame_of(authenticate(client.first_message()), 2));
      EXPECT_FALSE(step.close);
      SaslAuthenticateResponse first = response_of<SaslAuthenticateResponse>(step, 2);
      EXPECT_EQ(first.error_code, 0);
      EXPECT_FALSE(session.authenticated());
      absl::StatusOr<std::string> final_message = client.final_message(first.auth_bytes.view());
      ASSERT_TRUE(final_message.ok()) << final_message.status();
      step = session.on_request(frame_of(authenticate(*final_message), 2));
      SaslAuthenticateResponse last = response_of<SaslAuthenticateResponse>(step, 2);
      if (password == "wrong") {
        EXPECT_TRUE(step.close);
        EXPECT_EQ(last.error_code, code(Error::kSaslAuthenticationFailed));
        EXPECT_EQ(last.error_message.value_or(""),
                  "Authentication failed during authentication due to invalid credentials with SASL mechanism " +
                      std::string(mechanism));
        EXPECT_FALSE(session.authenticated());
      } else {
        EXPECT_FALSE(step.close);
        EXPECT_EQ(last.error_code, 0);
        EXPECT_TRUE(client.check_server_final(last.auth_bytes.view()).ok());
        EXPECT_TRUE(session.authenticated());
        EXPECT_EQ(session.user(), "alice");
      }
    }
  }
}

TEST(SaslSession, ScramWithBareTokens) {
  OneUser users;
  io::Random random(5);
  SaslServerConfig config;
  config.mechanisms = {"SCRAM-SHA-512"};
  config.scram = &users;
  config.random = &random;
  SaslServerSession session(&config);
  SaslHandshakeRequest hs;
  hs.mechanism = "SCRAM-SHA-512";
  (void)session.on_request(frame_of(hs, 0));
  ASSERT_TRUE(session.expects_bare_token());
  ScramClient client(ScramMechanism::kSha512, "alice", "alice-secret", "client-nonce");
  // Each answer is the server's message, size-prefixed.
  const auto unframe = [](const SaslServerSession::Step& step) {
    EXPECT_TRUE(step.response.has_value());
    const std::string bytes(step.response->linearize().view());
    EXPECT_GE(bytes.size(), 4u);
    const uint32_t size = (static_cast<uint32_t>(static_cast<uint8_t>(bytes[0])) << 24) |
                          (static_cast<uint32_t>(static_cast<uint8_t>(bytes[1])) << 16) |
                          (static_cast<uint32_t>(static_cast<uint8_t>(bytes[2])) << 8) |
                          static_cast<uint8_t>(bytes[3]);
    EXPECT_EQ(size, bytes.size() - 4);
    return bytes.substr(4);
  };
  SaslServerSession::Step step = session.on_bare_token(io::Buffer::copy_of(std::string_view(client.first_message())));
  EXPECT_FALSE(step.close);
  absl::StatusOr<std::string> final_message = client.final_message(unframe(step));
  ASSERT_TRUE(final_message.ok()) << final_message.status();
  EXPECT_TRUE(session.expects_bare_token());
  step = session.on_bare_token(io::Buffer::copy_of(std::string_view(*final_message)));
  EXPECT_FALSE(step.close);
  EXPECT_TRUE(client.check_server_final(unframe(step)).ok());
  EXPECT_EQ(session.user(), "alice");

  // SCRAM not enabled: refused; a mechanism that is enabled but has no
  // credentials behind it fails the exchange.
  SaslServerConfig plain = plain_config();
  SaslServerSession refused(&plain);
  step = refused.on_request(frame_of(hs, 0));
  EXPECT_TRUE(step.close);
  EXPECT_EQ(response_of<SaslHandshakeResponse>(step, 0).error_code, code(Error::kUnsupportedSaslMechanism));
  SaslServerConfig empty;
  empty.mechanisms = {"SCRAM-SHA-512"};
  empty.random = &random;
  SaslServerSession nobody(&empty);
  (void)nobody.on_request(frame_of(hs, 0));
  step = nobody.on_bare_token(io::Buffer::copy_of(std::string_view(client.first_message())));
  EXPECT_TRUE(step.close);
  EXPECT_FALSE(step.response.has_value());
}

}  // namespace
}  // namespace brook::net
