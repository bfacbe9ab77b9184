//! Hostile pack indexes: lengths that lie are CORRUPT, never an allocation abort.

use cairn_store::pack::{Codec, IndexEntry, ObjectKind, PackIndex, PACK_MAGIC, PACK_VERSION};
use cairn_store::{Classify, ErrorKind, ObjectId, Store, StoreOptions};

fn plant(store: &Store, entry: IndexEntry, body: &[u8]) {
    let mut pack = Vec::new();
    pack.extend_from_slice(PACK_MAGIC);
    pack.extend_from_slice(&PACK_VERSION.to_le_bytes());
    pack.extend_from_slice(&0u32.to_le_bytes());
    pack.extend_from_slice(body);
    let name = ObjectId::of(&pack).to_hex();
    let dir = &store.layout().packs;
    std::fs::write(dir.join(format!("{name}.pack")), &pack).expect("pack");
    std::fs::write(
        dir.join(format!("{name}.idx")),
        PackIndex::encode(vec![entry]),
    )
    .expect("idx");
    store.refresh().expect("refresh");
}

#[test]
fn an_index_claiming_a_huge_stored_length_is_corrupt_not_an_abort() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = Store::open(dir.path().join("s"), StoreOptions::default()).expect("store");
    let id = ObjectId::of(b"anything");
    let mut header = [0u8; 52];
    header[..32].copy_from_slice(id.as_bytes());
    header[32] = 1;
    header[36..44].copy_from_slice(&(1u64 << 40).to_le_bytes());
    header[44..52].copy_from_slice(&(1u64 << 40).to_le_bytes());
    plant(
        &store,
        IndexEntry {
            id,
            offset: 16,
            raw_len: 1 << 40,
            stored_len: 1 << 40,
            kind: ObjectKind::Blob,
            codec: Codec::Raw,
        },
        &header,
    );
    let err = store.read_object(&id).expect_err("corrupt");
    assert_eq!(err.kind(), ErrorKind::Corrupt);
}

#[test]
fn a_zstd_record_claiming_a_huge_raw_length_is_corrupt_not_an_abort() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = Store::open(dir.path().join("s"), StoreOptions::default()).expect("store");
    let content = b"hello hello hello hello hello hello hello hello hello hello".repeat(4);
    let id = ObjectId::of(&content);
    let frame = zstd::bulk::compress(&content, 3).expect("compress");
    let claimed = 1u64 << 50;
    let mut body = vec![0u8; 52];
    body[..32].copy_from_slice(id.as_bytes());
    body[32] = 1;
    body[33] = 1;
    body[36..44].copy_from_slice(&claimed.to_le_bytes());
    body[44..52].copy_from_slice(&(frame.len() as u64).to_le_bytes());
    body.extend_from_slice(&frame);
    plant(
        &store,
        IndexEntry {
            id,
            offset: 16,
            raw_len: claimed,
            stored_len: frame.len() as u64,
            kind: ObjectKind::Blob,
            codec: Codec::Zstd,
        },
        &body,
    );
    let err = store.read_object(&id).expect_err("corrupt");
    assert_eq!(err.kind(), ErrorKind::Corrupt);
}
