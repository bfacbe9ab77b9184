//! Writes a generated source-like tree, to look at or to try tools on.
//!
//! ```text
//! cargo run --release -p cairn-benches --bin gen_tree -- --out DIR [--files 10000] [--seed 1] [--shape test262]
//! ```
//!
//! `--shape test262`: the shape of tc39/test262 (`TreeSpec::test262`; `--files` defaults to
//! 56,970 then).

use cairn_benches::cli::{self, Args};
use cairn_benches::gen::{self, TreeSpec};
use std::path::PathBuf;

const USAGE: &str = "usage: gen_tree --out DIR [--files N] [--seed N] [--shape test262]";

fn main() {
    cli::main("gen_tree", USAGE, &["out", "files", "seed", "shape"], run);
}

fn run(args: Args) -> Result<(), String> {
    let out = PathBuf::from(args.get("out").ok_or("--out is required")?);
    if out.exists() {
        return Err(format!("{} exists; give a new directory", out.display()));
    }
    let seed = args.number("seed", 1)?;
    let spec = match args.get("shape") {
        None => TreeSpec::new(args.number("files", 10_000)? as usize, seed),
        Some("test262") => TreeSpec::test262(args.number("files", 56_970)? as usize, seed),
        Some(other) => return Err(format!("--shape: only test262 is known, not '{other}'")),
    };
    let stats = gen::generate(&out, &spec).map_err(|e| format!("{}: {e}", out.display()))?;
    println!(
        "{}: {} files ({}), {} dirs, depth {}, up to {} files in one dir, {} symlinks, \
         {} executables, {} large files ({})",
        out.display(),
        stats.files,
        cli::bytes(stats.bytes),
        stats.dirs,
        stats.max_depth,
        stats.max_files_in_dir,
        stats.symlinks,
        stats.executables,
        stats.large_files,
        cli::bytes(stats.large_bytes)
    );
    Ok(())
}
