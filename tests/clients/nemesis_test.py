#!/usr/bin/python3
"""Three `brook server` processes, each broker and controller, under a
nemesis while real clients write and read: one node at a time is killed
(SIGKILL), stopped gracefully (SIGTERM) or paused (SIGSTOP, then SIGCONT),
and comes back.

Usage: nemesis_test.py PATH_TO_BROOK [SECONDS] [SEED]

An idempotent acks=all producer (confluent-kafka) writes numbered messages
to a topic of 6 partitions, 3 replicas and min.insync.replicas=2, and a
consumer group of two members reads it, committing as it goes. Checked at
the end: every acknowledged message is in the log exactly once, at the
offset its acknowledgement named; each partition holds one producer's
messages in the order they were sent; the group saw every acknowledged
message; every SIGTERM ended its process with status 0; and once all nodes
are back every partition has its three replicas in the ISR. The nemesis is
drawn from SEED (default: random, printed); its timing is real time, so a
seed does not replay a run exactly.
"""
import bisect
import collections
import logging
import os
import random
import signal
import sys
import tempfile
import threading
import time

BROOK = sys.argv[1]
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 40
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else random.randrange(1 << 30)
sys.argv = sys.argv[:2]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker_clients_test as t  # noqa: E402

T0 = time.time()


def note(msg):
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

# librdkafka's own log lines go to clients.log in the work folder (its tail
# is printed when a check fails), not between the test's lines.
CLIENT_LOG = logging.getLogger("librdkafka")
CLIENT_LOG.propagate = False
CLIENT_LOG.setLevel(logging.DEBUG)


class FatalLines(logging.Handler):
    """librdkafka's own report of each client's fatal error ("FATAL [id#..."
    lines), by client.id."""

    def __init__(self):
        super().__init__()
        self.lines = collections.defaultdict(list)

    def emit(self, record):
        m = record.getMessage()
        if m.startswith("FATAL ["):
            self.lines[m[len("FATAL ["):].split("#", 1)[0]].append(m)


FATAL_LINES = FatalLines()
CLIENT_LOG.addHandler(FATAL_LINES)

TOPIC = "nemesis"
PARTITIONS = 6
# Messages per second the producer offers: the client, three servers and
# the group share the machine's cores (and run under sanitizers in CI).
RATE = 2000


def start_cluster(work):
    cluster_id = t.run([BROOK, "random-uuid"]).decode().strip()
    nodes = t.three_nodes(work, "n", cluster_id, extra=["--override", "leader.imbalance.check.interval.seconds=5"])
    for s in nodes.values():
        s.start()
    return nodes


# librdkafka before 2.3 (Debian has 2.0.2) can end an idempotent producer
# with a fatal OUT_OF_ORDER_SEQUENCE_NUMBER after a leader dies: it counts
# the batches in flight on the lost connection as possibly written and moves
# its next expected sequence past them; when the new leader then answers
# that they were not (NOT_LEADER_FOR_PARTITION, or a gap), it reports
# "sequence desynchronization" or "rewound sequence number" and gives up
# (librdkafka issue 3584, fixed by its pull request 4438; Kafka's brokers
# see the same). The producer is replaced, and its unacknowledged messages
# may or may not be in the log; any other fatal error fails the test.
def known_client_fatal(error):
    # The error's name as error_cb gives it, or its text as librdkafka logs it.
    return ("OUT_OF_ORDER_SEQUENCE_NUMBER" in error or "out of order sequence number" in error) and (
        "sequence desynchronization" in error or "rewound sequence number" in error)


