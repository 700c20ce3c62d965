/**
 * A broker outage as every in-memory broker port sees it: refused at once, timed out after a
 * while, or frozen until the broker is back (then carried out late, as a request the broker
 * received before it hung). Kept apart from the ports so the publish path itself is unchanged.
 *
 * @internal
 */
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import { BrokerAdminError, BrokerUnavailableError, ProbeError } from "@effect-outbox/core/Errors"
import type { Publisher, PublishOutcome } from "@effect-outbox/core/Publisher"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Result from "effect/Result"
import type { BrokerEngine } from "./brokerEngine.ts"

/**
 * Passes when the broker is up; during an outage fails with `unavailable(reason)` (refuse: at
 * once, timeout: after the timeout) or, frozen, waits until the outage ends.
 */
export const gate = <E>(engine: BrokerEngine, unavailable: (reason: string) => E): Effect.Effect<void, E> =>
  Effect.suspend(() => {
    const outage = engine.outage
    if (outage === undefined) return Effect.void
    switch (outage.mode) {
      case "refuse":
        return Effect.fail(unavailable("connection refused (ECONNREFUSED): the broker is down"))
      case "timeout":
        return Effect.andThen(
          Effect.sleep(Duration.millis(outage.timeoutMillis)),
          Effect.fail(unavailable(`request timed out after ${outage.timeoutMillis} ms: the broker does not answer`))
        )
      case "freeze":
        return Effect.andThen(Deferred.await(outage.ended), gate(engine, unavailable))
    }
  })

/** Waits while the broker is down, whatever the mode (a consumer's fetch just sees no records). */
export const waitUp = (engine: BrokerEngine): Effect.Effect<void> =>
  Effect.suspend(() =>
    engine.outage === undefined ? Effect.void : Effect.andThen(Deferred.await(engine.outage.ended), waitUp(engine))
  )

/**
 * The publisher during outages: refused and timed-out calls fail every record with
 * `BrokerUnavailableError` (nothing appended); a frozen call is sent on a fiber of its own, which
 * appends once the broker is back even if the caller gave up waiting (its timeout).
 */
export const publisher = (engine: BrokerEngine, inner: Publisher["Service"]): Publisher["Service"] => ({
  publish: (requests) =>
    Effect.suspend(() => {
      if (engine.outage === undefined) return inner.publish(requests)
      const sent = gate(engine, (reason) => reason).pipe(
        Effect.matchEffect({
          onFailure: (reason) =>
            Effect.succeed(
              requests.map(
                (request): PublishOutcome => Result.fail(new BrokerUnavailableError({ topic: request.topic, reason }))
              )
            ),
          onSuccess: () => inner.publish(requests)
        })
      )
      return engine.outage.mode === "freeze" ? Effect.flatMap(Effect.forkDetach(sent), Fiber.join) : sent
    })
})

/** The probe during outages: `ProbeError` (the caller cannot tell whether the record is there). */
export const probe = (engine: BrokerEngine, inner: BrokerProbe["Service"]): BrokerProbe["Service"] => {
  const down = (topic: string) => gate(engine, (reason) => new ProbeError({ topic, reason }))
  const findMany = inner.findMany
  return {
    find: (request) => Effect.andThen(down(request.topic), inner.find(request)),
    ...(findMany === undefined ? {} : { findMany: (request) => Effect.andThen(down(request.topic), findMany(request)) })
  }
}

/** The admin client during outages: `BrokerAdminError`. */
export const admin = (engine: BrokerEngine, inner: BrokerAdmin["Service"]): BrokerAdmin["Service"] => {
  const down = (operation: string, topic: string) =>
    gate(engine, (reason) => new BrokerAdminError({ operation, topic, reason }))
  return {
    partitionCount: (topic) => Effect.andThen(down("partitionCount", topic), inner.partitionCount(topic)),
    ensureTopic: (request) => Effect.andThen(down("ensureTopic", request.topic), inner.ensureTopic(request)),
    growPartitions: (topic, partitions) =>
      Effect.andThen(down("growPartitions", topic), inner.growPartitions(topic, partitions)),
    groupOffsets: (request) =>
      Effect.andThen(down("groupOffsets", request.topics.join(",")), inner.groupOffsets(request)),
    commitGroupOffsets: (request) =>
      Effect.andThen(down("commitGroupOffsets", request.topic), inner.commitGroupOffsets(request))
  }
}
