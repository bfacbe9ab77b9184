//! Collection: grace periods, repacking, the dry run, and symlinks planted in the store.

use crate::util::{
    files_ending, no_grace, noise, open, options, prune_all, snapshot, temp, write_unreachable,
};
use cairn_store::gc::{self, GcOptions};
use cairn_store::{Classify, Compression, ErrorKind, ObjectId, OperationKind, Store, StoreOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[test]
fn a_collection_keeps_unreachable_objects_younger_than_the_grace_period() {
    let dir = temp();
    let mut o = StoreOptions::default();
    o.inline_max_bytes = 1024;
    let store = Store::open(dir.path().join("store"), o).expect("opens");
    let live = snapshot(&store, &[("a", b"kept\n")], None, 1);
    let dead = write_unreachable(
        &store,
        &[b"young and unreachable 1", b"young and unreachable 2"],
    );
    let large = snapshot(&store, &[("big", &noise(1, 5000))], None, 2);
    let big = large.blobs[0];
    std::fs::remove_file(store.layout().manifest_path(&large.id)).expect("drops the manifest");

    let report = store.gc(&GcOptions::default()).expect("collects");
    assert!(!report.deferred);
    assert_eq!(report.objects_deleted, 0);
    // Two blobs in their pack, the large blob, and the tree naming it in its pack.
    assert_eq!(report.plan.young_unreachable, 4);
    for id in dead.iter().chain([&big]) {
        assert!(store.contains(id));
    }
    // With no grace they go; the live snapshot stays whole.
    let report = store.gc(&no_grace()).expect("collects");
    assert_eq!(report.objects_deleted, 4);
    assert_eq!(report.packs_deleted, 2);
    for id in dead.iter().chain([&big]) {
        assert!(!store.contains(id), "{id:?} survived");
    }
    assert!(files_ending(&store.layout().large, "").is_empty());
    assert_eq!(
        store.read_object(&live.blobs[0]).expect("reads").1,
        b"kept\n"
    );
    assert!(store.verify().expect("verifies").is_ok());
}

#[test]
fn a_collection_removes_temporary_files_left_by_dead_writers_once_past_the_grace_period() {
    let dir = temp();
    let store = open(dir.path());
    let tmp = &store.layout().tmp;
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    for name in ["pack-1-2-3.tmp", "large-1-2-3.tmp"] {
        std::fs::write(tmp.join(name), b"half written").expect("writes");
        std::fs::File::options()
            .write(true)
            .open(tmp.join(name))
            .and_then(|f| f.set_modified(two_hours_ago))
            .expect("ages the file");
    }
    let report = store.gc(&GcOptions::default()).expect("collects");
    assert_eq!(report.plan.temp_files.len(), 2);
    assert_eq!(std::fs::read_dir(tmp).expect("lists").count(), 0);
}

#[test]
fn a_collection_leaves_a_young_temporary_file_to_the_writer_that_may_still_rename_it() {
    // The stat cache is written by a background thread after its snapshot returned, under no
    // operation marker: a collection in another process must not delete its temporary file
    // between its creation and its rename.
    let dir = temp();
    let store = open(dir.path());
    let tmp = &store.layout().tmp;
    std::fs::write(tmp.join("statcache-live.tmp"), b"being written").expect("writes");
    let report = store.gc(&GcOptions::default()).expect("collects");
    assert!(report.plan.temp_files.is_empty(), "{:?}", report.plan);
    assert!(tmp.join("statcache-live.tmp").exists());
    // With no grace period (as a test or `cairn gc --grace 0` asks) it goes.
    let report = store.gc(&no_grace()).expect("collects");
    assert_eq!(report.plan.temp_files.len(), 1);
    assert!(!tmp.join("statcache-live.tmp").exists());
}

#[test]
fn the_plan_is_a_dry_run_that_changes_nothing() {
    let dir = temp();
    let store = open(dir.path());
    snapshot(&store, &[("a", b"a")], None, 1);
    let dead = write_unreachable(&store, &[b"dead"]);
    let before = crate::util::walk(store.path())
        .into_iter()
        .map(|(p, m)| (p, m.len()))
        .collect::<Vec<_>>();
    let plan = gc::plan(&store, &no_grace()).expect("plans");
    assert_eq!(plan.delete_packs.len(), 1);
    assert_eq!(plan.delete_packs[0].objects, 1);
    assert_eq!(plan.snapshots, 1);
    assert_eq!(plan.reachable_objects, 2);
    let after = crate::util::walk(store.path())
        .into_iter()
        .map(|(p, m)| (p, m.len()))
        .collect::<Vec<_>>();
    assert_eq!(before, after);
    assert!(store.contains(&dead[0]));
}

/// One pack of a small live blob and its tree and `dead` larger dead blobs, collected
/// through a handle opened after it was written when `reopen` (which loads the index from
/// disk, as every other process does); the live objects read back and the dead are gone.
/// A store in `dir` with one pack: a snapshot of one live blob (`live\n`) and `dead`
/// unreachable blobs of 1,000 bytes. Returns the store, the live blob, the snapshot's root
/// tree and the dead blobs.
fn one_pack_of_live_and_dead(
    dir: &Path,
    dead: usize,
) -> (
    Store,
    ObjectId,
    cairn_store::TreeId,
    cairn_store::Tree,
    Vec<ObjectId>,
) {
    let store = Store::open(dir.join("store"), options(Compression::None)).expect("opens");
    let op = store
        .begin_operation(OperationKind::Snapshot, &[])
        .expect("begins");
    let w = store.writer(&op);
    let live = w
        .put(cairn_store::ObjectKind::Blob, b"live\n")
        .expect("stored");
    let dead: Vec<ObjectId> = (0..dead)
        .map(|i| {
            w.put(cairn_store::ObjectKind::Blob, &noise(i as u64, 1000))
                .expect("stored")
                .id
        })
        .collect();
    let tree =
        cairn_store::Tree::new(vec![crate::util::file_entry(b"live", live.id, 5)]).expect("valid");
    let root = w.put_tree(&tree).expect("stored");
    w.commit().expect("commits");
    store
        .write_manifest(&op, &crate::util::manifest(root, None, 1))
        .expect("written");
    drop(op);
    (store, live.id, root, tree, dead)
}

fn repack_keeps_live_objects(dead: usize, reopen: bool) {
    let dir = temp();
    let (store, live_id, root, tree, dead) = one_pack_of_live_and_dead(dir.path(), dead);
    let old_pack = files_ending(&store.layout().packs, ".pack");
    assert_eq!(old_pack.len(), 1);
    let store = if reopen {
        Store::open(store.path(), options(Compression::None)).expect("reopens")
    } else {
        store
    };

    let report = store.gc(&no_grace()).expect("collects");
    assert_eq!(report.plan.repack.len(), 1);
    assert_eq!(report.packs_repacked, 1);
    assert_eq!(report.objects_deleted, dead.len() as u64);
    assert!(report.bytes_freed >= 1000 * dead.len() as u64);
    let new_pack = files_ending(&store.layout().packs, ".pack");
    assert_eq!(new_pack.len(), 1);
    assert_ne!(new_pack, old_pack);
    for id in &dead {
        assert!(!store.contains(id));
    }
    // Read back through this handle and a new one.
    let again = Store::open(store.path(), StoreOptions::default()).expect("reopens");
    for s in [&store, &again] {
        assert_eq!(s.read_object(&live_id).expect("reads").1, b"live\n");
        assert_eq!(s.read_tree(&root).expect("reads"), tree);
        assert!(s.verify().expect("verifies").is_ok());
    }
}

#[test]
fn repack_keeps_live_objects_readable_and_drops_dead_ones() {
    repack_keeps_live_objects(10, false);
}

#[test]
fn repack_of_a_pack_whose_large_index_is_read_from_its_file_keeps_live_objects() {
    // 2,002 entries: 128 KiB of index, past what a loaded index holds in memory.
    repack_keeps_live_objects(2000, true);
}

#[test]
fn many_small_packs_are_repacked_into_one() {
    let dir = temp();
    let store = open(dir.path());
    let snaps: Vec<_> = (0..4u8)
        .map(|i| snapshot(&store, &[("f", &[b'x', i][..])], None, i.into()))
        .collect();
    assert_eq!(files_ending(&store.layout().packs, ".pack").len(), 4);
    let mut o = no_grace();
    o.max_packs = 2;
    let report = store.gc(&o).expect("collects");
    assert_eq!(report.packs_repacked, 4);
    assert_eq!(report.objects_deleted, 0);
    assert_eq!(files_ending(&store.layout().packs, ".pack").len(), 1);
    for (i, s) in snaps.iter().enumerate() {
        assert_eq!(
            store.read_object(&s.blobs[0]).expect("reads").1,
            [b'x', i as u8]
        );
    }
    assert!(store.verify().expect("verifies").is_ok());
}

// ---- symlinks planted in the store ----

/// A directory outside the store holding bait: files a collector following links would delete.
struct Outside {
    dir: PathBuf,
}

impl Outside {
    fn new(parent: &Path) -> Self {
        let dir = parent.join("outside");
        std::fs::create_dir_all(&dir).expect("mkdir");
        Outside { dir }
    }

    fn bait(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, bytes).expect("writes bait");
        p
    }

    /// Every file below the directory with the hash of its content.
    fn contents(&self) -> BTreeMap<PathBuf, ObjectId> {
        crate::util::walk(&self.dir)
            .into_iter()
            .filter(|(_, m)| m.is_file())
            .map(|(p, _)| {
                let id = ObjectId::of(&std::fs::read(&p).expect("reads"));
                (p, id)
            })
            .collect()
    }
}

