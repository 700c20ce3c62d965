import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as MemoryRegistry from "../src/MemoryRegistry.ts"
import { layerConfig, layerHttp, SchemaRegistry } from "../src/SchemaRegistry.ts"

const avro = (fields: ReadonlyArray<object>) =>
  JSON.stringify({ type: "record", name: "Order", fields: [{ name: "orderId", type: "string" }, ...fields] })

/** A registry stand-in that answers id 7 and remembers the Authorization header it got. */
const recordingServer = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<{ server: Http.Server; seen: Array<string | undefined> }>((resolve) => {
        const seen: Array<string | undefined> = []
        const server = Http.createServer((req, res) => {
          seen.push(req.headers.authorization)
          req.resume()
          req.on("end", () => res.writeHead(200).end(JSON.stringify({ id: 7 })))
        })
        server.listen(0, "127.0.0.1", () => resolve({ server, seen }))
      })
  ),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

describe("SchemaRegistry over HTTP (Confluent REST API)", () => {
  it.effect("registering answers one id per schema, the same id again for the same schema, and reads it back", () =>
    Effect.gen(function* () {
      const registry = yield* Effect.service(SchemaRegistry)
      const v1 = avro([])
      const id = yield* registry.register("orders-value", { schema: v1, schemaType: "AVRO" })
      assert.strictEqual(yield* registry.register("orders-value", { schema: v1, schemaType: "AVRO" }), id)
      // Another subject with the identical schema shares its global id.
      assert.strictEqual(yield* registry.register("payments-value", { schema: v1, schemaType: "AVRO" }), id)
      assert.deepStrictEqual(yield* registry.schemaById(id), { schema: v1, schemaType: "AVRO" })
      const error = yield* Effect.flip(registry.schemaById(999))
      assert.strictEqual(error._tag, "SchemaRegistryError")
      assert.strictEqual(error.kind, "permanent")
      assert.include(error.message, "HTTP 404")
    }).pipe(Effect.provide(MemoryRegistry.layer))
  )

  it.effect("BACKWARD: a new field with a default is accepted, one without is refused with HTTP 409's reason", () =>
    Effect.gen(function* () {
      const registry = yield* Effect.service(SchemaRegistry)
      yield* registry.register("orders-value", { schema: avro([]), schemaType: "AVRO" })
      yield* registry.register("orders-value", {
        schema: avro([{ name: "note", type: ["null", "string"], default: null }]),
        schemaType: "AVRO"
      })
      const refused = yield* Effect.flip(
        registry.register("orders-value", { schema: avro([{ name: "warehouse", type: "string" }]), schemaType: "AVRO" })
      )
      assert.strictEqual(refused._tag, "IncompatibleSchemaError")
      assert.include(refused.message, "orders-value")
    }).pipe(Effect.provide(MemoryRegistry.layer))
  )

  it.effect("a registry that does not answer is a SchemaRegistryError of kind unavailable", () =>
    Effect.gen(function* () {
      const registry = yield* Effect.service(SchemaRegistry)
      const error = yield* Effect.flip(registry.schemaById(1))
      assert.strictEqual(error._tag, "SchemaRegistryError")
      assert.strictEqual(error.kind, "unavailable")
    }).pipe(Effect.provide(layerHttp({ url: "http://127.0.0.1:1" })))
  )

  it.effect("layerConfig reads OUTBOX_SCHEMA_REGISTRY_URL and sends OUTBOX_SCHEMA_REGISTRY_AUTH as basic auth", () =>
    Effect.gen(function* () {
      const { server, seen } = yield* recordingServer
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const env = { OUTBOX_SCHEMA_REGISTRY_URL: url, OUTBOX_SCHEMA_REGISTRY_AUTH: "key:secret" }
      const id = yield* Effect.flatMap(Effect.service(SchemaRegistry), (registry) =>
        registry.register("orders-value", { schema: avro([]), schemaType: "AVRO" })
      ).pipe(Effect.provide(layerConfig.pipe(Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))))))
      assert.strictEqual(id, 7)
      assert.deepStrictEqual(seen, [`Basic ${Buffer.from("key:secret").toString("base64")}`])
      const missing = yield* Effect.flip(
        Layer.build(layerConfig).pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: {} }))))
      )
      assert.include(String(missing), "OUTBOX_SCHEMA_REGISTRY_URL")
    }).pipe(Effect.scoped)
  )
})
