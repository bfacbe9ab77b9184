//! Claude Code's hooks (issue 20): `cairn init claude-code` and `cairn hook claude-code`, driven
//! with the hook documents Claude Code sends (its documented fields), not the real client.

use crate::Fixture;
use serde_json::{json, Value};
use std::io::Write;

/// Runs `cairn hook claude-code` with `doc` on stdin: (exit code, stdout, stderr).
pub(crate) fn hook(f: &Fixture, doc: &Value, extra: &[&str]) -> (Option<i32>, String, String) {
    hook_of(f, "claude-code", doc, extra)
}

/// Runs `cairn hook AGENT` with `doc` on stdin: (exit code, stdout, stderr).
pub(crate) fn hook_of(
    f: &Fixture,
    agent: &str,
    doc: &Value,
    extra: &[&str],
) -> (Option<i32>, String, String) {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    cmd.args(["hook", agent])
        .args(extra)
        .env("CAIRN_HOME", &f.home)
        .env_remove("CAIRN_STORE")
        .env_remove("CAIRN_THREADS_DB")
        .env_remove("CLAUDE_PROJECT_DIR")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    // A hook that exits before reading (a bad flag) closes the pipe: the write then fails with
    // EPIPE, which is that hook's behaviour to check, not the harness's failure.
    let _ = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(doc.to_string().as_bytes());
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub(crate) fn prompt(f: &Fixture, session: &str, text: &str) -> Value {
    json!({
        "session_id": session,
        "transcript_path": f.root.with_file_name("transcript.jsonl"),
        "cwd": f.root,
        "hook_event_name": "UserPromptSubmit",
        "prompt": text,
    })
}

pub(crate) fn tool(f: &Fixture, session: &str, name: &str, id: &str) -> Value {
    json!({
        "session_id": session,
        "cwd": f.root,
        "hook_event_name": "PreToolUse",
        "tool_name": name,
        "tool_use_id": id,
        "tool_input": {},
    })
}

#[test]
fn the_hook_records_prompts_with_checkpoints_and_checkpoints_before_file_tools() {
    let f = Fixture::new();
    let transcript = f.root.with_file_name("transcript.jsonl");
    std::fs::write(&transcript, "{}\n").expect("transcript");
    let (code, out, err) = hook(&f, &prompt(&f, "sess-1", "add a file"), &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.is_empty(),
        "nothing on stdout (Claude Code adds it to the prompt): {out}"
    );
    // The same delivery again is the same entry.
    assert_eq!(
        hook(&f, &prompt(&f, "sess-1", "add a file"), &[]).0,
        Some(0)
    );
    // The agent writes a file, then a Bash call deletes another.
    assert_eq!(
        hook(&f, &tool(&f, "sess-1", "Write", "toolu_w1"), &[]).0,
        Some(0)
    );
    f.write("added.txt", "by the Write tool\n");
    assert_eq!(
        hook(&f, &tool(&f, "sess-1", "Bash", "toolu_b1"), &[]).0,
        Some(0)
    );
    std::fs::remove_file(f.path("README.md")).expect("rm");
    // A tool that changes nothing takes no checkpoint.
    assert_eq!(
        hook(&f, &tool(&f, "sess-1", "Read", "toolu_r1"), &[]).0,
        Some(0)
    );
    // The next prompt (the transcript grew).
    std::fs::write(&transcript, "{}\n{}\n").expect("transcript");
    assert_eq!(
        hook(&f, &prompt(&f, "sess-1", "now the tests"), &[]).0,
        Some(0)
    );
    let log = f.json(&["thread", "log", "claude-sess-1"]);
    let entries = log["entries"].as_array().cloned().unwrap_or_default();
    assert_eq!(entries.len(), 2, "{log}");
    assert!(
        entries
            .iter()
            .all(|e| e["kind"] == "user" && e["checkpoint"].is_object()),
        "{log}"
    );
    let labels: Vec<String> = f.json(&["list"])["snapshots"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter_map(|s| s["label"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    assert!(labels.contains(&"toolu_w1".to_string()) && labels.contains(&"toolu_b1".to_string()));
    assert!(!labels.contains(&"toolu_r1".to_string()), "{labels:?}");
    // Restoring the checkpoint before the Bash call brings the deleted file back.
    f.json(&["restore", "toolu_b1", "--yes"]);
    assert_eq!(f.read("README.md").as_deref(), Some("# demo\n"));
    assert_eq!(f.read("added.txt").as_deref(), Some("by the Write tool\n"));
    // Before a compaction too, and the checkpoints are the thread's.
    let compact = json!({"session_id": "sess-1", "cwd": f.root, "hook_event_name": "PreCompact"});
    assert_eq!(hook(&f, &compact, &[]).0, Some(0));
    let listed = f.json(&["list"]).to_string();
    assert!(listed.contains("before-compaction"), "{listed}");
}

#[test]
fn a_tool_named_with_tool_is_checkpointed_too() {
    let f = Fixture::new();
    assert_eq!(hook(&f, &prompt(&f, "s2", "go"), &[]).0, Some(0));
    let t = tool(&f, "s2", "mcp__fs__write", "toolu_m1");
    assert_eq!(hook(&f, &t, &[]).0, Some(0));
    assert_eq!(hook(&f, &t, &["--tool", "mcp__fs__write"]).0, Some(0));
    let labels = f.json(&["list"]).to_string();
    assert_eq!(labels.matches("toolu_m1").count(), 1, "{labels}");
}

#[test]
fn a_failing_hook_never_blocks_the_agent() {
    let f = Fixture::new();
    let cases = [
        json!("not a hook document"),
        json!({"session_id": "s3", "hook_event_name": "UserPromptSubmit", "prompt": "x",
               "cwd": f.root.join("no-such-dir")}),
    ];
    for doc in &cases {
        let (code, out, err) = hook(&f, doc, &[]);
        assert_eq!(code, Some(1), "{doc}: {err}");
        assert!(out.is_empty());
        assert!(
            err.starts_with("cairn hook: ") && err.lines().count() == 1,
            "{err}"
        );
    }
    let (code, _, err) = hook(&f, &prompt(&f, "s3", "x"), &["--no-such-flag"]);
    assert_eq!(
        code,
        Some(1),
        "a bad flag is not the blocking code 2: {err}"
    );
}

#[test]
fn init_merges_the_hooks_idempotently_keeps_the_rest_and_remove_takes_only_them_out() {
    let f = Fixture::new();
    let settings = f.path(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().expect("dir")).expect("mkdir");
    let theirs = json!({
        "model": "opus",
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "their-linter"}]}]}
    });
    std::fs::write(&settings, theirs.to_string()).expect("write");
    let v = f.json(&["init", "claude-code"]);
    assert_eq!(
        v["added"],
        json!([
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PreCompact",
            "Stop"
        ]),
        "{v}"
    );
    let now: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).expect("read")).expect("json");
    assert_eq!(now["model"], "opus");
    assert_eq!(now["permissions"], theirs["permissions"]);
    let pre = now["hooks"]["PreToolUse"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(pre.len(), 2, "{now}");
    assert_eq!(
        pre[0], theirs["hooks"]["PreToolUse"][0],
        "their hook is kept as it was"
    );
    assert_eq!(pre[1]["matcher"], "Write|Edit|MultiEdit|NotebookEdit|Bash");
    assert!(pre[1]["hooks"][0]["command"]
        .as_str()
        .is_some_and(|c| c.ends_with(" hook claude-code")));
    let again = f.json(&["init", "claude-code"]);
    assert_eq!(again["added"], json!([]), "idempotent");
    let unchanged: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).expect("read")).expect("json");
    assert_eq!(unchanged, now);
    let removed = f.json(&["init", "claude-code", "--remove"]);
    assert_eq!(
        removed["removed"].as_array().map(Vec::len),
        Some(5),
        "{removed}"
    );
    let back: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).expect("read")).expect("json");
    assert_eq!(back, theirs, "only Cairn's hooks were taken out");
    // Settings that are not JSON are refused and left as they are.
    std::fs::write(&settings, "{ not json").expect("write");
    f.cairn(&["init", "claude-code"]).assert().code(11);
    assert_eq!(
        std::fs::read_to_string(&settings).ok().as_deref(),
        Some("{ not json")
    );
}

