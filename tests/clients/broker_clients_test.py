#!/usr/bin/python3
"""Real Kafka clients against a real `brook server` (single node, broker and
controller in one process) on loopback ports.

Usage: broker_clients_test.py PATH_TO_BROOK

Each check prints "ok <name>" or raises; the script exits non-zero on the
first failure, after printing the server's log tail. Clients: kcat
(librdkafka), confluent-kafka (librdkafka) and kafka-python.
"""
import faulthandler
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

BROOK = sys.argv[1]


# Ports handed out by free_port(): the kernel may give a port it just gave
# again, and ports are picked before the servers that listen on them start.
HANDED_OUT = set()

# Ports handed out by any test process on this machine, with when each may
# be handed out again ("port until" lines), kept under an exclusive lock: a
# port picked here is free when picked, but another test process running
# beside this one (ctest -j) could pick the same one before our server binds
# it. kraft_process_test reads and writes the same file.
PORT_REGISTRY = os.path.join(tempfile.gettempdir(), "brook-test-ports")
PORT_HOLD_SECONDS = 3600


def ephemeral_low():
    """The lowest port the kernel hands out to outgoing connections."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port():
    """A port for a server to listen on, free when picked and below the
    kernel's ephemeral range: a port from that range can be taken by some
    other process's outgoing connection before the server binds it (seen
    under load: "bind 127.0.0.1:35047: Address already in use"). No other
    test process gets it within the next hour (PORT_REGISTRY)."""
    import fcntl
    low = ephemeral_low()
    pick = random.SystemRandom()
    with open(PORT_REGISTRY, "a+") as registry:
        fcntl.flock(registry, fcntl.LOCK_EX)
        registry.seek(0)
        now = time.time()
        held = {}
        for line in registry.read().splitlines():
            fields = line.split()
            try:
                if len(fields) == 2 and float(fields[1]) > now:
                    held[int(fields[0])] = float(fields[1])
            except ValueError:
                continue
        while True:
            if low - 1024 >= 4096:
                port = pick.randrange(max(1024, low - 16384), low)
            else:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", 0))
                    port = s.getsockname()[1]
            if port in HANDED_OUT or port in held:
                continue
            try:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            except OSError:
                continue
            break
        held[port] = now + PORT_HOLD_SECONDS
        registry.seek(0)
        registry.truncate()
        registry.write("".join(f"{p} {until:.0f}\n" for p, until in sorted(held.items())))
    HANDED_OUT.add(port)
    return port


# Every server process started, for the watchdog to stop.
STARTED = []


class Server:
    """One `brook server`: by default broker and controller on free ports;
    `args` replaces the listeners and roles (a cluster of processes)."""

    def __init__(self, data_dir, args=None, name="server"):
        self.data_dir = data_dir
        self.port = free_port()
        self.controller_port = free_port()
        self.args = args if args is not None else [
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "--override", "connections.max.idle.ms=3000"]
        self.proc = None
        self.log = os.path.join(os.path.dirname(data_dir), f"{name}.log")

    def start(self, wait_port=None):
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [BROOK, "server", "--data-dir", self.data_dir, "--override", "broker.heartbeat.interval.ms=200"]
            + self.args,
            stdout=logf, stderr=logf)
        STARTED.append(self.proc)
        port = wait_port if wait_port is not None else self.port
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("brook server did not listen")

    def stop(self, sig=signal.SIGTERM):
        if self.proc is None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("brook server did not stop on SIGTERM")
        code = self.proc.returncode
        self.proc = None
        if sig == signal.SIGTERM and code != 0:
            raise RuntimeError(f"brook server exited {code} on SIGTERM")

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"


def three_nodes(work, name, cluster_id, listener="PLAINTEXT", extra=(), format_args=None):
    """Three `brook server` processes, not started, each broker and
    controller of one quorum (nodes 1-3, data in work/<name><n>/data),
    listening on `listener` for clients and between brokers. With
    `format_args`, each data directory is first formatted by `brook format`
    with them; otherwise the servers format it with `cluster_id`."""
    cports = {n: free_port() for n in (1, 2, 3)}
    voters = "controller.quorum.voters=" + ",".join(f"{n}@127.0.0.1:{p}" for n, p in cports.items())
    nodes = {}
    for n in (1, 2, 3):
        data = os.path.join(work, f"{name}{n}", "data")
        os.makedirs(os.path.dirname(data), exist_ok=True)  # (the server log goes there)
        if format_args is not None:
            run([BROOK, "format", "--cluster-id", cluster_id, "--node-id", str(n), "--data-dir", data]
                + list(format_args))
        s = Server(data, name=f"{name}{n}")
        s.args = ([] if format_args is not None else ["--cluster-id", cluster_id]) + [
            "--override", "process.roles=broker,controller", "--override", f"node.id={n}", "--override", voters,
            "--override", f"listeners={listener}://127.0.0.1:{s.port},CONTROLLER://127.0.0.1:{cports[n]}",
            "--override", "broker.session.timeout.ms=3000", "--override", "replica.lag.time.max.ms=5000"
        ] + list(extra)
        nodes[n] = s
    return nodes


def run(cmd, input=None, timeout=60):
    r = subprocess.run(cmd, input=input, capture_output=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{cmd} exited {r.returncode}: {r.stderr.decode(errors='replace')}")
    return r.stdout


def read_partition(bootstrap, topic, want, timeout):
    """Up to `want` values of partition 0 of `topic` from its start (until
    `timeout` seconds pass), with confluent-kafka, in offset order."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + timeout
    while len(got) < want and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.close()
    return got


def check(name, cond, detail=""):
    if not cond:
        print(f"FAIL {name}: {detail}", flush=True)
        raise AssertionError(f"{name}: {detail}")
    print(f"ok {name}", flush=True)


def stored_codecs(server, topic):
    """The compression codecs of the batches stored for `topic`, read from
    its segment files (attributes at byte 21 of each batch)."""
    names = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
    found = set()
    for d in os.listdir(server.data_dir):
        if d.rsplit("-", 1)[0] != topic:
            continue
        for f in os.listdir(os.path.join(server.data_dir, d)):
            if not f.endswith(".log"):
                continue
            with open(os.path.join(server.data_dir, d, f), "rb") as seg:
                data = seg.read()
            pos = 0
            while pos + 23 <= len(data):
                length = int.from_bytes(data[pos + 8:pos + 12], "big")
                found.add(names.get(int.from_bytes(data[pos + 21:pos + 23], "big") & 7, "?"))
                pos += 12 + length
    return found


