//! `cairn doctor` (issue 54): each finding that would leave Claude Code without checkpoints, its
//! fix, and the finding gone once fixed. Claude Code itself is not run here (scripts/
//! test-claude-code runs it with its hooks off); its transcript lines are copied from a real one
//! (Claude Code 2.1.197), trimmed.

use crate::Fixture;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The exit code of a failed check: VALIDATION.
const FAILED: i32 = 13;

/// A user's home of the fixture's own (no settings, no transcripts of the real user's).
fn user_home(f: &Fixture) -> PathBuf {
    let home = f.root.with_file_name("user-home");
    std::fs::create_dir_all(&home).expect("mkdir");
    home
}

/// `cairn -C ROOT ARGS` with the fixture's HOME.
fn cairn(f: &Fixture, args: &[&str]) -> assert_cmd::Command {
    let mut cmd = f.cairn(args);
    cmd.env("HOME", user_home(f))
        .env_remove("CLAUDE_CONFIG_DIR");
    cmd
}

/// `cairn --json doctor`: its exit code and its report.
fn doctor(f: &Fixture) -> (i32, Value) {
    let out = cairn(f, &["--json", "doctor"]).output().expect("run cairn");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let code = out.status.code().expect("an exit code");
    assert_eq!(code == 0, v["ok"] == true, "{v}");
    for finding in v["findings"].as_array().expect("findings") {
        for key in ["check", "ok", "message", "fix"] {
            assert!(finding.get(key).is_some(), "{key} missing in {finding}");
        }
    }
    (code, v)
}

/// The findings of a report that `keep` keeps.
fn findings(v: &Value, keep: impl Fn(&Value) -> bool) -> Vec<&Value> {
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| keep(f))
        .collect()
}

/// The finding of `check` (there is one per check).
fn finding(v: &Value, check: &str) -> Value {
    let all = findings(v, |f| f["check"] == check);
    assert_eq!(all.len(), 1, "one {check} finding in {v}");
    all[0].clone()
}

/// `cairn doctor` with `check` failing: the report and that finding.
fn failing(f: &Fixture, check: &str) -> (Value, Value) {
    let (code, v) = doctor(f);
    assert_eq!(code, FAILED, "{v}");
    let found = finding(&v, check);
    assert_eq!(found["ok"], false, "{v}");
    (v, found)
}

/// Asserts that the finding's `key` (message, fix) contains `text`.
fn says(finding: &Value, key: &str, text: &str) {
    assert!(
        finding[key].as_str().is_some_and(|m| m.contains(text)),
        "{key} without {text:?}: {finding}"
    );
}

fn init(f: &Fixture, extra: &[&str]) {
    cairn(f, &[&["init", "claude-code"], extra].concat())
        .assert()
        .success();
}

fn settings(f: &Fixture) -> Value {
    serde_json::from_str(&std::fs::read_to_string(f.path(".claude/settings.json")).expect("read"))
        .expect("JSON")
}

#[test]
fn without_cairns_hooks_doctor_says_to_run_init_and_passes_once_it_ran() {
    // Issue 54.
    let f = Fixture::new();
    let (_, installed) = failing(&f, "hooks-installed");
    says(
        &installed,
        "message",
        "UserPromptSubmit, PreToolUse, PreCompact, Stop",
    );
    says(&installed, "fix", "cairn init claude-code");
    let project = std::fs::canonicalize(&f.root)
        .expect("root")
        .join(".claude/settings.json");
    assert_eq!(installed["path"], json!(project.to_str()));
    // People read one line per finding, the fix on it.
    let out = cairn(&f, &["doctor"]).output().expect("run");
    assert_eq!(out.status.code(), Some(FAILED));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("FAIL  hooks-installed: ")
                && l.contains("to fix: run `cairn init claude-code`")),
        "{text}"
    );

    init(&f, &[]);
    let (code, v) = doctor(&f);
    assert_eq!(code, 0, "{v}");
    assert_eq!(finding(&v, "hooks-installed")["ok"], true, "{v}");
    assert_eq!(finding(&v, "hooks-command")["ok"], true, "{v}");
}

