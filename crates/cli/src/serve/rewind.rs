//! `POST /v1/threads/{id}/rewind`: a rewind by entry or checkpoint id, with its files, paths,
//! drift rule, dry run and request key (issue 59).
//!
//! The key is the rewind's idempotency key in the thread database (`rewinds.key`): the same
//! key answers the rewind it made and never runs a second one. Completed, its report comes
//! back (`repeated: true`); under way (in this server), `202` with its state; failed or
//! obstructed, the library retries that same rewind once the obstruction is gone.

use super::error::{blocking, ApiError, ErrorBody};
use super::plans::body;
use super::{lock, Service};
use crate::agents::AgentHalf;
use crate::error::{CliError, Result};
use crate::threads::{keyed_rewind, Point};
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cairn_restore::DriftPolicy;
use cairn_rewind::{Files, RewindOptions, RewindReport, ThreadId};
use cairn_store::ErrorKind;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this part.
pub(crate) fn routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new().routes(routes!(rewind))
}

/// What to do with files someone else edited since the files being left (drift).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Drift {
    /// Refuse the rewind (`CONFLICT`, nothing changed): the default with files.
    Refuse,
    /// Leave them as they are.
    Keep,
    /// Restore them too (the safety snapshot keeps them).
    Overwrite,
}

impl From<Drift> for DriftPolicy {
    fn from(d: Drift) -> DriftPolicy {
        match d {
            Drift::Refuse => DriftPolicy::Refuse,
            Drift::Keep => DriftPolicy::Skip,
            Drift::Overwrite => DriftPolicy::Overwrite,
        }
    }
}

/// A rewind: to an entry or to a checkpoint (one of the two).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RewindRequest {
    /// The entry to go back to: its id or a unique prefix (4+ characters), on the active
    /// branch; a checkpoint id (`cp_…`) here is taken as `checkpoint`.
    #[serde(default)]
    entry: Option<String>,
    /// The checkpoint to go back to (`cp_…` or a unique prefix), of this thread's lineage:
    /// the conversation goes to its point (a branch an earlier rewind cut included).
    #[serde(default)]
    checkpoint: Option<String>,
    /// Restore the files too (default: the conversation only).
    #[serde(default)]
    files: bool,
    /// With files: `false` restores the files only and leaves the conversation (default true).
    #[serde(default)]
    memory: Option<bool>,
    /// With files: only these files and directories (relative to the workspace root).
    #[serde(default)]
    paths: Vec<String>,
    /// With files: the drift rule (default `refuse`).
    #[serde(default)]
    on_drift: Option<Drift>,
    /// Only the plan: nothing changes (the key is not used).
    #[serde(default)]
    dry_run: bool,
    /// The request key: the same key answers the same rewind and never runs a second one.
    #[serde(default)]
    key: Option<String>,
}

/// A rewind's answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RewindAnswer {
    /// The rewind's id (none for a plan, or one under way not yet recorded).
    rewind_id: Option<String>,
    /// Its request key.
    key: Option<String>,
    /// `planned` (a dry run), `started` or `files_done` (under way), `completed`.
    state: String,
    /// The key was used before: this is the rewind it made, not a second one.
    repeated: bool,
    /// The library's report (`RewindReport`: conversation, files, memory, runs), when there is
    /// one.
    #[schema(value_type = Option<Object>)]
    report: Option<serde_json::Value>,
    /// An agent's thread: what becomes of the agent's own conversation, a line each.
    agent: Vec<String>,
}

