// kafka-go (segmentio/kafka-go 0.2, the other Go client) against a
// running broker. This version speaks only what Kafka 0.10 brokers did:
// Produce v2 and Fetch v2 carry message sets of message format 1, topics
// are created with CreateTopics v0, offsets listed with ListOffsets v1.
// Checks: topic creation, a hashed acks=all writer, every partition read
// from its start (offsets consecutive, each value matching its key), a
// consumer group reading every message, and the topic's deletion.
//
// Usage: main BOOTSTRAP TOPIC
//
// Prints "ok <check>" for each check; exits 1 at the first that fails.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

func fail(f string, a ...interface{}) { fmt.Printf("FAILED "+f+"\n", a...); os.Exit(1) }

func main() {
	if len(os.Args) != 3 {
		fail("usage: main BOOTSTRAP TOPIC")
	}
	broker, topic := os.Args[1], os.Args[2]
	conn, err := kafka.Dial("tcp", broker)
	if err != nil {
		fail("dial: %v", err)
	}
	err = conn.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 3, ReplicationFactor: 1})
	if err != nil {
		fail("CreateTopics: %v", err)
	}
	fmt.Println("ok CreateTopics")
	// (The topic reaches the broker's metadata a moment after the answer.)
	var parts []kafka.Partition
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		parts, err = conn.ReadPartitions(topic)
		if (err == nil && len(parts) == 3) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || len(parts) != 3 {
		fail("ReadPartitions: %v %v", parts, err)
	}
	fmt.Println("ok ReadPartitions")
	w := kafka.NewWriter(kafka.WriterConfig{Brokers: []string{broker}, Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: -1, BatchSize: 50})
	var msgs []kafka.Message
	for i := 0; i < 500; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		fail("WriteMessages: %v", err)
	}
	w.Close()
	fmt.Println("ok WriteMessages")
	seen := map[string]bool{}
	for p := 0; p < 3; p++ {
		lc, err := kafka.DialLeader(context.Background(), "tcp", broker, topic, p)
		if err != nil {
			fail("DialLeader: %v", err)
		}
		last, err := lc.ReadLastOffset()
		if err != nil {
			fail("ReadLastOffset: %v", err)
		}
		lc.Close()
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: topic, Partition: p, MinBytes: 1, MaxBytes: 1 << 20})
		for n := int64(0); n < last; n++ {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			m, err := r.ReadMessage(ctx)
			cancel()
			if err != nil {
				fail("ReadMessage p%d at %d of %d: %v", p, n, last, err)
			}
			if m.Offset != n || "v"+string(m.Key[1:]) != string(m.Value) {
				fail("p%d: offset %d key %q value %q", p, m.Offset, m.Key, m.Value)
			}
			seen[string(m.Value)] = true
		}
		r.Close()
	}
	if len(seen) != 500 {
		fail("read %d of 500", len(seen))
	}
	fmt.Println("ok read every message")
	// A consumer group.
	g := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: topic, GroupID: topic + "-g", MinBytes: 1, MaxBytes: 1 << 20, CommitInterval: 0})
	gs := map[string]bool{}
	for len(gs) < 500 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		m, err := g.ReadMessage(ctx)
		cancel()
		if err != nil {
			fail("group ReadMessage after %d: %v", len(gs), err)
		}
		gs[string(m.Value)] = true
	}
	g.Close()
	fmt.Println("ok group read every message")
	// (A new connection: the first may have idled past
	// connections.max.idle.ms meanwhile, and kafka-go does not redial.)
	conn.Close()
	conn, err = kafka.Dial("tcp", broker)
	if err != nil {
		fail("dial: %v", err)
	}
	defer conn.Close()
	if err := conn.DeleteTopics(topic); err != nil {
		fail("DeleteTopics: %v", err)
	}
	fmt.Println("ok DeleteTopics")
}
