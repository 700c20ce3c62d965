/**
 * How the @platformatic/kafka admin reads a topic's `max.message.bytes` for core's `TopicLimits`
 * cache.
 *
 * @internal
 */
import * as TopicLimits from "@effect-outbox/core/TopicLimits"
import { type Admin, ConfigResourceTypes } from "@platformatic/kafka"
import * as Effect from "effect/Effect"

export const make = (admin: Pick<Admin, "describeConfigs">): TopicLimits.TopicLimits =>
  TopicLimits.make((topic) =>
    Effect.tryPromise(() =>
      admin.describeConfigs({
        resources: [
          { resourceType: ConfigResourceTypes.TOPIC, resourceName: topic, configurationKeys: ["max.message.bytes"] }
        ]
      })
    ).pipe(
      Effect.map((answer) =>
        TopicLimits.parseBytes(answer[0]?.configs.find((c) => c.name === "max.message.bytes")?.value)
      ),
      Effect.orElseSucceed(() => undefined)
    )
  )
