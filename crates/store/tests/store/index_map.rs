//! Pack indexes loaded from disk are mapped rather than copied to the heap, and are validated
//! as a copy was.

use crate::util::{files_ending, temp};
use crate::verify::flip_byte;
use cairn_store::pack::PackIndex;
use cairn_store::{Classify, ErrorKind, ObjectKind, OperationKind, Store, StoreOptions};

fn content(i: usize) -> Vec<u8> {
    format!("object {i} of the mapped index test\n").into_bytes()
}

#[test]
fn a_loaded_pack_index_is_mapped_and_finds_every_object() {
    let dir = temp();
    let path = dir.path().join("store");
    let ids: Vec<_> = {
        let store = Store::open(&path, StoreOptions::default()).expect("opens");
        let op = store
            .begin_operation(OperationKind::Write, &[])
            .expect("begins");
        let writer = store.writer(&op);
        let ids = (0..3000)
            .map(|i| writer.put(ObjectKind::Blob, &content(i)).expect("puts").id)
            .collect();
        writer.commit().expect("commits");
        ids
    };

    // A new handle loads the indexes from disk, and finds every object through them.
    let store = Store::open(&path, StoreOptions::default()).expect("reopens");
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(
            store.read_object(id).expect("reads"),
            (ObjectKind::Blob, content(i))
        );
    }
    assert!(store.broken_indexes().is_empty());

    let idxs = files_ending(&store.layout().packs, ".idx");
    assert!(!idxs.is_empty());
    let mut found = 0;
    for p in &idxs {
        let index = PackIndex::load(p).expect("loads");
        assert!(index.is_mapped(), "{} is mapped", p.display());
        found += ids.iter().filter(|id| index.lookup(id).is_some()).count();
    }
    assert_eq!(found, ids.len(), "each object is in exactly one pack");
    // Bytes in hand stay bytes in hand.
    let owned = PackIndex::from_bytes(std::fs::read(&idxs[0]).expect("reads"), &idxs[0]);
    assert!(!owned.expect("validates").is_mapped());

    // One flipped byte, in the first entry's id: the checksum refuses the index.
    flip_byte(&idxs[0], 16 + 1024 + 5);
    let err = PackIndex::load(&idxs[0]).expect_err("a damaged index is refused");
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    let store = Store::open(&path, StoreOptions::default()).expect("reopens");
    store.refresh().expect("refreshes");
    let broken = store.broken_indexes();
    assert_eq!(broken.len(), 1);
    assert_eq!(broken[0].path, idxs[0]);
}

#[test]
fn an_empty_or_short_pack_index_is_refused_as_truncated() {
    let dir = temp();
    for len in [0, 100] {
        let p = dir.path().join(format!("{len}.idx"));
        std::fs::write(&p, vec![0u8; len]).expect("writes");
        let err = PackIndex::load(&p).expect_err("a short index is refused");
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
        assert!(err.to_string().contains("truncated"), "{err}");
    }
}
