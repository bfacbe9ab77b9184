package cairn

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Where checkpoints live when no store is given (issue 19): outside the workspace, in the
// data directory ($CAIRN_HOME here), so that wiping the tree (as git clean -fdx or rm -rf do)
// loses nothing.
func TestAWorkspaceOpenedWithoutAStoreKeepsItInTheDataDirectoryAndSurvivesAWipe(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	home := filepath.Join(dir, "cairn-home")
	t.Setenv("CAIRN_HOME", home)
	t.Setenv("CAIRN_STORE", "")
	f := &fixture{t: t, dir: dir, root: filepath.Join(dir, "project")}
	if err := os.MkdirAll(filepath.Join(f.root, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.write("src/main.go", "package main\n")
	f.write("untracked.txt", "work not committed yet\n")

	f.ws = f.open(f.root, nil)
	info, err := f.ws.Info()
	if err != nil || info.StoreHome != "data" || filepath.Dir(info.Store) != filepath.Join(home, "stores") {
		t.Fatalf("Info: %v %+v", err, info)
	}
	if !regexp.MustCompile(`^project-[0-9a-f]{16}$`).MatchString(filepath.Base(info.Store)) {
		t.Fatalf("store name %q", info.Store)
	}
	snap := f.snap("before-wipe")
	f.ws.Close()
	if f.exists(".cairn") {
		t.Fatal("a store was made inside the workspace")
	}
	if st, err := os.Stat(home); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("data directory: %v %v", err, st)
	}

	// The agent wipes every entry of the root but .git.
	entries, err := os.ReadDir(f.root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != ".git" {
			if err := os.RemoveAll(filepath.Join(f.root, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.ws = f.open(f.root, nil)
	list, err := f.ws.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != snap.ID {
		t.Fatalf("List: %v %+v", err, list)
	}
	if _, err := f.ws.Restore(ctx, "before-wipe", nil); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got := f.read("untracked.txt"); got != "work not committed yet\n" {
		t.Fatalf("untracked.txt = %q", got)
	}

	// Another workspace opened the same way sees none of it.
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	ow := f.open(other, nil)
	if l, err := ow.List(ctx); err != nil || len(l) != 0 {
		t.Fatalf("the other workspace lists %v %+v", err, l)
	}
}
