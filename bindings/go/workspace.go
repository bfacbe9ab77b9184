package cairn

/*
#include "cairn.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"io"
	"runtime"
)

// Workspace is an open workspace: a root directory and the store that keeps its snapshots.
//
// A Workspace is safe for concurrent use by several goroutines; so is one store shared by
// several processes. Close it when done: Close waits for the calls running on it to return,
// and every later call returns ErrClosed. A Workspace that becomes unreachable without Close
// is freed by a cleanup, as a backstop.
type Workspace struct {
	h handle[*C.cairn_workspace]
}

var _ io.Closer = (*Workspace)(nil)

// Open opens the workspace at root (its exact bytes), creating its store if needed. Restores
// a crash interrupted are completed first (see Info.Recovered) unless opts.Recover is false.
// ctx is checked before the call; opening itself cannot be interrupted.
func Open(ctx context.Context, root string, opts *OpenOptions) (*Workspace, error) {
	if ctx.Err() != nil {
		return nil, cancelledBefore(ctx)
	}
	doc, err := opts.encode()
	if err != nil {
		return nil, err
	}
	rp, rl := bytesArg(root)
	op, ol := sliceArg(doc)
	var ptr *C.cairn_workspace
	var cerr *C.cairn_error
	if st := C.cairn_workspace_open(rp, rl, op, ol, &ptr, &cerr); st != C.CAIRN_OK {
		return nil, takeError(ctx, st, cerr)
	}
	w := &Workspace{}
	setHandle(w, &w.h, ptr, func(p *C.cairn_workspace) { C.cairn_workspace_free(p) })
	return w, nil
}

// Close frees the handle, after the calls running on it return. Idempotent: a second Close
// returns nil.
func (w *Workspace) Close() error { return w.h.close() }

// wsCall is one C call on the workspace handle, given the token to pass (nil when the call
// cannot be cancelled) and the outputs.
type wsCall func(ws *C.cairn_workspace, tok *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status

// call runs f on the live handle and returns its result document. A cancellable call gets a
// token bridged to ctx; any other call has ctx checked before it starts.
func (w *Workspace) call(ctx context.Context, cancellable bool, f wsCall) ([]byte, error) {
	if ctx.Err() != nil {
		return nil, cancelledBefore(ctx)
	}
	ptr, err := w.h.acquire()
	if err != nil {
		return nil, err
	}
	defer w.h.release()
	var tok *C.cairn_cancel
	if cancellable {
		b, err := newBridge(ctx)
		if err != nil {
			return nil, err
		}
		defer b.release()
		tok = b.tok
	}
	doc, err := bufCall(func(out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return f(ptr, tok, out, cerr)
	}).run(ctx)
	runtime.KeepAlive(w)
	return doc, err
}

// Info describes the workspace: its id, root and store, and what opening recovered.
func (w *Workspace) Info() (*Info, error) {
	return result[*Info](context.Background(), w, false, "workspace info", func(ws *C.cairn_workspace, _ *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_info(ws, out, cerr)
	})
}

// result makes a call on w and decodes its result document (the what) into a T.
func result[T any](ctx context.Context, w *Workspace, cancellable bool, what string, f wsCall) (T, error) {
	doc, err := w.call(ctx, cancellable, f)
	if err != nil {
		var zero T
		return zero, err
	}
	return decode[T](doc, what)
}

// Snapshot takes a snapshot of the workspace. Cancelling ctx stops it (nothing is
// recorded) with an *Error of KindCancelled wrapping ctx.Err(). opts.Progress, if set, is
// called as it goes; see SnapshotOptions.
func (w *Workspace) Snapshot(ctx context.Context, opts *SnapshotOptions) (*Snapshot, error) {
	doc, err := opts.encode()
	if err != nil {
		return nil, err
	}
	var fn func(Progress) error
	if opts != nil {
		fn = opts.Progress
	}
	cb, userdata, pc, after := progressArgs(fn)
	dp, dl := sliceArg(doc)
	snap, err := func() (*Snapshot, error) {
		defer after() // frees the handle; raises the callback's panic again
		return result[*Snapshot](ctx, w, true, "snapshot", func(ws *C.cairn_workspace, tok *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
			return C.cairn_workspace_snapshot(ws, dp, dl, cb, userdata, tok, out, cerr)
		})
	}()
	if err != nil {
		if e, ok := err.(*Error); ok && e.Kind == KindAbortedByCallback && pc != nil && pc.err != nil {
			e.cause = pc.err
			if e.Message == "" {
				e.Message = "the progress callback stopped the snapshot"
			}
			e.Message += ": " + pc.err.Error()
		}
	}
	return snap, err
}

// Watch starts a watcher of the workspace inside this process (inotify on every directory):
// from then on each Snapshot of this Workspace lists only the directories that changed since
// the one before, and says so in its Walk (the first after the watcher starts walks in full).
// A snapshot reads the watcher's events before it walks: there is nothing to wait for.
// Replaces a watcher started before; Unwatch (or Close) stops it. On a file system inotify
// cannot watch (NFS, SMB, FUSE) it fails with ErrUnsupported, and snapshots walk as before.
func (w *Workspace) Watch(opts *WatchOptions) (*WatchStatus, error) {
	doc, err := opts.encode()
	if err != nil {
		return nil, err
	}
	return w.watch(doc)
}

// watch starts a watcher with the options document doc.
func (w *Workspace) watch(doc []byte) (*WatchStatus, error) {
	dp, dl := sliceArg(doc)
	return result[*WatchStatus](context.Background(), w, false, "watch status", func(ws *C.cairn_workspace, _ *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_watch(ws, dp, dl, out, cerr)
	})
}

// Unwatch stops the watcher Watch started (snapshots walk the whole tree again, or ask a
// cairn watch daemon). Does nothing when none runs.
func (w *Workspace) Unwatch() error {
	ws, err := w.h.acquire()
	if err != nil {
		return err
	}
	defer w.h.release()
	var cerr *C.cairn_error
	st := C.cairn_workspace_unwatch(ws, &cerr)
	runtime.KeepAlive(w)
	return statusErr(context.Background(), st, cerr)
}

// List lists the store's snapshots, oldest first (all workspaces sharing the store). ctx is
// checked before the call.
func (w *Workspace) List(ctx context.Context) ([]Snapshot, error) {
	return result[[]Snapshot](ctx, w, false, "snapshot list", func(ws *C.cairn_workspace, _ *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_list(ws, out, cerr)
	})
}

// Show returns one snapshot, named by id, unique prefix (4+ hex characters) or label (the
// newest carrying it). ctx is checked before the call.
func (w *Workspace) Show(ctx context.Context, name string) (*Snapshot, error) {
	np, nl := bytesArg(name)
	return result[*Snapshot](ctx, w, false, "snapshot", func(ws *C.cairn_workspace, _ *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_show(ws, np, nl, out, cerr)
	})
}

// Diff lists the differences from snapshot a to snapshot b or, when b is "", to the live
// files of the workspace. ctx is checked before the call (the library cannot interrupt a
// diff yet).
func (w *Workspace) Diff(ctx context.Context, a, b string) ([]Change, error) {
	ap, al := bytesArg(a)
	bp, bl := bytesArg(b)
	return result[[]Change](ctx, w, false, "diff", func(ws *C.cairn_workspace, _ *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_diff(ws, ap, al, bp, bl, out, cerr)
	})
}

// DiffWith is Diff with options: with opts.Attribute each change's Attribution lists the
// checkpoint intervals between a and b (cut by the snapshots taken between them) the path
// changed in, oldest first, each naming the tool call or subagent whose checkpoint opened it
// (a shell command is the Bash call that ran it). ctx is checked before the call.
func (w *Workspace) DiffWith(ctx context.Context, a, b string, opts *DiffOptions) ([]Change, error) {
	doc, err := opts.encode()
	if err != nil {
		return nil, err
	}
	ap, al := bytesArg(a)
	bp, bl := bytesArg(b)
	dp, dl := sliceArg(doc)
	return result[[]Change](ctx, w, false, "diff", func(ws *C.cairn_workspace, _ *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_diff_with(ws, ap, al, bp, bl, dp, dl, out, cerr)
	})
}

// Delete deletes a snapshot and collects garbage. ctx is checked before the call.
func (w *Workspace) Delete(ctx context.Context, name string) (*PruneReport, error) {
	np, nl := bytesArg(name)
	return result[*PruneReport](ctx, w, false, "prune report", func(ws *C.cairn_workspace, _ *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_delete(ws, np, nl, out, cerr)
	})
}

// Prune deletes the snapshots r does not keep, then collects garbage. ctx is checked before
// the call.
func (w *Workspace) Prune(ctx context.Context, r Retention) (*PruneReport, error) {
	rj, err := r.toJSON()
	if err != nil {
		return nil, err
	}
	doc, err := json.Marshal(rj)
	if err != nil {
		return nil, err
	}
	dp, dl := sliceArg(doc)
	return result[*PruneReport](ctx, w, false, "prune report", func(ws *C.cairn_workspace, _ *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_prune(ws, dp, dl, out, cerr)
	})
}

// GC collects garbage: objects no snapshot reaches and older than the grace period. With
// opts.DryRun it changes nothing and returns the plan (in GCReport.Plan). ctx is checked
// before the call.
func (w *Workspace) GC(ctx context.Context, opts *GCOptions) (*GCReport, error) {
	doc, err := opts.encode()
	if err != nil {
		return nil, err
	}
	dp, dl := sliceArg(doc)
	gc := func(ws *C.cairn_workspace, _ *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_gc(ws, dp, dl, out, cerr)
	}
	report, err := w.call(ctx, false, gc)
	if err != nil {
		return nil, err
	}
	dry := opts != nil && opts.DryRun
	var remote struct {
		Remote *RemoteGCReport `json:"remote"`
	}
	if err := json.Unmarshal(report, &remote); err == nil && remote.Remote != nil {
		r, err := decode[*GCReport](report, "remote collection report")
		if err != nil {
			return nil, err
		}
		r.DryRun = dry
		return r, nil
	}
	if dry {
		plan, err := decode[GCPlan](report, "collection plan")
		if err != nil {
			return nil, err
		}
		return &GCReport{DryRun: true, Plan: plan}, nil
	}
	return decode[*GCReport](report, "collection report")
}

// TrimCache shrinks this machine's cache of the remote to at most maxBytes of packs and
// large objects, least recently used first (they are downloaded again when next read).
// Files the remote does not hold yet are never removed. ErrUnsupported when the workspace
// has no remote. ctx is checked before the call.
func (w *Workspace) TrimCache(ctx context.Context, maxBytes uint64) (*CacheTrim, error) {
	return result[*CacheTrim](ctx, w, false, "cache trim", func(ws *C.cairn_workspace, _ *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_trim_cache(ws, C.uint64_t(maxBytes), out, cerr)
	})
}

// Verify checks the whole store: every object re-hashed, every tree and manifest decoded.
// Damage is reported in the report (OK false), not as an error. ctx is checked before the
// call.
func (w *Workspace) Verify(ctx context.Context) (*VerifyReport, error) {
	return result[*VerifyReport](ctx, w, false, "verify report", func(ws *C.cairn_workspace, _ *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_verify(ws, out, cerr)
	})
}

// Copy copies a snapshot, with the objects it reaches, into the store of workspace to.
// Idempotent. ctx is checked before the call.
func (w *Workspace) Copy(ctx context.Context, name string, to *Workspace) (*CopyReport, error) {
	if to == nil {
		return nil, invalid("Copy: the target workspace is nil")
	}
	var target *C.cairn_workspace // nil: the same workspace
	if to != w {
		t, err := to.h.acquire()
		if err != nil {
			return nil, err
		}
		defer to.h.release()
		target = t
	}
	np, nl := bytesArg(name)
	return result[*CopyReport](ctx, w, false, "copy report", func(ws *C.cairn_workspace, _ *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		if target == nil {
			target = ws
		}
		st := C.cairn_workspace_copy(ws, np, nl, target, out, cerr)
		runtime.KeepAlive(to)
		return st
	})
}

// Plan plans restoring a snapshot (the dry run) and changes nothing. Apply carries the plan
// out. Cancelling ctx stops it with an *Error of KindCancelled wrapping ctx.Err().
func (w *Workspace) Plan(ctx context.Context, name string, opts *RestoreOptions) (*Plan, error) {
	doc, err := opts.encode()
	if err != nil {
		return nil, err
	}
	np, nl := bytesArg(name)
	dp, dl := sliceArg(doc)
	return result[*Plan](ctx, w, true, "plan", func(ws *C.cairn_workspace, tok *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_plan(ws, np, nl, dp, dl, tok, out, cerr)
	})
}

// Apply carries out a plan made by Plan (re-checked against the files first: a plan made
// stale by later edits is refused rather than applied blindly). Cancelling ctx stops it
// before any change with an *Error of KindCancelled wrapping ctx.Err().
func (w *Workspace) Apply(ctx context.Context, plan *Plan, opts *RestoreOptions) (*RestoreReport, error) {
	if plan == nil || plan.raw == nil {
		return nil, invalid("Apply: the plan must come from Workspace.Plan (or json.Unmarshal of its document)")
	}
	doc, err := opts.encode()
	if err != nil {
		return nil, err
	}
	pp, pl := sliceArg(plan.raw)
	dp, dl := sliceArg(doc)
	return result[*RestoreReport](ctx, w, true, "restore report", func(ws *C.cairn_workspace, tok *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_apply(ws, pp, pl, dp, dl, tok, out, cerr)
	})
}

// Restore restores a snapshot: plans, then (unless opts.DryRun) applies. The report's
// SafetySnapshotID undoes it. Cancelling ctx stops it before any change with an *Error of
// KindCancelled wrapping ctx.Err().
func (w *Workspace) Restore(ctx context.Context, name string, opts *RestoreOptions) (*RestoreReport, error) {
	doc, err := opts.encode()
	if err != nil {
		return nil, err
	}
	np, nl := bytesArg(name)
	dp, dl := sliceArg(doc)
	return result[*RestoreReport](ctx, w, true, "restore report", func(ws *C.cairn_workspace, tok *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_restore(ws, np, nl, dp, dl, tok, out, cerr)
	})
}

// Recover completes restores a crash left pending and says what it did, and makes the
// changes of finished restores durable (a restore returns once its changes are made, before
// the disk has them). ctx is checked before the call.
func (w *Workspace) Recover(ctx context.Context) ([]Recovery, error) {
	return result[[]Recovery](ctx, w, false, "recovery", func(ws *C.cairn_workspace, _ *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_recover(ws, out, cerr)
	})
}

// GiveUp finishes what Recover can, then ends the interrupted restores it cannot finish
// (paths obstructed by later edits, or that may not be changed) as they stand: each comes
// back with Abandoned set and the paths left as they are; its Safety snapshot still holds the
// files as they were before it. ctx is checked before the call.
func (w *Workspace) GiveUp(ctx context.Context) ([]Recovery, error) {
	return result[[]Recovery](ctx, w, false, "recovery", func(ws *C.cairn_workspace, _ *C.cairn_cancel, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_give_up(ws, out, cerr)
	})
}

// NoProcess, given to Workspace.Hold as pid, ties the hold to its handle only.
const NoProcess = -1

// Hold takes a hold named what on the workspace: while it stands, restores fail with
// ErrBusy. It lasts until Close (or until the Hold is garbage-collected); with pid >= 0, also
// only as long as that process lives. Refused with ErrBusy while a restore changes files.
func (w *Workspace) Hold(ctx context.Context, what string, pid int) (*Hold, error) {
	if ctx.Err() != nil {
		return nil, cancelledBefore(ctx)
	}
	ws, err := w.h.acquire()
	if err != nil {
		return nil, err
	}
	defer w.h.release()
	wp, wl := bytesArg(what)
	var ptr *C.cairn_hold
	var cerr *C.cairn_error
	st := C.cairn_workspace_hold(ws, wp, wl, C.int64_t(pid), &ptr, &cerr)
	runtime.KeepAlive(w)
	if st != C.CAIRN_OK {
		return nil, takeError(ctx, st, cerr)
	}
	h := &Hold{}
	setHandle(h, &h.h, ptr, func(p *C.cairn_hold) { C.cairn_hold_free(p) })
	return h, nil
}

// Hold is a hold on a workspace (see Workspace.Hold). Close releases it; keep a reference
// while it must stand, since a garbage-collected Hold is released too.
type Hold struct {
	h handle[*C.cairn_hold]
}

var _ io.Closer = (*Hold)(nil)

// Close releases the hold. Idempotent.
func (h *Hold) Close() error { return h.h.close() }
