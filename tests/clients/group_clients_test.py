#!/usr/bin/python3
"""Consumer groups with real Kafka clients against a real `brook server`
(single node) on loopback ports.

Usage: group_clients_test.py PATH_TO_BROOK

confluent-kafka consumers share a topic's partitions, rebalance when a
member joins, leaves or is killed, and resume from committed offsets across
consumer and broker restarts; cooperative-sticky revokes only the
partitions that move; kafka-python's KafkaConsumer and kcat -G consume
through groups too. Each check prints "ok <name>" or raises.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker_clients_test as base  # noqa: E402  (Server, run, check)

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

BROOK = sys.argv[1]
check = base.check


def create_topic(bootstrap, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        f.result(30)


def produce(bootstrap, topic, values, partitions):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % partitions)
    assert p.flush(30) == 0


class Member:
    """A confluent-kafka group member polled from this process."""

    def __init__(self, bootstrap, group, topic, strategy="range", extra=None):
        self.assigned = set()
        self.revoked_log = []
        self.values = []
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                "partition.assignment.strategy": strategy, "topic.metadata.refresh.interval.ms": 1000}
        conf.update(extra or {})
        self.c = Consumer(conf)
        self.cooperative = strategy == "cooperative-sticky"
        self.c.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, consumer, parts):
        if self.cooperative:
            self.assigned |= {p.partition for p in parts}
        else:
            self.assigned = {p.partition for p in parts}

    def _revoke(self, consumer, parts):
        self.revoked_log.append({p.partition for p in parts})
        if self.cooperative:
            self.assigned -= {p.partition for p in parts}
        else:
            self.assigned = set()

    def poll(self, seconds=0.1):
        end = time.time() + seconds
        while time.time() < end:
            m = self.c.poll(0.05)
            if m is not None and m.error() is None:
                self.values.append(m.value().decode())

    def commit(self):
        self.c.commit(asynchronous=False)

    def close(self):
        if self.cooperative:
            # librdkafka before 2.4 can hang in close() when an incremental
            # assignment arrives while it closes (its issue #4527), as one
            # does when another member has just left. Unsubscribing first
            # (the member leaves the group, its partitions revoked through
            # poll) and closing once nothing is assigned avoids that.
            self.c.unsubscribe()
            end = time.time() + 10
            while self.assigned and time.time() < end:
                self.poll(0.05)
        self.c.close()


def poll_until(members, cond, timeout=40):
    end = time.time() + timeout
    while time.time() < end:
        for m in members:
            m.poll(0.05)
        if cond():
            return True
    return False


CHILD = r"""
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
state = {"n": 0}
def on_assign(consumer, parts):
    print("assigned " + ",".join(str(p.partition) for p in parts), flush=True)
c.subscribe([sys.argv[3]], on_assign=on_assign)
while True:
    c.poll(0.1)
