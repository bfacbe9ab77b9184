//! thread new, list, log and append; rewind; fork.

use crate::{exists, json_error, Fixture};
use predicates::prelude::*;
use serde_json::Value;
use std::path::PathBuf;

/// A thread `chat` of two turns: turn 1 edits `src/main.rs` and adds `turn1.txt`, turn 2 adds
/// `turn2.txt`. Returns the ids of (user 1, end of turn 1, user 2).
fn two_turns(f: &Fixture) -> (String, String, String) {
    f.json(&["thread", "new", "--id", "chat"]);
    let append = |kind: &str, text: &str| -> Value {
        f.json(&["thread", "append", "chat", "--kind", kind, "--text", text])
    };
    let u1 = append("user", "turn one");
    assert!(u1["checkpoint"]["snapshot_id"].is_string(), "{u1}");
    f.write("src/main.rs", "fn main() { one() }\n");
    f.write("turn1.txt", "1\n");
    append("tool", "edit");
    let end1 = append("assistant", "did one");
    let u2 = append("user", "turn two");
    f.write("turn2.txt", "2\n");
    append("assistant", "did two");
    let id = |v: &Value| v["entry"]["id"].as_str().expect("id").to_string();
    (id(&u1), id(&end1), id(&u2))
}

/// How many entries the active branch of `thread` holds.
fn active_len(f: &Fixture, thread: &str) -> Option<usize> {
    f.json(&["thread", "log", thread])["entries"]
        .as_array()
        .map(Vec::len)
}

#[test]
fn thread_new_list_and_log_show_the_thread() {
    let f = Fixture::new();
    let t = f.json(&["thread", "new", "--id", "chat"]);
    assert_eq!(t["id"], "chat");
    assert!(t["active_leaf"].is_null());
    let other = f.json(&["thread", "new"]);
    assert!(other["id"].as_str().is_some_and(|s| s.starts_with("t_")));
    let list = f.json(&["thread", "list"]);
    assert_eq!(list["threads"].as_array().map(Vec::len), Some(2));
    assert_eq!(list["threads"][0]["id"], "chat");
    let v = json_error(
        &mut f.cairn(&["--json", "thread", "new", "--id", "chat"]),
        13,
    );
    assert_eq!(v["error"]["kind"], "VALIDATION");
    json_error(&mut f.cairn(&["--json", "thread", "log", "nope"]), 12);
}

#[test]
fn append_checkpoints_before_user_messages_and_log_marks_them() {
    let f = Fixture::new();
    let (u1, end1, u2) = two_turns(&f);
    let log = f.json(&["thread", "log", "chat"]);
    let entries = log["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 5);
    assert_eq!(entries[0]["id"], u1.as_str());
    assert_eq!(entries[0]["text"], "turn one");
    assert!(entries[0]["checkpoint"].is_object());
    assert!(entries[1]["checkpoint"].is_null());
    assert_eq!(entries[2]["id"], end1.as_str());
    assert_eq!(entries[3]["id"], u2.as_str());
    f.cairn(&["thread", "log", "chat"])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "{u1}  user       turn one [files]"
        )));
    // The checkpoint is a snapshot labelled with the entry's id.
    let show = f.json(&["show", &u1]);
    assert_eq!(show["label"], u1.as_str());
}

#[test]
fn append_with_a_key_seen_before_writes_nothing_new() {
    let f = Fixture::new();
    f.json(&["thread", "new", "--id", "chat"]);
    let args = [
        "thread", "append", "chat", "--kind", "note", "--text", "n", "--key", "k1",
    ];
    let a = f.json(&args);
    let b = f.json(&args);
    assert_eq!(a["entry"]["id"], b["entry"]["id"]);
    assert_eq!(b["repeated"], true);
}

#[test]
fn rewind_dry_run_plans_files_and_conversation_and_changes_nothing() {
    let f = Fixture::new();
    let (_, end1, _) = two_turns(&f);
    let v = f.json(&["rewind", "chat", &end1, "--files", "--dry-run"]);
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["conversation"]["cut"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["files"]["exact"], true);
    assert_eq!(
        v["files"]["restore"]["deleted"],
        serde_json::json!(["turn2.txt"])
    );
    assert!(exists(&f.path("turn2.txt")));
    assert_eq!(active_len(&f, "chat"), Some(5));
}

