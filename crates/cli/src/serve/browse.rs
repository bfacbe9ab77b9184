//! The read-only part of the API: threads, a page of a thread's entries with their
//! checkpoints, a snapshot's details, diffs (a page of the file list at a time) and one file's
//! patch (issue 22; under `/v1` since issue 59).

use super::error::{blocking, ApiResult, ErrorBody};
use super::Service;
use crate::error::CliError;
use crate::files::SkippedJson;
use crate::patch::{self, Patch};
use axum::extract::{Path as UrlPath, Query, State};
use cairn_rewind::{Checkpoint, EntryId, ThreadId};
use cairn_snapshot::{Change, ChangeKind};
use cairn_store::{EntryKind, ErrorKind, RelPath, SnapshotId};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this part.
pub(crate) fn routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new()
        .routes(routes!(threads))
        .routes(routes!(thread))
        .routes(routes!(snapshot))
        .routes(routes!(diff))
        .routes(routes!(patch))
}

/// The most entries one page of a thread holds.
pub(crate) const MAX_ENTRIES_PAGE: usize = 500;
/// The most changed files one page of a diff holds.
pub(crate) const MAX_CHANGES_PAGE: usize = 1000;
/// How many characters of an entry's text a thread page shows (the rest on demand).
const PREVIEW_CHARS: usize = 400;
/// How many skipped paths a checkpoint on a thread page lists (the snapshot's page has all).
const SKIPPED_ON_PAGE: usize = 20;
/// How many diffs are kept for paging.
const DIFFS_KEPT: usize = 8;

/// What `/v1/threads` answers.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ThreadsJson {
    /// The workspace served.
    root: String,
    /// Its id.
    workspace_id: String,
    /// Every thread of the database, oldest first.
    #[schema(value_type = Vec<Object>)]
    threads: Vec<cairn_rewind::Thread>,
}

/// Every thread of the database, with the workspace served.
#[utoipa::path(get, path = "/v1/threads", operation_id = "list_threads", tag = "threads",
    responses((status = 200, body = ThreadsJson)))]
pub(crate) async fn threads(State(studio): State<Arc<Service>>) -> ApiResult<ThreadsJson> {
    blocking(studio, |s| {
        Ok(ThreadsJson {
            root: s.opened.ws.root().display().to_string(),
            workspace_id: s.opened.ws.id().to_string(),
            threads: s.opened.threads.threads()?,
        })
    })
    .await
}

/// A page of something long.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct Page {
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
}

/// A checkpoint as a thread page shows it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CheckpointJson {
    checkpoint_id: String,
    #[schema(value_type = String)]
    kind: cairn_rewind::CheckpointKind,
    /// The checkpoint's label, else its snapshot's.
    label: Option<String>,
    #[schema(value_type = String)]
    snapshot_id: SnapshotId,
    created_ms: i64,
    /// Files it holds.
    files: u64,
    /// Their bytes.
    bytes: u64,
    /// Paths it left out (the first few), and how many there are.
    #[schema(value_type = Vec<Object>)]
    skipped: Vec<SkippedJson>,
    skipped_count: usize,
    /// The next checkpoint on the way from this one (the end of its turn); `None` when the
    /// turn is still going (the files now end it).
    #[schema(value_type = Option<String>)]
    next_snapshot_id: Option<SnapshotId>,
    /// The manifest could not be read.
    error: Option<String>,
}

/// An entry as a thread page shows it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EntryJson {
    #[schema(value_type = String)]
    id: EntryId,
    #[schema(value_type = Option<String>)]
    parent_id: Option<EntryId>,
    #[schema(value_type = String)]
    thread_id: ThreadId,
    #[schema(value_type = String)]
    kind: &'static str,
    /// The start of its text.
    text: String,
    /// Its whole text's length in characters.
    text_chars: usize,
    on_active_branch: bool,
    created_ms: i64,
    /// The checkpoints taken for it (before it), oldest first.
    checkpoints: Vec<CheckpointJson>,
}

/// A thread forked from this one.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ForkJson {
    #[schema(value_type = String)]
    thread_id: ThreadId,
    #[schema(value_type = Option<String>)]
    fork_entry: Option<EntryId>,
}

/// What `/v1/threads/{id}` answers.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ThreadJson {
    #[schema(value_type = Object)]
    thread: cairn_rewind::Thread,
    /// Every entry the thread sees.
    total: usize,
    offset: usize,
    /// A page of them, in the order they were written.
    entries: Vec<EntryJson>,
    /// The threads forked from this one.
    forks: Vec<ForkJson>,
}

