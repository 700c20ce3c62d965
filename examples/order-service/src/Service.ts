/**
 * The whole order service as one layer: the HTTP server, the outbox runtime (relay, stale
 * recovery, retention, the billing and notifications consumers) and their ports. Route handlers
 * get `Outbox` and SQL, never the broker's publisher.
 *
 * @since 0.1.0
 */

import { PgClient } from "@effect/sql-pg"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import * as Duration from "effect/Duration"
import { HttpRouter } from "effect/http"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Consumers from "./Consumers.ts"
import * as Http from "./Http.ts"
import * as Orders from "./Orders.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly databaseUrl: string
  readonly brokers: ReadonlyArray<string>
  /** Schema of the service's tables and of its outbox. */
  readonly schema: string
  readonly topic: string
  readonly groupPrefix: string
}

/**
 * The storage and broker ports (PostgreSQL with LISTEN/NOTIFY wake-up, Kafka).
 *
 * @since 0.1.0
 * @category layers
 */
export const ports = (options: Options) =>
  Layer.merge(
    PgOutbox.layer({ schema: options.schema, store: { recordTransitions: true } }).pipe(
      Layer.provideMerge(
        PgClient.layer({ url: Redacted.make(options.databaseUrl), maxConnections: 5, applicationName: "order-service" })
      )
    ),
    KafkaOutbox.layer({ brokers: options.brokers, clientId: "order-service" })
  )

/**
 * The outbox runtime with the service's consumers.
 *
 * @since 0.1.0
 * @category layers
 */
export const runtime = (options: Options) => {
  const topic = Orders.ordersTopic(options.topic)
  return OutboxRuntime.layer({
    relay: { instances: 1, pollInterval: Duration.seconds(1) },
    runConsumers: true,
    consumers: [
      OutboxRuntime.consumer(
        Consumers.billing({ schema: options.schema, topic, groupId: `${options.groupPrefix}-billing` })
      ),
      OutboxRuntime.consumer(Consumers.notifications({ topic, groupId: `${options.groupPrefix}-notifications` }))
    ]
  })
}

/**
 * The HTTP server on the runtime; needs an `HttpServer` (e.g. `NodeHttpServer.layer`), the ports
 * and an `EmailProvider`.
 *
 * @since 0.1.0
 * @category layers
 */
export const server = (options: Options) =>
  HttpRouter.serve(Http.routes({ schema: options.schema, topic: Orders.ordersTopic(options.topic) }), {
    disableListenLog: true,
    disableLogger: true
  })

/**
 * Everything but the `HttpServer` and the `EmailProvider`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options) =>
  server(options).pipe(
    Layer.provideMerge(runtime(options)),
    // The service's own tables exist before the consumers start.
    Layer.provideMerge(Layer.effectDiscard(Orders.createTables(options.schema))),
    Layer.provideMerge(ports(options))
  )
