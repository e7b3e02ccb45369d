// fuzz/record_batch_fuzz.cc: fuzz_record_batch.
//
// Input: a `records` buffer as Produce and Fetch carry it. Iterates its
// batches (CRCs are checked but, since a fuzzer rarely forges one, a second
// pass skips them), parses each header again, verifies the CRC and decodes
// the records with a small decompression cap. Decoded records must rebuild
// into a batch that decodes to the same records.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "net/kafka/record_batch.h"

namespace {

using namespace brook;

constexpr size_t kUncompressedBytesMax = 64 << 10;
constexpr int kBatchesMax = 64;

// Rebuilds the records (absolute timestamps, consecutive offsets) and
// checks they decode to the same keys, values, headers and timestamps.
void check_rebuild(const net::RecordBatchHeader& header, const std::vector<net::Record>& records) {
  net::RecordBatchOptions options;
  options.base_offset = header.base_offset;
  net::RecordBatchBuilder builder(options);
  for (const net::Record& r : records) {
    builder.append({net::record_timestamp(header, r), r.key, r.value, r.headers});
  }
  absl::StatusOr<io::Buffer> batch = builder.build();
  BROOK_ASSERT_MSG(batch.ok(), "rebuild: {}", batch.status().ToString());
  absl::StatusOr<net::RecordBatchHeader> rebuilt = net::parse_batch_header(batch->span());
  BROOK_ASSERT(rebuilt.ok());
  BROOK_ASSERT(net::verify_crc(*rebuilt, batch->span()).ok());
  absl::StatusOr<std::vector<net::Record>> again = net::decode_records(*batch, batch->size());
  BROOK_ASSERT_MSG(again.ok(), "rebuilt batch: {}", again.status().ToString());
  BROOK_ASSERT_EQ(again->size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const net::Record& a = records[i];
    const net::Record& b = (*again)[i];
    BROOK_ASSERT(a.key == b.key);
    BROOK_ASSERT(a.value == b.value);
    BROOK_ASSERT(a.headers == b.headers);
    BROOK_ASSERT_EQ(net::record_timestamp(header, a), net::record_timestamp(*rebuilt, b));
    const auto offset = static_cast<int64_t>(static_cast<uint64_t>(header.base_offset) + i);
    BROOK_ASSERT_EQ(net::record_offset(*rebuilt, b), offset);
  }
}

void check_batch(const net::BatchView& view) {
  BROOK_ASSERT_EQ(view.bytes.size(), view.header.size_bytes());
  absl::StatusOr<net::RecordBatchHeader> header = net::parse_batch_header(view.bytes.span());
  BROOK_ASSERT(header.ok());
  BROOK_ASSERT(*header == view.header);
  (void)net::verify_crc(*header, view.bytes.span());  // either answer is fine
  absl::StatusOr<std::vector<net::Record>> records =
      net::decode_records(view.bytes, kUncompressedBytesMax);
  // The validation walk (net::visit_records) reads exactly what
  // decode_records reads: the same status, the same records.
  std::vector<net::RecordSummary> visited;
  const absl::Status walked =
      net::visit_records(view.bytes, kUncompressedBytesMax, [&](const net::RecordSummary& r) {
        visited.push_back(r);
        return true;
      });
  BROOK_ASSERT(walked == records.status());
  if (!records.ok()) return;
  BROOK_ASSERT_EQ(records->size(), static_cast<size_t>(header->records_count));
  BROOK_ASSERT_EQ(visited.size(), records->size());
  for (size_t i = 0; i < visited.size(); ++i) {
    const net::Record& r = (*records)[i];
    BROOK_ASSERT(visited[i].attributes == r.attributes &&
                 visited[i].timestamp_delta == r.timestamp_delta &&
                 visited[i].offset_delta == r.offset_delta &&
                 visited[i].has_key == r.key.has_value());
  }
  if (header->is_control() && !records->empty() && (*records)[0].key) {
    absl::StatusOr<net::ControlRecordKey> key =
        net::decode_control_record_key((*records)[0].key->span());
    if (key.ok() && (*records)[0].value) {
      (void)net::decode_end_txn_marker((*records)[0].value->span());
    }
  }
  check_rebuild(*header, *records);
}

void iterate(const io::Buffer& records, net::BatchIteratorOptions options) {
  net::BatchIterator it(records, options);
  for (int i = 0; i < kBatchesMax; ++i) {
    absl::StatusOr<std::optional<net::BatchView>> next = it.next();
    if (!next.ok() || !next->has_value()) break;
    BROOK_ASSERT_LE(it.position(), records.size());
    if (options.crc == net::CrcCheck::kSkip) check_batch(**next);
  }
  BROOK_ASSERT_LE(it.position() + it.partial_bytes(), records.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const io::Buffer records = io::Buffer::copy_of(fuzz::as_bytes(data, size));
  (void)net::parse_batch_header(records.span(), net::BatchExtent::kHeaderOnly);
  iterate(records, {});
  iterate(records, {.crc = net::CrcCheck::kSkip, .partial = net::PartialBatch::kReject});
  (void)net::decode_records(records, kUncompressedBytesMax);
  return 0;
}