def kcat_checks(server):
    b = server.bootstrap
    meta = run(["kcat", "-b", b, "-L"]).decode()
    check("kcat metadata lists the broker", f"broker 1 at 127.0.0.1:{server.port}" in meta, meta)
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
        topic = f"kcat-{codec}"
        lines = "".join(f"k{i}:v{i}\n" for i in range(500)).encode()
        run(["kcat", "-b", b, "-P", "-t", topic, "-K:", "-z", codec, "-X", "enable.idempotence=true"], input=lines)
        out = run(["kcat", "-b", b, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k=%s %o\n"]).decode()
        got = out.splitlines()
        want = [f"k{i}=v{i} {i}" for i in range(500)]
        check(f"kcat produce/consume {codec}", got == want, f"{got[:3]}... ({len(got)} lines)")
        # librdkafka compresses only for a broker that lists Produce v0.
        codecs = stored_codecs(server, topic)
        check(f"kcat {codec} batches are stored as sent", codecs == {codec}, f"{codecs}")
    run(["kcat", "-b", b, "-P", "-t", "kcat-headers", "-H", "h1=x", "-H", "h2=y"], input=b"payload\n")
    out = run(["kcat", "-b", b, "-C", "-t", "kcat-headers", "-e", "-q", "-f", "%s|%h\n"]).decode()
    check("kcat headers", out.strip() == "payload|h1=x,h2=y", out)
    out = run(["kcat", "-b", b, "-Q", "-t", "kcat-none:0:-1"]).decode()
    check("kcat offset query (latest)", "offset 500" in out, out)


def confluent_checks(server):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, ConfigResource

    b = server.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    fs = admin.create_topics([NewTopic("cf-topic", num_partitions=3, replication_factor=1)])
    for f in fs.values():
        f.result(20)
    md = admin.list_topics(timeout=10)
    check("confluent create_topics", "cf-topic" in md.topics and len(md.topics["cf-topic"].partitions) == 3)
    fs = admin.create_topics([NewTopic("cf-topic", num_partitions=3, replication_factor=1)])
    try:
        for f in fs.values():
            f.result(20)
        check("confluent duplicate topic refused", False, "no error")
    except Exception as e:  # KafkaException(TOPIC_ALREADY_EXISTS)
        check("confluent duplicate topic refused", "TOPIC_ALREADY_EXISTS" in str(e), str(e))

    for acks in ["0", "1", "all"]:
        p = Producer({"bootstrap.servers": b, "acks": acks, "linger.ms": 5,
                      "enable.idempotence": acks == "all", "compression.type": "lz4"})
        delivered = []
        errors = []

        def cb(err, msg):
            (errors if err else delivered).append(err or msg)
        for i in range(300):
            p.produce("cf-topic", key=f"key-{i}".encode(), value=f"{acks}-{i}".encode(),
                      headers=[("n", str(i).encode())], timestamp=1_600_000_000_000 + i, on_delivery=cb)
        p.flush(30)
        check(f"confluent produce acks={acks}", len(delivered) == 300 and not errors, f"{len(delivered)} {errors[:2]}")

    c = Consumer({"bootstrap.servers": b, "group.id": "unused", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    parts = [TopicPartition("cf-topic", i, 0) for i in range(3)]
    c.assign(parts)
    seen = []
    deadline = time.time() + 30
    while len(seen) < 900 and time.time() < deadline:
        m = c.poll(1.0)
        if m is None or m.error():
            continue
        seen.append((m.key(), m.value(), m.headers(), m.timestamp()))
    check("confluent consume all", len(seen) == 900, f"{len(seen)}")
    values = sorted(v.decode() for _, v, _, _ in seen)
    want = sorted(f"{a}-{i}" for a in ["0", "1", "all"] for i in range(300))
    check("confluent values intact", values == want)
    check("confluent timestamps kept", all(ts[1] >= 1_600_000_000_000 for _, _, _, ts in seen))
    # Offsets by time: the first record at or after a timestamp.
    offs = c.offsets_for_times([TopicPartition("cf-topic", i, 1_600_000_000_000) for i in range(3)], 10)
    check("confluent offsets_for_times", all(o.offset == 0 for o in offs), str(offs))
    offs = c.offsets_for_times([TopicPartition("cf-topic", i, 1_700_000_000_000) for i in range(3)], 10)
    check("confluent offsets_for_times past the end", all(o.offset == -1 for o in offs), str(offs))
    lo, hi = c.get_watermark_offsets(TopicPartition("cf-topic", 0), 10)
    check("confluent watermarks", lo == 0 and hi > 0, f"{lo} {hi}")
    c.close()

    fs = admin.create_partitions([NewPartitions("cf-topic", 5)])
    for f in fs.values():
        f.result(20)
    time.sleep(0.5)
    md = admin.list_topics(timeout=10)
    check("confluent create_partitions", len(md.topics["cf-topic"].partitions) == 5)

    res = ConfigResource(ConfigResource.Type.TOPIC, "cf-topic", set_config={"retention.ms": "3600000"})
    for f in admin.alter_configs([res]).values():
        f.result(20)
    time.sleep(0.3)
    for f in admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "cf-topic")]).values():
        configs = f.result(20)
        check("confluent alter/describe configs", configs["retention.ms"].value == "3600000",
              str(configs.get("retention.ms")))
    # The broker's own properties (--override here) are STATIC_BROKER_CONFIG.
    from confluent_kafka.admin import ConfigSource
    for f in admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")]).values():
        configs = f.result(20)
        idle, node, parts = configs["connections.max.idle.ms"], configs["node.id"], configs["num.partitions"]
        check("confluent describe broker configs: static ones as set",
              idle.value == "3000" and idle.source == ConfigSource.STATIC_BROKER_CONFIG.value
              and node.value == "1" and node.source == ConfigSource.STATIC_BROKER_CONFIG.value
              and configs["log.dirs"].value == os.path.abspath(server.data_dir)
              and parts.value == "1" and parts.source == ConfigSource.DEFAULT_CONFIG.value,
              f"{idle} {node} {configs['log.dirs']} {parts}")

    # A large message (about 900 KB) under the default max.message.bytes.
    big = os.urandom(900_000)
    p = Producer({"bootstrap.servers": b, "message.max.bytes": 2_000_000})
    p.produce("cf-big", value=big)
    check("confluent large message produced", p.flush(30) == 0)
    c = Consumer({"bootstrap.servers": b, "group.id": "unused", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("cf-big", 0, 0)])
    got = None
    deadline = time.time() + 20
    while got is None and time.time() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got = m.value()
    c.close()
    check("confluent large message consumed", got == big)

    for f in admin.delete_topics(["cf-big"]).values():
        f.result(20)
    deadline = time.time() + 10
    while "cf-big" in admin.list_topics(timeout=10).topics and time.time() < deadline:
        time.sleep(0.2)
    check("confluent delete_topics", "cf-big" not in admin.list_topics(timeout=10).topics)


class WireReader:
    """Reads a non-flexible response body: fixed-size fields and int16-length
    strings (null when the length is -1)."""

    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, fmt):
        import struct
        v = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        (n,) = self.take(">h")
        if n < 0:
            return None
        v = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return v


