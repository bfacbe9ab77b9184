//! Gemini CLI's adapter against what the real Gemini CLI 0.61.0 wrote (issue 55), driven by
//! tests/gemini/fake-gemini.mjs: `gemini-0.61.0-hooks.jsonl`, every hook document of two turns
//! (FIRST: write_file; SECOND, with `--resume`: run_shell_command), their paths made `/W/...`;
//! and `gemini-0.61.0-session.jsonl`, the session file those turns left.

use cairn_agents::gemini::session::Session;
use cairn_agents::gemini::{self, GeminiCli};
use cairn_agents::{Agent, Continue, Event, Place};
use std::path::{Path, PathBuf};

const SESSION: &str = "2b08e5fb-791b-47b1-aa6b-1a4ed62f9c63";
/// The messages of the FIRST and SECOND prompts.
const FIRST: &str = "4ff520b1-0642-4064-97c4-3628e703ed3a";
const SECOND: &str = "73741d95-ccec-4d5a-b979-11cf0144b8c2";
/// The model's "done", the last message of turn one.
const END_OF_ONE: &str = "77d835fd-8aff-491e-b6cd-ea54ced43328";
/// The last message of turn two.
const END_OF_TWO: &str = "bd39e193-3c7d-40b8-8cfe-1328897bd09c";

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A copy of the session file in a Gemini CLI home of its own (`HOME/.gemini/tmp/p/chats/`).
fn session_copy(home: &Path) -> PathBuf {
    let chats = home.join(".gemini/tmp/p/chats");
    std::fs::create_dir_all(&chats).expect("mkdir");
    let path = chats.join("session-2026-12-07T05-04-2b08e5fb.jsonl");
    std::fs::copy(data("gemini-0.61.0-session.jsonl"), &path).expect("copy");
    path
}

/// The byte offset where the record of message `id` starts: how long the file was when the
/// prompt's BeforeAgent hook ran.
fn offset_of(path: &Path, id: &str) -> u64 {
    let text = std::fs::read_to_string(path).expect("read");
    text.find(&format!("{{\"id\":\"{id}\""))
        .expect("the message is there") as u64
}

fn place(path: &Path, offset: u64) -> Place {
    Place {
        agent: gemini::NAME.into(),
        session_id: SESSION.into(),
        transcript: Some(path.to_path_buf()),
        offset: Some(offset),
        ..Place::default()
    }
}

fn append(path: &Path, line: serde_json::Value) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open");
    writeln!(f, "{line}").expect("append");
}

#[test]
fn a_prompt_is_the_first_prompt_record_after_the_length_its_hook_saw() {
    // issue 55
    let path = data("gemini-0.61.0-session.jsonl");
    let g = GeminiCli;
    for (id, expected) in [(FIRST, FIRST), (SECOND, SECOND)] {
        let at = offset_of(&path, id);
        assert_eq!(
            g.before(&place(&path, at)).expect("before"),
            Some(expected.into())
        );
    }
    // The session's context (a `$set` of the whole conversation) is no prompt.
    assert_eq!(g.before(&place(&path, 0)).expect("0"), Some(FIRST.into()));
    // A resumed run rewrites the conversation whole in a `$set` before its prompt: the
    // earlier prompts in it are not the new one.
    let after_one = offset_of(&path, END_OF_ONE) + 1;
    assert_eq!(
        g.before(&place(&path, after_one)).expect("after one"),
        Some(SECOND.into())
    );
    let len = std::fs::metadata(&path).expect("stat").len();
    let e = g
        .before(&place(&path, len))
        .expect_err("no prompt after the end");
    assert!(e.to_string().contains("does not hold a prompt"), "{e}");
}

#[test]
fn the_session_file_reads_as_gemini_cli_reads_it() {
    // issue 55
    let s = Session::read(&data("gemini-0.61.0-session.jsonl")).expect("read");
    assert_eq!(s.session_id.as_deref(), Some(SESSION));
    let ids: Vec<&str> = s.messages().iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids.first(), Some(&"d04923d38bb0f6017037e74183378ef4"));
    assert_eq!(ids.last(), Some(&END_OF_TWO));
    // A message written twice (the model's call, then with its result) is one.
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    assert!(ids.contains(&FIRST) && ids.contains(&SECOND));
}

