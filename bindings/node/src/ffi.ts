/**
 * The thin layer: koffi declarations that follow `include/cairn.h` one for one, and the loader
 * that finds `libcairn`, checks its ABI version and says clearly what is wrong when it cannot.
 *
 * Nothing here is idiomatic: pointers are BigInts, outputs are one-element arrays, statuses are
 * numbers. `test/ffi.test.mjs` checks that every `cairn_*` function of the header is declared
 * here with the same parameters. The idiomatic API is in `workspace.ts` and friends.
 */
import * as koffi from 'koffi';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** The ABI version this binding was written for (`CAIRN_ABI_VERSION` in `include/cairn.h`). */
export const ABI_VERSION = 1;

/** The values of `enum cairn_status`, as in the header. */
export const STATUS = {
  CAIRN_OK: 0,
  CAIRN_ERR_INVALID_ARGUMENT: 1,
  CAIRN_ERR_NOT_FOUND: 2,
  CAIRN_ERR_VALIDATION: 3,
  CAIRN_ERR_BUSY: 4,
  CAIRN_ERR_WORKSPACE_BUSY: 5,
  CAIRN_ERR_THREAD_BUSY: 6,
  CAIRN_ERR_DENIED: 7,
  CAIRN_ERR_IO: 8,
  CAIRN_ERR_CORRUPT: 9,
  CAIRN_ERR_CONFLICT: 10,
  CAIRN_ERR_CANCELLED: 11,
  CAIRN_ERR_RUN_INTERRUPTED: 12,
  CAIRN_ERR_UNSUPPORTED: 13,
  CAIRN_ERR_NULL_ARGUMENT: 14,
  CAIRN_ERR_PANIC: 15,
  CAIRN_ERR_ABORTED_BY_CALLBACK: 16,
} as const;

/**
 * Every function of `include/cairn.h`, as a koffi prototype. The text follows the header with
 * three mechanical differences: `struct ` is dropped, output pointers carry `_Out_` (so koffi
 * copies them back into a one-element array), and the progress callback is a pointer to its
 * prototype (`cairn_progress_cb *`), as koffi spells function pointers.
 */
