"""Kafka's error codes and names, shared by the quorum, the controller and the CLI.

Every error a user can see carries one of these names, so scripts can match on it
(`INVALID_REPLICATION_FACTOR: ...`). Codes follow Kafka's protocol numbering.
"""
from __future__ import annotations

import enum


class Errors(enum.IntEnum):
    """Kafka protocol error codes (the subset sparkraft uses)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    NETWORK_EXCEPTION = 13
    INVALID_TOPIC_EXCEPTION = 17
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    KAFKA_STORAGE_ERROR = 56
    SASL_AUTHENTICATION_FAILED = 58
    REASSIGNMENT_IN_PROGRESS = 60
    LISTENER_NOT_FOUND = 72
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    STALE_BROKER_EPOCH = 77
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    INVALID_RECORD = 87
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    FEATURE_UPDATE_FAILED = 96
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_CLUSTER_ID = 104
    INELIGIBLE_REPLICA = 107
    UNSUPPORTED_ENDPOINT_TYPE = 115
    INVALID_REGISTRATION = 119
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    CONTROLLER_ID_NOT_REGISTERED = 136
    # Not a Kafka protocol code (Kafka's clients raise SslAuthenticationException, which has none):
    # the one name a TLS handshake failure gets on a sparkraft command line (DESIGN §12).
    SSL_HANDSHAKE_FAILED = 10_001

class SparkraftError(Exception):
    """An error with a Kafka error name: what the CLI prints as ``NAME: message``."""

    def __init__(self, error: Errors, message: str = "", **details):
        self.error = error
        self.message = message or error.name
        self.details = details
        super().__init__(f"{error.name}: {self.message}")


class NotLeaderError(SparkraftError):
    """A write went to a node that is not the leader; ``leader_id`` says who is, if known."""

    def __init__(self, leader_id: int | None, epoch: int, error: Errors = Errors.NOT_LEADER_OR_FOLLOWER):
        self.leader_id = leader_id
        self.epoch = epoch
        where = f"the leader is node {leader_id}" if leader_id is not None else "no leader is known"
        super().__init__(error, f"not the leader in epoch {epoch}; {where}", leader_id=leader_id, epoch=epoch)


class StillReplayingError(SparkraftError):
    """A restarted controller that has not replayed the log it held before: it ``refuses`` nothing
    on an image that may lack what allows it (NOT_CONTROLLER, retriable: the client asks another)."""

    def __init__(self, refuses: str):
        super().__init__(Errors.NOT_CONTROLLER, f"this controller is still replaying its metadata log after a "
                                                f"restart and {refuses} yet: ask another controller, or again shortly")


class NodeNotRunningError(Exception):
    """The Raft node is not started yet, or is stopping: the caller should try again or elsewhere."""


class ControllerNotRunningError(Exception):
    """The controller's event loop is not running (not started, or stopped)."""
