//! Codex's adapter against hook documents the real Codex CLI 0.171.0 wrote (issue 55):
//! `codex-0.171.0-hooks.jsonl`, the stdin of each hook of a session of two turns (`codex exec`
//! whose turn applied a patch, then `codex exec resume` whose turn ran a shell command), in the
//! order Codex ran them: SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop, twice.

use cairn_agents::codex::{Codex, TOOL_MATCHER};
use cairn_agents::{Agent, Continue, Event, Place};
use std::path::PathBuf;

const SESSION: &str = "01a24edd-572b-79d3-a811-0a8f96498504";
const TURN1: &str = "01a24edd-574f-7920-b9dc-cf1acc910550";
const TURN2: &str = "01a24edd-66b0-7342-a948-461a3be10ee2";

fn documents() -> Vec<String> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/codex-0.171.0-hooks.jsonl");
    std::fs::read_to_string(path)
        .expect("the sample hook documents")
        .lines()
        .map(str::to_string)
        .collect()
}

fn events() -> Vec<Event> {
    documents()
        .iter()
        .map(|d| {
            let h = Codex.read_hook(d, &[]).expect("a document Codex wrote");
            assert_eq!(h.session_id, SESSION);
            assert_eq!(h.cwd, Some(PathBuf::from("/tmp/cx/proj")));
            h.event
        })
        .collect()
}

#[test]
fn each_prompt_keeps_its_turn_and_the_rollout_file_as_its_place() {
    // Issue 55: the turn id is what thread/revert takes.
    let prompts: Vec<(String, Place, String)> = events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Prompt { text, place, key } => Some((text, place, key)),
            _ => None,
        })
        .collect();
    assert_eq!(prompts.len(), 2);
    let (text, place, key) = &prompts[0];
    assert_eq!(text, "FIRST prompt: create notes.txt");
    assert_eq!(place.agent, "codex");
    assert_eq!(place.session_id, SESSION);
    assert_eq!(place.prompt_id.as_deref(), Some(TURN1));
    assert!(place
        .transcript
        .as_ref()
        .is_some_and(|t| t.to_string_lossy().ends_with(&format!("{SESSION}.jsonl"))));
    assert_eq!(place.cwd, Some(PathBuf::from("/tmp/cx/proj")));
    assert_eq!(prompts[1].1.prompt_id.as_deref(), Some(TURN2));
    // One delivery of a prompt is one entry; another turn is another.
    assert_ne!(key, &prompts[1].2);
    assert_eq!(
        Codex.read_hook(&documents()[1], &[]).ok().map(|h| h.event),
        Some(Event::Prompt {
            text: text.clone(),
            place: place.clone(),
            key: key.clone()
        })
    );
}

#[test]
fn apply_patch_and_the_shell_are_checkpointed_before_they_run_and_nothing_after() {
    // Issue 55: a checkpoint before every apply_patch and shell call, labelled with its call id.
    let e = events();
    let labels: Vec<(&str, &serde_json::Value)> = e
        .iter()
        .filter_map(|e| match e {
            Event::BeforeTool { label, who } => Some((label.as_str(), &who["tool_name"])),
            _ => None,
        })
        .collect();
    assert_eq!(
        labels,
        vec![
            ("call_patch_1", &serde_json::json!("apply_patch")),
            ("call_shell_2", &serde_json::json!("Bash")),
        ]
    );
    assert!(matches!(&e[3], Event::Other), "PostToolUse: {:?}", e[3]);
    assert!(matches!(&e[0], Event::SessionStart));
}

#[test]
fn mcp_tools_and_named_tools_are_checkpointed_and_reading_tools_are_not() {
    // Issue 55: before every MCP tool call too.
    let doc = |tool: &str| {
        serde_json::json!({
            "session_id": "s", "turn_id": "t", "cwd": "/w", "hook_event_name": "PreToolUse",
            "tool_name": tool, "tool_input": {}, "tool_use_id": "call_9"
        })
        .to_string()
    };
    let before = |tool: &str, extra: &[String]| {
        matches!(
            Codex.read_hook(&doc(tool), extra).expect("doc").event,
            Event::BeforeTool { .. }
        )
    };
    assert!(before("mcp__files__write", &[]));
    assert!(!before("view_image", &[]));
    assert!(before("view_image", &["view_image".to_string()]));
}

