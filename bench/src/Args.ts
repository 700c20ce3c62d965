/**
 * The bench scripts' command-line options: `--name value` pairs and bare `--flag`s, read from
 * `process.argv`. A value that is not a number where one is wanted stops the script with a message
 * naming the option, instead of running with `NaN`.
 */

const given = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`)
  return i < 0 ? undefined : process.argv[i + 1]
}

const toNumber = (name: string, value: string): number => {
  const n = Number(value)
  if (value.trim() === "" || !Number.isFinite(n)) throw new Error(`--${name} wants a number, got "${value}"`)
  return n
}

/** `--name value`, or `undefined` without it. */
export const optional = (name: string): string | undefined => given(name)

/** `--name value`, or `fallback` without it. */
export const text = (name: string, fallback: string): string => given(name) ?? fallback

/** `--name 42`, or `fallback` without it. */
export const number = (name: string, fallback: number): number => {
  const value = given(name)
  return value === undefined ? fallback : toNumber(name, value)
}

/** `--name a,b,c`, or `fallback` (comma-separated too) without it. */
export const list = (name: string, fallback: string): Array<string> => text(name, fallback).split(",")

/** `--name 1,4,16`, or `fallback` (comma-separated too) without it; `--name ""` is an empty list. */
export const numbers = (name: string, fallback: string): Array<number> =>
  list(name, fallback)
    .filter((value) => value !== "")
    .map((value) => toNumber(name, value))

/** Whether the bare `--name` is given. */
export const flag = (name: string): boolean => process.argv.includes(`--${name}`)
