package cairn

// Results: Go structs decoded from the JSON documents the library returns. In those
// documents a path is a JSON string when it is UTF-8 and {"hex": "..."} otherwise; here every
// path is a Go string holding its exact bytes, whichever form it came in. A JSON null leaves
// a string field "" (encoding/json's rule), which is how optional ids and labels read.

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// jpath decodes a path in either of its JSON forms.
type jpath string

func (p *jpath) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*p = jpath(s)
		return nil
	}
	var h struct {
		Hex *string `json:"hex"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return fmt.Errorf("a path is a string or {\"hex\": ...}: %w", err)
	}
	if h.Hex == nil {
		return errors.New("a path is a string or {\"hex\": ...}")
	}
	raw, err := hex.DecodeString(*h.Hex)
	if err != nil {
		return fmt.Errorf("a hex path: %w", err)
	}
	*p = jpath(raw)
	return nil
}

// withCreated decodes b into plain (a result type without its methods) and its
// "created_ms" into created.
func withCreated[P any](b []byte, plain *P, created *time.Time) error {
	if err := json.Unmarshal(b, plain); err != nil {
		return err
	}
	var c struct {
		CreatedMS int64 `json:"created_ms"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	*created = time.UnixMilli(c.CreatedMS)
	return nil
}

func strs(ps []jpath) []string {
	if ps == nil {
		return nil
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}

// Stats says what taking a snapshot cost.
type Stats struct {
	Files         uint64        `json:"files"`          // files recorded
	Dirs          uint64        `json:"dirs"`           // directories recorded (the root included)
	Symlinks      uint64        `json:"symlinks"`       // symlinks recorded
	Bytes         uint64        `json:"bytes"`          // bytes of all files recorded
	Hashed        uint64        `json:"hashed"`         // files read and hashed
	Reused        uint64        `json:"reused"`         // files taken from the stat cache unread
	StoredBytes   uint64        `json:"stored_bytes"`   // new bytes written to the store
	StoredObjects uint64        `json:"stored_objects"` // new objects written to the store
	Duration      time.Duration `json:"-"`              // wall time
}

func (s *Stats) UnmarshalJSON(b []byte) error {
	type plain Stats
	w := struct {
		*plain
		DurationMS uint64 `json:"duration_ms"`
	}{plain: (*plain)(s)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	s.Duration = time.Duration(w.DurationMS) * time.Millisecond
	return nil
}

// SkipReason says why a snapshot left a path out.
type SkipReason string

const (
	SkipTooLarge   SkipReason = "too-large"  // larger than the snapshot's max_file_bytes
	SkipChanging   SkipReason = "changing"   // still changing after five reads
	SkipUnreadable SkipReason = "unreadable" // could not be read
	SkipHardLink   SkipReason = "hard-link"  // several hard links, with RefuseHardLinks
	SkipStaged     SkipReason = "staged"     // a file a restore staged: Cairn's own
)

// Skipped is a path a snapshot left out because it could not take it, and why.
type Skipped struct {
	Path   string     `json:"path"`
	Reason SkipReason `json:"reason"`
	IsDir  bool       `json:"is_dir"`
}

func (s *Skipped) UnmarshalJSON(b []byte) error {
	type plain Skipped
	w := struct {
		*plain
		Path jpath `json:"path"`
	}{plain: (*plain)(s)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	s.Path = string(w.Path)
	return nil
}

// ExcludeReason says why a snapshot left an entry out on purpose.
type ExcludeReason string

const (
	ExcludeDefault ExcludeReason = "default" // .git, node_modules, .cairn, the store
	ExcludeGlob    ExcludeReason = "glob"    // an exclude glob
	ExcludeIgnored ExcludeReason = "ignored" // a .gitignore or .cairnignore rule
	ExcludeSpecial ExcludeReason = "special" // a socket, FIFO or device
)

// Excluded is an entry a snapshot left out on purpose; restores leave it as it is.
type Excluded struct {
	Path   string        `json:"path"`
	Reason ExcludeReason `json:"reason"`
	IsDir  bool          `json:"is_dir"`
}

func (e *Excluded) UnmarshalJSON(b []byte) error {
	type plain Excluded
	w := struct {
		*plain
		Path jpath `json:"path"`
	}{plain: (*plain)(e)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	e.Path = string(w.Path)
	return nil
}

// Snapshot is one snapshot of a workspace.
type Snapshot struct {
	ID           string         `json:"id"`    // 64 hex characters
	Label        string         `json:"label"` // "" when none
	Root         string         `json:"root"`  // the root tree's id
	Created      time.Time      `json:"-"`
	WorkspaceID  string         `json:"workspace_id"`
	Protected    bool           `json:"protected"` // never dropped by retention
	Metadata     map[string]any `json:"metadata"`
	Stats        Stats          `json:"stats"`
	Skipped      []Skipped      `json:"skipped"`
	Excludes     []string       `json:"excludes"` // the exclude globs it was taken with
	MaxFileBytes uint64         `json:"max_file_bytes"`

	// Set only by Workspace.Snapshot:

	// Kept lists the entries left out on purpose (excluded, ignored, special files).
	Kept []Excluded `json:"kept"`
	// PruneError is set when the retention run after the snapshot failed (the snapshot
	// itself was taken).
	PruneError string `json:"prune_error"`
	// Walk says what the snapshot walked (all of the tree, part of it or nothing, with a
	// watcher: see Workspace.Watch), and why.
	Walk WalkInfo `json:"walk"`
}

// Walked says how much of the tree a snapshot looked at.
type Walked string

const (
	// WalkedFull: every directory (no watcher, or one that could not vouch for what changed).
	WalkedFull Walked = "full"
	// WalkedPartial: only the directories a watcher said changed.
	WalkedPartial Walked = "partial"
	// WalkedNone: nothing; the watcher said nothing changed.
	WalkedNone Walked = "none"
)

// WalkInfo says what a snapshot walked, and why.
type WalkInfo struct {
	Walked Walked `json:"walked"`
	// Reason says why it walked what it did, when a watcher was asked and the walk was not
	// the least it could be (no earlier snapshot with this watcher, an overflow, a watch
	// limit, ...); "" otherwise.
	Reason string `json:"reason"`
	Listed uint64 `json:"listed"` // directories it listed, every entry looked at
	// Named counts the directories of which it looked only at the entries the watcher named
	// as changed.
	Named uint64 `json:"named"`
	// AheadMs is set when a `cairn watch` daemon had walked it ahead, once the workspace was
	// quiet, and nothing changed since: how many milliseconds before it was asked for (the
	// other figures are that walk's); nil otherwise.
	AheadMs *uint64 `json:"ahead_ms"`
}

// WatchStatus is what a watcher started by Workspace.Watch says of itself.
type WatchStatus struct {
	Root    string `json:"root"`    // the workspace root watched
	Watches uint64 `json:"watches"` // directories watched
	// Unwatched lists the subtrees not watched (walked by every snapshot), and why:
	// "path: reason".
	Unwatched []string `json:"unwatched"`
	Changed   uint64   `json:"changed"`   // directories remembered as changed
	Overflows uint64   `json:"overflows"` // times the kernel's event queue overflowed
	Queries   uint64   `json:"queries"`   // queries answered
	// Gone: the root was moved or deleted (the watcher is of no more use).
	Gone       bool   `json:"gone"`
	TableBytes uint64 `json:"table_bytes"` // bytes the watcher's own tables take, about
}

func (s *Snapshot) UnmarshalJSON(b []byte) error {
	type plain Snapshot
	return withCreated(b, (*plain)(s), &s.Created)
}

// FileKind is what a snapshot's tree entry is.
type FileKind string

const (
	FileRegular FileKind = "file"
	FileSymlink FileKind = "symlink"
	FileDir     FileKind = "dir"
)

// EntryInfo is one side of a change.
type EntryInfo struct {
	Kind FileKind `json:"kind"`
	Mode uint32   `json:"mode"` // the full st_mode, type bits included
	Size uint64   `json:"size"`
	ID   string   `json:"id"` // its blob or tree
}

// ChangeKind is what changed at a path.
type ChangeKind string

const (
	ChangeAdded       ChangeKind = "added"
	ChangeModified    ChangeKind = "modified"
	ChangeDeleted     ChangeKind = "deleted"
	ChangeModeChanged ChangeKind = "mode-changed"
	ChangeTypeChanged ChangeKind = "type-changed"
)

// Change is one changed path of a diff.
type Change struct {
	Path string     `json:"path"`
	Kind ChangeKind `json:"kind"`
	Old  *EntryInfo `json:"old"` // nil when added
	New  *EntryInfo `json:"new"` // nil when deleted
	// With DiffOptions.Attribute: the checkpoint intervals it changed in, oldest first
	// (nil without).
	Attribution []Attribution `json:"attribution,omitempty"`
}

// Attribution is a checkpoint interval a path changed in, and what opened it: the tool call
// or subagent an agent's hook recorded in the checkpoint before it ran, where known.
type Attribution struct {
	From           string  `json:"from"`            // the snapshot opening the interval
	To             *string `json:"to"`              // the snapshot closing it; nil for the files now
	Label          *string `json:"label"`           // the opening snapshot's label
	CheckpointKind string  `json:"checkpoint_kind"` // "user", "tool", ...; "" when no thread took it
	ThreadID       string  `json:"thread_id"`       // the thread that took it, or ""
	ToolUseID      string  `json:"tool_use_id"`     // the tool call that ran next, or ""
	ToolName       string  `json:"tool_name"`       // its tool ("Edit", "Bash", ...), or ""
	AgentID        string  `json:"agent_id"`        // the subagent whose call it was, or ""
}

func (c *Change) UnmarshalJSON(b []byte) error {
	type plain Change
	w := struct {
		*plain
		Path jpath `json:"path"`
	}{plain: (*plain)(c)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	c.Path = string(w.Path)
	return nil
}

// CaptureSettings are the settings a snapshot was taken with; a restore of it walks the
// workspace with the same.
type CaptureSettings struct {
	Excludes        []string `json:"excludes"`
	MaxFileBytes    uint64   `json:"max_file_bytes"`
	Gitignore       bool     `json:"gitignore"`
	RefuseHardLinks bool     `json:"refuse_hard_links"`
}

// ActionOp is what one action of a plan does.
type ActionOp string

const (
	OpRemoveFile  ActionOp = "remove_file"
	OpRemoveDir   ActionOp = "remove_dir"
	OpMakeDir     ActionOp = "make_dir"
	OpWriteFile   ActionOp = "write_file"
	OpMakeSymlink ActionOp = "make_symlink"
	OpSetMode     ActionOp = "set_mode"
)

// Action is one change a restore makes, in the order it makes them. Fields other than Op and
// Path are set by the ops that have them.
type Action struct {
	Op     ActionOp `json:"op"`
	Path   string   `json:"path"`
	Mode   uint32   `json:"mode"`   // make_dir, write_file, set_mode
	Blob   string   `json:"blob"`   // write_file: the content's id
	Size   uint64   `json:"size"`   // write_file
	Target string   `json:"target"` // make_symlink: the id of the target's bytes
	Dir    bool     `json:"dir"`    // set_mode: whether it is a directory
}

func (a *Action) UnmarshalJSON(b []byte) error {
	type plain Action
	w := struct {
		*plain
		Path jpath `json:"path"`
	}{plain: (*plain)(a)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	a.Path = string(w.Path)
	return nil
}

// KeptReason says why a restore leaves a path as it is.
type KeptReason string

const (
	KeptExcluded          KeptReason = "excluded"
	KeptExcludedByGlob    KeptReason = "excluded-by-glob"
	KeptIgnored           KeptReason = "ignored"
	KeptSpecial           KeptReason = "special"
	KeptSkippedBySnapshot KeptReason = "skipped-by-snapshot"
	KeptUnreadable        KeptReason = "unreadable"
	KeptTooLarge          KeptReason = "too-large"
	KeptChanging          KeptReason = "changing"
	KeptHardLink          KeptReason = "hard-link"
	KeptHoldsKept         KeptReason = "holds-kept"
	KeptDrifted           KeptReason = "drifted"
	KeptStaged            KeptReason = "staged"
)

// KeptPath is a path a restore leaves alone, and why.
type KeptPath struct {
	Path   string     `json:"path"`
	Reason KeptReason `json:"reason"`
}

func (k *KeptPath) UnmarshalJSON(b []byte) error {
	type plain KeptPath
	w := struct {
		*plain
		Path jpath `json:"path"`
	}{plain: (*plain)(k)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	k.Path = string(w.Path)
	return nil
}

// Plan is a restore plan (the dry run): every change, before any is made. Give it, as it is,
// to Workspace.Apply. It marshals to (and unmarshals from) the library's exact plan
// document, so it can be stored and applied later.
type Plan struct {
	SnapshotID  string          `json:"snapshot_id"`
	TargetRoot  string          `json:"target_root"`
	CurrentRoot string          `json:"current_root"` // the workspace's tree when planned
	Capture     CaptureSettings `json:"capture"`
	Actions     []Action        `json:"actions"`
	Restored    []string        `json:"restored"` // paths written or re-made
	Deleted     []string        `json:"deleted"`  // paths removed
	Unchanged   uint64          `json:"unchanged"`
	Kept        []KeptPath      `json:"kept"`
	Busy        bool            `json:"busy"`      // a hold stands: Apply would fail with ErrBusy
	Drifted     []string        `json:"drifted"`   // paths changed since the reference snapshot
	Reference   string          `json:"reference"` // "" when none
	Paths       []string        `json:"paths"`     // the paths it is restricted to; nil: all
	// OnDrift is what the plan was told to do with drifted paths; Apply checks again with it
	// unless given another.
	OnDrift DriftPolicy `json:"on_drift"`

	raw []byte // the document, passed back to the library unchanged
}

func (p *Plan) UnmarshalJSON(b []byte) error {
	type plain Plan
	w := struct {
		*plain
		Restored []jpath `json:"restored"`
		Deleted  []jpath `json:"deleted"`
		Drifted  []jpath `json:"drifted"`
		Paths    []jpath `json:"paths"`
	}{plain: (*plain)(p)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	p.Restored, p.Deleted, p.Drifted = strs(w.Restored), strs(w.Deleted), strs(w.Drifted)
	p.Paths = strs(w.Paths)
	p.raw = append([]byte(nil), b...)
	return nil
}

// MarshalJSON returns the library's plan document, unchanged.
func (p Plan) MarshalJSON() ([]byte, error) {
	if p.raw == nil {
		return nil, errors.New("cairn: a Plan marshals only as the document Workspace.Plan returned")
	}
	return p.raw, nil
}

// RestoreReport says what a restore did (or, for a dry run, would do).
type RestoreReport struct {
	SnapshotID string     `json:"snapshot_id"`
	DryRun     bool       `json:"dry_run"`
	Restored   []string   `json:"restored"`
	Deleted    []string   `json:"deleted"`
	Unchanged  uint64     `json:"unchanged"`
	Kept       []KeptPath `json:"kept"`
	Busy       bool       `json:"busy"`
	Drifted    []string   `json:"drifted"`
	// SafetySnapshotID names the snapshot of the files before the restore changed them:
	// restoring it (with the same Paths) undoes the restore. "" for a dry run or a restore
	// that changed nothing.
	SafetySnapshotID string `json:"safety_snapshot_id"`
	Operations       uint64 `json:"operations"`
	AsPlanned        bool   `json:"as_planned"`
	Journal          string `json:"journal"`
	// Paths are the paths the restore was restricted to; nil: the whole workspace.
	Paths []string `json:"paths"`
	// SafetyWalk says how the walk for the safety snapshot went (whether a watcher spared
	// it the whole tree); nil for a dry run, a restore that changed nothing, or a repeated key.
	SafetyWalk *WalkInfo `json:"safety_walk,omitempty"`
}

func (r *RestoreReport) UnmarshalJSON(b []byte) error {
	type plain RestoreReport
	w := struct {
		*plain
		Restored []jpath `json:"restored"`
		Deleted  []jpath `json:"deleted"`
		Drifted  []jpath `json:"drifted"`
		Paths    []jpath `json:"paths"`
	}{plain: (*plain)(r)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	r.Restored, r.Deleted, r.Drifted = strs(w.Restored), strs(w.Deleted), strs(w.Drifted)
	r.Paths = strs(w.Paths)
	return nil
}

// Recovery says what completing a restore a crash interrupted did.
type Recovery struct {
	Journal   string `json:"journal"`
	Target    string `json:"target"` // the snapshot it restores
	Safety    string `json:"safety"` // restoring it undoes the restore; "" when none
	Completed bool   `json:"completed"`
	// Obstructed lists paths a later, unrelated edit obstructs, or that may not be
	// changed; left as they are.
	Obstructed []string `json:"obstructed"`
	// Abandoned: ended as it stood by Workspace.GiveUp.
	Abandoned bool `json:"abandoned"`
}

func (r *Recovery) UnmarshalJSON(b []byte) error {
	type plain Recovery
	w := struct {
		*plain
		Obstructed []jpath `json:"obstructed"`
	}{plain: (*plain)(r)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	r.Obstructed = strs(w.Obstructed)
	return nil
}

// Info describes an open workspace.
type Info struct {
	ID    string `json:"id"`
	Root  string `json:"root"`
	Store string `json:"store"`
	// StoreHome says why the store is there: "data" (the default: the user's data
	// directory, outside the workspace), "given" (OpenOptions.Store), "env" ($CAIRN_STORE)
	// or "legacy" (a <root>/.cairn an earlier version made).
	StoreHome string     `json:"store_home"`
	Recovered []Recovery `json:"recovered"` // what opening completed, if anything
	// Remote is the remote store the store caches (s3://bucket/prefix, never with
	// credentials); "" when the store is the only copy.
	Remote string `json:"remote"`
}

func (i *Info) UnmarshalJSON(b []byte) error {
	type plain Info
	w := struct {
		*plain
		Root  jpath `json:"root"`
		Store jpath `json:"store"`
	}{plain: (*plain)(i)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	i.Root, i.Store = string(w.Root), string(w.Store)
	return nil
}

// UnreadableSnapshot is a snapshot whose objects a collection could not all read; what it
// still reaches is kept.
type UnreadableSnapshot struct {
	Snapshot string `json:"snapshot"`
	Error    string `json:"error"`
}

// PackPlan is one pack in a collection plan.
type PackPlan struct {
	Pack        string `json:"pack"`
	Objects     uint64 `json:"objects"`
	LiveObjects uint64 `json:"live_objects"`
	Bytes       uint64 `json:"bytes"`
}

// GCPlan is what a collection does (or, for a dry run, would do).
type GCPlan struct {
	Snapshots        int                  `json:"snapshots"`
	ReachableObjects int                  `json:"reachable_objects"`
	Unreadable       []UnreadableSnapshot `json:"unreadable"`
	DeletePacks      []PackPlan           `json:"delete_packs"`
	Repack           []PackPlan           `json:"repack"`
	DeleteLarge      []string             `json:"delete_large"`
	OrphanPacks      []string             `json:"orphan_packs"`
	TempFiles        []string             `json:"temp_files"`
	YoungUnreachable uint64               `json:"young_unreachable"`
	Foreign          []string             `json:"foreign"` // reported, never touched
	// Symlinks in the store's object directories (never the store's own): removed.
	Symlinks []string `json:"symlinks"`
}

func (g *GCPlan) UnmarshalJSON(b []byte) error {
	type plain GCPlan
	w := struct {
		*plain
		OrphanPacks []jpath `json:"orphan_packs"`
		TempFiles   []jpath `json:"temp_files"`
		Foreign     []jpath `json:"foreign"`
		Symlinks    []jpath `json:"symlinks"`
	}{plain: (*plain)(g)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	g.OrphanPacks, g.TempFiles = strs(w.OrphanPacks), strs(w.TempFiles)
	g.Foreign, g.Symlinks = strs(w.Foreign), strs(w.Symlinks)
	return nil
}

// GCReport says what a collection did. For a dry run only Plan is set.
type GCReport struct {
	DryRun         bool     `json:"-"`
	Deferred       bool     `json:"deferred"` // another operation held the store
	Plan           GCPlan   `json:"plan"`
	PacksDeleted   int      `json:"packs_deleted"`
	PacksRepacked  int      `json:"packs_repacked"`
	ObjectsDeleted uint64   `json:"objects_deleted"`
	BytesFreed     uint64   `json:"bytes_freed"`
	KeptForDamage  []string `json:"kept_for_damage"`
	// Remote is what the remote's collector did, for a workspace whose store caches a
	// remote (the other fields but BytesFreed and DryRun are then empty).
	Remote *RemoteGCReport `json:"remote"`
}

// RemoteGCReport says what a collection of a remote store did: unreachable objects are
// marked as candidates in one run and deleted in a later one, once the grace has passed.
type RemoteGCReport struct {
	Snapshots        int    `json:"snapshots"` // manifests marked
	ReachableObjects int    `json:"reachable_objects"`
	LiveLeases       int    `json:"live_leases"`
	Candidates       int    `json:"candidates"` // unreachable packs and large objects marked
	KeptForGrace     int    `json:"kept_for_grace"`
	KeptForLeases    int    `json:"kept_for_leases"`
	PacksDeleted     int    `json:"packs_deleted"`
	LargeDeleted     int    `json:"large_deleted"`
	BytesFreed       uint64 `json:"bytes_freed"`
	// SnapshotsDuringRun counts the manifests that appeared while the collection ran (marked
	// too).
	SnapshotsDuringRun int `json:"snapshots_during_run"`
	// Unreadable lists snapshots whose objects could not all be read: nothing was deleted.
	Unreadable []UnreadableSnapshot `json:"unreadable"`
}

// CacheTrim says what Workspace.TrimCache did.
type CacheTrim struct {
	RemovedFiles uint64 `json:"removed_files"` // packs and large objects removed (the remote keeps them)
	RemovedBytes uint64 `json:"removed_bytes"`
	CachedBytes  uint64 `json:"cached_bytes"` // remote-held bytes still cached
}

// PruneReport says what a prune or a delete did.
type PruneReport struct {
	Deleted []string `json:"deleted"` // the snapshots deleted
	Kept    int      `json:"kept"`    // how many snapshots remain
	GC      GCReport `json:"gc"`      // the collection that followed
}

// BadCopy is a stored copy of an object that failed its check.
type BadCopy struct {
	ID    string `json:"id"`
	Path  string `json:"path"`
	Error string `json:"error"`
}

func (c *BadCopy) UnmarshalJSON(b []byte) error {
	type plain BadCopy
	w := struct {
		*plain
		Path jpath `json:"path"`
	}{plain: (*plain)(c)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	c.Path = string(w.Path)
	return nil
}

// BrokenIndex is a pack index that could not be read.
type BrokenIndex struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

func (x *BrokenIndex) UnmarshalJSON(b []byte) error {
	type plain BrokenIndex
	w := struct {
		*plain
		Path jpath `json:"path"`
	}{plain: (*plain)(x)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	x.Path = string(w.Path)
	return nil
}

// SnapshotCheck is the check of one snapshot.
type SnapshotCheck struct {
	ID         string   `json:"id"`
	Missing    []string `json:"missing"`    // objects it reaches that the store lacks
	Corrupt    []string `json:"corrupt"`    // objects it reaches with no good copy
	Unreadable string   `json:"unreadable"` // why the manifest cannot be read; "" if it can
}

// VerifyReport says what Workspace.Verify found. OK is false when anything is damaged;
// Verify still returns a nil error then: the report is the answer.
type VerifyReport struct {
	OK            bool            `json:"ok"`
	CopiesChecked uint64          `json:"copies_checked"`
	BytesChecked  uint64          `json:"bytes_checked"`
	BadCopies     []BadCopy       `json:"bad_copies"`
	Corrupt       []string        `json:"corrupt"`
	BrokenIndexes []BrokenIndex   `json:"broken_indexes"`
	Snapshots     []SnapshotCheck `json:"snapshots"`
}

// CopyReport says what Workspace.Copy did.
type CopyReport struct {
	Snapshot       string `json:"snapshot"` // the same id in both stores
	ObjectsCopied  uint64 `json:"objects_copied"`
	BytesCopied    uint64 `json:"bytes_copied"`
	AlreadyPresent bool   `json:"already_present"` // nothing was written
}
