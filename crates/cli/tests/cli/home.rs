//! Where the store lives (issue 19): outside the workspace, in the data directory, invisible to
//! git and out of reach of a clean of the tree; info, stores and store move.

use crate::{exists, json_error, Fixture};
use assert_cmd::Command;
use predicates::prelude::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Runs git in `dir`; `None` (saying so) when the machine has no git.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output();
    match out {
        Ok(o) => {
            assert!(
                o.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            Some(String::from_utf8_lossy(&o.stdout).into_owned())
        }
        Err(e) => {
            eprintln!("skipped: git cannot run here ({e})");
            None
        }
    }
}

/// A fixture that is a git repository with its files committed, an untracked file and an
/// ignored build output; `None` without git.
fn repo() -> Option<Fixture> {
    let f = Fixture::new();
    git(&f.root, &["init", "-q"])?;
    f.write(".gitignore", "build/\n");
    git(&f.root, &["add", "."])?;
    git(&f.root, &["commit", "-qm", "first"])?;
    f.write("untracked.txt", "work not committed yet\n");
    f.write("build/out.o", "ignored output\n");
    Some(f)
}

#[test]
fn git_status_after_a_snapshot_shows_nothing_of_cairn() {
    let Some(f) = repo() else { return };
    f.snapshot("s");
    let status = git(&f.root, &["status", "--porcelain", "--ignored"]).expect("git");
    assert!(!status.contains("cairn"), "{status}");
    assert!(status.contains("untracked.txt"), "{status}");
    assert!(!exists(&f.path(".cairn")));
}

#[test]
fn after_git_clean_fdx_the_checkpoint_is_listed_and_restores_the_untracked_work() {
    let Some(f) = repo() else { return };
    let id = f.snapshot("before-clean");
    git(&f.root, &["clean", "-fdxq"]).expect("git");
    assert!(!exists(&f.path("untracked.txt")) && !exists(&f.path("build")));
    let list = f.json(&["list"]);
    assert_eq!(list["snapshots"][0]["id"], id.as_str(), "{list}");
    f.json(&["restore", "before-clean", "--yes"]);
    assert_eq!(
        f.read("untracked.txt").as_deref(),
        Some("work not committed yet\n")
    );
    assert!(exists(&f.path("src/main.rs")));
}

#[test]
fn after_deleting_every_entry_but_git_the_checkpoint_restores_everything() {
    let Some(f) = repo() else { return };
    f.snapshot("before-wipe");
    for e in std::fs::read_dir(&f.root).expect("root") {
        let p = e.expect("entry").path();
        if p.file_name().is_some_and(|n| n == ".git") {
            continue;
        }
        if p.is_dir() {
            std::fs::remove_dir_all(&p).expect("rm -r");
        } else {
            std::fs::remove_file(&p).expect("rm");
        }
    }
    f.json(&["restore", "before-wipe", "--yes"]);
    assert_eq!(f.read("README.md").as_deref(), Some("# demo\n"));
    assert_eq!(
        f.read("untracked.txt").as_deref(),
        Some("work not committed yet\n")
    );
    let status = git(&f.root, &["status", "--porcelain"]).expect("git");
    assert_eq!(status.trim(), "?? untracked.txt", "{status}");
}

#[test]
fn a_store_named_inside_the_workspace_is_ignored_by_git() {
    let Some(f) = repo() else { return };
    let v = f.json(&["--store", ".checkpoints", "snapshot"]);
    assert!(v["id"].is_string());
    assert!(exists(&f.path(".checkpoints/.gitignore")));
    let status = git(&f.root, &["status", "--porcelain"]).expect("git");
    assert!(!status.contains(".checkpoints"), "{status}");
    let ignored = git(&f.root, &["status", "--porcelain", "--ignored"]).expect("git");
    assert!(
        ignored.contains("!! .checkpoints/"),
        "ignored by git: {ignored}"
    );
    let info = f.json(&["--store", ".checkpoints", "info"]);
    assert!(
        info["advice"]
            .as_str()
            .is_some_and(|a| a.contains("inside the workspace")),
        "{info}"
    );
}

