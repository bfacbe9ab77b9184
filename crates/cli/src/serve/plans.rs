//! Planned changes: rewind, restore and fork, each planned first (a dry run, shown on the
//! Studio's page with its digest) and carried out only when the call names the digest of the
//! plan the server would carry out now (issue 22; under `/v1` since issue 59).
//!
//! `/v1/plans` takes an [`OpRequest`] and answers the plan, the request made exact (entry
//! and snapshot names resolved to ids, a fork's new thread id fixed) and the digest: the
//! SHA-256 of both as JSON. `/v1/plans/apply` takes that request and digest, plans again, refuses
//! with `CONFLICT` when the digest differs (the files or the thread changed since the page
//! showed the plan, or the page did not show this plan), and then runs the same library call
//! as `cairn rewind --files`, `cairn restore` or `cairn fork --files`.

use super::error::{blocking, ApiError, ApiResult, ErrorBody};
use super::Service;
use crate::error::{CliError, Result};
use crate::threads::{fork_workspace, resolve_entry, Made};
use axum::body::Bytes;
use axum::extract::State;
use cairn_restore::{ApplyOptions, Context, DriftPolicy, PlanOptions, Report, Workspace};
use cairn_rewind::{Files, ForkOptions, RewindOptions, ThreadId};
use cairn_store::{ErrorKind, SnapshotId};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this part.
pub(crate) fn routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new()
        .routes(routes!(plan))
        .routes(routes!(apply))
}

/// How many paths of each list a plan on the page names (the digest covers them all).
const PLAN_PATHS: usize = 1000;

/// Which change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Op {
    /// `cairn rewind THREAD ENTRY [--files]`.
    Rewind,
    /// `cairn restore SNAPSHOT` (into the served workspace, or `root`).
    Restore,
    /// `cairn fork THREAD ENTRY [--files] [--into DIR]`.
    Fork,
}

/// A change the page asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OpRequest {
    /// Which.
    pub(crate) op: Op,
    /// The thread (rewind, fork).
    #[serde(default)]
    pub(crate) thread: Option<String>,
    /// The entry (rewind, fork).
    #[serde(default)]
    pub(crate) entry: Option<String>,
    /// The snapshot (restore).
    #[serde(default)]
    pub(crate) snapshot: Option<String>,
    /// Restore the files too (rewind, fork).
    #[serde(default)]
    pub(crate) files: bool,
    /// The fork's directory (fork with files).
    #[serde(default)]
    pub(crate) into: Option<String>,
    /// The fork's thread id (fixed by the plan).
    #[serde(default)]
    pub(crate) new_thread_id: Option<String>,
    /// The workspace a restore goes into, when not the one served: only a fork's directory
    /// this server made (to undo its files).
    #[serde(default)]
    pub(crate) root: Option<String>,
    /// What to do with files edited by someone else since the files being left (drift):
    /// `refuse`, `keep` or `overwrite`, as `--on-drift` takes. A rewind with files refuses by
    /// default, as `cairn rewind --files` does; a restore checks only when told.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub(crate) on_drift: Option<DriftPolicy>,
    /// A rewind's request key (the page makes one per plan shown): applying again with it
    /// answers the rewind it made, or retries it if it failed, and never runs a second one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) key: Option<String>,
}

/// What `/v1/plans/apply` takes.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApplyRequest {
    /// The request, exactly as the plan answered it.
    request: OpRequest,
    /// The digest of the plan the page showed.
    digest: String,
}

/// A restore plan (or what a restore did) as the page shows it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct FilesView {
    #[schema(value_type = String)]
    snapshot_id: SnapshotId,
    root: String,
    restore: Vec<String>,
    restore_count: usize,
    delete: Vec<String>,
    delete_count: usize,
    keep: Vec<String>,
    keep_count: usize,
    drifted: Vec<String>,
    unchanged: u64,
    busy: bool,
    #[schema(value_type = Option<String>)]
    safety_snapshot_id: Option<SnapshotId>,
}

