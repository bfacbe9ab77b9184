//! The stat cache: nothing changed reads nothing; the racy-timestamp rule.

use crate::fixtures::{blob, Ws};
use cairn_snapshot::statcache::{StatCacheFile, RACY_WINDOW_NS};
use cairn_snapshot::{Options, StatCache, StatRecord};
use cairn_store::ObjectId;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

fn populate(ws: &Ws, n: usize) {
    for i in 0..n {
        ws.write(
            &format!("dir{}/file{i}.rs", i % 7),
            format!("fn f{i}() {{}}\n").as_bytes(),
        );
    }
}

#[test]
fn a_second_snapshot_with_nothing_changed_reads_no_file() {
    let ws = Ws::new();
    populate(&ws, 300);
    // Files written just now are racy for the first snapshot's cache; wait out the window.
    std::thread::sleep(Duration::from_nanos(RACY_WINDOW_NS as u64) + Duration::from_millis(100));
    let first = ws.snap(&Options::default());
    assert_eq!(first.stats.hashed, 300);
    let second = ws.snap(&Options::default());
    assert_eq!(second.stats.hashed, 0);
    assert_eq!(second.stats.reused, 300);
    assert_eq!(second.root, first.root);
    // One change: one file read.
    ws.write("dir1/file1.rs", b"changed\n");
    let third = ws.snap(&Options::default());
    assert_eq!(third.stats.hashed, 1);
    assert_ne!(third.root, first.root);
    // With the cache off, everything is read again.
    let fourth = ws.snap(&Options {
        use_stat_cache: false,
        ..Options::default()
    });
    assert_eq!(fourth.stats.hashed, 300);
    assert_eq!(fourth.root, third.root);
}

fn record_for(path: &std::path::Path, blob: ObjectId) -> StatRecord {
    let m = std::fs::symlink_metadata(path).expect("stat");
    StatRecord {
        dev: m.dev(),
        ino: m.ino(),
        mode: m.mode(),
        size: m.size(),
        mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
        blob,
    }
}

/// Writes a cache whose record for `a.txt` matches the file's stat exactly but names the blob
/// of *older* content, as happens when a file is rewritten within the clock's granularity
/// after it was read; `started_ns` says when that snapshot started.
fn plant_stale_record(ws: &Ws, base: cairn_store::SnapshotId, stale: ObjectId, started_ns: i64) {
    let rec = record_for(&ws.root().join("a.txt"), stale);
    let file = StatCacheFile::from_files(Some(base), started_ns, vec![(b"a.txt".to_vec(), rec)]);
    std::fs::write(
        StatCache::path(&ws.store, "ws").expect("path"),
        StatCache::encode(&file),
    )
    .expect("write cache");
}

#[test]
fn a_file_rewritten_with_the_same_stat_inside_the_racy_window_is_still_caught() {
    let ws = Ws::new();
    ws.write("a.txt", b"version 1");
    let first = ws.snap(&Options::default());
    let v1 = ws.entry(&first, b"a.txt").expect("a").id;
    ws.write("a.txt", b"version 2");
    let m = std::fs::metadata(ws.root().join("a.txt")).expect("stat");
    let mtime_ns = m.mtime() * 1_000_000_000 + m.mtime_nsec();
    // The snapshot that recorded v1 started within the window of the file's times: racy.
    plant_stale_record(&ws, first.id, v1, mtime_ns + RACY_WINDOW_NS / 2);
    let snap = ws.snap(&Options::default());
    assert_eq!(snap.stats.hashed, 1);
    assert_eq!(
        blob(&ws.store, &ws.entry(&snap, b"a.txt").expect("a")),
        b"version 2"
    );
}

#[test]
fn a_record_well_before_its_snapshot_is_trusted_without_reading() {
    // The counterpart of the racy test: the same planted record, outside the window, is
    // trusted, which shows the cache is what decides.
    let ws = Ws::new();
    ws.write("a.txt", b"version 1");
    let first = ws.snap(&Options::default());
    let v1 = ws.entry(&first, b"a.txt").expect("a").id;
    ws.write("a.txt", b"version 2");
    let m = std::fs::metadata(ws.root().join("a.txt")).expect("stat");
    let ctime_ns = m.ctime() * 1_000_000_000 + m.ctime_nsec();
    plant_stale_record(&ws, first.id, v1, ctime_ns + RACY_WINDOW_NS * 2);
    let snap = ws.snap(&Options::default());
    assert_eq!(snap.stats.hashed, 0);
    assert_eq!(ws.entry(&snap, b"a.txt").expect("a").id, v1);
}

#[test]
fn a_cache_whose_snapshot_was_deleted_is_not_trusted() {
    let ws = Ws::new();
    populate(&ws, 20);
    std::thread::sleep(Duration::from_nanos(RACY_WINDOW_NS as u64) + Duration::from_millis(100));
    let first = ws.snap(&Options::default());
    ws.store
        .delete_snapshot(
            &first.id,
            &cairn_store::gc::GcOptions::with_grace(Duration::ZERO),
        )
        .expect("delete");
    let second = ws.snap(&Options::default());
    assert_eq!(second.stats.hashed, 20);
    assert!(ws.store.verify().expect("verify").is_ok());
}
