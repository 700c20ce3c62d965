// The end-to-end scenario (packages/integration/src/EndToEndSuite.ts) on PostgreSQL and Kafka through
// the @platformatic/kafka adapter (issue 16): relays publishing through PlatformaticPublisher, a
// consumer group of two members on PlatformaticConsumerSource.
import * as EndToEndSuite from "../../src/EndToEndSuite.ts"
import { freshSchema, pgClient } from "../pg.ts"
import { namedTopic, PlatformaticTest } from "./support.ts"

EndToEndSuite.suite({
  name: "end to end on PostgreSQL and Kafka through @platformatic/kafka",
  prefix: "adapter-platformatic",
  kafka: PlatformaticTest,
  pg: pgClient(12),
  schema: freshSchema(),
  namedTopic
})
