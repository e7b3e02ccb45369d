// core/controller/acls.cc
#include "core/controller/acls.h"

#include <map>
#include <tuple>

#include <fmt/format.h>

namespace brook::controller {

namespace {

constexpr int8_t kResourceTypeMax = 7;  // USER
constexpr int8_t kOperationMax = 14;    // DESCRIBE_TOKENS
constexpr int8_t kDeny = 2;
constexpr int8_t kAllow = 3;

AclProblem invalid(std::string message) {
  return AclProblem{.error = net::Error::kInvalidRequest, .message = std::move(message)};
}

}  // namespace

std::optional<AclProblem> check_new_acl(const metadata::StandardAcl& acl) {
  if (acl.resource_type <= kAclAny || acl.resource_type > kResourceTypeMax) {
    return invalid(fmt::format("Invalid resourceType {}", acl.resource_type));
  }
  if (acl.pattern_type != kPatternLiteral && acl.pattern_type != kPatternPrefixed) {
    return invalid(fmt::format("Invalid patternType {}", acl.pattern_type));
  }
  if (acl.operation <= kAclAny || acl.operation > kOperationMax) {
    return invalid(fmt::format("Invalid operation {}", acl.operation));
  }
  if (acl.permission_type != kDeny && acl.permission_type != kAllow) {
    return invalid(fmt::format("Invalid permissionType {}", acl.permission_type));
  }
  if (acl.resource_name.empty()) return invalid("Resource name should not be empty");
  const size_t colon = acl.principal.find(':');
  if (colon == std::string::npos) {
    return invalid(fmt::format("Could not parse principal from `{}` (no colon is present separating the "
                               "principal type from the principal name)",
                               acl.principal));
  }
  return std::nullopt;
}

std::optional<AclProblem> check_acl_filter(const AclFilter& filter) {
  if (filter.resource_type < kAclAny || filter.resource_type > kResourceTypeMax) {
    return invalid(fmt::format("Invalid resourceType {}", filter.resource_type));
  }
  if (filter.pattern_type < kAclAny || filter.pattern_type > kPatternPrefixed) {
    return invalid(fmt::format("Invalid patternType {}", filter.pattern_type));
  }
  if (filter.operation < kAclAny || filter.operation > kOperationMax) {
    return invalid(fmt::format("Invalid operation {}", filter.operation));
  }
  if (filter.permission_type < kAclAny || filter.permission_type > kAllow) {
    return invalid(fmt::format("Invalid permissionType {}", filter.permission_type));
  }
  return std::nullopt;
}

bool acl_matches(const AclFilter& filter, const metadata::StandardAcl& acl) {
  if (filter.resource_type != kAclAny && filter.resource_type != acl.resource_type) return false;
  if (filter.pattern_type == kPatternMatch) {
    if (filter.resource_name.has_value()) {
      const std::string& name = *filter.resource_name;
      if (acl.pattern_type == kPatternLiteral) {
        if (acl.resource_name != name && acl.resource_name != "*") return false;
      } else if (acl.pattern_type == kPatternPrefixed) {
        if (!name.starts_with(acl.resource_name)) return false;
      } else {
        return false;
      }
    }
  } else {
    if (filter.pattern_type != kAclAny && filter.pattern_type != acl.pattern_type) return false;
    if (filter.resource_name.has_value() && *filter.resource_name != acl.resource_name) return false;
  }
  if (filter.principal.has_value() && *filter.principal != acl.principal) return false;
  if (filter.host.has_value() && *filter.host != acl.host) return false;
  if (filter.operation != kAclAny && filter.operation != acl.operation) return false;
  if (filter.permission_type != kAclAny && filter.permission_type != acl.permission_type) return false;
  return true;
}

net::DescribeAclsResponse describe_acls(const metadata::AclsImage& acls, const net::DescribeAclsRequest& request) {
  net::DescribeAclsResponse response;
  response.error_message = std::nullopt;
  const AclFilter filter = acl_filter_of(request);
  if (std::optional<AclProblem> problem = check_acl_filter(filter)) {
    response.error_code = net::code(problem->error);
    response.error_message = problem->message;
    return response;
  }
  using Pattern = std::tuple<int8_t, std::string, int8_t>;
  std::map<Pattern, std::vector<const metadata::StandardAcl*>> matched;
  for (const auto& [id, acl] : acls.acls) {
    if (acl_matches(filter, acl)) matched[Pattern{acl.resource_type, acl.resource_name, acl.pattern_type}].push_back(&acl);
  }
  for (const auto& [pattern, bindings] : matched) {
    auto& resource = response.resources.emplace_back();
    resource.resource_type = std::get<0>(pattern);
    resource.resource_name = std::get<1>(pattern);
    resource.pattern_type = std::get<2>(pattern);
    for (const metadata::StandardAcl* acl : bindings) {
      auto& out = resource.acls.emplace_back();
      out.principal = acl->principal;
      out.host = acl->host;
      out.operation = acl->operation;
      out.permission_type = acl->permission_type;
    }
  }
  return response;
}

}  // namespace brook::controller
