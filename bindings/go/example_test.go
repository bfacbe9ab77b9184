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

// An agent's conversation with checkpoints: "restore before this prompt" puts the files and
// the conversation back together.
func ExampleThreads_RestoreBefore() {
	dir, err := os.MkdirTemp("", "cairn-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	code := filepath.Join(dir, "main.go")
	os.WriteFile(code, []byte("package main\n"), 0o644)

	ctx := context.Background()
	ws, err := cairn.Open(ctx, dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()
	// The database goes into the workspace's store; checkpoints are on.
	threads, err := cairn.OpenThreads(ctx, "", ws, &cairn.ThreadsOptions{Checkpoints: &cairn.CheckpointPolicy{}})
	if err != nil {
		log.Fatal(err)
	}
	defer threads.Close()
	if _, err := threads.Create(ctx, &cairn.CreateThreadOptions{ID: "chat"}); err != nil {
		log.Fatal(err)
	}

	say := func(kind cairn.EntryKind, text string) *cairn.Appended {
		a, err := threads.Append(ctx, "chat", cairn.NewEntry{Kind: kind, Payload: text}, nil)
		if err != nil {
			log.Fatal(err)
		}
		return a
	}
	prompt := say(cairn.EntryUser, "add a main function") // checkpoints the files first
	os.WriteFile(code, []byte("package main\n\nfunc main() { panic(1) }\n"), 0o644)
	say(cairn.EntryAssistant, "done")

	files := true // with Go 1.26: Files: new(true)
	report, err := threads.RestoreBefore(ctx, "chat", prompt.Entry.ID, &cairn.RewindOptions{Files: &files})
	if err != nil {
		log.Fatal(err)
	}
	text, _ := os.ReadFile(code)
	fmt.Printf("cut %d entries; main.go: %q\n", len(report.Conversation.Cut), text)
	entries, _ := threads.Log(ctx, "chat", false)
	fmt.Println("entries left on the active branch:", len(entries))

	// Output:
	// cut 2 entries; main.go: "package main\n"
	// entries left on the active branch: 0
}