fn files_view(r: &Report, root: &Path) -> FilesView {
    let names = |v: &[cairn_store::RelPath]| -> Vec<String> {
        v.iter().take(PLAN_PATHS).map(|p| p.to_string()).collect()
    };
    let keep: Vec<String> = r
        .summary
        .kept
        .iter()
        .filter(|k| k.reason != cairn_restore::KeptReason::Excluded)
        .map(|k| {
            let why = serde_json::to_value(k.reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            format!("{} ({why})", k.path)
        })
        .collect();
    FilesView {
        snapshot_id: r.snapshot_id,
        root: root.display().to_string(),
        restore: names(&r.summary.restored),
        restore_count: r.summary.restored.len(),
        delete: names(&r.summary.deleted),
        delete_count: r.summary.deleted.len(),
        keep_count: keep.len(),
        keep: keep.into_iter().take(PLAN_PATHS).collect(),
        drifted: names(&r.summary.drifted),
        unchanged: r.summary.unchanged,
        busy: r.summary.busy,
        safety_snapshot_id: r.safety_snapshot_id,
    }
}

fn files_view_of(f: &cairn_rewind::FilesReport, root: &Path) -> Result<FilesView> {
    let report: Report = serde_json::from_value(f.restore.clone()).map_err(|e| {
        CliError::new(
            ErrorKind::Corrupt,
            format!("a restore report does not decode: {e}"),
        )
    })?;
    let mut view = files_view(&report, root);
    view.safety_snapshot_id = view.safety_snapshot_id.or(f.safety_snapshot_id);
    Ok(view)
}

/// An entry a rewind takes off the active branch.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CutView {
    id: String,
    #[schema(value_type = String)]
    kind: &'static str,
    text: String,
}

/// A plan, or what was done, as the page shows it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct OpView {
    op: Op,
    dry_run: bool,
    /// A sentence: what it does.
    title: String,
    /// The files part.
    files: Option<FilesView>,
    /// Conversation entries taken off the active branch (rewind).
    cut: Vec<CutView>,
    cut_count: usize,
    /// The fork's thread.
    new_thread_id: Option<String>,
    /// Runs a rewind or fork stops or drops.
    runs_dropped: usize,
    /// The safety snapshot: restoring it undoes the files part.
    #[schema(value_type = Option<String>)]
    safety_snapshot_id: Option<SnapshotId>,
    /// The request that undoes the files part (a restore of the safety snapshot), to plan.
    undo: Option<OpRequest>,
    /// An agent's thread (rewind): what becomes of the agent's own conversation and what no
    /// rewind takes back, one line each (issue 54).
    agent: Vec<String>,
}

/// What `/v1/plans` answers.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PlanJson {
    /// The request made exact: send it back to `/v1/plans/apply`.
    request: OpRequest,
    /// The SHA-256 of the request and the whole plan, in hex.
    digest: String,
    /// The plan.
    plan: OpView,
}

/// The digest of a plan: SHA-256 over a version tag, the exact request and the library's
/// plan (with the tree of the files as they are now, for a change of files), each as JSON.
pub(crate) fn digest_of<T: Serialize>(request: &OpRequest, plan: &T) -> Result<String> {
    let encode = |v: serde_json::Result<Vec<u8>>| {
        v.map_err(|e| CliError::new(ErrorKind::Panic, format!("a plan does not encode: {e}")))
    };
    let mut h = Sha256::new();
    h.update(b"cairn-studio-plan-1\n");
    h.update(encode(serde_json::to_vec(request))?);
    h.update(b"\n");
    h.update(encode(serde_json::to_vec(plan))?);
    Ok(hex::encode(h.finalize()))
}

fn need<'a>(v: &'a Option<String>, what: &str) -> Result<&'a str> {
    v.as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| CliError::new(ErrorKind::InvalidArgument, format!("{what} is missing")))
}

fn cut_view(s: &Service, ids: &[cairn_rewind::EntryId]) -> Vec<CutView> {
    ids.iter()
        .take(PLAN_PATHS)
        .map(|id| match s.opened.threads.entry(id) {
            Ok(e) => CutView {
                id: id.to_string(),
                kind: e.kind.name(),
                text: String::from_utf8_lossy(&e.payload)
                    .chars()
                    .take(200)
                    .collect(),
            },
            Err(_) => CutView {
                id: id.to_string(),
                kind: "?",
                text: String::new(),
            },
        })
        .collect()
}

fn undo_of(safety: Option<SnapshotId>, root: Option<&Path>) -> Option<OpRequest> {
    safety.map(|id| OpRequest {
        op: Op::Restore,
        thread: None,
        entry: None,
        snapshot: Some(id.to_string()),
        files: false,
        into: None,
        new_thread_id: None,
        root: root.map(|r| r.display().to_string()),
        on_drift: None,
        key: None,
    })
}

