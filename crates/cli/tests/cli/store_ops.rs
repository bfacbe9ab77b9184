//! delete, prune, gc, verify and recover.

use crate::{json_error, Fixture};
use predicates::prelude::*;

fn three_snapshots(f: &Fixture) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..3 {
        f.write("n.txt", &format!("{i}\n"));
        ids.push(f.snapshot(&format!("s{i}")));
    }
    ids
}

fn count(f: &Fixture) -> usize {
    f.json(&["list"])["snapshots"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0)
}

#[test]
fn delete_refuses_without_confirmation_and_deletes_with_yes() {
    let f = Fixture::new();
    let ids = three_snapshots(&f);
    f.cairn(&["delete", "s0"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--yes"));
    let dry = f.json(&["delete", "s0", "--dry-run"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["deleted"], serde_json::json!([ids[0]]));
    assert_eq!(count(&f), 3);
    let v = f.json(&["delete", "s0", "--yes"]);
    assert_eq!(v["dry_run"], false);
    assert_eq!(v["deleted"], serde_json::json!([ids[0]]));
    assert_eq!(v["kept"], 2);
    assert!(v["gc"]["deferred"].is_boolean());
    assert_eq!(count(&f), 2);
    json_error(&mut f.cairn(&["--json", "delete", "s1"]), 2);
}

#[test]
fn prune_keeps_the_newest_and_needs_a_policy() {
    let f = Fixture::new();
    let ids = three_snapshots(&f);
    f.cairn(&["prune"]).assert().code(2);
    let dry = f.json(&["prune", "--keep", "1", "--dry-run"]);
    assert_eq!(dry["deleted"], serde_json::json!([ids[0], ids[1]]));
    assert_eq!(dry["kept"], 1);
    assert_eq!(count(&f), 3);
    f.cairn(&["prune", "--keep", "1"]).assert().code(2);
    assert_eq!(count(&f), 3);
    let v = f.json(&[
        "prune",
        "--keep",
        "1",
        "--max-age",
        "14d",
        "--max-bytes",
        "2GiB",
        "--yes",
    ]);
    assert_eq!(v["deleted"].as_array().map(Vec::len), Some(2));
    assert_eq!(count(&f), 1);
    assert_eq!(f.json(&["list"])["snapshots"][0]["id"], ids[2].as_str());
}

#[test]
fn prune_refuses_keep_zero_unless_all_says_to_delete_every_snapshot() {
    let f = Fixture::new();
    three_snapshots(&f);
    f.cairn(&["prune", "--keep", "0", "--yes"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--all"));
    assert_eq!(count(&f), 3);
    f.cairn(&["prune", "--all", "--keep", "1", "--yes"])
        .assert()
        .code(2);
    assert_eq!(count(&f), 3);
    let v = f.json(&["prune", "--all", "--yes"]);
    assert_eq!(v["deleted"].as_array().map(Vec::len), Some(3));
    assert_eq!(count(&f), 0);
}

#[test]
fn an_empty_label_is_refused() {
    let f = Fixture::new();
    f.cairn(&["snapshot", "--label", ""]).assert().code(2);
    f.cairn(&["snapshot", "--label", "  "]).assert().code(2);
    assert_eq!(count(&f), 0);
}

#[test]
fn prune_rejects_a_malformed_age() {
    let f = Fixture::new();
    f.snapshot("a");
    f.cairn(&["prune", "--max-age", "soon", "--yes"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("14d"));
}

#[test]
fn gc_reports_a_plan_and_a_collection() {
    let f = Fixture::new();
    three_snapshots(&f);
    let plan = f.json(&["gc", "--dry-run"]);
    assert_eq!(plan["snapshots"], 3);
    assert!(plan["reachable_objects"].as_u64().is_some_and(|n| n > 0));
    let done = f.json(&["gc"]);
    assert_eq!(done["deferred"], false);
    assert!(done["objects_deleted"].is_u64());
    f.cairn(&["gc"])
        .assert()
        .success()
        .stdout(predicate::str::contains("collected"));
}

#[test]
fn verify_passes_on_a_sound_store_and_exits_corrupt_on_damage() {
    let f = Fixture::new();
    f.snapshot("a");
    let v = f.json(&["verify"]);
    assert!(v["copies_checked"].as_u64().is_some_and(|n| n > 0));
    assert_eq!(v["snapshots"][0]["missing"], serde_json::json!([]));
    f.cairn(&["verify"])
        .assert()
        .success()
        .stdout(predicate::str::contains("all good"));
    // Flip the bytes of every pack's contents.
    let packs = f.store().join("objects/packs");
    for entry in std::fs::read_dir(&packs).expect("packs") {
        let p = entry.expect("entry").path();
        if p.extension().is_some_and(|e| e == "pack") {
            let mut bytes = std::fs::read(&p).expect("read");
            let n = bytes.len();
            for b in &mut bytes[n / 2..] {
                *b ^= 0xff;
            }
            std::fs::write(&p, bytes).expect("write");
        }
    }
    let out = f.cairn(&["--json", "verify"]).output().expect("run");
    assert_eq!(out.status.code(), Some(19));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the report");
    assert!(!report["bad_copies"].as_array().expect("bad").is_empty());
    let err: serde_json::Value = serde_json::from_slice(&out.stderr).expect("the error");
    assert_eq!(err["error"]["kind"], "CORRUPT");
}

#[test]
fn recover_with_nothing_pending_says_so() {
    let f = Fixture::new();
    f.snapshot("a");
    let v = f.json(&["recover"]);
    assert_eq!(v["recovered"], serde_json::json!([]));
    f.cairn(&["recover"])
        .assert()
        .success()
        .stdout(predicate::str::contains("nothing to recover"));
}
