//! Merging small packs: one pack instead of many, every object still read by every handle.

use crate::util::{
    file_entry, files_ending, noise, open, pack_codecs, snapshot, temp, write_unreachable,
};
use cairn_store::merge::{MergeOptions, MergeReport};
use cairn_store::pack::Codec;
use cairn_store::{ObjectId, ObjectKind, OperationKind, Tree};

fn limit(max_small_packs: usize) -> MergeOptions {
    MergeOptions {
        max_small_packs,
        ..MergeOptions::default()
    }
}

#[test]
fn more_small_packs_than_the_limit_are_merged_into_one_and_every_object_still_reads() {
    let dir = temp();
    let store = open(dir.path());
    let mut ids: Vec<ObjectId> = Vec::new();
    for i in 0..10u64 {
        ids.extend(write_unreachable(
            &store,
            &[&noise(i, 300), b"in every pack"],
        ));
    }
    let mut snaps = Vec::new();
    for i in 0..3u64 {
        let s = snapshot(&store, &[("f", &noise(100 + i, 200))], None, i as i64);
        ids.extend(s.blobs.iter().copied());
        ids.push(s.root.0);
        snaps.push(s);
    }
    let packs = dir.path().join("store/objects/packs");
    assert_eq!(files_ending(&packs, ".idx").len(), 13);
    // A handle that loaded the old packs before the merge (another process, say).
    let before = open(dir.path());
    before.refresh().expect("refresh");

    let report = store.merge_small_packs(&limit(4)).expect("merge");
    assert_eq!(report.packs_merged, 13);
    assert_eq!(
        report.objects as usize,
        ids.len() - 9,
        "one copy of the shared blob"
    );
    assert!(report.kept.is_empty());
    assert_eq!(files_ending(&packs, ".idx").len(), 1);
    assert_eq!(files_ending(&packs, ".pack").len(), 1);

    let fresh = open(dir.path());
    for id in &ids {
        assert!(
            fresh.read_object(id).is_ok(),
            "{} after the merge",
            id.to_hex()
        );
        assert!(
            before.read_object(id).is_ok(),
            "{} by the old handle",
            id.to_hex()
        );
        assert!(store.contains(id));
    }
    for s in &snaps {
        assert_eq!(fresh.read_manifest(&s.id).expect("manifest").root, s.root);
    }
    // Merged once, the one pack left is below the limit: nothing more to do.
    assert_eq!(
        store.merge_small_packs(&limit(4)).expect("merge"),
        MergeReport::default()
    );
}

#[test]
fn objects_a_snapshot_stored_uncompressed_to_answer_sooner_are_compressed_by_the_merge() {
    let dir = temp();
    let store = open(dir.path());
    let text = b"a line of text that zstd shrinks well\n".repeat(40);
    let mut trees = Vec::new();
    let mut blobs = Vec::new();
    let mut noisy = Vec::new();
    for i in 0..3u64 {
        let op = store
            .begin_operation(OperationKind::Write, &[])
            .expect("an operation begins");
        let mut w = store.writer(&op);
        w.defer_compression();
        let blob = w
            .put(
                ObjectKind::Blob,
                &[text.as_slice(), &i.to_le_bytes()].concat(),
            )
            .expect("a blob is stored")
            .id;
        // What zstd cannot shrink by an eighth stays raw, merged or not.
        let noise = w
            .put(ObjectKind::Blob, &crate::util::noise(i + 1, 4096))
            .expect("a blob is stored")
            .id;
        noisy.push(noise);
        // A directory of 200 entries, as a snapshot rebuilds one after a change in it.
        let entries = (0..200u64)
            .map(|n| file_entry(format!("test-{i}-{n:04}.js").as_bytes(), blob, n))
            .collect();
        let tree = Tree::new(entries).expect("a tree");
        let id = w.put_tree(&tree).expect("the tree is stored");
        w.commit().expect("committed");
        trees.push((id, tree.encode()));
        blobs.push(blob);
    }
    let codecs = pack_codecs(&store);
    for (id, _) in &trees {
        assert_eq!(
            codecs[&id.0],
            Codec::Raw,
            "a deferred tree is stored as it is"
        );
    }
    for b in blobs.iter().chain(&noisy) {
        assert_eq!(codecs[b], Codec::Raw, "a deferred blob is stored as it is");
    }

    let report = store.merge_small_packs(&limit(1)).expect("merge");
    assert_eq!(report.packs_merged, 3);
    let codecs = pack_codecs(&store);
    let fresh = open(dir.path());
    for (id, bytes) in &trees {
        assert_eq!(codecs[&id.0], Codec::Zstd, "the merge compressed the tree");
        let (kind, read) = fresh.read_object(&id.0).expect("the tree reads");
        assert_eq!((kind, &read), (ObjectKind::Tree, bytes), "the same bytes");
    }
    for b in &blobs {
        assert_eq!(codecs[b], Codec::Zstd, "the merge compressed the blob");
        assert!(fresh.read_object(b).is_ok());
    }
    for b in &noisy {
        assert_eq!(codecs[b], Codec::Raw, "what does not shrink stays raw");
        assert!(fresh.read_object(b).is_ok());
    }
    let packs = dir.path().join("store/objects/packs");
    let pack = &files_ending(&packs, ".pack")[0];
    let size = std::fs::metadata(pack).expect("the pack").len();
    let raw: usize = trees.iter().map(|(_, b)| b.len()).sum();
    assert!(
        (size as usize) < raw,
        "the merged pack ({size} bytes) is smaller than its trees were ({raw})"
    );
}

