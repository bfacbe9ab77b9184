//! Verification: damaged copies in packs and large files are found, reported per snapshot,
//! quarantined, healed by the next write of the same content, and dropped by a collection.

use crate::util::{files_ending, options, snapshot, temp, Snap};
use cairn_store::pack::{PackIndex, RECORD_HEADER_LEN};
use cairn_store::verify::VerifyReport;
use cairn_store::{Classify, Compression, ErrorKind, ObjectId, Store, StoreOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Inverts the bits of the byte at `offset` of `path`, in place.
pub fn flip_byte(path: &Path, offset: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("opens for writing");
    let mut b = [0u8];
    f.read_exact_at(&mut b, offset).expect("reads the byte");
    f.write_all_at(&[!b[0]], offset).expect("writes the byte");
}

fn truncate(path: &Path, len: u64) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("opens for writing");
    f.set_len(len).expect("truncates");
}

/// Where the record of `id` starts in the pack `pack`.
fn record_offset(pack: &Path, id: &ObjectId) -> u64 {
    let idx = pack.with_extension("idx");
    PackIndex::load(&idx)
        .expect("the index loads")
        .lookup(id)
        .expect("the pack holds the object")
        .offset
}

fn only_new_pack(store: &Store, before: &[PathBuf]) -> PathBuf {
    let mut new: Vec<PathBuf> = files_ending(&store.layout().packs, ".pack")
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(new.len(), 1, "one new pack");
    new.remove(0)
}

const FILES: [(&str, &[u8]); 3] = [
    (
        "a",
        b"the first file, a little longer than sixty-four bytes so zstd may try it\n",
    ),
    (
        "b",
        b"the second file, also a little longer than sixty-four bytes for zstd\n",
    ),
    (
        "c",
        b"the third file, which is likewise longer than sixty-four bytes, for zstd\n",
    ),
];

/// Two snapshots in two packs: the one to damage, and a bystander.
fn two_snapshots(store: &Store) -> (Snap, PathBuf, Snap) {
    let damaged = snapshot(store, &FILES, Some("damaged"), 1);
    let pack = only_new_pack(store, &[]);
    let before = files_ending(&store.layout().packs, ".pack");
    let bystander = snapshot(store, &[("z", b"unrelated\n")], Some("bystander"), 2);
    only_new_pack(store, &before);
    (damaged, pack, bystander)
}

fn check<'a>(report: &'a VerifyReport, snap: &Snap) -> &'a cairn_store::verify::SnapshotCheck {
    report
        .snapshots
        .iter()
        .find(|c| c.id == snap.id)
        .expect("the snapshot is checked")
}

fn sorted(mut ids: Vec<ObjectId>) -> Vec<ObjectId> {
    ids.sort();
    ids
}

/// Writes the damaged snapshot again, checks verify finds it whole, then collects and checks the
/// damaged copies are gone and the quarantine is empty.
fn heal_and_collect(store: &Store, damaged: &Snap) {
    let again = snapshot(store, &FILES, Some("damaged"), 1);
    assert_eq!(
        again.id, damaged.id,
        "the same content gives the same snapshot"
    );
    let report = store.verify().expect("verifies");
    assert!(report.corrupt.is_empty(), "{:?}", report.corrupt);
    assert!(
        check(&report, damaged).is_ok(),
        "{:?}",
        check(&report, damaged)
    );
    for ((_, bytes), id) in FILES.iter().zip(&damaged.blobs) {
        assert_eq!(&store.read_object(id).expect("reads back").1, bytes);
    }
    store.read_tree(&damaged.root).expect("the tree reads back");

    let gc = store.gc(&crate::util::no_grace()).expect("collects");
    assert!(!gc.deferred);
    let report = store.verify().expect("verifies");
    assert!(report.is_ok(), "after a collection: {report:?}");
    let q = std::fs::read_to_string(store.layout().quarantine()).unwrap_or_default();
    assert!(q.trim().is_empty(), "the quarantine still lists {q}");
    for ((_, bytes), id) in FILES.iter().zip(&damaged.blobs) {
        assert_eq!(&store.read_object(id).expect("reads back").1, bytes);
    }
}

