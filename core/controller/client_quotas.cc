// core/controller/client_quotas.cc
#include "core/controller/client_quotas.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string_view>

#include "net/kafka/errors.h"

namespace brook::controller {

namespace {

enum class QuotaType { kLong, kInt, kDouble };

std::optional<QuotaType> quota_type(bool ip, std::string_view key) {
  if (ip) {
    if (key == "connection_creation_rate") return QuotaType::kInt;
    return std::nullopt;
  }
  if (key == "producer_byte_rate" || key == "consumer_byte_rate") return QuotaType::kLong;
  if (key == "request_percentage" || key == "controller_mutation_rate") return QuotaType::kDouble;
  return std::nullopt;
}

bool is_ip_address(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

}  // namespace

std::variant<metadata::ClientQuotaEntity, std::string> check_quota_entity(const QuotaEntityList& entity) {
  if (entity.empty()) return std::string("Invalid empty client quota entity");
  metadata::ClientQuotaEntity out;
  for (const auto& [type, name] : entity) {
    if (type != "user" && type != "client-id" && type != "ip") {
      return fmt::format("Unhandled client quota entity type: {}", type);
    }
    if (!out.emplace(type, name).second) {
      return fmt::format("Invalid empty client quota entity: duplicate entity entry type {}", type);
    }
    if (type == "ip" && name.has_value() && !is_ip_address(*name)) {
      return fmt::format("{} is not a valid IP or resolvable host.", *name);
    }
  }
  if (out.contains("ip") && out.size() > 1) {
    return std::string(
        "Invalid quota entity combination, IP entity should not be combined with User or ClientId entity.");
  }
  return out;
}

std::optional<std::string> check_quota_value(const metadata::ClientQuotaEntity& entity, const std::string& key,
                                             double value) {
  const std::optional<QuotaType> type = quota_type(entity.contains("ip"), key);
  if (!type.has_value()) return fmt::format("Invalid configuration key {}", key);
  if (!std::isfinite(value)) return fmt::format("Configuration {} must be a finite number", key);
  switch (*type) {
    case QuotaType::kLong:
      if (value != std::floor(value) || std::fabs(value) >= 9.2e18) {
        return fmt::format("Configuration {} must be a Long value", key);
      }
      break;
    case QuotaType::kInt:
      if (value != std::floor(value) || value > std::numeric_limits<int32_t>::max() ||
          value < std::numeric_limits<int32_t>::min()) {
        return fmt::format("Configuration {} must be an Integer value", key);
      }
      break;
    case QuotaType::kDouble:
      break;
  }
  return std::nullopt;
}

net::DescribeClientQuotasResponse describe_client_quotas(const metadata::ClientQuotasImage& quotas,
                                                         const net::DescribeClientQuotasRequest& request) {
  constexpr int8_t kMatchExact = 0;
  constexpr int8_t kMatchDefault = 1;
  constexpr int8_t kMatchSpecified = 2;
  net::DescribeClientQuotasResponse response;
  response.error_message = std::nullopt;
  auto refuse = [&](net::Error e, std::string message) {
    response.error_code = net::code(e);
    response.error_message = std::move(message);
    response.entries = std::nullopt;
    return response;
  };
  std::map<std::string, std::optional<std::string>> exact;  // type -> name (null: the default entity)
  std::set<std::string> any_name;
  for (const auto& c : request.components) {
    const std::string& type = c.entity_type;
    if (type.empty()) return refuse(net::Error::kInvalidRequest, "Invalid empty entity type.");
    if (exact.contains(type) || any_name.contains(type)) {
      return refuse(net::Error::kInvalidRequest,
                    fmt::format("Entity type {} cannot appear more than once in the filter.", type));
    }
    if (type != "user" && type != "client-id" && type != "ip") {
      return refuse(net::Error::kUnsupportedVersion, fmt::format("Unsupported entity type {}", type));
    }
    switch (c.match_type) {
      case kMatchExact:
        if (!c.match.has_value()) {
          return refuse(net::Error::kInvalidRequest, "Request specified MATCH_TYPE_EXACT, but set match string to null.");
        }
        exact[type] = c.match;
        break;
      case kMatchDefault:
        if (c.match.has_value()) {
          return refuse(net::Error::kInvalidRequest,
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.");
        }
        exact[type] = std::nullopt;
        break;
      case kMatchSpecified:
        if (c.match.has_value()) {
          return refuse(net::Error::kInvalidRequest,
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.");
        }
        any_name.insert(type);
        break;
      default:
        return refuse(net::Error::kInvalidRequest, fmt::format("Unknown match type {}", c.match_type));
    }
  }
  auto named = [&](const std::string& type) { return exact.contains(type) || any_name.contains(type); };
  if (named("ip") && (named("user") || named("client-id"))) {
    return refuse(net::Error::kInvalidRequest,
                  "Invalid entity filter component combination. IP filter component should not be used with user "
                  "or clientId filter component.");
  }
  const bool everything = exact.empty() && any_name.empty();
  if (everything && request.strict) return response;
  for (const auto& [entity, values] : quotas.entities) {
    if (!everything) {
      bool match = !request.strict || entity.size() == exact.size() + any_name.size();
      for (const auto& [type, name] : exact) {
        auto it = entity.find(type);
        match = match && it != entity.end() && it->second == name;
      }
      for (const std::string& type : any_name) match = match && entity.contains(type);
      if (!match) continue;
    }
    auto& out = response.entries->emplace_back();
    for (const auto& [type, name] : entity) {
      auto& e = out.entity.emplace_back();
      e.entity_type = type;
      e.entity_name = name;
    }
    for (const auto& [key, value] : values) {
      auto& v = out.values.emplace_back();
      v.key = key;
      v.value = value;
    }
  }
  return response;
}

}  // namespace brook::controller
