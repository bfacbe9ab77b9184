//! `cairn thread queue | inbox | deliver`: the inbox of a thread (issue 59), and the JSON of its
//! admissions that the command line and `cairn serve` (`/v1/threads/{id}/inbox`) share.
//!
//! A prompt is queued with its admission key and delivered at the thread's next safe boundary
//! (no run of the thread running or paused, no tool call of its runs open), with the checkpoint
//! of the files taken at delivery, as `cairn thread append` takes one before a user message. A
//! rewind of the thread cancels the prompts still queued; their keys answer `cancelled` from
//! then on, and they are never sent.

use crate::ctx::Ctx;
use crate::error::Result;
use crate::parse::{count, human_time, one_line};
use crate::threads::{open, thread_named, Opened};
use cairn_rewind::{Admission, DeliverOptions, Files, NewEntry};
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::Arc;

/// An admission of a thread's inbox.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub(crate) struct AdmissionJson {
    /// The thread.
    pub(crate) thread_id: String,
    /// Its admission key.
    pub(crate) key: String,
    /// `queued`, `delivered` or `cancelled`.
    pub(crate) state: String,
    /// The prompt's text (lossy when it is not UTF-8).
    pub(crate) text: String,
    /// Its metadata (a JSON object).
    #[schema(value_type = Object)]
    pub(crate) metadata: serde_json::Value,
    /// Delivered: the entry it became.
    pub(crate) entry_id: Option<String>,
    /// Delivered: the checkpoint taken at delivery.
    pub(crate) checkpoint_id: Option<String>,
    /// Cancelled: the rewind that cancelled it.
    pub(crate) rewind_id: Option<String>,
    /// Still queued after a delivery failed: why.
    pub(crate) error: Option<String>,
    /// When it was queued (ms since the Unix epoch).
    pub(crate) queued_ms: i64,
    /// When it was delivered or cancelled.
    pub(crate) done_ms: Option<i64>,
    /// The key was seen before: this is that admission, and nothing was queued again.
    pub(crate) repeated: bool,
}

impl From<&Admission> for AdmissionJson {
    fn from(a: &Admission) -> Self {
        AdmissionJson {
            thread_id: a.thread_id.to_string(),
            key: a.key.clone(),
            state: a.state.name().to_string(),
            text: String::from_utf8_lossy(&a.payload).into_owned(),
            metadata: a.metadata.clone(),
            entry_id: a.entry_id.as_ref().map(|e| e.to_string()),
            checkpoint_id: a.checkpoint_id.as_ref().map(|c| c.to_string()),
            rewind_id: a.rewind_id.as_ref().map(|r| r.to_string()),
            error: a.error.clone(),
            queued_ms: a.queued_ms,
            done_ms: a.done_ms,
            repeated: a.repeated,
        }
    }
}

/// What a delivery did.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub(crate) struct DeliveryJson {
    /// The prompt delivered (its admission, now `delivered`), if any.
    pub(crate) delivered: Option<AdmissionJson>,
    /// The snapshot of the checkpoint taken at delivery, before the entry.
    pub(crate) snapshot_id: Option<String>,
    /// Nothing was delivered because the thread is under way: what (a run, a tool call).
    pub(crate) waiting: Option<String>,
    /// How many prompts of the thread are still queued.
    pub(crate) queued: u64,
}

/// Queues `text` in the inbox of thread `name` under `key`.
pub(crate) fn enqueue_on(
    o: &Opened,
    name: &str,
    key: &str,
    text: &str,
    metadata: Option<serde_json::Value>,
) -> Result<AdmissionJson> {
    let thread = thread_named(&o.threads, name)?.id;
    let mut prompt = NewEntry::user(text);
    if let Some(m) = metadata {
        prompt = prompt.with_metadata(m);
    }
    Ok(AdmissionJson::from(
        &o.threads.enqueue(&thread, key, prompt)?,
    ))
}

/// Every admission of the inbox of thread `name`, oldest first.
pub(crate) fn inbox_on(o: &Opened, name: &str) -> Result<Vec<AdmissionJson>> {
    let thread = thread_named(&o.threads, name)?.id;
    Ok(o.threads
        .inbox(&thread)?
        .iter()
        .map(AdmissionJson::from)
        .collect())
}

