//! Threads, runs, rewinds and forks across the boundary.

use crate::boundary::*;
use crate::workspace::cairn_workspace;
use cairn_rewind::{
    AppendOptions, CheckpointOptions, Checkpoints, EntryId, EntryKind, Files, ForkOptions,
    MemoryKind, NewEntry, NewMemory, RewindOptions, Run, RunId, RunOptions, ThreadId, Threads,
    ThreadsOptions, ToolCallId,
};
use cairn_store::RelPath;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

// After this module's own functions in the header (cbindgen takes a module's items, then its
// modules', in the order they are declared): runs, rewinds and forks, events, then the inbox.
mod runs;

mod rewind;

mod events;

mod inbox;

pub use events::*;
pub use inbox::*;
pub use rewind::*;
pub use runs::*;

/// A thread database handle (SQLite, shared safely by threads and processes). Thread-safe:
/// functions taking `const cairn_threads *` may run concurrently on one handle.
pub struct cairn_threads {
    threads: Threads,
    workspace: Option<Arc<cairn_restore::Workspace>>,
}

/// A run held by this process: its lease, its tool calls, its checkpoint policy.
pub struct cairn_run {
    run: Run,
}

fn ws_arg(ws: *const cairn_workspace) -> Option<Arc<dyn Files>> {
    arg!(maybe ws).map(|w| w.ws.clone() as Arc<dyn Files>)
}

fn ms(v: Option<u64>) -> Option<Duration> {
    v.map(Duration::from_millis)
}

/// A checkpoint policy level; omitted fields take their defaults (`enabled` is true).
#[derive(Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "CheckpointPolicy"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct PolicyJson {
    enabled: bool,
    exclude: Vec<String>,
    max_file_bytes: Option<u64>,
    before_tools: Option<bool>,
    before_compaction: Option<bool>,
}

impl Default for PolicyJson {
    fn default() -> Self {
        PolicyJson {
            enabled: true,
            exclude: Vec::new(),
            max_file_bytes: None,
            before_tools: None,
            before_compaction: None,
        }
    }
}

impl From<PolicyJson> for Checkpoints {
    fn from(p: PolicyJson) -> Self {
        Checkpoints {
            enabled: p.enabled,
            exclude: p.exclude,
            max_file_bytes: p.max_file_bytes,
            before_tools: p.before_tools,
            before_compaction: p.before_compaction,
        }
    }
}

#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "ThreadsOptions"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct OpenJson {
    checkpoints: Option<PolicyJson>,
    rewind_files: Option<bool>,
    recover: Option<bool>,
    busy_timeout_ms: Option<u64>,
}

/// Opens the thread database at `path` (created if needed): an SQLite file, or a PostgreSQL
/// database when `path` is a `postgres://` or `postgresql://` URL (shared by several machines).
/// With an empty path and a workspace, the database is `<store>/threads.db` of that workspace. `workspace` (may be
/// NULL) is the default workspace for checkpoints, rewinds and forks, and is used to finish a
/// rewind a crash interrupted. Options, may be empty: `{"checkpoints": {"enabled": bool,
/// "exclude": [glob], "max_file_bytes": n, "before_tools": bool, "before_compaction": bool},
/// "rewind_files": bool, "recover": bool, "busy_timeout_ms": n}`.
///
/// # Safety
/// Inputs valid for their lengths; `workspace` NULL or live; `out` writable; `err_out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_open(
    path: *const u8,
    path_len: usize,
    options_json: *const u8,
    options_len: usize,
    workspace: *const cairn_workspace,
    out: *mut *mut cairn_threads,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let out = arg!(out out);
        let path = arg!(bytes path, path_len, "path");
        let o: OpenJson = arg!(options options_json, options_len, "threads options");
        let ws = arg!(maybe workspace).map(|w| w.ws.clone());
        let mut options = ThreadsOptions {
            checkpoints: o.checkpoints.map(Checkpoints::from),
            workspaces: ws.iter().map(|w| w.clone() as Arc<dyn Files>).collect(),
            ..ThreadsOptions::default()
        };
        if let Some(v) = o.rewind_files {
            options.rewind_files = v;
        }
        if let Some(v) = o.recover {
            options.recover = v;
        }
        if let Some(v) = o.busy_timeout_ms {
            options.busy_timeout = Duration::from_millis(v);
        }
        let threads = if path.is_empty() {
            let w = ws.as_ref().ok_or_else(|| {
                FfiError::invalid("give the database path, or a workspace whose store keeps it")
            })?;
            Threads::open_in_store(w.store().path(), options)?
        } else {
            use std::os::unix::ffi::OsStrExt;
            Threads::open(
                std::path::Path::new(std::ffi::OsStr::from_bytes(path)),
                options,
            )?
        };
        out.put(cairn_threads {
            threads,
            workspace: ws,
        })
    })
}