/// For each checkpoint (by index in `list`), the snapshot of the next one taken on the way
/// on from it: the first later checkpoint whose entry is its entry or a descendant of it.
pub(crate) fn next_checkpoints(
    list: &[Checkpoint],
    parents: &HashMap<EntryId, Option<EntryId>>,
) -> Vec<Option<SnapshotId>> {
    let mut next = vec![None; list.len()];
    // Checkpoints still waiting for their next, by entry ("" for one taken on an empty thread).
    let mut waiting: HashMap<Option<&EntryId>, Vec<usize>> = HashMap::new();
    for (i, cp) in list.iter().enumerate() {
        let mut cur = cp.entry_id.as_ref();
        let mut seen = HashSet::new();
        loop {
            if let Some(ws) = waiting.remove(&cur) {
                for j in ws {
                    next[j] = Some(cp.snapshot_id);
                }
            }
            let Some(id) = cur else { break };
            if !seen.insert(id) {
                break;
            }
            cur = parents.get(id).and_then(|p| p.as_ref());
        }
        waiting.entry(cp.entry_id.as_ref()).or_default().push(i);
    }
    next
}

fn checkpoint_json(s: &Service, cp: &Checkpoint, next: Option<SnapshotId>) -> CheckpointJson {
    let manifest = s.opened.ws.store().read_manifest(&cp.snapshot_id);
    let (label, files, bytes, skipped, error) = match &manifest {
        Ok(m) => (
            cp.label.clone().or_else(|| m.label.clone()),
            m.stats.files,
            m.stats.bytes,
            crate::files::skipped_json(&m.skipped),
            None,
        ),
        Err(e) => (cp.label.clone(), 0, 0, Vec::new(), Some(e.to_string())),
    };
    let skipped_count = skipped.len();
    CheckpointJson {
        checkpoint_id: cp.id.to_string(),
        kind: cp.kind,
        label,
        snapshot_id: cp.snapshot_id,
        created_ms: cp.created_ms,
        files,
        bytes,
        skipped: skipped.into_iter().take(SKIPPED_ON_PAGE).collect(),
        skipped_count,
        next_snapshot_id: next,
        error,
    }
}

fn preview(text: &[u8]) -> (String, usize) {
    let text = String::from_utf8_lossy(text);
    let chars = text.chars().count();
    (text.chars().take(PREVIEW_CHARS).collect(), chars)
}

/// A page of a thread's entries (every branch), each with its checkpoints, and its forks.
#[utoipa::path(get, path = "/v1/threads/{id}", operation_id = "thread_page", tag = "threads",
    params(("id" = String, Path, description = "The thread's id"), Page),
    responses((status = 200, body = ThreadJson), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn thread(
    State(studio): State<Arc<Service>>,
    UrlPath(id): UrlPath<String>,
    Query(page): Query<Page>,
) -> ApiResult<ThreadJson> {
    blocking(studio, move |s| {
        let threads = &s.opened.threads;
        let id = ThreadId::new(id);
        let thread = threads.thread(&id)?;
        let all = threads.entries(&id, true)?;
        let parents: HashMap<EntryId, Option<EntryId>> = all
            .iter()
            .map(|e| (e.id.clone(), e.parent_id.clone()))
            .collect();
        let list = threads.list_checkpoints(&id)?;
        let next = next_checkpoints(&list, &parents);
        let limit = page.limit.unwrap_or(MAX_ENTRIES_PAGE).min(MAX_ENTRIES_PAGE);
        let total = all.len();
        let shown: Vec<_> = all.into_iter().skip(page.offset).take(limit).collect();
        let on_page: HashSet<&EntryId> = shown.iter().map(|e| &e.id).collect();
        let mut by_entry: HashMap<EntryId, Vec<CheckpointJson>> = HashMap::new();
        for (cp, next) in list.iter().zip(next) {
            if let Some(e) = cp.entry_id.as_ref().filter(|e| on_page.contains(e)) {
                by_entry
                    .entry(e.clone())
                    .or_default()
                    .push(checkpoint_json(s, cp, next));
            }
        }
        let entries = shown
            .into_iter()
            .map(|e| {
                let (text, text_chars) = preview(&e.payload);
                EntryJson {
                    checkpoints: by_entry.remove(&e.id).unwrap_or_default(),
                    id: e.id,
                    parent_id: e.parent_id,
                    thread_id: e.thread_id,
                    kind: e.kind.name(),
                    text,
                    text_chars,
                    on_active_branch: e.on_active_branch,
                    created_ms: e.created_ms,
                }
            })
            .collect();
        let forks = threads
            .threads()?
            .into_iter()
            .filter(|t| t.parent_thread.as_ref() == Some(&id))
            .map(|t| ForkJson {
                thread_id: t.id,
                fork_entry: t.fork_entry,
            })
            .collect();
        Ok(ThreadJson {
            thread,
            total,
            offset: page.offset,
            entries,
            forks,
        })
    })
    .await
}

/// What `/v1/snapshots/{id}` answers.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SnapshotJson {
    #[schema(value_type = String)]
    id: SnapshotId,
    label: Option<String>,
    created_ms: i64,
    #[schema(value_type = Object)]
    stats: cairn_store::Stats,
    #[schema(value_type = Object)]
    capture: cairn_store::CaptureSettings,
    #[schema(value_type = Vec<Object>)]
    skipped: Vec<SkippedJson>,
}

