//! A restore primes the stat cache (issue 33): the snapshot after it reads no file it wrote,
//! while every change made since is still seen, a record is never trusted once the snapshot
//! holding its blob is gone, and a crash leaves no record that vouches for wrong content.

use crate::fixtures::{open, write, Fx};
use cairn_snapshot::statcache::RACY_WINDOW_NS;
use std::time::Duration;

fn wait_out_the_racy_window() {
    std::thread::sleep(Duration::from_nanos(RACY_WINDOW_NS as u64) + Duration::from_millis(100));
}

/// A tree of 40 files in four directories, a link and a directory the edits delete; its
/// snapshot is taken once the racy window is past (when `wait`), so its records are trusted.
fn tree_waiting(fx: &Fx, wait: bool) -> cairn_snapshot::Snapshot {
    for i in 0..40 {
        fx.write(
            &format!("d{}/f{i}.txt", i % 4),
            format!("file {i}\n").as_bytes(),
        );
    }
    fx.write("gone/a.txt", b"a");
    fx.write("gone/deeper/b.txt", b"b");
    std::os::unix::fs::symlink("d0/f0.txt", fx.root().join("link")).expect("symlink");
    if wait {
        wait_out_the_racy_window();
    }
    fx.snap()
}

fn tree(fx: &Fx) -> cairn_snapshot::Snapshot {
    tree_waiting(fx, true)
}

/// Edits that a restore of [`tree`]'s snapshot undoes: 15 files rewritten, a directory
/// deleted, a file and a directory added. (A file only re-moded is not written by the restore,
/// which sets its mode in place: the snapshot after reads it, its `ctime` having moved.)
fn edit(fx: &Fx) {
    for i in 0..15 {
        fx.write(
            &format!("d{}/f{i}.txt", i % 4),
            format!("edited {i}, longer\n").as_bytes(),
        );
    }
    std::fs::remove_dir_all(fx.root().join("gone")).expect("rm");
    fx.write("added.txt", b"new");
    fx.write("new-dir/x.txt", b"x");
}

/// A workspace with [`tree`]'s snapshot restored over [`edit`]s.
fn restored() -> (Fx, cairn_snapshot::Snapshot, cairn_restore::Report) {
    let fx = Fx::new();
    let first = tree(&fx);
    edit(&fx);
    let report = fx
        .ws
        .restore(
            &first.id,
            &Default::default(),
            &Default::default(),
            Default::default(),
        )
        .expect("restore");
    (fx, first, report)
}

fn cacheless(fx: &Fx) -> cairn_snapshot::Snapshot {
    fx.ws
        .snapshot(
            &cairn_snapshot::Options {
                use_stat_cache: false,
                ..fx.ws.snapshot_options()
            },
            Default::default(),
        )
        .expect("snapshot without the cache")
        .snapshot
}

#[test]
fn a_snapshot_after_a_restore_reads_no_file_the_restore_wrote_issue_33() {
    let (fx, first, report) = restored();
    assert!(
        report.summary.restored.len() >= 17,
        "{:?}",
        report.summary.restored
    );
    // At once, and again past the racy window: nothing is read, and the tree is the target's.
    let now = fx.snap();
    assert_eq!(now.stats.hashed, 0, "{:?}", now.stats);
    assert_eq!(now.root, first.root);
    wait_out_the_racy_window();
    let later = fx.snap();
    assert_eq!(later.stats.hashed, 0, "{:?}", later.stats);
    assert_eq!(later.root, first.root);
    // A workspace opened afresh (another process) reads the cache from its file: the same.
    let again = open(fx.dir.path());
    let other = again
        .snapshot(&again.snapshot_options(), Default::default())
        .expect("snapshot");
    assert_eq!(other.snapshot.stats.hashed, 0, "{:?}", other.snapshot.stats);
    assert_eq!(cacheless(&fx).root, first.root);
}

#[test]
fn a_snapshot_taken_soon_after_a_restore_leaves_the_next_one_nothing_to_read() {
    // The snapshot right after the restore finds the restored files inside the racy window of
    // its own start; the records it took from the restore's are kept for the next one.
    let (fx, first, _) = restored();
    for wait in [false, false, true] {
        if wait {
            wait_out_the_racy_window();
        }
        let snap = fx.snap();
        assert_eq!(snap.stats.hashed, 0, "{:?}", snap.stats);
        assert_eq!(snap.root, first.root);
    }
}