#[test]
fn undoing_the_last_turn_after_its_stop_hook_refuses_only_edits_made_after_the_agent_stopped() {
    let f = Fixture::new();
    f.write("README.md", "# demo\n");
    let stop = json!({"session_id": "s5", "cwd": f.root, "hook_event_name": "Stop",
                      "stop_hook_active": false});
    // Turn one.
    assert_eq!(hook(&f, &prompt(&f, "s5", "one"), &[]).0, Some(0));
    assert_eq!(hook(&f, &stop, &[]).0, Some(0));
    // Turn two: the agent's last tool call deletes README.md, then it stops.
    assert_eq!(hook(&f, &prompt(&f, "s5", "two"), &[]).0, Some(0));
    assert_eq!(
        hook(&f, &tool(&f, "s5", "Bash", "toolu_rm"), &[]).0,
        Some(0)
    );
    std::fs::remove_file(f.root.join("README.md")).expect("the tool's deletion");
    assert_eq!(hook(&f, &stop, &[]).0, Some(0));
    let listed = f.json(&["list"]).to_string();
    assert!(listed.contains("end-of-turn"), "{listed}");
    let log = f.json(&["thread", "log", "claude-s5"]);
    let second = log["entries"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["text"] == "two"))
        .expect("the second prompt")
        .clone();
    let before = second["parent_id"]
        .as_str()
        .expect("its parent")
        .to_string();

    // Someone edits a file after the agent stopped: that is refused (the default for files).
    f.write("mine.txt", "the user's\n");
    let refused = f
        .cairn(&["--json", "rewind", "claude-s5", &before, "--files", "--yes"])
        .output()
        .expect("run");
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("mine.txt"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    // The turn's own edit is not someone else's: without the user's file, the undo goes
    // through with the default drift rule and brings README.md back.
    std::fs::remove_file(f.root.join("mine.txt")).expect("take it back");
    let undone = f.json(&["rewind", "claude-s5", &before, "--files", "--yes"]);
    assert_eq!(f.read("README.md").as_deref(), Some("# demo\n"), "{undone}");
}

