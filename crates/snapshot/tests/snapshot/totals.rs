//! The subtree totals a version 8 stat cache stores with each directory's place: a watched
//! snapshot in a process that did not count a subtree (a `cairn` command asking the `cairn
//! watch` daemon) takes each directory off the way to a change whole from them, reading none
//! of its records, and they are never stale.

use crate::fixtures::{Rng, Ws};
use crate::watch::Told;
use cairn_snapshot::statcache::{StatCache, FOOTER_LEN, HEADER_LEN};
use cairn_snapshot::{scan, Context, Options, Snapshot, Walked};

/// A watched snapshot as a new process takes it: told what changed by `told`, with no cache
/// kept in memory.
fn told_snap(ws: &Ws, told: &std::sync::Arc<Told>) -> Snapshot {
    let ctx = Context {
        watch: Some(told.clone()),
        ..Context::default()
    };
    ws.snap_in(&Options::default(), ctx)
}

/// Asserts that `snap` holds what a walk that reads every file finds, and counts it alike.
fn same_as_a_walk(ws: &Ws, snap: &Snapshot, what: &str) {
    let options = Options {
        use_stat_cache: false,
        ..Options::default()
    };
    let truth = scan(&ws.store, &ws.root(), "truth", &options, Context::default())
        .unwrap_or_else(|e| panic!("{what}: the walk: {e}"));
    assert_eq!(snap.root, truth.root, "{what}: the trees differ");
    let count = |s: &cairn_store::Stats| (s.files, s.bytes, s.dirs, s.symlinks);
    assert_eq!(
        count(&snap.stats),
        count(&truth.stats),
        "{what}: files, bytes, dirs, links"
    );
    let kept = |k: &[cairn_snapshot::Kept]| {
        let mut k: Vec<_> = k.iter().map(|k| (k.path.clone(), k.is_dir)).collect();
        k.sort();
        k
    };
    assert_eq!(
        kept(&snap.kept),
        kept(&truth.kept),
        "{what}: what is left out"
    );
}

fn cache_path(ws: &Ws) -> std::path::PathBuf {
    StatCache::path(&ws.store, "ws").expect("the cache's path")
}

/// Makes the record of directory `dir` in the cache file at `path` unreadable (its check no
/// longer matches): the one place in the records where its path is encoded (postcard: a
/// one-byte length, then the bytes) gets its last byte changed.
fn spoil_record(path: &std::path::Path, dir: &str) {
    let mut bytes = std::fs::read(path).expect("the cache file");
    let footer = &bytes[bytes.len() - FOOTER_LEN..];
    let head_at = u64::from_le_bytes(footer[..8].try_into().expect("8 bytes")) as usize;
    let mut encoded = vec![u8::try_from(dir.len()).expect("a short path")];
    encoded.extend_from_slice(dir.as_bytes());
    let records = 12 + HEADER_LEN..head_at;
    let found: Vec<usize> = bytes[records.clone()]
        .windows(encoded.len())
        .enumerate()
        .filter(|(_, w)| *w == encoded.as_slice())
        .map(|(i, _)| records.start + i)
        .collect();
    assert_eq!(found.len(), 1, "{dir}'s record is found once");
    bytes[found[0] + encoded.len() - 1] ^= 0x55;
    std::fs::write(path, &bytes).expect("written back");
}

#[test]
fn a_watched_snapshot_in_a_new_process_takes_directories_off_the_way_whole_without_reading_their_records(
) {
    let ws = Ws::new();
    for d in ["on/the/way", "on/beside", "off/one/deep", "off/two"] {
        for i in 0..3 {
            ws.write(&format!("{d}/f{i}.txt"), format!("{d} {i}\n").as_bytes());
        }
    }
    let told = Told::new();
    let first = told_snap(&ws, &told);
    assert_eq!(first.walk.walked, Walked::Full);
    let path = cache_path(&ws);
    let cache = StatCache::load(&path);
    assert_eq!(
        cache.stored_totals(),
        cache.dir_count(),
        "every directory's totals are stored by the first snapshot"
    );
    // The records beneath the directories off the way to the change are spoiled (a top
    // directory's path is also its name in the root's record, so theirs are left): one read
    // is a record refused, and its directory would be walked.
    for d in ["on/beside", "off/one", "off/one/deep", "off/two"] {
        spoil_record(&path, d);
    }
    ws.write("on/the/way/new.txt", b"new\n");
    told.tell(&["on/the/way"]);
    let snap = told_snap(&ws, &told);
    assert_eq!(snap.walk.walked, Walked::Partial, "{:?}", snap.walk.reason);
    assert_eq!(
        snap.walk.listed, 1,
        "only the directory told of is listed: the others are taken from their totals"
    );
    same_as_a_walk(&ws, &snap, "after one file made");
}