#[test]
fn a_legacy_store_in_the_root_is_used_said_and_moved_out() {
    let f = Fixture::new();
    // An earlier version kept the store in <root>/.cairn.
    let id = f.json(&["--store", ".cairn", "snapshot", "--label", "old"])["id"]
        .as_str()
        .expect("id")
        .to_string();
    let info = f.json(&["info"]);
    assert_eq!(info["store_home"], "legacy", "{info}");
    assert!(
        info["advice"]
            .as_str()
            .is_some_and(|a| a.contains("store move")),
        "{info}"
    );
    assert_eq!(f.json(&["list"])["snapshots"][0]["id"], id.as_str());
    f.cairn(&["info"])
        .assert()
        .success()
        .stdout(predicate::str::contains("cairn -C"));
    let moved = f.json(&["store", "move"]);
    assert!(!exists(&f.path(".cairn")), "{moved}");
    let info = f.json(&["info"]);
    assert_eq!(info["store_home"], "data", "{info}");
    assert_eq!(info["store"], moved["to"]);
    assert_eq!(f.json(&["list"])["snapshots"][0]["id"], id.as_str());
    f.cairn(&["verify"]).assert().success();
    // Moving it onto itself, or a store that is not there, is refused.
    f.cairn(&["store", "move"]).assert().code(11);
}

#[test]
fn store_move_keeps_an_earlier_moves_copy_when_the_store_it_moved_is_gone() {
    // Issue 53: an older `store move` removed the store before its copy's rename was durable;
    // after a power loss the copy in `<DIR>.partial` is the only one. Moving again says so,
    // naming both paths, and deletes nothing.
    let f = Fixture::new();
    f.json(&["--store", ".cairn", "snapshot"]);
    let to = f.root.with_file_name("moved");
    let partial = f.root.with_file_name("moved.partial");
    std::fs::rename(f.path(".cairn"), &partial).expect("mv");
    let v = json_error(
        &mut f.cairn(&[
            "--json",
            "--store",
            ".cairn",
            "store",
            "move",
            to.to_str().expect("utf-8"),
        ]),
        20,
    );
    assert_eq!(v["error"]["kind"], "CONFLICT", "{v}");
    let m = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        m.contains(&*f.path(".cairn").to_string_lossy())
            && m.contains(&format!("mv {} {}", partial.display(), to.display())),
        "{m}"
    );
    assert!(cairn_store::is_store_dir(&partial), "the copy is kept");
    assert!(!exists(&to));
}

#[test]
fn store_move_refuses_while_another_process_uses_the_store() {
    let f = Fixture::new();
    f.json(&["--store", ".cairn", "snapshot"]);
    let store = cairn_store::Store::open(f.path(".cairn"), Default::default()).expect("open");
    let op = store
        .begin_operation(cairn_store::OperationKind::Snapshot, &[])
        .expect("an operation");
    let v = json_error(&mut f.cairn(&["--json", "store", "move"]), 14);
    assert_eq!(v["error"]["kind"], "BUSY", "{v}");
    assert!(
        cairn_store::is_store_dir(&f.path(".cairn")),
        "nothing moved"
    );
    drop(op);
    f.json(&["store", "move"]);
    assert!(!exists(&f.path(".cairn")));
}