/// Writes `.claude/cairn.json` as a repository would (not through `cairn init`): one
/// `on_rewind` command that creates `marker` (outside the workspace). Issue 53.
pub(crate) fn repository_on_rewind(f: &Fixture, marker: &std::path::Path) {
    let cmd = format!("touch '{}'", marker.display());
    f.write(
        ".claude/cairn.json",
        &json!({ "on_rewind": [{ "command": cmd, "timeout": 60 }] }).to_string(),
    );
}

/// Appends a user message to thread `chat` (made on first use) and returns its entry id; the
/// first one is what [`rewind_chat`] rewinds to. Issue 53.
pub(crate) fn message(f: &Fixture, text: &str) -> String {
    if f.cairn(&["thread", "log", "chat"])
        .output()
        .expect("run")
        .status
        .code()
        != Some(0)
    {
        f.json(&["thread", "new", "--id", "chat"]);
    }
    f.json(&["thread", "append", "chat", "--kind", "user", "--text", text])["entry"]["id"]
        .as_str()
        .expect("an entry id")
        .to_string()
}

/// `cairn rewind chat FIRST` (the conversation only, as a person types it) after a new
/// message, with a HOME of its own (no user-level cairn.json): (stdout, stderr). Issue 53.
fn rewind_chat(f: &Fixture, first: &str, text: &str) -> (String, String) {
    message(f, text);
    let home = f.root.with_file_name("user-home");
    std::fs::create_dir_all(&home).expect("mkdir");
    let out = f
        .cairn(&["rewind", "chat", first])
        .env("HOME", &home)
        .output()
        .expect("run");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    (stdout, stderr)
}

#[test]
fn a_repository_cairn_json_runs_nothing_on_rewind_until_its_exact_content_is_trusted() {
    // Issue 53: a cloned repository's .claude/cairn.json ran its commands on a plain rewind.
    let f = Fixture::new();
    let marker = f.root.with_file_name("ran");
    repository_on_rewind(&f, &marker);
    let first = message(&f, "one");
    let (out, err) = rewind_chat(&f, &first, "two");
    assert!(
        !crate::exists(&marker),
        "an untrusted on_rewind command ran"
    );
    let config = std::fs::canonicalize(f.path(".claude/cairn.json")).expect("canonical");
    let said: Vec<&str> = out.lines().filter(|l| l.contains("were not run")).collect();
    assert_eq!(said.len(), 1, "one line says so: {out}{err}");
    assert!(
        said[0].contains(&config.display().to_string())
            && said[0].contains(&format!("cairn trust {}", config.display())),
        "{out}"
    );

    // Trusted by hand: `cairn trust` shows the command, and the next rewind runs it.
    let trusted = f.cairn(&["trust"]).output().expect("run");
    assert!(trusted.status.success());
    assert!(
        String::from_utf8_lossy(&trusted.stdout).contains(&format!("touch '{}'", marker.display())),
        "it shows what it trusts: {}",
        String::from_utf8_lossy(&trusted.stdout)
    );
    let (out, _) = rewind_chat(&f, &first, "three");
    assert!(crate::exists(&marker), "the trusted command ran: {out}");
    assert!(!out.contains("were not run"), "{out}");

    // Changed afterwards (an agent, a git pull): not run again until trusted again.
    std::fs::remove_file(&marker).expect("rm");
    let marker2 = f.root.with_file_name("ran-changed");
    repository_on_rewind(&f, &marker2);
    let (out, _) = rewind_chat(&f, &first, "four");
    assert!(!crate::exists(&marker2) && !crate::exists(&marker), "{out}");
    assert!(out.contains("were not run"), "{out}");
    f.json(&["trust", &config.display().to_string()]);
    rewind_chat(&f, &first, "five");
    assert!(crate::exists(&marker2), "trusted again, it runs");

    // Revoked: it stops running.
    std::fs::remove_file(&marker2).expect("rm");
    let revoked = f.json(&["trust", "--revoke"]);
    assert_eq!(revoked["trusted"], false, "{revoked}");
    let (out, _) = rewind_chat(&f, &first, "six");
    assert!(!crate::exists(&marker2), "{out}");
}