#[test]
fn watched_snapshots_in_new_processes_count_what_a_walk_counts_whatever_changed_beneath_stored_totals(
) {
    let mut rng = Rng::from_env("stored subtree totals");
    let seed = rng.0;
    let ws = Ws::new();
    let mut dirs: Vec<String> = Vec::new();
    for a in 0..3 {
        for b in 0..3 {
            for c in 0..2 {
                let d = format!("a{a}/b{b}/c{c}");
                ws.write(&format!("{d}/f.txt"), d.as_bytes());
                dirs.push(d);
            }
        }
    }
    std::os::unix::fs::symlink("f.txt", ws.root().join("a0/b0/c0/link")).expect("a symlink");
    // A file left out changes no tree, so no record above its directory: only the totals
    // forgotten there keep the next snapshot from missing it.
    ws.write(".gitignore", b"*.log\n");
    // An ignore file within the racy window has its directory listed whole, and all beneath.
    crate::watch::past_the_racy_window(std::time::Instant::now());
    let told = Told::new();
    same_as_a_walk(&ws, &told_snap(&ws, &told), "the first snapshot");
    let mut made = 0;
    for step in 0..60 {
        // A change somewhere, deep or not, told to the next snapshot; now and then that
        // snapshot walks the whole tree instead (no watcher), as one with the daemon stopped
        // does.
        let dir = rng.pick(&dirs).expect("a directory").clone();
        let what = match rng.below(4) {
            0 => {
                made += 1;
                ws.write(&format!("{dir}/made{made}.txt"), &vec![b'x'; made]);
                told.tell(&[&dir]);
                format!("a file made in {dir}")
            }
            1 => {
                let names: Vec<_> = std::fs::read_dir(ws.root().join(&dir))
                    .expect("listed")
                    .map(|e| e.expect("an entry").path())
                    .filter(|p| p.is_file() && !p.is_symlink())
                    .collect();
                match rng.pick(&names) {
                    Some(f) => std::fs::remove_file(f).expect("removed"),
                    None => ws.write(&format!("{dir}/back.txt"), b"back"),
                }
                told.tell(&[&dir]);
                format!("a file removed from (or made in) {dir}")
            }
            2 => {
                made += 1;
                let sub = format!("{dir}/sub{made}");
                ws.write(&format!("{sub}/inner.txt"), b"inner");
                *told.next.lock() = cairn_snapshot::Scope::Partial {
                    dirs: vec![dir.clone().into_bytes()],
                    names: Vec::new(),
                    subtrees: vec![sub.clone().into_bytes()],
                    note: None,
                };
                dirs.push(sub.clone());
                format!("{sub} made with a file")
            }
            _ => {
                made += 1;
                ws.write(&format!("{dir}/left-out{made}.log"), b"log");
                told.tell(&[&dir]);
                format!("a file left out made in {dir}")
            }
        };
        let what = format!("seed {seed}, step {step}: {what}");
        if rng.below(4) == 0 {
            let snap = ws.snap(&Options::default());
            assert_eq!(snap.walk.walked, Walked::Full, "{what}");
            same_as_a_walk(&ws, &snap, &format!("{what}, then a walk"));
            // The next snapshot is told nothing changed since the walk.
            told.tell(&[]);
            continue;
        }
        let snap = told_snap(&ws, &told);
        assert_eq!(snap.walk.walked, Walked::Partial, "{what}: {:?}", snap.walk);
        same_as_a_walk(&ws, &snap, &what);
    }
    let cache = StatCache::load(&cache_path(&ws));
    assert!(
        cache.stored_totals() > 0,
        "seed {seed}: the last snapshot stored totals"
    );
}

#[test]
fn a_version_7_cache_is_read_and_then_written_whole_in_version_8() {
    // A cache version 7 wrote (committed as a fuzz seed when that version was current).
    let v7 = include_bytes!("../../../../fuzz/corpus/stat_cache/seed-253a5a77388613b4");
    let cache = crate::statcache::read_then_written_whole(v7, 7);
    assert_eq!(cache.stored_totals(), 0, "version 7 stores no totals");
    assert_eq!(cairn_snapshot::statcache::STATCACHE_VERSION, 8);
}