#[test]
fn cairn_home_then_xdg_data_home_then_home_are_honoured() {
    let f = Fixture::new();
    let base = f.root.parent().expect("parent").to_path_buf();
    let run = |envs: &[(&str, &Path)]| {
        let mut cmd = Command::cargo_bin("cairn").expect("bin");
        cmd.arg("-C")
            .arg(&f.root)
            .args(["--json", "snapshot"])
            .env_remove("CAIRN_HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("CAIRN_STORE")
            .env_remove("CAIRN_THREADS_DB");
        for (k, v) in envs {
            cmd.env(k, v);
        }
        cmd.assert().success();
    };
    let stores_in = |data: &Path| {
        std::fs::read_dir(data.join("stores"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let (ch, xdg, home) = (base.join("ch"), base.join("xdg"), base.join("h"));
    run(&[
        ("CAIRN_HOME", &ch),
        ("XDG_DATA_HOME", &xdg),
        ("HOME", &home),
    ]);
    assert_eq!(stores_in(&ch), 1);
    run(&[("XDG_DATA_HOME", &xdg), ("HOME", &home)]);
    assert_eq!(stores_in(&xdg.join("cairn")), 1);
    run(&[("HOME", &home)]);
    assert_eq!(stores_in(&home.join(".local/share/cairn")), 1);
    // CAIRN_STORE names one store, as --store does.
    let named = base.join("named-store");
    run(&[("CAIRN_HOME", &ch), ("CAIRN_STORE", &named)]);
    assert!(cairn_store::is_store_dir(&named));
    assert_eq!(stores_in(&ch), 1, "nothing new in the data directory");
}

#[test]
fn two_workspaces_never_see_each_others_snapshots() {
    let a = Fixture::new();
    let b_root = a.root.with_file_name("other");
    std::fs::create_dir(&b_root).expect("mkdir");
    std::fs::write(b_root.join("b.txt"), "b\n").expect("write");
    let b = Fixture {
        root: b_root,
        ..Fixture::new()
    };
    let b = Fixture {
        home: a.home.clone(),
        ..b
    };
    let id = a.snapshot("a-only");
    let v = json_error(&mut b.cairn(&["--json", "list"]), 12);
    assert_eq!(v["error"]["kind"], "NOT_FOUND");
    b.snapshot("b-only");
    let listed = b.json(&["list"]).to_string();
    assert!(
        !listed.contains(&id) && !listed.contains("a-only"),
        "{listed}"
    );
    assert_ne!(a.store(), b.store());
    let stores = a.json(&["stores"]);
    assert_eq!(
        stores["stores"].as_array().map(Vec::len),
        Some(2),
        "{stores}"
    );
}

#[test]
fn the_data_directory_and_each_store_are_owner_only() {
    let f = Fixture::new();
    f.snapshot("s");
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.permissions().mode() & 0o777)
            .ok()
    };
    assert_eq!(mode(&f.home), Some(0o700));
    assert_eq!(mode(&f.home.join("stores")), Some(0o700));
    assert_eq!(mode(&f.store()), Some(0o700));
}

#[test]
fn stores_lists_a_store_whose_root_is_gone_and_store_finds_it_from_the_new_root() {
    let f = Fixture::new();
    let id = f.snapshot("before-rename");
    let store = f.store();
    let name = store
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a name")
        .to_string();
    assert!(
        name.starts_with("ws-"),
        "named after the root's last component: {name}"
    );
    let moved = f.root.with_file_name("renamed");
    std::fs::rename(&f.root, &moved).expect("rename the root");
    let listing = f.json(&["stores"]);
    let entry = &listing["stores"][0];
    assert_eq!(entry["roots"][0]["exists"], false, "{listing}");
    assert_eq!(entry["snapshots"], 1);
    assert!(entry["bytes"].as_u64().is_some_and(|b| b > 0));
    f.cairn(&["stores"])
        .assert()
        .success()
        .stdout(predicate::str::contains("(gone)"));
    let g = Fixture {
        root: moved,
        home: f.home.clone(),
        ..Fixture::new()
    };
    let list = g.json(&["--store", store.to_str().expect("utf8"), "list"]);
    assert_eq!(list["snapshots"][0]["id"], id.as_str());
    g.json(&[
        "--store",
        store.to_str().expect("utf8"),
        "restore",
        "before-rename",
        "--yes",
    ]);
    assert!(exists(&g.path("src/main.rs")));
}

/// A thread `chat` of two user messages, `later.txt` written after the second; returns the
/// first one's id (a rewind to it with files removes `later.txt`).
fn chat_with_a_checkpoint(f: &Fixture) -> String {
    f.json(&["thread", "new", "--id", "chat"]);
    let u1 = f.json(&[
        "thread", "append", "chat", "--kind", "user", "--text", "one",
    ]);
    f.json(&[
        "thread", "append", "chat", "--kind", "user", "--text", "two",
    ]);
    f.write("later.txt", "written after the second message\n");
    u1["entry"]["id"].as_str().expect("id").to_string()
}

#[test]
fn a_renamed_workspace_keeps_its_store_its_id_and_its_threads_file_rewinds() {
    let mut f = Fixture::new();
    let u1 = chat_with_a_checkpoint(&f);
    let before = f.json(&["info"]);
    let moved = f.root.with_file_name("ws-renamed");
    std::fs::rename(&f.root, &moved).expect("rename");
    f.root = moved;
    let after = f.json(&["info"]);
    assert_eq!(after["workspace_id"], before["workspace_id"]);
    assert_eq!(after["store"], before["store"]);
    assert_eq!(after["snapshots"], before["snapshots"]);
    f.json(&["rewind", "chat", &u1, "--files", "--yes"]);
    assert!(!exists(&f.path("later.txt")), "the file rewind ran");
    let stores = f.json(&["stores"]);
    assert_eq!(
        stores["stores"].as_array().map(Vec::len),
        Some(1),
        "{stores}"
    );
}

#[test]
fn a_copied_workspace_is_a_new_one_until_adopted_and_adopt_refuses_while_the_original_stands() {
    let mut f = Fixture::new();
    let u1 = chat_with_a_checkpoint(&f);
    let original = f.json(&["info"]);
    let old_root = f.root.clone();
    let copy = f.root.with_file_name("ws-copy");
    let ok = std::process::Command::new("cp")
        .arg("-a")
        .arg(&f.root)
        .arg(&copy)
        .status()
        .expect("cp");
    assert!(ok.success());
    f.root = copy;
    let info = f.json(&["info"]);
    assert_ne!(
        info["workspace_id"], original["workspace_id"],
        "a copy is a new workspace"
    );
    // While the original is there, adopting it would make two directories one workspace.
    let old = old_root.to_str().expect("utf-8");
    let v = json_error(&mut f.cairn(&["--json", "workspace", "adopt", old]), 11);
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--force") && m.contains("still at")),
        "{v}"
    );
    std::fs::remove_dir_all(&old_root).expect("rm the original");
    let a = f.json(&["workspace", "adopt", old]);
    assert_eq!(a["workspace_id"], original["workspace_id"]);
    assert_eq!(a["store"], original["store"]);
    let info = f.json(&["info"]);
    assert_eq!(info["workspace_id"], original["workspace_id"]);
    assert_eq!(info["threads_db"], original["threads_db"]);
    f.json(&["rewind", "chat", &u1, "--files", "--yes"]);
    assert!(
        !exists(&f.path("later.txt")),
        "the adopted workspace rewinds its files"
    );
    // An unknown workspace is NOT_FOUND, naming how to find one.
    let v = json_error(
        &mut f.cairn(&["--json", "workspace", "adopt", "ws-0000000000000000"]),
        12,
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("cairn stores")),
        "{v}"
    );
}

