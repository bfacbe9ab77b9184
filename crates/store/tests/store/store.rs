//! Objects and manifests on disk: round trips through packs and large files, both codecs,
//! manifests, and owner-only permissions whatever the umask.

use crate::util::{
    file_entry, files_ending, helper, helper_dir, kind, manifest, noise, open, options,
    pack_codecs, snapshot, temp, walk, write_unreachable,
};
use cairn_store::pack::Codec;
use cairn_store::{
    Compression, ErrorKind, Manifest, ObjectId, ObjectKind, OperationKind, Store, StoreOptions,
    Tree, TreeId,
};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn with_inline_max(n: u64) -> StoreOptions {
    let mut o = StoreOptions::default();
    o.inline_max_bytes = n;
    o
}

#[test]
fn small_blobs_and_a_tree_round_trip_through_one_pack() {
    let dir = temp();
    let store = open(dir.path());
    let blobs: Vec<Vec<u8>> = (0..100)
        .map(|i| format!("file {i}\n").into_bytes())
        .collect();
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("begins");
    let w = store.writer(&op);
    let mut entries = Vec::new();
    let mut ids = Vec::new();
    for (i, b) in blobs.iter().enumerate() {
        let put = w.put(ObjectKind::Blob, b).expect("stored");
        assert!(put.written);
        ids.push(put.id);
        entries.push(crate::util::file_entry(
            format!("f{i}").as_bytes(),
            put.id,
            put.size,
        ));
    }
    let tree = Tree::new(entries).expect("valid");
    let root = w.put_tree(&tree).expect("stored");
    let stats = w.commit().expect("commits");
    assert_eq!(
        (stats.objects, stats.packs, stats.large_objects),
        (101, 1, 0)
    );
    assert_eq!(files_ending(&store.layout().packs, ".pack").len(), 1);
    assert_eq!(files_ending(&store.layout().packs, ".idx").len(), 1);
    assert!(files_ending(&store.layout().large, "").is_empty());
    drop(op);

    // Read back through this handle and through a freshly opened one.
    let again = Store::open(store.path(), StoreOptions::default()).expect("reopens");
    for s in [&store, &again] {
        for (b, id) in blobs.iter().zip(&ids) {
            let (k, bytes) = s.read_object(id).expect("reads");
            assert_eq!((k, &bytes), (ObjectKind::Blob, b));
            assert_eq!(s.object_size(id), Some(b.len() as u64));
        }
        assert_eq!(s.read_tree(&root).expect("reads"), tree);
        assert_eq!(s.read_object(&root.0).expect("reads").0, ObjectKind::Tree);
    }

    // The same content again is deduplicated: no new pack.
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("begins");
    let w = store.writer(&op);
    for b in &blobs {
        assert!(!w.put(ObjectKind::Blob, b).expect("stored").written);
    }
    let stats = w.commit().expect("commits");
    assert_eq!(
        (stats.objects, stats.deduplicated, stats.packs),
        (0, 100, 0)
    );
    assert_eq!(files_ending(&store.layout().packs, ".pack").len(), 1);
}

#[test]
fn a_small_blob_another_process_stored_as_large_is_stored_again_in_a_pack_and_both_copies_serve() {
    // A process whose inline_max_bytes is 4 KiB stores a 10 KiB blob as a large file; one
    // with the default (1 MiB) puts the same bytes: its writer looks for them in the packs
    // only (no stat of objects/large/ per new object), so it writes a second copy, in a
    // pack. Reads, a collection and a verification all take the two copies in their stride.
    let dir = temp();
    let bytes = noise(7, 10 * 1024);
    let small_inline = Store::open(dir.path().join("store"), with_inline_max(4096)).expect("opens");
    let first = snapshot(&small_inline, &[("a", &bytes)], Some("large copy"), 1);
    assert_eq!(
        files_ending(&small_inline.layout().large, ""),
        [small_inline.layout().large_path(&first.blobs[0])]
    );
    let store = Store::open(dir.path().join("store"), StoreOptions::default()).expect("opens");
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("begins");
    let w = store.writer(&op);
    let put = w
        .put_blob_from(&mut &bytes[..], bytes.len() as u64)
        .expect("stored");
    assert_eq!(put.id, first.blobs[0]);
    assert!(put.written, "written again, into a pack");
    w.commit().expect("commits");
    drop(op);
    assert!(pack_codecs(&store).contains_key(&put.id));
    assert!(store.contains(&put.id));
    assert_eq!(store.read_object(&put.id).expect("reads").1, bytes);
    store
        .gc(&crate::util::no_grace())
        .expect("a collection runs");
    assert_eq!(store.read_object(&put.id).expect("reads").1, bytes);
    let report = store.verify().expect("verifies");
    assert!(
        report.bad_copies.is_empty() && report.corrupt.is_empty(),
        "{report:?}"
    );
}