#[test]
fn init_on_rewind_trusts_what_it_writes_but_not_commands_a_repository_put_there() {
    // Issue 53: the user typing `cairn init claude-code --on-rewind CMD` vouches for CMD.
    let f = Fixture::new();
    let marker = f.root.with_file_name("ran");
    let cmd = format!("touch '{}'", marker.display());
    let v = f.json(&["init", "claude-code", "--on-rewind", &cmd]);
    assert_eq!(v["trusted"], true, "{v}");
    let first = message(&f, "one");
    rewind_chat(&f, &first, "two");
    assert!(crate::exists(&marker), "the command init wrote ran");

    // A repository's untrusted command stays untrusted when the user adds one of their own.
    let g = Fixture::new();
    let planted = g.root.with_file_name("planted");
    repository_on_rewind(&g, &planted);
    let mine = g.root.with_file_name("mine");
    let v = g.json(&[
        "init",
        "claude-code",
        "--on-rewind",
        &format!("touch '{}'", mine.display()),
    ]);
    assert_eq!(v["trusted"], false, "{v}");
    let first = message(&g, "one");
    let (out, _) = rewind_chat(&g, &first, "two");
    assert!(!crate::exists(&planted) && !crate::exists(&mine), "{out}");
    assert!(out.contains("cairn trust"), "{out}");
}

#[test]
fn the_users_own_cairn_json_runs_only_while_no_one_else_can_write_it() {
    // Issue 53: ~/.claude/cairn.json is the user's file, outside the workspace: trusted
    // implicitly while it is theirs and writable by no one else.
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    let home = f.root.with_file_name("user-home");
    let marker = f.root.with_file_name("ran");
    let user_config = home.join(".claude/cairn.json");
    std::fs::create_dir_all(home.join(".claude")).expect("mkdir");
    std::fs::write(
        &user_config,
        json!({ "on_rewind": [{ "command": format!("touch '{}'", marker.display()) }] })
            .to_string(),
    )
    .expect("write");
    std::fs::set_permissions(&user_config, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let first = message(&f, "one");
    rewind_chat(&f, &first, "two");
    assert!(crate::exists(&marker), "the user's own file runs");

    std::fs::remove_file(&marker).expect("rm");
    std::fs::set_permissions(&user_config, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let (out, _) = rewind_chat(&f, &first, "three");
    assert!(
        !crate::exists(&marker),
        "writable by others, it is not trusted: {out}"
    );
    assert!(out.contains("were not run"), "{out}");
}

#[test]
fn a_workspace_cairn_json_leading_to_another_workspaces_trusted_file_runs_nothing() {
    // Issue 53: a repository whose .claude links to a workspace the user trusted must not run
    // that workspace's commands here (a relative `./script` would be this repository's).
    let trusted = Fixture::new();
    let marker = trusted.root.with_file_name("ran");
    repository_on_rewind(&trusted, &marker);
    let f = Fixture::new();
    // Trusted in f's data directory, where f's rewind looks.
    let out = f.cairn_in(&trusted.root, &["trust"]).output().expect("run");
    assert!(out.status.success());
    std::os::unix::fs::symlink(trusted.path(".claude"), f.path(".claude")).expect("symlink");
    let first = message(&f, "one");
    let (out, _) = rewind_chat(&f, &first, "two");
    assert!(!crate::exists(&marker), "{out}");
    assert!(out.contains("leads out of the workspace"), "{out}");
}
