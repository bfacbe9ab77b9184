//! The workloads (issue 57) and the tests that explore them.

use crate::check::{budget, explore, Expect, Explored, Recording};
use crate::util::{self, write};
use std::path::Path;

/// Every test of this binary.
pub const TESTS: &[crate::Test] = &[
    (
        "a_power_cut_during_a_first_or_incremental_snapshot_loses_no_acknowledged_snapshot",
        snapshots,
    ),
    (
        "a_power_cut_during_a_restore_with_deletes_and_swaps_leaves_the_files_before_or_after",
        restore,
    ),
    (
        "a_power_cut_during_the_merge_of_small_packs_after_a_snapshot_loses_no_object",
        merge,
    ),
    (
        "a_power_cut_during_a_prune_and_collection_keeps_every_kept_snapshot_whole",
        collection,
    ),
    (
        "a_power_cut_during_a_thread_append_keeps_every_acknowledged_entry_and_checkpoint",
        append,
    ),
    (
        "a_power_cut_during_a_rewind_with_files_leaves_it_whole_once_acknowledged",
        rewind,
    ),
    (
        "a_power_cut_during_a_fork_with_files_into_another_directory_leaves_it_whole_once_acknowledged",
        fork,
    ),
    (
        "a_power_cut_during_a_store_move_leaves_the_whole_store_in_one_place",
        store_move,
    ),
    (
        "the_explorer_catches_a_pack_directory_left_unsynced_with_the_state_that_loses_a_snapshot",
        unsynced_packs_dir_is_caught,
    ),
    (
        "the_crash_states_that_found_missing_syncs_in_restore_rewind_and_fork_stay_fixed",
        recorded_cases,
    ),
];

/// Issue 57: the seeds whose states found the restore's unsynced staging and the recovery that
/// left a made directory's mode (each failed before its fix), and a fork's; run again whatever
/// `CAIRN_SEED` says.
fn recorded_cases() {
    let cases: [(&str, fn(), u64); 3] = [
        ("rewind", rewind, 1796633573261635781),
        ("restore", restore, 1796633537984390931),
        ("fork", fork, 1796633586784796074),
    ];
    for (name, body, seed) in cases {
        println!("  recorded case: {name} with seed {seed}");
        crate::check::with_seed(seed, body);
    }
}

/// A small source-like tree, version `variant`: files in nested directories (some changing
/// from one variant to the next), a 100 KiB file (a large object), a symlink, a path that is a
/// file in even variants and a directory in odd ones, and a directory only this variant has.
fn tree(root: &Path, variant: u32) {
    for d in 0..3u32 {
        for i in 0..6u32 {
            let mut text = format!("// module {d}, file {i}\n");
            if (d + i + variant) % 3 == 0 {
                text.push_str(&format!("// edited in variant {variant}\n"));
            }
            write(root, &format!("src/m{d}/f{i}.rs"), text.as_bytes());
        }
    }
    write(
        root,
        &format!("only-{variant}/n.txt"),
        format!("only in variant {variant}\n").as_bytes(),
    );
    let mut rng = util::Rng::new(u64::from(variant / 2) + 7);
    write(root, "assets/big.bin", &rng.bytes(100 * 1024));
    std::os::unix::fs::symlink(format!("src/m{}/f0.rs", variant % 3), root.join("link"))
        .expect("symlink");
    if variant % 2 == 0 {
        write(root, "swap", b"a file in even variants\n");
    } else {
        write(root, "swap/inner.txt", b"a directory in odd variants\n");
    }
}

/// Replaces the workspace's files with variant `variant` (as a user's edits, long durable).
fn replace(rec: &Recording<'_>, variant: u32) {
    let ws = rec.lab.ws();
    util::clear(&ws);
    tree(&ws, variant);
    rec.barrier();
}

fn report(name: &str, e: &Explored) {
    util::figures(
        &format!("powercut-{name}"),
        &format!(
            "{} operations ({} syncs), {} cut points, {} crash states checked, {} failed",
            e.ops,
            e.syncs,
            e.cuts,
            e.states,
            e.failures.len()
        ),
    );
}

fn assert_clean(name: &str, e: &Explored) {
    report(name, e);
    assert!(
        e.failures.is_empty(),
        "{name}: {} crash states broke a property:\n{}",
        e.failures.len(),
        e.failures.join("\n")
    );
}