/// Frees a thread database handle. NULL is accepted.
///
/// # Safety
/// `t` NULL or a live handle not in use.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_free(t: *mut cairn_threads) {
    // SAFETY: per the contract above; the drop runs inside the panic boundary.
    unsafe { crate::boundary::free_boxed(t, "a thread database handle") }
}

impl cairn_threads {
    fn workspace_or(&self, ws: *const cairn_workspace) -> Option<Arc<dyn Files>> {
        ws_arg(ws).or_else(|| self.workspace.clone().map(|w| w as Arc<dyn Files>))
    }

    /// The workspace of an append or a delivery: with a run, `ws` only (the run has its own);
    /// without, `ws` or the handle's default one.
    fn workspace_for(
        &self,
        run: Option<&Run>,
        ws: *const cairn_workspace,
    ) -> Option<Arc<dyn Files>> {
        match run {
            Some(_) => ws_arg(ws),
            None => self.workspace_or(ws),
        }
    }
}

#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "ThreadOptions"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct CreateJson {
    id: Option<String>,
    metadata: Option<serde_json::Value>,
}

/// Creates a thread (`{"id": str, "metadata": {...}}`, may be empty); writes it as JSON. An id
/// that exists already is `CAIRN_ERR_VALIDATION`.
///
/// # Safety
/// `t` live; inputs valid; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_create(
    t: *const cairn_threads,
    options_json: *const u8,
    options_len: usize,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let out = arg!(out out);
        let o: CreateJson = arg!(options options_json, options_len, "thread options");
        let thread = t.threads.create_thread(
            o.id.map(ThreadId::new),
            o.metadata.unwrap_or_else(|| serde_json::json!({})),
        )?;
        out.json(&thread)
    })
}

/// Lists every thread as JSON.
///
/// # Safety
/// `t` live; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_list(
    t: *const cairn_threads,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let out = arg!(out out);
        out.json(&t.threads.threads()?)
    })
}

#[derive(Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "Entry"))]
pub(crate) struct EntryOut<'a> {
    #[serde(flatten)]
    entry: &'a cairn_rewind::Entry,
    /// The payload: a string when UTF-8, `{"hex": ...}` otherwise.
    payload: RelPath,
}

/// What `cairn_threads_append` writes: `cairn_rewind::Appended` with the entry's payload.
/// Fields in name order, as the document had them when it was made with `json!`.
#[derive(Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "Appended"))]
pub(crate) struct AppendedOut<'a> {
    /// The checkpoint taken before it.
    checkpoint: &'a Option<cairn_rewind::Checkpoint>,
    /// A checkpoint was due and failed: the entry was saved without one.
    checkpoint_error: &'a Option<cairn_rewind::CheckpointFailure>,
    /// The entry (the first one, when the admission key was seen before).
    entry: EntryOut<'a>,
    /// The admission key was seen before: this is the first entry, and nothing was written.
    repeated: bool,
}

impl<'a> AppendedOut<'a> {
    fn of(a: &'a cairn_rewind::Appended) -> Self {
        AppendedOut {
            checkpoint: &a.checkpoint,
            checkpoint_error: &a.checkpoint_error,
            entry: EntryOut::of(&a.entry),
            repeated: a.repeated,
        }
    }
}

impl<'a> EntryOut<'a> {
    fn of(entry: &'a cairn_rewind::Entry) -> Self {
        EntryOut {
            entry,
            payload: RelPath(entry.payload.clone()),
        }
    }
}

fn entries_out(entries: &[cairn_rewind::Entry]) -> Vec<EntryOut<'_>> {
    entries.iter().map(EntryOut::of).collect()
}

/// The entries of a thread as JSON: the active branch, or with `all` every branch (nothing is
/// ever deleted).
///
/// # Safety
/// `t` live; `thread` valid; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_log(
    t: *const cairn_threads,
    thread: *const u8,
    thread_len: usize,
    all: bool,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let out = arg!(out out);
        let id = ThreadId::new(arg!(text thread, thread_len, "thread"));
        let entries = if all {
            t.threads.entries(&id, true)?
        } else {
            t.threads.active_branch(&id)?
        };
        out.json(&entries_out(&entries))
    })
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "NewEntry"))]
#[serde(deny_unknown_fields)]
pub(crate) struct AppendJson {
    kind: EntryKind,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    payload_hex: Option<String>,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    wait_ms: Option<u64>,
}