#[test]
fn no_more_small_packs_than_the_limit_are_left_as_they_are() {
    let dir = temp();
    let store = open(dir.path());
    for i in 0..4u64 {
        write_unreachable(&store, &[&noise(i, 100)]);
    }
    let packs = dir.path().join("store/objects/packs");
    let listed = files_ending(&packs, "");
    assert_eq!(
        store.merge_small_packs(&limit(4)).expect("merge"),
        MergeReport::default()
    );
    assert_eq!(files_ending(&packs, ""), listed);
    // Packs larger than "small" do not count either.
    let big = MergeOptions {
        max_small_packs: 1,
        small_pack_bytes: 10,
        ..MergeOptions::default()
    };
    assert_eq!(
        store.merge_small_packs(&big).expect("merge"),
        MergeReport::default()
    );
    assert_eq!(files_ending(&packs, ""), listed);
}

#[test]
fn a_pack_whose_record_does_not_read_back_is_kept_and_the_others_are_merged() {
    let dir = temp();
    let store = open(dir.path());
    let mut ids = Vec::new();
    for i in 0..5u64 {
        ids.push(write_unreachable(&store, &[&noise(i, 400)]));
    }
    let packs = dir.path().join("store/objects/packs");
    // Damage the last byte (inside the only record) of one pack.
    let damaged = files_ending(&packs, ".pack").remove(2);
    let mut bytes = std::fs::read(&damaged).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&damaged, &bytes).expect("write");
    let damaged_id = damaged
        .file_stem()
        .and_then(|s| s.to_str())
        .map(|s| ObjectId::from_hex(s).expect("a pack id"))
        .expect("a pack name");

    let report = store.merge_small_packs(&limit(2)).expect("merge");
    assert_eq!(report.kept, vec![damaged_id]);
    assert_eq!(report.packs_merged, 4);
    assert!(damaged.is_file(), "the damaged pack stays");
    assert_eq!(files_ending(&packs, ".idx").len(), 2);
    let fresh = open(dir.path());
    fresh.refresh().expect("refresh");
    for id in ids.iter().flatten() {
        assert!(fresh.contains(id), "{}", id.to_hex());
    }
}

#[test]
fn merges_running_at_once_in_several_handles_beside_a_writer_lose_no_object() {
    // Each round races two merges (two processes' snapshots past the limit, or one and the
    // daemon) with a third handle writing new packs; whoever removes a pack, every object
    // must still read from a fresh handle and the store must verify.
    for round in 0..6u64 {
        let dir = temp();
        let store = open(dir.path());
        let mut ids: Vec<ObjectId> = Vec::new();
        for i in 0..24u64 {
            ids.extend(write_unreachable(&store, &[&noise(round * 1000 + i, 200)]));
        }
        let written: Vec<ObjectId> = std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    open(dir.path())
                        .merge_small_packs(&limit(4))
                        .expect("a merge beside another")
                });
            }
            let writer = s.spawn(|| {
                let h = open(dir.path());
                let mut out = Vec::new();
                for i in 0..12u64 {
                    out.extend(write_unreachable(
                        &h,
                        &[&noise(round * 1000 + 500 + i, 200)],
                    ));
                }
                out
            });
            writer.join().expect("writer")
        });
        ids.extend(written);
        let fresh = open(dir.path());
        for id in &ids {
            assert!(
                fresh.read_object(id).is_ok(),
                "round {round}: {} lost",
                id.to_hex()
            );
        }
        let verified = fresh.verify().expect("verify");
        assert!(verified.is_ok(), "round {round}: {verified:?}");
    }
}

#[test]
fn a_blob_large_enough_for_a_file_of_its_own_is_compressed_even_when_packing_is_deferred() {
    let dir = temp();
    let store = open(dir.path());
    // Above the default inline_max_bytes (1 MiB): streamed into objects/large, which no merge
    // comes back to.
    let text = b"a line of text that zstd shrinks well\n".repeat(40_000);
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("an operation begins");
    let mut w = store.writer(&op);
    w.defer_compression();
    let put = w
        .put_blob_from(&mut &text[..], text.len() as u64)
        .expect("the blob is stored");
    w.commit().expect("committed");
    let large = files_ending(&dir.path().join("store/objects/large"), "");
    assert_eq!(large.len(), 1, "{large:?}");
    let size = std::fs::metadata(&large[0]).expect("the file").len();
    assert!(
        size < text.len() as u64 / 4,
        "stored in {size} bytes for {} of text",
        text.len()
    );
    let (_, read) = open(dir.path()).read_object(&put.id).expect("reads");
    assert_eq!(read, text);
}

#[test]
fn a_merge_told_to_stop_changes_nothing_and_says_so() {
    let dir = temp();
    let store = open(dir.path());
    let mut ids: Vec<ObjectId> = Vec::new();
    for i in 0..6u64 {
        ids.extend(write_unreachable(&store, &[&noise(i, 300)]));
    }
    let packs = dir.path().join("store/objects/packs");
    let before = files_ending(&packs, ".pack");
    assert_eq!(before.len(), 6);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let options = MergeOptions {
        stop: Some(stop.clone()),
        ..limit(4)
    };
    let report = store.merge_small_packs(&options).expect("merge");
    assert!(report.stopped, "{report:?}");
    assert_eq!((report.packs_merged, report.new_pack), (0, None));
    assert_eq!(files_ending(&packs, ".pack"), before);
    assert_eq!(
        files_ending(&dir.path().join("store/tmp"), "").len(),
        0,
        "nothing left behind in tmp/"
    );
    for id in &ids {
        assert!(store.read_object(id).is_ok());
    }
    // Let go, the same merge is done.
    stop.store(false, std::sync::atomic::Ordering::SeqCst);
    let report = store.merge_small_packs(&options).expect("merge");
    assert!(!report.stopped);
    assert_eq!(report.packs_merged, 6);
}
