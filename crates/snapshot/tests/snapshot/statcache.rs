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

fn wait_out_the_racy_window() {
    std::thread::sleep(Duration::from_nanos(RACY_WINDOW_NS as u64) + Duration::from_millis(100));
}

fn inode(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).expect("stat").ino()
}

#[test]
fn a_snapshot_with_nothing_changed_rewrites_only_the_cache_header() {
    let ws = Ws::new();
    populate(&ws, 50);
    wait_out_the_racy_window();
    ws.snap(&Options::default());
    let path = StatCache::path(&ws.store, "ws").expect("path");
    let before = std::fs::read(&path).expect("cache");
    let ino = inode(&path);
    let second = ws.snap(&Options::default());
    assert_eq!(second.stats.hashed, 0);
    // The same file, its records as they were; its header names the new snapshot.
    assert_eq!(inode(&path), ino);
    let after = std::fs::read(&path).expect("cache");
    let body = 12 + cairn_snapshot::statcache::HEADER_LEN;
    assert_eq!(after[body..], before[body..]);
    assert_eq!(StatCache::load(&path).snapshot, Some(second.id));
    // A change appends its directories' records, a head, an index and a footer to the same
    // file: the bytes before stay as they were.
    ws.write("dir3/new.rs", b"new\n");
    ws.snap(&Options::default());
    assert_eq!(inode(&path), ino);
    let appended = std::fs::read(&path).expect("cache");
    assert!(appended.len() > after.len());
    assert_eq!(appended[body..after.len()], after[body..]);
    assert_eq!(
        StatCache::load(&path).len(),
        StatCache::decode(&after).expect("decodes").len() + 1
    );
}

#[test]
fn a_cache_appended_to_again_and_again_holds_what_the_walk_saw_and_is_compacted_in_time() {
    let ws = Ws::new();
    populate(&ws, 40);
    wait_out_the_racy_window();
    ws.snap(&Options::default());
    let path = StatCache::path(&ws.store, "ws").expect("path");
    let ino = inode(&path);
    let mut inodes = vec![ino];
    for round in 0..12 {
        ws.write(&format!("dir{}/more{round}.rs", round % 4), b"more\n");
        wait_out_the_racy_window();
        let snap = ws.snap(&Options::default());
        inodes.push(inode(&path));
        // What the file holds, read back, is what a walk with no cache finds, record for
        // record (the walk writes its cache whole into another store).
        let loaded = StatCache::load(&path).to_file();
        assert_eq!(loaded.snapshot, Some(snap.id));
        let other = tempfile::tempdir().expect("temp dir");
        let store = cairn_store::Store::open(other.path(), Default::default()).expect("store");
        let again = cairn_snapshot::snapshot(
            &store,
            &ws.root(),
            "ws",
            &Options::default(),
            Default::default(),
        )
        .expect("snapshot");
        assert_eq!(again.root, snap.root);
        let walked = StatCache::load(&StatCache::path(&store, "ws").expect("path")).to_file();
        assert_eq!(loaded.body.dirs, walked.body.dirs, "round {round}");
    }
    // Appends reuse the file; once it would hold more than twice what is live, it is
    // written whole (another file), then appended to again.
    assert!(
        inodes.windows(2).filter(|w| w[0] == w[1]).count() >= 6,
        "{inodes:?}"
    );
    assert!(inodes.windows(2).any(|w| w[0] != w[1]), "{inodes:?}");
}

#[test]
fn a_cache_file_grown_by_another_writer_since_it_was_read_is_written_whole() {
    let ws = Ws::new();
    populate(&ws, 30);
    wait_out_the_racy_window();
    let memo = cairn_snapshot::CacheMemo::default();
    ws.snap_in(&Options::default(), with_memo(&memo));
    memo.wait();
    let path = StatCache::path(&ws.store, "ws").expect("path");
    let ino = inode(&path);
    let records = StatCache::load(&path).len();
    // Another process appended (here: bytes that end in no footer) after this one last
    // wrote: the file is no longer as long as the memo knows it.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("open");
    std::io::Write::write_all(&mut f, b"another writer's bytes").expect("append");
    drop(f);
    ws.write("dir1/new.rs", b"new\n");
    wait_out_the_racy_window();
    let snap = ws.snap_in(&Options::default(), with_memo(&memo));
    memo.wait();
    assert_ne!(inode(&path), ino, "written whole, renamed over");
    let loaded = StatCache::load(&path);
    assert_eq!(loaded.snapshot, Some(snap.id));
    assert_eq!(loaded.len(), records + 1);
}

