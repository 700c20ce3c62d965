#!/usr/bin/env node
// `pnpm cycles`: no import cycle between the modules of any package (packages/*/src). Follows
// relative imports and the package's own `@effect-outbox/<pkg>/<Module>` imports (type-only
// imports too: a cycle of types still ties two modules into one), finds the strongly connected
// components (Tarjan) and exits non-zero, naming each cycle's modules, if any component has more
// than one module.
//
//   node scripts/cycles.mjs [root]   root: the repository (default: this one)
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"

const root = resolve(process.argv[2] ?? join(import.meta.dirname, ".."))

const sources = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return sources(path)
    return /\.tsx?$/.test(name) && !name.endsWith(".d.ts") ? [path] : []
  })

// `import … from "x"`, `export … from "x"`, `import "x"` and `import("x")`.
const specifiers = (text) =>
  [
    ...text.matchAll(
      /(?:^|\n)\s*(?:import|export)\b[^"'`;]*?from\s*["']([^"']+)["']|(?:^|\n)\s*import\s*["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/g
    )
  ].map((m) => m[1] ?? m[2] ?? m[3])

const resolveImport = (from, specifier, pkgName, srcDir) => {
  let target
  if (specifier.startsWith(".")) target = resolve(dirname(from), specifier)
  else if (specifier === pkgName) target = join(srcDir, "index.ts")
  else if (specifier.startsWith(`${pkgName}/`)) target = join(srcDir, specifier.slice(pkgName.length + 1))
  else return undefined
  for (const candidate of [target, target.replace(/\.js$/, ".ts"), `${target}.ts`, join(target, "index.ts")]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate
  }
  return undefined
}

/** Tarjan's strongly connected components of `graph` (node -> successors). */
const components = (graph) => {
  let index = 0
  const indices = new Map()
  const low = new Map()
  const stack = []
  const onStack = new Set()
  const result = []
  const visit = (node) => {
    indices.set(node, index)
    low.set(node, index)
    index++
    stack.push(node)
    onStack.add(node)
    for (const next of graph.get(node) ?? []) {
      if (!indices.has(next)) {
        visit(next)
        low.set(node, Math.min(low.get(node), low.get(next)))
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node), indices.get(next)))
    }
    if (low.get(node) === indices.get(node)) {
      const component = []
      let member
      do {
        member = stack.pop()
        onStack.delete(member)
        component.push(member)
      } while (member !== node)
      result.push(component)
    }
  }
  for (const node of graph.keys()) if (!indices.has(node)) visit(node)
  return result
}

let cycles = 0
for (const pkg of readdirSync(join(root, "packages")).sort()) {
  const srcDir = join(root, "packages", pkg, "src")
  const manifest = join(root, "packages", pkg, "package.json")
  if (!existsSync(srcDir) || !existsSync(manifest)) continue
  const pkgName = JSON.parse(readFileSync(manifest, "utf8")).name
  const graph = new Map()
  for (const file of sources(srcDir)) {
    const targets = specifiers(readFileSync(file, "utf8"))
      .map((s) => resolveImport(file, s, pkgName, srcDir))
      .filter((t) => t !== undefined)
    graph.set(file, new Set(targets))
  }
  for (const component of components(graph)) {
    if (component.length < 2) continue
    cycles++
    console.log(
      `import cycle in ${pkgName}:\n  ${component
        .map((f) => relative(root, f))
        .sort()
        .join("\n  ")}`
    )
  }
}
if (cycles === 0) console.log("no import cycle in packages/*/src")
process.exit(cycles === 0 ? 0 : 1)
