//! The whole rewind of a Claude Code thread (issue 54): `cairn rewind` prepares where Claude's
//! conversation continues and keeps it in its journal before the files change; `cairn resume`
//! runs it; the continued session records into the same thread; a rewind killed between its
//! file half and its conversation half is finished by `cairn recover` with the same command.
//! The hooks are driven with the documents Claude Code sends, over a transcript the real
//! Claude Code 2.1.197 wrote (crates/agents/tests/data); the real client runs in
//! scripts/test-claude-code.

use crate::agents::hook;
use crate::Fixture;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const FIRST: &str = "38a2cfb1-c739-481c-87be-a2aaf2f1aebd";
const SECOND: &str = "3297a2da-d41f-4ecb-b327-58618dc03a6b";
/// The last message of turn one in that transcript.
const END_OF_ONE: &str = "24d6161b-b108-4fd7-88ed-cef7e50fa2e4";
const SESSION: &str = "s1";

fn transcript(f: &Fixture) -> PathBuf {
    let to = f.root.with_file_name("transcript.jsonl");
    if !to.exists() {
        let from = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../agents/tests/data/claude-2.1.197-rewound.jsonl");
        std::fs::copy(from, &to).expect("copy the transcript");
    }
    to
}

fn event(f: &Fixture, session: &str, name: &str, extra: Value) -> Value {
    let mut doc = json!({
        "session_id": session,
        "transcript_path": transcript(f),
        "cwd": f.root,
        "hook_event_name": name,
    });
    if let (Some(d), Some(e)) = (doc.as_object_mut(), extra.as_object()) {
        d.extend(e.clone());
    }
    doc
}

fn run_hook(f: &Fixture, doc: &Value) -> String {
    let (code, out, err) = hook(f, doc, &[]);
    assert_eq!(code, Some(0), "hook {doc}: {err}");
    out
}

/// One turn of `session`: the prompt `text` (Claude's `prompt_id` `id`), a.txt written as
/// `leaves`, the end of the turn; what the Stop hook printed.
fn turn(f: &Fixture, session: &str, text: &str, id: &str, leaves: &str) -> String {
    let prompt = json!({"prompt": text, "prompt_id": id});
    run_hook(f, &event(f, session, "UserPromptSubmit", prompt));
    f.write("a.txt", leaves);
    run_hook(f, &event(f, session, "Stop", json!({})))
}

/// Two turns of session `s1`: FIRST (a.txt becomes "two"), SECOND (a.txt becomes "three");
/// returns the entry id of FIRST.
fn two_turns(f: &Fixture) -> String {
    f.write("a.txt", "one");
    turn(f, SESSION, "FIRST", FIRST, "two");
    turn(f, SESSION, "SECOND", SECOND, "three");
    let log = f.json(&["thread", "log", "claude-s1"]);
    let first = log["entries"][0]["id"]
        .as_str()
        .expect("an entry")
        .to_string();
    assert_eq!(
        log["entries"][0]["metadata"]["conversation"]["prompt_id"],
        FIRST
    );
    first
}

/// A program standing in for `claude`: writes its directory and arguments, one a line.
fn fake_claude(f: &Fixture) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt as _;
    let script = f.root.with_file_name("claude");
    let out = f.root.with_file_name("claude.args");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$PWD\" \"$@\" > '{}'\n",
            out.display()
        ),
    )
    .expect("write");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (script, out)
}

