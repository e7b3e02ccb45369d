// net/codec/codec_bench.cc
//
// brook-codec-bench [--quick]: throughput of the codec primitives on this
// machine. CRC-32C (both paths) beside memcpy of the same 1 MiB buffer in
// the same run, varint encode/decode rates, and each compression codec on
// 1 MiB of record-like text. Each figure is the best of several timed rounds;
// --quick shortens the rounds for smoke runs. Runs in well under 10 s.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "net/codec/compression.h"
#include "net/codec/crc32c.h"
#include "net/codec/varint.h"

namespace brook::codec {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr size_t kBufferBytes = 1024 * 1024;
constexpr size_t kVarintCount = 1 << 20;
constexpr int kRounds = 7;

// Keeps the compiler from discarding a computation whose result is unused.
template <typename T>
void keep(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

// The best seconds per call of each function over kRounds rounds of about
// round_seconds each. The functions take turns within every round, so load
// from other processes falls on all of them alike and ratios stay fair.
std::vector<double> best_seconds_per_call(const std::vector<std::function<void()>>& fns,
                                          double round_seconds) {
  std::vector<size_t> calls;
  for (const auto& fn : fns) {
    const auto start = SteadyClock::now();
    fn();  // warm-up, and a first estimate
    const double once =
        std::max(std::chrono::duration<double>(SteadyClock::now() - start).count(), 1e-9);
    calls.push_back(static_cast<size_t>(std::clamp(round_seconds / once, 1.0, 1e7)));
  }
  std::vector<double> best(fns.size(), 1e30);
  for (int round = 0; round < kRounds; ++round) {
    for (size_t f = 0; f < fns.size(); ++f) {
      const auto t0 = SteadyClock::now();
      for (size_t i = 0; i < calls[f]; ++i) fns[f]();
      const double elapsed = std::chrono::duration<double>(SteadyClock::now() - t0).count();
      best[f] = std::min(best[f], elapsed / static_cast<double>(calls[f]));
    }
  }
  return best;
}

double seconds_per_call(const std::function<void()>& fn, double round_seconds) {
  return best_seconds_per_call({fn}, round_seconds)[0];
}

uint64_t next_random(uint64_t& state) {  // splitmix64, fixed seed: same data every run
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Record-like JSON lines: semi-compressible, like typical Kafka payloads.
std::vector<std::byte> record_text(size_t n) {
  static const char* const kWords[] = {"user",   "click", "view",    "order",  "cart",
                                       "session", "page", "error",   "ok",     "region",
                                       "eu-west", "us-east", "mobile", "desktop", "search"};
  uint64_t seed = 1;
  std::string s;
  while (s.size() < n) {
    const uint64_t r = next_random(seed);
    s += "{\"event\":\"" + std::string(kWords[r % 15]) + "\",\"user\":" +
         std::to_string((r >> 8) % 1000000) + ",\"ts\":" + std::to_string(1700000000000 + (r >> 40)) +
         ",\"device\":\"" + kWords[(r >> 20) % 15] + "\"}\n";
  }
  s.resize(n);
  std::vector<std::byte> out(n);
  std::memcpy(out.data(), s.data(), n);
  return out;
}

void bench_crc32c(double round_seconds) {
  std::vector<std::byte> src(kBufferBytes);
  uint64_t seed = 2;
  for (auto& b : src) b = static_cast<std::byte>(next_random(seed));
  std::vector<std::byte> dst(kBufferBytes);
  const double gb = static_cast<double>(kBufferBytes) / 1e9;

  std::vector<std::function<void()>> fns = {
      [&] {
        std::memcpy(dst.data(), src.data(), kBufferBytes);
        keep(dst.data());
      },
      [&] { keep(crc32c_software(0, src.data(), src.size())); }};
  const bool hardware_available = crc32c_hardware_available();
  if (hardware_available) {
    fns.push_back([&] { keep(crc32c_hardware(0, src.data(), src.size())); });
  }
  const std::vector<double> best = best_seconds_per_call(fns, round_seconds);
  const double copy = best[0];
  const double software = best[1];
  std::printf("memcpy            %7.2f GB/s  (1 MiB)\n", gb / copy);
  if (hardware_available) {
    const double hardware = best[2];
    std::printf("crc32c hardware   %7.2f GB/s  (%.0f%% of memcpy)\n", gb / hardware,
                100.0 * copy / hardware);
  } else {
    std::printf("crc32c hardware   unavailable (no SSE4.2)\n");
  }
  std::printf("crc32c software   %7.2f GB/s  (%.0f%% of memcpy)\n", gb / software,
              100.0 * copy / software);
  if (hardware_available) {
    // What a 16 KiB record batch checks (the bytes after its CRC field).
    constexpr size_t kBatchBytes = 16784;
    const double batch = seconds_per_call([&] { keep(crc32c_hardware(0, src.data(), kBatchBytes)); },
                                          round_seconds);
    std::printf("crc32c hardware   %7.2f GB/s  (%zu-byte inputs, %.0f ns each)\n",
                static_cast<double>(kBatchBytes) / batch / 1e9, kBatchBytes, batch * 1e9);
  }
}

// Values whose encodings spread evenly over 1 to 5 bytes (1 to 10 for
// varlongs), so the length of the next one is unpredictable, and their
// encodings.
struct VarintData {
  std::vector<int32_t> v32 = std::vector<int32_t>(kVarintCount);
  std::vector<int64_t> v64 = std::vector<int64_t>(kVarintCount);
  std::vector<std::byte> buf32 = std::vector<std::byte>(kVarintCount * kVarint32BytesMax);
  std::vector<std::byte> buf64 = std::vector<std::byte>(kVarintCount * kVarint64BytesMax);
  size_t bytes32 = 0;
  size_t bytes64 = 0;
};

double varint_rate(double seconds) { return static_cast<double>(kVarintCount) / seconds / 1e6; }

void bench_varint_encode(VarintData& d, double round_seconds) {
  const double encode32 = seconds_per_call(
      [&] {
        size_t pos = 0;
        for (int32_t v : d.v32) pos += encode_varint(v, d.buf32.data() + pos);
        d.bytes32 = pos;
        keep(d.buf32.data());
      },
      round_seconds);
  const double encode64 = seconds_per_call(
      [&] {
        size_t pos = 0;
        for (int64_t v : d.v64) pos += encode_varlong(v, d.buf64.data() + pos);
        d.bytes64 = pos;
        keep(d.buf64.data());
      },
      round_seconds);
  std::printf("varint  encode    %7.0f M values/s  (%.2f bytes/value)\n", varint_rate(encode32),
              static_cast<double>(d.bytes32) / kVarintCount);
  std::printf("varlong encode    %7.0f M values/s  (%.2f bytes/value)\n", varint_rate(encode64),
              static_cast<double>(d.bytes64) / kVarintCount);
}

// Sums every value of `in` read with `read`, a read_* function.
template <typename T, typename Read>
uint64_t sum_all(std::span<const std::byte> in, Read read) {
  uint64_t sum = 0;  // wraps
  for (size_t pos = 0; pos < in.size();) {
    T v = 0;
    const size_t n = read(in.subspan(pos), &v);
    if (n == 0) break;
    sum += static_cast<uint64_t>(v);
    pos += n;
  }
  return sum;
}

void bench_varint_decode(const VarintData& d, double round_seconds) {
  const std::span<const std::byte> in32(d.buf32.data(), d.bytes32);
  const std::span<const std::byte> in64(d.buf64.data(), d.bytes64);
  const double read32 = seconds_per_call(
      [&] { keep(sum_all<int32_t>(in32, [](auto s, int32_t* v) { return read_varint(s, v); })); },
      round_seconds);
  const double checked32 = seconds_per_call(
      [&] {
        keep(sum_all<int32_t>(in32, [](auto s, int32_t* v) -> size_t {
          auto r = decode_varint(s);
          if (!r.ok()) return 0;
          *v = r->value;
          return r->bytes;
        }));
      },
      round_seconds);
  const double read64 = seconds_per_call(
      [&] { keep(sum_all<int64_t>(in64, [](auto s, int64_t* v) { return read_varlong(s, v); })); },
      round_seconds);
  std::printf("varint  read      %7.0f M values/s\n", varint_rate(read32));
  std::printf("varint  decode    %7.0f M values/s  (StatusOr API)\n", varint_rate(checked32));
  std::printf("varlong read      %7.0f M values/s\n", varint_rate(read64));
}

void bench_varints(double round_seconds) {
  VarintData d;
  uint64_t seed = 3;
  for (size_t i = 0; i < kVarintCount; ++i) {
    const uint64_t r = next_random(seed);
    d.v32[i] = static_cast<int32_t>(static_cast<int64_t>(r) >> (33 + r % 31));
    d.v64[i] = static_cast<int64_t>(r) >> (r % 64);
  }
  bench_varint_encode(d, round_seconds);
  bench_varint_decode(d, round_seconds);
}

void bench_codecs(double round_seconds) {
  const std::vector<std::byte> text = record_text(kBufferBytes);
  const double mb = static_cast<double>(kBufferBytes) / 1e6;
  std::printf("codec   ratio   compress MB/s   decompress MB/s  (1 MiB record-like text, default level)\n");
  for (Compression c : {Compression::kGzip, Compression::kSnappy, Compression::kLz4,
                        Compression::kZstd}) {
    auto compressed = compress(c, text);
    if (!compressed.ok()) {
      std::printf("%-7s compress failed: %s\n", std::string(compression_name(c)).c_str(),
                  compressed.status().ToString().c_str());
      continue;
    }
    const io::Buffer packed = *compressed;
    bool ok = true;
    const double pack = seconds_per_call(
        [&] {
          auto r = compress(c, text);
          ok = ok && r.ok();
        },
        round_seconds);
    const double unpack = seconds_per_call(
        [&] {
          auto r = decompress(c, packed.span(), kBufferBytes);
          ok = ok && r.ok() && r->size() == kBufferBytes;
        },
        round_seconds);
    std::printf("%-7s %5.2f   %13.0f   %15.0f%s\n", std::string(compression_name(c)).c_str(),
                static_cast<double>(kBufferBytes) / static_cast<double>(packed.size()),
                mb / pack, mb / unpack, ok ? "" : "  (ERRORS)");
  }
}

}  // namespace
}  // namespace brook::codec

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: brook-codec-bench [--quick]\n");
      return 2;
    }
  }
  const double round_seconds = quick ? 0.003 : 0.03;
  std::printf("brook-codec-bench%s: best of %d rounds of ~%.0f ms each\n", quick ? " --quick" : "",
              brook::codec::kRounds, round_seconds * 1000);
  brook::codec::bench_crc32c(round_seconds);
  brook::codec::bench_varints(round_seconds);
  brook::codec::bench_codecs(round_seconds);
  return 0;
}
