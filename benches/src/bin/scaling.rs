//! What a snapshot costs in CPU and memory, measured side by side in one run:
//!
//! cargo run --release -p cairn-benches --bin scaling -- [--files 60000] [--dir PATH] [--runs 3] [--seed 1]
//!
//! - **hashing**: SHA-256 (`cairn_store::Hasher`) over a 256 MiB buffer on one thread, in GB/s;
//! - **threads**: a first snapshot of the tree into a fresh store with 1 and with 2 worker
//!   threads (each in a child process of this binary, the tree's pages warm), and the speed-up;
//! - **peak memory**: the child's peak resident set (`VmHWM`) after a first snapshot and
//!   after a snapshot with nothing changed, against the tree's size.

use cairn_benches::cli::{self, Args};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const USAGE: &str = "usage: scaling [--files 60000] [--dir PATH] [--runs 3] [--seed 1]\n\
                     (internal: --probe TREE --store DIR --threads N)";

fn main() {
    cli::main(
        "scaling",
        USAGE,
        &["files", "dir", "runs", "seed", "probe", "store", "threads"],
        run,
    );
}

/// The child: one first snapshot and one with nothing changed, printing
/// `first_ms first_peak_kib nochange_ms nochange_peak_kib`.
fn probe(tree: &Path, store: &Path, threads: usize) -> Result<(), String> {
    let store = cairn_store::Store::open(store, cairn_store::StoreOptions::default())
        .map_err(|e| e.to_string())?;
    let options = cairn_snapshot::Options::default();
    let ctx = || cairn_snapshot::Context {
        threads: Some(threads),
        ..Default::default()
    };
    let t = Instant::now();
    cairn_snapshot::snapshot(&store, tree, "scaling", &options, ctx())
        .map_err(|e| e.to_string())?;
    let first = t.elapsed().as_secs_f64() * 1e3;
    let first_peak = peak_kib();
    let t = Instant::now();
    cairn_snapshot::snapshot(&store, tree, "scaling", &options, ctx())
        .map_err(|e| e.to_string())?;
    let again = t.elapsed().as_secs_f64() * 1e3;
    println!("{first} {first_peak} {again} {}", peak_kib());
    Ok(())
}

/// The process's peak resident set (`VmHWM` in `/proc/self/status`), KiB.
fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn hash_gbps(runs: usize) -> f64 {
    let buf: Vec<u8> = (0..256u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let mut rates = Vec::new();
    for _ in 0..runs.max(3) {
        let t = Instant::now();
        let mut h = cairn_store::Hasher::new();
        h.update(&buf);
        std::hint::black_box(h.finish());
        rates.push(buf.len() as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    cli::median(&rates).unwrap_or(0.0)
}

fn run(args: Args) -> Result<(), String> {
    if let Some(tree) = args.get("probe") {
        let store = args.get("store").ok_or("--probe needs --store")?;
        let threads = args.number("threads", 1)? as usize;
        return probe(Path::new(tree), Path::new(store), threads);
    }
    let runs = args.number("runs", 3)?.max(1) as usize;
    let scratch = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let (tree, title): (PathBuf, String) = match args.get("dir") {
        Some(d) => (PathBuf::from(d), d.to_string()),
        None => {
            let tree = scratch.path().join("tree");
            let title = cli::generate_tree(&args, &tree, 60_000)?;
            (tree, title)
        }
    };
    println!(
        "machine: {} cores; runs: {runs}; tree: {title}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "hashing (SHA-256, one thread, 256 MiB buffer): {:.2} GB/s",
        hash_gbps(runs)
    );
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut first: [Vec<f64>; 2] = Default::default();
    let mut again: [Vec<f64>; 2] = Default::default();
    let mut peak_first: [Vec<f64>; 2] = Default::default();
    let mut peak_again: [Vec<f64>; 2] = Default::default();
    for run in 0..runs {
        // Alternate the order, so neither thread count always runs on a warmer machine.
        let order: [usize; 2] = if run % 2 == 0 { [1, 2] } else { [2, 1] };
        for threads in order {
            let store = scratch.path().join(format!("store-{run}-{threads}"));
            let out = Command::new(&exe)
                .arg("--probe")
                .arg(&tree)
                .arg("--store")
                .arg(&store)
                .args(["--threads", &threads.to_string()])
                .output()
                .map_err(|e| format!("running the probe: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "the probe failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            let text = String::from_utf8_lossy(&out.stdout);
            let v: Vec<f64> = text
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            let [f, pf, a, pa] = v[..] else {
                return Err(format!("the probe printed {text:?}"));
            };
            let i = threads - 1;
            first[i].push(f);
            peak_first[i].push(pf);
            again[i].push(a);
            peak_again[i].push(pa);
            std::fs::remove_dir_all(&store).map_err(|e| format!("removing a store: {e}"))?;
        }
    }
    let m = |v: &Vec<f64>| cli::median(v).unwrap_or(0.0);
    println!();
    println!("| threads | first snapshot, ms | peak RSS after it | nothing changed, ms | peak RSS after it |");
    println!("| ---: | ---: | ---: | ---: | ---: |");
    for i in 0..2 {
        println!(
            "| {} | {:.0} | {:.1} MiB | {:.0} | {:.1} MiB |",
            i + 1,
            m(&first[i]),
            m(&peak_first[i]) / 1024.0,
            m(&again[i]),
            m(&peak_again[i]) / 1024.0
        );
    }
    println!();
    println!(
        "speed-up from 1 to 2 threads, first snapshot: {:.2}x; nothing changed: {:.2}x",
        m(&first[0]) / m(&first[1]),
        m(&again[0]) / m(&again[1])
    );
    Ok(())
}
