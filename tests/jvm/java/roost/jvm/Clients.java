package roost.jvm;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

/**
 * The Java client (Kafka's reference client) driven through scenarios a test names. Each prints
 * what it saw as one line "@@RESULT {json}" for the test to check: the facts, not a verdict, so
 * the checks live in the Python test beside the assertions on the other clients.
 *
 * Arguments: positional words, then any number of k=v client settings that override the
 * scenario's own.
 */
final class Clients {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long WAIT_MS = 60_000;

    static int run(String scenario, String[] args) throws Exception {
        Map<String, Object> result = switch (scenario) {
            case "produce" -> produce(args);
            case "consume" -> consume(args);
            case "txn" -> transactions(args);
            case "admin" -> admin(args);
            case "translate" -> translate(args);
            default -> throw new IllegalArgumentException("no scenario " + scenario);
        };
        System.out.println("@@RESULT " + JSON.writeValueAsString(result));
        return 0;
    }

    /** k=v words from index `from` on. */
    private static Properties settings(String[] args, int from) {
        Properties props = new Properties();
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq < 0) {
                throw new IllegalArgumentException("not k=v: " + args[i]);
            }
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return props;
    }

    private static Properties producerProps(String bootstrap) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("delivery.timeout.ms", "60000");
        return props;
    }

    /** produce BOOTSTRAP TOPIC COUNT PREFIX [k=v...]: keys k0.., values PREFIX0.., acks=all, idempotent. */
    private static Map<String, Object> produce(String[] args) throws Exception {
        Properties props = producerProps(args[0]);
        props.putAll(settings(args, 4));
        int count = Integer.parseInt(args[2]);
        Map<Integer, List<Long>> offsets = new TreeMap<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(new ProducerRecord<>(args[1], "k" + i, args[3] + i)));
            }
            for (Future<RecordMetadata> future : sent) {
                RecordMetadata meta = future.get(WAIT_MS, TimeUnit.MILLISECONDS);
                offsets.computeIfAbsent(meta.partition(), p -> new ArrayList<>()).add(meta.offset());
            }
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("acked", offsets.values().stream().mapToInt(List::size).sum());
        result.put("offsets", offsets);
        return result;
    }

    /** consume BOOTSTRAP TOPIC GROUP COUNT [k=v...]: subscribe in GROUP, poll until COUNT records
     * (or 60 s), commit synchronously, and report the values and the committed offsets. */
    private static Map<String, Object> consume(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[2]);
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.putAll(settings(args, 4));
        int count = Integer.parseInt(args[3]);
        List<String> values = new ArrayList<>();
        Map<String, Long> committed = new TreeMap<>();
        Set<TopicPartition> assignment;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(args[1]));
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (values.size() < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> record : records) {
                    values.add(record.value());
                }
            }
            consumer.commitSync(Duration.ofMillis(WAIT_MS));
            assignment = consumer.assignment();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> entry
                    : consumer.committed(assignment, Duration.ofMillis(WAIT_MS)).entrySet()) {
                if (entry.getValue() != null) {
                    committed.put(entry.getKey().toString(), entry.getValue().offset());
                }
            }
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("values", values);
        result.put("assigned", assignment.size());
        result.put("committed", committed);
        return result;
    }

    /** txn BOOTSTRAP TOPIC TXID COMMITTED ABORTED: one transaction of COMMITTED records
     * ("c0"..) committed, then one of ABORTED records ("a0"..) aborted, then one more ("after")
     * committed, by the same transactional producer. */
    private static Map<String, Object> transactions(String[] args) throws Exception {
        Properties props = producerProps(args[0]);
        props.put("transactional.id", args[2]);
        props.putAll(settings(args, 5));
        int committed = Integer.parseInt(args[3]);
        int aborted = Integer.parseInt(args[4]);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < committed; i++) {
                producer.send(new ProducerRecord<>(args[1], "k" + i, "c" + i));
            }
            producer.commitTransaction();
            producer.beginTransaction();
            for (int i = 0; i < aborted; i++) {
                producer.send(new ProducerRecord<>(args[1], "k" + i, "a" + i));
            }
            producer.flush();
            producer.abortTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(args[1], "k", "after"));
            producer.commitTransaction();
        }
        return Map.of("committed", committed, "aborted", aborted);
    }

    /** admin BOOTSTRAP TOPIC GROUP: create TOPIC (3 partitions, RF 3, retention.ms set), describe
     * it and its configs, change a config incrementally, list and describe the consumer groups
     * and GROUP's offsets, delete the topic; report what each step answered. */
    private static Map<String, Object> admin(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.putAll(settings(args, 3));
        String topic = args[1];
        String group = args[2];
        Map<String, Object> result = new LinkedHashMap<>();
        try (Admin admin = Admin.create(props)) {
            NewTopic created = new NewTopic(topic, 3, (short) 3).configs(Map.of("retention.ms", "3600000"));
            admin.createTopics(List.of(created)).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
            try {
                admin.createTopics(List.of(created)).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
                result.put("create_again", "accepted");
            } catch (ExecutionException error) {
                result.put("create_again", error.getCause().getClass().getSimpleName());
            }
            result.put("partitions", describeTopic(admin, topic));
            result.put("cluster_nodes", admin.describeCluster().nodes().get(WAIT_MS, TimeUnit.MILLISECONDS).size());
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            result.put("configs_before", configs(admin, resource));
            admin.incrementalAlterConfigs(Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("segment.bytes", "1048576"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("retention.ms", null), AlterConfigOp.OpType.DELETE))))
                    .all().get(WAIT_MS, TimeUnit.MILLISECONDS);
            result.put("configs_after", configs(admin, resource));
            List<String> groups = new ArrayList<>();
            for (ConsumerGroupListing listing : admin.listConsumerGroups().all().get(WAIT_MS, TimeUnit.MILLISECONDS)) {
                groups.add(listing.groupId());
            }
            result.put("groups", groups);
            ConsumerGroupDescription description = admin.describeConsumerGroups(List.of(group))
                    .describedGroups().get(group).get(WAIT_MS, TimeUnit.MILLISECONDS);
            Map<String, Object> described = new LinkedHashMap<>();
            described.put("state", description.state().toString());
            described.put("members", description.members().size());
            described.put("coordinator", description.coordinator().id());
            List<String> clients = new ArrayList<>();
            for (MemberDescription member : description.members()) {
                clients.add(member.clientId());
            }
            described.put("clients", clients);
            result.put("group", described);
            Map<String, Long> offsets = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(WAIT_MS, TimeUnit.MILLISECONDS).entrySet()) {
                offsets.put(entry.getKey().toString(), entry.getValue().offset());
            }
            result.put("group_offsets", offsets);
            admin.deleteTopics(List.of(topic)).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
            long deadline = System.currentTimeMillis() + WAIT_MS;
            boolean gone = false;
            while (!gone && System.currentTimeMillis() < deadline) {
                gone = !admin.listTopics().names().get(WAIT_MS, TimeUnit.MILLISECONDS).contains(topic);
                if (!gone) {
                    Thread.sleep(200);
                }
            }
            result.put("deleted", gone);
        }
        return result;
    }

    private static Map<String, Object> describeTopic(Admin admin, String topic) throws Exception {
        TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames()
                .get(WAIT_MS, TimeUnit.MILLISECONDS).get(topic);
        Map<String, Object> partitions = new TreeMap<>();
        for (TopicPartitionInfo info : description.partitions()) {
            Map<String, Object> one = new LinkedHashMap<>();
            one.put("leader", info.leader() == null ? -1 : info.leader().id());
            one.put("replicas", info.replicas().stream().map(n -> n.id()).toList());
            one.put("isr", info.isr().stream().map(n -> n.id()).toList());
            partitions.put(String.valueOf(info.partition()), one);
        }
        return partitions;
    }

    /** name -> [value, source] for the topic's settings Kafka's tools show first. */
    private static Map<String, List<String>> configs(Admin admin, ConfigResource resource) throws Exception {
        Config config = admin.describeConfigs(List.of(resource)).all().get(WAIT_MS, TimeUnit.MILLISECONDS)
                .get(resource);
        Map<String, List<String>> found = new TreeMap<>();
        for (String name : List.of("retention.ms", "segment.bytes", "cleanup.policy", "min.insync.replicas")) {
            ConfigEntry entry = config.get(name);
            if (entry != null) {
                found.put(name, List.of(String.valueOf(entry.value()), entry.source().toString()));
            }
        }
        return found;
    }

    /** translate TARGET_BOOTSTRAP SOURCE_ALIAS GROUP: MirrorMaker 2's checkpoints, read on the
     * target cluster, translated to the target's offsets for GROUP. */
    private static Map<String, Object> translate(String[] args) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        Map<TopicPartition, OffsetAndMetadata> translated = RemoteClusterUtils.translateOffsets(
                props, args[1], args[2], Duration.ofMillis(WAIT_MS));
        Map<String, Long> offsets = new TreeMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : translated.entrySet()) {
            offsets.put(entry.getKey().toString(), entry.getValue().offset());
        }
        return Map.of("offsets", offsets);
    }

    private Clients() {
    }
}
