//! `cairn watch`: the workspace's watcher, in the foreground (see `cairn_restore::watch`).

use crate::args::WatchArgs;
use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::parse::count;
use cairn_restore::watch::{self, DaemonStatus, ServeEnd};
use cairn_snapshot::WatchOptions;
use cairn_store::{ErrorKind, Store};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `cairn watch --status` (and `cairn watch`, once ready) prints with `--json`.
#[derive(Debug, Serialize)]
pub struct WatchJson {
    /// Whether a watcher runs.
    pub running: bool,
    /// The workspace root and the socket a watcher would answer on, when none runs (a running
    /// one's account says both, once: JSON keys are not repeated).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub idle: Option<Idle>,
    /// The running watcher's account.
    #[serde(flatten)]
    pub status: Option<DaemonStatus>,
    /// A watcher that holds the workspace but does not answer (stopped, or stuck): snapshots
    /// walk meanwhile (issue 53).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_answering: Option<NotAnswering>,
}

/// A watcher that does not answer, and what `--stop` did to it.
#[derive(Debug, Serialize)]
pub struct NotAnswering {
    /// Its process id, when it can be told.
    pub pid: Option<u32>,
    /// Why it is taken for silent.
    pub reason: String,
    /// Whether `cairn watch --stop` killed it (SIGKILL).
    pub killed: bool,
}

/// Where a watcher would run, when none does.
#[derive(Debug, Serialize)]
pub struct Idle {
    /// The workspace root.
    #[serde(with = "cairn_store::relpath::os_path")]
    pub root: PathBuf,
    /// The socket a watcher would answer on.
    #[serde(with = "cairn_store::relpath::os_path")]
    pub socket: PathBuf,
}

impl WatchJson {
    /// A running watcher's account.
    fn running(st: &DaemonStatus) -> WatchJson {
        WatchJson {
            running: true,
            idle: None,
            status: Some(st.clone()),
            not_answering: None,
        }
    }
}

pub(crate) fn watch(ctx: &Ctx, args: &WatchArgs) -> Result<()> {
    if args.status || args.stop {
        return status_or_stop(ctx, args.stop);
    }
    // A long-lived process: two arenas for its threads, so that what its snapshots free is
    // used again rather than kept in one arena per thread (large blocks are mapped on their
    // own in every command, see `run`).
    cairn_store::limit_heap_arenas(2);
    let ws = ctx.open_workspace(true)?;
    let watcher = ws.watch(&WatchOptions {
        max_watches: args.max_watches,
        ..WatchOptions::default()
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    stop_on_signals(stop.clone());
    let end = watch::serve(&ws, watcher, &stop, args.idle_exit, |st| {
        if let Some(pid) = st.took_over {
            ctx.note(&format!(
                "the watcher process {pid} did not answer: killed it (SIGKILL) and took over"
            ));
        }
        let json = WatchJson::running(st);
        let _ = ctx.emit(&json, || {
            let mut out = format!(
                "watching {}: {} (process {}, socket {})\n",
                st.root.display(),
                count(st.watch.watches, "directory", "directories"),
                st.pid,
                st.socket.display()
            );
            for u in &st.watch.unwatched {
                out.push_str(&format!("  not watched, walked by every snapshot: {u}\n"));
            }
            out
        });
    })?;
    match end {
        ServeEnd::Stopped => ctx.note("the watcher stopped"),
        ServeEnd::RootGone => ctx.note(&format!(
            "the watcher stopped: the workspace root {} was moved or deleted",
            ws.root().display()
        )),
        ServeEnd::StoreGone => ctx.note(&format!(
            "the watcher stopped: the store {} was deleted",
            ws.store().path().display()
        )),
        ServeEnd::Idle => ctx.note(&format!(
            "the watcher stopped: no process asked it anything for {} s",
            args.idle_exit.unwrap_or_default().as_secs()
        )),
    }
    Ok(())
}

/// Sets `stop` on SIGTERM, SIGINT or SIGHUP, so the watcher removes its socket as it ends.
fn stop_on_signals(stop: Arc<AtomicBool>) {
    let _ = std::thread::Builder::new()
        .name("cairn-signals".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                use tokio::signal::unix::{signal, SignalKind};
                let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
                    signal(SignalKind::terminate()),
                    signal(SignalKind::interrupt()),
                    signal(SignalKind::hangup()),
                ) else {
                    return;
                };
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                    _ = hup.recv() => {}
                }
                stop.store(true, Ordering::SeqCst);
            });
        });
}

