// core/meta_properties_test.cc
//
// Tests of meta.properties (core/meta_properties.h): the exact bytes written,
// files as Kafka writes them (version 1 with directory.id, version 0 with
// broker.id), rejection of every kind of malformed file, formatting on the
// simulated disk (durable once it returns, also when the power fails midway),
// --ignore-formatted, and the start-up check across several directories.
#include "core/meta_properties.h"

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "io/assert.h"
#include "io/scope.h"
#include "io/when.h"
#include "sim/disk.h"
#include "sim/test_executor.h"
#include "storage/checkpoint.h"

namespace brook::core {

void PrintTo(const MetaProperties& meta, std::ostream* os) { *os << to_string(meta); }

namespace {

using absl::StatusCode;
using sim::DiskView;
using sim::SimDisk;
using sim::TestExecutor;

// Kafka's much-copied example cluster id (its last character has unused bits
// set) and ids as Kafka's Uuid.toString writes them.
constexpr std::string_view kKafkaClusterId = "MkU3OEVBNTcwNTJENDM2Qk";
constexpr std::string_view kClusterId = "q1Sh-9_ES3yzOp0GSkw7Ag";
constexpr std::string_view kOtherClusterId = "Vv6wD1FfQXKbE6o0xW1X9w";
constexpr std::string_view kDirectoryId = "J8rXd4tDQl-eEo0b5q5h1Q";
constexpr std::string_view kOtherDirectoryId = "7bKjO2xyR4yT0n3QmQ4wGw";

net::Uuid uuid(std::string_view text) {
  const std::optional<net::Uuid> id = storage::parse_uuid(text);
  BROOK_ASSERT_MSG(id.has_value(), "bad test uuid '{}'", text);
  return *id;
}

net::Uuid uuid_of(uint64_t high, uint64_t low) {
  net::Uuid id;
  for (size_t i = 0; i < 8; ++i) {
    id.bytes[i] = static_cast<uint8_t>(high >> (56 - 8 * i));
    id.bytes[8 + i] = static_cast<uint8_t>(low >> (56 - 8 * i));
  }
  return id;
}

MetaProperties meta_of(std::string_view cluster_id, int32_t node_id,
                       std::optional<std::string_view> directory_id = std::nullopt,
                       int version = kMetaPropertiesVersion1) {
  MetaProperties meta;
  meta.version = version;
  meta.cluster_id = std::string(cluster_id);
  meta.node_id = node_id;
  if (directory_id.has_value()) meta.directory_id = uuid(*directory_id);
  return meta;
}

// Expects `status` to have `code` and a message containing `fragment`.
void expect_error(const absl::Status& status, StatusCode code, std::string_view fragment) {
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_NE(std::string(status.message()).find(fragment), std::string::npos)
      << status << " does not mention '" << fragment << "'";
}

// ===========================================================================
// The file's text
// ===========================================================================

TEST(MetaPropertiesText, EncodesVersion1ByteForByte) {
  EXPECT_EQ(encode_meta_properties(meta_of(kClusterId, 1, kDirectoryId)),
            "#\n"
            "#Written by brook\n"
            "cluster.id=q1Sh-9_ES3yzOp0GSkw7Ag\n"
            "directory.id=J8rXd4tDQl-eEo0b5q5h1Q\n"
            "node.id=1\n"
            "version=1\n");
  EXPECT_EQ(encode_meta_properties(meta_of(kKafkaClusterId, 2147483647)),
            "#\n"
            "#Written by brook\n"
            "cluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
            "node.id=2147483647\n"
            "version=1\n");
}

TEST(MetaPropertiesText, EncodesVersion0WithBrokerId) {
  EXPECT_EQ(encode_meta_properties(meta_of(kClusterId, 0, std::nullopt, kMetaPropertiesVersion0)),
            "#\n"
            "#Written by brook\n"
            "broker.id=0\n"
            "cluster.id=q1Sh-9_ES3yzOp0GSkw7Ag\n"
            "version=0\n");
}

TEST(MetaPropertiesText, RoundTrips) {
  const std::vector<MetaProperties> cases = {
      meta_of(kClusterId, 1, kDirectoryId),
      meta_of(kKafkaClusterId, 0),
      meta_of(kClusterId, 7, kOtherDirectoryId, kMetaPropertiesVersion0),
      meta_of(kOtherClusterId, 3, std::nullopt, kMetaPropertiesVersion0),
  };
  for (const MetaProperties& meta : cases) {
    absl::StatusOr<MetaProperties> decoded = decode_meta_properties(encode_meta_properties(meta));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, meta);
  }
}

// Kafka 3.7+ (`kafka-storage format`): a date line, Hashtable order.
TEST(MetaPropertiesText, DecodesKafkaVersion1File) {
  absl::StatusOr<MetaProperties> meta = decode_meta_properties(
      "#\n"
      "#Tue Nov 21 10:09:56 UTC 2023\n"
      "node.id=1\n"
      "directory.id=J8rXd4tDQl-eEo0b5q5h1Q\n"
      "version=1\n"
      "cluster.id=MkU3OEVBNTcwNTJENDM2Qk\n");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(*meta, meta_of(kKafkaClusterId, 1, kDirectoryId));
}

// A ZooKeeper-era broker's file: version 0, broker.id, no directory.id.
TEST(MetaPropertiesText, DecodesKafkaVersion0File) {
  absl::StatusOr<MetaProperties> meta = decode_meta_properties(
      "#\n"
      "#Mon Jan 04 12:00:00 UTC 2021\n"
      "cluster.id=q1Sh-9_ES3yzOp0GSkw7Ag\n"
      "version=0\n"
      "broker.id=1001\n");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(*meta, meta_of(kClusterId, 1001, std::nullopt, kMetaPropertiesVersion0));
}

// Properties.load's leniencies: no version means 0, ':' separators,
// whitespace, '!' comments, blank lines, "\r\n", no final line end, unknown
// keys.
TEST(MetaPropertiesText, DecodesPropertiesSyntax) {
  absl::StatusOr<MetaProperties> v0 = decode_meta_properties("broker.id=5\ncluster.id=abc");
  ASSERT_TRUE(v0.ok()) << v0.status();
  EXPECT_EQ(*v0, meta_of("abc", 5, std::nullopt, kMetaPropertiesVersion0));

  absl::StatusOr<MetaProperties> v1 = decode_meta_properties(
      "! a comment\r\n"
      "\r\n"
      "   # another\r\n"
      "  version : 1 \r\n"
      "\tnode.id=\t42\r\n"
      "cluster.id:q1Sh-9_ES3yzOp0GSkw7Ag\r\n"
      "some.future.key=whatever\r\n"
      "\r\n");
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(*v1, meta_of(kClusterId, 42));

  // The first separator splits; the value may hold the other.
  absl::StatusOr<MetaProperties> odd =
      decode_meta_properties("version=1\nnode.id=1\ncluster.id=x:y\n");
  ASSERT_TRUE(odd.ok()) << odd.status();
  EXPECT_EQ(odd->cluster_id, "x:y");
}

struct MalformedCase {
  std::string text;
  std::string fragment;
};

TEST(MetaPropertiesText, RejectsEveryMalformedFile) {
  const std::string ok_rest = "cluster.id=q1Sh-9_ES3yzOp0GSkw7Ag\n";
  const std::vector<MalformedCase> cases = {
      {"", "no properties (empty file)"},
      {"#\n#Written by brook\n\n", "no properties (empty file)"},
      {"version=1\nnode.id\n", "line 2: expected 'key=value' or 'key:value', got 'node.id'"},
      {"version=1\nnode.id 1\n", "line 2: expected 'key=value'"},
      {"=1\n", "line 1: empty key"},
      {" : 1\n", "line 1: empty key"},
      {"node id=1\n", "line 1: whitespace in key 'node id'"},
      {"version=1\nnode.id=1\n" + ok_rest + "version=1\n",
       "line 4: version given twice (first on line 1)"},
      {"version=1\nnode.id=1\\\n  2\n" + ok_rest, "line 2: backslash escapes are not supported"},
      {"version=2\nnode.id=1\n" + ok_rest, "line 1: unknown version '2' (expected 0 or 1)"},
      {"version=-1\nnode.id=1\n" + ok_rest, "line 1: unknown version '-1'"},
      {"version=one\nnode.id=1\n" + ok_rest, "line 1: unknown version 'one'"},
      {"version=\nnode.id=1\n" + ok_rest, "line 1: unknown version ''"},
      {"version=1\n" + ok_rest, "node.id was not found (version 1)"},
      {"version=1\nbroker.id=1\n" + ok_rest, "node.id was not found (version 1)"},
      {"version=0\nnode.id=1\n" + ok_rest, "broker.id was not found (version 0)"},
      {"node.id=1\n" + ok_rest, "broker.id was not found (version 0)"},
      {"version=1\nnode.id=x\n" + ok_rest, "line 2: bad node.id 'x'"},
      {"version=1\nnode.id=-1\n" + ok_rest, "line 2: bad node.id '-1'"},
      {"version=1\nnode.id=+1\n" + ok_rest, "line 2: bad node.id '+1'"},
      {"version=1\nnode.id=2147483648\n" + ok_rest, "line 2: bad node.id '2147483648'"},
      {"version=1\nnode.id=\n" + ok_rest, "line 2: bad node.id ''"},
      {"version=0\nbroker.id=1.5\n" + ok_rest, "line 2: bad broker.id '1.5'"},
      {"version=1\nnode.id=1\n", "cluster.id was not found"},
      {"version=1\nnode.id=1\ncluster.id=  \n", "line 3: empty cluster.id"},
      {"version=1\nnode.id=1\n" + ok_rest + "directory.id=J8rXd4tDQl-eEo0b5q5h1\n",
       "line 4: bad directory.id 'J8rXd4tDQl-eEo0b5q5h1' (expected a 22-character Uuid)"},
      {"version=1\nnode.id=1\n" + ok_rest + "directory.id=J8rXd4tDQl+eEo0b5q5h1Q\n",
       "line 4: bad directory.id"},
      {"version=1\nnode.id=1\n" + ok_rest + "directory.id=J8rXd4tDQl-eEo0b5q5h1Q==\n",
       "line 4: bad directory.id"},
      {"version=1\nnode.id=1\n" + ok_rest + "directory.id=\n", "line 4: bad directory.id ''"},
  };
  for (const MalformedCase& c : cases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<MetaProperties> meta = decode_meta_properties(c.text);
    ASSERT_FALSE(meta.ok()) << to_string(*meta);
    expect_error(meta.status(), StatusCode::kDataLoss, c.fragment);
  }
}

// ===========================================================================
// Identifiers
// ===========================================================================

TEST(MetaPropertiesIds, ClusterIdValidation) {
  EXPECT_TRUE(is_valid_cluster_id(kClusterId));
  EXPECT_TRUE(is_valid_cluster_id(kKafkaClusterId));
  EXPECT_TRUE(is_valid_cluster_id("AAAAAAAAAAAAAAAAAAAAAA"));
  EXPECT_TRUE(is_valid_cluster_id("-_-_-_-_-_-_-_-_-_-_-_"));
  EXPECT_FALSE(is_valid_cluster_id(""));
  EXPECT_FALSE(is_valid_cluster_id("brook-cluster"));
  EXPECT_FALSE(is_valid_cluster_id("q1Sh-9_ES3yzOp0GSkw7A"));     // 21
  EXPECT_FALSE(is_valid_cluster_id("q1Sh-9_ES3yzOp0GSkw7Ag0"));   // 23
  EXPECT_FALSE(is_valid_cluster_id("q1Sh-9_ES3yzOp0GSkw7Ag=="));  // padded
  EXPECT_FALSE(is_valid_cluster_id("q1Sh+9_ES3yzOp0GSkw7Ag"));    // standard base64
  EXPECT_FALSE(is_valid_cluster_id("q1Sh-9/ES3yzOp0GSkw7Ag"));
  EXPECT_FALSE(is_valid_cluster_id("q1Sh-9_ES3yzOp0GSkw7A "));
}

TEST(MetaPropertiesIds, RandomIdsAreValidAndSeeded) {
  io::Random random(7);
  std::set<std::string> seen;
  for (int i = 0; i < 2000; ++i) {
    const std::string id = random_cluster_id(random);
    ASSERT_TRUE(is_valid_cluster_id(id)) << id;
    ASSERT_NE(id.front(), '-') << id;
    // Canonical: it reads back as the same Uuid.
    const std::optional<net::Uuid> parsed = storage::parse_uuid(id);
    ASSERT_TRUE(parsed.has_value()) << id;
    ASSERT_EQ(parsed->to_string(), id);
    seen.insert(id);
    const net::Uuid dir = random_directory_id(random);
    ASSERT_FALSE(is_reserved_directory_id(dir)) << dir.to_string();
    ASSERT_NE(dir.to_string().front(), '-');
  }
  EXPECT_EQ(seen.size(), 2000u);
  io::Random a(99), b(99);
  EXPECT_EQ(random_cluster_id(a), random_cluster_id(b));
}

TEST(MetaPropertiesIds, ReservedDirectoryIdsAreKafkas) {
  EXPECT_TRUE(is_reserved_directory_id(uuid_of(0, 0)));  // unassigned
  EXPECT_TRUE(is_reserved_directory_id(uuid_of(0, 1)));  // lost
  EXPECT_TRUE(is_reserved_directory_id(uuid_of(0, 2)));  // migrating
  EXPECT_TRUE(is_reserved_directory_id(uuid_of(0, 99)));
  EXPECT_FALSE(is_reserved_directory_id(uuid_of(0, 100)));
  EXPECT_FALSE(is_reserved_directory_id(uuid_of(1, 0)));
  // Kafka compares the low half as a signed long.
  EXPECT_TRUE(is_reserved_directory_id(uuid_of(0, 0x8000000000000000ULL)));
  EXPECT_FALSE(is_reserved_directory_id(uuid(kDirectoryId)));
}

TEST(MetaPropertiesIds, ToStringIsKafkas) {
  EXPECT_EQ(to_string(meta_of(kClusterId, 1, kDirectoryId)),
            "MetaProperties(version=1, clusterId=q1Sh-9_ES3yzOp0GSkw7Ag, nodeId=1, "
            "directoryId=J8rXd4tDQl-eEo0b5q5h1Q)");
  EXPECT_EQ(meta_properties_path(""), "meta.properties");
  EXPECT_EQ(meta_properties_path("logs/a"), "logs/a/meta.properties");
}

// ===========================================================================
// Directories on the simulated disk
// ===========================================================================

class Node {
 public:
  explicit Node(uint64_t seed = 1) : disk(io::Random(seed)), random(seed + 1000) {}