#[test]
fn a_truncated_pack_is_reported_by_verify_and_healed_by_a_later_write() {
    for compression in [Compression::None, Compression::Zstd { level: 3 }] {
        let dir = temp();
        let store = Store::open(dir.path().join("store"), options(compression)).expect("opens");
        let (damaged, pack, bystander) = two_snapshots(&store);
        // Cut the pack one byte into the data of "b": "b", "c" and the tree (written last) are lost.
        let b = damaged.blobs[1];
        truncate(
            &pack,
            record_offset(&pack, &b) + RECORD_HEADER_LEN as u64 + 1,
        );

        let report = store.verify().expect("verifies");
        assert_eq!(
            report.corrupt,
            sorted(vec![b, damaged.blobs[2], damaged.root.0]),
            "{compression:?}"
        );
        assert_eq!(report.bad_copies.len(), 3);
        assert!(report.bad_copies.iter().all(|c| c.path == pack));
        assert_eq!(
            check(&report, &damaged).corrupt,
            [damaged.root.0],
            "the root is lost"
        );
        assert!(check(&report, &bystander).is_ok());
        assert!(!report.is_ok());
        assert_eq!(
            store.read_object(&b).expect_err("damaged").kind(),
            ErrorKind::Corrupt
        );
        assert_eq!(
            store.read_object(&damaged.blobs[0]).expect("intact").1,
            FILES[0].1
        );
        heal_and_collect(&store, &damaged);
        assert!(store.read_tree(&bystander.root).is_ok());
    }
}

#[test]
fn a_flipped_byte_in_a_pack_is_reported_by_verify_and_healed_by_a_later_write() {
    for compression in [Compression::None, Compression::Zstd { level: 3 }] {
        let dir = temp();
        let store = Store::open(dir.path().join("store"), options(compression)).expect("opens");
        let (damaged, pack, bystander) = two_snapshots(&store);
        // A second handle, open before the damage is found: a long-lived process sharing the store.
        let other = Store::open(store.path(), options(compression)).expect("reopens");
        let b = damaged.blobs[1];
        flip_byte(
            &pack,
            record_offset(&pack, &b) + RECORD_HEADER_LEN as u64 + 3,
        );

        let report = store.verify().expect("verifies");
        assert_eq!(report.corrupt, [b], "{compression:?}");
        assert_eq!(check(&report, &damaged).corrupt, [b]);
        assert!(check(&report, &damaged).missing.is_empty());
        assert!(check(&report, &bystander).is_ok());
        // The other handle learns of the quarantine and writes a good copy.
        heal_and_collect(&other, &damaged);
    }
}

#[test]
fn a_damaged_large_object_is_reported_by_verify_and_healed_by_a_later_write() {
    for compression in [Compression::None, Compression::Zstd { level: 3 }] {
        let dir = temp();
        let mut o = options(compression);
        o.inline_max_bytes = 1024;
        let store = Store::open(dir.path().join("store"), o).expect("opens");
        let text = b"a large text file that compresses\n".repeat(1000);
        let noise = crate::util::noise(7, 50_000);
        let files: [(&str, &[u8]); 2] = [("text", &text), ("noise", &noise)];
        let snap = snapshot(&store, &files, None, 1);
        let (text_id, noise_id) = (snap.blobs[0], snap.blobs[1]);
        let text_path = store.layout().large_path(&text_id);
        let noise_path = store.layout().large_path(&noise_id);
        let len = std::fs::metadata(&text_path).expect("stat").len();
        truncate(&text_path, len - 5);
        flip_byte(&noise_path, 24 + 10_000);

        let report = store.verify().expect("verifies");
        assert_eq!(
            report.corrupt,
            sorted(vec![text_id, noise_id]),
            "{compression:?}"
        );
        let c = check(&report, &snap);
        assert_eq!(sorted(c.corrupt.clone()), sorted(vec![text_id, noise_id]));
        let mut sink = Vec::new();
        assert_eq!(
            store
                .copy_object_to(&text_id, &mut sink)
                .expect_err("damaged")
                .kind(),
            ErrorKind::Corrupt
        );

        let again = snapshot(&store, &files, None, 1);
        assert_eq!(again.id, snap.id);
        let report = store.verify().expect("verifies");
        assert!(report.is_ok(), "{report:?}");
        let mut out = Vec::new();
        store.copy_object_to(&text_id, &mut out).expect("streams");
        assert_eq!(out, text);
        assert_eq!(store.read_object(&noise_id).expect("reads").1, noise);
    }
}

