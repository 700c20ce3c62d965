/**
 * Topics of one broker-suite test: uniquely named, created through `BrokerAdmin`, and handed to
 * the adapter's `deleteTopics` when the test ends (so a shared broker does not keep them).
 *
 * @internal
 */
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as Effect from "effect/Effect"
import { uniqueName } from "./conformance.ts"

export interface Topics {
  /** A fresh name, not created (for "does not exist" cases), deleted with the others. */
  readonly name: () => string
  /** A fresh topic with `partitions` partitions. */
  readonly make: (partitions: number) => Effect.Effect<string, unknown, BrokerAdmin>
}

export type DeleteTopics<R> = (topics: ReadonlyArray<string>) => Effect.Effect<void, unknown, R>

/** Runs `body` with its own topics; deletes them afterwards, ignoring failures. */
export const withTopics = <A, E, R, RD>(
  prefix: string,
  deleteTopics: DeleteTopics<RD> | undefined,
  body: (topics: Topics) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R | RD> =>
  Effect.suspend(() => {
    const created: Array<string> = []
    const name = () => {
      const topic = uniqueName(prefix)
      created.push(topic)
      return topic
    }
    const make = (partitions: number) =>
      Effect.gen(function* () {
        const topic = name()
        yield* (yield* BrokerAdmin).ensureTopic({ topic, partitions })
        return topic
      })
    return Effect.ensuring(
      body({ name, make }),
      Effect.suspend(() =>
        deleteTopics === undefined || created.length === 0 ? Effect.void : Effect.ignore(deleteTopics(created))
      )
    )
  })
