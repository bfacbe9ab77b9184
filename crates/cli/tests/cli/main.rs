//! Tests of the built `cairn` binary: every command, its JSON, its exit codes, the prompt.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

mod agents;
mod codex;
mod containers;
mod doctor;
mod files;
mod home;
mod inbox;
mod mcp;
mod precise;
mod remote;
mod resume;
mod serve;
mod store_ops;
mod studio;
mod threads;
mod watch;

/// A workspace in a temporary directory with a few files, and a data directory of its own
/// (`CAIRN_HOME`) beside it, where its store goes.
pub struct Fixture {
    _dir: tempfile::TempDir,
    /// The workspace root.
    pub root: PathBuf,
    /// Cairn's data directory for the commands the fixture runs.
    pub home: PathBuf,
}

impl Default for Fixture {
    fn default() -> Self {
        Fixture::new()
    }
}

impl Fixture {
    /// A fresh workspace with `src/main.rs` and `README.md`.
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let root = dir.path().join("ws");
        std::fs::create_dir_all(root.join("src")).expect("mkdir");
        std::fs::write(root.join("src/main.rs"), "fn main() {}\n").expect("write");
        std::fs::write(root.join("README.md"), "# demo\n").expect("write");
        let home = dir.path().join("cairn-home");
        Fixture {
            _dir: dir,
            root,
            home,
        }
    }

    /// The workspace's store, as `cairn info` says.
    pub fn store(&self) -> PathBuf {
        PathBuf::from(
            self.json(&["info"])["store"]
                .as_str()
                .expect("a store path"),
        )
    }

    /// `cairn -C ROOT ARGS`, with no terminal and no forced prompt.
    pub fn cairn(&self, args: &[&str]) -> Command {
        self.cairn_in(&self.root, args)
    }

    /// `cairn -C DIR ARGS` for another directory, with the fixture's data directory.
    pub fn cairn_in(&self, dir: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::cargo_bin("cairn").expect("the cairn binary");
        cmd.arg("-C")
            .arg(dir)
            .args(args)
            .env_remove("CAIRN_FORCE_PROMPT")
            .env_remove("CAIRN_THREADS_DB")
            .env_remove("CAIRN_REMOTE")
            .env_remove("CAIRN_STORE")
            .env("CAIRN_HOME", &self.home);
        cmd
    }

    /// Runs `cairn --json ARGS`, expects success, and parses stdout.
    pub fn json(&self, args: &[&str]) -> Value {
        serde_json::from_slice(&self.json_bytes(args)).expect("one JSON document on stdout")
    }

    /// What `cairn --json <args>` printed, unparsed; fails the test unless it succeeded.
    pub fn json_bytes(&self, args: &[&str]) -> Vec<u8> {
        let out = self
            .cairn(&[&["--json"], args].concat())
            .output()
            .expect("run cairn");
        assert!(
            out.status.success(),
            "cairn {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// Takes a snapshot with a label and returns its id.
    pub fn snapshot(&self, label: &str) -> String {
        let v = self.json(&["snapshot", "--label", label]);
        v["id"].as_str().expect("an id").to_string()
    }

    /// Writes a file under the root, making its directories.
    pub fn write(&self, rel: &str, content: &str) {
        let p = self.root.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(p, content).expect("write");
    }

    /// Reads a file under the root, if it exists.
    pub fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(rel)).ok()
    }

    /// A path under the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
}

/// Runs the command, expects `code`, and returns the parsed JSON error it printed on stderr.
pub fn json_error(cmd: &mut Command, code: i32) -> Value {
    let out = cmd.output().expect("run cairn");
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "nothing on stdout after an error");
    let v: Value = serde_json::from_slice(&out.stderr).expect("a JSON error on stderr");
    assert_eq!(v["error"]["exit_code"], code);
    v
}

/// Whether anything (even a dangling link) is at `p`.
pub fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

#[test]
fn every_command_has_help_with_an_example() {
    for cmd in [
        "snapshot",
        "list",
        "show",
        "diff",
        "restore",
        "delete",
        "prune",
        "gc",
        "verify",
        "recover",
        "demo",
        "info",
        "doctor",
        "stores",
        "store move",
        "workspace adopt",
        "hook claude-code",
        "init claude-code",
        "mcp",
        "trust",
        "thread new",
        "thread append",
        "thread log",
        "thread list",
        "rewind",
        "fork",
        "studio",
        "serve",
        "events",
        "export",
        "import",
        "init container",
    ] {
        Command::cargo_bin("cairn")
            .expect("bin")
            .args(cmd.split(' '))
            .arg("--help")
            .assert()
            .success()
            .stdout(predicate::str::contains("Example"));
    }
}

#[test]
fn the_top_level_help_documents_the_exit_codes() {
    Command::cargo_bin("cairn")
        .expect("bin")
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("Examples:"))
        .stdout(predicate::str::contains("Exit codes"))
        .stdout(predicate::str::contains("12  NOT_FOUND"))
        .stdout(predicate::str::contains("19  CORRUPT"));
}

#[test]
fn a_bad_flag_is_a_usage_error_and_a_json_document_with_json() {
    let f = Fixture::new();
    f.cairn(&["list", "--frobnicate"]).assert().code(2);
    let v = json_error(&mut f.cairn(&["--json", "list", "--frobnicate"]), 2);
    assert_eq!(v["error"]["kind"], "USAGE");
}

#[test]
fn demo_finishes_cleanly_and_tells_the_story() {
    Command::cargo_bin("cairn")
        .expect("bin")
        .arg("demo")
        .assert()
        .success()
        .stdout(predicate::str::contains("--dry-run"))
        .stdout(predicate::str::contains("safety snapshot"))
        .stdout(predicate::str::contains("whole story"));
}

// Issue 61: the demo showed the rewind's plan three times (the dry run, the refusal without
// --yes, the confirmed rewind); once is enough, and the two later steps still say what they did.
#[test]
fn the_demo_shows_the_rewind_plan_once() {
    let out = Command::cargo_bin("cairn")
        .expect("bin")
        .arg("demo")
        .output()
        .expect("run");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.matches("plan: rewind thread chat").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("refusing to rewind without confirmation"),
        "{text}"
    );
    assert!(text.contains("rewound thread chat"), "{text}");
}

#[test]
fn demo_with_json_lists_its_steps() {
    let out = Command::cargo_bin("cairn")
        .expect("bin")
        .args(["demo", "--json"])
        .output()
        .expect("run");
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let steps = v["steps"].as_array().expect("steps");
    assert!(steps.len() >= 12);
    assert!(steps
        .iter()
        .any(|s| s["command"].as_str() == Some("cairn thread log chat")));
    assert!(!exists(Path::new(v["directory"].as_str().expect("dir"))));
}
