// fuzz/fuzz_seeds.cc: brook-fuzz-seeds OUT_DIR
//
// Writes seed inputs for every fuzz target into OUT_DIR/<target>/: valid
// request frames (header and body) and selector-prefixed response frames of
// every API at its lowest, middle and highest versions (random instances
// from the generated testing code), record batches built with every codec
// (single, several in a row, a partial tail, transaction markers), and
// compressed streams for each decompression target. Output is deterministic.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "net/codec/compression.h"
#include "net/kafka/apis.h"
#include "net/kafka/frame.h"
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
  brook::fuzz::write_decompress_seeds(out);
  std::printf("wrote %d seeds to %s\n", out.written(), argv[1]);
  return 0;
}
