//! GitHub Copilot CLI's adapter against the hook documents the real Copilot CLI 1.0.102 sent
//! (issue 55), driven offline by tests/copilot/fake-openai.mjs: `copilot-1.0.102-hooks.jsonl`,
//! every document of two turns (FIRST: create; SECOND, with `--resume`: bash) for hooks
//! configured with the PascalCase event names, their paths made `/W/...`.

use cairn_agents::copilot::{self, CopilotCli};
use cairn_agents::{Agent, Event, Place};
use std::path::{Path, PathBuf};

const SESSION: &str = "e96e6f73-d25f-4ffe-ad97-0243c8ba456e";

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[test]
fn the_hook_documents_of_copilot_cli_read_into_cairns_events() {
    // issue 55
    let text = std::fs::read_to_string(data("copilot-1.0.102-hooks.jsonl")).expect("read");
    let mut seen = Vec::new();
    for line in text.lines() {
        let hook = CopilotCli.read_hook(line, &[]).expect("read");
        assert_eq!(hook.session_id, SESSION);
        assert_eq!(hook.cwd.as_deref(), Some(Path::new("/W/p")));
        seen.push(match hook.event {
            Event::SessionStart => "start".to_string(),
            Event::Prompt { text, place, key } => {
                assert!(key.starts_with("copilot-prompt-"));
                assert_eq!(place.agent, copilot::NAME);
                assert_eq!(place.session_id, SESSION);
                format!("prompt {}", &text[..5])
            }
            Event::BeforeTool { label, who } => {
                let arg = who
                    .get("path")
                    .or(who.get("command"))
                    .expect("its argument");
                format!("{label} {}", arg.as_str().expect("a string"))
            }
            Event::TurnEnd { place } => {
                assert_eq!(
                    place.transcript.as_deref(),
                    Some(Path::new(&format!(
                        "/W/home/.copilot/session-state/{SESSION}/events.jsonl"
                    )))
                );
                "end".into()
            }
            other => format!("{other:?}"),
        });
    }
    assert_eq!(
        seen,
        [
            "start",
            "prompt FIRST",
            "before-Write /W/p/notes.txt",
            "end",
            "start",
            "prompt SECON",
            "before-Bash rm notes.txt hello.txt && echo changed >> keep.txt",
            "end"
        ]
    );
}