#[test]
fn a_store_in_a_directory_another_user_owns_and_all_may_write_is_refused_until_opted_in() {
    // Issue 53: CAIRN_HOME (or --store) in a directory of another user that every user may
    // write: that user renamed snapshots/ and `cairn list` said 0 snapshots with exit 0. Now
    // refused with DENIED naming the directory and the opt-in, which lets it in.
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: making a directory of another owner needs root");
        return;
    }
    let f = Fixture::new();
    let shared = f.root.with_file_name("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    std::os::unix::fs::chown(&shared, Some(65534), Some(65534)).expect("chown");
    let store = shared.join("store");
    let home = shared.join("cairn");
    let with_home = |args: &[&str]| {
        let mut c = f.cairn(args);
        c.env("CAIRN_HOME", &home)
            .env_remove(cairn_store::location::UNSAFE_STORE_ENV);
        c
    };
    let by_store = |args: &[&str]| {
        let mut c = f.cairn(&[&["--store", store.to_str().expect("utf-8")], args].concat());
        c.env_remove(cairn_store::location::UNSAFE_STORE_ENV);
        c
    };
    let refused = |mut cmd: Command| {
        let v = json_error(&mut cmd, 17);
        assert_eq!(v["error"]["kind"], "DENIED", "{v}");
        assert_eq!(v["error"]["path"], shared.to_str().expect("utf-8"), "{v}");
        let m = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            m.contains("uid 65534") && m.contains("CAIRN_UNSAFE_STORE_OK="),
            "{m}"
        );
    };
    // A store about to be made there, then stores made there with the opt-in.
    refused(with_home(&["--json", "snapshot"]));
    refused(by_store(&["--json", "snapshot"]));
    for mut cmd in [with_home(&["snapshot"]), by_store(&["snapshot"])] {
        cmd.env(cairn_store::location::UNSAFE_STORE_ENV, "*")
            .assert()
            .success();
    }
    refused(with_home(&["--json", "list"]));
    refused(by_store(&["--json", "list"]));
    let listed = by_store(&["--json", "list"])
        .env(cairn_store::location::UNSAFE_STORE_ENV, &shared)
        .output()
        .expect("runs");
    assert!(listed.status.success());
    let v: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("json");
    assert_eq!(v["snapshots"].as_array().map(Vec::len), Some(1), "{v}");
}