/// Issue 57: the first snapshot of a workspace (the store made), then an incremental one.
fn snapshots() {
    let e = explore(
        "snapshot",
        &[],
        budget(),
        |rec| {
            tree(&rec.lab.ws(), 0);
            rec.state("ws");
        },
        |rec| {
            rec.snapshot("ws");
            replace(rec, 1);
            rec.state("ws");
            rec.snapshot("ws");
        },
    );
    assert_clean("snapshot", &e);
}

/// Issue 57: a restore that deletes files, swaps a file for a directory, and takes its safety
/// snapshot first.
fn restore() {
    let e = explore(
        "restore",
        &[],
        budget(),
        |rec| {
            tree(&rec.lab.ws(), 0);
            rec.snapshot("ws");
            replace(rec, 1);
            rec.snapshot("ws");
            rec.state("ws");
        },
        |rec| {
            let target = match &rec.acks[0] {
                Expect::Snapshot { id, .. } => id.clone(),
                other => panic!("the setup's first snapshot: {other:?}"),
            };
            rec.lab.must(&["restore", &target, "--yes"]);
            // Before or after, whether or not it returned (its safety snapshot is the undo).
            rec.state("ws");
        },
    );
    assert_clean("restore", &e);
}

/// Issue 57: with the test-only switch removing the sync of `objects/packs/` after a pack is
/// renamed into it, the explorer finds a state that has the acknowledged snapshot's manifest
/// but not its pack.
fn unsynced_packs_dir_is_caught() {
    let e = explore(
        "snapshot-without-packs-dir-sync",
        &[("CAIRN_TEST_SKIP_SYNC", "packs-dir")],
        4,
        |rec| {
            tree(&rec.lab.ws(), 0);
            rec.snapshot("ws");
            replace(rec, 1);
            rec.state("ws");
        },
        |rec| {
            rec.snapshot("ws");
        },
    );
    report("snapshot-without-packs-dir-sync", &e);
    assert!(
        !e.failures.is_empty(),
        "the explorer found no state losing data with the packs directory unsynced"
    );
    println!(
        "  as it should, the explorer caught the missing sync:\n  {}",
        e.failures[0]
    );
}

/// Edits one file of the workspace (a user's edit, long durable).
fn edit(rec: &Recording<'_>, n: u32) {
    write(
        &rec.lab.ws(),
        "src/m0/f0.rs",
        format!("// edit {n}\n").as_bytes(),
    );
    rec.barrier();
}

/// Issue 57: the 65th pack of a store: the snapshot that makes it merges the small packs
/// (`MERGE_AFTER_SNAPSHOT_PACKS` in cairn-restore) before it returns.
fn merge() {
    let e = explore(
        "merge",
        &[],
        budget(),
        |rec| {
            tree(&rec.lab.ws(), 0);
            rec.snapshot("ws");
            // 64 more small packs, written through the library (64 snapshots would take a
            // minute): objects no snapshot names, as a merge takes them all the same.
            let info = rec.lab.must(&["--json", "info"]);
            let path = info.json()["store"].as_str().expect("a store").to_string();
            let store = cairn_store::Store::open(
                &path,
                cairn_store::StoreOptions {
                    create: false,
                    ..cairn_store::StoreOptions::default()
                },
            )
            .expect("the store opens");
            for n in 0..64u32 {
                let op = store
                    .begin_operation(cairn_store::OperationKind::Write, &[])
                    .expect("an operation");
                let w = store.writer(&op);
                w.put(
                    cairn_store::ObjectKind::Blob,
                    format!("pack {n}\n").as_bytes(),
                )
                .expect("a blob");
                w.commit().expect("a pack");
            }
            drop(store);
            edit(rec, 1);
            rec.state("ws");
        },
        |rec| {
            rec.snapshot("ws");
        },
    );
    assert_clean("merge", &e);
}

/// Sets every file of the store back two hours, past the collection's grace period.
fn age_store(rec: &Recording<'_>) {
    let status = std::process::Command::new("find")
        .arg(rec.lab.at("home/stores"))
        .args(["-exec", "touch", "-h", "-d", "2 hours ago", "{}", "+"])
        .status()
        .expect("find runs");
    assert!(status.success(), "aging the store");
    rec.barrier();
}

/// Issue 57: `cairn prune --keep 1` (which collects) and then `cairn gc`, on a store whose
/// objects are past the grace period: packs deleted and repacked.
fn collection() {
    let e = explore(
        "gc",
        &[],
        budget(),
        |rec| {
            tree(&rec.lab.ws(), 0);
            for v in 1..4 {
                rec.snapshot("ws");
                replace(rec, v);
            }
            rec.snapshot("ws");
            age_store(rec);
            rec.state("ws");
        },
        |rec| {
            let ids: Vec<String> = rec
                .acks
                .iter()
                .filter_map(|a| match a {
                    Expect::Snapshot { id, .. } => Some(id.clone()),
                    _ => None,
                })
                .collect();
            // What the prune deletes may be gone from the moment it begins.
            rec.ack(Expect::Deleted {
                ids: ids[..ids.len() - 1].to_vec(),
            });
            rec.lab.must(&["prune", "--keep", "1", "--yes"]);
            rec.lab.must(&["gc"]);
        },
    );
    assert_clean("gc", &e);
}

