// core/controller/topic_names.h
//
// Kafka's rules for topic names (org.apache.kafka.common.internals.Topic):
// 1 to 249 characters from [a-zA-Z0-9._-], and not "." or "..". Two names
// that differ only where one has '.' and the other '_' collide (their
// metric names would be the same), so a topic may not be created beside a
// colliding one.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/metadata/image.h"

namespace brook::controller {

// InvalidArgument with Kafka's message when `name` is not a legal topic name.
absl::Status validate_topic_name(std::string_view name);

// The topic `name` collides with, among `topics` and `more` (names about
// to be created), if any; the name itself does not count.
std::optional<std::string> colliding_topic(std::string_view name, const metadata::TopicsImage& topics,
                                           const std::set<std::string, std::less<>>& more = {});

}  // namespace brook::controller
