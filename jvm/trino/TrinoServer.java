/**
 * Starts a Trino server from the jars of jvm/trino/server (Trino's own launcher, trino-server-main,
 * is not served from Maven Central): what its main does, without the JVM checks. Run by
 * devstack.trino with Java 25's source launcher: java -cp 'jars/trino/lib/*' TrinoServer.java
 */
public class TrinoServer {
    public static void main(String[] args) {
        new io.trino.server.Server().start(args.length > 0 ? args[0] : "483");
    }
}
