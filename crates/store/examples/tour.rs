//! A runnable tour of the store: stores a small tree of objects, writes a manifest, lists,
//! verifies, copies into a second store, prunes and collects. Run it with
//! `cargo run --release -p cairn-store --example tour`.

use cairn_store::gc::GcOptions;
use cairn_store::retain::Retention;
use cairn_store::{
    CaptureSettings, EntryKind, Manifest, ObjectKind, OperationKind, Stats, Store, StoreOptions,
    Tree, TreeEntry,
};
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path().join("store"), StoreOptions::default())?;
    println!("store at {}", store.path().display());

    let mut ids = Vec::new();
    for round in 0..3 {
        let op = store.begin_operation(OperationKind::Snapshot, &[])?;
        let w = store.writer(&op);
        let mut entries = Vec::new();
        for i in 0..100 {
            let text = format!(
                "fn f{i}() -> u32 {{ {} }}\n",
                if i == 7 { round } else { i }
            );
            let put = w.put(ObjectKind::Blob, text.as_bytes())?;
            entries.push(TreeEntry {
                name: format!("f{i}.rs").into_bytes(),
                kind: EntryKind::File,
                mode: 0o100644,
                size: put.size,
                id: put.id,
            });
        }
        let tree = Tree::new(entries)?;
        let root = w.put_tree(&tree)?;
        let stats = w.commit()?;
        let id = store.write_manifest(
            &op,
            &Manifest {
                root,
                label: Some(format!("round-{round}")),
                created_ms: cairn_store::fsutil::now_ms() + round as i64,
                workspace_id: "tour".into(),
                workspace_root: b"/tmp/tour".to_vec(),
                metadata: "{}".into(),
                capture: CaptureSettings::default(),
                skipped: vec![],
                stats: Stats::default(),
                protected: false,
            },
        )?;
        println!(
            "snapshot {} ({}): {} new objects, {} bytes stored, {} deduplicated, {} pack(s)",
            id.short(),
            format_args!("round-{round}"),
            stats.objects,
            stats.stored_bytes,
            stats.deduplicated,
            stats.packs
        );
        ids.push(id);
    }

    let (list, _) = store.list_snapshots()?;
    println!("list: {} snapshots", list.len());
    for e in &list {
        println!("  {}  {:?}", e.id.short(), e.manifest.label);
    }
    println!("resolve 'round-1' -> {}", store.resolve("round-1")?.short());

    let report = store.verify()?;
    println!(
        "verify: {} copies checked, ok = {}",
        report.copies_checked,
        report.is_ok()
    );

    let other = Store::open(dir.path().join("other"), StoreOptions::default())?;
    let copy = store.copy_snapshot_to(&ids[2], &other)?;
    println!(
        "copy into a second store: {} objects, {} bytes",
        copy.objects_copied, copy.bytes_copied
    );

    let pruned = store.prune(
        &Retention {
            count: Some(1),
            ..Retention::default()
        },
        &GcOptions::with_grace(Duration::ZERO),
    )?;
    println!(
        "prune to 1: deleted {} snapshot(s); collection removed {} objects, freed {} bytes, repacked {} pack(s)",
        pruned.deleted.len(),
        pruned.gc.objects_deleted,
        pruned.gc.bytes_freed,
        pruned.gc.packs_repacked
    );
    let report = store.verify()?;
    println!("verify after collection: ok = {}", report.is_ok());
    Ok(())
}