/// Rewinds a thread to an entry or checkpoint. With `key`: the same key answers the same
/// rewind (`repeated`), `202` while it is under way, and never runs a second one.
#[utoipa::path(post, path = "/v1/threads/{id}/rewind", operation_id = "rewind", tag = "changes",
    params(("id" = String, Path, description = "The thread's id (or a name a rewind gave it)")),
    request_body = RewindRequest,
    responses(
        (status = 200, description = "Done, planned, or the key's earlier rewind", body = RewindAnswer),
        (status = 202, description = "The key's rewind is under way", body = RewindAnswer),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "BUSY, THREAD_BUSY, WORKSPACE_BUSY or CONFLICT (drift)", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub(crate) async fn rewind(
    State(service): State<Arc<Service>>,
    UrlPath(id): UrlPath<String>,
    bytes: Bytes,
) -> std::result::Result<Response, ApiError> {
    let req: RewindRequest = body(&bytes)?;
    let answer = blocking(service, move |s| rewind_call(s, &id, &req)).await?;
    let status = if answer.state == "completed" || answer.state == "planned" {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((status, answer).into_response())
}

fn rewind_call(s: &Service, id: &str, req: &RewindRequest) -> Result<RewindAnswer> {
    let threads = &s.opened.threads;
    let thread = crate::threads::thread_named(threads, id)?.id;
    let name = match (&req.entry, &req.checkpoint) {
        (Some(e), None) => e.as_str(),
        (None, Some(c)) => c.as_str(),
        _ => {
            return Err(CliError::new(
                ErrorKind::InvalidArgument,
                "a rewind names either an `entry` or a `checkpoint`",
            ))
        }
    };
    let point = Point::resolve(threads, &thread, name)?;
    if req.checkpoint.is_some() && !matches!(point, Point::Checkpoint(_)) {
        return Err(CliError::new(
            ErrorKind::InvalidArgument,
            format!("`checkpoint` takes a checkpoint id (cp_…), not {name}"),
        ));
    }
    let files = req.files;
    if !files && (req.on_drift.is_some() || !req.paths.is_empty() || req.memory == Some(false)) {
        return Err(CliError::new(
            ErrorKind::InvalidArgument,
            "`on_drift`, `paths` and `memory: false` choose how files are restored: give them \
             with `files: true`",
        ));
    }
    let mut options = RewindOptions {
        files: Some(files),
        memory: req.memory.unwrap_or(true),
        workspace: Some(s.opened.ws.clone() as Arc<dyn Files>),
        dry_run: req.dry_run,
        key: req.key.clone(),
        ..RewindOptions::default()
    };
    if files {
        // The dry run too, as `cairn rewind --files` (issue 58).
        crate::container::refuse_if_busy(&s.opened.ws)?;
        options.paths = crate::files::chosen_paths(s.opened.ws.root(), &req.paths)?;
        options.on_drift = Some(req.on_drift.unwrap_or(Drift::Refuse).into());
    }
    if req.dry_run {
        let mut plan = point.rewind(threads, &thread, &options)?;
        let half = crate::agents::prepare_rewind(threads, &thread, &plan, options.memory)?;
        plan.continuation = half.continuation.as_ref().map(|c| c.data.clone());
        return answer(None, "planned", false, Some(&plan), &half);
    }
    s.ready()?;
    let Some(key) = req.key.clone() else {
        let (report, half) = carry_out(s, &thread, &point, options)?;
        return answer(None, "completed", false, Some(&report), &half);
    };
    // One rewind per key at a time in this server; the other calls answer it under way.
    let claim = (thread.clone(), key.clone());
    if !lock(&s.keys).insert(claim.clone()) {
        let record = keyed_rewind(threads, &thread, &key)?;
        return Ok(RewindAnswer {
            rewind_id: record.as_ref().map(|r| r.id.to_string()),
            key: Some(key),
            state: record.map_or_else(|| "started".to_string(), |r| r.state),
            repeated: true,
            report: None,
            agent: Vec::new(),
        });
    }
    let outcome = (|| {
        let earlier = keyed_rewind(threads, &thread, &key)?;
        let repeated = earlier.as_ref().is_some_and(|r| r.state == "completed");
        let (report, half) = if repeated {
            // The library answers the stored report; nothing runs again.
            (
                point.rewind(threads, &thread, &options)?,
                AgentHalf::default(),
            )
        } else {
            carry_out(s, &thread, &point, options)?
        };
        answer(
            Some(key.clone()),
            "completed",
            repeated,
            Some(&report),
            &half,
        )
    })();
    lock(&s.keys).remove(&claim);
    outcome
}

fn answer(
    key: Option<String>,
    state: &str,
    repeated: bool,
    report: Option<&RewindReport>,
    half: &AgentHalf,
) -> Result<RewindAnswer> {
    let json = report
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| CliError::new(ErrorKind::Panic, format!("a report does not encode: {e}")))?;
    Ok(RewindAnswer {
        rewind_id: report.and_then(|r| r.rewind_id.as_ref().map(|id| id.to_string())),
        key,
        state: state.to_string(),
        repeated,
        agent: report
            .map(|r| {
                crate::agents::rewind_words(half, r)
                    .lines()
                    .map(|l| l.trim().to_string())
                    .filter(|l| !l.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
        report: json,
    })
}

/// Carries out a rewind (`options.dry_run` false) as `cairn rewind` does: an agent's thread
/// gets its half prepared and kept in the rewind's journal before the files change (issue
/// 54), and the commands `cairn init claude-code --on-rewind` registered run after it (only
/// trusted ones, issue 53; one that fails is said on stderr, the rewind stands).
pub(crate) fn carry_out(
    s: &Service,
    thread: &ThreadId,
    point: &Point,
    mut options: RewindOptions,
) -> Result<(RewindReport, AgentHalf)> {
    let threads = &s.opened.threads;
    let half = if cairn_agents::of_thread(&threads.thread(thread)?.metadata).is_some() {
        let plan = point.rewind(
            threads,
            thread,
            &RewindOptions {
                dry_run: true,
                ..options.clone()
            },
        )?;
        crate::agents::prepare_rewind(threads, thread, &plan, options.memory)?
    } else {
        AgentHalf::default()
    };
    options.continuation = half.continuation.clone();
    let cursor = threads.last_cursor()?;
    let report = point.rewind(threads, thread, &options)?;
    crate::agents::settle(&report);
    for n in crate::threads::announce_rewind(threads, thread, cursor, &report, s.opened.ws.root())?
    {
        eprintln!("{}: {}", s.name, n.message);
    }
    Ok((report, half))
}
