/**
 * Options and reports. They mirror the JSON documents of the C ABI (see
 * `crates/ffi/README.md`) with `camelCase` keys. Paths are strings; a name that is not UTF-8
 * is an escaped string (see `paths.ts` and the README). Ids are 64 hex characters.
 */
import type { CancelToken } from './cancel.js';

/** A snapshot id: 64 hex characters. */
export type SnapshotId = string;

/** A relative path inside the workspace (escaped when the name is not UTF-8). */
export type RelPath = string;

/** How long an operation can be stopped: an `AbortSignal`, a {@link CancelToken}, or both. */
export interface Cancellable {
  /**
   * Aborting it cancels the operation (`CairnError` with code `'CANCELLED'`, and the signal's
   * reason as `cause`). Operations the C ABI cannot stop once started (see each method) only
   * check it before they start.
   */
  signal?: AbortSignal | undefined;
  /** A token that cancels the operation when `cancel()` is called on it. */
  cancel?: CancelToken | undefined;
}

/** A retention policy: a snapshot goes when any rule says so; protected ones always stay. */
export interface Retention {
  /** Keep at most this many snapshots. */
  count?: number;
  /** Drop snapshots older than this. */
  maxAgeMs?: number;
  /** Drop the oldest while the store's snapshots take more than this. */
  maxTotalBytes?: number;
}

/** How a workspace is opened. Every field is optional; the defaults are the safest. */
export interface WorkspaceOptions {
  /**
   * The store directory. Default: `$CAIRN_STORE`, else a `<root>/.cairn` an earlier version made,
   * else the workspace's store in the user's data directory (`$CAIRN_HOME`, else
   * `$XDG_DATA_HOME/cairn`, else `~/.local/share/cairn`), outside the workspace. Must be UTF-8.
   */
  store?: string;
  /** The workspace id (default: derived from the canonical root). */
  id?: string;
  /** Exclude globs for every snapshot. */
  excludes?: string[];
  /** Files larger than this are skipped (default 10 MiB). */
  maxFileBytes?: number;
  /** Honour `.gitignore` and `.cairnignore` (default true). */
  gitignore?: boolean;
  /** Skip files with several hard links (default false). */
  refuseHardLinks?: boolean;
  /** Retention applied after each snapshot. */
  retain?: Retention;
  /** Grace period of garbage collection, in milliseconds. */
  gcGraceMs?: number;
  /** Complete restores a crash interrupted (default true). */
  recover?: boolean;
  /**
   * A remote object store that holds the snapshots (`s3://bucket/prefix`, `gs://bucket/prefix`,
   * `az://container/prefix`, `file:///path`); `store` is then this machine's cache of it.
   * Machines sharing the remote see each other's snapshots.
   */
  remote?: string;
  /** How `remote` is reached; unset fields come from the `AWS_*` variables. */
  remoteOptions?: RemoteOptions;
}

/**
 * How a remote store is reached. Unset fields take their defaults: for S3 the `AWS_*`
 * variables (`AWS_ENDPOINT`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`), else
 * AWS itself. An unreachable endpoint fails with `'IO'`, refused keys with `'DENIED'`, within
 * seconds; messages name the URL, never a key.
 */
export interface RemoteOptions {
  /** The S3 endpoint (`http://127.0.0.1:3900` for a local Garage or MinIO). */
  endpoint?: string;
  /** The S3 region (default `us-east-1`). */
  region?: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  /** Allow plain HTTP (default: when the endpoint starts with `http://`). */
  allowHttp?: boolean;
  /** How long to wait for a connection (default 3000). */
  connectTimeoutMs?: number;
  /** How long one request may take (default 300000). */
  requestTimeoutMs?: number;
  /** Retries of a failed request (default 3). */
  maxRetries?: number;
  /** No retry starts later than this after the first try (default 5000). */
  retryTimeoutMs?: number;
  /** The lease time of the store's operations on the remote (default 60000). */
  leaseTtlMs?: number;
  /** Further `object_store` configuration keys (for `gs://` and `az://` too). */
  extra?: Record<string, string>;
}

/** Progress of a snapshot. */
export interface Progress {
  /** Files recorded so far. */
  files: number;
  /** Directories entered so far. */
  dirs: number;
  /** Files read so far. */
  hashed: number;
  /** Bytes read so far. */
  hashedBytes: number;
}

