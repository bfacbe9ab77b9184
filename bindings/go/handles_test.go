package cairn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestAPanicInTheProgressCallbackStopsTheSnapshotAndIsRaisedAgain(t *testing.T) {
	f := newFixture(t)
	f.many("files", 50)
	type boom struct{ n int }
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		f.ws.Snapshot(context.Background(), &SnapshotOptions{Progress: func(Progress) error { panic(boom{42}) }})
		t.Fatal("Snapshot returned instead of panicking")
	}()
	if recovered != (boom{42}) {
		t.Fatalf("recovered %#v, want the callback's panic value", recovered)
	}
	// Nothing was recorded, and the workspace still works.
	if list, err := f.ws.List(context.Background()); err != nil || len(list) != 0 {
		t.Fatalf("after the panic: %v, %d snapshots", err, len(list))
	}
	if _, err := f.ws.Snapshot(context.Background(), &SnapshotOptions{Progress: func(Progress) error { return nil }}); err != nil {
		t.Fatal(err)
	}
}

func TestEveryHandleClosesTwiceAndRefusesUseAfterClose(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.write("a.txt", "a")
	snap := f.snap("one")
	plan, err := f.ws.Plan(ctx, "one", nil)
	if err != nil {
		t.Fatal(err)
	}
	otherRoot := filepath.Join(f.dir, "other")
	if err := os.Mkdir(otherRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	other := f.open(otherRoot, nil)
	hold, err := f.ws.Hold(ctx, "x", NoProcess)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := NewCancelToken()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []interface{ Close() error }{f.ws, hold, tok, f.ws, hold, tok} {
		if err := c.Close(); err != nil {
			t.Fatalf("Close of %T: %v", c, err)
		}
	}
	errs := callEveryMethod(ctx, f.ws, other, snap.ID, plan)
	_, errs["Info"] = f.ws.Info()
	_, errs["Copy to a closed workspace"] = other.Copy(ctx, snap.ID, f.ws)
	errs["Cancel"] = tok.Cancel()
	for name, err := range errs {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
}

// A hold that is dropped without Close is released by its cleanup once collected: the
// backstop works (and frees the C object, which the C tests check for leaks).
func TestAnUnreachableHoldIsReleasedByItsCleanup(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.write("a.txt", "a")
	f.snap("one")
	f.write("a.txt", "b")
	func() {
		if _, err := f.ws.Hold(ctx, "forgotten", NoProcess); err != nil {
			t.Fatal(err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		_, err := f.ws.Restore(ctx, "one", nil)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			t.Fatalf("the forgotten hold still stands: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if f.read("a.txt") != "a" {
		t.Fatal("the restore did not run")
	}
	// Unreachable workspaces and tokens are freed the same way (nothing to observe but the
	// absence of a crash, also under GOGC=1 and -race).
	for range 20 {
		if _, err := Open(ctx, f.root, &OpenOptions{Store: f.store}); err != nil {
			t.Fatal(err)
		}
		if _, err := NewCancelToken(); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC()
}

func TestOneWorkspaceUsedFromManyGoroutinesAtOnce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.many("src", 100)
	base := f.snap("base")
	// The same root with a second store, to copy into.
	other := f.open(f.root, &OpenOptions{Store: filepath.Join(f.dir, "second-store")})

	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers*10)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			check := func(what string, err error) {
				if err != nil {
					errs <- fmt.Errorf("worker %d: %s: %w", i, what, err)
				}
			}
			for j := range 3 {
				s, err := f.ws.Snapshot(ctx, &SnapshotOptions{
					Label:    fmt.Sprintf("w%d-%d", i, j),
					Progress: func(Progress) error { return nil },
				})
				check("Snapshot", err)
				if err == nil {
					_, err = f.ws.Show(ctx, s.ID)
					check("Show", err)
				}
				_, err = f.ws.List(ctx)
				check("List", err)
				_, err = f.ws.Diff(ctx, base.ID, "")
				check("Diff", err)
				_, err = f.ws.Restore(ctx, base.ID, &RestoreOptions{DryRun: true})
				check("Restore (dry run)", err)
				_, err = f.ws.Copy(ctx, base.ID, other)
				check("Copy", err)
				_, err = f.ws.Info()
				check("Info", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, err := f.ws.List(ctx)
	if err != nil || len(list) != 1+workers*3 {
		t.Fatalf("%v: %d snapshots, want %d", err, len(list), 1+workers*3)
	}
	if v, err := f.ws.Verify(ctx); err != nil || !v.OK {
		t.Fatalf("Verify: %v %+v", err, v)
	}
}

// Close waits for the calls running on the handle, and every call either finishes or
// returns ErrClosed: never a crash or a use of freed memory.
func TestCloseRacingCallsFromOtherGoroutines(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.many("src", 100)
	f.snap("base")
	for round := range 5 {
		ws := f.open(f.root, &OpenOptions{Store: f.store})
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range 5 {
					var err error
					switch i % 3 {
					case 0:
						_, err = ws.Snapshot(ctx, &SnapshotOptions{Progress: func(Progress) error { return nil }})
					case 1:
						_, err = ws.Diff(ctx, "base", "")
					default:
						_, err = ws.Restore(ctx, "base", &RestoreOptions{DryRun: true})
					}
					if err != nil && !errors.Is(err, ErrClosed) {
						t.Errorf("round %d: %v", round, err)
					}
				}
			}()
		}
		close(start)
		time.Sleep(time.Duration(round) * time.Millisecond)
		if err := ws.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
}
