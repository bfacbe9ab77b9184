//! `include/cairn.schema.json`: the JSON Schema of every document that crosses the C ABI,
//! made from the Rust types themselves (`schemars`): the options structs of this crate
//! (`json.rs`, `threads/`) and the reports of the library crates, which derive
//! `JsonSchema` behind their `schema` feature (enabled here as a dev-dependency). One
//! document: `functions` names, for each C function that takes or gives JSON, the schema of
//! each JSON argument (by its C name) and of its result, each with a title; `$defs` holds the
//! types. The bindings' tests read it and check their types field by field.
//!
//! `the_committed_schema_is_what_the_types_make` fails when the file differs from what the
//! types make; `CAIRN_BLESS=1 cargo test -p cairn-ffi --lib schema` rewrites it.

use crate::json;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value};
use std::path::PathBuf;

/// The schema of `T`: a `$ref` into `$defs` (which `g` collects).
fn of<T: JsonSchema>(g: &mut SchemaGenerator) -> Value {
    g.subschema_for::<T>().to_value()
}

/// A schema with a title.
fn titled(title: String, schema: Value) -> Value {
    let mut m = Map::new();
    m.insert("title".into(), Value::String(title));
    match schema {
        Value::Object(o) => m.extend(o),
        other => {
            m.insert("allOf".into(), Value::Array(vec![other]));
        }
    }
    Value::Object(m)
}

/// The JSON arguments (by their C name) and the result of one C function.
type Function = (&'static str, Vec<(&'static str, Value)>, Option<Value>);

/// What `cairn_workspace_gc` writes: the report, the plan of a dry run, or what the collector
/// of a remote did.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum GcResult {
    Report(cairn_store::gc::GcReport),
    Plan(cairn_store::gc::GcPlan),
    Remote(json::RemoteGcOut<'static>),
}

/// The table of [`functions`]: `name(argument: Type, ...) -> Result;`, each a `$ref`.
macro_rules! table {
    ($g:ident; $($name:literal ($($arg:ident: $ty:ty),*) $(-> $result:ty)?;)*) => {
        vec![$((
            $name,
            vec![$((stringify!($arg), of::<$ty>($g))),*],
            None$(.or(Some(of::<$result>($g))))?,
        )),*]
    };
}

/// Every C function that takes or gives a JSON document. A new one must be added here: the
/// test below reads the header and fails on a `*_json`-taking or `cairn_buf`-giving function
/// this table does not name.
fn functions(g: &mut SchemaGenerator) -> Vec<Function> {
    use crate::json::*;
    use crate::threads::{
        AdmissionOut, AppendJson, AppendedOut, CreateJson, DeliverJson, DeliveryOut, EntryOut,
        ForkJson, MemoryJson, PromptJson, RewindJson, RunJson,
    };
    use cairn_restore::{Plan, Recovery, Report};
    use cairn_rewind as rw;
    use cairn_store::{copy::CopyReport, remote::CacheTrim, retain::PruneReport};
    type ThreadsJson = crate::threads::OpenJson;
    table! { g;
        "cairn_workspace_open"(options_json: OpenJson);
        "cairn_workspace_info"() -> WorkspaceInfoOut<'static>;
        "cairn_workspace_snapshot"(options_json: SnapshotJson) -> TakenOut;
        "cairn_workspace_list"() -> Vec<SnapshotOut>;
        "cairn_workspace_show"() -> SnapshotOut;
        "cairn_workspace_diff"() -> Vec<ChangeOut>;
        "cairn_workspace_diff_with"(options_json: DiffJson) -> Vec<ChangeOut>;
        "cairn_workspace_delete"() -> PruneReport;
        "cairn_workspace_prune"(retain_json: RetainJson) -> PruneReport;
        "cairn_workspace_gc"(options_json: GcJson) -> GcResult;
        "cairn_workspace_trim_cache"() -> CacheTrim;
        "cairn_workspace_verify"() -> VerifyOut<'static>;
        "cairn_workspace_watch"(options_json: WatchJson) -> cairn_snapshot::WatchStatus;
        "cairn_workspace_copy"() -> CopyReport;
        "cairn_workspace_plan"(options_json: RestoreJson) -> Plan;
        "cairn_workspace_apply"(plan_json: Plan, options_json: RestoreJson) -> Report;
        "cairn_workspace_restore"(options_json: RestoreJson) -> Report;
        "cairn_workspace_recover"() -> Vec<Recovery>;
        "cairn_workspace_give_up"() -> Vec<Recovery>;
        "cairn_threads_open"(options_json: ThreadsJson);
        "cairn_threads_create"(options_json: CreateJson) -> rw::Thread;
        "cairn_threads_list"() -> Vec<rw::Thread>;
        "cairn_threads_log"() -> Vec<EntryOut<'static>>;
        "cairn_threads_append"(entry_json: AppendJson) -> AppendedOut<'static>;
        "cairn_threads_checkpoint"() -> rw::Checkpoint;
        "cairn_threads_list_checkpoints"() -> Vec<rw::Checkpoint>;
        "cairn_threads_add_memory"(memory_json: MemoryJson) -> rw::MemoryItem;
        "cairn_threads_memory"() -> Vec<rw::MemoryItem>;
        "cairn_threads_begin_run"(options_json: RunJson);
        "cairn_threads_end_run"() -> rw::RunStatus;
        "cairn_threads_runs"() -> rw::ThreadRuns;
        "cairn_threads_rewind"(options_json: RewindJson) -> rw::RewindReport;
        "cairn_threads_restore_before"(options_json: RewindJson) -> rw::RewindReport;
        "cairn_threads_fork"(options_json: ForkJson) -> rw::ForkReport;
        "cairn_threads_events"() -> Vec<rw::Event>;
        "cairn_threads_enqueue"(prompt_json: PromptJson) -> AdmissionOut<'static>;
        "cairn_threads_deliver"(options_json: DeliverJson) -> DeliveryOut<'static>;
        "cairn_threads_inbox"() -> Vec<AdmissionOut<'static>>;
    }
}

