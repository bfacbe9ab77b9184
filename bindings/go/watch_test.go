package cairn

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// A watcher inside the process: Workspace.Watch and Unwatch, and what each snapshot says it
// walked (Snapshot.Walk). A snapshot reads the watcher's events before it walks, so no test
// waits for it.

func changed(t *testing.T, ws *Workspace, a, b *Snapshot) [][2]string {
	t.Helper()
	c, err := ws.Diff(context.Background(), a.ID, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	for _, x := range c {
		out = append(out, [2]string{x.Path, string(x.Kind)})
	}
	return out
}

func TestAWatchedWorkspaceSnapshotsOnlyTheDirectoriesThatChanged(t *testing.T) {
	f := newFixture(t)
	f.write("src/main.go", "package main\n")
	f.write("README", "hello\n")
	status, err := f.ws.Watch(nil)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(f.root)
	if err != nil {
		t.Fatal(err)
	}
	if status.Root != root || status.Watches < 2 || len(status.Unwatched) != 0 || status.Gone || status.Overflows != 0 {
		t.Fatalf("status: %+v", status)
	}

	// The first snapshot with this watcher has no earlier one to count from: it walks it all.
	first := f.snap("first")
	if first.Walk.Walked != WalkedFull || first.Walk.Reason == "" {
		t.Fatalf("first: %+v", first.Walk)
	}

	f.write("src/main.go", "package main // changed while watched\n")
	second := f.snap("second")
	if second.Walk.Walked != WalkedPartial || second.Walk.Listed+second.Walk.Named < 1 {
		t.Fatalf("second: %+v", second.Walk)
	}
	if c := changed(t, f.ws, first, second); len(c) != 1 || c[0] != [2]string{"src/main.go", "modified"} {
		t.Fatalf("diff first second: %v", c)
	}
	d, err := f.ws.Diff(context.Background(), first.ID, second.ID)
	if err != nil || d[0].New.Size != uint64(len("package main // changed while watched\n")) {
		t.Fatalf("the new content is not in the snapshot: %+v %v", d, err)
	}

	third := f.snap("third")
	if third.Walk.Walked == WalkedFull {
		t.Fatalf("nothing changed, yet: %+v", third.Walk)
	}
	if third.Root != second.Root {
		t.Fatalf("third %s, second %s", third.Root, second.Root)
	}

	if err := f.ws.Unwatch(); err != nil {
		t.Fatal(err)
	}
	if err := f.ws.Unwatch(); err != nil { // none runs: nothing to do
		t.Fatal(err)
	}
	// Without the watcher every snapshot walks it all, and finds what the watched ones found.
	full := f.snap("full")
	if full.Walk.Walked != WalkedFull || full.Walk.Reason != "" || full.Root != third.Root {
		t.Fatalf("full: %+v (root %s, third's %s)", full.Walk, full.Root, third.Root)
	}
	f.write("src/main.go", "package main // changed after Unwatch\n")
	after := f.snap("after")
	if after.Walk.Walked != WalkedFull || after.Walk.Reason != "" {
		t.Fatalf("after: %+v", after.Walk)
	}
	if c := changed(t, f.ws, full, after); len(c) != 1 || c[0] != [2]string{"src/main.go", "modified"} {
		t.Fatalf("diff full after: %v", c)
	}
}

func TestUnknownWatchOptionsAreRefusedWithInvalidArgument(t *testing.T) {
	f := newFixture(t)
	f.write("a.txt", "a")
	// An option the library does not know: a document Watch cannot make.
	_, err := f.ws.watch([]byte(`{"max_watch": 1}`))
	if e := wantKind(t, err, KindInvalidArgument); !strings.Contains(e.Message, "max_watch") {
		t.Fatalf("the message does not name the option: %v", e)
	}
	// Found on the Go side, before any call.
	_, err = f.ws.Watch(&WatchOptions{MaxWatches: ptr(-1)})
	wantKind(t, err, KindInvalidArgument)
	// Nothing was started: snapshots walk as before.
	if s := f.snap(""); s.Walk.Walked != WalkedFull || s.Walk.Reason != "" {
		t.Fatalf("%+v", s.Walk)
	}
}

func TestMaxWatchesLeavesTheDirectoriesPastItUnwatched(t *testing.T) {
	f := newFixture(t)
	f.write("top.txt", "t")
	f.write("a/b/c.txt", "c")
	status, err := f.ws.Watch(&WatchOptions{MaxWatches: ptr(1)})
	if err != nil {
		t.Fatal(err)
	}
	if status.Watches != 1 || len(status.Unwatched) != 1 || !strings.HasPrefix(status.Unwatched[0], "a:") {
		t.Fatalf("status: %+v", status)
	}
	before := f.snap("before")
	f.write("a/b/c.txt", "changed")
	// The unwatched subtree is walked by every snapshot, and the walk says so.
	snap := f.snap("after")
	if snap.Walk.Walked != WalkedPartial || snap.Walk.Reason == "" {
		t.Fatalf("%+v", snap.Walk)
	}
	if c := changed(t, f.ws, before, snap); len(c) != 1 || c[0][0] != "a/b/c.txt" {
		t.Fatalf("%v", c)
	}
}

func TestAClosedWorkspaceRefusesWatchAndUnwatch(t *testing.T) {
	f := newFixture(t)
	if _, err := f.ws.Watch(nil); err != nil {
		t.Fatal(err)
	}
	f.ws.Close() // stops the watcher with the handle
	if _, err := f.ws.Watch(nil); err != ErrClosed {
		t.Fatalf("Watch after Close: %v", err)
	}
	if err := f.ws.Unwatch(); err != ErrClosed {
		t.Fatalf("Unwatch after Close: %v", err)
	}
}