#[test]
fn an_edited_gitignore_decides_again_what_is_left_out() {
    let ws = Ws::new();
    ws.write("sub/.gitignore", b"*.log\n");
    ws.write("sub/deeper/a.log", b"log\n");
    ws.write("sub/deeper/b.txt", b"text\n");
    wait_out_the_racy_window();
    ws.snap(&Options::default());
    let first = ws.snap(&Options::default());
    assert!(ws.entry(&first, b"sub/deeper/a.log").is_none());
    assert!(ws.entry(&first, b"sub/deeper/b.txt").is_some());
    ws.write("sub/.gitignore", b"*.txt\n");
    let second = ws.snap(&Options::default());
    assert!(ws.entry(&second, b"sub/deeper/a.log").is_some());
    assert!(ws.entry(&second, b"sub/deeper/b.txt").is_none());
    // And once the edit is old, the cached decisions are the new ones.
    wait_out_the_racy_window();
    ws.snap(&Options::default());
    let third = ws.snap(&Options::default());
    assert_eq!(third.root, second.root);
    assert_eq!(third.stats.hashed, 0);
}

#[test]
fn other_exclude_globs_decide_again_what_is_left_out() {
    let ws = Ws::new();
    ws.write("d/a.log", b"log\n");
    ws.write("d/b.txt", b"text\n");
    wait_out_the_racy_window();
    let globbed = Options {
        capture: cairn_snapshot::CaptureSettings {
            excludes: vec!["*.log".into()],
            ..Default::default()
        },
        ..Options::default()
    };
    ws.snap(&globbed);
    let first = ws.snap(&globbed);
    assert!(ws.entry(&first, b"d/a.log").is_none());
    let second = ws.snap(&Options::default());
    assert!(ws.entry(&second, b"d/a.log").is_some());
    let third = ws.snap(&globbed);
    assert!(ws.entry(&third, b"d/a.log").is_none());
    assert_eq!(third.root, first.root);
}

#[test]
fn a_directory_whose_mode_changed_is_recorded_with_its_new_mode() {
    use std::os::unix::fs::PermissionsExt;
    let ws = Ws::new();
    ws.write("d/e/f.txt", b"f\n");
    wait_out_the_racy_window();
    ws.snap(&Options::default());
    let first = ws.snap(&Options::default());
    std::fs::set_permissions(
        ws.root().join("d/e"),
        std::fs::Permissions::from_mode(0o700),
    )
    .expect("chmod");
    let second = ws.snap(&Options::default());
    assert_ne!(second.root, first.root);
    let e = ws.entry(&second, b"d/e").expect("d/e");
    assert_eq!(e.mode & 0o777, 0o700);
    assert_eq!(second.stats.hashed, 0);
}

#[test]
fn a_cached_file_over_a_lowered_size_limit_is_skipped_as_too_large() {
    let ws = Ws::new();
    ws.write("d/big.txt", &[b'x'; 100]);
    wait_out_the_racy_window();
    ws.snap(&Options::default());
    let snap = ws.snap(&Options {
        capture: cairn_snapshot::CaptureSettings {
            max_file_bytes: 10,
            ..Default::default()
        },
        ..Options::default()
    });
    assert!(ws.entry(&snap, b"d/big.txt").is_none());
    assert_eq!(snap.skipped.len(), 1);
    assert_eq!(snap.skipped[0].reason, cairn_store::SkipReason::TooLarge);
}

#[test]
fn a_quarantined_blob_is_read_again_though_its_directory_did_not_change() {
    use cairn_store::pack::{PackIndex, RECORD_HEADER_LEN};
    use std::os::unix::fs::FileExt;
    let ws = Ws::new();
    let content = b"a file long enough to be worth damaging in its pack, for the test\n";
    ws.write("d/a.txt", content);
    ws.write("d/b.txt", b"a bystander\n");
    wait_out_the_racy_window();
    let first = ws.snap(&Options::default());
    let id = ws.entry(&first, b"d/a.txt").expect("a").id;
    // Damage the blob's bytes in its pack; verify quarantines it.
    let packs = std::fs::read_dir(&ws.store.layout().packs).expect("packs");
    for p in packs {
        let p = p.expect("entry").path();
        if p.extension().is_some_and(|e| e == "pack") {
            let idx = PackIndex::load(&p.with_extension("idx")).expect("index");
            if let Some(e) = idx.lookup(&id) {
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&p)
                    .expect("open pack");
                let at = e.offset + RECORD_HEADER_LEN as u64 + 2;
                let mut b = [0u8];
                f.read_exact_at(&mut b, at).expect("read");
                f.write_all_at(&[!b[0]], at).expect("write");
            }
        }
    }
    assert!(!ws.store.verify().expect("verify").is_ok());
    assert!(ws.store.has_damage());
    let second = ws.snap(&Options::default());
    assert_eq!(second.root, first.root);
    assert_eq!(second.stats.hashed, 1, "the damaged blob is written again");
    assert_eq!(ws.store.read_object(&id).expect("reads").1, content);
}

