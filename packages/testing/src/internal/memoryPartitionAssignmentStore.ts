/**
 * `PartitionAssignmentStore` over the in-memory engine.
 *
 * @internal
 */
import type { PartitionAssignmentStore, Reservation } from "@effect-outbox/core/PartitionAssignmentStore"
import * as Option from "effect/Option"
import type { Engine } from "./memoryEngine.ts"
import * as Store from "./memoryStore.ts"

export const make = (engine: Engine): PartitionAssignmentStore["Service"] => {
  const { call, read, store } = engine
  return {
    reserve: (request) =>
      call<Reservation>(
        "assignment.reserve",
        () => [Store.assignmentResource(request.topic)],
        (tx) => {
          const assignments = Store.visibleAssignments(store, tx, request.topic)
          const existing = assignments.find((a) => a.ownerId === request.ownerId)
          if (existing !== undefined) {
            return { result: { ...existing, created: false } }
          }
          const counts = new Map<number, number>()
          let highest = -1
          for (const a of assignments) {
            counts.set(a.partition, (counts.get(a.partition) ?? 0) + 1)
            highest = Math.max(highest, a.partition)
          }
          let partition = 0
          while (partition <= highest && (counts.get(partition) ?? 0) >= request.maxPerPartition) partition++
          const assignment: Store.Assignment = { topic: request.topic, ownerId: request.ownerId, partition }
          Store.writeAssignment(store, tx, assignment)
          return { result: { ...assignment, created: true }, touched: [Store.assignmentResource(request.topic)] }
        }
      ),
    lookup: (topic, ownerId) =>
      read("assignment.lookup", (tx) =>
        Option.fromUndefinedOr(Store.visibleAssignments(store, tx, topic).find((a) => a.ownerId === ownerId)?.partition)
      ),
    counts: (topic) =>
      read("assignment.counts", (tx) => {
        const counts = new Map<number, number>()
        for (const a of Store.visibleAssignments(store, tx, topic)) {
          counts.set(a.partition, (counts.get(a.partition) ?? 0) + 1)
        }
        return new Map([...counts].sort((a, b) => a[0] - b[0])) as ReadonlyMap<number, number>
      })
  }
}
