package cairn

/*
#include "cairn.h"
*/
import "C"

import (
	"context"
	"io"
	"runtime"
	"sync"
)

// CancelToken is the library's cancellation token (cairn_cancel): Cancel, from any
// goroutine, stops every call that was given the token at its next check, with an error of
// KindCancelled.
//
// Most callers never make one: every long call takes a context.Context and bridges it to a
// token of its own. Make one to stop several calls at once from code that holds no context,
// and give it to the calls with [WithCancelToken]. A token is one-shot: once cancelled (by
// Cancel, or because the context of a call using it ended) it stays cancelled.
type CancelToken struct {
	h handle[*C.cairn_cancel]
}

var _ io.Closer = (*CancelToken)(nil)

// NewCancelToken makes a token. Close it when done; a garbage-collected token is freed too.
func NewCancelToken() (*CancelToken, error) {
	var ptr *C.cairn_cancel
	var cerr *C.cairn_error
	if st := C.cairn_cancel_new(&ptr, &cerr); st != C.CAIRN_OK {
		return nil, takeError(context.Background(), st, cerr)
	}
	t := &CancelToken{}
	setHandle(t, &t.h, ptr, func(p *C.cairn_cancel) { C.cairn_cancel_free(p) })
	return t, nil
}

// Cancel cancels the token. Safe from any goroutine, any number of times; returns ErrClosed
// after Close.
func (t *CancelToken) Cancel() error {
	ptr, err := t.h.acquire()
	if err != nil {
		return err
	}
	defer t.h.release()
	C.cairn_cancel_cancel(ptr)
	runtime.KeepAlive(t)
	return nil
}

// Close frees the token, after waiting for the calls using it to return. Idempotent.
func (t *CancelToken) Close() error { return t.h.close() }

type tokenKey struct{}

// WithCancelToken returns a copy of ctx that makes the calls given it use tok: cancelling tok
// stops them. The context's own cancellation still works, and cancels tok too.
func WithCancelToken(ctx context.Context, tok *CancelToken) context.Context {
	return context.WithValue(ctx, tokenKey{}, tok)
}

// cancelledBefore is the error of a call whose context had ended before it began.
func cancelledBefore(ctx context.Context) *Error {
	return &Error{
		Kind:    KindCancelled,
		Message: "cancelled before the call began: " + ctx.Err().Error(),
		cause:   ctx.Err(),
	}
}

// Test hooks, nil outside the tests: testHookBridged runs once a call's token is bridged to
// its context, just before the call; testHookCancelled runs on the bridge goroutine after it
// cancelled a token.
var testHookBridged, testHookCancelled func()

// bridge is a context bridged to a C token for the length of one call.
type bridge struct {
	tok     *C.cairn_cancel // what the call is given; nil when nothing can cancel it
	release func()
}

// newBridge returns the token to give a call made with ctx: the caller's CancelToken if ctx
// carries one, else a fresh token when ctx can be cancelled, else none. While the call runs, a
// goroutine waits on ctx.Done() and cancels the token. release (deferred by the caller, after
// the C call returned) stops that goroutine, waits for it, and frees a fresh token.
func newBridge(ctx context.Context) (bridge, error) {
	if ctx.Err() != nil {
		return bridge{}, cancelledBefore(ctx)
	}
	user, _ := ctx.Value(tokenKey{}).(*CancelToken)
	if user == nil && ctx.Done() == nil {
		return bridge{release: func() {}}, nil
	}
	var tok *C.cairn_cancel
	free := func() {}
	if user != nil {
		p, err := user.h.acquire()
		if err != nil {
			return bridge{}, err
		}
		tok = p
		free = func() {
			user.h.release()
			runtime.KeepAlive(user)
		}
	} else {
		var cerr *C.cairn_error
		if st := C.cairn_cancel_new(&tok, &cerr); st != C.CAIRN_OK {
			return bridge{}, takeError(ctx, st, cerr)
		}
		free = func() { C.cairn_cancel_free(tok) }
	}
	if ctx.Done() == nil {
		return bridge{tok: tok, release: free}, nil
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			C.cairn_cancel_cancel(tok)
			if testHookCancelled != nil {
				testHookCancelled()
			}
		case <-done:
		}
	}()
	if testHookBridged != nil {
		testHookBridged()
	}
	return bridge{tok: tok, release: func() {
		close(done)
		wg.Wait() // the goroutine no longer touches tok
		free()
	}}, nil
}