#[test]
fn a_blob_larger_than_inline_max_bytes_is_streamed_into_objects_large() {
    let dir = temp();
    let store = Store::open(dir.path().join("store"), with_inline_max(4096)).expect("opens");
    let at_limit = noise(1, 4096);
    let above = noise(2, 4097);
    let big = noise(3, 700 * 1024);
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("begins");
    let w = store.writer(&op);
    let put_limit = w.put_blob_from(&mut &at_limit[..], 4096).expect("stored");
    let put_above = w.put_blob_from(&mut &above[..], 4097).expect("stored");
    // A size hint that lies low does not pull a large blob into memory or into a pack.
    let put_big = w.put_blob_from(&mut &big[..], 10).expect("stored");
    let stats = w.commit().expect("commits");
    assert_eq!((stats.objects, stats.large_objects, stats.packs), (3, 2, 1));

    let large = files_ending(&store.layout().large, "");
    let mut expected = vec![
        store.layout().large_path(&put_above.id),
        store.layout().large_path(&put_big.id),
    ];
    expected.sort();
    assert_eq!(large, expected);
    assert!(!large.contains(&store.layout().large_path(&put_limit.id)));
    assert_eq!(
        pack_codecs(&store).keys().collect::<Vec<_>>(),
        [&put_limit.id]
    );

    // The header: magic, version 1, kind blob, codec raw (noise does not shrink), length.
    let file = std::fs::read(store.layout().large_path(&put_big.id)).expect("reads");
    assert_eq!(&file[..8], b"CAIRNLRG");
    assert_eq!(file[8..12], 1u32.to_le_bytes());
    assert_eq!((file[12], file[13]), (1, 0));
    assert_eq!(file[16..24], (big.len() as u64).to_le_bytes());
    assert_eq!(&file[24..], &big[..]);

    for (put, bytes) in [(put_limit, &at_limit), (put_above, &above), (put_big, &big)] {
        let mut out = Vec::new();
        assert_eq!(
            store.copy_object_to(&put.id, &mut out).expect("streams"),
            bytes.len() as u64
        );
        assert_eq!(&out, bytes);
        assert_eq!(&store.read_object(&put.id).expect("reads").1, bytes);
        assert_eq!(store.object_size(&put.id), Some(bytes.len() as u64));
    }
}

