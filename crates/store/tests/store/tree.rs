//! The tree encoding: fixed test vectors (also printed in `docs/FORMAT.md`), hostile trees
//! refused as CORRUPT, and properties over random input.

use crate::util::{kind, temp};
use cairn_store::{
    encode_sorted, Classify, EntryKind, ErrorKind, ObjectId, ObjectKind, OperationKind, Store,
    StoreOptions, Tree, TreeEntry, TreeId,
};
use proptest::prelude::*;
use std::path::Path;

const EMPTY_HEX: &str = "435452450100000000";
const EMPTY_ID: &str = "a8a265441f3f2deace920bcea298b374b6312ef9c9290605cec5b1d60f28a39b";

#[rustfmt::skip]
const ONE_FILE_HEX: &str = concat!(
    "43545245", "01", "01000000",                                         // "CTRE", v1, 1 entry
    "01", "a4810000", "0600000000000000",                                 // file, 0o100644, 6 bytes
    "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03", // sha256("hello\n")
    "0900", "68656c6c6f2e747874",                                         // 9, "hello.txt"
);
const ONE_FILE_ID: &str = "cab18ce72ca08e3b38d21e552bf321b0afe9b259a67de894c1d9d686d2d369a8";

#[rustfmt::skip]
const THREE_HEX: &str = concat!(
    "43545245", "01", "03000000",                                         // "CTRE", v1, 3 entries
    "03", "ed410000", "0600000000000000",                                 // dir, 0o040755, 6 bytes below
    "cab18ce72ca08e3b38d21e552bf321b0afe9b259a67de894c1d9d686d2d369a8", // the one-file tree
    "0300", "62696e",                                                     // 3, "bin"
    "01", "ed810000", "0000000000000000",                                 // file, 0o100755, 0 bytes
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", // sha256("")
    "0400", "636166e9",                                                   // 4, "caf\xe9" (Latin-1, not UTF-8)
    "02", "ffa10000", "0900000000000000",                                 // symlink, 0o120777, 9 bytes
    "734cad14909bedfafb5b273b6b0eb01fbfa639587d217f78ce9639bba41f4415", // sha256("hello.txt")
    "0400", "6c696e6b",                                                   // 4, "link"
);
const THREE_ID: &str = "81f7b276dd2a359a5a2916b10ba6952c5093c4c5e34a6340bf226af599b94d33";

fn origin() -> &'static Path {
    Path::new("<test>")
}

fn entry(name: &[u8], kind: EntryKind, mode: u32, size: u64, id: ObjectId) -> TreeEntry {
    TreeEntry {
        name: name.to_vec(),
        kind,
        mode,
        size,
        id,
    }
}

fn one_file_tree() -> Tree {
    Tree::new(vec![entry(
        b"hello.txt",
        EntryKind::File,
        0o100644,
        6,
        ObjectId::of(b"hello\n"),
    )])
    .expect("a valid tree")
}

fn three_entry_tree() -> Tree {
    // Given out of order: the tree sorts them by name bytes.
    Tree::new(vec![
        entry(
            b"link",
            EntryKind::Symlink,
            0o120777,
            9,
            ObjectId::of(b"hello.txt"),
        ),
        entry(b"caf\xe9", EntryKind::File, 0o100755, 0, ObjectId::of(b"")),
        entry(b"bin", EntryKind::Dir, 0o040755, 6, one_file_tree().id().0),
    ])
    .expect("a valid tree")
}

fn check_vector(tree: &Tree, hex: &str, id: &str) {
    assert_eq!(hex::encode(tree.encode()), hex);
    assert_eq!(tree.id().to_hex(), id);
    let bytes = hex::decode(hex).expect("hex");
    let id = TreeId::from_hex(id).expect("an id");
    assert_eq!(
        &Tree::decode(&bytes, Some(&id), origin()).expect("decodes"),
        tree
    );
}

#[test]
fn the_tree_test_vectors_are_the_ones_printed_in_docs_format_md() {
    use crate::util::doc_vector;
    assert_eq!(doc_vector("**The empty tree**"), EMPTY_HEX);
    assert_eq!(doc_vector("**One file**"), ONE_FILE_HEX);
    assert_eq!(
        doc_vector("**A directory, a non-UTF-8 file name"),
        THREE_HEX
    );
    let doc = crate::util::format_doc();
    for id in [EMPTY_ID, ONE_FILE_ID, THREE_ID] {
        assert!(doc.contains(id), "FORMAT.md does not give the id {id}");
    }
}

#[test]
fn the_empty_tree_encodes_to_its_test_vector() {
    check_vector(&Tree::new(Vec::new()).expect("valid"), EMPTY_HEX, EMPTY_ID);
}