/// A snapshot's details.
#[utoipa::path(get, path = "/v1/snapshots/{id}", operation_id = "snapshot", tag = "files",
    params(("id" = String, Path, description = "A snapshot id, a prefix of 4+ hex digits, or a label")),
    responses((status = 200, body = SnapshotJson), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn snapshot(
    State(studio): State<Arc<Service>>,
    UrlPath(name): UrlPath<String>,
) -> ApiResult<SnapshotJson> {
    blocking(studio, move |s| {
        let store = s.opened.ws.store();
        let id = store.resolve(&name)?;
        let m = store.read_manifest(&id)?;
        Ok(SnapshotJson {
            id,
            label: m.label.clone(),
            created_ms: m.created_ms,
            stats: m.stats,
            capture: m.capture.clone(),
            skipped: crate::files::skipped_json(&m.skipped),
        })
    })
    .await
}

/// Diffs computed lately, newest last: paging through one does not compute it again.
#[derive(Default)]
pub(crate) struct DiffCache {
    kept: Vec<(DiffKey, Arc<Vec<Change>>)>,
}

/// A diff: from a snapshot to a snapshot, or to the files now (`None`).
type DiffKey = (SnapshotId, Option<SnapshotId>);

/// Which diff: `from` a snapshot `to` another, or to the files now (`to` absent or `live`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct DiffQuery {
    from: String,
    to: Option<String>,
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
    /// For `/v1/patch`: the path, as hex of its bytes.
    path_hex: Option<String>,
    /// For `/v1/diff`: name, for each change of the page, the checkpoint intervals it
    /// changed in and the tool call or subagent that opened each.
    #[serde(default)]
    attribute: bool,
}

fn diff_key(s: &Service, q: &DiffQuery) -> crate::error::Result<DiffKey> {
    let store = s.opened.ws.store();
    let from = store.resolve(&q.from)?;
    let to = match q.to.as_deref() {
        None | Some("") | Some("live") => None,
        Some(t) => Some(store.resolve(t)?),
    };
    Ok((from, to))
}

/// The changes of a diff: from the cache when `reuse` (a later page, a patch) and it has
/// them, else computed (a diff to the files now is always computed for its first page).
fn changes(s: &Service, key: DiffKey, reuse: bool) -> crate::error::Result<Arc<Vec<Change>>> {
    let reusable = reuse || key.1.is_some();
    if reusable {
        let cache = s.diffs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, c)) = cache.kept.iter().find(|(k, _)| *k == key) {
            return Ok(c.clone());
        }
    }
    let ws = &s.opened.ws;
    let list = match key.1 {
        Some(to) => cairn_snapshot::diff_snapshots(ws.store(), &key.0, &to)?,
        None => cairn_snapshot::diff_workspace(ws.store(), ws.root(), ws.id(), &key.0)?,
    };
    let list = Arc::new(list);
    let mut cache = s.diffs.lock().unwrap_or_else(|p| p.into_inner());
    cache.kept.retain(|(k, _)| *k != key);
    cache.kept.push((key, list.clone()));
    if cache.kept.len() > DIFFS_KEPT {
        cache.kept.remove(0);
    }
    Ok(list)
}

/// One changed path of a diff.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ChangeJson {
    #[schema(value_type = String)]
    path: RelPath,
    path_hex: String,
    #[schema(value_type = String)]
    kind: ChangeKind,
    #[schema(value_type = Option<String>)]
    old_kind: Option<EntryKind>,
    #[schema(value_type = Option<String>)]
    new_kind: Option<EntryKind>,
    old_size: Option<u64>,
    new_size: Option<u64>,
    /// With `attribute`: who changed it, per checkpoint interval, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    attribution: Option<Vec<cairn_rewind::Attribution>>,
}

