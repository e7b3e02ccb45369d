"""kafka-python 2.0.2 conversations for golden captures: produce, group consume, admin."""
import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

bootstrap = f"127.0.0.1:{sys.argv[1]}"

producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="kafka-python-producer", acks=1)
producer.send("golden", key=b"kp-key", value=b"kp-value", headers=[("h", b"1")]).get(timeout=10)
producer.flush()
producer.close()

consumer = KafkaConsumer("golden", bootstrap_servers=bootstrap, client_id="kafka-python-consumer",
                         group_id="kp-group", auto_offset_reset="earliest",
                         consumer_timeout_ms=3000, enable_auto_commit=False)
for _ in consumer:
    consumer.commit()
    break
consumer.close()

# The stand-in broker does not answer admin requests: only what is sent counts.
try:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kafka-python-admin",
                             request_timeout_ms=2000)
    admin.create_topics([NewTopic("golden-admin", num_partitions=3, replication_factor=1)],
                        timeout_ms=1000)
except Exception:  # noqa: BLE001 - the connection is expected to close
    pass