  template <typename T>
  T run(io::Task<T> task) {
    return sim::run(ex, std::move(task));
  }
  absl::Status format(const std::string& dir, const MetaProperties& meta,
                      bool ignore_formatted = false) {
    return run(format_directory(disk, dir, meta, random, ignore_formatted));
  }
  absl::StatusOr<std::optional<MetaProperties>> read(const std::string& dir) {
    return run(read_meta_properties(disk, dir));
  }
  absl::StatusOr<MetaProperties> ensure(std::vector<std::string> dirs, std::string cluster_id,
                                        int32_t node_id, bool format_if_missing) {
    return run(ensure_formatted(disk, std::move(dirs), std::move(cluster_id), node_id,
                                format_if_missing, random));
  }
  // Puts `text` at `path` durably, bypassing the code under test.
  void put(const std::string& path, std::string_view text) {
    const std::string dir = storage::parent_dir(path);
    if (!dir.empty()) {
      ASSERT_TRUE(run(disk.make_dir(dir)).ok());
      ASSERT_TRUE(run(disk.sync_dir(storage::parent_dir(dir))).ok());
    }
    ASSERT_TRUE(run(storage::write_file_atomically(disk, path, io::Buffer::copy_of(text))).ok());
  }
  std::optional<std::string> durable(const std::string& path) const {
    return disk.contents(DiskView::kDurable, path);
  }
  std::map<std::string, std::string> files() const { return disk.files(DiskView::kCurrent); }

