//! A handle whose view of the packs is stale still reads objects another process repacked.

use cairn_store::gc::GcOptions;
use cairn_store::{
    CaptureSettings, EntryKind, Manifest, ObjectKind, OperationKind, Stats, Store, StoreOptions,
    Tree, TreeEntry,
};
use std::time::Duration;

#[test]
fn a_handle_reads_an_object_that_another_handle_repacked_after_it_looked() {
    let dir = tempfile::tempdir().expect("tmp");
    let a = Store::open(dir.path().join("s"), StoreOptions::default()).expect("store");
    let op = a.begin_operation(OperationKind::Write, &[]).expect("op");
    let w = a.writer(&op);
    let live = w.put(ObjectKind::Blob, b"live content").expect("put");
    // Mostly dead bytes, so a collection repacks this pack.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<u8> = (0..200_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    w.put(ObjectKind::Blob, &noise).expect("put");
    let tree = Tree::new(vec![TreeEntry {
        name: b"f".to_vec(),
        kind: EntryKind::File,
        mode: 0o100644,
        size: live.size,
        id: live.id,
    }])
    .expect("tree");
    let root = w.put_tree(&tree).expect("tree");
    w.commit().expect("commit");
    a.write_manifest(
        &op,
        &Manifest {
            root,
            label: None,
            created_ms: 0,
            workspace_id: "w".into(),
            workspace_root: b"/w".to_vec(),
            metadata: "{}".into(),
            capture: CaptureSettings::default(),
            skipped: vec![],
            stats: Stats::default(),
            protected: false,
        },
    )
    .expect("manifest");
    drop(op);
    // `a` has the old pack loaded; another handle repacks it away.
    let b = Store::open(dir.path().join("s"), StoreOptions::default()).expect("store");
    let report = b.gc(&GcOptions::with_grace(Duration::ZERO)).expect("gc");
    assert_eq!(report.packs_repacked, 1);
    assert_eq!(a.read_object(&live.id).expect("read").1, b"live content");
}
