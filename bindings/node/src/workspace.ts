/**
 * The idiomatic API: {@link Workspace} and {@link Hold}.
 *
 * Long operations return Promises and run on koffi's worker threads, so timers and I/O go on
 * while they run. Cheap getters (`info`, `list`, `show`) are synchronous.
 */
import { callSync } from './call.js';
import { checkNotCancelled, runAsync, runAsyncRaw, runAsyncVoid } from './ops.js';
import { fromNative, nativeOptions, toNative } from './codec.js';
import { CairnError, check } from './errors.js';
import { decodeProgress, load, STATUS, type Out, type Pointer } from './ffi.js';
import { NativeHandle } from './handle.js';
import { pathToBuffer } from './paths.js';
import type {
  CacheTrim,
  CallOptions,
  Change,
  CopyReport,
  DiffOptions,
  GcOptions,
  GcPlan,
  GcReport,
  HoldOptions,
  Plan,
  PruneReport,
  Recovery,
  RestoreOptions,
  RestoreReport,
  Retention,
  Snapshot,
  SnapshotInfo,
  SnapshotOptions,
  VerifyReport,
  WatchOptions,
  WatchStatus,
  WorkspaceInfo,
  WorkspaceOptions,
} from './types.js';

/** The exact plan documents `plan()` returned, so `apply()` gives the library its own bytes. */
const planBytes = new WeakMap<object, Buffer>();

const text = (s: string): Buffer => Buffer.from(s, 'utf8');

/**
 * A hold on a workspace: while it stands (in this process or any other sharing the store),
 * restores are refused with `'BUSY'` and plans say `busy: true`. `release()` (or `close()`,
 * or `using`) lets go.
 */
export class Hold extends NativeHandle {
  /** What the hold is for. */
  readonly what: string;

  /** @internal */
  constructor(ptr: bigint, what: string) {
    const lib = load();
    super(ptr, (p) => lib.cairn_hold_free(p), 'Hold');
    this.what = what;
  }

  /** Releases the hold (the same as `close()`). */
  release(): void {
    this.close();
  }
}

/**
 * A workspace: a directory and the store that keeps its snapshots.
 *
 * ```ts
 * using ws = await Workspace.open('/path/to/project');
 * const snap = await ws.snapshot({ label: 'before' });
 * // ... the agent edits files ...
 * await ws.restore(snap.id);
 * ```
 *
 * Calls on one workspace may run concurrently. `close()` is idempotent; calls after it throw
 * `ERR_USE_AFTER_CLOSE`, and calls still running finish before the handle is freed.
 */
export class Workspace extends NativeHandle {
  /** The workspace id. */
  readonly id: string;
  /** The canonical root directory. */
  readonly root: string;
  /** The store directory. */
  readonly store: string;

  private constructor(ptr: bigint) {
    const lib = load();
    super(ptr, (p) => lib.cairn_workspace_free(p), 'Workspace');
    let info: WorkspaceInfo;
    try {
      info = this.info();
    } catch (e) {
      this.close();
      throw e;
    }
    this.id = info.id;
    this.root = info.root;
    this.store = info.store;
  }

  /**
   * Opens the workspace at `root` (creating its store if needed) on a worker thread, and
   * completes restores a crash interrupted (see `info().recovered`).
   */
  static async open(root: string | Uint8Array, options?: WorkspaceOptions): Promise<Workspace> {
    const r = pathToBuffer(root);
    const o = toNative(options);
    const ptr = await runAsyncRaw([], 'cairn_workspace_open', () => [r, r.length, o, o.length]);
    return new Workspace(ptr as bigint);
  }

  /** {@link Workspace.open} on the calling thread. */
  static openSync(root: string | Uint8Array, options?: WorkspaceOptions): Workspace {
    const lib = load();
    const r = pathToBuffer(root);
    const o = toNative(options);
    const out: Out = [null];
    const err: Out = [null];
    check(lib.cairn_workspace_open(r, r.length, o, o.length, out, err), err);
    return new Workspace(out[0] as bigint);
  }

  /** Id, root, store, and the restores completed when it was opened. Synchronous. */
  info(): WorkspaceInfo {
    return fromNative(callSync('cairn_workspace_info', [this.ptr]));
  }

  /** The store's snapshots, oldest first. Synchronous. */
  list(): SnapshotInfo[] {
    return fromNative(callSync('cairn_workspace_list', [this.ptr]));
  }

  /** One snapshot, named by id, unique prefix (4+ hex characters) or label. Synchronous. */
  show(name: string): SnapshotInfo {
    const n = text(name);
    return fromNative(callSync('cairn_workspace_show', [this.ptr, n, n.length]));
  }

