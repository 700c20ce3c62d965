import * as InMemoryLifecycleRegistry from "../src/InMemoryLifecycleRegistry.ts"
import * as LifecycleRegistrySuite from "../src/LifecycleRegistrySuite.ts"

LifecycleRegistrySuite.suite("InMemoryLifecycleRegistry", { layer: () => InMemoryLifecycleRegistry.layer })
