//! Claude Code's adapter against transcripts the real Claude Code 2.1.197 wrote (issue 54):
//! `claude-2.1.197-rewound.jsonl`, a session of two turns (FIRST, SECOND), then a third prompt
//! sent with `--resume-session-at` the end of turn one (Claude's own rewind, no fork); and
//! `claude-2.1.197-forked.jsonl`, the session `--fork-session` made from the end of turn one,
//! its history copied with the same uuids, then a prompt of its own; and
//! `claude-2.1.197-bare-lost-prompt.jsonl`, a session of one prompt run with `--bare` on a busy
//! machine, whose file Claude Code wrote without its first lines (the prompt's among them).

use cairn_agents::claude::transcript::{shortened, Transcript};
use cairn_agents::claude::ClaudeCode;
use cairn_agents::{Agent, Event, Place};
use std::path::PathBuf;

const FIRST: &str = "38a2cfb1-c739-481c-87be-a2aaf2f1aebd";
const SECOND: &str = "3297a2da-d41f-4ecb-b327-58618dc03a6b";
const THIRD: &str = "5d6f1674-6870-4f58-bb7e-6e7af85ba2aa";
const FORKED: &str = "accb0b33-77c1-4b7d-9a4f-b09afbc9ad5a";
/// The last message of turn one (the model's "done").
const END_OF_ONE: &str = "24d6161b-b108-4fd7-88ed-cef7e50fa2e4";

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn place(transcript: &str, prompt_id: &str) -> Place {
    Place {
        agent: "claude-code".into(),
        session_id: "s".into(),
        transcript: Some(data(transcript)),
        prompt_id: Some(prompt_id.into()),
        offset: Some(0),
        ..Place::default()
    }
}

#[test]
fn the_message_before_a_prompt_is_the_last_message_of_the_turn_before_it() {
    let c = ClaudeCode;
    let rewound = "claude-2.1.197-rewound.jsonl";
    assert_eq!(c.before(&place(rewound, FIRST)).expect("first"), None);
    assert_eq!(
        c.before(&place(rewound, SECOND))
            .expect("second")
            .as_deref(),
        Some(END_OF_ONE)
    );
    // After Claude's own rewind the prompt follows turn one, not the line above it.
    assert_eq!(
        c.before(&place(rewound, THIRD)).expect("third").as_deref(),
        Some(END_OF_ONE)
    );
}

#[test]
fn a_prompt_without_an_id_is_found_as_the_first_prompt_after_its_offset() {
    let c = ClaudeCode;
    let path = data("claude-2.1.197-rewound.jsonl");
    let text = std::fs::read_to_string(&path).expect("read");
    let second_at = text
        .find("\"SECOND prompt\"")
        .expect("the second prompt is there");
    let line_start = text[..second_at].rfind('\n').map_or(0, |i| i + 1) as u64;
    let p = Place {
        prompt_id: None,
        offset: Some(line_start),
        ..place("claude-2.1.197-rewound.jsonl", "")
    };
    // The first prompt line at or after the offset is SECOND's (queue lines hold no uuid).
    assert_eq!(c.before(&p).expect("found").as_deref(), Some(END_OF_ONE));
}

#[test]
fn a_prompt_the_transcript_lacks_is_an_error_naming_the_transcript() {
    let c = ClaudeCode;
    let err = c
        .before(&Place {
            offset: None,
            ..place("claude-2.1.197-rewound.jsonl", "no-such-prompt")
        })
        .expect_err("not there");
    assert!(
        err.to_string().contains("claude-2.1.197-rewound.jsonl"),
        "{err}"
    );
    let missing = c
        .before(&place("no-such-transcript.jsonl", FIRST))
        .expect_err("no file");
    assert!(
        missing.to_string().contains("no-such-transcript.jsonl"),
        "{missing}"
    );
}

