// core/controller/topic_names.cc
#include "core/controller/topic_names.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/controller/quorum_controller.h"

namespace brook::controller {

namespace {

bool legal_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

std::string unify(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '.', '_');
  return out;
}

}  // namespace

absl::Status validate_topic_name(std::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("Topic name is illegal, it can't be empty");
  if (name == "." || name == "..") {
    return absl::InvalidArgumentError("Topic name cannot be \".\" or \"..\"");
  }
  if (name.size() > kTopicNameMax) {
    return absl::InvalidArgumentError(fmt::format(
        "Topic name is illegal, it can't be longer than {} characters, topic name: {}", kTopicNameMax,
        std::string(name)));
  }
  if (!std::all_of(name.begin(), name.end(), legal_char)) {
    return absl::InvalidArgumentError(
        fmt::format("Topic name \"{}\" is illegal, it contains a character other than ASCII "
                    "alphanumerics, '.', '_' and '-'",
                    std::string(name)));
  }
  return absl::OkStatus();
}

std::optional<std::string> colliding_topic(std::string_view name, const metadata::TopicsImage& topics) {
  if (name.find_first_of("._") == std::string_view::npos) return std::nullopt;
  const std::string unified = unify(name);
  for (const auto& [existing, id] : topics.by_name) {
    if (existing != name && existing.size() == name.size() && unify(existing) == unified) {
      return existing;
    }
  }
  return std::nullopt;
}

}  // namespace brook::controller
