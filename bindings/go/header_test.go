package cairn

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// headerFunctions lists the functions cairn.h declares.
func headerFunctions(t *testing.T, header []byte) []string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^[a-z_ ]*[a-z_]+ \**(cairn_[a-z0-9_]+)\(`)
	var names []string
	for _, m := range re.FindAllSubmatch(header, -1) {
		names = append(names, string(m[1]))
	}
	if len(names) < 20 {
		t.Fatalf("found only %d functions in cairn.h: the pattern is stale", len(names))
	}
	return names
}

// The thin layer covers the header: every function cairn.h declares is called from this
// package (C.<name>), so a function added to the ABI fails this test until it is wrapped.
func TestEveryHeaderFunctionIsWrapped(t *testing.T) {
	header, err := os.ReadFile(filepath.Join("include", "cairn.h"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	for _, name := range headerFunctions(t, header) {
		if !strings.Contains(src.String(), "C."+name+"(") {
			t.Errorf("%s is declared in cairn.h but not called from the Go package", name)
		}
	}
}

// The header copied by build-lib.sh is the repository's (run build-lib.sh after changing
// crates/ffi). Skipped outside the repository (a vendored copy, say).
func TestTheCopiedHeaderIsTheRepositorysHeader(t *testing.T) {
	repo, err := os.ReadFile(filepath.Join("..", "..", "include", "cairn.h"))
	if os.IsNotExist(err) {
		t.Skip("not inside the Cairn repository")
	}
	if err != nil {
		t.Fatal(err)
	}
	copied, err := os.ReadFile(filepath.Join("include", "cairn.h"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(repo, copied) {
		have, want := headerFunctions(t, copied), headerFunctions(t, repo)
		var added []string
		for _, n := range want {
			if !slices.Contains(have, n) {
				added = append(added, n)
			}
		}
		t.Fatalf("bindings/go/include/cairn.h differs from include/cairn.h (new there: %v): run bindings/go/build-lib.sh", added)
	}
}
