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

SaslAuthenticateRequest authenticate(std::string token) {
  SaslAuthenticateRequest r;
  r.auth_bytes = io::Buffer::copy_of(std::string_view(token));
  return r;
}

TEST(SaslSession, HandshakeV1ThenAuthenticate) {
  const SaslPlainUsers users = *parse_plain_jaas(kJaas);
  for (int16_t version = 0; version <= 2; ++version) {
    SaslServerSession session(&users);
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
  const SaslPlainUsers users = *parse_plain_jaas(kJaas);
  SaslServerSession session(&users);
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
  const SaslPlainUsers users = *parse_plain_jaas(kJaas);
  {
    SaslServerSession session(&users);
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
    SaslServerSession session(&users);
    SaslServerSession::Step step = session.on_request(frame_of(authenticate("\0admin\0admin-secret"s), 1));
    EXPECT_TRUE(step.close);
    EXPECT_EQ(response_of<SaslAuthenticateResponse>(step, 1).error_code, code(Error::kIllegalSaslState));
    EXPECT_FALSE(session.authenticated());
  }
  {
    // Any other request before authenticating closes without an answer.
    SaslServerSession session(&users);
    SaslServerSession::Step step = session.on_request(frame_of(ApiVersionsRequest{}, 0));
    EXPECT_TRUE(step.close);
    EXPECT_FALSE(step.response.has_value());
  }
  {
    // SaslAuthenticate after a v0 handshake (which promised a bare token).
    SaslServerSession session(&users);
    SaslHandshakeRequest hs;
    hs.mechanism = "PLAIN";
    (void)session.on_request(frame_of(hs, 0));
    SaslServerSession::Step step = session.on_request(frame_of(authenticate("\0admin\0admin-secret"s), 1));
    EXPECT_TRUE(step.close);
    EXPECT_FALSE(session.authenticated());
  }
}

TEST(SaslSession, HandshakeV0ThenABareToken) {
  const SaslPlainUsers users = *parse_plain_jaas(kJaas);
  SaslServerSession session(&users);
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

  SaslServerSession wrong(&users);
  (void)wrong.on_request(frame_of(hs, 0));
  step = wrong.on_bare_token(io::Buffer::copy_of(std::string_view("\0alice\0nope"s)));
  EXPECT_TRUE(step.close);
  EXPECT_FALSE(step.response.has_value());
  EXPECT_FALSE(wrong.authenticated());
}

}  // namespace
}  // namespace brook::net
