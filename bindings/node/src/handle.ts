/**
 * The one handle base class: a native pointer with `close()` (idempotent), `[Symbol.dispose]`
 * (so `using` works), `[Symbol.asyncDispose]` (waits for the calls still running), and a
 * `FinalizationRegistry` backstop that frees a handle nobody closed once it is unreachable.
 *
 * Asynchronous calls mark the handle busy for as long as they run on a worker thread: closing
 * a busy handle refuses new calls at once, and frees the native object when the last running
 * call returns, so the C rule "`_free` must not race another call" always holds.
 */
import { UseAfterCloseError } from './errors.js';

interface Held {
  ptr: bigint;
  free: (ptr: bigint) => void;
  kind: string;
}

const stats = { live: new Map<string, number>(), finalized: 0 };

function bump(kind: string, by: number): void {
  stats.live.set(kind, (stats.live.get(kind) ?? 0) + by);
}

const registry = new FinalizationRegistry<Held>((held) => {
  stats.finalized += 1;
  bump(held.kind, -1);
  held.free(held.ptr);
});

/** Internal: marks a handle in use and returns its pointer and the function that ends the use. */
export const acquire = Symbol('cairn.acquire');

/** Counts of native handles, for tests and leak hunting. */
export function handleStats(): { live: Record<string, number>; finalized: number } {
  return { live: Object.fromEntries(stats.live), finalized: stats.finalized };
}

/** A native object owned by JS. */
export abstract class NativeHandle implements Disposable, AsyncDisposable {
  #ptr: bigint | null;
  #busy = 0;
  #idle: Array<() => void> = [];
  readonly #free: (ptr: bigint) => void;
  readonly #kind: string;

  protected constructor(ptr: bigint, free: (ptr: bigint) => void, kind: string) {
    this.#ptr = ptr;
    this.#free = free;
    this.#kind = kind;
    bump(kind, 1);
    registry.register(this, { ptr, free, kind }, this);
  }

  /** Whether `close()` was called. */
  get closed(): boolean {
    return this.#ptr === null;
  }

  /** The pointer, for a synchronous call; throws `ERR_USE_AFTER_CLOSE` once closed. */
  protected get ptr(): bigint {
    if (this.#ptr === null) throw new UseAfterCloseError(this.#kind);
    return this.#ptr;
  }

  /** @internal */
  [acquire](): [bigint, () => void] {
    const ptr = this.ptr;
    this.#busy += 1;
    let done = false;
    return [
      ptr,
      () => {
        if (done) return;
        done = true;
        this.#busy -= 1;
        if (this.#busy === 0) this.#settle(ptr);
      },
    ];
  }

  #settle(ptr: bigint): void {
    if (this.#ptr === null && this.#busy === 0) {
      this.#free(ptr);
      for (const wake of this.#idle.splice(0)) wake();
    }
  }

  /**
   * Releases the native object. Idempotent. Later calls throw `ERR_USE_AFTER_CLOSE`; calls
   * still running finish first (the object is freed when the last one returns).
   */
  close(): void {
    const ptr = this.#ptr;
    if (ptr === null) return;
    this.#ptr = null;
    registry.unregister(this);
    bump(this.#kind, -1);
    this.#settle(ptr);
  }

  /** Resolves once the handle is closed and no call is running on it. */
  whenIdle(): Promise<void> {
    if (this.#ptr === null && this.#busy === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** `using h = ...`: closes at the end of the scope. */
  [Symbol.dispose](): void {
    this.close();
  }

  /** `await using h = ...`: closes, then waits for running calls to finish. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
    await this.whenIdle();
  }
}