/**
 * Called on the main thread about every 50 ms while a snapshot runs on a worker thread. Return
 * `false` to stop it (`CairnError` `'ABORTED_BY_CALLBACK'`, nothing recorded). If it throws,
 * the snapshot stops and the promise rejects with what it threw.
 */
export type ProgressListener = (progress: Progress) => boolean | void;

/** How a snapshot is taken. */
export interface SnapshotOptions extends Cancellable {
  /** A label for people; `show('label')` finds it. */
  label?: string;
  /** Your data, kept with the snapshot as given (a JSON object). */
  metadata?: Record<string, unknown>;
  /** More exclude globs, added to the workspace's. */
  excludes?: string[];
  /** Files larger than this are skipped. */
  maxFileBytes?: number;
  /** Honour `.gitignore` and `.cairnignore`. */
  gitignore?: boolean;
  /** Skip files with several hard links. */
  refuseHardLinks?: boolean;
  /** Keep it through retention and pruning. */
  protect?: boolean;
  /** Trust the stat cache for files whose size and mtime did not change (default true). */
  useStatCache?: boolean;
  /** Progress, delivered on the main thread (see {@link ProgressListener}). */
  onProgress?: ProgressListener;
}

/** What to do with paths edited since the reference snapshot (`'skip'` is `'keep'`). */
export type DriftPolicy = 'overwrite' | 'refuse' | 'keep' | 'skip';

/** How a restore is planned and applied. */
export interface RestoreOptions extends Cancellable {
  /** Plan only: change nothing. */
  dryRun?: boolean;
  /** A snapshot to compare the current files with: paths it differs on are `drifted`. */
  reference?: SnapshotId;
  /** What to do with drifted paths (default `'overwrite'`; the safety snapshot keeps them). */
  onDrift?: DriftPolicy;
  /** An idempotency key: repeating a finished key returns the earlier report (without its `safetyWalk`: the repeat walked nothing). */
  key?: string;
  /**
   * Restore only these files and directories (relative to the root; a directory with
   * everything under it): every other path is left as it is. Default: the whole workspace.
   */
  paths?: string[];
}

/** How garbage is collected. */
export interface GcOptions extends Cancellable {
  /** Only unreachable objects older than this go (default: the workspace's grace). */
  graceMs?: number;
  /** Return the plan; delete nothing. */
  dryRun?: boolean;
  /**
   * How far the clocks of the machines sharing a remote may differ, in milliseconds (default a
   * minute). Only for a workspace with a `remote`; elsewhere it is `'INVALID_ARGUMENT'`.
   */
  clockSkewMs?: number;
}

/** How `watch()` starts a watcher. */
export interface WatchOptions extends Cancellable {
  /** Watch at most this many directories (those past it are walked by every snapshot). */
  maxWatches?: number;
}

/** Options of an operation that takes only a signal or token. */
export type CallOptions = Cancellable;

/** How a snapshot cost. */
export interface Stats {
  files: number;
  dirs: number;
  symlinks: number;
  bytes: number;
  hashed: number;
  reused: number;
  storedBytes: number;
  storedObjects: number;
  durationMs: number;
}

/** Why a snapshot left a path out. */
export type SkipReason = 'too-large' | 'changing' | 'unreadable' | 'hard-link' | 'staged';

/** A path a snapshot left out. */
export interface Skipped {
  path: RelPath;
  reason: SkipReason;
  isDir: boolean;
}

/** Why a walk excluded a path. */
export type ExcludeReason = 'default' | 'glob' | 'ignored' | 'special';

/** A path a snapshot excluded (present, but not recorded). */
export interface ExcludedPath {
  path: RelPath;
  reason: ExcludeReason;
  isDir: boolean;
}

/** One snapshot, as `list()` and `show()` give it. */
export interface SnapshotInfo {
  id: SnapshotId;
  label: string | null;
  /** The root tree id. */
  root: string;
  createdMs: number;
  workspaceId: string;
  protected: boolean;
  /** Your data, as given. */
  metadata: Record<string, unknown> | null;
  stats: Stats;
  skipped: Skipped[];
  excludes: string[];
  maxFileBytes: number;
}

