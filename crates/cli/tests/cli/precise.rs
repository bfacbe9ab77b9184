//! Precise restores (issue 31): chosen paths only, others' edits protected, rewinds other
//! tools can see.

use crate::{json_error, Fixture};
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// What a path is: its kind, content (a link's target), mode and mtime (ns).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    kind: &'static str,
    content: Vec<u8>,
    mode: u32,
    mtime_ns: i128,
}

/// Every path under `root` (relative, `/`-separated) and what it is.
fn walk(root: &Path) -> BTreeMap<String, Seen> {
    fn go(root: &Path, dir: &Path, out: &mut BTreeMap<String, Seen>) {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .expect("read a directory")
            .map(|e| e.expect("an entry").path())
            .collect();
        names.sort();
        for p in names {
            let m = std::fs::symlink_metadata(&p).expect("stat");
            let rel = p
                .strip_prefix(root)
                .expect("under the root")
                .to_string_lossy()
                .into_owned();
            let (kind, content) = if m.is_dir() {
                ("dir", Vec::new())
            } else if m.file_type().is_symlink() {
                (
                    "link",
                    std::fs::read_link(&p)
                        .expect("readlink")
                        .into_os_string()
                        .into_encoded_bytes(),
                )
            } else {
                ("file", std::fs::read(&p).expect("read"))
            };
            out.insert(
                rel,
                Seen {
                    kind,
                    content,
                    mode: m.mode() & 0o7777,
                    mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
                },
            );
            if m.is_dir() {
                go(root, &p, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    go(root, root, &mut out);
    out
}

/// Whether `path` is one of `chosen`, under one, or a directory above one.
fn touched_by(path: &str, chosen: &[&str]) -> bool {
    chosen.iter().any(|c| {
        path == *c || path.starts_with(&format!("{c}/")) || c.starts_with(&format!("{path}/"))
    })
}

/// The paths outside `chosen`, with everything about them (mtimes included).
fn outside(all: &BTreeMap<String, Seen>, chosen: &[&str]) -> BTreeMap<String, Seen> {
    all.iter()
        .filter(|(p, _)| !touched_by(p, chosen))
        .map(|(p, s)| (p.clone(), s.clone()))
        .collect()
}

/// The paths at or under `chosen`, without their mtimes (a restore writes them anew).
fn inside(
    all: &BTreeMap<String, Seen>,
    chosen: &[&str],
) -> BTreeMap<String, (String, Vec<u8>, u32)> {
    all.iter()
        .filter(|(p, _)| {
            chosen
                .iter()
                .any(|c| *p == c || p.starts_with(&format!("{c}/")))
        })
        .map(|(p, s)| (p.clone(), (s.kind.to_string(), s.content.clone(), s.mode)))
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A workspace with a snapshot `base`, then edits inside and outside of `a` and `src/main.rs`.
fn edited() -> (Fixture, String) {
    let f = Fixture::new();
    f.write("a/one.txt", "one\n");
    f.write("a/sub/two.txt", "two\n");
    f.write("b/three.txt", "three\n");
    f.write("keep/x.txt", "x\n");
    let base = f.snapshot("base");
    f.write("src/main.rs", "fn main() { edited(); }\n");
    f.write("a/one.txt", "one, edited\n");
    std::fs::remove_file(f.path("a/sub/two.txt")).expect("rm");
    f.write("a/new.txt", "new\n");
    f.write("b/three.txt", "three, edited\n");
    f.write("keep/x.txt", "x, edited\n");
    f.write("extra.txt", "extra\n");
    std::fs::remove_file(f.path("README.md")).expect("rm");
    (f, base)
}

const CHOSEN: [&str; 2] = ["a", "src/main.rs"];

#[test]
fn a_restore_of_chosen_paths_touches_nothing_else_and_its_safety_snapshot_undoes_exactly_it() {
    let (f, base) = edited();
    let before = walk(&f.root);

    // The dry run plans those paths only.
    let dry = f.json(&["restore", "base", "--dry-run", "--", "a/", "./src/main.rs"]);
    assert_eq!(strings(&dry["paths"]), CHOSEN, "{dry}");
    let planned: Vec<String> = strings(&dry["restored"])
        .into_iter()
        .chain(strings(&dry["deleted"]))
        .collect();
    assert!(!planned.is_empty());
    for p in &planned {
        assert!(
            touched_by(p, &CHOSEN),
            "{p} is outside the chosen paths: {dry}"
        );
    }
    assert_eq!(walk(&f.root), before, "a dry run changes nothing");
    // Counted as unchanged: base's files outside the paths (README.md, b/three.txt, keep/x.txt).
    assert_eq!(dry["unchanged"], 3, "{dry}");

    let v = f.json(&["restore", "base", "--yes", "--", "a", "src/main.rs"]);
    assert_eq!(strings(&v["paths"]), CHOSEN, "{v}");
    assert_eq!(v["restored"], dry["restored"]);
    assert_eq!(v["deleted"], dry["deleted"]);
    assert_eq!(v["operations"].as_u64(), Some(planned.len() as u64), "{v}");
    let after = walk(&f.root);
    // Outside: every path as it was, mtimes included.
    assert_eq!(outside(&after, &CHOSEN), outside(&before, &CHOSEN));
    assert!(after.contains_key("extra.txt") && !after.contains_key("README.md"));
    // Inside: as the snapshot holds them.
    assert_eq!(f.read("a/one.txt").as_deref(), Some("one\n"));
    assert_eq!(f.read("a/sub/two.txt").as_deref(), Some("two\n"));
    assert!(!crate::exists(&f.path("a/new.txt")));
    assert_eq!(f.read("src/main.rs").as_deref(), Some("fn main() {}\n"));
    // The tree hashes agree: a snapshot now has `a` as `base` has it, and `b`, `keep` as the
    // edits left them.
    let now = f.snapshot("now");
    let diff = f.json(&["diff", &base, &now]);
    let changed: Vec<String> = diff["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .filter_map(|c| c["path"].as_str().map(str::to_string))
        .collect();
    assert!(
        changed.iter().all(|p| !touched_by(p, &CHOSEN)),
        "nothing under the chosen paths differs from base: {changed:?}"
    );
    for p in ["b/three.txt", "keep/x.txt", "extra.txt", "README.md"] {
        assert!(
            changed.iter().any(|c| c == p),
            "{p} still differs: {changed:?}"
        );
    }

    // The undo it names is a restore of its safety snapshot with the same paths.
    let safety = v["safety_snapshot_id"].as_str().expect("a safety snapshot");
    let again = f.json(&["restore", "base", "--yes", "--", "a"]);
    assert_eq!(again["operations"], 0, "`a` is as base has it: {again}");
    // Someone edits outside after the restore: the undo leaves that edit alone.
    f.write("b/three.txt", "three, edited again\n");
    let later = walk(&f.root);
    let undo = f.json(&["restore", safety, "--yes", "--", "a", "src/main.rs"]);
    assert_eq!(strings(&undo["paths"]), CHOSEN);
    let undone = walk(&f.root);
    assert_eq!(inside(&undone, &CHOSEN), inside(&before, &CHOSEN));
    assert_eq!(outside(&undone, &CHOSEN), outside(&later, &CHOSEN));
    assert_eq!(
        f.read("b/three.txt").as_deref(),
        Some("three, edited again\n")
    );
}

#[test]
fn the_undo_command_of_a_path_restore_names_its_paths() {
    let (f, _) = edited();
    let out = f
        .cairn(&["restore", "base", "--yes", "--", "a", "src/main.rs"])
        .output()
        .expect("run");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("only   a, src/main.rs"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("undo with `cairn restore ") && l.ends_with(" -- a src/main.rs`")),
        "{text}"
    );
}

#[test]
fn a_whole_restore_of_the_safety_snapshot_also_undoes_a_path_restore_when_nothing_else_changed() {
    let (f, _) = edited();
    let before = walk(&f.root);
    let v = f.json(&["restore", "base", "--yes", "--", "a"]);
    let safety = v["safety_snapshot_id"].as_str().expect("a safety snapshot");
    let undo = f.json(&["restore", safety, "--yes"]);
    assert!(
        strings(&undo["restored"])
            .iter()
            .all(|p| touched_by(p, &["a"])),
        "{undo}"
    );
    assert_eq!(inside(&walk(&f.root), &["a"]), inside(&before, &["a"]));
    assert_eq!(outside(&walk(&f.root), &["a"]), outside(&before, &["a"]));
}

#[test]
fn a_chosen_path_neither_side_has_is_not_found_and_a_path_outside_the_root_a_usage_error() {
    let (f, _) = edited();
    let v = json_error(
        &mut f.cairn(&["--json", "restore", "base", "--yes", "--", "nope/typo.txt"]),
        12,
    );
    let m = v["error"]["message"].as_str().unwrap_or_default();
    assert!(m.contains("nope/typo.txt"), "{v}");
    let v = json_error(
        &mut f.cairn(&["--json", "restore", "base", "--yes", "--", "../elsewhere"]),
        11,
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("../elsewhere")),
        "{v}"
    );
    json_error(
        &mut f.cairn(&["--json", "restore", "base", "--yes", "--", "/etc/passwd"]),
        2,
    );
}

#[test]
fn a_chosen_path_that_only_the_snapshot_has_comes_back_with_its_directories() {
    let f = Fixture::new();
    f.write("deep/er/file.txt", "deep\n");
    f.write("deep/other.txt", "other\n");
    f.snapshot("base");
    std::fs::remove_dir_all(f.path("deep")).expect("rm");
    let v = f.json(&["restore", "base", "--yes", "--", "deep/er/file.txt"]);
    assert_eq!(f.read("deep/er/file.txt").as_deref(), Some("deep\n"));
    assert!(!crate::exists(&f.path("deep/other.txt")), "{v}");
}

/// A workspace with `base`, the agent's edits checkpointed as `cp2` (the files being left), then
/// someone else's edit of `b.txt` that no checkpoint has.
pub(crate) fn drifted() -> Fixture {
    let f = Fixture::new();
    f.write("a.txt", "a0\n");
    f.write("b.txt", "b0\n");
    f.snapshot("base");
    f.write("a.txt", "a1\n");
    f.write("b.txt", "b1\n");
    f.snapshot("cp2");
    f.write("b.txt", "b, by someone else\n");
    f
}

#[test]
fn a_restore_with_on_drift_refuse_names_the_edited_path_and_changes_nothing() {
    let f = drifted();
    let before = walk(&f.root);
    let v = json_error(
        &mut f.cairn(&["--json", "restore", "base", "--yes", "--on-drift", "refuse"]),
        20,
    );
    let m = v["error"]["message"].as_str().unwrap_or_default();
    assert!(m.contains("b.txt") && !m.contains("a.txt"), "{v}");
    assert!(m.contains("--on-drift keep"), "it says what to do: {v}");
    assert_eq!(walk(&f.root), before);
    // The dry run lists it as drifted, whatever the choice.
    let dry = f.json(&["restore", "base", "--dry-run", "--on-drift", "keep"]);
    assert_eq!(strings(&dry["drifted"]), ["b.txt"], "{dry}");
}

#[test]
fn a_restore_with_on_drift_keep_leaves_the_edited_path_and_restores_the_rest() {
    let f = drifted();
    let v = f.json(&["restore", "base", "--yes", "--on-drift", "keep"]);
    assert_eq!(strings(&v["drifted"]), ["b.txt"], "{v}");
    assert!(v["kept"].as_array().is_some_and(|k| k
        .iter()
        .any(|k| k["path"] == "b.txt" && k["reason"] == "drifted")));
    assert_eq!(f.read("a.txt").as_deref(), Some("a0\n"));
    assert_eq!(f.read("b.txt").as_deref(), Some("b, by someone else\n"));
}

#[test]
fn a_restore_with_on_drift_overwrite_restores_it_and_its_safety_snapshot_keeps_the_edit() {
    let f = drifted();
    let v = f.json(&["restore", "base", "--yes", "--on-drift", "overwrite"]);
    assert_eq!(strings(&v["drifted"]), ["b.txt"], "{v}");
    assert_eq!(f.read("b.txt").as_deref(), Some("b0\n"));
    let safety = v["safety_snapshot_id"].as_str().expect("a safety snapshot");
    f.json(&["restore", safety, "--yes", "--", "b.txt"]);
    assert_eq!(f.read("b.txt").as_deref(), Some("b, by someone else\n"));
    // Against an explicit reference that has the edit, nothing is drift.
    let v = f.json(&[
        "restore",
        "base",
        "--dry-run",
        "--on-drift",
        "refuse",
        "--reference",
        safety,
    ]);
    assert_eq!(strings(&v["drifted"]), Vec::<String>::new(), "{v}");
}

/// `cairn --json rewind chat CP --files --no-memory --yes MORE...`, expected to succeed.
fn rewind_files(f: &Fixture, cp: &str, more: &[&str]) -> Value {
    f.json(
        &[
            &["rewind", "chat", cp, "--files", "--no-memory", "--yes"],
            more,
        ]
        .concat(),
    )
}

/// A thread whose first message's checkpoint has `a0`, `b0`; the agent's work is checkpointed by
/// the second message; then someone else edits `b.txt`. Returns the first checkpoint's id.
fn drifted_thread(f: &Fixture) -> String {
    f.write("a.txt", "a0\n");
    f.write("b.txt", "b0\n");
    f.json(&["thread", "new", "--id", "chat"]);
    let u1 = f.json(&[
        "thread", "append", "chat", "--kind", "user", "--text", "one",
    ]);
    f.write("a.txt", "a1\n");
    f.write("b.txt", "b1\n");
    f.json(&[
        "thread", "append", "chat", "--kind", "user", "--text", "two",
    ]);
    f.write("b.txt", "b, by someone else\n");
    u1["entry"]["checkpoint"]["checkpoint_id"]
        .as_str()
        .expect("a checkpoint")
        .to_string()
}

#[test]
fn rewind_files_refuses_drift_by_default_and_keeps_or_overwrites_it_when_told() {
    let f = Fixture::new();
    let cp = drifted_thread(&f);
    let v = json_error(
        &mut f.cairn(&[
            "--json",
            "rewind",
            "chat",
            &cp,
            "--files",
            "--no-memory",
            "--yes",
        ]),
        20,
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("b.txt") && !m.contains("a.txt")),
        "{v}"
    );
    assert_eq!(f.read("a.txt").as_deref(), Some("a1\n"), "nothing changed");
    let v = rewind_files(&f, &cp, &["--on-drift", "keep"]);
    assert_eq!(strings(&v["files"]["restore"]["drifted"]), ["b.txt"], "{v}");
    assert_eq!(f.read("a.txt").as_deref(), Some("a0\n"));
    assert_eq!(f.read("b.txt").as_deref(), Some("b, by someone else\n"));
    let v = rewind_files(&f, &cp, &["--on-drift", "overwrite"]);
    assert_eq!(f.read("b.txt").as_deref(), Some("b0\n"), "{v}");
}

#[test]
fn rewind_files_of_chosen_paths_restores_only_them() {
    let f = Fixture::new();
    let cp = drifted_thread(&f);
    f.write("b.txt", "b1\n");
    f.json(&[
        "thread", "append", "chat", "--kind", "user", "--text", "three",
    ]);
    let before = walk(&f.root);
    let v = rewind_files(&f, &cp, &["--", "a.txt"]);
    assert_eq!(strings(&v["files"]["restore"]["paths"]), ["a.txt"], "{v}");
    assert_eq!(f.read("a.txt").as_deref(), Some("a0\n"));
    assert_eq!(
        outside(&walk(&f.root), &["a.txt"]),
        outside(&before, &["a.txt"])
    );
}

#[test]
fn events_follow_sees_a_rewind_made_by_another_process_within_a_second() {
    use std::io::BufRead as _;
    use std::time::{Duration, Instant};
    let f = Fixture::new();
    let cp = drifted_thread(&f);
    let mut follower = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"))
        .arg("-C")
        .arg(&f.root)
        .args(["--json", "events", "--follow"])
        .env_remove("CAIRN_THREADS_DB")
        .env_remove("CAIRN_REMOTE")
        .env_remove("CAIRN_STORE")
        .env("CAIRN_HOME", &f.home)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start cairn events --follow");
    let stdout = follower.stdout.take().expect("its stdout");
    let (tx, rx) = std::sync::mpsc::channel::<(Instant, Value)>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let v: Value = serde_json::from_str(&line).expect("each line one JSON object");
            if tx.send((Instant::now(), v)).is_err() {
                return;
            }
        }
    });
    // The history comes first, up to the newest event the log has now.
    let history = f.cairn(&["--json", "events"]).output().expect("run");
    let last_cursor = String::from_utf8_lossy(&history.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok()?["cursor"].as_i64())
        .max()
        .expect("the thread's events");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, v) = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the history within the deadline");
        if v["cursor"].as_i64() == Some(last_cursor) {
            break;
        }
    }
    while rx.try_recv().is_ok() {}
    // Another process rewinds.
    let v = rewind_files(&f, &cp, &["--on-drift", "keep"]);
    let done = Instant::now();
    let rewind_id = v["rewind_id"].as_str().expect("a rewind id").to_string();
    let deadline = done + Duration::from_secs(10);
    let (seen, event) = loop {
        let (at, e) = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the rewind's event within the deadline");
        if e["kind"] == "rewind_completed" {
            break (at, e);
        }
    };
    let latency = seen.saturating_duration_since(done);
    println!("events --follow saw the rewind {latency:?} after the rewinding process ended");
    assert_eq!(event["data"]["rewind_id"], rewind_id, "{event}");
    assert_eq!(event["thread_id"], "chat");
    assert!(event["cursor"].as_i64() > Some(last_cursor));
    assert!(latency < Duration::from_secs(1), "{latency:?}");
    follower.kill().expect("stop the follower");
    let _ = follower.wait();

    // --since resumes after a cursor; the rest is the same log.
    let all = f.cairn(&["--json", "events"]).output().expect("run");
    let lines: Vec<Value> = String::from_utf8_lossy(&all.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    let kinds: Vec<&str> = lines.iter().filter_map(|l| l["kind"].as_str()).collect();
    assert!(kinds.contains(&"rewind_started") && kinds.contains(&"rewind_completed"));
    // The rewind's files are a restore_applied event of its own, between the two.
    let applied = lines
        .iter()
        .find(|l| l["kind"] == "restore_applied")
        .expect("the rewind's restore");
    assert_eq!(applied["data"]["rewind_id"], rewind_id, "{applied}");
    assert_eq!(applied["thread_id"], "chat");
    let since = f
        .cairn(&["--json", "events", "--since", &last_cursor.to_string()])
        .output()
        .expect("run");
    let after: Vec<Value> = String::from_utf8_lossy(&since.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    assert!(after
        .iter()
        .all(|e| e["cursor"].as_i64() > Some(last_cursor)));
    assert_eq!(
        after.len(),
        lines
            .iter()
            .filter(|e| e["cursor"].as_i64() > Some(last_cursor))
            .count()
    );
}

#[test]
fn init_on_rewind_registers_a_command_that_gets_each_completed_rewind_on_stdin() {
    let f = Fixture::new();
    let cp = drifted_thread(&f);
    let seen = f.root.with_file_name("on-rewind.jsonl");
    let cmd = format!("cat >> '{}'; echo >> '{}'", seen.display(), seen.display());
    let v = f.json(&["init", "claude-code", "--on-rewind", &cmd]);
    assert_eq!(v["on_rewind"], serde_json::json!([cmd]), "{v}");
    let config = f.path(".claude/cairn.json");
    assert!(crate::exists(&config));
    // Idempotent.
    let again = f.json(&["init", "claude-code", "--on-rewind", &cmd]);
    assert_eq!(again["on_rewind"], serde_json::json!([cmd]));

    let r = rewind_files(&f, &cp, &["--on-drift", "keep"]);
    let text = std::fs::read_to_string(&seen).expect("the command ran");
    let event: Value = serde_json::from_str(text.trim()).expect("the event, as JSON");
    assert_eq!(event["kind"], "rewind_completed");
    assert_eq!(event["data"]["rewind_id"], r["rewind_id"]);
    assert_eq!(event["thread_id"], "chat");

    // A failing command is reported, and the rewind stands.
    f.json(&["init", "claude-code", "--remove"]);
    assert!(crate::exists(&config));
    f.json(&["init", "claude-code", "--on-rewind", "exit 3"]);
    let out = f
        .cairn(&[
            "--json",
            "rewind",
            "chat",
            &cp,
            "--files",
            "--no-memory",
            "--yes",
            "--on-drift",
            "keep",
        ])
        .output()
        .expect("run");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("on-rewind command `exit 3` failed"));
    let lines = std::fs::read_to_string(&seen)
        .expect("read")
        .lines()
        .count();
    assert_eq!(lines, 1, "--remove took the first command out");
}

