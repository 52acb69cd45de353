package io.cdclakehouse.connect;

import java.util.Map;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;

/** The landing sink's settings (the names follow the sinks it imitates where they have one). */
public class LandingSinkConfig extends AbstractConfig {
  public static final String VERSION = "0.1.0";

  public static final String LANDING_DIR = "landing.dir";
  public static final String LAYOUT = "layout";
  public static final String TOPICS_DIR = "topics.dir";
  public static final String FLUSH_SIZE = "flush.size";
  public static final String PREFIX = "prefix";
  public static final String PARTITION_BY = "partition.by";
  public static final String COMPRESSION = "compression";

  public static final ConfigDef DEFINITION =
      new ConfigDef()
          .define(
              LANDING_DIR,
              Type.STRING,
              ConfigDef.NO_DEFAULT_VALUE,
              new ConfigDef.NonEmptyString(),
              Importance.HIGH,
              "Root folder of the landing zone (a local or mounted path).")
          .define(
              LAYOUT,
              Type.STRING,
              "confluent",
              ConfigDef.ValidString.in("confluent", "lenses"),
              Importance.HIGH,
              "confluent: <topics.dir>/<topic>/partition=<p>/<topic>+<p>+<first offset>.json"
                  + " (Confluent's S3 sink, DefaultPartitioner). lenses: the stream-reactor"
                  + " S3 sink's KCQL INSERT INTO <bucket>:<prefix> ... [PARTITIONBY <fields>]:"
                  + " <prefix>/<field>=<value>/.../<topic>(<p>_<last offset>).json, or"
                  + " <prefix>/<topic>/<p>/<last offset>.json without PARTITIONBY.")
          .define(
              TOPICS_DIR,
              Type.STRING,
              "topics",
              Importance.MEDIUM,
              "confluent layout: the folder under landing.dir that holds the topics.")
          .define(
              FLUSH_SIZE,
              Type.INT,
              500,
              ConfigDef.Range.atLeast(1),
              Importance.HIGH,
              "Records per file at most (Confluent's flush.size, Lenses' flush.count). A file"
                  + " is also closed at each offset commit (offset.flush.interval.ms), so every"
                  + " record whose offset the worker commits is on disk under a final name.")
          .define(
              PREFIX,
              Type.STRING,
              "",
              Importance.MEDIUM,
              "lenses layout: the KCQL target prefix (the folder under landing.dir).")
          .define(
              PARTITION_BY,
              Type.LIST,
              "",
              Importance.MEDIUM,
              "lenses layout: the KCQL PARTITIONBY fields, read from the record's row image"
                  + " (Debezium's after, or before for a delete; a flattened row as it is).")
          .define(
              COMPRESSION,
              Type.STRING,
              "none",
              ConfigDef.ValidString.in("none", "gzip"),
              Importance.LOW,
              "gzip: files are gzip-compressed (.json.gz in the confluent layout, .gz in the"
                  + " lenses one, as those sinks name them).");

  public LandingSinkConfig(Map<String, String> props) {
    super(DEFINITION, props);
  }
}
