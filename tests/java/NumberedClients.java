// Apache Kafka's Java clients for the tests that run Kafka's brokers on sparkraft's controllers
// (tests/integration/test_kafka_brokers.py). Run from source with Kafka's jars on the class path:
//
//   java -cp 'JARS/*' NumberedClients.java produce BOOTSTRAP TOPIC COUNT PARTITIONS RATE [HOLDFILE]
//       sends "0".."COUNT-1", message n to partition n % PARTITIONS, at most RATE a second (0: as
//       fast as it can), with acks=all and idempotence; prints "ACK partition offset n millis" once
//       Kafka acknowledges n (millis: from send to ack), or "FAIL n error" if it never does; with
//       HOLDFILE, it holds the last tenth of its messages until that file exists (so that what a
//       test does meanwhile happens while it still produces, however slow the machine)
//   java -cp 'JARS/*' NumberedClients.java consume BOOTSTRAP TOPIC GROUP STOPFILE
//       reads in consumer group GROUP, printing "partition offset value", until STOPFILE exists
//       and a poll comes back empty
//   java -cp 'JARS/*' NumberedClients.java read BOOTSTRAP TOPIC
//       reads every partition from its beginning to its end (no group), printing the same lines
//   java -cp 'JARS/*' NumberedClients.java txproduce BOOTSTRAP TOPIC COUNT PER_TX
//       sends "0".."COUNT-1" in transactions of PER_TX messages, every fourth one aborted, printing
//       "COMMITTED first" or "ABORTED first" per transaction
import java.io.File;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class NumberedClients {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "produce" -> produce(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                                      Integer.parseInt(args[5]), args.length > 6 ? new File(args[6]) : null);
            case "consume" -> consume(args[1], args[2], args[3], new File(args[4]));
            case "read" -> read(args[1], args[2]);
            case "txproduce" -> txproduce(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
            default -> throw new IllegalArgumentException("produce, consume, read or txproduce");
        }
    }

    static Properties common(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        String config = System.getenv("KAFKA_CLIENT_CONFIG");  // security settings, Kafka's keys
        if (config != null) {
            try (var in = new java.io.FileInputStream(config)) {
                p.load(in);
            } catch (java.io.IOException e) {
                throw new RuntimeException(e);
            }
        }
        return p;
    }

    static void produce(String bootstrap, String topic, int count, int partitions, int rate, File hold)
            throws Exception {
        Properties p = common(bootstrap);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("max.in.flight.requests.per.connection", "5");
        p.put("delivery.timeout.ms", "600000");
        p.put("request.timeout.ms", "15000");
        p.put("linger.ms", "5");
        p.put("metadata.max.age.ms", "5000");
        AtomicLong failed = new AtomicLong();
        long start = System.nanoTime();  // the pace's origin
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int n = 0; n < count; n++) {
                if (hold != null && n == count - count / 10) {
                    while (!hold.exists()) {
                        Thread.sleep(100);
                    }
                    start = System.nanoTime() - (long) (n * 1e9 / Math.max(rate, 1));
                }
                final int value = n;
                final long sent = System.nanoTime();
                producer.send(new ProducerRecord<>(topic, n % partitions, null, Integer.toString(n)), (meta, error) -> {
                    if (error == null) {
                        emit("ACK " + meta.partition() + " " + meta.offset() + " " + value + " "
                             + String.format("%.3f", (System.nanoTime() - sent) / 1e6));
                    } else {
                        failed.incrementAndGet();
                        emit("FAIL " + value + " " + error);
                    }
                });
                long due = rate > 0 ? start + (long) ((n + 1) * 1e9 / rate) : 0;
                long wait = due - System.nanoTime();
                if (rate > 0 && wait > 0) {
                    Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                }
            }
            producer.flush();
        }
        emit("DONE failed=" + failed.get());
    }

    static void txproduce(String bootstrap, String topic, int count, int perTransaction) throws Exception {
        Properties p = common(bootstrap);
        p.put("transactional.id", "numbered-" + topic);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("delivery.timeout.ms", "600000");
        p.put("request.timeout.ms", "15000");
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            producer.initTransactions();
            for (int first = 0; first < count; first += perTransaction) {
                producer.beginTransaction();
                for (int n = first; n < Math.min(count, first + perTransaction); n++) {
                    producer.send(new ProducerRecord<>(topic, Integer.toString(n)));
                }
                if ((first / perTransaction) % 4 == 3) {
                    producer.abortTransaction();
                    emit("ABORTED " + first);
                } else {
                    producer.commitTransaction();
                    emit("COMMITTED " + first);
                }
            }
        }
        emit("DONE");
    }

    static KafkaConsumer<String, String> consumer(Properties p) {
        p.put("auto.offset.reset", "earliest");
        p.put("max.poll.records", "2000");
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    static void consume(String bootstrap, String topic, String group, File stop) {
        Properties p = common(bootstrap);
        p.put("group.id", group);
        p.put("enable.auto.commit", "true");
        p.put("auto.commit.interval.ms", "500");
        try (KafkaConsumer<String, String> consumer = consumer(p)) {
            consumer.subscribe(List.of(topic));
            while (true) {
                var records = consumer.poll(Duration.ofMillis(1000));
                for (ConsumerRecord<String, String> r : records) {
                    emit(r.partition() + " " + r.offset() + " " + r.value());
                }
                if (records.isEmpty() && stop.exists()) {
                    break;
                }
            }
        }
        emit("DONE");
    }

    static void read(String bootstrap, String topic) {
        try (KafkaConsumer<String, String> consumer = consumer(common(bootstrap))) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(60))) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions, Duration.ofSeconds(60));
            while (partitions.stream().anyMatch(tp -> consumer.position(tp) < end.get(tp))) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(1000))) {
                    emit(r.partition() + " " + r.offset() + " " + r.value());
                }
            }
        }
        emit("DONE");
    }

    static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
