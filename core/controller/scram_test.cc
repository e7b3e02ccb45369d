// core/controller/scram_test.cc
#include "core/controller/scram.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "net/kafka/errors.h"

namespace brook::controller {
namespace {

using Request = net::AlterUserScramCredentialsRequest;

void upsert(Request* r, std::string name, int8_t mechanism, int32_t iterations) {
  auto& u = r->upsertions.emplace_back();
  u.name = std::move(name);
  u.mechanism = mechanism;
  u.iterations = iterations;
  u.salt = io::Buffer::copy_of(std::string_view("salt"));
  u.salted_password = io::Buffer::copy_of(std::string_view("salted"));
}

void remove(Request* r, std::string name, int8_t mechanism) {
  auto& d = r->deletions.emplace_back();
  d.name = std::move(name);
  d.mechanism = mechanism;
}

int16_t error_of(const ScramChanges& c, const std::string& user) {
  for (const auto& r : c.response.results) {
    if (r.user == user) return r.error_code;
  }
  ADD_FAILURE() << "no result for " << user;
  return -1;
}

TEST(ScramControl, EachUserIsCheckedAndOnlyGoodUsersAreWritten) {
  metadata::ScramImage image;
  image.mechanisms[2]["old"] = net::scram_credential(net::ScramMechanism::kSha512, "p", "s", 4096);
  Request r;
  upsert(&r, "both", 1, 4096);
  upsert(&r, "both", 2, 16384);
  upsert(&r, "twice", 1, 4096);
  upsert(&r, "twice", 1, 5000);
  upsert(&r, "", 1, 4096);
  upsert(&r, "few", 1, 4095);
  upsert(&r, "many", 2, 16385);
  upsert(&r, "unknown", 3, 4096);
  upsert(&r, "half", 1, 4096);   // its other alteration fails: nothing for it
  remove(&r, "half", 1);         // ...twice for SCRAM-SHA-256
  remove(&r, "missing", 1);
  remove(&r, "old", 2);
  const ScramChanges c = alter_scram_credentials(image, r);
  using net::Error;
  EXPECT_EQ(error_of(c, "both"), 0);
  EXPECT_EQ(error_of(c, "twice"), net::code(Error::kDuplicateResource));
  EXPECT_EQ(error_of(c, ""), net::code(Error::kUnacceptableCredential));
  EXPECT_EQ(error_of(c, "few"), net::code(Error::kUnacceptableCredential));
  EXPECT_EQ(error_of(c, "many"), net::code(Error::kUnacceptableCredential));
  EXPECT_EQ(error_of(c, "unknown"), net::code(Error::kUnsupportedSaslMechanism));
  EXPECT_EQ(error_of(c, "half"), net::code(Error::kDuplicateResource));
  EXPECT_EQ(error_of(c, "missing"), net::code(Error::kResourceNotFound));
  EXPECT_EQ(error_of(c, "old"), 0);
  EXPECT_EQ(c.response.results.size(), 9u);  // one per user
  // old: one removal (deletions come first); both: two credentials.
  ASSERT_EQ(c.records.size(), 3u);
  EXPECT_EQ(std::get<net::RemoveUserScramCredentialRecord>(c.records[0]).name, "old");
  const auto& first = std::get<net::UserScramCredentialRecord>(c.records[1]);
  EXPECT_EQ(first.name, "both");
  EXPECT_EQ(first.mechanism, 1);
  const net::ScramCredential expected =
      net::scram_credential_from_salted(net::ScramMechanism::kSha256, "salted", "salt", 4096);
  EXPECT_EQ(first.stored_key.view(), expected.stored_key);
  EXPECT_EQ(first.server_key.view(), expected.server_key);
  EXPECT_EQ(std::get<net::UserScramCredentialRecord>(c.records[2]).iterations, 16384);
  EXPECT_EQ(c.written.size(), 2u);
}

TEST(ScramControl, DescribeNamesEveryUserOrTheOnesAskedFor) {
  metadata::ScramImage image;
  image.mechanisms[1]["a"] = net::scram_credential(net::ScramMechanism::kSha256, "p", "s", 4096);
  image.mechanisms[2]["a"] = net::scram_credential(net::ScramMechanism::kSha512, "p", "s", 8192);
  image.mechanisms[2]["b"] = net::scram_credential(net::ScramMechanism::kSha512, "p", "s", 4096);
  net::DescribeUserScramCredentialsRequest all;
  all.users = std::nullopt;
  net::DescribeUserScramCredentialsResponse r = describe_scram_credentials(image, all);
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].user, "a");
  ASSERT_EQ(r.results[0].credential_infos.size(), 2u);
  EXPECT_EQ(r.results[0].credential_infos[1].iterations, 8192);
  net::DescribeUserScramCredentialsRequest named;
  named.users.emplace();
  for (const char* n : {"b", "zed", "b2", "b2"}) named.users->emplace_back().name = n;
  r = describe_scram_credentials(image, named);
  ASSERT_EQ(r.results.size(), 3u);
  EXPECT_EQ(r.results[0].user, "b");
  EXPECT_EQ(r.results[0].error_code, 0);
  EXPECT_EQ(r.results[1].user, "b2");
  EXPECT_EQ(r.results[1].error_code, net::code(net::Error::kDuplicateResource));
  EXPECT_EQ(r.results[2].error_code, net::code(net::Error::kResourceNotFound));
}

}  // namespace
}  // namespace brook::controller
