// net/kafka/protocol_bench.cc
//
// brook-protocol-bench [--quick]: encode and decode throughput of the two
// messages that carry data, on this machine:
//   produce  a ProduceRequest (v7) carrying 1 MiB of record batches
//            (1 topic x 16 partitions x 64 KiB)
//   fetch    a FetchResponse (v11) carrying 16 partitions x 64 KiB
// Throughput counts every byte of the message (GB/s) and messages per
// second. "Copied" is the bytes memcpy'd per message: on encode, everything
// but the records (which are spliced into the output chain), on decode the
// strings (records come back as slices of the frame).
//
// Measurement tooling: it reads the real clock to time the runs.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "net/kafka/message.h"
#include "net/kafka/messages/fetch_response.h"
#include "net/kafka/messages/produce_request.h"

namespace brook::net {
namespace {

using Clock = std::chrono::steady_clock;

template <typename T>
void keep(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

io::Buffer payload(size_t n, uint8_t seed) {
  io::Buffer b = io::Buffer::allocate(n);
  for (size_t i = 0; i < n; ++i) b.mutable_data()[i] = static_cast<std::byte>(i * 31 + seed);
  return b;
}

ProduceRequest make_produce() {
  ProduceRequest req;
  req.acks = -1;
  req.timeout_ms = 30000;
  auto& topic = req.topic_data.emplace_back();
  topic.name = "bench-topic";
  for (int p = 0; p < 16; ++p) {
    auto& part = topic.partition_data.emplace_back();
    part.index = p;
    part.records = payload(64 * 1024, static_cast<uint8_t>(p));
  }
  return req;
}

FetchResponse make_fetch() {
  FetchResponse resp;
  auto& topic = resp.responses.emplace_back();
  topic.topic = "bench-topic";
  for (int p = 0; p < 16; ++p) {
    auto& part = topic.partitions.emplace_back();
    part.partition_index = p;
    part.high_watermark = 1'000'000;
    part.last_stable_offset = 1'000'000;
    part.log_start_offset = 0;
    part.records = payload(64 * 1024, static_cast<uint8_t>(p));
  }
  return resp;
}

// Runs fn repeatedly for about `seconds`; returns seconds per call (best of 5).
template <typename F>
double time_per_call(F&& fn, double seconds) {
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    size_t calls = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    do {
      for (int i = 0; i < 64; ++i) fn();
      calls += 64;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < seconds / 5);
    best = std::min(best, elapsed / static_cast<double>(calls));
  }
  return best;
}

template <typename M>
void bench(const char* name, const M& message, int16_t version, double seconds) {
  Sizer sizer;
  message.measure(sizer, version);
  const double bytes = static_cast<double>(sizer.bytes);
  const double encode_s = time_per_call(
      [&] {
        auto out = encode(message, version);
        keep(out->size());
      },
      seconds);
  const io::Buffer frame = encode(message, version)->linearize();
  size_t decode_copied = 0;
  const double decode_s = time_per_call(
      [&] {
        Reader r(frame);
        M m;
        m.read(r, version);
        decode_copied = r.bytes_copied();
        keep(&m);
      },
      seconds);
  fmt::print(
      "{}: {:.0f} bytes; encode {:.1f} GB/s, {:.0f} messages/s, copied {} bytes/message; "
      "decode {:.1f} GB/s, {:.0f} messages/s, copied {} bytes/message\n",
      name, bytes, bytes / encode_s / 1e9, 1 / encode_s, sizer.bytes - sizer.zero_copy,
      bytes / decode_s / 1e9, 1 / decode_s, decode_copied);
}

}  // namespace
}  // namespace brook::net

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const double seconds = quick ? 0.2 : 2.0;
  brook::net::bench("produce v7 (1 MiB records)", brook::net::make_produce(), 7, seconds);
  brook::net::bench("fetch v11 (16 x 64 KiB)", brook::net::make_fetch(), 11, seconds);
  return 0;
}
