import { assert, describe, it } from "@effect/vitest"
import * as Topic from "@effect-outbox/core/Topic"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import * as MemoryRegistry from "../src/MemoryRegistry.ts"
import * as RegistryCodec from "../src/RegistryCodec.ts"
import { SchemaRegistry } from "../src/SchemaRegistry.ts"
import * as WireFormat from "../src/WireFormat.ts"

const OrderV1 = Schema.Struct({
  orderId: Schema.String,
  amountCents: Schema.Int,
  note: Schema.optionalKey(Schema.String),
  tags: Schema.Array(Schema.String),
  coupon: Schema.NullOr(Schema.String),
  channel: Schema.Literals(["web", "shop"])
})
// Adds an optional field: BACKWARD compatible (new readers default it).
const OrderV2 = Schema.Struct({ ...OrderV1.fields, giftWrap: Schema.optionalKey(Schema.Boolean) })
// Adds a required field: old records lack it, BACKWARD refuses it.
const OrderBroken = Schema.Struct({ ...OrderV1.fields, warehouse: Schema.String })

const order = {
  orderId: "o-1",
  amountCents: 1250,
  tags: ["a", "b"],
  coupon: null,
  channel: "web" as const
}

const formats = [["avro", RegistryCodec.avro] as const, ["json-schema", RegistryCodec.jsonSchema] as const]

describe("registry codecs", () => {
  for (const [format, make] of formats) {
    it.effect(`${format}: a payload round-trips through the Confluent wire format`, () =>
      Effect.gen(function* () {
        const codec = make(OrderV1, { recordName: "com.acme.Order" })
        const bytes = yield* codec.encode("orders", { ...order, note: "ring twice" })
        const framed = WireFormat.unframe(bytes)
        assert(typeof framed !== "string")
        assert.strictEqual(bytes[0], 0)
        const id = yield* codec.register("orders")
        assert.strictEqual(framed.schemaId, id)
        const registry = yield* Effect.service(SchemaRegistry)
        const stored = yield* registry.schemaById(id)
        assert.strictEqual(stored.schemaType, format === "avro" ? "AVRO" : "JSON")
        assert.deepStrictEqual(yield* codec.decode("orders", bytes), { ...order, note: "ring twice" })
        assert.deepStrictEqual(yield* codec.decode("orders", yield* codec.encode("orders", order)), order)
      }).pipe(Effect.provide(MemoryRegistry.layer))
    )

    it.effect(`${format}: an incompatible schema is refused at start-up with IncompatibleSchemaError`, () =>
      Effect.gen(function* () {
        const v1 = Topic.make({ name: "orders", schema: OrderV1, codec: make(OrderV1) })
        const v2 = Topic.make({ name: "orders", schema: OrderV2, codec: make(OrderV2) })
        const broken = Topic.make({ name: "orders", schema: OrderBroken, codec: make(OrderBroken) })
        yield* RegistryCodec.register([v1])
        yield* RegistryCodec.register([v2])
        const exit = yield* Effect.exit(RegistryCodec.register([broken]))
        assert(Exit.isFailure(exit))
        const error = exit.cause.reasons[0]
        assert(error !== undefined && error._tag === "Fail")
        assert.strictEqual(error.error._tag, "IncompatibleSchemaError")
        assert.include(error.error.message, "orders-value")
        assert.include(error.error.message, "warehouse")
      }).pipe(Effect.provide(MemoryRegistry.layer))
    )

    it.effect(`${format}: a payload that is not framed fails to decode with the reason`, () =>
      Effect.gen(function* () {
        const codec = make(OrderV1)
        const error = yield* Effect.flip(codec.decode("orders", new TextEncoder().encode(JSON.stringify(order))))
        assert.strictEqual(error._tag, "PayloadCodecError")
        assert.include(error.reason, "magic byte")
      }).pipe(Effect.provide(MemoryRegistry.layer))
    )
  }

  it.effect("avro: a record written with the old schema is read by the new one (optional field absent)", () =>
    Effect.gen(function* () {
      const old = RegistryCodec.avro(OrderV1)
      const current = RegistryCodec.avro(OrderV2)
      const bytes = yield* old.encode("orders", order)
      assert.deepStrictEqual(yield* current.decode("orders", bytes), order)
      const newer = yield* current.encode("orders", { ...order, giftWrap: true })
      assert.notStrictEqual(WireFormat.unframe(newer), WireFormat.unframe(bytes))
      assert.deepStrictEqual(yield* current.decode("orders", newer), { ...order, giftWrap: true })
    }).pipe(Effect.provide(MemoryRegistry.layer))
  )

  it.effect("subject strategies name the subject after the topic, the record, or both", () =>
    Effect.sync(() => {
      const name = { recordName: "com.acme.Order" }
      assert.strictEqual(RegistryCodec.avro(OrderV1, name).subject("orders"), "orders-value")
      assert.strictEqual(
        RegistryCodec.avro(OrderV1, { ...name, subject: "record" }).subject("orders"),
        "com.acme.Order"
      )
      assert.strictEqual(
        RegistryCodec.avro(OrderV1, { ...name, subject: "topic-record" }).subject("orders"),
        "orders-com.acme.Order"
      )
    })
  )

  it.effect("a schema Avro cannot express is refused at start-up with the path of the part", () =>
    Effect.gen(function* () {
      const Pair = Schema.Struct({ point: Schema.Tuple([Schema.Number, Schema.Number]) })
      const topic = Topic.make({ name: "points", schema: Pair, codec: RegistryCodec.avro(Pair) })
      const error = yield* Effect.flip(RegistryCodec.register([topic]))
      assert.strictEqual(error._tag, "AvroDerivationError")
      assert.include(error.message, "Payload.point")
    }).pipe(Effect.provide(MemoryRegistry.layer))
  )
})
