// net/codec/crc32c_test.cc
//
// Both CRC-32C paths produce the standard check values and agree with each
// other on any data, length, alignment and split (extension composes).
#include "net/codec/crc32c.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace brook::codec {
namespace {

using Crc32cFn = uint32_t (*)(uint32_t, const void*, size_t);

// The implementations under test: software always, hardware when present,
// and the dispatching entry point.
std::vector<std::pair<std::string, Crc32cFn>> implementations() {
  std::vector<std::pair<std::string, Crc32cFn>> out = {{"software", &crc32c_software},
                                                       {"dispatch", &crc32c}};
  if (crc32c_hardware_available()) out.emplace_back("hardware", &crc32c_hardware);
  return out;
}

// A deterministic byte pattern (splitmix64), so failures reproduce.
std::vector<uint8_t> pattern(size_t n, uint64_t seed) {
  std::vector<uint8_t> out(n);
  uint64_t s = seed;
  for (size_t i = 0; i < n; ++i) {
    s += 0x9E3779B97F4A7C15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    out[i] = static_cast<uint8_t>(z ^ (z >> 31));
  }
  return out;
}

TEST(Crc32c, StandardCheckValue) {
  const std::string check = "123456789";
  for (const auto& [name, fn] : implementations()) {
    EXPECT_EQ(fn(0, check.data(), check.size()), 0xE3069283u) << name;
  }
}

// RFC 3720 (iSCSI), appendix B.4.
TEST(Crc32c, Rfc3720Vectors) {
  std::vector<uint8_t> zeros(32, 0x00);
  std::vector<uint8_t> ones(32, 0xff);
  std::vector<uint8_t> ascending(32);
  std::vector<uint8_t> descending(32);
  for (int i = 0; i < 32; ++i) {
    ascending[i] = static_cast<uint8_t>(i);
    descending[i] = static_cast<uint8_t>(31 - i);
  }
  for (const auto& [name, fn] : implementations()) {
    EXPECT_EQ(fn(0, zeros.data(), zeros.size()), 0x8A9136AAu) << name;
    EXPECT_EQ(fn(0, ones.data(), ones.size()), 0x62A8AB43u) << name;
    EXPECT_EQ(fn(0, ascending.data(), ascending.size()), 0x46DD794Eu) << name;
    EXPECT_EQ(fn(0, descending.data(), descending.size()), 0x113FDB5Cu) << name;
  }
}

TEST(Crc32c, EmptyInputLeavesTheChecksum) {
  for (const auto& [name, fn] : implementations()) {
    EXPECT_EQ(fn(0, nullptr, 0), 0u) << name;
    EXPECT_EQ(fn(0xDEADBEEF, nullptr, 0), 0xDEADBEEFu) << name;
  }
}

TEST(Crc32c, ExtendsAFinishedChecksum) {
  const std::string a = "1234";
  const std::string b = "56789";
  for (const auto& [name, fn] : implementations()) {
    EXPECT_EQ(fn(fn(0, a.data(), a.size()), b.data(), b.size()), 0xE3069283u) << name;
  }
}

// Every length around the hardware path's block boundaries (6 x 128 and
// 6 x 4096 bytes) and tail handling, at every alignment modulo 8.
TEST(Crc32c, PathsAgreeAcrossBlockBoundaries) {
  if (!crc32c_hardware_available()) GTEST_SKIP() << "no SSE4.2";
  const std::vector<uint8_t> data = pattern(3 * 6 * 4096 + 6 * 128 + 64, 7);
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 64; ++n) lengths.push_back(n);
  for (size_t base : {size_t{768}, size_t{1536}, size_t{2304}, size_t{24576},
                      size_t{24576 + 768}, size_t{49152}, size_t{49152 + 1536}, size_t{73728}}) {
    for (size_t d = 0; d <= 9; ++d) {
      lengths.push_back(base + d);
      lengths.push_back(base - d);
    }
  }
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n : lengths) {
      if (offset + n > data.size()) continue;
      const uint8_t* p = data.data() + offset;
      ASSERT_EQ(crc32c_hardware(0x12345678, p, n), crc32c_software(0x12345678, p, n))
          << "offset " << offset << " length " << n;
    }
  }
}

RC_GTEST_PROP(Crc32c, HardwareMatchesSoftware, (uint64_t seed, uint32_t initial)) {
  if (!crc32c_hardware_available()) RC_SUCCEED("no SSE4.2");
  const size_t n = *rc::gen::inRange<size_t>(0, 64 * 1024);
  const size_t offset = *rc::gen::inRange<size_t>(0, 8);
  const std::vector<uint8_t> buffer = pattern(n + offset, seed);
  const uint8_t* data = buffer.data() + offset;
  const uint32_t whole = crc32c_software(initial, data, n);
  RC_ASSERT(crc32c_hardware(initial, data, n) == whole);
  // Extension composes at any split point, on either path and across paths.
  const size_t split = *rc::gen::inRange<size_t>(0, n + 1);
  RC_ASSERT(crc32c_hardware(crc32c_hardware(initial, data, split), data + split, n - split) ==
            whole);
  RC_ASSERT(crc32c_software(crc32c_hardware(initial, data, split), data + split, n - split) ==
            whole);
  RC_ASSERT(crc32c_hardware(crc32c_software(initial, data, split), data + split, n - split) ==
            whole);
}

RC_GTEST_PROP(Crc32c, SoftwareExtensionComposes, (std::vector<uint8_t> a, std::vector<uint8_t> b)) {
  std::vector<uint8_t> joined = a;
  joined.insert(joined.end(), b.begin(), b.end());
  RC_ASSERT(crc32c_software(crc32c_software(0, a.data(), a.size()), b.data(), b.size()) ==
            crc32c_software(0, joined.data(), joined.size()));
}

TEST(Crc32c, ForcingTheSoftwarePath) {
  const std::string check = "123456789";
  const Crc32cPath before = crc32c_path();
  EXPECT_EQ(set_crc32c_path_for_testing(Crc32cPath::kSoftware), Crc32cPath::kSoftware);
  EXPECT_EQ(crc32c_path(), Crc32cPath::kSoftware);
  EXPECT_EQ(crc32c(0, check.data(), check.size()), 0xE3069283u);
  const Crc32cPath restored = set_crc32c_path_for_testing(Crc32cPath::kHardware);
  EXPECT_EQ(restored, crc32c_hardware_available() ? Crc32cPath::kHardware : Crc32cPath::kSoftware);
  EXPECT_EQ(restored, before);
  EXPECT_EQ(crc32c(0, check.data(), check.size()), 0xE3069283u);
}

}  // namespace
}  // namespace brook::codec
