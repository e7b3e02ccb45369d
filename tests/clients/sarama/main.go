// Sarama (Shopify/sarama, the Go client) against a running broker: topic
// admin, an idempotent acks=all producer, a consumer group, committed
// offsets, a partition consumer, offsets by position, DeleteRecords,
// CreatePartitions and DeleteTopics, with sarama configured for the broker
// version given.
//
// Usage: main BOOTSTRAP KAFKA_VERSION TOPIC
//
// Prints "ok <check>" for each check; exits 1 at the first that fails.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

const messages = 1000

func fail(format string, args ...interface{}) {
	fmt.Printf("FAILED "+format+"\n", args...)
	os.Exit(1)
}

func ok(name string) { fmt.Println("ok " + name) }

func must(name string, err error) {
	if err != nil {
		fail("%s: %v", name, err)
	}
}

// Claims are consumed concurrently, one goroutine each.
type groupHandler struct {
	mu      sync.Mutex
	seen    map[string]bool
	headers int
	done    chan struct{}
	closed  bool
}

func (h *groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *groupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		h.seen[string(m.Value)] = true
		if len(m.Headers) == 1 && string(m.Headers[0].Key) == "h" && string(m.Headers[0].Value) == string(m.Key) {
			h.headers++
		}
		s.MarkMessage(m, "")
		if len(h.seen) == messages && !h.closed {
			h.closed = true
			close(h.done)
		}
		h.mu.Unlock()
	}
	return nil
}

