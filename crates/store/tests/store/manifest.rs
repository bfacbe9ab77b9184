//! The manifest encoding: a test vector (also in `docs/FORMAT.md`) and refusals.

use crate::util::kind;
use cairn_store::{
    CaptureSettings, ErrorKind, Manifest, SkipReason, Skipped, SnapshotId, Stats, TreeId,
};
use std::path::Path;

#[rustfmt::skip]
const MANIFEST_HEX: &str = concat!(
    "434149524e4d414e", "01000000",                                       // "CAIRNMAN", version 1
    "cab18ce72ca08e3b38d21e552bf321b0afe9b259a67de894c1d9d686d2d369a8", // root: [u8; 32]
    "01", "02", "7631",                                                   // label: Some, len 2, "v1"
    "d00f",                                                               // created_ms 1000: zigzag 2000
    "02", "7773",                                                         // workspace_id "ws"
    "02", "2f77",                                                         // workspace_root b"/w"
    "02", "7b7d",                                                         // metadata "{}"
    "01", "05", "2a2e6c6f67", "ac02", "01", "00",                         // capture: ["*.log"], 300, true, false
    "01", "07", "6269672e62696e", "00", "00",                             // skipped: [(b"big.bin", too-large, false)]
    "01", "01", "00", "06", "01", "00", "c801", "02", "00",               // stats: 1, 1, 0, 6, 1, 0, 200, 2, 0
    "01",                                                                 // protected: true
);
const MANIFEST_ID: &str = "376fc41171449a76c3f26b72cd99b977b2e4d8de1ffe435fdf6d0d9268b4141d";

fn vector_manifest() -> Manifest {
    Manifest {
        root: TreeId::from_hex("cab18ce72ca08e3b38d21e552bf321b0afe9b259a67de894c1d9d686d2d369a8")
            .expect("an id"),
        label: Some("v1".into()),
        created_ms: 1000,
        workspace_id: "ws".into(),
        workspace_root: b"/w".to_vec(),
        metadata: "{}".into(),
        capture: CaptureSettings {
            excludes: vec!["*.log".into()],
            max_file_bytes: 300,
            gitignore: true,
            refuse_hard_links: false,
        },
        skipped: vec![Skipped {
            path: b"big.bin".to_vec(),
            reason: SkipReason::TooLarge,
            is_dir: false,
        }],
        stats: Stats {
            files: 1,
            dirs: 1,
            symlinks: 0,
            bytes: 6,
            hashed: 1,
            reused: 0,
            stored_bytes: 200,
            stored_objects: 2,
            duration_ms: 0,
        },
        protected: true,
    }
}

fn origin() -> &'static Path {
    Path::new("<test>")
}

#[test]
fn a_manifest_encodes_to_its_test_vector() {
    let m = vector_manifest();
    let bytes = m.encode().expect("encodes");
    assert_eq!(hex::encode(&bytes), MANIFEST_HEX);
    let id = Manifest::id_of(&bytes);
    assert_eq!(id.to_hex(), MANIFEST_ID);
    assert_eq!(
        Manifest::decode(&bytes, Some(&id), origin()).expect("decodes"),
        m
    );
}

#[test]
fn the_manifest_test_vector_is_the_one_printed_in_docs_format_md() {
    assert_eq!(
        crate::util::doc_vector("Asserted by `crates/store/tests/store/manifest.rs`"),
        MANIFEST_HEX
    );
    let doc = crate::util::format_doc();
    assert!(doc.contains(MANIFEST_ID));
}

#[test]
fn a_damaged_manifest_is_refused_as_corrupt() {
    let bytes = hex::decode(MANIFEST_HEX).expect("hex");
    for len in 0..bytes.len() {
        assert_eq!(
            kind(Manifest::decode(&bytes[..len], None, origin())),
            ErrorKind::Corrupt,
            "truncated to {len}"
        );
    }
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert_eq!(
        kind(Manifest::decode(&trailing, None, origin())),
        ErrorKind::Corrupt
    );
    let other = SnapshotId::from_hex(&"00".repeat(32)).expect("an id");
    assert_eq!(
        kind(Manifest::decode(&bytes, Some(&other), origin())),
        ErrorKind::Corrupt
    );
    let mut magic = bytes.clone();
    magic[0] = b'X';
    assert_eq!(
        kind(Manifest::decode(&magic, None, origin())),
        ErrorKind::Corrupt
    );
}

#[test]
fn a_manifest_of_a_newer_version_is_unsupported() {
    let mut bytes = hex::decode(MANIFEST_HEX).expect("hex");
    bytes[8] = 2;
    assert_eq!(
        kind(Manifest::decode(&bytes, None, origin())),
        ErrorKind::Unsupported
    );
}
