/**
 * The publisher's current producer, handed out by reference count. A reset (after an
 * uncertain failure, a timeout or a topic change) retires the current producer: new sends get a
 * fresh one, and the retired one is disconnected only when the last send that holds it settles,
 * so a reset never cuts off other sends still running on it. Client-agnostic: both Kafka adapters
 * (kafkajs, @platformatic/kafka) build their publisher's producer on it.
 *
 * An outage of one partition (a send to it unanswered or refused) leaves the producer's state
 * uncertain for that partition only: the partition is tainted on that producer instead, and the
 * producer is replaced when a send next needs a tainted partition. Until then it goes on serving
 * the others, which matters when the client cannot start a fresh producer while a partition of
 * the topic has no leader (kafkajs reads metadata of every topic on connect).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Semaphore from "effect/Semaphore"

/**
 * @since 0.1.0
 * @category models
 */
export interface ProducerDriver<P> {
  readonly create: () => P
  readonly connect: (producer: P) => Promise<void>
  readonly disconnect: (producer: P) => Promise<void>
  /** Runs when a fresh producer replaces a retired one (metrics, caches tied to the old one). */
  readonly onReplace?: Effect.Effect<void> | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Lease<P> {
  readonly producer: P
  /** Gives the producer back; call it once, when the send that used it has settled. */
  readonly release: () => void
  /** This producer's state for these partitions is uncertain: it is not used for them again. */
  readonly taint: (partitions: ReadonlyArray<string>) => void
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ProducerLeases<P> {
  /** The current producer (connecting a fresh one after a reset), held until `release`. */
  readonly acquire: Effect.Effect<Lease<P>, unknown>
  /** Like `acquire`, replacing the current producer first when one of `partitions` is tainted on it. */
  readonly acquireFor: (partitions: ReadonlyArray<string>) => Effect.Effect<Lease<P>, unknown>
  /** The next `acquire` replaces the current producer. */
  readonly requestReset: () => void
  /** How many producers are connected or connecting: the current one plus retired ones in use. */
  readonly live: () => number
  /** Disconnects every producer, in use or not (the publisher's scope is closing). */
  readonly closeAll: Effect.Effect<void>
}

interface Slot<P> {
  readonly producer: P
  users: number
  retired: boolean
  readonly tainted: Set<string>
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = <P>(driver: ProducerDriver<P>): Effect.Effect<ProducerLeases<P>> =>
  Effect.gen(function* () {
    const lock = yield* Semaphore.make(1)
    const live = new Set<Slot<P>>()
    let current: Slot<P> | undefined
    let resetRequested = false

    const disconnect = (slot: Slot<P>) => {
      live.delete(slot)
      void driver.disconnect(slot.producer).catch(() => undefined)
    }

    const retire = (slot: Slot<P>) => {
      slot.retired = true
      if (slot.users === 0) disconnect(slot)
    }

    const lease = (slot: Slot<P>): Lease<P> => {
      slot.users++
      let released = false
      return {
        producer: slot.producer,
        release: () => {
          if (released) return
          released = true
          slot.users--
          if (slot.retired && slot.users === 0) disconnect(slot)
        },
        taint: (partitions) => {
          for (const partition of partitions) slot.tainted.add(partition)
        }
      }
    }

    const acquireFor = (partitions: ReadonlyArray<string>) =>
      lock.withPermits(1)(
        Effect.gen(function* () {
          if (current !== undefined && !resetRequested && !partitions.some((p) => current!.tainted.has(p)))
            return lease(current)
          if (current !== undefined) {
            retire(current)
            current = undefined
            if (driver.onReplace !== undefined) yield* driver.onReplace
          }
          resetRequested = false
          const slot: Slot<P> = { producer: driver.create(), users: 0, retired: false, tainted: new Set() }
          live.add(slot)
          yield* Effect.tryPromise({ try: () => driver.connect(slot.producer), catch: (error) => error }).pipe(
            Effect.tapError(() => Effect.sync(() => retire(slot)))
          )
          current = slot
          return lease(slot)
        })
      )

    const closeAll = lock
      .withPermits(1)(
        Effect.promise(() => {
          const all = [...live]
          live.clear()
          current = undefined
          return Promise.all(all.map((slot) => driver.disconnect(slot.producer).catch(() => undefined)))
        })
      )
      .pipe(Effect.asVoid)

    return {
      acquire: acquireFor([]),
      acquireFor,
      requestReset: () => {
        resetRequested = true
      },
      live: () => live.size,
      closeAll
    }
  })
