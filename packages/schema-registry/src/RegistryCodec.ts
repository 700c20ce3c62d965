/**
 * Payload codecs that write the Confluent wire format through a Schema Registry: Avro (binary,
 * with the schema derived from the topic's Effect Schema) and JSON Schema (the Schema's JSON,
 * with the JSON Schema Effect generates for it). The Effect Schema stays the one source of the
 * payload's type; the registry holds the schema other languages read it with.
 *
 * Encoding registers the schema under its subject once (the id is cached per registry) and frames
 * the body with the id, so the outbox row holds exactly what goes on the wire and the relay needs
 * no registry. Decoding reads the writer's schema by the id in the record (cached too): an Avro
 * record written by an older version of the schema is resolved into the current one.
 *
 * {@link register} (or {@link layerRegistered}) registers every topic's schema at start-up, so a
 * change the registry's compatibility level refuses fails there with `IncompatibleSchemaError`,
 * not at the first publish.
 *
 * @since 0.1.0
 */
import type { Topic } from "@effect-outbox/core"
import { PayloadCodec } from "@effect-outbox/core"
import avsc from "avsc"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as AvroSchema from "./AvroSchema.ts"
import { type IncompatibleSchemaError, SchemaRegistry, type SchemaRegistryError } from "./SchemaRegistry.ts"
import * as WireFormat from "./WireFormat.ts"

/**
 * How the subject a schema is registered under is named (Confluent's strategies): `topic`
 * (`<topic>-value`, the default), `record` (the record's full name), `topic-record`
 * (`<topic>-<record name>`).
 *
 * @since 0.1.0
 * @category models
 */
export type SubjectStrategy = "topic" | "record" | "topic-record"

/**
 * The options of a codec. `recordName` is the Avro record's full name (`com.acme.OrderPlaced`) and
 * the record part of `record` / `topic-record` subjects; default the Schema's `identifier`
 * annotation, else `Payload`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly subject?: SubjectStrategy | undefined
  readonly recordName?: string | undefined
}

/**
 * A codec backed by a Schema Registry: a `PayloadCodec` that can also register its schema.
 *
 * @since 0.1.0
 * @category models
 */
export interface RegistryCodec<S extends Schema.Top>
  extends PayloadCodec.PayloadCodec<S, SchemaRegistry, SchemaRegistry> {
  readonly subject: (topic: string) => string
  /** The schema's text as registered, or why the schema has no form in this format. */
  readonly registeredSchema: string | AvroSchema.AvroDerivationError
  /** Registers the schema for `topic` (or finds it) and answers its id. */
  readonly register: (
    topic: string
  ) => Effect.Effect<
    number,
    SchemaRegistryError | IncompatibleSchemaError | AvroSchema.AvroDerivationError,
    SchemaRegistry
  >
}

type Registry = SchemaRegistry["Service"]

/** Per registry (a test may run several), the ids of subjects registered and schemas read. */
const cacheOf = <V>(caches: WeakMap<Registry, Map<string | number, V>>, registry: Registry) => {
  const found = caches.get(registry)
  if (found !== undefined) return found
  const cache = new Map<string | number, V>()
  caches.set(registry, cache)
  return cache
}

const cached = <K extends string | number, V, E>(
  cache: Map<string | number, V>,
  key: K,
  load: Effect.Effect<V, E>
): Effect.Effect<V, E> => {
  const hit = cache.get(key)
  return hit !== undefined ? Effect.succeed(hit) : Effect.tap(load, (value) => Effect.sync(() => cache.set(key, value)))
}

const recordNameOf = (schema: Schema.Top, options: Options): string => {
  const identifier = schema.ast.annotations?.identifier
  return options.recordName ?? (typeof identifier === "string" ? identifier : "Payload")
}

const subjectFor = (strategy: SubjectStrategy, recordName: string) => (topic: string) =>
  strategy === "record" ? recordName : strategy === "topic-record" ? `${topic}-${recordName}` : `${topic}-value`

