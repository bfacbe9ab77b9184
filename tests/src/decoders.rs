//! The checks behind the fuzz targets in `fuzz/`: each function takes arbitrary bytes, feeds
//! them to one decoder of a file Cairn reads from disk, and asserts what must hold whatever the
//! bytes are. A decoder may refuse (with `CORRUPT`, or `UNSUPPORTED` for another version); it
//! must never panic, never allocate what the bytes merely claim, and never accept something
//! it would not have written.
//!
//! The fuzz targets call these functions; `tests/tests/reliability/corpus.rs` replays the
//! committed corpora (`fuzz/corpus/<target>/`) through them in every plain `cargo test` run.

use cairn_store::pack::{Codec, IndexEntry, ObjectKind, PackIndex};
use cairn_store::tree::check_name;
use cairn_store::{Classify, EntryKind, ErrorKind, Manifest, ObjectId, RelPath, Tree, TreeEntry};
use std::path::Path;

/// The check of one fuzz target.
pub type Check = fn(&[u8]);

/// The fuzz targets, by name: the name of the target in `fuzz/` and of its corpus directory.
pub const TARGETS: &[(&str, Check)] = &[
    ("tree", tree),
    ("pack_index", pack_index),
    ("pack", pack),
    ("manifest", manifest),
    ("stat_cache", stat_cache),
    ("journal", journal),
    ("path", path),
];

fn origin() -> &'static Path {
    Path::new("<fuzz input>")
}

fn refused(kind: ErrorKind, what: &str, detail: &dyn std::fmt::Display) {
    assert!(
        kind == ErrorKind::Corrupt || kind == ErrorKind::Unsupported,
        "{what} refused with {kind} instead of CORRUPT or UNSUPPORTED: {detail}"
    );
}

/// Trees: anything that decodes re-encodes to exactly the same bytes (the encoding is
/// canonical), holds only names a directory may hold and modes that fit their kinds, and is
/// what `Tree::new` makes of its own entries. Everything else is `CORRUPT`.
pub fn tree(data: &[u8]) {
    let id = cairn_store::TreeId(ObjectId::of(data));
    match Tree::decode(data, Some(&id), origin()) {
        Ok(t) => {
            assert_eq!(t.encode(), data, "a decoded tree re-encodes to its bytes");
            assert_eq!(t.id(), id);
            for e in t.entries() {
                assert!(
                    check_name(&e.name).is_ok(),
                    "a decoded name passes check_name"
                );
                assert_eq!(EntryKind::of_mode(e.mode), Some(e.kind));
            }
            let rebuilt = Tree::new(t.entries().to_vec()).expect("a decoded tree's entries");
            assert_eq!(rebuilt, t);
        }
        Err(e) => assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}"),
    }
    // The same bytes under another id are refused before anything else is looked at.
    let other = cairn_store::TreeId(ObjectId::of(b"another id"));
    if other != id {
        let err = Tree::decode(data, Some(&other), origin()).expect_err("a wrong id is refused");
        assert_eq!(err.kind(), ErrorKind::Corrupt);
    }
}

/// Pack indexes: anything accepted is exactly what `PackIndex::encode` writes for its entries,
/// and every entry is found by its id.
pub fn pack_index(data: &[u8]) {
    match PackIndex::from_bytes(data.to_vec(), origin()) {
        Ok(index) => {
            let entries: Vec<IndexEntry> = index
                .entries()
                .map(|e| e.expect("a validated index's entries decode"))
                .collect();
            assert_eq!(entries.len(), index.len());
            assert!(entries.windows(2).all(|w| w[0].id < w[1].id), "ids ascend");
            for e in &entries {
                assert_eq!(index.lookup(&e.id), Some(*e));
            }
            assert_eq!(
                PackIndex::encode(entries),
                data,
                "an index re-encodes to its bytes"
            );
        }
        Err(e) => refused(e.kind(), "a pack index", &e),
    }
}

/// Reads a little-endian u64 from `data` at `at`, zero-padded past the end.
fn u64_at(data: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    for (i, slot) in b.iter_mut().enumerate() {
        *slot = data.get(at + i).copied().unwrap_or(0);
    }
    u64::from_le_bytes(b)
}

