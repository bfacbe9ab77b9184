//! The fuzz corpora, replayed: every input committed under `fuzz/corpus/<target>/` goes
//! through the same check its cargo-fuzz target runs (`cairn_tests::decoders`), in every
//! plain `cargo test` run, without nightly. The long run (`CAIRN_LONG=1
//! scripts/test-reliability`) fuzzes each target for a bounded time on top of these seeds.

use crate::util::{figures, populate, write};
use cairn_store::{EntryKind, ObjectId, Tree, TreeEntry};
use cairn_tests::decoders::{one_entry_tree, TARGETS};
use std::path::{Path, PathBuf};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

#[test]
fn the_committed_fuzz_corpora_replay_through_every_decoder() {
    let mut counts = Vec::new();
    for (name, check) in TARGETS {
        let dir = corpus_dir().join(name);
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("an entry").path();
            let bytes = std::fs::read(&path).expect("a corpus file");
            let r = std::panic::catch_unwind(|| check(&bytes));
            assert!(r.is_ok(), "the {name} check failed on {}", path.display());
            n += 1;
        }
        assert!(n > 0, "the {name} corpus is empty");
        counts.push(format!("{name} {n}"));
    }
    figures(
        "fuzz-corpora",
        &format!("committed inputs replayed: {}", counts.join(", ")),
    );
}

fn seed(target: &str, bytes: &[u8]) {
    let dir = corpus_dir().join(target);
    std::fs::create_dir_all(&dir).expect("corpus dir");
    let name = &ObjectId::of(bytes).to_hex()[..16];
    std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("seed");
}

/// Every prefix of `bytes` at a few lengths, and `bytes` with one byte flipped.
fn damaged(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = [0, 4, 12, bytes.len() / 2, bytes.len().saturating_sub(1)]
        .iter()
        .filter(|&&n| n < bytes.len())
        .map(|&n| bytes[..n].to_vec())
        .collect();
    if !bytes.is_empty() {
        let mut f = bytes.to_vec();
        let i = f.len() * 2 / 3;
        f[i] ^= 0x41;
        out.push(f);
    }
    out
}

fn seed_with_damage(target: &str, bytes: &[u8]) {
    seed(target, bytes);
    for d in damaged(bytes) {
        seed(target, &d);
    }
}