#[test]
fn a_tree_with_one_file_encodes_to_its_test_vector() {
    check_vector(&one_file_tree(), ONE_FILE_HEX, ONE_FILE_ID);
}

#[test]
fn a_tree_with_a_dir_a_non_utf8_file_and_a_symlink_encodes_to_its_test_vector() {
    check_vector(&three_entry_tree(), THREE_HEX, THREE_ID);
}

// ---- hostile trees, encoded by hand (independently of `Tree::encode`) ----

struct Raw<'a> {
    kind: u8,
    mode: u32,
    size: u64,
    id: [u8; 32],
    name: &'a [u8],
}

fn file(name: &[u8]) -> Raw<'_> {
    Raw {
        kind: 1,
        mode: 0o100644,
        size: 1,
        id: [7; 32],
        name,
    }
}

fn encode_raw(count: u32, entries: &[Raw<'_>]) -> Vec<u8> {
    let mut out = b"CTRE\x01".to_vec();
    out.extend_from_slice(&count.to_le_bytes());
    for e in entries {
        out.push(e.kind);
        out.extend_from_slice(&e.mode.to_le_bytes());
        out.extend_from_slice(&e.size.to_le_bytes());
        out.extend_from_slice(&e.id);
        out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
        out.extend_from_slice(e.name);
    }
    out
}

fn raw(entries: &[Raw<'_>]) -> Vec<u8> {
    encode_raw(entries.len() as u32, entries)
}

/// Decodes `bytes`, which must be refused as CORRUPT with a message containing `why`.
fn assert_corrupt(bytes: &[u8], why: &str) {
    let err = Tree::decode(bytes, None, origin()).expect_err("a hostile tree must be refused");
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(
        err.to_string().contains(why),
        "'{err}' does not say '{why}'"
    );
}

#[test]
fn the_hand_encoder_of_these_tests_agrees_with_tree_encode() {
    let bytes = raw(&[file(b"a"), file(b"b")]);
    let tree = Tree::decode(&bytes, None, origin()).expect("a valid tree decodes");
    assert_eq!(tree.encode(), bytes);
}

#[test]
fn a_tree_with_an_empty_name_is_refused_as_corrupt() {
    assert_corrupt(&raw(&[file(b"")]), "empty name");
}

#[test]
fn a_tree_with_a_dot_or_dot_dot_name_is_refused_as_corrupt() {
    assert_corrupt(&raw(&[file(b".")]), "'.' or '..'");
    assert_corrupt(&raw(&[file(b"..")]), "'.' or '..'");
}

#[test]
fn a_tree_with_a_name_containing_a_slash_is_refused_as_corrupt() {
    assert_corrupt(&raw(&[file(b"../etc")]), "'/'");
    assert_corrupt(&raw(&[file(b"a/b")]), "'/'");
    assert_corrupt(&raw(&[file(b"/")]), "'/'");
}

#[test]
fn a_tree_with_a_name_containing_nul_is_refused_as_corrupt() {
    assert_corrupt(&raw(&[file(b"a\0b")]), "NUL");
}

#[test]
fn a_tree_with_a_name_longer_than_4096_bytes_is_refused_as_corrupt() {
    let long = vec![b'x'; 4097];
    assert_corrupt(&raw(&[file(&long)]), "longer than 4096");
    let longest = vec![b'x'; 4096];
    Tree::decode(&raw(&[file(&longest)]), None, origin()).expect("4096 bytes are allowed");
}

#[test]
fn a_tree_with_unsorted_entries_is_refused_as_corrupt() {
    assert_corrupt(&raw(&[file(b"b"), file(b"a")]), "not sorted");
    // Sorted by bytes, not by text: "B" (0x42) sorts before "a" (0x61), and "\xff" after "z".
    Tree::decode(
        &raw(&[file(b"B"), file(b"a"), file(b"z"), file(b"\xff")]),
        None,
        origin(),
    )
    .expect("byte order is the order");
    assert_corrupt(&raw(&[file(b"a"), file(b"B")]), "not sorted");
}

#[test]
fn a_tree_with_duplicate_names_is_refused_as_corrupt() {
    assert_corrupt(&raw(&[file(b"a"), file(b"a")]), "repeats");
}

#[test]
fn a_truncated_tree_is_refused_as_corrupt_at_every_length() {
    let bytes = hex::decode(THREE_HEX).expect("hex");
    for len in 0..bytes.len() {
        let err = Tree::decode(&bytes[..len], None, origin()).expect_err("truncated");
        assert_eq!(err.kind(), ErrorKind::Corrupt, "length {len}: {err}");
    }
}

#[test]
fn a_tree_with_trailing_bytes_is_refused_as_corrupt() {
    let mut bytes = hex::decode(ONE_FILE_HEX).expect("hex");
    bytes.push(0);
    assert_corrupt(&bytes, "trailing");
}

#[test]
fn a_tree_whose_bytes_do_not_hash_to_the_requested_id_is_refused_as_corrupt() {
    let bytes = hex::decode(ONE_FILE_HEX).expect("hex");
    let other = TreeId::from_hex(EMPTY_ID).expect("an id");
    let err = Tree::decode(&bytes, Some(&other), origin()).expect_err("wrong id");
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert!(err.to_string().contains("hash to"), "{err}");
}

#[test]
fn a_tree_with_an_unknown_kind_is_refused_as_corrupt() {
    for k in [0u8, 4, 255] {
        assert_corrupt(
            &raw(&[Raw {
                kind: k,
                ..file(b"a")
            }]),
            "unknown kind",
        );
    }
}

#[test]
fn a_tree_whose_mode_bits_do_not_match_the_kind_is_refused_as_corrupt() {
    let cases: [(u8, u32); 6] = [
        (1, 0o040755),  // a file with directory type bits
        (1, 0o000644),  // a file with no type bits
        (2, 0o100644),  // a symlink with regular-file type bits
        (3, 0o120777),  // a directory with symlink type bits
        (1, 0o060644),  // a block device: no kind a tree holds
        (1, 0o1100644), // bits above the file-type bits
    ];
    for (k, mode) in cases {
        assert_corrupt(
            &raw(&[Raw {
                kind: k,
                mode,
                ..file(b"a")
            }]),
            "does not fit",
        );
    }
}

#[test]
fn a_tree_with_an_absurd_entry_count_is_refused_as_corrupt_before_allocating() {
    assert_corrupt(&encode_raw(u32::MAX, &[]), "does not fit");
    assert_corrupt(&encode_raw(u32::MAX, &[file(b"a")]), "does not fit");
    // A count the bytes could hold, one above the entries present, is a truncation.
    let name = [b'a'; 60];
    assert_corrupt(&encode_raw(2, &[file(&name)]), "truncated at entry 1");
}

#[test]
fn a_tree_with_a_bad_magic_or_version_is_refused_as_corrupt() {
    let mut bytes = hex::decode(EMPTY_HEX).expect("hex");
    bytes[0] = b'X';
    assert_corrupt(&bytes, "magic");
    let mut bytes = hex::decode(EMPTY_HEX).expect("hex");
    bytes[4] = 2;
    assert_corrupt(&bytes, "version");
}

#[test]
fn tree_new_refuses_bad_names_duplicates_and_mismatched_modes_as_invalid_argument() {
    let id = ObjectId::of(b"");
    for name in [&b""[..], b".", b"..", b"a/b", b"a\0"] {
        let r = Tree::new(vec![entry(name, EntryKind::File, 0o100644, 0, id)]);
        assert_eq!(kind(r), ErrorKind::InvalidArgument, "{name:?}");
    }
    let dup = Tree::new(vec![
        entry(b"a", EntryKind::File, 0o100644, 0, id),
        entry(b"a", EntryKind::Dir, 0o040755, 0, id),
    ]);
    assert_eq!(kind(dup), ErrorKind::InvalidArgument);
    let bad_mode = Tree::new(vec![entry(b"a", EntryKind::Symlink, 0o100644, 0, id)]);
    assert_eq!(kind(bad_mode), ErrorKind::InvalidArgument);
}

/// What `encode_sorted` gives for `tree`'s entries, borrowed.
fn encoded_sorted(entries: &[TreeEntry]) -> cairn_store::Result<(Vec<u8>, u64)> {
    encode_sorted(entries.iter().map(TreeEntry::as_ref))
}

#[test]
fn encoding_sorted_entries_gives_the_test_vectors_and_the_total_size() {
    for (tree, hex) in [
        (Tree::new(Vec::new()).expect("valid"), EMPTY_HEX),
        (one_file_tree(), ONE_FILE_HEX),
        (three_entry_tree(), THREE_HEX),
    ] {
        let (bytes, size) = encoded_sorted(tree.entries()).expect("valid entries");
        assert_eq!(hex::encode(&bytes), hex);
        assert_eq!(size, tree.total_size());
    }
}

#[test]
fn encoding_sorted_entries_refuses_what_tree_new_refuses_and_entries_out_of_order() {
    let id = ObjectId::of(b"");
    for name in [&b""[..], b".", b"..", b"a/b", b"a\0"] {
        let r = encoded_sorted(&[entry(name, EntryKind::File, 0o100644, 0, id)]);
        assert_eq!(kind(r), ErrorKind::InvalidArgument, "{name:?}");
    }
    let dup = encoded_sorted(&[
        entry(b"a", EntryKind::File, 0o100644, 0, id),
        entry(b"a", EntryKind::Dir, 0o040755, 0, id),
    ]);
    assert_eq!(kind(dup), ErrorKind::InvalidArgument);
    let bad_mode = encoded_sorted(&[entry(b"a", EntryKind::Symlink, 0o100644, 0, id)]);
    assert_eq!(kind(bad_mode), ErrorKind::InvalidArgument);
    let unsorted = encoded_sorted(&[
        entry(b"b", EntryKind::File, 0o100644, 0, id),
        entry(b"a", EntryKind::File, 0o100644, 0, id),
    ]);
    let err = unsorted.expect_err("entries out of order");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("sorted"), "{err}");
}

#[test]
fn a_hostile_tree_written_into_a_store_is_refused_by_read_tree() {
    let dir = temp();
    let store = Store::open(dir.path().join("store"), StoreOptions::default()).expect("opens");
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("begins");
    let w = store.writer(&op);
    let hostile = [
        raw(&[file(b"b"), file(b"a")]),
        raw(&[file(b"..")]),
        raw(&[file(b"x/y")]),
        raw(&[Raw {
            kind: 2,
            ..file(b"a")
        }]),
    ];
    let ids: Vec<TreeId> = hostile
        .iter()
        .map(|b| TreeId(w.put(ObjectKind::Tree, b).expect("stored as bytes").id))
        .collect();
    w.commit().expect("commits");
    for id in &ids {
        // The object itself is intact: only its decoding is refused.
        assert!(store.read_object(&id.0).is_ok());
        let err = store.read_tree(id).expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
        let src: &dyn cairn_store::ObjectSource = &store;
        assert_eq!(
            src.tree(id).expect_err("refused").kind(),
            ErrorKind::Corrupt
        );
    }
}

// ---- properties ----

fn arb_name() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        any::<u8>().prop_filter("no / or NUL", |b| *b != b'/' && *b != 0),
        1..12,
    )
    .prop_filter("not . or ..", |n| n != b"." && n != b"..")
}

