//! Differences between snapshots, and between a snapshot and the live workspace.

use crate::fixtures::Ws;
use cairn_snapshot::{diff_snapshots, diff_workspace, ChangeKind, Options};
use std::os::unix::fs::PermissionsExt;

fn summary(changes: &[cairn_snapshot::Change]) -> Vec<(String, ChangeKind)> {
    changes
        .iter()
        .map(|c| (String::from_utf8_lossy(&c.path).into_owned(), c.kind))
        .collect()
}

fn mutate(ws: &Ws) {
    ws.write("mod.txt", b"changed");
    std::fs::remove_file(ws.root().join("del.txt")).expect("rm");
    ws.write("new/added.txt", b"added");
    std::fs::set_permissions(
        ws.root().join("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    std::fs::remove_file(ws.root().join("swap")).expect("rm");
    ws.write("swap/inner.txt", b"inner");
}

fn base(ws: &Ws) {
    ws.write("mod.txt", b"original");
    ws.write("del.txt", b"bye");
    ws.write("same/keep.txt", b"keep");
    ws.write("run.sh", b"#!/bin/sh\n");
    ws.write("swap", b"a file first");
}

#[test]
fn diff_between_snapshots_lists_added_modified_deleted_mode_and_type_changes() {
    let ws = Ws::new();
    base(&ws);
    let a = ws.snap(&Options::default());
    mutate(&ws);
    let b = ws.snap(&Options::default());
    let changes = diff_snapshots(&ws.store, &a.id, &b.id).expect("diff");
    assert_eq!(
        summary(&changes),
        vec![
            ("del.txt".into(), ChangeKind::Deleted),
            ("mod.txt".into(), ChangeKind::Modified),
            ("new/added.txt".into(), ChangeKind::Added),
            ("run.sh".into(), ChangeKind::ModeChanged),
            ("swap".into(), ChangeKind::TypeChanged),
            ("swap/inner.txt".into(), ChangeKind::Added),
        ]
    );
    assert!(diff_snapshots(&ws.store, &b.id, &b.id)
        .expect("diff")
        .is_empty());
}

#[test]
fn diff_against_the_live_workspace_sees_changes_without_storing_anything() {
    let ws = Ws::new();
    base(&ws);
    let a = ws.snap(&Options::default());
    mutate(&ws);
    let packs_before = std::fs::read_dir(&ws.store.layout().packs)
        .expect("packs")
        .count();
    let changes = diff_workspace(&ws.store, &ws.root(), "ws", &a.id).expect("diff");
    assert_eq!(changes.len(), 6);
    assert_eq!(
        std::fs::read_dir(&ws.store.layout().packs)
            .expect("packs")
            .count(),
        packs_before
    );
    assert_eq!(ws.store.snapshot_ids().expect("ids").len(), 1);
}
