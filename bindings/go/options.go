package cairn

// Options: Go structs encoded as the JSON option documents the library takes. A nil
// *Options, like the zero value, means the defaults. Pointer fields are overrides: nil keeps
// the default (with Go 1.26, new(false) makes one in place).

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Retention says which snapshots to keep. A nil field puts no limit of its kind; the zero
// Retention keeps every snapshot. Protected snapshots are always kept.
type Retention struct {
	Count         *int           // keep at most this many (the newest)
	MaxAge        *time.Duration // drop those older than this
	MaxTotalBytes *uint64        // drop the oldest while all together hold more than this
}

type retentionJSON struct {
	Count         *int    `json:"count,omitempty"`
	MaxAgeMS      *uint64 `json:"max_age_ms,omitempty"`
	MaxTotalBytes *uint64 `json:"max_total_bytes,omitempty"`
}

func (r *Retention) toJSON() (*retentionJSON, error) {
	if r == nil {
		return nil, nil
	}
	if r.Count != nil && *r.Count < 0 {
		return nil, invalid("Retention.Count must not be negative")
	}
	age, err := millis(r.MaxAge, "Retention.MaxAge")
	if err != nil {
		return nil, err
	}
	return &retentionJSON{Count: r.Count, MaxAgeMS: age, MaxTotalBytes: r.MaxTotalBytes}, nil
}

func millis(d *time.Duration, what string) (*uint64, error) {
	if d == nil {
		return nil, nil
	}
	if *d < 0 {
		return nil, invalid(what + " must not be negative")
	}
	ms := uint64(*d / time.Millisecond)
	return &ms, nil
}

// OpenOptions configure Open. Capture settings (Excludes, MaxFileBytes, Gitignore,
// RefuseHardLinks) become the defaults of the workspace's snapshots.
type OpenOptions struct {
	// Store is the store directory; "" means the default: $CAIRN_STORE, else a <root>/.cairn
	// an earlier version made, else the workspace's store in the user's data directory
	// ($CAIRN_HOME, else $XDG_DATA_HOME/cairn, else ~/.local/share/cairn), outside the
	// workspace. It must be UTF-8 (the options document cannot carry other bytes yet).
	Store string
	// ID names the workspace in the store; "" derives it from the root.
	ID string
	// Excludes are globs of paths to leave out, added to the defaults (.git, node_modules,
	// .cairn, the store).
	Excludes []string
	// MaxFileBytes: larger files are skipped. Default: the library's (see cairn.h).
	MaxFileBytes *uint64
	// Gitignore: honour .gitignore and .cairnignore files. Default true.
	Gitignore *bool
	// RefuseHardLinks: skip files with several hard links. Default false.
	RefuseHardLinks *bool
	// Retain is applied after every snapshot. Default: keep everything.
	Retain *Retention
	// GCGrace: unreachable objects younger than this are kept by collections (for
	// snapshots other processes are taking). Default one hour.
	GCGrace *time.Duration
	// Recover: complete restores a crash interrupted when opening. Default true.
	Recover *bool
	// Remote names a remote object store that holds the snapshots (s3://bucket/prefix,
	// gs://bucket/prefix, az://container/prefix, file:///path); Store is then this
	// machine's cache of it. "" means none: Store is the only copy.
	Remote string
	// RemoteOptions say how Remote is reached; nil fields come from the AWS_* variables.
	RemoteOptions *RemoteOptions
}

// RemoteOptions say how a remote store is reached. A nil or empty field takes its default:
// for S3 the AWS_* variables (AWS_ENDPOINT, AWS_REGION, AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY), else AWS itself. An unreachable endpoint fails with ErrIO and
// refused keys with ErrDenied, within seconds; messages name the URL, never a key.
type RemoteOptions struct {
	Endpoint        string // the S3 endpoint (http://127.0.0.1:3900 for a local Garage)
	Region          string // default us-east-1
	AccessKeyID     string
	SecretAccessKey string
	// AllowHTTP: plain HTTP. Default: when Endpoint starts with http://.
	AllowHTTP *bool
	// ConnectTimeout (default 3 s), RequestTimeout (default 300 s), RetryTimeout (no retry
	// starts later than this after the first try, default 5 s), LeaseTTL (the lease time of
	// the store's operations on the remote, default 60 s).
	ConnectTimeout, RequestTimeout, RetryTimeout, LeaseTTL *time.Duration
	MaxRetries                                             *int // default 3
	// Extra are further object_store configuration keys (for gs:// and az:// too).
	Extra map[string]string
}

// String never shows the secret.
func (r RemoteOptions) String() string {
	secret := ""
	if r.SecretAccessKey != "" {
		secret = "(set)"
	}
	return "RemoteOptions{Endpoint: " + r.Endpoint + ", Region: " + r.Region + ", AccessKeyID: " + r.AccessKeyID + ", SecretAccessKey: " + secret + "}"
}