/// Runs `cairn resume THREAD -- ARGS` with the fake `claude`: the directory and arguments it
/// was given.
fn resume(f: &Fixture, thread: &str, args: &[&str]) -> Vec<String> {
    let (script, out) = fake_claude(f);
    let _ = std::fs::remove_file(&out);
    let run = f
        .cairn(&[&["resume", thread, "--"], args].concat())
        .env("CAIRN_CLAUDE", &script)
        .output()
        .expect("run");
    assert!(
        run.status.success(),
        "resume: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    std::fs::read_to_string(&out)
        .expect("the fake claude ran")
        .lines()
        .map(str::to_string)
        .collect()
}

/// The texts of a `thread log`'s entries.
fn texts_of(log: &Value) -> Vec<String> {
    log["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["text"].as_str().map(str::to_string))
        .collect()
}

fn argv(v: &Value) -> Vec<String> {
    v["argv"]
        .as_array()
        .expect("an argv")
        .iter()
        .map(|a| a.as_str().expect("a string").to_string())
        .collect()
}

#[test]
fn a_rewind_of_a_claude_thread_prepares_the_conversation_and_resume_runs_it() {
    let f = Fixture::new();
    let first = two_turns(&f);
    let r = f.json(&["rewind", "claude-s1", &first, "--files", "--yes"]);
    assert_eq!(
        f.read("a.txt").as_deref(),
        Some("two"),
        "the end of turn one"
    );
    let c = &r["continuation"];
    let new = c["session_id"].as_str().expect("a new session").to_string();
    assert_eq!(c["from_session"], SESSION);
    assert_eq!(c["at"], END_OF_ONE);
    assert_eq!(
        argv(c),
        [
            "claude",
            "--resume",
            SESSION,
            "--resume-session-at",
            END_OF_ONE,
            "--fork-session",
            "--session-id",
            &new
        ]
    );
    // `cairn resume` runs it in the workspace, with the arguments after `--`.
    let ran = resume(&f, "claude-s1", &["-p", "go on"]);
    let mut want = vec![f.root.display().to_string()];
    want.extend(argv(c).into_iter().skip(1));
    want.extend(["-p".to_string(), "go on".to_string()]);
    assert_eq!(ran, want);
    // The continued session's prompt lands in the same thread, found by its new name.
    run_hook(
        &f,
        &event(
            &f,
            &new,
            "UserPromptSubmit",
            json!({"prompt": "THIRD", "prompt_id": "p3"}),
        ),
    );
    let log = f.json(&["thread", "log", &format!("claude-{new}")]);
    assert_eq!(log["thread"]["id"], "claude-s1", "{log}");
    let texts = texts_of(&log);
    assert_eq!(texts, ["FIRST", "THIRD"]);
    let list = f.json(&["thread", "list"]);
    assert_eq!(list["threads"].as_array().map(Vec::len), Some(1), "{list}");
    // Once the new session has prompts, resume continues it as it stands.
    assert_eq!(
        resume(&f, "claude-s1", &[])[1..],
        ["--resume".to_string(), new]
    );
}

#[test]
fn the_rewind_says_what_came_back_and_what_cannot() {
    let f = Fixture::new();
    let first = two_turns(&f);
    let out = f
        .cairn(&["rewind", "claude-s1", &first, "--files", "--yes"])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("Claude Code's conversation: continues from message"),
        "{text}"
    );
    assert!(
        text.contains("`cairn resume claude-s1` runs `claude --resume s1"),
        "{text}"
    );
    assert!(text.contains("not undone:"), "{text}");
}

#[test]
fn resume_of_a_thread_no_agent_wrote_says_there_is_nothing_to_continue() {
    let f = Fixture::new();
    f.json(&["thread", "new", "--id", "plain"]);
    let out = f.cairn(&["resume", "plain"]).output().expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not written by an agent"), "{err}");
}

/// The child of the crash test: the rewind `cairn rewind claude-s1 FIRST --files` makes, its
/// conversation half prepared and written to `CAIRN_CRASH_OUT` first, through a workspace that
/// kills the process once the files are restored, before the conversation half is recorded.
#[test]
fn crash_child() {
    let Some((spec, ws, threads)) = crash_child_open("CAIRN_RESUME_CHILD") else {
        return;
    };
    let thread = cairn_rewind::ThreadId::new("claude-s1");
    let to = cairn_rewind::EntryId::new(spec["to"].as_str().expect("to"));
    let files: std::sync::Arc<dyn cairn_rewind::Files> = ws.clone();
    let mut options = cairn_rewind::RewindOptions {
        files: Some(true),
        workspace: Some(files),
        dry_run: true,
        ..Default::default()
    };
    let plan = threads.rewind(&thread, &to, &options).expect("plan");
    let cut: Vec<_> = plan
        .conversation
        .cut
        .iter()
        .map(|id| threads.entry(id).expect("entry"))
        .collect();
    let kept = threads.entries(&thread, false).expect("entries");
    let (cont, names) = cairn_agents::prepare(&cairn_agents::claude::ClaudeCode, &cut, &kept)
        .expect("prepare")
        .expect("a place");
    let data = serde_json::to_value(&cont).expect("json");
    std::fs::write(
        spec["out"].as_str().expect("out"),
        serde_json::to_vec(&data).expect("json"),
    )
    .expect("write");
    options.dry_run = false;
    options.continuation = Some(cairn_rewind::Continuation { data, names });
    options.workspace = Some(std::sync::Arc::new(Dies { ws }));
    let _ = threads.rewind(&thread, &to, &options);
    unreachable!("the child dies once the files are restored");
}

/// A crash child's spec (JSON in the environment variable `var`, with the workspace's `root`),
/// its workspace and its thread database; `None` when the test runs as itself.
pub(crate) fn crash_child_open(
    var: &str,
) -> Option<(
    Value,
    std::sync::Arc<cairn_restore::Workspace>,
    cairn_rewind::Threads,
)> {
    let spec: Value =
        serde_json::from_str(&std::env::var_os(var)?.to_string_lossy()).expect("spec");
    let root = PathBuf::from(spec["root"].as_str().expect("root"));
    let ws = std::sync::Arc::new(
        cairn_restore::Workspace::open(&root, Default::default()).expect("workspace"),
    );
    let threads = cairn_rewind::Threads::open_in_store(
        ws.store().path(),
        cairn_rewind::ThreadsOptions::default(),
    )
    .expect("threads");
    Some((spec, ws, threads))
}

/// A workspace whose restore kills the process once the files are done (also the server
/// killed mid-rewind of `serve.rs`, issue 59).
pub(crate) struct Dies {
    pub(crate) ws: std::sync::Arc<cairn_restore::Workspace>,
}

impl cairn_rewind::Files for Dies {
    fn id(&self) -> &str {
        self.ws.id()
    }
    fn root(&self) -> &Path {
        self.ws.root()
    }
    fn store(&self) -> Option<&cairn_store::Store> {
        Some(self.ws.store())
    }
    fn checkpoint(
        &self,
        r: &cairn_rewind::CheckpointRequest,
    ) -> Result<cairn_store::SnapshotId, cairn_rewind::FilesError> {
        cairn_rewind::Files::checkpoint(&*self.ws, r)
    }
    fn keeps(&self, s: &cairn_store::SnapshotId) -> Result<bool, cairn_rewind::FilesError> {
        cairn_rewind::Files::keeps(&*self.ws, s)
    }
    fn plan(
        &self,
        s: &cairn_store::SnapshotId,
    ) -> Result<cairn_rewind::FilePlan, cairn_rewind::FilesError> {
        cairn_rewind::Files::plan(&*self.ws, s)
    }
    fn plan_scoped(
        &self,
        s: &cairn_store::SnapshotId,
        scope: &cairn_restore::PlanOptions,
    ) -> Result<cairn_rewind::FilePlan, cairn_rewind::FilesError> {
        cairn_rewind::Files::plan_scoped(&*self.ws, s, scope)
    }
    fn apply(
        &self,
        plan: &cairn_rewind::FilePlan,
        key: &str,
    ) -> Result<cairn_rewind::FileOutcome, cairn_rewind::FilesError> {
        let _ = cairn_rewind::Files::apply(&*self.ws, plan, key);
        std::process::abort();
    }
    fn finished(
        &self,
        key: &str,
        t: &cairn_store::SnapshotId,
    ) -> Result<Option<cairn_rewind::FileOutcome>, cairn_rewind::FilesError> {
        cairn_rewind::Files::finished(&*self.ws, key, t)
    }
}

#[test]
fn a_rewind_killed_between_the_files_and_the_conversation_is_finished_by_recover_with_the_same_resume(
) {
    let f = Fixture::new();
    let first = two_turns(&f);
    let out = f.root.with_file_name("continuation.json");
    let spec = json!({ "root": f.root, "to": first, "out": out });
    let status = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "resume::crash_child",
            "--exact",
            "--test-threads=1",
            "--quiet",
        ])
        .env("CAIRN_RESUME_CHILD", spec.to_string())
        .env("CAIRN_HOME", &f.home)
        .env_remove("CAIRN_STORE")
        .env_remove("CAIRN_THREADS_DB")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("the child");
    assert!(!status.success(), "the child died inside the rewind");
    // The file half was done; the conversation half was not recorded.
    assert_eq!(f.read("a.txt").as_deref(), Some("two"));
    let chosen: Value =
        serde_json::from_slice(&std::fs::read(&out).expect("the child chose")).expect("json");
    let new = chosen["session_id"]
        .as_str()
        .expect("a new session")
        .to_string();
    f.cairn(&["recover"]).assert().success();
    // Both halves are done: the thread is at turn one, the new session's name finds it, and
    // `cairn resume` runs the command the rewind chose before the crash.
    let log = f.json(&["thread", "log", &format!("claude-{new}")]);
    assert_eq!(log["thread"]["id"], "claude-s1", "{log}");
    assert_eq!(log["entries"].as_array().map(Vec::len), Some(1), "{log}");
    let ran = resume(&f, "claude-s1", &[]);
    assert_eq!(ran[1..], argv(&chosen)[1..]);
}

