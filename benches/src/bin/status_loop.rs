//! The two walk-bound snapshot scenarios of `compare`, alone and many times over, in minutes
//! rather than the half hour `compare` needs on the 60,000-file tree:
//!
//! cargo run --release -p cairn-benches --bin status_loop -- [--files 60000] [--dir PATH] [--runs 11] [--seed 1]
//!
//! One copy of the tree (generated, or `--dir` copied first so it is never modified) is made a
//! git repository with everything committed, and a Cairn workspace (store outside the tree)
//! takes a first snapshot. Each run then times, side by side and in alternating order:
//!
//! - **no change**: `git status --porcelain` (untracked cache on) and a Cairn snapshot, with
//!   nothing changed since the last of each;
//! - **10 changed**: the same after 10 files were modified (and 2.1 s of rest, so neither
//!   tool sees them inside its racy window).
//!
//! Cairn runs in this process on a workspace kept open, as an agent runtime would hold it;
//! git runs as a process, as agents run it. It prints each median in milliseconds and the
//! ratio of medians; `compare` remains the harness of record for docs/PERFORMANCE.md.

use cairn_benches::cli::{self, Args};

use std::process::Command;
use std::time::Instant;

const USAGE: &str = "usage: status_loop [--files 60000] [--dir PATH] [--runs 11] [--seed 1]";

fn main() {
    cli::main("status_loop", USAGE, &["files", "dir", "runs", "seed"], run);
}

/// Milliseconds `f` took.
fn timed(f: impl FnOnce() -> Result<(), String>) -> Result<f64, String> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

fn run(args: Args) -> Result<(), String> {
    let runs = args.number("runs", 11)?.max(1) as usize;
    let seed = args.number("seed", 1)?;
    let scratch = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let tree = scratch.path().join("tree");
    let title = match args.get("dir") {
        Some(d) => {
            cli::output(Command::new("cp").arg("-a").arg(d).arg(&tree))?;
            d.to_string()
        }
        None => cli::generate_tree(&args, &tree, 60_000)?,
    };
    println!(
        "machine: {} cores; runs: {runs}; tree: {title}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    cli::git(&tree, &["init", "-q"])?;
    cli::git(&tree, &["add", "-A"])?;
    cli::git(&tree, &["commit", "-q", "-m", "base"])?;
    let status = || cli::git(&tree, &["status", "--porcelain"]);
    // Twice: the first writes the untracked cache into the index, the second uses it.
    status()?;
    status()?;
    let ws = cli::open_workspace(&tree, scratch.path().join("store"))?;
    let snapshot = || {
        ws.snapshot(&ws.snapshot_options(), Default::default())
            .map(drop)
            .map_err(|e| format!("snapshot: {e}"))
    };
    snapshot()?;
    std::thread::sleep(cli::REST);
    snapshot()?;

    // [scenario][0 = git status, 1 = cairn]
    let mut times: [[Vec<f64>; 2]; 2] = Default::default();
    let mut hashed = Vec::new();
    for run in 0..runs {
        for (scenario, slot) in times.iter_mut().enumerate() {
            if scenario == 1 {
                cli::modify_and_rest(&tree, 10, seed.wrapping_add(run as u64 + 1))?;
            }
            let order: [usize; 2] = if run % 2 == 0 { [0, 1] } else { [1, 0] };
            for who in order {
                let ms = if who == 0 {
                    timed(status)?
                } else {
                    let t = Instant::now();
                    let snap = ws
                        .snapshot(&ws.snapshot_options(), Default::default())
                        .map_err(|e| format!("snapshot: {e}"))?;
                    hashed.push(snap.snapshot.stats.hashed);
                    let ms = t.elapsed().as_secs_f64() * 1e3;
                    // Untimed: the stat cache's background write (see `compare`).
                    ws.flush_stat_cache();
                    ms
                };
                slot[who].push(ms);
            }
        }
    }
    let m = |v: &Vec<f64>| cli::median(v).unwrap_or(0.0);
    println!();
    println!("| scenario | git status, ms | Cairn, ms | Cairn / git status |");
    println!("| --- | ---: | ---: | ---: |");
    for (scenario, label) in ["no change", "10 changed"].iter().enumerate() {
        let [g, c] = &times[scenario];
        println!(
            "| {label} | {:.1} | {:.1} | {:.2}x |",
            m(g),
            m(c),
            m(c) / m(g)
        );
    }
    println!(
        "\nfiles Cairn read per snapshot, no change then 10 changed: {:?}",
        hashed
    );
    Ok(())
}
