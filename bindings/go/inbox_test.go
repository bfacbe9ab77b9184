package cairn

import (
	"context"
	"strings"
	"testing"
)

// Issue 59: a prompt queued while a run is under way waits; at the boundary it is delivered
// with its checkpoint taken then; a rewind cancels the one still queued, and its old key
// answers with the cancelled admission.
func TestAQueuedPromptIsDeliveredAtTheBoundaryAndARewindCancelsTheNext(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	th := f.openThreads()
	if _, err := th.Create(ctx, &CreateThreadOptions{ID: "chat"}); err != nil {
		t.Fatal(err)
	}
	start := f.append(th, "chat", EntryUser, "start")
	run, err := th.BeginRun(ctx, "chat", nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := th.Enqueue(ctx, "chat", "k-1", Prompt{Payload: "second"})
	if err != nil || q.State != "queued" || q.Repeated || q.Payload != "second" {
		t.Fatalf("Enqueue: %v %+v", err, q)
	}
	w, err := th.Deliver(ctx, "chat", nil)
	if err != nil || w.Delivered != nil || w.Queued != 1 || !strings.Contains(w.Waiting, run.ID()) {
		t.Fatalf("Deliver while the run is under way: %v %+v", err, w)
	}
	if _, err := run.End(ctx); err != nil {
		t.Fatal(err)
	}
	run.Close()
	f.write("later.txt", "written before the delivery")
	d, err := th.Deliver(ctx, "chat", nil)
	if err != nil || d.Delivered == nil || d.Delivered.State != "delivered" || d.Entry == nil || d.Checkpoint == nil {
		t.Fatalf("Deliver at the boundary: %v %+v", err, d)
	}
	if d.Entry.Payload != "second" || d.Entry.Key != "k-1" || d.Delivered.CheckpointID != d.Checkpoint.ID {
		t.Fatalf("the delivered entry: %+v %+v", d.Entry, d.Delivered)
	}

	if _, err := th.Enqueue(ctx, "chat", "k-2", Prompt{Payload: "third"}); err != nil {
		t.Fatal(err)
	}
	r, err := th.Rewind(ctx, "chat", start.Entry.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := th.Enqueue(ctx, "chat", "k-2", Prompt{Payload: "third"})
	if err != nil || again.State != "cancelled" || !again.Repeated || again.RewindID != r.RewindID {
		t.Fatalf("the old key: %v %+v", err, again)
	}
	if none, err := th.Deliver(ctx, "chat", nil); err != nil || none.Delivered != nil || none.Queued != 0 {
		t.Fatalf("nothing left to deliver: %v %+v", err, none)
	}
	inbox, err := th.Inbox(ctx, "chat")
	if err != nil || len(inbox) != 2 || inbox[0].State != "delivered" || inbox[1].State != "cancelled" {
		t.Fatalf("Inbox: %v %+v", err, inbox)
	}
}
