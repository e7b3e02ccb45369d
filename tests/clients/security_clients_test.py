#!/usr/bin/python3
"""Security protocols with real Kafka clients against real `brook server`
processes on loopback ports: SASL PLAIN and SCRAM (SASL_PLAINTEXT) and TLS
(SSL and SASL_SSL, with client certificates).

Usage: security_clients_test.py PATH_TO_BROOK

kcat, confluent-kafka (librdkafka) and kafka-python authenticate, produce,
consume and commit transactions; wrong passwords, untrusted certificates
and clients that skip the handshake get nothing; Brook's own tools connect
the same ways. Each check prints "ok <name>" or raises.
"""
import os
import socket
import ssl
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker_clients_test as base  # noqa: E402  (Server, run, check)


def consume_values(consumer, topic, want, timeout=30):
    """Up to `want` values from `topic` through `consumer` (subscribed in
    its group), polling for at most `timeout` seconds; closes it."""
    consumer.subscribe([topic])
    got = []
    deadline = time.time() + timeout
    while len(got) < want and time.time() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    consumer.close()
    return got


def transaction_round_trip(conf, name):
    """Commits a transaction of five records (b"t0".."t4", partition 0 of
    topic NAME-topic, transactional.id NAME) with confluent-kafka's
    settings `conf` and reads them back read_committed: the values read."""
    from confluent_kafka import Consumer, Producer
    p = Producer(dict(conf, **{"transactional.id": name}))
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(f"{name}-topic", b"t%d" % i, partition=0)
    p.commit_transaction(30)
    return consume_values(Consumer(dict(conf, **{"group.id": f"{name}-reader", "auto.offset.reset": "earliest",
                                                 "isolation.level": "read_committed"})), f"{name}-topic", 5)


