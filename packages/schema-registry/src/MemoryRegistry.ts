/**
 * A Schema Registry in memory, served over HTTP with the Confluent REST API the client speaks:
 * subjects, versions, global ids shared by identical schemas, and the `BACKWARD` compatibility
 * level checked against the subject's latest version (HTTP 409 when broken; `PUT /config`
 * `{"compatibility":"NONE"}` turns it off). For tests and local runs where no registry runs;
 * {@link layer} wires the HTTP client to it.
 *
 * @since 0.1.0
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { backwardIssues } from "./Compatibility.ts"
import { layerHttp, type RegistrySchema, type SchemaRegistry, type SchemaType } from "./SchemaRegistry.ts"

interface State {
  readonly schemas: Array<RegistrySchema>
  readonly subjects: Map<string, Array<number>>
  compatibility: "BACKWARD" | "NONE"
}

type Answer = readonly [number, unknown]

const notFound = (code: number, message: string): Answer => [404, { error_code: code, message }]

const register = (state: State, subject: string, body: Record<string, unknown>): Answer => {
  const schemaType = (body.schemaType ?? "AVRO") as SchemaType
  const schema = String(body.schema)
  const versions = state.subjects.get(subject) ?? []
  const same = versions.find((id) => state.schemas[id - 1]?.schema === schema)
  if (same !== undefined) return [200, { id: same }]
  const latest = versions.at(-1)
  if (latest !== undefined && state.compatibility === "BACKWARD") {
    const previous = state.schemas[latest - 1] as RegistrySchema
    const issues =
      previous.schemaType === schemaType ? backwardIssues(schemaType, schema, previous.schema) : ["schema type changed"]
    if (issues.length > 0) {
      return [409, { error_code: 409, message: `Schema being registered is incompatible: ${issues.join("; ")}` }]
    }
  }
  let id = state.schemas.findIndex((s) => s.schema === schema && s.schemaType === schemaType) + 1
  if (id === 0) id = state.schemas.push({ schema, schemaType })
  state.subjects.set(subject, [...versions, id])
  return [200, { id }]
}

const route = (state: State, method: string, url: string, body: Record<string, unknown>): Answer => {
  const path = url.split("?")[0] as string
  let m = /^\/subjects\/([^/]+)\/versions$/.exec(path)
  if (m && method === "POST") return register(state, decodeURIComponent(m[1] as string), body)
  m = /^\/schemas\/ids\/(\d+)$/.exec(path)
  if (m && method === "GET") {
    const found = state.schemas[Number(m[1]) - 1]
    if (found === undefined) return notFound(40403, "Schema not found")
    return [200, found.schemaType === "AVRO" ? { schema: found.schema } : found]
  }
  if (path === "/subjects" && method === "GET") return [200, [...state.subjects.keys()]]
  m = /^\/subjects\/([^/]+)\/versions\/latest$/.exec(path)
  if (m && method === "GET") {
    const subject = decodeURIComponent(m[1] as string)
    const versions = state.subjects.get(subject)
    if (versions === undefined) return notFound(40401, "Subject not found")
    const id = versions.at(-1) as number
    return [200, { subject, id, version: versions.length, ...state.schemas[id - 1] }]
  }
  if (path === "/config" && method === "PUT") {
    state.compatibility = body.compatibility === "NONE" ? "NONE" : "BACKWARD"
    return [200, { compatibility: state.compatibility }]
  }
  return notFound(404, `no route ${method} ${path}`)
}

/**
 * Starts a registry on `127.0.0.1` (port 0: any free one) for the scope; answers its base URL.
 *
 * @since 0.1.0
 * @category constructors
 */
export const serve = (port = 0): Effect.Effect<string, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() => {
      const state: State = { schemas: [], subjects: new Map(), compatibility: "BACKWARD" }
      const server = Http.createServer((req, res) => {
        let text = ""
        req.on("data", (chunk) => {
          text += chunk
        })
        req.on("end", () => {
          let body: Record<string, unknown> = {}
          try {
            body = text === "" ? {} : JSON.parse(text)
          } catch {
            // an unparsable body is answered below like an empty one
          }
          const [status, answer] = route(state, req.method ?? "GET", req.url ?? "/", body)
          res.writeHead(status, { "content-type": "application/vnd.schemaregistry.v1+json" })
          res.end(JSON.stringify(answer))
        })
      })
      return new Promise<Http.Server>((resolve) => server.listen(port, "127.0.0.1", () => resolve(server)))
    }),
    (server) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  ).pipe(Effect.map((server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`))

/**
 * The HTTP client on a registry of its own, started with the layer and stopped with it.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<SchemaRegistry> = Layer.unwrap(Effect.map(serve(), (url) => layerHttp({ url })))