  TestExecutor ex;
  SimDisk disk;
  io::Random random;
};

TEST(FormatDirectory, WritesExactBytesAndCreatesTheDirectory) {
  Node n;
  ASSERT_TRUE(n.format("data/logs", meta_of(kClusterId, 3, kDirectoryId)).ok());
  const std::string expected =
      "#\n#Written by brook\ncluster.id=q1Sh-9_ES3yzOp0GSkw7Ag\n"
      "directory.id=J8rXd4tDQl-eEo0b5q5h1Q\nnode.id=3\nversion=1\n";
  EXPECT_EQ(n.files(),
            (std::map<std::string, std::string>{{"data/logs/meta.properties", expected}}));
  absl::StatusOr<std::optional<MetaProperties>> read = n.read("data/logs");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, meta_of(kClusterId, 3, kDirectoryId));
}

TEST(FormatDirectory, FormatsTheRoot) {
  Node n;
  ASSERT_TRUE(n.format("", meta_of(kClusterId, 0)).ok());
  absl::StatusOr<std::optional<MetaProperties>> read = n.read("");
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ((*read)->cluster_id, kClusterId);
  EXPECT_EQ((*read)->node_id, 0);
  // A directory id was drawn.
  ASSERT_TRUE((*read)->directory_id.has_value());
  EXPECT_FALSE(is_reserved_directory_id(*(*read)->directory_id));
  EXPECT_TRUE(n.durable("meta.properties").has_value());
}

