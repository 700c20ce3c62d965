/**
 * `@effect-outbox/schema-registry`: payload codecs that write Avro and JSON Schema payloads in the
 * Confluent wire format through a Schema Registry, derived from the topic's Effect Schema.
 *
 * @since 0.1.0
 */
export * as AvroSchema from "./AvroSchema.ts"
export * as Compatibility from "./Compatibility.ts"
export * as MemoryRegistry from "./MemoryRegistry.ts"
export * as RegistryCodec from "./RegistryCodec.ts"
export * as SchemaRegistry from "./SchemaRegistry.ts"
export * as WireFormat from "./WireFormat.ts"
