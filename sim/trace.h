// sim/trace.h
//
// The simulator's event trace. Every event the World runs (and every fault it
// applies) is folded into a running 64-bit hash of (virtual time, sequence,
// node, kind); two runs of one seed must end with the same hash, which is the
// determinism self-check. Optionally every record is also written to a
// TraceSink (JSON lines) for diffing two runs or reading one.
//
// Owned by the World; used only on the simulation's thread. The hash depends
// on nothing but the values fed to it: no pointers, no wall time.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace brook::sim {

// What happened. The first five are the kinds of scheduled events (they fit
// in the 4 bits the World reserves in an event tag); the rest are faults and
// lifecycle steps the World applies itself.
enum class TraceKind : uint8_t {
  kPost = 0,   // a callback posted to a node's executor
  kTimer = 1,  // a node timer (sleep, deadline, disk latency)
  kNet = 2,    // a simulated network delivery or connection step
  kDisk = 3,   // a simulated disk completion scheduled by the disk itself
  kWorld = 4,  // a world-level callback (fault schedule, test driver)
  kStart = 16,
  kCrash,
  kRestart,
  kPartition,
  kHeal,
  kReset,
  kClog,
  kClock,
  kDiskFaults,
  kNote,
};

std::string_view trace_kind_name(TraceKind kind);

// One line of the trace. node is -1 for the world itself.
struct TraceRecord {
  int64_t time_ns = 0;
  uint64_t sequence = 0;
  int32_t node = -1;
  TraceKind kind = TraceKind::kNote;
  std::string_view detail;  // empty for ordinary events
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void write(const TraceRecord& record) = 0;
};

// Writes one JSON object per line. Events carry the scheduler's sequence
// ("seq"); fault and lifecycle records carry their own counter ("rec"):
//   {"t_ns":1500000,"seq":42,"node":2,"kind":"timer"}
//   {"t_ns":9000000,"rec":7,"node":-1,"kind":"partition","detail":"0,1<->2"}
// Does not own the FILE.
class JsonLinesTraceSink final : public TraceSink {
 public:
  explicit JsonLinesTraceSink(std::FILE* out) : out_(out) {}
  void write(const TraceRecord& record) override;

 private:
  std::FILE* out_;
};

// The running hash. Mixing per word is an xxhash-style round (multiply,
// rotate, multiply), cheap enough to run on every event; value() applies a
// final avalanche so nearby states give unrelated digests.
class TraceHash {
 public:
  void add(uint64_t word) {
    state_ ^= word * 0x9E3779B97F4A7C15ULL;
    state_ = ((state_ << 31) | (state_ >> 33)) * 0xC2B2AE3D27D4EB4FULL;
  }
  void add_bytes(std::string_view bytes);
  void add_record(int64_t time_ns, uint64_t sequence, uint32_t tag) {
    add(static_cast<uint64_t>(time_ns));
    add(sequence ^ (static_cast<uint64_t>(tag) << 40));
  }
  uint64_t value() const;

 private:
  uint64_t state_ = 0x27D4EB2F165667C5ULL;
};

}  // namespace brook::sim
