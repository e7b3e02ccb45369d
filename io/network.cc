// io/network.cc
#include "io/network.h"

#include <charconv>

#include <fmt/format.h>

namespace brook::io {

std::string Address::to_string() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

absl::StatusOr<Address> Address::parse(std::string_view text) {
  std::string_view host;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return absl::InvalidArgumentError(fmt::format("bad address: {}", text));
    }
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return absl::InvalidArgumentError(fmt::format("address without port: {}", text));
    }
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  uint32_t port = 0;
  const char* end = port_text.data() + port_text.size();
  auto [ptr, ec] = std::from_chars(port_text.data(), end, port);
  if (host.empty() || port_text.empty() || ec != std::errc() || ptr != end || port > 65535) {
    return absl::InvalidArgumentError(fmt::format("bad address: {}", text));
  }
  return Address{std::string(host), static_cast<uint16_t>(port)};
}

}  // namespace brook::io