/// Appends an entry: `{"kind": "user"|"assistant"|"tool"|"note"|"event"|"compaction",
/// "text": str | "payload_hex": hex, "metadata": {...}, "key": admission key, "wait_ms": n}`.
/// A user entry is preceded by a checkpoint of the workspace when the policy says so (the
/// run's, else `workspace`, else the handle's default workspace); a checkpoint that fails is
/// reported in `checkpoint_error` and the entry is saved anyway. Repeating a key returns the
/// first entry (`repeated: true`). `run` and `workspace` may be NULL.
///
/// # Safety
/// `t` live; inputs valid; `run`, `workspace` NULL or live; `out` writable; `err_out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_append(
    t: *const cairn_threads,
    thread: *const u8,
    thread_len: usize,
    entry_json: *const u8,
    entry_len: usize,
    run: *const cairn_run,
    workspace: *const cairn_workspace,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let out = arg!(out out);
        let id = ThreadId::new(arg!(text thread, thread_len, "thread"));
        let raw = arg!(bytes entry_json, entry_len, "entry");
        let e: AppendJson = serde_json::from_slice(raw).map_err(|err| {
            FfiError::invalid(format!("the entry is not a valid document: {err}"))
        })?;
        let payload = payload_of(e.text, e.payload_hex)?;
        let mut entry = NewEntry::new(e.kind, payload);
        if let Some(m) = e.metadata {
            entry = entry.with_metadata(m);
        }
        let run = arg!(maybe run).map(|r| r.run.clone());
        let opts = AppendOptions {
            workspace: t.workspace_for(run.as_ref(), workspace),
            run,
            key: e.key,
            wait: ms(e.wait_ms).unwrap_or_default(),
            files_of: None,
        };
        let appended = t.threads.append(&id, entry, &opts)?;
        out.json(&AppendedOut::of(&appended))
    })
}

/// An entry's or a prompt's payload from its document: `text`, or `payload_hex`, or empty.
fn payload_of(text: Option<String>, payload_hex: Option<String>) -> Result<Vec<u8>, FfiError> {
    match (text, payload_hex) {
        (Some(t), None) => Ok(t.into_bytes()),
        (None, Some(h)) => {
            hex_decode(&h).ok_or_else(|| FfiError::invalid("payload_hex is not hex"))
        }
        (None, None) => Ok(Vec::new()),
        (Some(_), Some(_)) => Err(FfiError::invalid(
            "give either text or payload_hex, not both",
        )),
    }
}

fn hex_decode(h: &str) -> Option<Vec<u8>> {
    if h.len() % 2 != 0 {
        return None;
    }
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Takes a manual checkpoint labelled `label` (the run's workspace, else `workspace`, else the
/// default one); writes the checkpoint as JSON.
///
/// # Safety
/// `t` live; inputs valid; `run`, `workspace` NULL or live; `out` writable; `err_out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_checkpoint(
    t: *const cairn_threads,
    thread: *const u8,
    thread_len: usize,
    label: *const u8,
    label_len: usize,
    run: *const cairn_run,
    workspace: *const cairn_workspace,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let out = arg!(out out);
        let id = ThreadId::new(arg!(text thread, thread_len, "thread"));
        let label = arg!(text label, label_len, "label");
        let run = arg!(maybe run).map(|r| r.run.clone());
        let opts = CheckpointOptions {
            workspace: if run.is_none() {
                t.workspace_or(workspace)
            } else {
                ws_arg(workspace)
            },
            run,
            ..CheckpointOptions::default()
        };
        out.json(&t.threads.checkpoint(&id, label, &opts)?)
    })
}

/// The checkpoints of a thread and of the threads it was forked from, as JSON.
///
/// # Safety
/// `t` live; `thread` valid; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_list_checkpoints(
    t: *const cairn_threads,
    thread: *const u8,
    thread_len: usize,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let out = arg!(out out);
        let id = ThreadId::new(arg!(text thread, thread_len, "thread"));
        out.json(&t.threads.list_checkpoints(&id)?)
    })
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "NewMemory"))]
#[serde(deny_unknown_fields)]
pub(crate) struct MemoryJson {
    kind: MemoryKind,
    #[serde(default)]
    text: String,
    #[serde(default)]
    stands_on: Vec<String>,
}

