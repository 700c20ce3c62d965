/**
 * Derives a topic's Avro schema from its Effect Schema, through the JSON Schema Effect generates
 * for the schema's JSON form: objects become records (a field that is not required becomes
 * `["null", T]` with default `null`), integers `long`, numbers `double`, string enums Avro enums
 * (when every value is a valid Avro name), arrays, string-keyed records `map`, `anyOf` unions.
 * A shape Avro cannot say (tuples, recursive schemas, non-string literals) is refused when the
 * codec is made, with the path of the part that does not fit.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * A schema the Avro derivation cannot express: `path` is where, `reason` what.
 *
 * @since 0.1.0
 * @category errors
 */
export class AvroDerivationError extends Schema.TaggedError<AvroDerivationError>()("AvroDerivationError", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `no Avro schema for ${this.path}: ${this.reason}`
  }
}

type Json = { readonly [key: string]: unknown }
/** An Avro schema (its JSON form). */
export type Avro = string | Json | ReadonlyArray<Avro>

const avroName = /^[A-Za-z_][A-Za-z0-9_]*$/
const nonFinite = ["Infinity", "-Infinity", "NaN"]

const isNumberWithNonFinite = (members: ReadonlyArray<Json>): boolean =>
  members.some((m) => m.type === "number") &&
  members.every(
    (m) =>
      m.type === "number" ||
      m.type === "null" ||
      (m.type === "string" && Array.isArray(m.enum) && m.enum.every((v) => nonFinite.includes(String(v))))
  )

const nameOf = (path: ReadonlyArray<string>) => path.map((p) => p.replace(/[^A-Za-z0-9_]/g, "_")).join("_")

const fail = (path: ReadonlyArray<string>, reason: string): never => {
  throw new AvroDerivationError({ path: path.join(".") || "(root)", reason })
}

const union = (members: ReadonlyArray<Avro>): Avro => {
  const flat = members.flatMap((m) => (Array.isArray(m) ? (m as ReadonlyArray<Avro>) : [m]))
  const seen = new Set<string>()
  const unique = flat.filter((m) => {
    const k = JSON.stringify(m)
    if (seen.has(k)) return false
    seen.add(k)
    return true
  })
  // `null` first, so a field's default may be null.
  const sorted = [...unique.filter((m) => m === "null"), ...unique.filter((m) => m !== "null")]
  return sorted.length === 1 ? (sorted[0] as Avro) : sorted
}

const toAvro = (node: Json, path: ReadonlyArray<string>, definitions: Json, seen: ReadonlyArray<string>): Avro => {
  if (typeof node.$ref === "string") {
    const name = node.$ref.split("/").at(-1) as string
    if (seen.includes(name)) return fail(path, `recursive schema ${name}`)
    const target = definitions[name]
    if (typeof target !== "object" || target === null) return fail(path, `unresolved reference ${node.$ref}`)
    return toAvro(target as Json, path, definitions, [...seen, name])
  }
  const anyOf = (node.anyOf ?? node.oneOf) as ReadonlyArray<Json> | undefined
  if (anyOf !== undefined) {
    if (isNumberWithNonFinite(anyOf)) {
      return anyOf.some((m) => m.type === "null") ? ["null", "double"] : "double"
    }
    return union(anyOf.map((m, i) => toAvro(m, [...path, String(i)], definitions, seen)))
  }
  if (Array.isArray(node.type)) {
    return union(node.type.map((type) => toAvro({ ...node, type }, path, definitions, seen)))
  }
  switch (node.type) {
    case "string":
      if (Array.isArray(node.enum)) {
        const symbols = node.enum.map(String)
        if (symbols.every((s) => avroName.test(s))) return { type: "enum", name: nameOf(path), symbols }
      }
      return "string"
    case "integer":
      return "long"
    case "number":
      return "double"
    case "boolean":
      return "boolean"
    case "null":
      return "null"
    case "array": {
      if (Array.isArray(node.prefixItems) && node.prefixItems.length > 0) return fail(path, "tuples have no Avro type")
      if (typeof node.items !== "object" || node.items === null) return fail(path, "array without items")
      return { type: "array", items: toAvro(node.items as Json, [...path, "items"], definitions, seen) }
    }
    case "object":
      return objectToAvro(node, path, definitions, seen)
    default:
      if (Array.isArray(node.enum)) return fail(path, `literal ${JSON.stringify(node.enum)} has no Avro type`)
      return fail(path, `JSON Schema ${JSON.stringify(node)} has no Avro type`)
  }
}

const objectToAvro = (node: Json, path: ReadonlyArray<string>, definitions: Json, seen: ReadonlyArray<string>) => {
  const properties = (node.properties ?? {}) as Json
  const names = Object.keys(properties)
  if (names.length === 0 && typeof node.additionalProperties === "object" && node.additionalProperties !== null) {
    return { type: "map", values: toAvro(node.additionalProperties as Json, [...path, "values"], definitions, seen) }
  }
  const required = new Set((node.required ?? []) as ReadonlyArray<string>)
  const fields = names.map((name) => {
    if (!avroName.test(name)) return fail([...path, name], "not a valid Avro field name")
    const type = toAvro(properties[name] as Json, [...path, name], definitions, seen)
    return required.has(name) ? { name, type } : { name, type: union(["null", type]), default: null }
  })
  // The root keeps its full name (a namespace may be in it); nested records are named by path.
  return { type: "record", name: path.length === 1 ? (path[0] as string) : nameOf(path), fields }
}

/**
 * The Avro schema of an Effect Schema's JSON form (records named `name`, nested ones
 * `name_field`). Throws nothing: a shape without an Avro type is an `AvroDerivationError`.
 *
 * @since 0.1.0
 * @category derivation
 */
export const fromSchema = (schema: Schema.Top, name: string): Avro | AvroDerivationError => {
  const document = Schema.toJsonSchemaDocument(schema)
  try {
    return toAvro(document.schema as Json, [name], document.definitions as Json, [])
  } catch (error) {
    if (error instanceof AvroDerivationError) return error
    throw error
  }
}

/**
 * Avro's `null` of a field that is not required (default `null`) becomes an absent key again, so
 * the value decodes through an Effect Schema with optional keys; a required nullable field keeps
 * its `null`.
 *
 * @since 0.1.0
 * @category derivation
 */
export const fromAvroValue = (avro: Avro, value: unknown): unknown => {
  if (value === null || typeof value !== "object") return value
  if (Array.isArray(avro)) {
    const members = (avro as ReadonlyArray<Avro>).filter((m) => m !== "null")
    return members.length === 1 ? fromAvroValue(members[0] as Avro, value) : value
  }
  if (typeof avro !== "object") return value
  const node = avro as Json
  if (node.type === "array" && Array.isArray(value)) return value.map((v) => fromAvroValue(node.items as Avro, v))
  if (node.type === "map") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fromAvroValue(node.values as Avro, v)]))
  }
  if (node.type !== "record") return value
  const out: Record<string, unknown> = {}
  const record = value as Record<string, unknown>
  for (const field of node.fields as ReadonlyArray<Json>) {
    const name = field.name as string
    const v = record[name]
    if (v === null && field.default === null) continue
    out[name] = fromAvroValue(field.type as Avro, v)
  }
  return out
}
