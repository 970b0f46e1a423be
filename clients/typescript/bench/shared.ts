/** What the standalone bench drivers (`echo.ts`, `cancel.ts`) share: option parsing and
 * percentiles. */

/** `text` as a number of at least `min`, or an error naming the option `--name`. */
export function numberOption(name: string, text: string, min: number): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value < min) {
    throw new Error(`--${name} must be a number >= ${min}, got ${JSON.stringify(text)}`);
  }
  return value;
}

/** The nearest-rank `p`th percentile of `sorted` (ascending), or null when it is empty. */
export function nearestRank(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) {
    return null;
  }
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? 0;
}
