/**
 * The `BACKWARD` compatibility rule of a Schema Registry: a consumer on the new schema reads what
 * the previous one wrote. Avro asks avsc for a resolver (the Avro specification's schema
 * resolution); JSON Schema checks objects field by field: no property newly required, no
 * property whose type changed, none dropped from a closed object.
 *
 * @since 0.1.0
 */
import avro from "avsc"
import type { SchemaType } from "./SchemaRegistry.ts"

type Json = { readonly [key: string]: unknown }

const typeOf = (node: Json): string => JSON.stringify(node.type ?? (node.anyOf ? "anyOf" : node.enum ? "enum" : ""))

const jsonIssues = (reader: Json, writer: Json, path: string): ReadonlyArray<string> => {
  if (typeOf(reader) !== typeOf(writer)) return [`${path || "(root)"}: type ${typeOf(writer)} became ${typeOf(reader)}`]
  if (reader.type !== "object") return []
  const readerProps = (reader.properties ?? {}) as Record<string, Json>
  const writerProps = (writer.properties ?? {}) as Record<string, Json>
  const writerRequired = new Set((writer.required ?? []) as ReadonlyArray<string>)
  const issues: Array<string> = []
  for (const name of (reader.required ?? []) as ReadonlyArray<string>) {
    if (!writerRequired.has(name)) issues.push(`${path}${name}: newly required (old payloads may lack it)`)
  }
  for (const [name, node] of Object.entries(readerProps)) {
    const old = writerProps[name]
    if (old !== undefined) issues.push(...jsonIssues(node, old, `${path}${name}.`))
  }
  if (reader.additionalProperties === false) {
    for (const name of Object.keys(writerProps)) {
      if (!(name in readerProps)) issues.push(`${path}${name}: removed from a closed object`)
    }
  }
  return issues
}

/**
 * Why `reader` cannot read what `writer` wrote (empty when it can).
 *
 * @since 0.1.0
 * @category compatibility
 */
export const backwardIssues = (type: SchemaType, reader: string, writer: string): ReadonlyArray<string> => {
  try {
    if (type === "AVRO") {
      avro.Type.forSchema(JSON.parse(reader)).createResolver(avro.Type.forSchema(JSON.parse(writer)))
      return []
    }
    if (type === "JSON") return jsonIssues(JSON.parse(reader), JSON.parse(writer), "")
    return reader === writer ? [] : ["only identical PROTOBUF schemas are checked here"]
  } catch (error) {
    return [error instanceof Error ? error.message : String(error)]
  }
}
