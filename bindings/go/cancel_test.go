package cairn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// cancelInFlight arranges for ctx's cancel to land after the call's token is bridged and
// before the library starts: the bridge goroutine has cancelled the C token by the time the
// C call begins, so the library itself returns CANCELLED (the Go-side check before the call
// saw a live context).
func cancelInFlight(t *testing.T, cancel context.CancelFunc) {
	t.Helper()
	cancelled := make(chan struct{})
	testHookBridged = func() {
		cancel()
		<-cancelled
	}
	testHookCancelled = func() { close(cancelled) }
	t.Cleanup(func() { testHookBridged, testHookCancelled = nil, nil })
}

func wantCancelled(t *testing.T, err error, cause error) {
	t.Helper()
	e := wantKind(t, err, KindCancelled)
	if !errors.Is(err, cause) || !errors.Is(err, ErrCancelled) {
		t.Fatalf("%v: errors.Is(err, %v) is false", err, cause)
	}
	if errors.Unwrap(e) != cause {
		t.Fatalf("Unwrap = %v, want %v", errors.Unwrap(e), cause)
	}
}

func TestCancellingTheContextStopsTheCallInsideTheLibrary(t *testing.T) {
	f := newFixture(t)
	f.write("a.txt", "one")
	f.snap("one")
	f.write("a.txt", "two")
	before, _ := f.ws.List(context.Background())

	calls := map[string]func(ctx context.Context) error{
		"Snapshot": func(ctx context.Context) error {
			_, err := f.ws.Snapshot(ctx, &SnapshotOptions{UseStatCache: ptr(false)})
			return err
		},
		"Plan": func(ctx context.Context) error { _, err := f.ws.Plan(ctx, "one", nil); return err },
		"Restore": func(ctx context.Context) error {
			_, err := f.ws.Restore(ctx, "one", nil)
			return err
		},
		"Apply": func(ctx context.Context) error {
			plan, err := f.ws.Plan(context.Background(), "one", nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.ws.Apply(ctx, plan, nil)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cancelInFlight(t, cancel)
			err := call(ctx)
			wantCancelled(t, err, context.Canceled)
			if msg := err.(*Error).Message; strings.HasPrefix(msg, "cancelled before the call began") {
				t.Fatalf("the call was refused before the library ran: %q", msg)
			}
		})
	}
	if f.read("a.txt") != "two" {
		t.Fatal("a cancelled restore changed a file")
	}
	if after, _ := f.ws.List(context.Background()); len(after) != len(before) {
		t.Fatalf("a cancelled call recorded a snapshot: %d, then %d", len(before), len(after))
	}
}

func TestADeadlineThatPassesDuringTheCallWrapsDeadlineExceeded(t *testing.T) {
	f := newFixture(t)
	f.write("a.txt", "a")
	// The deadline passes after the check before the call, and before the library starts.
	short, stop := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer stop()
	cancelled := make(chan struct{})
	testHookBridged = func() { <-short.Done(); <-cancelled }
	testHookCancelled = func() { close(cancelled) }
	defer func() { testHookBridged, testHookCancelled = nil, nil }()
	_, err := f.ws.Snapshot(short, nil)
	wantCancelled(t, err, context.DeadlineExceeded)
}

func TestAContextEndedBeforeTheCallIsRefusedByEveryMethod(t *testing.T) {
	f := newFixture(t)
	f.write("a.txt", "a")
	snap := f.snap("one")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	plan, err := f.ws.Plan(context.Background(), "one", nil)
	if err != nil {
		t.Fatal(err)
	}
	errs := callEveryMethod(ctx, f.ws, f.ws, snap.ID, plan)
	_, errs["Open"] = Open(ctx, f.root, nil)
	for name, err := range errs {
		t.Run(name, func(t *testing.T) { wantCancelled(t, err, context.Canceled) })
	}
	if _, err := f.ws.Show(context.Background(), snap.ID); err != nil {
		t.Fatalf("a refused Delete deleted the snapshot: %v", err)
	}
}

func TestACancelTokenStopsTheCallsGivenIt(t *testing.T) {
	f := newFixture(t)
	f.write("a.txt", "a")
	tok, err := NewCancelToken()
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	ctx := WithCancelToken(context.Background(), tok)
	if _, err := f.ws.Snapshot(ctx, nil); err != nil {
		t.Fatalf("a live token: %v", err)
	}
	if err := tok.Cancel(); err != nil {
		t.Fatal(err)
	}
	_, err = f.ws.Snapshot(ctx, nil)
	wantKind(t, err, KindCancelled)
	if errors.Is(err, context.Canceled) {
		t.Fatal("a token's cancellation claims to be the context's")
	}
	_, err = f.ws.Restore(ctx, "no-matter", nil)
	if !errors.Is(err, ErrCancelled) && !errors.Is(err, ErrNotFound) {
		t.Fatalf("Restore with a cancelled token: %v", err)
	}
	tok.Close()
	if _, err := f.ws.Snapshot(ctx, nil); err != ErrClosed {
		t.Fatalf("a closed token: %v", err)
	}
	if err := tok.Cancel(); err != ErrClosed {
		t.Fatalf("Cancel after Close: %v", err)
	}
}

// The realistic case: a snapshot of a larger tree whose deadline passes while it runs.
// Where the deadline lands is up to the scheduler, so finishing is right too; but a
// cancelled snapshot must record nothing and wrap context.DeadlineExceeded. The test tries a
// few deadlines and wants at least one to land inside the library.
func TestADeadlineStopsASnapshotWhileItRuns(t *testing.T) {
	f := newFixture(t)
	f.many("many", 1000)
	inside := 0
	for _, d := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		before, _ := f.ws.List(context.Background())
		_, err := f.ws.Snapshot(ctx, &SnapshotOptions{UseStatCache: ptr(false)})
		cancel()
		after, _ := f.ws.List(context.Background())
		switch {
		case err == nil:
			if len(after) != len(before)+1 {
				t.Fatalf("a finished snapshot was not listed")
			}
		case strings.HasPrefix(err.(*Error).Message, "cancelled before the call began"):
		default:
			inside++
			wantCancelled(t, err, context.DeadlineExceeded)
			if len(after) != len(before) {
				t.Fatal("a cancelled snapshot was recorded")
			}
		}
	}
	if inside == 0 {
		t.Fatal("no deadline landed while the library ran")
	}
}
