package cairn

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// Precise restores (issue 31): chosen paths only, and drift refused, kept or overwritten.

func (f *fixture) mtime(rel string) int64 {
	f.t.Helper()
	st, err := os.Stat(filepath.Join(f.root, rel))
	if err != nil {
		f.t.Fatal(err)
	}
	return st.ModTime().UnixNano()
}

func TestARestoreOfChosenPathsTouchesNothingElseAndItsSafetySnapshotUndoesIt(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.write("a/one.txt", "one\n")
	f.write("b/two.txt", "two\n")
	base, err := f.ws.Snapshot(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.write("a/one.txt", "one, edited\n")
	f.write("a/new.txt", "new\n")
	f.write("b/two.txt", "two, edited\n")
	outside := f.mtime("b/two.txt")

	plan, err := f.ws.Plan(ctx, base.ID, &RestoreOptions{Paths: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	changed := append(append([]string{}, plan.Restored...), plan.Deleted...)
	sort.Strings(changed)
	if !reflect.DeepEqual(plan.Paths, []string{"a"}) || !reflect.DeepEqual(changed, []string{"a/new.txt", "a/one.txt"}) {
		t.Fatalf("plan: paths %v, changes %v", plan.Paths, changed)
	}
	report, err := f.ws.Apply(ctx, plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.read("a/one.txt") != "one\n" || f.read("b/two.txt") != "two, edited\n" || f.mtime("b/two.txt") != outside {
		t.Fatalf("after the restore: a/one.txt %q, b/two.txt %q", f.read("a/one.txt"), f.read("b/two.txt"))
	}
	if _, err := os.Stat(filepath.Join(f.root, "a/new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a/new.txt is still there: %v", err)
	}
	undo, err := f.ws.Restore(ctx, report.SafetySnapshotID, &RestoreOptions{Paths: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(undo.Paths, []string{"a"}) || f.read("a/new.txt") != "new\n" || f.mtime("b/two.txt") != outside {
		t.Fatalf("undo: %+v", undo)
	}
	if _, err := f.ws.Restore(ctx, base.ID, &RestoreOptions{Paths: []string{"no/such"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a path neither side has: %v", err)
	}
}

func TestDriftIsRefusedKeptOrOverwritten(t *testing.T) {
	ctx := context.Background()
	for _, policy := range []DriftPolicy{DriftRefuse, DriftKeep, DriftOverwrite} {
		t.Run(string(policy), func(t *testing.T) {
			f := newFixture(t)
			f.write("a.txt", "a0\n")
			f.write("b.txt", "b0\n")
			first, err := f.ws.Snapshot(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			f.write("a.txt", "a1\n")
			f.write("b.txt", "b1\n")
			second, err := f.ws.Snapshot(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			f.write("b.txt", "by someone else\n")
			r, err := f.ws.Restore(ctx, first.ID, &RestoreOptions{Reference: second.ID, OnDrift: policy})
			switch policy {
			case DriftRefuse:
				if !errors.Is(err, ErrConflict) || f.read("a.txt") != "a1\n" {
					t.Fatalf("refuse: %v, a.txt %q", err, f.read("a.txt"))
				}
			case DriftKeep:
				if err != nil || !reflect.DeepEqual(r.Drifted, []string{"b.txt"}) || f.read("b.txt") != "by someone else\n" || f.read("a.txt") != "a0\n" {
					t.Fatalf("keep: %v %+v", err, r)
				}
			case DriftOverwrite:
				if err != nil || !reflect.DeepEqual(r.Drifted, []string{"b.txt"}) || f.read("b.txt") != "b0\n" {
					t.Fatalf("overwrite: %v %+v", err, r)
				}
			}
		})
	}
}

func TestADiffWithAttributionNamesTheToolCallOfEachChangeAndTheBashCallOfAShellCommand(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.write("a.txt", "a0\n")
	f.write("b.txt", "b0\n")
	f.write("c.txt", "c0\n")
	snap := func(label string, meta map[string]any) *Snapshot {
		t.Helper()
		s, err := f.ws.Snapshot(ctx, &SnapshotOptions{Label: label, Metadata: meta})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	start := snap("before the turn", nil)
	// What an agent's hooks record: a checkpoint before each tool call, naming the call.
	snap("toolu_1", map[string]any{"tool_use_id": "toolu_1", "tool_name": "Edit"})
	f.write("a.txt", "a1\n")
	snap("toolu_2", map[string]any{"tool_use_id": "toolu_2", "tool_name": "Edit", "agent_id": "agent-7"})
	f.write("b.txt", "b1\n")
	snap("toolu_3", map[string]any{"tool_use_id": "toolu_3", "tool_name": "Bash"})
	sh := exec.Command("sh", "-c", "echo shell > c.txt && echo made > d.txt")
	sh.Dir = f.root
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the shell command: %v: %s", err, out)
	}

	plain, err := f.ws.DiffWith(ctx, start.ID, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range plain {
		if c.Attribution != nil {
			t.Fatalf("%s has an attribution without Attribute: %+v", c.Path, c.Attribution)
		}
	}
	changes, err := f.ws.DiffWith(ctx, start.ID, "", &DiffOptions{Attribute: true})
	if err != nil {
		t.Fatal(err)
	}
	who := map[string][]string{}
	for _, c := range changes {
		for _, a := range c.Attribution {
			who[c.Path] = append(who[c.Path], a.ToolUseID+" "+a.ToolName+" "+a.AgentID)
		}
	}
	want := map[string][]string{
		"a.txt": {"toolu_1 Edit "},
		"b.txt": {"toolu_2 Edit agent-7"},
		"c.txt": {"toolu_3 Bash "},
		"d.txt": {"toolu_3 Bash "},
	}
	if !reflect.DeepEqual(who, want) {
		t.Fatalf("attribution: got %v, want %v", who, want)
	}
}
