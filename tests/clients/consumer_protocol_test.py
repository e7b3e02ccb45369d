#!/usr/bin/python3
"""The KIP-848 consumer protocol against a real `brook server` (single
node) on loopback ports.

Usage: consumer_protocol_test.py PATH_TO_BROOK

None of the Kafka clients packaged for Debian speaks the consumer protocol
yet, so this test encodes ConsumerGroupHeartbeat v1, ConsumerGroupDescribe
v0 and OffsetCommit v9 by hand, the way a KIP-848 consumer sends them: two
members share a topic's partitions without ever owning the same one, a
member that leaves hands its partitions over, member epochs fence stale
commits, and the group (members, epochs, assignment, offsets) survives a
broker restart. Then confluent-kafka's classic consumers and such a member
share one group: it is upgraded when the member joins and downgraded when
it leaves. Each check prints "ok <name>" or raises.
"""
import os
import socket
import struct
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker_clients_test as base  # noqa: E402  (Server, run, check)

check = base.check

NONE = 0
UNKNOWN_MEMBER_ID = 25
STALE_MEMBER_EPOCH = 113
FENCED_MEMBER_EPOCH = 110
UNSUPPORTED_ASSIGNOR = 112


# --- flexible-version encoding (compact strings and arrays, tagged fields) ---

def uvarint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def cstr(s):
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


def carray(items, enc):
    if items is None:
        return uvarint(0)
    return uvarint(len(items) + 1) + b"".join(enc(i) for i in items)


TAGS = uvarint(0)


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def uvarint(self):
        shift = n = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7

    def cstr(self):
        n = self.uvarint()
        if n == 0:
            return None
        v = self.data[self.pos:self.pos + n - 1].decode()
        self.pos += n - 1
        return v

    def string(self):  # non-flexible int16-length string
        n = self.take(">h")
        v = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return v

    def carray(self, dec):
        n = self.uvarint()
        return None if n == 0 else [dec() for _ in range(n - 1)]

    def uuid(self):
        v = self.data[self.pos:self.pos + 16]
        self.pos += 16
        return v

    def tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