/** A snapshot just taken. */
export interface Snapshot extends SnapshotInfo {
  /** Present paths that were excluded, and why. */
  kept: ExcludedPath[];
  /** Set when the retention that followed the snapshot failed (the snapshot is kept). */
  pruneError: string | null;
  /** What it walked (all of the tree, part of it or nothing, with a watcher), and why. */
  walk: WalkInfo;
}

/**
 * How much of the tree a snapshot looked at: every directory (`'full'`: no watcher, or one
 * that could not vouch for what changed), only those a watcher said changed (`'partial'`), or
 * nothing (`'none'`: the watcher said nothing changed).
 */
export type Walked = 'full' | 'partial' | 'none';

/** What a snapshot walked, and why (see `Workspace.watch`). */
export interface WalkInfo {
  walked: Walked;
  /**
   * Why it walked what it did, when a watcher was asked and the walk was not the least it could
   * be (no earlier snapshot with this watcher, an overflow, a watch limit, ...); null otherwise.
   */
  reason: string | null;
  /** Directories it listed, every entry looked at. */
  listed: number;
  /** Directories of which it looked only at the entries the watcher named as changed. */
  named: number;
  /**
   * Set when a `cairn watch` daemon had walked it ahead, once the workspace was quiet, and
   * nothing changed since: how many milliseconds before it was asked for (the other figures
   * are that walk's); `null` otherwise.
   */
  aheadMs: number | null;
}

/** What a watcher started by `Workspace.watch` says of itself. */
export interface WatchStatus {
  /** The workspace root watched. */
  root: string;
  /** Directories watched. */
  watches: number;
  /** Subtrees not watched (walked by every snapshot), and why: `"path: reason"`. */
  unwatched: string[];
  /** Directories remembered as changed. */
  changed: number;
  /** Times the kernel's event queue overflowed (the next snapshot walks in full). */
  overflows: number;
  /** Queries answered. */
  queries: number;
  /** Whether the root was moved or deleted (the watcher is of no more use). */
  gone: boolean;
  /** Bytes the watcher's own tables take, about. */
  tableBytes: number;
}

/** `info()` of a workspace. */
export interface WorkspaceInfo {
  id: string;
  root: string;
  store: string;
  /**
   * Why the store is there: `'data'` (the default: the user's data directory, outside the
   * workspace), `'given'` (the `store` option), `'env'` (`$CAIRN_STORE`) or `'legacy'` (a
   * `<root>/.cairn` an earlier version made).
   */
  storeHome: 'data' | 'given' | 'env' | 'legacy';
  /** Restores a crash interrupted, completed when the workspace was opened. */
  recovered: Recovery[];
  /** The remote store the store caches (`s3://bucket/prefix`, never with credentials), or null. */
  remote: string | null;
}

/** What completing a pending restore did. */
export interface Recovery {
  journal: string;
  target: SnapshotId;
  safety: SnapshotId | null;
  completed: boolean;
  /** Paths a later unrelated edit obstructs, or that may not be changed; left alone. */
  obstructed: RelPath[];
  /** Ended as it stood by `giveUp()`. */
  abandoned: boolean;
}

/** What an entry is. */
export type EntryKind = 'file' | 'symlink' | 'dir';

/** One side of a change. */
export interface EntryInfo {
  kind: EntryKind;
  mode: number;
  size: number;
  id: string;
}

/** What changed at a path. */
export type ChangeKind = 'added' | 'modified' | 'deleted' | 'mode-changed' | 'type-changed';

/** One difference. */
export interface Change {
  path: RelPath;
  kind: ChangeKind;
  old: EntryInfo | null;
  new: EntryInfo | null;
  /** With `diff(a, b, { attribute: true })`: the checkpoint intervals it changed in, oldest first. */
  attribution?: Attribution[];
}

/**
 * A checkpoint interval a path changed in, and what opened it: the tool call or subagent an
 * agent's hook recorded in the checkpoint before it ran (a shell command is the Bash call that
 * ran it), where known.
 */
