// core/controller/scram.h
//
// SCRAM credentials in the metadata log (KIP-554), as Kafka's
// ScramControlManager and ScramImage keep them:
//
// - AlterUserScramCredentials: one result per user. A user's credential
//   for one mechanism may be altered once per request (a second deletion
//   or upsertion of it is DUPLICATE_RESOURCE; Kafka's controller refuses a
//   second alteration of the user even for another mechanism, which
//   `kafka-configs --add-config 'SCRAM-SHA-256=[...],SCRAM-SHA-512=[...]'`
//   sends). An empty user name is UNACCEPTABLE_CREDENTIAL, an unknown
//   mechanism UNSUPPORTED_SASL_MECHANISM, fewer than 4096 or more than
//   16384 iterations UNACCEPTABLE_CREDENTIAL, deleting a credential that
//   does not exist RESOURCE_NOT_FOUND. A user with any problem has none of
//   its alterations made; the rest commit together. An upsertion carries
//   the salted password (the password never leaves the client); the
//   controller keeps only the StoredKey and ServerKey made from it.
// - DescribeUserScramCredentials (answered by any broker from its image):
//   no users named means every user with a credential; a user named twice
//   is DUPLICATE_RESOURCE, a user with no credential RESOURCE_NOT_FOUND.
#pragma once

#include <cstddef>
#include <vector>

#include "core/metadata/image.h"
#include "core/metadata/record_serde.h"
#include "net/kafka/messages/alter_user_scram_credentials_request.h"
#include "net/kafka/messages/alter_user_scram_credentials_response.h"
#include "net/kafka/messages/describe_user_scram_credentials_request.h"
#include "net/kafka/messages/describe_user_scram_credentials_response.h"

namespace brook::controller {

struct ScramChanges {
  net::AlterUserScramCredentialsResponse response;
  std::vector<metadata::MetadataRecord> records;
  // The results that depend on `records` being committed.
  std::vector<size_t> written;
};

ScramChanges alter_scram_credentials(const metadata::ScramImage& image,
                                     const net::AlterUserScramCredentialsRequest& request);

net::DescribeUserScramCredentialsResponse describe_scram_credentials(
    const metadata::ScramImage& image, const net::DescribeUserScramCredentialsRequest& request);

}  // namespace brook::controller
