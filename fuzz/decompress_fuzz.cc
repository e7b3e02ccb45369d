// fuzz/decompress_fuzz.cc: fuzz_decompress_{gzip,snappy,lz4,zstd}, one
// binary per codec (BROOK_FUZZ_CODEC names the Compression enumerator).
//
// The input is decompressed with a cap, which must hold; then the input is
// compressed and decompressed back (cap: exactly its size), which must give
// the input again.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "io/assert.h"
#include "net/codec/compression.h"

namespace {

constexpr auto kCodec = brook::codec::Compression::BROOK_FUZZ_CODEC;
constexpr size_t kOutputBytesMax = 256 << 10;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brook;
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);

  absl::StatusOr<io::Buffer> out = codec::decompress(kCodec, input, kOutputBytesMax);
  if (out.ok()) {
    BROOK_ASSERT_LE(out->size(), kOutputBytesMax);
  } else {
    const absl::StatusCode code = out.status().code();
    BROOK_ASSERT_MSG(code == absl::StatusCode::kDataLoss ||
                         code == absl::StatusCode::kResourceExhausted,
                     "unexpected status {}", out.status().ToString());
  }

  absl::StatusOr<io::Buffer> compressed = codec::compress(kCodec, input);
  BROOK_ASSERT_MSG(compressed.ok(), "compress: {}", compressed.status().ToString());
  absl::StatusOr<io::Buffer> back = codec::decompress(kCodec, compressed->span(), size);
  BROOK_ASSERT_MSG(back.ok(), "round trip of {} bytes: {}", size, back.status().ToString());
  BROOK_ASSERT_EQ(back->size(), size);
  BROOK_ASSERT(size == 0 || std::memcmp(back->data(), data, size) == 0);
  return 0;
}
