// fuzz/fuzz_seeds.cc: brook-fuzz-seeds OUT_DIR
//
// Writes seed inputs for every fuzz target into OUT_DIR/<target>/: valid
// request frames (header and body) and selector-prefixed response frames of
// every API at its lowest, middle and highest versions (random instances
// from the generated testing code), record batches built with every codec
// (single, several in a row, a partial tail, transaction markers), and
// compressed streams for each decompression target, and partition
// directories for fuzz_log_recovery (valid, torn and corrupt segments, two
// segments with a gap or an overlap, a trusted first segment with exact,
// noisy or garbage index files, a producer snapshot, transactions). Output
// is deterministic.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "fuzz/log_recovery_input.h"
#include "net/codec/compression.h"
#include "net/codec/crc32c.h"
#include "net/codec/endian.h"
#include "net/kafka/apis.h"
#include "net/kafka/frame.h"
#include "net/kafka/message_set.h"
#include "net/kafka/record_batch.h"
#include "net/kafka/testing.h"

namespace brook::fuzz {
namespace {

namespace fs = std::filesystem;

class SeedWriter {
 public:
  explicit SeedWriter(fs::path root) : root_(std::move(root)) {}

  void write(const std::string& target, const std::string& name, const io::BufferChain& bytes) {
    const fs::path dir = root_ / target;
    fs::create_directories(dir);
    std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
    const std::string s = bytes.to_string();
    out.write(s.data(), static_cast<std::streamsize>(s.size()));
    BROOK_ASSERT_MSG(out.good(), "cannot write {}", (dir / name).string());
    ++written_;
  }
  void write(const std::string& target, const std::string& name, const io::Buffer& bytes) {
    write(target, name, io::BufferChain(bytes));
  }
  void write(const std::string& target, const std::string& name, const std::string& bytes) {
    write(target, name, io::Buffer::copy_of(bytes));
  }
  int written() const { return written_; }