#[test]
fn a_prompt_after_claudes_own_rewind_follows_the_turn_it_was_rewound_to() {
    let c = ClaudeCode;
    let rewound = "claude-2.1.197-rewound.jsonl";
    let earlier = [place(rewound, FIRST), place(rewound, SECOND)];
    // THIRD was sent after a rewind to the end of turn one: it follows FIRST, not SECOND.
    assert_eq!(
        c.follows(&place(rewound, THIRD), &earlier)
            .expect("follows"),
        Some(0)
    );
    // SECOND follows FIRST, the last prompt before it: no rewind.
    assert_eq!(
        c.follows(&place(rewound, SECOND), &earlier[..1])
            .expect("follows"),
        Some(0)
    );
}

#[test]
fn a_forked_session_follows_the_prompts_its_history_copied() {
    let c = ClaudeCode;
    // The prompts recorded before come from the first session's transcript; the forked one
    // holds copies of their lines with the same uuids.
    let earlier = [place("claude-2.1.197-rewound.jsonl", FIRST)];
    let forked = place("claude-2.1.197-forked.jsonl", FORKED);
    assert_eq!(c.follows(&forked, &earlier).expect("follows"), Some(0));
    assert_eq!(
        c.before(&forked).expect("before").as_deref(),
        Some(END_OF_ONE)
    );
}

#[test]
fn the_command_that_continues_forks_at_the_message_into_the_new_session() {
    let c = ClaudeCode;
    assert_eq!(
        c.continue_argv("old", Some("m1"), Some("new")),
        [
            "claude",
            "--resume",
            "old",
            "--resume-session-at",
            "m1",
            "--fork-session",
            "--session-id",
            "new"
        ]
    );
    assert_eq!(
        c.continue_argv("old", None, Some("new")),
        ["claude", "--session-id", "new"]
    );
    assert_eq!(
        c.continue_argv("old", None, None),
        ["claude", "--resume", "old"]
    );
}

#[test]
fn a_prompt_hook_keeps_the_prompt_id_and_how_long_the_transcript_was() {
    let path = data("claude-2.1.197-rewound.jsonl");
    let len = std::fs::metadata(&path).expect("stat").len();
    let doc = serde_json::json!({
        "session_id": "s1",
        "transcript_path": path,
        "cwd": "/p",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "hi",
        "prompt_id": "p-1",
    });
    let hook = ClaudeCode.read_hook(&doc.to_string(), &[]).expect("read");
    let Event::Prompt { text, place, .. } = hook.event else {
        panic!("a prompt: {hook:?}");
    };
    assert_eq!(text, "hi");
    assert_eq!(place.prompt_id.as_deref(), Some("p-1"));
    assert_eq!(place.offset, Some(len));
    assert_eq!(place.session_id, "s1");
}

#[test]
fn a_stop_hook_keeps_the_last_message_of_the_turn() {
    let doc = serde_json::json!({
        "session_id": "s1",
        "transcript_path": data("claude-2.1.197-forked.jsonl"),
        "hook_event_name": "Stop",
    });
    let hook = ClaudeCode.read_hook(&doc.to_string(), &[]).expect("read");
    let Event::TurnEnd { place } = hook.event else {
        panic!("a turn end: {hook:?}");
    };
    assert_eq!(
        place.last.as_deref(),
        Some("b6045bd2-0d2c-4f5c-bf9b-e38b82f3a9fa")
    );
}

#[test]
fn hooks_install_idempotently_beside_the_users_own_and_come_out_alone() {
    let c = ClaudeCode;
    let theirs = serde_json::json!({
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "their-notify"}]}]}
    });
    let mut s = theirs.clone();
    let added = c
        .install(&mut s, "/bin/cairn hook claude-code", false)
        .expect("install");
    assert_eq!(added.added.len(), 5, "{s}");
    let again = c
        .install(&mut s, "/bin/cairn hook claude-code", false)
        .expect("again");
    assert!(again.added.is_empty() && again.removed.is_empty());
    let moved = c
        .install(&mut s, "/opt/cairn hook claude-code", false)
        .expect("moved");
    assert_eq!(
        moved.added.len(),
        5,
        "another binary's command is made this one"
    );
    let removed = c
        .install(&mut s, "/opt/cairn hook claude-code", true)
        .expect("remove");
    assert_eq!(removed.removed.len(), 5, "{s}");
    assert_eq!(s, theirs);
}

