// The end-to-end scenario (packages/integration/src/EndToEndSuite.ts) on PostgreSQL and Kafka through
// the kafkajs adapter: relays publishing through KafkaPublisher, a consumer group of two members on
// KafkaConsumerSource.
import * as EndToEndSuite from "../../src/EndToEndSuite.ts"
import { freshSchema, pgClient } from "../pg.ts"
import { KafkaTest, namedTopic } from "./support.ts"

EndToEndSuite.suite({
  name: "end to end on PostgreSQL and Kafka",
  prefix: "adapter-kafka",
  kafka: KafkaTest,
  pg: pgClient(12),
  schema: freshSchema(),
  namedTopic
})
