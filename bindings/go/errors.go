package cairn

/*
#include "cairn.h"
*/
import "C"

import (
	"errors"
	"strconv"
)

// Kind classifies an error: it is the library's cairn_status, one value per kind of
// failure, stable across releases. Compare an error's kind with errors.Is and the sentinels
// (errors.Is(err, cairn.ErrBusy)) or read it from the *Error (errors.As).
type Kind uint32

// The kinds, taken from enum cairn_status in cairn.h.
const (
	// KindInvalidArgument: an argument was malformed (a bad id, an ambiguous prefix, bad
	// options).
	KindInvalidArgument Kind = C.CAIRN_ERR_INVALID_ARGUMENT
	// KindNotFound: the named snapshot, object, thread or entry does not exist.
	KindNotFound Kind = C.CAIRN_ERR_NOT_FOUND
	// KindValidation: a well-formed request that the current state does not allow.
	KindValidation Kind = C.CAIRN_ERR_VALIDATION
	// KindBusy: a hold or another operation is in the way.
	KindBusy Kind = C.CAIRN_ERR_BUSY
	// KindWorkspaceBusy: a run or hold in the same or an overlapping workspace refuses a
	// file restore.
	KindWorkspaceBusy Kind = C.CAIRN_ERR_WORKSPACE_BUSY
	// KindThreadBusy: a run of the thread is going on.
	KindThreadBusy Kind = C.CAIRN_ERR_THREAD_BUSY
	// KindDenied: refused, because it would lose data or cross a permission boundary.
	KindDenied Kind = C.CAIRN_ERR_DENIED
	// KindIO: the operating system failed a read or write.
	KindIO Kind = C.CAIRN_ERR_IO
	// KindCorrupt: stored data does not decode or does not match its id.
	KindCorrupt Kind = C.CAIRN_ERR_CORRUPT
	// KindConflict: someone else's change is in the way.
	KindConflict Kind = C.CAIRN_ERR_CONFLICT
	// KindCancelled: the call was cancelled (its context ended, or its CancelToken was
	// cancelled). When a context ended, the error also wraps ctx.Err().
	KindCancelled Kind = C.CAIRN_ERR_CANCELLED
	// KindRunInterrupted: a run was interrupted by a forced rewind.
	KindRunInterrupted Kind = C.CAIRN_ERR_RUN_INTERRUPTED
	// KindUnsupported: not supported here (say, a store written by a newer Cairn).
	KindUnsupported Kind = C.CAIRN_ERR_UNSUPPORTED
	// KindNullArgument: a required pointer was NULL (a bug in this package if you see it).
	KindNullArgument Kind = C.CAIRN_ERR_NULL_ARGUMENT
	// KindPanic: a panic was caught inside the library (a bug in Cairn; please report it).
	KindPanic Kind = C.CAIRN_ERR_PANIC
	// KindAbortedByCallback: a progress callback returned an error (which the *Error wraps).
	KindAbortedByCallback Kind = C.CAIRN_ERR_ABORTED_BY_CALLBACK
)

// The sentinels, one per kind, for errors.Is: errors.Is(err, cairn.ErrNotFound) is true for
// every *Error of KindNotFound. They carry no message or path.
var (
	ErrInvalidArgument   = &Error{Kind: KindInvalidArgument}
	ErrNotFound          = &Error{Kind: KindNotFound}
	ErrValidation        = &Error{Kind: KindValidation}
	ErrBusy              = &Error{Kind: KindBusy}
	ErrWorkspaceBusy     = &Error{Kind: KindWorkspaceBusy}
	ErrThreadBusy        = &Error{Kind: KindThreadBusy}
	ErrDenied            = &Error{Kind: KindDenied}
	ErrIO                = &Error{Kind: KindIO}
	ErrCorrupt           = &Error{Kind: KindCorrupt}
	ErrConflict          = &Error{Kind: KindConflict}
	ErrCancelled         = &Error{Kind: KindCancelled}
	ErrRunInterrupted    = &Error{Kind: KindRunInterrupted}
	ErrUnsupported       = &Error{Kind: KindUnsupported}
	ErrNullArgument      = &Error{Kind: KindNullArgument}
	ErrPanic             = &Error{Kind: KindPanic}
	ErrAbortedByCallback = &Error{Kind: KindAbortedByCallback}
)

// sentinels lists every sentinel, in status order.
var sentinels = []*Error{
	ErrInvalidArgument, ErrNotFound, ErrValidation, ErrBusy, ErrWorkspaceBusy, ErrThreadBusy,
	ErrDenied, ErrIO, ErrCorrupt, ErrConflict, ErrCancelled, ErrRunInterrupted, ErrUnsupported,
	ErrNullArgument, ErrPanic, ErrAbortedByCallback,
}

// ErrClosed is returned by every method of a handle (Workspace, Hold, CancelToken, ...)
// called after its Close. It is not an *Error: no call reached the library.
var ErrClosed = errors.New("cairn: use of a closed handle")

// Sentinel is the sentinel of kind k (ErrNotFound for KindNotFound), or nil for a kind this
// package does not know.
func (k Kind) Sentinel() *Error {
	for _, s := range sentinels {
		if s.Kind == k {
			return s
		}
	}
	return nil
}

// String is the library's stable name of the kind ("NOT_FOUND"), or "UNKNOWN(n)".
func (k Kind) String() string {
	if k.Sentinel() == nil {
		return "UNKNOWN(" + strconv.FormatUint(uint64(k), 10) + ")"
	}
	return statusName(uint32(k))
}

// Description is the library's short description of the kind ("not found").
func (k Kind) Description() string { return statusStr(uint32(k)) }

// Error is an error reported by the library: its kind, a message that says what to do, and
// the path or id it concerns.
type Error struct {
	// Kind classifies the error; errors.Is(err, cairn.ErrX) compares it.
	Kind Kind
	// Message says what went wrong and what to do (UTF-8).
	Message string
	// Path is the path (its exact bytes) or the id the error concerns; empty when none.
	Path string

	// cause is what Unwrap returns: ctx.Err() for a call cancelled through its context, or
	// the error a progress callback returned.
	cause error
}

// Error formats the error as "cairn: <message> (<KIND>)".
func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = e.Kind.Description()
	}
	return "cairn: " + msg + " (" + e.Kind.String() + ")"
}

// Is reports whether target is an *Error of the same kind, so that the sentinels work with
// errors.Is.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind
}

// Unwrap returns the error's cause: context.Canceled or context.DeadlineExceeded for a call
// cancelled through its context, the callback's error for KindAbortedByCallback, else nil.
func (e *Error) Unwrap() error { return e.cause }

// invalid is an error of KindInvalidArgument found on the Go side, before any call.
func invalid(msg string) *Error { return &Error{Kind: KindInvalidArgument, Message: msg} }
