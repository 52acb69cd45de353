package io.cdclakehouse.connect;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;

/**
 * cdc-lakehouse's landing sink: writes each record value of its topics as one line of a landing
 * file, in the folder layout and file naming of Confluent's S3 sink ({@code layout=confluent}) or
 * of Lenses' stream-reactor S3 sink ({@code layout=lenses}), on a local or mounted file system.
 * Neither of those sinks is served from Maven Central; this one is ours, on Kafka Connect's sink
 * API. Configuration: {@link LandingSinkConfig}.
 */
public class LandingSinkConnector extends SinkConnector {
  private Map<String, String> settings;

  @Override
  public String version() {
    return LandingSinkConfig.VERSION;
  }

  @Override
  public void start(Map<String, String> props) {
    new LandingSinkConfig(props); // fail at start on a bad setting, with ConfigDef's message
    settings = new HashMap<>(props);
  }

  @Override
  public Class<? extends Task> taskClass() {
    return LandingSinkTask.class;
  }

  @Override
  public List<Map<String, String>> taskConfigs(int maxTasks) {
    // Files are per topic partition, and Kafka assigns each partition to one task.
    List<Map<String, String>> configs = new ArrayList<>();
    for (int i = 0; i < maxTasks; i++) {
      configs.add(new HashMap<>(settings));
    }
    return configs;
  }

  @Override
  public void stop() {}

  @Override
  public ConfigDef config() {
    return LandingSinkConfig.DEFINITION;
  }
}