class Workload:
    def __init__(self, bootstrap):
        self.bootstrap = bootstrap
        self.lock = threading.Lock()
        self.acked = {}  # value -> (partition, offset)
        self.unacked = {}  # value -> the error its delivery report gave
        self.firsts = []  # the first message number of each producer after the first
        self.fatal = []  # fatal errors of the producers
        self.sent = 0
        self.left = -1
        self.seen = collections.Counter()  # what the group was given
        self.stop_writing = threading.Event()
        self.stop_reading = threading.Event()

    def produce(self):
        start = time.time()
        i = 0
        while True:
            fatal = []
            first = i  # this producer sends m{first}, m{first+1}, ...
            client_id = f"nemesis-producer-{len(self.firsts)}"
            p = Producer({"bootstrap.servers": self.bootstrap, "client.id": client_id,
                          "acks": "all", "enable.idempotence": True,
                          "linger.ms": 5, "message.timeout.ms": 300000, "logger": CLIENT_LOG,
                          # The idempotence state machine's steps, in the client log.
                          "debug": "eos",
                          "error_cb": lambda err, fatal=fatal: fatal.append(str(err)) if err.fatal() else None})

            def done(err, msg):
                with self.lock:
                    if err is None:
                        self.acked[msg.value().decode()] = (msg.partition(), msg.offset())
                    else:
                        self.unacked[msg.value().decode()] = str(err)
            # After a fatal error every call of the producer may raise it.
            try:
                while not self.stop_writing.is_set() and not fatal:
                    due = start + i / RATE
                    if due > time.time():
                        p.poll(min(due - time.time(), 0.05))
                        continue
                    try:
                        p.produce(TOPIC, key=str(i).encode(), value=f"m{i}".encode(), on_delivery=done)
                        i += 1
                    except BufferError:
                        p.poll(0.05)
                    p.poll(0)
                if not fatal:
                    self.sent = i
                    # Well inside ctest's 300 s, so that messages never
                    # acknowledged fail a check that says how many, with
                    # every log printed.
                    self.left = p.flush(150)
                    return
            except KafkaException as e:
                err = e.args[0]
                if not (err.fatal() or err.code() == KafkaError._FATAL):
                    raise
                # The underlying error reaches error_cb from poll, which
                # may take a while on a loaded machine, and now and then
                # not at all; librdkafka also logs it (as a FATAL line,
                # also delivered by poll).
                until = time.time() + 10
                while not fatal and not FATAL_LINES.lines.get(client_id) and time.time() < until:
                    try:
                        p.poll(0.2)
                    except KafkaException:
                        pass
                if not fatal:
                    fatal.append(FATAL_LINES.lines[client_id][0] if FATAL_LINES.lines.get(client_id) else str(err))
            # The rest of its messages, queued or in flight, are reported
            # failed: they may or may not be in the log. A message it never
            # reports counts as failed too.
            for finish in (p.purge, lambda: p.flush(30)):
                try:
                    finish()
                except KafkaException:
                    pass
            # Only the first fatal error counts: the ones after it follow from it.
            with self.lock:
                self.fatal.append(fatal[0])
                self.firsts.append(i)
                for v in (f"m{n}" for n in range(first, i)):
                    if v not in self.acked:
                        self.unacked.setdefault(v, "no delivery report after the producer's fatal error")
            note(f"producer failed: {fatal[0]}")
            if not known_client_fatal(fatal[0]):
                self.sent = i
                self.left = len(p)
                return

    def consume(self):
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "nemesis-group",
                      "auto.offset.reset": "earliest", "enable.auto.commit": True,
                      "auto.commit.interval.ms": 500, "session.timeout.ms": 10000, "logger": CLIENT_LOG})
        c.subscribe([TOPIC])
        while not self.stop_reading.is_set():
            m = c.poll(0.5)
            if m is not None and not m.error():
                with self.lock:
                    self.seen[m.value().decode()] += 1
        c.close()


