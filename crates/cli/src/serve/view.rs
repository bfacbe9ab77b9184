//! `GET /v1/threads/{id}/view`: a thread's durable view, whole: its checkpoints, its rewinds
//! with their state and key, every entry (every branch), and its active branch, with the
//! event log's cursor it was read at (issue 59). A client that reads the view and then the
//! feed from that cursor has every change after it, once.

use super::error::{blocking, ApiResult, ErrorBody};
use super::Service;
use axum::extract::{Path as UrlPath, State};
use serde::Serialize;
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this part.
pub(crate) fn routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new().routes(routes!(view))
}

/// A thread.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ThreadInfo {
    /// Its id.
    id: String,
    /// The end of its active branch (none while it is empty).
    active_leaf: Option<String>,
    /// The thread it was forked from.
    parent_thread: Option<String>,
    /// The entry it was forked at.
    fork_entry: Option<String>,
    /// The caller's metadata.
    #[schema(value_type = Object)]
    metadata: serde_json::Value,
    /// When it was made (ms since the Unix epoch).
    created_ms: i64,
}

/// An entry (a message, a tool call, a note...).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EntryView {
    /// Its id.
    id: String,
    /// The entry before it.
    parent_id: Option<String>,
    /// The thread that wrote it (a fork shares its source's first entries).
    thread_id: String,
    /// `user`, `assistant`, `tool`, `note`, ...
    kind: String,
    /// Its payload as text (lossy where it is not UTF-8).
    text: String,
    /// Its metadata.
    #[schema(value_type = Object)]
    metadata: serde_json::Value,
    /// The admission key it was appended with.
    key: Option<String>,
    /// The checkpoint taken before it.
    checkpoint_id: Option<String>,
    /// Whether it is on the active branch.
    on_active_branch: bool,
    /// When it was appended (ms since the Unix epoch).
    created_ms: i64,
}

/// A checkpoint of the thread's lineage.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CheckpointView {
    /// Its id (`cp_…`): a rewind may go to it.
    checkpoint_id: String,
    /// The thread it was taken in.
    thread_id: String,
    /// The entry it was taken for, or at.
    entry_id: Option<String>,
    /// Why it was taken (`user`, `tool`, `manual`, `before_rewind`, ...).
    kind: String,
    /// Its label.
    label: Option<String>,
    /// Its snapshot.
    snapshot_id: String,
    /// When (ms since the Unix epoch).
    created_ms: i64,
}

/// A rewind of the thread.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RewindView {
    /// Its id.
    rewind_id: String,
    /// Its request key.
    key: Option<String>,
    /// `started`, `files_done`, `completed` or `failed`.
    state: String,
    /// The entry it went to (none: the start of the thread).
    to_entry_id: Option<String>,
    /// Why it failed.
    error: Option<String>,
    /// When it started (ms since the Unix epoch).
    created_ms: i64,
    /// When it ended.
    finished_ms: Option<i64>,
}

/// A thread's view.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ThreadView {
    /// The event log's cursor before the view was read: the feed from it has every later
    /// change.
    cursor: i64,
    /// The thread.
    thread: ThreadInfo,
    /// The active branch's entry ids, oldest first.
    active_branch: Vec<String>,
    /// Every entry the thread sees, every branch, in the order they were written.
    entries: Vec<EntryView>,
    /// The checkpoints of its lineage, oldest first.
    checkpoints: Vec<CheckpointView>,
    /// Its rewinds, oldest first.
    rewinds: Vec<RewindView>,
}

fn text_of<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// A thread's view: checkpoints, rewinds with their state, every entry, the active branch.
#[utoipa::path(get, path = "/v1/threads/{id}/view", operation_id = "thread_view", tag = "threads",
    params(("id" = String, Path, description = "The thread's id (or a name a rewind gave it)")),
    responses((status = 200, body = ThreadView), (status = 404, body = ErrorBody)))]
pub(crate) async fn view(
    State(service): State<Arc<Service>>,
    UrlPath(id): UrlPath<String>,
) -> ApiResult<ThreadView> {
    blocking(service, move |s| {
        let threads = &s.opened.threads;
        let cursor = threads.last_cursor()?;
        let t = crate::threads::thread_named(threads, &id)?;
        let entries = threads.entries(&t.id, true)?;
        let active_branch = threads
            .active_branch(&t.id)?
            .into_iter()
            .map(|e| e.id.to_string())
            .collect();
        let checkpoints = threads
            .list_checkpoints(&t.id)?
            .into_iter()
            .map(|c| CheckpointView {
                checkpoint_id: c.id.to_string(),
                thread_id: c.thread_id.to_string(),
                entry_id: c.entry_id.map(|e| e.to_string()),
                kind: text_of(&c.kind),
                label: c.label,
                snapshot_id: c.snapshot_id.to_string(),
                created_ms: c.created_ms,
            })
            .collect();
        let rewinds = threads
            .rewinds(&t.id)?
            .into_iter()
            .map(|r| RewindView {
                rewind_id: r.id.to_string(),
                key: r.key,
                state: r.state,
                to_entry_id: r.to_entry_id.map(|e| e.to_string()),
                error: r.error,
                created_ms: r.created_ms,
                finished_ms: r.finished_ms,
            })
            .collect();
        Ok(ThreadView {
            cursor,
            active_branch,
            entries: entries
                .into_iter()
                .map(|e| EntryView {
                    text: String::from_utf8_lossy(&e.payload).into_owned(),
                    id: e.id.to_string(),
                    parent_id: e.parent_id.map(|p| p.to_string()),
                    thread_id: e.thread_id.to_string(),
                    kind: e.kind.name().to_string(),
                    metadata: e.metadata,
                    key: e.key,
                    checkpoint_id: e.checkpoint.map(|c| c.checkpoint_id.to_string()),
                    on_active_branch: e.on_active_branch,
                    created_ms: e.created_ms,
                })
                .collect(),
            checkpoints,
            rewinds,
            thread: ThreadInfo {
                id: t.id.to_string(),
                active_leaf: t.active_leaf.map(|e| e.to_string()),
                parent_thread: t.parent_thread.map(|p| p.to_string()),
                fork_entry: t.fork_entry.map(|e| e.to_string()),
                metadata: t.metadata,
                created_ms: t.created_ms,
            },
        })
    })
    .await
}
