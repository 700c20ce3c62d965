/**
 * What reading a claimed batch costs node in the driver: 100 rows of a `<prefix>message`-shaped
 * table (1 KB payloads) read with `SELECT *`, with fewer columns, and decoded to messages
 * (`toMessage`), node CPU per row over many reads. It makes the table (schema `claimcpu_micro`)
 * and drops it at the end.
 *
 *   node bench/src/experiments/ClaimDecodeCost.ts
 */

import * as Effect from "effect/Effect"
import * as SqlClient from "effect/sql/SqlClient"
import { toMessage } from "../../../packages/adapter-pg/src/internal/rows.ts"
import * as Env from "../Env.ts"
import * as Profile from "../Profile.ts"

const setup = [
  "DROP SCHEMA IF EXISTS claimcpu_micro CASCADE",
  "CREATE SCHEMA claimcpu_micro",
  `CREATE TABLE claimcpu_micro.m (id uuid PRIMARY KEY, seq bigint, topic text, key text, partition int, headers jsonb,
     payload bytea, status text, attempts int, available_at timestamptz, lease_owner text, lease_expires_at timestamptz,
     published_partition int, published_offset bigint, last_error text, created_at timestamptz, updated_at timestamptz,
     published_at timestamptz, processed_at timestamptz)`,
  `INSERT INTO claimcpu_micro.m
   SELECT gen_random_uuid(), i, 'bench-s1-topic-abcdef', 'key-' || (i % 1000), NULL, '{}'::jsonb,
          decode(repeat('ab', 1024), 'hex'), 'DISPATCHING', 0, now(), 'relay-0123456789ab#12', now() + interval '60s',
          NULL, NULL, NULL, now(), now(), NULL, NULL
     FROM generate_series(1, 100) i`
]

const variants: Record<string, string> = {
  "select 1 (round trip only)": "SELECT 1 AS x",
  "id only": "SELECT id FROM claimcpu_micro.m",
  "id, payload": "SELECT id, payload FROM claimcpu_micro.m",
  "relay's columns": "SELECT id, seq, topic, key, partition, headers, payload, attempts FROM claimcpu_micro.m",
  "select *": "SELECT * FROM claimcpu_micro.m"
}
const cpu = Profile.cpuMicros
await Effect.runPromise(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    for (const statement of setup) yield* sql.unsafe(statement).unprepared
    for (let round = 0; round < 2; round++) {
      for (const [name, text] of Object.entries(variants)) {
        const read = sql.unsafe<any>(text).withoutTransform
        for (let i = 0; i < 300; i++) yield* read
        const c0 = cpu()
        const n = 2000
        for (let i = 0; i < n; i++) yield* read
        const c1 = cpu()
        let decode = ""
        if (name === "select *") {
          const rows = yield* read
          const d0 = cpu()
          for (let i = 0; i < n; i++) rows.map(toMessage)
          decode = `, toMessage ${((cpu() - d0) / n / 100).toFixed(2)} µs/row`
        }
        console.log(
          `${name}: ${((c1 - c0) / n).toFixed(0)} µs/read, ${((c1 - c0) / n / 100).toFixed(2)} µs/row${decode}`
        )
      }
    }
    yield* sql.unsafe("DROP SCHEMA claimcpu_micro CASCADE").unprepared
  }).pipe(Effect.provide(Env.pgLayer(1)))
)
process.exit(0)
