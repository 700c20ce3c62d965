/**
 * The environment variables of the Schema Registry client (docs/configuration.md is generated
 * from this table; `SchemaRegistry.layerConfig` reads through it).
 */
import * as EnvVariable from "@effect-outbox/core/EnvVariable"
import * as Config from "effect/Config"

export const variables = EnvVariable.table(
  { package: "schema-registry", title: "Schema Registry (payload codecs)" },
  {
    url: EnvVariable.make({
      name: "OUTBOX_SCHEMA_REGISTRY_URL",
      type: "string",
      default: "required",
      description:
        "base URL of a Confluent-compatible Schema Registry (`http://host:8081`; Apicurio: `…/apis/ccompat/v7`)",
      config: Config.String("OUTBOX_SCHEMA_REGISTRY_URL")
    }),
    auth: EnvVariable.optional(
      {
        name: "OUTBOX_SCHEMA_REGISTRY_AUTH",
        type: "secret",
        description: "`user:password` for HTTP basic authentication (Confluent Cloud: API key and secret)",
        config: Config.Redacted("OUTBOX_SCHEMA_REGISTRY_AUTH")
      },
      "no Authorization header"
    )
  }
)