#[test]
fn planted_symlinks_in_packs_large_and_tmp_are_removed_by_the_collector_and_never_followed() {
    let dir = temp();
    let store = open(dir.path());
    let live = snapshot(&store, &[("a", b"live\n")], None, 1);
    let dead = write_unreachable(&store, &[b"dead"]);
    let outside = Outside::new(dir.path());
    let hex = |n: &[u8]| ObjectId::of(n).to_hex();
    let l = store.layout().clone();
    let links = [
        (
            l.packs.join(format!("{}.pack", hex(b"p"))),
            outside.bait("pack", b"victim pack"),
        ),
        (
            l.packs.join(format!("{}.idx", hex(b"i"))),
            outside.bait("idx", b"victim idx"),
        ),
        (l.packs.join("stray"), outside.dir.clone()),
        (
            l.large.join(hex(b"l")),
            outside.bait("large", b"victim large object"),
        ),
        (l.large.join("subdir"), outside.dir.clone()),
        (
            l.tmp.join("stale.tmp"),
            outside.bait("tmp", b"victim temp file"),
        ),
        (l.tmp.join("dir.tmp"), outside.dir.clone()),
    ];
    outside.bait("inner.tmp", b"victim inside a linked directory");
    for (link, target) in &links {
        std::os::unix::fs::symlink(target, link).expect("plants a symlink");
    }
    let before = outside.contents();

    let report = store.gc(&no_grace()).expect("collects");
    assert!(!report.deferred);
    assert_eq!(report.objects_deleted, 1, "the real garbage is collected");
    assert!(!store.contains(&dead[0]));
    let mut removed = report.plan.symlinks.clone();
    removed.sort();
    let mut planted: Vec<PathBuf> = links.iter().map(|(l, _)| l.clone()).collect();
    planted.sort();
    assert_eq!(removed, planted, "every planted link is removed");
    assert!(report.plan.foreign.is_empty(), "{:?}", report.plan.foreign);
    for (link, _) in &links {
        assert!(
            std::fs::symlink_metadata(link).is_err(),
            "{} is gone",
            link.display()
        );
    }
    assert_eq!(
        outside.contents(),
        before,
        "nothing outside the store changed"
    );
    assert_eq!(
        store.broken_indexes().len(),
        0,
        "the linked index is gone with its link"
    );
    assert_eq!(
        store.read_object(&live.blobs[0]).expect("reads").1,
        b"live\n"
    );
    // Verify and a prune walk past them too.
    store.verify().expect("verifies");
    prune_all(&store).expect("prunes");
    assert_eq!(
        outside.contents(),
        before,
        "nothing outside the store changed"
    );
}

