/**
 * Threads and runs: conversations whose messages carry checkpoints of the workspace, and the
 * rewind and fork that move the files and the conversation back together
 * (`cairn_threads_*`, `cairn_run_*`).
 *
 * The rule for what is synchronous: reads are (`list`, `log`, `listCheckpoints`, `memory`,
 * `runs`, `events`; SQLite in WAL mode never makes a reader wait), writes return Promises and
 * run on a worker thread (they may wait for another process's write, take a checkpoint, or
 * restore files).
 */
import { callSync } from './call.js';
import { fromNative, nativeOptions, toNative } from './codec.js';
import { check } from './errors.js';
import { copyBytes, load, type Out } from './ffi.js';
import { acquire, NativeHandle } from './handle.js';
import { checkNotCancelled, runAsync, runAsyncRaw, runAsyncVoid } from './ops.js';
import { pathToBuffer } from './paths.js';
import type {
  Admission,
  Appended,
  CallOptions,
  Checkpoint,
  CreateThreadOptions,
  DeliverOptions,
  Delivery,
  Entry,
  EntryId,
  EntryOptions,
  ForkOptions,
  ForkReport,
  MemoryItem,
  NewEntry,
  NewMemory,
  Prompt,
  RewindOptions,
  RewindReport,
  RunOptions,
  RunStatus,
  Thread,
  ThreadEvent,
  ThreadId,
  ThreadRuns,
  ThreadsOptions,
} from './types.js';

const text = (s: string): Buffer => Buffer.from(s, 'utf8');

/** The JSON document of a new entry or of a prompt to queue. */
function entryDocument(e: NewEntry | Prompt): Buffer {
  const { payload, ...rest } = e;
  if (payload !== undefined && rest.text !== undefined) throw new TypeError('give an entry either text or payload, not both');
  return toNative(payload === undefined ? rest : { ...rest, payloadHex: Buffer.from(payload).toString('hex') });
}

/**
 * A thread database: an SQLite file several processes may share, or with a `postgres://` URL
 * a PostgreSQL database several machines share. Opening it with a workspace
 * makes that the default workspace of checkpoints, rewinds and forks; with no path, the
 * database is `<store>/threads.db` of that workspace's store.
 */
export class Threads extends NativeHandle {
  private constructor(ptr: bigint) {
    const lib = load();
    super(ptr, (p) => lib.cairn_threads_free(p), 'Threads');
  }

  /** Opens (creating if needed) the database at `path`, or the workspace's with `path` null. */
  static async open(path: string | Uint8Array | null, options?: ThreadsOptions): Promise<Threads> {
    const p = path === null ? Buffer.alloc(0) : pathToBuffer(path);
    const o = nativeOptions(options, 'workspace');
    const ptr = await runAsyncRaw([options?.workspace], 'cairn_threads_open', ([ws]) => [p, p.length, o, o.length, ws]);
    return new Threads(ptr as bigint);
  }

  /** {@link Threads.open} on the calling thread. */
  static openSync(path: string | Uint8Array | null, options?: ThreadsOptions): Threads {
    const lib = load();
    const p = path === null ? Buffer.alloc(0) : pathToBuffer(path);
    const o = nativeOptions(options, 'workspace');
    const out: Out = [null];
    const err: Out = [null];
    const [ws, release] = options?.workspace ? options.workspace[acquire]() : [null, () => {}];
    try {
      check(lib.cairn_threads_open(p, p.length, o, o.length, ws, out, err), err);
    } finally {
      release();
    }
    return new Threads(out[0] as bigint);
  }

  /** Creates a thread (an `id` that exists already is `'VALIDATION'`). */
  async create(options?: CreateThreadOptions): Promise<Thread> {
    const o = nativeOptions(options);
    return fromNative(await runAsync([this], 'cairn_threads_create', ([t]) => [t, o, o.length]));
  }

  /** Every thread. Synchronous. */
  list(): Thread[] {
    return fromNative(callSync('cairn_threads_list', [this.ptr]));
  }

  /** The entries of a thread: its active branch, or with `all` every branch. Synchronous. */
  log(thread: ThreadId, options?: { all?: boolean }): Entry[] {
    const id = text(thread);
    return fromNative(callSync('cairn_threads_log', [this.ptr, id, id.length, options?.all ?? false]));
  }