  /**
   * Takes a snapshot on a worker thread. `onProgress` is called on the main thread while it
   * runs; `signal`/`cancel` stop it (`'CANCELLED'`, nothing recorded).
   */
  async snapshot(options?: SnapshotOptions): Promise<Snapshot> {
    const o = nativeOptions(options, 'onProgress');
    const listener = options?.onProgress;
    let thrown: { error: unknown } | undefined;
    // Koffi runs this JS function on the main thread when the worker thread calls it, and the
    // worker waits for its answer; the main thread is free (the caller awaits a Promise), so
    // this never deadlocks. See "Progress and threads" in the README.
    const progress = listener
      ? (_userdata: Pointer, p: Pointer): number => {
          if (thrown) return 1;
          try {
            const v = decodeProgress(p);
            const r = listener({ files: Number(v.files), dirs: Number(v.dirs), hashed: Number(v.hashed), hashedBytes: Number(v.hashed_bytes) });
            return r === false ? 1 : 0;
          } catch (error) {
            thrown = { error };
            return 1;
          }
        }
      : null;
    try {
      const doc = await runAsync([this], 'cairn_workspace_snapshot', ([ws], scope) => [ws, o, o.length, progress, null, scope.ptr], options);
      return fromNative(doc);
    } catch (e) {
      if (thrown && CairnError.is(e, 'ABORTED_BY_CALLBACK')) throw thrown.error;
      throw e;
    }
  }

  /**
   * Differences from snapshot `a` to snapshot `b`, or to the live files when `b` is omitted
   * (a walk of the workspace, so it runs on a worker thread). `signal`/`cancel` are checked
   * before it starts. With `attribute: true` each change carries its `attribution`.
   */
  async diff(a: string, b?: string | null, options?: DiffOptions): Promise<Change[]> {
    checkNotCancelled(options);
    const an = text(a);
    const bn = text(b ?? '');
    const o = nativeOptions(options);
    return fromNative(
      await runAsync([this], 'cairn_workspace_diff_with', ([ws]) => [ws, an, an.length, bn, bn.length, o, o.length]),
    );
  }

  /**
   * Starts a watcher of the workspace inside this process (inotify on every directory, on a
   * worker thread): from then on each `snapshot()` of this workspace lists only the
   * directories that changed since the one before, and says so in its `walk` (the first after
   * the watcher starts walks in full). Events are read when a snapshot asks: nothing to wait
   * for. Replaces a watcher started before; `unwatch()` (or `close()`) stops it. `'UNSUPPORTED'`
   * on a file system inotify cannot watch (NFS, SMB, FUSE): snapshots there walk as before.
   * `signal`/`cancel` are checked before it starts.
   */
  async watch(options?: WatchOptions): Promise<WatchStatus> {
    checkNotCancelled(options);
    const o = nativeOptions(options);
    return fromNative(await runAsync([this], 'cairn_workspace_watch', ([ws]) => [ws, o, o.length]));
  }

  /**
   * Stops the watcher `watch()` started (snapshots walk the whole tree again, or ask a `cairn
   * watch` daemon). Does nothing when none runs.
   */
  async unwatch(): Promise<void> {
    await runAsyncVoid([this], 'cairn_workspace_unwatch', ([ws]) => [ws]);
  }

  /** Deletes a snapshot and collects garbage. `signal`/`cancel` are checked before it starts. */
  async delete(name: string, options?: CallOptions): Promise<PruneReport> {
    checkNotCancelled(options);
    const n = text(name);
    return fromNative(await runAsync([this], 'cairn_workspace_delete', ([ws]) => [ws, n, n.length]));
  }

  /** Applies a retention policy and collects garbage. `signal`/`cancel` are checked before it starts. */
  async prune(retain: Retention, options?: CallOptions): Promise<PruneReport> {
    checkNotCancelled(options);
    const r = toNative(retain);
    return fromNative(await runAsync([this], 'cairn_workspace_prune', ([ws]) => [ws, r, r.length]));
  }

  /**
   * Collects garbage; with `dryRun`, returns the plan and deletes nothing. `signal`/`cancel`
   * are checked before it starts. On a workspace with a `remote`, the remote's collector runs
   * (its report in `remote`): it marks unreachable objects in one run and deletes them in a
   * later one, `graceMs` (default an hour) after.
   */
  gc(options: GcOptions & { dryRun: true }): Promise<GcPlan>;
  gc(options?: GcOptions & { dryRun?: false }): Promise<GcReport>;
  gc(options?: GcOptions): Promise<GcReport | GcPlan>;
  async gc(options?: GcOptions): Promise<GcReport | GcPlan> {
    checkNotCancelled(options);
    const o = nativeOptions(options);
    return fromNative(await runAsync([this], 'cairn_workspace_gc', ([ws]) => [ws, o, o.length]));
  }