def kafka_python_round_trip(kp, topic, count):
    """Writes b"k0".. to partition 0 of `topic` with kafka-python's
    producer and reads that partition back from the start, both with the
    settings `kp`."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    producer = KafkaProducer(**kp)
    for i in range(count):
        producer.send(topic, b"k%d" % i, partition=0)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(**kp, auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    values = [m.value for m in consumer]
    consumer.close()
    return values


def kcat_checks(bootstrap, mechanism, topic, wrong_password, refusal):
    """kcat logs in to the SASL_PLAINTEXT listener at `bootstrap` as alice
    (password alice-secret) with `mechanism`, produces three lines to
    `topic` and reads them back; with `wrong_password` it is refused and
    says `refusal`."""
    kcat = ["kcat", "-b", bootstrap, "-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanisms={mechanism}",
            "-X", "sasl.username=alice"]
    base.run(kcat + ["-X", "sasl.password=alice-secret", "-P", "-t", topic, "-p", "0"], input=b"one\ntwo\nthree\n")
    out = base.run(kcat + ["-X", "sasl.password=alice-secret", "-C", "-t", topic, "-o", "beginning", "-e",
                           "-f", "%s\n"])
    base.check(f"kcat authenticates with {mechanism}", out.split() == [b"one", b"two", b"three"], str(out))
    r = subprocess.run(kcat + ["-X", f"sasl.password={wrong_password}", "-L", "-m", "5"], capture_output=True,
                       timeout=30)
    err = r.stderr.decode(errors="replace")
    base.check(f"kcat with a wrong password is refused ({mechanism})", r.returncode != 0 and refusal in err,
               f"exit {r.returncode}: {err[-300:]}")


def sasl_checks(work):
    """A SASL_PLAINTEXT listener with PLAIN users beside the PLAINTEXT one:
    kcat, confluent-kafka (SaslHandshake v1 and SaslAuthenticate) and
    kafka-python (SaslHandshake v0 and a bare token) authenticate, produce
    and consume; a wrong password, or a client that does not authenticate,
    gets nothing; DescribeConfigs does not show the users' passwords."""
    import struct
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, ConfigResource

    server = base.Server(os.path.join(work, "sasl-data"), name="sasl")
    secure = base.free_port()
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
    server.args = [
        "--override", f"listeners=PLAINTEXT://127.0.0.1:{server.port},SECURE://127.0.0.1:{secure},"
                      f"CONTROLLER://127.0.0.1:{server.controller_port}",
        "--override", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "--override", "listener.name.secure.sasl.enabled.mechanisms=PLAIN",
        "--override", "listener.name.secure.plain.sasl.jaas.config=" + jaas]
    server.start()
    try:
        bootstrap = f"127.0.0.1:{secure}"
        kcat_checks(bootstrap, "PLAIN", "sasl-kcat", "wrong", "Invalid username or password")

        conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                "sasl.username": "admin", "sasl.password": "admin-secret"}
        p = Producer(dict(conf, **{"enable.idempotence": True}))
        for i in range(20):
            p.produce("sasl-cf", b"c%d" % i)
        base.check("confluent-kafka produces over SASL", p.flush(20) == 0)
        got = consume_values(Consumer(dict(conf, **{"group.id": "sasl-group", "auto.offset.reset": "earliest"})),
                             "sasl-cf", 20)
        base.check("confluent-kafka consumes in a group over SASL", sorted(got) == sorted(b"c%d" % i for i in range(20)),
              f"{len(got)}")

        kp = dict(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                  sasl_plain_username="alice", sasl_plain_password="alice-secret")
        values = kafka_python_round_trip(kp, "sasl-kp", 10)
        base.check("kafka-python authenticates with a bare PLAIN token", values == [b"k%d" % i for i in range(10)],
              str(values[:3]))

        # No authentication: a Metadata request on the SASL listener closes
        # the connection unanswered.
        client = b"brook-test"
        frame = struct.pack(">hhih", 3, 1, 11, len(client)) + client + struct.pack(">i", -1)
        with socket.create_connection(("127.0.0.1", secure), timeout=10) as sock:
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            answer = sock.recv(4)
        base.check("a request before authenticating closes the connection", answer == b"", str(answer))
        # A bare token too large for an unauthenticated client closes it too.
        with socket.create_connection(("127.0.0.1", secure), timeout=10) as sock:
            sock.sendall(struct.pack(">i", 64 << 20))
            answer = sock.recv(4)
        base.check("an oversized frame before authenticating closes the connection", answer == b"", str(answer))

        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        resource = ConfigResource("broker", "1")
        entries = admin.describe_configs([resource])[resource].result(20)
        jaas_entry = entries.get("listener.name.secure.plain.sasl.jaas.config")
        base.check("DescribeConfigs hides the JAAS configuration",
              jaas_entry is not None and jaas_entry.value is None and jaas_entry.is_sensitive,
              str(jaas_entry and (jaas_entry.value, jaas_entry.is_sensitive)))
    finally:
        server.stop()

    # SASL only: the broker logs in to itself (transaction markers) with
    # the listener's username and password; Brook's own tools log in too.
    only = base.Server(os.path.join(work, "sasl-only-data"), name="sasl-only")
    only.args = [
        "--override", f"listeners=SASL_PLAINTEXT://127.0.0.1:{only.port},CONTROLLER://127.0.0.1:{only.controller_port}",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", "sasl.mechanism.inter.broker.protocol=PLAIN",
        "--override", "listener.name.sasl_plaintext.plain.sasl.jaas.config=" + jaas]
    only.start()
    try:
        conf = {"bootstrap.servers": only.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                "sasl.username": "alice", "sasl.password": "alice-secret"}
        got = transaction_round_trip(conf, "sasl-txn")
        base.check("a transaction commits on a SASL-only broker", got == [b"t%d" % i for i in range(5)], str(got))
        props = ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", "sasl.username=alice",
                 "sasl.password=alice-secret"]
        produce = [base.BROOK, "produce", "--bootstrap-server", only.bootstrap, "--topic", "sasl-tools"]
        for prop in props:
            produce += ["--producer-property", prop]
        base.run(produce, input=b"x\ny\n")
        consume = [base.BROOK, "consume", "--bootstrap-server", only.bootstrap, "--topic", "sasl-tools",
                   "--from-beginning", "--max-messages", "2", "--consumer-property",
                   'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                   'username="alice" password="alice-secret";']
        out = base.run(consume)
        base.check("brook produce and consume log in with SASL PLAIN", out.split() == [b"x", b"y"], str(out))
        r = subprocess.run(produce[:-1] + ["sasl.password=wrong"], input=b"z\n", capture_output=True, timeout=60)
        err = r.stderr.decode(errors="replace")
        base.check("brook produce with a wrong password fails at once",
              r.returncode != 0 and "SASL_AUTHENTICATION_FAILED" in err, f"exit {r.returncode}: {err[-300:]}")
    finally:
        only.stop()


def scram_checks(work):
    """A SASL_PLAINTEXT listener with SCRAM-SHA-256 and SCRAM-SHA-512 beside
    the PLAINTEXT one: `brook configs` makes and describes the users'
    credentials (AlterUserScramCredentials, DescribeUserScramCredentials)
    as kafka-configs does; kcat, confluent-kafka (SaslAuthenticate),
    kafka-python (bare tokens) and Brook's own tools log in with them; a
    wrong password, and a deleted credential, are refused. Then a
    SCRAM-only node whose credentials come from `brook format --add-scram`
    and whose broker logs in to itself with SCRAM."""
    from confluent_kafka import Consumer, Producer

    server = base.Server(os.path.join(work, "scram-data"), name="scram")
    secure = base.free_port()
    server.args = [
        "--override", f"listeners=PLAINTEXT://127.0.0.1:{server.port},SECURE://127.0.0.1:{secure},"
                      f"CONTROLLER://127.0.0.1:{server.controller_port}",
        "--override", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "--override", "listener.name.secure.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512"]
    server.start()
    try:
        configs = [base.BROOK, "configs", "--bootstrap-server", server.bootstrap]
        out = base.run(configs + ["--alter", "--add-config",
                                  "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
                                  "SCRAM-SHA-512=[password=alice-512]", "--entity-type", "users",
                                  "--entity-name", "alice"])
        base.check("brook configs adds SCRAM credentials", b"Completed updating config for user alice." in out, str(out))
        base.run(configs + ["--alter", "--add-config", "SCRAM-SHA-512=[password=bob-secret]", "--user", "bob"])
        out = base.run(configs + ["--describe", "--entity-type", "users"])
        base.check("brook configs describes SCRAM credentials",
                   out.decode().splitlines() == [
                       "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, "
                       "SCRAM-SHA-512=iterations=4096",
                       "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096"],
                   str(out))
        r = subprocess.run(configs + ["--alter", "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]",
                                      "--user", "carol"], capture_output=True, timeout=60)
        err = r.stderr.decode(errors="replace")
        base.check("too few SCRAM iterations are refused", r.returncode == 1 and "Too few iterations" in err,
                   f"exit {r.returncode}: {err[-300:]}")

        bootstrap = f"127.0.0.1:{secure}"
        # The SCRAM-SHA-512 password is not the SCRAM-SHA-256 one.
        kcat_checks(bootstrap, "SCRAM-SHA-256", "scram-kcat", "alice-512",
                    "invalid credentials with SASL mechanism SCRAM-SHA-256")

        # brook configs on topic configs too (IncrementalAlterConfigs).
        base.run(configs + ["--alter", "--entity-type", "topics", "--entity-name", "scram-kcat", "--add-config",
                            "retention.ms=100000,cleanup.policy=[compact,delete]"])
        out = base.run(configs + ["--describe", "--topic", "scram-kcat"]).decode()
        base.check("brook configs sets topic configs",
                   "Dynamic configs for topic scram-kcat are:" in out and "  retention.ms=100000 " in out
                   and "  cleanup.policy=compact,delete " in out, out)
        base.run(configs + ["--alter", "--topic", "scram-kcat", "--delete-config", "retention.ms"])
        out = base.run(configs + ["--describe", "--topic", "scram-kcat"]).decode()
        base.check("brook configs deletes topic configs", "retention.ms" not in out and "cleanup.policy" in out, out)
        # A broker's: only its own dynamic configs are listed, as kafka-configs
        # lists them (not the static ones of its command line).
        base.run(configs + ["--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config",
                            "log.retention.ms=123456"])
        out = base.run(configs + ["--describe", "--broker", "1"]).decode()
        base.check("brook configs sets and describes a broker's dynamic configs", out.splitlines() == [
            "Dynamic configs for broker 1 are:",
            "  log.retention.ms=123456 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=123456}"], out)
        out = base.run(configs + ["--describe", "--user", "carol"])
        base.check("a user without SCRAM credentials is described with nothing", out == b"", str(out))

        conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "bob-secret"}
        p = Producer(dict(conf, **{"enable.idempotence": True}))
        for i in range(20):
            p.produce("scram-cf", b"c%d" % i)
        base.check("confluent-kafka produces with SCRAM-SHA-512", p.flush(20) == 0)
        got = consume_values(Consumer(dict(conf, **{"group.id": "scram-group", "auto.offset.reset": "earliest"})),
                             "scram-cf", 20)
        base.check("confluent-kafka consumes in a group with SCRAM-SHA-512",
                   sorted(got) == sorted(b"c%d" % i for i in range(20)), f"{len(got)}")

        kp = dict(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                  sasl_plain_username="alice", sasl_plain_password="alice-secret")
        values = kafka_python_round_trip(kp, "scram-kp", 10)
        base.check("kafka-python authenticates with SCRAM-SHA-256 (bare tokens)",
                   values == [b"k%d" % i for i in range(10)], str(values[:3]))

        produce = [base.BROOK, "produce", "--bootstrap-server", bootstrap, "--topic", "scram-tools",
                   "--producer-property", "security.protocol=SASL_PLAINTEXT",
                   "--producer-property", "sasl.mechanism=SCRAM-SHA-512",
                   "--producer-property", "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
                                          'required username="alice" password="alice-512";']
        base.run(produce, input=b"x\ny\n")
        consume = [base.BROOK, "consume", "--bootstrap-server", bootstrap, "--topic", "scram-tools",
                   "--from-beginning", "--max-messages", "2", "--consumer-property", "security.protocol=SASL_PLAINTEXT",
                   "--consumer-property", "sasl.mechanism=SCRAM-SHA-256", "--consumer-property", "sasl.username=alice",
                   "--consumer-property", "sasl.password=alice-secret"]
        out = base.run(consume)
        base.check("brook produce and consume log in with SCRAM", out.split() == [b"x", b"y"], str(out))

        base.run(configs + ["--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type", "users",
                            "--entity-name", "alice"])
        out = base.run(configs + ["--describe", "--user", "alice"])
        base.check("a deleted SCRAM credential is no longer described",
                   out.decode().strip() == "SCRAM credential configs for user-principal 'alice' are "
                                           "SCRAM-SHA-256=iterations=8192", str(out))
        r = subprocess.run(produce, input=b"z\n", capture_output=True, timeout=60)
        err = r.stderr.decode(errors="replace")
        base.check("a deleted SCRAM credential is refused",
                   r.returncode != 0 and "SASL_AUTHENTICATION_FAILED" in err, f"exit {r.returncode}: {err[-300:]}")
    finally:
        server.stop()

    # SCRAM only, brokers logging in to each other with SCRAM too: the
    # credentials come from `brook format --add-scram`, so the broker's
    # own connections (transaction markers) log in from the start.
    data = os.path.join(work, "scram-only-data")
    cluster_id = base.run([base.BROOK, "random-uuid"]).decode().strip()
    base.run([base.BROOK, "format", "--cluster-id", cluster_id, "--node-id", "1", "--data-dir", data,
              "--add-scram", "SCRAM-SHA-256=[name=broker,password=b-secret]",
              "--add-scram", "SCRAM-SHA-512=[name=alice,iterations=8192,password=alice-secret]"])
    only = base.Server(data, name="scram-only")
    only.args = [
        "--override", f"listeners=SASL_PLAINTEXT://127.0.0.1:{only.port},CONTROLLER://127.0.0.1:{only.controller_port}",
        "--override", "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
        "--override", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
        "--override", "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config="
                      'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
                      'password="b-secret";']
    only.start()
    try:
        conf = {"bootstrap.servers": only.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "alice-secret"}
        got = transaction_round_trip(conf, "scram-txn")
        base.check("a transaction commits with SCRAM between brokers, credentials from format",
                   got == [b"t%d" % i for i in range(5)], str(got))
    finally:
        only.stop()