/// Writes the seed corpora from a small real store (its trees, pack index, pack, manifest,
/// stat cache and a restore journal), hostile variants and path names. Run by hand when a
/// format changes: `cargo test -p cairn-tests --test reliability -- --ignored write_seed`.
#[test]
#[ignore = "writes fuzz/corpus; run by hand when a format changes"]
fn write_seed_corpora() {
    let base = tempfile::tempdir().expect("tmp");
    let root = base.path().join("root");
    std::fs::create_dir_all(&root).expect("root");
    write(&root, "hello.txt", b"hello\n");
    write(&root, "bin/run.sh", b"#!/bin/sh\necho run\n");
    std::os::unix::fs::symlink("hello.txt", root.join("link")).expect("symlink");
    std::fs::write(root.join(latin1_name()), b"caf\xe9\n").expect("latin-1 name");
    let ws = crate::util::open_ws(base.path());
    let snap = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect("snapshot");
    let store = ws.store().clone();

    // Trees: every tree of the snapshot, the empty tree, hostile names.
    let mut todo = vec![snap.snapshot.root];
    while let Some(t) = todo.pop() {
        let tree = store.read_tree(&t).expect("tree");
        for e in tree.entries() {
            if e.kind == EntryKind::Dir {
                todo.push(cairn_store::TreeId(e.id));
            }
        }
        seed_with_damage("tree", &tree.encode());
    }
    seed("tree", &Tree::default().encode());
    let blob = ObjectId::of(b"");
    for name in [&b".."[..], b".", b"a/b", b"", b"x\0y", b"/etc"] {
        seed(
            "tree",
            &one_entry_tree(EntryKind::File, 0o100644, 0, &blob, name),
        );
    }
    let mut bad_order = Tree::new(vec![TreeEntry {
        name: b"b".to_vec(),
        kind: EntryKind::File,
        mode: 0o100644,
        size: 0,
        id: blob,
    }])
    .expect("tree")
    .encode();
    bad_order[5] = 0xff; // an absurd count
    seed("tree", &bad_order);

    // The pack index and the pack.
    for name in crate::util::names(&store.layout().packs) {
        let path = store.layout().packs.join(&name);
        let bytes = std::fs::read(&path).expect("read");
        if name.ends_with(".idx") {
            seed_with_damage("pack_index", &bytes);
            let index = cairn_store::pack::PackIndex::from_bytes(bytes, &path).expect("index");
            let pack = std::fs::read(path.with_extension("pack")).expect("pack");
            let entries: Vec<_> = index.entries().take(8).map(|e| e.expect("entry")).collect();
            let mut input = vec![entries.len() as u8];
            for e in &entries {
                input.extend_from_slice(&e.offset.to_le_bytes());
                input.extend_from_slice(&e.raw_len.to_le_bytes());
                input.extend_from_slice(&e.stored_len.to_le_bytes());
                input.push(u8::from(e.codec == cairn_store::pack::Codec::Zstd));
                input.push(0);
            }
            input.extend_from_slice(&pack);
            seed("pack", &input);
            // The same records claiming huge lengths.
            let mut lying = input.clone();
            for i in 0..entries.len() {
                let at = 1 + i * 26 + 8;
                lying[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
            }
            seed("pack", &lying);
        }
    }
    seed(
        "pack_index",
        &cairn_store::pack::PackIndex::encode(Vec::new()),
    );

    // The manifest and the stat cache.
    let manifest = store
        .read_manifest_bytes(&snap.snapshot.id)
        .expect("manifest");
    seed_with_damage("manifest", &manifest);
    // The workspace writes its stat cache from a background thread: now, before it is read.
    ws.flush_stat_cache();
    let cache = std::fs::read(
        cairn_snapshot::StatCache::path(&store, crate::util::WS_ID).expect("cache path"),
    )
    .expect("cache");
    seed_with_damage("stat_cache", &cache);

    // A journal of a real restore, pending, and with a hostile path.
    populate(&root.join("more"), 0);
    ws.restore(
        &snap.snapshot.id,
        &Default::default(),
        &Default::default(),
        Default::default(),
    )
    .expect("restore");
    let mut j = ws.journals().expect("journals").pop().expect("a journal");
    // Format 2 (postcard), then the same acting on `..`.
    seed_with_damage("journal", &j.encode());
    if let Some(a) = j.plan.actions.first().cloned() {
        j.plan.actions.push(match a {
            cairn_restore::plan::Action::WriteFile {
                blob, mode, size, ..
            } => cairn_restore::plan::Action::WriteFile {
                path: "../x".into(),
                blob,
                mode,
                size,
            },
            _ => cairn_restore::plan::Action::RemoveDir { path: "..".into() },
        });
        seed("journal", &j.encode());
        j.plan.actions.pop();
    }
    // Format 1 (JSON), still read.
    let mut value = serde_json::to_value(&j).expect("json");
    let frame = |v: &serde_json::Value| {
        let mut b = b"CAIRNJNL".to_vec();
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&serde_json::to_vec(v).expect("json"));
        b
    };
    seed_with_damage("journal", &frame(&value));
    value["state"] = serde_json::json!("pending");
    seed("journal", &frame(&value));
    value["plan"]["actions"] = serde_json::json!([{"op": "remove_dir", "path": ".."}]);
    seed("journal", &frame(&value));

    // Path names.
    for p in [
        &b"src/main.rs"[..],
        b"..",
        b".",
        b"",
        b"/etc/passwd",
        b"a//b",
        b"a/./b",
        b"caf\xe9",
        b"x\0y",
        &[b'n'; 4097],
    ] {
        seed("path", p);
    }
}

/// A file name that is not UTF-8 (`caf\xe9`), as an `OsStr`.
fn latin1_name() -> &'static std::ffi::OsStr {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(b"caf\xe9")
}
