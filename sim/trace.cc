// sim/trace.cc
#include "sim/trace.h"

#include <fmt/format.h>

namespace brook::sim {

std::string_view trace_kind_name(TraceKind kind) {
  switch (kind) {
    case TraceKind::kPost:
      return "post";
    case TraceKind::kTimer:
      return "timer";
    case TraceKind::kNet:
      return "net";
    case TraceKind::kDisk:
      return "disk";
    case TraceKind::kWorld:
      return "world";
    case TraceKind::kStart:
      return "start";
    case TraceKind::kCrash:
      return "crash";
    case TraceKind::kRestart:
      return "restart";
    case TraceKind::kPartition:
      return "partition";
    case TraceKind::kHeal:
      return "heal";
    case TraceKind::kReset:
      return "reset";
    case TraceKind::kClog:
      return "clog";
    case TraceKind::kClock:
      return "clock";
    case TraceKind::kDiskFaults:
      return "disk-faults";
    case TraceKind::kNote:
      return "note";
  }
  return "unknown";
}

namespace {

// Appends `text` as a JSON string body (quotes and control bytes escaped).
void append_json_escaped(std::string& out, std::string_view text) {
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out.push_back(c);
    }
  }
}

}  // namespace

void JsonLinesTraceSink::write(const TraceRecord& record) {
  // Scheduled events carry the queue's sequence; records of faults and
  // lifecycle steps carry their own counter ("rec").
  const bool event = static_cast<uint8_t>(record.kind) < static_cast<uint8_t>(TraceKind::kStart);
  std::string line = fmt::format(R"({{"t_ns":{},"{}":{},"node":{},"kind":"{}")", record.time_ns,
                                 event ? "seq" : "rec", record.sequence, record.node,
                                 trace_kind_name(record.kind));
  if (!record.detail.empty()) {
    line += R"(,"detail":")";
    append_json_escaped(line, record.detail);
    line += '"';
  }
  line += "}\n";
  std::fwrite(line.data(), 1, line.size(), out_);
}

void TraceHash::add_bytes(std::string_view bytes) {
  // FNV-1a over the bytes, then one mixing round for the digest.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  add(h);
  add(bytes.size());
}

uint64_t TraceHash::value() const {
  uint64_t h = state_;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

}  // namespace brook::sim