#[test]
fn raw_and_zstd_codecs_store_the_same_ids_and_read_back_the_same_bytes() {
    let dir = temp();
    let mut zstd = options(Compression::Zstd { level: 3 });
    zstd.inline_max_bytes = 64 * 1024;
    let mut raw = options(Compression::None);
    raw.inline_max_bytes = 64 * 1024;
    let zs = Store::open(dir.path().join("zstd"), zstd).expect("opens");
    let rs = Store::open(dir.path().join("raw"), raw).expect("opens");
    let text = b"the quick brown fox jumps over the lazy dog\n".repeat(500);
    let random = noise(4, 20_000);
    let tiny = b"tiny".to_vec();
    let large_text = b"a large, compressible line of text\n".repeat(10_000);
    let mut ids = Vec::new();
    for store in [&zs, &rs] {
        let op = store
            .begin_operation(OperationKind::Write, &[])
            .expect("begins");
        let w = store.writer(&op);
        let got: Vec<ObjectId> = [&text, &random, &tiny, &large_text]
            .iter()
            .map(|b| {
                w.put_blob_from(&mut &b[..], b.len() as u64)
                    .expect("stored")
                    .id
            })
            .collect();
        w.commit().expect("commits");
        ids.push(got);
    }
    assert_eq!(ids[0], ids[1], "the codec is never part of an id");
    let [text_id, random_id, tiny_id, large_id] = ids[0][..] else {
        unreachable!("four ids")
    };
    assert_eq!(text_id, ObjectId::of(&text));

    let z = pack_codecs(&zs);
    assert_eq!(z[&text_id], Codec::Zstd);
    assert_eq!(
        z[&random_id],
        Codec::Raw,
        "what does not shrink is stored raw"
    );
    assert_eq!(
        z[&tiny_id],
        Codec::Raw,
        "objects under 64 bytes are not compressed"
    );
    assert!(pack_codecs(&rs).values().all(|c| *c == Codec::Raw));

    // Large objects record their codec in byte 13 of their header.
    let zl = std::fs::read(zs.layout().large_path(&large_id)).expect("reads");
    let rl = std::fs::read(rs.layout().large_path(&large_id)).expect("reads");
    assert_eq!((zl[13], rl[13]), (1, 0));
    assert!(
        zl.len() < large_text.len() / 4,
        "zstd shrank the large object"
    );
    assert_eq!(rl.len(), 24 + large_text.len());

    // The raw pack holds the text verbatim; the zstd pack does not, and is smaller.
    let pack =
        |s: &Store| std::fs::read(&files_ending(&s.layout().packs, ".pack")[0]).expect("reads");
    let (zp, rp) = (pack(&zs), pack(&rs));
    assert!(rp.windows(text.len()).any(|w| w == &text[..]));
    assert!(zp.len() < rp.len() - text.len() / 2);
    for s in [&zs, &rs] {
        for (id, bytes) in [
            (text_id, &text),
            (random_id, &random),
            (tiny_id, &tiny),
            (large_id, &large_text),
        ] {
            assert_eq!(&s.read_object(&id).expect("reads").1, bytes);
        }
    }
}

#[test]
fn a_manifest_round_trips_and_its_id_is_the_sha256_of_its_file() {
    let dir = temp();
    let store = open(dir.path());
    let s = snapshot(&store, &[("a", b"a\n")], Some("first"), 1_700_000_000_000);
    let mut m = manifest(s.root, Some("second"), 1_700_000_000_001);
    m.metadata = r#"{"message":"fix the build"}"#.into();
    m.protected = true;
    m.skipped.push(cairn_store::Skipped {
        path: b"target/\xff".to_vec(),
        reason: cairn_store::SkipReason::TooLarge,
        is_dir: true,
    });
    let op = store
        .begin_operation(OperationKind::Snapshot, &[])
        .expect("begins");
    let id = store.write_manifest(&op, &m).expect("written");
    drop(op);
    assert_eq!(store.read_manifest(&id).expect("reads"), m);
    let path = store.layout().manifest_path(&id);
    let bytes = std::fs::read(&path).expect("reads");
    assert_eq!(&bytes[..12], b"CAIRNMAN\x01\x00\x00\x00");
    assert_eq!(bytes, m.encode().expect("encodes"));
    assert_eq!(ObjectId::of(&bytes), id.0);
    let (list, bad) = store.list_snapshots().expect("lists");
    assert!(bad.is_empty());
    assert_eq!(list.iter().map(|e| e.id).collect::<Vec<_>>(), [s.id, id]);
}

#[test]
fn a_manifest_that_does_not_hash_to_its_name_is_refused_as_corrupt() {
    let dir = temp();
    let store = open(dir.path());
    let s = snapshot(&store, &[("a", b"a\n")], None, 1);
    let path = store.layout().manifest_path(&s.id);
    let mut bytes = std::fs::read(&path).expect("reads");
    *bytes.last_mut().expect("not empty") ^= 1;
    std::fs::write(&path, &bytes).expect("writes");
    assert_eq!(kind(store.read_manifest(&s.id)), ErrorKind::Corrupt);
    let (_, bad) = store.list_snapshots().expect("lists");
    assert_eq!(bad.len(), 1);
    // The same bytes under their own name decode, but not with a non-object metadata.
    assert!(Manifest::decode(&bytes, None, &path).is_ok());
    let mut m = store_manifest_of(&bytes);
    m.metadata = "[1]".into();
    let err = Manifest::decode(&m.encode().expect("encodes"), None, &path);
    assert_eq!(kind(err), ErrorKind::Corrupt);
}

