/**
 * The mailbox end to end: users get partitions by sequential assignment (the topic grows), each
 * user's commands go to their partition keyed by their canonical id, the consumer applies them in
 * order, and every command's outbox row ends `SUCCESS` — or `PUSHED_FAILURE` for a command the
 * mailbox cannot apply, which is dead-lettered.
 *
 * @since 0.1.0
 */
import { PgTables } from "@effect-outbox/adapter-pg/PgTables"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import { EVENT_ID_HEADER, type EventId } from "@effect-outbox/core/OutboxMessage"
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as SqlClient from "effect/sql/SqlClient"
import { AuthSubject, EmailAddress, type MailboxUserId } from "./Ids.ts"
import * as Mailbox from "./Mailbox.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly schema: string
  readonly topic: string
  readonly groupId: string
  readonly users: number
  readonly messagesPerUser: number
  readonly timeout: Duration.Input
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Report {
  readonly users: ReadonlyArray<{ readonly id: MailboxUserId; readonly partition: number }>
  readonly partitionCount: number
  /** Every record on the mailbox topic: where it went and under which key. */
  readonly records: ReadonlyArray<{ readonly partition: number; readonly key: string | null; readonly eventId: string }>
  /** Each user's messages in the order the consumer applied them, with their state. */
  readonly mailboxes: ReadonlyMap<string, ReadonlyArray<{ readonly messageId: string; readonly state: string }>>
  readonly statuses: ReadonlyMap<EventId, OutboxStatus>
  /** The event of the command that could not be applied, and the recorded lifecycle of one that could. */
  readonly poisonEventId: EventId
  readonly deadLettered: ReadonlyArray<string>
  readonly lifecycle: ReadonlyArray<string>
  readonly finished: boolean
}

/**
 * Runs the scenario on the services in context (PostgreSQL storage with its `PgTables`, a broker,
 * `PartitionAssignment`).
 *
 * @since 0.1.0
 * @category running
 */
export const run = (options: Options) =>
  Effect.gen(function* () {
    const topic = Mailbox.mailboxTopic(options.topic)
    const admin = yield* BrokerAdmin
    yield* Mailbox.createTables(options.schema)
    // One partition to start with: assignment grows the topic as users arrive.
    yield* admin.ensureTopic({ topic: topic.name, partitions: 1 })
    yield* admin.ensureTopic({ topic: topic.deadLetterTopic, partitions: 1 })

    const users: Array<{ id: MailboxUserId; partition: number }> = []
    let partitionCount = 1
    for (let i = 0; i < options.users; i++) {
      const user = yield* Mailbox.createUser(options.schema, topic, {
        email: EmailAddress.make(`user${i}@example.com`),
        authSubject: AuthSubject.make(`auth0|${1000 + i}`)
      })
      users.push({ id: user.id, partition: user.partition })
      partitionCount = Math.max(partitionCount, user.partitionCount)
    }

    const store = yield* OutboxStore
    const transactor = yield* Transactor
    let poisonEventId: EventId | undefined
    let sampleEventId: EventId | undefined
    const finished = yield* Effect.gen(function* () {
      for (let m = 1; m <= options.messagesPerUser; m++) {
        for (const user of users) {
          const id = yield* transactor.withTransaction(Mailbox.deliver(topic, user.id, `m${m}`, `hello #${m}`))
          sampleEventId ??= id
        }
      }
      for (const user of users) yield* Mailbox.archive(topic, user.id, "m1")
      // A command the mailbox cannot apply: it ends PUSHED_FAILURE, the partition moves on.
      poisonEventId = yield* Mailbox.archive(topic, users[0]!.id, "no-such-message")
      while (true) {
        const stats = yield* store.stats(Date.now())
        const open = ["PENDING", "DISPATCHING", "PUBLISHED", "UNDER_PROCESSING"] as const
        if (open.every((s) => (stats.byStatus[s] ?? 0) === 0)) return true
        yield* Effect.sleep("100 millis")
      }
    }).pipe(
      Effect.timeoutOption(options.timeout),
      Effect.map(Option.isSome),
      Effect.provide(
        OutboxRuntime.layer({
          relay: { instances: 1, pollInterval: Duration.millis(200) },
          retention: false,
          inboxRetention: false,
          runConsumers: true,
          consumers: [
            OutboxRuntime.consumer(Mailbox.consumer({ schema: options.schema, topic, groupId: options.groupId }))
          ]
        })
      )
    )

    const reader = yield* TopicReader
    const onTopic = yield* reader.read(topic.name).pipe(Stream.runCollect)
    const dead = yield* reader.read(topic.deadLetterTopic).pipe(Stream.runCollect)
    const sql = yield* SqlClient.SqlClient
    const tables = yield* PgTables
    const messages = yield* sql.unsafe<{ user_id: string; message_id: string; state: string }>(
      `SELECT user_id::text AS user_id, message_id, state FROM "${options.schema}".mailbox_messages ORDER BY seq`
    )
    const mailboxes = new Map<string, Array<{ messageId: string; state: string }>>()
    for (const row of messages) {
      const list = mailboxes.get(row.user_id) ?? []
      list.push({ messageId: row.message_id, state: row.state })
      mailboxes.set(row.user_id, list)
    }
    const rows = yield* store.list({ limit: 100_000 })
    const history = yield* sql.unsafe<{ from_status: string; to_status: string }>(
      `SELECT from_status, to_status FROM ${tables.transition} WHERE event_id = $1::uuid ORDER BY id`,
      [sampleEventId!]
    )
    return {
      users,
      partitionCount,
      records: onTopic.map((r) => ({ partition: r.partition, key: r.key, eventId: r.headers[EVENT_ID_HEADER] ?? "" })),
      mailboxes,
      statuses: new Map(rows.map((row) => [row.id, row.status])),
      poisonEventId: poisonEventId!,
      deadLettered: dead.flatMap((r) => Option.toArray(DeadLetter.parse(r))).flatMap((l) => l.eventId ?? []),
      lifecycle: history.map((h) => `${h.from_status} -> ${h.to_status}`),
      finished
    } satisfies Report
  })