#[test]
fn only_tools_that_change_files_take_a_checkpoint() {
    // issue 55
    let tool = |name: &str, extra: &[String]| {
        let doc = serde_json::json!({
            "hook_event_name": "PreToolUse", "session_id": "s1", "cwd": "/p",
            "timestamp": "2026-12-07T05:19:52.459Z", "tool_name": name, "tool_input": {},
        });
        CopilotCli
            .read_hook(&doc.to_string(), extra)
            .expect("read")
            .event
    };
    for name in ["view", "glob", "grep", "Read", "task"] {
        assert_eq!(tool(name, &[]), Event::OtherTool, "{name}");
    }
    for name in [
        "Write",
        "Edit",
        "Bash",
        "create",
        "edit",
        "bash",
        "powershell",
    ] {
        assert!(
            matches!(tool(name, &[]), Event::BeforeTool { .. }),
            "{name}"
        );
    }
    assert!(matches!(
        tool("my_tool", &["my_tool".into()]),
        Event::BeforeTool { .. }
    ));
    // The camelCase events' documents (sessionId, toolName) are not what Cairn installs.
    let e = CopilotCli
        .read_hook(r#"{"sessionId": "s1", "toolName": "bash"}"#, &[])
        .expect_err("camelCase");
    assert!(e.to_string().contains("GitHub Copilot CLI"), "{e}");
}

#[test]
fn hooks_install_idempotently_beside_the_users_own_and_come_out_alone() {
    // issue 55
    let c = CopilotCli;
    let theirs = serde_json::json!({
        "version": 1,
        "hooks": {"PreToolUse": [{"type": "command", "bash": "./audit.sh", "timeoutSec": 10}]}
    });
    let mut s = theirs.clone();
    let added = c
        .install(&mut s, "/bin/cairn hook copilot", false)
        .expect("install");
    assert_eq!(added.added, copilot::EVENTS, "{s}");
    assert_eq!(s["hooks"]["PreToolUse"][0]["bash"], "./audit.sh");
    assert_eq!(
        s["hooks"]["PreToolUse"][1],
        serde_json::json!({"type": "command", "bash": "/bin/cairn hook copilot", "timeoutSec": 60})
    );
    let again = c
        .install(&mut s, "/bin/cairn hook copilot", false)
        .expect("again");
    assert!(again.added.is_empty() && again.removed.is_empty());
    let moved = c
        .install(&mut s, "/opt/cairn hook copilot --watch", false)
        .expect("moved");
    assert_eq!(
        moved.added.len(),
        5,
        "another binary's command is made this one"
    );
    let removed = c
        .install(&mut s, "/opt/cairn hook copilot", true)
        .expect("remove");
    assert_eq!(removed.removed.len(), 5, "{s}");
    assert_eq!(s, theirs);
    // A new file gets its version.
    let mut fresh = serde_json::json!({});
    c.install(&mut fresh, "cairn hook copilot", false)
        .expect("fresh");
    assert_eq!(fresh["version"], 1);
    let mut bad = serde_json::json!({"hooks": {"Stop": {}}});
    let e = c
        .install(&mut bad, "cairn hook copilot", false)
        .expect_err("not a list");
    assert!(e.contains("hooks.Stop is not a list"), "{e}");
}

#[test]
fn a_rewind_says_copilot_cli_cannot_continue_from_an_earlier_message() {
    // issue 55
    let c = CopilotCli;
    let place = Place {
        agent: copilot::NAME.into(),
        session_id: SESSION.into(),
        ..Place::default()
    };
    let e = c
        .before(&place)
        .expect_err("no way to continue from a message");
    assert!(
        e.to_string().contains("no command that continues session"),
        "{e}"
    );
    assert_eq!(
        c.continue_argv(SESSION, None, None),
        ["copilot".to_string(), format!("--resume={SESSION}")]
    );
    assert_eq!(c.thread_of(SESSION).as_str(), format!("copilot-{SESSION}"));
}

#[test]
fn init_says_when_copilot_cli_will_not_run_the_hooks() {
    // issue 55
    let home = tempfile::tempdir().expect("home");
    let root = tempfile::tempdir().expect("root");
    let root = std::fs::canonicalize(root.path()).expect("canonical");
    let check = || copilot::check_install_at(Some(&root), Some(home.path()));
    let notes = check();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("only in a folder you trust"), "{notes:?}");
    // config.json as Copilot CLI writes it: comment lines, then JSON.
    let config = |folder: &Path| {
        format!(
            "// User settings belong in settings.json.\n// This file is managed automatically.\n{}\n",
            serde_json::json!({"firstLaunchAt": "2026-12-07T05:13:53.704Z", "trustedFolders": [folder]})
        )
    };
    std::fs::write(home.path().join("config.json"), config(&root)).expect("write");
    assert_eq!(check(), Vec::<String>::new());
    std::fs::write(
        home.path().join("config.json"),
        config(root.parent().expect("parent")),
    )
    .expect("write");
    assert_eq!(check(), Vec::<String>::new(), "a trusted parent trusts it");
    std::fs::write(
        home.path().join("settings.json"),
        r#"{"disableAllHooks": true}"#,
    )
    .expect("write");
    let notes = check();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("disableAllHooks"), "{notes:?}");
    // The user's own hooks: no folder to trust.
    std::fs::remove_file(home.path().join("settings.json")).expect("rm");
    std::fs::remove_file(home.path().join("config.json")).expect("rm");
    assert_eq!(
        copilot::check_install_at(None, Some(home.path())),
        Vec::<String>::new()
    );
}