/// Two snapshots with the racy window waited out before each: after them, the cache vouches
/// for every directory's listing.
fn snap_until_listings_are_trusted(ws: &Ws) -> cairn_snapshot::Snapshot {
    wait_out_the_racy_window();
    ws.snap(&Options::default());
    wait_out_the_racy_window();
    ws.snap(&Options::default())
}

#[test]
fn entries_added_and_removed_under_a_directory_the_cache_vouches_for_are_seen() {
    let ws = Ws::new();
    ws.write("a/b/one.txt", b"1");
    ws.write("a/b/two.txt", b"2");
    ws.write("a/c/three.txt", b"3");
    let base = snap_until_listings_are_trusted(&ws);
    assert_eq!(base.stats.hashed, 0);
    ws.write("a/b/new.txt", b"new");
    std::fs::remove_file(ws.root().join("a/c/three.txt")).expect("rm");
    std::fs::create_dir(ws.root().join("a/d")).expect("mkdir");
    let snap = ws.snap(&Options::default());
    assert_eq!(
        ws.paths(&snap),
        vec![
            "a/",
            "a/b/",
            "a/b/new.txt",
            "a/b/one.txt",
            "a/b/two.txt",
            "a/c/",
            "a/d/"
        ]
    );
    assert_eq!(snap.stats.hashed, 1);
}

#[test]
fn a_directory_the_cache_vouches_for_replaced_by_a_symlink_to_outside_is_recorded_as_a_link() {
    let ws = Ws::new();
    ws.write("d/secret.txt", b"inside");
    let outside = ws.dir.path().join("outside");
    std::fs::create_dir(&outside).expect("outside");
    std::fs::write(outside.join("secret.txt"), b"outside content").expect("write");
    snap_until_listings_are_trusted(&ws);
    std::fs::rename(ws.root().join("d"), ws.dir.path().join("moved")).expect("mv");
    std::os::unix::fs::symlink(&outside, ws.root().join("d")).expect("symlink");
    let snap = ws.snap(&Options::default());
    let d = ws.entry(&snap, b"d").expect("d");
    assert_eq!(d.kind, cairn_store::EntryKind::Symlink);
    assert!(ws.entry(&snap, b"d/secret.txt").is_none());
    // Nothing from outside went into the store.
    let outside_id = ObjectId::of(b"outside content");
    assert!(!ws.store.contains(&outside_id));
}

#[test]
fn a_file_changed_under_a_directory_the_cache_vouches_for_is_read_again() {
    let ws = Ws::new();
    ws.write("x/y/z/file.txt", b"before");
    let base = snap_until_listings_are_trusted(&ws);
    // Same size, so only the times tell.
    ws.write("x/y/z/file.txt", b"after!");
    let snap = ws.snap(&Options::default());
    assert_eq!(snap.stats.hashed, 1);
    assert_ne!(snap.root, base.root);
    assert_eq!(
        crate::fixtures::blob(
            &ws.store,
            &ws.entry(&snap, b"x/y/z/file.txt").expect("file")
        ),
        b"after!"
    );
}

fn with_memo(memo: &cairn_snapshot::CacheMemo) -> cairn_snapshot::Context<'static> {
    cairn_snapshot::Context {
        memo: Some(memo.clone()),
        ..Default::default()
    }
}

#[test]
fn a_memo_serves_the_next_snapshot_and_its_background_write_lands_in_the_file() {
    let ws = Ws::new();
    populate(&ws, 60);
    wait_out_the_racy_window();
    let memo = cairn_snapshot::CacheMemo::default();
    let first = ws.snap_in(&Options::default(), with_memo(&memo));
    assert_eq!(first.stats.hashed, 60);
    // The memo's cache (header checked against the file) makes the next one read nothing.
    let second = ws.snap_in(&Options::default(), with_memo(&memo));
    assert_eq!(second.stats.hashed, 0);
    assert_eq!(second.root, first.root);
    ws.write("dir2/file2.rs", b"changed\n");
    let third = ws.snap_in(&Options::default(), with_memo(&memo));
    assert_eq!(third.stats.hashed, 1);
    // Written by the memo's thread: once it is done, the file alone serves a snapshot without
    // a memo, and names the snapshot that wrote it.
    memo.wait();
    let path = StatCache::path(&ws.store, "ws").expect("path");
    assert_eq!(StatCache::load(&path).snapshot, Some(third.id));
    // 60 files and their 7 directories.
    assert_eq!(StatCache::load(&path).len(), 67);
    // Only the file changed a moment ago is read again (racy); the other 59 are not.
    let fourth = ws.snap(&Options::default());
    assert_eq!(fourth.stats.hashed, 1);
    assert_eq!(fourth.root, third.root);
}

