// net/kafka/errors.h
//
// Kafka's error codes: the numbers responses carry, their protocol names,
// and whether a client may retry the request that got them.
#pragma once

#include <cstdint>
#include <string_view>

namespace brook::net {

// X(code, Name, NAME, retriable)
#define BROOK_KAFKA_ERRORS(X) \
  X(-1, UnknownServerError, UNKNOWN_SERVER_ERROR, false) \
  X(0, None, NONE, false) \
  X(1, OffsetOutOfRange, OFFSET_OUT_OF_RANGE, false) \
  X(2, CorruptMessage, CORRUPT_MESSAGE, true) \
  X(3, UnknownTopicOrPartition, UNKNOWN_TOPIC_OR_PARTITION, true) \
  X(4, InvalidFetchSize, INVALID_FETCH_SIZE, false) \
  X(5, LeaderNotAvailable, LEADER_NOT_AVAILABLE, true) \
  X(6, NotLeaderOrFollower, NOT_LEADER_OR_FOLLOWER, true) \
  X(7, RequestTimedOut, REQUEST_TIMED_OUT, true) \
  X(8, BrokerNotAvailable, BROKER_NOT_AVAILABLE, false) \
  X(9, ReplicaNotAvailable, REPLICA_NOT_AVAILABLE, true) \
  X(10, MessageTooLarge, MESSAGE_TOO_LARGE, false) \
  X(11, StaleControllerEpoch, STALE_CONTROLLER_EPOCH, false) \
  X(12, OffsetMetadataTooLarge, OFFSET_METADATA_TOO_LARGE, false) \
  X(13, NetworkException, NETWORK_EXCEPTION, true) \
  X(14, CoordinatorLoadInProgress, COORDINATOR_LOAD_IN_PROGRESS, true) \
  X(15, CoordinatorNotAvailable, COORDINATOR_NOT_AVAILABLE, true) \
  X(16, NotCoordinator, NOT_COORDINATOR, true) \
  X(17, InvalidTopicException, INVALID_TOPIC_EXCEPTION, false) \
  X(18, RecordListTooLarge, RECORD_LIST_TOO_LARGE, false) \
  X(19, NotEnoughReplicas, NOT_ENOUGH_REPLICAS, true) \
  X(20, NotEnoughReplicasAfterAppend, NOT_ENOUGH_REPLICAS_AFTER_APPEND, true) \
  X(21, InvalidRequiredAcks, INVALID_REQUIRED_ACKS, false) \
  X(22, IllegalGeneration, ILLEGAL_GENERATION, false) \
  X(23, InconsistentGroupProtocol, INCONSISTENT_GROUP_PROTOCOL, false) \
  X(24, InvalidGroupId, INVALID_GROUP_ID, false) \
  X(25, UnknownMemberId, UNKNOWN_MEMBER_ID, false) \
  X(26, InvalidSessionTimeout, INVALID_SESSION_TIMEOUT, false) \
  X(27, RebalanceInProgress, REBALANCE_IN_PROGRESS, false) \
  X(28, InvalidCommitOffsetSize, INVALID_COMMIT_OFFSET_SIZE, false) \
  X(29, TopicAuthorizationFailed, TOPIC_AUTHORIZATION_FAILED, false) \
  X(30, GroupAuthorizationFailed, GROUP_AUTHORIZATION_FAILED, false) \
  X(31, ClusterAuthorizationFailed, CLUSTER_AUTHORIZATION_FAILED, false) \
  X(32, InvalidTimestamp, INVALID_TIMESTAMP, false) \
  X(33, UnsupportedSaslMechanism, UNSUPPORTED_SASL_MECHANISM, false) \
  X(34, IllegalSaslState, ILLEGAL_SASL_STATE, false) \
  X(35, UnsupportedVersion, UNSUPPORTED_VERSION, false) \
  X(36, TopicAlreadyExists, TOPIC_ALREADY_EXISTS, false) \
  X(37, InvalidPartitions, INVALID_PARTITIONS, false) \
  X(38, InvalidReplicationFactor, INVALID_REPLICATION_FACTOR, false) \
  X(39, InvalidReplicaAssignment, INVALID_REPLICA_ASSIGNMENT, false) \
  X(40, InvalidConfig, INVALID_CONFIG, false) \
  X(41, NotController, NOT_CONTROLLER, true) \
  X(42, InvalidRequest, INVALID_REQUEST, false) \
  X(43, UnsupportedForMessageFormat, UNSUPPORTED_FOR_MESSAGE_FORMAT, false) \
  X(44, PolicyViolation, POLICY_VIOLATION, false) \
  X(45, OutOfOrderSequenceNumber, OUT_OF_ORDER_SEQUENCE_NUMBER, false) \
  X(46, DuplicateSequenceNumber, DUPLICATE_SEQUENCE_NUMBER, false) \
  X(47, InvalidProducerEpoch, INVALID_PRODUCER_EPOCH, false) \
  X(48, InvalidTxnState, INVALID_TXN_STATE, false) \
  X(49, InvalidProducerIdMapping, INVALID_PRODUCER_ID_MAPPING, false) \
  X(50, InvalidTransactionTimeout, INVALID_TRANSACTION_TIMEOUT, false) \
  X(51, ConcurrentTransactions, CONCURRENT_TRANSACTIONS, true) \
  X(52, TransactionCoordinatorFenced, TRANSACTION_COORDINATOR_FENCED, false) \
  X(53, TransactionalIdAuthorizationFailed, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, false) \
  X(54, SecurityDisabled, SECURITY_DISABLED, false) \
  X(55, OperationNotAttempted, OPERATION_NOT_ATTEMPTED, false) \
  X(56, KafkaStorageError, KAFKA_STORAGE_ERROR, true) \
  X(57, LogDirNotFound, LOG_DIR_NOT_FOUND, false) \
  X(58, SaslAuthenticationFailed, SASL_AUTHENTICATION_FAILED, false) \
  X(59, UnknownProducerId, UNKNOWN_PRODUCER_ID, false) \
  X(60, ReassignmentInProgress, REASSIGNMENT_IN_PROGRESS, false) \
  X(61, DelegationTokenAuthDisabled, DELEGATION_TOKEN_AUTH_DISABLED, false) \
  X(62, DelegationTokenNotFound, DELEGATION_TOKEN_NOT_FOUND, false) \
  X(63, DelegationTokenOwnerMismatch, DELEGATION_TOKEN_OWNER_MISMATCH, false) \
  X(64, DelegationTokenRequestNotAllowed, DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, false) \
  X(65, DelegationTokenAuthorizationFailed, DELEGATION_TOKEN_AUTHORIZATION_FAILED, false) \
  X(66, DelegationTokenExpired, DELEGATION_TOKEN_EXPIRED, false) \
  X(67, InvalidPrincipalType, INVALID_PRINCIPAL_TYPE, false) \
  X(68, NonEmptyGroup, NON_EMPTY_GROUP, false) \
  X(69, GroupIdNotFound, GROUP_ID_NOT_FOUND, false) \
  X(70, FetchSessionIdNotFound, FETCH_SESSION_ID_NOT_FOUND, true) \
  X(71, InvalidFetchSessionEpoch, INVALID_FETCH_SESSION_EPOCH, true) \
  X(72, ListenerNotFound, LISTENER_NOT_FOUND, true) \
  X(73, TopicDeletionDisabled, TOPIC_DELETION_DISABLED, false) \
  X(74, FencedLeaderEpoch, FENCED_LEADER_EPOCH, true) \
  X(75, UnknownLeaderEpoch, UNKNOWN_LEADER_EPOCH, true) \
  X(76, UnsupportedCompressionType, UNSUPPORTED_COMPRESSION_TYPE, false) \
  X(77, StaleBrokerEpoch, STALE_BROKER_EPOCH, false) \
  X(78, OffsetNotAvailable, OFFSET_NOT_AVAILABLE, true) \
  X(79, MemberIdRequired, MEMBER_ID_REQUIRED, false) \
  X(80, PreferredLeaderNotAvailable, PREFERRED_LEADER_NOT_AVAILABLE, true) \
  X(81, GroupMaxSizeReached, GROUP_MAX_SIZE_REACHED, false) \
  X(82, FencedInstanceId, FENCED_INSTANCE_ID, false) \
  X(83, EligibleLeadersNotAvailable, ELIGIBLE_LEADERS_NOT_AVAILABLE, true) \
  X(84, ElectionNotNeeded, ELECTION_NOT_NEEDED, false) \
  X(85, NoReassignmentInProgress, NO_REASSIGNMENT_IN_PROGRESS, false) \
  X(86, GroupSubscribedToTopic, GROUP_SUBSCRIBED_TO_TOPIC, false) \
  X(87, InvalidRecord, INVALID_RECORD, false) \
  X(88, UnstableOffsetCommit, UNSTABLE_OFFSET_COMMIT, true) \
  X(89, ThrottlingQuotaExceeded, THROTTLING_QUOTA_EXCEEDED, true) \
  X(90, ProducerFenced, PRODUCER_FENCED, false) \
  X(91, ResourceNotFound, RESOURCE_NOT_FOUND, false) \
  X(92, DuplicateResource, DUPLICATE_RESOURCE, false) \
  X(93, UnacceptableCredential, UNACCEPTABLE_CREDENTIAL, false) \
  X(94, InconsistentVoterSet, INCONSISTENT_VOTER_SET, false) \
  X(95, InvalidUpdateVersion, INVALID_UPDATE_VERSION, false) \
  X(96, FeatureUpdateFailed, FEATURE_UPDATE_FAILED, false) \
  X(97, PrincipalDeserializationFailure, PRINCIPAL_DESERIALIZATION_FAILURE, false) \
  X(98, SnapshotNotFound, SNAPSHOT_NOT_FOUND, false) \
  X(99, PositionOutOfRange, POSITION_OUT_OF_RANGE, false) \
  X(100, UnknownTopicId, UNKNOWN_TOPIC_ID, true) \
  X(101, DuplicateBrokerRegistration, DUPLICATE_BROKER_REGISTRATION, false) \
  X(102, BrokerIdNotRegistered, BROKER_ID_NOT_REGISTERED, false) \
  X(103, InconsistentTopicId, INCONSISTENT_TOPIC_ID, true) \
  X(104, InconsistentClusterId, INCONSISTENT_CLUSTER_ID, false) \
  X(105, TransactionalIdNotFound, TRANSACTIONAL_ID_NOT_FOUND, false) \
  X(106, FetchSessionTopicIdError, FETCH_SESSION_TOPIC_ID_ERROR, true) \
  X(107, IneligibleReplica, INELIGIBLE_REPLICA, false) \
  X(108, NewLeaderElected, NEW_LEADER_ELECTED, false) \
  X(109, OffsetMovedToTieredStorage, OFFSET_MOVED_TO_TIERED_STORAGE, false) \
  X(110, FencedMemberEpoch, FENCED_MEMBER_EPOCH, false) \
  X(111, UnreleasedInstanceId, UNRELEASED_INSTANCE_ID, false) \
  X(112, UnsupportedAssignor, UNSUPPORTED_ASSIGNOR, false) \
  X(113, StaleMemberEpoch, STALE_MEMBER_EPOCH, false) \
  X(114, MismatchedEndpointType, MISMATCHED_ENDPOINT_TYPE, false) \
  X(115, UnsupportedEndpointType, UNSUPPORTED_ENDPOINT_TYPE, false) \
  X(116, UnknownControllerId, UNKNOWN_CONTROLLER_ID, false) \
  X(117, UnknownSubscriptionId, UNKNOWN_SUBSCRIPTION_ID, false) \
  X(118, TelemetryTooLarge, TELEMETRY_TOO_LARGE, false) \
  X(119, InvalidRegistration, INVALID_REGISTRATION, false) \
  X(120, TransactionAbortable, TRANSACTION_ABORTABLE, false) \
  X(121, InvalidRecordState, INVALID_RECORD_STATE, false) \
  X(122, ShareSessionNotFound, SHARE_SESSION_NOT_FOUND, false) \
  X(123, InvalidShareSessionEpoch, INVALID_SHARE_SESSION_EPOCH, false) \
  X(124, FencedStateEpoch, FENCED_STATE_EPOCH, false) \
  X(125, InvalidVoterKey, INVALID_VOTER_KEY, false) \
  X(126, DuplicateVoter, DUPLICATE_VOTER, false) \
  X(127, VoterNotFound, VOTER_NOT_FOUND, false) \
  X(128, InvalidRegularExpression, INVALID_REGULAR_EXPRESSION, false)

enum class Error : int16_t {
#define BROOK_KAFKA_ERROR_ENUM(code, Name, NAME, retriable) k##Name = code,
  BROOK_KAFKA_ERRORS(BROOK_KAFKA_ERROR_ENUM)
#undef BROOK_KAFKA_ERROR_ENUM
};

inline constexpr int16_t code(Error e) { return static_cast<int16_t>(e); }

// The protocol name (UNKNOWN_TOPIC_OR_PARTITION), or "UNKNOWN_ERROR_CODE" for a
// code newer than this table.
std::string_view error_name(int16_t code);
// Retriable errors are transient: the same request may succeed later.
bool error_retriable(int16_t code);

}  // namespace brook::net
