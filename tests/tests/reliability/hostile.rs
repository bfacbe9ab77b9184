//! Hostile stores: a store crafted to point outside the workspace root (trees naming `..`,
//! `.`, absolute paths or names with `/`; restore journals naming such paths; directories of
//! the store swapped for symlinks) is refused with `CORRUPT`, and nothing is written
//! outside the root, nor inside it.

use crate::util::{open_store, open_ws, picture, populate, snapshot_ids, write, ws_options, WS_ID};
use cairn_restore::Workspace;
use cairn_store::{
    CaptureSettings, Classify, EntryKind, ErrorKind, Manifest, ObjectKind, OperationKind,
    SnapshotId, Stats, Store, Tree, TreeEntry, TreeId,
};
use cairn_tests::decoders::one_entry_tree;
use std::path::Path;

/// A directory beside the workspace root that a hostile store aims at.
fn outside(base: &Path) -> std::path::PathBuf {
    let o = base.join("outside");
    write(&o, "victim.txt", b"must never change\n");
    o
}

/// Writes a manifest whose root is `root` (already in the store).
fn manifest_for(store: &Store, root: TreeId) -> SnapshotId {
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("an operation");
    let m = Manifest {
        root,
        label: Some("hostile".into()),
        created_ms: cairn_store::fsutil::now_ms(),
        workspace_id: WS_ID.into(),
        workspace_root: b"/".to_vec(),
        metadata: "{}".into(),
        capture: CaptureSettings::default(),
        skipped: Vec::new(),
        stats: Stats::default(),
        protected: false,
    };
    store.write_manifest(&op, &m).expect("a manifest")
}

/// Puts raw tree bytes into the store as they are.
fn put_raw_tree(store: &Store, bytes: &[u8]) -> TreeId {
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("an operation");
    let w = store.writer(&op);
    let id = w.put(ObjectKind::Tree, bytes).expect("put").id;
    w.commit().expect("commit");
    TreeId(id)
}

fn put_blob(store: &Store, bytes: &[u8]) -> cairn_store::ObjectId {
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("an operation");
    let w = store.writer(&op);
    let id = w.put(ObjectKind::Blob, bytes).expect("put").id;
    w.commit().expect("commit");
    id
}

#[test]
fn trees_naming_paths_outside_the_root_are_refused_with_corrupt_and_write_nothing() {
    let names: [&[u8]; 7] = [b"..", b".", b"../outside", b"/etc", b"a/b", b"", b"x\0y"];
    let mut refused = 0;
    for name in names {
        for nested in [false, true] {
            let base = tempfile::tempdir().expect("tmp");
            let other = tempfile::tempdir().expect("tmp");
            let out = outside(base.path());
            std::fs::create_dir_all(base.path().join("root")).expect("root");
            populate(&base.path().join("root"), 0);
            let ws = open_ws(base.path());
            let store = ws.store().clone();
            let blob = put_blob(&store, b"written through a hostile name\n");
            for (kind, mode, id) in [
                (EntryKind::File, 0o100644, blob),
                (EntryKind::Symlink, 0o120777, blob),
            ] {
                let mut root = put_raw_tree(&store, &one_entry_tree(kind, mode, 31, &id, name));
                if nested {
                    // The hostile tree one level down, under a sound root.
                    let sound = Tree::new(vec![TreeEntry {
                        name: b"sub".to_vec(),
                        kind: EntryKind::Dir,
                        mode: 0o040755,
                        size: 31,
                        id: root.0,
                    }])
                    .expect("a sound tree");
                    root = put_raw_tree(&store, &sound.encode());
                }
                let snap = manifest_for(&store, root);
                let what = format!(
                    "{:?} ({kind:?}, nested {nested})",
                    String::from_utf8_lossy(name)
                );
                let files = picture(ws.root());
                let beside = picture(&out);
                let around = crate::util::names(base.path());

                let e = ws
                    .plan(&snap, &Default::default(), Default::default())
                    .expect_err("plan");
                assert_eq!(e.kind(), ErrorKind::Corrupt, "{what}: plan: {e}");
                let e = ws
                    .restore(
                        &snap,
                        &Default::default(),
                        &Default::default(),
                        Default::default(),
                    )
                    .expect_err("restore");
                assert_eq!(e.kind(), ErrorKind::Corrupt, "{what}: restore: {e}");
                let dst = Store::open(other.path().join("dst"), Default::default()).expect("dst");
                let e = store.copy_snapshot_to(&snap, &dst).expect_err("copy");
                assert_eq!(e.kind(), ErrorKind::Corrupt, "{what}: copy: {e}");
                assert!(!dst.has_snapshot(&snap), "{what}: no manifest copied");
                let report = store.verify().expect("verify");
                let check = report
                    .snapshots
                    .iter()
                    .find(|c| c.id == snap)
                    .expect("listed");
                assert!(!check.is_ok(), "{what}: verify flags the snapshot");

                assert_eq!(picture(ws.root()), files, "{what}: nothing written inside");
                assert_eq!(picture(&out), beside, "{what}: nothing written outside");
                assert_eq!(
                    crate::util::names(base.path()),
                    around,
                    "{what}: nor beside"
                );
                assert!(
                    crate::util::staged_leftovers(ws.root()).is_empty(),
                    "{what}"
                );
                refused += 1;
            }
        }
    }
    crate::util::figures(
        "hostile-trees",
        &format!(
            "{refused} snapshots whose trees name .., ., ../outside, /etc, a/b, an empty name or \
             a NUL (as a file or a symlink, at the root or one level down) were refused with \
             CORRUPT by plan, restore and copy, flagged by verify, and nothing was written"
        ),
    );
}

