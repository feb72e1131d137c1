"""Request-level tests of ControllerCore on a LocalController (its proposals commit at once)."""
import pytest
from controller_helpers import controller, create, heartbeat, metadata_in, metadata_written

from quorum.controller import api
from quorum.controller.core import ControllerCore
from quorum.controller.local import LocalController
from quorum.controller.settings import MV_MAX, ControllerSettings
from quorum.errors import Errors, SparkraftError
from quorum.metadata.invariants import violations

TOPIC = api.ConfigResourceKey("TOPIC", "t")
CLUSTER = api.ConfigResourceKey("CLUSTER", "")


# ---------------------------------------------------------------- topics
def test_create_topic_with_placement_and_configs():
    c, _ = controller(3)
    r = create(c, "t", 4, 3, configs=(("retention.ms", "1000"),))
    assert (r.error, r.num_partitions, r.replication_factor) == (Errors.NONE, 4, 3)
    d = c.core.describe_topic("t")
    assert d.topic_id == r.topic_id and len(d.partitions) == 4 and d.configs == {"retention.ms": "1000"}
    for p in d.partitions:
        assert p.leader == p.replicas[0] and set(p.isr) == set(p.replicas) and p.leader_epoch == 0
    assert c.core.list_topics() == ["t"]


@pytest.mark.parametrize("topic, error, message", [
    (api.CreatableTopic("bad name", 1, 1), Errors.INVALID_TOPIC_EXCEPTION, "contains a character other"),
    (api.CreatableTopic("..", 1, 1), Errors.INVALID_TOPIC_EXCEPTION, "cannot be"),
    (api.CreatableTopic("x" * 250, 1, 1), Errors.INVALID_TOPIC_EXCEPTION, "longer than 249"),
    (api.CreatableTopic("t", 0, 1), Errors.INVALID_PARTITIONS, "non-positive"),
    (api.CreatableTopic("t", 1, 0), Errors.INVALID_REPLICATION_FACTOR, "larger than 0"),
    (api.CreatableTopic("t", 1, 3), Errors.INVALID_REPLICATION_FACTOR,
     "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached "
     "because only 2 broker(s) are registered."),
    (api.CreatableTopic("t", 1, 1, configs=(("retention.ms", "abc"),)), Errors.INVALID_CONFIG, "LONG"),
    (api.CreatableTopic("t", 1, 1, configs=(("no.such", "1"),)), Errors.INVALID_CONFIG, "Unknown topic config"),
    (api.CreatableTopic("t", assignments=((0, 0),)), Errors.INVALID_REPLICA_ASSIGNMENT, "more than once"),
    (api.CreatableTopic("t", assignments=((7,),)), Errors.INVALID_REPLICA_ASSIGNMENT, "no such broker"),
    (api.CreatableTopic("t", 2, assignments=((0,),)), Errors.INVALID_REQUEST, "numPartitions"),
])
def test_create_topic_errors_change_nothing(topic, error, message):
    c, _ = controller(2)
    before, end = c.core.image, c.end_offset
    (r,) = c.request(api.CreateTopicsRequest((topic,)))
    assert r.error is error and message in r.message
    assert c.core.image.same_metadata(before) and metadata_written(c, end) == 0


def test_existing_topic_and_duplicates_in_one_request():
    c, _ = controller(1)
    create(c, "t")
    rs = c.request(api.CreateTopicsRequest((api.CreatableTopic("t", 1, 1), api.CreatableTopic("u", 1, 1),
                                            api.CreatableTopic("u", 1, 1))))
    assert rs[0].error is Errors.TOPIC_ALREADY_EXISTS and rs[0].message == "Topic 't' already exists."
    assert rs[1].error is rs[2].error is Errors.INVALID_REQUEST
    assert c.core.list_topics() == ["t"]


def test_names_that_differ_only_in_dot_and_underscore_collide():
    c, _ = controller(1)
    assert create(c, "coll.x").error is Errors.NONE
    before = c.core.image
    r = create(c, "coll_x")
    assert r.error is Errors.INVALID_TOPIC_EXCEPTION and r.message == "Topic 'coll_x' collides with existing topic: coll.x"
    assert c.core.image.same_metadata(before)
    # within one request too, and a deleted topic frees its key
    rs = c.request(api.CreateTopicsRequest((api.CreatableTopic("a_b.c", 1, 1), api.CreatableTopic("a.b_c", 1, 1))))
    assert [r.error for r in rs] == [Errors.NONE, Errors.INVALID_TOPIC_EXCEPTION]
    c.request(api.DeleteTopicsRequest(("coll.x",)))
    assert create(c, "coll_x").error is Errors.NONE
    assert create(c, "collx").error is Errors.NONE  # no '.' or '_': nothing to collide with