export interface Attribution {
  /** The snapshot opening the interval: the files just before the change. */
  from: SnapshotId;
  /** The snapshot closing it; `null` for the files now. */
  to: SnapshotId | null;
  /** The opening snapshot's label (a tool call's id, an entry's id, a restore's safety). */
  label: string | null;
  /** Its checkpoint kind (`user`, `tool`, `compaction`, `manual`, ...), when a thread took it. */
  checkpointKind?: string;
  /** The thread that took it. */
  threadId?: string;
  /** The tool call that ran next. */
  toolUseId?: string;
  /** Its tool (`Edit`, `Write`, `Bash`, ...). */
  toolName?: string;
  /** The subagent whose call it was. */
  agentId?: string;
}

/** Options of `diff()`. */
export interface DiffOptions extends Cancellable {
  /** Name, for each change, the checkpoint intervals it changed in and who opened them. */
  attribute?: boolean;
}

/** The capture settings a snapshot was taken with. */
export interface CaptureSettings {
  excludes: string[];
  maxFileBytes: number;
  gitignore: boolean;
  refuseHardLinks: boolean;
}

/** One change a restore makes, in order. */
export type Action =
  | { op: 'remove_file'; path: RelPath }
  | { op: 'remove_dir'; path: RelPath }
  | { op: 'make_dir'; path: RelPath; mode: number }
  | { op: 'write_file'; path: RelPath; blob: string; mode: number; size: number }
  | { op: 'make_symlink'; path: RelPath; target: string }
  | { op: 'set_mode'; path: RelPath; mode: number; dir: boolean };

/** Why a restore leaves a path as it is. */
export type KeptReason =
  | 'excluded'
  | 'excluded-by-glob'
  | 'ignored'
  | 'special'
  | 'skipped-by-snapshot'
  | 'unreadable'
  | 'too-large'
  | 'changing'
  | 'hard-link'
  | 'holds-kept'
  | 'drifted'
  | 'staged';

/** A path a restore leaves alone, and why. */
export interface KeptPath {
  path: RelPath;
  reason: KeptReason;
}

/**
 * A restore plan: every change before any is made. Give it to `apply()` as it is; it survives
 * `JSON.stringify`/`JSON.parse`.
 */
export interface Plan {
  snapshotId: SnapshotId;
  targetRoot: string;
  currentRoot: string;
  capture: CaptureSettings;
  actions: Action[];
  restored: RelPath[];
  deleted: RelPath[];
  unchanged: number;
  kept: KeptPath[];
  /** A hold stands: applying would be refused with `'BUSY'`. */
  busy: boolean;
  drifted: RelPath[];
  reference: SnapshotId | null;
  /** The paths the restore is restricted to (empty: the whole workspace). */
  paths: RelPath[];
  /** What it was planned to do with drifted paths (`apply()` re-checks with it). */
  onDrift: DriftPolicy;
}

/** What a restore did (or, for a dry run, would do). */
export interface RestoreReport {
  snapshotId: SnapshotId;
  dryRun: boolean;
  restored: RelPath[];
  deleted: RelPath[];
  unchanged: number;
  kept: KeptPath[];
  busy: boolean;
  drifted: RelPath[];
  /** Restoring this snapshot (with the same `paths`) undoes the restore. */
  safetySnapshotId: SnapshotId | null;
  operations: number;
  asPlanned: boolean;
  journal: string | null;
  /** The paths the restore was restricted to (empty: the whole workspace). */
  paths: RelPath[];
  /**
   * How the walk for the safety snapshot went (whether a watcher spared it the whole tree);
   * absent for a dry run, a restore that changed nothing, or a repeated key.
   */
  safetyWalk?: WalkInfo;
}

/** A snapshot whose objects could not all be read while marking. */
export interface UnreadableSnapshot {
  snapshot: SnapshotId;
  error: string;
}

/** One pack in a collection plan. */
export interface PackPlan {
  pack: string;
  objects: number;
  liveObjects: number;
  bytes: number;
}

/** What a collection would do (`gc({ dryRun: true })`). */
export interface GcPlan {
  snapshots: number;
  reachableObjects: number;
  unreadable: UnreadableSnapshot[];
  deletePacks: PackPlan[];
  repack: PackPlan[];
  deleteLarge: string[];
  orphanPacks: string[];
  tempFiles: string[];
  youngUnreachable: number;
  /** Entries of the store's object directories that are not its own: reported, never touched. */
  foreign: string[];
  /** Symlinks in the store's object directories (never the store's own): removed. */
  symlinks: string[];
  /** On a workspace with a remote: what the remote's collector would do (the rest is then absent). */
  remote?: RemoteGcReport;
}