#[test]
fn a_store_directory_replaced_by_a_symlink_makes_the_collector_refuse_and_delete_nothing_outside() {
    for sub in [
        "objects/packs",
        "objects/large",
        "tmp",
        "locks",
        "snapshots",
        "objects",
    ] {
        let dir = temp();
        let store = open(dir.path());
        let live = snapshot(&store, &[("a", b"live\n")], None, 1);
        write_unreachable(&store, &[b"dead"]);
        // Bait: a valid unreachable pack, a large object, a temp file, a stale marker and a
        // valid manifest, all outside the store.
        let bait_store =
            Store::open(dir.path().join("bait"), StoreOptions::default()).expect("opens");
        let bait_snap = snapshot(&bait_store, &[("b", b"bait")], None, 1);
        let outside = Outside::new(dir.path());
        for p in files_ending(&bait_store.layout().packs, "") {
            let name = p
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            outside.bait(&name, &std::fs::read(&p).expect("reads"));
        }
        outside.bait(&ObjectId::of(b"l").to_hex(), b"large");
        outside.bait("stale.tmp", b"temp");
        outside.bait("old.marker", b"{}");
        let manifest = bait_store
            .read_manifest_bytes(&bait_snap.id)
            .expect("reads");
        outside.bait(&bait_snap.id.to_hex(), &manifest);
        let before = outside.contents();

        let real = store.path().join(sub);
        let aside = dir.path().join("aside");
        std::fs::rename(&real, &aside).expect("moved aside");
        std::os::unix::fs::symlink(&outside.dir, &real).expect("symlink");

        let results = [
            ("gc", store.gc(&no_grace()).map(|_| ())),
            ("prune", prune_all(&store).map(|_| ())),
            (
                "delete",
                store.delete_snapshot(&live.id, &no_grace()).map(|_| ()),
            ),
        ];
        for (what, r) in results {
            let err = r.expect_err(what);
            assert_eq!(err.kind(), ErrorKind::Corrupt, "{sub}, {what}: {err}");
        }
        assert_eq!(
            outside.contents(),
            before,
            "{sub}: something outside the store changed"
        );
        std::fs::remove_file(&real).expect("unlink");
        std::fs::rename(&aside, &real).expect("moved back");
        assert!(store.has_snapshot(&live.id), "{sub}");
    }
}