/// Issue 57: `cairn thread append --kind user` takes a checkpoint, then records the entry.
fn append() {
    let e = explore(
        "thread-append",
        &[],
        budget(),
        |rec| {
            tree(&rec.lab.ws(), 0);
            let t = rec.thread("ws");
            rec.append("ws", &t, "first");
            replace(rec, 1);
            rec.state("ws");
        },
        |rec| {
            let t = match &rec.acks[0] {
                Expect::Entry { thread, .. } => thread.clone(),
                other => panic!("the setup's thread: {other:?}"),
            };
            rec.append("ws", &t, "second");
        },
    );
    assert_clean("thread-append", &e);
}

/// A thread with two checkpoints, of variant 0 then of variant 1 (the files left as variant
/// 2 after); returns the thread and the first entry.
fn two_checkpoints(rec: &mut Recording<'_>) -> (String, String) {
    tree(&rec.lab.ws(), 0);
    let t = rec.thread("ws");
    let first = rec.append("ws", &t, "first");
    replace(rec, 1);
    rec.append("ws", &t, "second");
    replace(rec, 2);
    rec.append("ws", &t, "third");
    (t, first)
}

/// Issue 57: `cairn rewind THREAD ENTRY --files`: the files and the conversation.
fn rewind() {
    let picked = std::cell::RefCell::new(None);
    let e = explore(
        "rewind",
        &[],
        budget(),
        |rec| {
            *picked.borrow_mut() = Some(two_checkpoints(rec));
            rec.state("ws");
        },
        |rec| {
            let (t, first) = picked.borrow().clone().expect("the setup ran");
            rec.ack(Expect::Rewinding { thread: t.clone() });
            rec.lab
                .must(&["--json", "rewind", &t, &first, "--files", "--yes"]);
            let index = rec.state("ws");
            rec.ack(Expect::Files { ws: "ws", index });
        },
    );
    assert_clean("rewind", &e);
}

/// Issue 57: `cairn fork THREAD ENTRY --files --into DIR`: a new workspace, its own store and
/// a new thread.
fn fork() {
    let picked = std::cell::RefCell::new(None);
    let e = explore(
        "fork",
        &[],
        budget(),
        |rec| {
            *picked.borrow_mut() = Some(two_checkpoints(rec));
            rec.state("ws");
            rec.state("fork");
        },
        |rec| {
            let (t, first) = picked.borrow().clone().expect("the setup ran");
            let into = rec.lab.at("fork");
            let out = rec.lab.must(&[
                "--json",
                "fork",
                &t,
                &first,
                "--files",
                "--into",
                into.to_str().expect("a UTF-8 path"),
                "--yes",
            ]);
            let new = out.json()["thread_id"]
                .as_str()
                .expect("the fork's thread")
                .to_string();
            let index = rec.state("fork");
            rec.ack(Expect::Files { ws: "fork", index });
            rec.ack(Expect::Entry {
                ws: "fork",
                thread: new.clone(),
                entry: new,
            });
        },
    );
    assert_clean("fork", &e);
}

/// Issue 57: `cairn store move`, a store inside the workspace (`.cairn`, as an earlier version
/// made) moved to the data directory.
fn store_move() {
    let e = explore(
        "store-move",
        &[],
        budget(),
        |rec| {
            tree(&rec.lab.ws(), 0);
            let legacy = rec.lab.ws().join(".cairn");
            let out = rec.lab.cairn(&[
                "--store",
                legacy.to_str().expect("a UTF-8 path"),
                "--json",
                "snapshot",
            ]);
            assert!(out.ok(), "a snapshot into the legacy store: {out}");
            let id = out.json()["id"].as_str().expect("an id").to_string();
            let mut files = util::picture(&rec.lab.ws());
            files.retain(|k, _| !k.starts_with(b".cairn"));
            rec.ack(Expect::Snapshot { id, files });
            rec.barrier();
        },
        |rec| {
            rec.lab.must(&["store", "move"]);
            rec.ack(Expect::Moved);
        },
    );
    assert_clean("store-move", &e);
}
