package cairn

// The progress trampoline. This file holds the //export, so its preamble may only declare.

/*
#include "cairn.h"
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// Progress is how far a snapshot has gone, passed to SnapshotOptions.Progress.
type Progress struct {
	Files       uint64 // files recorded so far
	Dirs        uint64 // directories entered so far
	Hashed      uint64 // files read so far
	HashedBytes uint64 // bytes read so far
}

// progressCall is the state of one call with a progress callback, reached from the
// trampoline through a cgo.Handle (never a raw Go pointer).
type progressCall struct {
	fn         func(Progress) error
	err        error // what fn returned, when it stopped the call
	panicked   bool
	panicValue any
}

// cairnGoProgress is the cairn_progress_cb given to the library. It runs on the goroutine that
// made the call (the library calls back only on the calling thread, one call at a time). A
// non-nil error from the callback, or a panic in it, stops the operation: the panic is
// recovered here (it must not unwind through C), stored, and raised again by the caller once
// the C call has returned.
//
//export cairnGoProgress
func cairnGoProgress(userdata unsafe.Pointer, p *C.struct_cairn_progress) (ret C.int32_t) {
	call := (*(*cgo.Handle)(userdata)).Value().(*progressCall)
	defer func() {
		if r := recover(); r != nil {
			call.panicked, call.panicValue = true, r
			ret = 1
		}
	}()
	err := call.fn(Progress{
		Files:       uint64(p.files),
		Dirs:        uint64(p.dirs),
		Hashed:      uint64(p.hashed),
		HashedBytes: uint64(p.hashed_bytes),
	})
	if err != nil {
		call.err = err
		return 1
	}
	return 0
}
