package io.cdclakehouse.metastore;

import java.net.InetSocketAddress;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
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
}
