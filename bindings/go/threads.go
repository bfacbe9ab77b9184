package cairn

/*
#include <stdbool.h>
#include "cairn.h"
*/
import "C"

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"runtime"
	"time"
	"unicode/utf8"
)

// Threads is an open thread database (SQLite, shared safely by goroutines and processes):
// threads whose entries carry checkpoints of a workspace, and the rewinds and forks that
// move the files and the conversation back together. Runs (BeginRun) hold a lease on a
// thread while an agent works in it.
//
// A Threads is safe for concurrent use. Close it when done (Close waits for the calls
// running on it); later calls return ErrClosed.
type Threads struct {
	h handle[*C.cairn_threads]
}

var _ io.Closer = (*Threads)(nil)

// CheckpointPolicy is one level of the checkpoint policy (the database's, a run's, an
// agent's). Setting a level at all turns checkpoints on, with these settings; Disabled turns
// them off at that level.
type CheckpointPolicy struct {
	Disabled bool
	// Exclude globs, added to the workspace's; they add up across levels.
	Exclude      []string
	MaxFileBytes *uint64
	// BeforeTools: a checkpoint before every tool entry as well.
	BeforeTools *bool
	// BeforeCompaction: a checkpoint before every compaction entry.
	BeforeCompaction *bool
}

type checkpointsJSON struct {
	Enabled          bool     `json:"enabled"`
	Exclude          []string `json:"exclude"`
	MaxFileBytes     *uint64  `json:"max_file_bytes,omitempty"`
	BeforeTools      *bool    `json:"before_tools,omitempty"`
	BeforeCompaction *bool    `json:"before_compaction,omitempty"`
}

func (p *CheckpointPolicy) toJSON() *checkpointsJSON {
	if p == nil {
		return nil
	}
	ex := p.Exclude
	if ex == nil {
		ex = []string{}
	}
	return &checkpointsJSON{!p.Disabled, ex, p.MaxFileBytes, p.BeforeTools, p.BeforeCompaction}
}

// ThreadsOptions configure OpenThreads.
type ThreadsOptions struct {
	// Checkpoints is the database's level of the checkpoint policy.
	Checkpoints *CheckpointPolicy
	// RewindFiles: rewinds restore the files by default. Default: the library's.
	RewindFiles *bool
	// Recover: finish rewinds a crash interrupted when opening. Default true.
	Recover *bool
	// BusyTimeout: how long a call waits for another writer of the database.
	BusyTimeout *time.Duration
}

// OpenThreads opens the thread database at path, created if needed: an SQLite file, or a
// PostgreSQL database that several machines share when path is a postgres:// URL. With path
// "" the database is threads.db in the store of ws. ws (may be nil) is the default workspace for
// checkpoints, rewinds and forks; the database keeps its own reference to it, so ws may be
// closed first.
func OpenThreads(ctx context.Context, path string, ws *Workspace, opts *ThreadsOptions) (*Threads, error) {
	if ctx.Err() != nil {
		return nil, cancelledBefore(ctx)
	}
	var doc []byte
	if opts != nil {
		timeout, err := millis(opts.BusyTimeout, "ThreadsOptions.BusyTimeout")
		if err != nil {
			return nil, err
		}
		if doc, err = json.Marshal(struct {
			Checkpoints   *checkpointsJSON `json:"checkpoints,omitempty"`
			RewindFiles   *bool            `json:"rewind_files,omitempty"`
			Recover       *bool            `json:"recover,omitempty"`
			BusyTimeoutMS *uint64          `json:"busy_timeout_ms,omitempty"`
		}{opts.Checkpoints.toJSON(), opts.RewindFiles, opts.Recover, timeout}); err != nil {
			return nil, err
		}
	}
	wsPtr, release, err := ws.borrow()
	if err != nil {
		return nil, err
	}
	defer release()
	pp, pl := bytesArg(path)
	dp, dl := sliceArg(doc)
	var ptr *C.cairn_threads
	var cerr *C.cairn_error
	if st := C.cairn_threads_open(pp, pl, dp, dl, wsPtr, &ptr, &cerr); st != C.CAIRN_OK {
		return nil, takeError(ctx, st, cerr)
	}
	t := &Threads{}
	setHandle(t, &t.h, ptr, func(p *C.cairn_threads) { C.cairn_threads_free(p) })
	return t, nil
}

// borrow acquires ws for the length of a call; a nil ws is NULL.
func (w *Workspace) borrow() (*C.cairn_workspace, func(), error) {
	if w == nil {
		return nil, func() {}, nil
	}
	return w.h.borrow()
}

// borrow acquires r for the length of a call; a nil r is NULL.
func (r *Run) borrow() (*C.cairn_run, func(), error) {
	if r == nil {
		return nil, func() {}, nil
	}
	return r.h.borrow()
}

