package cairn_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	cairn "github.com/cairn-dev/cairn/bindings/go"
)

// Snapshot a workspace, let an "agent" change it, see what changed, and restore it.
func Example() {
	dir, err := os.MkdirTemp("", "cairn-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	notes := filepath.Join(dir, "notes.txt")
	os.WriteFile(notes, []byte("first draft\n"), 0o644)

	ctx := context.Background()
	ws, err := cairn.Open(ctx, dir, nil) // the store goes to <dir>/.cairn
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()

	snap, err := ws.Snapshot(ctx, &cairn.SnapshotOptions{Label: "before the agent"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("files in the snapshot:", snap.Stats.Files)

	// The agent edits a file and adds one.
	os.WriteFile(notes, []byte("rewritten by the agent\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "scratch.txt"), []byte("tmp\n"), 0o644)

	changes, err := ws.Diff(ctx, "before the agent", "")
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range changes {
		fmt.Println(c.Kind, c.Path)
	}

	// A restore is refused while a tool holds the workspace.
	hold, err := ws.Hold(ctx, "go test", cairn.NoProcess)
	if err != nil {
		log.Fatal(err)
	}
	_, err = ws.Restore(ctx, "before the agent", nil)
	fmt.Println("busy:", errors.Is(err, cairn.ErrBusy))
	hold.Close()

	report, err := ws.Restore(ctx, "before the agent", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("restored:", report.Restored, "deleted:", report.Deleted)
	text, _ := os.ReadFile(notes)
	fmt.Print(string(text))

	// Output:
	// files in the snapshot: 1
	// modified notes.txt
	// added scratch.txt
	// busy: true
	// restored: [notes.txt] deleted: [scratch.txt]
	// first draft
}