fn store_manifest_of(bytes: &[u8]) -> Manifest {
    Manifest::decode(bytes, None, Path::new("<test>")).expect("decodes")
}

#[test]
fn a_manifest_whose_root_is_missing_is_refused_by_write_manifest() {
    let dir = temp();
    let store = open(dir.path());
    let op = store
        .begin_operation(OperationKind::Snapshot, &[])
        .expect("begins");
    let missing = TreeId(ObjectId::of(b"a tree nobody wrote"));
    let err = store.write_manifest(&op, &manifest(missing, None, 1));
    assert_eq!(kind(err), ErrorKind::Corrupt);
    assert!(store.snapshot_ids().expect("lists").is_empty());
    // An object written but not committed is not durable yet: refused too.
    let w = store.writer(&op);
    let root = w
        .put_tree(&Tree::new(Vec::new()).expect("valid"))
        .expect("stored");
    assert_eq!(
        kind(store.write_manifest(&op, &manifest(root, None, 1))),
        ErrorKind::Corrupt
    );
    w.commit().expect("commits");
    store
        .write_manifest(&op, &manifest(root, None, 1))
        .expect("now it is written");
}

#[test]
fn a_manifest_committed_with_its_objects_names_them_all_and_leaves_no_temporary_file() {
    let dir = temp();
    let store = open(dir.path());
    let op = store
        .begin_operation(OperationKind::Snapshot, &[])
        .expect("begins");
    let tmp_files = || {
        std::fs::read_dir(&store.layout().tmp)
            .expect("lists")
            .count()
    };
    // Objects written by the writer: the pack and the manifest land together.
    let w = store.writer(&op);
    let blob = w.put(ObjectKind::Blob, b"hello\n").expect("stored").id;
    let tree = Tree::new(vec![file_entry(b"a", blob, 6)]).expect("valid");
    let root = w.put_tree(&tree).expect("stored");
    let m = manifest(root, Some("with its pack"), 1);
    let (stats, id) = w.commit_with_manifest(&op, &m).expect("committed");
    assert_eq!((stats.objects, stats.packs), (2, 1));
    assert_eq!(store.read_manifest(&id).expect("reads"), m);
    assert_eq!(store.read_tree(&root).expect("reads"), tree);
    assert_eq!(files_ending(&store.layout().packs, ".pack").len(), 1);
    assert_eq!(tmp_files(), 0);
    // Nothing new to write (the root is the store's already): the manifest alone.
    let w = store.writer(&op);
    assert_eq!(w.put_tree(&tree).expect("deduplicated"), root);
    let again = manifest(root, Some("no new object"), 2);
    let (stats, id2) = w.commit_with_manifest(&op, &again).expect("committed");
    assert_eq!((stats.objects, stats.packs), (0, 0));
    assert_eq!(store.read_manifest(&id2).expect("reads"), again);
    assert_eq!(files_ending(&store.layout().packs, ".pack").len(), 1);
    // A root that neither the writer nor the store holds: refused, and nothing is written.
    let w = store.writer(&op);
    let missing = TreeId(ObjectId::of(b"a tree nobody wrote"));
    let err = w.commit_with_manifest(&op, &manifest(missing, None, 3));
    assert_eq!(kind(err), ErrorKind::Corrupt);
    assert_eq!(store.snapshot_ids().expect("lists").len(), 2);
    assert_eq!(tmp_files(), 0);
}

#[test]
fn a_store_directory_replaced_by_a_symlink_is_refused_when_opening() {
    let dir = temp();
    let root = dir.path().join("store");
    drop(Store::open(&root, StoreOptions::default()).expect("opens"));
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).expect("mkdir");
    for sub in [
        "objects/packs",
        "objects/large",
        "snapshots",
        "locks",
        "tmp",
        "objects",
    ] {
        let d = root.join(sub);
        let aside = dir.path().join("aside");
        std::fs::rename(&d, &aside).expect("moved aside");
        std::os::unix::fs::symlink(&outside, &d).expect("symlink");
        let err = Store::open(&root, StoreOptions::default()).expect_err(sub);
        assert_eq!(
            cairn_store::Classify::kind(&err),
            ErrorKind::Corrupt,
            "{sub}: {err}"
        );
        std::fs::remove_file(&d).expect("unlink");
        std::fs::rename(&aside, &d).expect("moved back");
    }
    assert_eq!(std::fs::read_dir(&outside).expect("lists").count(), 0);
    // The store's own directory as a symlink is refused too.
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&root, &link).expect("symlink");
    assert_eq!(
        kind(Store::open(&link, StoreOptions::default())),
        ErrorKind::Corrupt
    );
}

