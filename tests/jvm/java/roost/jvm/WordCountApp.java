package roost.jvm;

import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams application for the exactly-once test: each input record's value is a word;
 * the app re-keys by word (a repartition topic), counts per word in a state store (backed by a
 * changelog topic), and writes every new count to the output topic, keyed by word, with
 * processing.guarantee=exactly_once_v2 and no record cache, so each input record makes exactly
 * one output record. Read read_committed, each word's counts are then 1, 2, ..., n in order: a
 * duplicate (a count twice) or a loss (a count missing) is visible.
 *
 * Arguments: BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [k=v...]. It prints "STATE RUNNING"
 * etc. on each state change, and runs until SIGTERM.
 */
public final class WordCountApp {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10_000);
        props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1_000);
        props.put(StreamsConfig.producerPrefix("delivery.timeout.ms"), 60_000);
        props.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 30_000);
        for (int i = 5; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
                .map((key, word) -> KeyValue.pair(word, word))
                .groupByKey(Grouped.with("by-word", Serdes.String(), Serdes.String()))
                .count(Materialized.as("word-counts"))
                .toStream()
                .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));
        Topology topology = builder.build();
        System.out.println(topology.describe());

        KafkaStreams streams = new KafkaStreams(topology, props);
        // A thread that dies of a broker's loss (a fenced producer, a timeout) is replaced, as a
        // production app would; exactly-once holds across the replacement.
        streams.setUncaughtExceptionHandler(error -> {
            System.out.println("THREAD FAILED " + error);
            System.out.flush();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
        });
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(java.time.Duration.ofSeconds(20));
            stopped.countDown();
        }));
        streams.start();
        stopped.await();
    }

    private WordCountApp() {
    }
}
