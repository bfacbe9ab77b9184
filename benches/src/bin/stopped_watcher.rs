//! What a stopped `cairn watch` costs the checkpoints that meet it (issue 53): Claude Code's
//! hook and `cairn snapshot` with a watcher stopped by SIGSTOP (what Ctrl-Z does to a
//! foreground `cairn watch`), against the same commands with no watcher, side by side.
//!
//! ```text
//! cargo build --release -p cairn-cli
//! cargo run --release -p cairn-benches --bin stopped_watcher -- [--files 10000] [--runs 7] [--seed 1] [--cairn PATH]
//! ```
//!
//! Generates a tree and takes a first snapshot (untimed). Then, each run after modifying 10
//! files (`gen::mutate`), times whole processes as the agent and the user run them: `cairn --json snapshot`,
//! and `cairn hook claude-code` with a `PreToolUse` of `Bash` (a labelled checkpoint) on its
//! stdin, first with no watcher (the walk), then with a `cairn watch` started, ready (its
//! `watch --status` says so, polled), used once, and stopped with SIGSTOP. Each stopped
//! snapshot must have walked the whole tree saying the watcher did not answer, or the bench
//! fails. Then `cairn watch --status` and `cairn watch --stop` (which must kill it) once each.
//! Then the same runs past a listener bound on the watcher's socket by the bench, which never
//! accepts and is not stopped (a watcher stuck): there the client waits its whole bound,
//! `cairn_restore::watch::ANSWER_WITHIN`, where a stopped watcher is seen stopped within
//! about 100 ms. Prints the medians, their ratio to the walk's, and what they cost beyond
//! it. The watcher is continued and killed whatever happens.

use cairn_benches::cli::{self, cairn_timed as timed, Args};
use std::path::Path;
use std::process::{Command, Stdio};

const USAGE: &str = "usage: stopped_watcher [--files N] [--runs N] [--seed N] [--cairn PATH]";

fn main() {
    cli::main(
        "stopped_watcher",
        USAGE,
        &["files", "runs", "seed", "cairn"],
        run,
    );
}

/// One run's `cairn --json snapshot` and hook, after edits: their milliseconds and the
/// snapshot's `stats`.
fn round(
    cairn: &Path,
    root: &Path,
    home: &Path,
    n: u64,
) -> Result<(f64, f64, serde_json::Value), String> {
    cli::modify(root, 10, n * 2)?;
    let (out, snap) = timed(cairn, root, home, &["--json", "snapshot"], "")?;
    let json: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| format!("snapshot JSON: {e}"))?;
    cli::modify(root, 10, n * 2 + 1)?;
    let doc = serde_json::json!({
        "session_id": "bench", "cwd": root, "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_use_id": format!("toolu_bench_{n}"), "tool_input": {},
    });
    let (_, hook) = timed(
        cairn,
        root,
        home,
        &["hook", "claude-code"],
        &doc.to_string(),
    )?;
    Ok((snap, hook, json["stats"].clone()))
}

