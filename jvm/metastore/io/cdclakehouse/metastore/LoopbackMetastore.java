package io.cdclakehouse.metastore;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.TableType;
import org.apache.hadoop.hive.metastore.api.FieldSchema;
import org.apache.hadoop.hive.metastore.api.NoSuchObjectException;
import org.apache.hadoop.hive.metastore.api.SerDeInfo;
import org.apache.hadoop.hive.metastore.api.StorageDescriptor;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.api.ThriftHiveMetastore;
import org.apache.hadoop.hive.metastore.TSetIpAddressProcessor;
import org.apache.hadoop.hive.thrift.TUGIContainingTransport;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;

/**
 * The Hive metastore service of Spark's own Hive jars (2.3.9, in the pyspark wheel), bound to
 * one address. {@code HiveMetaStore.main} binds every interface and Hive 2.3 has no bind-host
 * setting, so this starts the same handler ({@code HiveMetaStore.newRetryingHMSHandler}, what
 * {@code startMetaStore} runs) behind a Thrift server on {@code <host>:<port>}, unsecured
 * transport as {@code startMetaStore} sets it up without SASL. The database settings come from
 * the hive-site.xml on the class path (devstack.metastore writes it).
 *
 * <pre>java -cp conf:jars/cdc-metastore.jar:pyspark/jars/*:jars/postgresql.jar \
 *   io.cdclakehouse.metastore.LoopbackMetastore 127.0.0.1 9083</pre>
 */
public final class LoopbackMetastore {
  private LoopbackMetastore() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: LoopbackMetastore <host> <port>");
      System.exit(2);
    }
    InetSocketAddress address = new InetSocketAddress(args[0], Integer.parseInt(args[1]));
    HiveConf conf = new HiveConf(HiveMetaStore.HMSHandler.class);
    ThriftHiveMetastore.Iface handler = HiveMetaStore.newRetryingHMSHandler("loopback metastore", conf, false);
    firstWrite(handler);
    TServerSocket socket = new TServerSocket(address);
    TThreadPoolServer.Args serverArgs =
        new TThreadPoolServer.Args(socket)
            .processor(new TSetIpAddressProcessor<>(handler))
            .transportFactory(new TUGIContainingTransport.Factory())
            .protocolFactory(new TBinaryProtocol.Factory())
            .inputProtocolFactory(new TBinaryProtocol.Factory(true, true, Integer.MAX_VALUE, -1))
            .minWorkerThreads(conf.getIntVar(HiveConf.ConfVars.METASTORESERVERMINTHREADS))
            .maxWorkerThreads(conf.getIntVar(HiveConf.ConfVars.METASTORESERVERMAXTHREADS));
    System.out.println("metastore listening on " + address);
    new TThreadPoolServer(serverArgs).serve();
  }

  /**
   * The service's first table write, before it serves anyone: a view created and dropped in
   * {@code default}, with table and serde parameters. DataNucleus 4.1 (Hive 2.3's) builds the
   * statement that reads a parameter on first use without checking again inside its lock, so
   * two clients' first writes at the same moment (several processes' Iceberg commits) could fail
   * one of them with "ownerIdx is null" (datanucleus/datanucleus-rdbms#288, fixed in 5.2). Once
   * built, the statements are only read. The embedded target does the same
   * (adapter/dbt/adapters/sparksession/metastore_warm_up.py).
   */
  private static void firstWrite(ThriftHiveMetastore.Iface handler) throws Exception {
    String name = "cdc_lakehouse_metastore_warm_up";
    try {
      handler.drop_table("default", name, false); // left by a service killed in between
    } catch (NoSuchObjectException absent) {
      // the usual case
    }
    Map<String, String> serde = new HashMap<>();
    serde.put("serialization.format", "1");
    StorageDescriptor descriptor = new StorageDescriptor();
    descriptor.setCols(Collections.singletonList(new FieldSchema("warm_up", "int", null)));
    descriptor.setSerdeInfo(new SerDeInfo(null, null, serde));
    descriptor.setBucketCols(new ArrayList<>());
    descriptor.setSortCols(new ArrayList<>());
    Table view = new Table();
    view.setDbName("default");
    view.setTableName(name);
    view.setTableType(TableType.VIRTUAL_VIEW.toString());
    view.setViewOriginalText("select 1 as warm_up");
    view.setViewExpandedText("select 1 as `warm_up`");
    view.setSd(descriptor);
    view.setPartitionKeys(new ArrayList<>());
    view.setParameters(new HashMap<>(Collections.singletonMap("comment", "dropped again")));
    handler.create_table(view);
    handler.drop_table("default", name, false);
  }
}
