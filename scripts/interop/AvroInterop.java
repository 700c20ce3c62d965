// A consumer that is not effect-outbox's: Apache Kafka's Java client and Apache Avro read the
// records of a topic written in the Confluent wire format, check the magic byte, resolve the
// 4-byte schema id through the registry's REST API (GET /schemas/ids/{id}) and decode the Avro
// body with the schema found there. Prints one line per record: "<schema id> <record as JSON>".
//
// java -cp "$(cat classpath)" AvroInterop.java <brokers> <topic> <registry url> <count>
import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.DecoderFactory;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class AvroInterop {
  public static void main(String[] args) throws Exception {
    String brokers = args[0], topic = args[1], registry = args[2];
    int count = Integer.parseInt(args[3]);
    Properties props = new Properties();
    props.put("bootstrap.servers", brokers);
    props.put("group.id", "interop-" + UUID.randomUUID());
    props.put("auto.offset.reset", "earliest");
    props.put("enable.auto.commit", "false");
    props.put("key.deserializer", ByteArrayDeserializer.class.getName());
    props.put("value.deserializer", ByteArrayDeserializer.class.getName());
    HttpClient http = HttpClient.newHttpClient();
    ObjectMapper json = new ObjectMapper();
    Map<Integer, Schema> schemas = new HashMap<>();
    int seen = 0;
    long deadline = System.currentTimeMillis() + 60_000;
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      consumer.subscribe(List.of(topic));
      while (seen < count && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(500))) {
          ByteBuffer value = ByteBuffer.wrap(record.value());
          byte magic = value.get();
          if (magic != 0) throw new IllegalStateException("magic byte " + magic + " at offset " + record.offset());
          int id = value.getInt();
          Schema schema = schemas.get(id);
          if (schema == null) {
            HttpResponse<String> answer = http.send(
                HttpRequest.newBuilder(URI.create(registry + "/schemas/ids/" + id)).build(),
                HttpResponse.BodyHandlers.ofString());
            if (answer.statusCode() != 200) throw new IllegalStateException("schema " + id + ": HTTP " + answer.statusCode());
            schema = new Schema.Parser().parse(json.readTree(answer.body()).get("schema").asText());
            schemas.put(id, schema);
          }
          GenericRecord decoded = new GenericDatumReader<GenericRecord>(schema).read(
              null, DecoderFactory.get().binaryDecoder(record.value(), 5, record.value().length - 5, null));
          System.out.println(id + " " + schema.getFullName() + " " + decoded);
          seen++;
        }
      }
    }
    if (seen < count) throw new IllegalStateException("read " + seen + " of " + count + " records");
  }
}
