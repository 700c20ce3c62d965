// The dashboard's safety rules without a server: where it may listen, who may read, which
// mutations pass; and the `dashboard` command refusing an unsafe address before connecting.
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestConsole from "effect/testing/TestConsole"
import * as Cli from "../src/Cli.ts"
import * as Guard from "../src/DashboardGuard.ts"
import * as Html from "../src/DashboardHtml.ts"

const loopback: Guard.Settings = { host: "127.0.0.1", token: undefined, readOnly: false }
const csrf = "per-process-csrf-token"
const form = (headers: Record<string, string>, ...token: [string | undefined] | []) => ({
  headers,
  csrf: token.length === 0 ? csrf : token[0]
})

describe("dashboard guard", () => {
  it("loopback needs no token; any other address does, and a short token is refused", () => {
    assert.isUndefined(Guard.validate(loopback))
    assert.isUndefined(Guard.validate({ ...loopback, host: "localhost" }))
    assert.isUndefined(Guard.validate({ ...loopback, host: "::1" }))
    assert.match(Guard.validate({ ...loopback, host: "0.0.0.0" })?.message ?? "", /set a token/)
    assert.match(Guard.validate({ ...loopback, host: "10.0.0.5" })?.message ?? "", /set a token/)
    assert.isUndefined(Guard.validate({ ...loopback, host: "0.0.0.0", token: "0123456789abcdef" }))
    assert.match(Guard.validate({ ...loopback, token: "short" })?.message ?? "", /at least 16/)
  })

  it("with a token, a request reads only with it (bearer or cookie)", () => {
    const token = "0123456789abcdef"
    assert.isTrue(Guard.mayRead(undefined, {}))
    assert.isFalse(Guard.mayRead(token, {}))
    assert.isFalse(Guard.mayRead(token, { authorization: "Bearer 0123456789abcdeX" }))
    assert.isTrue(Guard.mayRead(token, { authorization: `Bearer ${token}` }))
    assert.isTrue(Guard.mayRead(token, { cookie: `a=b; ${Guard.tokenCookie}=${token}` }))
  })

  it("a Host that is not the dashboard's is refused (DNS rebinding)", () => {
    assert.isTrue(Guard.hostAllowed(loopback, "127.0.0.1:7070"))
    assert.isTrue(Guard.hostAllowed(loopback, "localhost:7070"))
    assert.isFalse(Guard.hostAllowed(loopback, "attacker.example:7070"))
    assert.isFalse(Guard.hostAllowed(loopback, undefined))
    const exposed = { ...loopback, host: "10.0.0.5", token: "0123456789abcdef" }
    assert.isTrue(Guard.hostAllowed(exposed, "10.0.0.5:7070"))
    assert.isFalse(Guard.hostAllowed(exposed, "attacker.example"))
  })

  it("without a token only a loopback peer that no proxy relayed is served; the Host header plays no part", () => {
    assert.isUndefined(Guard.refuseConnection(loopback, "127.0.0.1", {}))
    assert.isUndefined(Guard.refuseConnection(loopback, "::1", {}))
    assert.isUndefined(Guard.refuseConnection(loopback, "::ffff:127.0.0.1", {}))
    assert.match(Guard.refuseConnection(loopback, "192.0.2.2", { host: "localhost" }) ?? "", /no token/)
    assert.match(Guard.refuseConnection(loopback, "::ffff:192.0.2.2", {}) ?? "", /no token/)
    assert.match(Guard.refuseConnection(loopback, undefined, {}) ?? "", /unknown address/)
    assert.match(Guard.refuseConnection(loopback, "127.0.0.1", { "x-forwarded-for": "203.0.113.9" }) ?? "", /proxy/)
    assert.match(Guard.refuseConnection(loopback, "127.0.0.1", { forwarded: "for=203.0.113.9" }) ?? "", /proxy/)
    // With a token, the token decides.
    assert.isUndefined(Guard.refuseConnection({ ...loopback, token: "0123456789abcdef" }, "192.0.2.2", {}))
  })

  it("with a token on loopback or every interface, any Host may reach it (a rebinding page has no token)", () => {
    const token = "0123456789abcdef"
    assert.isTrue(Guard.hostAllowed({ ...loopback, token }, "orders.internal:8080"))
    assert.isTrue(Guard.hostAllowed({ ...loopback, host: "0.0.0.0", token }, "orders.internal"))
  })

  it("a mutation passes only same-origin, with the form token, and not in read-only mode", () => {
    const same = { host: "127.0.0.1:7070", origin: "http://127.0.0.1:7070" }
    assert.isUndefined(Guard.refuseMutation(loopback, csrf, form(same)))
    assert.match(
      Guard.refuseMutation(loopback, csrf, form({ ...same, origin: "http://evil.example" })) ?? "",
      /cross-site/
    )
    assert.match(Guard.refuseMutation(loopback, csrf, form({ ...same, origin: "null" })) ?? "", /opaque/)
    assert.match(
      Guard.refuseMutation(loopback, csrf, form({ host: same.host, "sec-fetch-site": "cross-site" })) ?? "",
      /cross-site/
    )
    assert.match(Guard.refuseMutation(loopback, csrf, form(same, undefined)) ?? "", /form token/)
    assert.match(Guard.refuseMutation(loopback, csrf, form(same, "another")) ?? "", /form token/)
    assert.match(Guard.refuseMutation({ ...loopback, readOnly: true }, csrf, form(same)) ?? "", /read-only/)
  })

  it("values are escaped in HTML", () => {
    assert.strictEqual(
      Html.escapeHtml(`<img src=x onerror="a('b')">&`),
      "&lt;img src=x onerror=&quot;a(&#39;b&#39;)&quot;&gt;&amp;"
    )
  })

  it.effect("`effect-outbox dashboard` on a non-loopback address without a token says what to set", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(Cli.run(["dashboard", "--host", "0.0.0.0"]))
      assert.strictEqual(exit._tag, "Failure")
      const err = (yield* TestConsole.errorLines).map(String).join("\n")
      assert.include(err, "set a token")
    }).pipe(Effect.provide(TestConsole.layer), Effect.provide(NodeServices.layer))
  )
})
