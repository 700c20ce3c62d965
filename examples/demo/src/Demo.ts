/**
 * The demo program: a bounded run of the reference flow, end to end, then a summary that checks
 * the guarantees instead of asserting them.
 *
 * 1. The shop places `orders` orders, one transaction each: the order row and its `OrderPlaced`
 *    event. Every `rollbackEvery`-th transaction is declined after both writes and rolls back.
 * 2. A broken producer writes `poison` records around the typed topic.
 * 3. Relays publish the outbox (several instances share the table); stale recovery runs beside.
 * 4. Billing consumes with `processOnce`: one invoice per order. The first attempt for every
 *    `flakyEvery`-th order fails transiently and is retried; poison records are dead-lettered.
 * 5. When every committed event is finished (or `timeout` passes) the run stops and checks:
 *    no loss (every committed event published and finished, on the broker), no phantom (no event,
 *    record or invoice from a rolled-back transaction), exactly-once effects (one invoice per
 *    order), per-customer order, and every poison record on the dead-letter topic.
 *
 * @since 0.1.0
 */
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import type { Engine } from "@effect-outbox/core/OutboxEngine"
import { EVENT_ID_HEADER, type EventId } from "@effect-outbox/core/OutboxMessage"
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Relay from "@effect-outbox/core/Relay"
import * as Telemetry from "@effect-outbox/core/Telemetry"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as SqlClient from "effect/sql/SqlClient"
import * as Orders from "./Orders.ts"
import * as Progress from "./Progress.ts"
import type { Broker } from "./Services.ts"
import * as Tally from "./Tally.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Orders the shop tries to place (default 200). */
  readonly orders: number
  /** Every n-th order's transaction rolls back (default 7; 0 never). */
  readonly rollbackEvery: number
  /** Every n-th order's first billing attempt fails transiently (default 10; 0 never). */
  readonly flakyEvery: number
  /** Poison records written around the typed topic (default 1). */
  readonly poison: number
  /** Distinct customers, i.e. ordering keys (default 8). */
  readonly customers: number
  /** Partitions of the orders topic (default 4). */
  readonly partitions: number
  /** Relay instances sharing the outbox table (default 2). */
  readonly relays: number
  /** Relay poll interval when no wake-up signal arrives. */
  readonly pollInterval: Duration.Duration
  /** Give up waiting after this long; the summary then reports what is unfinished. */
  readonly timeout: Duration.Duration
  /** The demo's table schema (its own tables: orders, invoices). */
  readonly schema: string
  /** Topic name of the orders (the dead letters go to `<topic>.DLT`). */
  readonly topic: string
  /** Consumer group of billing. */
  readonly groupId: string
  readonly progress?: Pick<Progress.Options, "write" | "tty" | "interval"> | undefined
  /**
   * The relay engine (default `claim`). `log` needs a PostgreSQL with `wal_level = logical`: one
   * log relay publishes from the slot (`relays` is then ignored), and no outbox row tracks an
   * event, so the run counts invoices and dead letters instead (`Tally`).
   */
  readonly engine?: Engine | undefined
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaults: Omit<Options, "schema" | "topic" | "groupId"> = {
  orders: 200,
  rollbackEvery: 7,
  flakyEvery: 10,
  poison: 1,
  customers: 8,
  partitions: 4,
  relays: 2,
  pollInterval: Duration.millis(100),
  timeout: Duration.minutes(2)
}

/**
 * What the run did and what it proved. `problems` is empty when every guarantee held.
 *
 * @since 0.1.0
 * @category models
 */