interface Format<S extends Schema.Top> {
  readonly format: string
  readonly schemaType: "AVRO" | "JSON"
  readonly text: string | AvroSchema.AvroDerivationError
  readonly body: (topic: string, value: S["Type"]) => Effect.Effect<Uint8Array, PayloadCodec.PayloadCodecError>
  readonly read: (
    topic: string,
    framed: WireFormat.Framed,
    registry: Registry
  ) => Effect.Effect<S["Type"], PayloadCodec.PayloadCodecError>
}

const build = <S extends Schema.Top>(schema: S, options: Options, format: Format<S>): RegistryCodec<S> => {
  const subject = subjectFor(options.subject ?? "topic", recordNameOf(schema, options))
  const ids = new WeakMap<Registry, Map<string | number, number>>()
  const failure = (topic: string, reason: string) =>
    new PayloadCodec.PayloadCodecError({ format: format.format, topic, reason })
  const register = (topic: string) =>
    Effect.flatMap(
      Effect.service(SchemaRegistry),
      (
        registry
      ): Effect.Effect<number, SchemaRegistryError | IncompatibleSchemaError | AvroSchema.AvroDerivationError> =>
        typeof format.text !== "string"
          ? Effect.fail(format.text)
          : cached(
              cacheOf(ids, registry),
              subject(topic),
              registry.register(subject(topic), { schema: format.text, schemaType: format.schemaType })
            )
    )
  return {
    format: format.format,
    schema,
    subject,
    registeredSchema: format.text,
    register,
    encode: (topic, value) =>
      Effect.flatMap(register(topic).pipe(Effect.mapError((error) => failure(topic, error.message))), (id) =>
        Effect.map(format.body(topic, value), (body) => WireFormat.frame(id, body))
      ),
    decode: (topic, payload) => {
      const framed = WireFormat.unframe(payload)
      if (typeof framed === "string") return Effect.fail(failure(topic, framed))
      return Effect.flatMap(Effect.service(SchemaRegistry), (registry) => format.read(topic, framed, registry))
    }
  }
}

/**
 * An Avro codec: the schema is derived from `schema` (see `AvroSchema`), values are written in
 * Avro binary, records written under another registered version are resolved into this one.
 *
 * @since 0.1.0
 * @category constructors
 */
export const avro = <S extends Schema.Top>(schema: S, options: Options = {}): RegistryCodec<S> => {
  const json = Schema.toCodecJson(schema)
  const derived = AvroSchema.fromSchema(schema, recordNameOf(schema, options))
  const text = derived instanceof AvroSchema.AvroDerivationError ? derived : JSON.stringify(derived)
  const type = typeof text === "string" ? avsc.Type.forSchema(JSON.parse(text)) : undefined
  const resolvers = new WeakMap<Registry, Map<string | number, ReturnType<avsc.Type["createResolver"]>>>()
  const avroSchema = typeof text === "string" ? (JSON.parse(text) as AvroSchema.Avro) : "null"
  const failure = (topic: string, reason: string) =>
    new PayloadCodec.PayloadCodecError({ format: "avro", topic, reason })
  // A registry codec's schema needs no services of its own (its encoding runs without them).
  const encodeJson = Schema.encodeUnknownEffect(json) as (u: unknown) => Effect.Effect<unknown, Schema.SchemaError>
  const decodeJson = Schema.decodeUnknownEffect(json) as (u: unknown) => Effect.Effect<S["Type"], Schema.SchemaError>
  return build(schema, options, {
    format: "avro",
    schemaType: "AVRO",
    text,
    body: (topic, value) =>
      Effect.flatMap(
        Effect.mapError(encodeJson(value), (e) => failure(topic, e.message)),
        (encoded) =>
          Effect.try({
            try: () => new Uint8Array((type as avsc.Type).toBuffer(encoded)),
            catch: (e) => failure(topic, `does not fit the Avro schema: ${e instanceof Error ? e.message : String(e)}`)
          })
      ),
    read: (topic, framed, registry) => {
      const reader = type as avsc.Type
      const resolver = cached(
        cacheOf(resolvers, registry),
        framed.schemaId,
        registry.schemaById(framed.schemaId).pipe(
          Effect.mapError((e) => failure(topic, e.message)),
          Effect.flatMap((writer) =>
            Effect.try({
              try: () => reader.createResolver(avsc.Type.forSchema(JSON.parse(writer.schema))),
              catch: (e) => failure(topic, `schema ${framed.schemaId} cannot be read as ${reader.name}: ${String(e)}`)
            })
          )
        )
      )
      return resolver.pipe(
        Effect.flatMap((r) =>
          Effect.try({
            try: () => reader.fromBuffer(Buffer.from(framed.body), r),
            catch: (e) => failure(topic, `Avro body of schema ${framed.schemaId}: ${String(e)}`)
          })
        ),
        Effect.flatMap((value) =>
          Effect.mapError(decodeJson(AvroSchema.fromAvroValue(avroSchema, value)), (e) => failure(topic, e.message))
        )
      )
    }
  })
}