// Once format returns, a power failure that loses everything unsynced keeps
// the file and its directories.
TEST(FormatDirectory, DurableAcrossCrashOnceItReturns) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Node n(seed);
    ASSERT_TRUE(n.format("a/b/c", meta_of(kClusterId, 1, kDirectoryId)).ok());
    const std::string expected = encode_meta_properties(meta_of(kClusterId, 1, kDirectoryId));
    n.disk.crash();
    EXPECT_EQ(n.disk.contents(DiskView::kCurrent, "a/b/c/meta.properties"), expected);
    EXPECT_EQ(n.disk.directories(DiskView::kCurrent),
              (std::vector<std::string>{"a", "a/b", "a/b/c"}));
    absl::StatusOr<std::optional<MetaProperties>> read = n.read("a/b/c");
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(*read, meta_of(kClusterId, 1, kDirectoryId));
  }
}

// A power failure at any moment during format leaves no file or the whole
// file, never a part; a later format completes.
TEST(FormatDirectory, CrashMidwayLeavesNothingOrEverything) {
  int saw_none = 0, saw_whole = 0;
  const MetaProperties meta = meta_of(kClusterId, 1, kDirectoryId);
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Node n(seed);
    sim::DiskFaults faults;
    faults.latency_min = io::Duration(1);
    faults.latency_max = io::Duration(1'000'000);
    n.disk.set_faults(faults);
    {
      std::optional<absl::Status> status;
      io::TaskScope scope(n.ex);
      scope.spawn(io::detail::store_into(format_directory(n.disk, "x/y", meta, n.random), &status));
      n.ex.run_until(n.ex.now() +
                     io::Duration(static_cast<int64_t>((seed * 7'919'000) % 12'000'000)));
      n.disk.crash();
    }
    n.disk.set_faults({});
    n.ex.run();
    absl::StatusOr<std::optional<MetaProperties>> read = n.read("x/y");
    ASSERT_TRUE(read.ok()) << "seed " << seed << ": " << read.status();
    if (read->has_value()) {
      EXPECT_EQ(**read, meta) << "seed " << seed;
      ++saw_whole;
    } else {
      ++saw_none;
    }
    ASSERT_TRUE(n.format("x/y", meta).ok()) << "seed " << seed;
    EXPECT_EQ(n.durable("x/y/meta.properties"), encode_meta_properties(meta));
  }
  EXPECT_GT(saw_none, 0);
  EXPECT_GT(saw_whole, 0);
}

