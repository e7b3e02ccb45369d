// io/real/affinity_test.cc
//
// parse_cpu takes a CPU number only; pin_to_cpu pins the calling thread to
// that CPU alone, and refuses a CPU the process may not run on.
#include "io/real/affinity.h"

#include <sched.h>

#include <gtest/gtest.h>

namespace brook::io::real {
namespace {

TEST(ParseCpu, TakesDecimalCpuNumbersOnly) {
  EXPECT_EQ(*parse_cpu("0"), 0);
  EXPECT_EQ(*parse_cpu("17"), 17);
  for (const char* bad : {"", "-1", "+1", "x", "1x", " 1", "1,2", "99999999999"}) {
    EXPECT_EQ(parse_cpu(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(parse_cpu(std::to_string(CPU_SETSIZE)).ok());
  EXPECT_TRUE(parse_cpu(std::to_string(CPU_SETSIZE - 1)).ok());
}

class PinToCpu : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::sched_getaffinity(0, sizeof(original_), &original_), 0); }
  // The rest of this test program keeps the CPUs it had.
  void TearDown() override { ::sched_setaffinity(0, sizeof(original_), &original_); }
  cpu_set_t original_;
};

TEST_F(PinToCpu, LeavesTheThreadOnThatCpuAlone) {
  // The last CPU this process may run on (not CPU 0, so a pin that ignored
  // its argument would show).
  int allowed = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &original_)) allowed = cpu;
  }
  ASSERT_GE(allowed, 0);
  ASSERT_TRUE(pin_to_cpu(std::to_string(allowed)).ok());
  cpu_set_t now;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(now), &now), 0);
  EXPECT_EQ(CPU_COUNT(&now), 1);
  EXPECT_TRUE(CPU_ISSET(allowed, &now));
}

TEST_F(PinToCpu, RefusesBadNumbersAndCpusOutsideTheProcesssSet) {
  EXPECT_EQ(pin_to_cpu("one").code(), absl::StatusCode::kInvalidArgument);
  int outside = -1;
  for (int cpu = CPU_SETSIZE - 1; cpu >= 0; --cpu) {
    if (!CPU_ISSET(cpu, &original_)) {
      outside = cpu;
      break;
    }
  }
  ASSERT_GE(outside, 0);
  EXPECT_EQ(pin_to_cpu(std::to_string(outside)).code(), absl::StatusCode::kInvalidArgument);
  // The refused pin changed nothing.
  cpu_set_t now;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(now), &now), 0);
  EXPECT_TRUE(CPU_EQUAL(&now, &original_));
}

}  // namespace
}  // namespace brook::io::real