#[test]
fn the_end_of_a_turn_names_the_turn() {
    // Issue 55.
    let ends: Vec<Place> = events()
        .into_iter()
        .filter_map(|e| match e {
            Event::TurnEnd { place } => Some(place),
            _ => None,
        })
        .collect();
    assert_eq!(
        ends.iter().map(|p| p.last.as_deref()).collect::<Vec<_>>(),
        vec![Some(TURN1), Some(TURN2)]
    );
}

#[test]
fn a_rewind_reverts_the_same_session_to_before_the_first_cut_turn() {
    // Issue 55: thread/revert {threadId, beforeTurnId}: Codex takes the same session back.
    let c = Codex;
    assert!(!c.forks());
    let place = Place {
        agent: "codex".into(),
        session_id: SESSION.into(),
        prompt_id: Some(TURN2.into()),
        ..Place::default()
    };
    assert_eq!(c.before(&place).expect("turn"), Some(TURN2.to_string()));
    let no_turn = Place {
        prompt_id: None,
        ..place
    };
    assert!(c.before(&no_turn).is_err());
    assert_eq!(
        c.continue_argv(SESSION, Some(TURN2), None),
        vec!["codex", "resume", SESSION]
    );
    assert_eq!(c.thread_of(SESSION).as_str(), format!("codex-{SESSION}"));
}

#[test]
fn cairn_resume_runs_codex_exec_resume_when_its_arguments_begin_with_exec() {
    // Issue 55: `cairn resume THREAD -- exec PROMPT` is Codex's non-interactive run.
    let cont = Continue {
        agent: "codex".into(),
        from_session: SESSION.into(),
        at: Some(TURN2.into()),
        session_id: None,
        argv: vec!["codex".into(), "resume".into(), SESSION.into()],
        cwd: None,
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        Codex.resume_argv(&cont, &args(&["exec", "--json", "go on"])),
        args(&["codex", "exec", "resume", SESSION, "--json", "go on"])
    );
    assert_eq!(
        Codex.resume_argv(&cont, &args(&["-m", "o3"])),
        args(&["codex", "resume", SESSION, "-m", "o3"])
    );
    // No settle without a turn to revert to (the whole session continues as it stands).
    let whole = Continue { at: None, ..cont };
    Codex.settle(&whole).expect("nothing to do");
}

#[test]
fn hooks_go_in_beside_the_users_own_once_and_come_out_with_remove() {
    // Issue 55: .codex/hooks.json has Claude Code's shape; install is idempotent.
    let c = Codex;
    let own = serde_json::json!({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "my-guard"}]}
    ]}});
    let mut s = own.clone();
    let cmd = "/usr/bin/cairn hook codex";
    let added = c.install(&mut s, cmd, false).expect("install");
    assert_eq!(
        added.added,
        vec![
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PreCompact",
            "Stop"
        ]
    );
    let pre = s["hooks"]["PreToolUse"].as_array().expect("list");
    assert_eq!(pre.len(), 2);
    assert_eq!(pre[1]["matcher"], TOOL_MATCHER);
    assert_eq!(pre[1]["hooks"][0]["command"], cmd);
    let again = c.install(&mut s, cmd, false).expect("again");
    assert!(again.added.is_empty() && again.removed.is_empty());
    // Another binary of cairn is made this one.
    let moved = c
        .install(&mut s, "/opt/cairn hook codex", false)
        .expect("moved");
    assert_eq!(moved.added.len(), 5);
    let removed = c.install(&mut s, cmd, true).expect("remove");
    assert_eq!(removed.removed.len(), 5);
    assert_eq!(s, own);
    assert!(c.is_ours(cmd) && !c.is_ours("/usr/bin/cairn hook claude-code"));
}
