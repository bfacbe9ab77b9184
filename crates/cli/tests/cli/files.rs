//! snapshot, list, show, diff and restore.

use crate::{exists, json_error, Fixture};
use predicates::prelude::*;

#[test]
fn snapshot_prints_its_id_stats_and_skipped_paths_as_json() {
    let f = Fixture::new();
    f.write("big.bin", &"x".repeat(5000));
    let v = f.json(&["snapshot", "--label", "first", "--max-file-bytes", "1KiB"]);
    assert_eq!(v["id"].as_str().map(str::len), Some(64));
    assert_eq!(v["label"], "first");
    for key in [
        "files",
        "bytes",
        "hashed",
        "reused",
        "stored_bytes",
        "duration_ms",
    ] {
        assert!(v["stats"][key].is_u64(), "stats.{key} in {v}");
    }
    assert_eq!(v["stats"]["files"], 2);
    assert_eq!(v["skipped"][0]["path"], "big.bin");
    assert_eq!(v["skipped"][0]["reason"], "too-large");
    assert!(exists(&f.store()));
    assert!(
        !exists(&f.path(".cairn")),
        "the store is not in the workspace"
    );
}

#[test]
fn snapshot_with_refuse_hard_links_skips_a_file_linked_elsewhere_without_reading_it() {
    let f = Fixture::new();
    f.write("linked.txt", "shared\n");
    std::fs::hard_link(f.path("linked.txt"), f.path("../outside.txt")).expect("link");
    let v = f.json(&["snapshot", "--refuse-hard-links"]);
    assert_eq!(v["skipped"][0]["path"], "linked.txt", "{v}");
    assert_eq!(v["skipped"][0]["reason"], "hard-link");
    let v = f.json(&["snapshot"]);
    assert!(v["skipped"].as_array().is_some_and(|a| a.is_empty()), "{v}");
}

#[test]
fn snapshot_for_people_names_the_snapshot_and_what_it_cost() {
    let f = Fixture::new();
    f.cairn(&["snapshot", "--label", "one"])
        .assert()
        .success()
        .stdout(predicate::str::contains("\"one\""))
        .stdout(predicate::str::contains("2 files"));
}

#[test]
fn a_bad_exclude_glob_exits_with_invalid_argument() {
    let f = Fixture::new();
    let v = json_error(
        &mut f.cairn(&["--json", "snapshot", "--exclude", "a[b"]),
        11,
    );
    assert_eq!(v["error"]["kind"], "INVALID_ARGUMENT");
}

#[test]
fn snapshot_honours_excludes_and_a_store_elsewhere() {
    let f = Fixture::new();
    let store = tempfile::tempdir().expect("tmp");
    f.write("dist/out.js", "x");
    let sp = store.path().join("s");
    let sp = sp.to_str().expect("utf8");
    let out = f
        .cairn(&["--json", "--store", sp, "snapshot", "--exclude", "dist/**"])
        .output()
        .expect("run");
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["stats"]["files"], 2);
    assert!(
        !exists(&f.path(".cairn")) && !exists(&f.home),
        "the store went where --store said"
    );
    let list = f
        .cairn(&["--json", "--store", sp, "list"])
        .output()
        .expect("run");
    let l: serde_json::Value = serde_json::from_slice(&list.stdout).expect("json");
    assert_eq!(l["snapshots"].as_array().map(Vec::len), Some(1));
}

#[test]
fn list_shows_every_snapshot_oldest_first() {
    let f = Fixture::new();
    let a = f.snapshot("a");
    f.write("new.txt", "n");
    let b = f.snapshot("b");
    let v = f.json(&["list"]);
    let snaps = v["snapshots"].as_array().expect("array");
    assert_eq!(snaps.len(), 2);
    assert_eq!(snaps[0]["id"], a.as_str());
    assert_eq!(snaps[1]["id"], b.as_str());
    assert_eq!(snaps[1]["label"], "b");
    assert!(snaps[0]["created_ms"].is_i64());
    assert_eq!(v["unreadable"].as_array().map(Vec::len), Some(0));
    f.cairn(&["list"])
        .assert()
        .success()
        .stdout(predicate::str::contains(&a[..12]));
}