def test_a_broker_endpoint_out_of_range_is_an_invalid_request():
    c, _ = controller(1)
    for port in (-1, 65536):
        e = c.expect_error(api.RegisterBrokerRequest(7, c.cluster_id, "Inc000xxxxxxxxxxxxx007",
                                                     (api.BrokerEndpoint("PLAINTEXT", "localhost", port),)))
        assert e.error is Errors.INVALID_REQUEST and "port in 0..65535" in e.message
    assert c.core.image.cluster.broker(7) is None


def test_pending_create_is_seen_by_the_next_request():
    c, _ = controller(1)
    c.hold = True
    first = c.core.handle(api.CreateTopicsRequest((api.CreatableTopic("t", 1, 1),)), 0)
    c.propose(first)
    second = c.core.handle(api.CreateTopicsRequest((api.CreatableTopic("t", 1, 1),)), 0)
    assert metadata_in(second) == [] and second.reply[0].error is Errors.TOPIC_ALREADY_EXISTS
    assert c.core.list_topics() == []  # reads are committed-only
    c.commit()
    assert c.core.list_topics() == ["t"]


def test_a_control_batch_the_raft_leader_slips_between_proposals_shifts_the_ones_after_it():
    """A voter change (or the kraft.version upgrade) is appended by the Raft leader in the middle of
    the active controller's epoch: proposals already in the log keep their offsets, later ones move."""
    from quorum.log.voter_set import ReplicaKey, Voter, VoterSet

    c, _ = controller(1)
    c.hold = True
    c.propose(c.core.handle(api.CreateTopicsRequest((api.CreatableTopic("before", 1, 1),)), 0))
    c._append([VoterSet([Voter(ReplicaKey(1, "d1"))]).encode()], control=True)  # the Raft leader's own
    after = c.core.handle(api.CreateTopicsRequest((api.CreatableTopic("after", 1, 1),)), 0)
    c.propose(after)  # the core reckoned its offset before the control batch was there
    fast = c.core.fast_replays
    c.commit()
    assert c.core.list_topics() == ["after", "before"] and not c.core._diverged
    assert c.core.fast_replays == fast + 2  # both published from the speculative images: no re-decoding
    c.hold = False
    assert create(c, "later", 1, 1).error is Errors.NONE and c.core.image.provenance.offset == c.end_offset - 1


def test_deactivate_drops_uncommitted_state():
    c, _ = controller(1)
    c.hold = True
    c.propose(c.core.handle(api.CreateTopicsRequest((api.CreatableTopic("t", 3, 1),)), 0))
    index_before = c.core.index.snapshot()
    c.core.deactivate()
    assert c.core.handle(api.CreateTopicsRequest(()), 0).error.error is Errors.NOT_CONTROLLER
    assert c.core.spec is c.core.image
    assert c.core.index.snapshot() != index_before
    c.uncommitted.clear()
    c.elect(2)
    assert create(c, "t", 3, 1).error is Errors.NONE


def test_validate_only_writes_nothing():
    c, _ = controller(1)
    end = c.end_offset
    (r,) = c.request(api.CreateTopicsRequest((api.CreatableTopic("t", 2, 1),), validate_only=True))
    assert r.error is Errors.NONE and metadata_written(c, end) == 0 and c.core.list_topics() == []


def test_delete_topics_and_its_configs():
    c, _ = controller(1)
    tid = create(c, "t", 2, 1, configs=(("cleanup.policy", "compact"),)).topic_id
    rs = c.request(api.DeleteTopicsRequest(("t", "nope"), ("AAAAAAAAAAAAAAAAAAAAAB",)))
    assert [r.error for r in rs] == [Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_ID]
    assert rs[0].topic_id == tid
    assert c.core.list_topics() == [] and not c.core.image.configs.resources
    with pytest.raises(SparkraftError) as e:
        c.core.describe_topic("t")
    assert e.value.error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert violations(c.core.image) == []


def test_create_partitions():
    c, _ = controller(3)
    create(c, "t", 2, 2)
    rs = c.request(api.CreatePartitionsRequest((api.PartitionCountUpdate("t", 5),
                                                api.PartitionCountUpdate("nope", 2))))
    assert [r.error for r in rs] == [Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION]
    parts = c.core.describe_topic("t").partitions
    assert len(parts) == 5 and all(len(p.replicas) == 2 for p in parts)
    for count, msg in ((5, "Topic already has 5 partition(s)."), (3, "would not be an increase")):
        (r,) = c.request(api.CreatePartitionsRequest((api.PartitionCountUpdate("t", count),)))
        assert r.error is Errors.INVALID_PARTITIONS and msg in r.message
    (r,) = c.request(api.CreatePartitionsRequest((api.PartitionCountUpdate("t", 7, ((0, 1),)),)))
    assert r.error is Errors.INVALID_REPLICA_ASSIGNMENT
    (r,) = c.request(api.CreatePartitionsRequest((api.PartitionCountUpdate("t", 6, ((2, 1),)),)))
    assert r.error is Errors.NONE and c.core.describe_topic("t").partitions[5].replicas == (2, 1)