// GoString never shows the secret either (%#v).
func (r RemoteOptions) GoString() string { return r.String() }

type remoteJSON struct {
	Endpoint         string            `json:"endpoint,omitempty"`
	Region           string            `json:"region,omitempty"`
	AccessKeyID      string            `json:"access_key_id,omitempty"`
	SecretAccessKey  string            `json:"secret_access_key,omitempty"`
	AllowHTTP        *bool             `json:"allow_http,omitempty"`
	ConnectTimeoutMS *uint64           `json:"connect_timeout_ms,omitempty"`
	RequestTimeoutMS *uint64           `json:"request_timeout_ms,omitempty"`
	RetryTimeoutMS   *uint64           `json:"retry_timeout_ms,omitempty"`
	LeaseTTLMS       *uint64           `json:"lease_ttl_ms,omitempty"`
	MaxRetries       *int              `json:"max_retries,omitempty"`
	Extra            map[string]string `json:"extra,omitempty"`
}

func (r *RemoteOptions) toJSON() (*remoteJSON, error) {
	if r == nil {
		return nil, nil
	}
	if r.MaxRetries != nil && *r.MaxRetries < 0 {
		return nil, invalid("RemoteOptions.MaxRetries must not be negative")
	}
	j := &remoteJSON{Endpoint: r.Endpoint, Region: r.Region, AccessKeyID: r.AccessKeyID,
		SecretAccessKey: r.SecretAccessKey, AllowHTTP: r.AllowHTTP, MaxRetries: r.MaxRetries, Extra: r.Extra}
	var err error
	for _, d := range []struct {
		v    *time.Duration
		to   **uint64
		name string
	}{
		{r.ConnectTimeout, &j.ConnectTimeoutMS, "RemoteOptions.ConnectTimeout"},
		{r.RequestTimeout, &j.RequestTimeoutMS, "RemoteOptions.RequestTimeout"},
		{r.RetryTimeout, &j.RetryTimeoutMS, "RemoteOptions.RetryTimeout"},
		{r.LeaseTTL, &j.LeaseTTLMS, "RemoteOptions.LeaseTTL"},
	} {
		if *d.to, err = millis(d.v, d.name); err != nil {
			return nil, err
		}
	}
	return j, nil
}

func (o *OpenOptions) encode() ([]byte, error) {
	if o == nil {
		return nil, nil
	}
	if !utf8.ValidString(o.Store) {
		return nil, invalid("OpenOptions.Store must be UTF-8: the options document cannot carry other bytes")
	}
	retain, err := o.Retain.toJSON()
	if err != nil {
		return nil, err
	}
	grace, err := millis(o.GCGrace, "OpenOptions.GCGrace")
	if err != nil {
		return nil, err
	}
	remote, err := o.RemoteOptions.toJSON()
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Store           string         `json:"store,omitempty"`
		ID              string         `json:"id,omitempty"`
		Excludes        []string       `json:"excludes,omitempty"`
		MaxFileBytes    *uint64        `json:"max_file_bytes,omitempty"`
		Gitignore       *bool          `json:"gitignore,omitempty"`
		RefuseHardLinks *bool          `json:"refuse_hard_links,omitempty"`
		Retain          *retentionJSON `json:"retain,omitempty"`
		GCGraceMS       *uint64        `json:"gc_grace_ms,omitempty"`
		Recover         *bool          `json:"recover,omitempty"`
		Remote          string         `json:"remote,omitempty"`
		RemoteOptions   *remoteJSON    `json:"remote_options,omitempty"`
	}{o.Store, o.ID, o.Excludes, o.MaxFileBytes, o.Gitignore, o.RefuseHardLinks, retain, grace, o.Recover, o.Remote, remote})
}

// SnapshotOptions configure Workspace.Snapshot. Capture settings left nil are the
// workspace's.
type SnapshotOptions struct {
	// Label names the snapshot; Show, Diff, Restore... accept a label for the newest
	// snapshot carrying it.
	Label string
	// Metadata is stored with the snapshot (any JSON object).
	Metadata map[string]any
	// Excludes are globs added to the workspace's.
	Excludes        []string
	MaxFileBytes    *uint64
	Gitignore       *bool
	RefuseHardLinks *bool
	// Protect keeps the snapshot from retention.
	Protect bool
	// UseStatCache: trust unchanged size and mtime instead of reading a file again.
	// Default true.
	UseStatCache *bool
	// Progress, when set, is called on the calling goroutine as the snapshot goes. A non-nil
	// error stops the snapshot (nothing is recorded): Snapshot returns an *Error of
	// KindAbortedByCallback wrapping it. A panic in Progress stops it too, and is raised
	// again from Snapshot once the library has returned.
	Progress func(Progress) error
}

