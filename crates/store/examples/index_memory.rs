//! How much of a process's memory its pack indexes hold, and what a lookup costs: writes a
//! store of many small objects, then, in fresh processes, loads every pack index with its bytes
//! held in the heap (`held`, `PackIndex::from_bytes`) or as `PackIndex::load` does (`read`: a
//! large index keeps a 4-byte key per entry and reads the entry a lookup finds from the file;
//! `Store::refresh` loads them so, and `store` is that path), and prints `RssAnon` and
//! `RssFile` from `/proc/self/status` before loading, after loading, and after looking 50
//! objects up, then the time of a lookup of an object there and of one not there (over up to
//! 100,000 of each; medians of 5 runs). A measurement, not a test. Run it with
//! `cargo run --release -p cairn-store --example index_memory -- [objects [store dir]]`
//! (`LOOKUPS=n` in the environment changes how many objects are looked up).

use cairn_store::pack::PackIndex;
use cairn_store::{ObjectId, ObjectKind, OperationKind, Store, StoreOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

const RUNS: usize = 5;
const LOOKUPS: usize = 50;
/// How many lookups are timed, of objects there and of objects not there.
const TIMED: usize = 100_000;

fn content(i: usize) -> Vec<u8> {
    format!("small object number {i}\n").into_bytes()
}

/// `RssAnon` and `RssFile` of this process, in KiB.
fn rss() -> [u64; 2] {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    [field("RssAnon:"), field("RssFile:")]
}

fn indexes(store: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(store.join("objects/packs"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "idx"));
    v
}

/// Nanoseconds per call of `look` over `ids`, and how many it found.
fn timed(ids: &[ObjectId], look: impl Fn(&ObjectId) -> bool) -> (u64, usize) {
    let start = std::time::Instant::now();
    let found = ids.iter().filter(|id| look(id)).count();
    let ns = start.elapsed().as_nanos() as u64 / ids.len().max(1) as u64;
    (ns, found)
}

/// One run in this process: prints eight numbers.
fn measure(mode: &str, store: &Path, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let lookups: usize = std::env::var("LOOKUPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(LOOKUPS);
    let wanted: Vec<ObjectId> = (0..lookups)
        .map(|i| ObjectId::of(&content(i * 997)))
        .collect();
    let there: Vec<ObjectId> = (0..n.min(TIMED))
        .map(|i| ObjectId::of(&content(i * (n / TIMED).max(1))))
        .collect();
    let not_there: Vec<ObjectId> = (0..TIMED)
        .map(|i| ObjectId::of(format!("not stored {i}").as_bytes()))
        .collect();
    let before = rss();
    // Each arm measures while it still holds its indexes.
    let (loaded, found, after, hit, miss) = if mode == "store" {
        let s = Store::open(store, StoreOptions::default())?;
        s.refresh()?;
        let loaded = rss();
        let found = wanted.iter().filter(|id| s.contains(id)).count();
        let after = rss();
        let (hit, hits) = timed(&there, |id| s.contains(id));
        let (miss, misses) = timed(&not_there, |id| s.contains(id));
        assert_eq!((hits, misses), (there.len(), 0));
        (loaded, found, after, hit, miss)
    } else {
        let mut held = Vec::new();
        for p in indexes(store) {
            held.push(match mode {
                "held" => PackIndex::from_bytes(std::fs::read(&p)?, &p)?,
                _ => PackIndex::load(&p)?,
            });
        }
        let loaded = rss();
        let look = |id: &ObjectId| held.iter().any(|i| i.lookup(id).is_some());
        let found = wanted.iter().filter(|id| look(id)).count();
        let after = rss();
        let (hit, hits) = timed(&there, look);
        let (miss, misses) = timed(&not_there, look);
        assert_eq!((hits, misses), (there.len(), 0));
        (loaded, found, after, hit, miss)
    };
    assert_eq!(found, lookups, "every object looked up is found");
    println!(
        "{} {} {} {} {} {} {hit} {miss}",
        before[0], before[1], loaded[0], loaded[1], after[0], after[1]
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 5 && args[1] == "measure" {
        return measure(&args[2], Path::new(&args[3]), args[4].parse()?);
    }
    let n: usize = args
        .get(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(300_000);
    // A second argument keeps the store there (written if it is not yet), for more runs.
    let dir = tempfile::tempdir()?;
    let path = args
        .get(2)
        .map_or_else(|| dir.path().join("store"), PathBuf::from);
    if !path.exists() {
        let store = Store::open(&path, StoreOptions::default())?;
        let op = store.begin_operation(OperationKind::Write, &[])?;
        let writer = store.writer(&op);
        for i in 0..n {
            writer.put(ObjectKind::Blob, &content(i))?;
        }
        writer.commit()?;
    }
    let idx = indexes(&path);
    let idx_bytes: u64 = idx
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    println!(
        "{n} objects, {} pack indexes, {:.1} MiB of index; KiB, medians of {RUNS} fresh processes",
        idx.len(),
        idx_bytes as f64 / (1 << 20) as f64
    );
    println!(
        "mode    | RssAnon: before  loaded  +lookups | RssFile: before  loaded  +lookups \
         | ns a lookup: there  not there"
    );
    let exe = std::env::current_exe()?;
    for mode in ["held", "read", "store"] {
        let mut runs: Vec<Vec<u64>> = Vec::new();
        for _ in 0..RUNS {
            let out = Command::new(&exe)
                .args(["measure", mode])
                .arg(&path)
                .arg(n.to_string())
                .output()?;
            if !out.status.success() {
                return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
            }
            let line = String::from_utf8_lossy(&out.stdout);
            let last = line.lines().last().unwrap_or_default().to_owned();
            runs.push(last.split(' ').filter_map(|v| v.parse().ok()).collect());
        }
        let median = |k: usize| {
            let mut v: Vec<u64> = runs.iter().filter_map(|r| r.get(k).copied()).collect();
            v.sort_unstable();
            v.get(v.len() / 2).copied().unwrap_or(0)
        };
        println!(
            "{mode:7} | {:>16} {:>7} {:>9} | {:>16} {:>7} {:>9} | {:>18} {:>10}",
            median(0),
            median(2),
            median(4),
            median(1),
            median(3),
            median(5),
            median(6),
            median(7)
        );
    }
    Ok(())
}
