// A small in-memory world for the outbox algorithms: one database, one broker, the Outbox
// service and the memory wake-up, all sharing state so several relays can run over it.

import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Outbox from "../../src/Outbox.ts"
import type { EventId, OutboxDraft, OutboxMessage } from "../../src/OutboxMessage.ts"
import * as WakeUp from "../../src/WakeUp.ts"

export const draft = (key: string | null, n: number, extra: Partial<OutboxDraft> = {}): OutboxDraft => ({
  topic: "orders",
  key,
  payload: new TextEncoder().encode(`${key ?? "-"}:${n}`),
  ...extra
})

export interface WorldOptions {
  /** Broker options besides the topics (a size limit, a deliberately wrong configuration). */
  readonly broker?: Omit<InMemoryBroker.Options, "topics">
  /** The outbox's enqueue limit on a record (default 1,000 bytes). */
  readonly maxRecordBytes?: number
}

export const makeWorld = (topics: Record<string, number> = { orders: 3 }, options: WorldOptions = {}) =>
  Effect.gen(function* () {
    const database = yield* InMemoryDatabase.make
    const broker = yield* InMemoryBroker.make({ ...options.broker, topics })
    const base = Layer.mergeAll(
      InMemoryDatabase.layerFrom(database),
      InMemoryBroker.layerFrom(broker),
      WakeUp.layerMemory
    )
    const layer = Layer.provideMerge(Outbox.layerWith({ maxRecordBytes: options.maxRecordBytes ?? 1_000 }), base)
    return { database, broker, layer }
  })

export const rows = (database: InMemoryDatabase.Database): Effect.Effect<ReadonlyArray<OutboxMessage>> =>
  database.control.rows

export const row = (database: InMemoryDatabase.Database, id: EventId) =>
  Effect.map(database.control.rows, (all) => {
    const found = all.find((r) => r.id === id)
    if (found === undefined) throw new Error(`no row ${id}`)
    return found
  })

/** Payload texts of a topic's records, partition by partition, in offset order. */
export const logTexts = (broker: InMemoryBroker.Broker, topic = "orders") =>
  Effect.map(broker.control.records(topic), (records) => records.map((r) => new TextDecoder().decode(r.value)))