#[test]
fn a_broken_pack_index_is_reported_and_its_objects_are_missing() {
    let dir = temp();
    let store = Store::open(dir.path().join("store"), StoreOptions::default()).expect("opens");
    let snap = snapshot(&store, &FILES, None, 1);
    let idx = files_ending(&store.layout().packs, ".idx").remove(0);
    flip_byte(&idx, 20);
    // The handle that loaded the index keeps its good copy in memory; a new one reads the file.
    let store = Store::open(store.path(), StoreOptions::default()).expect("reopens");
    let report = store.verify().expect("verifies");
    assert_eq!(report.broken_indexes.len(), 1);
    assert_eq!(report.broken_indexes[0].path, idx);
    assert!(check(&report, &snap).missing.contains(&snap.root.0));
    assert!(!report.is_ok());
}

#[test]
fn a_quarantine_list_replaced_by_a_symlink_is_never_written_through() {
    let dir = temp();
    let store = Store::open(dir.path().join("store"), options(Compression::None)).expect("opens");
    let (damaged, pack, _) = two_snapshots(&store);
    let outside = dir.path().join("outside-file");
    std::fs::write(&outside, b"not the store's\n").expect("writes");
    std::os::unix::fs::symlink(&outside, store.layout().quarantine()).expect("plants a symlink");
    flip_byte(
        &pack,
        record_offset(&pack, &damaged.blobs[0]) + RECORD_HEADER_LEN as u64,
    );
    // Whether verify reports the damage or refuses the planted link, it writes nothing outside.
    let _ = store.verify();
    let _ = store.read_object(&damaged.blobs[0]);
    assert_eq!(
        std::fs::read_to_string(&outside).expect("reads"),
        "not the store's\n"
    );
}

/// Issue 53: a line of `objects/quarantine` that is not UTF-8 is ignored by the collection and
/// the prune as the format says (they failed with `IO`, wedging retention), and the good line
/// beside it still counts: its id keeps its place in the list while its bad copy remains.
#[test]
fn a_quarantine_line_that_is_not_utf8_is_ignored_by_gc_and_prune_and_the_good_line_still_counts() {
    let dir = temp();
    let store = Store::open(dir.path().join("store"), options(Compression::None)).expect("opens");
    let (damaged, pack, _) = two_snapshots(&store);
    let b = damaged.blobs[1];
    flip_byte(
        &pack,
        record_offset(&pack, &b) + RECORD_HEADER_LEN as u64 + 3,
    );
    let q = store.layout().quarantine();
    let listed = || -> Vec<u8> { std::fs::read(&q).expect("the list is there") };
    let write_list = || {
        let mut bytes = b"\xff\xfe not an id\n".to_vec();
        bytes.extend_from_slice(format!("{}\n", b.to_hex()).as_bytes());
        std::fs::write(&q, bytes).expect("writes the list");
    };

    write_list();
    let store = Store::open(store.path(), options(Compression::None)).expect("reopens");
    assert!(store.has_damage(), "the good line is read on open");
    store
        .gc(&crate::util::no_grace())
        .expect("gc ignores the bad line");
    assert_eq!(
        listed(),
        format!("{}\n", b.to_hex()).into_bytes(),
        "gc keeps the good line"
    );

    write_list();
    let keep_all = cairn_store::retain::Retention {
        count: Some(10),
        ..Default::default()
    };
    let report = store
        .prune(&keep_all, &crate::util::no_grace())
        .expect("prune ignores the bad line");
    assert!(report.deleted.is_empty());
    assert_eq!(
        listed(),
        format!("{}\n", b.to_hex()).into_bytes(),
        "prune keeps the good line"
    );
    assert!(store.has_damage());
}
