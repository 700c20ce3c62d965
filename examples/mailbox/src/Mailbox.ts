/**
 * The mailbox service: every user owns an ordered mailbox. When a user is created, a
 * partition of the mailbox topic is reserved for them by sequential assignment (fill partition
 * 0 up to the capacity, then 1, …, growing the topic on the broker when needed). Mailbox
 * commands are keyed by the canonical `MailboxUserId` and published to the user's partition, so
 * one user's commands are applied in order even after the topic grew. The consumer drives the
 * outbox lifecycle `UNDER_PROCESSING → SUCCESS | PUSHED_FAILURE`.
 *
 * @since 0.1.0
 */

import { randomUUID } from "node:crypto"
import type * as Consumer from "@effect-outbox/core/Consumer"
import * as Outbox from "@effect-outbox/core/Outbox"
import * as PartitionAssignment from "@effect-outbox/core/PartitionAssignment"
import * as Topic from "@effect-outbox/core/Topic"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import { type AuthSubject, type EmailAddress, MailboxUserId } from "./Ids.ts"

/**
 * @since 0.1.0
 * @category commands
 */
export const Deliver = Schema.TaggedStruct("Deliver", {
  userId: MailboxUserId,
  messageId: Schema.NonEmptyString,
  subject: Schema.String
})

/**
 * @since 0.1.0
 * @category commands
 */
export const Archive = Schema.TaggedStruct("Archive", {
  userId: MailboxUserId,
  messageId: Schema.NonEmptyString
})

/**
 * @since 0.1.0
 * @category commands
 */
export const MailboxCommand = Schema.Union([Deliver, Archive])

/**
 * @since 0.1.0
 * @category commands
 */
export type MailboxCommand = typeof MailboxCommand.Type

/**
 * The mailbox topic: keyed by the canonical user id. The partition comes from the user's
 * assignment at enqueue time (see {@link send}).
 *
 * @since 0.1.0
 * @category topics
 */
export const mailboxTopic = (name: string) =>
  Topic.make({ name, schema: MailboxCommand, key: (command) => command.userId })

/**
 * @since 0.1.0
 * @category topics
 */
export type MailboxTopic = ReturnType<typeof mailboxTopic>

/**
 * @since 0.1.0
 * @category schema
 */
export const createTables = (schema: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe(`CREATE SCHEMA IF NOT EXISTS "${schema}"`).unprepared
    yield* sql.unsafe(`CREATE TABLE IF NOT EXISTS "${schema}".mailbox_users (
      id uuid PRIMARY KEY,
      email text NOT NULL UNIQUE,
      auth_subject text NOT NULL UNIQUE
    )`).unprepared
    yield* sql.unsafe(`CREATE TABLE IF NOT EXISTS "${schema}".mailbox_messages (
      seq bigint GENERATED ALWAYS AS IDENTITY,
      user_id uuid NOT NULL REFERENCES "${schema}".mailbox_users (id),
      message_id text NOT NULL,
      subject text NOT NULL,
      state text NOT NULL CHECK (state IN ('inbox', 'archived')),
      PRIMARY KEY (user_id, message_id)
    )`).unprepared
  })

/**
 * A command for a mailbox that does not exist (no user, or no assigned partition).
 *
 * @since 0.1.0
 * @category errors
 */
export class UnknownMailbox extends Schema.TaggedError<UnknownMailbox>()("UnknownMailbox", {
  userId: Schema.String,
  retriable: Schema.Boolean
}) {
  override get message() {
    return `no mailbox for user ${this.userId}`
  }
}

/**
 * Archiving a message the mailbox does not hold. Permanent: retrying cannot make it appear.
 *
 * @since 0.1.0
 * @category errors
 */
export class UnknownMessage extends Schema.TaggedError<UnknownMessage>()("UnknownMessage", {
  userId: Schema.String,
  messageId: Schema.String,
  retriable: Schema.Boolean
}) {
  override get message() {
    return `mailbox ${this.userId} holds no message ${this.messageId}`
  }
}