/// Adds a memory item `{"kind": "item"|"summary", "text": str, "stands_on": [entry id]}`;
/// writes it as JSON.
///
/// # Safety
/// `t` live; inputs valid; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_add_memory(
    t: *const cairn_threads,
    thread: *const u8,
    thread_len: usize,
    memory_json: *const u8,
    memory_len: usize,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let out = arg!(out out);
        let id = ThreadId::new(arg!(text thread, thread_len, "thread"));
        let raw = arg!(bytes memory_json, memory_len, "memory");
        let m: MemoryJson = serde_json::from_slice(raw).map_err(|err| {
            FfiError::invalid(format!("the memory item is not a valid document: {err}"))
        })?;
        let item = t.threads.add_memory(
            &id,
            NewMemory {
                kind: m.kind,
                text: m.text,
                payload: Vec::new(),
                stands_on: m.stands_on.into_iter().map(EntryId::new).collect(),
            },
        )?;
        out.json(&item)
    })
}

/// The memory items seen from the thread's active branch (stale ones included, marked), as
/// JSON.
///
/// # Safety
/// `t` live; `thread` valid; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_memory(
    t: *const cairn_threads,
    thread: *const u8,
    thread_len: usize,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let out = arg!(out out);
        let id = ThreadId::new(arg!(text thread, thread_len, "thread"));
        out.json(&t.threads.memory(&id)?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // issue 54: the rewind options of the C ABI carry an agent's continuation.
    #[test]
    fn rewind_options_carry_a_continuation_with_its_data_and_names() {
        let o: RewindJson = serde_json::from_str(
            r#"{"continuation": {"data": {"new_session_id": "s2"}, "names": ["claude-s2"]}}"#,
        )
        .expect("the options parse");
        let Ok(r) = rewind_options(o, None) else {
            panic!("the options build")
        };
        assert_eq!(
            r.continuation,
            Some(cairn_rewind::Continuation {
                data: serde_json::json!({"new_session_id": "s2"}),
                names: vec![ThreadId::new("claude-s2")],
            })
        );
        let Ok(none) = rewind_options(RewindJson::default(), None) else {
            panic!("the defaults build")
        };
        assert_eq!(none.continuation, None);
    }

    /// Issue 54: a rewind through the C ABI of a thread Claude Code's hooks wrote keeps where
    /// Claude's conversation continues, as `cairn rewind` does, without the caller bringing it.
    #[test]
    fn a_rewind_of_a_claude_thread_through_the_abi_prepares_its_conversation_half() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let threads =
            Threads::open(dir.path().join("threads.db"), Default::default()).expect("threads");
        let t = cairn_threads {
            threads,
            workspace: None,
        };
        let id = ThreadId::new("claude-s1");
        t.threads
            .create_thread(
                Some(id.clone()),
                serde_json::json!({ "agent": "claude-code" }),
            )
            .expect("a thread");
        let transcript = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../agents/tests/data/claude-2.1.197-rewound.jsonl");
        let prompt = |text: &str, prompt_id: &str| {
            let place = serde_json::json!({ "conversation": {
                "agent": "claude-code", "session_id": "s1", "transcript": transcript,
                "prompt_id": prompt_id,
            }});
            let e = NewEntry::user(text.to_string()).with_metadata(place);
            let appended = t
                .threads
                .append(&id, e, &Default::default())
                .expect("a prompt");
            appended.entry.id
        };
        let first = prompt("FIRST", "38a2cfb1-c739-481c-87be-a2aaf2f1aebd");
        prompt("SECOND", "3297a2da-d41f-4ecb-b327-58618dc03a6b");
        let Ok(report) = rewind_like(
            &t,
            "claude-s1",
            first.as_str(),
            RewindJson::default(),
            std::ptr::null(),
            false,
        ) else {
            panic!("the rewind")
        };
        let cont = report.continuation.expect("prepared");
        assert_eq!(cont["at"], "24d6161b-b108-4fd7-88ed-cef7e50fa2e4");
        let new = cont["session_id"].as_str().expect("a new session");
        assert_eq!(
            t.threads
                .resolve(&ThreadId::new(format!("claude-{new}")))
                .ok(),
            Some(id)
        );
    }
}