// borrowBoth acquires the run and workspace of o (either may be nil).
func (o *AppendOptions) borrowBoth() (*C.cairn_run, *C.cairn_workspace, func(), error) {
	if o == nil {
		return nil, nil, func() {}, nil
	}
	rp, releaseRun, err := o.Run.borrow()
	if err != nil {
		return nil, nil, nil, err
	}
	wp, releaseWS, err := o.Workspace.borrow()
	if err != nil {
		releaseRun()
		return nil, nil, nil, err
	}
	return rp, wp, func() { releaseWS(); releaseRun() }, nil
}

// Close frees the handle, after the calls running on it return. Idempotent.
func (t *Threads) Close() error { return t.h.close() }

// threadsCall is one C call on the thread database handle.
type threadsCall func(t *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status

// do runs f with the live handle; ctx is checked before (the library cannot interrupt the
// thread calls yet).
func (t *Threads) do(ctx context.Context, f func(p *C.cairn_threads) error) error {
	if ctx.Err() != nil {
		return cancelledBefore(ctx)
	}
	p, err := t.h.acquire()
	if err != nil {
		return err
	}
	defer t.h.release()
	err = f(p)
	runtime.KeepAlive(t)
	return err
}

// threadsResult makes a call writing a result document and decodes it into a T.
func threadsResult[T any](ctx context.Context, t *Threads, what string, f threadsCall) (T, error) {
	var doc []byte
	err := t.do(ctx, func(p *C.cairn_threads) (err error) {
		doc, err = bufCall(func(out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
			return f(p, out, cerr)
		}).run(ctx)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return decode[T](doc, what)
}

// statusErr turns a status (and its detail) into nil or an *Error.
func statusErr(ctx context.Context, st C.cairn_status, cerr *C.cairn_error) error {
	if st != C.CAIRN_OK {
		return takeError(ctx, st, cerr)
	}
	return nil
}

// CheckpointRef says which snapshot of which workspace holds the files of a checkpoint.
type CheckpointRef struct {
	CheckpointID string `json:"checkpoint_id"`
	SnapshotID   string `json:"snapshot_id"`
	WorkspaceID  string `json:"workspace_id"`
	Root         string `json:"root"` // (lossy when the root is not UTF-8)
}

// Thread is a conversation: a tree of entries with one active branch.
type Thread struct {
	ID           string `json:"id"`
	ActiveLeaf   string `json:"active_leaf"`   // "" while empty
	ParentThread string `json:"parent_thread"` // the thread it was forked from
	ForkEntry    string `json:"fork_entry"`    // the last entry it shares with it
	// FileCheckpointAt is the checkpoint holding the files at the fork point, when they come
	// from the user message after it.
	FileCheckpointAt *CheckpointRef `json:"file_checkpoint_at"`
	Metadata         map[string]any `json:"metadata"`
	Created          time.Time      `json:"-"`
}

func (th *Thread) UnmarshalJSON(b []byte) error {
	type plain Thread
	return withCreated(b, (*plain)(th), &th.Created)
}

// EntryKind is what a thread entry is.
type EntryKind string

const (
	EntryUser       EntryKind = "user"
	EntryAssistant  EntryKind = "assistant"
	EntryTool       EntryKind = "tool"
	EntryNote       EntryKind = "note"
	EntryEvent      EntryKind = "event"
	EntryCompaction EntryKind = "compaction"
)

// Entry is one entry of a thread.
type Entry struct {
	ID       string    `json:"id"`
	ThreadID string    `json:"thread_id"` // the thread that wrote it (a fork shares its prefix)
	ParentID string    `json:"parent_id"` // "" for the first
	Kind     EntryKind `json:"kind"`
	// Payload holds the entry's exact bytes (its text, for a text entry).
	Payload  string         `json:"payload"`
	Metadata map[string]any `json:"metadata"`
	// Checkpoint holds the files as they were before this entry, when one was taken.
	Checkpoint     *CheckpointRef `json:"checkpoint"`
	RunID          string         `json:"run_id"`
	Key            string         `json:"key"`
	Seq            int64          `json:"seq"`
	OnActiveBranch bool           `json:"on_active_branch"`
	Created        time.Time      `json:"-"`
}

func (e *Entry) UnmarshalJSON(b []byte) error {
	type plain Entry
	w := struct {
		*plain
		Payload   jpath `json:"payload"`
		CreatedMS int64 `json:"created_ms"`
	}{plain: (*plain)(e)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	e.Payload = string(w.Payload)
	e.Created = time.UnixMilli(w.CreatedMS)
	return nil
}

// CheckpointKind says why a checkpoint was taken.
type CheckpointKind string

const (
	CheckpointUser       CheckpointKind = "user"
	CheckpointTool       CheckpointKind = "tool"
	CheckpointCompaction CheckpointKind = "compaction"
	CheckpointManual     CheckpointKind = "manual"
)

// Checkpoint is a snapshot taken for a thread, bound to an entry.
type Checkpoint struct {
	ID          string         `json:"id"`
	ThreadID    string         `json:"thread_id"`
	EntryID     string         `json:"entry_id"`
	Kind        CheckpointKind `json:"kind"`
	Label       string         `json:"label"`
	SnapshotID  string         `json:"snapshot_id"`
	WorkspaceID string         `json:"workspace_id"`
	Root        string         `json:"root"`
	RunID       string         `json:"run_id"`
	Created     time.Time      `json:"-"`
}

func (c *Checkpoint) UnmarshalJSON(b []byte) error {
	type plain Checkpoint
	return withCreated(b, (*plain)(c), &c.Created)
}

// CheckpointFailure is a checkpoint that failed; the conversation went on without it.
type CheckpointFailure struct {
	Kind    string `json:"kind"` // the error's kind: "IO", "DENIED", ...
	Message string `json:"message"`
}

// Appended says what Threads.Append did.
type Appended struct {
	Entry Entry `json:"entry"`
	// Checkpoint is the checkpoint taken before the entry, if one was.
	Checkpoint *Checkpoint `json:"checkpoint"`
	// CheckpointError says why a checkpoint the policy asked for failed (the entry was
	// saved anyway); nil when none failed.
	CheckpointError *CheckpointFailure `json:"checkpoint_error"`
	// Repeated: the key was appended before; Entry is that first entry.
	Repeated bool `json:"repeated"`
}

// NewEntry is an entry to append.
type NewEntry struct {
	Kind EntryKind
	// Payload is the entry's bytes (its text); any bytes round-trip.
	Payload  string
	Metadata map[string]any
	// Key is an admission key: appending the same key again returns the first entry.
	Key string
	// Wait is how long to wait for a rewind holding the thread.
	Wait time.Duration
}

// AppendOptions say where the checkpoint before an entry is taken: the run's workspace,
// else Workspace, else the database's default one.
type AppendOptions struct {
	Run       *Run
	Workspace *Workspace
}

// CreateThreadOptions configure Threads.Create.
type CreateThreadOptions struct {
	ID       string // "" makes one
	Metadata map[string]any
}

// Create creates a thread. An ID that exists already is ErrValidation.
func (t *Threads) Create(ctx context.Context, opts *CreateThreadOptions) (*Thread, error) {
	var doc []byte
	if opts != nil {
		var err error
		if doc, err = json.Marshal(struct {
			ID       string         `json:"id,omitempty"`
			Metadata map[string]any `json:"metadata,omitempty"`
		}{opts.ID, opts.Metadata}); err != nil {
			return nil, err
		}
	}
	dp, dl := sliceArg(doc)
	return threadsResult[*Thread](ctx, t, "thread", func(p *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_threads_create(p, dp, dl, out, cerr)
	})
}

// List lists every thread.
func (t *Threads) List(ctx context.Context) ([]Thread, error) {
	return threadsResult[[]Thread](ctx, t, "thread list", func(p *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_threads_list(p, out, cerr)
	})
}

// Log returns the entries of a thread's active branch, or with all every branch (nothing
// is ever deleted).
func (t *Threads) Log(ctx context.Context, thread string, all bool) ([]Entry, error) {
	tp, tl := bytesArg(thread)
	return threadsResult[[]Entry](ctx, t, "entries", func(p *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_threads_log(p, tp, tl, C.bool(all), out, cerr)
	})
}

// Append appends an entry to a thread. A user entry is preceded by a checkpoint of the
// workspace when the policy says so (see AppendOptions); a checkpoint that fails is reported
// in CheckpointError and the entry is saved anyway.
func (t *Threads) Append(ctx context.Context, thread string, e NewEntry, opts *AppendOptions) (*Appended, error) {
	if e.Wait < 0 {
		return nil, invalid("NewEntry.Wait must not be negative")
	}
	entry := struct {
		Kind       EntryKind      `json:"kind"`
		Text       *string        `json:"text,omitempty"`
		PayloadHex *string        `json:"payload_hex,omitempty"`
		Metadata   map[string]any `json:"metadata,omitempty"`
		Key        string         `json:"key,omitempty"`
		WaitMS     uint64         `json:"wait_ms,omitempty"`
	}{Kind: e.Kind, Metadata: e.Metadata, Key: e.Key, WaitMS: uint64(e.Wait / time.Millisecond)}
	if utf8.ValidString(e.Payload) {
		entry.Text = &e.Payload
	} else {
		h := hex.EncodeToString([]byte(e.Payload))
		entry.PayloadHex = &h
	}
	doc, err := json.Marshal(entry)
	if err != nil {
		return nil, err
	}
	rp, wp, release, err := opts.borrowBoth()
	if err != nil {
		return nil, err
	}
	defer release()
	tp, tl := bytesArg(thread)
	dp, dl := sliceArg(doc)
	return threadsResult[*Appended](ctx, t, "appended entry", func(p *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_threads_append(p, tp, tl, dp, dl, rp, wp, out, cerr)
	})
}

// Checkpoint takes a manual checkpoint labelled label, of the run's workspace, else
// opts.Workspace, else the default one.
func (t *Threads) Checkpoint(ctx context.Context, thread, label string, opts *AppendOptions) (*Checkpoint, error) {
	rp, wp, release, err := opts.borrowBoth()
	if err != nil {
		return nil, err
	}
	defer release()
	tp, tl := bytesArg(thread)
	lp, ll := bytesArg(label)
	return threadsResult[*Checkpoint](ctx, t, "checkpoint", func(p *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_threads_checkpoint(p, tp, tl, lp, ll, rp, wp, out, cerr)
	})
}

// ListCheckpoints lists the checkpoints of a thread and of the threads it was forked from.
func (t *Threads) ListCheckpoints(ctx context.Context, thread string) ([]Checkpoint, error) {
	tp, tl := bytesArg(thread)
	return threadsResult[[]Checkpoint](ctx, t, "checkpoints", func(p *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_threads_list_checkpoints(p, tp, tl, out, cerr)
	})
}

// MemoryKind is what a memory item is.
type MemoryKind string

const (
	MemoryKindItem    MemoryKind = "item"    // a fact or note remembered from entries
	MemoryKindSummary MemoryKind = "summary" // a summary, seen only from a branch holding all it sums up
)

// MemoryItem is something remembered from entries of a thread.
type MemoryItem struct {
	ID       string     `json:"id"`
	ThreadID string     `json:"thread_id"`
	Kind     MemoryKind `json:"kind"`
	Text     string     `json:"text"`
	StandsOn []string   `json:"stands_on"` // the entries it stands on
	// Status is "active", or "stale" once a rewind cut every entry it stands on.
	Status      string    `json:"status"`
	StaleReason string    `json:"reason"`
	RewindID    string    `json:"rewind_id"` // the rewind that made it stale
	Created     time.Time `json:"-"`
}

func (m *MemoryItem) UnmarshalJSON(b []byte) error {
	type plain MemoryItem
	return withCreated(b, (*plain)(m), &m.Created)
}

// NewMemory is a memory item to add.
type NewMemory struct {
	Kind     MemoryKind
	Text     string
	StandsOn []string // entry ids
}

// AddMemory adds a memory item to a thread.
func (t *Threads) AddMemory(ctx context.Context, thread string, m NewMemory) (*MemoryItem, error) {
	stands := m.StandsOn
	if stands == nil {
		stands = []string{}
	}
	doc, err := json.Marshal(struct {
		Kind     MemoryKind `json:"kind"`
		Text     string     `json:"text"`
		StandsOn []string   `json:"stands_on"`
	}{m.Kind, m.Text, stands})
	if err != nil {
		return nil, err
	}
	tp, tl := bytesArg(thread)
	dp, dl := sliceArg(doc)
	return threadsResult[*MemoryItem](ctx, t, "memory item", func(p *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_threads_add_memory(p, tp, tl, dp, dl, out, cerr)
	})
}

// Memory lists the memory items seen from a thread's active branch, stale ones included.
func (t *Threads) Memory(ctx context.Context, thread string) ([]MemoryItem, error) {
	tp, tl := bytesArg(thread)
	return threadsResult[[]MemoryItem](ctx, t, "memory", func(p *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_threads_memory(p, tp, tl, out, cerr)
	})
}

// RunStatus is the state of a run.
type RunStatus string

const (
	RunRunning     RunStatus = "running"
	RunPaused      RunStatus = "paused"
	RunEnded       RunStatus = "ended"
	RunInterrupted RunStatus = "interrupted" // stopped by a forced rewind
	RunDropped     RunStatus = "dropped"     // dropped by a rewind
)

// RunInfo is a run as the database knows it.
type RunInfo struct {
	ID            string    `json:"id"`
	ThreadID      string    `json:"thread_id"`
	WorkspaceID   string    `json:"workspace_id"`
	Root          string    `json:"root"`
	Durable       bool      `json:"durable"`
	ParentRun     string    `json:"parent_run"`
	Status        RunStatus `json:"status"`
	Going         bool      `json:"going"` // running, lease not run out
	Here          bool      `json:"here"`  // held by this process
	LeaseExpires  time.Time `json:"-"`
	OpenToolCalls uint64    `json:"open_tool_calls"`
	Started       time.Time `json:"-"`
}

func (r *RunInfo) UnmarshalJSON(b []byte) error {
	type plain RunInfo
	w := struct {
		*plain
		LeaseExpiresMS int64 `json:"lease_expires_ms"`
		StartedMS      int64 `json:"started_ms"`
	}{plain: (*plain)(r)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	r.LeaseExpires, r.Started = time.UnixMilli(w.LeaseExpiresMS), time.UnixMilli(w.StartedMS)
	return nil
}

// ThreadRuns are the runs of a thread that matter to a rewind.
type ThreadRuns struct {
	Going   []RunInfo `json:"going"`
	Paused  []RunInfo `json:"paused"`
	Durable []RunInfo `json:"durable"`
}

// Runs lists the runs of a thread: going, paused, durable.
func (t *Threads) Runs(ctx context.Context, thread string) (*ThreadRuns, error) {
	tp, tl := bytesArg(thread)
	return threadsResult[*ThreadRuns](ctx, t, "runs", func(p *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_threads_runs(p, tp, tl, out, cerr)
	})
}

// RewindOptions configure Threads.Rewind and RestoreBefore.
type RewindOptions struct {
	// Files: restore the files too. nil: the database's default (ThreadsOptions.RewindFiles).
	Files *bool
	// Memory: mark stale the memory standing only on cut entries. Default true.
	Memory *bool
	DryRun bool
	// Force interrupts runs going on (they get ErrRunInterrupted) instead of failing with
	// ErrThreadBusy.
	Force bool
	// Key is an idempotency key.
	Key string
	// ToolSettle is how long to wait for open tool calls to finish.
	ToolSettle *time.Duration
	// LeaseWait is how long to wait for going runs' leases.
	LeaseWait *time.Duration
	// FromRun names the run asking (its own lease does not block the rewind).
	FromRun string
	// Workspace is the workspace whose files are restored; nil: the default one.
	Workspace *Workspace
	// Paths, with files, restores only these files and directories (relative to the root).
	Paths []string
	// OnDrift, with files, checks for files edited since the thread's newest checkpoint
	// (after the one restored) by someone else: DriftRefuse (ErrConflict), DriftKeep or
	// DriftOverwrite. "": no check.
	OnDrift DriftPolicy
	// Continuation is an agent's half of the rewind, kept with it before the files change:
	// its Data comes back in the report's Continuation and the thread is found by each of its
	// Names once the rewind is done. nil: none (a thread Claude Code's hooks wrote gets
	// Claude's without it).
	Continuation *Continuation
}

// Continuation is what an agent needs to continue its own conversation from a rewind's point,
// and the names the thread is found by from the rewind on.
type Continuation struct {
	Data  json.RawMessage `json:"data"`
	Names []string        `json:"names,omitempty"`
}

func (o *RewindOptions) encode() ([]byte, error) {
	if o == nil {
		return nil, nil
	}
	settle, err := millis(o.ToolSettle, "RewindOptions.ToolSettle")
	if err != nil {
		return nil, err
	}
	wait, err := millis(o.LeaseWait, "RewindOptions.LeaseWait")
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Files        *bool         `json:"files,omitempty"`
		Memory       *bool         `json:"memory,omitempty"`
		DryRun       bool          `json:"dry_run,omitempty"`
		Force        bool          `json:"force,omitempty"`
		Key          string        `json:"key,omitempty"`
		ToolSettleMS *uint64       `json:"tool_settle_ms,omitempty"`
		LeaseWaitMS  *uint64       `json:"lease_wait_ms,omitempty"`
		FromRun      string        `json:"from_run,omitempty"`
		Paths        []string      `json:"paths,omitempty"`
		OnDrift      DriftPolicy   `json:"on_drift,omitempty"`
		Continuation *Continuation `json:"continuation,omitempty"`
	}{o.Files, o.Memory, o.DryRun, o.Force, o.Key, settle, wait, o.FromRun, o.Paths, o.OnDrift,
		o.Continuation})
}

// FilesReport is the files part of a rewind or fork.
type FilesReport struct {
	EntryID      string `json:"entry_id"`
	CheckpointID string `json:"checkpoint_id"`
	SnapshotID   string `json:"snapshot_id"`
	// Exact: the checkpoint was taken for exactly this point.
	Exact            bool   `json:"exact"`
	WorkspaceID      string `json:"workspace_id"`
	Root             string `json:"root"`
	SafetySnapshotID string `json:"safety_snapshot_id"`
	// BeforeRewindCheckpointID is a rewind's "Before rewind" checkpoint (its safety snapshot at
	// the leaf it left): rewinding to it with files brings back the files and the conversation.
	BeforeRewindCheckpointID string `json:"before_rewind_checkpoint_id"`
	// Restore is the file restore's report.
	Restore *RestoreReport `json:"restore"`
}

// RunsReport is the runs part of a rewind or fork.
type RunsReport struct {
	Going       []string `json:"going"`
	Interrupted []string `json:"interrupted"`
	Paused      []string `json:"paused"`
	Durable     []string `json:"durable"`
}

// RewindReport says what a rewind did (or, for a dry run, would do).
type RewindReport struct {
	RewindID  string `json:"rewind_id"` // "" for a dry run
	ThreadID  string `json:"thread_id"`
	ToEntryID string `json:"to_entry_id"` // "" for the start of the thread
	DryRun    bool   `json:"dry_run"`
	// Conversation: Rewound says the active leaf moved; Cut lists the entries taken off
	// the active branch (they stay on a branch of their own); Restored those put back on it
	// (a rewind to a "Before rewind" checkpoint brings back what a rewind cut).
	Conversation struct {
		Rewound        bool     `json:"rewound"`
		Cut            []string `json:"cut"`
		Restored       []string `json:"restored"`
		PreviousLeafID string   `json:"previous_leaf_id"`
	} `json:"conversation"`
	Files  *FilesReport `json:"files"` // nil when the files were not restored
	Memory struct {
		Staled []string `json:"staled"`
	} `json:"memory"`
	Runs      RunsReport `json:"runs"`
	Recovered bool       `json:"recovered"`
	// Continuation is, for an agent's thread (Claude Code's hooks), where the agent's own
	// conversation continues ("argv": the command that continues it; "session_id": its new
	// session), kept with the rewind; null for other threads.
	Continuation json.RawMessage `json:"continuation"`
}

func (t *Threads) rewindLike(ctx context.Context, before bool, thread, entry string, opts *RewindOptions) (*RewindReport, error) {
	doc, err := opts.encode()
	if err != nil {
		return nil, err
	}
	var ws *Workspace
	if opts != nil {
		ws = opts.Workspace
	}
	wp, release, err := ws.borrow()
	if err != nil {
		return nil, err
	}
	defer release()
	tp, tl := bytesArg(thread)
	ep, el := bytesArg(entry)
	dp, dl := sliceArg(doc)
	return threadsResult[*RewindReport](ctx, t, "rewind report", func(p *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		if before {
			return C.cairn_threads_restore_before(p, tp, tl, ep, el, dp, dl, wp, out, cerr)
		}
		return C.cairn_threads_rewind(p, tp, tl, ep, el, dp, dl, wp, out, cerr)
	})
}

// Rewind rewinds a thread to entry of its active branch in one operation: the files (with
// opts.Files), then the conversation, memory and runs. Runs going on make it fail with
// ErrThreadBusy unless opts.Force.
func (t *Threads) Rewind(ctx context.Context, thread, entry string, opts *RewindOptions) (*RewindReport, error) {
	return t.rewindLike(ctx, false, thread, entry, opts)
}

// RestoreBefore is "restore before this prompt": the rewind to just before user entry
// entry.
func (t *Threads) RestoreBefore(ctx context.Context, thread, entry string, opts *RewindOptions) (*RewindReport, error) {
	return t.rewindLike(ctx, true, thread, entry, opts)
}

// ForkOptions configure Threads.Fork.
type ForkOptions struct {
	// Files: give Workspace the files as they were at the fork point.
	Files       bool
	NewThreadID string // "" makes one
	DryRun      bool
	Force       bool
	// Replace the contents of a Workspace that exists, is not empty and is no workspace of
	// the thread's family; without it such a fork fails with ErrDenied (as does one into a
	// directory holding the source workspace, its store or the thread database).
	Replace    bool
	ToolSettle *time.Duration
	LeaseWait  *time.Duration
	Metadata   map[string]any
	// Workspace receives the files (nil: the default one); Source is where the checkpoints
	// are (nil: the default one), copied into Workspace's store when it is another.
	Workspace, Source *Workspace
	// SourceWorkspaceID (instead of Source) names a workspace of another machine whose
	// checkpoints the files come from, read through Workspace's store: the cache of the
	// remote that machine snapshots into (OpenOptions.Remote), the thread database
	// (postgres://) being shared too.
	SourceWorkspaceID string
}

// ForkReport says what a fork did.
type ForkReport struct {
	ThreadID         string         `json:"thread_id"` // the new thread
	SourceThreadID   string         `json:"source_thread_id"`
	AtEntryID        string         `json:"at_entry_id"`
	DryRun           bool           `json:"dry_run"`
	FileCheckpointAt *CheckpointRef `json:"file_checkpoint_at"`
	SnapshotsCopied  []string       `json:"snapshots_copied"`
	Files            *FilesReport   `json:"files"`
	Runs             RunsReport     `json:"runs"`
}

// Fork makes a new thread sharing thread's entries up to entry.
func (t *Threads) Fork(ctx context.Context, thread, entry string, opts *ForkOptions) (*ForkReport, error) {
	var doc []byte
	var ws, src *Workspace
	if opts != nil {
		settle, err := millis(opts.ToolSettle, "ForkOptions.ToolSettle")
		if err != nil {
			return nil, err
		}
		wait, err := millis(opts.LeaseWait, "ForkOptions.LeaseWait")
		if err != nil {
			return nil, err
		}
		if doc, err = json.Marshal(struct {
			Files        bool           `json:"files,omitempty"`
			NewThreadID  string         `json:"new_thread_id,omitempty"`
			DryRun       bool           `json:"dry_run,omitempty"`
			Force        bool           `json:"force,omitempty"`
			Replace      bool           `json:"replace,omitempty"`
			ToolSettleMS *uint64        `json:"tool_settle_ms,omitempty"`
			LeaseWaitMS  *uint64        `json:"lease_wait_ms,omitempty"`
			Metadata     map[string]any `json:"metadata,omitempty"`
			SourceWSID   string         `json:"source_workspace_id,omitempty"`
		}{opts.Files, opts.NewThreadID, opts.DryRun, opts.Force, opts.Replace, settle, wait, opts.Metadata, opts.SourceWorkspaceID}); err != nil {
			return nil, err
		}
		ws, src = opts.Workspace, opts.Source
	}
	wp, releaseWS, err := ws.borrow()
	if err != nil {
		return nil, err
	}
	defer releaseWS()
	var sp *C.cairn_workspace
	if src != nil && src != ws {
		p, releaseSrc, err := src.borrow()
		if err != nil {
			return nil, err
		}
		defer releaseSrc()
		sp = p
	} else if src != nil {
		sp = wp
	}
	tp, tl := bytesArg(thread)
	ep, el := bytesArg(entry)
	dp, dl := sliceArg(doc)
	return threadsResult[*ForkReport](ctx, t, "fork report", func(p *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_threads_fork(p, tp, tl, ep, el, dp, dl, wp, sp, out, cerr)
	})
}

// Event is one event of the append-only log.
type Event struct {
	Cursor   int64          `json:"cursor"` // pass it to Events to read what follows
	ThreadID string         `json:"thread_id"`
	Kind     string         `json:"kind"` // "thread_created", "entry_appended", "restore_applied", "rewind_completed", ...
	Data     map[string]any `json:"data"`
	Created  time.Time      `json:"-"`
}

func (e *Event) UnmarshalJSON(b []byte) error {
	type plain Event
	return withCreated(b, (*plain)(e), &e.Created)
}

// Events returns the events after cursor (0: from the start), at most limit (0: 1000).
// Every process sharing the database sees the same events.
func (t *Threads) Events(ctx context.Context, cursor int64, limit int) ([]Event, error) {
	if limit < 0 {
		return nil, invalid("Events: limit must not be negative")
	}
	return threadsResult[[]Event](ctx, t, "events", func(p *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_threads_events(p, C.int64_t(cursor), C.size_t(limit), out, cerr)
	})
}

// RunOptions configure Threads.BeginRun.
type RunOptions struct {
	// Workspace the run works in; nil: the default one.
	Workspace *Workspace
	// Durable runs survive their process (another may resume them).
	Durable bool
	// Lease is how long the run goes on without a Heartbeat.
	Lease *time.Duration
	// ParentRun makes a subagent run of that run's tool call (it takes no checkpoints).
	ParentRun string
	// Checkpoints and AgentCheckpoints are the run's and the agent's levels of the policy.
	Checkpoints, AgentCheckpoints *CheckpointPolicy
	// RejectIfBusy fails with ErrThreadBusy while a rewind holds the thread, instead of
	// waiting up to Wait.
	RejectIfBusy bool
	Wait         *time.Duration
}

// Run is a run of a thread held by this process: its lease, its tool calls, its checkpoint
// policy. Close frees the handle; the run itself goes on until End, or until its lease runs
// out.
type Run struct {
	h      handle[*C.cairn_run]
	t      *Threads
	id     string
	thread string
}

var _ io.Closer = (*Run)(nil)

// BeginRun begins a run of a thread. While a rewind holds the thread it waits, or fails with
// ErrThreadBusy with opts.RejectIfBusy.
func (t *Threads) BeginRun(ctx context.Context, thread string, opts *RunOptions) (*Run, error) {
	var doc []byte
	var ws *Workspace
	if opts != nil {
		lease, err := millis(opts.Lease, "RunOptions.Lease")
		if err != nil {
			return nil, err
		}
		wait, err := millis(opts.Wait, "RunOptions.Wait")
		if err != nil {
			return nil, err
		}
		if doc, err = json.Marshal(struct {
			Durable          bool             `json:"durable,omitempty"`
			LeaseMS          *uint64          `json:"lease_ms,omitempty"`
			ParentRun        string           `json:"parent_run,omitempty"`
			Checkpoints      *checkpointsJSON `json:"checkpoints,omitempty"`
			AgentCheckpoints *checkpointsJSON `json:"agent_checkpoints,omitempty"`
			RejectIfBusy     bool             `json:"reject_if_busy,omitempty"`
			WaitMS           *uint64          `json:"wait_ms,omitempty"`
		}{opts.Durable, lease, opts.ParentRun, opts.Checkpoints.toJSON(), opts.AgentCheckpoints.toJSON(), opts.RejectIfBusy, wait}); err != nil {
			return nil, err
		}
		ws = opts.Workspace
	}
	wp, release, err := ws.borrow()
	if err != nil {
		return nil, err
	}
	defer release()
	tp, tl := bytesArg(thread)
	dp, dl := sliceArg(doc)
	var ptr *C.cairn_run
	err = t.do(ctx, func(p *C.cairn_threads) error {
		var cerr *C.cairn_error
		return statusErr(ctx, C.cairn_threads_begin_run(p, tp, tl, dp, dl, wp, &ptr, &cerr), cerr)
	})
	if err != nil {
		return nil, err
	}
	r := &Run{t: t, id: string(goBytes(C.cairn_run_id(ptr))), thread: thread}
	setHandle(r, &r.h, ptr, func(p *C.cairn_run) { C.cairn_run_free(p) })
	return r, nil
}

// ID is the run's id.
func (r *Run) ID() string { return r.id }

// Close frees the run handle (the run goes on until End, or its lease runs out).
// Idempotent.
func (r *Run) Close() error { return r.h.close() }

// do runs f with the live thread database and run handles.
func (r *Run) do(ctx context.Context, f func(t *C.cairn_threads, run *C.cairn_run) error) error {
	rp, err := r.h.acquire()
	if err != nil {
		return err
	}
	defer r.h.release()
	err = r.t.do(ctx, func(t *C.cairn_threads) error { return f(t, rp) })
	runtime.KeepAlive(r)
	return err
}

// Heartbeat renews the run's lease. A run a forced rewind interrupted gets
// ErrRunInterrupted.
func (r *Run) Heartbeat(ctx context.Context) error {
	return r.do(ctx, func(t *C.cairn_threads, run *C.cairn_run) error {
		var cerr *C.cairn_error
		return statusErr(ctx, C.cairn_threads_heartbeat(t, run, &cerr), cerr)
	})
}

// ToolStart starts a tool call of the run and returns its id. It counts (rewinds wait for
// it to settle) until ToolFinish, even after the run ends.
func (r *Run) ToolStart(ctx context.Context, name string) (string, error) {
	np, nl := bytesArg(name)
	var id []byte
	err := r.do(ctx, func(t *C.cairn_threads, run *C.cairn_run) (err error) {
		id, err = bufCall(func(out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
			return C.cairn_threads_tool_start(t, run, np, nl, out, cerr)
		}).run(ctx)
		return err
	})
	return string(id), err
}

// ToolFinish finishes a tool call started by Run.ToolStart (from any process).
func (t *Threads) ToolFinish(ctx context.Context, call string) error {
	cp, cl := bytesArg(call)
	return t.do(ctx, func(p *C.cairn_threads) error {
		var cerr *C.cairn_error
		return statusErr(ctx, C.cairn_threads_tool_finish(p, cp, cl, &cerr), cerr)
	})
}

// End ends the run and returns its final status (RunEnded, or RunInterrupted after a
// forced rewind, ...).
func (r *Run) End(ctx context.Context) (RunStatus, error) {
	var doc []byte
	err := r.do(ctx, func(t *C.cairn_threads, run *C.cairn_run) (err error) {
		doc, err = bufCall(func(out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
			return C.cairn_threads_end_run(t, run, out, cerr)
		}).run(ctx)
		return err
	})
	if err != nil {
		return "", err
	}
	return decode[RunStatus](doc, "run status")
}

// Thread is the id of the run's thread.
func (r *Run) Thread() string { return r.thread }

// Append appends an entry to the run's thread, within the run (its checkpoint policy, its
// workspace).
func (r *Run) Append(ctx context.Context, e NewEntry) (*Appended, error) {
	return r.t.Append(ctx, r.thread, e, &AppendOptions{Run: r})
}

// Checkpoint takes a manual checkpoint of the run's workspace, labelled label.
func (r *Run) Checkpoint(ctx context.Context, label string) (*Checkpoint, error) {
	return r.t.Checkpoint(ctx, r.thread, label, &AppendOptions{Run: r})
}