fn status_or_stop(ctx: &Ctx, stop: bool) -> Result<()> {
    let (store_path, _, id) = ctx.workspace_location()?;
    let root = ctx.canonical_root();
    let none = |socket: PathBuf| WatchJson {
        running: false,
        idle: Some(Idle {
            root: root.clone(),
            socket,
        }),
        status: None,
        not_answering: None,
    };
    if std::fs::symlink_metadata(&store_path).is_err() {
        let json = none(
            store_path
                .join("workspaces")
                .join(&id)
                .join(watch::SOCKET_NAME),
        );
        return ctx.emit(&json, || {
            format!("no watcher runs for {} (no store yet)\n", root.display())
        });
    }
    let store = Store::open(&store_path, ctx.store_options(false)?)?;
    let socket = watch::socket_path(&store, &id)?;
    let st = match watch::find(&store, &id)? {
        watch::Found::Running(st) => *st,
        watch::Found::None => {
            let json = none(socket);
            return ctx.emit(&json, || {
                format!(
                    "no watcher runs for {}; start one with `cairn watch`\n",
                    root.display()
                )
            });
        }
        watch::Found::Silent { pid, why } => {
            return silent(ctx, &store, &id, none(socket), pid, why, stop);
        }
    };
    if stop {
        let pid = rustix::process::Pid::from_raw(st.pid as i32).ok_or_else(|| {
            CliError::new(ErrorKind::Panic, format!("a watcher gave pid {}", st.pid))
        })?;
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).map_err(|e| {
            CliError::new(
                ErrorKind::Denied,
                format!("cannot stop the watcher (process {}): {e}", st.pid),
            )
        })?;
        let started = Instant::now();
        // Gone once its lock is free (it answers no status while it ends).
        while !watch::wait_gone(&store, &id, Duration::from_millis(100))? {
            if started.elapsed() > Duration::from_secs(20) {
                return Err(CliError::new(
                    ErrorKind::Busy,
                    format!(
                        "the watcher (process {}) did not stop within 20 s of SIGTERM",
                        st.pid
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let json = none(socket);
        return ctx.emit(&json, || {
            format!(
                "stopped the watcher of {} (process {})\n",
                root.display(),
                st.pid
            )
        });
    }
    let json = WatchJson::running(&st);
    ctx.emit(&json, || {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let mut out = format!(
            "watching {} (process {}): {} watched, {} changed since it started, \
             {}\n  memory {:.1} MiB (peak {:.1} MiB), processor {} ms, {} \
             taken and {} carried out for other processes\n",
            st.root.display(),
            st.pid,
            count(st.watch.watches, "directory", "directories"),
            st.watch.changed,
            count(st.watch.overflows, "queue overflow", "queue overflows"),
            mib(st.memory_bytes),
            mib(st.peak_memory_bytes),
            st.cpu_ms,
            count(st.snapshots, "snapshot", "snapshots"),
            count(st.restores, "restore", "restores")
        );
        if st.walked_ahead > 0 {
            out.push_str(&format!(
                "  {} walked ahead once the workspace was quiet, {} of them answered a \
                 snapshot asked for\n",
                count(st.walked_ahead, "snapshot", "snapshots"),
                st.answered_ahead
            ));
        }
        if st.stored_ahead > 0 {
            out.push_str(&format!(
                "  {} stored ahead a moment after them (the snapshot asked for next found \
                 their objects stored)\n",
                count(st.stored_ahead, "change", "changes")
            ));
        }
        if st.packs_merged > 0 {
            out.push_str(&format!(
                "  {} merged while idle\n",
                count(st.packs_merged, "small pack", "small packs")
            ));
        }
        if let Some(e) = &st.merge_error {
            out.push_str(&format!("  the last merge of small packs failed: {e}\n"));
        }
        for u in &st.watch.unwatched {
            out.push_str(&format!("  not watched, walked by every snapshot: {u}\n"));
        }
        out
    })
}

/// `cairn watch --status` or `--stop` of a watcher that holds the workspace but does not
/// answer (process `pid`, when known, for `why`): said, or killed with SIGKILL (issue 53).
fn silent(
    ctx: &Ctx,
    store: &Store,
    id: &str,
    mut json: WatchJson,
    pid: Option<u32>,
    why: String,
    stop: bool,
) -> Result<()> {
    let root = ctx.canonical_root();
    let who = pid.map_or("its process unknown".to_string(), |p| {
        format!("process {p}")
    });
    if !stop {
        json.not_answering = Some(NotAnswering {
            pid,
            reason: why.clone(),
            killed: false,
        });
        return ctx.emit(&json, || {
            format!(
                "a watcher holds {} ({who}) but does not answer: {why}; snapshots walk \
                 meanwhile; `cairn watch --stop` kills it\n",
                root.display()
            )
        });
    }
    let Some(pid) = pid else {
        return Err(CliError::new(
            ErrorKind::Busy,
            format!(
                "the watcher of {} does not answer ({why}) and its process cannot be told; \
                 find it with `pgrep -f 'cairn.* watch'` and kill it",
                root.display()
            ),
        ));
    };
    watch::kill_silent(store, id, pid)?;
    json.not_answering = Some(NotAnswering {
        pid: Some(pid),
        reason: why.clone(),
        killed: true,
    });
    ctx.emit(&json, || {
        format!(
            "killed the watcher of {} (process {pid}, SIGKILL): it did not answer: {why}\n",
            root.display()
        )
    })
}

/// With `CAIRN_WATCH=auto`: starts `cairn watch` for the workspace in the background when
/// none runs (this snapshot walks; the next ones ask it). Best effort: a watcher that cannot
/// start leaves snapshots walking.
pub(crate) fn start_if_asked(ctx: &Ctx, ws: &cairn_restore::Workspace) {
    if std::env::var("CAIRN_WATCH").as_deref() == Ok("auto") {
        start_in_background(ctx, ws);
    }
}

/// How long a watcher started on first use waits without a request before it stops.
pub(crate) const AUTO_IDLE_EXIT: &str = "8h";

/// Starts `cairn watch` for the workspace in the background when none runs (`cairn hook
/// claude-code --watch`, `CAIRN_WATCH=auto`). Best effort: a watcher that cannot start leaves
/// snapshots walking. Not with a remote store, nor with `CAIRN_WATCH=off`. It stops after
/// [`AUTO_IDLE_EXIT`] without a request; the next use starts it again.
pub(crate) fn start_in_background(ctx: &Ctx, ws: &cairn_restore::Workspace) {
    // A remote's cache is left to walk: the daemon would need the remote's keys too.
    if ctx.remote.is_some() || !watch::daemon_allowed() {
        return;
    }
    // One runs, answering or not (a stopped one is left to `cairn watch --stop` or a
    // `cairn watch` started by hand: these snapshots walk meanwhile).
    if watch::runs(ws.store(), ws.id()).unwrap_or(true) {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("-C")
        .arg(ws.root())
        .arg("--store")
        .arg(ws.store().path())
        .arg("watch")
        .arg("--idle-exit")
        .arg(AUTO_IDLE_EXIT)
        .env_remove("CAIRN_WATCH")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let _ = cmd.spawn();
}