/// What `/v1/diff` answers.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DiffJson {
    #[schema(value_type = String)]
    from: SnapshotId,
    /// `None`: the files now.
    #[schema(value_type = Option<String>)]
    to: Option<SnapshotId>,
    /// How many paths changed, and of each kind.
    total: usize,
    added: usize,
    modified: usize,
    deleted: usize,
    offset: usize,
    /// A page of them, sorted by path.
    changes: Vec<ChangeJson>,
}

/// A page of the paths that differ between two snapshots, or a snapshot and the files now.
#[utoipa::path(get, path = "/v1/diff", operation_id = "diff", tag = "files", params(DiffQuery),
    responses((status = 200, body = DiffJson), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn diff(
    State(studio): State<Arc<Service>>,
    Query(q): Query<DiffQuery>,
) -> ApiResult<DiffJson> {
    blocking(studio, move |s| {
        let key = diff_key(s, &q)?;
        let list = changes(s, key, q.offset > 0)?;
        let count = |k: ChangeKind| list.iter().filter(|c| c.kind == k).count();
        let limit = q.limit.unwrap_or(MAX_CHANGES_PAGE).min(MAX_CHANGES_PAGE);
        let page: Vec<&Change> = list.iter().skip(q.offset).take(limit).collect();
        let attributions = if q.attribute {
            let paths: Vec<Vec<u8>> = page.iter().map(|c| c.path.clone()).collect();
            let ws = &s.opened.ws;
            cairn_rewind::attribute(ws.store(), Some(ws), key.0, key.1, &paths)?
                .into_iter()
                .map(Some)
                .collect()
        } else {
            vec![None; page.len()]
        };
        Ok(DiffJson {
            from: key.0,
            to: key.1,
            total: list.len(),
            added: count(ChangeKind::Added),
            modified: count(ChangeKind::Modified),
            deleted: count(ChangeKind::Deleted),
            offset: q.offset,
            changes: page
                .into_iter()
                .zip(attributions)
                .map(|(c, attribution)| ChangeJson {
                    path: RelPath(c.path.clone()),
                    path_hex: hex::encode(&c.path),
                    kind: c.kind,
                    old_kind: c.old.as_ref().map(|o| o.kind),
                    new_kind: c.new.as_ref().map(|n| n.kind),
                    old_size: c.old.as_ref().map(|o| o.size),
                    new_size: c.new.as_ref().map(|n| n.size),
                    attribution,
                })
                .collect(),
        })
    })
    .await
}

/// What `/v1/patch` answers: one file's unified diff, or that it is binary.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PatchJson {
    #[schema(value_type = String)]
    path: RelPath,
    #[schema(value_type = String)]
    kind: ChangeKind,
    /// Binary (or too large to diff): named, not shown.
    binary: bool,
    /// The unified diff (absent for a binary file or a mode change).
    patch: Option<String>,
}

/// One changed file's unified diff.
#[utoipa::path(get, path = "/v1/patch", operation_id = "patch", tag = "files", params(DiffQuery),
    responses((status = 200, body = PatchJson), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn patch(
    State(studio): State<Arc<Service>>,
    Query(q): Query<DiffQuery>,
) -> ApiResult<PatchJson> {
    blocking(studio, move |s| {
        let path = q
            .path_hex
            .as_deref()
            .and_then(|h| hex::decode(h).ok())
            .ok_or_else(|| {
                CliError::new(ErrorKind::InvalidArgument, "path_hex: the path as hex")
            })?;
        let key = diff_key(s, &q)?;
        let list = changes(s, key, true)?;
        let change = list.iter().find(|c| c.path == path).ok_or_else(|| {
            CliError::new(
                ErrorKind::NotFound,
                format!(
                    "{} did not change in this diff",
                    String::from_utf8_lossy(&path)
                ),
            )
        })?;
        let live = key.1.is_none().then(|| s.opened.ws.root().to_path_buf());
        let (binary, patch) = match patch::patch_of(s.opened.ws.store(), live.as_deref(), change)? {
            Patch::Text(t) => (false, Some(t)),
            Patch::Binary => (true, None),
            Patch::None => (false, None),
        };
        Ok(PatchJson {
            path: RelPath(change.path.clone()),
            kind: change.kind,
            binary,
            patch,
        })
    })
    .await
}