def test_partition_limits_are_checked_before_anything_is_built():
    c, _ = controller(3, max_partitions_per_request=100, max_partitions=250)
    before = c.core.image
    r = create(c, "huge", 2 ** 31 - 1, 3)  # refused at once: nothing is placed or allocated
    assert r.error is Errors.INVALID_PARTITIONS and "max.partitions.per.request (100)" in r.message
    rs = c.request(api.CreateTopicsRequest((api.CreatableTopic("a", 60, 1), api.CreatableTopic("b", 60, 1))))
    assert [r.error for r in rs] == [Errors.NONE, Errors.INVALID_PARTITIONS]  # 120 in one request
    assert "60 used by earlier topics" in rs[1].message
    assert create(c, "b", 90, 1).error is Errors.NONE
    assert c.core.image.topics.partition_count() == 150
    r = create(c, "c", 100, 2)  # 150 + 100 = 250: exactly the limit
    assert r.error is Errors.NONE
    r = create(c, "d", 1, 1)
    assert r.error is Errors.POLICY_VIOLATION and "max.partitions (0 left" in r.message
    (r,) = c.request(api.CreatePartitionsRequest((api.PartitionCountUpdate("a", 2 ** 31 - 1),)))
    assert r.error is Errors.INVALID_PARTITIONS
    c.request(api.DeleteTopicsRequest(("a",)))
    assert c.core.image.topics.partition_count() == 190  # deletes give the room back
    assert create(c, "d", 60, 1).error is Errors.NONE
    assert before.topics.partition_count() == 0


def test_an_operation_larger_than_a_batch_in_bytes_is_a_transaction_of_bounded_batches():
    c, _ = controller(1, max_batch_bytes=2000)
    start = len(c.log)
    assert create(c, "wide", 60, 1).error is Errors.NONE  # 60 PartitionRecords, more than 2000 bytes
    batches = c.log[start:]
    assert len(batches) > 1 and all(sum(map(len, b.records)) <= 2000 for b in batches)
    assert len(c.core.describe_topic("wide").partitions) == 60


def test_not_controller_when_inactive():
    core = ControllerCore(1, "Ab3dEfGhIjKlMnOpQrStUv", ControllerSettings())
    op = core.handle(api.CreateTopicsRequest(()), 0)
    assert op.error.error is Errors.NOT_CONTROLLER and op.batches == []
    assert core.tick(0) == []


# ---------------------------------------------------------------- elections and AlterPartition
def alter_isr(broker, epoch, topic_id, p, new_isr, pid=0):
    """The AlterPartition the leader of partition ``pid`` (now ``p``) sends for ``new_isr``."""
    return api.AlterPartitionRequest(broker, epoch, (api.PartitionIsr(topic_id, pid, p.leader_epoch,
                                                                      p.partition_epoch, tuple(new_isr)),))


def _partition(c, name="t", pid=0):
    t = c.core.image.topics.topic_by_name(name)
    return t.topic_id, t.partitions[pid]


def test_alter_partition_epoch_checks_and_isr_shrink():
    c, epochs = controller(3)
    create(c, "t", 1, 3)
    tid, p = _partition(c)
    leader = p.leader
    follower = [b for b in p.replicas if b != leader][0]
    new_isr = tuple(b for b in p.isr if b != follower)

    def req(broker_id=leader, broker_epoch=epochs[leader], **kw):
        base = dict(topic_id=tid, partition=0, leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
                    new_isr=new_isr)
        base.update(kw)
        return api.AlterPartitionRequest(broker_id, broker_epoch, (api.PartitionIsr(**base),))

    def one(request):
        (result,) = c.request(request)
        return result

    before = c.core.image
    assert c.expect_error(req(broker_epoch=0)).error is Errors.STALE_BROKER_EPOCH
    assert one(req(leader_epoch=5)).error is Errors.FENCED_LEADER_EPOCH
    assert one(req(partition_epoch=3)).error is Errors.INVALID_UPDATE_VERSION
    assert one(req(new_isr=(follower,))).error is Errors.INVALID_REQUEST  # leader missing
    assert one(req(new_isr=(leader, 99))).error is Errors.INVALID_REQUEST
    assert one(req(broker_id=follower, broker_epoch=epochs[follower])).error is Errors.INVALID_REQUEST
    assert one(req(topic_id="AAAAAAAAAAAAAAAAAAAAAB")).error is Errors.UNKNOWN_TOPIC_ID
    assert c.core.image.topics is before.topics
    # one request, many partitions: each answered on its own; a partition named twice is refused whole
    twice = api.AlterPartitionRequest(leader, epochs[leader], req().partitions * 2)
    assert c.expect_error(twice).error is Errors.INVALID_REQUEST
    assert c.core.image.topics is before.topics
    r = one(req())
    assert r.error is Errors.NONE and r.isr == new_isr and r.partition_epoch == p.partition_epoch + 1
    assert r.leader_epoch == p.leader_epoch
    _, q = _partition(c)
    assert (q.isr, q.partition_epoch, q.leader_epoch) == (new_isr, r.partition_epoch, p.leader_epoch)
    # the old partition epoch is now stale
    assert one(req()).error is Errors.INVALID_UPDATE_VERSION
    # a fenced broker cannot join the ISR
    c.now = 9000
    for b in epochs:
        if b != follower:
            heartbeat(c, b, epochs[b])
    c.tick(9500)
    r = one(req(leader_epoch=q.leader_epoch, partition_epoch=q.partition_epoch, new_isr=p.isr))
    assert r.error is Errors.INELIGIBLE_REPLICA