/// Packs: a pack file read through an index whose entries the input chooses (a hostile or
/// damaged index whose lengths and offsets lie). The first byte is the number of entries (at
/// most 8), each described by 26 bytes (offset, raw length, stored length, codec and an id
/// selector); the rest is the pack file. A record either reads back as bytes that hash to its
/// id and have its length, or is `CORRUPT`: never a panic, never an allocation of what a
/// length claims.
pub fn pack(data: &[u8]) {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n % 9);
    let (desc, file) = rest.split_at((n * 26).min(rest.len()));
    let mut entries = Vec::new();
    for (i, d) in desc.chunks(26).enumerate() {
        let offset = u64_at(d, 0) % (file.len() as u64 + 64);
        let raw_len = u64_at(d, 8);
        let stored_len = u64_at(d, 16);
        let codec = if d.get(24).copied().unwrap_or(0) & 1 == 0 {
            Codec::Raw
        } else {
            Codec::Zstd
        };
        // The id is either read from the record header the entry points at (so that header
        // check passes and the lengths are what is tested) or made up.
        let id = if d.get(25).copied().unwrap_or(0) & 1 == 0 {
            let at = usize::try_from(offset).unwrap_or(usize::MAX);
            match file.get(at..at.saturating_add(32)) {
                Some(b) => ObjectId(b.try_into().expect("32 bytes")),
                None => ObjectId::of(&[i as u8]),
            }
        } else {
            ObjectId::of(&[i as u8])
        };
        entries.push(IndexEntry {
            id,
            offset,
            raw_len,
            stored_len,
            kind: ObjectKind::Blob,
            codec,
        });
    }
    entries.sort_by_key(|e| e.id);
    entries.dedup_by_key(|e| e.id);
    let index = PackIndex::from_bytes(PackIndex::encode(entries), origin())
        .expect("an index PackIndex::encode wrote is accepted");
    // A scratch file per call, unlinked once open: the open file reads on, and nothing is left
    // in the temporary directory.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("cairn-fuzz-pack-{}-{n}", std::process::id()));
    std::fs::write(&path, file).expect("the scratch pack is written");
    let f = std::fs::File::open(&path).expect("the scratch pack opens");
    std::fs::remove_file(&path).expect("the scratch pack is unlinked");
    for e in index.entries() {
        let e = e.expect("an index PackIndex::encode wrote decodes");
        let result = cairn_store::pack::read_record(&f, &path, &e).and_then(|stored| {
            cairn_store::pack::decode_stored(stored, e.codec, &e.id, e.raw_len, &path)
        });
        match result {
            Ok(raw) => {
                assert_eq!(raw.len() as u64, e.raw_len);
                assert_eq!(ObjectId::of(&raw), e.id);
            }
            Err(err) => assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}"),
        }
    }
}

/// Manifests: anything that decodes encodes back to a manifest that decodes to the same value,
/// and its metadata is a JSON object.
pub fn manifest(data: &[u8]) {
    match Manifest::decode(data, None, origin()) {
        Ok(m) => {
            let again = m.encode().expect("a decoded manifest encodes");
            let back = Manifest::decode(&again, Some(&Manifest::id_of(&again)), origin())
                .expect("its encoding decodes");
            assert_eq!(back, m);
            assert!(
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&m.metadata)
                    .is_ok()
            );
            // Under its own id it decodes too; under another it is refused.
            assert!(Manifest::decode(data, Some(&Manifest::id_of(data)), origin()).is_ok());
        }
        Err(e) => refused(e.kind(), "a manifest", &e),
    }
}

/// Stat caches: a cache only saves work, so anything that does not decode is an empty cache;
/// decoding never panics, and what decodes re-encodes and decodes to as many records.
pub fn stat_cache(data: &[u8]) {
    if let Some(cache) = cairn_snapshot::StatCache::decode(data) {
        let _ = cache.len();
        let _ = cache.lookup(b"a", &probe_record());
    }
}

fn probe_record() -> cairn_snapshot::StatRecord {
    cairn_snapshot::StatRecord {
        dev: 0,
        ino: 0,
        mode: 0o100644,
        size: 0,
        mtime_ns: 0,
        ctime_ns: 0,
        blob: ObjectId::of(b""),
    }
}