#[test]
fn opening_a_missing_store_without_create_is_not_found() {
    let dir = temp();
    let mut o = StoreOptions::default();
    o.create = false;
    assert_eq!(
        kind(Store::open(dir.path().join("none"), o)),
        ErrorKind::NotFound
    );
}

/// The child side of the umask test: writes a store under `umask 000`.
#[test]
#[ignore = "a helper: run by every_store_file_is_owner_only_under_umask_000 in a child process"]
fn helper_writes_a_store_under_umask_000() {
    let Some(dir) = helper_dir() else { return };
    rustix::process::umask(rustix::fs::Mode::empty());
    // A control file, created with the usual 0666: it shows the umask was 000.
    std::fs::write(dir.join("control"), b"umask 000").expect("writes");
    let store = Store::open(dir.join("store"), with_inline_max(4096)).expect("opens");
    let big = noise(5, 10_000);
    snapshot(
        &store,
        &[("small", b"small\n"), ("big", &big)],
        Some("perm"),
        1,
    );
    store.workspace_dir("ws").expect("a workspace directory");
    // A collection creates gc.lock.
    store
        .gc(&cairn_store::gc::GcOptions::default())
        .expect("collects");
    // A damaged copy, found by verify, puts its id in objects/quarantine.
    let before = files_ending(&store.layout().packs, ".pack");
    write_unreachable(&store, &[&noise(6, 1000)]);
    let new_pack = files_ending(&store.layout().packs, ".pack")
        .into_iter()
        .find(|p| !before.contains(p))
        .expect("a new pack");
    crate::verify::flip_byte(&new_pack, 100);
    assert!(!store.verify().expect("verifies").is_ok());
    assert!(store.layout().quarantine().exists());
    // A marker is left behind, as a crash would leave it.
    std::mem::forget(
        store
            .begin_operation(OperationKind::Snapshot, &[])
            .expect("begins"),
    );
}