#[test]
fn the_thread_follows_claudes_own_rewind_and_says_which_files_differ_and_how_to_put_them_back() {
    let f = Fixture::new();
    let first = two_turns(&f);
    // THIRD was sent after Claude's own rewind to the end of turn one (its transcript line
    // follows FIRST's turn); the files are as SECOND's turn left them.
    let third = "5d6f1674-6870-4f58-bb7e-6e7af85ba2aa";
    let out = turn(&f, SESSION, "THIRD", third, "three");
    let notice: Value = serde_json::from_str(out.trim()).expect("one JSON line for Claude Code");
    let line = notice["systemMessage"].as_str().expect("a systemMessage");
    assert!(!line.contains('\n'), "one line: {line}");
    assert!(line.contains("a.txt"), "{line}");
    let log = f.json(&["thread", "log", "claude-s1"]);
    let texts = texts_of(&log);
    assert_eq!(texts, ["FIRST", "THIRD"], "{log}");
    assert_eq!(log["entries"][0]["id"], first.as_str());
    // The moved prompt keeps the files it was sent with: a rewind to before it is SECOND's end.
    assert!(
        log["entries"][1]["checkpoint"]["snapshot_id"].is_string(),
        "{log}"
    );
    let all = f.json(&["thread", "log", "claude-s1", "--all"]);
    assert!(
        all["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .any(|e| e["text"] == "SECOND" && e["on_active_branch"] == false),
        "the dropped turn is kept on a branch: {all}"
    );
    // Cairn never restored a file by itself; the command in the notice does.
    assert_eq!(f.read("a.txt").as_deref(), Some("three"));
    let command = line
        .split('`')
        .nth(1)
        .expect("a command between backquotes")
        .to_string();
    let args: Vec<&str> = command.split_whitespace().skip(1).collect();
    assert_eq!(args[0], "rewind", "{command}");
    f.cairn(&[&["rewind", "--yes"], &args[1..]].concat())
        .assert()
        .success();
    assert_eq!(
        f.read("a.txt").as_deref(),
        Some("two"),
        "SECOND's turn undone"
    );
    let texts_after = texts_of(&f.json(&["thread", "log", "claude-s1"]));
    assert_eq!(
        texts_after,
        ["FIRST", "THIRD"],
        "the command left the conversation"
    );
    // A second Stop of the same turn changes nothing more.
    assert_eq!(run_hook(&f, &event(&f, SESSION, "Stop", json!({}))), "");
}