/** What a collection did. */
export interface GcReport {
  /** The sweep was deferred because another operation was running. */
  deferred: boolean;
  plan: GcPlan;
  packsDeleted: number;
  packsRepacked: number;
  objectsDeleted: number;
  bytesFreed: number;
  keptForDamage: string[];
  /** On a workspace with a remote: what the remote's collector did (the rest but `bytesFreed` is then absent). */
  remote?: RemoteGcReport;
}

/**
 * What a collection of a remote store did: unreachable objects are marked as candidates in one
 * run and deleted in a later one, once the grace period has passed.
 */
export interface RemoteGcReport {
  /** Manifests marked. */
  snapshots: number;
  snapshotsDuringRun: number;
  reachableObjects: number;
  unreadable: UnreadableSnapshot[];
  liveLeases: number;
  /** Unreachable packs and large objects listed as candidates after the run. */
  candidates: number;
  keptForLeases: number;
  keptForGrace: number;
  packsDeleted: number;
  largeDeleted: number;
  bytesFreed: number;
}

/** What `trimCache()` did. */
export interface CacheTrim {
  /** Packs and large objects removed from the cache (the remote keeps them). */
  removedFiles: number;
  removedBytes: number;
  /** Bytes of remote-held packs and large objects still cached. */
  cachedBytes: number;
}

/** What a prune or a delete did. */
export interface PruneReport {
  deleted: SnapshotId[];
  kept: number;
  gc: GcReport;
}

/** A copy of an object that failed its check. */
export interface BadCopy {
  id: string;
  path: string;
  error: string;
}

/** A pack index that could not be read. */
export interface BrokenIndex {
  path: string;
  error: string;
}

/** The check of one snapshot. */
export interface SnapshotCheck {
  id: SnapshotId;
  missing: string[];
  corrupt: string[];
  unreadable: string | null;
}

/** What `verify()` found. */
export interface VerifyReport {
  /** Every snapshot is whole and no copy is bad. */
  ok: boolean;
  copiesChecked: number;
  bytesChecked: number;
  badCopies: BadCopy[];
  corrupt: string[];
  brokenIndexes: BrokenIndex[];
  snapshots: SnapshotCheck[];
}

/** What `copy()` did. */
export interface CopyReport {
  snapshot: SnapshotId;
  objectsCopied: number;
  bytesCopied: number;
  /** The target had it already; nothing was written. */
  alreadyPresent: boolean;
}

/** How a hold is taken. */
export interface HoldOptions {
  /** The hold also lasts until this process exits (a command's leftover background process). */
  pid?: number;
}

// ---------------------------------------------------------------------------------------------
// Threads: conversations whose messages carry checkpoints of the workspace.

/** A thread id, an entry id, a run id, a tool call id: text the library makes. */
export type ThreadId = string;
export type EntryId = string;
export type RunId = string;

/** One level of the checkpoint policy. */
export interface CheckpointPolicy {
  /** Whether checkpoints are taken at this level. */
  enabled: boolean;
  /** Globs the checkpoints leave out (they add up across levels). */
  exclude?: string[];
  /** Files larger than this are skipped. */
  maxFileBytes?: number;
  /** Take a checkpoint before every `tool` entry as well. */
  beforeTools?: boolean;
  /** Take a checkpoint before every `compaction` entry. */
  beforeCompaction?: boolean;
}

/** How a thread database is opened. */
export interface ThreadsOptions {
  /**
   * The default workspace for checkpoints, rewinds and forks; with no path, the database is
   * `<store>/threads.db` of its store.
   */
  workspace?: import('./workspace.js').Workspace;
  /** The database-wide checkpoint policy. */
  checkpoints?: CheckpointPolicy;
  /** Whether rewinds restore files by default. */
  rewindFiles?: boolean;
  /** Finish a rewind a crash interrupted (default true). */
  recover?: boolean;
  /** How long a write waits for another process's, in milliseconds. */
  busyTimeoutMs?: number;
}

/** How `Threads.create` makes a thread. */
export interface CreateThreadOptions {
  /** The thread's id (default: one is made); an id that exists already is `'VALIDATION'`. */
  id?: ThreadId;
  /** Its metadata (any JSON object). */
  metadata?: Record<string, unknown>;
}

