// Package linuxarm64 holds libcairn.a for linux/arm64, built and copied here by
// ../../build-lib.sh for the cgo directives of the cairn package. It has no Go API: the
// blank import in ../../ffi.go makes `go mod vendor` keep this directory.
package linuxarm64