/// A planned change, ready to be carried out as planned.
struct Planned {
    request: OpRequest,
    digest: String,
    view: OpView,
    /// A restore's plan, applied as it is (the apply checks the files still match it).
    restore: Option<(Arc<Workspace>, cairn_restore::Plan)>,
    /// A fork's workspace.
    fork_target: Option<Arc<Workspace>>,
    /// The fork's directory and store, when the plan made them (kept for the apply).
    made: Made,
}

/// The workspace a restore goes into: the served one, or a fork's directory made here.
fn restore_target(s: &Service, root: Option<&str>) -> Result<Arc<Workspace>> {
    let Some(root) = root.filter(|r| Path::new(r) != s.opened.ws.root()) else {
        return Ok(s.opened.ws.clone());
    };
    let known = s
        .fork_roots
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains(Path::new(root));
    if !known {
        return Err(CliError::new(
            ErrorKind::Denied,
            format!("the server restores only its own workspace and the forks it made, not {root}"),
        ));
    }
    let ctx = crate::ctx::Ctx {
        root: PathBuf::from(root),
        store: None,
        ..s.ctx.clone()
    };
    Ok(Arc::new(ctx.open_workspace(false)?))
}

/// Plans `req`; `keep_dir`: a fork's directory made to look at stays (for the apply).
fn plan_op(s: &Service, req: &OpRequest, keep_dir: bool) -> Result<Planned> {
    let threads = &s.opened.threads;
    let request;
    match req.op {
        Op::Restore => {
            let ws = restore_target(s, req.root.as_deref())?;
            // Its plan and its apply alike, as `cairn restore` (issue 58).
            crate::container::refuse_if_busy(&ws)?;
            let id = ws.store().resolve(need(&req.snapshot, "snapshot")?)?;
            request = OpRequest {
                op: Op::Restore,
                thread: None,
                entry: None,
                snapshot: Some(id.to_string()),
                files: false,
                into: None,
                new_thread_id: None,
                root: req
                    .root
                    .clone()
                    .filter(|r| Path::new(r) != s.opened.ws.root()),
                on_drift: req.on_drift,
                key: None,
            };
            let mut options = PlanOptions::default();
            if let Some(policy) = req.on_drift {
                options.on_drift = policy;
                options.reference = crate::files::drift_reference(&ws, &id, None)?;
            }
            let plan = ws.plan(&id, &options, Context::default())?;
            let dry = Report::dry_run(&plan);
            let digest = digest_of(&request, &(&dry, plan.current_root))?;
            let view = OpView {
                op: Op::Restore,
                dry_run: true,
                title: format!(
                    "restore snapshot {} into {}",
                    id.short(),
                    ws.root().display()
                ),
                files: Some(files_view(&dry, ws.root())),
                cut: Vec::new(),
                cut_count: 0,
                new_thread_id: None,
                runs_dropped: 0,
                safety_snapshot_id: None,
                undo: None,
                agent: Vec::new(),
            };
            Ok(Planned {
                request,
                digest,
                view,
                restore: Some((ws, plan)),
                fork_target: None,
                made: Made::default(),
            })
        }
        Op::Rewind => {
            let thread = ThreadId::new(need(&req.thread, "thread")?);
            threads.thread(&thread)?;
            let entry = resolve_entry(threads, &thread, need(&req.entry, "entry")?)?;
            if req.files {
                crate::container::refuse_if_busy(&s.opened.ws)?;
            }
            request = OpRequest {
                op: Op::Rewind,
                thread: Some(thread.to_string()),
                entry: Some(entry.to_string()),
                files: req.files,
                snapshot: None,
                into: None,
                new_thread_id: None,
                root: None,
                on_drift: rewind_drift(req),
                key: req.key.clone(),
            };
            let plan = threads.rewind(&thread, &entry, &rewind_options(s, &request, true))?;
            let now = files_now(&s.opened.ws, plan.files.as_ref())?;
            let digest = digest_of(&request, &(&plan, now))?;
            let mut view = rewind_view(s, &plan)?;
            let half = crate::agents::prepare_rewind(threads, &thread, &plan, true)?;
            view.agent = agent_lines(&half, &plan);
            Ok(Planned {
                request,
                digest,
                view,
                restore: None,
                fork_target: None,
                made: Made::default(),
            })
        }
        Op::Fork => {
            let thread = ThreadId::new(need(&req.thread, "thread")?);
            threads.thread(&thread)?;
            let entry = resolve_entry(threads, &thread, need(&req.entry, "entry")?)?;
            let into = req.into.as_deref().filter(|d| !d.is_empty()).map(|d| {
                let d = Path::new(d);
                if d.is_absolute() {
                    d.to_path_buf()
                } else {
                    s.ctx.root.join(d)
                }
            });
            if let (true, Some(dir)) = (req.files, &into) {
                threads.check_fork_target(&thread, s.opened.ws.as_ref(), dir, None, false)?;
            }
            let (target, made) = fork_workspace(&s.ctx, into.as_deref())?;
            if req.files {
                let busy =
                    crate::container::refuse_if_busy(target.as_deref().unwrap_or(&s.opened.ws));
                if let Err(e) = busy {
                    made.undo();
                    return Err(e);
                }
            }
            let planned = fork_plan(s, req, &thread, &entry, target.clone());
            let made = if keep_dir && planned.is_ok() {
                made
            } else {
                // The plan made the directory and its store only to look at them: take them
                // away again (issue 53.8).
                made.undo();
                Made::default()
            };
            let (plan, root) = planned?;
            request = OpRequest {
                op: Op::Fork,
                thread: Some(thread.to_string()),
                entry: Some(entry.to_string()),
                files: req.files,
                into: into.map(|d| d.display().to_string()),
                new_thread_id: Some(plan.thread_id.to_string()),
                snapshot: None,
                root: None,
                on_drift: None,
                key: None,
            };
            // A fork into a directory of its own finds it empty or refuses; in place, the
            // files now are part of what is confirmed, as for a rewind.
            let now = match &target {
                None => files_now(&s.opened.ws, plan.files.as_ref())?,
                Some(_) => None,
            };
            let digest = digest_of(&request, &(&plan, now))?;
            let view = fork_view(s, &plan, &root)?;
            Ok(Planned {
                request,
                digest,
                view,
                restore: None,
                fork_target: target,
                made,
            })
        }
    }
}

