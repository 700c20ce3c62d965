// Used by scripts/services: exits 0 once the broker at args[0] answers a metadata request AND a
// group-coordinator lookup (FindCoordinator + OffsetFetch for a throwaway group). A freshly
// formatted broker accepts connections before it can serve consumer groups: its
// __consumer_offsets topic is created on the first lookup and loaded a moment later, and clients
// that come first see NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE. The admin client retries those
// by itself until the deadline (args[1] ms).
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;

public class Ready {
  public static void main(String[] args) throws Exception {
    long timeout = Long.parseLong(args[1]);
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) timeout);
    props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 5000);
    props.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, 200);
    try (Admin admin = Admin.create(props)) {
      long t0 = System.nanoTime();
      int nodes = admin.describeCluster().nodes().get(timeout, TimeUnit.MILLISECONDS).size();
      admin.listConsumerGroupOffsets("effect-outbox-services-ready").partitionsToOffsetAndMetadata()
          .get(timeout, TimeUnit.MILLISECONDS);
      System.out.println("metadata (" + nodes + " node) and group coordinator answered in "
          + (System.nanoTime() - t0) / 1_000_000 + " ms");
    }
  }
}