/** A thread. */
export interface Thread {
  id: ThreadId;
  activeLeaf: EntryId | null;
  parentThread: ThreadId | null;
  forkEntry: EntryId | null;
  /** For a fork with files: the checkpoint its files came from. */
  fileCheckpointAt: CheckpointRef | null;
  metadata: Record<string, unknown>;
  createdMs: number;
}

/** What an entry is. */
export type ThreadEntryKind = 'user' | 'assistant' | 'tool' | 'note' | 'event' | 'compaction';

/** A checkpoint an entry points at. */
export interface CheckpointRef {
  checkpointId: string;
  snapshotId: SnapshotId;
  workspaceId: string;
  root: string;
}

/** An entry of a thread. */
export interface Entry {
  id: EntryId;
  threadId: ThreadId;
  parentId: EntryId | null;
  kind: ThreadEntryKind;
  /** The payload: its text when UTF-8, else an escaped string (`pathToBuffer` gives the bytes). */
  payload: string;
  metadata: Record<string, unknown>;
  /** The checkpoint taken before it, if any. */
  checkpoint: CheckpointRef | null;
  runId: RunId | null;
  key: string | null;
  createdMs: number;
  seq: number;
  onActiveBranch: boolean;
}

/** A new entry. Give `text`, or `payload` bytes, or neither. */
export interface NewEntry {
  kind: ThreadEntryKind;
  text?: string;
  payload?: Uint8Array;
  metadata?: Record<string, unknown>;
  /** An admission key: appending the same key again returns the first entry (`repeated`). */
  key?: string;
  /** How long to wait while a rewind holds the thread, in milliseconds. */
  waitMs?: number;
}

/** Which workspace and run an append or checkpoint concerns. */
export interface EntryOptions {
  /** The run it belongs to (its workspace and policy apply). */
  run?: import('./threads.js').Run;
  /** The workspace to checkpoint (default: the run's, else the thread database's). */
  workspace?: import('./workspace.js').Workspace;
}

/** A checkpoint that failed; the conversation went on without it. */
export interface CheckpointFailure {
  /** The error's kind (`'IO'`, `'DENIED'`, ...). */
  kind: string;
  /** Its message. */
  message: string;
}

/** What an append did. */
export interface Appended {
  entry: Entry;
  /** The checkpoint taken before the entry, if any. */
  checkpoint: Checkpoint | null;
  /** Set when the checkpoint failed; the entry is saved anyway. */
  checkpointError: CheckpointFailure | null;
  /** The key was seen before: this is the first entry, nothing was added. */
  repeated: boolean;
}

/** A prompt to queue in a thread's inbox. Give `text`, or `payload` bytes, or neither. */
export interface Prompt {
  text?: string;
  payload?: Uint8Array;
  metadata?: Record<string, unknown>;
}

/**
 * A prompt of a thread's inbox under its admission key: `'queued'` (waiting for the thread's
 * next safe boundary), `'delivered'` (`entryId`, `checkpointId`) or `'cancelled'` by a rewind
 * (`rewindId`; never sent).
 */
export interface Admission {
  threadId: ThreadId;
  key: string;
  state: 'queued' | 'delivered' | 'cancelled';
  /** The prompt: its text when UTF-8, else an escaped string (`pathToBuffer` gives the bytes). */
  payload: string;
  metadata: Record<string, unknown>;
  entryId: EntryId | null;
  checkpointId: string | null;
  rewindId: string | null;
  /** Why a delivery failed (the prompt is still queued). */
  error: string | null;
  queuedMs: number;
  doneMs: number | null;
  /** The key was seen before: this is its admission, nothing was queued again. */
  repeated: boolean;
}

/** How to deliver: the run delivering between its own turns, or the workspace to checkpoint. */
export interface DeliverOptions {
  /** A run delivering between its turns (it does not count as under way; its policy applies). */
  run?: import('./threads.js').Run;
  /** The workspace to checkpoint (default: the run's, else the thread database's). */
  workspace?: import('./workspace.js').Workspace;
  /** How long to wait for an append of the same key being admitted, in milliseconds. */
  waitMs?: number;
}