/// The tree of the files as they are now, for a change that restores files: part of what a
/// digest confirms, so a file edited after the plan was shown makes the plan another one,
/// even when the paths it lists stay the same. (The workspace's own restore plan knows it;
/// the stat cache the rewind's plan just refreshed makes this second walk cheap.)
fn files_now(
    ws: &Workspace,
    files: Option<&cairn_rewind::FilesReport>,
) -> Result<Option<cairn_store::TreeId>> {
    match files {
        Some(f) => Ok(Some(
            ws.plan(&f.snapshot_id, &PlanOptions::default(), Context::default())?
                .current_root,
        )),
        None => Ok(None),
    }
}

/// A rewind's drift choice: with files, the request's, else refuse (as `cairn rewind
/// --files`); without files, none.
fn rewind_drift(req: &OpRequest) -> Option<DriftPolicy> {
    req.files
        .then(|| req.on_drift.unwrap_or(DriftPolicy::Refuse))
}

fn rewind_options(s: &Service, req: &OpRequest, dry_run: bool) -> RewindOptions {
    RewindOptions {
        files: Some(req.files),
        on_drift: rewind_drift(req),
        memory: true,
        workspace: Some(s.opened.ws.clone() as Arc<dyn Files>),
        dry_run,
        force: false,
        key: req.key.clone().filter(|_| !dry_run),
        ..RewindOptions::default()
    }
}

fn runs_dropped(r: &cairn_rewind::RunsReport) -> usize {
    r.interrupted.len() + r.paused.len() + r.durable.len()
}

/// What a rewind of an agent's thread says of the agent's conversation, a line each.
fn agent_lines(half: &crate::agents::AgentHalf, r: &cairn_rewind::RewindReport) -> Vec<String> {
    crate::agents::rewind_words(half, r)
        .lines()
        .map(|l| l.trim().to_string())
        .collect()
}