def nemesis(nodes, rnd, seconds, bootstrap):
    end = time.time() + seconds
    events = []
    while time.time() < end:
        time.sleep(rnd.uniform(2, 5))
        victim = rnd.choice(sorted(nodes))
        how = rnd.choice(["kill", "term", "term", "pause"])
        events.append(f"{how} n{victim}")
        note(f"nemesis: {how} n{victim}")
        s = nodes[victim]
        if how == "pause":
            s.proc.send_signal(signal.SIGSTOP)
            time.sleep(rnd.uniform(1, 5))
            s.proc.send_signal(signal.SIGCONT)
            continue
        # Server.stop raises when a SIGTERM does not end the process with
        # status 0 within 20 s.
        s.stop(signal.SIGKILL if how == "kill" else signal.SIGTERM)
        time.sleep(rnd.uniform(0.5, 4))
        s.start(wait_port=s.port)
    return events


def read_all(bootstrap):
    """Every message of the topic: value -> (partition, offset), and the
    number read twice."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "nemesis-verify",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "logger": CLIENT_LOG})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got = {}
    twice = 0
    last = time.time()
    while time.time() - last < 10:
        m = c.poll(0.5)
        if m is not None and not m.error():
            v = m.value().decode()
            twice += v in got
            got[v] = (m.partition(), m.offset())
            last = time.time()
    c.close()
    return got, twice


def checks(nodes, rnd):
    bootstrap = ",".join(s.bootstrap for s in nodes.values())
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": CLIENT_LOG})
    deadline = time.time() + 30
    while time.time() < deadline and set(admin.list_topics(timeout=10).brokers) != {1, 2, 3}:
        time.sleep(0.2)
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})]).values():
        f.result(30)
    w = Workload(bootstrap)
    # Daemons: a failed check must not leave the script waiting for them.
    threads = [threading.Thread(target=w.produce, daemon=True)] + \
        [threading.Thread(target=w.consume, daemon=True) for _ in range(2)]
    for th in threads:
        th.start()
    try:
        time.sleep(2)
        events = nemesis(nodes, rnd, SECONDS, bootstrap)
    finally:
        w.stop_writing.set()
        threads[0].join()
    note("producer flushed")
    t.check(f"nemesis: {len(events)} faults ({', '.join(events)})", len(events) > 0)
    unknown_fatal = [f for f in w.fatal if not known_client_fatal(f)]
    t.check(f"no producer failed but for librdkafka's known fatal error ({len(w.fatal)} did)", not unknown_fatal,
            str(unknown_fatal[:2]))
    t.check("every message acknowledged (or failed with its producer)",
            w.left == 0 and len(w.acked) + len(w.unacked) == w.sent and (w.fatal or not w.unacked),
            f"{len(w.acked)} of {w.sent} acknowledged, {len(w.unacked)} failed, {w.left} in flight, "
            f"errors {list(w.unacked.values())[:3]}")

    got, twice = read_all(bootstrap)
    note(f"read back {len(got)}")
    missing = [v for v in w.acked if v not in got]
    t.check("no acknowledged message lost", not missing, f"{len(missing)} missing, e.g. {missing[:3]}")
    # librdkafka acknowledges some messages of an idempotent producer with
    # no offset (it learnt they were written from a later answer, after a
    # retry): those are checked for presence only.
    moved = [(v, w.acked[v], got[v]) for v in w.acked
             if v in got and w.acked[v][1] is not None and got[v] != w.acked[v]]
    unknown = sum(1 for v in w.acked if w.acked[v][1] is None)
    t.check(f"each message at the offset its acknowledgement named ({unknown} acknowledged without one)",
            not moved, f"e.g. {moved[:3]}")
    extra = [v for v in got if v not in w.acked and v not in w.unacked]
    t.check("no message written twice, none that was not sent", twice == 0 and not extra,
            f"{twice} twice, {len(got)} read, e.g. {extra[:3]}")
    # Order holds per producer: a replaced producer's last requests may
    # still land after its successor's first ones.
    by_partition = collections.defaultdict(list)
    for v, (p, offset) in got.items():
        n = int(v[1:])
        by_partition[(p, bisect.bisect_right(w.firsts, n))].append((offset, n))
    out_of_order = 0
    for entries in by_partition.values():
        entries.sort()
        out_of_order += sum(1 for a, b in zip(entries, entries[1:]) if b[1] < a[1])
    t.check("each partition in send order", out_of_order == 0, f"{out_of_order} out of order")

    deadline = time.time() + 30
    while time.time() < deadline and any(w.seen[v] == 0 for v in w.acked):
        time.sleep(0.5)
    w.stop_reading.set()
    for th in threads[1:]:
        th.join()
    unseen = [v for v in w.acked if w.seen[v] == 0]
    t.check("the group was given every acknowledged message", not unseen, f"{len(unseen)} never given")
    # OffsetFetch to any broker answers with the coordinator's offsets (the
    # others forward it): kafka-python asks the broker it is told to.
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError as PyKafkaError
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap)

    def committed_at(n):
        # A coordinator still loading (leadership may move back to a
        # restarted node) answers COORDINATOR_LOAD_IN_PROGRESS (14) or
        # COORDINATOR_NOT_AVAILABLE (15); NOT_COORDINATOR is a failure.
        for attempt in range(60):
            try:
                got = kadmin.list_consumer_group_offsets("nemesis-group", group_coordinator_id=n)
                return {(tp.partition, om.offset) for tp, om in got.items()}
            except PyKafkaError as e:
                if getattr(e, "errno", None) not in (14, 15) or attempt == 59:
                    raise
                time.sleep(0.5)
    try:
        answers = {n: committed_at(n) for n in sorted(nodes)}
    finally:
        kadmin.close()
    t.check("every broker answers OffsetFetch with the group's committed offsets",
            len({frozenset(a) for a in answers.values()}) == 1 and len(answers[1]) == PARTITIONS, str(answers))

    deadline = time.time() + 60
    while time.time() < deadline:
        parts = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
        if len(parts) == PARTITIONS and all(sorted(p.isrs) == [1, 2, 3] for p in parts.values()):
            break
        time.sleep(0.5)
    t.check("every replica back in the ISR", all(sorted(p.isrs) == [1, 2, 3] for p in parts.values()),
            str({i: (p.leader, p.isrs) for i, p in parts.items()}))
    print(f"nemesis: {len(w.acked)} messages acknowledged and read back; the group was given "
          f"{sum(w.seen.values())} (at least once)", flush=True)


def main():
    print(f"nemesis seed {SEED} ({SECONDS:.0f} s): nemesis_test.py BROOK {SECONDS:.0f} {SEED}", flush=True)
    rnd = random.Random(SEED)
    work = tempfile.mkdtemp(prefix="brook-nemesis-")
    log_file = logging.FileHandler(os.path.join(work, "clients.log"))
    log_file.setFormatter(logging.Formatter("%(relativeCreated)9.0fms %(message)s"))
    CLIENT_LOG.addHandler(log_file)
    nodes = {}
    ok = False
    watchdog = None
    try:
        nodes = start_cluster(work)
        watchdog = t.start_watchdog(*nodes.values(), files=[(log_file.baseFilename, "client log")])
        checks(nodes, rnd)
        ok = True
    finally:
        for s in nodes.values():
            try:
                if s.proc is not None and s.proc.poll() is None:
                    s.proc.send_signal(signal.SIGCONT)
                s.stop()
            except Exception as e:
                print(f"stopping {s.log}: {e}")
                ok = False
        if watchdog is not None:
            watchdog.cancel()
        if not ok:
            for s in nodes.values():
                t.print_log_tail(s, 4000)
            log_file.flush()
            t.print_file_tail(log_file.baseFilename, "client log", 4000)
        else:
            import shutil
            shutil.rmtree(work, ignore_errors=True)
    if not ok:
        sys.exit(1)
    print("nemesis checks passed")


if __name__ == "__main__":
    main()
