package cairn

import (
	"runtime"
	"sync"
)

// handle is the base of every handle type (Workspace, Hold, CancelToken, ...): a C pointer
// that Close frees once, or that a cleanup frees when its owner becomes unreachable
// without Close. Calls hold it for reading while they use the pointer, so Close (which
// holds it for writing) waits for them, and the library's rule that a _free must not race
// another call on the same object holds.
type handle[P comparable] struct {
	mu      sync.RWMutex
	ptr     P // a C pointer; the zero value once closed
	free    func(P)
	cleanup runtime.Cleanup
}

// setHandle makes h own ptr, freed by free on Close, or after owner is unreachable.
func setHandle[O any, P comparable](owner *O, h *handle[P], ptr P, free func(P)) {
	h.ptr, h.free = ptr, free
	h.cleanup = runtime.AddCleanup(owner, free, ptr)
}

// acquire returns the live pointer and holds the handle until release; ErrClosed after
// Close.
func (h *handle[P]) acquire() (P, error) {
	h.mu.RLock()
	var zero P
	if h.ptr == zero {
		h.mu.RUnlock()
		return zero, ErrClosed
	}
	return h.ptr, nil
}

func (h *handle[P]) release() { h.mu.RUnlock() }

// close frees the pointer once, after the calls using it returned.
func (h *handle[P]) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var zero P
	if h.ptr != zero {
		h.cleanup.Stop()
		h.free(h.ptr)
		h.ptr = zero
	}
	return nil
}

// borrow acquires the handle for one call and returns the pointer and the release.
func (h *handle[P]) borrow() (P, func(), error) {
	p, err := h.acquire()
	if err != nil {
		return p, nil, err
	}
	return p, h.release, nil
}
