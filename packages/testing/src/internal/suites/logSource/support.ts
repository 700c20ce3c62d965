/**
 * What the `LogSource` / `LogWriter` cases share: the services under test, events as
 * `Outbox.enqueue` makes them, committing them, and reading a lease until a window holds them.
 *
 * @internal
 */
import { randomBytes } from "node:crypto"
import type { LogMessage } from "@effect-outbox/core/LogRecord"
import { type LogLease, LogSource, type LogWindow } from "@effect-outbox/core/LogSource"
import { LogWriter } from "@effect-outbox/core/LogWriter"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type * as SuiteCase from "../suiteCase.ts"

export type Services = LogSource | LogWriter | Transactor

/** The suite's feature switches (documented on `LogSourceSuite.Features`). */
export type Feature = "transactional"

export type Case = SuiteCase.Case<void, Services | Scope.Scope, Feature>

/** A UUIDv7 of now, as `Outbox.enqueue` makes them (a source may file events by the id's time). */
export const eventId = (): EventId => {
  const b = randomBytes(16)
  b.writeUIntBE(Date.now(), 0, 6)
  b[6] = (b[6]! & 0x0f) | 0x70
  b[8] = (b[8]! & 0x3f) | 0x80
  const h = b.toString("hex")
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}` as EventId
}

export const message = (key: string, n: number): LogMessage => {
  const id = eventId()
  return {
    id,
    topic: "orders",
    key,
    partition: n % 2 === 0 ? null : 1,
    headers: { "event-id": id, note: `n=${n}` },
    payload: new Uint8Array([n, 0, 255, n]),
    createdAt: 1_700_000_000_000 + n
  }
}

/** An entry as written: without the `position` a source stamps on what it reads. */
export const written = (entry: LogMessage): LogMessage => {
  const { position: _position, ...rest } = entry
  return rest
}

/** Commits each group as one transaction. */
export const commit = (groups: ReadonlyArray<ReadonlyArray<LogMessage>>) =>
  Effect.gen(function* () {
    const writer = yield* LogWriter
    const transactor = yield* Transactor
    for (const group of groups) yield* transactor.withTransaction(writer.emit(group))
  })

/** Reads until the window holds `n` entries (a server may make commits readable a moment later). */
export const readAtLeast = (lease: LogLease, n: number, maxEntries = 1_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 10_000
    let window: LogWindow = yield* lease.read(maxEntries)
    while (window.entries.length < n && Date.now() < deadline) {
      yield* Effect.sleep(Duration.millis(50))
      window = yield* lease.read(maxEntries)
    }
    return window
  })

/** The lease, which the case expects to be free. */
export const acquired = Effect.flatMap(Effect.service(LogSource), (source) =>
  Effect.flatMap(source.acquire, (lease) =>
    Option.isSome(lease) ? Effect.succeed(lease.value) : Effect.die(new Error("the lease is held elsewhere"))
  )
)
