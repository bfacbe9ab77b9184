//! One store per workspace, or one store shared by every workspace? What the shared store would
//! save, measured side by side (issue 19 chose the layout from these figures).
//!
//! ```text
//! cargo run --release -p cairn-benches --bin store_layout -- [--files 10000] [--seed 1] [--runs 5]
//! ```
//!
//! Generates a tree A and a copy B of it (a second clone of the same project), then, each run
//! from fresh stores:
//! - **per workspace**: snapshot A into its store, B into another; a fork of A's snapshot into B
//!   copies it (`copy_snapshot`) into B's store;
//! - **shared**: A and B snapshot into one store; a fork copies nothing.
//!
//! Prints medians of the time of B's first snapshot and of the fork's copy, next to A's first
//! snapshot, and the bytes on disk of each layout.

use cairn_benches::cli::{self, Args};
use cairn_benches::gen::{self, TreeSpec};
use cairn_benches::ingest::disk_usage;
use cairn_restore::{Workspace, WorkspaceOptions};
use std::path::Path;
use std::time::Instant;

const USAGE: &str = "usage: store_layout [--files N] [--seed N] [--runs N]";

fn main() {
    cli::main("store_layout", USAGE, &["files", "seed", "runs"], run);
}

fn open(root: &Path, store: &Path) -> Result<Workspace, String> {
    Workspace::open(
        root,
        WorkspaceOptions {
            store: Some(store.to_path_buf()),
            ..WorkspaceOptions::default()
        },
    )
    .map_err(|e| format!("open {}: {e}", root.display()))
}

/// Takes a snapshot and returns its id and the milliseconds it took.
fn timed_snapshot(ws: &Workspace) -> Result<(cairn_store::SnapshotId, f64), String> {
    let t = Instant::now();
    let s = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .map_err(|e| format!("snapshot: {e}"))?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    ws.flush_stat_cache();
    Ok((s.snapshot.id, ms))
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    let status = std::process::Command::new("cp")
        .args(["-a"])
        .arg(from)
        .arg(to)
        .status()
        .map_err(|e| format!("cp: {e}"))?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| "cp -a failed".to_string())
}

fn run(args: Args) -> Result<(), String> {
    let files = args.number("files", 10_000)? as usize;
    let seed = args.number("seed", 1)?;
    let runs = args.number("runs", 5)?.max(1);
    let scratch = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let a = scratch.path().join("a");
    let stats =
        gen::generate(&a, &TreeSpec::new(files, seed)).map_err(|e| format!("generate: {e}"))?;
    let b = scratch.path().join("b");
    copy_tree(&a, &b)?;
    println!(
        "tree: {} files, {} (seed {seed}); B is a copy of A; {runs} runs, fresh stores each; \
         times are medians",
        stats.files,
        cli::bytes(stats.bytes)
    );

    let (mut a_first, mut b_sep, mut b_shared, mut fork_copy) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut du_sep, mut du_shared) = (0, 0);
    for run in 0..runs {
        let dir = scratch.path().join(format!("run{run}"));
        // One store per workspace.
        let (sa, sb) = (dir.join("store-a"), dir.join("store-b"));
        let wa = open(&a, &sa)?;
        let (snap, ms) = timed_snapshot(&wa)?;
        a_first.push(ms);
        let wb = open(&b, &sb)?;
        b_sep.push(timed_snapshot(&wb)?.1);
        let t = Instant::now();
        cairn_store::copy::copy_snapshot(wa.store(), &snap, wb.store())
            .map_err(|e| format!("copy: {e}"))?;
        fork_copy.push(t.elapsed().as_secs_f64() * 1000.0);
        drop((wa, wb));
        du_sep = disk_usage(&sa).map_err(|e| e.to_string())?.1
            + disk_usage(&sb).map_err(|e| e.to_string())?.1;
        // One store for both.
        let shared = dir.join("shared");
        let wa = open(&a, &shared)?;
        timed_snapshot(&wa)?;
        let wb = open(&b, &shared)?;
        b_shared.push(timed_snapshot(&wb)?.1);
        drop((wa, wb));
        du_shared = disk_usage(&shared).map_err(|e| e.to_string())?.1;
        std::fs::remove_dir_all(&dir).map_err(|e| format!("remove {}: {e}", dir.display()))?;
    }
    let m = |xs: &[f64]| cli::median(xs).unwrap_or(0.0);
    let base = m(&a_first);
    println!("\n{:<44} {:>10} {:>10}", "", "ms", "vs A's 1st");
    for (what, xs) in [
        ("A's first snapshot (either layout)", &a_first),
        ("B's first snapshot, a store of its own", &b_sep),
        ("B's first snapshot, the shared store", &b_shared),
        ("fork A -> B: copy the snapshot (own stores)", &fork_copy),
    ] {
        println!("{what:<44} {:>10.0} {:>9.2}x", m(xs), m(xs) / base);
    }
    println!("fork A -> B in the shared store: nothing to copy (0 ms)");
    println!(
        "\nstores on disk: one per workspace {}, shared {} ({:.2}x); the tree is {}",
        cli::bytes(du_sep),
        cli::bytes(du_shared),
        du_sep as f64 / du_shared.max(1) as f64,
        cli::bytes(stats.bytes)
    );
    Ok(())
}