export interface Summary {
  readonly ordersAttempted: number
  readonly ordersCommitted: number
  readonly rolledBack: number
  /** Committed events: one per committed order plus the poison records. */
  readonly eventsCommitted: number
  /** Rows past the broker (`PUBLISHED` or later). */
  readonly published: number
  /** Rows `SUCCESS`: the consumer's effect committed. */
  readonly processed: number
  /** Rows `PUSHED_FAILURE`: dead-lettered by the consumer. */
  readonly deadLettered: number
  /** Rows `FAILURE`: the relay gave up publishing. */
  readonly publishFailed: number
  /** Committed events not finished when the run stopped. */
  readonly unfinished: number
  /** Records on the orders topic billing's consumer group had not committed when it stopped. */
  readonly consumerLag: number
  readonly invoices: number
  /** Invoices beyond the first of an order (exactly-once broken). */
  readonly duplicateInvoices: number
  /** Committed orders without an invoice. */
  readonly missingInvoices: number
  /** Invoices for orders that were rolled back or never existed. */
  readonly phantomInvoices: number
  /** Rolled-back events found in the outbox table or on the broker. */
  readonly phantomEvents: number
  /** Committed events never seen on the orders topic. */
  readonly missingOnBroker: number
  /** Records on the orders topic (re-sends after a lost acknowledgement count twice). */
  readonly recordsOnTopic: number
  /** Records on the dead-letter topic, and how many of them are the poison records. */
  readonly deadLettersOnTopic: number
  readonly poisonDeadLettered: number
  /** Customers whose invoices were not created in the order their orders were placed. */
  readonly orderViolations: number
  /** Transient billing failures that were retried. */
  readonly retries: number
  readonly elapsedMillis: number
  readonly problems: ReadonlyArray<string>
}

/**
 * What the demo program needs: the storage and broker ports `OutboxRuntime` runs on (the demo
 * reads the outbox store for stats and lookups), and SQL for its own tables.
 *
 * @since 0.1.0
 * @category models
 */
export type Requirements = OutboxRuntime.Ports | SqlClient.SqlClient | Broker

const unfinishedStatuses = ["PREQUEUED", "PENDING", "DISPATCHING", "PUBLISHED", "UNDER_PROCESSING"] as const

