/**
 * The private PostgreSQL cluster fault tests stop and restart (scripts/services pg-private): it
 * comes up on its own port, `stop` refuses connections but keeps the data, `start` brings the same
 * data back, `down` removes it.
 */

import { execFileSync } from "node:child_process"
import { existsSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Support from "./support.js"

const port = Number(process.env.FAULTS_PG_PORT ?? 25432)
const pg = Support.privatePostgres({ port, state: mkdtempSync(join(tmpdir(), "effect-outbox-pg-")) })

const psql = (sql: string): string =>
  execFileSync("psql", [pg.url, "-Atc", sql], { stdio: ["ignore", "pipe", "ignore"] })
    .toString()
    .trim()

describe("private PostgreSQL", () => {
  afterAll(() => pg.down())

  it("stop keeps the data, start serves it again, down removes it", async () => {
    await pg.up()
    expect(psql("SHOW wal_level")).toBe("logical")
    psql("CREATE TABLE kept (n int); INSERT INTO kept VALUES (42)")
    await pg.stop()
    expect(() => psql("SELECT 1")).toThrow()
    await pg.start()
    expect(psql("SELECT n FROM kept")).toBe("42")
    await pg.down()
    expect(() => psql("SELECT 1")).toThrow()
    expect(existsSync(join(pg.state, `pg-private-${port}`))).toBe(false)
  })
})