def txn_checks(bootstrap, topic, prefix):
    """Transactions with librdkafka (confluent-kafka): committed and
    aborted transactions as read_committed and read_uncommitted consumers
    see them, offsets committed in a transaction (consume-transform-produce),
    and a new producer of the same transactional id fencing the old one and
    aborting its open transaction."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    def producer(tid, **extra):
        conf = {"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5}
        conf.update(extra)
        p = Producer(conf)
        p.init_transactions(30)
        return p

    def read(isolation, want, group=None, timeout=30):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"{prefix}-reader-{uuid.uuid4()}",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": isolation, "enable.partition.eof": True})
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        c.assign([TopicPartition(topic, i, 0) for i in parts])
        seen = []
        eof = set()
        deadline = time.time() + timeout
        while time.time() < deadline and (len(seen) < want or len(eof) < len(parts)):
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
                continue
            eof.discard(m.partition())
            seen.append(m.value().decode())
        c.close()
        return seen

    p = producer(f"{prefix}-tx")
    p.begin_transaction()
    for i in range(100):
        p.produce(topic, key=str(i).encode(), value=f"{prefix}-c1-{i}".encode())
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(50):
        p.produce(topic, key=str(i).encode(), value=f"{prefix}-a-{i}".encode())
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, key=str(i).encode(), value=f"{prefix}-c2-{i}".encode())
    p.commit_transaction(30)
    committed = read("read_committed", 130)
    mine = [v for v in committed if v.startswith(prefix + "-")]
    check(f"{prefix}: read_committed sees the committed transactions only",
          sorted(mine) == sorted([f"{prefix}-c1-{i}" for i in range(100)] + [f"{prefix}-c2-{i}" for i in range(30)]),
          f"{len(mine)} {[v for v in mine if '-a-' in v][:3]}")
    everything = [v for v in read("read_uncommitted", 180) if v.startswith(prefix + "-")]
    check(f"{prefix}: read_uncommitted sees the aborted records too", len(everything) == 180, str(len(everything)))
    # Brook's own consumer skips aborted transactions the same way.
    out = run([BROOK, "consume", "--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning",
               "--isolation-level", "read_committed", "--timeout-ms", "3000"]).decode().splitlines()
    mine = [v for v in out if v.startswith(prefix + "-")]
    check(f"{prefix}: brook consume --isolation-level read_committed sees the committed transactions only",
          sorted(mine) == sorted([f"{prefix}-c1-{i}" for i in range(100)] + [f"{prefix}-c2-{i}" for i in range(30)]),
          f"{len(mine)} {[v for v in mine if '-a-' in v][:3]}")
    out = run([BROOK, "consume", "--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning",
               "--timeout-ms", "3000"]).decode().splitlines()
    mine = [v for v in out if v.startswith(prefix + "-")]
    check(f"{prefix}: brook consume (read_uncommitted) sees the aborted records too", len(mine) == 180, str(len(mine)))

    # Consume-transform-produce: the input offsets commit with the output.
    group = f"{prefix}-ctp"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + 30
    while len(got) < 10 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m)
    check(f"{prefix}: consumed input for a transaction", len(got) == 10, str(len(got)))
    p.begin_transaction()
    for m in got:
        p.produce(topic, value=(f"{prefix}-out-" + m.value().decode()).encode())
    p.send_offsets_to_transaction([TopicPartition(topic, 0, got[-1].offset() + 1)],
                                  c.consumer_group_metadata(), 30)
    p.abort_transaction(30)
    after_abort = c.committed([TopicPartition(topic, 0)], 10)[0].offset
    check(f"{prefix}: offsets of an aborted transaction are not committed", after_abort < 0, str(after_abort))
    p.begin_transaction()
    for m in got:
        p.produce(topic, value=(f"{prefix}-out-" + m.value().decode()).encode())
    p.send_offsets_to_transaction([TopicPartition(topic, 0, got[-1].offset() + 1)],
                                  c.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    deadline = time.time() + 20
    committed_offset = -1
    while time.time() < deadline:
        committed_offset = c.committed([TopicPartition(topic, 0)], 10)[0].offset
        if committed_offset == got[-1].offset() + 1:
            break
        time.sleep(0.2)
    check(f"{prefix}: offsets commit with their transaction", committed_offset == got[-1].offset() + 1,
          f"{committed_offset} want {got[-1].offset() + 1}")
    c.close()

    # A second producer of the same id fences the first, whose open
    # transaction is aborted.
    p.begin_transaction()
    for i in range(20):
        p.produce(topic, value=f"{prefix}-zombie-{i}".encode())
    p.flush(30)
    # brook transactions (as kafka-transactions) shows the open transaction:
    # at its coordinator, and at the leader of a partition it wrote to.
    tool = [BROOK, "transactions", "--bootstrap-server", bootstrap]
    listed = [line.split() for line in run(tool + ["list"]).decode().splitlines()[1:]]
    check(f"{prefix}: brook transactions list shows the open transaction",
          any(row[0] == f"{prefix}-tx" and row[3] == "Ongoing" for row in listed), str(listed))
    described = [line.split() for line in
                 run(tool + ["describe", "--transactional-id", f"{prefix}-tx"]).decode().splitlines()]
    ok = len(described) == 2 and len(described[1]) == 9 and described[1][4] == "Ongoing"
    written = described[1][8].split(",") if ok else []
    check(f"{prefix}: brook transactions describe shows it ongoing over the partitions written",
          ok and written and all(tp.rsplit("-", 1)[0] == topic for tp in written), str(described))
    producer_id = described[1][2]
    partition = written[0].rsplit("-", 1)[1]
    producers = [line.split() for line in
                 run(tool + ["describe-producers", "--topic", topic, "--partition", partition]).decode().splitlines()[1:]]
    check(f"{prefix}: brook transactions describe-producers shows where it started",
          any(row[0] == producer_id and row[5] != "None" for row in producers), str(producers))
    # Open and held by its coordinator: not hanging, and not aborted by hand.
    hanging = run(tool + ["find-hanging", "--topic", topic, "--max-transaction-timeout", "1"]).decode().splitlines()
    check(f"{prefix}: brook transactions find-hanging finds none", len(hanging) == 1, str(hanging))
    r = subprocess.run(tool + ["abort", "--topic", topic, "--partition", partition, "--start-offset", "999999999"],
                       capture_output=True, timeout=60)
    check(f"{prefix}: brook transactions abort refuses an offset no transaction starts at",
          r.returncode == 1 and b"no transaction is open" in r.stderr, r.stderr.decode(errors="replace"))
    p2 = producer(f"{prefix}-tx")
    fenced = False
    try:
        p.commit_transaction(30)
    except KafkaException as e:
        fenced = e.args[0].fatal() or "fenced" in str(e).lower()
    check(f"{prefix}: the older producer is fenced", fenced)
    p2.begin_transaction()
    p2.produce(topic, value=f"{prefix}-successor".encode())
    p2.commit_transaction(30)
    # Committed: 100 + 30 records, the 10 transformed ones, the successor's.
    final = [v for v in read("read_committed", 141) if v.startswith(prefix + "-")]
    check(f"{prefix}: the fenced producer's records are aborted",
          len(final) == 141 and not any("zombie" in v for v in final) and f"{prefix}-successor" in final
          and sum(1 for v in final if "-out-" in v) == 10,
          f"{len(final)} {[v for v in final if 'zombie' in v][:2]}")


def raw_call(server, key, version, body, port=None):
    """One non-flexible request (header v1) by hand, to `port` (the
    server's client port by default); the response body after the
    correlation id."""
    import struct
    client = b"brook-test"
    frame = struct.pack(">hhih", key, version, 11, len(client)) + client + body
    with socket.create_connection(("127.0.0.1", port or server.port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
    return data[4:]


def wire_string(v):
    import struct
    return struct.pack(">h", -1) if v is None else struct.pack(">h", len(v)) + v.encode()


def describe_log_dirs(server):
    """DescribeLogDirs v1 for every partition, by hand (none of the Python
    clients here has it): [(topic, partition, size)]."""
    import struct
    r = WireReader(raw_call(server, 35, 1, struct.pack(">i", -1)))
    r.take(">i")  # throttle time
    out = []
    (dirs,) = r.take(">i")
    for _ in range(dirs):
        r.take(">h")
        r.string()
        (topics,) = r.take(">i")
        for _ in range(topics):
            name = r.string()
            (parts,) = r.take(">i")
            for _ in range(parts):
                index, size, _lag, _future = r.take(">iqq?")
                out.append((name, index, size))
    return out


def client_quota_checks(server):
    """AlterClientQuotas v0 (through the controller) and DescribeClientQuotas
    v0 (from the broker's image), by hand: no Python client here has them."""
    import struct
    string = wire_string
    alter = (struct.pack(">i", 1) + struct.pack(">i", 1) + string("user") + string("alice") +
             struct.pack(">i", 1) + string("producer_byte_rate") + struct.pack(">d?", 1048576.0, False) +
             struct.pack(">?", False))
    _throttle, n, error = WireReader(raw_call(server, 49, 0, alter)).take(">iih")
    check("AlterClientQuotas v0", n == 1 and error == 0, f"entries {n} error {error}")

    def describe(components, strict):
        body = struct.pack(">i", len(components))
        for type_, match_type, match in components:
            body += string(type_) + struct.pack(">b", match_type) + string(match)
        r = WireReader(raw_call(server, 48, 0, body + struct.pack(">?", strict)))
        _throttle, error = r.take(">ih")
        r.string()
        (entries,) = r.take(">i")
        out = []
        for _ in range(max(entries, 0)):
            (parts,) = r.take(">i")
            entity = tuple((r.string(), r.string()) for _ in range(parts))
            (nvalues,) = r.take(">i")
            values = {}
            for _ in range(nvalues):
                k = r.string()
                values[k] = r.take(">d")[0]
            out.append((entity, values))
        return error, entries, out
    want = [((("user", "alice"),), {"producer_byte_rate": 1048576.0})]
    deadline = time.time() + 10
    got = describe([("user", 0, "alice")], True)
    while got[2] != want and time.time() < deadline:
        time.sleep(0.1)
        got = describe([("user", 0, "alice")], True)
    check("DescribeClientQuotas v0 finds the quota set", got == (0, 1, want), str(got))
    bad = describe([("user", 0, None)], False)
    check("DescribeClientQuotas v0 refuses an exact match without a name", bad[0] == 42 and bad[1] == -1, str(bad))


def elect_leaders_checks(server, topic):
    """ElectLeaders v1 (forwarded to the controller), by hand: a single
    node's leaders are all preferred already."""
    import struct
    body = (struct.pack(">b", 0) + struct.pack(">i", 1) + wire_string(topic) +
            struct.pack(">iii", 2, 0, 5) + struct.pack(">i", 30000))
    r = WireReader(raw_call(server, 43, 1, body))
    _throttle, error, topics = r.take(">ihi")
    results = {}
    for _ in range(topics):
        r.string()
        (parts,) = r.take(">i")
        for _ in range(parts):
            partition, code = r.take(">ih")
            r.string()
            results[partition] = code
    check("ElectLeaders v1: preferred leaders need no election; unknown partitions are named",
          error == 0 and results == {0: 84, 5: 3}, f"error {error} results {results}")


def kafka_python_checks(server):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    b = server.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=b)
    admin.create_topics([NewTopic("kp-topic", num_partitions=2, replication_factor=1)])
    check("kafka-python create_topics", "kp-topic" in admin.list_topics())
    p = KafkaProducer(bootstrap_servers=b, acks="all", compression_type="gzip")
    futures = [p.send("kp-topic", key=str(i).encode(), value=f"kp-{i}".encode()) for i in range(200)]
    p.flush()
    metas = [f.get(timeout=10) for f in futures]
    check("kafka-python produce", len(metas) == 200 and all(m.offset >= 0 for m in metas))
    c = KafkaConsumer(bootstrap_servers=b, auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=5000)
    c.assign([TopicPartition("kp-topic", 0), TopicPartition("kp-topic", 1)])
    c.seek_to_beginning()
    got = sorted(m.value.decode() for m in c)
    check("kafka-python consume", got == sorted(f"kp-{i}" for i in range(200)), f"{len(got)}")
    ends = c.end_offsets([TopicPartition("kp-topic", 0), TopicPartition("kp-topic", 1)])
    check("kafka-python end_offsets", sum(ends.values()) == 200, str(ends))
    entries = describe_log_dirs(server)
    check("DescribeLogDirs v1 lists the partitions",
          sorted((n, i) for n, i, size in entries if n == "kp-topic" and size > 0) == [("kp-topic", 0), ("kp-topic", 1)],
          str(entries)[:300])
    c.close()
    p.close()
    # Set for old brokers, kafka-python sends message sets: message format 0
    # (0.9: Produce v1, Fetch v1) and 1 (0.10.1: Produce v2, Fetch v3).
    for version in [(0, 9), (0, 10, 1)]:
        topic = "kp-old-" + "-".join(map(str, version))
        p = KafkaProducer(bootstrap_servers=b, api_version=version, acks="all", compression_type="gzip")
        for i in range(100):
            p.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
        p.flush()
        p.close()
        c = KafkaConsumer(bootstrap_servers=b, api_version=version, auto_offset_reset="earliest",
                          enable_auto_commit=False, consumer_timeout_ms=5000)
        c.assign([TopicPartition(topic, 0)])
        c.seek_to_beginning()
        got = [(m.offset, m.key, m.value) for m in c]
        c.close()
        check(f"kafka-python as for Kafka {version}: message sets in and out",
              got == [(i, b"k%d" % i, b"v%d" % i) for i in range(100)], f"{len(got)} records: {got[:3]}")
    admin.close()
    acl_checks(b)
    client_quota_checks(server)
    elect_leaders_checks(server, "kp-topic")


def acl_checks(bootstrap):
    """ACLs round-trip through the metadata log: created and deleted by the
    controller, described from the broker's image (eventually, so poll)."""
    from kafka.admin import (KafkaAdminClient, ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             ResourcePattern, ResourcePatternFilter, ResourceType)
    made = [ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.TOPIC, "acl-orders")),
            ACL("User:bob", "*", ACLOperation.WRITE, ACLPermissionType.DENY,
                ResourcePattern(ResourceType.TOPIC, "acl-", ACLResourcePatternType.PREFIXED))]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    created = admin.create_acls(made)
    check("kafka-python create_acls", len(created["succeeded"]) == 2 and not created["failed"], str(created))

    def described(name, pattern):
        f = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
                      resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, name, pattern))
        acls, error = admin.describe_acls(f)
        return sorted((a.principal, a.resource_pattern.resource_name, a.operation.name) for a in acls), error

    want = [("User:alice", "acl-orders", "READ"), ("User:bob", "acl-", "WRITE")]
    deadline = time.time() + 10
    got = described("acl-orders", ACLResourcePatternType.MATCH)
    while got[0] != want and time.time() < deadline:
        time.sleep(0.1)
        got = described("acl-orders", ACLResourcePatternType.MATCH)
    check("kafka-python describe_acls MATCH finds the literal and the prefix", got[0] == want, str(got))
    literal = described("acl-orders", ACLResourcePatternType.LITERAL)[0]
    check("kafka-python describe_acls LITERAL", literal == want[:1], str(literal))
    gone = admin.delete_acls([ACLFilter(principal="User:bob", host=None, operation=ACLOperation.ANY,
                                        permission_type=ACLPermissionType.ANY,
                                        resource_pattern=ResourcePatternFilter(ResourceType.ANY, None,
                                                                               ACLResourcePatternType.ANY))])
    check("kafka-python delete_acls", len(gone) == 1 and len(gone[0][1]) == 1, str(gone))
    deadline = time.time() + 10
    while described("acl-orders", ACLResourcePatternType.MATCH)[0] != want[:1] and time.time() < deadline:
        time.sleep(0.1)
    got = described("acl-orders", ACLResourcePatternType.MATCH)
    check("kafka-python describe_acls after delete_acls", got[0] == want[:1], str(got))
    admin.close()


