// The TopicReader conformance suite on the in-memory broker; the Kafka adapters run it against
// the real broker.
import * as Layer from "effect/Layer"
import * as InMemoryBroker from "../src/InMemoryBroker.ts"
import * as InMemoryTopicReader from "../src/InMemoryTopicReader.ts"
import * as TopicReaderSuite from "../src/TopicReaderSuite.ts"

TopicReaderSuite.suite("InMemoryTopicReader", {
  layer: () => InMemoryTopicReader.layer.pipe(Layer.provideMerge(InMemoryBroker.layer()))
})