/// The C functions whose `cairn_buf` output is not a JSON document (a tool call's id, text).
const NOT_JSON: &[&str] = &["cairn_threads_tool_start"];

/// The whole schema document, as committed.
pub(crate) fn document() -> String {
    let mut g = SchemaSettings::draft2020_12().into_generator();
    let mut fns = Map::new();
    for (name, inputs, result) in functions(&mut g) {
        let mut f = Map::new();
        for (arg, schema) in inputs {
            f.insert(arg.into(), titled(format!("{name} {arg}"), schema));
        }
        if let Some(r) = result {
            f.insert("result".into(), titled(format!("{name} result"), r));
        }
        fns.insert(name.into(), Value::Object(f));
    }
    let mut doc = Map::new();
    doc.insert(
        "$schema".into(),
        "https://json-schema.org/draft/2020-12/schema".into(),
    );
    doc.insert("title".into(), "The JSON documents of libcairn".into());
    doc.insert(
        "description".into(),
        "Generated from the Rust types by crates/ffi/src/schema.rs: do not edit. `functions` \
         names, for each C function of include/cairn.h that takes or gives JSON, the schema of \
         each JSON argument (by its C name) and of its result; `$defs` holds the types."
            .into(),
    );
    doc.insert("functions".into(), Value::Object(fns));
    doc.insert(
        "$defs".into(),
        Value::Object(g.take_definitions(true).into_iter().collect()),
    );
    let mut text = serde_json::to_string_pretty(&Value::Object(doc)).unwrap_or_default();
    text.push('\n');
    text
}

fn repo_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

#[test]
fn the_committed_schema_is_what_the_types_make() {
    let path = repo_file("include/cairn.schema.json");
    let made = document();
    if std::env::var_os("CAIRN_BLESS").is_some() {
        std::fs::write(&path, &made).expect("write the schema");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == made,
        "include/cairn.schema.json is out of date: run `CAIRN_BLESS=1 cargo test -p cairn-ffi --lib schema`"
    );
}

#[test]
fn every_c_function_that_takes_or_gives_json_is_in_the_schema() {
    let header = std::fs::read_to_string(repo_file("include/cairn.h")).expect("the header");
    let mut g = SchemaSettings::draft2020_12().into_generator();
    let named: Vec<&str> = functions(&mut g).iter().map(|f| f.0).collect();
    // Each declaration: `cairn_status cairn_x(...);`, its arguments up to the `)`.
    let mut missing = Vec::new();
    for decl in header.split("cairn_status ").skip(1) {
        let Some((name, rest)) = decl.split_once('(') else {
            continue;
        };
        let args = rest.split(')').next().unwrap_or_default();
        let json_in = args.contains("_json");
        let buf_out = args.contains("cairn_buf **");
        if (json_in || buf_out) && !named.contains(&name) && !NOT_JSON.contains(&name) {
            missing.push(name.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "these C functions take or give JSON but src/schema.rs does not describe them: {missing:?}"
    );
}
