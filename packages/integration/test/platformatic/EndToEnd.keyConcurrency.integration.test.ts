// The end-to-end scenario (packages/integration/src/EndToEndSuite.ts) with key-ordered concurrency:
// both members of the consumer group run 16 handlers per partition, through the @platformatic/kafka adapter.
import * as EndToEndSuite from "../../src/EndToEndSuite.ts"
import { freshSchema, pgClient } from "../pg.ts"
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
