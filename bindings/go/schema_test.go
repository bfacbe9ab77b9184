package cairn

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The binding's types against include/cairn.schema.json, field by field. The schema is made
// from the Rust types (crates/ffi/src/schema.rs), so a field a Rust report gains fails here
// until the Go struct that decodes it has a json tag for it, and an option the C ABI gains
// fails until the package sends it.

// schemaResults maps each object of the schema's results to the Go type that decodes it.
var schemaResults = map[string]reflect.Type{
	"Action":             reflect.TypeFor[Action](),
	"Admission":          reflect.TypeFor[Admission](),
	"Appended":           reflect.TypeFor[Appended](),
	"Attribution":        reflect.TypeFor[Attribution](),
	"BadCopy":            reflect.TypeFor[BadCopy](),
	"BrokenIndex":        reflect.TypeFor[BrokenIndex](),
	"CacheTrim":          reflect.TypeFor[CacheTrim](),
	"CaptureSettings":    reflect.TypeFor[CaptureSettings](),
	"Change":             reflect.TypeFor[Change](),
	"Checkpoint":         reflect.TypeFor[Checkpoint](),
	"CheckpointFailure":  reflect.TypeFor[CheckpointFailure](),
	"CheckpointRef":      reflect.TypeFor[CheckpointRef](),
	"ConversationReport": fieldType[RewindReport]("Conversation"),
	"CopyReport":         reflect.TypeFor[CopyReport](),
	"Delivery":           reflect.TypeFor[Delivery](),
	"Entry":              reflect.TypeFor[Entry](),
	"EntryInfo":          reflect.TypeFor[EntryInfo](),
	"Event":              reflect.TypeFor[Event](),
	"FilesReport":        reflect.TypeFor[FilesReport](),
	"ForkReport":         reflect.TypeFor[ForkReport](),
	"GcPlan":             reflect.TypeFor[GCPlan](),
	"GcReport":           reflect.TypeFor[GCReport](),
	"KeptPath":           reflect.TypeFor[KeptPath](),
	"MemoryItem":         reflect.TypeFor[MemoryItem](),
	"MemoryReport":       fieldType[RewindReport]("Memory"),
	"PackPlan":           reflect.TypeFor[PackPlan](),
	"Plan":               reflect.TypeFor[Plan](),
	"PruneReport":        reflect.TypeFor[PruneReport](),
	"Recovery":           reflect.TypeFor[Recovery](),
	"RemoteGcDone":       reflect.TypeFor[GCReport](),
	"RemoteGcReport":     reflect.TypeFor[RemoteGCReport](),
	"RestoreReport":      reflect.TypeFor[RestoreReport](),
	"RewindReport":       reflect.TypeFor[RewindReport](),
	"RunInfo":            reflect.TypeFor[RunInfo](),
	"RunsReport":         reflect.TypeFor[RunsReport](),
	"Skipped":            reflect.TypeFor[Skipped](),
	"SnapshotCheck":      reflect.TypeFor[SnapshotCheck](),
	"SnapshotInfo":       reflect.TypeFor[Snapshot](),
	"SnapshotKept":       reflect.TypeFor[Excluded](),
	"SnapshotTaken":      reflect.TypeFor[Snapshot](),
	"Stats":              reflect.TypeFor[Stats](),
	"Thread":             reflect.TypeFor[Thread](),
	"ThreadRuns":         reflect.TypeFor[ThreadRuns](),
	"Unreadable":         reflect.TypeFor[UnreadableSnapshot](),
	"Verified":           reflect.TypeFor[VerifyReport](),
	"WalkInfo":           reflect.TypeFor[WalkInfo](),
	"WatchStatus":        reflect.TypeFor[WatchStatus](),
	"WorkspaceInfo":      reflect.TypeFor[Info](),
}

// schemaHandDecoded lists, per Go type, the keys its UnmarshalJSON reads by hand into a field
// tagged `json:"-"` (a time, a payload).
var schemaHandDecoded = map[reflect.Type][]string{
	reflect.TypeFor[Stats]():      {"duration_ms"},
	reflect.TypeFor[Snapshot]():   {"created_ms"},
	reflect.TypeFor[Thread]():     {"created_ms"},
	reflect.TypeFor[Entry]():      {"created_ms"},
	reflect.TypeFor[Checkpoint](): {"created_ms"},
	reflect.TypeFor[MemoryItem](): {"created_ms"},
	reflect.TypeFor[RunInfo]():    {"started_ms", "lease_expires_ms"},
	reflect.TypeFor[Event]():      {"created_ms"},
}

// schemaEncodings are objects of the schema that are an encoding, decoded to a plain value: a
// path that is not UTF-8 ({"hex": ...}) becomes a string of its bytes (jpath).
var schemaEncodings = []string{"Path"}

func fieldType[T any](name string) reflect.Type {
	f, ok := reflect.TypeFor[T]().FieldByName(name)
	if !ok {
		panic("no field " + name)
	}
	return f.Type
}