#[test]
fn disable_all_hooks_in_a_settings_file_is_found_and_named_until_it_is_removed() {
    // Issue 54.
    let f = Fixture::new();
    init(&f, &[]);
    f.write(
        ".claude/settings.local.json",
        r#"{"disableAllHooks": true}"#,
    );
    let local = std::fs::canonicalize(f.path(".claude/settings.local.json")).expect("path");
    let (_, disabled) = failing(&f, "hooks-disabled");
    assert_eq!(disabled["path"], json!(local.to_str()), "{disabled}");
    says(&disabled, "fix", "remove \"disableAllHooks\"");
    says(&disabled, "fix", local.to_str().expect("utf-8"));
    // The user's settings too.
    let user = user_home(&f).join(".claude/settings.json");
    std::fs::create_dir_all(user.parent().expect("dir")).expect("mkdir");
    std::fs::write(&user, r#"{"disableAllHooks": true}"#).expect("write");
    std::fs::write(&local, r#"{"disableAllHooks": false}"#).expect("write");
    let (code, v) = doctor(&f);
    assert_eq!(code, FAILED, "{v}");
    assert_eq!(finding(&v, "hooks-disabled")["path"], json!(user.to_str()));

    std::fs::write(&user, "{}").expect("write");
    let (code, v) = doctor(&f);
    assert_eq!(code, 0, "{v}");
    assert_eq!(finding(&v, "hooks-disabled")["ok"], true, "{v}");
}

#[test]
fn a_hook_command_whose_cairn_is_gone_is_found_until_init_runs_again() {
    // Issue 54.
    let f = Fixture::new();
    init(&f, &[]);
    let gone = f.root.with_file_name("old bin").join("cairn");
    let mut s = settings(&f);
    for event in ["UserPromptSubmit", "PreToolUse", "PreCompact", "Stop"] {
        s["hooks"][event][0]["hooks"][0]["command"] =
            json!(format!("'{}' hook claude-code", gone.display()));
    }
    std::fs::write(f.path(".claude/settings.json"), s.to_string()).expect("write");
    let (v, command) = failing(&f, "hooks-command");
    says(
        &command,
        "message",
        &format!("{} does not exist", gone.display()),
    );
    says(&command, "fix", "cairn init claude-code");
    // Installed still: only its command is wrong.
    assert_eq!(finding(&v, "hooks-installed")["ok"], true, "{v}");

    init(&f, &[]);
    let (code, v) = doctor(&f);
    assert_eq!(code, 0, "{v}");
    let command = finding(&v, "hooks-command");
    let exe = assert_cmd::cargo::cargo_bin("cairn");
    says(&command, "message", exe.to_str().expect("utf-8"));
}

#[test]
fn hooks_that_start_a_watcher_are_found_without_one_until_a_hook_starts_it() {
    // Issue 54.
    let f = Fixture::new();
    init(&f, &["--watch"]);
    let (_, watcher) = failing(&f, "watcher");
    says(&watcher, "fix", "cairn watch");

    let (code, _, err) =
        crate::agents::hook(&f, &crate::agents::prompt(&f, "s1", "first"), &["--watch"]);
    assert_eq!(code, Some(0), "{err}");
    let started = Instant::now();
    loop {
        let (code, v) = doctor(&f);
        if code == 0 {
            assert_eq!(finding(&v, "watcher")["ok"], true, "{v}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the hook's watcher never answered: {v}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    f.json(&["watch", "--stop"]);
    // Without --watch in the hooks, no watcher is asked for.
    init(&f, &[]);
    let (code, v) = doctor(&f);
    assert_eq!(code, 0, "{v}");
    assert!(findings(&v, |x| x["check"] == "watcher").is_empty(), "{v}");
}

#[test]
fn a_store_that_cannot_be_made_is_found_until_the_way_is_clear() {
    // Issue 54.
    let f = Fixture::new();
    init(&f, &[]);
    // The store's place is under a file.
    let blocker = f.root.with_file_name("not-a-dir");
    std::fs::write(&blocker, "x").expect("write");
    let store = blocker.join("store");
    let run = |f: &Fixture| {
        let out = cairn(
            f,
            &[
                "--json",
                "--store",
                store.to_str().expect("utf-8"),
                "doctor",
            ],
        )
        .output()
        .expect("run");
        let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        (out.status.code(), v)
    };
    let (code, v) = run(&f);
    assert_eq!(code, Some(FAILED), "{v}");
    let writable = finding(&v, "store-writable");
    assert_eq!(writable["ok"], false, "{v}");
    says(&writable, "message", "cannot be made");
    says(&writable, "message", "is not a directory");
    assert_eq!(writable["path"], json!(blocker.to_str()), "{writable}");

    std::fs::remove_file(&blocker).expect("rm");
    let (code, v) = run(&f);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(finding(&v, "store-writable")["ok"], true, "{v}");
    // The check left nothing behind: no store was made.
    assert!(!crate::exists(&store));
}

/// Claude Code's directory of the project's transcripts: its path with every character but
/// ASCII letters and digits turned into `-`.
fn transcripts_dir(f: &Fixture) -> PathBuf {
    let root = std::fs::canonicalize(&f.root).expect("root");
    let name: String = root
        .to_str()
        .expect("utf-8")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    user_home(f).join(".claude/projects").join(name)
}

/// A prompt line of a transcript, as Claude Code 2.1.197 writes it (trimmed).
fn prompt_line(session: &str, uuid: &str, prompt_id: &str, at: &str, text: &str) -> Value {
    json!({
        "parentUuid": null, "isSidechain": false, "promptId": prompt_id, "type": "user",
        "message": {"role": "user", "content": text}, "uuid": uuid, "timestamp": at,
        "permissionMode": "bypassPermissions", "promptSource": "sdk", "userType": "external",
        "entrypoint": "sdk-cli", "cwd": "/work/exp/w/project", "sessionId": session,
        "version": "2.1.197"
    })
}

/// A transcript: a prompt recorded by the hook, its tool call and result, a meta line, a prompt
/// typed with the hooks off, and one typed before the hooks were installed.
fn transcript(session: &str) -> Vec<Value> {
    let at = "2026-12-07T04:40:43.993Z";
    vec![
        json!({"type": "queue-operation", "operation": "enqueue", "timestamp": at, "sessionId": session, "content": "first prompt"}),
        prompt_line(
            session,
            "u-old",
            "p-old",
            "2000-01-01T00:00:00.000Z",
            "typed before the hooks",
        ),
        prompt_line(session, "u-1", "p-1", at, "first prompt"),
        json!({"parentUuid": "u-1", "isSidechain": false, "type": "assistant", "uuid": "a-1", "timestamp": at, "sessionId": session,
               "message": {"id": "msg_fake_0002", "type": "message", "role": "assistant", "content": [
                   {"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {"file_path": "notes.txt", "content": "hello\n"}}]}}),
        json!({"parentUuid": "a-1", "isSidechain": false, "promptId": "p-1", "type": "user", "uuid": "r-1", "timestamp": at, "sessionId": session,
               "message": {"role": "user", "content": [{"tool_use_id": "toolu_1", "type": "tool_result", "content": "File created successfully"}]},
               "toolUseResult": {"type": "create", "filePath": "notes.txt"}}),
        json!({"parentUuid": "r-1", "isSidechain": false, "type": "user", "isMeta": true, "uuid": "m-1", "timestamp": at, "sessionId": session,
               "message": {"role": "user", "content": "<local-command-caveat>Caveat</local-command-caveat>"}}),
        prompt_line(session, "u-2", "p-2", at, "second prompt, hooks off"),
        json!({"type": "last-prompt", "lastPrompt": "second prompt, hooks off", "leafUuid": "u-2", "sessionId": session}),
    ]
}

/// Dates the settings file holding Cairn's hooks back to 2001: the fixtures' prompts of 2026
/// were typed with the hooks installed and count; [`transcript`]'s one of 2000 does not.
fn installed_long_ago(f: &Fixture) {
    std::fs::File::options()
        .write(true)
        .open(f.path(".claude/settings.json"))
        .expect("open")
        .set_modified(std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000))
        .expect("set mtime");
}

fn write_jsonl(path: &Path, lines: &[Value]) {
    std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).expect("write");
}

#[test]
fn a_transcript_prompt_without_an_entry_in_a_thread_is_found_until_a_hook_records_it() {
    // Issue 54: Claude Code run with `--bare` (or settings not loaded) runs no hook; its
    // transcript keeps the prompt, Cairn's thread does not.
    let f = Fixture::new();
    init(&f, &[]);
    // Installed long ago: the prompt typed before is not counted (only that one).
    installed_long_ago(&f);
    let session = "e97f135b-4519-4035-ac34-fb34c623e727";
    let (code, _, err) =
        crate::agents::hook(&f, &crate::agents::prompt(&f, session, "first prompt"), &[]);
    assert_eq!(code, Some(0), "{err}");
    let dir = transcripts_dir(&f);
    let path = dir.join(format!("{session}.jsonl"));
    write_jsonl(&path, &transcript(session));
    // A session forked from it (`--fork-session`) repeats its first prompt under its own id:
    // recorded in the first session's thread, so not missing.
    let fork = "11111111-2222-4333-8444-555555555555";
    write_jsonl(
        &dir.join(format!("{fork}.jsonl")),
        &[prompt_line(
            fork,
            "u-1",
            "p-1",
            "2026-12-07T04:40:43.993Z",
            "first prompt",
        )],
    );

    let (v, prompts) = failing(&f, "transcript-prompts");
    assert_eq!(
        prompts["message"],
        json!(format!(
            "1 prompt of Claude Code session {session} (transcript {}) has no checkpoint: \
             Cairn's hooks did not run (`claude --bare` and `--settings` files that are not \
             loaded skip them)",
            path.display()
        ))
    );
    assert_eq!(prompts["path"], json!(path.to_str()));
    says(&prompts, "fix", "without `--bare`");
    // Every other check passes: this is the only finding.
    assert_eq!(findings(&v, |x| x["ok"] == false).len(), 1, "{v}");

    // Recorded by a hook that names the prompt (`prompt_id`, as Claude Code sends it).
    let record = |prompt_id: &str| {
        let mut doc = crate::agents::prompt(&f, session, "second prompt, hooks off");
        doc["prompt_id"] = json!(prompt_id);
        doc["transcript_path"] = json!(path);
        let (code, _, err) = crate::agents::hook(&f, &doc, &[]);
        assert_eq!(code, Some(0), "{err}");
    };
    record("p-2");
    let (code, v) = doctor(&f);
    assert_eq!(code, 0, "{v}");
    assert_eq!(finding(&v, "transcript-prompts")["ok"], true, "{v}");

    // The same words typed again are another prompt: an entry that names p-2 is not p-3's.
    let mut lines = transcript(session);
    lines.push(prompt_line(
        session,
        "u-3",
        "p-3",
        "2026-12-07T04:41:00.000Z",
        "second prompt, hooks off",
    ));
    write_jsonl(&path, &lines);
    let (_, prompts) = failing(&f, "transcript-prompts");
    says(&prompts, "message", "1 prompt of Claude Code session");
    record("p-3");
    let (code, v) = doctor(&f);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn a_prompt_whose_line_the_transcript_lost_is_found_by_its_last_prompt_line_until_a_hook_records_it(
) {
    // Claude Code 2.1.197 run with `--bare` on a busy machine wrote the session's file without
    // its first lines, the prompt's among them: the model's answer (its parent missing) and the
    // `last-prompt` lines are all there is (crates/agents/tests/data holds one it wrote).
    let f = Fixture::new();
    init(&f, &[]);
    installed_long_ago(&f);
    let session = "d16bbf71-8a05-4662-b338-be6d25cd987e";
    let typed = format!("{}\nand the rest of it", "word ".repeat(50));
    // As Claude Code keeps it for its list of sessions: on one line, cut at 200 characters.
    let listed = format!("{}\u{2026}", ["word"; 40].join(" "));
    let path = transcripts_dir(&f).join(format!("{session}.jsonl"));
    write_jsonl(
        &path,
        &[
            json!({"type": "last-prompt", "leafUuid": "a-1", "sessionId": session}),
            json!({"parentUuid": "u-lost", "isSidechain": false, "type": "assistant", "uuid": "a-1",
                   "timestamp": "2026-12-07T04:40:44.000Z", "sessionId": session,
                   "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}}),
            json!({"type": "last-prompt", "lastPrompt": listed, "leafUuid": "a-1", "sessionId": session}),
        ],
    );
    let (_, prompts) = failing(&f, "transcript-prompts");
    says(
        &prompts,
        "message",
        &format!("1 prompt of Claude Code session {session}"),
    );

    // Another prompt's entry does not stand for it.
    let (code, _, err) =
        crate::agents::hook(&f, &crate::agents::prompt(&f, session, "word word"), &[]);
    assert_eq!(code, Some(0), "{err}");
    failing(&f, "transcript-prompts");
    // Recorded by a hook, whole: the transcript's shortened text is that prompt's.
    let (code, _, err) = crate::agents::hook(&f, &crate::agents::prompt(&f, session, &typed), &[]);
    assert_eq!(code, Some(0), "{err}");
    let (code, v) = doctor(&f);
    assert_eq!(code, 0, "{v}");
    says(
        &finding(&v, "transcript-prompts"),
        "message",
        "(1 prompt read)",
    );
}

#[test]
fn the_session_start_hook_names_a_store_that_cannot_be_made_and_cairn_doctor() {
    // Issue 54: the hook runs the cheap checks and tells Claude Code's user in one line.
    let f = Fixture::new();
    init(&f, &[]);
    let start = json!({
        "session_id": "s1",
        "cwd": f.root,
        "hook_event_name": "SessionStart",
        "source": "startup",
    });
    // Cairn's data directory is a file: the store cannot be made there.
    std::fs::write(&f.home, "x").expect("write");
    let (code, out, err) = crate::agents::hook(&f, &start, &[]);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    says(&v, "systemMessage", "cannot be made");
    says(&v, "systemMessage", "`cairn doctor`");
    assert_eq!(out.lines().count(), 1, "{out}");

    std::fs::remove_file(&f.home).expect("rm");
    let (code, out, err) = crate::agents::hook(&f, &start, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "", "nothing to say when all is well");
}