#[test]
fn a_memo_is_not_used_once_another_writer_replaced_the_file() {
    let ws = Ws::new();
    populate(&ws, 40);
    wait_out_the_racy_window();
    let memo = cairn_snapshot::CacheMemo::default();
    ws.snap_in(&Options::default(), with_memo(&memo));
    // Another process (here: no memo) sees a change and rewrites the cache; the memo still
    // holds the record of the old content.
    ws.write("dir0/file0.rs", b"changed by the other\n");
    wait_out_the_racy_window();
    assert_eq!(ws.snap(&Options::default()).stats.hashed, 1);
    // The header names another body, so the memo is dropped and the file read: nothing is
    // read again. (Had the memo been used, its stale record would have made file0 look
    // changed.)
    let again = ws.snap_in(&Options::default(), with_memo(&memo));
    assert_eq!(again.stats.hashed, 0);
}

#[test]
fn a_header_that_names_another_body_leaves_the_cache_unused() {
    let ws = Ws::new();
    populate(&ws, 20);
    wait_out_the_racy_window();
    let snap = ws.snap(&Options::default());
    let path = StatCache::path(&ws.store, "ws").expect("path");
    let loaded = StatCache::load(&path);
    // 20 files and their 7 directories.
    assert_eq!(loaded.len(), 27);
    // A header confirmed over a body another process wrote meanwhile: its key is not the
    // body's, so its snapshot and start time say nothing of these records.
    StatCache::confirm(&path, &snap.id, loaded.started_ns, &[7; 16], None).expect("confirm");
    assert!(StatCache::load(&path).is_empty());
    // The body's own key pairs them again.
    StatCache::confirm(&path, &snap.id, loaded.started_ns, loaded.key(), None).expect("confirm");
    assert_eq!(StatCache::load(&path).len(), 27);
    // A snapshot does not use a mismatched cache either: it reads every file.
    StatCache::confirm(&path, &snap.id, loaded.started_ns, &[7; 16], None).expect("confirm");
    assert_eq!(ws.snap(&Options::default()).stats.hashed, 20);
}

#[test]
fn a_file_left_out_under_a_lower_size_limit_is_kept_again_under_the_default_one() {
    // Issue 28's reproduction: one snapshot under a lower limit, an edit in place with the
    // directory's mtime unchanged, then a snapshot under the default limit must keep the file.
    let ws = Ws::new();
    ws.write("big", &[b'b'; 5000]);
    ws.write("small", b"s\n");
    ws.snap(&Options::default());
    wait_out_the_racy_window();
    let z = ws.snap(&Options {
        capture: cairn_snapshot::CaptureSettings {
            max_file_bytes: 1024,
            ..Default::default()
        },
        ..Options::default()
    });
    assert!(ws.entry(&z, b"big").is_none(), "skipped as too large");
    assert_eq!(z.skipped.len(), 1);
    // Edited in place: the directory's own lstat does not change.
    std::fs::write(ws.root().join("big"), [b'c'; 5000]).expect("edit in place");
    wait_out_the_racy_window();
    let n1 = ws.snap(&Options::default());
    let big = ws.entry(&n1, b"big").expect("big is in the snapshot again");
    assert_eq!(blob(&ws.store, &big), [b'c'; 5000]);
    assert!(n1.skipped.is_empty(), "{:?}", n1.skipped);
    // And with a limit of 0, every later snapshot under the default keeps it as well.
    ws.snap(&Options {
        capture: cairn_snapshot::CaptureSettings {
            max_file_bytes: 0,
            ..Default::default()
        },
        ..Options::default()
    });
    std::fs::write(ws.root().join("big"), [b'd'; 5000]).expect("edit in place");
    wait_out_the_racy_window();
    let n2 = ws.snap(&Options::default());
    let big = ws.entry(&n2, b"big").expect("big again");
    assert_eq!(blob(&ws.store, &big), [b'd'; 5000]);
    assert_eq!(ws.paths(&n2), ["big", "small"]);
}

#[test]
fn a_snapshot_refusing_hard_links_decides_again_what_an_earlier_one_kept() {
    let ws = Ws::new();
    ws.write("a", b"linked\n");
    std::fs::hard_link(ws.root().join("a"), ws.dir.path().join("outside")).expect("link");
    wait_out_the_racy_window();
    let kept = ws.snap(&Options::default());
    assert!(ws.entry(&kept, b"a").is_some());
    wait_out_the_racy_window();
    let refused = ws.snap(&Options {
        capture: cairn_snapshot::CaptureSettings {
            refuse_hard_links: true,
            ..Default::default()
        },
        ..Options::default()
    });
    assert!(ws.entry(&refused, b"a").is_none(), "refused as hard-linked");
    let again = ws.snap(&Options::default());
    assert!(ws.entry(&again, b"a").is_some(), "kept again by default");
}