def brook_tools_checks(server):
    """The `brook` client tools (topics, produce, consume, perf) against the
    same server, cross-checked with kcat."""
    b = server.bootstrap

    def brook(*args, input=None):
        return run([BROOK, *args], input=input).decode()

    out = brook("topics", "--bootstrap-server", b, "--create", "--topic", "bt", "--partitions", "3",
                "--config", "retention.ms=3600000")
    check("brook topics --create", out.strip() == "Created topic bt.", out)
    check("brook topics --list", "bt" in brook("topics", "--bootstrap-server", b, "--list").split())
    r = subprocess.run([BROOK, "topics", "--bootstrap-server", b, "--create", "--topic", "bt"], capture_output=True)
    check("brook topics --create refuses an existing topic", r.returncode == 1 and b"TOPIC_ALREADY_EXISTS" in r.stderr,
          r.stderr.decode())
    brook("topics", "--bootstrap-server", b, "--create", "--topic", "bt", "--if-not-exists")
    brook("topics", "--bootstrap-server", b, "--alter", "--topic", "bt", "--partitions", "4",
          "--config", "retention.ms=7200000")
    out = brook("topics", "--bootstrap-server", b, "--describe", "--topic", "bt")
    lines = out.splitlines()
    check("brook topics --describe", lines[0].startswith("Topic: bt\tTopicId: ") and "PartitionCount: 4" in lines[0]
          and "retention.ms=7200000" in lines[0] and len(lines) == 5 and "Leader: 1\tReplicas: 1\tIsr: 1" in lines[1],
          out)
    with tempfile.TemporaryDirectory() as bad:
        r = subprocess.run([BROOK, "server", "--data-dir", os.path.join(bad, "data"), "--override",
                            "leader.imbalance.check.interval.seconds=0"], capture_output=True, timeout=30)
        check("brook server refuses leader.imbalance.check.interval.seconds=0",
              r.returncode == 2 and b"leader.imbalance.check.interval.seconds must be >= 1" in r.stderr,
              f"{r.returncode} {r.stderr.decode()[-300:]}")
    out = brook("metadata-quorum", "--bootstrap-server", b, "describe")
    check("brook metadata-quorum --bootstrap-server (DescribeQuorum forwarded by the broker)",
          out.startswith("LeaderId: 1\n") and "CurrentVoters: 1@" in out, out)
    # Keys partition as the Java client's murmur2 does (librdkafka's murmur2_random).
    keyed = "".join(f"k{i}:v{i}\n" for i in range(200)).encode()
    brook("produce", "--bootstrap-server", b, "--topic", "bt", "--property", "parse.key=true",
          "--property", "key.separator=:", input=keyed)
    run(["kcat", "-b", b, "-P", "-t", "bt", "-K:", "-X", "partitioner=murmur2_random"], input=keyed)
    out = run(["kcat", "-b", b, "-C", "-t", "bt", "-e", "-q", "-f", "%k %p\n"]).decode()
    where = {}
    for line in out.splitlines():
        k, part = line.split()
        where.setdefault(k, set()).add(part)
    check("brook produce partitions keys like librdkafka's murmur2", len(where) == 200 and
          all(len(v) == 1 for v in where.values()), str(list(where.items())[:5]))
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
        topic = f"bt-{codec}"
        lines = "".join(f"line {i} {codec}\n" for i in range(300)).encode()
        brook("produce", "--bootstrap-server", b, "--topic", topic, "--compression-codec", codec,
              "--request-required-acks", "all", input=lines)
        got = run(["kcat", "-b", b, "-C", "-t", topic, "-e", "-q"]).decode().splitlines()
        check(f"brook produce {codec}, kcat reads it", sorted(got) == sorted(lines.decode().splitlines()),
              f"{len(got)} lines")
        got = brook("consume", "--bootstrap-server", b, "--topic", topic, "--from-beginning",
                    "--max-messages", "300").splitlines()
        check(f"brook consume {codec}", sorted(got) == sorted(lines.decode().splitlines()), f"{len(got)} lines")
    run(["kcat", "-b", b, "-P", "-t", "bt-one", "-p", "0", "-K:"], input=b"a:1\nb:2\nc:3\n")
    out = brook("consume", "--bootstrap-server", b, "--topic", "bt-one", "--partition", "0", "--offset", "1",
                "--max-messages", "2", "--property", "print.key=true", "--property", "print.offset=true",
                "--property", "key.separator=|")
    check("brook consume --offset with keys and offsets", out == "Offset:1|b|2\nOffset:2|c|3\n", out)
    out = brook("consume", "--bootstrap-server", b, "--topic", "bt-one", "--timeout-ms", "500")
    check("brook consume starts at the end without --from-beginning", out == "", out)
    out = brook("perf", "produce", "--bootstrap-server", b, "--topic", "bt-perf", "--num-records", "20000",
                "--record-size", "512", "--throughput", "-1", "--producer-props", "acks=1", "linger.ms=1")
    check("brook perf produce", "20000 records sent" in out and "99.9th" in out, out)
    out = brook("perf", "consume", "--bootstrap-server", b, "--topic", "bt-perf", "--messages", "20000")
    fields = out.splitlines()[-1].split(", ")
    check("brook perf consume", len(fields) == 6 and fields[4] == "20000", out)
    brook("topics", "--bootstrap-server", b, "--delete", "--topic", "bt")
    check("brook topics --delete", "bt" not in brook("topics", "--bootstrap-server", b, "--list").split())


