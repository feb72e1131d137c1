// A __cluster_metadata snapshot written by Apache Kafka's own code, for `python -m bench kafka_snapshot`.
// Kafka's image classes build the cluster (MetadataDelta.replay of the records a controller would have
// written: features, brokers, topics, partitions, a config), and Kafka's controller path writes it
// (MetadataImage.write into a RaftSnapshotWriter over a RecordsSnapshotWriter and a FileRawSnapshotWriter),
// as a KRaft controller writes its snapshots. Parameters come as -R-D system properties:
//   sparkraft.dir        the __cluster_metadata-0 directory to write into
//   sparkraft.topics     topics (of sparkraft.per_topic partitions each, RF 3)
//   sparkraft.per_topic  partitions per topic
//   sparkraft.brokers    registered brokers (ids 1..N, one rack per 10)
//   sparkraft.offset     the snapshot's end offset (its epoch is 1)
import java.nio.file.*;
import java.util.*;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.*;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.image.*;
import org.apache.kafka.image.writer.*;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.server.common.*;
import org.apache.kafka.snapshot.*;

var dir = Paths.get(System.getProperty("sparkraft.dir"));
int topics = Integer.getInteger("sparkraft.topics");
int perTopic = Integer.getInteger("sparkraft.per_topic");
int brokers = Integer.getInteger("sparkraft.brokers");
long endOffset = Long.getLong("sparkraft.offset");
var version = MetadataVersion.latestProduction();
var delta = new MetadataDelta.Builder().setImage(MetadataImage.EMPTY).build();
delta.replay(new FeatureLevelRecord().setName(MetadataVersion.FEATURE_NAME).setFeatureLevel(version.featureLevel()));
for (int b = 1; b <= brokers; b++) {
    var endpoints = new RegisterBrokerRecord.BrokerEndpointCollection();
    endpoints.add(new RegisterBrokerRecord.BrokerEndpoint().setName("PLAINTEXT").setHost("broker-" + b + ".example").setPort(9092).setSecurityProtocol((short) 0));
    var features = new RegisterBrokerRecord.BrokerFeatureCollection();
    features.add(new RegisterBrokerRecord.BrokerFeature().setName(MetadataVersion.FEATURE_NAME).setMinSupportedVersion((short) 7).setMaxSupportedVersion(version.featureLevel()));
    delta.replay(new RegisterBrokerRecord().setBrokerId(b).setIncarnationId(new Uuid(7L, b)).setBrokerEpoch(100 + b).setEndPoints(endpoints).setFeatures(features).setRack("rack-" + (b / 10)).setFenced(false).setLogDirs(List.of(new Uuid(9L, b))));
}
var random = new Random(42);
for (int t = 0; t < topics; t++) {
    var id = new Uuid(1L + t, 42L);
    delta.replay(new TopicRecord().setName(String.format("topic-%06d", t)).setTopicId(id));
    for (int p = 0; p < perTopic; p++) {
        int first = (t * 7 + p) % brokers;
        var replicas = List.of(first + 1, (first + 1) % brokers + 1, (first + 2) % brokers + 1);
        var isr = random.nextInt(100) == 0 ? List.of(replicas.get(0), replicas.get(1)) : replicas;
        delta.replay(new PartitionRecord().setPartitionId(p).setTopicId(id).setReplicas(replicas).setIsr(isr).setLeader(replicas.get(0)).setLeaderEpoch(random.nextInt(5)).setPartitionEpoch(random.nextInt(9)).setDirectories(List.of(new Uuid(9L, replicas.get(0)), new Uuid(9L, replicas.get(1)), new Uuid(9L, replicas.get(2)))));
    }
    if (t % 100 == 0) delta.replay(new ConfigRecord().setResourceType((byte) 2).setResourceName(String.format("topic-%06d", t)).setName("retention.ms").setValue("86400000"));
}
var image = delta.apply(new MetadataProvenance(endOffset - 1, 1, System.currentTimeMillis(), true));
var raw = FileRawSnapshotWriter.create(dir, new OffsetAndEpoch(endOffset, 1));
SnapshotWriter<ApiMessageAndVersion> writer = new RecordsSnapshotWriter.Builder().setMaxBatchSizeBytes(8 * 1024 * 1024).setKraftVersion(KRaftVersion.KRAFT_VERSION_0).setTime(Time.SYSTEM).setLastContainedLogTimestamp(System.currentTimeMillis()).setRawSnapshotWriter(raw).build(MetadataRecordSerde.INSTANCE);
var imageWriter = new RaftSnapshotWriter(writer, 1024);
image.write(imageWriter, new ImageWriterOptions.Builder(image).build());
imageWriter.close(true);
System.out.println("WROTE " + raw.snapshotId() + ": " + image.topics().topicsById().size() + " topics, " + image.topics().topicsById().values().stream().mapToInt(t -> t.partitions().size()).sum() + " partitions, " + image.cluster().brokers().size() + " brokers");
/exit
