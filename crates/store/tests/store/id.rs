//! Ids: a blob's id is what `sha256sum` prints; snapshots are named by id, prefix or label.

use crate::util::{kind, manifest, noise, open, snapshot, temp};
use cairn_store::{ErrorKind, Manifest, ObjectId, OperationKind, SnapshotId, Store, StoreOptions};
use std::process::Command;

fn sha256sum(path: &std::path::Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum runs");
    assert!(out.status.success(), "sha256sum failed: {out:?}");
    let text = String::from_utf8(out.stdout).expect("sha256sum prints text");
    text.split_whitespace()
        .next()
        .expect("sha256sum prints a digest")
        .to_string()
}

#[test]
fn a_blob_id_equals_what_sha256sum_prints_for_the_file() {
    let dir = temp();
    let mut o = StoreOptions::default();
    o.inline_max_bytes = 64 * 1024;
    let store = Store::open(dir.path().join("store"), o).expect("opens");
    let small = noise(1, 1000);
    let large = noise(2, 300 * 1024); // above inline_max_bytes: streamed into objects/large
    let text = b"hello\n".repeat(5000); // compressible: stored with zstd
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("begins");
    let w = store.writer(&op);
    for (i, bytes) in [&small[..], &large, &text, b""].into_iter().enumerate() {
        let file = dir.path().join(format!("file-{i}"));
        std::fs::write(&file, bytes).expect("the file is written");
        let mut f = std::fs::File::open(&file).expect("the file opens");
        let put = w.put_blob_from(&mut f, bytes.len() as u64).expect("stored");
        assert_eq!(put.id.to_hex(), sha256sum(&file), "file {i}");
        assert_eq!(put.size, bytes.len() as u64);
    }
    w.commit().expect("commits");
    assert_eq!(
        crate::util::files_ending(&store.layout().large, "").len(),
        1,
        "the large blob has a file of its own"
    );
}

#[test]
fn a_pack_is_named_by_what_sha256sum_prints_for_it() {
    let dir = temp();
    let mut o = StoreOptions::default();
    o.inline_max_bytes = 64 * 1024;
    let store = Store::open(dir.path().join("store"), o).expect("opens");
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("begins");
    let w = store.writer(&op);
    // Several read-back chunks of 64 KiB and a piece of one: the name is hashed from the
    // file once written, while the syncs run.
    for seed in 0..5u64 {
        let bytes = noise(seed + 10, 60 * 1024 + seed as usize);
        w.put_blob_from(&mut &bytes[..], bytes.len() as u64)
            .expect("stored");
    }
    w.commit().expect("commits");
    let packs = crate::util::files_ending(&store.layout().packs, ".pack");
    assert_eq!(packs.len(), 1, "{packs:?}");
    for p in packs {
        let name = p.file_stem().and_then(|s| s.to_str()).expect("a hex name");
        assert_eq!(name, sha256sum(&p), "{}", p.display());
        assert!(std::fs::metadata(&p).expect("the pack").len() > 5 * 60 * 1024);
    }
}

/// Two manifests of `root` whose ids share their first four hex characters: found by
/// encoding manifests that differ only in `created_ms` (a few hundred tries, deterministic).
fn colliding_manifests(root: cairn_store::TreeId) -> (Manifest, Manifest) {
    let mut seen: std::collections::HashMap<String, Manifest> = Default::default();
    for t in 0i64.. {
        let m = manifest(root, None, 1_000 + t);
        let id = Manifest::id_of(&m.encode().expect("encodes"));
        let prefix = id.to_hex()[..4].to_string();
        if let Some(other) = seen.remove(&prefix) {
            return (other, m);
        }
        seen.insert(prefix, m);
    }
    unreachable!("the loop returns")
}