#[test]
fn the_hook_documents_of_gemini_cli_read_into_cairns_events() {
    // issue 55
    let session = data("gemini-0.61.0-session.jsonl");
    let len = std::fs::metadata(&session).expect("stat").len();
    let text = std::fs::read_to_string(data("gemini-0.61.0-hooks.jsonl")).expect("read");
    let mut seen = Vec::new();
    for line in text.lines() {
        let mut doc: serde_json::Value = serde_json::from_str(line).expect("json");
        doc["transcript_path"] = session.to_string_lossy().into_owned().into();
        let hook = GeminiCli.read_hook(&doc.to_string(), &[]).expect("read");
        assert_eq!(hook.session_id, SESSION);
        assert_eq!(hook.cwd.as_deref(), Some(Path::new("/W/p")));
        let what = match hook.event {
            Event::SessionStart => "start".to_string(),
            Event::Prompt { text, place, key } => {
                assert!(key.starts_with("gemini-prompt-"));
                assert_eq!(place.offset, Some(len));
                assert_eq!(place.transcript.as_deref(), Some(session.as_path()));
                format!("prompt {}", &text[..5])
            }
            Event::BeforeTool { label, who } => {
                assert_eq!(
                    label,
                    format!("before-{}", who["tool_name"].as_str().expect("tool"))
                );
                let arg = who
                    .get("file_path")
                    .or(who.get("command"))
                    .expect("its argument");
                format!(
                    "{label} {}",
                    arg.as_str()
                        .expect("a string")
                        .split(' ')
                        .next()
                        .unwrap_or("")
                )
            }
            Event::Compaction => "compaction".into(),
            Event::TurnEnd { place } => {
                assert_eq!(place.last.as_deref(), Some(END_OF_TWO));
                "end".into()
            }
            other => format!("{other:?}"),
        };
        seen.push(what);
    }
    let turn = |prompt: &str, tool: &str| {
        vec![
            "start".to_string(),
            format!("prompt {prompt}"),
            "compaction".into(),
            tool.into(),
            "compaction".into(),
            "end".into(),
        ]
    };
    let mut expected = turn("FIRST", "before-write_file notes.txt");
    expected.extend(turn("SECON", "before-run_shell_command rm"));
    assert_eq!(seen, expected);
}

