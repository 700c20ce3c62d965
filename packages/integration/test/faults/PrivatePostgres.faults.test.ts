/**
 * The private PostgreSQL cluster fault tests stop and restart (scripts/services pg-private): it
 * comes up on its own port, `stop` refuses connections but keeps the data, `start` brings the same
 * data back, `down` removes it; `durability on` gives PostgreSQL's durable commits back for
 * write-path benchmarks, `off` the test settings it starts with.
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

  const durability = () =>
    psql(
      "SELECT string_agg(setting, ' ' ORDER BY name) FROM pg_settings WHERE name IN ('fsync', 'full_page_writes', 'synchronous_commit')"
    )

  it("durability on flushes every commit (PostgreSQL's defaults), off goes back to the test settings", async () => {
    await pg.up()
    expect(durability()).toBe("off off off")
    expect((await pg.durability("on")).trim()).toBe("fsync = on, full_page_writes = on, synchronous_commit = on")
    expect(durability()).toBe("on on on")
    // Kept across a restart (ALTER SYSTEM), as a benchmark that restarts the server expects.
    await pg.stop()
    await pg.start()
    expect(durability()).toBe("on on on")
    await pg.durability("off")
    expect(durability()).toBe("off off off")
    await expect(pg.durability("maybe" as "on")).rejects.toThrow(/usage/)
    await pg.down()
  })

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
