//! The store's size on disk for a generated source-like tree, raw and compressed.
//!
//! ```text
//! cargo run --release -p cairn-benches --bin store_size -- [--files 10000] [--seed 1] [--runs 3] [--dir PATH]
//! ```
//!
//! Generates a tree (or reads the one `--dir` names, without changing it), stores it (with [`cairn_benches::ingest`]) into a fresh store once per
//! compression setting and run, and prints the store's size (apparent bytes and what `du`
//! counts), split into packs (small objects: the text) and large objects (the binary files),
//! the ratio of the tree's bytes to the store's, and the median time to store.

use cairn_benches::cli::{self, Args};
use cairn_benches::gen::{self, TreeSpec};
use cairn_benches::ingest::{disk_usage, ingest, store_options};
use cairn_store::{Compression, Store};
use std::path::Path;
use std::time::Instant;

const USAGE: &str = "usage: store_size [--files N] [--seed N] [--runs N] [--dir PATH]";

fn main() {
    cli::main("store_size", USAGE, &["files", "seed", "runs", "dir"], run);
}

fn run(args: Args) -> Result<(), String> {
    let files = args.number("files", 10_000)? as usize;
    let seed = args.number("seed", 1)?;
    let runs = args.number("runs", 3)?.max(1);

    let scratch = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let (tree, stats) = match args.get("dir") {
        Some(dir) => {
            let tree = std::path::PathBuf::from(dir);
            let stats = describe(&tree).map_err(|e| format!("reading {dir}: {e}"))?;
            println!(
                "tree: {dir}, {} files, {} dirs, {} symlinks",
                stats.files, stats.dirs, stats.symlinks
            );
            (tree, stats)
        }
        None => {
            let tree = scratch.path().join("tree");
            let t = Instant::now();
            let stats = gen::generate(&tree, &TreeSpec::new(files, seed))
                .map_err(|e| format!("generating the tree: {e}"))?;
            println!(
                "tree: {} files (seed {seed}), {} dirs (depth {}, up to {} files in one), \
                 {} symlinks, {} executables; generated in {:.1} s",
                stats.files,
                stats.dirs,
                stats.max_depth,
                stats.max_files_in_dir,
                stats.symlinks,
                stats.executables,
                t.elapsed().as_secs_f64()
            );
            (tree, stats)
        }
    };
    let (tree_bytes, tree_du) =
        disk_usage(&tree).map_err(|e| format!("measuring the tree: {e}"))?;
    let text_bytes = stats.bytes - stats.large_bytes;
    println!(
        "      file bytes {} = small files {} + {} files over 1 MiB {}; du of the tree {} \
         (apparent, directories included: {})",
        cli::bytes(stats.bytes),
        cli::bytes(text_bytes),
        stats.large_files,
        cli::bytes(stats.large_bytes),
        cli::bytes(tree_du),
        cli::bytes(tree_bytes),
    );
    println!("runs: {runs} per setting, fresh store each run; times are medians\n");

    let settings = [
        ("none", Compression::None),
        ("zstd 1", Compression::Zstd { level: 1 }),
        ("zstd 3", Compression::Zstd { level: 3 }),
        ("zstd 9", Compression::Zstd { level: 9 }),
    ];
    println!(
        "{:<8} {:>11} {:>11} {:>11} {:>11} {:>11} {:>12} {:>12} {:>10}",
        "store",
        "store du",
        "packs",
        "large",
        "small/packs",
        "files/store",
        "tree du/du",
        "time (ms)",
        "vs none"
    );
    let mut base_ms = None;
    for (name, compression) in settings {
        let mut times = Vec::new();
        let mut sizes = None;
        for _ in 0..runs {
            let dir = scratch.path().join("store");
            let store = Store::open(&dir, store_options(compression))
                .map_err(|e| format!("opening the store: {e}"))?;
            let t = Instant::now();
            ingest(&store, &tree).map_err(|e| format!("storing the tree: {e}"))?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            let layout = store.layout().clone();
            drop(store);
            let (_, du) = disk_usage(&dir).map_err(|e| format!("measuring the store: {e}"))?;
            let (packs, _) =
                disk_usage(&layout.packs).map_err(|e| format!("measuring the packs: {e}"))?;
            let (large, _) =
                disk_usage(&layout.large).map_err(|e| format!("measuring large objects: {e}"))?;
            sizes = Some((du, packs, large));
            std::fs::remove_dir_all(&dir).map_err(|e| format!("removing the store: {e}"))?;
        }
        let (du, packs, large) = sizes.ok_or("no run")?;
        let ms = cli::median(&times).ok_or("no run")?;
        let base = *base_ms.get_or_insert(ms);
        println!(
            "{:<8} {:>11} {:>11} {:>11} {:>10.2}x {:>10.2}x {:>11.2}x {:>12.0} {:>9.2}x",
            name,
            cli::bytes(du),
            cli::bytes(packs),
            cli::bytes(large),
            text_bytes as f64 / packs as f64,
            stats.bytes as f64 / du as f64,
            tree_du as f64 / du as f64,
            ms,
            ms / base,
        );
    }
    println!(
        "\nsmall/packs: bytes of files up to 1 MiB / pack bytes (the source-like part; packs also hold trees).\n\
         files/store: all file bytes / the store's du. tree du/du: the tree's du / the store's du.\n\
         Times include reading the (cached) tree and hashing; the walk is cairn_benches::ingest, \
         not cairn-snapshot."
    );
    Ok(())
}

/// The counts [`gen::generate`] reports, for a tree it did not write.
fn describe(root: &Path) -> std::io::Result<gen::GenStats> {
    let mut stats = gen::GenStats::default();
    for (_, kind) in gen::walk(root)? {
        match kind {
            gen::Kind::Dir => stats.dirs += 1,
            gen::Kind::Symlink => stats.symlinks += 1,
            gen::Kind::File { size, executable } => {
                stats.files += 1;
                stats.bytes += size;
                stats.executables += usize::from(executable);
                if size > gen::LARGE_FILE {
                    stats.large_files += 1;
                    stats.large_bytes += size;
                }
            }
        }
    }
    Ok(stats)
}