#[test]
fn only_tools_that_change_files_take_a_checkpoint() {
    // issue 55
    let tool = |name: &str, extra: &[String]| {
        let doc = serde_json::json!({
            "session_id": "s1", "cwd": "/p", "hook_event_name": "BeforeTool",
            "tool_name": name, "tool_input": {},
        });
        GeminiCli
            .read_hook(&doc.to_string(), extra)
            .expect("read")
            .event
    };
    assert_eq!(tool("read_file", &[]), Event::OtherTool);
    assert_eq!(tool("glob", &[]), Event::OtherTool);
    for name in [
        "write_file",
        "replace",
        "run_shell_command",
        "mcp_db_update",
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
    let e = GeminiCli
        .read_hook("{\"hook_event_name\": 3}", &[])
        .expect_err("not a hook");
    assert!(e.to_string().contains("Gemini CLI"), "{e}");
}

#[test]
fn a_rewind_appends_gemini_clis_own_rewind_record_once() {
    // issue 55
    let home = tempfile::tempdir().expect("tempdir");
    let path = session_copy(home.path());
    Session::rewind_to(&path, SECOND).expect("rewind");
    let text = std::fs::read_to_string(&path).expect("read");
    assert_eq!(
        text.lines().last(),
        Some(format!("{{\"$rewindTo\":\"{SECOND}\"}}").as_str())
    );
    let s = Session::read(&path).expect("read");
    assert_eq!(s.messages().last().map(|m| m.id.as_str()), Some(END_OF_ONE));
    assert!(!s.holds(SECOND));
    // Again (cairn recover, cairn resume): nothing more.
    Session::rewind_to(&path, SECOND).expect("again");
    assert_eq!(std::fs::read_to_string(&path).expect("read"), text);
}

#[test]
fn settle_takes_the_session_back_through_the_file_under_gemini_clis_home() {
    // issue 55. The only test of this binary that reads GEMINI_CLI_HOME.
    let home = tempfile::tempdir().expect("tempdir");
    let path = session_copy(home.path());
    // A resumed run can leave another file of the same session holding only its header.
    let stray = path.with_file_name("session-2026-12-07T05-05-2b08e5fb.jsonl");
    std::fs::write(
        &stray,
        format!("{{\"sessionId\":\"{SESSION}\",\"projectHash\":\"x\",\"kind\":\"main\"}}\n"),
    )
    .expect("write");
    assert_eq!(
        gemini::find_session_file(home.path(), SESSION),
        Some(path.clone())
    );
    std::env::set_var("GEMINI_CLI_HOME", home.path());
    let g = GeminiCli;
    let at = g
        .before(&place(&path, offset_of(&path, SECOND)))
        .expect("before");
    let cont = Continue {
        agent: gemini::NAME.into(),
        from_session: SESSION.into(),
        at,
        session_id: None,
        argv: g.continue_argv(SESSION, Some(SECOND), None),
        cwd: None,
    };
    g.settle(&cont).expect("settle");
    g.settle(&cont).expect("settle again");
    std::env::remove_var("GEMINI_CLI_HOME");
    let s = Session::read(&path).expect("read");
    assert_eq!(s.messages().last().map(|m| m.id.as_str()), Some(END_OF_ONE));
    let text = std::fs::read_to_string(&path).expect("read");
    assert_eq!(text.matches("$rewindTo").count(), 1);
    assert_eq!(cont.argv, ["gemini", "--resume", SESSION]);
    assert!(!g.forks(), "Gemini CLI's session is taken back, not forked");
}

#[test]
fn a_prompt_after_gemini_clis_own_rewind_follows_the_turn_it_was_rewound_to() {
    // issue 55
    let home = tempfile::tempdir().expect("tempdir");
    let path = session_copy(home.path());
    let g = GeminiCli;
    let first = place(&path, offset_of(&path, FIRST));
    let second = place(&path, offset_of(&path, SECOND));
    let own_at = std::fs::metadata(&path).expect("stat").len();
    let own = |p: &Path| {
        append(
            p,
            serde_json::json!({"id": "own-1", "type": "user", "content": [{"text": "OWN prompt"}]}),
        )
    };
    // Without a rewind, the new prompt follows turn two.
    let plain = tempfile::tempdir().expect("tempdir");
    let plain_path = session_copy(plain.path());
    own(&plain_path);
    let earlier = [
        place(&plain_path, first.offset.expect("o")),
        place(&plain_path, second.offset.expect("o")),
    ];
    assert_eq!(
        g.follows(&place(&plain_path, own_at), &earlier)
            .expect("follows"),
        Some(1)
    );
    // What /rewind writes, to before SECOND; then the new prompt.
    append(&path, serde_json::json!({"$rewindTo": SECOND}));
    own(&path);
    let own_place = place(&path, own_at);
    assert_eq!(g.before(&own_place).expect("before"), Some("own-1".into()));
    assert_eq!(
        g.follows(&own_place, &[first.clone(), second])
            .expect("follows"),
        Some(0)
    );
    // Rewound to before FIRST: it follows none.
    append(&path, serde_json::json!({"$rewindTo": FIRST}));
    assert_eq!(g.follows(&own_place, &[first]).expect("follows"), None);
}

#[test]
fn hooks_install_idempotently_beside_the_users_own_and_come_out_alone() {
    // issue 55
    let g = GeminiCli;
    let theirs = serde_json::json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "hooks": {"AfterAgent": [{"hooks": [{"type": "command", "command": "their-notify", "timeout": 5000}]}]}
    });
    let mut s = theirs.clone();
    let added = g
        .install(&mut s, "/bin/cairn hook gemini", false)
        .expect("install");
    assert_eq!(
        added.added,
        ["SessionStart", "BeforeAgent", "BeforeTool", "AfterAgent"],
        "{s}"
    );
    let ours = &s["hooks"]["BeforeTool"][0];
    assert_eq!(
        ours["matcher"],
        "^(write_file|replace|run_shell_command|mcp_.+)$"
    );
    assert_eq!(
        ours["hooks"][0]["timeout"], 60_000,
        "Gemini CLI's timeouts are milliseconds"
    );
    assert_eq!(ours["hooks"][0]["name"], "cairn");
    assert_eq!(
        s["hooks"]["AfterAgent"][0]["hooks"][0]["timeout"], 5000,
        "theirs as it was"
    );
    let again = g
        .install(&mut s, "/bin/cairn hook gemini", false)
        .expect("again");
    assert!(again.added.is_empty() && again.removed.is_empty());
    let moved = g
        .install(&mut s, "/opt/cairn hook gemini", false)
        .expect("moved");
    assert_eq!(
        moved.added.len(),
        4,
        "another binary's command is made this one"
    );
    let removed = g
        .install(&mut s, "/opt/cairn hook gemini", true)
        .expect("remove");
    assert_eq!(removed.removed.len(), 4, "{s}");
    assert_eq!(s, theirs);
    assert!(
        !g.is_ours("/bin/cairn hook claude-code") && g.is_ours("'/a b/cairn' hook gemini --watch")
    );
}

