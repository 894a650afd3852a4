// Waits in the limiter's answers (RateLimit's t, Retry-After), checked
// against time the tests measure themselves. At a bucket's first take the
// wait for its next token is a whole interval of the policy (720 s for 5 an
// hour); every second since shortens it by a second. So a later answer's
// wait lies in [nominal − ceil(elapsed), nominal], elapsed measured from
// before the bucket's first take to after that answer, however slowly the
// requests ran. The tests' policies refill so slowly (a token every 720 s
// and more) that no delay changes how many whole tokens remain: r is exact.

import assert from 'node:assert/strict';

/** A stopwatch started now: seconds since. Start it before a bucket's first take. */
export function stopwatch(): () => number {
  const start = performance.now();
  return () => (performance.now() - start) / 1000;
}

/**
 * Asserts that `value` is whole seconds of a wait that was `nominal` at the
 * bucket's first take, `elapsed` seconds ago at most.
 */
export function assertWait(value: string | number | null | undefined, nominal: number, elapsed: number,
  what = 'the wait'): void {
  const low = nominal - Math.ceil(elapsed);
  const n = typeof value === 'number' ? value : /^[0-9]+$/.test(value ?? '') ? Number(value) : NaN;
  assert.ok(n >= low && n <= nominal,
    `${what}: ${value}, expected whole seconds from ${low} to ${nominal} (${elapsed.toFixed(3)} s since the first take)`);
}

/**
 * Asserts a RateLimit field item by item: each as `expected` has it (the
 * field at the bucket's first take: `"api";r=1;t=720`), names and r exactly,
 * each t by assertWait.
 */
export function assertLimit(field: string | null | undefined, expected: string, elapsed: number): void {
  const items = (field ?? '').split(', ');
  const wanted = expected.split(', ');
  assert.equal(items.length, wanted.length, `RateLimit: ${field}, expected items as ${expected}`);
  wanted.forEach((want, i) => {
    const [, head, nominal] = /^(.*;t=)([0-9]+)$/.exec(want) ?? [];
    assert.ok(head !== undefined, `expected ${want}: an item with t`);
    const got = items[i];
    assert.ok(got.startsWith(head), `RateLimit: ${field}, expected ${expected} (t within its bound)`);
    assertWait(got.slice(head.length), Number(nominal), elapsed, `t of ${got} in ${field}`);
  });
}
