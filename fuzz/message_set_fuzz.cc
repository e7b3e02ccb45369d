// fuzz/message_set_fuzz.cc: fuzz_message_set.
//
// Input: the records of a Produce v0-2 request, a message set. Since a
// fuzzer rarely forges a CRC, the CRC of every top-level message whose
// entry frame fits is recomputed first. A set that converts must give a
// batch that decodes, whose records convert back (Fetch v2-3's message
// set) and in again to the same keys, values and timestamps; one that does
// not convert must fail as corrupt or as too large, nothing else.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "io/assert.h"
#include "net/codec/endian.h"
#include "net/kafka/message_set.h"
#include "net/kafka/record_batch.h"

namespace {

using namespace brook;

constexpr size_t kUncompressedBytesMax = 64 << 10;

void fix_crcs(std::string& set) {
  auto* b = reinterpret_cast<std::byte*>(set.data());
  const std::span<const std::byte> bytes(b, set.size());
  size_t pos = 0;
  while (set.size() - pos >= net::kMessageSetLogOverhead) {
    const int32_t size = codec::load_be<int32_t>(bytes, pos + 8);
    pos += net::kMessageSetLogOverhead;
    if (size < 4 || static_cast<size_t>(size) > set.size() - pos) return;
    const uLong crc = ::crc32(::crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(b + pos + 4),
                              static_cast<uInt>(size - 4));
    codec::store_be<uint32_t>(b + pos, static_cast<uint32_t>(crc));
    pos += static_cast<size_t>(size);
  }
}

std::vector<net::Record> records_of(const io::Buffer& batch, net::RecordBatchHeader* header) {
  net::BatchIterator it(batch);
  absl::StatusOr<std::optional<net::BatchView>> next = it.next();
  BROOK_ASSERT_MSG(next.ok() && next->has_value(), "{}", next.status().ToString());
  *header = (*next)->header;
  BROOK_ASSERT(net::verify_crc(*header, (*next)->bytes.span()).ok());
  absl::StatusOr<std::vector<net::Record>> records = net::decode_records((*next)->bytes, 1 << 30);
  BROOK_ASSERT_MSG(records.ok(), "{}", records.status().ToString());
  return *std::move(records);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string set(reinterpret_cast<const char*>(data), size);
  fix_crcs(set);
  const io::Buffer input = io::Buffer::copy_of(std::string_view(set));
  absl::StatusOr<io::Buffer> batch = net::message_set_to_batch(input.span(), kUncompressedBytesMax);
  if (!batch.ok()) {
    BROOK_ASSERT_MSG(absl::IsDataLoss(batch.status()) || absl::IsResourceExhausted(batch.status()), "{}",
                     batch.status().ToString());
    return 0;
  }
  net::RecordBatchHeader header;
  const std::vector<net::Record> records = records_of(*batch, &header);
  BROOK_ASSERT(!records.empty());
  absl::StatusOr<io::Buffer> back = net::batches_to_message_set(*batch, 0, 1, 1 << 30);
  BROOK_ASSERT_MSG(back.ok(), "{}", back.status().ToString());
  absl::StatusOr<io::Buffer> again = net::message_set_to_batch(back->span(), 1 << 30);
  BROOK_ASSERT_MSG(again.ok(), "{}", again.status().ToString());
  net::RecordBatchHeader again_header;
  const std::vector<net::Record> again_records = records_of(*again, &again_header);
  BROOK_ASSERT_EQ(again_records.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    BROOK_ASSERT(records[i].key == again_records[i].key);
    BROOK_ASSERT(records[i].value == again_records[i].value);
    BROOK_ASSERT_EQ(net::record_timestamp(header, records[i]), net::record_timestamp(again_header, again_records[i]));
  }
  return 0;
}