func (o *SnapshotOptions) encode() ([]byte, error) {
	if o == nil {
		return nil, nil
	}
	return json.Marshal(struct {
		Label           string         `json:"label,omitempty"`
		Metadata        map[string]any `json:"metadata,omitempty"`
		Excludes        []string       `json:"excludes,omitempty"`
		MaxFileBytes    *uint64        `json:"max_file_bytes,omitempty"`
		Gitignore       *bool          `json:"gitignore,omitempty"`
		RefuseHardLinks *bool          `json:"refuse_hard_links,omitempty"`
		Protect         bool           `json:"protect,omitempty"`
		UseStatCache    *bool          `json:"use_stat_cache,omitempty"`
	}{o.Label, o.Metadata, o.Excludes, o.MaxFileBytes, o.Gitignore, o.RefuseHardLinks, o.Protect, o.UseStatCache})
}

// DriftPolicy says what a restore does with paths edited since its reference snapshot.
type DriftPolicy string

const (
	// DriftOverwrite overwrites them (the safety snapshot keeps them) and lists them in
	// Drifted. The default.
	DriftOverwrite DriftPolicy = "overwrite"
	// DriftRefuse refuses the restore with ErrConflict, naming them.
	DriftRefuse DriftPolicy = "refuse"
	// DriftSkip leaves them as they are (listed in Drifted and Kept).
	DriftSkip DriftPolicy = "skip"
	// DriftKeep is DriftSkip, by the name the command line uses.
	DriftKeep DriftPolicy = "keep"
)

// RestoreOptions configure Workspace.Plan, Apply and Restore.
type RestoreOptions struct {
	// DryRun plans only (Restore returns what it would do).
	DryRun bool
	// Reference is a snapshot to compare the current files with: paths the restore would
	// change that differ from it are drifted.
	Reference string
	// OnDrift says what to do with drifted paths; "" is DriftOverwrite.
	OnDrift DriftPolicy
	// Key is an idempotency key: repeating a finished key returns the earlier report (without
	// its SafetyWalk: the repeat walked nothing).
	Key string
	// Paths restricts the restore to these files and directories (relative to the root; a
	// directory with everything under it): every other path is left as it is. nil: all.
	Paths []string
}

func (o *RestoreOptions) encode() ([]byte, error) {
	if o == nil {
		return nil, nil
	}
	return json.Marshal(struct {
		DryRun    bool        `json:"dry_run,omitempty"`
		Reference string      `json:"reference,omitempty"`
		OnDrift   DriftPolicy `json:"on_drift,omitempty"`
		Key       string      `json:"key,omitempty"`
		Paths     []string    `json:"paths,omitempty"`
	}{o.DryRun, o.Reference, o.OnDrift, o.Key, o.Paths})
}

// DiffOptions configure Workspace.DiffWith.
type DiffOptions struct {
	// Attribute names, for each change, the checkpoint intervals it changed in and the tool
	// call or subagent that opened each (Change.Attribution).
	Attribute bool
}

func (o *DiffOptions) encode() ([]byte, error) {
	if o == nil {
		return nil, nil
	}
	return json.Marshal(struct {
		Attribute bool `json:"attribute,omitempty"`
	}{o.Attribute})
}

// GCOptions configure Workspace.GC.
type GCOptions struct {
	// Grace overrides the workspace's grace period. A zero Grace deletes unreachable
	// objects at once: use it only when no other process shares the store.
	Grace *time.Duration
	// DryRun returns the plan and changes nothing.
	DryRun bool
	// ClockSkew is how far the clocks of the machines sharing a remote may differ (default a
	// minute). Only for a workspace whose store caches a remote: elsewhere it is refused
	// (KindInvalidArgument).
	ClockSkew *time.Duration
}

func (o *GCOptions) encode() ([]byte, error) {
	if o == nil {
		return nil, nil
	}
	grace, err := millis(o.Grace, "GCOptions.Grace")
	if err != nil {
		return nil, err
	}
	skew, err := millis(o.ClockSkew, "GCOptions.ClockSkew")
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		GraceMS     *uint64 `json:"grace_ms,omitempty"`
		DryRun      bool    `json:"dry_run,omitempty"`
		ClockSkewMS *uint64 `json:"clock_skew_ms,omitempty"`
	}{grace, o.DryRun, skew})
}

// WatchOptions configure Workspace.Watch.
type WatchOptions struct {
	// MaxWatches: watch at most this many directories; those past it are walked by every
	// snapshot (listed in WatchStatus.Unwatched). nil: only the kernel's limit.
	MaxWatches *int
}

func (o *WatchOptions) encode() ([]byte, error) {
	if o == nil {
		return nil, nil
	}
	if o.MaxWatches != nil && *o.MaxWatches < 0 {
		return nil, invalid("WatchOptions.MaxWatches must not be negative")
	}
	return json.Marshal(struct {
		MaxWatches *int `json:"max_watches,omitempty"`
	}{o.MaxWatches})
}