/// Every directory of the store, and the per-workspace ones the layers above add.
fn store_dirs() -> Vec<String> {
    [
        "objects",
        "objects/packs",
        "objects/large",
        "snapshots",
        "workspaces",
        "journal",
        "locks",
        "tmp",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("workspaces/{WS_ID}"), format!("journal/{WS_ID}")])
    .collect()
}

#[test]
fn store_directories_swapped_for_symlinks_are_refused_with_corrupt_and_nothing_goes_through() {
    let mut refused = Vec::new();
    for rel in store_dirs() {
        let base = tempfile::tempdir().expect("tmp");
        std::fs::create_dir_all(base.path().join("root")).expect("root");
        populate(&base.path().join("root"), 0);
        let snap = {
            let ws = open_ws(base.path());
            let s = ws
                .snapshot(&ws.snapshot_options(), Default::default())
                .expect("snapshot")
                .snapshot
                .id;
            write(ws.root(), "src/mod0/f0.rs", b"edited\n");
            s
        };
        // The directory moves outside and a symlink to it stands in its place.
        let dir = base.path().join("store").join(&rel);
        let out = base.path().join("outside");
        std::fs::rename(&dir, &out).expect("move the directory out");
        std::os::unix::fs::symlink(&out, &dir).expect("symlink");
        let beside = picture(&out);
        let files = picture(&base.path().join("root"));
        let what = format!("store/{rel} as a symlink");

        let outcome = Workspace::open(
            base.path().join("root"),
            ws_options(&base.path().join("store")),
        )
        .map_err(|e| e.kind())
        .and_then(|ws| {
            let s = ws
                .snapshot(&ws.snapshot_options(), Default::default())
                .map(|_| ());
            let r = ws
                .restore(
                    &snap,
                    &Default::default(),
                    &Default::default(),
                    Default::default(),
                )
                .map(|_| ());
            let g = ws.store().gc(&crate::child::eager_gc()).map(|_| ());
            // Every operation that goes through the directory refuses.
            let kinds: Vec<Option<ErrorKind>> = vec![
                s.err().map(|e| e.kind()),
                r.err().map(|e| e.kind()),
                g.err().map(|e| e.kind()),
            ];
            match kinds.iter().flatten().next() {
                Some(k) => Err(*k),
                None => Ok(()),
            }
        });
        assert_eq!(outcome, Err(ErrorKind::Corrupt), "{what}");
        assert_eq!(
            picture(&out),
            beside,
            "{what}: nothing written through the link"
        );
        assert_eq!(
            picture(&base.path().join("root")),
            files,
            "{what}: files unchanged"
        );
        refused.push(rel);
    }
    crate::util::figures(
        "hostile-symlinked-store",
        &format!(
            "each of {} store directories ({}) swapped for a symlink made open, snapshot, \
             restore or collect refuse with CORRUPT; nothing was written through the link",
            refused.len(),
            refused.join(", ")
        ),
    );
}

#[test]
fn a_manifest_that_is_a_symlink_is_refused_with_corrupt() {
    let base = tempfile::tempdir().expect("tmp");
    std::fs::create_dir_all(base.path().join("root")).expect("root");
    populate(&base.path().join("root"), 0);
    let ws = open_ws(base.path());
    let snap = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect("snapshot")
        .snapshot
        .id;
    let path = ws.store().layout().manifest_path(&snap);
    let out = base.path().join("manifest-outside");
    std::fs::rename(&path, &out).expect("move");
    std::os::unix::fs::symlink(&out, &path).expect("symlink");
    let e = ws
        .restore(
            &snap,
            &Default::default(),
            &Default::default(),
            Default::default(),
        )
        .expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
}

/// A journal file as the restore layer writes it, around `json`.
fn journal_bytes(json: &serde_json::Value) -> Vec<u8> {
    let mut b = b"CAIRNJNL".to_vec();
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&serde_json::to_vec(json).expect("json"));
    b
}