/// What a restore saw of a file it wrote: staged at `mtime`, the clock read after at `clock`,
/// then found in place unchanged (its `ctime` moved by the rename).
fn written(mtime: i64, clock: i64) -> cairn_snapshot::statcache::Written {
    let staged = StatRecord {
        dev: 1,
        ino: 2,
        mode: 0o100644,
        size: 5,
        mtime_ns: mtime,
        ctime_ns: mtime,
        blob: ObjectId([0; 32]),
    };
    cairn_snapshot::statcache::Written {
        path: b"a.txt".to_vec(),
        blob: ObjectId::of(b"hello"),
        staged,
        clock_ns: clock,
        placed: StatRecord {
            ctime_ns: clock + 10,
            ..staged
        },
    }
}

#[test]
fn a_file_a_restore_wrote_is_recorded_only_when_its_times_prove_nothing_wrote_it_since() {
    assert!(written(1_000, 2_000).proves());
    // Staged in the clock's tick the probe read: a write after it was put in place could
    // keep its mtime (the racy rule for these files).
    assert!(!written(2_000, 2_000).proves());
    assert!(!written(3_000, 2_000).proves());
    // Written again, replaced, re-moded or resized between staging and the end of the restore.
    for change in [
        |p: &mut StatRecord| p.mtime_ns += 1,
        |p: &mut StatRecord| p.ino += 1,
        |p: &mut StatRecord| p.dev += 1,
        |p: &mut StatRecord| p.mode = 0o100755,
        |p: &mut StatRecord| p.size += 1,
        |p: &mut StatRecord| p.mode = 0o120777,
    ] {
        let mut w = written(1_000, 2_000);
        change(&mut w.placed);
        assert!(!w.proves(), "{:?}", w.placed);
    }
    // Only proven records are kept.
    let mut cache = StatCache::default();
    let snap = cairn_store::SnapshotId::from(ObjectId([7; 32]));
    let n = cache.prime(
        snap,
        [written(1_000, 2_000), {
            let mut w = written(2_000, 2_000);
            w.path = b"b.txt".to_vec();
            w
        }],
    );
    assert_eq!(
        n,
        usize::from(cairn_snapshot::statcache::boot_id().is_some())
    );
    let placed = written(1_000, 2_000).placed;
    assert_eq!(
        cache.primed(b"a.txt", &placed).map(|r| r.blob),
        (n == 1).then(|| ObjectId::of(b"hello"))
    );
    assert!(cache.primed(b"b.txt", &placed).is_none());
}

/// A cache file of this version as version 5 wrote it: the same header, then every record in
/// one postcard body.
fn as_version_5(current: &[u8]) -> Vec<u8> {
    let file = StatCache::decode(current).expect("decodes").to_file();
    let mut out = current[..12 + cairn_snapshot::statcache::HEADER_LEN].to_vec();
    out[8..12].copy_from_slice(&5u32.to_le_bytes());
    out.extend_from_slice(&postcard::to_stdvec(&file.body).expect("encodes"));
    out
}

/// A cache file of this version as version 3 or 4 wrote it: version 5's, with the header
/// without the watcher's token (its first 57 bytes, then their checksum).
fn older_header(current: &[u8], version: u32) -> Vec<u8> {
    let v5 = as_version_5(current);
    let kept = 57;
    let mut out = v5[..12 + kept].to_vec();
    out[8..12].copy_from_slice(&version.to_le_bytes());
    let mut h = cairn_store::Hasher::new();
    h.update(&v5[12..12 + kept]);
    out.extend_from_slice(&h.finish().0[..8]);
    out.extend_from_slice(&v5[12 + cairn_snapshot::statcache::HEADER_LEN..]);
    out
}

#[test]
fn version_4_and_5_caches_are_still_read_and_their_header_is_never_rewritten_in_place() {
    let ws = Ws::new();
    populate(&ws, 30);
    wait_out_the_racy_window();
    ws.snap(&Options::default());
    let path = StatCache::path(&ws.store, "ws").expect("path");
    for version in [5, 4] {
        let current = std::fs::read(&path).expect("read");
        let older = if version == 5 {
            as_version_5(&current)
        } else {
            older_header(&current, version)
        };
        std::fs::write(&path, older).expect("write");
        let cache = StatCache::load(&path);
        assert_eq!(cache.len(), 30 + 7, "version {version}");
        assert!(!cache.is_current());
        let snap = ws.snap(&Options::default());
        assert_eq!(snap.stats.hashed, 0, "version {version}");
        // Nothing changed, but the file is written whole in this version, not patched.
        let now = std::fs::read(&path).expect("read");
        assert_eq!(
            now[8..12],
            cairn_snapshot::statcache::STATCACHE_VERSION.to_le_bytes()
        );
        let cache = StatCache::load(&path);
        assert_eq!(cache.len(), 30 + 7);
        assert_eq!(cache.snapshot, Some(snap.id));
    }
}

