// core/bootstrap_records_test.cc
#include "core/bootstrap_records.h"

#include <gtest/gtest.h>

#include <variant>

#include "absl/strings/escaping.h"
#include "net/kafka/scram.h"

namespace brook::core {
namespace {

TEST(BootstrapRecords, AddScramMakesTheCredentialOfThePassword) {
  io::Random random(1);
  absl::StatusOr<net::UserScramCredentialRecord> r =
      parse_add_scram("SCRAM-SHA-512=[name=alice,iterations=8192,password=alice-secret]", random);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->name, "alice");
  EXPECT_EQ(r->mechanism, 2);
  EXPECT_EQ(r->iterations, 8192);
  EXPECT_EQ(r->salt.size(), 32u);
  const net::ScramCredential c =
      net::scram_credential(net::ScramMechanism::kSha512, "alice-secret", r->salt.view(), 8192);
  EXPECT_EQ(r->stored_key.view(), c.stored_key);
  EXPECT_EQ(r->server_key.view(), c.server_key);

  // A given salt and salted password (Kafka's quoted form), default
  // iterations.
  const std::string salted = net::scram_salted_password(net::ScramMechanism::kSha256, "pw", "salt", 4096);
  const std::string argument = "SCRAM-SHA-256=[name=\"bob\",salt=\"" + absl::Base64Escape("salt") +
                               "\",saltedpassword=\"" + absl::Base64Escape(salted) + "\"]";
  r = parse_add_scram(argument, random);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->name, "bob");
  EXPECT_EQ(r->iterations, 4096);
  EXPECT_EQ(r->stored_key.view(), net::scram_credential(net::ScramMechanism::kSha256, "pw", "salt", 4096).stored_key);
}

TEST(BootstrapRecords, BadAddScramArgumentsAreRefused) {
  io::Random random(2);
  const std::string_view bad[] = {
      "SCRAM-SHA-1=[name=a,password=p]",
      "SCRAM-SHA-256=name=a,password=p",
      "SCRAM-SHA-256=[password=p]",
      "SCRAM-SHA-256=[name=a]",
      "SCRAM-SHA-256=[name=a,password=p,saltedpassword=cA==,salt=cA==]",
      "SCRAM-SHA-256=[name=a,saltedpassword=cA==]",
      "SCRAM-SHA-256=[name=a,password=p,iterations=100]",
      "SCRAM-SHA-256=[name=a,password=p,iterations=20000]",
      "SCRAM-SHA-256=[name=a,password=p,colour=blue]",
  };
  for (std::string_view argument : bad) EXPECT_FALSE(parse_add_scram(argument, random).ok()) << argument;
}

TEST(BootstrapRecords, TheFileRoundTripsAndRefusesAnythingElse) {
  io::Random random(3);
  std::vector<metadata::MetadataRecord> records;
  records.emplace_back(*parse_add_scram("SCRAM-SHA-256=[name=a,password=p]", random));
  records.emplace_back(*parse_add_scram("SCRAM-SHA-512=[name=b,password=q]", random));
  const std::string text = encode_bootstrap_records(records);
  absl::StatusOr<std::vector<metadata::MetadataRecord>> back = decode_bootstrap_records(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, records);

  EXPECT_FALSE(decode_bootstrap_records("").ok());
  EXPECT_FALSE(decode_bootstrap_records("record=AAAA\n").ok());  // no version line
  EXPECT_FALSE(decode_bootstrap_records("version=1\nrecord=%%%\n").ok());
  EXPECT_FALSE(decode_bootstrap_records("version=1\nsomething=else\n").ok());
  std::string damaged = text;
  damaged[damaged.size() - 6] = damaged[damaged.size() - 6] == 'A' ? 'B' : 'A';
  absl::StatusOr<std::vector<metadata::MetadataRecord>> changed = decode_bootstrap_records(damaged);
  EXPECT_TRUE(!changed.ok() || *changed != records);
  // A record of another type is not a bootstrap record.
  net::TopicRecord topic;
  topic.name = "t";
  std::vector<metadata::MetadataRecord> other;
  other.emplace_back(topic);
  EXPECT_FALSE(decode_bootstrap_records(encode_bootstrap_records(other)).ok());
}

}  // namespace
}  // namespace brook::core
