//! Pack indexes loaded from disk: a small one is held in memory, a large one keeps a key per
//! entry and reads its entries from the file; both are validated whole at load, and a large
//! one damaged after that answers "not there" or an error, never a wrong entry or a crash.

use crate::util::{files_ending, temp};
use crate::verify::flip_byte;
use cairn_store::pack::{Codec, IndexEntry, PackIndex, INDEX_ENTRY_LEN};
use cairn_store::{Classify, ErrorKind, ObjectId, ObjectKind, OperationKind, Store, StoreOptions};
use std::path::Path;

fn content(i: usize) -> Vec<u8> {
    format!("object {i} of the index read test\n").into_bytes()
}

/// An entry for `id`, its fields derived from `n` so that each entry differs.
fn entry(id: ObjectId, n: u64) -> IndexEntry {
    IndexEntry {
        id,
        offset: 16 + n * 100,
        raw_len: n,
        stored_len: n + 1,
        kind: if n % 3 == 0 {
            ObjectKind::Tree
        } else {
            ObjectKind::Blob
        },
        codec: if n % 2 == 0 { Codec::Zstd } else { Codec::Raw },
    }
}

/// Writes an index of `entries` to `path` and loads it both ways: from the file, and from
/// its bytes held in memory.
fn both(path: &Path, entries: Vec<IndexEntry>) -> (PackIndex, PackIndex) {
    let bytes = PackIndex::encode(entries);
    std::fs::write(path, &bytes).expect("writes");
    let loaded = PackIndex::load(path).expect("loads");
    let held = PackIndex::from_bytes(bytes, path).expect("validates");
    (loaded, held)
}

#[test]
fn a_large_pack_index_is_read_from_its_file_and_finds_every_object() {
    let dir = temp();
    let path = dir.path().join("store");
    let writing = Store::open(&path, StoreOptions::default()).expect("opens");
    let ids: Vec<_> = {
        let op = writing
            .begin_operation(OperationKind::Write, &[])
            .expect("begins");
        let writer = writing.writer(&op);
        let ids = (0..3000)
            .map(|i| writer.put(ObjectKind::Blob, &content(i)).expect("puts").id)
            .collect();
        writer.commit().expect("commits");
        ids
    };

    // The writing handle (which keeps the index it wrote, read from the file it installed)
    // and a new one (which loads it from disk) find every object.
    let store = Store::open(&path, StoreOptions::default()).expect("reopens");
    for s in [&writing, &store] {
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(
                s.read_object(id).expect("reads"),
                (ObjectKind::Blob, content(i))
            );
        }
        assert!(!s.contains(&ObjectId::of(b"never stored")));
    }
    assert!(store.broken_indexes().is_empty());

    let idxs = files_ending(&store.layout().packs, ".idx");
    assert_eq!(idxs.len(), 1, "one pack: {idxs:?}");
    let index = PackIndex::load(&idxs[0]).expect("loads");
    assert!(
        index.reads_from_file(),
        "192 KiB of entries stay in the file"
    );
    assert_eq!(index.len(), ids.len());
    // A key of 4 bytes per entry, not the entries' 64.
    assert!(
        index.held_bytes() <= ids.len() * 4 + 64,
        "{} bytes held",
        index.held_bytes()
    );
    for id in &ids {
        assert_eq!(index.lookup(id).map(|e| e.id), Some(*id));
    }
    let absent = ObjectId::of(b"never stored");
    assert_eq!(index.lookup(&absent), None);
    // Every entry, in id order, as the bytes held in memory give them.
    let held = PackIndex::from_bytes(std::fs::read(&idxs[0]).expect("reads"), &idxs[0])
        .expect("validates");
    assert!(!held.reads_from_file());
    let from_file: Vec<_> = index.entries().map(|e| e.expect("reads")).collect();
    let in_memory: Vec<_> = held.entries().map(|e| e.expect("decodes")).collect();
    assert_eq!(from_file.len(), ids.len());
    assert_eq!(from_file, in_memory);
    assert!(from_file.windows(2).all(|w| w[0].id < w[1].id));

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
fn a_small_pack_index_is_held_in_memory() {
    let dir = temp();
    let ids: Vec<_> = (0..100u64)
        .map(|i| ObjectId::of(&i.to_le_bytes()))
        .collect();
    let entries = ids.iter().enumerate().map(|(n, id)| entry(*id, n as u64));
    let (loaded, _) = both(&dir.path().join("small.idx"), entries.collect());
    assert!(!loaded.reads_from_file());
    assert_eq!(loaded.held_bytes(), 100 * INDEX_ENTRY_LEN);
    for id in &ids {
        assert_eq!(loaded.lookup(id).map(|e| e.id), Some(*id));
    }
}