TEST(FormatDirectory, RepeatingTheSameFormatIsHarmless) {
  Node n;
  ASSERT_TRUE(n.format("d", meta_of(kClusterId, 1)).ok());
  const std::optional<std::string> first = n.durable("d/meta.properties");
  // The same identity with no directory id given matches the drawn one.
  ASSERT_TRUE(n.format("d", meta_of(kClusterId, 1)).ok());
  EXPECT_EQ(n.durable("d/meta.properties"), first);
}

TEST(FormatDirectory, RefusesAFormattedDirectoryThatDiffers) {
  Node n;
  ASSERT_TRUE(n.format("d", meta_of(kClusterId, 1, kDirectoryId)).ok());
  const std::optional<std::string> first = n.durable("d/meta.properties");
  const std::vector<MetaProperties> others = {
      meta_of(kOtherClusterId, 1, kDirectoryId),
      meta_of(kOtherClusterId, 1),
      meta_of(kClusterId, 2, kDirectoryId),
      meta_of(kClusterId, 1, kOtherDirectoryId),
      meta_of(kClusterId, 1, kDirectoryId, kMetaPropertiesVersion0),
  };
  for (const MetaProperties& other : others) {
    SCOPED_TRACE(to_string(other));
    expect_error(n.format("d", other), StatusCode::kAlreadyExists,
                 "already formatted: d/meta.properties holds MetaProperties(version=1, "
                 "clusterId=q1Sh-9_ES3yzOp0GSkw7Ag, nodeId=1, "
                 "directoryId=J8rXd4tDQl-eEo0b5q5h1Q). Use --ignore-formatted");
    EXPECT_EQ(n.durable("d/meta.properties"), first);
  }
}

