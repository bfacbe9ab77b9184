package cairn

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestTheWholeFlowThroughTheGoAPI(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.write("src/main.c", "int main(void) { return 0; }\n")
	f.write("README", "hello\n")
	f.write("caf\xe9.txt", "latin-1 name\n")

	// Snapshot, with progress.
	var calls int
	var last Progress
	snap, err := f.ws.Snapshot(ctx, &SnapshotOptions{
		Label:    "first",
		Metadata: map[string]any{"message": "m1"},
		Progress: func(p Progress) error { calls++; last = p; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.ID) != 64 || snap.Label != "first" || snap.Stats.Files != 3 {
		t.Fatalf("snapshot: %+v", snap)
	}
	if calls < 1 || last.Files != 3 {
		t.Fatalf("progress: %d calls, last %+v", calls, last)
	}
	if snap.Metadata["message"] != "m1" {
		t.Fatalf("metadata: %v", snap.Metadata)
	}
	if snap.Created.IsZero() || time.Since(snap.Created) > time.Hour {
		t.Fatalf("created: %v", snap.Created)
	}

	// List, Show by label, by prefix and by id.
	list, err := f.ws.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != snap.ID {
		t.Fatalf("List: %v %+v", err, list)
	}
	for _, name := range []string{"first", snap.ID[:8], snap.ID} {
		s, err := f.ws.Show(ctx, name)
		if err != nil || s.ID != snap.ID {
			t.Fatalf("Show(%q): %v %+v", name, err, s)
		}
	}

	// Change the files; Diff against the live workspace.
	f.write("src/main.c", "int main(void) { return 1; }\n")
	f.write("new.txt", "made later\n")
	changes, err := f.ws.Diff(ctx, "first", "")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]ChangeKind{}
	for _, c := range changes {
		kinds[c.Path] = c.Kind
	}
	if kinds["src/main.c"] != ChangeModified || kinds["new.txt"] != ChangeAdded || len(kinds) != 2 {
		t.Fatalf("Diff: %+v", changes)
	}

	// Plan (the dry run changes nothing), then Apply.
	plan, err := f.ws.Plan(ctx, "first", nil)
	if err != nil {
		t.Fatal(err)
	}
	if plan.SnapshotID != snap.ID || !slices.Equal(plan.Deleted, []string{"new.txt"}) || len(plan.Actions) == 0 {
		t.Fatalf("Plan: %+v", plan)
	}
	if !strings.Contains(f.read("src/main.c"), "return 1") {
		t.Fatal("the plan changed a file")
	}
	report, err := f.ws.Apply(ctx, plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.read("src/main.c"), "return 0") || f.exists("new.txt") || f.read("caf\xe9.txt") != "latin-1 name\n" {
		t.Fatal("Apply did not restore the files")
	}
	if len(report.SafetySnapshotID) != 64 || !report.AsPlanned || report.DryRun {
		t.Fatalf("Apply report: %+v", report)
	}

	// Undo through the safety snapshot.
	undo, err := f.ws.Restore(ctx, report.SafetySnapshotID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.read("new.txt") != "made later\n" || !slices.Contains(undo.Restored, "new.txt") {
		t.Fatalf("undo: %+v", undo)
	}
	// A dry run changes nothing.
	dry, err := f.ws.Restore(ctx, "first", &RestoreOptions{DryRun: true})
	if err != nil || !dry.DryRun || !f.exists("new.txt") {
		t.Fatalf("dry run: %v %+v", err, dry)
	}

	// Verify, Info, Recover.
	v, err := f.ws.Verify(ctx)
	if err != nil || !v.OK || v.CopiesChecked == 0 || len(v.Snapshots) < 2 {
		t.Fatalf("Verify: %v %+v", err, v)
	}
	info, err := f.ws.Info()
	if err != nil || info.Root != f.root || info.Store != f.store || info.ID == "" {
		t.Fatalf("Info: %v %+v", err, info)
	}
	rec, err := f.ws.Recover(ctx)
	if err != nil || len(rec) != 0 {
		t.Fatalf("Recover: %v %+v", err, rec)
	}
	if rec, err := f.ws.GiveUp(ctx); err != nil || len(rec) != 0 {
		t.Fatalf("GiveUp: %v %+v", err, rec)
	}

	// Copy into another workspace's store, and restore it there.
	otherRoot := filepath.Join(f.dir, "other")
	if err := os.Mkdir(otherRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	other := f.open(otherRoot, nil)
	cp, err := f.ws.Copy(ctx, snap.ID, other)
	if err != nil || cp.Snapshot != snap.ID || cp.ObjectsCopied == 0 || cp.AlreadyPresent {
		t.Fatalf("Copy: %v %+v", err, cp)
	}
	again, err := f.ws.Copy(ctx, snap.ID, other)
	if err != nil || !again.AlreadyPresent {
		t.Fatalf("Copy again: %v %+v", err, again)
	}
	if _, err := other.Restore(ctx, snap.ID, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(otherRoot, "caf\xe9.txt")); string(b) != "latin-1 name\n" {
		t.Fatalf("the copy restored %q", b)
	}

	// Holds make restores busy.
	f.write("README", "changed\n")
	hold, err := f.ws.Hold(ctx, "make test", NoProcess)
	if err != nil {
		t.Fatal(err)
	}
	plan, err = f.ws.Plan(ctx, "first", nil)
	if err != nil || !plan.Busy {
		t.Fatalf("a plan under a hold: %v %+v", err, plan)
	}
	_, err = f.ws.Restore(ctx, "first", nil)
	wantKind(t, err, KindBusy)
	if err := hold.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ws.Restore(ctx, "first", nil); err != nil {
		t.Fatal(err)
	}
	if f.read("README") != "hello\n" {
		t.Fatal("the restore after the hold did not restore README")
	}

	// GC (dry run, then at once), Prune, Delete.
	gcPlan, err := f.ws.GC(ctx, &GCOptions{DryRun: true})
	if err != nil || !gcPlan.DryRun || gcPlan.Plan.Snapshots == 0 {
		t.Fatalf("GC dry run: %v %+v", err, gcPlan)
	}
	if _, err := f.ws.GC(ctx, &GCOptions{Grace: ptr(time.Duration(0))}); err != nil {
		t.Fatal(err)
	}
	before, _ := f.ws.List(ctx)
	pr, err := f.ws.Prune(ctx, Retention{Count: ptr(100)})
	if err != nil || len(pr.Deleted) != 0 || pr.Kept != len(before) {
		t.Fatalf("Prune keeping all: %v %+v", err, pr)
	}
	del, err := f.ws.Delete(ctx, snap.ID)
	if err != nil || !slices.Equal(del.Deleted, []string{snap.ID}) {
		t.Fatalf("Delete: %v %+v", err, del)
	}
	_, err = f.ws.Show(ctx, snap.ID)
	wantKind(t, err, KindNotFound)
	pr, err = f.ws.Prune(ctx, Retention{Count: ptr(1)})
	if err != nil || pr.Kept != 1 {
		t.Fatalf("Prune to one: %v %+v", err, pr)
	}
	if list, _ := f.ws.List(ctx); len(list) != 1 {
		t.Fatalf("after Prune: %d snapshots", len(list))
	}
}

func TestPathsHoldTheirExactBytesWhenTheyAreNotUTF8(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root := filepath.Join(dir, "root-\xff\xfe")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: dir, root: root, store: filepath.Join(dir, "store")}
	f.ws = f.open(root, &OpenOptions{Store: f.store})
	info, err := f.ws.Info()
	if err != nil || info.Root != root {
		t.Fatalf("Info.Root = %q, want %q (%v)", info.Root, root, err)
	}
	name := "dir-\x80/caf\xe9.txt"
	f.write(name, "bytes\n")
	f.write("plain.txt", "text\n")
	f.snap("one")
	if err := os.Remove(filepath.Join(root, name)); err != nil {
		t.Fatal(err)
	}
	f.write("extra-\xc3.txt", "new\n")
	changes, err := f.ws.Diff(ctx, "one", "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ChangeKind{}
	for _, c := range changes {
		got[c.Path] = c.Kind
	}
	if got[name] != ChangeDeleted || got["extra-\xc3.txt"] != ChangeAdded {
		t.Fatalf("Diff: %+v", changes)
	}
	plan, err := f.ws.Plan(ctx, "one", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(plan.Restored, name) || !slices.Equal(plan.Deleted, []string{"extra-\xc3.txt"}) {
		t.Fatalf("Plan: restored %q deleted %q", plan.Restored, plan.Deleted)
	}
	// The plan survives a trip through its JSON document unchanged, non-UTF-8 paths and all.
	doc, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	var again Plan
	if err := json.Unmarshal(doc, &again); err != nil {
		t.Fatal(err)
	}
	report, err := f.ws.Apply(ctx, &again, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(report.Restored, name) || f.read(name) != "bytes\n" || f.exists("extra-\xc3.txt") {
		t.Fatalf("Apply: %+v", report)
	}
}

func TestJSONPathsDecodeFromBothForms(t *testing.T) {
	var c []Change
	doc := `[{"path":"a/b.txt","kind":"added","old":null,"new":{"kind":"file","mode":33188,"size":3,"id":"ab"}},` +
		`{"path":{"hex":"6361666e"},"kind":"deleted","old":null,"new":null},` +
		`{"path":{"hex":"e9ff"},"kind":"modified","old":null,"new":null}]`
	if err := json.Unmarshal([]byte(doc), &c); err != nil {
		t.Fatal(err)
	}
	if c[0].Path != "a/b.txt" || c[1].Path != "cafn" || c[2].Path != "\xe9\xff" || c[0].New.Size != 3 {
		t.Fatalf("%+v", c)
	}
	for _, bad := range []string{`{"path":{"hex":"zz"}}`, `{"path":{"x":"00"}}`, `{"path":3}`} {
		var one Change
		if err := json.Unmarshal([]byte(bad), &one); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
}

func TestStorePathsInACollectionOrACheckDecodeFromBothForms(t *testing.T) {
	var plan GCPlan
	doc := `{"snapshots":1,"orphan_packs":["/s/objects/packs/a.pack"],"temp_files":[{"hex":"2f732f746d702f78ff"}],` +
		`"foreign":[],"symlinks":[{"hex":"6c"}],"delete_packs":[],"repack":[],"delete_large":[],"unreadable":[]}`
	if err := json.Unmarshal([]byte(doc), &plan); err != nil {
		t.Fatal(err)
	}
	if plan.Snapshots != 1 || plan.OrphanPacks[0] != "/s/objects/packs/a.pack" ||
		plan.TempFiles[0] != "/s/tmp/x\xff" || plan.Symlinks[0] != "l" || len(plan.Foreign) != 0 {
		t.Fatalf("%+v", plan)
	}
	var bad BadCopy
	var broken BrokenIndex
	if err := json.Unmarshal([]byte(`{"id":"ab","path":{"hex":"ff"},"error":"e"}`), &bad); err != nil ||
		bad.Path != "\xff" || bad.ID != "ab" || bad.Error != "e" {
		t.Fatalf("%+v %v", bad, err)
	}
	if err := json.Unmarshal([]byte(`{"path":"/s/p.idx","error":"short"}`), &broken); err != nil ||
		broken.Path != "/s/p.idx" || broken.Error != "short" {
		t.Fatalf("%+v %v", broken, err)
	}
}

func TestAPlanNotMadeByTheLibraryIsRefusedBeforeAnyCall(t *testing.T) {
	f := newFixture(t)
	_, err := f.ws.Apply(context.Background(), &Plan{SnapshotID: strings.Repeat("0", 64)}, nil)
	wantKind(t, err, KindInvalidArgument)
	if _, err := json.Marshal(Plan{}); err == nil {
		t.Fatal("an empty Plan marshalled")
	}
}
