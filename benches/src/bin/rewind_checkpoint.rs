//! A rewind's restore of 1,000 changed files, then the next checkpoint, with the stat cache
//! primed by the restore (issue 33) and without it (the behaviour before, by
//! `cairn_snapshot::set_restore_priming(false)`), side by side:
//!
//! ```text
//! cargo run --release -p cairn-benches --bin rewind_checkpoint -- [--files 10000] [--changed 1000] [--runs 5] [--seed 1]
//! ```
//!
//! Generates a tree, opens a workspace on it (store outside the tree, kept open in this
//! process as an agent runtime holds it) and takes its base snapshot, then the racy window is
//! waited out and a second snapshot leaves every record trusted. Each run, for each mode in
//! alternating order: `--changed` files are modified (the turn being rewound), the base
//! snapshot is restored (timed: its safety snapshot reads the edited files, then it writes
//! them back), the racy window passes (the next message comes later, as in the issue), and
//! the next checkpoint is taken (timed). The stat cache's background writes are waited for
//! outside the timings. Prints the medians, the files each checkpoint read, and the ratios.

use cairn_benches::cli::{self, Args};
use cairn_benches::gen::{self, MutateSpec};
use std::time::{Duration, Instant};

const USAGE: &str =
    "usage: rewind_checkpoint [--files 10000] [--changed 1000] [--runs 5] [--seed 1]";

/// Past the racy window (2 s), so that neither mode's checkpoint sees a file inside it.
const REST: Duration = Duration::from_millis(2100);

fn main() {
    cli::main(
        "rewind_checkpoint",
        USAGE,
        &["files", "changed", "runs", "seed"],
        run,
    );
}

fn run(args: Args) -> Result<(), String> {
    let runs = args.number("runs", 5)?.max(1);
    let changed = args.number("changed", 1000)? as usize;
    let seed = args.number("seed", 1)?;
    let scratch = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let tree = scratch.path().join("tree");
    let title = cli::generate_tree(&args, &tree, 10_000)?;
    println!(
        "machine: {} cores; runs: {runs}; {changed} files changed; tree: {title}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let ws = cli::open_workspace(&tree, scratch.path().join("store"))?;
    let snapshot = || {
        ws.snapshot(&ws.snapshot_options(), Default::default())
            .map_err(|e| format!("snapshot: {e}"))
    };
    let base = snapshot()?;
    std::thread::sleep(REST);
    snapshot()?;
    ws.flush_stat_cache();

    // [0 = not primed (before), 1 = primed (after)]: restore ms, checkpoint ms, files read.
    let mut restore: [Vec<f64>; 2] = Default::default();
    let mut next: [Vec<f64>; 2] = Default::default();
    let mut read: [Vec<u64>; 2] = Default::default();
    for r in 0..runs {
        let order: [usize; 2] = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for (k, mode) in order.into_iter().enumerate() {
            cairn_snapshot::set_restore_priming(mode == 1);
            let edits = gen::mutate(
                &tree,
                &MutateSpec {
                    modify: changed,
                    seed: seed.wrapping_add(r * 2 + k as u64 + 1),
                    ..MutateSpec::default()
                },
            )
            .map_err(|e| format!("editing the tree: {e}"))?;
            let t = Instant::now();
            let report = ws
                .restore(
                    &base.snapshot.id,
                    &Default::default(),
                    &Default::default(),
                    Default::default(),
                )
                .map_err(|e| format!("restore: {e}"))?;
            restore[mode].push(t.elapsed().as_secs_f64() * 1e3);
            if report.summary.restored.len() < edits.modified.len() {
                return Err(format!(
                    "the restore wrote {} paths for {} edits",
                    report.summary.restored.len(),
                    edits.modified.len()
                ));
            }
            ws.flush_stat_cache();
            std::thread::sleep(REST);
            let t = Instant::now();
            let snap = snapshot()?;
            next[mode].push(t.elapsed().as_secs_f64() * 1e3);
            read[mode].push(snap.snapshot.stats.hashed);
            if snap.snapshot.root != base.snapshot.root {
                return Err("the checkpoint after the restore is not the base tree".into());
            }
            ws.flush_stat_cache();
        }
    }
    cairn_snapshot::set_restore_priming(true);
    let m = |v: &Vec<f64>| cli::median(v).unwrap_or(0.0);
    let range = |v: &Vec<f64>| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        format!("{:.1} ({lo:.0}-{hi:.0})", m(v))
    };
    println!();
    println!("| stat cache after the restore | restore, ms (min-max) | next checkpoint, ms (min-max) | files the checkpoint read | restore + checkpoint, ms |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (mode, label) in ["not primed (before)", "primed (after)"].iter().enumerate() {
        println!(
            "| {label} | {} | {} | {:?} | {:.1} |",
            range(&restore[mode]),
            range(&next[mode]),
            read[mode],
            m(&restore[mode]) + m(&next[mode])
        );
    }
    println!(
        "\nafter / before: restore {:.2}x, next checkpoint {:.2}x, both {:.2}x",
        m(&restore[1]) / m(&restore[0]),
        m(&next[1]) / m(&next[0]),
        (m(&restore[1]) + m(&next[1])) / (m(&restore[0]) + m(&next[0]))
    );
    Ok(())
}
