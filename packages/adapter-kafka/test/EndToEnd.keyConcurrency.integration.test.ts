// The end-to-end scenario (@effect-outbox/testing/EndToEndSuite) with key-ordered concurrency:
// both members of the consumer group run 16 handlers per partition, through the kafkajs adapter.
import * as EndToEndSuite from "@effect-outbox/testing/EndToEndSuite"
import { freshSchema, pgClient } from "../../adapter-pg/test/support.ts"
import { KafkaTest, namedTopic } from "./support.ts"

EndToEndSuite.suite({
  name: "end to end with key concurrency on PostgreSQL and Kafka",
  prefix: "adapter-kafka-kc",
  keyConcurrency: 16,
  kafka: KafkaTest,
  pg: pgClient(12),
  schema: freshSchema(),
  namedTopic
})