fn arb_entry() -> impl Strategy<Value = TreeEntry> {
    (
        arb_name(),
        prop_oneof![
            Just(EntryKind::File),
            Just(EntryKind::Symlink),
            Just(EntryKind::Dir)
        ],
        0u32..=0o7777,
        any::<u64>(),
        any::<[u8; 32]>(),
    )
        .prop_map(|(name, kind, perm, size, id)| TreeEntry {
            name,
            kind,
            mode: kind.type_bits() | perm,
            size,
            id: ObjectId(id),
        })
}

fn arb_tree() -> impl Strategy<Value = Tree> {
    prop::collection::vec(arb_entry(), 0..16).prop_map(|mut entries| {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries.dedup_by(|a, b| a.name == b.name);
        Tree::new(entries).expect("deduplicated, valid entries")
    })
}

proptest! {
    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = Tree::decode(&bytes, None, origin());
        // Behind a valid header too, so the entry decoder is reached.
        let mut framed = b"CTRE\x01".to_vec();
        framed.extend_from_slice(&bytes);
        if let Ok(t) = Tree::decode(&framed, None, origin()) {
            // Whatever decodes is canonical: it encodes back to the same bytes.
            prop_assert_eq!(t.encode(), framed);
        }
    }

    #[test]
    fn decoding_a_mutated_valid_tree_never_panics_and_accepts_only_canonical_bytes(
        tree in arb_tree(),
        pos in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = tree.encode();
        let i = pos.index(bytes.len());
        bytes[i] = byte;
        let keep = bytes.len() - cut.index(bytes.len() / 4 + 1);
        bytes.truncate(keep);
        if let Ok(t) = Tree::decode(&bytes, None, origin()) {
            prop_assert_eq!(t.encode(), bytes);
        }
    }

    #[test]
    fn encoding_a_random_trees_sorted_entries_gives_its_encoding(tree in arb_tree()) {
        let (bytes, size) = encoded_sorted(tree.entries()).expect("a valid tree's entries");
        prop_assert_eq!(bytes, tree.encode());
        prop_assert_eq!(size, tree.total_size());
    }

    #[test]
    fn random_valid_trees_round_trip_through_encode_and_decode(tree in arb_tree()) {
        let bytes = tree.encode();
        let back = Tree::decode(&bytes, Some(&tree.id()), origin());
        prop_assert!(back.is_ok(), "{:?}", back);
        prop_assert_eq!(back.expect("checked"), tree);
    }
}
