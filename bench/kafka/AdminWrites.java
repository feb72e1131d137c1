// Admin writes through a Kafka broker, from Kafka's own AdminClient (bench kafka_brokers): WRITERS
// threads share one AdminClient and each makes one write at a time, for SECONDS seconds.
//
//   java -cp 'JARS/*' AdminWrites.java BOOTSTRAP configs WRITERS SECONDS
//       IncrementalAlterConfigs: each writer sets retention.ms of its own topic (made first)
//   java -cp 'JARS/*' AdminWrites.java BOOTSTRAP creates WRITERS SECONDS
//       CreateTopics: each writer creates topics of one partition, replication factor 1
//
// Prints "OPS n", then "LATENCY_MS x" for every write (send to answer), then "DONE".
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.config.ConfigResource;

public class AdminWrites {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], kind = args[1];
        int writers = Integer.parseInt(args[2]);
        long seconds = Long.parseLong(args[3]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "60000");
        String run = Long.toString(System.nanoTime() % 1_000_000_000L, 36);
        try (Admin admin = Admin.create(p)) {
            if (kind.equals("configs")) {
                List<NewTopic> topics = new ArrayList<>();
                for (int w = 0; w < writers; w++) topics.add(new NewTopic("cfg-" + run + "-" + w, 1, (short) 1));
                admin.createTopics(topics).all().get();
            }
            List<List<Double>> latencies = new ArrayList<>();
            AtomicLong ops = new AtomicLong();
            long end = System.nanoTime() + seconds * 1_000_000_000L;
            List<Thread> threads = new ArrayList<>();
            for (int w = 0; w < writers; w++) {
                List<Double> mine = new ArrayList<>();
                latencies.add(mine);
                final int writer = w;
                Thread t = new Thread(() -> {
                    long i = 0;
                    while (System.nanoTime() < end) {
                        long start = System.nanoTime();
                        try {
                            if (kind.equals("configs")) {
                                ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, "cfg-" + run + "-" + writer);
                                AlterConfigOp op = new AlterConfigOp(new ConfigEntry("retention.ms", Long.toString(1_000_000 + i)),
                                                                     AlterConfigOp.OpType.SET);
                                admin.incrementalAlterConfigs(Map.of(r, List.of(op))).all().get();
                            } else {
                                admin.createTopics(List.of(new NewTopic("new-" + run + "-" + writer + "-" + i, 1, (short) 1))).all().get();
                            }
                        } catch (Exception e) {
                            throw new RuntimeException(e);
                        }
                        mine.add((System.nanoTime() - start) / 1e6);
                        ops.incrementAndGet();
                        i++;
                    }
                });
                threads.add(t);
                t.start();
            }
            for (Thread t : threads) t.join();
            System.out.println("OPS " + ops.get());
            for (List<Double> mine : latencies) for (double l : mine) System.out.println("LATENCY_MS " + l);
            System.out.println("DONE");
        }
    }
}
