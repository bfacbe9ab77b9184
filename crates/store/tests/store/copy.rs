//! Copying snapshots between stores.

use crate::util::{file_entry, kind, manifest, noise, options, temp};
use cairn_store::{
    Compression, EntryKind, ErrorKind, ObjectId, OperationKind, SnapshotId, Store, Tree, TreeEntry,
};

/// A snapshot with a nested directory, a symlink, small files and a large file.
fn nested_snapshot(store: &Store, large: &[u8], label: &str) -> (SnapshotId, Vec<ObjectId>) {
    let op = store
        .begin_operation(OperationKind::Snapshot, &[])
        .expect("begins");
    let w = store.writer(&op);
    let put = |b: &[u8]| {
        w.put_blob_from(&mut &b[..], b.len() as u64)
            .expect("stored")
    };
    let readme = put(format!("read me: {label}\n").as_bytes());
    let main = put(b"fn main() {}\n");
    let big = put(large);
    let target = put(b"src/main.rs");
    let src = Tree::new(vec![file_entry(b"main.rs", main.id, main.size)]).expect("valid");
    let src_id = w.put_tree(&src).expect("stored");
    let root = Tree::new(vec![
        file_entry(b"README", readme.id, readme.size),
        file_entry(b"data.bin", big.id, big.size),
        TreeEntry {
            name: b"src".to_vec(),
            kind: EntryKind::Dir,
            mode: 0o040755,
            size: src.total_size(),
            id: src_id.0,
        },
        TreeEntry {
            name: b"link".to_vec(),
            kind: EntryKind::Symlink,
            mode: 0o120777,
            size: target.size,
            id: target.id,
        },
    ])
    .expect("valid");
    let root_id = w.put_tree(&root).expect("stored");
    w.commit().expect("commits");
    let id = store
        .write_manifest(&op, &manifest(root_id, Some(label), 1))
        .expect("written");
    (
        id,
        vec![readme.id, main.id, big.id, target.id, src_id.0, root_id.0],
    )
}

fn small_inline(compression: Compression) -> cairn_store::StoreOptions {
    let mut o = options(compression);
    o.inline_max_bytes = 4096;
    o
}

#[test]
fn copy_snapshot_into_another_store_is_idempotent_and_the_copy_verifies() {
    let dir = temp();
    let src =
        Store::open(dir.path().join("src"), small_inline(Compression::default())).expect("opens");
    let dst = Store::open(dir.path().join("dst"), small_inline(Compression::None)).expect("opens");
    let large = noise(1, 100_000);
    let (id, objects) = nested_snapshot(&src, &large, "one");

    let report = src.copy_snapshot_to(&id, &dst).expect("copies");
    assert!(!report.already_present);
    assert_eq!(report.snapshot, id);
    assert_eq!(report.objects_copied, objects.len() as u64);
    assert_eq!(
        dst.read_manifest_bytes(&id).expect("reads"),
        src.read_manifest_bytes(&id).expect("reads"),
        "the manifest is copied byte for byte, so its id is the same"
    );
    for o in &objects {
        assert_eq!(
            dst.read_object(o).expect("reads"),
            src.read_object(o).expect("reads")
        );
    }
    assert!(
        dst.layout().large_path(&objects[2]).is_file(),
        "the large blob is large in the target too"
    );
    let v = dst.verify().expect("verifies");
    assert!(v.is_ok(), "{v:?}");
    assert_eq!(v.snapshots.len(), 1);

    // Again: nothing to do, nothing written.
    let packs = crate::util::files_ending(&dst.layout().packs, ".pack");
    let again = src.copy_snapshot_to(&id, &dst).expect("copies");
    assert!(again.already_present);
    assert_eq!(again.objects_copied, 0);
    assert_eq!(
        crate::util::files_ending(&dst.layout().packs, ".pack"),
        packs
    );

    // A second snapshot sharing most objects copies only what is new.
    let (id2, _) = nested_snapshot(&src, &large, "two");
    let report = src.copy_snapshot_to(&id2, &dst).expect("copies");
    assert_eq!(
        report.objects_copied, 2,
        "only the new README and root tree"
    );
    assert!(dst.verify().expect("verifies").is_ok());
    assert!(src.live_operations().expect("lists").is_empty());
    assert!(dst.live_operations().expect("lists").is_empty());
}

#[test]
fn copying_a_snapshot_with_a_damaged_object_fails_without_writing_the_manifest() {
    let dir = temp();
    let src = Store::open(dir.path().join("src"), small_inline(Compression::None)).expect("opens");
    let dst = Store::open(dir.path().join("dst"), small_inline(Compression::None)).expect("opens");
    let large = noise(2, 10_000);
    let (id, objects) = nested_snapshot(&src, &large, "one");
    crate::verify::flip_byte(&src.layout().large_path(&objects[2]), 24 + 100);
    assert_eq!(kind(src.copy_snapshot_to(&id, &dst)), ErrorKind::Corrupt);
    assert!(!dst.has_snapshot(&id));
    assert!(dst.live_operations().expect("lists").is_empty());
}
