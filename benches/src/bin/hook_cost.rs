//! What Claude Code's hook costs a prompt or a tool call, against a plain `cairn snapshot` of
//! the same tree, side by side (issue 20).
//!
//! ```text
//! cargo build --release -p cairn-cli
//! cargo run --release -p cairn-benches --bin hook_cost -- [--files 10000] [--runs 11] [--seed 1] [--cairn PATH]
//! ```
//!
//! Generates a tree, takes a first snapshot (untimed), then in turns, each after editing 10
//! files: `cairn snapshot`, `cairn hook claude-code` with a `UserPromptSubmit` document (a thread
//! entry and its checkpoint), and with a `PreToolUse` of `Bash` (a labelled checkpoint). Each is
//! a whole process, as the agent runs it. Prints the medians and their ratio to the snapshot's.

use cairn_benches::cli::{self, Args};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const USAGE: &str = "usage: hook_cost [--files N] [--runs N] [--seed N] [--cairn PATH]";

fn main() {
    cli::main("hook_cost", USAGE, &["files", "runs", "seed", "cairn"], run);
}

/// Runs `cairn ARGS` in `root` with `stdin` and returns the milliseconds it took.
fn timed(
    cairn: &Path,
    root: &Path,
    home: &Path,
    args: &[&str],
    stdin: &str,
) -> Result<f64, String> {
    let t = Instant::now();
    let mut child = Command::new(cairn)
        .arg("-C")
        .arg(root)
        .args(args)
        .env("CAIRN_HOME", home)
        .env_remove("CAIRN_STORE")
        .env_remove("CLAUDE_PROJECT_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", cairn.display()))?;
    if let Some(mut i) = child.stdin.take() {
        i.write_all(stdin.as_bytes())
            .map_err(|e| format!("stdin: {e}"))?;
    }
    let out = child.wait_with_output().map_err(|e| format!("wait: {e}"))?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    if !out.status.success() {
        return Err(format!(
            "cairn {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(ms)
}

fn edit(root: &Path, round: u64) -> Result<(), String> {
    for i in 0..10 {
        std::fs::write(
            root.join(format!("edited-{i}.txt")),
            format!("round {round}, file {i}\n"),
        )
        .map_err(|e| format!("edit: {e}"))?;
    }
    Ok(())
}

fn run(args: Args) -> Result<(), String> {
    let runs = args.number("runs", 11)?.max(1);
    let cairn = match args.get("cairn") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/cairn"),
    };
    if !cairn.is_file() {
        return Err(format!(
            "{} is not built: run `cargo build --release -p cairn-cli` (or give --cairn PATH)",
            cairn.display()
        ));
    }
    let scratch = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let root = scratch.path().join("project");
    let home = scratch.path().join("cairn-home");
    let what = cli::generate_tree(&args, &root, 10_000)?;
    println!(
        "tree: {what}; {runs} rounds of 10 edited files, each command a whole process; medians"
    );
    timed(&cairn, &root, &home, &["snapshot"], "")?;
    let root_s = root.to_string_lossy();
    let (mut snap, mut prompt, mut tool) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..runs {
        edit(&root, round * 3)?;
        snap.push(timed(&cairn, &root, &home, &["snapshot"], "")?);
        edit(&root, round * 3 + 1)?;
        let doc = serde_json::json!({
            "session_id": "bench", "cwd": root_s, "hook_event_name": "UserPromptSubmit",
            "prompt": format!("prompt {round}"),
        });
        prompt.push(timed(
            &cairn,
            &root,
            &home,
            &["hook", "claude-code"],
            &doc.to_string(),
        )?);
        edit(&root, round * 3 + 2)?;
        let doc = serde_json::json!({
            "session_id": "bench", "cwd": root_s, "hook_event_name": "PreToolUse",
            "tool_name": "Bash", "tool_use_id": format!("toolu_bench_{round}"), "tool_input": {},
        });
        tool.push(timed(
            &cairn,
            &root,
            &home,
            &["hook", "claude-code"],
            &doc.to_string(),
        )?);
    }
    let m = |xs: &[f64]| cli::median(xs).unwrap_or(0.0);
    let base = m(&snap);
    println!("\n{:<56} {:>9} {:>12}", "", "ms", "vs snapshot");
    for (name, xs) in [
        ("cairn snapshot", &snap),
        (
            "hook claude-code, UserPromptSubmit (entry + checkpoint)",
            &prompt,
        ),
        ("hook claude-code, PreToolUse Bash (checkpoint)", &tool),
    ] {
        println!("{name:<56} {:>9.1} {:>11.2}x", m(xs), m(xs) / base);
    }
    Ok(())
}