class Connection:
    def __init__(self, server):
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        self.correlation = 0

    def close(self):
        self.sock.close()

    def request(self, api, version, body, flexible=True):
        """Sends one request (header v2 when flexible, else v1) and returns
        a Reader positioned after the response header."""
        self.correlation += 1
        client = b"brook-kip848-test"
        header = struct.pack(">hhih", api, version, self.correlation, len(client)) + client
        if flexible:
            header += TAGS
        msg = header + body
        self.sock.sendall(struct.pack(">i", len(msg)) + msg)
        size = struct.unpack(">i", self._read(4))[0]
        r = Reader(self._read(size))
        if r.take(">i") != self.correlation:
            raise AssertionError("correlation id mismatch")
        if flexible and api != 18:
            r.tags()
        return r

    def _read(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            data += chunk
        return data


def api_versions(conn):
    r = conn.request(18, 3, cstr("brook-test") + cstr("1.0") + TAGS)
    err = r.take(">h")
    out = {}
    for _ in range(r.uvarint() - 1):
        key, lo, hi = r.take(">hhh")
        r.tags()
        out[key] = (lo, hi)
    return err, out


def find_coordinator(conn, group, timeout=30):
    """FindCoordinator v4 until the group's coordinator is available (the
    first call creates __consumer_offsets); returns its port."""
    deadline = time.time() + timeout
    while True:
        r = conn.request(10, 4, struct.pack(">b", 0) + carray([group], cstr) + TAGS)
        r.take(">i")
        r.uvarint()  # one coordinator
        r.cstr()  # key
        r.take(">i")  # node id
        r.cstr()  # host
        port, err = r.take(">i"), r.take(">h")
        if err == NONE:
            return port
        if time.time() > deadline:
            raise AssertionError(f"FindCoordinator: error {err}")
        time.sleep(0.1)


def heartbeat(conn, group, member_id, epoch, topics=None, owned=None, instance_id=None,
              rebalance_timeout=-1, assignor=None, regex=None):
    """ConsumerGroupHeartbeat v1. owned: {topic_id: [partitions]} or None.
    Returns (error, message, member_id, epoch, interval, assignment) where
    assignment is {topic_id: sorted partitions} or None."""
    def tp(item):
        tid, parts = item
        return tid + carray(sorted(parts), lambda p: struct.pack(">i", p)) + TAGS
    body = (cstr(group) + cstr(member_id) + struct.pack(">i", epoch) + cstr(instance_id) + cstr(None)
            + struct.pack(">i", rebalance_timeout) + carray(topics, cstr) + cstr(regex) + cstr(assignor)
            + carray(None if owned is None else list(owned.items()), tp) + TAGS)
    r = conn.request(68, 1, body)
    r.take(">i")  # throttle
    err = r.take(">h")
    msg = r.cstr()
    mid = r.cstr()
    mepoch, interval = r.take(">ii")
    assignment = None
    if r.data[r.pos] != 0xFF:  # present (nullable struct marker 1)
        r.pos += 1

        def dec_tp():
            tid = r.uuid()
            parts = r.carray(lambda: r.take(">i"))
            r.tags()
            return tid, sorted(parts)
        assignment = dict(r.carray(dec_tp))
        r.tags()
    else:
        r.pos += 1
    return err, msg, mid, mepoch, interval, assignment


def describe(conn, group):
    """ConsumerGroupDescribe v0: (error, state, group epoch, assignment
    epoch, assignor, {member_id: (epoch, instance_id, subscribed topics)})."""
    r = conn.request(69, 0, carray([group], cstr) + struct.pack(">?", False) + TAGS)
    r.take(">i")

    def dec_assignment():
        def dec_tp():
            r.uuid()
            r.cstr()
            r.carray(lambda: r.take(">i"))
            r.tags()
        r.carray(dec_tp)
        r.tags()

    def dec_member():
        mid = r.cstr()
        instance = r.cstr()
        r.cstr()  # rack
        epoch = r.take(">i")
        r.cstr()  # client id
        r.cstr()  # client host
        topics = r.carray(r.cstr)
        r.cstr()  # regex
        dec_assignment()
        dec_assignment()
        r.tags()
        return mid, (epoch, instance, topics)

    def dec_group():
        err = r.take(">h")
        r.cstr()
        r.cstr()  # group id
        state = r.cstr()
        gepoch, aepoch = r.take(">ii")
        assignor = r.cstr()
        members = dict(r.carray(dec_member))
        r.take(">i")  # authorized operations
        r.tags()
        return err, state, gepoch, aepoch, assignor, members
    (g,) = r.carray(dec_group)
    return g


def offset_commit(conn, group, member_id, epoch, topic, offsets):
    """OffsetCommit v9: {partition: offset}; returns {partition: error}."""
    def part(item):
        p, off = item
        return struct.pack(">iqi", p, off, -1) + cstr(None) + TAGS
    body = (cstr(group) + struct.pack(">i", epoch) + cstr(member_id) + cstr(None)
            + carray([topic], lambda t: cstr(t) + carray(sorted(offsets.items()), part) + TAGS) + TAGS)
    r = conn.request(8, 9, body)
    r.take(">i")
    out = {}

    def dec_topic():
        r.cstr()

        def dec_part():
            p, e = r.take(">ih")
            r.tags()
            out[p] = e
        r.carray(dec_part)
        r.tags()
    r.carray(dec_topic)
    return out


class Member:
    """A consumer-protocol member that revokes at once: each heartbeat
    reports as owned what the previous response assigned."""

    def __init__(self, conn, group, topics, instance_id=None):
        self.conn = conn
        self.group = group
        self.topics = topics
        self.instance_id = instance_id
        self.id = str(uuid.uuid4())
        self.epoch = 0
        self.owned = {}
        self.interval = 0

    def beat(self):
        joining = self.epoch == 0
        err, msg, mid, epoch, interval, assignment = heartbeat(
            self.conn, self.group, self.id, self.epoch,
            topics=self.topics if joining else None,
            owned=self.owned, instance_id=self.instance_id,
            rebalance_timeout=30000 if joining else -1)
        if err != NONE:
            raise AssertionError(f"heartbeat {self.id}: error {err} {msg}")
        if mid is not None and mid != self.id:
            raise AssertionError(f"member id changed: {mid} != {self.id}")
        self.epoch = epoch
        self.interval = interval
        if assignment is not None:
            self.owned = assignment
        return assignment

    def partitions(self):
        return sorted(p for parts in self.owned.values() for p in parts)

    def leave(self):
        err, _, _, epoch, _, _ = heartbeat(self.conn, self.group, self.id, -1, instance_id=self.instance_id)
        return err, epoch


def settle(members, cond, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        for m in members:
            m.beat()
        if cond():
            return True
        time.sleep(0.05)
    return False


def topic_id(server, topic):
    """Creates the topic with kafka-python and returns its id (Metadata v12
    by hand: kafka-python does not report topic ids)."""
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic(topic, 4, 1)])
    admin.close()
    conn = Connection(server)
    try:
        body = carray([topic], lambda t: bytes(16) + cstr(t) + TAGS) + struct.pack(">??", False, False) + TAGS
        r = conn.request(3, 12, body)
        r.take(">i")

        def dec_broker():
            r.take(">i")
            r.cstr()
            r.take(">i")
            r.cstr()
            r.tags()
        r.carray(dec_broker)
        r.cstr()
        r.take(">i")

        def dec_topic():
            err = r.take(">h")
            name = r.cstr()
            tid = r.uuid()
            return err, name, tid
        # Only the first topic's prefix is needed.
        r.uvarint()
        err, name, tid = dec_topic()
        check("metadata v12 topic id", err == 0 and name == topic and tid != bytes(16), f"{err} {name}")
        return tid
    finally:
        conn.close()


