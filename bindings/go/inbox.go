package cairn

/*
#include <stdbool.h>
#include "cairn.h"
*/
import "C"

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Admission is a prompt of a thread's inbox under its admission key (issue 59).
type Admission struct {
	ThreadID string `json:"thread_id"`
	Key      string `json:"key"`
	// State is "queued" (waiting for the thread's next safe boundary), "delivered" or
	// "cancelled" (by a rewind; never sent).
	State string `json:"state"`
	// Payload holds the prompt's exact bytes (its text).
	Payload  string         `json:"payload"`
	Metadata map[string]any `json:"metadata"`
	// EntryID and CheckpointID: the entry a delivered prompt became and the checkpoint taken
	// at delivery.
	EntryID      string `json:"entry_id"`
	CheckpointID string `json:"checkpoint_id"`
	// RewindID is the rewind that cancelled it.
	RewindID string `json:"rewind_id"`
	// Error says why a delivery failed (it is still queued).
	Error    string `json:"error"`
	QueuedMS int64  `json:"queued_ms"`
	DoneMS   int64  `json:"done_ms"` // when delivered or cancelled; 0 while queued
	// Repeated: the key was seen before; this is its admission, and nothing was queued again.
	Repeated bool `json:"repeated"`
}

func (a *Admission) UnmarshalJSON(b []byte) error {
	type plain Admission
	w := struct {
		*plain
		Payload jpath `json:"payload"`
	}{plain: (*plain)(a)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	a.Payload = string(w.Payload)
	return nil
}

// Delivery is what Threads.Deliver did: the prompt delivered (with the entry it became and
// the checkpoint taken then), or Waiting saying what is under way.
type Delivery struct {
	Delivered  *Admission  `json:"delivered"`
	Entry      *Entry      `json:"entry"`
	Checkpoint *Checkpoint `json:"checkpoint"`
	// Waiting says what keeps the thread from a safe boundary (a run, a tool call); "" when
	// nothing did.
	Waiting string `json:"waiting"`
	// Queued is how many prompts of the thread are still queued.
	Queued uint64 `json:"queued"`
}

// Prompt is a user prompt to queue.
type Prompt struct {
	// Payload is the prompt's bytes (its text); any bytes round-trip.
	Payload  string
	Metadata map[string]any
}

// Enqueue queues a user prompt in the thread's inbox under its admission key, delivered at
// the thread's next safe boundary (no run of the thread running or paused, no tool call of
// its runs open) by Deliver. A key seen before returns its admission as it is now (Repeated):
// queued, delivered, or cancelled by a rewind; nothing is queued again. ErrThreadBusy while a
// rewind holds the thread.
func (t *Threads) Enqueue(ctx context.Context, thread, key string, p Prompt) (*Admission, error) {
	doc := struct {
		Text       *string        `json:"text,omitempty"`
		PayloadHex *string        `json:"payload_hex,omitempty"`
		Metadata   map[string]any `json:"metadata,omitempty"`
	}{Metadata: p.Metadata}
	if utf8.ValidString(p.Payload) {
		doc.Text = &p.Payload
	} else {
		h := hex.EncodeToString([]byte(p.Payload))
		doc.PayloadHex = &h
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	tp, tl := bytesArg(thread)
	kp, kl := bytesArg(key)
	dp, dl := sliceArg(raw)
	return threadsResult[*Admission](ctx, t, "admission", func(p *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_threads_enqueue(p, tp, tl, kp, kl, dp, dl, out, cerr)
	})
}

// DeliverOptions configure Threads.Deliver: the run delivering between its own turns (it
// does not count as under way; its workspace and policy take the checkpoint), else the
// Workspace, else the default one.
type DeliverOptions struct {
	Run       *Run
	Workspace *Workspace
	// Wait is how long to wait for an append of the same key being admitted.
	Wait time.Duration
}

// Deliver delivers the oldest queued prompt if the thread is at a safe boundary: the
// checkpoint is taken then and the prompt is appended as a user entry under its key. Under
// way, nothing is delivered and Waiting says why. A checkpoint that fails leaves the prompt
// queued (with its Error) and returns the error.
func (t *Threads) Deliver(ctx context.Context, thread string, opts *DeliverOptions) (*Delivery, error) {
	var both *AppendOptions
	doc := struct {
		WaitMS uint64 `json:"wait_ms,omitempty"`
	}{}
	if opts != nil {
		if opts.Wait < 0 {
			return nil, invalid("DeliverOptions.Wait must not be negative")
		}
		both = &AppendOptions{Run: opts.Run, Workspace: opts.Workspace}
		doc.WaitMS = uint64(opts.Wait / time.Millisecond)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	rp, wp, release, err := both.borrowBoth()
	if err != nil {
		return nil, err
	}
	defer release()
	tp, tl := bytesArg(thread)
	dp, dl := sliceArg(raw)
	return threadsResult[*Delivery](ctx, t, "delivery", func(p *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_threads_deliver(p, tp, tl, dp, dl, rp, wp, out, cerr)
	})
}

// Inbox returns every admission of the thread's inbox, oldest first: queued, delivered and
// cancelled.
func (t *Threads) Inbox(ctx context.Context, thread string) ([]Admission, error) {
	tp, tl := bytesArg(thread)
	return threadsResult[[]Admission](ctx, t, "inbox", func(p *C.cairn_threads, out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_threads_inbox(p, tp, tl, out, cerr)
	})
}
