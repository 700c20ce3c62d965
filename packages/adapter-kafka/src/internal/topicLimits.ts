/**
 * How the kafkajs admin reads a topic's `max.message.bytes` for core's `TopicLimits` cache.
 *
 * @internal
 */
import * as TopicLimits from "@effect-outbox/core/TopicLimits"
import * as Effect from "effect/Effect"
import Kafkajs from "kafkajs"

export const make = (admin: Pick<Kafkajs.Admin, "describeConfigs">): TopicLimits.TopicLimits =>
  TopicLimits.make((topic) =>
    Effect.tryPromise(() =>
      admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: Kafkajs.ConfigResourceTypes.TOPIC, name: topic, configNames: ["max.message.bytes"] }]
      })
    ).pipe(
      Effect.map((answer) =>
        TopicLimits.parseBytes(
          answer.resources[0]?.configEntries.find((e) => e.configName === "max.message.bytes")?.configValue
        )
      ),
      Effect.orElseSucceed(() => undefined)
    )
  )
