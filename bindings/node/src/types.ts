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
  /** The store directory (default: `<root>/.cairn`). Must be UTF-8. */
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

/** What to do with paths edited since the reference snapshot. */
export type DriftPolicy = 'overwrite' | 'refuse' | 'skip';

/** How a restore is planned and applied. */
export interface RestoreOptions extends Cancellable {
  /** Plan only: change nothing. */
  dryRun?: boolean;
  /** A snapshot to compare the current files with: paths it differs on are `drifted`. */
  reference?: SnapshotId;
  /** What to do with drifted paths (default `'overwrite'`; the safety snapshot keeps them). */
  onDrift?: DriftPolicy;
  /** An idempotency key: repeating a finished key returns the earlier report. */
  key?: string;
}

/** How garbage is collected. */
export interface GcOptions extends Cancellable {
  /** Only unreachable objects older than this go (default: the workspace's grace). */
  graceMs?: number;
  /** Return the plan; delete nothing. */
  dryRun?: boolean;
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
export type SkipReason = 'too-large' | 'changing' | 'unreadable' | 'hard-link';

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
}

/** `info()` of a workspace. */
export interface WorkspaceInfo {
  id: string;
  root: string;
  store: string;
  /** Restores a crash interrupted, completed when the workspace was opened. */
  recovered: Recovery[];
}

/** What completing a pending restore did. */
export interface Recovery {
  journal: string;
  target: SnapshotId;
  safety: SnapshotId | null;
  completed: boolean;
  /** Paths a later unrelated edit obstructs; left alone. */
  obstructed: RelPath[];
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
  | 'drifted';

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
  /** Restoring this snapshot undoes the restore. */
  safetySnapshotId: SnapshotId | null;
  operations: number;
  asPlanned: boolean;
  journal: string | null;
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
  foreign: string[];
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