def test_elect_preferred_and_unclean_leaders():
    c, epochs = controller(2)
    create(c, "t", 1, 2)
    tid, p = _partition(c)
    preferred, other = p.replicas
    tp = api.TopicPartition("t", 0)
    (r,) = c.request(api.ElectLeadersRequest("PREFERRED", (tp,)))
    assert r.error is Errors.ELECTION_NOT_NEEDED
    # preferred leader fenced: leadership moves; preferred comes back; preferred election restores it
    c.now = 9000
    heartbeat(c, other, epochs[other])
    c.tick(9500)
    assert _partition(c)[1].leader == other
    (r,) = c.request(api.ElectLeadersRequest("PREFERRED", (tp,)))
    assert r.error is Errors.PREFERRED_LEADER_NOT_AVAILABLE
    heartbeat(c, preferred, epochs[preferred])
    _, q = _partition(c)
    assert q.leader == other and preferred not in q.isr  # not back in the ISR until AlterPartition
    (r,) = c.request(alter_isr(other, epochs[other], tid, q, (other, preferred)))
    assert r.error is Errors.NONE
    r, missing = c.request(api.ElectLeadersRequest("PREFERRED", (tp, api.TopicPartition("t", 9))))
    assert r.error is Errors.NONE and missing.error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert _partition(c)[1].leader == preferred
    assert c.request(api.ElectLeadersRequest("PREFERRED", None)) == ()  # nothing to do anywhere
    (r,) = c.request(api.ElectLeadersRequest("UNCLEAN", (tp,)))
    assert r.error is Errors.ELECTION_NOT_NEEDED


def test_unclean_election_picks_a_live_replica_outside_the_isr():
    c, epochs = controller(2)
    leader, other = _lose_the_isr(c, epochs)
    tid, q = _partition(c)
    assert q.leader == -1 and q.isr == (leader,)
    tp = api.TopicPartition("t", 0)
    (r,) = c.request(api.ElectLeadersRequest("UNCLEAN", (tp,)))
    assert r.error is Errors.NONE
    _, q = _partition(c)
    assert q.leader == other and q.isr == (other,)
    assert violations(c.core.image) == []


def _lose_the_isr(c, epochs, topic="t", configs=()):
    """A topic of one partition, two replicas, its ISR shrunk to the leader, then the leader fenced
    (only the other replica heartbeats): the last ISR member is gone. Returns (leader, other)."""
    create(c, topic, 1, 2, configs=configs)
    tid, p = _partition(c, topic)
    leader, other = p.leader, [b for b in p.replicas if b != p.leader][0]
    c.request(alter_isr(leader, epochs[leader], tid, p, (leader,)))
    c.now = 9000
    heartbeat(c, other, epochs[other])
    c.tick(9500)
    return leader, other


UNCLEAN_ON = (("unclean.leader.election.enable", "true"),)


def _cluster_default_unclean(c):
    (r,) = c.request(api.IncrementalAlterConfigsRequest(((api.ConfigResourceKey("CLUSTER", ""), (
        api.AlterableConfig("unclean.leader.election.enable", "SET", "true"),)),)))
    assert r.error is Errors.NONE


def test_unclean_leader_election_enable_lets_the_controller_elect_outside_the_isr():
    # off (the default): the partition stays leaderless when its last ISR member is fenced
    c, epochs = controller(2)
    leader, other = _lose_the_isr(c, epochs)
    _, q = _partition(c)
    assert q.leader == -1 and q.isr == (leader,)
    # on for the topic: the live replica outside the ISR leads at once, and is the whole ISR
    c, epochs = controller(2)
    leader, other = _lose_the_isr(c, epochs, configs=UNCLEAN_ON)
    _, q = _partition(c)
    assert q.leader == other and q.isr == (other,)
    assert violations(c.core.image) == []


def test_unclean_election_on_unfence_and_by_the_cluster_default():
    # Leaderless with the default off; the cluster default turned on; then the replica outside the
    # ISR comes back (unfenced): the controller elects it.
    c, epochs = controller(2)
    leader, other = _lose_the_isr(c, epochs)
    c.now = 20_000
    c.tick(20_500)  # now both are fenced
    _cluster_default_unclean(c)
    _, q = _partition(c)
    assert q.leader == -1 and q.isr == (leader,)
    heartbeat(c, other, epochs[other])
    _, q = _partition(c)
    assert q.leader == other and q.isr == (other,)
    # ...while a topic that says false keeps the default's hands off
    c, epochs = controller(2)
    _cluster_default_unclean(c)
    leader, other = _lose_the_isr(c, epochs, "off", configs=(("unclean.leader.election.enable", "false"),))
    _, q = _partition(c, "off")
    assert q.leader == -1 and q.isr == (leader,)

