//! What Claude Code's and Codex's hooks cost a prompt or a tool call, and what an MCP
//! `checkpoint` call to `cairn mcp` costs, against a plain `cairn snapshot` of the same tree, side
//! by side (issues 20 and 55).
//!
//! ```text
//! cargo build --release -p cairn-cli
//! cargo run --release -p cairn-benches --bin hook_cost -- [--files 10000] [--runs 11] [--seed 1] [--cairn PATH]
//! ```
//!
//! Generates a tree, takes a first snapshot (untimed), then in turns, each after editing 10
//! files: `cairn snapshot`, `cairn hook claude-code` with a `UserPromptSubmit` document (a thread
//! entry and its checkpoint), and with a `PreToolUse` of `Bash` (a labelled checkpoint); the same
//! two for `cairn hook codex` (the `PreToolUse` of `apply_patch`). Each is
//! a whole process, as the agent runs it. Then an MCP `checkpoint` tool call (newline-delimited
//! JSON-RPC on the pipes, as an agent's client writes it) to one `cairn mcp` server kept running
//! for every round, as agents keep theirs; and the same call to a server started for it
//! (start, `initialize`, the call, exit). Prints the medians and their ratio to the snapshot's.

use cairn_benches::cli::{self, Args};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
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
    cli::cairn_timed(cairn, root, home, args, stdin).map(|(_, ms)| ms)
}

/// A `cairn mcp` server on pipes, spoken to as an MCP client speaks over stdio.
struct Mcp {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Mcp {
    /// Starts `cairn -C root mcp` and completes the `initialize` handshake.
    fn start(cairn: &Path, root: &Path, home: &Path) -> Result<Mcp, String> {
        let mut child = Command::new(cairn)
            .arg("-C")
            .arg(root)
            .arg("mcp")
            .env("CAIRN_HOME", home)
            .env_remove("CAIRN_STORE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("{}: {e}", cairn.display()))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut mcp = Mcp {
            child,
            stdin,
            stdout,
            next_id: 0,
        };
        mcp.request(
            "initialize",
            serde_json::json!({
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "hook_cost", "version": "1"},
            }),
        )?;
        mcp.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(mcp)
    }

    fn send(&mut self, message: &serde_json::Value) -> Result<(), String> {
        writeln!(self.stdin, "{message}")
            .and_then(|_| self.stdin.flush())
            .map_err(|e| format!("cairn mcp stdin: {e}"))
    }

    /// Sends a request and returns its result (an error answer, or a tool error, fails).
    fn request(
        &mut self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )?;
        let mut line = String::new();
        loop {
            line.clear();
            let n = self
                .stdout
                .read_line(&mut line)
                .map_err(|e| format!("cairn mcp stdout: {e}"))?;
            if n == 0 {
                return Err(format!(
                    "cairn mcp closed its stdout before answering {method}"
                ));
            }
            let answer: serde_json::Value = serde_json::from_str(&line)
                .map_err(|e| format!("cairn mcp wrote {line:?}: {e}"))?;
            if answer["id"] != id {
                continue; // a notification, or another answer
            }
            if answer["result"]["isError"] == true || answer.get("error").is_some() {
                return Err(format!("cairn mcp {method} failed: {answer}"));
            }
            return Ok(answer["result"].clone());
        }
    }

    /// Times one `checkpoint` tool call, in milliseconds.
    fn checkpoint(&mut self, label: &str) -> Result<f64, String> {
        let t = Instant::now();
        self.request(
            "tools/call",
            serde_json::json!({"name": "checkpoint", "arguments": {"label": label}}),
        )?;
        Ok(t.elapsed().as_secs_f64() * 1000.0)
    }

    /// Closes stdin (the end of the session) and waits for the server to exit.
    fn stop(self) -> Result<(), String> {
        let Mcp {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let status = child.wait().map_err(|e| format!("wait: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("cairn mcp exited with {status}"))
        }
    }
}

/// Starts a server, takes one checkpoint through it and stops it: the milliseconds of it all.
fn cold_checkpoint(cairn: &Path, root: &Path, home: &Path, label: &str) -> Result<f64, String> {
    let t = Instant::now();
    let mut mcp = Mcp::start(cairn, root, home)?;
    mcp.checkpoint(label)?;
    mcp.stop()?;
    Ok(t.elapsed().as_secs_f64() * 1000.0)
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
    let cairn = cli::cairn_binary(&args)?;
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
    let (mut codex_prompt, mut codex_tool) = (Vec::new(), Vec::new());
    let (mut warm, mut cold) = (Vec::new(), Vec::new());
    let mut server = Mcp::start(&cairn, &root, &home)?;
    for round in 0..runs {
        edit(&root, round * 7)?;
        snap.push(timed(&cairn, &root, &home, &["snapshot"], "")?);
        edit(&root, round * 7 + 1)?;
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
        edit(&root, round * 7 + 2)?;
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
        edit(&root, round * 7 + 5)?;
        let doc = serde_json::json!({
            "session_id": "bench-codex", "turn_id": format!("turn-{round}"), "cwd": root_s,
            "hook_event_name": "UserPromptSubmit", "prompt": format!("prompt {round}"),
        });
        codex_prompt.push(timed(
            &cairn,
            &root,
            &home,
            &["hook", "codex"],
            &doc.to_string(),
        )?);
        edit(&root, round * 7 + 6)?;
        let doc = serde_json::json!({
            "session_id": "bench-codex", "turn_id": format!("turn-{round}"), "cwd": root_s,
            "hook_event_name": "PreToolUse", "tool_name": "apply_patch",
            "tool_use_id": format!("call_bench_{round}"), "tool_input": {},
        });
        codex_tool.push(timed(
            &cairn,
            &root,
            &home,
            &["hook", "codex"],
            &doc.to_string(),
        )?);
        edit(&root, round * 7 + 3)?;
        warm.push(server.checkpoint(&format!("mcp-{round}"))?);
        edit(&root, round * 7 + 4)?;
        cold.push(cold_checkpoint(
            &cairn,
            &root,
            &home,
            &format!("mcp-cold-{round}"),
        )?);
    }
    server.stop()?;
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
        (
            "hook codex, UserPromptSubmit (entry + checkpoint)",
            &codex_prompt,
        ),
        (
            "hook codex, PreToolUse apply_patch (checkpoint)",
            &codex_tool,
        ),
        ("mcp checkpoint call, server running", &warm),
        ("mcp checkpoint, server started for it", &cold),
    ] {
        println!("{name:<56} {:>9.1} {:>11.2}x", m(xs), m(xs) / base);
    }
    Ok(())
}