/// Delivers the oldest prompt queued in thread `name` if it is at a safe boundary, with the
/// checkpoint of the workspace taken then.
pub(crate) fn deliver_on(o: &Opened, name: &str) -> Result<DeliveryJson> {
    let thread = thread_named(&o.threads, name)?.id;
    let opts = DeliverOptions {
        workspace: Some(o.ws.clone() as Arc<dyn Files>),
        ..DeliverOptions::default()
    };
    let d = o.threads.deliver(&thread, &opts)?;
    Ok(DeliveryJson {
        delivered: d.delivered.as_ref().map(AdmissionJson::from),
        snapshot_id: d.checkpoint.map(|c| c.snapshot_id.to_hex()),
        waiting: d.waiting,
        queued: d.queued,
    })
}

/// `cairn thread queue THREAD --key KEY --text TEXT`.
pub(crate) fn queue(ctx: &Ctx, thread: &str, key: &str, text: Option<String>) -> Result<()> {
    let o = open(ctx, false)?;
    let a = enqueue_on(&o, thread, key, text.as_deref().unwrap_or_default(), None)?;
    ctx.emit(&a, || {
        let said = match (a.state.as_str(), a.repeated) {
            ("queued", false) => format!(
                "queued in thread {thread}: it is delivered at the thread's next safe boundary, \
                 with a checkpoint of the files then (`cairn thread deliver {thread}`)"
            ),
            ("queued", true) => {
                format!("was queued before and still waits for thread {thread}'s next boundary")
            }
            ("delivered", _) => format!(
                "was delivered before as entry {}: nothing is sent again",
                a.entry_id.as_deref().unwrap_or("-")
            ),
            _ => format!(
                "was cancelled by rewind {}: it is never sent; queue it with a new key if it is \
                 still wanted",
                a.rewind_id.as_deref().unwrap_or("-")
            ),
        };
        format!("prompt '{}' {said}\n", a.key)
    })
}

/// `cairn thread inbox THREAD`.
pub(crate) fn list(ctx: &Ctx, thread: &str) -> Result<()> {
    let o = open(ctx, false)?;
    let all = inbox_on(&o, thread)?;
    ctx.emit(&all, || {
        if all.is_empty() {
            return format!(
                "the inbox of thread {thread} is empty; `cairn thread queue {thread} --key KEY --text ...` queues a prompt\n"
            );
        }
        let mut out = String::new();
        for a in &all {
            let what = match (&a.entry_id, &a.rewind_id) {
                (Some(e), _) => format!("entry {e}"),
                (None, Some(r)) => format!("by rewind {r}"),
                _ => a.error.clone().unwrap_or_default(),
            };
            let _ = writeln!(
                out,
                "{}  {:<9}  {}  {}  {}",
                a.key,
                a.state,
                human_time(a.queued_ms),
                one_line(&a.text, 50),
                what
            );
        }
        out
    })
}

/// `cairn thread deliver THREAD`.
pub(crate) fn deliver(ctx: &Ctx, thread: &str) -> Result<()> {
    let o = open(ctx, false)?;
    let d = deliver_on(&o, thread)?;
    ctx.emit(&d, || {
        let mut out = match (&d.delivered, &d.waiting) {
            (Some(a), _) => {
                let mut s = format!(
                    "prompt '{}' delivered to thread {thread} as entry {}",
                    a.key,
                    a.entry_id.as_deref().unwrap_or("-")
                );
                if let Some(snap) = &d.snapshot_id {
                    let _ = write!(s, "; checkpoint of the files before it: snapshot {snap}");
                }
                s
            }
            (None, Some(w)) => format!("nothing delivered: {w}"),
            (None, None) => format!("nothing is queued in thread {thread}"),
        };
        if d.queued > 0 {
            let _ = write!(
                out,
                "; {} still queued",
                count(d.queued, "prompt", "prompts")
            );
        }
        out.push('\n');
        out
    })
}