#[test]
fn a_command_without_a_store_says_where_it_looked() {
    let f = Fixture::new();
    let v = json_error(&mut f.cairn(&["--json", "list"]), 12);
    assert_eq!(v["error"]["kind"], "NOT_FOUND");
    let store = f.store();
    assert_eq!(v["error"]["path"].as_str(), store.to_str());
    f.cairn(&["list"])
        .assert()
        .code(12)
        .stderr(predicate::str::contains("cairn snapshot"));
    assert!(!exists(&store), "a failed list creates no store");
}

#[test]
fn show_names_a_snapshot_by_prefix_or_label_and_lists_its_files() {
    let f = Fixture::new();
    let id = f.snapshot("base");
    for name in [&id[..6], "base", id.as_str()] {
        let v = f.json(&["show", name]);
        assert_eq!(v["id"], id.as_str());
        let paths: Vec<&str> = v["files"]
            .as_array()
            .expect("files")
            .iter()
            .filter_map(|e| e["path"].as_str())
            .collect();
        assert_eq!(paths, ["README.md", "src", "src/main.rs"]);
        assert_eq!(v["capture"]["gitignore"], true);
    }
    f.cairn(&["show", "base"])
        .assert()
        .success()
        .stdout(predicate::str::contains("src/main.rs"));
}

