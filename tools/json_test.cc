// tools/json_test.cc
#include "tools/json.h"

#include <gtest/gtest.h>

namespace brook::tools {
namespace {

TEST(Json, ReadsAReassignmentPlan) {
  absl::StatusOr<JsonValue> v = parse_json(
      " {\"version\": 1, \"partitions\": [{\"topic\": \"a\\u00e9\\n\", \"partition\": 0, \"replicas\": [5, 6],"
      " \"log_dirs\": [\"any\", \"any\"], \"x\": [true, false, null, -1.5e3, {}]}]} ");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->field("version")->integer(), 1);
  const JsonValue& p = v->field("partitions")->items.at(0);
  EXPECT_EQ(p.field("topic")->text, "a\xc3\xa9\n");
  EXPECT_EQ(p.field("replicas")->items.at(1).integer(), 6);
  const JsonValue& x = *p.field("x");
  ASSERT_EQ(x.items.size(), 5u);
  EXPECT_TRUE(x.items[0].kind == JsonValue::Kind::kBool && x.items[0].boolean);
  EXPECT_TRUE(x.items[1].kind == JsonValue::Kind::kBool && !x.items[1].boolean);
  EXPECT_EQ(x.items[2].kind, JsonValue::Kind::kNull);
  EXPECT_EQ(x.items[3].text, "-1.5e3");
  EXPECT_EQ(x.items[3].integer(), std::nullopt);  // not an integer
  EXPECT_EQ(x.items[4].kind, JsonValue::Kind::kObject);
  EXPECT_EQ(p.field("missing"), nullptr);
}

TEST(Json, RefusesMalformedText) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "\"open", "01x", "1 2", "tru", "[\"\\x\"]",
                          "[\"\\ud800\"]", "{1:2}", "-", "1.", "1e", "\"a\nb\""}) {
    EXPECT_FALSE(parse_json(bad).ok()) << bad;
  }
  std::string deep(100, '[');
  EXPECT_FALSE(parse_json(deep + std::string(100, ']')).ok());
  EXPECT_TRUE(parse_json("[[[[1]]]]").ok());
  EXPECT_EQ(parse_json("99999999999999999999")->integer(), std::nullopt);  // beyond int64
}

}  // namespace
}  // namespace brook::tools
