/**
 * The environment variables both Kafka adapters read (kafkajs and @platformatic/kafka), declared
 * once so the two agree and the reference page lists them once.
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as EnvVariable from "./EnvVariable.ts"

const brokers = "127.0.0.1:9092"

/**
 * @since 0.1.0
 * @category config
 */
export const variables = EnvVariable.table(
  { package: "adapter-kafka", title: "Kafka client (both Kafka adapters)" },
  {
    brokers: EnvVariable.make({
      name: "KAFKA_BROKERS",
      type: "comma-separated `host:port` list",
      default: `\`${brokers}\``,
      description: "the bootstrap brokers",
      value: [brokers] as ReadonlyArray<string>,
      config: Config.String("KAFKA_BROKERS").pipe(
        Config.withDefault(brokers),
        Config.map((s) =>
          s
            .split(",")
            .map((b) => b.trim())
            .filter((b) => b.length > 0)
        )
      )
    }),
    clientId: EnvVariable.string("KAFKA_CLIENT_ID", "effect-outbox", "the Kafka client id (broker logs and quotas)")
  }
)
