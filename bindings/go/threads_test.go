package cairn

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// openThreads opens the thread database in the fixture's store, with checkpoints on.
func (f *fixture) openThreads() *Threads {
	f.t.Helper()
	th, err := OpenThreads(context.Background(), "", f.ws, &ThreadsOptions{Checkpoints: &CheckpointPolicy{}})
	if err != nil {
		f.t.Fatalf("OpenThreads: %v", err)
	}
	f.t.Cleanup(func() { th.Close() })
	return th
}

func (f *fixture) append(th *Threads, thread string, kind EntryKind, payload string) *Appended {
	f.t.Helper()
	a, err := th.Append(context.Background(), thread, NewEntry{Kind: kind, Payload: payload}, nil)
	if err != nil {
		f.t.Fatalf("Append(%s %q): %v", kind, payload, err)
	}
	return a
}

func TestTheWholeThreadFlowThroughTheGoAPI(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	th := f.openThreads()

	chat, err := th.Create(ctx, &CreateThreadOptions{ID: "chat", Metadata: map[string]any{"agent": "go"}})
	if err != nil || chat.ID != "chat" || chat.Metadata["agent"] != "go" || chat.ActiveLeaf != "" {
		t.Fatalf("Create: %v %+v", err, chat)
	}

	// A user message checkpoints the files before it.
	f.write("a.txt", "v1")
	u1 := f.append(th, "chat", EntryUser, "hello")
	if u1.Checkpoint == nil || u1.Entry.Checkpoint == nil || u1.CheckpointError != nil || u1.Entry.Payload != "hello" {
		t.Fatalf("first user entry: %+v", u1)
	}
	// Payloads are bytes: a non-UTF-8 one round-trips.
	reply := f.append(th, "chat", EntryAssistant, "caf\xe9 \xff")
	if reply.Entry.Payload != "caf\xe9 \xff" || reply.Entry.ParentID != u1.Entry.ID {
		t.Fatalf("assistant entry: %+v", reply.Entry)
	}
	f.write("a.txt", "v2")
	u2 := f.append(th, "chat", EntryUser, "now change it")
	f.write("a.txt", "v3, the agent's edit")
	f.append(th, "chat", EntryAssistant, "done")

	log, err := th.Log(ctx, "chat", false)
	if err != nil || len(log) != 4 || log[1].Payload != "caf\xe9 \xff" || log[0].Kind != EntryUser {
		t.Fatalf("Log: %v %+v", err, log)
	}

	// Restore before the second prompt: files and conversation go back together.
	rep, err := th.RestoreBefore(ctx, "chat", u2.Entry.ID, &RewindOptions{Files: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	if f.read("a.txt") != "v2" {
		t.Fatalf("the files after RestoreBefore: %q", f.read("a.txt"))
	}
	if rep.Files == nil || rep.Files.SnapshotID == "" || rep.Files.Restore == nil || rep.RewindID == "" ||
		!rep.Conversation.Rewound || !slices.Contains(rep.Conversation.Cut, u2.Entry.ID) {
		t.Fatalf("RestoreBefore: %+v", rep)
	}
	active, _ := th.Log(ctx, "chat", false)
	all, _ := th.Log(ctx, "chat", true)
	if len(active) != 2 || len(all) != 4 {
		t.Fatalf("after the rewind: %d active entries, %d in all", len(active), len(all))
	}

	// A manual checkpoint, and the list of them.
	cp, err := th.Checkpoint(ctx, "chat", "by hand", nil)
	if err != nil || cp.Kind != CheckpointManual || cp.Label != "by hand" || cp.SnapshotID == "" {
		t.Fatalf("Checkpoint: %v %+v", err, cp)
	}
	cps, err := th.ListCheckpoints(ctx, "chat")
	if err != nil || len(cps) < 3 {
		t.Fatalf("ListCheckpoints: %v %d", err, len(cps))
	}

	// Memory standing on entries.
	m, err := th.AddMemory(ctx, "chat", NewMemory{Kind: MemoryKindItem, Text: "the user says hello", StandsOn: []string{u1.Entry.ID}})
	if err != nil || m.Status != "active" || !slices.Equal(m.StandsOn, []string{u1.Entry.ID}) {
		t.Fatalf("AddMemory: %v %+v", err, m)
	}
	mem, err := th.Memory(ctx, "chat")
	if err != nil || len(mem) != 1 || mem[0].ID != m.ID {
		t.Fatalf("Memory: %v %+v", err, mem)
	}

	// A run: tool calls, heartbeats, an entry within it, the list of runs, the end.
	run, err := th.BeginRun(ctx, "chat", nil)
	if err != nil || run.ID() == "" || run.Thread() != "chat" {
		t.Fatalf("BeginRun: %v", err)
	}
	defer run.Close()
	call, err := run.ToolStart(ctx, "make")
	if err != nil || call == "" {
		t.Fatalf("ToolStart: %v %q", err, call)
	}
	if err := th.ToolFinish(ctx, call); err != nil {
		t.Fatal(err)
	}
	if err := run.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	inRun, err := run.Append(ctx, NewEntry{Kind: EntryNote, Payload: "inside the run"})
	if err != nil || inRun.Entry.RunID != run.ID() {
		t.Fatalf("Run.Append: %v %+v", err, inRun)
	}
	runs, err := th.Runs(ctx, "chat")
	if err != nil || len(runs.Going) != 1 || runs.Going[0].ID != run.ID() || !runs.Going[0].Here {
		t.Fatalf("Runs: %v %+v", err, runs)
	}
	if st, err := run.End(ctx); err != nil || st != RunEnded {
		t.Fatalf("End: %v %q", err, st)
	}

	// A fork at the first prompt's answer; its files go to another workspace.
	otherRoot := filepath.Join(f.dir, "fork")
	mkdir(t, otherRoot)
	other := f.open(otherRoot, &OpenOptions{Store: filepath.Join(f.dir, "fork-store")})
	fork, err := th.Fork(ctx, "chat", reply.Entry.ID, &ForkOptions{NewThreadID: "chat-fork", Files: true, Workspace: other, Source: f.ws})
	if err != nil || fork.ThreadID != "chat-fork" || fork.SourceThreadID != "chat" || fork.AtEntryID != reply.Entry.ID {
		t.Fatalf("Fork: %v %+v", err, fork)
	}
	threads, err := th.List(ctx)
	if err != nil || len(threads) != 2 {
		t.Fatalf("List: %v %+v", err, threads)
	}

	// The event log, read from a cursor.
	events, err := th.Events(ctx, 0, 0)
	if err != nil || len(events) == 0 || events[0].Kind != "thread_created" {
		t.Fatalf("Events: %v %+v", err, events)
	}
	last := events[len(events)-1].Cursor
	more, err := th.Events(ctx, last, 10)
	if err != nil || len(more) != 0 {
		t.Fatalf("Events after the last cursor: %v %+v", err, more)
	}
	two, err := th.Events(ctx, 0, 2)
	if err != nil || len(two) != 2 {
		t.Fatalf("Events with a limit: %v %d", err, len(two))
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := osMkdir(p); err != nil {
		t.Fatal(err)
	}
}

// The kinds only threads and runs produce, provoked for real.
func TestTheErrorKindsOfThreadsAndRunsAreProvoked(t *testing.T) {
	ctx := context.Background()

	t.Run("VALIDATION", func(t *testing.T) {
		f := newFixture(t)
		th := f.openThreads()
		if _, err := th.Create(ctx, &CreateThreadOptions{ID: "x"}); err != nil {
			t.Fatal(err)
		}
		_, err := th.Create(ctx, &CreateThreadOptions{ID: "x"})
		wantKind(t, err, KindValidation)
	})

	t.Run("NOT_FOUND", func(t *testing.T) {
		f := newFixture(t)
		th := f.openThreads()
		_, err := th.Log(ctx, "no-such-thread", false)
		wantKind(t, err, KindNotFound)
	})

	t.Run("THREAD_BUSY and RUN_INTERRUPTED", func(t *testing.T) {
		f := newFixture(t)
		th := f.openThreads()
		th.Create(ctx, &CreateThreadOptions{ID: "chat"})
		u := f.append(th, "chat", EntryUser, "one")
		f.append(th, "chat", EntryAssistant, "two")
		run, err := th.BeginRun(ctx, "chat", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer run.Close()
		_, err = th.Rewind(ctx, "chat", u.Entry.ID, nil)
		wantKind(t, err, KindThreadBusy)
		// Forced, the rewind stops the run, which learns it at its next heartbeat.
		if _, err := th.Rewind(ctx, "chat", u.Entry.ID, &RewindOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		wantKind(t, run.Heartbeat(ctx), KindRunInterrupted)
		if st, err := run.End(ctx); err != nil || st != RunInterrupted {
			t.Fatalf("End of an interrupted run: %v %q", err, st)
		}
	})

	t.Run("WORKSPACE_BUSY", func(t *testing.T) {
		// A run of another thread goes on in the workspace a rewind would restore.
		f := newFixture(t)
		th := f.openThreads()
		th.Create(ctx, &CreateThreadOptions{ID: "a"})
		th.Create(ctx, &CreateThreadOptions{ID: "b"})
		f.write("a.txt", "one")
		u := f.append(th, "a", EntryUser, "one")
		f.write("a.txt", "two")
		f.append(th, "a", EntryAssistant, "two")
		run, err := th.BeginRun(ctx, "b", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer run.Close()
		_, err = th.RestoreBefore(ctx, "a", u.Entry.ID, &RewindOptions{Files: ptr(true)})
		wantKind(t, err, KindWorkspaceBusy)
		if f.read("a.txt") != "two" {
			t.Fatal("a refused rewind changed a file")
		}
	})

	t.Run("INVALID_ARGUMENT", func(t *testing.T) {
		f := newFixture(t)
		th := f.openThreads()
		th.Create(ctx, &CreateThreadOptions{ID: "chat"})
		_, err := th.Append(ctx, "chat", NewEntry{Kind: "shout", Payload: "x"}, nil)
		wantKind(t, err, KindInvalidArgument)
		_, err = OpenThreads(ctx, "", nil, nil) // no path and no workspace
		wantKind(t, err, KindInvalidArgument)
	})
}

func TestThreadHandlesCloseTwiceAndRefuseUseAfterClose(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	th := f.openThreads()
	th.Create(ctx, &CreateThreadOptions{ID: "chat"})
	run, err := th.BeginRun(ctx, "chat", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := run.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, err := range []error{run.Heartbeat(ctx), func() error { _, err := run.End(ctx); return err }(),
		func() error { _, err := run.Append(ctx, NewEntry{Kind: EntryNote}); return err }()} {
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("a closed run: %v", err)
		}
	}
	// A workspace closed after the database opened stays usable by the database (it keeps
	// its own reference), but can no longer be passed in.
	f.ws.Close()
	if _, err := th.Checkpoint(ctx, "chat", "after the workspace closed", nil); err != nil {
		t.Fatalf("the default workspace after its handle closed: %v", err)
	}
	if _, err := th.Checkpoint(ctx, "chat", "x", &AppendOptions{Workspace: f.ws}); !errors.Is(err, ErrClosed) {
		t.Fatalf("a closed workspace passed in: %v", err)
	}
	for range 2 {
		if err := th.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := th.List(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("List after Close: %v", err)
	}
	if _, err := th.BeginRun(ctx, "chat", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("BeginRun after Close: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := OpenThreads(cctx, "", nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenThreads with an ended context: %v", err)
	}
}

func TestOneThreadDatabaseUsedFromManyGoroutines(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	th := f.openThreads()
	const workers = 6
	var wg sync.WaitGroup
	errs := make(chan error, workers*20)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := "t" + itoa(i)
			if _, err := th.Create(ctx, &CreateThreadOptions{ID: id}); err != nil {
				errs <- err
				return
			}
			for j := range 5 {
				kind := EntryAssistant
				if j%2 == 0 {
					kind = EntryNote
				}
				if _, err := th.Append(ctx, id, NewEntry{Kind: kind, Payload: "m" + itoa(j), Wait: time.Second}, nil); err != nil {
					errs <- err
				}
				if _, err := th.Log(ctx, id, false); err != nil {
					errs <- err
				}
				if _, err := th.Events(ctx, 0, 5); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, err := th.List(ctx)
	if err != nil || len(list) != workers {
		t.Fatalf("List: %v, %d threads", err, len(list))
	}
}