  /**
   * Appends an entry. A user entry is preceded by a checkpoint of the workspace when the policy
   * says so (a failed checkpoint is reported in `checkpointError`; the entry is saved anyway).
   */
  async append(thread: ThreadId, entry: NewEntry, options?: EntryOptions): Promise<Appended> {
    const id = text(thread);
    const e = entryDocument(entry);
    const doc = await runAsync([this, options?.run, options?.workspace], 'cairn_threads_append', ([t, run, ws]) => [
      t,
      id,
      id.length,
      e,
      e.length,
      run,
      ws,
    ]);
    return fromNative(doc);
  }

  /** Takes a checkpoint of the workspace labelled `label`, bound to the thread. */
  async checkpoint(thread: ThreadId, label: string, options?: EntryOptions): Promise<Checkpoint> {
    const id = text(thread);
    const l = text(label);
    return fromNative(
      await runAsync([this, options?.run, options?.workspace], 'cairn_threads_checkpoint', ([t, run, ws]) => [
        t,
        id,
        id.length,
        l,
        l.length,
        run,
        ws,
      ]),
    );
  }

  /** The checkpoints of a thread and of the threads it was forked from. Synchronous. */
  listCheckpoints(thread: ThreadId): Checkpoint[] {
    const id = text(thread);
    return fromNative(callSync('cairn_threads_list_checkpoints', [this.ptr, id, id.length]));
  }

  /** Adds a memory item standing on some entries (a rewind that cuts one makes it stale). */
  async addMemory(thread: ThreadId, item: NewMemory): Promise<MemoryItem> {
    const id = text(thread);
    const m = toNative(item);
    return fromNative(await runAsync([this], 'cairn_threads_add_memory', ([t]) => [t, id, id.length, m, m.length]));
  }

  /** The memory seen from the thread's active branch (stale items included, marked). Synchronous. */
  memory(thread: ThreadId): MemoryItem[] {
    const id = text(thread);
    return fromNative(callSync('cairn_threads_memory', [this.ptr, id, id.length]));
  }

  /**
   * Begins a run of a thread. While a rewind holds the thread it waits, or fails with
   * `'THREAD_BUSY'` with `rejectIfBusy`. `signal`/`cancel` are checked before it starts.
   */
  async beginRun(thread: ThreadId, options?: RunOptions): Promise<Run> {
    checkNotCancelled(options);
    const id = text(thread);
    const o = nativeOptions(options, 'workspace');
    const ptr = await runAsyncRaw([this, options?.workspace], 'cairn_threads_begin_run', ([t, ws]) => [t, id, id.length, o, o.length, ws]);
    return new Run(ptr as bigint, this, thread);
  }

  /** The runs of a thread: going, paused, durable. Synchronous. */
  runs(thread: ThreadId): ThreadRuns {
    const id = text(thread);
    return fromNative(callSync('cairn_threads_runs', [this.ptr, id, id.length]));
  }

  /** Finishes a tool call started by `Run.toolStart` (it may outlive its run). */
  async toolFinish(call: string): Promise<void> {
    const c = text(call);
    await runAsyncVoid([this], 'cairn_threads_tool_finish', ([t]) => [t, c, c.length]);
  }

  /**
   * Rewinds a thread to `entry` of its active branch, in one operation: the files (with
   * `files: true`), then the conversation, memory and runs. `signal`/`cancel` are checked
   * before it starts.
   */
  async rewind(thread: ThreadId, entry: EntryId, options?: RewindOptions): Promise<RewindReport> {
    return this.#rewindLike('cairn_threads_rewind', thread, entry, options);
  }

  /** "Restore before this prompt": the rewind to just before user entry `entry`. */
  async restoreBefore(thread: ThreadId, entry: EntryId, options?: RewindOptions): Promise<RewindReport> {
    return this.#rewindLike('cairn_threads_restore_before', thread, entry, options);
  }