# ---------------------------------------------------------------- configs
def alter(c, key, *ops, validate_only=False):
    (r,) = c.request(api.IncrementalAlterConfigsRequest(((key, tuple(api.AlterableConfig(*o) for o in ops)),),
                                                        validate_only))
    return r


def test_incremental_alter_configs_ops():
    c, _ = controller(1)
    create(c, "t")
    assert alter(c, TOPIC, ("retention.ms", "SET", "1000"), ("cleanup.policy", "APPEND", "compact")).error \
        is Errors.NONE
    configs = c.core.image.configs.configs(c.core.image.configs.resources.__iter__().__next__())
    assert dict(configs) == {"retention.ms": "1000", "cleanup.policy": "delete,compact"}
    assert alter(c, TOPIC, ("cleanup.policy", "SUBTRACT", "delete")).error is Errors.NONE
    assert c.core.describe_topic("t").configs["cleanup.policy"] == "compact"
    assert alter(c, TOPIC, ("retention.ms", "DELETE", None)).error is Errors.NONE
    assert c.core.describe_topic("t").configs == {"cleanup.policy": "compact"}


@pytest.mark.parametrize("ops, error, message", [
    ((("retention.ms", "SET", "-5"),), Errors.INVALID_CONFIG,
     "Invalid value -5 for configuration retention.ms: Value must be at least -1"),
    ((("segment.bytes", "SET", "10"),), Errors.INVALID_CONFIG, "at least 14"),
    ((("min.insync.replicas", "SET", "0"),), Errors.INVALID_CONFIG, "at least 1"),
    ((("cleanup.policy", "SET", "zap"),), Errors.INVALID_CONFIG, "String must be one of: compact, delete"),
    ((("compression.type", "SET", "brotli"),), Errors.INVALID_CONFIG, "String must be one of"),
    ((("preallocate", "SET", "yes"),), Errors.INVALID_CONFIG, "true or false"),
    ((("retention.ms", "APPEND", "1"),), Errors.INVALID_CONFIG, "Can't APPEND to key retention.ms"),
    ((("retention.ms", "SET", "1"), ("bogus.key", "SET", "1")), Errors.INVALID_CONFIG, "Unknown topic config"),
    # what Java's parsers refuse, though Python's int() and float() take it
    ((("retention.ms", "SET", "1_000"),), Errors.INVALID_CONFIG, "Not a number of type LONG"),
    ((("segment.bytes", "SET", "1_073_741_824"),), Errors.INVALID_CONFIG, "Not a number of type INT"),
    ((("segment.bytes", "SET", "2147483648"),), Errors.INVALID_CONFIG, "Not a number of type INT"),
    ((("retention.ms", "SET", "\u0661\u0662"),), Errors.INVALID_CONFIG, "Not a number of type LONG"),
    ((("min.cleanable.dirty.ratio", "SET", "nan"),), Errors.INVALID_CONFIG, "Not a number of type DOUBLE"),
    ((("min.cleanable.dirty.ratio", "SET", "NaN"),), Errors.INVALID_CONFIG, "Not a number of type DOUBLE"),
    ((("min.cleanable.dirty.ratio", "SET", "-inf"),), Errors.INVALID_CONFIG, "Not a number of type DOUBLE"),
])
def test_invalid_alterations_change_nothing(ops, error, message):
    c, _ = controller(1)
    create(c, "t")
    before = c.core.image
    r = alter(c, TOPIC, *ops)
    assert r.error is error and message in r.message
    assert c.core.image.same_metadata(before)


def test_alter_configs_resource_errors_and_validate_only():
    c, _ = controller(1)
    assert alter(c, api.ConfigResourceKey("TOPIC", "nope"), ("retention.ms", "SET", "1")).error \
        is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert alter(c, api.ConfigResourceKey("BROKER", "x"), ("num.partitions", "SET", "1")).error \
        is Errors.INVALID_REQUEST
    before = c.core.image
    assert alter(c, CLUSTER, ("log.retention.ms", "SET", "5"), validate_only=True).error is Errors.NONE
    assert c.core.image.same_metadata(before)