#[test]
fn every_store_file_is_owner_only_under_umask_000() {
    let dir = temp();
    let status = helper("store::helper_writes_a_store_under_umask_000", dir.path())
        .status()
        .expect("the helper runs");
    assert!(status.success(), "the helper failed: {status}");
    let mode = |p: &Path| {
        std::fs::symlink_metadata(p)
            .expect("lstat")
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(
        mode(&dir.path().join("control")),
        0o666,
        "the umask was not 000"
    );

    let store = dir.path().join("store");
    let entries = walk(&store);
    let names: Vec<String> = entries
        .iter()
        .map(|(p, _)| {
            p.strip_prefix(&store)
                .expect("below")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    for expect in [
        "objects/quarantine",
        "locks/gc.lock",
        "workspaces/ws",
        "snapshots",
    ] {
        assert!(
            names.iter().any(|n| n == expect),
            "{expect} missing from {names:?}"
        );
    }
    for suffix in [".pack", ".idx", ".marker"] {
        assert!(
            names.iter().any(|n| n.ends_with(suffix)),
            "no {suffix} in {names:?}"
        );
    }
    assert!(
        names.iter().any(|n| n.starts_with("objects/large/")),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n.starts_with("snapshots/")),
        "{names:?}"
    );
    for (path, meta) in &entries {
        let m = meta.permissions().mode() & 0o7777;
        if meta.is_dir() {
            assert_eq!(m, 0o700, "{} is {m:o}", path.display());
        } else {
            assert!(
                meta.is_file(),
                "{} is neither file nor directory",
                path.display()
            );
            assert_eq!(m, 0o600, "{} is {m:o}", path.display());
        }
    }
}

#[test]
fn a_pack_of_one_blob_and_its_index_have_the_documented_bytes() {
    let dir = temp();
    let store = open(dir.path());
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("begins");
    let w = store.writer(&op);
    let id = w.put(ObjectKind::Blob, b"hello\n").expect("stored").id;
    w.commit().expect("commits");

    // The pack: header, then one record (header and the bytes, raw: under 64 bytes).
    let mut pack = b"CAIRNPAK".to_vec();
    pack.extend_from_slice(&1u32.to_le_bytes()); // version
    pack.extend_from_slice(&0u32.to_le_bytes()); // reserved
    pack.extend_from_slice(id.as_bytes());
    pack.extend_from_slice(&[1, 0, 0, 0]); // kind blob, codec raw, two zero bytes
    pack.extend_from_slice(&6u64.to_le_bytes()); // raw length
    pack.extend_from_slice(&6u64.to_le_bytes()); // stored length
    pack.extend_from_slice(b"hello\n");
    assert_eq!(
        crate::util::doc_vector("a pack holding only the blob"),
        hex::encode(&pack),
        "the example in docs/FORMAT.md"
    );
    let pack_id = ObjectId::of(&pack);
    let pack_path = store.layout().packs.join(format!("{pack_id}.pack"));
    assert_eq!(
        std::fs::read(&pack_path).expect("the pack is named by its hash"),
        pack
    );

    // The index: header, fan-out, one entry, checksum.
    let mut idx = b"CAIRNIDX".to_vec();
    idx.extend_from_slice(&1u32.to_le_bytes()); // version
    idx.extend_from_slice(&1u32.to_le_bytes()); // count
    for b in 0..=255u8 {
        let n: u32 = if b >= id.0[0] { 1 } else { 0 };
        idx.extend_from_slice(&n.to_le_bytes());
    }
    idx.extend_from_slice(id.as_bytes());
    idx.extend_from_slice(&16u64.to_le_bytes()); // offset of the record
    idx.extend_from_slice(&6u64.to_le_bytes()); // raw length
    idx.extend_from_slice(&6u64.to_le_bytes()); // stored length
    idx.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]); // kind, codec, six zero bytes
    let sum = ObjectId::of(&idx);
    idx.extend_from_slice(sum.as_bytes());
    assert_eq!(idx.len(), 16 + 1024 + 64 + 32);
    let idx_path = store.layout().packs.join(format!("{pack_id}.idx"));
    assert_eq!(std::fs::read(&idx_path).expect("reads"), idx);
}

/// A reader or writer that fails every call with `errno`.
struct Failing(i32);

impl std::io::Read for Failing {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        Err(std::io::Error::from_raw_os_error(self.0))
    }
}

impl std::io::Write for Failing {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::Error::from_raw_os_error(self.0))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failing_reader_or_writer_is_named_by_the_caller_never_by_a_placeholder() {
    // Issue 34.6: a full disk while staging said "write <output>", a file answering EAGAIN
    // "read <input>". The store reports the caller's stream as such; `at` names it.
    use cairn_store::Classify;
    let dir = temp();
    let store = Store::open(dir.path().join("store"), with_inline_max(4096)).expect("opens");
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("begins");
    let w = store.writer(&op);
    let small = w.put_blob_from(&mut &b"small"[..], 5).expect("stored");
    let big = noise(4, 9000);
    let large = w.put_blob_from(&mut &big[..], 9000).expect("stored");
    w.commit().expect("commits");
    let named = std::path::Path::new("/work/project/src/main.rs");
    for hint in [10, 100_000] {
        let w = store.writer(&op);
        let e = w
            .put_blob_from(&mut Failing(libc_eagain()), hint)
            .expect_err("the reader fails");
        assert!(!e.to_string().contains("<input>"), "{e}");
        assert!(matches!(e.kind(), ErrorKind::Io | ErrorKind::Busy), "{e}");
        let e = e.at(named);
        assert!(e.to_string().contains("/work/project/src/main.rs"), "{e}");
    }
    for id in [small.id, large.id] {
        let e = store
            .copy_object_to(&id, &mut Failing(28))
            .expect_err("the writer fails");
        assert!(!e.to_string().contains("<output>"), "{e}");
        let e = e.at(named);
        assert!(
            e.to_string().contains("/work/project/src/main.rs") && e.to_string().contains("space"),
            "{e}"
        );
    }
}

/// EAGAIN's number on Linux.
fn libc_eagain() -> i32 {
    11
}
