//! Codex CLI's hooks (issue 55): `cairn init codex` and `cairn hook codex`, driven with hook
//! documents of the shape the real Codex 0.171.0 sends (scripts/test-codex runs the real one).

use crate::Fixture;
use serde_json::{json, Value};

/// Runs `cairn hook codex` with `doc` on stdin: (exit code, stderr).
fn hook(f: &Fixture, doc: &Value) -> (Option<i32>, String) {
    let (code, _, err) = crate::agents::hook_of(f, "codex", doc, &[]);
    (code, err)
}

fn doc(f: &Fixture, event: &str, extra: Value) -> Value {
    let mut d = json!({
        "session_id": "cx-1",
        "turn_id": "turn-1",
        "transcript_path": f.root.with_file_name("rollout.jsonl"),
        "cwd": f.root,
        "hook_event_name": event,
        "model": "gpt-5.5",
        "permission_mode": "bypassPermissions",
    });
    for (k, v) in extra.as_object().expect("object") {
        d[k] = v.clone();
    }
    d
}

#[test]
fn init_codex_installs_its_hooks_says_how_to_trust_them_without_codex_and_remove_takes_them_out() {
    // Issue 55: Codex skips an untrusted hook without a word; with no Codex to ask, init says
    // how to trust them.
    let f = Fixture::new();
    let init = |args: &[&str]| -> Value {
        let out = f
            .cairn(&[&["--json", "init", "codex"][..], args].concat())
            .env("CAIRN_CODEX", f.root.join("no-codex-here"))
            .output()
            .expect("run");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("json")
    };
    let first = init(&[]);
    assert_eq!(
        first["added"],
        json!([
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PreCompact",
            "Stop"
        ])
    );
    let notes = first["notes"].as_array().expect("notes");
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .is_some_and(|n| n.contains("only once it is trusted") && n.contains("/hooks"))),
        "{notes:?}"
    );
    let path = f.root.join(".codex/hooks.json");
    let hooks: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("hooks.json")).expect("json");
    let pre = &hooks["hooks"]["PreToolUse"][0];
    assert_eq!(pre["matcher"], "^(apply_patch|Bash|mcp__.*)$");
    assert!(pre["hooks"][0]["command"]
        .as_str()
        .is_some_and(|c| c.ends_with(" hook codex")));
    assert_eq!(init(&[])["added"], json!([]));
    let removed = init(&["--remove"]);
    assert_eq!(removed["removed"].as_array().map(Vec::len), Some(5));
    let left: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("hooks.json")).expect("json");
    assert_eq!(left, json!({"hooks": {}}));
}

#[test]
fn the_codex_hook_records_each_prompt_with_its_turn_and_checkpoints_before_apply_patch_and_the_shell(
) {
    // Issue 55: the thread codex-<session>, the prompt's place (the turn thread/revert takes).
    let f = Fixture::new();
    f.write("a.txt", "one\n");
    let (code, err) = hook(&f, &doc(&f, "UserPromptSubmit", json!({"prompt": "add b"})));
    assert_eq!(code, Some(0), "{err}");
    for (tool, id) in [
        ("apply_patch", "call_p"),
        ("Bash", "call_s"),
        ("view_image", "call_v"),
    ] {
        let d = doc(
            &f,
            "PreToolUse",
            json!({"tool_name": tool, "tool_use_id": id, "tool_input": {}}),
        );
        assert_eq!(hook(&f, &d).0, Some(0));
    }
    assert_eq!(
        hook(&f, &doc(&f, "Stop", json!({"stop_hook_active": false}))).0,
        Some(0)
    );
    let log = f.json(&["thread", "log", "codex-cx-1"]);
    let entry = &log["entries"][0];
    assert_eq!(entry["text"], "add b");
    assert_eq!(entry["metadata"]["conversation"]["agent"], "codex");
    assert_eq!(entry["metadata"]["conversation"]["prompt_id"], "turn-1");
    let snaps = f.json(&["list"]);
    let labels: Vec<&str> = snaps["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .filter_map(|s| s["label"].as_str())
        .collect();
    for l in ["call_p", "call_s", "end-of-turn"] {
        assert!(labels.contains(&l), "{l} in {labels:?}");
    }
    assert!(!labels.contains(&"call_v"), "{labels:?}");
}

#[test]
fn doctor_reports_codex_hooks_it_cannot_check_and_says_what_to_do() {
    // Issue 55: Codex skips an untrusted hook without a word; doctor asks Codex, and says so
    // when it cannot.
    let f = Fixture::new();
    let no_codex = f.root.join("no-codex-here");
    let check = |f: &Fixture| -> Option<Value> {
        let out = f
            .cairn(&["--json", "doctor"])
            .env("CAIRN_CODEX", &no_codex)
            .output()
            .expect("doctor");
        let json: Value = serde_json::from_slice(&out.stdout).expect("json");
        json["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .find(|x| x["check"] == "codex-hooks-trusted")
            .cloned()
    };
    assert_eq!(check(&f), None, "no Codex hooks, no Codex check");
    f.cairn(&["init", "codex"])
        .env("CAIRN_CODEX", &no_codex)
        .assert()
        .success();
    let found = check(&f).expect("the Codex check");
    assert_eq!(found["ok"], false);
    assert!(found["message"]
        .as_str()
        .is_some_and(|m| m.contains("cannot ask Codex")));
    assert!(found["fix"]
        .as_str()
        .is_some_and(|m| m.contains("CAIRN_CODEX")));
}

#[test]
fn doctor_does_not_tell_a_codex_user_to_install_claude_codes_hooks() {
    // Issue 55: with only Codex's hooks installed, Claude Code's checks are not run.
    let f = Fixture::new();
    let no_codex = f.root.join("no-codex-here");
    f.cairn(&["init", "codex"])
        .env("CAIRN_CODEX", &no_codex)
        .assert()
        .success();
    let out = f
        .cairn(&["--json", "doctor"])
        .env("CAIRN_CODEX", &no_codex)
        .output()
        .expect("doctor");
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    let checks: Vec<&str> = json["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|x| x["check"].as_str())
        .collect();
    assert!(!checks.contains(&"hooks-installed"), "{json}");
    assert!(!checks.contains(&"transcript-prompts"), "{json}");
    assert!(checks.contains(&"codex-hooks-trusted"), "{json}");
}