 private:
  fs::path root_;
  int written_ = 0;
};

std::vector<int16_t> versions_of(const net::MessageCase& c) {
  std::vector<int16_t> v = {c.min_version};
  const auto mid = static_cast<int16_t>(c.min_version + (c.max_version - c.min_version) / 2);
  if (mid != c.min_version) v.push_back(mid);
  if (c.max_version != mid) v.push_back(c.max_version);
  return v;
}

io::BufferChain encoded(const auto& message, int16_t version) {
  absl::StatusOr<io::BufferChain> bytes = net::encode(message, version);
  BROOK_ASSERT_MSG(bytes.ok(), "{}", bytes.status().ToString());
  return *std::move(bytes);
}

void write_message_seeds(SeedWriter& out) {
  constexpr uint64_t kSeed = 1;
  for (const net::MessageCase& c : net::all_message_cases()) {
    if (c.kind != "request" && c.kind != "response") continue;
    for (int16_t v : versions_of(c)) {
      const std::string name = fmt::format("{}_v{}", c.name, v);
      io::BufferChain frame;
      if (c.kind == "request") {
        net::RequestHeader header;
        header.request_api_key = c.api_key;
        header.request_api_version = v;
        header.correlation_id = 7;
        header.client_id = "fuzz";
        frame.append(encoded(header, net::request_header_version(c.api_key, v)));
        frame.append(c.sample(kSeed, v));
        out.write("fuzz_request", name, frame);
      } else {
        const auto selector = response_selector(c.api_key, v);
        frame.append(io::Buffer::copy_of(as_bytes(selector.data(), selector.size())));
        net::ResponseHeader header;
        header.correlation_id = 7;
        frame.append(encoded(header, net::response_header_version(c.api_key, v)));
        frame.append(c.sample(kSeed, v));
        out.write("fuzz_response", name, frame);
      }
    }
  }
}

constexpr codec::Compression kCodecs[] = {codec::Compression::kNone, codec::Compression::kGzip,
                                          codec::Compression::kSnappy, codec::Compression::kLz4,
                                          codec::Compression::kZstd};

io::Buffer batch_of(codec::Compression compression, int64_t base_offset, int records) {
  net::RecordBatchOptions options;
  options.base_offset = base_offset;
  options.compression = compression;
  options.producer_id = 1000;
  options.producer_epoch = 1;
  options.base_sequence = 0;
  net::RecordBatchBuilder builder(options);
  for (int i = 0; i < records; ++i) {
    net::NewRecord r;
    r.timestamp_ms = 1'700'000'000'000 + i;
    if (i % 3 != 2) r.key = io::Buffer::copy_of(fmt::format("key-{}", i));
    r.value = io::Buffer::copy_of(fmt::format("value {} {}", i, std::string(i * 7, 'v')));
    if (i % 2 == 0) r.headers.push_back({"trace", io::Buffer::copy_of("abc")});
    builder.append(std::move(r));
  }
  absl::StatusOr<io::Buffer> batch = builder.build();
  BROOK_ASSERT(batch.ok());
  return *std::move(batch);
}

void write_batch_seeds(SeedWriter& out) {
  for (codec::Compression c : kCodecs) {
    const std::string codec_name(codec::compression_name(c));
    out.write("fuzz_record_batch", codec_name + "_one", batch_of(c, 0, 1));
    io::BufferChain several;
    several.append(batch_of(c, 10, 5));
    several.append(batch_of(c, 15, 2));
    several.append(batch_of(c, 17, 0));
    out.write("fuzz_record_batch", codec_name + "_several", several);
    const io::Buffer whole = batch_of(c, 20, 4);
    io::BufferChain partial;
    partial.append(batch_of(c, 0, 3));
    partial.append(whole.slice(0, whole.size() / 2));
    out.write("fuzz_record_batch", codec_name + "_partial_tail", partial);
  }
  for (auto type : {net::ControlRecordType::kCommit, net::ControlRecordType::kAbort}) {
    const io::Buffer marker = net::build_txn_marker_batch(
        {.type = type, .base_offset = 30, .partition_leader_epoch = 2, .producer_id = 1000,
         .producer_epoch = 1, .coordinator_epoch = 5, .timestamp_ms = 1'700'000'000'000});
    out.write("fuzz_record_batch", fmt::format("marker_{}", static_cast<int>(type)), marker);
  }
}

void write_message_set_seeds(SeedWriter& out) {
  std::string plain;
  net::append_message_set_entry(plain, 0, 0, 0, 0, io::Buffer::copy_of("k0"), io::Buffer::copy_of("v0"));
  net::append_message_set_entry(plain, 1, 0, 0, 0, std::nullopt, io::Buffer::copy_of("v1"));
  out.write("fuzz_message_set", "magic0", plain);
  std::string v1;
  net::append_message_set_entry(v1, 0, 1, 0, 1'700'000'000'000, io::Buffer::copy_of("k"), std::nullopt);
  out.write("fuzz_message_set", "magic1", v1);
  for (codec::Compression c : {codec::Compression::kGzip, codec::Compression::kSnappy, codec::Compression::kLz4}) {
    std::string inner;
    for (int i = 0; i < 3; ++i) {
      net::append_message_set_entry(inner, i, 1, 0, 1'700'000'000'000 + i, io::Buffer::copy_of(fmt::format("k{}", i)),
                                    io::Buffer::copy_of(fmt::format("value {}", i)));
    }
    absl::StatusOr<io::Buffer> compressed = codec::compress(c, io::Buffer::copy_of(inner).span());
    BROOK_ASSERT(compressed.ok());
    std::string wrapper;
    net::append_message_set_entry(wrapper, 2, 1, static_cast<int8_t>(c), 1'700'000'000'002, std::nullopt,
                                  *compressed);
    out.write("fuzz_message_set", fmt::format("wrapped_{}", codec::compression_name(c)), wrapper);
  }
}

void write_decompress_seeds(SeedWriter& out) {
  const std::vector<std::string> texts = {
      "", "hello, brook", std::string(2000, 'a'),
      "The quick brown fox jumps over the lazy dog. The quick brown fox jumps again.",
  };
  for (codec::Compression c : kCodecs) {
    if (c == codec::Compression::kNone) continue;
    const std::string target = fmt::format("fuzz_decompress_{}", codec::compression_name(c));
    for (size_t i = 0; i < texts.size(); ++i) {
      absl::StatusOr<io::Buffer> compressed = codec::compress(
          c, std::as_bytes(std::span(texts[i].data(), texts[i].size())));
      BROOK_ASSERT(compressed.ok());
      out.write(target, fmt::format("text_{}", i), *compressed);
    }
    // Compressed record batches' payloads: what the codec sees in practice.
    const io::Buffer batch = batch_of(c, 0, 8);
    out.write(target, "batch_payload", batch.slice(net::kBatchHeaderBytes));
  }
}


// --- fuzz_log_recovery ---------------------------------------------------------

struct LogBatchSpec {
  int64_t base_offset = 0;
  int records = 1;
  codec::Compression compression = codec::Compression::kNone;
  int64_t producer_id = net::kNoProducerId;
  int32_t base_sequence = net::kNoSequence;
  bool transactional = false;
  int64_t timestamp_ms = 1'700'000'000'000;
};

std::string log_batch(const LogBatchSpec& spec) {
  net::RecordBatchOptions options;
  options.base_offset = spec.base_offset;
  options.partition_leader_epoch = 3;
  options.compression = spec.compression;
  options.producer_id = spec.producer_id;
  options.producer_epoch = spec.producer_id >= 0 ? 0 : net::kNoProducerEpoch;
  options.base_sequence = spec.base_sequence;
  options.transactional = spec.transactional;
  net::RecordBatchBuilder builder(options);
  for (int i = 0; i < spec.records; ++i) {
    net::NewRecord r;
    // Not monotonic: the time index keeps running maxima.
    r.timestamp_ms = spec.timestamp_ms + (i % 3 == 1 ? -5 : 10 * i);
    r.key = io::Buffer::copy_of(fmt::format("key-{}", (spec.base_offset + i) % 4));
    r.value = io::Buffer::copy_of(fmt::format("value {} {}", spec.base_offset + i,
                                              std::string(static_cast<size_t>(i * 11), 'w')));
    builder.append(std::move(r));
  }
  absl::StatusOr<io::Buffer> batch = builder.build();
  BROOK_ASSERT(batch.ok());
  return std::string(batch->view());
}

// Batches of {records, codec} from `base` on; returns the bytes, and the
// next offset in *next.
std::string log_segment(int64_t base, const std::vector<std::pair<int, codec::Compression>>& specs,
                        int64_t* next = nullptr, int64_t timestamp_ms = 1'700'000'000'000) {
  std::string out;
  int64_t offset = base;
  for (const auto& [records, compression] : specs) {
    out += log_batch({.base_offset = offset, .records = records, .compression = compression,
                      .timestamp_ms = timestamp_ms + offset * 100});
    offset += records;
  }
  if (next != nullptr) *next = offset;
  return out;
}

// A producer snapshot (storage/producer_state.h's layout, version 1) with one
// producer whose last batch ends at last_offset.
std::string producer_snapshot(int64_t producer_id, int32_t last_sequence, int64_t last_offset) {
  constexpr size_t kEntriesOffset = 10;
  constexpr size_t kEntryBytes = 46;
  std::string out(kEntriesOffset + kEntryBytes, '\0');
  auto* p = reinterpret_cast<std::byte*>(out.data());
  codec::store_be<int16_t>(p, 1);
  codec::store_be<int32_t>(p + 6, 1);
  std::byte* e = p + kEntriesOffset;
  codec::store_be<int64_t>(e, producer_id);
  codec::store_be<int16_t>(e + 8, 0);
  codec::store_be<int32_t>(e + 10, last_sequence);
  codec::store_be<int64_t>(e + 14, last_offset);
  codec::store_be<int32_t>(e + 22, last_sequence);  // offset delta
  codec::store_be<int64_t>(e + 26, 1'700'000'000'000);
  codec::store_be<int32_t>(e + 34, -1);
  codec::store_be<int64_t>(e + 38, -1);
  const uint32_t crc =
      codec::crc32c(0, std::as_bytes(std::span(out.data(), out.size())).subspan(6));
  codec::store_be<uint32_t>(p + 2, crc);
  return out;
}

void write_log_recovery_seeds(SeedWriter& out) {
  namespace lr = log_recovery;
  const std::string target = "fuzz_log_recovery";
  using C = codec::Compression;
  const std::vector<std::pair<int, C>> first_specs = {
      {5, C::kNone}, {3, C::kGzip}, {1, C::kNone}, {4, C::kLz4}, {2, C::kNone}};
  const std::vector<std::pair<int, C>> second_specs = {
      {2, C::kNone}, {6, C::kZstd}, {1, C::kSnappy}, {3, C::kNone}};
  int64_t first_next = 0;
  const std::string first = log_segment(0, first_specs, &first_next);
  const auto second_at = [&](int64_t base) { return log_segment(base, second_specs); };
  const auto write = [&](const std::string& name, const lr::InputParts& parts) {
    out.write(target, name, lr::encode_input(parts));
  };

  write("valid", {.first = first});
  // A torn tail: the last batch cut in half, as a crash leaves it.
  const std::string last = log_batch({.base_offset = first_next, .records = 3});
  write("torn", {.first = first + last.substr(0, last.size() / 2)});
  // A bad CRC in the middle: a byte of the second batch's records flipped.
  {
    std::string bad = first;
    absl::StatusOr<net::RecordBatchHeader> head =
        net::parse_batch_header(std::as_bytes(std::span(first.data(), first.size())));
    BROOK_ASSERT(head.ok());
    const size_t second_batch = head->size_bytes();
    bad[second_batch + net::kBatchHeaderBytes + 4] ^= 0x20;
    write("bad_crc_middle", {.first = bad});
    // The same bytes with the CRC recomputed: a batch whose content is
    // garbage but passes its CRC.
    write("fixed_crc_garbage", {.flags = lr::kFixCrc, .first = bad});
  }
  write("empty", {});
  write("two_segments", {.flags = lr::kSplit, .second_base = static_cast<uint16_t>(first_next),
                         .first = first, .second = second_at(first_next)});
  write("two_segments_gap",
        {.flags = lr::kSplit, .second_base = 100, .first = first, .second = second_at(100)});
  write("two_segments_overlap",
        {.flags = lr::kSplit, .second_base = 10, .first = first, .second = second_at(10)});
  write("two_segments_torn_first",
        {.flags = lr::kSplit, .second_base = static_cast<uint16_t>(first_next + 3),
         .first = first + last.substr(0, 40), .second = second_at(first_next + 3)});
  // A first segment below the recovery point, with its index files: exact
  // (noise all zero), noisy, garbage, missing.
  const auto trusted = lr::kSplit | lr::kTrust;
  const auto base = static_cast<uint16_t>(first_next);
  write("trusted_exact_indexes",
        {.flags = static_cast<uint8_t>(trusted | lr::kIndex | lr::kTimeIndex | lr::kDerived),
         .second_base = base, .first = first, .index = std::string(8, '\0'),
         .time_index = std::string(12, '\0'), .second = second_at(base)});
  write("trusted_noisy_indexes",
        {.flags = static_cast<uint8_t>(trusted | lr::kIndex | lr::kTimeIndex | lr::kDerived),
         .second_base = base, .first = first, .index = std::string("\0\0\0\0\0\0\0\x01", 8),
         .time_index = std::string("\0\0\0\0\0\0\0\0\0\0\0\x01", 12), .second = second_at(base)});
  write("trusted_garbage_indexes",
        {.flags = static_cast<uint8_t>(trusted | lr::kIndex | lr::kTimeIndex),
         .second_base = base, .first = first, .index = std::string("\0\0\0\x04\0\0\0\x10", 8),
         .time_index = std::string(24, '\x7f'), .second = second_at(base)});
  write("trusted_no_indexes", {.flags = static_cast<uint8_t>(trusted), .second_base = base,
                               .first = first, .second = second_at(base)});
  write("trusted_gap", {.flags = static_cast<uint8_t>(trusted | lr::kIndex | lr::kTimeIndex |
                                                      lr::kDerived),
                        .second_base = 50, .first = first, .second = second_at(50)});
  write("trusted_corrupt_first",
        {.flags = static_cast<uint8_t>(trusted), .second_base = base,
         .first = first.substr(0, first.size() - 7), .second = second_at(base)});
  // An idempotent producer's batches and its snapshot.
  {
    std::string segment;
    int64_t offset = 0;
    for (int i = 0; i < 4; ++i) {
      segment += log_batch({.base_offset = offset, .records = 2, .producer_id = 1000,
                            .base_sequence = static_cast<int32_t>(offset)});
      offset += 2;
    }
    write("producer_snapshot", {.flags = lr::kSnapshot, .snapshot_offset = 4, .first = segment,
                                .snapshot = producer_snapshot(1000, 3, 3)});
    write("producer_snapshot_past_end",
          {.flags = lr::kSnapshot, .snapshot_offset = 40, .first = segment,
           .snapshot = producer_snapshot(1000, 39, 39)});
  }
  // Transactions: committed and aborted data with their markers, a log
  // start offset inside the first batch.
  {
    std::string segment;
    segment += log_batch({.base_offset = 0, .records = 3, .producer_id = 7, .base_sequence = 0,
                          .transactional = true});
    segment += std::string(net::build_txn_marker_batch(
                               {.type = net::ControlRecordType::kCommit, .base_offset = 3,
                                .producer_id = 7, .producer_epoch = 0,
                                .timestamp_ms = 1'700'000'000'100})
                               .view());
    segment += log_batch({.base_offset = 4, .records = 2, .producer_id = 8, .base_sequence = 0,
                          .transactional = true});
    segment += log_batch({.base_offset = 6, .records = 2});
    segment += std::string(net::build_txn_marker_batch(
                               {.type = net::ControlRecordType::kAbort, .base_offset = 8,
                                .producer_id = 8, .producer_epoch = 0,
                                .timestamp_ms = 1'700'000'000'200})
                               .view());
    write("transactions", {.flags = lr::kStartOffset, .snapshot_offset = 1, .first = segment});
  }
}

}  // namespace
}  // namespace brook::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  brook::fuzz::SeedWriter out{std::filesystem::path(argv[1])};
  brook::fuzz::write_message_seeds(out);
  brook::fuzz::write_batch_seeds(out);
  brook::fuzz::write_message_set_seeds(out);
  brook::fuzz::write_decompress_seeds(out);
  brook::fuzz::write_log_recovery_seeds(out);
  std::printf("wrote %d seeds to %s\n", out.written(), argv[1]);
  return 0;
}
