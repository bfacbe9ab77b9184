package cairn

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every status the library knows has a Kind of the same name and a sentinel that errors.Is
// matches with errors of that kind and no other.
func TestEveryStatusMapsToAKindAndASentinel(t *testing.T) {
	n := 0
	for st := uint32(1); ; st++ {
		name := statusName(st)
		if name == "UNKNOWN" {
			break
		}
		n++
		k := Kind(st)
		t.Run(name, func(t *testing.T) {
			if k.String() != name {
				t.Fatalf("Kind(%d).String() = %q, want %q", st, k.String(), name)
			}
			s := k.Sentinel()
			if s == nil {
				t.Fatalf("no sentinel for %s", name)
			}
			err := error(&Error{Kind: k, Message: "m", Path: "p"})
			for _, other := range sentinels {
				if got := errors.Is(err, other); got != (other == s) {
					t.Fatalf("errors.Is(%s error, sentinel of %v) = %v", name, other.Kind, got)
				}
			}
			if !strings.Contains(s.Error(), k.Description()) || !strings.Contains(s.Error(), name) {
				t.Fatalf("sentinel text %q", s.Error())
			}
			if err.Error() != "cairn: m ("+name+")" {
				t.Fatalf("Error() = %q", err.Error())
			}
		})
	}
	if n != len(sentinels) {
		t.Fatalf("the library knows %d statuses, the package has %d sentinels", n, len(sentinels))
	}
	if Kind(n+1).Sentinel() != nil || Kind(n+1).String() != "UNKNOWN("+itoa(n+1)+")" {
		t.Fatalf("an unknown kind: %v", Kind(n+1))
	}
	for i, s := range sentinels {
		if s.Kind != Kind(i+1) {
			t.Fatalf("sentinels[%d] has kind %v", i, s.Kind)
		}
	}
}

func TestTheABICheckRefusesAnotherVersionWithAClearMessage(t *testing.T) {
	if err := checkABI(ABIVersion, ABIVersion); err != nil {
		t.Fatal(err)
	}
	if LibraryABIVersion() != ABIVersion || Version() == "" {
		t.Fatalf("library ABI %d, version %q", LibraryABIVersion(), Version())
	}
	err := checkABI(ABIVersion, ABIVersion+1)
	if err == nil || !strings.Contains(err.Error(), "ABI version mismatch") || !strings.Contains(err.Error(), "build-lib.sh") {
		t.Fatalf("checkABI: %v", err)
	}
}

// writeManifest puts a manifest file of the given bytes into the store, named by its hash
// as the store names them, and returns its id.
func writeManifest(t *testing.T, store string, body []byte) string {
	t.Helper()
	sum := sha256.Sum256(body)
	id := hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(store, "snapshots", id), body, 0o600); err != nil {
		t.Fatal(err)
	}
	return id
}

