package cairn

import (
	"bytes"
	"context"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tree reads every file and directory under root: relative path -> content ("/" for a
// directory).
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if d.IsDir() {
			out[rel] = "/"
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, want, got string) {
	t.Helper()
	a, b := tree(t, want), tree(t, got)
	if len(a) != len(b) {
		t.Fatalf("%s has %d entries, %s has %d", want, len(a), got, len(b))
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal([]byte(v), []byte(w)) {
			t.Fatalf("%s differs between %s and %s", k, want, got)
		}
	}
}

func TestASnapshotIntoAFileRemoteIsRestoredByteForByteIntoAnotherWorkspaceWithItsOwnCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	remoteDir := filepath.Join(dir, "remote")
	if err := os.Mkdir(remoteDir, 0o755); err != nil {
		t.Fatal(err)
	}
	url := "file://" + remoteDir
	f := &fixture{t: t, dir: dir, root: filepath.Join(dir, "a")}
	if err := os.Mkdir(f.root, 0o755); err != nil {
		t.Fatal(err)
	}
	f.many("src", 120)
	f.write("bin/blob", string([]byte{0, 1, 2, 255, 254, '\n'}))
	f.write("README.md", "# machine A\n")
	f.ws = f.open(f.root, &OpenOptions{Store: filepath.Join(dir, "cache-a"), Remote: url})
	info, err := f.ws.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Remote != url {
		t.Fatalf("Info().Remote = %q, want %q", info.Remote, url)
	}
	snap := f.snap("from-a")

	// Machine B: its own root and cache, the same remote.
	rootB := filepath.Join(dir, "b")
	if err := os.Mkdir(rootB, 0o755); err != nil {
		t.Fatal(err)
	}
	cacheB := filepath.Join(dir, "cache-b")
	b := f.open(rootB, &OpenOptions{Store: cacheB, Remote: url})
	list, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != snap.ID {
		t.Fatalf("B lists %v, want only %s", list, snap.ID)
	}
	if _, err := b.Restore(ctx, "from-a", nil); err != nil {
		t.Fatalf("restore on B: %v", err)
	}
	sameTree(t, f.root, rootB)

	// Trimming B's cache to nothing keeps what the remote holds; a restore fetches it again.
	trim, err := b.TrimCache(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if trim.RemovedFiles == 0 || trim.CachedBytes != 0 {
		t.Fatalf("TrimCache(0) = %+v: want files removed and nothing left", trim)
	}
	if err := os.RemoveAll(rootB); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(rootB, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Restore(ctx, snap.ID, nil); err != nil {
		t.Fatalf("restore after the trim: %v", err)
	}
	sameTree(t, f.root, rootB)

	// gc runs the remote's collector: everything is reachable, nothing is deleted.
	gc, err := b.GC(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gc.Remote == nil || gc.Remote.Snapshots < 1 || gc.Remote.PacksDeleted != 0 {
		t.Fatalf("GC on a remote workspace = %+v (remote %+v)", gc, gc.Remote)
	}
}

func TestTrimCacheOfAWorkspaceWithoutARemoteIsUnsupported(t *testing.T) {
	f := newFixture(t)
	_, err := f.ws.TrimCache(context.Background(), 0)
	wantKind(t, err, KindUnsupported)
}

func TestRemoteOptionsWithoutARemoteAreRefused(t *testing.T) {
	root, store := t.TempDir(), filepath.Join(t.TempDir(), "store")
	_, err := Open(context.Background(), root, &OpenOptions{Store: store, RemoteOptions: &RemoteOptions{Region: "x"}})
	wantKind(t, err, KindInvalidArgument)
}

func TestAnUnreachableEndpointFailsWithIOWithinSecondsNamingTheURLAndNotTheSecret(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-never-shown-0123456789"
	opts := &RemoteOptions{
		Endpoint:        "http://127.0.0.1:" + itoa(port),
		Region:          "garage",
		AccessKeyID:     "GK0123456789abcdef",
		SecretAccessKey: secret,
	}
	if strings.Contains(opts.String(), secret) {
		t.Fatalf("RemoteOptions.String shows the secret: %s", opts)
	}
	started := time.Now()
	_, err = Open(context.Background(), root, &OpenOptions{Store: filepath.Join(dir, "cache"), Remote: "s3://fleet/team-a", RemoteOptions: opts})
	took := time.Since(started)
	e := wantKind(t, err, KindIO)
	if took > 10*time.Second {
		t.Fatalf("the failure took %v", took)
	}
	if !strings.Contains(e.Message, "s3://fleet/team-a") || strings.Contains(e.Error(), secret) {
		t.Fatalf("the message must name the URL and not the secret: %s", e.Message)
	}
}