func main() {
	if len(os.Args) != 4 {
		fail("usage: main BOOTSTRAP KAFKA_VERSION TOPIC")
	}
	brokers := []string{os.Args[1]}
	version, err := sarama.ParseKafkaVersion(os.Args[2])
	must("version", err)
	topic := os.Args[3]
	group := topic + "-group"

	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "sarama-check"
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	// Before 0.11 (message sets): no idempotence, no headers, no admin
	// client, and the consumer group needs 0.10.2; sarama refuses these
	// itself.
	batches := version.IsAtLeast(sarama.V0_11_0_0)
	groups := version.IsAtLeast(sarama.V0_10_2_0)
	cfg.Producer.Idempotent = batches
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Compression = sarama.CompressionSnappy
	if version.IsAtLeast(sarama.V2_1_0_0) {
		cfg.Producer.Compression = sarama.CompressionZSTD
	}
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.CommitInterval = 100 * time.Millisecond
	cfg.Admin.Timeout = 30 * time.Second

	// The admin client needs 0.11 for most of what follows (sarama's own
	// floors); for older versions the topic is made beforehand.
	var admin sarama.ClusterAdmin
	if batches {
		admin, err = sarama.NewClusterAdmin(brokers, cfg)
		must("admin", err)
		defer admin.Close()
		must("CreateTopic", admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false))
		ok("CreateTopic")

		topics, err := admin.ListTopics()
		must("ListTopics", err)
		if d, found := topics[topic]; !found || d.NumPartitions != 3 {
			fail("ListTopics: %s missing or not 3 partitions: %+v", topic, topics[topic])
		}
		ok("ListTopics")

		retention := "3600000"
		must("AlterConfig", admin.AlterConfig(sarama.TopicResource, topic, map[string]*string{"retention.ms": &retention}, false))
		entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
		must("DescribeConfig", err)
		found := false
		for _, e := range entries {
			if e.Name == "retention.ms" {
				found = e.Value == retention && !e.Default
			}
		}
		if !found {
			fail("DescribeConfig: retention.ms is not the altered %s: %+v", retention, entries)
		}
		ok("AlterConfig and DescribeConfig")
	}

	producer, err := sarama.NewSyncProducer(brokers, cfg)
	must("producer", err)
	for i := 0; i < messages; i++ {
		key := fmt.Sprintf("k%d", i)
		m := &sarama.ProducerMessage{
			Topic: topic,
			Key:   sarama.StringEncoder(key),
			Value: sarama.StringEncoder(fmt.Sprintf("v%d", i)),
		}
		if batches {
			m.Headers = []sarama.RecordHeader{{Key: []byte("h"), Value: []byte(key)}}
		}
		_, _, err := producer.SendMessage(m)
		must(fmt.Sprintf("SendMessage %d", i), err)
	}
	must("producer close", producer.Close())
	ok(fmt.Sprintf("produced %d (idempotent %v, acks=all, %v)", messages, batches, cfg.Producer.Compression))

	client, err := sarama.NewClient(brokers, cfg)
	must("client", err)
	defer client.Close()
	var total int64
	for p := int32(0); p < 3; p++ {
		newest, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		must("GetOffset newest", err)
		oldest, err := client.GetOffset(topic, p, sarama.OffsetOldest)
		must("GetOffset oldest", err)
		if oldest != 0 {
			fail("GetOffset oldest of partition %d: %d", p, oldest)
		}
		total += newest
	}
	if total != messages {
		fail("the partitions' newest offsets add up to %d, not %d", total, messages)
	}
	ok("GetOffset")

	if groups {
		cg, err := sarama.NewConsumerGroup(brokers, group, cfg)
		must("consumer group", err)
		h := &groupHandler{seen: map[string]bool{}, done: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for ctx.Err() == nil {
				if err := cg.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
					fmt.Println("consume:", err)
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
		select {
		case <-h.done:
		case <-time.After(60 * time.Second):
			h.mu.Lock()
			fail("the group consumed %d of %d", len(h.seen), messages)
		}
		time.Sleep(500 * time.Millisecond) // a commit interval or more
		cancel()
		must("consumer group close", cg.Close())
		h.mu.Lock()
		defer h.mu.Unlock()
		if batches && h.headers != messages {
			fail("%d of %d messages came with their header", h.headers, messages)
		}
		if batches {
			ok("consumer group read every message, with headers")
		} else {
			ok("consumer group read every message")
		}

		if admin != nil {
			offsets, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2}})
			must("ListConsumerGroupOffsets", err)
			var committed int64
			for p := int32(0); p < 3; p++ {
				b := offsets.GetBlock(topic, p)
				if b == nil || b.Err != sarama.ErrNoError {
					fail("committed offset of partition %d: %+v", p, b)
				}
				committed += b.Offset
			}
			if committed != messages {
				fail("committed offsets add up to %d, not %d", committed, messages)
			}
			ok("committed offsets")

			groups, err := admin.ListConsumerGroups()
			must("ListConsumerGroups", err)
			if groups[group] != "consumer" {
				fail("ListConsumerGroups: %v", groups)
			}
			described, err := admin.DescribeConsumerGroups([]string{group})
			must("DescribeConsumerGroups", err)
			if len(described) != 1 || described[0].State != "Empty" {
				fail("DescribeConsumerGroups: %+v", described)
			}
			ok("ListConsumerGroups and DescribeConsumerGroups")
		}
	}

	// Every partition read from its start: each message once, at
	// consecutive offsets, its value matching its key.
	consumer, err := sarama.NewConsumer(brokers, cfg)
	must("consumer", err)
	read := map[string]bool{}
	for p := int32(0); p < 3; p++ {
		newest, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		must("GetOffset newest", err)
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		must("ConsumePartition", err)
		for next := int64(0); next < newest; next++ {
			select {
			case m := <-pc.Messages():
				if m.Offset != next || "v"+strings.TrimPrefix(string(m.Key), "k") != string(m.Value) {
					fail("partition %d: offset %d (expected %d) key %q value %q", p, m.Offset, next, m.Key, m.Value)
				}
				read[string(m.Value)] = true
			case <-time.After(30 * time.Second):
				fail("partition %d: nothing at offset %d of %d", p, next, newest)
			}
		}
		must("partition consumer close", pc.Close())
	}
	must("consumer close", consumer.Close())
	if len(read) != messages {
		fail("the partition consumers read %d distinct messages of %d", len(read), messages)
	}
	ok("partition consumers read every message")

	if batches {
		must("DeleteRecords", admin.DeleteRecords(topic, map[int32]int64{1: 5}))
		oldest, err := client.GetOffset(topic, 1, sarama.OffsetOldest)
		must("GetOffset after DeleteRecords", err)
		if oldest != 5 {
			fail("partition 1 starts at %d after DeleteRecords to 5", oldest)
		}
		ok("DeleteRecords")
	}

	if version.IsAtLeast(sarama.V1_0_0_0) { // (sarama's own floor for it)
		must("CreatePartitions", admin.CreatePartitions(topic, 4, nil, false))
		metadata, err := admin.DescribeTopics([]string{topic})
		must("DescribeTopics", err)
		if len(metadata) != 1 || len(metadata[0].Partitions) != 4 {
			fail("DescribeTopics after CreatePartitions: %+v", metadata)
		}
		ok("CreatePartitions")
	}

	if batches {
		// ACLs (sarama sends every ACL request at v0: literal patterns only).
		principal := "User:" + topic
		must("CreateACL", admin.CreateACL(
			sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: topic, ResoucePatternType: sarama.AclPatternLiteral},
			sarama.Acl{Principal: principal, Host: "*", Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow}))
		filter := sarama.AclFilter{ResourceType: sarama.AclResourceTopic, ResourceName: &topic,
			ResourcePatternTypeFilter: sarama.AclPatternLiteral, Principal: &principal,
			Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}
		// (CreateAcls is answered once the controller has the binding; the
		// broker that answers ListAcls may see it a moment later.)
		var acls []sarama.ResourceAcls
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			acls, err = admin.ListAcls(filter)
			must("ListAcls", err)
			if len(acls) == 1 || time.Now().After(deadline) {
				break
			}
		}
		if len(acls) != 1 || len(acls[0].Acls) != 1 || acls[0].Acls[0].Operation != sarama.AclOperationRead {
			fail("ListAcls after CreateACL: %+v", acls)
		}
		matched, err := admin.DeleteACL(filter, false)
		must("DeleteACL", err)
		if len(matched) != 1 || matched[0].Err != sarama.ErrNoError {
			fail("DeleteACL matched %+v", matched)
		}
		ok("CreateACL, ListAcls and DeleteACL")
	}

	if admin != nil {
		must("DeleteTopic", admin.DeleteTopic(topic))
		deadline := time.Now().Add(30 * time.Second)
		for {
			topics, err := admin.ListTopics()
			must("ListTopics after DeleteTopic", err)
			if _, there := topics[topic]; !there {
				break
			}
			if time.Now().After(deadline) {
				fail("%s still listed after DeleteTopic", topic)
			}
			time.Sleep(200 * time.Millisecond)
		}
		ok("DeleteTopic")
	}
}