export const PROTOTYPES = {
  cairn_error_status: 'cairn_status cairn_error_status(const cairn_error *err)',
  cairn_error_message: 'cairn_bytes cairn_error_message(const cairn_error *err)',
  cairn_error_path: 'cairn_bytes cairn_error_path(const cairn_error *err)',
  cairn_error_free: 'void cairn_error_free(cairn_error *err)',
  cairn_buf_bytes: 'cairn_bytes cairn_buf_bytes(const cairn_buf *buf)',
  cairn_buf_free: 'void cairn_buf_free(cairn_buf *buf)',
  cairn_status_str: 'const char *cairn_status_str(uint32_t status)',
  cairn_status_name: 'const char *cairn_status_name(uint32_t status)',
  cairn_version: 'const char *cairn_version(void)',
  cairn_abi_version: 'uint32_t cairn_abi_version(void)',
  cairn_cancel_new: 'cairn_status cairn_cancel_new(_Out_ cairn_cancel **out, _Out_ cairn_error **err_out)',
  cairn_cancel_cancel: 'cairn_status cairn_cancel_cancel(const cairn_cancel *cancel)',
  cairn_cancel_free: 'void cairn_cancel_free(cairn_cancel *cancel)',
  cairn_debug_panic: 'cairn_status cairn_debug_panic(_Out_ cairn_error **err_out)',
  cairn_workspace_open:
    'cairn_status cairn_workspace_open(const uint8_t *root, size_t root_len, const uint8_t *options_json, size_t options_len, _Out_ cairn_workspace **out, _Out_ cairn_error **err_out)',
  cairn_workspace_free: 'void cairn_workspace_free(cairn_workspace *ws)',
  cairn_workspace_watch:
    'cairn_status cairn_workspace_watch(const cairn_workspace *ws, const uint8_t *options_json, size_t options_len, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_unwatch: 'cairn_status cairn_workspace_unwatch(const cairn_workspace *ws, _Out_ cairn_error **err_out)',
  cairn_workspace_info:
    'cairn_status cairn_workspace_info(const cairn_workspace *ws, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_snapshot:
    'cairn_status cairn_workspace_snapshot(const cairn_workspace *ws, const uint8_t *options_json, size_t options_len, cairn_progress_cb *progress, void *userdata, const cairn_cancel *cancel, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_list:
    'cairn_status cairn_workspace_list(const cairn_workspace *ws, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_show:
    'cairn_status cairn_workspace_show(const cairn_workspace *ws, const uint8_t *name, size_t name_len, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_diff:
    'cairn_status cairn_workspace_diff(const cairn_workspace *ws, const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_diff_with:
    'cairn_status cairn_workspace_diff_with(const cairn_workspace *ws, const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len, const uint8_t *options_json, size_t options_len, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_delete:
    'cairn_status cairn_workspace_delete(const cairn_workspace *ws, const uint8_t *name, size_t name_len, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_prune:
    'cairn_status cairn_workspace_prune(const cairn_workspace *ws, const uint8_t *retain_json, size_t retain_len, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_gc:
    'cairn_status cairn_workspace_gc(const cairn_workspace *ws, const uint8_t *options_json, size_t options_len, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_trim_cache:
    'cairn_status cairn_workspace_trim_cache(const cairn_workspace *ws, uint64_t max_bytes, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_verify:
    'cairn_status cairn_workspace_verify(const cairn_workspace *ws, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_copy:
    'cairn_status cairn_workspace_copy(const cairn_workspace *ws, const uint8_t *name, size_t name_len, const cairn_workspace *to, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_plan:
    'cairn_status cairn_workspace_plan(const cairn_workspace *ws, const uint8_t *name, size_t name_len, const uint8_t *options_json, size_t options_len, const cairn_cancel *cancel, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_apply:
    'cairn_status cairn_workspace_apply(const cairn_workspace *ws, const uint8_t *plan_json, size_t plan_len, const uint8_t *options_json, size_t options_len, const cairn_cancel *cancel, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_restore:
    'cairn_status cairn_workspace_restore(const cairn_workspace *ws, const uint8_t *name, size_t name_len, const uint8_t *options_json, size_t options_len, const cairn_cancel *cancel, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_recover:
    'cairn_status cairn_workspace_recover(const cairn_workspace *ws, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_give_up:
    'cairn_status cairn_workspace_give_up(const cairn_workspace *ws, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_workspace_hold:
    'cairn_status cairn_workspace_hold(const cairn_workspace *ws, const uint8_t *what, size_t what_len, int64_t pid, _Out_ cairn_hold **out, _Out_ cairn_error **err_out)',
  cairn_hold_free: 'void cairn_hold_free(cairn_hold *hold)',
  cairn_threads_open:
    'cairn_status cairn_threads_open(const uint8_t *path, size_t path_len, const uint8_t *options_json, size_t options_len, const cairn_workspace *workspace, _Out_ cairn_threads **out, _Out_ cairn_error **err_out)',
  cairn_threads_free: 'void cairn_threads_free(cairn_threads *t)',
  cairn_threads_create:
    'cairn_status cairn_threads_create(const cairn_threads *t, const uint8_t *options_json, size_t options_len, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_list: 'cairn_status cairn_threads_list(const cairn_threads *t, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_log:
    'cairn_status cairn_threads_log(const cairn_threads *t, const uint8_t *thread, size_t thread_len, bool all, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_append:
    'cairn_status cairn_threads_append(const cairn_threads *t, const uint8_t *thread, size_t thread_len, const uint8_t *entry_json, size_t entry_len, const cairn_run *run, const cairn_workspace *workspace, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_checkpoint:
    'cairn_status cairn_threads_checkpoint(const cairn_threads *t, const uint8_t *thread, size_t thread_len, const uint8_t *label, size_t label_len, const cairn_run *run, const cairn_workspace *workspace, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_list_checkpoints:
    'cairn_status cairn_threads_list_checkpoints(const cairn_threads *t, const uint8_t *thread, size_t thread_len, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_add_memory:
    'cairn_status cairn_threads_add_memory(const cairn_threads *t, const uint8_t *thread, size_t thread_len, const uint8_t *memory_json, size_t memory_len, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_memory:
    'cairn_status cairn_threads_memory(const cairn_threads *t, const uint8_t *thread, size_t thread_len, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_begin_run:
    'cairn_status cairn_threads_begin_run(const cairn_threads *t, const uint8_t *thread, size_t thread_len, const uint8_t *options_json, size_t options_len, const cairn_workspace *workspace, _Out_ cairn_run **out, _Out_ cairn_error **err_out)',
  cairn_run_id: 'cairn_bytes cairn_run_id(const cairn_run *run)',
  cairn_run_free: 'void cairn_run_free(cairn_run *run)',
  cairn_threads_heartbeat: 'cairn_status cairn_threads_heartbeat(const cairn_threads *t, const cairn_run *run, _Out_ cairn_error **err_out)',
  cairn_threads_tool_start:
    'cairn_status cairn_threads_tool_start(const cairn_threads *t, const cairn_run *run, const uint8_t *name, size_t name_len, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_tool_finish:
    'cairn_status cairn_threads_tool_finish(const cairn_threads *t, const uint8_t *call, size_t call_len, _Out_ cairn_error **err_out)',
  cairn_threads_end_run:
    'cairn_status cairn_threads_end_run(const cairn_threads *t, const cairn_run *run, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_runs:
    'cairn_status cairn_threads_runs(const cairn_threads *t, const uint8_t *thread, size_t thread_len, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_rewind:
    'cairn_status cairn_threads_rewind(const cairn_threads *t, const uint8_t *thread, size_t thread_len, const uint8_t *entry, size_t entry_len, const uint8_t *options_json, size_t options_len, const cairn_workspace *workspace, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_restore_before:
    'cairn_status cairn_threads_restore_before(const cairn_threads *t, const uint8_t *thread, size_t thread_len, const uint8_t *entry, size_t entry_len, const uint8_t *options_json, size_t options_len, const cairn_workspace *workspace, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_fork:
    'cairn_status cairn_threads_fork(const cairn_threads *t, const uint8_t *thread, size_t thread_len, const uint8_t *entry, size_t entry_len, const uint8_t *options_json, size_t options_len, const cairn_workspace *workspace, const cairn_workspace *source, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_events:
    'cairn_status cairn_threads_events(const cairn_threads *t, int64_t cursor, size_t limit, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_enqueue:
    'cairn_status cairn_threads_enqueue(const cairn_threads *t, const uint8_t *thread, size_t thread_len, const uint8_t *key, size_t key_len, const uint8_t *prompt_json, size_t prompt_len, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_deliver:
    'cairn_status cairn_threads_deliver(const cairn_threads *t, const uint8_t *thread, size_t thread_len, const uint8_t *options_json, size_t options_len, const cairn_run *run, const cairn_workspace *workspace, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
  cairn_threads_inbox:
    'cairn_status cairn_threads_inbox(const cairn_threads *t, const uint8_t *thread, size_t thread_len, _Out_ cairn_buf **out, _Out_ cairn_error **err_out)',
} as const;

/** The name of a `cairn_*` function of the header. */
export type FunctionName = keyof typeof PROTOTYPES;

/** A pointer as koffi 3 gives it: a BigInt address, or null for NULL. */
export type Pointer = bigint | null;

/** An output parameter: a one-element array koffi fills when the call returns. */
export type Out = [Pointer];

/** `struct cairn_bytes`, as koffi decodes it. */
export interface CairnBytes {
  data: Pointer;
  len: number | bigint;
}

/** `struct cairn_progress`, as koffi decodes it. */
export interface CairnProgress {
  files: number;
  dirs: number;
  hashed: number;
  hashed_bytes: number;
}

/** A declared function: call it synchronously, or through `.async(...args, (err, res) => …)`. */
export interface NativeFunction {
  (...args: unknown[]): any;
  async(...args: unknown[]): void;
}

/** The loaded library: every header function, plus the koffi types it was declared with. */
export type Library = { readonly [K in FunctionName]: NativeFunction } & {
  /** The file it was loaded from. */
  readonly path: string;
  /** `cairn_progress_cb *`, for callbacks passed to `cairn_workspace_snapshot`. */
  readonly progressCallback: unknown;
  /** `cairn_progress`, to decode the pointer a progress callback receives. */
  readonly progressType: unknown;
};

/** Why the library could not be used. */
export type LoadErrorCode = 'ERR_CAIRN_LIBRARY_MISSING' | 'ERR_CAIRN_LIBRARY_INVALID' | 'ERR_CAIRN_ABI_MISMATCH';

/** The library is missing, is not libcairn, or has another ABI version than this binding's. */
export class CairnLoadError extends Error {
  override name = 'CairnLoadError';
  /** What is wrong. */
  readonly code: LoadErrorCode;
  /** The file that was tried. */
  readonly libraryPath: string;
  constructor(code: LoadErrorCode, libraryPath: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.libraryPath = libraryPath;
  }
}

function libraryFileName(): string {
  if (process.platform === 'darwin') return 'libcairn.dylib';
  if (process.platform === 'win32') return 'cairn.dll';
  return 'libcairn.so';
}

/**
 * The prebuilt libraries published beside the `cairn` package, one npm package a platform
 * (as esbuild and napi-rs do), keyed by {@link platformKey}. `cairn` lists them in its
 * `optionalDependencies` with `os`, `cpu` and `libc` fields, so npm installs the one that
 * matches the machine and skips the others.
 */
export const PLATFORM_PACKAGES: Readonly<Record<string, string>> = Object.freeze({
  'linux-x64-gnu': '@cairn/linux-x64-gnu',
  'linux-arm64-gnu': '@cairn/linux-arm64-gnu',
});

/** This machine as the platform packages name it: `linux-x64-gnu`, `linux-arm64-musl`, `darwin-arm64`. */
export function platformKey(): string {
  if (process.platform !== 'linux') return `${process.platform}-${process.arch}`;
  if (libc === null) {
    // Node's report names the glibc it runs on; on musl there is none (as napi-rs tells them).
    const header = (process.report?.getReport?.() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
    libc = header?.glibcVersionRuntime ? 'gnu' : 'musl';
  }
  return `linux-${process.arch}-${libc}`;
}

let libc: 'gnu' | 'musl' | null = null;

/** The file of the installed platform package's libcairn, or null when none is installed. */
function platformPackageLibrary(): string | null {
  const pkg = PLATFORM_PACKAGES[platformKey()];
  if (!pkg) return null;
  try {
    return path.join(path.dirname(require.resolve(`${pkg}/package.json`)), libraryFileName());
  } catch {
    return null;
  }
}

/** `target/<profile>/` of the Cargo workspace this package sits in, or null when not in a checkout. */
function checkoutLibrary(): string | null {
  if (__dirname.split(path.sep).includes('node_modules')) return null;
  const repo = path.resolve(__dirname, '..', '..', '..');
  if (!fs.existsSync(path.join(repo, 'crates', 'ffi', 'Cargo.toml'))) return null;
  const target = process.env.CARGO_TARGET_DIR ? path.resolve(repo, process.env.CARGO_TARGET_DIR) : path.join(repo, 'target');
  return path.join(target, 'release', libraryFileName());
}

/**
 * Where the library is looked for: `CAIRN_LIB` when set; else, in a checkout of the
 * repository, `target/release/` of its Cargo workspace (`$CARGO_TARGET_DIR/release/` when that
 * is set); else the installed platform package (`@cairn/linux-x64-gnu` on x86-64 Linux,
 * `@cairn/linux-arm64-gnu` on aarch64 Linux).
 */
export function defaultLibraryPath(): string {
  const env = process.env.CAIRN_LIB;
  if (env) return path.resolve(env);
  const checkout = checkoutLibrary();
  if (checkout) return checkout;
  const pkg = PLATFORM_PACKAGES[platformKey()];
  return platformPackageLibrary() ?? path.join('node_modules', pkg ?? `@cairn/${platformKey()}`, libraryFileName());
}

/** What to do when the library at `libraryPath` is missing or unusable. */
function loadHint(): string {
  if (process.env.CAIRN_LIB) {
    return (
      `CAIRN_LIB names that file: point it at a libcairn built for ABI version ${ABI_VERSION} ` +
      '(`cargo build --release -p cairn-ffi` in a checkout of Cairn builds one), or unset it.'
    );
  }
  if (checkoutLibrary()) {
    return (
      'Build it from the repository root with `cargo build --release -p cairn-ffi` ' +
      '(`npm install` in bindings/node does this), or point CAIRN_LIB at a libcairn built for ABI version ' +
      `${ABI_VERSION}.`
    );
  }
  const key = platformKey();
  const pkg = PLATFORM_PACKAGES[key];
  if (pkg) {
    return (
      `The prebuilt library for ${key} comes in the package ${pkg}: install it with ` +
      `\`npm install ${pkg}@${packageVersion()}\` (npm skips it with --omit=optional or --no-optional, ` +
      'or when the lock file was made on another platform), or point CAIRN_LIB at a libcairn built ' +
      `for ABI version ${ABI_VERSION}.`
    );
  }
  return (
    `No prebuilt libcairn is published for ${key} (packages exist for: ${Object.keys(PLATFORM_PACKAGES).join(', ')}). ` +
    'Build it from a checkout of Cairn with `cargo build --release -p cairn-ffi` and point CAIRN_LIB at ' +
    `target/release/${libraryFileName()}.`
  );
}

/** The version of this `cairn` package (its package.json), for the install hint. */
function packageVersion(): string {
  try {
    const json = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')) as { version?: string };
    return json.version ?? 'latest';
  } catch {
    return 'latest';
  }
}

let loaded: Library | null = null;
let typesDeclared = false;

function declareTypes(): { progressCallback: unknown; progressType: unknown } {
  if (!typesDeclared) {
    koffi.alias('cairn_status', 'uint32_t');
    for (const name of ['cairn_buf', 'cairn_cancel', 'cairn_error', 'cairn_hold', 'cairn_run', 'cairn_threads', 'cairn_workspace']) {
      koffi.opaque(name);
    }
    koffi.struct('cairn_bytes', { data: 'const uint8_t *', len: 'size_t' });
    koffi.struct('cairn_progress', {
      files: 'uint64_t',
      dirs: 'uint64_t',
      hashed: 'uint64_t',
      hashed_bytes: 'uint64_t',
    });
    koffi.proto('int32_t cairn_progress_cb(void *userdata, const cairn_progress *progress)');
    typesDeclared = true;
  }
  return { progressCallback: koffi.pointer(koffi.type('cairn_progress_cb')), progressType: koffi.type('cairn_progress') };
}

/** The stack libcairn's calls need: what Rust gives a thread it spawns. */
const ASYNC_STACK_BYTES = 2 * 1024 * 1024;

/**
 * Koffi runs asynchronous calls on stacks of its own, 128 KiB by default, where Rust code
 * expects the 2 MiB of a thread it spawns: a snapshot compiling its exclude globs overflowed
 * them in an unoptimised libcairn and killed the process with SIGSEGV. Raised before the first
 * library is loaded, the only time Koffi allows it; only the pages a call touches are
 * resident. Left as it is when the process loaded a library through Koffi before (Koffi
 * refuses then).
 */
function raiseAsyncStack(): void {
  const config = koffi.config();
  if ((config.async_stack_size ?? 0) >= ASYNC_STACK_BYTES) return;
  try {
    koffi.config({ ...config, async_stack_size: ASYNC_STACK_BYTES });
  } catch {
    // Another library was loaded through Koffi first: its settings stand.
  }
}

/**
 * Loads libcairn (once; later calls return the same library) and checks its ABI version.
 * Throws {@link CairnLoadError} with a message that says what to do when the file is missing,
 * is not libcairn, or was built for another ABI version.
 */
export function load(libraryPath: string = defaultLibraryPath()): Library {
  if (loaded) return loaded;
  const hint = loadHint();
  if (!fs.existsSync(libraryPath)) {
    throw new CairnLoadError('ERR_CAIRN_LIBRARY_MISSING', libraryPath, `libcairn not found at ${libraryPath}. ${hint}`);
  }
  raiseAsyncStack();
  let lib: ReturnType<typeof koffi.load>;
  try {
    lib = koffi.load(libraryPath);
  } catch (cause) {
    throw new CairnLoadError(
      'ERR_CAIRN_LIBRARY_INVALID',
      libraryPath,
      `cannot load ${libraryPath} as a shared library (${(cause as Error).message}). ${hint}`,
      { cause },
    );
  }
  const types = declareTypes();
  // Check the ABI version before declaring the rest, so a library of another ABI is reported
  // as such rather than as a missing symbol.
  let abi: number;
  try {
    abi = lib.func(PROTOTYPES.cairn_abi_version)() as number;
  } catch (cause) {
    throw new CairnLoadError(
      'ERR_CAIRN_LIBRARY_INVALID',
      libraryPath,
      `${libraryPath} is not libcairn: it has no cairn_abi_version(). ${hint}`,
      { cause },
    );
  }
  if (abi !== ABI_VERSION) {
    throw new CairnLoadError(
      'ERR_CAIRN_ABI_MISMATCH',
      libraryPath,
      `${libraryPath} has ABI version ${abi}, but this binding was written for ABI version ${ABI_VERSION}. ` +
        (checkoutLibrary() || process.env.CAIRN_LIB
          ? 'Rebuild the library from the same checkout as the binding (`cargo build --release -p cairn-ffi`), ' +
            'or use the binding that matches the library.'
          : `Install the platform package of the same version as cairn (${packageVersion()}), ` +
            `or point CAIRN_LIB at a libcairn built for ABI version ${ABI_VERSION}.`),
    );
  }
  const fns: Record<string, unknown> = {};
  for (const [name, proto] of Object.entries(PROTOTYPES)) {
    try {
      fns[name] = lib.func(proto);
    } catch (cause) {
      throw new CairnLoadError(
        'ERR_CAIRN_LIBRARY_INVALID',
        libraryPath,
        `${libraryPath} reports ABI version ${abi} but cannot provide ${name} (${(cause as Error).message}). ${hint}`,
        { cause },
      );
    }
  }
  loaded = Object.freeze({ ...fns, path: libraryPath, ...types }) as unknown as Library;
  return loaded;
}

/** Copies `len` bytes at `data` into a new Buffer (an empty one for NULL). */
export function copyBytes(b: CairnBytes): Buffer {
  const len = Number(b.len);
  if (b.data === null || len === 0) return Buffer.alloc(0);
  return Buffer.from(new Uint8Array(koffi.view(b.data, len)));
}

/** Decodes the `cairn_progress` a progress callback's pointer points at. */
export function decodeProgress(ptr: Pointer): CairnProgress {
  return koffi.decode(ptr, 'cairn_progress') as CairnProgress;
}