#[test]
fn a_unique_prefix_of_four_or_more_characters_resolves_a_snapshot() {
    let dir = temp();
    let store = open(dir.path());
    let a = snapshot(&store, &[("a", b"a")], None, 1);
    let b = snapshot(&store, &[("b", b"b")], None, 2);
    assert_ne!(
        a.id.to_hex()[..4],
        b.id.to_hex()[..4],
        "pick other contents"
    );
    for s in [&a, &b] {
        let hex = s.id.to_hex();
        assert_eq!(store.resolve(&hex).expect("the full id"), s.id);
        assert_eq!(store.resolve(&hex[..4]).expect("4 characters"), s.id);
        assert_eq!(store.resolve(&hex[..9]).expect("9 characters"), s.id);
        assert_eq!(
            store
                .resolve(&hex[..6].to_ascii_uppercase())
                .expect("upper case"),
            s.id
        );
    }
    // Three characters are too few to name anything.
    assert_eq!(
        kind(store.resolve(&a.id.to_hex()[..3])),
        ErrorKind::NotFound
    );
    assert_eq!(
        kind(cairn_store::id::resolve_prefix(
            &a.id.to_hex()[..3],
            "snapshot",
            [a.id.0]
        )),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn an_ambiguous_prefix_is_an_invalid_argument_listing_the_candidates() {
    let dir = temp();
    let store = open(dir.path());
    let base = snapshot(&store, &[("f", b"content")], None, 0);
    let (m1, m2) = colliding_manifests(base.root);
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("begins");
    let id1 = store.write_manifest(&op, &m1).expect("written");
    let id2 = store.write_manifest(&op, &m2).expect("written");
    drop(op);
    let prefix = &id1.to_hex()[..4];
    assert_eq!(prefix, &id2.to_hex()[..4]);
    let err = store.resolve(prefix).expect_err("ambiguous");
    assert_eq!(
        cairn_store::Classify::kind(&err),
        ErrorKind::InvalidArgument
    );
    let msg = err.to_string();
    assert!(msg.contains("ambiguous"), "{msg}");
    assert!(
        msg.contains(&id1.short()) && msg.contains(&id2.short()),
        "{msg}"
    );
    // A longer prefix tells them apart.
    let common = id1
        .to_hex()
        .chars()
        .zip(id2.to_hex().chars())
        .take_while(|(a, b)| a == b)
        .count();
    assert_eq!(
        store.resolve(&id1.to_hex()[..=common]).expect("unique"),
        id1
    );
    assert_eq!(
        store.resolve(&id2.to_hex()[..=common]).expect("unique"),
        id2
    );
}

#[test]
fn a_label_resolves_to_the_newest_snapshot_carrying_it() {
    let dir = temp();
    let store = open(dir.path());
    let old = snapshot(&store, &[("f", b"1")], Some("before-edit"), 100);
    let new = snapshot(&store, &[("f", b"2")], Some("before-edit"), 200);
    let other = snapshot(&store, &[("f", b"3")], Some("beef"), 300);
    assert_ne!(old.id, new.id);
    assert_eq!(store.resolve("before-edit").expect("resolves"), new.id);
    // A label that looks like hex but matches no id is still found as a label.
    if !other.id.to_hex().starts_with("beef") {
        assert_eq!(store.resolve("beef").expect("resolves"), other.id);
    }
    assert_eq!(kind(store.resolve("no-such-label")), ErrorKind::NotFound);
    assert_eq!(
        kind(store.resolve(&"0".repeat(64))),
        ErrorKind::NotFound,
        "an unknown full id"
    );
}

#[test]
fn ids_parse_and_print_as_64_hex_characters() {
    let id = ObjectId::of(b"hello\n");
    assert_eq!(
        id.to_hex(),
        "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
    );
    assert_eq!(ObjectId::from_hex(&id.to_hex()).expect("parses"), id);
    assert_eq!(id.short(), "5891b5b522d5");
    assert_eq!(kind(ObjectId::from_hex("5891")), ErrorKind::InvalidArgument);
    assert_eq!(
        kind(SnapshotId::from_hex(&"g".repeat(64))),
        ErrorKind::InvalidArgument
    );
}