/// The attributions of `path` in a `diff --attribute --json`: (tool_use_id, tool_name, agent_id).
fn attributed(diff: &Value, path: &str) -> Vec<(String, String, String)> {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    diff["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .find(|c| c["path"] == path)
        .unwrap_or_else(|| panic!("{path} is not among the changes: {diff}"))["attribution"]
        .as_array()
        .expect("an attribution")
        .iter()
        .map(|a| (s(&a["tool_use_id"]), s(&a["tool_name"]), s(&a["agent_id"])))
        .collect()
}

#[test]
fn diff_attribute_names_the_tool_call_or_subagent_that_changed_each_path() {
    use crate::agents::{hook, prompt, tool};
    let f = Fixture::new();
    let ok = |doc: &Value| {
        let (code, _, err) = hook(&f, doc, &[]);
        assert_eq!(code, Some(0), "{err}");
    };
    ok(&prompt(&f, "s1", "make the app"));
    ok(&tool(&f, "s1", "Edit", "toolu_1"));
    f.write("a.txt", "by the edit\n");
    let mut sub = tool(&f, "s1", "Write", "toolu_2");
    sub["agent_id"] = "agent-7".into();
    ok(&sub);
    f.write("b.txt", "by the subagent\n");
    ok(&tool(&f, "s1", "Bash", "toolu_3"));
    let sh = std::process::Command::new("sh")
        .args(["-c", "echo by the shell > c.txt; echo more >> README.md"])
        .current_dir(&f.root)
        .status()
        .expect("sh");
    assert!(sh.success());

    let snaps = f.json(&["list"]);
    let ids: Vec<String> = snaps["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| s["id"].as_str().expect("id").to_string())
        .collect();
    assert_eq!(
        ids.len(),
        4,
        "the prompt's and three tools' checkpoints: {snaps}"
    );
    let d = f.json(&["diff", &ids[0], "--attribute"]);
    let one = |t: &str, n: &str, a: &str| vec![(t.to_string(), n.to_string(), a.to_string())];
    assert_eq!(attributed(&d, "a.txt"), one("toolu_1", "Edit", ""));
    assert_eq!(attributed(&d, "b.txt"), one("toolu_2", "Write", "agent-7"));
    assert_eq!(attributed(&d, "c.txt"), one("toolu_3", "Bash", ""));
    assert_eq!(attributed(&d, "README.md"), one("toolu_3", "Bash", ""));
    assert_eq!(d["changes"][0]["attribution"][0]["thread_id"], "claude-s1");

    // Between two snapshots: only the intervals between them.
    let d = f.json(&["diff", &ids[0], &ids[3], "--attribute"]);
    assert_eq!(attributed(&d, "a.txt"), one("toolu_1", "Edit", ""));
    assert_eq!(attributed(&d, "b.txt"), one("toolu_2", "Write", "agent-7"));
    assert!(d["changes"]
        .as_array()
        .is_some_and(|c| c.iter().all(|c| c["path"] != "c.txt")));

    // For people: one line under each change.
    let out = f
        .cairn(&["diff", &ids[0], "--attribute"])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("changed after toolu_2 (Write, agent agent-7)"),
        "{text}"
    );
    // Without --attribute the JSON has none.
    let plain = f.json(&["diff", &ids[0]]);
    assert!(plain["changes"][0].get("attribution").is_none());
}

#[test]
fn a_second_rewind_right_after_a_first_is_not_refused_as_drift_but_a_later_user_edit_is() {
    // The files a rewind put back are the thread's own: its "before rewind" checkpoint (the
    // files before it) is not what the next rewind compares with, the rewind's target is.
    let f = Fixture::new();
    let entry = |v: Value| v["entry"]["id"].as_str().expect("id").to_string();
    let append = |kind: &str, text: &str| {
        entry(f.json(&["thread", "append", "chat", "--kind", kind, "--text", text]))
    };
    f.write("app.py", "a\n");
    f.json(&["thread", "new", "--id", "chat"]);
    let u1 = append("user", "one");
    f.write("app.py", "b\n");
    let a1 = append("assistant", "did one");
    append("user", "two");
    f.write("app.py", "c\n");
    f.write("notes.md", "n\n");
    append("assistant", "did two");
    f.json(&["rewind", "chat", &a1, "--files", "--yes"]);
    assert_eq!(f.read("app.py").as_deref(), Some("b\n"));
    f.json(&["rewind", "chat", &u1, "--files", "--yes"]);
    assert_eq!(f.read("app.py").as_deref(), Some("a\n"));
    // A later turn, checkpointed; then someone edits a file by hand, and a rewind to before
    // that turn would overwrite the edit: that is drift.
    let before = append("user", "three");
    f.write("app.py", "b\n");
    append("assistant", "did three");
    append("user", "four");
    f.write("app.py", "edited by hand\n");
    let v = json_error(
        &mut f.cairn(&["--json", "rewind", "chat", &before, "--files", "--yes"]),
        20,
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("app.py")),
        "{v}"
    );
    assert_eq!(f.read("app.py").as_deref(), Some("edited by hand\n"));
}

