// core/controller/acls.h
//
// ACL bindings as the controller checks and matches them (Kafka's
// AclControlManager, AclBinding and AclBindingFilter). Codes are Kafka's:
//   resource type   0 UNKNOWN, 1 ANY, 2 TOPIC, 3 GROUP, 4 CLUSTER,
//                   5 TRANSACTIONAL_ID, 6 DELEGATION_TOKEN, 7 USER
//   pattern type    0 UNKNOWN, 1 ANY, 2 MATCH, 3 LITERAL, 4 PREFIXED
//   operation       0 UNKNOWN, 1 ANY, 2 ALL, 3 READ, 4 WRITE, 5 CREATE,
//                   6 DELETE, 7 ALTER, 8 DESCRIBE, 9 CLUSTER_ACTION,
//                   10 DESCRIBE_CONFIGS, 11 ALTER_CONFIGS,
//                   12 IDEMPOTENT_WRITE, 13 CREATE_TOKENS, 14 DESCRIBE_TOKENS
//   permission      0 UNKNOWN, 1 ANY, 2 DENY, 3 ALLOW
// A binding (an ACL to create) names concrete values: no UNKNOWN or ANY,
// pattern LITERAL or PREFIXED, a non-empty resource name, a principal of
// the form "Type:Name". A filter may use ANY everywhere (null strings match
// anything); MATCH matches the LITERAL bindings named exactly or by the
// wildcard "*", and the PREFIXED bindings whose name is a prefix of the
// filter's.
#pragma once

#include <optional>
#include <string>

#include "core/metadata/image.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/describe_acls_request.h"
#include "net/kafka/messages/describe_acls_response.h"

namespace brook::controller {

inline constexpr int8_t kAclAny = 1;
inline constexpr int8_t kPatternMatch = 2;
inline constexpr int8_t kPatternLiteral = 3;
inline constexpr int8_t kPatternPrefixed = 4;

struct AclFilter {
  int8_t resource_type = kAclAny;
  std::optional<std::string> resource_name;
  int8_t pattern_type = kAclAny;
  std::optional<std::string> principal;
  std::optional<std::string> host;
  int8_t operation = kAclAny;
  int8_t permission_type = kAclAny;
};

// The filter of a DeleteAcls filter or a DescribeAcls request (their
// fields share names).
template <typename Wire>
AclFilter acl_filter_of(const Wire& f) {
  AclFilter filter;
  filter.resource_type = f.resource_type_filter;
  filter.resource_name = f.resource_name_filter;
  filter.pattern_type = f.pattern_type_filter;
  filter.principal = f.principal_filter;
  filter.host = f.host_filter;
  filter.operation = f.operation;
  filter.permission_type = f.permission_type;
  return filter;
}

struct AclProblem {
  net::Error error = net::Error::kNone;
  std::string message;
};

// Why `acl` cannot be created, if it cannot.
std::optional<AclProblem> check_new_acl(const metadata::StandardAcl& acl);
// Why `filter` cannot be used to delete, if it cannot.
std::optional<AclProblem> check_acl_filter(const AclFilter& filter);
bool acl_matches(const AclFilter& filter, const metadata::StandardAcl& acl);

// The answer to DescribeAcls from the ACLs in `acls`: the matching bindings
// grouped by resource pattern (type, name, pattern type), or
// INVALID_REQUEST for a filter naming UNKNOWN or out-of-range values.
net::DescribeAclsResponse describe_acls(const metadata::AclsImage& acls, const net::DescribeAclsRequest& request);

}  // namespace brook::controller