def checks(server, work):
    conn = Connection(server)
    err, apis = api_versions(conn)
    check("ApiVersions lists ConsumerGroupHeartbeat 0-1 and ConsumerGroupDescribe 0",
          err == 0 and apis.get(68) == (0, 1) and apis.get(69) == (0, 0) and apis.get(8, (0, 0))[1] >= 9, apis)

    topic = "kip848-a"
    tid = topic_id(server, topic)
    group = "kip848-group"
    check("FindCoordinator finds the group coordinator", find_coordinator(conn, group) == server.port)

    err, *_ = heartbeat(conn, group, str(uuid.uuid4()), 0, topics=[topic], owned={}, rebalance_timeout=30000,
                        assignor="no-such-assignor")
    check("unknown server assignor is rejected", err == UNSUPPORTED_ASSIGNOR, err)

    a = Member(conn, group, [topic])
    a.beat()
    settle([a], lambda: a.partitions() == [0, 1, 2, 3])
    check("first member owns every partition", a.partitions() == [0, 1, 2, 3] and list(a.owned) == [tid],
          a.owned)
    check("heartbeat interval is group.consumer.heartbeat.interval.ms", a.interval == 5000, a.interval)

    conn_b = Connection(server)
    b = Member(conn_b, group, [topic], instance_id="kip848-static-b")
    overlaps = []

    def split():
        if set(a.partitions()) & set(b.partitions()):
            overlaps.append((a.partitions(), b.partitions()))
        return (sorted(a.partitions() + b.partitions()) == [0, 1, 2, 3] and len(a.partitions()) == 2
                and a.epoch == b.epoch)
    ok = settle([a, b], split)
    check("two members split the partitions at one epoch", ok, (a.owned, b.owned, a.epoch, b.epoch))
    check("no partition was ever owned by both members", not overlaps, overlaps)

    err, state, gepoch, aepoch, assignor, members = describe(conn, group)
    check("ConsumerGroupDescribe: Stable, both members at the group epoch",
          err == 0 and state == "Stable" and gepoch == aepoch == a.epoch and assignor == "uniform"
          and set(members) == {a.id, b.id} and members[b.id][1] == "kip848-static-b"
          and members[a.id][2] == [topic], (err, state, gepoch, aepoch, assignor, members))

    results = offset_commit(conn, group, a.id, a.epoch, topic, {p: 10 + p for p in a.partitions()})
    check("OffsetCommit v9 at the member epoch", results and all(e == NONE for e in results.values()), results)
    stale = offset_commit(conn, group, a.id, a.epoch + 1, topic, {a.partitions()[0]: 99})
    check("OffsetCommit v9 from a future epoch is STALE_MEMBER_EPOCH",
          set(stale.values()) == {STALE_MEMBER_EPOCH}, stale)
    unknown = offset_commit(conn, group, "not-a-member", a.epoch, topic, {0: 99})
    check("OffsetCommit v9 from an unknown member is UNKNOWN_MEMBER_ID",
          set(unknown.values()) == {UNKNOWN_MEMBER_ID}, unknown)

    def brook_groups(*args):
        return base.run([base.BROOK, "groups", "--bootstrap-server", server.bootstrap, *args]).decode()
    state = brook_groups("--describe", "--group", group, "--state")
    check("brook groups --describe --state shows the consumer group",
          "Stable" in state and "uniform" in state and state.split()[-1] == "2", state)
    members_out = brook_groups("--describe", "--group", group, "--members")
    check("brook groups --describe --members lists both members", a.id in members_out and b.id in members_out,
          members_out)
    offsets_out = brook_groups("--describe", "--group", group)
    rows = [line.split() for line in offsets_out.splitlines() if line.startswith(group)]
    owners = {int(r[2]): (r[3], r[6]) for r in rows}
    check("brook groups --describe shows owners and committed offsets",
          set(owners) == {0, 1, 2, 3} and all(owners[p] == (str(10 + p), a.id) for p in a.partitions())
          and all(owners[p][1] == b.id for p in b.partitions()), offsets_out)

    # The group survives a broker restart: same members, epochs and
    # assignment; the members keep heartbeating where they were.
    conn.close()
    conn_b.close()
    server.stop()
    server.start()
    deadline = time.time() + 30
    while True:
        try:
            conn = Connection(server)
            result = describe(conn, group)
            if result[0] == 0:
                break
            conn.close()
        except (OSError, ConnectionError, AssertionError):
            pass
        if time.time() > deadline:
            raise AssertionError("group coordinator did not come back")
        time.sleep(0.2)
    err, state, gepoch2, _, _, members = describe(conn, group)
    check("the group survives a broker restart",
          state == "Stable" and gepoch2 == gepoch and members.get(a.id, (0,))[0] == a.epoch
          and members.get(b.id, (0,))[0] == b.epoch, (state, gepoch2, members))
    conn_b = Connection(server)
    a.conn, b.conn = conn, conn_b
    before = (a.partitions(), b.partitions())
    a.beat()
    b.beat()
    check("members heartbeat on after the restart with their partitions", (a.partitions(), b.partitions()) == before,
          (before, a.owned, b.owned))

    err, *_ = heartbeat(conn, group, a.id, a.epoch + 5, owned=a.owned)
    check("a heartbeat from a future epoch is FENCED_MEMBER_EPOCH", err == FENCED_MEMBER_EPOCH, err)

    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    committed = {tp.partition: om.offset for tp, om in admin.list_consumer_group_offsets(group).items()}
    admin.close()
    check("committed offsets survive the restart", committed == {p: 10 + p for p in before[0]}, committed)

    # A member that leaves (epoch -1) hands its partitions over.
    err, epoch = b.leave()
    check("a member leaves with epoch -1", err == NONE and epoch == -1, (err, epoch))
    ok = settle([a], lambda: a.partitions() == [0, 1, 2, 3])
    check("the remaining member takes over every partition", ok, a.owned)
    err, epoch = a.leave()
    check("the last member leaves", err == NONE and epoch == -1, (err, epoch))
    err, state, *_ = describe(conn, group)
    check("an empty consumer group is Empty", err == 0 and state == "Empty", (err, state))
    conn.close()
    conn_b.close()