#[test]
fn a_restore_of_a_workspace_with_a_thread_database_is_a_restore_applied_event() {
    let f = Fixture::new();
    let _ = drifted_thread(&f);
    let snap = f.snapshot("base");
    f.write("a.txt", "changed after the snapshot\n");
    let report = f.json(&["restore", &snap, "--yes"]);
    let all = f.cairn(&["--json", "events"]).output().expect("run");
    let applied: Vec<Value> = String::from_utf8_lossy(&all.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON lines"))
        .filter(|e| e["kind"] == "restore_applied")
        .collect();
    assert_eq!(applied.len(), 1, "{applied:?}");
    let e = &applied[0];
    assert_eq!(e["thread_id"], Value::Null, "{e}");
    assert_eq!(e["data"]["snapshot_id"], report["snapshot_id"], "{e}");
    assert_eq!(
        e["data"]["safety_snapshot_id"], report["safety_snapshot_id"],
        "{e}"
    );
    assert_eq!(e["data"]["restored"], 1, "{e}");
    // A dry run is not an event.
    f.json(&["restore", &snap, "--dry-run"]);
    let again = f.cairn(&["--json", "events"]).output().expect("run");
    let count = String::from_utf8_lossy(&again.stdout)
        .lines()
        .filter(|l| l.contains("\"restore_applied\""))
        .count();
    assert_eq!(count, 1);
}