#[test]
fn rewind_files_refuses_without_a_terminal_or_yes() {
    let f = Fixture::new();
    let (_, end1, _) = two_turns(&f);
    f.cairn(&["rewind", "chat", &end1, "--files"])
        .assert()
        .code(2)
        .stdout(predicate::str::contains("turn2.txt"))
        .stderr(predicate::str::contains("--yes"));
    json_error(
        &mut f.cairn(&["--json", "rewind", "chat", &end1, "--files"]),
        2,
    );
    assert!(exists(&f.path("turn2.txt")));
    assert_eq!(active_len(&f, "chat"), Some(5));
}

#[test]
fn rewind_files_yes_restores_cuts_and_its_safety_snapshot_undoes_the_files() {
    let f = Fixture::new();
    let (_, end1, _) = two_turns(&f);
    // An entry is named by a unique prefix too.
    let v = f.json(&["rewind", "chat", &end1[..10], "--files", "--yes"]);
    assert_eq!(v["dry_run"], false);
    assert_eq!(v["to_entry_id"], end1.as_str());
    assert!(!exists(&f.path("turn2.txt")));
    assert_eq!(f.read("turn1.txt").as_deref(), Some("1\n"));
    let log = f.json(&["thread", "log", "chat"]);
    assert_eq!(log["entries"].as_array().map(Vec::len), Some(3));
    let all = f.json(&["thread", "log", "chat", "--all"]);
    let off: Vec<&Value> = all["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["on_active_branch"] == false)
        .collect();
    assert_eq!(off.len(), 2);
    let safety = v["files"]["safety_snapshot_id"].as_str().expect("safety");
    f.cairn(&["restore", safety, "--yes"]).assert().success();
    assert_eq!(f.read("turn2.txt").as_deref(), Some("2\n"));
}

#[test]
fn rewind_without_files_moves_only_the_conversation() {
    let f = Fixture::new();
    let (u1, _, _) = two_turns(&f);
    let v = f.json(&["rewind", "chat", &u1]);
    assert!(v["files"].is_null());
    assert!(exists(&f.path("turn2.txt")));
    assert_eq!(active_len(&f, "chat"), Some(1));
}

#[test]
fn rewind_to_an_unknown_entry_exits_with_not_found() {
    let f = Fixture::new();
    two_turns(&f);
    let v = json_error(
        &mut f.cairn(&["--json", "rewind", "chat", "e_ffffffff", "--dry-run"]),
        12,
    );
    assert!(v["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("e_ffffffff")));
}

#[test]
fn fork_with_files_into_a_directory_gives_it_the_files_at_that_point() {
    let f = Fixture::new();
    let (u1, _, _) = two_turns(&f);
    let into = f.root.with_file_name("fork");
    let into_s = into.to_str().expect("utf8");
    let dry = f.json(&[
        "fork",
        "chat",
        &u1,
        "--files",
        "--into",
        into_s,
        "--dry-run",
    ]);
    assert_eq!(dry["dry_run"], true);
    assert!(!exists(&into), "a dry run leaves no directory behind");
    f.cairn(&["fork", "chat", &u1, "--files", "--into", into_s])
        .assert()
        .code(2);
    let v = f.json(&[
        "fork", "chat", &u1, "--files", "--into", into_s, "--new-id", "chat-b", "--yes",
    ]);
    assert_eq!(v["thread_id"], "chat-b");
    assert_eq!(v["source_thread_id"], "chat");
    assert_eq!(
        std::fs::read_to_string(into.join("src/main.rs"))
            .ok()
            .as_deref(),
        Some("fn main() {}\n")
    );
    assert!(!exists(&into.join("turn1.txt")));
    assert!(exists(&f.path("turn2.txt")), "the source is left alone");
    let log = f.json(&["thread", "log", "chat-b"]);
    assert_eq!(log["entries"].as_array().map(Vec::len), Some(1));
}

#[test]
fn fork_without_files_makes_a_thread_and_touches_no_file() {
    let f = Fixture::new();
    let (_, end1, _) = two_turns(&f);
    let v = f.json(&["fork", "chat", &end1, "--new-id", "side"]);
    assert_eq!(v["thread_id"], "side");
    assert!(v["files"].is_null());
    assert!(exists(&f.path("turn2.txt")));
    assert_eq!(active_len(&f, "side"), Some(3));
}

#[test]
fn thread_commands_have_help_with_examples() {
    for args in [
        &["thread", "new", "--help"][..],
        &["thread", "list", "--help"],
        &["thread", "log", "--help"],
        &["thread", "append", "--help"],
        &["rewind", "--help"],
        &["fork", "--help"],
    ] {
        assert_cmd::Command::cargo_bin("cairn")
            .expect("bin")
            .args(args)
            .assert()
            .success()
            .stdout(predicate::str::contains("Example"));
    }
}

#[test]
fn a_threads_db_url_nobody_answers_at_exits_18_naming_it_without_the_password() {
    let f = Fixture::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("postgres://agent:s3cret@127.0.0.1:{port}/threads");
    let started = std::time::Instant::now();
    let v = json_error(
        &mut f.cairn(&["--json", "--threads-db", &url, "thread", "new"]),
        18,
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let message = v["error"]["message"].as_str().expect("a message");
    assert!(
        message.contains(&format!("postgres://agent:***@127.0.0.1:{port}/threads")),
        "{message}"
    );
    assert!(!v.to_string().contains("s3cret"), "{v}");
}

#[test]
fn two_workspaces_share_their_threads_through_a_postgres_url() {
    let Some(url) = std::env::var("CAIRN_TEST_PG_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!(
            "skipped two_workspaces_share_their_threads_through_a_postgres_url: CAIRN_TEST_PG_URL is not set (scripts/test sets it)"
        );
        return;
    };
    let id = format!("cli-{}", std::process::id());
    let a = Fixture::new();
    a.json(&["--threads-db", &url, "thread", "new", "--id", &id]);
    let said = a.json(&[
        "--threads-db",
        &url,
        "thread",
        "append",
        &id,
        "--kind",
        "user",
        "--text",
        "hello from A",
    ]);
    assert!(said["checkpoint"]["snapshot_id"].is_string(), "{said}");
    // B names the database through the environment, as a fleet's machines would.
    let b = Fixture::new();
    b.snapshot("start");
    let out = b
        .cairn(&["--json", "thread", "log", &id])
        .env("CAIRN_THREADS_DB", &url)
        .output()
        .expect("run cairn");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(log["entries"][0]["text"], "hello from A", "{log}");
}

/// How many snapshots the workspace's store lists.
fn snapshot_count(f: &Fixture) -> usize {
    f.json(&["list"])["snapshots"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0)
}

#[test]
fn a_fork_into_the_directory_holding_the_workspace_is_denied_and_deletes_nothing() {
    let f = Fixture::new();
    let (u1, _, _) = two_turns(&f);
    let parent = f.root.parent().expect("a parent").to_path_buf();
    std::fs::create_dir_all(parent.join("sibling")).expect("mkdir");
    std::fs::write(parent.join("sibling/s"), "s\n").expect("write");
    std::fs::write(parent.join("pfile"), "p\n").expect("write");
    let before = snapshot_count(&f);
    let into = parent.to_str().expect("utf8");
    for extra in ["--dry-run", "--yes"] {
        let e = json_error(
            &mut f.cairn(&[
                "--json", "fork", "chat", &u1, "--files", "--into", into, extra,
            ]),
            17,
        );
        assert_eq!(e["error"]["kind"], "DENIED", "{e}");
        let message = e["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("holds the source workspace"), "{message}");
    }
    assert!(exists(&parent.join("sibling/s")) && exists(&parent.join("pfile")));
    assert!(exists(&f.path("turn2.txt")) && exists(&f.path("src/main.rs")));
    assert!(
        std::fs::read_dir(f.home.join("stores"))
            .map(|d| d.count())
            .ok()
            == Some(1),
        "no store was made for the parent"
    );
    assert_eq!(snapshot_count(&f), before, "no snapshot taken or lost");
}

#[test]
fn a_fork_into_the_store_is_denied_and_keeps_every_snapshot_and_the_thread() {
    let f = Fixture::new();
    let (u1, _, _) = two_turns(&f);
    let before = snapshot_count(&f);
    assert!(before > 0);
    let store = f.store();
    for into in ["objects", "", "threads.db"] {
        let target = store.join(into);
        let e = json_error(
            &mut f.cairn(&[
                "--json",
                "fork",
                "chat",
                &u1,
                "--files",
                "--into",
                target.to_str().expect("utf8"),
                "--yes",
            ]),
            17,
        );
        assert_eq!(e["error"]["kind"], "DENIED", "{into}: {e}");
    }
    assert!(
        std::fs::read_dir(f.home.join("stores"))
            .map(|d| d.count())
            .ok()
            == Some(1)
    );
    assert_eq!(snapshot_count(&f), before);
    assert_eq!(active_len(&f, "chat"), Some(5));
    f.cairn(&["verify"]).assert().success();
}

#[test]
fn a_fork_into_an_unrelated_non_empty_directory_is_denied_unless_forced() {
    let f = Fixture::new();
    let (u1, _, _) = two_turns(&f);
    let exp = f.root.with_file_name("experiment");
    std::fs::create_dir_all(&exp).expect("mkdir");
    std::fs::write(exp.join("notes.md"), "someone's work\n").expect("write");
    let into = exp.to_str().expect("utf8");
    for extra in ["--dry-run", "--yes"] {
        let e = json_error(
            &mut f.cairn(&[
                "--json", "fork", "chat", &u1, "--files", "--into", into, extra,
            ]),
            17,
        );
        let message = e["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("not empty")
                && message.contains("notes.md")
                && message.contains("--force"),
            "{message}"
        );
    }
    assert!(exists(&exp.join("notes.md")));
    let dry = f.json(&[
        "fork",
        "chat",
        &u1,
        "--files",
        "--into",
        into,
        "--force",
        "--dry-run",
    ]);
    assert!(
        dry["files"]["restore"]["deleted"]
            .as_array()
            .is_some_and(|d| d.iter().any(|p| p == "notes.md")),
        "the forced dry run lists what it would replace: {dry}"
    );
    assert!(exists(&exp.join("notes.md")));
    f.json(&[
        "fork", "chat", &u1, "--files", "--into", into, "--force", "--yes", "--new-id", "exp",
    ]);
    assert!(!exists(&exp.join("notes.md")));
    assert!(exists(&exp.join("src/main.rs")));
    // A workspace of the thread's family is not someone else's: forking into it again needs
    // no --force.
    std::fs::write(exp.join("later.txt"), "x\n").expect("write");
    f.json(&["fork", "chat", &u1, "--files", "--into", into, "--yes"]);
    assert!(!exists(&exp.join("later.txt")));
}

#[test]
fn a_fork_makes_the_thread_id_its_plan_named() {
    let f = Fixture::new();
    let (u1, _, _) = two_turns(&f);
    let into = f.root.with_file_name("fork-plan");
    let out = f
        .cairn(&[
            "fork",
            "chat",
            &u1,
            "--files",
            "--into",
            into.to_str().expect("utf8"),
            "--yes",
        ])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let id_after = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(" as ").next())
            .map(str::to_string)
    };
    let planned = id_after("plan: fork thread");
    let made = id_after("forked thread");
    assert!(planned.is_some(), "{text}");
    assert_eq!(planned, made, "{text}");
    assert!(f
        .json(&["thread", "list"])
        .to_string()
        .contains(made.as_deref().unwrap_or("-")));
}

#[test]
fn an_empty_thread_database_file_is_corrupt_and_never_taken_as_a_new_one() {
    let f = Fixture::new();
    let (_, _, _) = two_turns(&f);
    let db = f.store().join("threads.db");
    std::fs::write(&db, b"").expect("truncate");
    let e = json_error(&mut f.cairn(&["--json", "thread", "list"]), 19);
    assert_eq!(e["error"]["kind"], "CORRUPT", "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("empty")),
        "{e}"
    );
    assert_eq!(
        std::fs::metadata(&db).map(|m| m.len()).ok(),
        Some(0),
        "left as found"
    );
}

/// Forks `chat` at `at` with its files into `<tmp>/fork` as thread `side`; returns the directory.
fn fork_side_into_a_directory(f: &Fixture, at: &str) -> PathBuf {
    let into = f.root.with_file_name("fork");
    let into_s = into.to_str().expect("utf8");
    f.json(&[
        "fork", "chat", at, "--files", "--into", into_s, "--new-id", "side", "--yes",
    ]);
    into
}

/// `cairn -C DIR --json info`.
fn info_in(f: &Fixture, dir: &std::path::Path) -> Value {
    let out = f
        .cairn_in(dir, &["--json", "info"])
        .output()
        .expect("run cairn info");
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

#[test]
fn thread_log_all_prints_the_cut_legend_only_when_something_was_cut() {
    let f = Fixture::new();
    let (_, end1, _) = two_turns(&f);
    let legend = "(x: off the active branch, cut by a rewind)";
    f.cairn(&["thread", "log", "chat", "--all"])
        .assert()
        .success()
        .stdout(predicate::str::contains(legend).not());
    f.json(&["rewind", "chat", &end1]);
    f.cairn(&["thread", "log", "chat", "--all"])
        .assert()
        .success()
        .stdout(predicate::str::contains(legend));
}

#[test]
fn thread_append_says_the_entry_it_appended_is_on_the_active_branch() {
    let f = Fixture::new();
    f.json(&["thread", "new", "--id", "chat"]);
    let v = f.json(&["thread", "append", "chat", "--kind", "user", "--text", "hi"]);
    assert_eq!(v["entry"]["on_active_branch"], true, "{v}");
    let again = f.json(&[
        "thread", "append", "chat", "--kind", "note", "--text", "n", "--key", "k",
    ]);
    let repeated = f.json(&[
        "thread", "append", "chat", "--kind", "note", "--text", "n", "--key", "k",
    ]);
    assert_eq!(again["entry"]["on_active_branch"], true);
    assert_eq!(repeated["repeated"], true);
    assert_eq!(repeated["entry"]["on_active_branch"], true);
}

#[test]
fn a_thread_that_is_not_there_is_not_found_naming_cli_commands_not_library_calls() {
    let f = Fixture::new();
    f.json(&["thread", "new", "--id", "chat"]);
    for args in [
        vec!["--json", "thread", "log", "nope"],
        vec!["--json", "thread", "append", "nope", "--kind", "note"],
        vec!["--json", "rewind", "nope", "e_1234"],
        vec!["--json", "rewind", "nope"],
        vec!["--json", "fork", "nope", "e_1234"],
    ] {
        let v = json_error(&mut f.cairn(&args), 12);
        let message = v["error"]["message"].as_str().expect("message");
        assert!(
            message.contains("`cairn thread list`"),
            "{args:?}: {message}"
        );
        assert!(!message.contains("create_thread"), "{args:?}: {message}");
        assert!(!message.contains("threads()"), "{args:?}: {message}");
    }
}

#[test]
fn rewind_with_no_entry_lists_the_active_branch_with_files_marks_and_the_checkpoints() {
    let f = Fixture::new();
    let (u1, end1, u2) = two_turns(&f);
    let out = f
        .cairn(&["rewind", "chat"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.contains(&format!("{u1}  user       turn one [files]")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{u2}  user       turn two [files]")),
        "{text}"
    );
    assert!(text.contains(&end1), "{text}");
    assert!(!text.contains("checkpoints ("), "no checkpoint yet: {text}");
    // After a rewind with files its Before rewind checkpoint is listed too.
    f.json(&["rewind", "chat", &end1, "--files", "--yes"]);
    let v = f.json(&["rewind", "chat"]);
    assert_eq!(v["entries"].as_array().map(Vec::len), Some(3));
    assert_eq!(v["checkpoints"][0]["label"], "Before rewind");
    // Flags that need a point are a usage error without one.
    f.cairn(&["rewind", "chat", "--files", "--dry-run"])
        .assert()
        .code(2);
}

#[test]
fn rewinding_to_the_before_rewind_checkpoint_brings_back_the_files_and_the_conversation() {
    let f = Fixture::new();
    let (_, end1, _) = two_turns(&f);
    let r = f.json(&["rewind", "chat", &end1, "--files", "--yes"]);
    assert!(!exists(&f.path("turn2.txt")));
    let cp = r["files"]["before_rewind_checkpoint_id"]
        .as_str()
        .expect("a Before rewind checkpoint")
        .to_string();
    assert_eq!(active_len(&f, "chat"), Some(3));
    // A unique prefix of the checkpoint's id names it as well.
    let prefix = &cp[..cp.len() - 4];
    let plan = f.json(&["rewind", "chat", prefix, "--files", "--dry-run"]);
    assert_eq!(plan["dry_run"], true);
    assert!(!exists(&f.path("turn2.txt")), "a dry run changes nothing");
    let back = f.json(&["rewind", "chat", &cp, "--files", "--yes"]);
    assert_eq!(f.read("turn2.txt").as_deref(), Some("2\n"));
    assert_eq!(active_len(&f, "chat"), Some(5));
    assert!(back["files"]["before_rewind_checkpoint_id"].is_string());
}

#[test]
fn rewind_of_a_checkpoint_with_no_memory_restores_only_the_files() {
    let f = Fixture::new();
    let (_, _, _) = two_turns(&f);
    let log = f.json(&["thread", "log", "chat"]);
    let cp = log["entries"][0]["checkpoint"]["checkpoint_id"]
        .as_str()
        .expect("the first message's checkpoint")
        .to_string();
    // turn2.txt was written after the newest checkpoint (turn two's): no checkpoint says whose
    // edit it is, so by default the restore refuses it.
    let v = json_error(
        &mut f.cairn(&["--json", "rewind", "chat", &cp, "--no-memory", "--yes"]),
        20,
    );
    assert_eq!(v["error"]["kind"], "CONFLICT");
    assert!(v["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("turn2.txt") && m.contains("--on-drift")));
    assert!(exists(&f.path("turn2.txt")), "nothing was changed");
    let v = f.json(&[
        "rewind",
        "chat",
        &cp,
        "--no-memory",
        "--yes",
        "--on-drift",
        "overwrite",
    ]);
    assert_eq!(v["conversation"]["cut"].as_array().map(Vec::len), Some(0));
    assert!(!exists(&f.path("turn1.txt")));
    assert!(!exists(&f.path("turn2.txt")));
    assert_eq!(active_len(&f, "chat"), Some(5));
    // An unknown checkpoint is NOT_FOUND.
    json_error(
        &mut f.cairn(&[
            "--json",
            "rewind",
            "chat",
            "cp_ffffffff",
            "--no-memory",
            "--yes",
        ]),
        12,
    );
}

#[test]
fn after_a_fork_into_a_directory_commands_there_find_the_forks_thread() {
    let f = Fixture::new();
    let (u1, _, _) = two_turns(&f);
    let into = fork_side_into_a_directory(&f, &u1);
    let out = f
        .cairn_in(&into, &["--json", "thread", "log", "side"])
        .output()
        .expect("run cairn");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(log["thread"]["id"], "side");
    assert_eq!(
        info_in(&f, &into)["threads_db"],
        f.json(&["info"])["threads_db"]
    );
}

#[test]
fn a_threads_db_file_planted_as_a_symlink_in_a_store_is_corrupt_and_not_followed() {
    let f = Fixture::new();
    f.json(&["thread", "new", "--id", "chat"]);
    let store = f.store();
    let elsewhere = f.root.with_file_name("elsewhere");
    std::fs::write(&elsewhere, "/tmp/not-the-db\n").expect("write");
    std::os::unix::fs::symlink(&elsewhere, store.join("threads-db")).expect("symlink");
    json_error(&mut f.cairn(&["--json", "thread", "log", "chat"]), 19);
}

#[test]
fn a_fork_dry_run_into_an_existing_store_leaves_no_copied_pack_or_index_behind() {
    let f = Fixture::new();
    let (u1, _, u2) = two_turns(&f);
    let into = fork_side_into_a_directory(&f, &u1);
    let into_s = into.to_str().expect("utf8");
    let store = PathBuf::from(
        info_in(&f, &into)["store"]
            .as_str()
            .expect("the fork's store"),
    );
    let listing = |dir: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(store.join(dir))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    let (packs, large, snapshots) = (
        listing("objects/packs"),
        listing("objects/large"),
        listing("snapshots"),
    );
    // Forking again from later (its checkpoint is not in the fork's store yet), dry runs only.
    let dry = f.json(&[
        "fork",
        "chat",
        &u2,
        "--files",
        "--into",
        into_s,
        "--dry-run",
    ]);
    assert_eq!(dry["dry_run"], true);
    assert!(
        !dry["snapshots_copied"].as_array().expect("list").is_empty(),
        "the dry run had to copy: {dry}"
    );
    assert_eq!(listing("snapshots"), snapshots);
    assert_eq!(
        listing("objects/packs"),
        packs,
        "a copied pack or index was left"
    );
    assert_eq!(listing("objects/large"), large);
}

#[test]
fn a_thread_database_inside_the_workspace_is_kept_out_of_checkpoints_and_rewinds_with_files_work() {
    // Issue 34.5: `--threads-db` inside the workspace changed under every rewind, which
    // refused as CONFLICT; an old checkpoint holding it would have written over the threads.
    let f = Fixture::new();
    let db = f.path("threads.db");
    let db = db.to_str().expect("a UTF-8 path");
    let j = |args: &[&str]| f.json(&[&["--threads-db", db], args].concat());
    let append = |kind: &str, text: &str| -> Value {
        j(&["thread", "append", "chat", "--kind", kind, "--text", text])
    };
    j(&["thread", "new", "--id", "chat"]);
    append("user", "turn one");
    f.write("turn1.txt", "1\n");
    let end1 = append("assistant", "did one");
    let u2 = append("user", "turn two");
    f.write("turn2.txt", "2\n");
    append("assistant", "did two");
    let snap = u2["checkpoint"]["snapshot_id"]
        .as_str()
        .expect("a checkpoint");
    let shown = j(&["show", snap]).to_string();
    assert!(shown.contains("turn1.txt"), "{shown}");
    assert!(
        !shown.contains("threads.db"),
        "the database is in the checkpoint: {shown}"
    );
    let end1 = end1["entry"]["id"].as_str().expect("id");
    let plan = j(&["rewind", "chat", end1, "--files", "--dry-run"]);
    let restore = &plan["files"]["restore"];
    assert_eq!(
        restore["deleted"],
        serde_json::json!(["turn2.txt"]),
        "{plan}"
    );
    assert_eq!(restore["restored"], serde_json::json!([]), "{plan}");
    let kept: Vec<_> = restore["kept"]
        .as_array()
        .expect("kept")
        .iter()
        .map(|k| {
            (
                k["path"].as_str().unwrap_or(""),
                k["reason"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(kept.contains(&("threads.db", "excluded")), "{plan}");
    let v = j(&["rewind", "chat", end1, "--files", "--yes"]);
    assert_eq!(v["dry_run"], false, "{v}");
    assert!(!exists(&f.path("turn2.txt")));
    assert!(exists(&f.path("threads.db")));
    let log = j(&["thread", "log", "chat"]);
    assert_eq!(log["entries"].as_array().map(Vec::len), Some(2), "{log}");
}

#[test]
fn a_plain_restore_leaves_a_thread_database_inside_the_workspace_alone() {
    let f = Fixture::new();
    let db = f.path("threads.db");
    let db = db.to_str().expect("a UTF-8 path");
    let j = |args: &[&str]| f.json(&[&["--threads-db", db], args].concat());
    j(&["thread", "new", "--id", "chat"]);
    let snap = j(&["snapshot", "--label", "before"])["id"]
        .as_str()
        .expect("an id")
        .to_string();
    j(&[
        "thread",
        "append",
        "chat",
        "--kind",
        "note",
        "--text",
        "after the snapshot",
    ]);
    let v = j(&["restore", &snap, "--yes"]);
    assert_eq!(v["restored"], serde_json::json!([]), "{v}");
    assert_eq!(v["deleted"], serde_json::json!([]), "{v}");
    assert_eq!(v["kept"][0]["path"], "threads.db", "{v}");
    assert_eq!(v["kept"][0]["reason"], "excluded", "{v}");
    let log = j(&["thread", "log", "chat"]);
    assert_eq!(
        log["entries"].as_array().map(Vec::len),
        Some(1),
        "the note survives: {log}"
    );
}

/// Every path under `dir` (recursively), as text, sorted: a picture of what is there.
fn listing(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            // SQLite's side files come and go with any read of the thread database.
            let name = p.to_string_lossy().into_owned();
            if name.ends_with("-wal") || name.ends_with("-shm") || name.ends_with("-holders") {
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(p.clone());
            }
            out.push(name);
        }
    }
    out.sort();
    out
}

#[test]
fn a_fork_dry_run_leaves_the_file_system_and_the_data_directory_as_they_were() {
    // Issue 53.8: a dry run made NEW, NEW/x and a store in the data directory, and an empty
    // `.cairn` in the workspace for `--into WS/.cairn/...`.
    let f = Fixture::new();
    let (u1, _, _) = two_turns(&f);
    let top = f.root.parent().expect("a parent").to_path_buf();
    let nested = top.join("NEW/x/y");
    let inside = f.root.join(".cairn/fork");
    for into in [&nested, &inside] {
        let before = listing(&top);
        let into_s = into.to_str().expect("utf8");
        let args = [
            "fork",
            "chat",
            &u1,
            "--files",
            "--into",
            into_s,
            "--dry-run",
        ];
        let dry = f.json(&args);
        assert_eq!(dry["dry_run"], true, "{dry}");
        assert!(
            dry["files"]["restore"].is_object(),
            "the plan is shown: {dry}"
        );
        // And the human form, which opens the directory the same way.
        f.cairn(&args).assert().success();
        assert_eq!(listing(&top), before, "a dry run into {into_s} left things");
    }
}

#[test]
fn a_fork_dry_run_shows_the_thread_id_the_fork_will_get_or_none() {
    // Issue 53.8: the dry run showed a random id the fork did not get.
    let f = Fixture::new();
    let (u1, _, _) = two_turns(&f);
    let dry = f.json(&["fork", "chat", &u1, "--dry-run"]);
    assert!(dry["thread_id"].is_null(), "{dry}");
    assert!(
        dry["thread_id_note"]
            .as_str()
            .is_some_and(|n| n.contains("--new-id")),
        "{dry}"
    );
    f.cairn(&["fork", "chat", &u1, "--dry-run"])
        .assert()
        .success()
        .stdout(predicate::str::contains("pass --new-id to choose it"));
    let named = f.json(&["fork", "chat", &u1, "--new-id", "side", "--dry-run"]);
    assert_eq!(named["thread_id"], "side", "{named}");
    let made = f.json(&["fork", "chat", &u1, "--new-id", "side"]);
    assert_eq!(made["thread_id"], named["thread_id"]);
}

#[test]
fn entry_texts_and_checkpoint_labels_print_escaped_in_thread_log_and_the_rewind_listing() {
    // Issue 53.9: an entry's text and a hook checkpoint's label (the agent's tool call id)
    // reached the terminal with raw ESC and BEL.
    use crate::agents::{hook, prompt, tool};
    use crate::files::{assert_escaped, HOSTILE};
    let f = Fixture::new();
    std::fs::write(f.root.with_file_name("transcript.jsonl"), "{}\n").expect("transcript");
    assert_eq!(hook(&f, &prompt(&f, "s1", HOSTILE), &[]).0, Some(0));
    assert_eq!(hook(&f, &tool(&f, "s1", "Write", HOSTILE), &[]).0, Some(0));
    for args in [
        &["thread", "log", "claude-s1"][..],
        &["rewind", "claude-s1"],
    ] {
        let out = f.cairn(args).output().expect("run");
        assert!(out.status.success(), "{args:?}");
        assert_escaped(&String::from_utf8_lossy(&out.stdout), &format!("{args:?}"));
    }
}

#[test]
fn the_rewind_listing_tells_two_tool_checkpoints_apart() {
    // Issue 53, behaviour audit: labels were cut to 12 characters, so two tool checkpoints
    // both read `toolu_01Audi…`.
    use crate::agents::{hook, prompt, tool};
    let f = Fixture::new();
    std::fs::write(f.root.with_file_name("transcript.jsonl"), "{}\n").expect("transcript");
    assert_eq!(hook(&f, &prompt(&f, "s1", "go"), &[]).0, Some(0));
    let (a, b) = (
        "toolu_01AuditFirstCallAAAAAAAA",
        "toolu_01AuditSecondCallBBBBBBB",
    );
    assert_eq!(hook(&f, &tool(&f, "s1", "Write", a), &[]).0, Some(0));
    f.write("one.txt", "1\n");
    assert_eq!(hook(&f, &tool(&f, "s1", "Write", b), &[]).0, Some(0));
    let out = f.cairn(&["rewind", "claude-s1"]).output().expect("run");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains(a) && text.contains(b), "{text}");
}

#[test]
fn rewinding_to_a_before_rewind_checkpoint_reports_the_entries_that_came_back() {
    // Issue 53, behaviour audit: it said "0 entries taken off" and not that the cut entries
    // came back.
    let f = Fixture::new();
    let (_, end1, _) = two_turns(&f);
    let r = f.json(&["rewind", "chat", &end1, "--files", "--yes"]);
    let cut = r["conversation"]["cut"].clone();
    assert_eq!(cut.as_array().map(Vec::len), Some(2), "{r}");
    let cp = r["files"]["before_rewind_checkpoint_id"]
        .as_str()
        .expect("a Before rewind checkpoint")
        .to_string();
    let plan = f.json(&["rewind", "chat", &cp, "--files", "--dry-run"]);
    assert_eq!(plan["conversation"]["restored"], cut, "{plan}");
    let out = f
        .cairn(&["rewind", "chat", &cp, "--files", "--yes"])
        .output()
        .expect("run");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2 entries put back on the active branch"),
        "{text}"
    );
    assert!(!text.contains("0 entries taken"), "{text}");
    let log = f.json(&["thread", "log", "chat"]);
    assert_eq!(log["entries"].as_array().map(Vec::len), Some(5));
}

// Issue 61 (what a newcomer tripped on): a rewind that stales one memory item says "1 item",
// not "1 items".
#[test]
fn a_rewind_that_stales_one_memory_item_says_so_in_the_singular() {
    let f = Fixture::new();
    let (_, end1, u2) = two_turns(&f);
    let threads =
        cairn_rewind::Threads::open_in_store(f.store(), cairn_rewind::ThreadsOptions::default())
            .expect("the thread database");
    threads
        .add_memory(
            &cairn_rewind::ThreadId::new("chat"),
            cairn_rewind::NewMemory {
                kind: cairn_rewind::MemoryKind::Item,
                text: "turn two asked for turn2.txt".into(),
                payload: Vec::new(),
                stands_on: vec![cairn_rewind::EntryId::new(&u2)],
            },
        )
        .expect("a memory item");
    drop(threads);
    let out = f
        .cairn(&["rewind", "chat", &end1, "--dry-run"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).expect("utf-8");
    assert!(out.contains("memory: 1 item stale"), "{out}");
}
