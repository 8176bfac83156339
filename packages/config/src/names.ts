/** Levenshtein distance with case differences free, for "did you mean". */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cur = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1]!.toLowerCase() === b[j - 1]!.toLowerCase() ? 0 : 1));
      prev = cur;
    }
  }
  return row[b.length]!;
}

/**
 * The known name `word` is most likely a typo of, or undefined: at most 3 edits, and at most half the
 * name's length (so `foo` does not become "did you mean vip?"). Used for config fields and program flags.
 */
export function nearestName(word: string, known: readonly string[]): string | undefined {
  const nearest = [...known].sort((x, y) => distance(word, x) - distance(word, y))[0];
  return nearest !== undefined && distance(word, nearest) <= Math.min(3, Math.floor(nearest.length / 2)) ? nearest : undefined;
}