fn run(args: Args) -> Result<(), String> {
    let runs = args.number("runs", 7)?.max(1);
    let cairn = cli::cairn_binary(&args)?;
    let scratch = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let root = scratch.path().join("project");
    let home = scratch.path().join("cairn-home");
    let what = cli::generate_tree(&args, &root, 10_000)?;
    println!("tree: {what}; {runs} runs of 10 edited files, each command a whole process; medians");
    timed(&cairn, &root, &home, &["snapshot"], "")?;

    let (mut walk_snap, mut walk_hook) = (Vec::new(), Vec::new());
    for n in 0..runs {
        let (s, h, _) = round(&cairn, &root, &home, n)?;
        walk_snap.push(s);
        walk_hook.push(h);
    }

    let watcher = cli::Watch::start(
        Command::new(&cairn)
            .arg("-C")
            .arg(&root)
            .arg("watch")
            .env("CAIRN_HOME", &home)
            .env_remove("CAIRN_STORE")
            .env_remove("CAIRN_WATCH")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
        || Ok(timed(&cairn, &root, &home, &["--json", "watch", "--status"], "")?.0),
    )?;
    timed(&cairn, &root, &home, &["snapshot"], "")?;
    watcher.signal(rustix::process::Signal::STOP)?;

    let (stop_snap, stop_hook, reason) = past_silent(&cairn, &root, &home, runs, runs)?;
    let (_, status) = timed(&cairn, &root, &home, &["--json", "watch", "--status"], "")?;
    let (out, stop) = timed(&cairn, &root, &home, &["--json", "watch", "--stop"], "")?;
    let stopped: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| format!("--stop JSON: {e}"))?;
    if stopped["not_answering"]["killed"] != true {
        return Err(format!(
            "cairn watch --stop did not kill the stopped watcher: {out}"
        ));
    }
    drop(watcher);

    // A listener that never accepts, in this process (not stopped): the client's bound.
    let (out, _) = timed(&cairn, &root, &home, &["--json", "watch", "--status"], "")?;
    let idle: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| format!("status JSON: {e}"))?;
    let socket = Path::new(idle["socket"].as_str().ok_or("no socket path")?);
    let dir = std::fs::File::open(socket.parent().ok_or("no socket directory")?)
        .map_err(|e| format!("{}: {e}", socket.display()))?;
    let short = format!(
        "/proc/self/fd/{}/{}",
        std::os::fd::AsRawFd::as_raw_fd(&dir),
        cairn_restore::watch::SOCKET_NAME
    );
    let deaf = std::os::unix::net::UnixListener::bind(&short)
        .map_err(|e| format!("bind {}: {e}", socket.display()))?;
    let (deaf_snap, deaf_hook, deaf_reason) = past_silent(&cairn, &root, &home, runs, 2 * runs)?;
    drop(deaf);
    let _ = std::fs::remove_file(socket);

    let m = |xs: &[f64]| cli::median(xs).unwrap_or(0.0);
    println!("walk_reason, stopped watcher: {reason}");
    println!("walk_reason, listener that never accepts: {deaf_reason}");
    println!(
        "\n{:<36} {:>10} {:>10} {:>6} {:>8} {:>10} {:>6} {:>8}",
        "", "no watcher", "stopped", "ratio", "beyond", "deaf", "ratio", "beyond"
    );
    for (name, walk, stopped, deaf) in [
        ("cairn snapshot", &walk_snap, &stop_snap, &deaf_snap),
        (
            "hook claude-code, PreToolUse Bash",
            &walk_hook,
            &stop_hook,
            &deaf_hook,
        ),
    ] {
        let (w, s, d) = (m(walk), m(stopped), m(deaf));
        println!(
            "{name:<36} {w:>8.1}ms {s:>8.1}ms {:>5.2}x {:>6.0}ms {d:>8.1}ms {:>5.2}x {:>6.0}ms",
            s / w,
            s - w,
            d / w,
            d - w
        );
    }
    println!("cairn watch --status, stopped watcher (once): {status:.1} ms");
    println!("cairn watch --stop, SIGKILL (once): {stop:.1} ms");
    println!(
        "the client's bound on a watcher that does not answer and is not seen stopped: {} ms",
        cairn_restore::watch::ANSWER_WITHIN.as_millis()
    );
    Ok(())
}

/// `runs` rounds (numbered from `from`) past a watcher that does not answer: the snapshots'
/// and hooks' milliseconds, and the last snapshot's `walk_reason`. Each snapshot must have
/// walked the whole tree saying the watcher did not answer.
fn past_silent(
    cairn: &Path,
    root: &Path,
    home: &Path,
    runs: u64,
    from: u64,
) -> Result<(Vec<f64>, Vec<f64>, String), String> {
    let (mut snaps, mut hooks) = (Vec::new(), Vec::new());
    let mut reason = String::new();
    for n in from..from + runs {
        let (s, h, stats) = round(cairn, root, home, n)?;
        reason = stats["walk_reason"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if stats["walked"] != "full" || !reason.contains("did not answer") {
            return Err(format!(
                "a snapshot past a watcher that does not answer did not walk: {stats}"
            ));
        }
        snaps.push(s);
        hooks.push(h);
    }
    Ok((snaps, hooks, reason))
}