fn rewind_view(s: &Service, r: &cairn_rewind::RewindReport) -> Result<OpView> {
    let files = match &r.files {
        Some(f) => Some(files_view_of(f, &f.root)?),
        None => None,
    };
    let safety = files.as_ref().and_then(|f| f.safety_snapshot_id);
    Ok(OpView {
        op: Op::Rewind,
        dry_run: r.dry_run,
        title: format!(
            "rewind thread {} to {}{}",
            r.thread_id,
            r.to_entry_id
                .as_ref()
                .map(|e| e.to_string())
                .unwrap_or_else(|| "the start".into()),
            if files.is_some() {
                ", with its files"
            } else {
                ", the conversation only"
            }
        ),
        files,
        cut: cut_view(s, &r.conversation.cut),
        cut_count: r.conversation.cut.len(),
        new_thread_id: None,
        runs_dropped: runs_dropped(&r.runs),
        safety_snapshot_id: safety,
        undo: undo_of(safety, None),
        agent: Vec::new(),
    })
}

/// The fork's options, as `cairn fork` makes them (without `--force`).
fn fork_options(
    s: &Service,
    req: &OpRequest,
    target: Option<Arc<Workspace>>,
    dry_run: bool,
) -> ForkOptions {
    let source = s.opened.ws.clone() as Arc<dyn Files>;
    let workspace = target.map(|t| t as Arc<dyn Files>);
    ForkOptions {
        files: req.files,
        workspace: Some(workspace.clone().unwrap_or_else(|| source.clone())),
        source: workspace.as_ref().map(|_| source.clone()),
        new_thread_id: req.new_thread_id.clone().map(ThreadId::new),
        dry_run,
        ..ForkOptions::default()
    }
}

fn fork_plan(
    s: &Service,
    req: &OpRequest,
    thread: &ThreadId,
    entry: &cairn_rewind::EntryId,
    target: Option<Arc<Workspace>>,
) -> Result<(cairn_rewind::ForkReport, PathBuf)> {
    let root = target
        .as_ref()
        .map(|t| t.root().to_path_buf())
        .unwrap_or_else(|| s.opened.ws.root().to_path_buf());
    let plan = s
        .opened
        .threads
        .fork(thread, entry, &fork_options(s, req, target, true))?;
    Ok((plan, root))
}

fn fork_view(s: &Service, r: &cairn_rewind::ForkReport, root: &Path) -> Result<OpView> {
    let files = match &r.files {
        Some(f) => Some(files_view_of(f, root)?),
        None => None,
    };
    let safety = files.as_ref().and_then(|f| f.safety_snapshot_id);
    let other_root = (root != s.opened.ws.root()).then_some(root);
    Ok(OpView {
        op: Op::Fork,
        dry_run: r.dry_run,
        title: format!(
            "fork thread {} at {} as {}{}",
            r.source_thread_id,
            r.at_entry_id,
            r.thread_id,
            if files.is_some() {
                format!(", with its files into {}", root.display())
            } else {
                ", the conversation only".into()
            }
        ),
        files,
        cut: Vec::new(),
        cut_count: 0,
        new_thread_id: Some(r.thread_id.to_string()),
        runs_dropped: runs_dropped(&r.runs),
        safety_snapshot_id: safety,
        undo: undo_of(safety, other_root),
        agent: Vec::new(),
    })
}

/// A request body as JSON; a malformed one (a change that names no digest among them) is
/// `INVALID_ARGUMENT` in the API's error form.
pub(crate) fn body<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
) -> std::result::Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError(CliError::new(
            ErrorKind::InvalidArgument,
            format!("the request body is not what this call takes: {e}"),
        ))
    })
}