  /**
   * Shrinks this machine's cache of the remote to at most `maxBytes` of packs and large
   * objects, least recently used first (they are downloaded again when next read). Files the
   * remote does not hold yet are never removed. `'UNSUPPORTED'` when the workspace has no
   * remote. `signal`/`cancel` are checked before it starts.
   */
  async trimCache(maxBytes: number | bigint, options?: CallOptions): Promise<CacheTrim> {
    checkNotCancelled(options);
    const n = BigInt(maxBytes);
    if (n < 0n) throw new RangeError('maxBytes must not be negative');
    return fromNative(await runAsync([this], 'cairn_workspace_trim_cache', ([ws]) => [ws, n]));
  }

  /** Re-hashes every object and decodes every tree and manifest. `signal`/`cancel` are checked before it starts. */
  async verify(options?: CallOptions): Promise<VerifyReport> {
    checkNotCancelled(options);
    return fromNative(await runAsync([this], 'cairn_workspace_verify', ([ws]) => [ws]));
  }

  /**
   * Copies a snapshot with its objects into the store of workspace `to`; idempotent.
   * `signal`/`cancel` are checked before it starts.
   */
  async copy(name: string, to: Workspace, options?: CallOptions): Promise<CopyReport> {
    checkNotCancelled(options);
    const n = text(name);
    return fromNative(await runAsync([this, to], 'cairn_workspace_copy', ([ws, dst]) => [ws, n, n.length, dst]));
  }

  /** Plans restoring a snapshot (the dry run): every change, before any is made. */
  async plan(name: string, options?: RestoreOptions): Promise<Plan> {
    const n = text(name);
    const o = nativeOptions(options);
    const raw = await runAsync([this], 'cairn_workspace_plan', ([ws], scope) => [ws, n, n.length, o, o.length, scope.ptr], options);
    const plan = fromNative<Plan>(raw);
    planBytes.set(plan, raw);
    return plan;
  }

  /**
   * Applies a plan from `plan()` exactly as it lists, or refuses (`'CONFLICT'` when the files
   * changed since, `'BUSY'` under a hold). A plan that went through `JSON.stringify` works too.
   */
  async apply(plan: Plan, options?: RestoreOptions): Promise<RestoreReport> {
    const p = planBytes.get(plan) ?? toNative(plan);
    const o = nativeOptions(options);
    return fromNative(await runAsync([this], 'cairn_workspace_apply', ([ws], scope) => [ws, p, p.length, o, o.length, scope.ptr], options));
  }

  /**
   * Restores a snapshot: plans, then (unless `dryRun`) applies, taking a safety snapshot first
   * (`safetySnapshotId`; restoring it undoes this).
   */
  async restore(name: string, options?: RestoreOptions): Promise<RestoreReport> {
    const n = text(name);
    const o = nativeOptions(options);
    return fromNative(await runAsync([this], 'cairn_workspace_restore', ([ws], scope) => [ws, n, n.length, o, o.length, scope.ptr], options));
  }

  /**
   * Completes restores a crash left pending, and makes the changes of finished restores durable
   * (a restore returns once its changes are made, before the disk has them). `signal`/`cancel`
   * are checked before it starts.
   */
  async recover(options?: CallOptions): Promise<Recovery[]> {
    checkNotCancelled(options);
    return fromNative(await runAsync([this], 'cairn_workspace_recover', ([ws]) => [ws]));
  }

  /**
   * Finishes what `recover` can, then ends the interrupted restores it cannot finish (paths
   * obstructed by later edits, or that may not be changed) as they stand: each comes back with
   * `abandoned: true` and the paths left as they are; its `safety` snapshot still holds the
   * files as they were before it.
   */
  async giveUp(options?: CallOptions): Promise<Recovery[]> {
    checkNotCancelled(options);
    return fromNative(await runAsync([this], 'cairn_workspace_give_up', ([ws]) => [ws]));
  }

  /**
   * Takes a hold named `what` (say, the command the agent runs): restores are refused with
   * `'BUSY'` until it is released. Refused with `'BUSY'` while a restore changes files.
   */
  hold(what: string, options?: HoldOptions): Hold {
    const lib = load();
    const w = text(what);
    const out: Out = [null];
    const err: Out = [null];
    check(lib.cairn_workspace_hold(this.ptr, w, w.length, options?.pid ?? -1, out, err), err);
    return new Hold(out[0] as bigint, what);
  }
}

/** The library's version (`"0.1.0"`). */
export function version(): string {
  return String(load().cairn_version());
}

/** The library's ABI version (checked against the binding's when it loads). */
export function abiVersion(): number {
  return load().cairn_abi_version() as number;
}

/** A short description of a status code (`"not found"`). */
export function statusDescription(status: number): string {
  return String(load().cairn_status_str(status));
}

export { STATUS };
