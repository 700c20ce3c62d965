import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Lifecycle from "../src/Lifecycle.ts"

type Status = Lifecycle.OutboxStatus

// The expected table, written out independently of the implementation (SPEC R2.1–R2.5).
const allowed = new Set<string>([
  "PREQUEUED -> PENDING", // R2.2 released
  "PENDING -> DISPATCHING", // R2.1 claimed
  "DISPATCHING -> PUBLISHED", // R2.1 confirmed
  "DISPATCHING -> PENDING", // retriable failure, stale lease without record, shutdown release
  "DISPATCHING -> FAILURE", // R2.3
  "DISPATCHING -> UNDER_PROCESSING", // R2.5 consumer ahead of the acknowledgement
  "PUBLISHED -> UNDER_PROCESSING", // R2.1
  "UNDER_PROCESSING -> SUCCESS", // R2.1
  "UNDER_PROCESSING -> PUSHED_FAILURE" // R2.1
])

const all: ReadonlyArray<Status> = [
  "PREQUEUED",
  "PENDING",
  "DISPATCHING",
  "PUBLISHED",
  "UNDER_PROCESSING",
  "SUCCESS",
  "PUSHED_FAILURE",
  "FAILURE",
  "SKIPPED"
]

// Forward rank of the happy path; a move to a lower rank is "backwards".
const rank: Record<Status, number> = {
  PREQUEUED: 0,
  PENDING: 1,
  DISPATCHING: 2,
  PUBLISHED: 3,
  UNDER_PROCESSING: 4,
  SUCCESS: 5,
  PUSHED_FAILURE: 5,
  FAILURE: 5,
  SKIPPED: 6
}

const reachable = (from: Status): Set<Status> => {
  const seen = new Set<Status>()
  const todo: Array<Status> = [...Lifecycle.transitions[from]]
  while (todo.length > 0) {
    const next = todo.pop()!
    if (seen.has(next)) continue
    seen.add(next)
    todo.push(...Lifecycle.transitions[next])
  }
  return seen
}

