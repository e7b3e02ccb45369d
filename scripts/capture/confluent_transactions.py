"""confluent-kafka (librdkafka 2.0.2) transactional producer start, for golden captures."""
import sys

from confluent_kafka import Producer

producer = Producer({"bootstrap.servers": f"127.0.0.1:{sys.argv[1]}",
                     "client.id": "confluent-txn", "transactional.id": "golden-txn"})
try:
    producer.init_transactions(5)
except Exception:  # noqa: BLE001 - the stand-in broker stops at the coordinator calls
    pass
