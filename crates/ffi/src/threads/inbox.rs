//! The inbox of a thread across the boundary (issue 59): prompts queued with their admission
//! key, delivered at the thread's next safe boundary, listed.

use super::*;

#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "Prompt"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct PromptJson {
    text: Option<String>,
    payload_hex: Option<String>,
    metadata: Option<serde_json::Value>,
}

#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "DeliverOptions"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct DeliverJson {
    wait_ms: Option<u64>,
}

/// An admission of the inbox as JSON: `cairn_rewind::Admission` with its payload.
#[derive(Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "Admission"))]
pub(crate) struct AdmissionOut<'a> {
    #[serde(flatten)]
    admission: &'a cairn_rewind::Admission,
    /// The prompt: a string when UTF-8, `{"hex": ...}` otherwise.
    payload: RelPath,
}

impl<'a> AdmissionOut<'a> {
    fn of(admission: &'a cairn_rewind::Admission) -> Self {
        AdmissionOut {
            admission,
            payload: RelPath(admission.payload.clone()),
        }
    }
}

/// What `cairn_threads_deliver` writes: `cairn_rewind::Delivery` with the payloads.
#[derive(Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "Delivery"))]
pub(crate) struct DeliveryOut<'a> {
    /// The prompt delivered by this call (its admission, now `delivered`), if any.
    delivered: Option<AdmissionOut<'a>>,
    /// The user entry it became.
    entry: Option<EntryOut<'a>>,
    /// The checkpoint taken at delivery, before the entry.
    checkpoint: &'a Option<cairn_rewind::Checkpoint>,
    /// Nothing was delivered because the thread is under way: what (a run, a tool call).
    waiting: &'a Option<String>,
    /// How many prompts of the thread are still queued.
    queued: u64,
}

/// Queues a user prompt in the thread's inbox under the admission key `key`, to be delivered
/// at the thread's next safe boundary (no run of the thread running or paused, no tool call
/// of its runs open). The prompt, may be empty: `{"text": str | "payload_hex": hex,
/// "metadata": {...}}`. Writes the admission as JSON: `state` is `"queued"`, or for a key seen
/// before (`repeated: true`) the admission as it is now: `"delivered"` (with `entry_id`,
/// `checkpoint_id`) or `"cancelled"` (with the `rewind_id` that cancelled it); nothing is
/// queued again. While a rewind holds the thread: `CAIRN_ERR_THREAD_BUSY`.
///
/// # Safety
/// `t` live; inputs valid for their lengths; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_enqueue(
    t: *const cairn_threads,
    thread: *const u8,
    thread_len: usize,
    key: *const u8,
    key_len: usize,
    prompt_json: *const u8,
    prompt_len: usize,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let out = arg!(out out);
        let id = ThreadId::new(arg!(text thread, thread_len, "thread"));
        let key = arg!(text key, key_len, "key");
        let p: PromptJson = arg!(options prompt_json, prompt_len, "prompt", "prompt");
        let mut prompt = NewEntry::user(payload_of(p.text, p.payload_hex)?);
        if let Some(m) = p.metadata {
            prompt = prompt.with_metadata(m);
        }
        let admission = t.threads.enqueue(&id, key, prompt)?;
        out.json(&AdmissionOut::of(&admission))
    })
}

/// Delivers the oldest prompt queued in the thread's inbox if the thread is at a safe
/// boundary: the checkpoint is taken then (the run's workspace and policy, else `workspace`,
/// else the handle's default workspace, as for `cairn_threads_append`), and the prompt is
/// appended as a user entry under its key. `run` (may be NULL) is a run delivering between its
/// own turns: it does not count as under way while it is running. Options, may be empty:
/// `{"wait_ms": n}`. Writes `{"delivered": admission | null, "entry": entry | null,
/// "checkpoint": checkpoint | null, "waiting": what is under way | null, "queued": n}`. A
/// checkpoint that is due and fails leaves the prompt queued with its `error` and fails
/// with the checkpoint's error.
///
/// # Safety
/// `t` live; inputs valid for their lengths; `run`, `workspace` NULL or live; `out` writable;
/// `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_deliver(
    t: *const cairn_threads,
    thread: *const u8,
    thread_len: usize,
    options_json: *const u8,
    options_len: usize,
    run: *const cairn_run,
    workspace: *const cairn_workspace,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let out = arg!(out out);
        let id = ThreadId::new(arg!(text thread, thread_len, "thread"));
        let o: DeliverJson = arg!(options options_json, options_len, "deliver options");
        let run = arg!(maybe run).map(|r| r.run.clone());
        let opts = cairn_rewind::DeliverOptions {
            workspace: t.workspace_for(run.as_ref(), workspace),
            run,
            wait: ms(o.wait_ms).unwrap_or_default(),
        };
        let d = t.threads.deliver(&id, &opts)?;
        out.json(&DeliveryOut {
            delivered: d.delivered.as_ref().map(AdmissionOut::of),
            entry: d.entry.as_ref().map(EntryOut::of),
            checkpoint: &d.checkpoint,
            waiting: &d.waiting,
            queued: d.queued,
        })
    })
}

/// Every admission of the thread's inbox as JSON, oldest first: queued, delivered and
/// cancelled.
///
/// # Safety
/// `t` live; `thread` valid; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_inbox(
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
        let inbox = t.threads.inbox(&id)?;
        out.json(&inbox.iter().map(AdmissionOut::of).collect::<Vec<_>>())
    })
}
