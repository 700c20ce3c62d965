// The end-to-end scenario (@effect-outbox/testing/EndToEndSuite) with key-ordered concurrency:
// both members of the consumer group run 16 handlers per partition, through the @platformatic/kafka adapter.
import * as EndToEndSuite from "@effect-outbox/testing/EndToEndSuite"
import { freshSchema, pgClient } from "../../adapter-pg/test/support.ts"
import { namedTopic, PlatformaticTest } from "./support.ts"

EndToEndSuite.suite({
  name: "end to end with key concurrency on PostgreSQL and Kafka through @platformatic/kafka",
  prefix: "adapter-platformatic-kc",
  keyConcurrency: 16,
  kafka: PlatformaticTest,
  pg: pgClient(12),
  schema: freshSchema(),
  namedTopic
})