#[test]
fn a_collection_after_one_killed_past_its_repack_keeps_the_pack_it_writes_again() {
    // Found by the reliability suite's gc crash loop: a collection killed after its repacked
    // pack was in place, but before the packs it came from were removed, left that pack beside
    // them; the next collection repacked them all into the same bytes, so the same pack id,
    // and then removed the "old" pack of that id: every live object it held was lost.
    let dir = temp();
    let (store, live_id, root, tree, _) = one_pack_of_live_and_dead(dir.path(), 4);
    let packs = &store.layout().packs;
    let before: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(packs)
        .expect("packs")
        .map(|e| {
            let p = e.expect("entry").path();
            let bytes = std::fs::read(&p).expect("read");
            (p, bytes)
        })
        .collect();
    // The first collection repacks; putting the old pack back leaves what a kill between the
    // repack's rename and the old pack's removal leaves.
    store.gc(&no_grace()).expect("collects");
    for (p, bytes) in &before {
        std::fs::write(p, bytes).expect("put back");
    }
    let store = Store::open(store.path(), options(Compression::None)).expect("reopens");
    assert_eq!(files_ending(packs, ".pack").len(), 2);
    // Every pack repacked, the one the killed collection wrote among them.
    let mut all = no_grace();
    all.max_packs = 1;
    store.gc(&all).expect("collects again");
    let again = Store::open(store.path(), StoreOptions::default()).expect("reopens");
    for s in [&store, &again] {
        assert_eq!(s.read_object(&live_id).expect("reads").1, b"live\n");
        assert_eq!(s.read_tree(&root).expect("reads"), tree);
        assert!(s.verify().expect("verifies").is_ok());
    }
}

/// Issue 57, found by the power-cut explorer (`tests/tests/powercut`): the state a power cut
/// left after a snapshot's pack and index were renamed into `objects/packs/` but before that
/// directory was synced, with the index's rename on the disk and the pack's not (and no
/// manifest). The index used to count: the next snapshot of the same files stored none of its
/// objects and could not be restored. Now an index without its pack names nothing, and a
/// collection removes it.
#[test]
fn an_index_whose_pack_a_power_cut_lost_names_no_object_and_a_collection_removes_it() {
    let dir = temp();
    let store = open(dir.path());
    let lost = snapshot(&store, &[("a", b"written before the cut\n")], None, 1);
    let packs = store.layout().packs.clone();
    for p in files_ending(&packs, ".pack") {
        std::fs::remove_file(p).expect("the pack the cut lost");
    }
    std::fs::remove_file(store.layout().manifest_path(&lost.id)).expect("its manifest too");
    drop(store);

    let store = open(dir.path());
    assert!(
        !store.contains(&lost.blobs[0]),
        "an index without its pack counts"
    );
    let again = snapshot(&store, &[("a", b"written before the cut\n")], None, 2);
    assert_eq!(
        store
            .read_object(&again.blobs[0])
            .expect("the blob reads back")
            .1,
        b"written before the cut\n"
    );
    assert!(store.verify().expect("verify runs").is_ok());
    store.gc(&no_grace()).expect("collects");
    assert_eq!(
        files_ending(&packs, ".idx").len(),
        files_ending(&packs, ".pack").len(),
        "the index without its pack is collected"
    );
}