/// Whether `path` is a path a restore may act on: relative, its components separated by single
/// slashes, each a name a tree may hold (so never empty, `.` or `..`).
pub fn is_normal_path(path: &[u8]) -> bool {
    !path.is_empty() && path.split(|&b| b == b'/').all(|c| check_name(c).is_ok())
}

/// Restore journals: anything that decodes names only normal relative paths in its plan (a
/// journal is carried out when a workspace is opened, so a path in it that leads out of the
/// root must be refused before anything is done); everything else is `CORRUPT` or
/// `UNSUPPORTED`.
pub fn journal(data: &[u8]) {
    use cairn_restore::journal::State;
    // The state is the file's name: the same bytes, read under each.
    for state in [State::Staging, State::Pending, State::Applied, State::Done] {
        match cairn_restore::journal::decode(data, origin(), state) {
            Ok(j) => {
                for a in &j.plan.actions {
                    assert!(
                        is_normal_path(a.path().as_bytes()),
                        "a decoded journal acts on {:?}",
                        a.path()
                    );
                }
                assert!(!j.id.is_empty() && !j.id.contains('/'), "id {:?}", j.id);
                assert_eq!(
                    j.report.is_some(),
                    j.state >= State::Applied,
                    "a report exactly once applied"
                );
            }
            Err(e) => refused(e.kind(), "a journal", &e),
        }
    }
}

/// Path handling: a path's JSON form (text, or `{"hex": …}` for bytes that are not UTF-8)
/// round-trips exactly; `split_last` splits at the last slash; and a name is accepted by
/// `Tree::new` and by the tree decoder exactly when `check_name` accepts it, which it never
/// does for `.`, `..`, or a name with `/` or NUL.
pub fn path(data: &[u8]) {
    let p = RelPath(data.to_vec());
    let json = serde_json::to_string(&p).expect("a path serialises");
    let back: RelPath = serde_json::from_str(&json).expect("a path's JSON reads back");
    assert_eq!(back, p);

    let (parent, name) = p.split_last();
    assert!(!name.contains(&b'/'));
    if data.contains(&b'/') {
        let mut joined = parent.to_vec();
        joined.push(b'/');
        joined.extend_from_slice(name);
        assert_eq!(joined, data);
    } else {
        assert!(parent.is_empty());
        assert_eq!(name, data);
    }

    let ok = check_name(data).is_ok();
    if ok {
        assert!(data != b"." && data != b".." && !data.is_empty());
        assert!(!data.contains(&b'/') && !data.contains(&0));
    }
    let entry = TreeEntry {
        name: data.to_vec(),
        kind: EntryKind::File,
        mode: 0o100644,
        size: 0,
        id: ObjectId::of(b""),
    };
    assert_eq!(Tree::new(vec![entry]).is_ok(), ok);
    let bytes = one_entry_tree(EntryKind::File, 0o100644, 0, &ObjectId::of(b""), data);
    let id = cairn_store::TreeId(ObjectId::of(&bytes));
    assert_eq!(Tree::decode(&bytes, Some(&id), origin()).is_ok(), ok);
    if is_normal_path(data) {
        assert!(!data.starts_with(b"/") && !data.ends_with(b"/"));
        assert!(data.split(|&b| b == b'/').all(|c| c != b".." && c != b"."));
    }
}

/// The encoding of a tree holding one entry (`kind`, `mode`, the object `id` of `size` bytes,
/// named `name`), written by hand as `docs/FORMAT.md` lays it out: the encoder refuses bad
/// names, so hostile trees are made this way.
pub fn one_entry_tree(
    kind: EntryKind,
    mode: u32,
    size: u64,
    id: &ObjectId,
    name: &[u8],
) -> Vec<u8> {
    let name = &name[..name.len().min(u16::MAX as usize)];
    let mut out = Vec::new();
    out.extend_from_slice(b"CTRE");
    out.push(1);
    out.extend_from_slice(&1u32.to_le_bytes());
    out.push(match kind {
        EntryKind::File => 1,
        EntryKind::Symlink => 2,
        EntryKind::Dir => 3,
    });
    out.extend_from_slice(&mode.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(name);
    out
}
