//! A full restore into an empty directory against `tar -x` of the same tree, side by side on
//! the same file system state:
//!
//! cargo run --release -p cairn-benches --bin full_restore -- [--files 60000] [--dir PATH] [--runs 5] [--seed 1]
//!
//! Both sides create every file of the tree, and on this machine's disk (ext4 without a
//! journal) creating a file costs what the kernel's inode allocator costs. It passes over
//! every free inode deleted less than 60 s ago (360 s while its inode-table block is not yet
//! written back: `recently_deleted` in `fs/ext4/ialloc.c`), reading each one's table entry,
//! so creating many files within minutes of deleting many is several times slower, for any
//! program. In `compare`, every contender's copy is made right after the previous one was
//! deleted, and its full-restore row moves by 3-8x between runs. Here nothing is deleted while
//! timing: every output stays until the end, the harness `sync`s and waits 61 s after its own
//! set-up, `sync`s before each step, and alternates which side goes first. Run it when
//! nothing else on the machine deleted many files in the last six minutes.
//!
//! - **cairn**: a workspace on a fresh empty directory sharing the store that holds the tree's
//!   snapshot (store outside the tree), `Workspace::open` and `Workspace::restore` of that
//!   snapshot: planned, journalled, files written in staged directories renamed into place
//!   (made durable by the next opening or restore of the workspace, outside the timing, as
//!   tar's writes are left to the kernel);
//! - **tar**: `tar -xf` of an archive of the tree made once beforehand (no sync).
//!
//! Each output is checked afterwards (untimed) to list the same paths as the tree.

use cairn_benches::cli::{self, listing, Args};
use cairn_restore::{Workspace, WorkspaceOptions};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: full_restore [--files 60000] [--dir PATH] [--runs 5] [--seed 1]";

/// How long ext4 treats a freed inode whose table block is written back as recently deleted.
const RECENTLY_DELETED: Duration = Duration::from_secs(61);

fn main() {
    cli::main(
        "full_restore",
        USAGE,
        &["files", "dir", "runs", "seed"],
        run,
    );
}

fn tar(args: &[&str], dir: &Path) -> Result<(), String> {
    cli::output(Command::new("tar").arg("-C").arg(dir).args(args)).map(drop)
}

fn run(args: Args) -> Result<(), String> {
    let runs = args.number("runs", 5)?.max(1) as usize;
    let scratch = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let tree = scratch.path().join("tree");
    let title = match args.get("dir") {
        Some(d) => {
            tar(
                &["-cf", &scratch.path().join("in.tar").to_string_lossy(), "."],
                Path::new(d),
            )?;
            std::fs::create_dir(&tree).map_err(|e| e.to_string())?;
            tar(
                &["-xf", &scratch.path().join("in.tar").to_string_lossy()],
                &tree,
            )?;
            d.to_string()
        }
        None => cli::generate_tree(&args, &tree, 60_000)?,
    };
    println!(
        "machine: {} cores; runs: {runs}; tree: {title}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let archive = scratch.path().join("tree.tar");
    tar(&["-cf", &archive.to_string_lossy(), "."], &tree)?;
    let store = scratch.path().join("store");
    let source = Workspace::open(
        &tree,
        WorkspaceOptions {
            store: Some(store.clone()),
            ..WorkspaceOptions::default()
        },
    )
    .map_err(|e| format!("opening the tree: {e}"))?;
    let snap = source
        .snapshot(&source.snapshot_options(), Default::default())
        .map_err(|e| format!("snapshot: {e}"))?;
    source.flush_stat_cache();
    let want = listing(&tree)?;
    rustix::fs::sync();
    std::thread::sleep(RECENTLY_DELETED);

    let mut ms: [Vec<f64>; 2] = Default::default();
    for r in 0..runs {
        let order: [usize; 2] = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for who in order {
            let out = scratch.path().join(format!("out-{r}-{who}"));
            std::fs::create_dir(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            rustix::fs::sync();
            let t = Instant::now();
            if who == 0 {
                let ws = Workspace::open(
                    &out,
                    WorkspaceOptions {
                        store: Some(store.clone()),
                        id: Some(format!("full-{r}")),
                        ..WorkspaceOptions::default()
                    },
                )
                .map_err(|e| format!("opening the empty directory: {e}"))?;
                ws.restore(
                    &snap.snapshot.id,
                    &Default::default(),
                    &Default::default(),
                    Default::default(),
                )
                .map_err(|e| format!("restore: {e}"))?;
            } else {
                tar(&["-xf", &archive.to_string_lossy()], &out)?;
            }
            ms[who].push(t.elapsed().as_secs_f64() * 1e3);
        }
        eprint!("\r  run {}/{runs} done", r + 1);
    }
    eprintln!();
    for r in 0..runs {
        for who in 0..2 {
            let got = listing(&scratch.path().join(format!("out-{r}-{who}")))?;
            if got != want {
                return Err(format!(
                    "run {r}: {} restored {} paths, the tree has {}",
                    ["cairn", "tar"][who],
                    got.len(),
                    want.len()
                ));
            }
        }
    }
    let show = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{:.0}", x))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let [c, t] = &ms;
    let (mc, mt) = (cli::median(c).unwrap_or(0.0), cli::median(t).unwrap_or(0.0));
    println!("\n| | median, ms | each run, ms |");
    println!("| --- | ---: | --- |");
    println!("| cairn restore | {mc:.0} | {} |", show(c));
    println!("| tar -x | {mt:.0} | {} |", show(t));
    println!(
        "\ncairn / tar: {:.2}x (median of medians); per run: {}",
        mc / mt,
        c.iter()
            .zip(t)
            .map(|(a, b)| format!("{:.2}x", a / b))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("every output lists the tree's {} paths", want.len());
    Ok(())
}