"""


def confluent_group_checks(server, work):
    b = server.bootstrap
    topic = "groups-a"
    create_topic(b, topic, 4)
    values = [f"v{i}" for i in range(400)]
    produce(b, topic, values, 4)

    a = Member(b, "g1", topic)
    check("confluent: the first member gets every partition",
          poll_until([a], lambda: a.assigned == {0, 1, 2, 3}), str(a.assigned))
    poll_until([a], lambda: len(a.values) >= 400)
    check("confluent: it reads every message once", sorted(a.values) == sorted(values), f"{len(a.values)} values")
    a.commit()
    m2 = Member(b, "g1", topic)
    ok = poll_until([a, m2], lambda: len(a.assigned) == 2 and len(m2.assigned) == 2)
    check("confluent: a second member takes half the partitions",
          ok and not (a.assigned & m2.assigned) and (a.assigned | m2.assigned) == {0, 1, 2, 3},
          f"{a.assigned} {m2.assigned}")
    check("confluent: the second member starts at the committed offsets", not m2.values, f"{m2.values[:5]}")
    values = [f"u{i}" for i in range(200)]
    produce(b, topic, values, 4)
    a.values = []
    poll_until([a, m2], lambda: len(a.values) + len(m2.values) >= 200)
    got = a.values + m2.values
    check("confluent: the two members read every new message once", sorted(got) == sorted(values),
          f"{len(got)} values, {len(set(got))} distinct")
    check("confluent: both members get messages", a.values and m2.values, f"{len(a.values)} {len(m2.values)}")
    a.commit()
    m2.commit()

    # A third member in another process, killed with SIGKILL: its partitions
    # come back after its session times out.
    child = subprocess.Popen([sys.executable, "-c", CHILD, b, "g1", topic], stdout=subprocess.PIPE, text=True)
    try:
        line = ""
        end = time.time() + 40
        while time.time() < end and not line.startswith("assigned"):
            poll_until([a, m2], lambda: False, timeout=0.2)
            import select
            if select.select([child.stdout], [], [], 0)[0]:
                line = child.stdout.readline().strip()
        check("confluent: a third member joins and gets partitions", line.startswith("assigned "), line)
        poll_until([a, m2], lambda: len(a.assigned) + len(m2.assigned) < 4, timeout=20)
        child.send_signal(signal.SIGKILL)
        child.wait()
        start = time.time()
        ok = poll_until([a, m2], lambda: (a.assigned | m2.assigned) == {0, 1, 2, 3}, timeout=40)
        check("confluent: a killed member's partitions are taken over after its session timeout", ok,
              f"{a.assigned} {m2.assigned} after {time.time() - start:.1f}s")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()

    # One member leaves: the other gets everything at once.
    m2.close()
    check("confluent: a member leaving hands its partitions over",
          poll_until([a], lambda: a.assigned == {0, 1, 2, 3}, timeout=20), str(a.assigned))
    more = [f"w{i}" for i in range(100)]
    produce(b, topic, more, 4)
    a.values = []
    poll_until([a], lambda: len(a.values) >= 100)
    check("confluent: only new messages after the commit", sorted(a.values) == sorted(more),
          f"{len(a.values)}: {a.values[:5]}")
    a.commit()
    a.close()

    # A restarted consumer resumes at the committed offsets: nothing again.
    produce(b, topic, [f"x{i}" for i in range(40)], 4)
    r = Member(b, "g1", topic)
    poll_until([r], lambda: len(r.values) >= 40)
    r.poll(1.0)
    check("confluent: a restarted consumer resumes at the committed offsets",
          sorted(r.values) == sorted(f"x{i}" for i in range(40)), f"{len(r.values)}: {r.values[:5]}")
    r.commit()
    r.close()

    # The committed offsets survive a broker (coordinator) restart.
    server.stop()
    server.start()
    produce(b, topic, [f"y{i}" for i in range(40)], 4)
    r = Member(b, "g1", topic)
    poll_until([r], lambda: len(r.values) >= 40, timeout=60)
    r.poll(1.0)
    check("confluent: committed offsets survive a broker restart",
          sorted(r.values) == sorted(f"y{i}" for i in range(40)), f"{len(r.values)}: {r.values[:5]}")
    r.close()

    # librdkafka's list_groups: ListGroups, then DescribeGroups.
    admin = AdminClient({"bootstrap.servers": b})
    groups = {g.id: g for g in admin.list_groups(timeout=30)}
    check("confluent: ListGroups and DescribeGroups show the empty group",
          "g1" in groups and groups["g1"].state == "Empty" and groups["g1"].protocol_type == "consumer",
          str({k: (g.state, g.protocol_type) for k, g in groups.items()}))


def cooperative_checks(server):
    b = server.bootstrap
    topic = "groups-coop"
    create_topic(b, topic, 6)
    a = Member(b, "coop", topic, strategy="cooperative-sticky")
    m2 = Member(b, "coop", topic, strategy="cooperative-sticky")
    ok = poll_until([a, m2], lambda: len(a.assigned) == 3 and len(m2.assigned) == 3)
    check("cooperative-sticky: two members split six partitions", ok, f"{a.assigned} {m2.assigned}")
    before_a, before_b = set(a.assigned), set(m2.assigned)
    a.revoked_log.clear()
    m2.revoked_log.clear()
    m3 = Member(b, "coop", topic, strategy="cooperative-sticky")
    ok = poll_until([a, m2, m3], lambda: len(a.assigned) == 2 and len(m2.assigned) == 2 and len(m3.assigned) == 2)
    check("cooperative-sticky: a third member gets two partitions", ok,
          f"{a.assigned} {m2.assigned} {m3.assigned}")
    revoked = set().union(*a.revoked_log, *m2.revoked_log) if (a.revoked_log or m2.revoked_log) else set()
    check("cooperative-sticky: only the moved partitions are revoked",
          revoked == m3.assigned and a.assigned <= before_a and m2.assigned <= before_b,
          f"revoked {revoked}, moved to the new member {m3.assigned}")
    for m in (a, m2, m3):
        m.close()


def static_member_checks(server):
    """KIP-345: a static member (group.instance.id) that restarts within its
    session timeout gets its partitions back without a rebalance; the other
    member keeps its own throughout."""
    b = server.bootstrap
    topic = "groups-static"
    create_topic(b, topic, 4)
    extra = {"session.timeout.ms": 10000}
    # The restarted one joins first and so stays the leader: a static
    # leader's restart must not rebalance either.
    m2 = Member(b, "static", topic, extra=dict(extra, **{"group.instance.id": "instance-b"}))
    poll_until([m2], lambda: len(m2.assigned) == 4)
    a = Member(b, "static", topic, extra=dict(extra, **{"group.instance.id": "instance-a"}))
    ok = poll_until([a, m2], lambda: len(a.assigned) == 2 and len(m2.assigned) == 2)
    check("static members: two members split four partitions", ok, f"{a.assigned} {m2.assigned}")
    mine = set(m2.assigned)
    a.revoked_log.clear()
    # A static member leaving by close() sends no LeaveGroup: its place waits.
    m2.close()
    poll_until([a], lambda: False, timeout=2)
    back = Member(b, "static", topic, extra=dict(extra, **{"group.instance.id": "instance-b"}))
    ok = poll_until([a, back], lambda: back.assigned == mine, timeout=30)
    check("static members: the restarted member gets its partitions back", ok, f"{back.assigned} vs {mine}")
    poll_until([a, back], lambda: False, timeout=2)
    check("static members: the other member kept its partitions (no rebalance)",
          not a.revoked_log and len(a.assigned) == 2, f"revoked {a.revoked_log}")
    a.close()
    back.close()


def kafka_python_checks(server):
    from kafka import KafkaConsumer
    b = server.bootstrap
    topic = "groups-kp"
    create_topic(b, topic, 2)
    produce(b, topic, [f"k{i}" for i in range(50)], 2)
    c = KafkaConsumer(topic, bootstrap_servers=b, group_id="kp", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=8000)
    got = [m.value.decode() for m in c]
    c.commit()
    c.close()
    check("kafka-python: a group consumer reads every message", sorted(got) == sorted(f"k{i}" for i in range(50)),
          f"{len(got)}")
    produce(b, topic, [f"l{i}" for i in range(10)], 2)
    c = KafkaConsumer(topic, bootstrap_servers=b, group_id="kp", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=8000)
    got = [m.value.decode() for m in c]
    c.close()
    check("kafka-python: it resumes at the committed offsets", sorted(got) == sorted(f"l{i}" for i in range(10)),
          f"{got[:5]}")


def brook_groups_checks(server):
    """`brook groups` on the groups the other checks left behind."""
    from kafka import KafkaConsumer
    b = server.bootstrap

    def brook(*args, ok=True):
        r = subprocess.run([BROOK, "groups", "--bootstrap-server", b, *args], capture_output=True, text=True,
                           timeout=60)
        if ok and r.returncode != 0:
            raise RuntimeError(f"brook groups {args}: {r.stderr}")
        return r

    listed = brook("--list").stdout.split()
    check("brook groups --list names the groups", {"g1", "coop", "kp"} <= set(listed), str(listed))
    out = brook("--describe", "--group", "kp").stdout
    rows = [line.split() for line in out.splitlines() if line.startswith("kp ")]
    # kafka-python committed after the first 50 messages, not after the
    # last 10: 25 committed of 30 in each partition.
    check("brook groups --describe shows offsets and lag",
          len(rows) == 2 and all(r[1] == "groups-kp" and r[3:6] == ["25", "30", "5"] for r in rows), out)
    brook("--reset-offsets", "--group", "kp", "--topic", "groups-kp", "--to-earliest", "--execute")
    c = KafkaConsumer("groups-kp", bootstrap_servers=b, group_id="kp", auto_offset_reset="latest",
                      enable_auto_commit=False, consumer_timeout_ms=8000)
    got = [m.value.decode() for m in c]
    c.close()
    check("brook groups --reset-offsets --to-earliest rewinds the group", len(got) == 60, f"{len(got)}")
    active = Member(b, "active", "groups-kp")
    poll_until([active], lambda: len(active.assigned) == 2)
    r = brook("--reset-offsets", "--group", "active", "--topic", "groups-kp", "--to-latest", "--execute", ok=False)
    check("brook groups refuses to reset an active group", r.returncode != 0 and "inactive" in r.stderr, r.stderr)
    members = brook("--describe", "--group", "active", "--members").stdout
    rows = [line.split() for line in members.splitlines() if line.startswith("active ")]
    # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS; librdkafka's client.id is "rdkafka".
    check("brook groups --describe --members lists the member with its host and client id",
          len(rows) == 1 and rows[0][2] == "/127.0.0.1" and rows[0][3] == "rdkafka" and rows[0][-1] == "2", members)
    active.close()
    brook("--delete", "--group", "kp")
    check("brook groups --delete removes the group", "kp" not in brook("--list").stdout.split(), "")


def kcat_checks(server):
    b = server.bootstrap
    topic = "groups-kcat"
    create_topic(b, topic, 3)
    produce(b, topic, [f"c{i}" for i in range(30)], 3)

    def consume_once():
        # kcat -G commits as it goes (auto commit); SIGINT makes it leave.
        # (-o would override the committed offsets.)
        proc = subprocess.Popen(["kcat", "-b", b, "-G", "kc", topic, "-q", "-f", "%s\n",
                                 "-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=100"], stdout=subprocess.PIPE, text=True)
        time.sleep(8)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        return out.split()

    first = consume_once()
    check("kcat -G: reads every message", sorted(first) == sorted(f"c{i}" for i in range(30)), f"{len(first)}")
    produce(b, topic, ["d0", "d1"], 3)
    second = consume_once()
    check("kcat -G: a second run reads only what is new", sorted(second) == ["d0", "d1"], str(second))


def main():
    def checks(server, work):
        confluent_group_checks(server, work)
        cooperative_checks(server)
        static_member_checks(server)
        kafka_python_checks(server)
        brook_groups_checks(server)
        kcat_checks(server)

    base.run_with_server("brook-groups-", checks, extra_args=["--override", "group.initial.rebalance.delay.ms=0"],
                         done="all group client checks passed")


if __name__ == "__main__":
    main()
