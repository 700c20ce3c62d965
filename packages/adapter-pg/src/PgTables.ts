/**
 * Where the outbox tables live: a schema and a table prefix, resolved once into quoted names,
 * advisory-lock namespaces and the wake-up channel every PostgreSQL service of this package uses.
 *
 * @since 0.1.0
 */

import { OutboxValidationError } from "@effect-outbox/core/Errors"
import type * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { variables } from "./internal/variables.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The schema that holds the tables. Created by the migrations when missing. Default `outbox`. */
  readonly schema?: string | undefined
  /** Prefix of every table name. Default `outbox_`. */
  readonly tablePrefix?: string | undefined
  /**
   * The LISTEN/NOTIFY channel. Default `<schema>_<prefix>wakeup` (channels are database-wide,
   * so two outboxes in one database never wake each other).
   */
  readonly channel?: string | undefined
}

/**
 * The resolved names. Table names are already quoted and schema-qualified, ready to splice
 * into SQL; they are validated identifiers, never user data.
 *
 * @since 0.1.0
 * @category models
 */
export interface Tables {
  readonly schema: string
  readonly tablePrefix: string
  readonly message: string
  /** Processed-message records (the inbox), range-partitioned on the record's time. */
  readonly processed: string
  /** The oldest record time the inbox still remembers (one row). */
  readonly inboxHorizon: string
  /** Creates the inbox's partitions ahead (`(span_ms, ahead_ms)`). */
  readonly inboxPartitionsFunction: string
  readonly partitionAssignment: string
  readonly transition: string
  /** Named leases (one holder at a time, expiry by the database clock): stale recovery's. */
  readonly lease: string
  /** Durable parking: positions of parked records per consumer group. */
  readonly parked: string
  /** Release requests of parked keys (the CLI's `parked release`). */
  readonly parkedRelease: string
  /** The consumer group driving each topic's outbox lifecycle (`LifecycleRegistry`). */
  readonly lifecycleGroup: string
  readonly claimFunction: string
  /** Keys whose younger rows are set aside behind a waiting head, and when that head is due. */
  readonly waitingKey: string
  /** The log engine's event table (insert only, range-partitioned on the event id). */
  readonly logEvent: string
  /** The log engine's sealed partitions: the WAL position after their last event. */
  readonly logPartition: string
  /** Creates the event table's partitions ahead (`(span_ms, ahead_ms)`). */
  readonly logPartitionsFunction: string
  /** The migrator's bookkeeping table, unquoted `schema.table` (the migrator quotes it). */
  readonly migrations: string
  readonly channel: string
  /** `classid` halves of two-key advisory locks, one per purpose, distinct per outbox. */
  readonly locks: {
    readonly claimKey: number
    readonly assignment: number
    readonly purge: number
    readonly migrations: number
    readonly logMaintenance: number
    readonly inboxMaintenance: number
  }
}

/**
 * @since 0.1.0
 * @category services
 */
export class PgTables extends Context.Service<PgTables, Tables>()("@effect-outbox/adapter-pg/PgTables") {}

const identifier = /^[a-z_][a-z0-9_]*$/

/** FNV-1a over the UTF-16 code units, folded into a signed int4. */
const hash32 = (text: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h | 0
}

const quote = (name: string) => `"${name}"`

/**
 * Validates the options and resolves every name. Identifiers must be lower-case
 * `[a-z_][a-z0-9_]*` so they never need escaping and fit PostgreSQL's 63-byte limit.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<Tables, OutboxValidationError> =>
  Effect.gen(function* () {
    const schema = options.schema ?? "outbox"
    const tablePrefix = options.tablePrefix ?? "outbox_"
    if (!identifier.test(schema) || schema.length > 63) {
      return yield* new OutboxValidationError({
        field: "schema",
        reason: `"${schema}" must match [a-z_][a-z0-9_]* and be at most 63 characters`
      })
    }
    if (tablePrefix !== "" && (!/^[a-z0-9_]*$/.test(tablePrefix) || !identifier.test(`${tablePrefix}x`))) {
      return yield* new OutboxValidationError({
        field: "tablePrefix",
        reason: `"${tablePrefix}" must match [a-z_][a-z0-9_]*`
      })
    }
    if (tablePrefix.length + "partition_assignment".length > 63) {
      return yield* new OutboxValidationError({ field: "tablePrefix", reason: "is too long (at most 43 characters)" })
    }
    const channel = options.channel ?? `${schema}_${tablePrefix}wakeup`
    if (new TextEncoder().encode(channel).byteLength > 63 || channel.length === 0) {
      return yield* new OutboxValidationError({
        field: "channel",
        reason: `"${channel}" must be 1 to 63 bytes; set a shorter channel explicitly`
      })
    }
    const table = (name: string) => `${quote(schema)}.${quote(`${tablePrefix}${name}`)}`
    const space = `${schema}.${tablePrefix}`
    return {
      schema,
      tablePrefix,
      message: table("message"),
      processed: table("processed"),
      inboxHorizon: table("inbox_horizon"),
      inboxPartitionsFunction: table("inbox_partitions"),
      partitionAssignment: table("partition_assignment"),
      transition: table("transition"),
      lease: table("lease"),
      parked: table("parked"),
      parkedRelease: table("parked_release"),
      lifecycleGroup: table("lifecycle_group"),
      claimFunction: table("claim"),
      waitingKey: table("waiting_key"),
      logEvent: table("log_event"),
      logPartition: table("log_partition"),
      logPartitionsFunction: table("log_partitions"),
      migrations: `${schema}.${tablePrefix}migrations`,
      channel,
      locks: {
        claimKey: hash32(`${space}:claim-key`),
        assignment: hash32(`${space}:partition-assignment`),
        purge: hash32(`${space}:purge`),
        migrations: hash32(`${space}:migrations`),
        logMaintenance: hash32(`${space}:log-maintenance`),
        inboxMaintenance: hash32(`${space}:inbox-maintenance`)
      }
    }
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<PgTables, OutboxValidationError> =>
  Layer.effect(PgTables)(make(options))

/**
 * Reads `OUTBOX_SCHEMA`, `OUTBOX_TABLE_PREFIX` and `OUTBOX_CHANNEL` (all optional).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: Layer.Layer<PgTables, OutboxValidationError | Config.ConfigError> = Layer.effect(PgTables)(
  Effect.gen(function* () {
    const schema = yield* variables.schema.config
    const tablePrefix = yield* variables.tablePrefix.config
    const channel = yield* variables.channel.config
    return yield* make({ schema, tablePrefix, channel: channel._tag === "Some" ? channel.value : undefined })
  })
)