// Each kind the file API can produce, provoked for real through the library.
func TestEveryErrorKindOfTheFileAPIIsProvoked(t *testing.T) {
	ctx := context.Background()

	t.Run("INVALID_ARGUMENT", func(t *testing.T) {
		f := newFixture(t)
		f.write("a.txt", "a")
		f.snap("one")
		_, err := f.ws.Restore(ctx, "one", &RestoreOptions{OnDrift: "sideways"})
		wantKind(t, err, KindInvalidArgument)
		_, err = f.ws.Show(ctx, "\xff\xfe")
		wantKind(t, err, KindInvalidArgument)
		_, err = f.ws.Restore(ctx, "one", &RestoreOptions{Reference: "not-an-id"})
		wantKind(t, err, KindInvalidArgument)
		_, err = Open(ctx, "", nil)
		wantKind(t, err, KindInvalidArgument)
		// Found on the Go side, before any call.
		_, err = Open(ctx, f.root, &OpenOptions{Store: "\xff"})
		wantKind(t, err, KindInvalidArgument)
		_, err = f.ws.Prune(ctx, Retention{Count: ptr(-1)})
		wantKind(t, err, KindInvalidArgument)
	})

	t.Run("NOT_FOUND", func(t *testing.T) {
		f := newFixture(t)
		_, err := f.ws.Show(ctx, "ffffffff")
		wantKind(t, err, KindNotFound)
		_, err = f.ws.Restore(ctx, "no-such-label", nil)
		wantKind(t, err, KindNotFound)
		missing := filepath.Join(f.dir, "does-not-exist")
		_, err = Open(ctx, missing, nil)
		e := wantKind(t, err, KindNotFound)
		if !strings.Contains(e.Path, "does-not-exist") {
			t.Fatalf("the error's path is %q", e.Path)
		}
	})

	t.Run("BUSY", func(t *testing.T) {
		f := newFixture(t)
		f.write("a.txt", "a")
		f.snap("one")
		f.write("a.txt", "b")
		h, err := f.ws.Hold(ctx, "a build", NoProcess)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		_, err = f.ws.Restore(ctx, "one", nil)
		wantKind(t, err, KindBusy)
		if f.read("a.txt") != "b" {
			t.Fatal("a busy restore changed a file")
		}
	})

	t.Run("DENIED", func(t *testing.T) {
		// Overwriting a file that is ignored now (so no safety snapshot would keep it).
		f := newFixture(t)
		f.write("notes.log", "from the snapshot")
		f.snap("one")
		f.write(".gitignore", "*.log\n")
		f.write("notes.log", "precious, ignored now")
		_, err := f.ws.Restore(ctx, "one", nil)
		e := wantKind(t, err, KindDenied)
		if !strings.Contains(e.Message, "notes.log") || !strings.HasSuffix(e.Path, "notes.log") {
			t.Fatalf("message %q, path %q", e.Message, e.Path)
		}
		if f.read("notes.log") != "precious, ignored now" {
			t.Fatal("a denied restore changed the file")
		}
	})

	t.Run("CONFLICT", func(t *testing.T) {
		f := newFixture(t)
		f.write("a.txt", "one")
		f.write("b.txt", "one")
		one := f.snap("one")
		f.write("a.txt", "two")
		f.write("b.txt", "two")
		two := f.snap("two")
		f.write("a.txt", "edited by someone else")
		_, err := f.ws.Restore(ctx, one.ID, &RestoreOptions{Reference: two.ID, OnDrift: DriftRefuse})
		e := wantKind(t, err, KindConflict)
		if !strings.HasSuffix(e.Path, "a.txt") {
			t.Fatalf("path %q", e.Path)
		}
		// Skipping instead keeps the edit and says so.
		r, err := f.ws.Restore(ctx, one.ID, &RestoreOptions{Reference: two.ID, OnDrift: DriftSkip})
		if err != nil || len(r.Drifted) != 1 || r.Drifted[0] != "a.txt" || f.read("a.txt") != "edited by someone else" || f.read("b.txt") != "one" {
			t.Fatalf("skip: %v %+v", err, r)
		}
	})

	t.Run("CORRUPT", func(t *testing.T) {
		f := newFixture(t)
		id := writeManifest(t, f.store, []byte("CAIRNMAN\x01\x00\x00\x00 not postcard at all"))
		_, err := f.ws.Show(ctx, id)
		wantKind(t, err, KindCorrupt)
	})

	t.Run("UNSUPPORTED", func(t *testing.T) {
		f := newFixture(t)
		body := []byte("CAIRNMAN")
		body = binary.LittleEndian.AppendUint32(body, 99)
		id := writeManifest(t, f.store, append(body, "from the future"...))
		_, err := f.ws.Show(ctx, id)
		e := wantKind(t, err, KindUnsupported)
		if !strings.Contains(e.Path, id) {
			t.Fatalf("path %q", e.Path)
		}
	})

	t.Run("IO", func(t *testing.T) {
		// The store's path runs through a regular file.
		f := newFixture(t)
		file := filepath.Join(f.dir, "a-file")
		if err := os.WriteFile(file, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(ctx, f.root, &OpenOptions{Store: filepath.Join(file, "store")})
		wantKind(t, err, KindIO)
	})

	t.Run("CANCELLED", func(t *testing.T) {
		f := newFixture(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := f.ws.Snapshot(cctx, nil)
		wantKind(t, err, KindCancelled)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%v does not wrap context.Canceled", err)
		}
	})

	t.Run("NULL_ARGUMENT", func(t *testing.T) {
		// The Go API never passes NULL; the library's answer still maps to the sentinel.
		wantKind(t, debugNullArgument(), KindNullArgument)
	})

	t.Run("PANIC", func(t *testing.T) {
		e := wantKind(t, debugPanic(), KindPanic)
		if !strings.Contains(e.Message, "cairn_debug_panic") {
			t.Fatalf("message %q", e.Message)
		}
	})

	t.Run("ABORTED_BY_CALLBACK", func(t *testing.T) {
		f := newFixture(t)
		f.write("a.txt", "a")
		stop := errors.New("stop here")
		_, err := f.ws.Snapshot(ctx, &SnapshotOptions{Progress: func(Progress) error { return stop }})
		wantKind(t, err, KindAbortedByCallback)
		if !errors.Is(err, stop) || !strings.Contains(err.Error(), "stop here") {
			t.Fatalf("%v does not wrap the callback's error", err)
		}
		if list, _ := f.ws.List(ctx); len(list) != 0 {
			t.Fatal("an aborted snapshot was recorded")
		}
	})

	// VALIDATION, WORKSPACE_BUSY, THREAD_BUSY and RUN_INTERRUPTED come from threads and runs:
	// see TestTheErrorKindsOfThreadsAndRunsAreProvoked.
}
