//! Writes a generated source-like tree, to look at or to try tools on.
//!
//! ```text
//! cargo run --release -p cairn-benches --bin gen_tree -- --out DIR [--files 10000] [--seed 1]
//! ```

use cairn_benches::cli::{self, Args};
use cairn_benches::gen::{self, TreeSpec};
use std::path::PathBuf;

const USAGE: &str = "usage: gen_tree --out DIR [--files N] [--seed N]";

fn main() {
    cli::main("gen_tree", USAGE, &["out", "files", "seed"], run);
}

fn run(args: Args) -> Result<(), String> {
    let out = PathBuf::from(args.get("out").ok_or("--out is required")?);
    if out.exists() {
        return Err(format!("{} exists; give a new directory", out.display()));
    }
    let spec = TreeSpec::new(
        args.number("files", 10_000)? as usize,
        args.number("seed", 1)?,
    );
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