/**
 * A JSON Schema codec: the body is the Schema's JSON (as with the default codec), the registered
 * schema the JSON Schema (draft 2020-12) Effect generates for it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const jsonSchema = <S extends Schema.Top>(schema: S, options: Options = {}): RegistryCodec<S> => {
  const document = Schema.toJsonSchemaDocument(schema)
  const { [rootName(document.schema)]: root, ...rest } = document.definitions as Record<string, object>
  // A schema with an identifier is a `$ref` to its definition: inlined, so the registered root
  // says what the payload is (and compatibility checks read it).
  const definitions = Object.keys(rest).length === 0 ? {} : { $defs: rest }
  const text = JSON.stringify({
    $schema: "https://json-schema.org/draft/2020-12/schema",
    title: recordNameOf(schema, options),
    ...(root ?? document.schema),
    ...definitions
  })
  const json = PayloadCodec.json(schema)
  const reformat = (e: PayloadCodec.PayloadCodecError) =>
    new PayloadCodec.PayloadCodecError({ ...e, format: "json-schema" })
  return build(schema, options, {
    format: "json-schema",
    schemaType: "JSON",
    text,
    // A registry codec's schema needs no services of its own (its encoding runs without them).
    body: (topic, value) =>
      Effect.mapError(json.encode(topic, value), reformat) as Effect.Effect<Uint8Array, PayloadCodec.PayloadCodecError>,
    read: (topic, framed) =>
      Effect.mapError(json.decode(topic, framed.body), reformat) as Effect.Effect<
        S["Type"],
        PayloadCodec.PayloadCodecError
      >
  })
}

const rootName = (root: object): string => {
  const ref = (root as { readonly $ref?: unknown }).$ref
  return typeof ref === "string" ? (ref.split("/").at(-1) as string) : ""
}

/**
 * Any topic: the start-up check reads only its name and codec.
 *
 * @since 0.1.0
 * @category models
 */
// biome-ignore lint/suspicious/noExplicitAny: a topic of any schema and codec (its key function is contravariant)
export type AnyTopic = Topic.Topic<any, any, any>

const isRegistryCodec = (codec: unknown): codec is RegistryCodec<Schema.Top> =>
  typeof codec === "object" && codec !== null && "register" in codec && "subject" in codec

/**
 * Registers the schema of every topic with a registry codec, one after the other: the start-up
 * check. A schema the registry refuses fails with `IncompatibleSchemaError` naming the subject.
 *
 * @since 0.1.0
 * @category start-up
 */
export const register = (
  topics: ReadonlyArray<AnyTopic>
): Effect.Effect<
  void,
  SchemaRegistryError | IncompatibleSchemaError | AvroSchema.AvroDerivationError,
  SchemaRegistry
> =>
  Effect.forEach(
    topics.filter((topic) => isRegistryCodec(topic.codec)),
    (topic) =>
      (topic.codec as RegistryCodec<Schema.Top>)
        .register(topic.name)
        .pipe(Effect.tap((id) => Effect.logDebug(`schema of ${topic.name} registered as ${id}`))),
    { discard: true }
  ).pipe(Effect.withSpan("outbox.schema_registry.register"))

/**
 * {@link register} as a layer: the application does not start when a schema is refused.
 *
 * @since 0.1.0
 * @category start-up
 */
export const layerRegistered = (
  topics: ReadonlyArray<AnyTopic>
): Layer.Layer<never, SchemaRegistryError | IncompatibleSchemaError | AvroSchema.AvroDerivationError, SchemaRegistry> =>
  Layer.effectDiscard(register(topics))
