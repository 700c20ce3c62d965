// Shared by the integration tests of the @platformatic/kafka adapter.
export const brokers = (process.env.KAFKA_BROKERS ?? "127.0.0.1:9092").split(",")

export const consumerOptions = {
  sessionTimeoutMillis: 6_000,
  rebalanceTimeoutMillis: 6_000,
  heartbeatIntervalMillis: 500,
  maxWaitTimeMillis: 200
} as const
