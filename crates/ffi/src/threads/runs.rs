//! Runs across the boundary: begun, their lease kept, their tool calls, ended, listed.

use super::*;

#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "RunOptions"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RunJson {
    durable: bool,
    lease_ms: Option<u64>,
    parent_run: Option<String>,
    checkpoints: Option<PolicyJson>,
    agent_checkpoints: Option<PolicyJson>,
    reject_if_busy: bool,
    wait_ms: Option<u64>,
}

/// Begins a run of a thread in `workspace` (NULL: the default one). Options, may be empty:
/// `{"durable": bool, "lease_ms": n, "parent_run": run id (a subagent: takes no checkpoints),
/// "checkpoints": {...}, "agent_checkpoints": {...}, "reject_if_busy": bool, "wait_ms": n}`.
/// While a rewind holds the thread, the call waits, or fails with `CAIRN_ERR_THREAD_BUSY`
/// with `reject_if_busy`.
///
/// # Safety
/// `t` live; inputs valid; `workspace` NULL or live; `out` writable; `err_out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_begin_run(
    t: *const cairn_threads,
    thread: *const u8,
    thread_len: usize,
    options_json: *const u8,
    options_len: usize,
    workspace: *const cairn_workspace,
    out: *mut *mut cairn_run,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let out = arg!(out out);
        let id = ThreadId::new(arg!(text thread, thread_len, "thread"));
        let o: RunJson = arg!(options options_json, options_len, "run options");
        let mut opts = RunOptions {
            workspace: t.workspace_or(workspace),
            durable: o.durable,
            parent_run: o.parent_run.map(RunId::new),
            checkpoints: o.checkpoints.map(Checkpoints::from),
            agent_checkpoints: o.agent_checkpoints.map(Checkpoints::from),
            reject_if_busy: o.reject_if_busy,
            ..RunOptions::default()
        };
        if let Some(l) = ms(o.lease_ms) {
            opts.lease = l;
        }
        if let Some(w) = ms(o.wait_ms) {
            opts.wait = w;
        }
        out.put(cairn_run {
            run: t.threads.begin_run(&id, opts)?,
        })
    })
}

/// The run's id (valid until `cairn_run_free`).
///
/// # Safety
/// `run` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn cairn_run_id(run: *const cairn_run) -> cairn_bytes {
    // SAFETY: per the contract.
    match unsafe { run.as_ref() } {
        Some(r) => {
            let s = r.run.id().as_str();
            cairn_bytes {
                data: s.as_ptr(),
                len: s.len(),
            }
        }
        None => cairn_bytes {
            data: std::ptr::null(),
            len: 0,
        },
    }
}

/// Frees a run handle (the run itself goes on until `cairn_threads_end_run`, or its lease
/// runs out). NULL is accepted.
///
/// # Safety
/// `run` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn cairn_run_free(run: *mut cairn_run) {
    // SAFETY: per the contract above; the drop runs inside the panic boundary.
    unsafe { crate::boundary::free_boxed(run, "a run") }
}

/// Renews the run's lease. A run a forced rewind interrupted gets
/// `CAIRN_ERR_RUN_INTERRUPTED`.
///
/// # Safety
/// `t`, `run` live; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_heartbeat(
    t: *const cairn_threads,
    run: *const cairn_run,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let r = arg!(handle run, "run");
        t.threads.heartbeat(&r.run)?;
        Ok(())
    })
}

/// Starts a tool call of a run (counted until it finishes, even after its run ends); writes
/// the call's id (text) to `out`.
///
/// # Safety
/// `t`, `run` live; `name` valid; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_tool_start(
    t: *const cairn_threads,
    run: *const cairn_run,
    name: *const u8,
    name_len: usize,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let r = arg!(handle run, "run");
        let out = arg!(out out);
        let name = arg!(text name, name_len, "name");
        let call = t.threads.tool_start(&r.run, name)?;
        out.bytes(call.as_str().as_bytes().to_vec())
    })
}

/// Finishes a tool call.
///
/// # Safety
/// `t` live; `call` valid; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_tool_finish(
    t: *const cairn_threads,
    call: *const u8,
    call_len: usize,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let call = ToolCallId::new(arg!(text call, call_len, "call"));
        t.threads.tool_finish(&call)?;
        Ok(())
    })
}

/// Ends a run; writes its final status as JSON (`"ended"`, `"interrupted"`, ...).
///
/// # Safety
/// `t`, `run` live; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_end_run(
    t: *const cairn_threads,
    run: *const cairn_run,
    out: *mut *mut cairn_buf,
    err_out: *mut *mut cairn_error,
) -> cairn_status {
    boundary(err_out, || {
        let t = arg!(handle t, "threads");
        let r = arg!(handle run, "run");
        let out = arg!(out out);
        out.json(&t.threads.end_run(&r.run)?)
    })
}

/// The runs of a thread (going, paused, durable) as JSON.
///
/// # Safety
/// `t` live; `thread` valid; `out` writable; `err_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn cairn_threads_runs(
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
        out.json(&t.threads.runs(&id)?)
    })
}