#[test]
fn a_version_3_cache_is_still_read() {
    let ws = Ws::new();
    populate(&ws, 30);
    wait_out_the_racy_window();
    ws.snap(&Options::default());
    // The same cache as version 3 wrote it: the version field, and a body without the files
    // restores wrote (postcard's last field, one zero byte when empty).
    let path = StatCache::path(&ws.store, "ws").expect("path");
    let mut bytes = older_header(&std::fs::read(&path).expect("read"), 3);
    assert_eq!(bytes.pop(), Some(0));
    std::fs::write(&path, &bytes).expect("write");
    let cache = StatCache::load(&path);
    assert_eq!(cache.len(), 30 + 7);
    let snap = ws.snap(&Options::default());
    assert_eq!(snap.stats.hashed, 0);
    // A version it does not know is not.
    bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
    std::fs::write(&path, &bytes).expect("write");
    assert!(StatCache::load(&path).is_empty());
}

#[test]
fn a_snapshot_soon_after_another_calls_off_its_pending_write_and_the_last_cache_still_lands() {
    let ws = Ws::new();
    populate(&ws, 40);
    wait_out_the_racy_window();
    let memo = cairn_snapshot::CacheMemo::default();
    let first = ws.snap_in(&Options::default(), with_memo(&memo));
    memo.wait();
    let path = StatCache::path(&ws.store, "ws").expect("path");
    assert_eq!(StatCache::load(&path).snapshot, Some(first.id));
    // A change, then snapshots one after another, well within the write delay: each takes
    // the memo's records (the file still holds the first snapshot's cache, which a reader
    // without the memo may use as it is: its header names the snapshot that confirmed it).
    ws.write("dir1/file1.rs", b"changed\n");
    let second = ws.snap_in(&Options::default(), with_memo(&memo));
    assert_eq!(second.stats.hashed, 1);
    let between = StatCache::load(&path);
    assert!(
        between.snapshot == Some(first.id) || between.snapshot == Some(second.id),
        "the file holds a whole cache, the first's (or the second's, written already)"
    );
    let third = ws.snap_in(&Options::default(), with_memo(&memo));
    assert_eq!(third.root, second.root);
    assert_eq!(
        third.stats.hashed, 1,
        "the racy file only: the memo's records served, not the file's older ones"
    );
    // Dropping the last handle writes the pending cache at once.
    drop(memo);
    let last = StatCache::load(&path);
    assert_eq!(last.snapshot, Some(third.id));
    assert_eq!(last.len(), 40 + 7);
    let fourth = ws.snap(&Options::default());
    assert_eq!(fourth.root, third.root);
    assert_eq!(fourth.stats.hashed, 1, "only the racy file is read again");
}

/// Where a cache file of this version written whole has its records: from the end of the header to
/// where its head begins (its footer's first field).
fn records_span(bytes: &[u8]) -> (usize, usize) {
    let footer = &bytes[bytes.len() - cairn_snapshot::statcache::FOOTER_LEN..];
    let field = |i: usize| u64::from_le_bytes(footer[i * 8..i * 8 + 8].try_into().expect("8"));
    (
        12 + cairn_snapshot::statcache::HEADER_LEN,
        field(0) as usize,
    )
}

#[test]
fn a_record_that_cannot_be_read_is_no_record_and_its_directory_is_read_again() {
    let ws = Ws::new();
    populate(&ws, 70);
    wait_out_the_racy_window();
    let first = ws.snap(&Options::default());
    let path = StatCache::path(&ws.store, "ws").expect("path");
    let mut bytes = std::fs::read(&path).expect("read");
    let (records, index) = records_span(&bytes);
    assert!(records < index);
    // Garbage over the middle of the records, the header, head and index intact.
    let mid = (records + index) / 2;
    bytes[mid..mid + 16].fill(0xff);
    std::fs::write(&path, &bytes).expect("write");
    // Decoded whole, the file is refused; loaded, its index still stands, and the record
    // that does not decode is none.
    assert!(StatCache::decode(&bytes).is_none());
    let loaded = StatCache::load(&path);
    assert_eq!(loaded.dir_count(), 8);
    let spoiled = |d: &[u8]| loaded.dir(d).is_none();
    let dirs: Vec<Vec<u8>> = (0..7).map(|i| format!("dir{i}").into_bytes()).collect();
    let unreadable = dirs.iter().filter(|d| spoiled(d)).count();
    assert!(
        unreadable + usize::from(spoiled(b"")) >= 1,
        "the garbage spoils at least one record"
    );
    // The snapshot reads the files of a directory whose record is spoiled again (10 in
    // each) and takes the same tree; the next one, with the cache written again, reads
    // nothing.
    let second = ws.snap(&Options::default());
    assert_eq!(second.root, first.root);
    assert_eq!(second.stats.hashed, 10 * unreadable as u64);
    let third = ws.snap(&Options::default());
    assert_eq!(third.root, first.root);
    assert_eq!(third.stats.hashed, 0);
    assert!(StatCache::decode(&std::fs::read(&path).expect("read")).is_some());
}

