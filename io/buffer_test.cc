// io/buffer_test.cc
//
// Buffers share bytes instead of copying them, and chains slice, consume and
// linearise exactly like the string they stand for.
#include "io/buffer.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace brook::io {
namespace {

TEST(Buffer, SlicesShareStorage) {
  Buffer b = Buffer::copy_of("hello world");
  Buffer s = b.slice(6, 5);
  EXPECT_EQ(s.view(), "world");
  EXPECT_EQ(b.use_count(), 2u);
  EXPECT_EQ(s.data(), b.data() + 6);
  { Buffer copy = s; EXPECT_EQ(b.use_count(), 3u); }
  EXPECT_EQ(b.use_count(), 2u);
}

TEST(Buffer, StorageIsAligned) {
  Buffer b = Buffer::allocate(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
}

TEST(BufferChain, LinearizeOfOnePartDoesNotCopy) {
  Buffer b = Buffer::copy_of("abc");
  BufferChain c(b);
  EXPECT_EQ(c.linearize().data(), b.data());
}

RC_GTEST_PROP(BufferChain, BehavesLikeTheConcatenatedString,
              (const std::vector<std::string>& parts, size_t a, size_t b, size_t k)) {
  BufferChain chain;
  std::string whole;
  for (const auto& p : parts) {
    chain.append(Buffer::copy_of(p));
    whole += p;
  }
  RC_ASSERT(chain.size() == whole.size());
  RC_ASSERT(chain.to_string() == whole);
  RC_ASSERT(chain.linearize().view() == whole);
  const size_t off = whole.empty() ? 0 : a % (whole.size() + 1);
  const size_t len = (whole.size() - off) == 0 ? 0 : b % (whole.size() - off + 1);
  RC_ASSERT(chain.slice(off, len).to_string() == whole.substr(off, len));
  std::string copied(len, '\0');
  chain.copy_to(off, std::as_writable_bytes(std::span<char>(copied.data(), copied.size())));
  RC_ASSERT(copied == whole.substr(off, len));
  const size_t drop = whole.empty() ? 0 : k % (whole.size() + 1);
  chain.consume(drop);
  RC_ASSERT(chain.to_string() == whole.substr(drop));
  RC_ASSERT(chain.size() == whole.size() - drop);
}

}  // namespace
}  // namespace brook::io