def scram_cluster_checks(work):
    """Three `brook server` processes, each broker and controller, whose
    brokers listen only on SASL_PLAINTEXT with SCRAM-SHA-512 and log in to
    each other with it (credentials from `brook format --add-scram` on every
    node): replica fetchers, AlterPartition and the group coordinator run
    over SCRAM between processes. A topic of three replicas with
    min.insync.replicas=3 takes acks=all writes only when both followers
    fetch over those logins; a group reads them back; a broker stopped and
    started again logs in and rejoins every ISR."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster_id = base.run([base.BROOK, "random-uuid"]).decode().strip()
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
            'password="b-secret";')
    nodes = base.three_nodes(
        work, "scram-cluster-", cluster_id, listener="SASL_PLAINTEXT",
        format_args=["--add-scram", "SCRAM-SHA-512=[name=broker,password=b-secret]",
                     "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]"],
        extra=["--override", "sasl.enabled.mechanisms=SCRAM-SHA-512",
               "--override", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
               "--override", "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=" + jaas])
    try:
        for s in nodes.values():
            s.start()
        bootstrap = ",".join(s.bootstrap for s in nodes.values())
        conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "alice-secret"}
        admin = AdminClient(conf)
        deadline = time.time() + 30
        while time.time() < deadline and set(admin.list_topics(timeout=10).brokers) != {1, 2, 3}:
            time.sleep(0.2)
        for f in admin.create_topics([NewTopic("scram-cluster", 3, 3,
                                               config={"min.insync.replicas": "3"})]).values():
            f.result(30)

        def write(first, count):
            acked = []
            p = Producer(dict(conf, **{"acks": "all", "enable.idempotence": True}))
            for i in range(first, first + count):
                p.produce("scram-cluster", b"s%d" % i,
                          on_delivery=lambda err, m: acked.append(m.value()) if err is None else None)
            left = p.flush(60)
            return acked, left

        acked, left = write(0, 300)
        base.check("acks=all writes with every ISR member fetching over SCRAM", len(acked) == 300 and left == 0,
                   f"{len(acked)} acknowledged, {left} left")

        def full_isr(timeout):
            deadline = time.time() + timeout
            while True:
                parts = admin.list_topics("scram-cluster", timeout=10).topics["scram-cluster"].partitions
                isrs = {i: sorted(p.isrs) for i, p in parts.items()}
                if all(isr == [1, 2, 3] for isr in isrs.values()) or time.time() > deadline:
                    return isrs
                time.sleep(0.3)

        nodes[2].stop()
        nodes[2].start()
        isrs = full_isr(30)
        base.check("a restarted broker logs in to the others with SCRAM and rejoins every ISR",
                   all(isr == [1, 2, 3] for isr in isrs.values()), str(isrs))
        acked, left = write(300, 100)
        base.check("acks=all writes after the restart", len(acked) == 100 and left == 0,
                   f"{len(acked)} acknowledged, {left} left")
        got = consume_values(Consumer(dict(conf, **{"group.id": "scram-cluster-group",
                                                    "auto.offset.reset": "earliest"})), "scram-cluster", 400, 60)
        base.check("a group reads every record back over SCRAM", sorted(got) == sorted(b"s%d" % i for i in range(400)),
                   f"{len(got)} read")
    except Exception:
        for s in nodes.values():
            base.print_log_tail(s, 3000)
        raise
    finally:
        for s in nodes.values():
            s.stop()


def make_certificates(directory):
    """A CA; a server certificate for 127.0.0.1 and localhost (PEM, and in a
    PKCS12 key store with its CA, as keytool makes them); a client
    certificate; and a second CA that signed nothing here."""
    os.makedirs(directory, exist_ok=True)

    def path(name):
        return os.path.join(directory, name)

    def openssl(*args):
        base.run(["openssl", *args])

    for ca in ("ca", "stranger-ca"):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", path(f"{ca}.key"), "-out", path(f"{ca}.pem"), "-days", "2", "-subj", f"/CN=Brook {ca}",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    for name, san in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"), ("client", None)):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", path(f"{name}.key"), "-out", path(f"{name}.csr"), "-subj", f"/CN={name}")
        with open(path(f"{name}.ext"), "w") as f:
            f.write("basicConstraints=CA:FALSE\n" + (san + "\n" if san else ""))
        openssl("x509", "-req", "-in", path(f"{name}.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                "-CAcreateserial", "-days", "2", "-extfile", path(f"{name}.ext"), "-out", path(f"{name}.pem"))
    openssl("pkcs12", "-export", "-inkey", path("server.key"), "-in", path("server.pem"),
            "-certfile", path("ca.pem"), "-name", "broker", "-out", path("server.p12"), "-passout", "pass:ks-secret")
    return path


def tls_checks(work):
    """A broker whose listeners are all TLS: SSL with client certificates
    required (the inter-broker listener: the broker's own transaction
    markers go through it) and SASL_SSL without; its key store is
    PKCS12."""
    from confluent_kafka import Consumer, Producer

    path = make_certificates(os.path.join(work, "tls"))
    server = base.Server(os.path.join(work, "tls-data"), name="tls")
    sasl_port = base.free_port()
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_alice="alice-secret";')
    server.args = [
        "--override", f"listeners=SSL://127.0.0.1:{server.port},SASL_SSL://127.0.0.1:{sasl_port},"
                      f"CONTROLLER://127.0.0.1:{server.controller_port}",
        "--override", "inter.broker.listener.name=SSL",
        "--override", "ssl.keystore.type=PKCS12",
        "--override", "ssl.keystore.location=" + path("server.p12"),
        "--override", "ssl.keystore.password=ks-secret",
        "--override", "ssl.key.password=ks-secret",
        "--override", "ssl.truststore.type=PEM",
        "--override", "ssl.truststore.location=" + path("ca.pem"),
        # Applies to the SSL listener only: a SASL_SSL listener takes its
        # own listener.name.NAME.ssl.client.auth (KIP-684).
        "--override", "ssl.client.auth=required",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", "listener.name.sasl_ssl.plain.sasl.jaas.config=" + jaas]
    server.start()
    try:
        ssl_bootstrap = server.bootstrap
        sasl_bootstrap = f"127.0.0.1:{sasl_port}"
        kcat = ["kcat", "-b", ssl_bootstrap, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + path("ca.pem")]
        with_cert = kcat + ["-X", "ssl.certificate.location=" + path("client.pem"),
                            "-X", "ssl.key.location=" + path("client.key")]
        base.run(with_cert + ["-P", "-t", "tls-kcat", "-p", "0"], input=b"one\ntwo\nthree\n")
        out = base.run(with_cert + ["-C", "-t", "tls-kcat", "-o", "beginning", "-e", "-f", "%s\n"])
        base.check("kcat produces and consumes over TLS with a client certificate",
                   out.split() == [b"one", b"two", b"three"], str(out))
        r = subprocess.run(kcat + ["-L", "-m", "5"], capture_output=True, timeout=30)
        base.check("kcat without a client certificate is refused where one is required", r.returncode != 0,
                   f"exit {r.returncode}: {r.stderr[-300:]}")
        r = subprocess.run(["kcat", "-b", ssl_bootstrap, "-X", "security.protocol=SSL",
                            "-X", "ssl.ca.location=" + path("stranger-ca.pem"), "-L", "-m", "5"],
                           capture_output=True, timeout=30)
        err = r.stderr.decode(errors="replace")
        base.check("kcat refuses a broker whose certificate it does not trust",
                   r.returncode != 0 and "certificate verify failed" in err, f"exit {r.returncode}: {err[-300:]}")

        conf = {"bootstrap.servers": sasl_bootstrap, "security.protocol": "SASL_SSL",
                "ssl.ca.location": path("ca.pem"), "sasl.mechanisms": "PLAIN",
                "sasl.username": "alice", "sasl.password": "alice-secret"}
        p = Producer(dict(conf, **{"enable.idempotence": True}))
        payload = os.urandom(300_000)
        for i in range(20):
            p.produce("tls-cf", b"c%d" % i)
        p.produce("tls-cf", payload, key=b"big")
        base.check("confluent-kafka produces over SASL_SSL", p.flush(20) == 0)
        got = consume_values(Consumer(dict(conf, **{"group.id": "tls-group", "auto.offset.reset": "earliest"})),
                             "tls-cf", 21)
        base.check("confluent-kafka consumes in a group over SASL_SSL",
                   sorted(got) == sorted([b"c%d" % i for i in range(20)] + [payload]), f"{len(got)}")

        # A transaction: the broker writes its markers to itself over the
        # SSL inter-broker listener, presenting its own certificate.
        tconf = {"bootstrap.servers": ssl_bootstrap, "security.protocol": "SSL", "ssl.ca.location": path("ca.pem"),
                 "ssl.certificate.location": path("client.pem"), "ssl.key.location": path("client.key")}
        got = transaction_round_trip(tconf, "tls-txn")
        base.check("a transaction commits over TLS", got == [b"t%d" % i for i in range(5)], str(got))

        kp = dict(bootstrap_servers=sasl_bootstrap, security_protocol="SASL_SSL", ssl_cafile=path("ca.pem"),
                  sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret")
        values = kafka_python_round_trip(kp, "tls-kp", 10)
        base.check("kafka-python produces and consumes over SASL_SSL", values == [b"k%d" % i for i in range(10)],
                   str(values[:3]))

        # A client that speaks Kafka without TLS gets no answer.
        client = b"brook-test"
        frame = struct.pack(">hhih", 18, 0, 1, len(client)) + client
        with socket.create_connection(("127.0.0.1", sasl_port), timeout=10) as sock:
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            answer = sock.recv(4)
        base.check("a plaintext request on a TLS listener is not answered", answer in (b"",) or answer[:1] == b"\x15",
                   str(answer))

        # A connection the broker ends (here: a frame too short to hold a
        # request header) ends with close_notify, as Kafka's broker ends
        # it. OpenSSL 3, as librdkafka uses it, reports a connection cut
        # short as "unexpected eof while reading" (Python's ssl raises
        # SSLEOFError once its default of ignoring that is off); a clean
        # end of stream reads as b"".
        context = ssl.create_default_context(cafile=path("ca.pem"))
        context.options &= ~ssl.OP_IGNORE_UNEXPECTED_EOF
        with socket.create_connection(("127.0.0.1", sasl_port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False) as tls:
                tls.sendall(struct.pack(">i", 2) + b"\xff\xff")
                try:
                    ending = tls.recv(64)
                except (ssl.SSLError, OSError) as e:
                    ending = e
        base.check("the broker ends a TLS connection it closes with close_notify", ending == b"", repr(ending))

        # Brook's own tools: a client certificate on SSL, SASL on SASL_SSL.
        produce = [base.BROOK, "produce", "--bootstrap-server", ssl_bootstrap, "--topic", "tls-tools"]
        for prop in ["security.protocol=SSL", "ssl.ca.location=" + path("ca.pem"),
                     "ssl.certificate.location=" + path("client.pem"), "ssl.key.location=" + path("client.key")]:
            produce += ["--producer-property", prop]
        base.run(produce, input=b"x\ny\n")
        sasl_config = path("sasl-ssl.properties")
        with open(sasl_config, "w") as f:
            f.write("# as Kafka's tools take it\nsecurity.protocol=SASL_SSL\nssl.truststore.type=PEM\n"
                    f"ssl.truststore.location={path('ca.pem')}\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                    'username="alice" password="alice-secret";\n')
        # A Java producer's file: what Brook's producer does not know is
        # ignored with a warning, as Kafka's console producer does.
        producer_config = path("producer.properties")
        with open(producer_config, "w") as f:
            f.write(open(sasl_config).read() + "acks=all\n"
                    "key.serializer=org.apache.kafka.common.serialization.StringSerializer\n")
        r = subprocess.run([base.BROOK, "produce", "--bootstrap-server", sasl_bootstrap, "--topic", "tls-tools",
                            "--producer.config", producer_config], input=b"w\n", capture_output=True, timeout=60)
        err = r.stderr.decode(errors="replace")
        base.check("brook produce --producer.config over SASL_SSL, unknown properties ignored with a warning",
                   r.returncode == 0 and "warning" in err and "key.serializer" in err, f"exit {r.returncode}: {err[-300:]}")
        out = base.run([base.BROOK, "consume", "--bootstrap-server", sasl_bootstrap, "--topic", "tls-tools",
                        "--from-beginning", "--max-messages", "3", "--consumer.config", sasl_config])
        base.check("brook produce and consume connect over SSL and SASL_SSL", sorted(out.split()) == [b"w", b"x", b"y"],
                   str(out))
        out = base.run([base.BROOK, "topics", "--bootstrap-server", sasl_bootstrap, "--command-config", sasl_config,
                        "--list"])
        base.check("brook topics takes its security settings from --command-config", b"tls-tools" in out.split(),
                   str(out))
        stranger = [base.BROOK, "produce", "--bootstrap-server", ssl_bootstrap, "--topic", "tls-tools",
                    "--producer-property", "security.protocol=SSL",
                    "--producer-property", "ssl.ca.location=" + path("stranger-ca.pem")]
        r = subprocess.run(stranger, input=b"z\n", capture_output=True, timeout=60)
        err = r.stderr.decode(errors="replace")
        base.check("brook produce refuses an untrusted broker at once",
                   r.returncode != 0 and "certificate verification" in err, f"exit {r.returncode}: {err[-300:]}")

        # A broker that stops (SIGTERM) ends its TLS connections with
        # close_notify as well, so a client on OpenSSL 3 sees a clean end
        # rather than "unexpected eof while reading".
        with socket.create_connection(("127.0.0.1", sasl_port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False) as tls:
                server.stop()
                try:
                    ending = tls.recv(64)
                except (ssl.SSLError, OSError) as e:
                    ending = e
        base.check("a stopping broker ends its TLS connections with close_notify", ending == b"", repr(ending))
    finally:
        server.stop()

    jks = os.path.join(work, "tls", "server.jks")
    with open(jks, "wb") as f:
        f.write(b"\xfe\xed\xfe\xed\x00\x00\x00\x02\x00\x00\x00\x00")
    listeners = f"listeners=SSL://127.0.0.1:{base.free_port()},CONTROLLER://127.0.0.1:{base.free_port()}"
    refusals = [
        ("an SSL listener without a key store", [listeners], "needs a key store"),
        ("a JKS key store", [listeners, "ssl.keystore.location=" + jks], "keytool -importkeystore"),
        ("a key store with a wrong password",
         [listeners, "ssl.keystore.location=" + path("server.p12"), "ssl.keystore.password=wrong"],
         "wrong password"),
        ("an unknown TLS version",
         [listeners, "ssl.keystore.location=" + path("server.p12"), "ssl.keystore.password=ks-secret",
          "ssl.enabled.protocols=SSLv3"], "ssl.enabled.protocols"),
        ("an SSL controller listener",
         [listeners, "listener.security.protocol.map=SSL:SSL,CONTROLLER:SSL"], "controller's listener is PLAINTEXT"),
    ]
    for name, overrides, message in refusals:
        cmd = [base.BROOK, "server", "--data-dir", os.path.join(work, "refused-data")]
        for o in overrides:
            cmd += ["--override", o]
        r = subprocess.run(cmd, capture_output=True, timeout=30)
        err = r.stderr.decode(errors="replace")
        base.check(f"{name} is refused at start", r.returncode != 0 and message in err,
                   f"exit {r.returncode}: {err[-300:]}")


def main():
    def checks(server, work):
        server.stop()
        scram_checks(work)
        scram_cluster_checks(work)
        tls_checks(work)
        sasl_checks(work)

    base.run_with_server("brook-security-", checks, done="all security client checks passed")


if __name__ == "__main__":
    main()