def delete_records(server, topic, partition, offset):
    """DeleteRecords v0 for one partition, by hand (none of the Python
    clients here has it): (error code, low watermark)."""
    import struct
    body = (struct.pack(">i", 1) + wire_string(topic) + struct.pack(">iiq", 1, partition, offset)
            + struct.pack(">i", 10000))
    r = WireReader(raw_call(server, 21, 0, body))
    r.take(">i")  # throttle_time_ms
    assert r.take(">i") == (1,) and r.string() == topic and r.take(">ii") == (1, partition)
    low, error = r.take(">qh")
    return error, low


def restart_checks(server):
    """Acknowledged data survives a graceful restart and a SIGKILL, and so
    does a log start moved by DeleteRecords."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    for how in [signal.SIGTERM, signal.SIGKILL]:
        topic = f"restart-{how.name}"
        p = Producer({"bootstrap.servers": server.bootstrap, "acks": "all", "enable.idempotence": True})
        acked = []
        for i in range(1000):
            p.produce(topic, value=f"r-{i}".encode(),
                      on_delivery=lambda err, msg: acked.append(msg.offset()) if err is None else None)
        p.flush(30)
        check(f"acked before {how.name}", len(acked) == 1000, f"{len(acked)}")
        deleted = delete_records(server, topic, 0, 100)
        check(f"DeleteRecords before {how.name}", deleted == (0, 100), f"{deleted}")
        server.stop(how)
        server.start()
        seen = read_partition(server.bootstrap, topic, 900, 40)
        check(f"no acknowledged record lost across {how.name}", seen == [f"r-{i}" for i in range(100, 1000)],
              f"{len(seen)} records, from {seen[:1]}")
        c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "unused"})
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), 20)
        c.close()
        check(f"the log start DeleteRecords moved stays across {how.name}", (low, high) == (100, 1000),
              f"{low} {high}")


def connection_checks(server):
    """connections.max.idle.ms (3 s here) closes a silent connection; an
    oversized request (socket.request.max.bytes, 100 MiB) closes it at once."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        t0 = time.time()
        closed = s.recv(1) == b""
        waited = time.time() - t0
        check("idle connection closed after connections.max.idle.ms", closed and 2.5 < waited < 9, f"{waited:.1f}s")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall((200 * 1024 * 1024).to_bytes(4, "big") + b"\x00\x12\x00\x00")
        check("oversized request closes the connection", s.recv(1) == b"")
    import struct
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        # ApiVersions v0 lists Produce from v0 (old librdkafka needs it to
        # compress), and Produce v2 (message sets) is served; a version past
        # the newest closes the connection.
        s.sendall(struct.pack(">ihhih", 10, 18, 0, 1, -1))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        data = s.recv(size, socket.MSG_WAITALL)
        _corr, error, n = struct.unpack_from(">ihi", data, 0)
        ranges = {k: (lo, hi) for k, lo, hi in (struct.unpack_from(">hhh", data, 10 + 6 * i) for i in range(n))}
        check("ApiVersions lists Produce from v0", error == 0 and ranges.get(0, (None,))[0] == 0, f"{ranges.get(0)}")
        body = struct.pack(">hhih", 0, 2, 2, -1) + struct.pack(">hii", 1, 1000, 0)
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        (corr,) = struct.unpack_from(">i", s.recv(size, socket.MSG_WAITALL), 0)
        check("Produce v2 is answered", corr == 2, f"correlation id {corr}")
        body = struct.pack(">hhih", 0, ranges[0][1] + 1, 3, -1) + struct.pack(">hii", 1, 1000, 0)
        s.sendall(struct.pack(">i", len(body)) + body)
        check("a Produce version past the newest closes the connection", s.recv(1) == b"")

    def api_versions_v3(name, version):
        body = struct.pack(">hhih", 18, 3, 3, -1) + b"\x00"  # header v2: no client id, no tags
        for label in (name, version):
            body += bytes([len(label) + 1]) + label
        body += b"\x00"
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            data = s.recv(size, socket.MSG_WAITALL)
        _corr, error = struct.unpack_from(">ih", data, 0)
        return error, data[6] - 1  # error code, number of API keys
    check("ApiVersions v3 from a well-named client", api_versions_v3(b"librdkafka", b"2.0.2")[0] == 0)
    for bad in [(b"bad name", b"1.0"), (b"-lead", b"1.0"), (b"ok", b"1.0-")]:
        got = api_versions_v3(*bad)
        check(f"ApiVersions v3 from {bad} is INVALID_REQUEST", got == (42, 0), f"{got}")


