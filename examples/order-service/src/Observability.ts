/**
 * OpenTelemetry export for the service, two ways:
 *
 * - {@link otlp}: traces, metrics and logs over OTLP/HTTP (JSON), with Effect's own OTLP exporter
 *   (`effect/observability`, the Effect 4 home of what `@effect/opentelemetry`'s OTLP modules
 *   did). Point `OTEL_EXPORTER_OTLP_ENDPOINT` at a collector (e.g. `http://localhost:4318`).
 * - {@link console}: the OpenTelemetry JS SDK bridged by `@effect/opentelemetry` (`OtelTracer`,
 *   `OtelMetrics`), with the SDK's console exporters: every finished span, and the metrics every
 *   interval, printed to standard output. `OTEL_TRACES_EXPORTER=console` selects it. Pass other
 *   SDK exporters (Zipkin, OTLP/gRPC, an in-memory one in tests) to send them elsewhere.
 *
 * Neither set: nothing is exported.
 *
 * Every span of the library lands there: the HTTP request span, `outbox.enqueue`, one
 * `outbox.publish` per event and `outbox.consumer.handler` share the request's trace id (the W3C
 * `traceparent` travels in the Kafka headers); counters and histograms such as
 * `outbox_published_total` and `outbox_publish_latency_ms` go out as OTLP metrics.
 *
 * @since 0.1.0
 */
import * as OtelMetrics from "@effect/opentelemetry/OtelMetrics"
import * as OtelTracer from "@effect/opentelemetry/OtelTracer"
import * as OtelResource from "@effect/opentelemetry/Resource"
import {
  ConsoleMetricExporter,
  PeriodicExportingMetricReader,
  type PushMetricExporter
} from "@opentelemetry/sdk-metrics"
import {
  BasicTracerProvider,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanExporter
} from "@opentelemetry/sdk-trace-base"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
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
 * Export through the OpenTelemetry SDK: spans as they end, metrics every `exportInterval`, to the
 * console unless other exporters are given. Closing the layer flushes both.
 *
 * @since 0.1.0
 * @category layers
 */
export const console = (options: {
  readonly serviceName: string
  readonly exportInterval?: Duration.Input | undefined
  readonly spanExporter?: SpanExporter | undefined
  readonly metricExporter?: PushMetricExporter | undefined
}) => {
  const tracerProvider = Layer.effect(OtelTracer.OtelTracerProvider)(
    Effect.gen(function* () {
      const resource = yield* OtelResource.Resource
      return yield* Effect.acquireRelease(
        Effect.sync(
          () =>
            new BasicTracerProvider({
              resource,
              spanProcessors: [new SimpleSpanProcessor(options.spanExporter ?? new ConsoleSpanExporter())]
            })
        ),
        (provider) => Effect.promise(() => provider.forceFlush().finally(() => provider.shutdown()))
      )
    })
  )
  const metrics = OtelMetrics.layer(
    () =>
      new PeriodicExportingMetricReader({
        exporter: options.metricExporter ?? new ConsoleMetricExporter(),
        exportIntervalMillis: Duration.toMillis(Duration.fromInputUnsafe(options.exportInterval ?? "10 seconds"))
      })
  )
  return Layer.merge(OtelTracer.layer.pipe(Layer.provide(tracerProvider)), metrics).pipe(
    Layer.provide(OtelResource.layer({ serviceName: options.serviceName }))
  )
}

/**
 * `OTEL_EXPORTER_OTLP_ENDPOINT` set: export there over OTLP; else `OTEL_TRACES_EXPORTER=console`:
 * print to the console through the SDK; else no export.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (serviceName: string) =>
  Layer.unwrap(
    Effect.gen(function* () {
      const endpoint = yield* Config.option(Config.String("OTEL_EXPORTER_OTLP_ENDPOINT"))
      if (Option.isSome(endpoint)) return otlp({ baseUrl: endpoint.value, serviceName })
      const exporter = yield* Config.String("OTEL_TRACES_EXPORTER").pipe(Config.withDefault("none"))
      return exporter.trim().toLowerCase() === "console" ? console({ serviceName }) : Layer.empty
    })
  )