/** What a delivery did. */
export interface Delivery {
  /** The prompt delivered by this call, if any. */
  delivered: Admission | null;
  /** The user entry it became. */
  entry: Entry | null;
  /** The checkpoint taken at delivery. */
  checkpoint: Checkpoint | null;
  /** What keeps the thread from a safe boundary (a run, a tool call), when nothing was delivered. */
  waiting: string | null;
  /** How many prompts are still queued. */
  queued: number;
}

/** Why a checkpoint was taken. */
export type CheckpointKind = 'user' | 'tool' | 'compaction' | 'manual';

/** A checkpoint: a workspace snapshot bound to a thread (and an entry). */
export interface Checkpoint {
  id: string;
  threadId: ThreadId;
  entryId: EntryId | null;
  kind: CheckpointKind;
  label: string | null;
  snapshotId: SnapshotId;
  workspaceId: string;
  root: string;
  runId: RunId | null;
  createdMs: number;
}

/** What a memory item is. */
export type MemoryKind = 'item' | 'summary';

/** A new memory item. */
export interface NewMemory {
  kind: MemoryKind;
  text: string;
  /** The entries it stands on: a rewind that cuts one makes it stale. */
  standsOn?: EntryId[];
}

/** A memory item. */
export interface MemoryItem {
  id: string;
  threadId: ThreadId;
  kind: MemoryKind;
  text: string;
  standsOn: EntryId[];
  status: 'active' | 'stale';
  /** For a stale item: why (`'rewound'`). */
  reason?: string;
  /** For a stale item: the rewind that made it stale. */
  rewindId?: string | null;
  createdMs: number;
}

/** How a run begins. */
export interface RunOptions extends Cancellable {
  /** The workspace it works in (default: the thread database's). */
  workspace?: import('./workspace.js').Workspace;
  /** Survives its process (a rewind drops it instead of waiting for it). */
  durable?: boolean;
  /** Its lease, in milliseconds: renew it with `heartbeat()`. */
  leaseMs?: number;
  /** The parent run: this one is a subagent and takes no checkpoints. */
  parentRun?: RunId;
  /** The run's checkpoint policy. */
  checkpoints?: CheckpointPolicy;
  /** The agent's checkpoint policy. */
  agentCheckpoints?: CheckpointPolicy;
  /** Fail with `'THREAD_BUSY'` instead of waiting while a rewind holds the thread. */
  rejectIfBusy?: boolean;
  /** How long to wait while a rewind holds the thread, in milliseconds. */
  waitMs?: number;
}

/** The state of a run. */
export type RunStatus = 'running' | 'paused' | 'ended' | 'interrupted' | 'dropped';

/** A run, as `runs()` lists it. */
export interface RunInfo {
  id: RunId;
  threadId: ThreadId;
  workspaceId: string | null;
  root: string | null;
  durable: boolean;
  parentRun: RunId | null;
  status: RunStatus;
  /** Running with a lease that holds. */
  going: boolean;
  /** Held by this process. */
  here: boolean;
  leaseExpiresMs: number;
  openToolCalls: number;
  startedMs: number;
}

/** The runs of a thread. */
export interface ThreadRuns {
  going: RunInfo[];
  paused: RunInfo[];
  durable: RunInfo[];
}

/** How a rewind (or a restore-before) runs. */
export interface RewindOptions extends Cancellable {
  /** The workspace whose files move (default: the thread database's). */
  workspace?: import('./workspace.js').Workspace;
  /** Restore the files too (default: the database's `rewindFiles`). */
  files?: boolean;
  /** Mark memory that stood on cut entries stale (default true). */
  memory?: boolean;
  /** Report what would happen; change nothing. */
  dryRun?: boolean;
  /** Interrupt going runs (they get `'RUN_INTERRUPTED'`) instead of refusing. */
  force?: boolean;
  /** An idempotency key. */
  key?: string;
  /** How long open tool calls may take to finish, in milliseconds. */
  toolSettleMs?: number;
  /** How long to wait for leases to run out, in milliseconds. */
  leaseWaitMs?: number;
  /** The run asking (it is not waited for). */
  fromRun?: RunId;
  /** With files: restore only these files and directories (relative to the root). */
  paths?: string[];
  /**
   * With files: what to do with files edited since the thread's newest checkpoint (after the
   * one restored) by someone else: refuse (`'CONFLICT'`), keep them or overwrite them.
   * Default: no check.
   */
  onDrift?: 'refuse' | 'keep' | 'overwrite';
  /**
   * An agent's half of the rewind, kept with it before the files change: its `data` comes back
   * in the report's `continuation`, and the thread is found by each of its `names` once the
   * rewind is done. A thread Claude Code's hooks wrote gets Claude's without it.
   */
  continuation?: Continuation;
}