TEST(FormatDirectory, IgnoreFormattedLeavesAnyFileAlone) {
  Node n;
  ASSERT_TRUE(n.format("d", meta_of(kClusterId, 1, kDirectoryId)).ok());
  const std::optional<std::string> first = n.durable("d/meta.properties");
  ASSERT_TRUE(n.format("d", meta_of(kOtherClusterId, 2), /*ignore_formatted=*/true).ok());
  EXPECT_EQ(n.durable("d/meta.properties"), first);

  // Even one that does not parse.
  n.put("e/meta.properties", "garbage");
  ASSERT_TRUE(n.format("e", meta_of(kClusterId, 1), /*ignore_formatted=*/true).ok());
  EXPECT_EQ(n.durable("e/meta.properties"), "garbage");
  // Without the flag its corruption is the answer.
  expect_error(n.format("e", meta_of(kClusterId, 1)), StatusCode::kDataLoss,
               "e/meta.properties: line 1: expected 'key=value'");

  // An unformatted directory is formatted either way.
  ASSERT_TRUE(n.format("f", meta_of(kClusterId, 1, kDirectoryId), true).ok());
  EXPECT_EQ(n.durable("f/meta.properties"),
            encode_meta_properties(meta_of(kClusterId, 1, kDirectoryId)));
}

TEST(FormatDirectory, RefusesBadArgumentsWritingNothing) {
  Node n;
  expect_error(n.format("d", meta_of("brook-cluster", 1)), StatusCode::kInvalidArgument,
               "Cluster ID string brook-cluster does not appear to be a valid UUID");
  expect_error(n.format("d", meta_of("", 1)), StatusCode::kInvalidArgument, "valid UUID");
  expect_error(n.format("d", meta_of(kClusterId, -1)), StatusCode::kInvalidArgument,
               "non-negative");
  expect_error(n.format("d", meta_of(kClusterId, 1, std::nullopt, 2)), StatusCode::kInvalidArgument,
               "unknown meta.properties version 2");
  MetaProperties reserved = meta_of(kClusterId, 1);
  reserved.directory_id = uuid_of(0, 1);
  expect_error(n.format("d", reserved), StatusCode::kInvalidArgument, "reserved directory id");
  expect_error(n.format("../d", meta_of(kClusterId, 1)), StatusCode::kInvalidArgument, "");
  EXPECT_TRUE(n.files().empty());
  EXPECT_TRUE(n.disk.directories(DiskView::kCurrent).empty());
}

TEST(ReadMetaProperties, MissingFileOrDirectoryIsNullopt) {
  Node n;
  absl::StatusOr<std::optional<MetaProperties>> none = n.read("nowhere");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  n.put("d/other", "x");
  none = n.read("d");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
}

TEST(ReadMetaProperties, MalformedFileNamesFileAndLine) {
  Node n;
  n.put("d/meta.properties", "#\nversion=1\nnode.id=one\ncluster.id=q1Sh-9_ES3yzOp0GSkw7Ag\n");
  absl::StatusOr<std::optional<MetaProperties>> read = n.read("d");
  ASSERT_FALSE(read.ok());
  expect_error(read.status(), StatusCode::kDataLoss,
               "d/meta.properties: line 3: bad node.id 'one'");
}

// ===========================================================================
// ensure_formatted: the start-up check
// ===========================================================================

TEST(EnsureFormatted, FormatsEmptyDirectoriesWithOneNewClusterId) {
  Node n;
  absl::StatusOr<MetaProperties> agreed = n.ensure({"b", "a", "c/d", "a"}, "", 4, true);
  ASSERT_TRUE(agreed.ok()) << agreed.status();
  EXPECT_TRUE(is_valid_cluster_id(agreed->cluster_id)) << agreed->cluster_id;
  EXPECT_EQ(agreed->node_id, 4);
  EXPECT_EQ(agreed->version, kMetaPropertiesVersion1);
  EXPECT_FALSE(agreed->directory_id.has_value());
  std::set<std::string> directory_ids;
  for (const char* dir : {"a", "b", "c/d"}) {
    absl::StatusOr<std::optional<MetaProperties>> read = n.read(dir);
    ASSERT_TRUE(read.ok()) << read.status();
    ASSERT_TRUE(read->has_value()) << dir;
    EXPECT_EQ((*read)->cluster_id, agreed->cluster_id);
    EXPECT_EQ((*read)->node_id, 4);
    EXPECT_EQ((*read)->version, kMetaPropertiesVersion1);
    ASSERT_TRUE((*read)->directory_id.has_value());
    directory_ids.insert((*read)->directory_id->to_string());
  }
  EXPECT_EQ(directory_ids.size(), 3u);

  // Durable; a restart finds the same identity and rewrites nothing.
  const std::map<std::string, std::string> before = n.files();
  n.disk.crash();
  EXPECT_EQ(n.files(), before);
  absl::StatusOr<MetaProperties> again = n.ensure({"a", "b", "c/d"}, "", 4, true);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *agreed);
  absl::StatusOr<MetaProperties> named = n.ensure({"a", "b", "c/d"}, agreed->cluster_id, 4, false);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(*named, *agreed);
  EXPECT_EQ(n.files(), before);
}