def test_describe_configs_defaults_and_sources():
    c, _ = controller(1)
    create(c, "t")
    alter(c, TOPIC, ("segment.bytes", "SET", "1000"))
    alter(c, CLUSTER, ("log.retention.ms", "SET", "5000"))
    alter(c, api.ConfigResourceKey("BROKER", "0"), ("num.io.threads", "SET", "4"))
    [(key, err, msg, entries)] = c.core.describe_configs(api.DescribeConfigsRequest((TOPIC,)))
    by = {e.name: e for e in entries}
    assert err is Errors.NONE
    assert (by["segment.bytes"].value, by["segment.bytes"].source) == ("1000", "DYNAMIC_TOPIC_CONFIG")
    assert (by["retention.ms"].value, by["retention.ms"].source) == ("5000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    assert (by["cleanup.policy"].value, by["cleanup.policy"].source) == ("delete", "DEFAULT_CONFIG")
    [(_, _, _, entries)] = c.core.describe_configs(api.DescribeConfigsRequest((api.ConfigResourceKey("BROKER", "0"),)))
    by = {e.name: e for e in entries}
    assert by["num.io.threads"].source == "DYNAMIC_BROKER_CONFIG"
    assert (by["log.retention.ms"].value, by["log.retention.ms"].source) == ("5000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    assert by["num.partitions"] == api.ConfigEntry("num.partitions", "1", "DEFAULT_CONFIG")
    [(_, err, _, _)] = c.core.describe_configs(api.DescribeConfigsRequest((api.ConfigResourceKey("TOPIC", "x"),)))
    assert err is Errors.UNKNOWN_TOPIC_OR_PARTITION


# ---------------------------------------------------------------- features, quotas, producer ids, ACLs
def test_bootstrap_metadata_version_and_upgrade_checks():
    c = LocalController(ControllerSettings(seed=1, bootstrap_metadata_version=17))  # 3.7-IV2
    assert c.core.image.features.metadata_version == 17
    from controller_helpers import register
    register(c, 0, max_metadata_version=23)
    register(c, 1, max_metadata_version=21)
    (r,) = c.request(api.UpdateFeaturesRequest((("metadata.version", 23),)))
    assert r.error is Errors.INVALID_UPDATE_VERSION and "Broker 1 only supports versions 14-21" in r.message
    (r,) = c.request(api.UpdateFeaturesRequest((("metadata.version", 21),)))
    assert r.error is Errors.NONE and c.core.image.features.metadata_version == 21
    (r,) = c.request(api.UpdateFeaturesRequest((("metadata.version", 17),)))
    assert r.error is Errors.INVALID_UPDATE_VERSION and "downgrade" in r.message
    (r,) = c.request(api.UpdateFeaturesRequest((("no.such.feature", 1),)))
    assert r.error is Errors.INVALID_UPDATE_VERSION
    # a level past what this controller implements is refused with one line, and changes nothing
    for name, past in (("transaction.version", 3), ("group.version", 2)):
        (r,) = c.request(api.UpdateFeaturesRequest(((name, past),)))
        assert r.error is Errors.INVALID_UPDATE_VERSION and "supports only versions 0-" in r.message
        assert c.core.image.features.level(name) == 0
    (r,) = c.request(api.UpdateFeaturesRequest((("group.version", 0),)))
    assert r.error is Errors.NONE
    # kraft.version is the quorum's: a controller without a Raft leader behind it (this one) refuses it
    (r,) = c.request(api.UpdateFeaturesRequest((("kraft.version", 1),)))
    assert r.error is Errors.INVALID_UPDATE_VERSION and "Raft leader" in r.message
    # a broker that cannot read metadata.version 3.9-IV0 cannot register now
    e = c.expect_error(api.RegisterBrokerRequest(5, c.cluster_id, "Inc000xxxxxxxxxxxxx005", (),
                                                 max_metadata_version=20))
    assert e.error is Errors.UNSUPPORTED_VERSION and "21 (3.9-IV0)" in e.message


def test_client_quotas():
    c, _ = controller(1)
    user = (("user", "alice"),)
    rs = c.request(api.AlterClientQuotasRequest((
        api.ClientQuotaAlteration(user, (("producer_byte_rate", 1024.0),)),
        api.ClientQuotaAlteration((("ip", "1.2.3.4"), ("user", "x")), (("producer_byte_rate", 1.0),)),
        api.ClientQuotaAlteration(user, (("bogus", 1.0),)),
        api.ClientQuotaAlteration(user, (("producer_byte_rate", 1.5),)),
    )))
    assert [r.error for r in rs] == [Errors.NONE] + [Errors.INVALID_REQUEST] * 3
    assert dict(c.core.image.client_quotas.quotas(user)) == {"producer_byte_rate": 1024.0}
    for bad in (float("inf"), float("nan"), -1.0):
        (r,) = c.request(api.AlterClientQuotasRequest((api.ClientQuotaAlteration(user, (("request_percentage", bad),)),)))
        assert r.error is Errors.INVALID_REQUEST and "finite, non-negative" in r.message
    assert dict(c.core.image.client_quotas.quotas(user)) == {"producer_byte_rate": 1024.0}
    c.request(api.AlterClientQuotasRequest((api.ClientQuotaAlteration(user, (("producer_byte_rate", None),)),)))
    assert not c.core.image.client_quotas.entities


def test_producer_id_blocks():
    c, epochs = controller(1)
    b1 = c.request(api.AllocateProducerIdsRequest(0, epochs[0]))
    b2 = c.request(api.AllocateProducerIdsRequest(0, epochs[0]))
    assert (b1.first_producer_id, b1.size, b2.first_producer_id) == (0, 1000, 1000)
    assert c.core.image.producer_ids.next_producer_id == 2000
    assert c.expect_error(api.AllocateProducerIdsRequest(0, 1)).error is Errors.STALE_BROKER_EPOCH


def test_acls_create_describe_delete():
    c, _ = controller(1)
    allow = api.AclBinding("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW")
    prefixed = api.AclBinding("TOPIC", "ord", "PREFIXED", "User:bob", "*", "WRITE", "ALLOW")
    bad = api.AclBinding("TOPIC", "x", "MATCH", "User:bob", "*", "WRITE", "ALLOW")
    rs = c.request(api.CreateAclsRequest((allow, prefixed, bad, allow)))
    assert [r.error for r in rs] == [Errors.NONE, Errors.NONE, Errors.INVALID_REQUEST, Errors.NONE]
    assert len(c.core.image.acls.acls) == 2
    any_filter = api.AclBinding("ANY", "", "ANY", "", "", "ANY", "ANY")
    assert set(c.core.describe_acls(any_filter)) == {allow, prefixed}
    match = api.AclBinding("TOPIC", "orders", "MATCH", "", "", "ANY", "ANY")
    assert set(c.core.describe_acls(match)) == {allow, prefixed}
    [(r, deleted)] = c.request(api.DeleteAclsRequest((api.AclBinding("ANY", "", "ANY", "User:bob", "", "ANY", "ANY"),)))
    assert r.error is Errors.NONE and deleted == (prefixed,)
    assert c.core.describe_acls(any_filter) == [allow]


def _upsert(user, password="pw", mechanism="SCRAM-SHA-512", iterations=4096, salt=b"salt-of-16-bytes"):
    from quorum.security.scram import MECHANISMS

    m = MECHANISMS[mechanism]
    return api.ScramCredentialUpsertion(user, mechanism, iterations, salt, m.salted_password(password, salt, iterations))


def test_scram_credentials_alter_and_describe():
    from quorum.security.scram import MECHANISMS

    c, _ = controller(1)
    rs = c.request(api.AlterUserScramCredentialsRequest(upsertions=(
        _upsert("alice"), _upsert("alice", mechanism="SCRAM-SHA-256", iterations=8192), _upsert("bob"))))
    assert [(r.user, r.error) for r in rs] == [("alice", Errors.NONE), ("bob", Errors.NONE)]
    stored = c.core.image.scram.credential("alice", MECHANISMS["SCRAM-SHA-512"].code)
    expected = MECHANISMS["SCRAM-SHA-512"].credential(_upsert("alice").salted_password, b"salt-of-16-bytes", 4096)
    assert stored == expected  # StoredKey and ServerKey derived by the controller, as RFC 5802 says
    described = c.core.describe_user_scram_credentials(api.DescribeUserScramCredentialsRequest())
    assert described == (api.UserScramCredentials("alice", credentials=(("SCRAM-SHA-256", 8192), ("SCRAM-SHA-512", 4096))),
                         api.UserScramCredentials("bob", credentials=(("SCRAM-SHA-512", 4096),)))
    (nobody,) = c.core.describe_user_scram_credentials(api.DescribeUserScramCredentialsRequest(("carol",)))
    assert nobody.error is Errors.RESOURCE_NOT_FOUND
    # one user's bad change fails that user only, and none of that user's changes apply
    rs = c.request(api.AlterUserScramCredentialsRequest(
        deletions=(api.ScramCredentialDeletion("bob", "SCRAM-SHA-512"),),
        upsertions=(_upsert("alice", password="new"), _upsert("alice", iterations=100))))
    assert [(r.user, r.error) for r in rs] == [("bob", Errors.NONE), ("alice", Errors.DUPLICATE_RESOURCE)]
    assert c.core.image.scram.credential("alice", MECHANISMS["SCRAM-SHA-512"].code) == expected
    assert c.core.image.scram.credential("bob", MECHANISMS["SCRAM-SHA-512"].code) is None


@pytest.mark.parametrize("alteration, error, words", [
    (api.AlterUserScramCredentialsRequest(upsertions=(_upsert("a", iterations=4095),)),
     Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
    (api.AlterUserScramCredentialsRequest(upsertions=(_upsert("a", iterations=16385),)),
     Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
    (api.AlterUserScramCredentialsRequest(upsertions=(_upsert(""),)), Errors.UNACCEPTABLE_CREDENTIAL, "empty"),
    (api.AlterUserScramCredentialsRequest(upsertions=(_upsert("a", salt=b""),)), Errors.UNACCEPTABLE_CREDENTIAL, "salt"),
    (api.AlterUserScramCredentialsRequest(upsertions=(api.ScramCredentialUpsertion("a", "SCRAM-SHA-512", 4096, b"s",
                                                                                   b"short"),)),
     Errors.UNACCEPTABLE_CREDENTIAL, "64 bytes"),
    (api.AlterUserScramCredentialsRequest(upsertions=(api.ScramCredentialUpsertion("a", "PLAIN", 4096, b"s", b"x"),)),
     Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    (api.AlterUserScramCredentialsRequest(deletions=(api.ScramCredentialDeletion("a", "SCRAM-SHA-256"),)),
     Errors.RESOURCE_NOT_FOUND, "does not exist"),
])
def test_bad_scram_alterations_get_kafkas_errors_and_change_nothing(alteration, error, words):
    c, _ = controller(1)
    before, end = c.core.image, c.end_offset
    (r,) = c.request(alteration)
    assert r.error is error and words in r.message
    assert metadata_written(c, end) == 0 and c.core.image.scram == before.scram


def test_the_first_active_controller_writes_the_bootstrap_credentials_once():
    from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
    from quorum.metadata.records import decode_record
    from quorum.security.scram import MECHANISMS

    cred = MECHANISMS["SCRAM-SHA-256"].new_credential("secret")
    record = pb.UserScramCredentialRecord(name="admin", mechanism=MECHANISMS["SCRAM-SHA-256"].code, salt=cred.salt,
                                          stored_key=cred.stored_key, server_key=cred.server_key, iterations=4096)
    c = LocalController(ControllerSettings(seed=1, bootstrap_records=(record,)))
    assert c.core.image.scram.credential("admin", MECHANISMS["SCRAM-SHA-256"].code) == cred
    assert c.core.image.features.metadata_version == MV_MAX  # the highest, as storage format's default
    c.request(api.AlterUserScramCredentialsRequest(deletions=(api.ScramCredentialDeletion("admin", "SCRAM-SHA-256"),)))
    c.elect(c.epoch + 1)  # a later leader: the log is not empty, the bootstrap records are not written again
    assert c.core.image.scram.credential("admin", MECHANISMS["SCRAM-SHA-256"].code) is None
    assert sum(isinstance(r, pb.UserScramCredentialRecord) for b in c.log if not b.control
               for r in (decode_record(x).message for x in b.records)) == 1


# ---------------------------------------------------------------- rejected requests change nothing
def test_every_rejected_request_changes_nothing():
    c, epochs = controller(2)
    create(c, "t", 2, 2)
    tid = c.core.image.topics.ids_by_name["t"]
    bad = [
        api.RegisterBrokerRequest(0, "Zz3dEfGhIjKlMnOpQrStUv", "Inc000xxxxxxxxxxxxx000", ()),
        api.RegisterBrokerRequest(0, c.cluster_id, "Inc001xxxxxxxxxxxxx000", ()),
        api.BrokerHeartbeatRequest(0, 1, 0),
        api.BrokerHeartbeatRequest(7, 1, 0),
        api.UnregisterBrokerRequest(7),
        api.CreateTopicsRequest((api.CreatableTopic("t", 1, 1), api.CreatableTopic("u", 1, 5))),
        api.DeleteTopicsRequest(("nope",)),
        api.CreatePartitionsRequest((api.PartitionCountUpdate("t", 1),)),
        api.ElectLeadersRequest("PREFERRED", (api.TopicPartition("t", 0), api.TopicPartition("z", 0))),
        api.AlterPartitionRequest(0, epochs[0], (api.PartitionIsr(tid, 0, 9, 0, (0,)),)),
        api.AlterPartitionRequest(0, 1, (api.PartitionIsr(tid, 0, 0, 0, (0,)),)),
        api.IncrementalAlterConfigsRequest(((TOPIC, (api.AlterableConfig("retention.ms", "SET", "x"),)),)),
        api.UpdateFeaturesRequest((("metadata.version", 9),)),
        api.AlterClientQuotasRequest((api.ClientQuotaAlteration((), ()),)),
        api.AllocateProducerIdsRequest(0, 1),
        api.CreateAclsRequest((api.AclBinding("ANY", "x", "LITERAL", "User:a", "*", "READ", "ALLOW"),)),
        api.DeleteAclsRequest((api.AclBinding("TOPIC", "x", "LITERAL", "User:a", "*", "READ", "ALLOW"),)),
        api.AlterUserScramCredentialsRequest(deletions=(api.ScramCredentialDeletion("nobody", "SCRAM-SHA-256"),)),
    ]
    for request in bad:
        before, end, index = c.core.spec, c.end_offset, c.core.index.snapshot()
        op = c.core.handle(request, c.now)
        assert metadata_in(op) == [], f"{type(request).__name__} proposed records"
        c.propose(op)  # its audit entry, if it has one
        assert c.core.spec.same_metadata(before) and metadata_written(c, end) == 0 and c.core.index.snapshot() == index
