/**
 * OpenTelemetry export for the service: traces, metrics and logs over OTLP/HTTP (JSON), with
 * Effect's own OTLP exporter (`effect/observability`, the Effect 4 home of what
 * `@effect/opentelemetry`'s OTLP modules did). Point `OTEL_EXPORTER_OTLP_ENDPOINT` at a collector
 * (e.g. `http://localhost:4318`); unset, nothing is exported.
 *
 * Every span of the library lands there: the HTTP request span, `outbox.enqueue`, one
 * `outbox.publish` per event and `outbox.consumer.handler` share the request's trace id (the W3C
 * `traceparent` travels in the Kafka headers); counters and histograms such as
 * `outbox_published_total` and `outbox_publish_latency_ms` go out as OTLP metrics.
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { FetchHttpClient } from "effect/http"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { Otlp } from "effect/observability"

/**
 * Export to an OTLP/HTTP endpoint.
 *
 * @since 0.1.0
 * @category layers
 */
export const otlp = (options: {
  readonly baseUrl: string
  readonly serviceName: string
  readonly exportInterval?: Duration.Input | undefined
}) =>
  Otlp.layerJson({
    baseUrl: options.baseUrl,
    resource: { serviceName: options.serviceName },
    tracerExportInterval: options.exportInterval ?? "5 seconds",
    metricsExportInterval: options.exportInterval ?? "10 seconds",
    loggerExportInterval: options.exportInterval ?? "5 seconds"
  }).pipe(Layer.provide(FetchHttpClient.layer))

/**
 * `OTEL_EXPORTER_OTLP_ENDPOINT` set: export there; unset: no export.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (serviceName: string) =>
  Layer.unwrap(
    Effect.gen(function* () {
      const endpoint = yield* Config.option(Config.String("OTEL_EXPORTER_OTLP_ENDPOINT"))
      return Option.isNone(endpoint) ? Layer.empty : otlp({ baseUrl: endpoint.value, serviceName })
    })
  )