TEST(EnsureFormatted, UsesTheGivenClusterId) {
  Node n;
  absl::StatusOr<MetaProperties> agreed = n.ensure({""}, std::string(kKafkaClusterId), 1, true);
  ASSERT_TRUE(agreed.ok()) << agreed.status();
  EXPECT_EQ(agreed->cluster_id, kKafkaClusterId);
  absl::StatusOr<std::optional<MetaProperties>> read = n.read("");
  ASSERT_TRUE(read.ok() && read->has_value());
  EXPECT_EQ((*read)->cluster_id, kKafkaClusterId);
}

// A new directory joins the ones already formatted: their cluster id, a
// directory id of its own.
TEST(EnsureFormatted, FormatsANewDirectoryWithTheStoredClusterId) {
  Node n;
  ASSERT_TRUE(n.format("a", meta_of(kClusterId, 2, kDirectoryId)).ok());
  absl::StatusOr<MetaProperties> agreed = n.ensure({"a", "b"}, "", 2, true);
  ASSERT_TRUE(agreed.ok()) << agreed.status();
  EXPECT_EQ(agreed->cluster_id, kClusterId);
  absl::StatusOr<std::optional<MetaProperties>> b = n.read("b");
  ASSERT_TRUE(b.ok() && b->has_value());
  EXPECT_EQ((*b)->cluster_id, kClusterId);
  EXPECT_EQ((*b)->node_id, 2);
  ASSERT_TRUE((*b)->directory_id.has_value());
  EXPECT_NE((*b)->directory_id->to_string(), kDirectoryId);
}

TEST(EnsureFormatted, AcceptsKafkaFilesOfBothVersions) {
  Node n;
  n.put("a/meta.properties",
        "#\n#Tue Nov 21 10:09:56 UTC 2023\nnode.id=1\ndirectory.id=J8rXd4tDQl-eEo0b5q5h1Q\n"
        "version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n");
  n.put("b/meta.properties",
        "#\n#Mon Jan 04 12:00:00 UTC 2021\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
        "version=0\nbroker.id=1\n");
  absl::StatusOr<MetaProperties> agreed = n.ensure({"a", "b"}, "", 1, false);
  ASSERT_TRUE(agreed.ok()) << agreed.status();
  EXPECT_EQ(agreed->cluster_id, kKafkaClusterId);
}

TEST(EnsureFormatted, RefusesMismatchedClusterIds) {
  Node n;
  ASSERT_TRUE(n.format("a", meta_of(kClusterId, 1, kDirectoryId)).ok());
  ASSERT_TRUE(n.format("b", meta_of(kOtherClusterId, 1, kOtherDirectoryId)).ok());
  const std::map<std::string, std::string> before = n.files();
  // Between directories; the missing one is not formatted.
  absl::StatusOr<MetaProperties> r = n.ensure({"a", "b", "c"}, "", 1, true);
  ASSERT_FALSE(r.ok());
  expect_error(r.status(), StatusCode::kFailedPrecondition,
               "Invalid cluster.id in: b/meta.properties. Expected q1Sh-9_ES3yzOp0GSkw7Ag, but "
               "read Vv6wD1FfQXKbE6o0xW1X9w");
  EXPECT_EQ(n.files(), before);
  // Against the configured one.
  r = n.ensure({"a"}, std::string(kOtherClusterId), 1, true);
  ASSERT_FALSE(r.ok());
  expect_error(r.status(), StatusCode::kFailedPrecondition,
               "Invalid cluster.id in: a/meta.properties. Expected Vv6wD1FfQXKbE6o0xW1X9w, but "
               "read q1Sh-9_ES3yzOp0GSkw7Ag");
  EXPECT_EQ(n.files(), before);
}