def cluster_checks(work):
    """Three controller processes and three broker processes: a topic of
    three replicas (min.insync.replicas=2) spreads its leaders over the
    brokers and fills its ISRs; transactions commit and abort across them;
    an idempotent acks=all producer keeps
    writing while a partition leader is killed (SIGKILL); every acknowledged
    message is then read back exactly once, and the killed broker, restarted,
    catches up and rejoins the ISR. Last, the active controller is killed
    for good and the brokers carry on with the next one."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster_id = run([BROOK, "random-uuid"]).decode().strip()
    cports = {node: free_port() for node in [1, 2, 3]}
    voters = "controller.quorum.voters=" + ",".join(f"{n}@127.0.0.1:{p}" for n, p in cports.items())
    controllers = []
    for node, cport in cports.items():
        c = Server(os.path.join(work, f"c{node}"), name=f"c{node}", args=[
            "--cluster-id", cluster_id, "--override", "process.roles=controller", "--override", f"node.id={node}",
            "--override", f"listeners=CONTROLLER://127.0.0.1:{cport}", "--override", voters,
            "--override", "broker.session.timeout.ms=3000",
            "--override", "leader.imbalance.check.interval.seconds=2"])
        c.port = cport
        controllers.append(c)
    brokers = {}
    for node in [4, 5, 6]:
        port = free_port()
        b = Server(os.path.join(work, f"b{node}"), name=f"b{node}", args=[
            "--cluster-id", cluster_id, "--override", "process.roles=broker", "--override", f"node.id={node}",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", voters,
            "--override", "replica.lag.time.max.ms=5000"])
        b.port = port
        brokers[node] = b
    procs = controllers + list(brokers.values())
    try:
        for c in controllers:
            c.start(wait_port=c.port)
        for b in brokers.values():
            b.start()
        bootstrap = ",".join(b.bootstrap for b in brokers.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})
        # Replicas are placed on unfenced brokers: wait until all three serve
        # (and every broker's metadata says so: clients ask any of them).
        deadline = time.time() + 30
        seen = set()
        agreeing = 0
        while agreeing < 6 and time.time() < deadline:
            seen = set(admin.list_topics(timeout=10).brokers)
            agreeing = agreeing + 1 if seen == {4, 5, 6} else 0
            time.sleep(0.1)
        check("cluster: three brokers listed", seen == {4, 5, 6}, str(seen))
        topic = "replicated"
        for f in admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3,
                                               config={"min.insync.replicas": "2"})]).values():
            f.result(30)

        def partitions():
            return admin.list_topics(topic, timeout=10).topics[topic].partitions

        def wait_full_isr(what):
            deadline = time.time() + 60
            while time.time() < deadline:
                ps = partitions()
                if len(ps) == 3 and all(sorted(p.isrs) == [4, 5, 6] and p.leader in (4, 5, 6) for p in ps.values()):
                    break
                time.sleep(0.2)
            check(what, len(ps) == 3 and all(sorted(p.isrs) == [4, 5, 6] for p in ps.values()),
                  str({i: (p.leader, p.isrs) for i, p in ps.items()}))

        wait_full_isr("cluster: every partition has three replicas in its ISR")
        leaders = {p.leader for p in partitions().values()}
        check("cluster: leaders spread over the brokers", len(leaders) >= 2, str(leaders))
        # Transactions whose partitions, group coordinator and transaction
        # coordinator are spread over the brokers (markers by WriteTxnMarkers).
        for f in admin.create_topics([NewTopic("txn-replicated", num_partitions=3, replication_factor=3,
                                               config={"min.insync.replicas": "2"})]).values():
            f.result(30)
        txn_checks(bootstrap, "txn-replicated", "cluster")

        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 2, "message.timeout.ms": 60000})
        acked = []
        failed = []

        def cb(err, msg):
            if err is None:
                acked.append(msg.value().decode())
            else:
                failed.append(str(err))
        victim = partitions()[0].leader
        n = 4000
        for i in range(n):
            while True:
                try:
                    p.produce(topic, key=str(i).encode(), value=f"m{i}".encode(), on_delivery=cb)
                    break
                except BufferError:
                    p.poll(0.05)
            if i % 100 == 0:
                p.poll(0.01)
            if i == n // 3:
                p.flush(30)
                brokers[victim].stop(signal.SIGKILL)
        remaining = p.flush(90)
        check("cluster: every message acknowledged across the leader's death", remaining == 0 and not failed and
              len(acked) == n, f"{len(acked)} acked, {remaining} in flight, errors {failed[:3]}")
        deadline = time.time() + 20
        while time.time() < deadline:
            ps = partitions()
            if all(x.leader != victim for x in ps.values()):
                break
            time.sleep(0.2)
        check("cluster: leadership moved off the killed broker", all(x.leader != victim for x in ps.values()),
              str({i: (x.leader, x.isrs) for i, x in ps.items()}))

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.assign([TopicPartition(topic, i, 0) for i in range(3)])
        got = []
        deadline = time.time() + 60
        while len(got) < len(acked) and time.time() < deadline:
            m = c.poll(1.0)
            if m is not None and not m.error():
                got.append(m.value().decode())
        time.sleep(1)
        while True:
            m = c.poll(0.5)
            if m is None:
                break
            if not m.error():
                got.append(m.value().decode())
        c.close()
        missing = set(acked) - set(got)
        check("cluster: no acknowledged message lost", not missing, f"{len(missing)} missing, e.g. {sorted(missing)[:3]}")
        dups = len(got) - len(set(got))
        check("cluster: no message written twice (idempotence across failover)", dups == 0, f"{dups} duplicates")

        brokers[victim].start()
        wait_full_isr("cluster: the restarted broker catches up and rejoins the ISR")
        # auto.leader.rebalance.enable: back in the ISRs, the restarted broker
        # leads its preferred partitions again.
        deadline = time.time() + 30
        while time.time() < deadline:
            ps = partitions()
            if all(p.leader == p.replicas[0] for p in ps.values()):
                break
            time.sleep(0.2)
        check("cluster: leadership moves back to the preferred replicas",
              all(p.leader == p.replicas[0] for p in ps.values()) and
              any(p.leader == victim for p in ps.values()),
              str({i: (p.leader, p.replicas) for i, p in ps.items()}))

        lines = "".join(f"tool-{i}\n" for i in range(500)).encode()
        run([BROOK, "produce", "--bootstrap-server", bootstrap, "--topic", topic], input=lines)
        out = run([BROOK, "consume", "--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning",
                   "--max-messages", str(n + 500)]).decode().splitlines()
        check("cluster: brook produce (idempotent, acks=all) and brook consume read every message once",
              len(out) == n + 500 and len(set(out)) == n + 500 and sum(x.startswith("tool-") for x in out) == 500,
              f"{len(out)} read")

        # Consumer groups across a coordinator's death: __consumer_offsets
        # has three replicas here, so committed offsets survive it.
        def group_read(expected):
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover", "auto.offset.reset": "earliest",
                          "enable.auto.commit": False, "session.timeout.ms": 6000})
            c.subscribe([topic])
            got = []
            deadline = time.time() + 90
            while len(got) < expected and time.time() < deadline:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    got.append(m.value().decode())
            end = time.time() + 2
            while time.time() < end:
                m = c.poll(0.2)
                if m is not None and not m.error():
                    got.append(m.value().decode())
            c.commit(asynchronous=False)
            c.close()
            return got

        first = group_read(n + 500)
        check("cluster: a group consumer reads every message once", len(first) == n + 500 and
              len(set(first)) == n + 500, f"{len(first)} read")
        groups = {g.id: g for g in admin.list_groups(group="failover", timeout=30)}
        coordinator = groups["failover"].broker.id
        check("cluster: the group has a coordinator", coordinator in brokers, str(coordinator))
        brokers[coordinator].stop(signal.SIGKILL)
        later = "".join(f"late-{i}\n" for i in range(100)).encode()
        run([BROOK, "produce", "--bootstrap-server", bootstrap, "--topic", topic], input=later)
        second = group_read(100)
        check("cluster: committed offsets survive the coordinator's death (no message read again)",
              sorted(second) == sorted(f"late-{i}" for i in range(100)), f"{len(second)} read: {second[:3]}")
        brokers[coordinator].start()
        reassignment_checks(work, brokers, bootstrap)
        controller_failover_checks(controllers, bootstrap)
    except BaseException:
        for proc in procs:
            if os.path.exists(proc.log):
                with open(proc.log, "rb") as f:
                    print(f"--- {proc.log} ---\n" + f.read()[-3000:].decode(errors="replace"))
        raise
    finally:
        for proc in reversed(procs):
            try:
                proc.stop()
            except Exception as e:
                print(f"stopping {proc.log}: {e}")


def controller_failover_checks(controllers, bootstrap):
    """The active controller is killed (SIGKILL) and stays down: the other
    two elect a leader, and the brokers, which only observe the quorum and
    are not told of the election, find it by themselves. A topic created
    through them then exists on every broker and takes writes that are read
    back."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    def quorum_leader():
        # Asked of a broker, which forwards DescribeQuorum to the active controller.
        out = run([BROOK, "metadata-quorum", "--bootstrap-server", bootstrap.split(",")[0], "describe"]).decode()
        for line in out.splitlines():
            if line.startswith("LeaderId:"):
                return int(line.split(":")[1])
        return None

    old = quorum_leader()
    check("controller failover: the quorum has a leader", old in (1, 2, 3), str(old))
    controllers[old - 1].stop(signal.SIGKILL)
    started = time.time()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "after-controller-failover"
    error = None
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            for f in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3)]).values():
                f.result(30)
            error = None
            break
        except Exception as e:  # NOT_CONTROLLER, timeouts while the brokers look for the new leader
            error = e
            if "TOPIC_ALREADY_EXISTS" in str(e):
                error = None
                break
            time.sleep(0.5)
    check("controller failover: a topic is created through the brokers once the active controller is gone",
          error is None, repr(error))
    new = quorum_leader()
    check("controller failover: another controller leads", new in (1, 2, 3) and new != old, f"{old} -> {new}")
    seen_by = []
    deadline = time.time() + 30
    while time.time() < deadline and len(seen_by) < 3:
        seen_by = []
        for b in bootstrap.split(","):
            md = AdminClient({"bootstrap.servers": b}).list_topics(topic, timeout=10)
            t = md.topics.get(topic)
            if t is not None and t.error is None and len(t.partitions) == 2 and \
                    all(p.leader >= 0 for p in t.partitions.values()):
                seen_by.append(b)
        if len(seen_by) < 3:
            time.sleep(0.2)
    check("controller failover: every broker's metadata has the new topic", len(seen_by) == 3, str(seen_by))
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    acked = []
    for i in range(100):
        p.produce(topic, value=f"f{i}".encode(), partition=0,
                  on_delivery=lambda err, msg: err is None and acked.append(msg.value().decode()))
    p.flush(60)
    got = read_partition(bootstrap, topic, 100, 30)
    check("controller failover: writes to the new topic are acknowledged and read back",
          len(acked) == 100 and sorted(got) == sorted(acked), f"{len(acked)} acked, {len(got)} read")
    print(f"controller failover: controller {old} killed, {new} leads; topic served after "
          f"{time.time() - started:.1f} s", flush=True)


