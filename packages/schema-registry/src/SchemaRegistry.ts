/**
 * The Schema Registry client port, spoken over the Confluent REST API that Confluent Schema
 * Registry, Apicurio (its `/apis/ccompat/v7` path), Redpanda and Karapace all serve:
 * `POST /subjects/{subject}/versions` registers (or finds) a schema and answers its id, and refuses
 * a change the subject's compatibility level forbids with HTTP 409; `GET /schemas/ids/{id}` reads a
 * schema by id. Codecs cache what it answers, so it is asked once per schema, not per record.
 *
 * @since 0.1.0
 */

import type * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { variables } from "./internal/variables.ts"

/**
 * The schema types the registry knows (Confluent names).
 *
 * @since 0.1.0
 * @category models
 */
export type SchemaType = "AVRO" | "JSON" | "PROTOBUF"

/**
 * A schema as the registry holds it: its text and its type.
 *
 * @since 0.1.0
 * @category models
 */
export interface RegistrySchema {
  readonly schema: string
  readonly schemaType: SchemaType
}

/**
 * The registry could not be reached or answered something unexpected. `kind: "unavailable"` for
 * network failures and 5xx answers (retry later), `"permanent"` for the rest.
 *
 * @since 0.1.0
 * @category errors
 */
export class SchemaRegistryError extends Schema.TaggedError<SchemaRegistryError>()("SchemaRegistryError", {
  operation: Schema.String,
  kind: Schema.Literals(["unavailable", "permanent"]),
  reason: Schema.String
}) {
  override get message() {
    return `schema registry ${this.operation}: ${this.reason}`
  }
}

/**
 * The registry refused a schema: it breaks the subject's compatibility level (`BACKWARD` by
 * default: consumers on the new schema must read what the old one wrote). Fix the schema (add a
 * default to a new field, keep a removed one optional) or register it under a new subject.
 *
 * @since 0.1.0
 * @category errors
 */
export class IncompatibleSchemaError extends Schema.TaggedError<IncompatibleSchemaError>()("IncompatibleSchemaError", {
  subject: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `schema for subject ${this.subject} is incompatible with its registered versions: ${this.reason}`
  }
}

/**
 * The client port. Layers: {@link layerHttp} (any Confluent-compatible registry).
 *
 * @since 0.1.0
 * @category services
 */
export class SchemaRegistry extends Context.Service<
  SchemaRegistry,
  {
    /** Registers `schema` under `subject` (or finds it there) and answers its global id. */
    readonly register: (
      subject: string,
      schema: RegistrySchema
    ) => Effect.Effect<number, SchemaRegistryError | IncompatibleSchemaError>
    /** The schema of a global id. */
    readonly schemaById: (id: number) => Effect.Effect<RegistrySchema, SchemaRegistryError>
  }
>()("@effect-outbox/schema-registry/SchemaRegistry") {}

/**
 * The options of {@link layerHttp}: the registry's base URL (`http://host:8081`, or Apicurio's
 * `http://host:8080/apis/ccompat/v7`) and the headers every request carries (authorization).
 *
 * @since 0.1.0
 * @category models
 */
export interface HttpOptions {
  readonly url: string
  readonly headers?: Readonly<Record<string, string>> | undefined
}

const contentType = "application/vnd.schemaregistry.v1+json"

const request = (
  options: HttpOptions,
  operation: string,
  path: string,
  body?: unknown
): Effect.Effect<{ readonly status: number; readonly json: unknown }, SchemaRegistryError> =>
  Effect.tryPromise({
    try: async (signal) => {
      const response = await fetch(`${options.url.replace(/\/+$/, "")}${path}`, {
        method: body === undefined ? "GET" : "POST",
        headers: { accept: contentType, "content-type": contentType, ...options.headers },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal
      })
      const text = await response.text()
      let json: unknown = text
      try {
        json = JSON.parse(text)
      } catch {
        // not JSON: kept as text for the error message
      }
      return { status: response.status, json }
    },
    catch: (cause) =>
      new SchemaRegistryError({ operation, kind: "unavailable", reason: `${options.url}: ${String(cause)}` })
  })

const describe = (json: unknown): string =>
  typeof json === "object" && json !== null && "message" in json ? String(json.message) : JSON.stringify(json)

const unexpected = (operation: string, status: number, json: unknown) =>
  new SchemaRegistryError({
    operation,
    kind: status >= 500 ? "unavailable" : "permanent",
    reason: `HTTP ${status}: ${describe(json)}`
  })

/**
 * The client of a Confluent-compatible registry over HTTP (`fetch`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerHttp = (options: HttpOptions): Layer.Layer<SchemaRegistry> =>
  Layer.succeed(
    SchemaRegistry,
    SchemaRegistry.of({
      register: (subject, schema) => {
        const operation = `register ${subject}`
        const body = schema.schemaType === "AVRO" ? { schema: schema.schema } : schema
        return Effect.flatMap(
          request(options, operation, `/subjects/${encodeURIComponent(subject)}/versions`, body),
          ({ json, status }): Effect.Effect<number, SchemaRegistryError | IncompatibleSchemaError> => {
            if (status === 409) return Effect.fail(new IncompatibleSchemaError({ subject, reason: describe(json) }))
            if (status !== 200 || typeof json !== "object" || json === null || !("id" in json)) {
              return Effect.fail(unexpected(operation, status, json))
            }
            return Effect.succeed(Number(json.id))
          }
        )
      },
      schemaById: (id) => {
        const operation = `schema ${id}`
        return Effect.flatMap(request(options, operation, `/schemas/ids/${id}`), ({ json, status }) => {
          if (status !== 200 || typeof json !== "object" || json === null || !("schema" in json)) {
            return Effect.fail(unexpected(operation, status, json))
          }
          const schemaType = "schemaType" in json ? (String(json.schemaType) as SchemaType) : "AVRO"
          return Effect.succeed({ schema: String(json.schema), schemaType })
        })
      }
    })
  )

/**
 * {@link layerHttp} from `OUTBOX_SCHEMA_REGISTRY_URL` and, when set, `OUTBOX_SCHEMA_REGISTRY_AUTH`
 * (`user:password`, sent as HTTP basic authentication).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: Layer.Layer<SchemaRegistry, Config.ConfigError> = Layer.unwrap(
  Effect.gen(function* () {
    const url = yield* variables.url.config
    const auth = yield* variables.auth.config
    const headers = Option.match(auth, {
      onNone: () => undefined,
      onSome: (secret) => ({ authorization: `Basic ${Buffer.from(Redacted.value(secret)).toString("base64")}` })
    })
    return layerHttp({ url, headers })
  })
)