TEST(EnsureFormatted, RefusesMismatchedNodeIds) {
  Node n;
  ASSERT_TRUE(n.format("a", meta_of(kClusterId, 1, kDirectoryId)).ok());
  ASSERT_TRUE(n.format("b", meta_of(kClusterId, 3, kOtherDirectoryId)).ok());
  absl::StatusOr<MetaProperties> r = n.ensure({"a"}, "", 2, true);
  ASSERT_FALSE(r.ok());
  expect_error(r.status(), StatusCode::kFailedPrecondition,
               "Stored node id 1 doesn't match previous node id 2 in a/meta.properties");
  r = n.ensure({"a", "b"}, "", 1, true);
  ASSERT_FALSE(r.ok());
  expect_error(r.status(), StatusCode::kFailedPrecondition,
               "Stored node id 3 doesn't match previous node id 1 in b/meta.properties");
}

TEST(EnsureFormatted, RefusesDuplicateAndReservedDirectoryIds) {
  Node n;
  ASSERT_TRUE(n.format("a", meta_of(kClusterId, 1, kDirectoryId)).ok());
  ASSERT_TRUE(n.format("b", meta_of(kClusterId, 1, kDirectoryId)).ok());
  absl::StatusOr<MetaProperties> r = n.ensure({"b", "a"}, "", 1, true);
  ASSERT_FALSE(r.ok());
  expect_error(r.status(), StatusCode::kFailedPrecondition,
               "Duplicate directory ID J8rXd4tDQl-eEo0b5q5h1Q found. It was the ID of a, but also "
               "of b");

  n.put("c/meta.properties",
        "version=1\nnode.id=1\ncluster.id=q1Sh-9_ES3yzOp0GSkw7Ag\ndirectory.id="
        "AAAAAAAAAAAAAAAAAAAAAQ\n");
  r = n.ensure({"c"}, "", 1, true);
  ASSERT_FALSE(r.ok());
  expect_error(r.status(), StatusCode::kFailedPrecondition,
               "Invalid reserved directory ID AAAAAAAAAAAAAAAAAAAAAQ found in c");
}

TEST(EnsureFormatted, MissingFileWithoutFormatIfMissing) {
  Node n;
  absl::StatusOr<MetaProperties> r = n.ensure({"data"}, std::string(kClusterId), 1, false);
  ASSERT_FALSE(r.ok());
  expect_error(r.status(), StatusCode::kFailedPrecondition,
               "No meta.properties found in data (have you run `brook format`?)");
  r = n.ensure({""}, "", 1, false);
  ASSERT_FALSE(r.ok());
  expect_error(r.status(), StatusCode::kFailedPrecondition, "No meta.properties found in .");
  // One formatted directory does not excuse another.
  ASSERT_TRUE(n.format("a", meta_of(kClusterId, 1)).ok());
  r = n.ensure({"a", "b"}, "", 1, false);
  ASSERT_FALSE(r.ok());
  expect_error(r.status(), StatusCode::kFailedPrecondition, "No meta.properties found in b");
  EXPECT_EQ(n.files().size(), 1u);
}

TEST(EnsureFormatted, PassesOnCorruption) {
  Node n;
  n.put("a/meta.properties", "version=1\nnode.id=1\n");
  absl::StatusOr<MetaProperties> r = n.ensure({"a"}, "", 1, true);
  ASSERT_FALSE(r.ok());
  expect_error(r.status(), StatusCode::kDataLoss, "a/meta.properties: cluster.id was not found");
}

TEST(EnsureFormatted, RefusesBadArguments) {
  Node n;
  expect_error(n.ensure({}, "", 1, true).status(), StatusCode::kInvalidArgument,
               "no log directories");
  expect_error(n.ensure({"a"}, "", -1, true).status(), StatusCode::kInvalidArgument,
               "non-negative");
  expect_error(n.ensure({"a"}, "brook-cluster", 1, true).status(), StatusCode::kInvalidArgument,
               "Cluster ID string brook-cluster does not appear to be a valid UUID");
  EXPECT_TRUE(n.files().empty());
}

// The same seed formats the same bytes: generated ids come only from the
// Random given.
TEST(EnsureFormatted, Deterministic) {
  Node a(5), b(5);
  ASSERT_TRUE(a.ensure({"x", "y"}, "", 1, true).ok());
  ASSERT_TRUE(b.ensure({"x", "y"}, "", 1, true).ok());
  EXPECT_EQ(a.files(), b.files());
}

}  // namespace
}  // namespace brook::core
