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
        "the_explorer_catches_a_pack_directory_left_unsynced_with_the_state_that_loses_a_snapshot",
        unsynced_packs_dir_is_caught,
    ),
];

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