  async #rewindLike(
    name: 'cairn_threads_rewind' | 'cairn_threads_restore_before',
    thread: ThreadId,
    entry: EntryId,
    options?: RewindOptions,
  ): Promise<RewindReport> {
    checkNotCancelled(options);
    const id = text(thread);
    const e = text(entry);
    const o = nativeOptions(options, 'workspace');
    return fromNative(await runAsync([this, options?.workspace], name, ([t, ws]) => [t, id, id.length, e, e.length, o, o.length, ws]));
  }

  /**
   * Forks a thread at `entry` into a new thread sharing the prefix; with `files: true` the
   * fork's workspace gets the files as they were there. `signal`/`cancel` are checked before
   * it starts.
   */
  async fork(thread: ThreadId, entry: EntryId, options?: ForkOptions): Promise<ForkReport> {
    checkNotCancelled(options);
    const id = text(thread);
    const e = text(entry);
    const o = nativeOptions(options, 'workspace', 'source');
    return fromNative(
      await runAsync([this, options?.workspace, options?.source], 'cairn_threads_fork', ([t, ws, src]) => [
        t,
        id,
        id.length,
        e,
        e.length,
        o,
        o.length,
        ws,
        src,
      ]),
    );
  }

  /**
   * Queues a user prompt in the thread's inbox under its admission `key`, delivered at the
   * thread's next safe boundary (no run of the thread running or paused, no tool call of its
   * runs open) by {@link Threads.deliver}. A key seen before returns its admission as it is now
   * (`repeated`): queued, delivered, or cancelled by a rewind; nothing is queued again.
   */
  async enqueue(thread: ThreadId, key: string, prompt: Prompt): Promise<Admission> {
    const id = text(thread);
    const k = text(key);
    const p = entryDocument(prompt);
    return fromNative(await runAsync([this], 'cairn_threads_enqueue', ([t]) => [t, id, id.length, k, k.length, p, p.length]));
  }

  /**
   * Delivers the oldest queued prompt if the thread is at a safe boundary: the checkpoint is
   * taken then and the prompt is appended as a user entry under its key. Under way, nothing is
   * delivered and `waiting` says why. A checkpoint that fails leaves the prompt queued (with its
   * `error`) and rejects.
   */
  async deliver(thread: ThreadId, options?: DeliverOptions): Promise<Delivery> {
    const id = text(thread);
    const o = nativeOptions(options, 'workspace', 'run');
    return fromNative(
      await runAsync([this, options?.run, options?.workspace], 'cairn_threads_deliver', ([t, run, ws]) => [
        t,
        id,
        id.length,
        o,
        o.length,
        run,
        ws,
      ]),
    );
  }

  /** Every admission of the thread's inbox, oldest first. Synchronous. */
  inbox(thread: ThreadId): Admission[] {
    const id = text(thread);
    return fromNative(callSync('cairn_threads_inbox', [this.ptr, id, id.length]));
  }

  /** Events after `cursor` (0: from the start), at most `limit` (default 1000). Synchronous. */
  events(options?: { cursor?: number; limit?: number }): ThreadEvent[] {
    return fromNative(callSync('cairn_threads_events', [this.ptr, options?.cursor ?? 0, options?.limit ?? 0]));
  }
}

/**
 * A run of a thread held by this process: its lease, its tool calls, its checkpoint policy.
 * `close()` frees the handle only; the run goes on until `end()` or until its lease runs out.
 */
export class Run extends NativeHandle {
  /** The run's id. */
  readonly id: string;
  /** The thread database it belongs to. */
  readonly threads: Threads;
  /** The thread it runs. */
  readonly threadId: ThreadId;

  /** @internal */
  constructor(ptr: bigint, threads: Threads, threadId: ThreadId) {
    const lib = load();
    super(ptr, (p) => lib.cairn_run_free(p), 'Run');
    this.id = copyBytes(lib.cairn_run_id(ptr)).toString('utf8');
    this.threads = threads;
    this.threadId = threadId;
  }

  /** Renews the lease; a run a forced rewind interrupted gets `'RUN_INTERRUPTED'`. */
  async heartbeat(options?: CallOptions): Promise<void> {
    checkNotCancelled(options);
    await runAsyncVoid([this.threads, this], 'cairn_threads_heartbeat', ([t, r]) => [t, r]);
  }

  /** Starts a tool call (counted until `toolFinish`, even after the run ends); returns its id. */
  async toolStart(name: string): Promise<string> {
    const n = text(name);
    const doc = await runAsync([this.threads, this], 'cairn_threads_tool_start', ([t, r]) => [t, r, n, n.length]);
    return doc.toString('utf8');
  }

  /** Finishes a tool call. */
  toolFinish(call: string): Promise<void> {
    return this.threads.toolFinish(call);
  }

  /** Appends an entry to the run's thread, as part of this run. */
  append(entry: NewEntry, options?: Omit<EntryOptions, 'run'>): Promise<Appended> {
    return this.threads.append(this.threadId, entry, { ...options, run: this });
  }

  /** Takes a checkpoint of the run's workspace, bound to its thread. */
  checkpoint(label: string, options?: Omit<EntryOptions, 'run'>): Promise<Checkpoint> {
    return this.threads.checkpoint(this.threadId, label, { ...options, run: this });
  }

  /** Ends the run; returns how it ended (`'ended'`, or `'interrupted'`/`'dropped'` when a rewind stopped it first). */
  async end(): Promise<RunStatus> {
    return fromNative(await runAsync([this.threads, this], 'cairn_threads_end_run', ([t, r]) => [t, r]));
  }
}