#[test]
fn a_fork_whose_copied_history_carries_the_new_prompts_id_finds_the_new_prompt() {
    // Claude Code 2.1.332 writes a forked session's copied history with the promptId of the
    // new session's first prompt: the copied FIRST line then carries FORKED's id.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("forked-2.1.332.jsonl");
    let text = std::fs::read_to_string(data("claude-2.1.197-forked.jsonl")).expect("read");
    std::fs::write(&path, text.replace(FIRST, FORKED)).expect("write");
    let forked = Place {
        transcript: Some(path),
        ..place("", FORKED)
    };
    assert_eq!(
        ClaudeCode.before(&forked).expect("before").as_deref(),
        Some(END_OF_ONE)
    );
    let earlier = [place("claude-2.1.197-rewound.jsonl", FIRST)];
    assert_eq!(
        ClaudeCode.follows(&forked, &earlier).expect("follows"),
        Some(0)
    );
}

#[test]
fn a_prompt_whose_line_claude_code_lost_is_found_by_its_last_prompt_line() {
    let t = Transcript::read(&data("claude-2.1.197-bare-lost-prompt.jsonl")).expect("read");
    assert!(!t.lines.iter().any(|l| l.is_prompt), "{t:?}");
    let lost = t.lost_prompts();
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(lost[0].text, "HOOKLESS prompt: just answer");
    // The model's answer, whose parent (the lost prompt) the file lacks.
    assert_eq!(
        lost[0].leaf.as_deref(),
        Some("8d172dcc-e1fb-4c0f-87ba-2a417260e92d")
    );
}

#[test]
fn whole_transcripts_lose_no_prompt_and_one_without_a_prompts_line_loses_that_one() {
    for name in [
        "claude-2.1.197-rewound.jsonl",
        "claude-2.1.197-forked.jsonl",
    ] {
        let t = Transcript::read(&data(name)).expect("read");
        assert!(!t.last_prompts.is_empty(), "{name}");
        assert_eq!(t.lost_prompts(), Vec::<&_>::new(), "{name}");
    }
    // The rewound session without SECOND's line: the answer to it hangs from a missing parent.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("without-second.jsonl");
    let text = std::fs::read_to_string(data("claude-2.1.197-rewound.jsonl")).expect("read");
    let kept: String = text
        .lines()
        .filter(|l| !(l.contains(r#""type":"user""#) && l.contains(r#""content":"SECOND prompt""#)))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(kept.lines().count() + 1, text.lines().count());
    std::fs::write(&path, &kept).expect("write");
    let t = Transcript::read(&path).expect("read");
    let lost: Vec<&str> = t.lost_prompts().iter().map(|p| p.text.as_str()).collect();
    assert_eq!(lost, ["SECOND prompt"]);
    // Without the answer to it either: the `last-prompt` names a message the file lacks.
    let answer = "ab48771a";
    let kept: String = kept
        .lines()
        .filter(|l| !l.contains(&format!(r#""uuid":"{answer}"#)))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&path, &kept).expect("write");
    let t = Transcript::read(&path).expect("read");
    assert!(t.lines.iter().all(|l| !l.uuid.starts_with(answer)));
    let lost: Vec<&str> = t.lost_prompts().iter().map(|p| p.text.as_str()).collect();
    assert_eq!(lost, ["SECOND prompt"]);
}

#[test]
fn a_prompt_is_shortened_as_claude_code_lists_it() {
    assert_eq!(shortened("  fix\nthe bug \n"), "fix the bug");
    assert_eq!(shortened(&"a".repeat(200)), "a".repeat(200));
    // Cut at 200 UTF-16 units, then trimmed: the space the cut ends on goes.
    assert_eq!(
        shortened(&format!("{} tail", "a".repeat(199))),
        format!("{}\u{2026}", "a".repeat(199))
    );
    // Outside the Basic Multilingual Plane a character is two units.
    assert_eq!(
        shortened(&"\u{1f600}".repeat(101)),
        format!("{}\u{2026}", "\u{1f600}".repeat(100))
    );
}