describe("Lifecycle", () => {
  it("has exactly the nine statuses, in lifecycle order", () => {
    assert.deepStrictEqual([...Lifecycle.statuses], [...all])
  })

  describe("the transition table, all 81 pairs", () => {
    for (const from of all) {
      for (const to of all) {
        const expected = allowed.has(`${from} -> ${to}`)
        it(`${from} -> ${to} is ${expected ? "allowed" : "forbidden"}`, () => {
          assert.strictEqual(Lifecycle.canTransition(from, to), expected)
        })
      }
    }
  })

  it("SUCCESS, PUSHED_FAILURE, FAILURE and SKIPPED are the terminal statuses (R2.4)", () => {
    assert.deepStrictEqual(all.filter(Lifecycle.isTerminal), ["SUCCESS", "PUSHED_FAILURE", "FAILURE", "SKIPPED"])
  })

  it("leaving FAILURE is only the operator's requeue or skip, never an ordinary move (R2.4)", () => {
    assert.deepStrictEqual(all.filter(Lifecycle.canRequeue), ["FAILURE"])
    assert.deepStrictEqual(all.filter(Lifecycle.canSkip), ["FAILURE"])
    for (const to of all) assert.isFalse(Lifecycle.canTransition("FAILURE", to))
    for (const to of all) assert.isFalse(Lifecycle.canTransition("SKIPPED", to))
  })

  it("processing may start from DISPATCHING as well as PUBLISHED (R2.5)", () => {
    assert.deepStrictEqual(
      all.filter((from) => Lifecycle.canTransition(from, "UNDER_PROCESSING")),
      ["DISPATCHING", "PUBLISHED"]
    )
  })

  it("a late markPublished accepts rows processing already advanced, and nothing else (R2.6)", () => {
    assert.deepStrictEqual([...Lifecycle.advancedBeyond.PUBLISHED], ["UNDER_PROCESSING", "SUCCESS", "PUSHED_FAILURE"])
    assert.deepStrictEqual([...Lifecycle.advancedBeyond.UNDER_PROCESSING], ["SUCCESS", "PUSHED_FAILURE"])
    assert.notInclude(Lifecycle.advancedBeyond.PUBLISHED, "FAILURE")
  })

  it("every status is reachable from creation (PENDING or PREQUEUED), SKIPPED through the operator's skip", () => {
    const fromCreation = new Set<Status>(["PREQUEUED", "PENDING", ...reachable("PREQUEUED"), ...reachable("PENDING")])
    if (fromCreation.has("FAILURE") && Lifecycle.canSkip("FAILURE")) fromCreation.add("SKIPPED")
    assert.deepStrictEqual(
      all.filter((s) => !fromCreation.has(s)),
      []
    )
  })

  it("every non-terminal status can still reach a terminal one (nothing is stuck forever)", () => {
    for (const status of all.filter((s) => !Lifecycle.isTerminal(s))) {
      assert.isTrue([...reachable(status)].some(Lifecycle.isTerminal), status)
    }
  })

  it("the only backwards move is DISPATCHING -> PENDING (retry, stale lease, release)", () => {
    const backwards = all.flatMap((from) =>
      Lifecycle.transitions[from].filter((to) => rank[to] < rank[from]).map((to) => `${from} -> ${to}`)
    )
    assert.deepStrictEqual(backwards, ["DISPATCHING -> PENDING"])
  })

  // Each status rule, written out per status independently of the implementation.
  describe("the status rules, every status", () => {
    const expectations: ReadonlyArray<{
      readonly name: string
      readonly rule: (s: Status) => unknown
      readonly expected: Record<Status, unknown>
    }> = [
      {
        name: "holdsLease (only DISPATCHING keeps a lease)",
        rule: Lifecycle.holdsLease,
        expected: {
          PREQUEUED: false,
          PENDING: false,
          DISPATCHING: true,
          PUBLISHED: false,
          UNDER_PROCESSING: false,
          SUCCESS: false,
          PUSHED_FAILURE: false,
          FAILURE: false,
          SKIPPED: false
        }
      },
      {
        name: "isQueued (not finished with publication)",
        rule: Lifecycle.isQueued,
        expected: {
          PREQUEUED: false,
          PENDING: true,
          DISPATCHING: true,
          PUBLISHED: false,
          UNDER_PROCESSING: false,
          SUCCESS: false,
          PUSHED_FAILURE: false,
          FAILURE: false,
          SKIPPED: false
        }
      },
      {
        name: "blocksKey under failedHead block (the default)",
        rule: (s) => Lifecycle.blocksKey(s),
        expected: {
          PREQUEUED: false,
          PENDING: true,
          DISPATCHING: true,
          PUBLISHED: false,
          UNDER_PROCESSING: false,
          SUCCESS: false,
          PUSHED_FAILURE: false,
          FAILURE: true,
          SKIPPED: false
        }
      },
      {
        name: "blocksKey under failedHead skip",
        rule: (s) => Lifecycle.blocksKey(s, "skip"),
        expected: {
          PREQUEUED: false,
          PENDING: true,
          DISPATCHING: true,
          PUBLISHED: false,
          UNDER_PROCESSING: false,
          SUCCESS: false,
          PUSHED_FAILURE: false,
          FAILURE: false,
          SKIPPED: false
        }
      },
      {
        name: "isUnfinished (the end-to-end lag)",
        rule: Lifecycle.isUnfinished,
        expected: {
          PREQUEUED: false,
          PENDING: true,
          DISPATCHING: true,
          PUBLISHED: true,
          UNDER_PROCESSING: true,
          SUCCESS: false,
          PUSHED_FAILURE: false,
          FAILURE: false,
          SKIPPED: false
        }
      },
      {
        name: "isPurgeable (what retention may delete)",
        rule: Lifecycle.isPurgeable,
        expected: {
          PREQUEUED: false,
          PENDING: false,
          DISPATCHING: false,
          PUBLISHED: true,
          UNDER_PROCESSING: false,
          SUCCESS: true,
          PUSHED_FAILURE: true,
          FAILURE: true,
          SKIPPED: true
        }
      },
      {
        name: "consumerAction for a first delivery",
        rule: (s) => Lifecycle.consumerAction(s, false),
        expected: {
          PREQUEUED: "process",
          PENDING: "process",
          DISPATCHING: "start",
          PUBLISHED: "start",
          UNDER_PROCESSING: "start",
          SUCCESS: "skip",
          PUSHED_FAILURE: "skip",
          FAILURE: "processFailed",
          SKIPPED: "process"
        }
      },
      {
        name: "consumerAction for a dead-letter replay",
        rule: (s) => Lifecycle.consumerAction(s, true),
        expected: {
          PREQUEUED: "process",
          PENDING: "process",
          DISPATCHING: "start",
          PUBLISHED: "start",
          UNDER_PROCESSING: "start",
          SUCCESS: "skip",
          PUSHED_FAILURE: "process",
          FAILURE: "process",
          SKIPPED: "process"
        }
      }
    ]
    for (const { expected, name, rule } of expectations) {
      for (const status of all) {
        it(`${name}: ${status} -> ${String(expected[status])}`, () => {
          assert.strictEqual(rule(status), expected[status])
        })
      }
    }

    it("a row that holds a lease is queued, blocks its key and is unfinished", () => {
      for (const status of all.filter(Lifecycle.holdsLease)) {
        assert.isTrue(
          Lifecycle.isQueued(status) && Lifecycle.blocksKey(status, "skip") && Lifecycle.isUnfinished(status)
        )
      }
    })

    it("retention never purges a row the relay works on; PUBLISHED is the one unfinished status it may purge", () => {
      assert.deepStrictEqual(
        all.filter((s) => Lifecycle.isPurgeable(s) && Lifecycle.isQueued(s)),
        []
      )
      assert.deepStrictEqual(
        all.filter((s) => Lifecycle.isPurgeable(s) && Lifecycle.isUnfinished(s)),
        ["PUBLISHED"]
      )
    })

    it("the consumer starts processing exactly where the table allows a move to UNDER_PROCESSING, or is already there", () => {
      for (const status of all) {
        const starts = Lifecycle.consumerAction(status, false) === "start"
        assert.strictEqual(starts, Lifecycle.canTransition(status, "UNDER_PROCESSING") || status === "UNDER_PROCESSING")
      }
    })
  })

  describe("properties", () => {
    const OutboxStatus = Lifecycle.OutboxStatus

    it.effect.prop("no status transitions to itself", [OutboxStatus], ([s]) =>
      Effect.sync(() => assert.isFalse(Lifecycle.canTransition(s, s)))
    )

    it.effect.prop("terminal means no ordinary transition leaves it", [OutboxStatus, OutboxStatus], ([from, to]) =>
      Effect.sync(() => {
        if (Lifecycle.isTerminal(from)) assert.isFalse(Lifecycle.canTransition(from, to))
        assert.strictEqual(
          Lifecycle.isTerminal(from),
          all.every((t) => !Lifecycle.canTransition(from, t))
        )
      })
    )

    it.effect.prop("canTransition agrees with the transition table", [OutboxStatus, OutboxStatus], ([from, to]) =>
      Effect.sync(() => assert.strictEqual(Lifecycle.canTransition(from, to), Lifecycle.transitions[from].includes(to)))
    )

    it.effect.prop(
      "statuses a CAS accepts as already advanced lie strictly ahead on the forward path",
      [OutboxStatus],
      ([target]) =>
        Effect.sync(() => {
          const ahead = reachable(target)
          for (const accepted of Lifecycle.advancedBeyond[target]) {
            assert.isTrue(ahead.has(accepted), `${accepted} is not ahead of ${target}`)
            assert.notStrictEqual(accepted, target)
            assert.isFalse(Lifecycle.canTransition(accepted, target), "accepting must never mean moving back")
          }
        })
    )

    it.effect.prop(
      "a random walk through allowed moves never leaves a terminal status and never repeats a terminal",
      [Schema.Array(OutboxStatus)],
      ([requests]) =>
        Effect.sync(() => {
          let current: Status = "PENDING"
          const visited: Array<Status> = [current]
          for (const next of requests) {
            if (Lifecycle.canTransition(current, next)) {
              current = next
              visited.push(next)
            }
          }
          const firstTerminal = visited.findIndex(Lifecycle.isTerminal)
          if (firstTerminal !== -1) assert.strictEqual(firstTerminal, visited.length - 1)
          // every step forward except the retry loop back to PENDING
          for (let i = 1; i < visited.length; i++) {
            const [a, b] = [visited[i - 1]!, visited[i]!]
            assert.isTrue(rank[b] > rank[a] || (a === "DISPATCHING" && b === "PENDING"))
          }
        })
    )
  })
})