#[test]
fn init_says_when_gemini_cli_will_not_run_the_hooks() {
    // issue 55
    let home = tempfile::tempdir().expect("home");
    let root = tempfile::tempdir().expect("root");
    let root = std::fs::canonicalize(root.path()).expect("canonical");
    let settings = root.join(".gemini/settings.json");
    std::fs::create_dir_all(settings.parent().expect("dir")).expect("mkdir");
    std::fs::write(&settings, "{}").expect("write");
    let gdir = home.path().join(".gemini");
    std::fs::create_dir_all(&gdir).expect("mkdir");
    let check = || gemini::check_install_at(&settings, Some(&root), Some(home.path()));
    let notes = check();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("does not trust") && notes[0].contains(&*root.to_string_lossy()),
        "{notes:?}"
    );
    let trust = |rules: serde_json::Value| {
        std::fs::write(gdir.join("trustedFolders.json"), rules.to_string()).expect("write")
    };
    let r = root.to_string_lossy().into_owned();
    trust(serde_json::json!({ &r: "TRUST_FOLDER" }));
    assert_eq!(check(), Vec::<String>::new());
    // Trusting a folder inside the workspace's parent trusts the parent, so the workspace.
    let sibling = root.parent().expect("parent").join("sibling");
    trust(serde_json::json!({ sibling.to_string_lossy(): "TRUST_PARENT" }));
    assert_eq!(check(), Vec::<String>::new());
    // The rule nearest the workspace decides.
    trust(serde_json::json!({ sibling.to_string_lossy(): "TRUST_PARENT", &r: "DO_NOT_TRUST" }));
    assert_eq!(check().len(), 1);
    // Folder trust off: nothing to trust.
    std::fs::write(
        gdir.join("settings.json"),
        r#"{"security": {"folderTrust": {"enabled": false}}}"#,
    )
    .expect("write");
    assert_eq!(check(), Vec::<String>::new());
    // Hooks off, or Cairn's disabled by name.
    std::fs::write(
        &settings,
        r#"{"hooksConfig": {"enabled": false, "disabled": ["cairn"]}}"#,
    )
    .expect("write");
    let notes = check();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[0].contains("hooksConfig.enabled") && notes[1].contains("hooksConfig.disabled"));
}