type jsonSchema = map[string]any

func loadSchema(t *testing.T) jsonSchema {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "include", "cairn.schema.json"))
	if err != nil {
		t.Skipf("include/cairn.schema.json is not beside this package: %v", err)
	}
	var s jsonSchema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// schemaProperties is the property names of an object schema, its variants' included.
func schemaProperties(s jsonSchema) []string {
	var names []string
	if props, ok := s["properties"].(jsonSchema); ok {
		for k := range props {
			names = append(names, k)
		}
	}
	for _, key := range []string{"oneOf", "anyOf", "allOf"} {
		branches, _ := s[key].([]any)
		for _, b := range branches {
			if b, ok := b.(jsonSchema); ok && b["$ref"] == nil {
				names = append(names, schemaProperties(b)...)
			}
		}
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// schemaReached is the names of the $defs the schemas roots reach.
func schemaReached(s jsonSchema, roots []any) map[string]bool {
	defs := s["$defs"].(jsonSchema)
	seen := map[string]bool{}
	todo := roots
	for len(todo) > 0 {
		v := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		switch v := v.(type) {
		case []any:
			todo = append(todo, v...)
		case jsonSchema:
			if ref, ok := v["$ref"].(string); ok && strings.HasPrefix(ref, "#/$defs/") {
				name := strings.TrimPrefix(ref, "#/$defs/")
				if !seen[name] {
					seen[name] = true
					todo = append(todo, defs[name])
				}
			}
			for _, x := range v {
				todo = append(todo, x)
			}
		}
	}
	return seen
}

// schemaObjects is the object $defs the results (results true) or the JSON arguments reach,
// with their properties; one a result reaches too (a plan given back) counts as a result.
func schemaObjects(s jsonSchema, results bool) map[string][]string {
	var outs, ins []any
	for _, f := range s["functions"].(jsonSchema) {
		for k, v := range f.(jsonSchema) {
			if k == "result" {
				outs = append(outs, v)
			} else {
				ins = append(ins, v)
			}
		}
	}
	fromResults := schemaReached(s, outs)
	names := fromResults
	if !results {
		names = map[string]bool{}
		for n := range schemaReached(s, ins) {
			if !fromResults[n] {
				names[n] = true
			}
		}
	}
	defs := s["$defs"].(jsonSchema)
	out := map[string][]string{}
	for n := range names {
		if slices.Contains(schemaEncodings, n) {
			continue
		}
		if p := schemaProperties(defs[n].(jsonSchema)); len(p) > 0 {
			out[n] = p
		}
	}
	return out
}

// jsonKeys is the json tag names of a struct type's fields (embedded structs' included), and
// the keys its UnmarshalJSON reads by hand.
func jsonKeys(t reflect.Type) map[string]bool {
	keys := map[string]bool{}
	for _, k := range schemaHandDecoded[t] {
		keys[k] = true
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k := range jsonKeys(f.Type) {
				keys[k] = true
			}
			continue
		}
		if name != "" && name != "-" {
			keys[name] = true
		}
	}
	return keys
}

func TestEveryPropertyOfEveryResultIsAFieldOfItsGoType(t *testing.T) {
	s := loadSchema(t)
	objects := schemaObjects(s, true)
	var missing []string
	for name := range objects {
		if _, ok := schemaResults[name]; !ok {
			missing = append(missing, name+" (no Go type: add it to schemaResults)")
		}
	}
	for name := range schemaResults {
		if _, ok := objects[name]; !ok {
			missing = append(missing, name+" (in schemaResults, no longer in the schema)")
		}
	}
	for name, props := range objects {
		typ, ok := schemaResults[name]
		if !ok {
			continue
		}
		keys := jsonKeys(typ)
		for _, p := range props {
			if !keys[p] {
				missing = append(missing, name+"."+p+" ("+typ.String()+")")
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("fields of the Rust reports the Go binding does not know:\n  %s", strings.Join(missing, "\n  "))
	}
}

// sentKeys is every json tag name in the package's struct types, named or not (the options
// are encoded through anonymous structs in their encode methods).
func sentKeys(t *testing.T) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			st, ok := n.(*ast.StructType)
			if !ok {
				return true
			}
			for _, field := range st.Fields.List {
				if field.Tag == nil {
					continue
				}
				tag, err := strconv.Unquote(field.Tag.Value)
				if err != nil {
					t.Fatal(err)
				}
				name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
				if name != "" && name != "-" {
					keys[name] = true
				}
			}
			return true
		})
	}
	return keys
}

func TestEveryOptionOfTheCABIIsSentByTheGoBinding(t *testing.T) {
	s := loadSchema(t)
	keys := sentKeys(t)
	var missing []string
	for name, props := range schemaObjects(s, false) {
		for _, p := range props {
			if !keys[p] {
				missing = append(missing, name+"."+p)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("options of the C ABI the Go binding never sends:\n  %s", strings.Join(missing, "\n  "))
	}
}