/** What an agent needs to continue its own conversation from a rewind's point, and the names
 * the thread is found by from the rewind on. */
export interface Continuation {
  data: unknown;
  names?: string[];
}

/** The files part of a rewind or fork report. */
export interface FilesReport {
  entryId: EntryId | null;
  checkpointId: string;
  snapshotId: SnapshotId;
  /** The checkpoint was taken exactly at the entry. */
  exact: boolean;
  workspaceId: string;
  root: string;
  safetySnapshotId: SnapshotId | null;
  /** A rewind's "Before rewind" checkpoint (its safety snapshot at the leaf it left): rewinding to it with files brings back the files and the conversation. */
  beforeRewindCheckpointId: string | null;
  restore: RestoreReport;
}

/** The runs a rewind touched. */
export interface RunsReport {
  going: RunId[];
  interrupted: RunId[];
  paused: RunId[];
  durable: RunId[];
}

/** What a rewind did. */
export interface RewindReport {
  rewindId: string | null;
  threadId: ThreadId;
  toEntryId: EntryId | null;
  dryRun: boolean;
  conversation: { rewound: boolean; cut: EntryId[]; restored: EntryId[]; previousLeafId: EntryId | null };
  files: FilesReport | null;
  memory: { staled: string[] };
  runs: RunsReport;
  /** It finished a rewind a crash had interrupted. */
  recovered: boolean;
  /**
   * An agent's thread (Claude Code's hooks): where the agent's own conversation continues
   * (`argv`: the command that continues it; `sessionId`: its new session), kept with the
   * rewind; null for other threads.
   */
  continuation: Record<string, unknown> | null;
}

/** How a fork runs. */
export interface ForkOptions extends Cancellable {
  /** The fork's workspace (default: the thread database's). */
  workspace?: import('./workspace.js').Workspace;
  /** Where the checkpoints are (default: the thread database's workspace). */
  source?: import('./workspace.js').Workspace;
  /** Give the fork's workspace the files as they were at the entry. */
  files?: boolean;
  newThreadId?: ThreadId;
  dryRun?: boolean;
  force?: boolean;
  /**
   * Replace the contents of a `workspace` that exists, is not empty and is no workspace of the
   * thread's family; without it such a fork fails with `'DENIED'` (as does one into a directory
   * holding the source workspace, its store or the thread database).
   */
  replace?: boolean;
  toolSettleMs?: number;
  leaseWaitMs?: number;
  /** The new thread's metadata. */
  metadata?: Record<string, unknown>;
  /**
   * Instead of `source`: the id of a workspace of another machine whose checkpoints the files
   * come from, read through `workspace`'s store (the cache of the remote that machine
   * snapshots into, see `WorkspaceOptions.remote`), the thread database (`postgres://`) being
   * shared too.
   */
  sourceWorkspaceId?: string;
}

/** What a fork did. */
export interface ForkReport {
  threadId: ThreadId;
  sourceThreadId: ThreadId;
  atEntryId: EntryId;
  dryRun: boolean;
  fileCheckpointAt: CheckpointRef | null;
  snapshotsCopied: SnapshotId[];
  files: FilesReport | null;
  runs: RunsReport;
}

/** What an event is about. */
export type EventKind =
  | 'thread_created'
  | 'checkpoint_created'
  | 'entry_appended'
  | 'rewind_started'
  | 'restore_applied'
  | 'rewind_failed'
  | 'rewind_completed'
  | 'fork_created'
  | 'prompt_queued'
  | 'prompt_delivered'
  | 'prompt_cancelled';

/** One event of the append-only log (shared by every process using the database). */
export interface ThreadEvent {
  /** Pass it as `cursor` to get the events after this one. */
  cursor: number;
  threadId: ThreadId | null;
  kind: EventKind;
  /** The event's details (`checkpointId`, `entryId`, ...). */
  data: Record<string, unknown>;
  createdMs: number;
}
