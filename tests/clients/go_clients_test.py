#!/usr/bin/python3
"""The Go clients Debian packages, sarama (golang-github-shopify-sarama-dev)
and kafka-go (golang-github-segmentio-kafka-go-dev), against a real `brook
server` (single node) on loopback ports.

Usage: go_clients_test.py PATH_TO_BROOK

Builds sarama/main.go with Debian's Go (GOPATH mode, the library from
/usr/share/gocode) and runs it with sarama configured for several broker
versions, from 0.8.2 (message sets of message format 0) to 2.2: topic
admin, an acks=all producer (idempotent from 0.11), a consumer group and
its committed offsets, a partition consumer, offsets by position,
DeleteRecords, CreatePartitions, ACLs and DeleteTopics, as far as each
version has them. Then kafka-go/main.go, whose kafka-go 0.2 speaks only
what Kafka 0.10 did (Produce v2 and Fetch v2 with message format 1):
topic creation, a writer, every partition read back, a consumer group.
Each check prints "ok <name>"; a failure raises.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker_clients_test as base  # noqa: E402  (Server, check, run_with_server)

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# Versions sarama is configured for, each choosing other request versions:
# 0.8.2 (sarama 1.22's default) produces and fetches message format 0 with
# Produce v0 and Fetch v0, 0.10.0 message format 1 (Produce v2, Fetch v2),
# 0.10.2 adds consumer groups (Fetch v3); 0.11 brings record batches,
# idempotence, headers and the admin client; 2.1 zstd; 2.2 is this sarama's
# newest.
VERSIONS = ["0.8.2.0", "0.10.0.0", "0.10.2.0", "0.11.0.0", "1.0.0", "2.1.0", "2.2.0"]
# Before 0.11 sarama has no admin client: the topic is made beforehand.
WITHOUT_ADMIN = {"0.8.2.0", "0.10.0.0", "0.10.2.0"}


def build(work, name):
    binary = os.path.join(work, name + "-check")
    env = dict(os.environ, GOPATH="/usr/share/gocode", GO111MODULE="off", GOFLAGS="",
               GOCACHE=os.environ.get("BROOK_GO_CACHE", os.path.join(work, "go-cache")),
               CGO_CFLAGS="-Wno-deprecated-declarations")
    out = subprocess.run(["go", "build", "-o", binary, "main.go"], cwd=os.path.join(HERE, name),
                         env=env, capture_output=True, text=True, timeout=600)
    base.check(f"{name} check program builds", out.returncode == 0, out.stdout + out.stderr)
    return binary


def run_check(title, cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    lines = [line for line in out.stdout.splitlines() if line.startswith(("ok ", "FAILED "))]
    for line in lines:
        print(f"  {title}: {line}")
    base.check(f"{title}: {len(lines)} checks", out.returncode == 0 and lines and
               all(line.startswith("ok ") for line in lines), out.stdout[-4000:] + out.stderr[-4000:])


def main():
    def checks(server, work):
        sarama = build(work, "sarama")
        for version in VERSIONS:
            topic = "sarama-" + version.replace(".", "-")
            if version in WITHOUT_ADMIN:
                admin = AdminClient({"bootstrap.servers": server.bootstrap})
                for f in admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)]).values():
                    f.result(30)
            run_check(f"sarama as for Kafka {version}", [sarama, server.bootstrap, version, topic])
        kafka_go = build(work, "kafka-go")
        run_check("kafka-go", [kafka_go, server.bootstrap, "kafka-go"])

    base.run_with_server("brook-go-clients-", checks, done="all Go client checks passed")


if __name__ == "__main__":
    main()