/// Plans a rewind, restore or fork (a dry run): the plan, the request made exact, and the
/// digest `/v1/plans/apply` confirms.
#[utoipa::path(post, path = "/v1/plans", operation_id = "plan", tag = "changes",
    request_body = OpRequest,
    responses((status = 200, body = PlanJson), (status = 400, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub(crate) async fn plan(State(studio): State<Arc<Service>>, bytes: Bytes) -> ApiResult<PlanJson> {
    let req: OpRequest = body(&bytes)?;
    blocking(studio, move |s| {
        s.ready()?;
        let p = plan_op(s, &req, false)?;
        Ok(PlanJson {
            request: p.request,
            digest: p.digest,
            plan: p.view,
        })
    })
    .await
}

/// Carries out `req` if the plan the server would carry out now has `digest`; a rewind whose
/// key made one already answers that one (retried if it failed), whatever the plan now.
pub(crate) fn apply_op(s: &Service, req: &OpRequest, digest: &str) -> Result<OpView> {
    s.ready()?;
    if let (Op::Rewind, Some(key), Some(thread)) = (req.op, &req.key, &req.thread) {
        let thread = ThreadId::new(thread.as_str());
        if crate::threads::keyed_rewind(&s.opened.threads, &thread, key)?.is_some() {
            return rewind_applied(s, req);
        }
    }
    let mut p = plan_op(s, req, true)?;
    let made = std::mem::take(&mut p.made);
    let outcome = apply_planned(s, req, digest, p);
    if outcome.is_err() {
        // Nothing was made in them: take the directory and store the plan made away again.
        made.undo();
    }
    outcome
}

fn apply_planned(s: &Service, req: &OpRequest, digest: &str, p: Planned) -> Result<OpView> {
    if p.request != *req {
        return Err(CliError::new(
            ErrorKind::InvalidArgument,
            "the request is not the one a plan answered; plan it first and send back the \
             plan's request unchanged",
        ));
    }
    if !super::same_secret(p.digest.as_bytes(), digest.as_bytes()) {
        return Err(CliError::new(
            ErrorKind::Conflict,
            format!(
                "the plan changed since it was shown (digest {} now, {} confirmed): nothing \
                 was changed; look at the new plan",
                short(&p.digest),
                short(digest)
            ),
        ));
    }
    match req.op {
        Op::Restore => {
            let (ws, plan) = p.restore.expect("a restore plan holds its plan");
            let report = ws.apply(&plan, &ApplyOptions::default(), Context::default())?;
            // For the processes following the event log; the files are restored either way.
            if let Err(e) = s.opened.threads.record_restore(ws.id(), ws.root(), &report) {
                eprintln!(
                    "{}: the restore could not be recorded in the event log: {e}",
                    s.name
                );
            }
            let root = (ws.root() != s.opened.ws.root()).then(|| ws.root());
            Ok(OpView {
                dry_run: false,
                title: format!(
                    "restored snapshot {} into {}",
                    report.snapshot_id.short(),
                    ws.root().display()
                ),
                files: Some(files_view(&report, ws.root())),
                safety_snapshot_id: report.safety_snapshot_id,
                undo: undo_of(report.safety_snapshot_id, root),
                ..p.view
            })
        }
        Op::Rewind => rewind_applied(s, req),
        Op::Fork => {
            let thread = ThreadId::new(need(&req.thread, "thread")?);
            let entry = resolve_entry(&s.opened.threads, &thread, need(&req.entry, "entry")?)?;
            let target = p.fork_target.clone();
            let root = target
                .as_ref()
                .map(|t| t.root().to_path_buf())
                .unwrap_or_else(|| s.opened.ws.root().to_path_buf());
            let report =
                s.opened
                    .threads
                    .fork(&thread, &entry, &fork_options(s, req, target, false))?;
            if root != s.opened.ws.root() {
                s.fork_roots
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(root.clone());
            }
            fork_view(s, &report, &root)
        }
    }
}

/// Carries out the rewind `req` names, as `cairn rewind` does.
fn rewind_applied(s: &Service, req: &OpRequest) -> Result<OpView> {
    let thread = ThreadId::new(need(&req.thread, "thread")?);
    let entry = resolve_entry(&s.opened.threads, &thread, need(&req.entry, "entry")?)?;
    let point = crate::threads::Point::Entry(entry);
    let (report, half) =
        super::rewind::carry_out(s, &thread, &point, rewind_options(s, req, false))?;
    let mut view = rewind_view(s, &report)?;
    view.agent = agent_lines(&half, &report);
    Ok(view)
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

/// Carries out a planned change if the plan the server would carry out now has the digest
/// given: `CONFLICT` otherwise, nothing changed.
#[utoipa::path(post, path = "/v1/plans/apply", operation_id = "apply_plan", tag = "changes",
    request_body = ApplyRequest,
    responses((status = 200, body = OpView), (status = 400, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub(crate) async fn apply(State(studio): State<Arc<Service>>, bytes: Bytes) -> ApiResult<OpView> {
    let req: ApplyRequest = body(&bytes)?;
    blocking(studio, move |s| apply_op(s, &req.request, &req.digest)).await
}
