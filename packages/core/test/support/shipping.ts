// One topic and one consumer group over the whole in-memory world, for the tests that follow an
// event from its enqueue through the relay to a consumer's handler (trace context, span stack
// traces): the runtime layer, with its database, wake-up and broker kept visible to the test.

import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as OutboxRuntime from "../../src/OutboxRuntime.ts"
import * as Topic from "../../src/Topic.ts"
import * as WakeUp from "../../src/WakeUp.ts"

export const Shipment = Schema.Struct({ orderId: Schema.String })
export const Shipments = Topic.make({ name: "shipments", schema: Shipment, key: (s) => s.orderId })

/** A relay and the `shipping` consumer running `handler`, over the in-memory database and broker. */
export const shippingRuntime = <E>(
  handler: () => Effect.Effect<unknown, E>,
  options: { readonly fromBeginning?: boolean; readonly wakeUp?: Layer.Layer<WakeUp.WakeUp> } = {}
) =>
  OutboxRuntime.layer({
    relay: { instances: 1, pollInterval: Duration.millis(20) },
    consumers: [
      OutboxRuntime.consumer(
        Topic.consumer(Shipments, {
          groupId: "shipping",
          ...(options.fromBeginning === undefined ? {} : { fromBeginning: options.fromBeginning }),
          handler
        })
      )
    ]
  }).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        InMemoryDatabase.layer,
        options.wakeUp ?? WakeUp.layerMemory,
        InMemoryBroker.layer({ topics: { shipments: 1, "shipments.DLT": 1 } })
      )
    )
  )