/**
 * Creates a user with a fresh canonical id, then reserves their partition, growing the
 * topic when the reservation opens a partition the broker does not have. The reservation
 * is idempotent per user, so a failed growth is finished by calling `assign` again.
 *
 * @since 0.1.0
 * @category users
 */
export const createUser = (
  schema: string,
  topic: MailboxTopic,
  user: { readonly email: EmailAddress; readonly authSubject: AuthSubject }
) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const id = MailboxUserId.make(randomUUID())
    yield* sql.unsafe(`INSERT INTO "${schema}".mailbox_users (id, email, auth_subject) VALUES ($1, $2, $3)`, [
      id,
      user.email,
      user.authSubject
    ])
    const assignment = yield* PartitionAssignment.assign(topic.name, id)
    return { id, partition: assignment.partition, partitionCount: assignment.partitionCount }
  })

/**
 * Enqueues a mailbox command on the user's partition: `key = userId`, `partition` = the
 * user's assignment. Takes a `MailboxUserId` only: an `EmailAddress` or `AuthSubject` does not
 * type-check. One transaction per command (joined when the caller has one open).
 *
 * @since 0.1.0
 * @category commands
 */
export const send = (topic: MailboxTopic, command: MailboxCommand) =>
  Outbox.withTransaction(
    Effect.gen(function* () {
      const partition = yield* PartitionAssignment.PartitionAssignment.use((s) => s.lookup(topic.name, command.userId))
      if (Option.isNone(partition)) return yield* new UnknownMailbox({ userId: command.userId, retriable: false })
      return yield* Topic.enqueue(topic, command, { partition: partition.value })
    })
  )

/**
 * @since 0.1.0
 * @category commands
 */
export const deliver = (topic: MailboxTopic, userId: MailboxUserId, messageId: string, subject: string) =>
  send(topic, { _tag: "Deliver", userId, messageId, subject })

/**
 * @since 0.1.0
 * @category commands
 */
export const archive = (topic: MailboxTopic, userId: MailboxUserId, messageId: string) =>
  send(topic, { _tag: "Archive", userId, messageId })

/**
 * The mailbox consumer: applies each command inside `processOnce` (one transaction with the
 * dedup record). Unknown mailboxes and messages are permanent failures: dead-lettered at once,
 * the outbox row ends `PUSHED_FAILURE`; applied commands end `SUCCESS`.
 *
 * @since 0.1.0
 * @category consuming
 */
export const consumer = (options: {
  readonly schema: string
  readonly topic: MailboxTopic
  readonly groupId: string
}) =>
  Topic.consumer(options.topic, {
    groupId: options.groupId,
    maxAttempts: 3,
    retrySchedule: Schedule.exponential("50 millis"),
    handler: (message: Consumer.Message<MailboxCommand>) =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const command = message.payload
        const users = yield* sql.unsafe<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${options.schema}".mailbox_users WHERE id = $1`,
          [command.userId]
        )
        if (users[0]!.n === 0) return yield* new UnknownMailbox({ userId: command.userId, retriable: false })
        switch (command._tag) {
          case "Deliver":
            yield* sql.unsafe(
              `INSERT INTO "${options.schema}".mailbox_messages (user_id, message_id, subject, state) VALUES ($1, $2, $3, 'inbox')`,
              [command.userId, command.messageId, command.subject]
            )
            return
          case "Archive": {
            const updated = yield* sql.unsafe<{ message_id: string }>(
              `UPDATE "${options.schema}".mailbox_messages SET state = 'archived'
                WHERE user_id = $1 AND message_id = $2 RETURNING message_id`,
              [command.userId, command.messageId]
            )
            if (updated.length === 0) {
              return yield* new UnknownMessage({
                userId: command.userId,
                messageId: command.messageId,
                retriable: false
              })
            }
          }
        }
      })
  })
