package cairn

// The thin layer: the cgo directives, the ABI check and the helpers every call goes through.
// Everything that touches a C pointer lives in this package's cgo files; the idiomatic API
// on top of them (workspace.go, threads.go) only sees Go values.

/*
#cgo CFLAGS: -I${SRCDIR}/include
#cgo linux,amd64 LDFLAGS: ${SRCDIR}/lib/linux-amd64/libcairn.a -lpthread -ldl -lm
#cgo linux,arm64 LDFLAGS: ${SRCDIR}/lib/linux-arm64/libcairn.a -lpthread -ldl -lm
#include <stdint.h>
#include "cairn.h"

// The progress trampoline (callback.go), declared as cgo writes it in _cgo_export.h. It is
// passed to the library as a cairn_progress_cb (whose second parameter is const).
extern int32_t cairnGoProgress(void *userdata, struct cairn_progress *progress);
*/
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/cgo"
	"unsafe"

	// Blank imports keep lib/<os>-<arch>/ in `go mod vendor` copies.
	_ "github.com/cairn-dev/cairn/bindings/go/include"
	_ "github.com/cairn-dev/cairn/bindings/go/lib/linux-amd64"
	_ "github.com/cairn-dev/cairn/bindings/go/lib/linux-arm64"
)

// ABIVersion is the version of the C ABI this package was written for. The package refuses
// (panics at init) a libcairn.a or cairn.h of another ABI version: while Cairn is 0.x, the
// ABI changes between releases without notice.
const ABIVersion = 1

func init() {
	if err := checkABI(uint32(C.CAIRN_ABI_VERSION), uint32(C.cairn_abi_version())); err != nil {
		panic(err.Error())
	}
}

// checkABI compares the ABI versions of the header compiled in and of the library linked in
// with ABIVersion.
func checkABI(header, library uint32) error {
	if header != ABIVersion || library != ABIVersion {
		return fmt.Errorf("cairn: ABI version mismatch: this Go package was written for "+
			"ABI %d, but include/cairn.h declares ABI %d and libcairn.a reports ABI %d; "+
			"rebuild the library with bindings/go/build-lib.sh, or use the Go package of "+
			"the same Cairn release", ABIVersion, header, library)
	}
	return nil
}

// Version is the version of the linked libcairn ("0.1.0").
func Version() string { return C.GoString(C.cairn_version()) }

// LibraryABIVersion is the ABI version the linked libcairn reports.
func LibraryABIVersion() int { return int(C.cairn_abi_version()) }

// bytesArg passes s to C as (ptr, len) without copying: the library only reads it, and only
// during the call. The empty string is (NULL, 0).
func bytesArg(s string) (*C.uint8_t, C.size_t) {
	if len(s) == 0 {
		return nil, 0
	}
	return (*C.uint8_t)(unsafe.Pointer(unsafe.StringData(s))), C.size_t(len(s))
}

// sliceArg passes b as (ptr, len) without copying.
func sliceArg(b []byte) (*C.uint8_t, C.size_t) {
	if len(b) == 0 {
		return nil, 0
	}
	return (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(b))), C.size_t(len(b))
}

// goBytes copies a borrowed view into Go memory.
func goBytes(b C.cairn_bytes) []byte {
	if b.data == nil || b.len == 0 {
		return nil
	}
	return C.GoBytes(unsafe.Pointer(b.data), C.int(b.len))
}

// takeBuf copies an owned buffer's bytes into Go memory and frees the buffer.
func takeBuf(buf *C.cairn_buf) []byte {
	b := goBytes(C.cairn_buf_bytes(buf))
	C.cairn_buf_free(buf)
	return b
}

// takeError turns a failed status and its owned detail into an *Error and frees the detail.
// When the call was cancelled because ctx ended, the error wraps ctx.Err().
func takeError(ctx context.Context, st C.cairn_status, cerr *C.cairn_error) *Error {
	e := &Error{Kind: Kind(st)}
	if cerr != nil {
		e.Kind = Kind(C.cairn_error_status(cerr)) // the same as st
		e.Message = string(goBytes(C.cairn_error_message(cerr)))
		e.Path = string(goBytes(C.cairn_error_path(cerr)))
		C.cairn_error_free(cerr)
	}
	if e.Kind == KindCancelled && ctx != nil && ctx.Err() != nil {
		e.cause = ctx.Err()
	}
	return e
}

// statusName is the library's stable name of a status ("NOT_FOUND").
func statusName(st uint32) string { return C.GoString(C.cairn_status_name(C.uint32_t(st))) }

// statusStr is the library's description of a status ("not found").
func statusStr(st uint32) string { return C.GoString(C.cairn_status_str(C.uint32_t(st))) }

// bufCall is one C call that writes an owned buffer on success.
type bufCall func(out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status

// run makes the call and returns the buffer's bytes, or the error.
func (f bufCall) run(ctx context.Context) ([]byte, error) {
	var out *C.cairn_buf
	var cerr *C.cairn_error
	if st := f(&out, &cerr); st != C.CAIRN_OK {
		return nil, takeError(ctx, st, cerr)
	}
	return takeBuf(out), nil
}

// decode parses a result document into a T.
func decode[T any](doc []byte, what string) (T, error) {
	var v T
	if err := json.Unmarshal(doc, &v); err != nil {
		return v, fmt.Errorf("cairn: decoding the %s the library returned: %w", what, err)
	}
	return v, nil
}

// debugPanic calls the library's test hook that panics inside its boundary, for the tests:
// the panic must come back as an *Error of KindPanic.
func debugPanic() error {
	var cerr *C.cairn_error
	if st := C.cairn_debug_panic(&cerr); st != C.CAIRN_OK {
		return takeError(context.Background(), st, cerr)
	}
	return nil
}

// debugNullArgument makes a call with a NULL handle, which the Go API never does, for the
// tests: it must come back as an *Error of KindNullArgument.
func debugNullArgument() error {
	_, err := bufCall(func(out **C.cairn_buf, cerr **C.cairn_error) C.cairn_status {
		return C.cairn_workspace_list(nil, out, cerr)
	}).run(context.Background())
	return err
}

// progressArgs returns the callback and userdata to give a C call for fn (NULL and NULL when
// fn is nil), and a function to run once the call returned: it frees the handle and raises a
// panic of the callback again.
func progressArgs(fn func(Progress) error) (C.cairn_progress_cb, unsafe.Pointer, *progressCall, func()) {
	if fn == nil {
		return nil, nil, nil, func() {}
	}
	call := &progressCall{fn: fn}
	h := new(cgo.Handle)
	*h = cgo.NewHandle(call)
	after := func() {
		h.Delete()
		if call.panicked {
			panic(call.panicValue)
		}
	}
	return C.cairn_progress_cb(C.cairnGoProgress), unsafe.Pointer(h), call, after
}
