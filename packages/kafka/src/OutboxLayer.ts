/**
 * Every broker port of effect-outbox (`Publisher`, `BrokerProbe`, `BrokerAdmin`,
 * `ConsumerSource`, `TopicReader`) from one driver's five layers over its client, and the same
 * with the client's own layer merged in. Each driver's outbox module (`KafkaOutbox`,
 * `PlatformaticOutbox`) is {@link make} with its layers filled in.
 *
 * @since 0.1.0
 */

import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import type { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import type * as KafkaSecurity from "@effect-outbox/core/KafkaSecurity"
import type { Publisher } from "@effect-outbox/core/Publisher"
import type { TopicReader } from "@effect-outbox/core/TopicReader"
import type * as Config from "effect/Config"
import * as Layer from "effect/Layer"
import type * as ClientConfig from "./ClientConfig.ts"

/**
 * The five ports.
 *
 * @since 0.1.0
 * @category models
 */
export type Ports = Publisher | BrokerProbe | BrokerAdmin | ConsumerSource | TopicReader

/**
 * One layer a port, each over the driver's client `C`.
 *
 * @since 0.1.0
 * @category models
 */
export interface PortLayers<C> {
  readonly publisher: Layer.Layer<Publisher, never, C>
  readonly probe: Layer.Layer<BrokerProbe, never, C>
  readonly admin: Layer.Layer<BrokerAdmin, never, C>
  readonly consumer: Layer.Layer<ConsumerSource, never, C>
  readonly reader: Layer.Layer<TopicReader, never, C>
}

/**
 * The ports over a client you provide.
 *
 * @since 0.1.0
 * @category layers
 */
export const withoutClient = <C>(ports: PortLayers<C>): Layer.Layer<Ports, never, C> =>
  Layer.mergeAll(ports.publisher, ports.probe, ports.admin, ports.consumer, ports.reader)

/**
 * The ports and the client, from the client's layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const withClient = <C, E, R>(ports: PortLayers<C>, client: Layer.Layer<C, E, R>): Layer.Layer<Ports | C, E, R> =>
  withoutClient(ports).pipe(Layer.provideMerge(client))

/**
 * The options of the five ports, one field a port.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<Publisher, Probe, Admin, Consumer, Reader> {
  readonly publisher?: Publisher | undefined
  readonly probe?: Probe | undefined
  readonly admin?: Admin | undefined
  readonly consumer?: Consumer | undefined
  readonly reader?: Reader | undefined
}

/**
 * A driver's outbox layers: the ports over a client you provide (`layerWithoutClient`), with the
 * client built from its options (`layer`), or from `KAFKA_BROKERS` / `KAFKA_CLIENT_ID` and
 * `KAFKA_SSL_*` / `KAFKA_SASL_*` with overrides (`layerConfig`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <O, C, ClientOptions>(driver: {
  readonly ports: (options: O) => PortLayers<C>
  readonly client: (options: ClientOptions) => Layer.Layer<C>
  readonly clientConfig: (
    overrides?: ClientConfig.Overrides<ClientOptions>
  ) => Layer.Layer<C, Config.ConfigError | KafkaSecurity.KafkaSecurityError>
}) => ({
  layerWithoutClient: (options: O = {} as O): Layer.Layer<Ports, never, C> => withoutClient(driver.ports(options)),
  layer: (client: ClientOptions, options: O = {} as O): Layer.Layer<Ports | C> =>
    withClient(driver.ports(options), driver.client(client)),
  layerConfig: (
    options: O & { readonly client?: ClientConfig.Overrides<ClientOptions> } = {} as O & {
      readonly client?: ClientConfig.Overrides<ClientOptions>
    }
  ): Layer.Layer<Ports | C, Config.ConfigError | KafkaSecurity.KafkaSecurityError> =>
    withClient(driver.ports(options), driver.clientConfig(options.client))
})