#[test]
fn an_unknown_snapshot_exits_with_not_found() {
    let f = Fixture::new();
    f.snapshot("base");
    let v = json_error(&mut f.cairn(&["--json", "show", "nope"]), 12);
    assert!(v["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("nope")));
    f.cairn(&["restore", "ffff0000"]).assert().code(12);
}

#[test]
fn diff_lists_changes_between_snapshots_and_to_the_files_now() {
    let f = Fixture::new();
    let a = f.snapshot("a");
    f.write("src/main.rs", "fn main() { println!(\"hi\"); }\n");
    std::fs::remove_file(f.path("README.md")).expect("rm");
    f.write("new.txt", "new\n");
    let live = f.json(&["diff", "a"]);
    assert!(live["to"].is_null());
    assert_eq!(live["from"], a.as_str());
    let kinds: Vec<(String, String)> = live["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap_or_default().to_string(),
                c["kind"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("README.md".to_string(), "deleted".to_string()),
            ("new.txt".to_string(), "added".to_string()),
            ("src/main.rs".to_string(), "modified".to_string()),
        ]
    );
    f.snapshot("b");
    let two = f.json(&["diff", "a", "b"]);
    assert_eq!(two["changes"], live["changes"]);
    f.cairn(&["diff", "a", "b"])
        .assert()
        .success()
        .stdout(predicate::str::contains("M  src/main.rs"))
        .stdout(predicate::str::contains("D  README.md"));
}

#[test]
fn diff_patch_shows_text_and_names_binary_files() {
    let f = Fixture::new();
    std::fs::write(f.path("blob.bin"), b"a\0b").expect("write");
    f.snapshot("a");
    f.write("src/main.rs", "fn main() { println!(\"hi\"); }\n");
    std::fs::write(f.path("blob.bin"), b"c\0d").expect("write");
    f.cairn(&["diff", "a", "--patch"])
        .assert()
        .success()
        .stdout(predicate::str::contains("--- a/src/main.rs"))
        .stdout(predicate::str::contains("+fn main() { println!(\"hi\"); }"))
        .stdout(predicate::str::contains("-fn main() {}"))
        .stdout(predicate::str::contains(
            "Binary files a/blob.bin and b/blob.bin differ",
        ));
    let v = f.json(&["diff", "a", "--patch"]);
    let changes = v["changes"].as_array().expect("changes");
    let bin = changes
        .iter()
        .find(|c| c["path"] == "blob.bin")
        .expect("bin");
    assert_eq!(bin["binary"], true);
    assert!(bin.get("patch").is_none());
    let text = changes
        .iter()
        .find(|c| c["path"] == "src/main.rs")
        .expect("text");
    assert!(text["patch"].as_str().is_some_and(|p| p.contains("@@")));
}

fn edit_after_snapshot(f: &Fixture) -> String {
    let id = f.snapshot("base");
    f.write("src/main.rs", "changed\n");
    f.write("extra.txt", "extra\n");
    id
}

#[test]
fn restore_dry_run_reports_the_plan_as_json_and_changes_nothing() {
    let f = Fixture::new();
    let id = edit_after_snapshot(&f);
    let v = f.json(&["restore", "base", "--dry-run"]);
    assert_eq!(v["snapshot_id"], id.as_str());
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["restored"], serde_json::json!(["src/main.rs"]));
    assert_eq!(v["deleted"], serde_json::json!(["extra.txt"]));
    assert_eq!(v["unchanged"], 1);
    assert!(v["kept"].is_array());
    assert_eq!(v["busy"], false);
    assert!(v["drifted"].is_array());
    assert!(v["safety_snapshot_id"].is_null());
    assert_eq!(f.read("src/main.rs").as_deref(), Some("changed\n"));
    assert!(exists(&f.path("extra.txt")));
}

#[test]
fn restore_without_a_terminal_and_without_yes_refuses_and_changes_nothing() {
    let f = Fixture::new();
    edit_after_snapshot(&f);
    f.cairn(&["restore", "base"])
        .assert()
        .code(2)
        .stdout(predicate::str::contains("restore  src/main.rs"))
        .stderr(predicate::str::contains("--yes"))
        .stderr(predicate::str::contains("no terminal"));
    assert_eq!(f.read("src/main.rs").as_deref(), Some("changed\n"));
    assert!(exists(&f.path("extra.txt")));
}

#[test]
fn restore_with_json_needs_dry_run_or_yes() {
    let f = Fixture::new();
    edit_after_snapshot(&f);
    let v = json_error(&mut f.cairn(&["--json", "restore", "base"]), 2);
    assert_eq!(v["error"]["kind"], "USAGE");
    assert!(v["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("--dry-run")));
    assert_eq!(f.read("src/main.rs").as_deref(), Some("changed\n"));
}

#[test]
fn restore_asks_and_a_no_cancels_with_nothing_changed() {
    let f = Fixture::new();
    edit_after_snapshot(&f);
    f.cairn(&["restore", "base"])
        .env("CAIRN_FORCE_PROMPT", "1")
        .write_stdin("n\n")
        .assert()
        .code(21)
        .stderr(predicate::str::contains("[y/N]"))
        .stderr(predicate::str::contains("nothing was changed"));
    assert_eq!(f.read("src/main.rs").as_deref(), Some("changed\n"));
}

#[test]
fn restore_asks_and_a_yes_restores() {
    let f = Fixture::new();
    edit_after_snapshot(&f);
    f.cairn(&["restore", "base"])
        .env("CAIRN_FORCE_PROMPT", "1")
        .write_stdin("y\n")
        .assert()
        .success()
        .stdout(predicate::str::contains("safety snapshot"));
    assert_eq!(f.read("src/main.rs").as_deref(), Some("fn main() {}\n"));
    assert!(!exists(&f.path("extra.txt")));
}

#[test]
fn restore_yes_restores_and_its_safety_snapshot_undoes_it() {
    let f = Fixture::new();
    let id = edit_after_snapshot(&f);
    let v = f.json(&["restore", &id[..8], "--yes"]);
    assert_eq!(v["dry_run"], false);
    assert_eq!(v["restored"], serde_json::json!(["src/main.rs"]));
    assert_eq!(f.read("src/main.rs").as_deref(), Some("fn main() {}\n"));
    assert!(!exists(&f.path("extra.txt")));
    let safety = v["safety_snapshot_id"].as_str().expect("a safety snapshot");
    f.cairn(&["restore", safety, "--yes"]).assert().success();
    assert_eq!(f.read("src/main.rs").as_deref(), Some("changed\n"));
    assert_eq!(f.read("extra.txt").as_deref(), Some("extra\n"));
}

#[test]
fn restore_while_the_workspace_is_held_exits_with_busy() {
    let f = Fixture::new();
    edit_after_snapshot(&f);
    let ws = cairn_restore::Workspace::open(
        &f.root,
        cairn_restore::WorkspaceOptions {
            store: Some(f.store()),
            ..Default::default()
        },
    )
    .expect("open");
    let _hold = ws.hold("a test command", None).expect("hold");
    let dry = f.json(&["restore", "base", "--dry-run"]);
    assert_eq!(dry["busy"], true);
    let v = json_error(&mut f.cairn(&["--json", "restore", "base", "--yes"]), 14);
    assert_eq!(v["error"]["kind"], "BUSY");
    assert_eq!(f.read("src/main.rs").as_deref(), Some("changed\n"));
}

/// The uid of user `nobody`, when the tests run as root and the machine has that user and
/// `setpriv`; `None` (with the reason printed) otherwise.
fn nobody_if_root() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let probe = tempfile::tempdir().expect("a temporary directory");
    if std::fs::metadata(probe.path()).map(|m| m.uid()).ok() != Some(0) {
        eprintln!("skipped: the test needs root to make a file of another owner");
        return None;
    }
    let out = std::process::Command::new("id")
        .args(["-u", "nobody"])
        .output();
    let uid = out
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok());
    let setpriv = std::process::Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    match uid {
        Some(uid) if setpriv => Some(uid),
        _ => {
            eprintln!("skipped: the machine has no user nobody or no setpriv");
            None
        }
    }
}

/// Runs `cairn -C ROOT ARGS` as user `uid` (through `setpriv`) with `HOME` at `home`: its exit
/// code, stdout and stderr.
fn as_uid(
    uid: u32,
    root: &std::path::Path,
    home: &std::path::Path,
    args: &[&str],
) -> (Option<i32>, String, String) {
    let out = std::process::Command::new("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={uid}"),
            "--clear-groups".into(),
        ])
        .arg(assert_cmd::cargo::cargo_bin("cairn"))
        .arg("-C")
        .arg(root)
        .args(args)
        .env("HOME", home)
        .env("CAIRN_HOME", home.join("cairn"))
        .env_remove("CAIRN_STORE")
        .env_remove("CAIRN_FORCE_PROMPT")
        .env_remove("CAIRN_THREADS_DB")
        .output()
        .expect("run cairn as another user");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A directory for a test run as user `uid`: `(tempdir, root, home)`, both owned by it.
