#!/usr/bin/python3
"""Sarama, the Go client (Debian's golang-github-shopify-sarama-dev), against
a real `brook server` (single node) on loopback ports.

Usage: go_clients_test.py PATH_TO_BROOK

Builds sarama/main.go with Debian's Go (GOPATH mode, the library from
/usr/share/gocode) and runs it with sarama configured for several broker
versions (each picks different request versions): topic admin, an
idempotent acks=all producer, a consumer group and its committed offsets, a
partition consumer, offsets by position, DeleteRecords, CreatePartitions
and DeleteTopics. Each check prints "ok <name>"; a failure raises.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker_clients_test as base  # noqa: E402  (Server, check, run_with_server)

HERE = os.path.dirname(os.path.abspath(__file__))
# Versions sarama is configured for: 0.11 is the first with record batches
# (older ones produce message sets, which Brook, like Kafka 4, does not
# take); 2.1 compresses with zstd; 2.2 is this sarama's newest.
VERSIONS = ["0.11.0.0", "1.0.0", "2.1.0", "2.2.0"]


def build(work):
    binary = os.path.join(work, "sarama-check")
    env = dict(os.environ, GOPATH="/usr/share/gocode", GO111MODULE="off", GOFLAGS="",
               GOCACHE=os.environ.get("BROOK_GO_CACHE", os.path.join(work, "go-cache")),
               CGO_CFLAGS="-Wno-deprecated-declarations")
    out = subprocess.run(["go", "build", "-o", binary, "main.go"], cwd=os.path.join(HERE, "sarama"),
                         env=env, capture_output=True, text=True, timeout=600)
    base.check("sarama check program builds", out.returncode == 0, out.stdout + out.stderr)
    return binary


def main():
    def checks(server, work):
        binary = build(work)
        for version in VERSIONS:
            topic = "sarama-" + version.replace(".", "-")
            out = subprocess.run([binary, server.bootstrap, version, topic], capture_output=True, text=True,
                                 timeout=180)
            lines = [line for line in out.stdout.splitlines() if line.startswith(("ok ", "FAILED "))]
            for line in lines:
                print(f"  {version}: {line}")
            base.check(f"sarama as for Kafka {version}: {len(lines)} checks", out.returncode == 0 and
                       lines and all(line.startswith("ok ") for line in lines),
                       out.stdout[-4000:] + out.stderr[-4000:])

    base.run_with_server("brook-go-clients-", checks, done="all Go client checks passed")


if __name__ == "__main__":
    main()