def mixed_checks(server, work):
    """Kafka 4's mixed groups: confluent-kafka's classic consumers
    (cooperative-sticky) form a group, a consumer protocol member joins it
    (the group is upgraded and the classic members keep consuming through
    JoinGroup/SyncGroup), and when it leaves the group is a classic group
    again."""
    import group_clients_test as gc
    topic = "kip848-mixed"
    topic_id(server, topic)
    group = "kip848-mixed-group"
    a = gc.Member(server.bootstrap, group, topic, strategy="cooperative-sticky")
    b = gc.Member(server.bootstrap, group, topic, strategy="cooperative-sticky")
    ok = gc.poll_until([a, b], lambda: len(a.assigned) == 2 and len(b.assigned) == 2)
    check("mixed: two classic consumers split four partitions", ok, (a.assigned, b.assigned))

    conn = Connection(server)
    m = Member(conn, group, [topic])
    m.beat()
    check("mixed: a consumer protocol member joins the classic group (upgrade)", m.epoch > 0, m.epoch)
    overlaps = []

    def owners():
        owned = [a.assigned, b.assigned, set(m.partitions())]
        for i in range(3):
            for j in range(i + 1, 3):
                if owned[i] & owned[j]:
                    overlaps.append([sorted(o) for o in owned])
        return owned

    def spread():
        owned = owners()
        return sorted(p for o in owned for p in o) == [0, 1, 2, 3] and all(owned)
    end = time.time() + 60
    ok = False
    while time.time() < end and not ok:
        a.poll(0.1)
        b.poll(0.1)
        m.beat()
        ok = spread()
    check("mixed: classic and consumer protocol members share the partitions", ok,
          (a.assigned, b.assigned, m.owned))
    check("mixed: no partition was ever owned by two members", not overlaps, overlaps[:3])
    err, state, gepoch, aepoch, assignor, members = describe(conn, group)
    check("mixed: ConsumerGroupDescribe lists all three members", err == 0 and len(members) == 3,
          (err, state, members))

    err, epoch = m.leave()
    check("mixed: the consumer protocol member leaves", err == NONE and epoch == -1, (err, epoch))
    ok = gc.poll_until([a, b], lambda: sorted(a.assigned | b.assigned) == [0, 1, 2, 3] and a.assigned
                       and b.assigned and not (a.assigned & b.assigned), timeout=60)
    check("mixed: after the downgrade the classic consumers share every partition", ok, (a.assigned, b.assigned))
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    # librdkafka's list_groups: ListGroups, then DescribeGroups.
    described = {g.id: g for g in admin.list_groups(timeout=30)}.get(group)
    check("mixed: a classic group again (DescribeGroups)",
          described is not None and described.state == "Stable" and len(described.members) == 2,
          described and (described.state, described.members))
    conn.close()
    a.close()
    b.close()


def policy_checks(work):
    """group.consumer.migration.policy takes Kafka's values in any case and
    refuses others before the server starts."""
    r = subprocess.run([base.BROOK, "server", "--data-dir", os.path.join(work, "policy"),
                        "--override", "group.consumer.migration.policy=sideways"],
                       capture_output=True, timeout=30)
    check("an unknown migration policy is refused",
          r.returncode != 0 and b"group.consumer.migration.policy" in r.stderr, (r.returncode, r.stderr[-300:]))


def main():
    def all_checks(server, work):
        checks(server, work)
        mixed_checks(server, work)
        policy_checks(work)
    base.run_with_server("brook-kip848-", all_checks, extra_args=["--override", "group.initial.rebalance.delay.ms=0"],
                         done="all consumer protocol checks passed")


if __name__ == "__main__":
    main()