#[test]
fn records_copied_from_the_file_and_records_held_in_memory_are_written_alike() {
    let ws = Ws::new();
    populate(&ws, 50);
    wait_out_the_racy_window();
    ws.snap(&Options::default());
    let path = StatCache::path(&ws.store, "ws").expect("path");
    let loaded = StatCache::load(&path);
    assert_eq!(
        loaded.held(),
        0,
        "a version 6 file's records stay in the file"
    );
    let decoded = StatCache::decode(&std::fs::read(&path).expect("read")).expect("decodes");
    assert_eq!(decoded.held(), decoded.dir_count());
    // Written from each (copied bytes, encoded records), both read back the same.
    let tmp = tempfile::tempdir().expect("tmp");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    loaded.save(tmp.path(), &a).expect("save");
    decoded.save(tmp.path(), &b).expect("save");
    let bodies = [&a, &b].map(|p| StatCache::load(p).to_file().body);
    assert_eq!(bodies[0].dirs, bodies[1].dirs);
    assert_eq!(bodies[0].dirs, loaded.to_file().body.dirs);
    assert_eq!(bodies[0].dirs.len(), 8);
}

#[test]
fn a_memo_holds_the_index_not_the_records_once_its_cache_is_written() {
    let ws = Ws::new();
    populate(&ws, 40);
    wait_out_the_racy_window();
    let memo = cairn_snapshot::CacheMemo::default();
    let first = ws.snap_in(&Options::default(), with_memo(&memo));
    assert_eq!(first.stats.hashed, 40);
    memo.wait();
    let path = StatCache::path(&ws.store, "ws").expect("path");
    let cache = memo.load(&path);
    assert_eq!((cache.held(), cache.len()), (0, 40 + 7));
    memo.put(&path, cache);
    // A change: the new record is held until its write lands, then read from the file.
    ws.write(
        "dir3/file3.rs",
        b"changed
",
    );
    let second = ws.snap_in(&Options::default(), with_memo(&memo));
    assert_eq!(second.stats.hashed, 1);
    let cache = memo.load(&path);
    assert!(
        cache.held() >= 1,
        "the changed directory's record is in memory"
    );
    memo.put_and_write(&ws.store.layout().tmp, &path, cache);
    memo.wait();
    let cache = memo.load(&path);
    assert_eq!((cache.held(), cache.len()), (0, 40 + 7));
    memo.put(&path, cache);
    let third = ws.snap_in(&Options::default(), with_memo(&memo));
    assert_eq!(third.root, second.root);
    assert_eq!(third.stats.hashed, 1, "the racy file only");
}

/// Asserts that `old`, a cache file a format `version` wrote, is read, then written whole in
/// this version (a new file renamed over it, never appended to) holding the same records;
/// returns it as it was read.
pub(crate) fn read_then_written_whole(old: &[u8], version: u32) -> StatCache {
    assert_eq!(old[8..12], version.to_le_bytes());
    let whole = StatCache::decode(old)
        .expect("an older file decodes")
        .to_file();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("statcache");
    std::fs::write(&path, old).expect("write");
    let ino = inode(&path);
    let cache = StatCache::load(&path);
    assert!(!cache.is_current());
    assert_eq!(cache.to_file().body.dirs, whole.body.dirs);
    cache.save(dir.path(), &path).expect("saved");
    let now = std::fs::read(&path).expect("read");
    assert_eq!(
        now[8..12],
        cairn_snapshot::statcache::STATCACHE_VERSION.to_le_bytes()
    );
    assert_ne!(inode(&path), ino, "written whole, renamed over");
    assert_eq!(StatCache::load(&path).to_file().body.dirs, whole.body.dirs);
    assert_eq!(
        StatCache::decode(&now)
            .expect("decodes")
            .to_file()
            .body
            .dirs,
        whole.body.dirs
    );
    cache
}

#[test]
fn a_version_6_cache_is_read_and_then_written_whole_in_this_version_never_appended_to() {
    // A cache version 6 wrote (committed as a fuzz seed when that version was current).
    read_then_written_whole(
        include_bytes!("../../../../fuzz/corpus/stat_cache/seed-ccb31db069c5b082"),
        6,
    );
}

#[test]
fn a_snapshot_is_handed_to_its_taken_callback_once_durable_and_before_its_stat_cache_is_saved() {
    let ws = Ws::new();
    populate(&ws, 40);
    let cache = StatCache::path(&ws.store, "ws").expect("the cache's path");
    let mut seen = Vec::new();
    let mut taken = |s: &cairn_snapshot::Snapshot| seen.push(when_taken(&ws, &cache, s));
    let snap = cairn_snapshot::snapshot(
        &ws.store,
        &ws.root(),
        "ws",
        &Options::default(),
        cairn_snapshot::Context {
            taken: Some(&mut taken),
            ..Default::default()
        },
    )
    .expect("snapshot");
    assert_eq!(
        seen,
        vec![(snap.id, snap.root, None, false)],
        "called once, first"
    );
    assert!(cache.exists(), "the cache is saved before the call returns");
}

