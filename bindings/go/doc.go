// Package cairn is the Go binding of Cairn, a workspace time machine for AI coding agents:
// it snapshots the directory an agent edits and restores it safely (an exact dry-run plan,
// a safety snapshot that undoes every restore, holds that keep restores away from running
// tools).
//
// The package calls libcairn in-process through cgo and links it statically: there is no
// shared library to install and no subprocess. At init it checks that the library and the
// header it was compiled against speak the ABI this package was written for (ABIVersion),
// and panics with a message saying what to rebuild if not.
//
// # Building
//
// The package links lib/<GOOS>-<GOARCH>/libcairn.a and includes include/cairn.h from its own
// directory. Both are build outputs: in the Cairn repository, run
//
//	bindings/go/build-lib.sh   # cargo build --release -p cairn-ffi, then copies them
//
// after which `go build` and `go test ./...` need no flags. linux/amd64 and linux/arm64 are
// wired up.
//
// # Threads
//
// [Threads] is a thread database: conversations whose user messages carry checkpoints of the
// workspace, so that [Threads.RestoreBefore] (or [Threads.Rewind]) moves the files and the
// conversation back together, and [Threads.Fork] branches both. A [Run] is an agent at work
// in a thread: its lease, its tool calls. Rewinds refuse runs going on ([ErrThreadBusy],
// [ErrWorkspaceBusy]) unless forced, which interrupts them ([ErrRunInterrupted]).
//
// # Handles
//
// [Workspace], [Hold], [CancelToken], [Threads] and [Run] wrap C objects. Each has Close (an [io.Closer]),
// which is idempotent and waits for the calls running on the handle; a method called after
// Close returns [ErrClosed]. A handle that becomes unreachable without Close is freed by a
// cleanup (runtime.AddCleanup), but only as a backstop: close what you open, and keep a Hold
// referenced for as long as it must stand.
//
// A Workspace may be used from several goroutines at once; several processes may share a
// store.
//
// # Contexts and cancellation
//
// Every call that may take long takes a [context.Context]. For the calls the library can
// interrupt (Workspace.Snapshot, Plan, Apply, Restore), a goroutine waits on ctx.Done() and triggers
// the library's cancellation token; the call returns an [*Error] of [KindCancelled] that
// wraps ctx.Err(), so both errors.Is(err, cairn.ErrCancelled) and errors.Is(err,
// context.Canceled) hold. A cancelled snapshot records nothing; a cancelled restore stops
// before its first change. The other calls (the thread calls among them) check ctx before
// they start, since the library cannot interrupt them yet.
//
// # Errors
//
// The library's errors are [*Error] values with a [Kind] (one per cairn_status), a Message
// that says what to do, and the Path (exact bytes) or id concerned. Test the kind with the
// sentinels:
//
//	if errors.Is(err, cairn.ErrBusy) { ... } // a hold stands: try again later
//
// # Paths
//
// Paths are Go strings holding their exact bytes: a file name that is not UTF-8 round-trips
// unchanged, in and out. (The library's JSON documents carry such a path as {"hex": "..."};
// this package decodes it.)
//
// # Progress callbacks
//
// [SnapshotOptions].Progress is called on the goroutine that called Snapshot, one call at a
// time. Returning an error stops the snapshot, which returns an *Error of
// [KindAbortedByCallback] wrapping it. A panic in the callback stops the snapshot too, and
// is raised again from Snapshot once the library has returned; it never unwinds through C.
package cairn