fn dirs_for(uid: u32) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let root = dir.path().join("ws");
    let home = dir.path().join("home");
    for d in [&root, &home] {
        std::fs::create_dir(d).expect("mkdir");
        std::os::unix::fs::chown(d, Some(uid), Some(uid)).expect("chown");
    }
    (dir, root, home)
}

#[test]
fn a_read_only_directory_of_the_user_is_written_by_a_restore_run_as_an_unprivileged_user() {
    use std::os::unix::fs::PermissionsExt;
    let Some(uid) = nobody_if_root() else { return };
    let (_dir, root, home) = dirs_for(uid);
    let ro = root.join("ro");
    std::fs::create_dir(&ro).expect("mkdir");
    std::fs::write(ro.join("a.txt"), "one\n").expect("write");
    for p in [&ro, &ro.join("a.txt")] {
        std::os::unix::fs::chown(p, Some(uid), Some(uid)).expect("chown");
    }
    let (code, _, err) = as_uid(uid, &root, &home, &["snapshot", "--label", "s"]);
    assert_eq!(code, Some(0), "{err}");
    std::fs::write(ro.join("a.txt"), "two\n").expect("write");
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    let (code, out, err) = as_uid(uid, &root, &home, &["restore", "s", "--dry-run"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("ro/a.txt"), "{out}");
    let (code, _, err) = as_uid(uid, &root, &home, &["restore", "s", "--yes"]);
    assert_eq!(
        code,
        Some(0),
        "the restore writes into the read-only directory: {err}"
    );
    assert_eq!(
        std::fs::read_to_string(ro.join("a.txt")).ok().as_deref(),
        Some("one\n")
    );
    let leftovers: Vec<_> = std::fs::read_dir(&root)
        .expect("root")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".cairn-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_file_of_another_owner_never_wedges_a_restore_run_as_an_unprivileged_user() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Some(uid) = nobody_if_root() else { return };
    let (_dir, root, home) = dirs_for(uid);
    let as_user = |args: &[&str]| as_uid(uid, &root, &home, args);
    let write_as_user = |rel: &str, content: &str, mode: u32| {
        let p = root.join(rel);
        std::fs::write(&p, content).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        std::os::unix::fs::chown(&p, Some(uid), Some(uid)).expect("chown");
    };
    write_as_user("a", "a\n", 0o644);
    write_as_user("cfg", "c\n", 0o755);
    let (code, out, err) = as_user(&["--json", "snapshot"]);
    assert_eq!(code, Some(0), "{err}");
    let snap: serde_json::Value = serde_json::from_str(&out).expect("json");
    let id = snap["id"].as_str().expect("an id").to_string();
    write_as_user("a", "changed\n", 0o644);
    // cfg becomes root's, same content, mode 644: as sudo, a container or a bind mount leave it.
    std::fs::remove_file(root.join("cfg")).expect("rm");
    std::fs::write(root.join("cfg"), "c\n").expect("write");
    std::fs::set_permissions(root.join("cfg"), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    let (code, _, err) = as_user(&["restore", &id, "--dry-run"]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = as_user(&["restore", &id, "--yes"]);
    assert_eq!(code, Some(0), "the restore finishes: {err}");
    assert_eq!(
        std::fs::read_to_string(root.join("a")).ok().as_deref(),
        Some("a\n")
    );
    let cfg = std::fs::metadata(root.join("cfg")).expect("cfg");
    assert_eq!(cfg.mode() & 0o777, 0o755, "the mode is the snapshot's");
    assert_eq!(cfg.uid(), uid, "the user's own copy replaced root's file");
    assert_eq!(
        std::fs::read_to_string(root.join("cfg")).ok().as_deref(),
        Some("c\n")
    );
    for args in [&["snapshot"][..], &["recover"][..], &["verify"][..]] {
        let (code, _, err) = as_user(args);
        assert_eq!(code, Some(0), "{args:?} works after the restore: {err}");
    }
}

#[test]
fn control_bytes_in_file_names_are_escaped_in_text_output_and_kept_exactly_in_json() {
    // Issue 34.7: a name holding ESC sequences drove the terminal that listed it.
    let f = Fixture::new();
    let evil = "evil\u{1b}[31mred";
    f.write(evil, "x\n");
    f.write("two\nlines", "y\n");
    f.snapshot("a");
    f.write(evil, "changed\n");
    for args in [
        &["diff", "a"][..],
        &["show", "a"],
        &["restore", "a", "--dry-run"],
    ] {
        let out = f.cairn(args).output().expect("run cairn");
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8(out.stdout).expect("UTF-8");
        assert!(
            !text.contains('\u{1b}'),
            "{args:?} printed a raw ESC: {text:?}"
        );
        assert!(text.contains("evil\\x1b[31mred"), "{args:?}: {text}");
        if args[0] == "show" {
            assert!(text.contains("two\\nlines"), "{text}");
        }
    }
    let v = f.json(&["diff", "a"]);
    assert!(v.to_string().contains("evil\\u001b[31mred"), "{v}");
}

#[test]
fn a_root_that_is_slash_or_a_pseudo_file_system_is_refused_unless_force_root() {
    // Issue 34.7: `cairn -C /` walked the whole machine, /proc included.
    let f = Fixture::new();
    for dir in ["/", "/proc/self", "/sys/kernel"] {
        if !std::path::Path::new(dir).exists() {
            continue;
        }
        let v = json_error(
            &mut f.cairn_in(std::path::Path::new(dir), &["--json", "snapshot"]),
            11,
        );
        assert_eq!(v["error"]["kind"], "INVALID_ARGUMENT", "{dir}: {v}");
        let msg = v["error"]["message"].as_str().unwrap_or("");
        assert!(
            msg.contains("--force-root") && msg.contains("-C DIR"),
            "{dir}: {msg}"
        );
        f.cairn_in(std::path::Path::new(dir), &["restore", "x", "--dry-run"])
            .assert()
            .code(11)
            .stderr(predicate::str::contains("refusing"));
    }
    // --force-root lets it through to the command itself: a dry run of an unknown snapshot
    // then fails for that reason, not for the root.
    let out = f
        .cairn_in(
            std::path::Path::new("/proc/self"),
            &["--force-root", "--json", "diff", "nope"],
        )
        .output()
        .expect("run cairn");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("refusing"),
        "{out:?}"
    );
}

/// A label as an agent may choose it: a terminal escape that clears the screen, a bell, and a
/// newline that would forge a row of a table.
pub(crate) const HOSTILE: &str = "evil\u{1b}[2J\u{7}\nFAKE ROW";

/// Asserts that `out` (a command's human output) carries no control character but newlines
/// between its lines, no forged row, and the label escaped.
pub(crate) fn assert_escaped(out: &str, what: &str) {
    assert!(
        !out.chars().any(|c| c.is_control() && c != '\n'),
        "{what} printed a raw control character: {out:?}"
    );
    assert!(
        !out.lines().any(|l| l.starts_with("FAKE ROW")),
        "{what} let a newline forge a row: {out}"
    );
    assert!(out.contains("evil\\x1b[2J"), "{what}: {out}");
}

#[test]
fn a_label_with_terminal_escapes_prints_escaped_in_snapshot_list_and_show() {
    // Issue 53.9: an agent's label reached the terminal with raw ESC and BEL.
    let f = Fixture::new();
    let out = f
        .cairn(&["snapshot", "--label", HOSTILE])
        .output()
        .expect("run");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_escaped(&text, "snapshot");
    assert!(text.contains("\\x07\\nFAKE ROW"), "{text}");
    let id = f.json(&["list"])["snapshots"][0]["id"]
        .as_str()
        .expect("an id")
        .to_string();
    for args in [&["list"][..], &["show", &id]] {
        let out = f.cairn(args).output().expect("run");
        assert!(out.status.success(), "{args:?}");
        assert_escaped(&String::from_utf8_lossy(&out.stdout), &format!("{args:?}"));
    }
    // JSON keeps the label exactly.
    assert_eq!(f.json(&["list"])["snapshots"][0]["label"], HOSTILE);
}

#[test]
fn a_label_over_the_limit_is_refused_naming_the_limit() {
    // Issue 53.9: labels were unbounded (8 MB through MCP).
    let f = Fixture::new();
    let long = "x".repeat(1001);
    let e = json_error(&mut f.cairn(&["--json", "snapshot", "--label", &long]), 11);
    assert_eq!(e["error"]["kind"], "INVALID_ARGUMENT", "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("1000 bytes")),
        "{e}"
    );
    assert!(f.json(&["list"])["snapshots"]
        .as_array()
        .is_some_and(Vec::is_empty));
    f.snapshot(&"x".repeat(1000));
}

#[test]
fn a_size_or_hard_link_refusal_says_its_cause_and_the_way_past_it() {
    // Issue 53, behaviour audit: these refusals said "check the permissions and ownership of
    // the path", which neither is about.
    let f = Fixture::new();
    f.write("data.bin", "small\n");
    let small = f.json(&["snapshot", "--max-file-bytes", "1KiB"])["id"]
        .as_str()
        .expect("an id")
        .to_string();
    f.write("data.bin", &"x".repeat(5000));
    let e = json_error(&mut f.cairn(&["--json", "restore", &small, "--yes"]), 17);
    let m = e["error"]["message"].as_str().unwrap_or_default();
    assert!(!m.contains("permissions and ownership"), "{m}");
    assert!(m.contains("max_file_bytes") && m.contains("move it"), "{m}");
    assert!(m.contains("cairn restore") && m.contains("PATH"), "{m}");
    assert_eq!(f.read("data.bin").map(|s| s.len()), Some(5000));

    f.write("data.bin", "small\n");
    let linked = f.json(&["snapshot", "--refuse-hard-links"])["id"]
        .as_str()
        .expect("an id")
        .to_string();
    std::fs::hard_link(f.path("data.bin"), f.root.with_file_name("outside-link")).expect("link");
    std::fs::write(f.path("data.bin"), "changed\n").expect("write");
    let e = json_error(&mut f.cairn(&["--json", "restore", &linked, "--yes"]), 17);
    let m = e["error"]["message"].as_str().unwrap_or_default();
    assert!(!m.contains("permissions and ownership"), "{m}");
    assert!(m.contains("hard links") && m.contains("move it"), "{m}");
    assert_eq!(f.read("data.bin").as_deref(), Some("changed\n"));
}

#[test]
fn a_label_that_is_also_another_snapshots_id_prefix_is_ambiguous() {
    // Issue 53, behaviour audit: such a name resolved silently to the id.
    let f = Fixture::new();
    let first = f.snapshot("first");
    f.write("README.md", "changed\n");
    let prefix = &first[..8];
    let second = f.snapshot(prefix);
    let e = json_error(&mut f.cairn(&["--json", "show", prefix]), 11);
    assert_eq!(e["error"]["kind"], "INVALID_ARGUMENT", "{e}");
    let m = e["error"]["message"].as_str().unwrap_or_default();
    assert!(m.contains("ambiguous"), "{m}");
    assert!(m.contains(&first[..12]) && m.contains(&second[..12]), "{m}");
    assert!(m.contains("full id"), "{m}");
    // Each is still named by its full id.
    assert_eq!(f.json(&["show", &first])["id"], first.as_str());
    assert_eq!(f.json(&["show", &second])["id"], second.as_str());
}
