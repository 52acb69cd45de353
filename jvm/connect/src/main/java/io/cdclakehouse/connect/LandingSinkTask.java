package io.cdclakehouse.connect;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.zip.GZIPOutputStream;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Buffers records per (topic partition, folder) and writes a file when a buffer holds
 * flush.size records, and every buffer at each offset commit ({@link #preCommit}), so the
 * offsets the worker commits are those of records on disk. A file is written under a hidden
 * temporary name ({@code .<name>.tmp}, which the landing readers skip), forced to disk, then
 * renamed: a final name always holds complete content. Records delivered again after a restart
 * (from the last committed offset) are written again: at least once, as the sinks this one
 * imitates; a confluent-layout file starting at the same offset is replaced.
 *
 * <p>Values are written as they are in Kafka: use {@code
 * value.converter=org.apache.kafka.connect.converters.ByteArrayConverter} (the JSON the source's
 * converter produced, byte for byte) or StringConverter. Tombstones (null values) are skipped, as
 * Confluent's S3 sink does with {@code behavior.on.null.values=ignore}.
 */
public class LandingSinkTask extends SinkTask {
  private static final Logger LOG = LoggerFactory.getLogger(LandingSinkTask.class);
  private static final ObjectMapper JSON = new ObjectMapper();

  private Path root;
  private String layout;
  private String topicsDir;
  private int flushSize;
  private List<String> partitionBy;
  private boolean gzip;
  private final Map<Buffer, List<SinkRecord>> buffers = new LinkedHashMap<>();
  private long tombstones;

  private record Buffer(TopicPartition partition, Path folder) {}

  @Override
  public String version() {
    return LandingSinkConfig.VERSION;
  }

  @Override
  public void start(Map<String, String> props) {
    LandingSinkConfig config = new LandingSinkConfig(props);
    root = Paths.get(config.getString(LandingSinkConfig.LANDING_DIR)).toAbsolutePath();
    layout = config.getString(LandingSinkConfig.LAYOUT);
    topicsDir = config.getString(LandingSinkConfig.TOPICS_DIR);
    flushSize = config.getInt(LandingSinkConfig.FLUSH_SIZE);
    String prefix = config.getString(LandingSinkConfig.PREFIX).replaceAll("^/+|/+$", "");
    if (layout.equals("lenses") && !prefix.isEmpty()) {
      root = root.resolve(prefix);
    }
    partitionBy = config.getList(LandingSinkConfig.PARTITION_BY);
    gzip = config.getString(LandingSinkConfig.COMPRESSION).equals("gzip");
  }

  @Override
  public void put(Collection<SinkRecord> records) {
    for (SinkRecord record : records) {
      byte[] value = valueBytes(record);
      if (value == null) {
        tombstones++;
        continue;
      }
      TopicPartition tp = new TopicPartition(record.topic(), record.kafkaPartition());
      Buffer buffer = new Buffer(tp, folder(tp, value));
      List<SinkRecord> pending = buffers.computeIfAbsent(buffer, b -> new ArrayList<>());
      pending.add(record);
      if (pending.size() >= flushSize) {
        write(buffer, pending);
        buffers.remove(buffer);
      }
    }
  }

  @Override
  public Map<TopicPartition, OffsetAndMetadata> preCommit(
      Map<TopicPartition, OffsetAndMetadata> currentOffsets) {
    // Every record put so far goes to disk now: the offsets handed back are all durable.
    for (Map.Entry<Buffer, List<SinkRecord>> entry : buffers.entrySet()) {
      write(entry.getKey(), entry.getValue());
    }
    buffers.clear();
    return currentOffsets;
  }

  @Override
  public void close(Collection<TopicPartition> partitions) {
    // Partitions taken away: what is buffered for them is delivered again to their next owner.
    Set<TopicPartition> closed = new HashSet<>(partitions);
    buffers.keySet().removeIf(buffer -> closed.contains(buffer.partition()));
  }

  @Override
  public void stop() {
    if (tombstones > 0) {
      LOG.info("landing sink: {} tombstones skipped", tombstones);
    }
  }

  private static byte[] valueBytes(SinkRecord record) {
    Object value = record.value();
    if (value == null) {
      return null;
    }
    if (value instanceof byte[] bytes) {
      return bytes;
    }
    if (value instanceof String text) {
      return text.getBytes(StandardCharsets.UTF_8);
    }
    throw new DataException(
        "the landing sink writes values as they are in Kafka: set value.converter="
            + "org.apache.kafka.connect.converters.ByteArrayConverter (or StringConverter); got a "
            + value.getClass().getName()
            + " at "
            + record.topic()
            + "-"
            + record.kafkaPartition()
            + "@"
            + record.kafkaOffset());
  }

  // -- layout ------------------------------------------------------------------------------
  private Path folder(TopicPartition tp, byte[] value) {
    if (layout.equals("confluent")) {
      return root.resolve(topicsDir).resolve(tp.topic()).resolve("partition=" + tp.partition());
    }
    if (partitionBy.isEmpty()) {
      return root.resolve(tp.topic()).resolve(Integer.toString(tp.partition()));
    }
    JsonNode row = rowImage(value);
    Path folder = root;
    for (String field : partitionBy) {
      JsonNode node = row == null ? null : row.get(field);
      String text = node == null || node.isNull() ? "null" : node.asText();
      folder = folder.resolve(field + "=" + text.replaceAll("[/\\\\]", "_"));
    }
    return folder;
  }

  private String fileName(TopicPartition tp, long first, long last) {
    if (layout.equals("confluent")) {
      String name = String.format("%s+%d+%010d.json", tp.topic(), tp.partition(), first);
      return gzip ? name + ".gz" : name;
    }
    String extension = gzip ? "gz" : "json";
    if (partitionBy.isEmpty()) {
      return String.format("%012d.%s", last, extension);
    }
    return String.format("%s(%d_%012d).%s", tp.topic(), tp.partition(), last, extension);
  }

  /** Debezium's after (before for a delete), inside JsonConverter's payload when schemas are on. */
  private static JsonNode rowImage(byte[] value) {
    JsonNode doc;
    try {
      doc = JSON.readTree(value);
    } catch (IOException e) {
      return null;
    }
    if (doc != null && doc.isObject() && doc.has("schema") && doc.has("payload")) {
      doc = doc.get("payload");
    }
    if (doc == null || !doc.isObject()) {
      return null;
    }
    if (doc.has("op") && (doc.has("after") || doc.has("before"))) {
      JsonNode after = doc.get("after");
      return after != null && !after.isNull() ? after : doc.get("before");
    }
    return doc;
  }

  // -- files -------------------------------------------------------------------------------
  private void write(Buffer buffer, List<SinkRecord> records) {
    if (records.isEmpty()) {
      return;
    }
    TopicPartition tp = buffer.partition();
    long first = records.get(0).kafkaOffset();
    long last = records.get(records.size() - 1).kafkaOffset();
    String name = fileName(tp, first, last);
    try {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      try (OutputStream out = gzip ? new GZIPOutputStream(bytes) : bytes) {
        for (SinkRecord record : records) {
          out.write(valueBytes(record));
          out.write('\n');
        }
      }
      boolean created = !Files.isDirectory(buffer.folder());
      Files.createDirectories(buffer.folder());
      Path temp = buffer.folder().resolve("." + name + ".tmp");
      try (FileChannel channel =
          FileChannel.open(
              temp,
              StandardOpenOption.CREATE,
              StandardOpenOption.WRITE,
              StandardOpenOption.TRUNCATE_EXISTING)) {
        ByteBuffer data = ByteBuffer.wrap(bytes.toByteArray());
        while (data.hasRemaining()) {
          channel.write(data);
        }
        channel.force(true);
      }
      Files.move(
          temp,
          buffer.folder().resolve(name),
          StandardCopyOption.ATOMIC_MOVE,
          StandardCopyOption.REPLACE_EXISTING);
      forceDirectory(buffer.folder());
      if (created) {
        forceDirectory(buffer.folder().getParent());
      }
    } catch (IOException e) {
      // The worker retries from the last committed offset: nothing past it was acknowledged.
      throw new ConnectException("landing sink: writing " + buffer.folder().resolve(name), e);
    }
  }

  private static void forceDirectory(Path folder) throws IOException {
    try (FileChannel channel = FileChannel.open(folder, StandardOpenOption.READ)) {
      channel.force(true);
    }
  }
}