#[test]
fn a_planted_journal_naming_paths_outside_the_root_is_refused_with_corrupt_and_changes_nothing() {
    let base = tempfile::tempdir().expect("tmp");
    let out = outside(base.path());
    let root = base.path().join("root");
    std::fs::create_dir_all(&root).expect("root");
    populate(&root, 0);
    // A real journal to start from: a restore that wrote, removed and re-moded things.
    let template = {
        let ws = open_ws(base.path());
        let snap = ws
            .snapshot(&ws.snapshot_options(), Default::default())
            .expect("snapshot")
            .snapshot
            .id;
        write(&root, "src/mod0/f0.rs", b"edited\n");
        write(&root, "new/file.txt", b"new\n");
        ws.restore(
            &snap,
            &Default::default(),
            &Default::default(),
            Default::default(),
        )
        .expect("restore");
        let j = ws.journals().expect("journals").pop().expect("one journal");
        serde_json::to_value(&j).expect("json")
    };
    let victim = out.join("victim.txt");
    let hostile: Vec<String> = vec![
        "..".into(),
        "../outside/victim.txt".into(),
        "src/../../outside/victim.txt".into(),
        victim.to_string_lossy().into_owned(),
        "/".into(),
        ".".into(),
        "".into(),
        "src//mod0".into(),
        "src/./mod0".into(),
    ];
    let parent_mode = std::fs::metadata(base.path()).expect("stat").permissions();
    let mut refused = 0;
    for (i, path) in hostile.iter().enumerate() {
        for (state, op) in [
            ("pending", "remove_file"),
            ("pending", "remove_dir"),
            ("pending", "set_mode"),
            ("staging", "write_file"),
            ("pending", "make_symlink"),
        ] {
            let mut j = template.clone();
            j["id"] = serde_json::json!(format!("r-hostile-{i}"));
            j["state"] = serde_json::json!(state);
            j["report"] = serde_json::Value::Null;
            let action = match op {
                "remove_file" | "remove_dir" => serde_json::json!({"op": op, "path": path}),
                "set_mode" => {
                    serde_json::json!({"op": op, "path": path, "mode": 0o777, "dir": false})
                }
                "write_file" => serde_json::json!({
                    "op": op, "path": path, "mode": 0o644, "size": 1,
                    "blob": cairn_store::ObjectId::of(b"x").to_hex()
                }),
                _ => serde_json::json!({
                    "op": op, "path": path,
                    "target": cairn_store::ObjectId::of(b"/etc").to_hex()
                }),
            };
            j["plan"]["actions"] = serde_json::json!([action]);
            let dir = base.path().join("store").join("journal").join(WS_ID);
            // Format 1 as it was written (JSON, the state inside, `<id>.journal`), and format
            // 2 (postcard, the state its name) in each state recovery acts on.
            let mut plants = vec![(
                dir.join(format!("r-hostile-{i}.journal")),
                journal_bytes(&j),
                format!("a {state} format 1 journal that would {op} {path:?}"),
            )];
            let journal: cairn_restore::Journal =
                serde_json::from_value(j.clone()).expect("a journal");
            for ext in ["staging", "journal", "applied"] {
                plants.push((
                    dir.join(format!("r-hostile-{i}.{ext}")),
                    journal.encode(),
                    format!("a format 2 journal, {ext}, that would {op} {path:?}"),
                ));
            }
            for (file, bytes, what) in plants {
                std::fs::write(&file, bytes).expect("plant");
                let files = picture(&root);
                let beside = picture(&out);
                match Workspace::open(&root, ws_options(&base.path().join("store"))) {
                    Ok(ws) => panic!("{what}: opened, recovering {:?}", ws.recovered()),
                    Err(e) => assert_eq!(e.kind(), ErrorKind::Corrupt, "{what}: {e}"),
                }
                assert_eq!(picture(&root), files, "{what}: nothing inside");
                assert_eq!(picture(&out), beside, "{what}: nothing outside");
                assert_eq!(
                    std::fs::metadata(base.path()).expect("stat").permissions(),
                    parent_mode,
                    "{what}: the root's parent keeps its mode"
                );
                std::fs::remove_file(&file).expect("unplant");
                refused += 1;
            }
        }
    }
    let store = open_store(&base.path().join("store"));
    assert!(store.verify().expect("verify").is_ok());
    assert!(!snapshot_ids(&store).is_empty());
    crate::util::figures(
        "hostile-journals",
        &format!(
            "{refused} planted journals (format 1 pending or staging, format 2 staging, \
             pending or applied; removing, re-moding, writing or linking .., ../outside/…, an \
             absolute path, /, ., an empty path, a//b or a/./b) made opening the workspace \
             fail with CORRUPT before anything was done"
        ),
    );
}