def reassignment_checks(work, brokers, bootstrap):
    """`brook reassign-partitions` moves a partition of one replica on one
    broker to two others while it is read and written: every message is
    there afterwards, the old broker's copy is deleted, and --verify,
    --list and --cancel say what Kafka's tool says."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "moved"

    def all_brokers_serve():
        deadline = time.time() + 30
        while time.time() < deadline and set(admin.list_topics(timeout=10).brokers) != {4, 5, 6}:
            time.sleep(0.2)

    all_brokers_serve()  # (one was just restarted)
    for f in admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[4]])]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2})
    acked = []
    failed = []

    def cb(err, msg):
        (acked if err is None else failed).append(msg.value().decode() if err is None else str(err))

    def produce(first, count):
        for i in range(first, first + count):
            p.produce(topic, value=f"r{i}".encode(), on_delivery=cb)
            if i % 50 == 0:
                p.poll(0)
        return p.flush(60)

    produce(0, 300)
    plan = os.path.join(work, "plan.json")
    with open(plan, "w") as f:
        f.write('{"version": 1, "partitions": [{"topic": "moved", "partition": 0, "replicas": [5, 6], '
                '"log_dirs": ["any", "any"]}]}')

    def tool(action, file=plan, ok=True):
        cmd = [BROOK, "reassign-partitions", "--bootstrap-server", bootstrap, action]
        if file is not None:
            cmd += ["--reassignment-json-file", file]
        r = subprocess.run(cmd, capture_output=True, timeout=60)
        if ok and r.returncode != 0:
            raise RuntimeError(f"{cmd} exited {r.returncode}: {r.stderr.decode(errors='replace')}")
        return r.returncode, r.stdout.decode(), r.stderr.decode()

    # With broker 6 stopped the move cannot complete: it shows as in
    # progress, then is cancelled.
    brokers[6].stop()
    _, out, _ = tool("--execute")
    check("reassign: --execute prints the current assignment for rollback and starts the move",
          '{"version":1,"partitions":[{"topic":"moved","partition":0,"replicas":[4],"log_dirs":["any"]}]}' in out
          and "Successfully started partition reassignment for moved-0" in out, out)
    check("reassign: --verify while a new replica is down",
          "Reassignment of partition moved-0 is still in progress." in tool("--verify")[1])
    listed = tool("--list", file=None)[1]
    check("reassign: --list shows the adding and removing replicas",
          "moved-0: replicas: 5,6,4. adding: 5,6. removing: 4." in listed, listed)
    deadline = time.time() + 20
    while True:  # (until the broker asked has the reassignment's metadata)
        described = run([BROOK, "topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic]).decode()
        if "Replicas: 5,6,4" in described or time.time() > deadline:
            break
        time.sleep(0.2)
    check("reassign: brook topics --describe shows them too", "ReplicationFactor: 2" in described and
          "Replicas: 5,6,4" in described and "Adding Replicas: 5,6\tRemoving Replicas: 4" in described, described)
    check("reassign: --cancel", "Successfully cancelled partition reassignment for: moved-0" in tool("--cancel")[1])
    deadline = time.time() + 20
    while True:  # (until the broker asked has applied it)
        meta = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
        if meta.replicas == [4] or time.time() > deadline:
            break
        time.sleep(0.2)
    check("reassign: cancelled, the partition is back on broker 4", meta.replicas == [4] and meta.leader == 4,
          f"{meta.replicas} {meta.leader}")
    stray = os.path.join(brokers[5].data_dir, "moved-0")
    deadline = time.time() + 20
    while os.path.exists(stray) and time.time() < deadline:
        time.sleep(0.1)
    check("reassign: the replica the cancellation took out is deleted", not os.path.exists(stray), stray)
    brokers[6].start()
    all_brokers_serve()

    tool("--execute")
    remaining = produce(300, 300)  # written while the replicas move
    deadline = time.time() + 60
    status = ""
    while time.time() < deadline:
        status = tool("--verify")[1]
        if "Reassignment of partition moved-0 is completed." in status:
            break
        time.sleep(0.2)
    check("reassign: --verify reports the move completed", "is completed." in status, status)
    check("reassign: every message written during the move acknowledged", remaining == 0 and not failed and
          len(acked) == 600, f"{len(acked)} acked, {remaining} in flight, errors {failed[:3]}")
    deadline = time.time() + 20
    while True:
        meta = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
        if sorted(meta.replicas) == [5, 6] and sorted(meta.isrs) == [5, 6] or time.time() > deadline:
            break
        time.sleep(0.2)
    check("reassign: the partition lives on brokers 5 and 6", sorted(meta.replicas) == [5, 6] and
          sorted(meta.isrs) == [5, 6] and meta.leader in (5, 6), f"{meta.replicas} {meta.isrs} {meta.leader}")
    gone = os.path.join(brokers[4].data_dir, "moved-0")
    deadline = time.time() + 20
    while os.path.exists(gone) and time.time() < deadline:
        time.sleep(0.1)
    check("reassign: the old broker deleted its copy", not os.path.exists(gone), gone)
    got = read_partition(bootstrap, topic, 600, 30)
    check("reassign: every message read back once from the new replicas", sorted(got) == sorted(acked),
          f"{len(got)} read, {len(set(got))} distinct")
    check("reassign: --list finds none in progress", tool("--list", file=None)[1].strip() ==
          "No partition reassignments found.")
    check("reassign: --cancel with none in progress", "None of the specified partition reassignments are active."
          in tool("--cancel")[1])
    bad = os.path.join(work, "bad-plan.json")
    with open(bad, "w") as f:
        f.write('{"version": 1, "partitions": [{"topic": "moved", "partition": 0, "replicas": [5, 9]}]}')
    code, _, err = tool("--execute", file=bad, ok=False)
    check("reassign: an unregistered broker is refused", code == 1 and "INVALID_REPLICA_ASSIGNMENT" in err, err)
    with open(bad, "w") as f:
        f.write('{"version": 1, "partitions": [{"topic": "moved", "partition": 0, "replicas": [5, ')
    code, _, err = tool("--execute", file=bad, ok=False)
    check("reassign: a malformed plan is a usage error", code == 2 and "JSON" in err, err)


def find_coordinator(server, port, group):
    """FindCoordinator v1 for a group, sent to `port`: (node, host, port)."""
    import struct
    r = WireReader(raw_call(server, 10, 1, wire_string(group) + struct.pack(">b", 0), port))
    _throttle, error = r.take(">ih")
    r.string()  # error message
    (node,) = r.take(">i")
    host = r.string()
    (coordinator_port,) = r.take(">i")
    check(f"FindCoordinator on port {port} answered", error == 0, f"error {error}")
    return node, host, coordinator_port


def unfenced_stop_checks(work):
    """A broker whose controller never answers is not unfenced: it holds
    its clients' connections unanswered (in the listen backlog), and
    SIGTERM stops it at once, exit code 0, without the 2 s the listeners
    are given to end their connections once they serve."""
    import struct
    cluster_id = run([BROOK, "random-uuid"]).decode().strip()
    server = Server(os.path.join(work, "unfenced-data"), name="unfenced")
    server.args = [
        "--cluster-id", cluster_id, "--override", "process.roles=broker", "--override", "node.id=4",
        "--override", f"listeners=PLAINTEXT://127.0.0.1:{server.port}",
        "--override", f"controller.quorum.voters=1@127.0.0.1:{server.controller_port}"]
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=1) as s:
            s.sendall(struct.pack(">ihhih", 10, 18, 0, 1, -1))  # ApiVersions v0
            try:
                answer = s.recv(4)
            except socket.timeout:
                answer = None
            check("a broker not yet unfenced leaves requests unanswered", answer is None, f"{answer}")
            t0 = time.time()
            server.stop()  # raises unless it exits 0 within 20 s
            took = time.time() - t0
            check("a broker not yet unfenced stops at once on SIGTERM", took < 2, f"{took:.2f}s")
            s.settimeout(10)
            try:
                ended = s.recv(1) == b""
            except ConnectionResetError:
                ended = True
            check("its clients' connections end with it", ended)
    finally:
        if server.proc is not None:
            server.proc.kill()
            server.proc.wait()


def listener_checks(work):
    """Two client listeners, each advertised at its own address, with the
    inter-broker one named: clients are told of the listener they came in
    on (Metadata, FindCoordinator), and produce, consume, transactions and
    groups work through either. Listeners Brook cannot serve as asked
    (TLS, SASL) stop the server at start with a clear error."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer, KafkaProducer

    server = Server(os.path.join(work, "listeners-data"), name="listeners")
    internal, external = server.port, free_port()
    server.args = [
        "--override", f"listeners=INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external},"
                      f"CONTROLLER://127.0.0.1:{server.controller_port}",
        "--override", f"advertised.listeners=INTERNAL://127.0.0.1:{internal},EXTERNAL://localhost:{external}",
        "--override", "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "--override", "inter.broker.listener.name=INTERNAL"]
    server.start()
    try:
        for port, host in [(internal, "127.0.0.1"), (external, "localhost")]:
            md = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=10)
            brokers = {k: (v.host, v.port) for k, v in md.brokers.items()}
            check(f"Metadata on port {port} advertises that listener", brokers == {1: (host, port)}, str(brokers))
        external_bootstrap = f"localhost:{external}"
        admin = AdminClient({"bootstrap.servers": external_bootstrap})
        for f in admin.create_topics([NewTopic("ext-topic", 2, 1)]).values():
            f.result(20)
        p = KafkaProducer(bootstrap_servers=external_bootstrap, acks="all")
        for i in range(50):
            p.send("ext-topic", value=b"e%d" % i)
        p.flush()
        p.close()
        c = Consumer({"bootstrap.servers": external_bootstrap, "group.id": "ext-group",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe(["ext-topic"])
        got = []
        deadline = time.time() + 30
        while len(got) < 50 and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        c.commit(asynchronous=False)
        c.close()
        check("a group consumes through the second listener", sorted(got) == sorted(b"e%d" % i for i in range(50)),
              f"{len(got)}")
        check("FindCoordinator answers with the listener asked on",
              find_coordinator(server, external, "ext-group") == (1, "localhost", external)
              and find_coordinator(server, internal, "ext-group") == (1, "127.0.0.1", internal))
        kc = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{internal}", group_id="ext-group",
                           enable_auto_commit=False)
        from kafka import TopicPartition
        committed = sum(kc.committed(TopicPartition("ext-topic", i)) or 0 for i in range(2))
        kc.close()
        check("the group's offsets read through the inter-broker listener", committed == 50, str(committed))
        txn_checks(external_bootstrap, "ext-txn", "listeners")
        pr = Producer({"bootstrap.servers": f"127.0.0.1:{internal}"})
        pr.produce("ext-topic", b"i")
        check("produce through the inter-broker listener", pr.flush(10) == 0)
    finally:
        server.stop()

    plain_jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                  'user_alice="alice-secret";')
    refusals = [
        ("an SSL listener without a key store",
         [f"listeners=SSL://127.0.0.1:{free_port()},CONTROLLER://127.0.0.1:{free_port()}"],
         "listener SSL: a TLS listener needs a key store"),
        ("a SASL listener with Kafka's default mechanism (GSSAPI)",
         [f"listeners=PLAINTEXT://127.0.0.1:{free_port()},SASL_PLAINTEXT://127.0.0.1:{free_port()},"
          f"CONTROLLER://127.0.0.1:{free_port()}"],
         "SASL mechanism GSSAPI is not supported"),
        ("a SASL listener without users",
         [f"listeners=PLAINTEXT://127.0.0.1:{free_port()},SASL_PLAINTEXT://127.0.0.1:{free_port()},"
          f"CONTROLLER://127.0.0.1:{free_port()}", "sasl.enabled.mechanisms=PLAIN"],
         "listener.name.sasl_plaintext.plain.sasl.jaas.config is not set"),
        ("a SASL listener with a malformed JAAS entry",
         [f"listeners=PLAINTEXT://127.0.0.1:{free_port()},SASL_PLAINTEXT://127.0.0.1:{free_port()},"
          f"CONTROLLER://127.0.0.1:{free_port()}", "sasl.enabled.mechanisms=PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config=" + plain_jaas[:-1]],
         "does not end with ';'"),
        ("a SASL inter-broker listener with Kafka's default mechanism (GSSAPI)",
         [f"listeners=SASL_PLAINTEXT://127.0.0.1:{free_port()},CONTROLLER://127.0.0.1:{free_port()}",
          "sasl.enabled.mechanisms=PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config=" + plain_jaas],
         "sasl.mechanism.inter.broker.protocol is GSSAPI"),
        ("a SASL inter-broker listener with no login for the brokers",
         [f"listeners=SASL_PLAINTEXT://127.0.0.1:{free_port()},CONTROLLER://127.0.0.1:{free_port()}",
          "sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config=" + plain_jaas],
         "needs the username and password brokers log in with"),
        ("an SSL listener mapped by name, without a key store",
         [f"listeners=PLAINTEXT://127.0.0.1:{free_port()},CONTROLLER://127.0.0.1:{free_port()}",
          "listener.security.protocol.map=PLAINTEXT:SSL,CONTROLLER:PLAINTEXT"],
         "listener PLAINTEXT: a TLS listener needs a key store"),
        ("two listeners and no inter-broker one",
         [f"listeners=A://127.0.0.1:{free_port()},B://127.0.0.1:{free_port()},CONTROLLER://127.0.0.1:{free_port()}",
          "listener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT,CONTROLLER:PLAINTEXT"],
         "inter.broker.listener.name"),
        ("a listener without a protocol", [f"listeners=BROKER://127.0.0.1:{free_port()},CONTROLLER://127.0.0.1:{free_port()}"],
         "no security protocol for listener BROKER"),
    ]
    for name, overrides, message in refusals:
        cmd = [BROOK, "server", "--data-dir", os.path.join(work, "refused-data")]
        for o in overrides:
            cmd += ["--override", o]
        r = subprocess.run(cmd, capture_output=True, timeout=30)
        err = r.stderr.decode(errors="replace")
        check(f"{name} is refused at start", r.returncode != 0 and message in err, f"exit {r.returncode}: {err[-300:]}")