#[test]
fn a_file_changed_after_the_restore_is_still_seen() {
    let (fx, first, _) = restored();
    // Right after the restore: one restored file rewritten in place with the same size, one
    // replaced, one re-moded, one in the directory the restore made rewritten.
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(fx.root().join("d0/f0.txt"))
            .expect("open");
        f.write_all(b"FILE 0\n").expect("write");
    }
    fx.write("d1/f1.txt", b"replaced\n");
    crate::fixtures::chmod(&fx.root().join("d2/f2.txt"), 0o600);
    fx.write("gone/deeper/b.txt", b"B");
    let snap = fx.snap();
    assert!(snap.stats.hashed >= 3, "{:?}", snap.stats);
    assert_ne!(snap.root, first.root);
    assert_eq!(snap.root, cacheless(&fx).root);
    let blob = |rel: &str| {
        let tree = |id: &cairn_store::TreeId| fx.ws.store().read_tree(id).expect("tree");
        let mut t = tree(&snap.root);
        let parts: Vec<&str> = rel.split('/').collect();
        for dir in &parts[..parts.len() - 1] {
            let e = t.get(dir.as_bytes()).expect("dir").clone();
            t = tree(&cairn_store::TreeId::from(e.id));
        }
        let e = t.get(parts[parts.len() - 1].as_bytes()).expect("file");
        fx.ws.store().read_object(&e.id).expect("blob").1
    };
    assert_eq!(blob("d0/f0.txt"), b"FILE 0\n");
    assert_eq!(blob("d1/f1.txt"), b"replaced\n");
    assert_eq!(blob("gone/deeper/b.txt"), b"B");
}

#[test]
fn the_records_of_a_restore_are_not_trusted_once_its_target_is_deleted() {
    let (fx, first, report) = restored();
    // The target goes, and a collection with it; the safety snapshot (the cache's own) stays.
    fx.ws
        .store()
        .delete_snapshot(
            &first.id,
            &cairn_store::gc::GcOptions::with_grace(Duration::ZERO),
        )
        .expect("delete");
    assert!(report.safety_snapshot_id.is_some());
    let snap = fx.snap();
    assert!(snap.stats.hashed >= 17, "{:?}", snap.stats);
    assert_eq!(snap.root, first.root);
    assert!(fx.ws.store().verify().expect("verify").is_ok());
}

#[test]
fn a_restore_killed_at_any_point_after_an_earlier_restore_leaves_a_cache_that_tells_the_truth() {
    // An earlier restore primed the cache; a second one, back to its safety snapshot, is killed
    // after each possible number of operations and finished on reopening. Every snapshot then
    // has the tree a walk without the cache sees.
    let setup = |dir: &std::path::Path| {
        let fx = Fx {
            dir: tempfile::tempdir_in(dir).expect("tmp"),
            ws: {
                std::fs::create_dir_all(dir.join("root")).expect("root");
                open(dir)
            },
        };
        let first = tree_waiting(&fx, false);
        edit(&fx);
        let report = fx
            .ws
            .restore(
                &first.id,
                &Default::default(),
                &Default::default(),
                Default::default(),
            )
            .expect("restore");
        let safety = report.safety_snapshot_id.expect("safety");
        (fx, safety)
    };
    let probe = tempfile::tempdir().expect("tmp");
    let (fx, safety) = setup(probe.path());
    let total = fx
        .ws
        .plan(&safety, &Default::default(), Default::default())
        .expect("plan")
        .actions
        .len();
    assert!(total > 10, "{total}");
    drop(fx);
    for n in 0..=total {
        let dir = tempfile::tempdir().expect("tmp");
        let (fx, safety) = setup(dir.path());
        let expected = fx.ws.store().read_manifest(&safety).expect("manifest").root;
        drop(fx);
        assert_eq!(
            crate::crash::restore_in_child(dir.path(), &safety, n),
            Some(9),
            "the child was to be killed after {n} operations"
        );
        let ws = open(dir.path());
        assert!(ws.recovered()[0].completed, "after {n}");
        let snap = ws
            .snapshot(&ws.snapshot_options(), Default::default())
            .expect("snapshot");
        assert_eq!(snap.snapshot.root, expected, "after {n} operations");
        let plain = ws
            .snapshot(
                &cairn_snapshot::Options {
                    use_stat_cache: false,
                    ..ws.snapshot_options()
                },
                Default::default(),
            )
            .expect("snapshot");
        assert_eq!(plain.snapshot.root, expected, "after {n} operations");
        write(&dir.path().join("root"), "d0/f0.txt", b"after\n");
        let edited = ws
            .snapshot(&ws.snapshot_options(), Default::default())
            .expect("snapshot");
        assert_ne!(edited.snapshot.root, expected, "after {n} operations");
    }
}
