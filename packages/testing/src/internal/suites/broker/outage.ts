/**
 * `Publisher` case: a broker that cannot be reached is an outage, not the record's fault.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import { publishRequest, uniqueName } from "../../conformance.ts"
import { type Case, errorOf } from "./support.ts"

export const unreachableBrokerUnavailable: Case = {
  name: "a broker that cannot be reached fails every record with BrokerUnavailableError (an outage, not the record's fault)",
  unreachable: true,
  run: ({ prefix }) =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const topic = uniqueName(prefix)
      const requests = yield* Effect.forEach([0, 1], (partition) => publishRequest(topic, { partition }))
      const outcomes = yield* publisher.publish(requests)
      assert.strictEqual(outcomes.length, 2)
      for (const outcome of outcomes) {
        const error = errorOf(outcome)
        assert.strictEqual(error._tag, "BrokerUnavailableError", error.message)
        assert.strictEqual(error.topic, topic)
      }
    })
}