def run_with_server(prefix, body, extra_args=(), done="all client checks passed"):
    """Runs body(server, work) against a fresh single-node `brook server` in
    a temporary directory; prints the server's log tail when it fails."""
    work = tempfile.mkdtemp(prefix=prefix)
    server = Server(os.path.join(work, "data"))
    server.args += list(extra_args)
    ok = False
    watchdog = start_watchdog(server)
    try:
        server.start()
        body(server, work)
        ok = True
    finally:
        try:
            server.stop()
        except Exception as e:  # the failure that matters is reported below
            print(f"stopping: {e}")
        if watchdog is not None:
            watchdog.cancel()
        if not ok:
            print_log_tail(server)
        shutil.rmtree(work, ignore_errors=True)
    print(done)


def print_log_tail(server, size=6000):
    print_file_tail(server.log, "server log", size)


def print_file_tail(path, title, size):
    with open(path, "rb") as f:
        tail = f.read()[-size:].decode(errors="replace")
    print(f"--- {title} tail ---\n" + tail, flush=True)


def start_watchdog(*servers, files=()):
    """When BROOK_TEST_TIMEOUT (seconds, ctest's timeout for the test) is
    set: 10 s before it runs out, prints every Python thread's stack (a
    client call that never returns shows where), each server's log tail and
    the tails of `files` ((path, title) pairs), stops the servers and exits
    non-zero, rather than being killed without a word."""
    limit = os.environ.get("BROOK_TEST_TIMEOUT")
    if not limit:
        return None

    def fire():
        print(f"--- no end after {float(limit) - 10:.0f} s: Python stacks ---", flush=True)
        faulthandler.dump_traceback(file=sys.stdout, all_threads=True)
        sys.stdout.flush()
        try:
            for server in servers:
                print_file_tail(server.log, f"{server.log}", 12000 // len(servers))
            for path, title in files:
                print_file_tail(path, title, 6000)
            for proc in STARTED:
                if proc.poll() is None:
                    proc.kill()
        finally:
            os._exit(1)
    timer = threading.Timer(max(float(limit) - 10, 1), fire)
    timer.daemon = True
    timer.start()
    return timer


def main():
    def checks(server, work):
        kcat_checks(server)
        confluent_checks(server)
        kafka_python_checks(server)
        txn_checks(server.bootstrap, "cf-topic", "single")
        brook_tools_checks(server)
        restart_checks(server)
        connection_checks(server)
        server.stop()
        unfenced_stop_checks(work)
        listener_checks(work)
        cluster_checks(work)

    run_with_server("brook-clients-", checks)


if __name__ == "__main__":
    main()