/// What a taken callback sees of snapshot `s`: its id, and the root and label of its
/// manifest, which must be on disk already, and whether the stat cache at `cache` is yet.
fn when_taken(
    ws: &Ws,
    cache: &std::path::Path,
    s: &cairn_snapshot::Snapshot,
) -> (
    cairn_store::SnapshotId,
    cairn_store::TreeId,
    Option<String>,
    bool,
) {
    let manifest = ws
        .store
        .read_manifest(&s.id)
        .expect("the manifest is written");
    (s.id, manifest.root, manifest.label, cache.exists())
}

#[test]
fn a_snapshot_walked_ahead_is_handed_to_its_taken_callback_before_its_stat_cache_is_saved() {
    let ws = Ws::new();
    populate(&ws, 40);
    let cache = StatCache::path(&ws.store, "ws").expect("the cache's path");
    let ahead = cairn_snapshot::walk_ahead(
        &ws.store,
        &ws.root(),
        "ws",
        &Options::default(),
        cairn_snapshot::Context::default(),
    )
    .expect("walked ahead");
    assert!(!cache.exists(), "a walk ahead saves no stat cache");
    let mut seen = Vec::new();
    let mut taken = |s: &cairn_snapshot::Snapshot| seen.push(when_taken(&ws, &cache, s));
    let snap = ahead
        .commit(
            Some("ahead".into()),
            Default::default(),
            false,
            Some(&mut taken),
        )
        .expect("committed")
        .expect("every object it walked is still there");
    assert_eq!(
        seen,
        vec![(snap.id, snap.root, Some("ahead".to_string()), false)],
        "called once, first"
    );
    assert!(cache.exists(), "the cache is saved before commit returns");
}

#[test]
fn an_entry_name_is_stored_as_the_bytes_alone_as_it_was_before_names_were_shared() {
    use cairn_snapshot::statcache::Name;
    let bytes: &[u8] = b"caf\xe9 \xff.txt";
    let name = Name::from(bytes);
    // What a `Vec<u8>` with `serde_bytes` wrote: cache files written before read the same.
    let stored = postcard::to_allocvec(&name).expect("encodes");
    assert_eq!(
        stored,
        postcard::to_allocvec(serde_bytes::Bytes::new(bytes)).expect("encodes")
    );
    let back: Name = postcard::from_bytes(&stored).expect("decodes");
    assert_eq!(back.as_bytes(), bytes);
    // A text format's list of numbers decodes too.
    let json = serde_json::to_string(&name).expect("encodes");
    let back: Name = serde_json::from_str(&json).expect("decodes");
    assert_eq!(back, name);
}

#[test]
fn records_restores_made_under_two_snapshots_are_written_and_read_back_every_one() {
    let ws = Ws::new();
    populate(&ws, 3);
    let base = ws.snap(&Options::default());
    let path = StatCache::path(&ws.store, "ws").expect("path");
    let mut cache = StatCache::load(&path);
    assert!(cache.snapshot.is_some(), "the snapshot wrote its cache");
    let Some(_) = cairn_snapshot::statcache::boot_id() else {
        eprintln!("no boot id here: nothing is primed, nothing to check");
        return;
    };
    // Two restores, from two snapshots: two sets, the second replacing a path of the first.
    let other = cairn_store::SnapshotId::from(ObjectId([9; 32]));
    let made = |n: usize, from: usize| {
        (from..from + n).map(|i| {
            let mut w = written(1_000 + i as i64, 1 << 40);
            w.path = format!("d{}/f{i}.txt", i % 7).into_bytes();
            w.blob = ObjectId::of(format!("{i}").as_bytes());
            w
        })
    };
    assert_eq!(cache.prime(base.id, made(3000, 0)), 3000);
    assert_eq!(cache.prime(other, made(1000, 2500)), 1000);
    cache.rekey();
    let tmp = tempfile::tempdir().expect("tmp");
    cache.save(tmp.path(), &path).expect("saved");
    let back = StatCache::load(&path);
    assert_eq!(back.primed_len(), 3500);
    let mut snapshots = back.primed_snapshots();
    snapshots.sort();
    let mut expected = vec![base.id, other];
    expected.sort();
    assert_eq!(snapshots, expected);
    for i in 0..3500usize {
        let w = made(1, i).next().expect("one");
        assert_eq!(
            back.primed(&w.path, &w.placed).map(|r| r.blob),
            Some(w.blob),
            "{}",
            String::from_utf8_lossy(&w.path)
        );
    }
}