/**
 * Runs the reference flow and returns its summary. Never fails on a broken guarantee: that is
 * what `problems` reports.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (options: Options) =>
  Effect.scoped(
    Effect.gen(function* () {
      const started = Date.now()
      const sql = yield* SqlClient.SqlClient
      const store = yield* OutboxStore
      const admin = yield* BrokerAdmin
      const topic = Orders.ordersTopic(options.topic)

      yield* Orders.createTables(options.schema)
      yield* admin.ensureTopic({ topic: topic.name, partitions: options.partitions })
      yield* admin.ensureTopic({ topic: topic.deadLetterTopic, partitions: 1 })

      const committedIds: Array<EventId> = []
      const rolledBackIds: Array<EventId> = []
      const poisonIds: Array<EventId> = []
      const committedOrders = new Set<string>()
      const rolledBackOrders = new Set<string>()
      let retries = 0
      const producing = yield* Ref.make(true)

      const engine = options.engine ?? "claim"
      const tally: Tally.Tally =
        engine === "claim"
          ? Tally.claim(store)
          : Tally.log({
              sql,
              admin,
              schema: options.schema,
              deadLetterTopic: topic.deadLetterTopic,
              committed: () => committedIds
            })
      // Billing's lag as the broker sees it: records on the topic past its committed offsets
      // (the `outbox_consumer_lag` gauge; OutboxRuntime samples it too, every 10 s).
      const consumerLagNow = Telemetry.sampleConsumerLag({
        groupId: options.groupId,
        topics: [topic.name],
        fromBeginning: true
      }).pipe(
        Effect.map((rows) => rows.reduce((total, row) => total + row.lag, 0)),
        Effect.provideService(BrokerAdmin, admin)
      )
      let lastSnapshot: Progress.Snapshot = {
        enqueued: 0,
        rolledBack: 0,
        published: 0,
        processed: 0,
        deadLettered: 0,
        unfinished: 0,
        consumerLag: undefined,
        elapsedMillis: 0
      }
      const sample: Effect.Effect<Progress.Snapshot> = Effect.all([
        tally,
        consumerLagNow.pipe(Effect.orElseSucceed(() => lastSnapshot.consumerLag))
      ]).pipe(
        Effect.map(([counts, consumerLag]): Progress.Snapshot => {
          const committed = committedIds.length
          const { processed, deadLettered } = counts
          return {
            enqueued: committed,
            rolledBack: rolledBackIds.length,
            published: counts.published,
            processed,
            deadLettered,
            unfinished: Math.max(0, committed - processed - deadLettered - counts.publishFailed),
            consumerLag,
            elapsedMillis: Date.now() - started
          }
        }),
        Effect.tap((snapshot) => Effect.sync(() => (lastSnapshot = snapshot))),
        // A failed sample (database busy, restarting) shows the last one again.
        Effect.catch(() => Effect.sync(() => ({ ...lastSnapshot, elapsedMillis: Date.now() - started })))
      )

      const display = yield* Progress.start({ sample, target: options.orders + options.poison, ...options.progress })
      const displayLogger = Logger.make(({ logLevel, message }) =>
        display.print(
          `${logLevel.toUpperCase()} ${Array.isArray(message) ? message.map(String).join(" ") : String(message)}`
        )
      )
      const finished = yield* Effect.scoped(
        Effect.gen(function* () {
          const poisonAt = new Set(
            Array.from({ length: options.poison }, (_, i) =>
              Math.floor(((i + 1) * options.orders) / (options.poison + 1))
            )
          )
          const produce = Effect.gen(function* () {
            for (let n = 1; n <= options.orders; n++) {
              const order: Orders.OrderPlaced = {
                orderId: `order-${n}`,
                customerId: `customer-${(n % options.customers) + 1}`,
                amountCents: 100 + ((n * 37) % 5000)
              }
              const declined = options.rollbackEvery > 0 && n % options.rollbackEvery === 0
              const placed = yield* Orders.placeOrder(options.schema, topic, order, declined)
              if (placed.committed) {
                committedIds.push(placed.eventId)
                committedOrders.add(order.orderId)
              } else {
                rolledBackIds.push(placed.eventId)
                rolledBackOrders.add(order.orderId)
              }
              if (poisonAt.has(n)) {
                const id = yield* Orders.enqueuePoison(topic.name, `poison-${n}`, order.customerId)
                poisonIds.push(id)
                committedIds.push(id)
              }
            }
            yield* Ref.set(producing, false)
          })

          const allFinished = Effect.gen(function* () {
            while (true) {
              yield* Effect.sleep(Duration.millis(100))
              if (yield* Ref.get(producing)) continue
              if ((yield* tally).unfinished === 0) return true
            }
          })

          const outcome = yield* Effect.andThen(produce, allFinished).pipe(
            Effect.timeoutOption(options.timeout),
            Effect.map(Option.isSome)
          )
          yield* display.finish
          return outcome
        }).pipe(
          // The service's runtime: relays, stale recovery and the billing consumer run while the
          // shop produces, and shut down gracefully (consumer, then relays) when the run ends.
          Effect.provide(
            OutboxRuntime.layer({
              engine,
              logRelay: { pollInterval: options.pollInterval, backoff: "50 millis", maxBackoff: "1 second" },
              relay: {
                instances: options.relays,
                owner: "demo-relay",
                batchSize: 50,
                pollInterval: options.pollInterval,
                backoff: Relay.backoff("50 millis", "1 second"),
                shutdownTimeout: Duration.seconds(5)
              },
              staleRecovery: { interval: Duration.seconds(2) },
              // The summary reads every row: nothing is purged during the run.
              retention: false,
              inboxRetention: false,
              runConsumers: true,
              consumers: [
                OutboxRuntime.consumer(
                  Orders.billing({
                    schema: options.schema,
                    topic,
                    groupId: options.groupId,
                    flaky: (orderId) => options.flakyEvery > 0 && orderNumber(orderId) % options.flakyEvery === 0,
                    onRetry: () => void retries++
                  })
                )
              ]
            })
          ),
          // Log lines (warnings by default) print above the progress line instead of through it.
          Effect.provideService(Logger.CurrentLoggers, new Set([displayLogger]))
        )
      )

      return yield* summarize({
        options,
        topic,
        started,
        finished,
        committedIds,
        rolledBackIds,
        poisonIds,
        committedOrders,
        rolledBackOrders,
        retries,
        consumerLag: yield* consumerLagNow,
        sql,
        store
      })
    })
  )

const orderNumber = (orderId: string) => Number(orderId.slice(orderId.lastIndexOf("-") + 1))

const summarize = (input: {
  readonly options: Options
  readonly topic: Orders.OrdersTopic
  readonly started: number
  readonly finished: boolean
  readonly committedIds: ReadonlyArray<EventId>
  readonly rolledBackIds: ReadonlyArray<EventId>
  readonly poisonIds: ReadonlyArray<EventId>
  readonly committedOrders: ReadonlySet<string>
  readonly rolledBackOrders: ReadonlySet<string>
  readonly retries: number
  readonly consumerLag: number
  readonly sql: SqlClient.SqlClient
  readonly store: OutboxStore["Service"]
}) =>
  Effect.gen(function* () {
    const { options, sql, store } = input
    const problems: Array<string> = []
    const reader = yield* TopicReader

    // The broker's view: which event ids reached the orders topic and the dead-letter topic.
    const onTopic = yield* reader.read(input.topic.name).pipe(Stream.runCollect)
    const idsOnTopic = new Set(onTopic.flatMap((record) => record.headers[EVENT_ID_HEADER] ?? []))
    const deadLetters = yield* reader.read(input.topic.deadLetterTopic).pipe(
      Stream.runCollect,
      Effect.map((records) => records.flatMap((record) => Option.toArray(DeadLetter.parse(record))))
    )
    const deadLetteredIds = new Set(deadLetters.flatMap((letter) => letter.eventId ?? []))

    // The database's view.
    let phantomEvents = 0
    for (const id of input.rolledBackIds) {
      if (Option.isSome(yield* store.get(id)) || idsOnTopic.has(id)) phantomEvents++
    }
    const counts = yield* options.engine === "log"
      ? logCounts(input, idsOnTopic, deadLetteredIds)
      : Effect.gen(function* () {
          let unfinished = 0
          for (const id of input.committedIds) {
            const row = yield* store.get(id)
            const open = Option.isSome(row) && (unfinishedStatuses as ReadonlyArray<string>).includes(row.value.status)
            if (Option.isNone(row) || open) unfinished++
          }
          return { ...(yield* Tally.claim(store)), unfinished }
        })
    const { unfinished } = counts
    const missingOnBroker = input.committedIds.filter((id) => !idsOnTopic.has(id)).length

    const invoices = yield* sql.unsafe<{ order_id: string; customer_id: string }>(
      `SELECT order_id, customer_id FROM "${options.schema}".invoices ORDER BY seq`
    )
    const perOrder = new Map<string, number>()
    for (const invoice of invoices) perOrder.set(invoice.order_id, (perOrder.get(invoice.order_id) ?? 0) + 1)
    const duplicateInvoices = [...perOrder.values()].reduce((n, count) => n + Math.max(0, count - 1), 0)
    const missingInvoices = [...input.committedOrders].filter((id) => !perOrder.has(id)).length
    const phantomInvoices = [...perOrder.keys()].filter((id) => !input.committedOrders.has(id)).length

    // Per customer, invoices must follow the order in which the orders were placed.
    const placed = yield* sql.unsafe<{ id: string; customer_id: string }>(
      `SELECT id, customer_id FROM "${options.schema}".orders ORDER BY seq`
    )
    const sequence = (rows: ReadonlyArray<{ customer_id: string; id: string }>) => {
      const byCustomer = new Map<string, Array<string>>()
      const seen = new Set<string>()
      for (const row of rows) {
        if (seen.has(row.id)) continue
        seen.add(row.id)
        const list = byCustomer.get(row.customer_id) ?? []
        list.push(row.id)
        byCustomer.set(row.customer_id, list)
      }
      return byCustomer
    }
    const expected = sequence(placed)
    const actual = sequence(invoices.map((invoice) => ({ customer_id: invoice.customer_id, id: invoice.order_id })))
    let orderViolations = 0
    for (const [customer, ids] of expected) {
      if ((actual.get(customer) ?? []).join(",") !== ids.join(",")) orderViolations++
    }

    const poisonDeadLettered = input.poisonIds.filter((id) => deadLetteredIds.has(id)).length
    const summary: Omit<Summary, "problems"> = {
      ordersAttempted: options.orders,
      ordersCommitted: input.committedOrders.size,
      rolledBack: input.rolledBackOrders.size,
      eventsCommitted: input.committedIds.length,
      published: counts.published,
      processed: counts.processed,
      deadLettered: counts.deadLettered,
      publishFailed: counts.publishFailed,
      unfinished,
      consumerLag: input.consumerLag,
      invoices: invoices.length,
      duplicateInvoices,
      missingInvoices,
      phantomInvoices,
      phantomEvents,
      missingOnBroker,
      recordsOnTopic: onTopic.length,
      deadLettersOnTopic: deadLetters.length,
      poisonDeadLettered,
      orderViolations,
      retries: input.retries,
      elapsedMillis: Date.now() - input.started
    }
    if (!input.finished) problems.push(`the run did not finish within ${Duration.format(options.timeout)}`)
    if (unfinished > 0) problems.push(`${unfinished} committed events were not finished (lost or stuck)`)
    if (input.consumerLag > 0) {
      problems.push(`billing left ${input.consumerLag} records on ${input.topic.name} uncommitted (consumer lag)`)
    }
    if (missingOnBroker > 0) problems.push(`${missingOnBroker} committed events never reached the broker`)
    if (summary.publishFailed > 0) problems.push(`${summary.publishFailed} events failed to publish`)
    if (phantomEvents > 0) problems.push(`${phantomEvents} events of rolled-back transactions survived (phantoms)`)
    if (duplicateInvoices > 0) problems.push(`${duplicateInvoices} duplicate invoices (effect applied twice)`)
    if (missingInvoices > 0) problems.push(`${missingInvoices} committed orders have no invoice`)
    if (phantomInvoices > 0) problems.push(`${phantomInvoices} invoices for orders that do not exist`)
    if (orderViolations > 0) problems.push(`${orderViolations} customers were billed out of order`)
    if (poisonDeadLettered !== input.poisonIds.length) {
      problems.push(
        `${input.poisonIds.length - poisonDeadLettered} poison records are missing from ${input.topic.deadLetterTopic}`
      )
    }
    if (summary.deadLettered !== input.poisonIds.length) {
      problems.push(
        `${summary.deadLettered} events were dead-lettered; expected exactly the ${input.poisonIds.length} poison records`
      )
    }
    return { ...summary, problems } satisfies Summary
  })

/** The log engine's counts: no outbox rows, so invoices, dead letters and the topic tell. */
const logCounts = (
  input: Pick<Parameters<typeof summarize>[0], "sql" | "options" | "committedIds">,
  idsOnTopic: ReadonlySet<string>,
  deadLetteredIds: ReadonlySet<string>
) =>
  Effect.map(Tally.invoicedEvents(input.sql, input.options.schema), (invoiced): Tally.Counts => {
    const count = (ok: (id: string) => boolean) => input.committedIds.filter(ok).length
    return {
      published: count((id) => idsOnTopic.has(id)),
      processed: count((id) => invoiced.has(id)),
      deadLettered: count((id) => deadLetteredIds.has(id)),
      publishFailed: 0,
      unfinished: count((id) => !invoiced.has(id) && !deadLetteredIds.has(id))
    }
  })

