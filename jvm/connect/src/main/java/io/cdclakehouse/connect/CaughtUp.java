package io.cdclakehouse.connect;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * Waits until a pipeline has delivered everything committed at the source before a marker:
 *
 * <pre>
 * java -cp 'jars/connect/*' io.cdclakehouse.connect.CaughtUp --bootstrap 127.0.0.1:9092 \
 *   --marker-topic northwind.public.cdc_capture_marker --markers 4 \
 *   --group connect-landing=topicA,topicB [--group ...] [--timeout-ms 300000]
 * </pre>
 *
 * First the marker topic must hold {@code --markers} records (each source connector streams
 * every marker row inserted after the changes, so its changes are in Kafka before its marker);
 * then each sink group's committed offsets must reach the end offsets of its topics' partitions,
 * read after that (the sink commits only offsets whose records are in files). Prints one line
 * and exits 0, or exits 2 with what is missing when the timeout passes.
 */
public final class CaughtUp {
  private CaughtUp() {}

  public static void main(String[] args) throws Exception {
    String bootstrap = null;
    String markerTopic = null;
    long markers = 0;
    long timeoutMs = 300_000;
    Map<String, List<String>> groups = new LinkedHashMap<>();
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--bootstrap" -> bootstrap = args[i + 1];
        case "--marker-topic" -> markerTopic = args[i + 1];
        case "--markers" -> markers = Long.parseLong(args[i + 1]);
        case "--timeout-ms" -> timeoutMs = Long.parseLong(args[i + 1]);
        case "--group" -> {
          String[] parts = args[i + 1].split("=", 2);
          groups.put(parts[0], List.of(parts[1].split(",")));
        }
        default -> throw new IllegalArgumentException("unknown argument " + args[i]);
      }
    }
    long deadline = System.currentTimeMillis() + timeoutMs;
    try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
      long seen = 0;
      while (markerTopic != null && (seen = total(endOffsets(admin, List.of(markerTopic)))) < markers) {
        if (System.currentTimeMillis() > deadline) {
          fail("the marker topic " + markerTopic + " holds " + seen + " records, " + markers
              + " expected");
        }
        Thread.sleep(200);
      }
      for (Map.Entry<String, List<String>> group : groups.entrySet()) {
        Map<TopicPartition, Long> ends = endOffsets(admin, group.getValue());
        while (true) {
          Map<TopicPartition, OffsetAndMetadata> committed =
              admin.listConsumerGroupOffsets(group.getKey()).partitionsToOffsetAndMetadata().get();
          List<String> behind = new ArrayList<>();
          for (Map.Entry<TopicPartition, Long> end : ends.entrySet()) {
            OffsetAndMetadata done = committed.get(end.getKey());
            long at = done == null ? 0 : done.offset();
            if (at < end.getValue()) {
              behind.add(end.getKey() + " at " + at + " of " + end.getValue());
            }
          }
          if (behind.isEmpty()) {
            break;
          }
          if (System.currentTimeMillis() > deadline) {
            fail("sink group " + group.getKey() + " is behind: " + String.join(", ", behind));
          }
          Thread.sleep(200);
        }
      }
      System.out.println("{\"markers\": " + seen + ", \"groups\": " + groups.size() + "}");
    }
  }

  private static Map<TopicPartition, Long> endOffsets(Admin admin, List<String> topics)
      throws InterruptedException, ExecutionException {
    Map<TopicPartition, OffsetSpec> request = new HashMap<>();
    for (String topic : topics) {
      TopicDescription description;
      try {
        description = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
      } catch (ExecutionException e) {
        if (e.getCause() instanceof UnknownTopicOrPartitionException) {
          continue; // nothing was ever produced to it
        }
        throw e;
      }
      description
          .partitions()
          .forEach(p -> request.put(new TopicPartition(topic, p.partition()), OffsetSpec.latest()));
    }
    Map<TopicPartition, Long> ends = new HashMap<>();
    admin.listOffsets(request).all().get().forEach((tp, info) -> ends.put(tp, info.offset()));
    return ends;
  }

  private static long total(Map<TopicPartition, Long> offsets) {
    return offsets.values().stream().mapToLong(Long::longValue).sum();
  }

  private static void fail(String message) {
    System.err.println("not caught up: " + message);
    System.exit(2);
  }
}
