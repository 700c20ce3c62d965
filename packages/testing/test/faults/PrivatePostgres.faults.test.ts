/**
 * The private PostgreSQL cluster fault tests stop and restart (scripts/services pg-private): it
 * comes up on its own port, `stop` refuses connections but keeps the data, `start` brings the same
 * data back, `down` removes it.
 */

import { execFileSync } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Support from "./support.js"

const pg = Support.privatePostgres()

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
    expect(existsSync(join(pg.state, `pg-private-${pg.port}`))).toBe(false)
  })
})