#[test]
fn ids_that_share_their_lookup_key_are_each_found_and_a_near_miss_is_not() {
    // Ids equal in their first five bytes (the fan-out byte and the 4-byte key) and different
    // after: a lookup must read each candidate and compare whole ids.
    let mut entries: Vec<IndexEntry> = (0..2000u64)
        .map(|i| entry(ObjectId::of(&i.to_le_bytes()), i))
        .collect();
    let twin = |last: u8| {
        let mut id = [0u8; 32];
        id[..5].copy_from_slice(&[0x42, 1, 2, 3, 4]);
        id[31] = last;
        ObjectId(id)
    };
    for (n, last) in [10u8, 20, 30].into_iter().enumerate() {
        entries.push(entry(twin(last), 5000 + n as u64));
    }
    let dir = temp();
    let (loaded, held) = both(&dir.path().join("twins.idx"), entries.clone());
    assert!(loaded.reads_from_file(), "2,003 entries stay in the file");
    for e in &entries {
        assert_eq!(loaded.lookup(&e.id), Some(*e), "{}", e.id.short());
    }
    for last in [0u8, 15, 25, 40] {
        assert_eq!(loaded.lookup(&twin(last)), None, "near miss {last}");
        assert_eq!(held.lookup(&twin(last)), None, "near miss {last}");
    }
}

#[test]
fn an_index_read_from_its_file_answers_as_the_same_bytes_held_in_memory() {
    // Seeded: ids of counters, present and absent, looked up both ways.
    let seed = 0x05ee_d1dc_u64;
    println!("seed {seed}");
    let present: Vec<_> = (0..5000u64)
        .map(|i| ObjectId::of(&(seed ^ i).to_le_bytes()))
        .collect();
    let entries = present
        .iter()
        .enumerate()
        .map(|(n, id)| entry(*id, n as u64));
    let dir = temp();
    let (loaded, held) = both(&dir.path().join("many.idx"), entries.collect());
    assert!(loaded.reads_from_file());
    let absent = (0..5000u64).map(|i| ObjectId::of(&(seed ^ i).to_be_bytes()));
    for id in present.iter().copied().chain(absent) {
        assert_eq!(loaded.lookup(&id), held.lookup(&id), "{}", id.short());
    }
}

#[test]
fn an_index_truncated_after_it_was_loaded_misses_and_fails_instead_of_killing_the_process() {
    // A mapped index truncated under a process raised SIGBUS on the next lookup: a read
    // answers "not there", and listing the entries is an error.
    let ids: Vec<_> = (0..3000u64)
        .map(|i| ObjectId::of(&i.to_le_bytes()))
        .collect();
    let entries: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(n, id)| entry(*id, n as u64))
        .collect();
    let dir = temp();
    let path = dir.path().join("cut.idx");
    let (loaded, _) = both(&path, entries);
    assert!(loaded.reads_from_file());
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("opens");
    file.set_len(16 + 1024 + 1500 * INDEX_ENTRY_LEN as u64)
        .expect("truncates");
    let (mut found, mut missed) = (0, 0);
    for id in &ids {
        match loaded.lookup(id) {
            Some(e) => {
                assert_eq!(e.id, *id);
                found += 1;
            }
            None => missed += 1,
        }
    }
    assert_eq!((found, missed), (1500, 1500));
    let listed: Vec<_> = loaded.entries().collect();
    assert_eq!(
        listed.len(),
        1024 + 1,
        "the first read's entries, then the error"
    );
    let err = listed
        .last()
        .and_then(|r| r.as_ref().err())
        .expect("an error");
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("truncated"), "{err}");
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

#[test]
fn a_large_index_whose_length_disagrees_with_its_count_is_refused() {
    let ids: Vec<_> = (0..2000u64)
        .map(|i| ObjectId::of(&i.to_le_bytes()))
        .collect();
    let mut bytes = PackIndex::encode(
        ids.iter()
            .enumerate()
            .map(|(n, id)| entry(*id, n as u64))
            .collect(),
    );
    bytes.extend_from_slice(&[0u8; INDEX_ENTRY_LEN]);
    let dir = temp();
    let p = dir.path().join("long.idx");
    std::fs::write(&p, &bytes).expect("writes");
    let err = PackIndex::load(&p).expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("does not match"), "{err}");
}
