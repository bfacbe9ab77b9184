package cairn

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fixture is a workspace root with its store beside it (not inside), opened.
type fixture struct {
	t     *testing.T
	dir   string
	root  string
	store string
	ws    *Workspace
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{t: t, dir: dir, root: filepath.Join(dir, "root"), store: filepath.Join(dir, "store")}
	if err := os.Mkdir(f.root, 0o755); err != nil {
		t.Fatal(err)
	}
	f.ws = f.open(f.root, &OpenOptions{Store: f.store})
	return f
}

func (f *fixture) open(root string, opts *OpenOptions) *Workspace {
	f.t.Helper()
	ws, err := Open(context.Background(), root, opts)
	if err != nil {
		f.t.Fatalf("Open(%q): %v", root, err)
	}
	f.t.Cleanup(func() { ws.Close() })
	return ws
}

func (f *fixture) write(rel, content string) {
	f.t.Helper()
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) read(rel string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.root, rel))
	if err != nil {
		f.t.Fatalf("read %q: %v", rel, err)
	}
	return string(b)
}

func (f *fixture) exists(rel string) bool {
	_, err := os.Lstat(filepath.Join(f.root, rel))
	return err == nil
}

func (f *fixture) snap(label string) *Snapshot {
	f.t.Helper()
	s, err := f.ws.Snapshot(context.Background(), &SnapshotOptions{Label: label})
	if err != nil {
		f.t.Fatalf("Snapshot(%q): %v", label, err)
	}
	return s
}

// many writes n small files under dir.
func (f *fixture) many(dir string, n int) {
	f.t.Helper()
	for i := range n {
		f.write(filepath.Join(dir, "d"+itoa(i%40), "f"+itoa(i)+".txt"), "content to hash, content to hash, "+itoa(i)+"\n")
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// wantKind fails unless err is an *Error of kind k that errors.Is matches with k's sentinel
// (and with no other sentinel).
func wantKind(t *testing.T, err error, k Kind) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error of kind %v, got nil", k)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want an *Error of kind %v, got %T: %v", k, err, err)
	}
	if e.Kind != k {
		t.Fatalf("want kind %v, got %v: %v", k, e.Kind, err)
	}
	for _, s := range sentinels {
		if got := errors.Is(err, s); got != (s.Kind == k) {
			t.Fatalf("errors.Is(err, sentinel of %v) = %v for an error of kind %v", s.Kind, got, k)
		}
	}
	if e.Message == "" {
		t.Fatalf("an error of kind %v without a message", k)
	}
	return e
}

func ptr[T any](v T) *T { return &v }

// callEveryMethod calls every method of ws that takes a context (Copy into other), and
// returns what each returned.
func callEveryMethod(ctx context.Context, ws, other *Workspace, id string, plan *Plan) map[string]error {
	errs := map[string]error{}
	_, errs["Snapshot"] = ws.Snapshot(ctx, nil)
	_, errs["List"] = ws.List(ctx)
	_, errs["Show"] = ws.Show(ctx, id)
	_, errs["Diff"] = ws.Diff(ctx, id, "")
	_, errs["Delete"] = ws.Delete(ctx, id)
	_, errs["Prune"] = ws.Prune(ctx, Retention{})
	_, errs["GC"] = ws.GC(ctx, nil)
	_, errs["Verify"] = ws.Verify(ctx)
	_, errs["TrimCache"] = ws.TrimCache(ctx, 0)
	_, errs["Copy"] = ws.Copy(ctx, id, other)
	_, errs["Plan"] = ws.Plan(ctx, id, nil)
	_, errs["Apply"] = ws.Apply(ctx, plan, nil)
	_, errs["Restore"] = ws.Restore(ctx, id, nil)
	_, errs["Recover"] = ws.Recover(ctx)
	_, errs["GiveUp"] = ws.GiveUp(ctx)
	_, errs["Hold"] = ws.Hold(ctx, "x", NoProcess)
	return errs
}

func osMkdir(p string) error { return os.Mkdir(p, 0o755) }
