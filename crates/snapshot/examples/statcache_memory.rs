//! How much heap a loaded stat cache holds: writes the stat cache file given on the command
//! line again in this version (into a temporary directory), then, in this process, loads it
//! as a snapshot does (`StatCache::load`: the header, the head and the index; each record is
//! read when a walk asks for it) and decodes it whole (`StatCache::decode`, every record in
//! memory, as versions up to 5 were always held), and prints `RssAnon` (from
//! `/proc/self/status`) and the time each took. A measurement, not a test. Run it with
//! `cargo run --release -p cairn-snapshot --example statcache_memory -- <statcache file>`.

use cairn_snapshot::StatCache;
use std::time::Instant;

/// `RssAnon` of this process, in MiB.
fn rss_anon() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    kib as f64 / 1024.0
}

/// One measurement, in this fresh process: `lazy` or `whole`.
fn measure(mode: &str, copy: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let base = rss_anon();
    let t = Instant::now();
    let cache = if mode == "lazy" {
        StatCache::load(copy)
    } else {
        let bytes = std::fs::read(copy)?;
        StatCache::decode(&bytes).ok_or("the copy does not decode")?
    };
    let took = t.elapsed();
    let held = rss_anon() - base;
    let what = if mode == "lazy" {
        "load (header, head, index)"
    } else {
        "decode (every record held)"
    };
    println!(
        "{what}: {} directories ({} with their subtree's totals), {} entries, {:.1} ms, RssAnon \
         +{:.1} MiB, {:.0} bytes an entry",
        cache.dir_count(),
        cache.stored_totals(),
        cache.len(),
        took.as_secs_f64() * 1e3,
        held,
        held * 1048576.0 / cache.len().max(1) as f64
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let [flag, mode, copy] = &args[..] {
        if flag == "--measure" {
            return measure(&mode.to_string_lossy(), std::path::Path::new(copy));
        }
    }
    let [path] = &args[..] else {
        eprintln!("usage: statcache_memory <statcache file>");
        std::process::exit(2);
    };
    let tmp = tempfile::tempdir()?;
    let copy = tmp.path().join("statcache");
    let cache = StatCache::load(std::path::Path::new(path));
    if cache.is_empty() {
        return Err(format!("{} holds no stat cache", path.to_string_lossy()).into());
    }
    cache.save(tmp.path(), &copy)?;
    drop(cache);
    let me = std::env::current_exe()?;
    for mode in ["lazy", "whole"] {
        let status = std::process::Command::new(&me)
            .arg("--measure")
            .arg(mode)
            .arg(&copy)
            .status()?;
        if !status.success() {
            return Err(format!("the {mode} measurement failed: {status}").into());
        }
    }
    Ok(())
}