/**
 * The summary as text.
 *
 * @since 0.1.0
 * @category rendering
 */
export const renderSummary = (summary: Summary): string => {
  const lines = [
    "",
    "summary",
    `  orders placed          ${summary.ordersCommitted} committed, ${summary.rolledBack} rolled back (of ${summary.ordersAttempted})`,
    `  events committed       ${summary.eventsCommitted} (${summary.eventsCommitted - summary.ordersCommitted} poison)`,
    `  published              ${summary.published} (${summary.recordsOnTopic} records on the topic)`,
    `  processed              ${summary.processed} (${summary.retries} transient failures retried)`,
    `  dead-lettered          ${summary.deadLettered} (${summary.deadLettersOnTopic} on the DLT, ${summary.poisonDeadLettered} of them poison)`,
    `  invoices               ${summary.invoices} (${summary.duplicateInvoices} duplicate, ${summary.missingInvoices} missing, ${summary.phantomInvoices} phantom)`,
    `  phantom events         ${summary.phantomEvents}`,
    `  per-customer order     ${summary.orderViolations === 0 ? "kept" : `${summary.orderViolations} customers out of order`}`,
    `  unfinished / failed    ${summary.unfinished} / ${summary.publishFailed}`,
    `  consumer lag           ${summary.consumerLag} records (billing's committed offsets vs the topic's end)`,
    `  elapsed                ${(summary.elapsedMillis / 1000).toFixed(1)} s`,
    "",
    summary.problems.length === 0
      ? "OK: no loss, no phantom, exactly one invoice per order, order kept, poison dead-lettered."
      : `FAILED:\n${summary.problems.map((problem) => `  - ${problem}`).join("\n")}`
  ]
  return lines.join("\n")
}
