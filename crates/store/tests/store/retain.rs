//! Retention: by count, by age and by bytes; protected and pinned snapshots survive every rule.

use crate::util::{
    kind, manifest, no_grace, noise, open, options, prune_all, snapshot, snapshot_with, temp, Snap,
};
use cairn_store::fsutil::now_ms;
use cairn_store::retain::{self, Retention};
use cairn_store::{Compression, ErrorKind, OperationKind, SnapshotId, Store};
use std::time::Duration;

const DAY_MS: i64 = 24 * 3600 * 1000;

/// `n` snapshots, each with a file of its own, taken `step_ms` apart, the last at `last_ms`.
fn history(store: &Store, n: usize, last_ms: i64, step_ms: i64) -> Vec<Snap> {
    (0..n)
        .map(|i| {
            let content = format!("version {i}\n");
            let at = last_ms - (n - 1 - i) as i64 * step_ms;
            snapshot(store, &[("f", content.as_bytes())], None, at)
        })
        .collect()
}

fn ids(snaps: &[Snap]) -> Vec<SnapshotId> {
    snaps.iter().map(|s| s.id).collect()
}

fn remaining(store: &Store) -> Vec<SnapshotId> {
    let (list, bad) = store.list_snapshots().expect("lists");
    assert!(bad.is_empty());
    list.into_iter().map(|e| e.id).collect()
}

#[test]
fn retention_by_count_keeps_the_newest_snapshots() {
    let dir = temp();
    let store = open(dir.path());
    let snaps = history(&store, 5, 5_000, 1_000);
    let policy = Retention {
        count: Some(2),
        ..Retention::default()
    };
    assert_eq!(
        retain::plan(&store, &policy, now_ms()).expect("plans"),
        ids(&snaps[..3])
    );
    assert_eq!(remaining(&store).len(), 5, "planning changes nothing");
    let report = store.prune(&policy, &no_grace()).expect("prunes");
    assert_eq!(report.deleted, ids(&snaps[..3]), "oldest first");
    assert_eq!(report.kept, 2);
    assert_eq!(remaining(&store), ids(&snaps[3..]));
    // The dropped snapshots' objects are collected; the kept ones read back.
    for s in &snaps[..3] {
        assert!(!store.contains(&s.blobs[0]));
        assert!(!store.contains(&s.root.0));
    }
    for s in &snaps[3..] {
        store.read_tree(&s.root).expect("reads");
        store.read_object(&s.blobs[0]).expect("reads");
    }
    assert!(store.verify().expect("verifies").is_ok());
}

#[test]
fn retention_by_age_drops_snapshots_older_than_max_age() {
    let dir = temp();
    let store = open(dir.path());
    let now = now_ms();
    let ten_days = snapshot(&store, &[("f", b"1")], None, now - 10 * DAY_MS);
    let two_days = snapshot(&store, &[("f", b"2")], None, now - 2 * DAY_MS);
    let an_hour = snapshot(&store, &[("f", b"3")], None, now - 3_600_000);
    let policy = Retention {
        max_age: Some(Duration::from_secs(24 * 3600)),
        ..Retention::default()
    };
    let report = store.prune(&policy, &no_grace()).expect("prunes");
    assert_eq!(report.deleted, [ten_days.id, two_days.id]);
    assert_eq!(remaining(&store), [an_hour.id]);
    assert!(!store.contains(&ten_days.blobs[0]));
}

#[test]
fn retention_by_bytes_drops_the_oldest_until_what_is_kept_fits() {
    let dir = temp();
    let store = Store::open(dir.path().join("store"), options(Compression::None)).expect("opens");
    let common = noise(100, 500);
    let snaps: Vec<Snap> = (0..4)
        .map(|i| {
            let own = noise(i, 1000);
            snapshot(
                &store,
                &[("common", &common), ("own", &own)],
                None,
                i as i64,
            )
        })
        .collect();
    // Stored raw, so each object takes its length: the shared blob counts once.
    let tree_len = store.object_size(&snaps[0].root.0).expect("present");
    let per_snapshot = 1000 + tree_len;
    let two = 500 + 2 * per_snapshot;
    let plan = |max: u64| {
        let policy = Retention {
            max_total_bytes: Some(max),
            ..Retention::default()
        };
        retain::plan(&store, &policy, now_ms()).expect("plans")
    };
    assert!(plan(500 + 4 * per_snapshot).is_empty(), "everything fits");
    assert_eq!(plan(500 + 4 * per_snapshot - 1), ids(&snaps[..1]));
    assert_eq!(plan(two), ids(&snaps[..2]));
    assert_eq!(plan(two - 1), ids(&snaps[..3]));
    assert_eq!(
        plan(0),
        ids(&snaps),
        "with nothing protected, everything goes"
    );
    let report = store
        .prune(
            &Retention {
                max_total_bytes: Some(two),
                ..Retention::default()
            },
            &no_grace(),
        )
        .expect("prunes");
    assert_eq!(report.deleted, ids(&snaps[..2]));
    assert_eq!(remaining(&store), ids(&snaps[2..]));
    assert_eq!(
        store.read_object(&snaps[3].blobs[0]).expect("reads").1,
        common
    );
}

#[test]
fn a_protected_snapshot_survives_every_rule() {
    let dir = temp();
    let store = open(dir.path());
    let now = now_ms();
    let protected = snapshot_with(&store, &[("f", b"keep me")], |root| {
        let mut m = manifest(root, Some("release"), now - 100 * DAY_MS);
        m.protected = true;
        m
    });
    let others = history(&store, 3, now, 1_000);
    let policy = Retention {
        count: Some(0),
        max_age: Some(Duration::from_secs(1)),
        max_total_bytes: Some(0),
    };
    let report = store.prune(&policy, &no_grace()).expect("prunes");
    assert_eq!(report.deleted, ids(&others));
    assert_eq!(remaining(&store), [protected.id]);
    assert_eq!(
        store.read_object(&protected.blobs[0]).expect("reads").1,
        b"keep me"
    );
    // An explicit delete removes even a protected snapshot.
    store
        .delete_snapshot(&protected.id, &no_grace())
        .expect("deletes");
    assert!(remaining(&store).is_empty());
    assert!(!store.contains(&protected.blobs[0]));
}

#[test]
fn a_snapshot_pinned_by_a_live_operation_survives_and_deleting_it_is_busy() {
    let dir = temp();
    let store = open(dir.path());
    let snaps = history(&store, 3, 3_000, 1_000);
    let pinned = &snaps[0];
    let op = store
        .begin_operation(OperationKind::Restore, &[pinned.id])
        .expect("begins");
    let report = prune_all(&store).expect("prunes");
    assert_eq!(report.deleted, ids(&snaps[1..]));
    assert!(
        report.gc.deferred,
        "the live operation defers the collection"
    );
    assert_eq!(remaining(&store), [pinned.id]);
    assert_eq!(
        kind(store.delete_snapshot(&pinned.id, &no_grace())),
        ErrorKind::Busy
    );
    assert!(store.has_snapshot(&pinned.id));
    drop(op);
    store
        .delete_snapshot(&pinned.id, &no_grace())
        .expect("deletes once released");
    assert!(remaining(&store).is_empty());
    for s in &snaps {
        assert!(!store.contains(&s.blobs[0]));
    }
}

#[test]
fn deleting_an_unknown_snapshot_is_not_found() {
    let dir = temp();
    let store = open(dir.path());
    let id = SnapshotId::from_hex(&"ab".repeat(32)).expect("an id");
    assert_eq!(
        kind(store.delete_snapshot(&id, &no_grace())),
        ErrorKind::NotFound
    );
}

#[test]
fn a_policy_of_all_none_keeps_everything() {
    let dir = temp();
    let store = open(dir.path());
    history(&store, 3, 3_000, 1_000);
    assert!(Retention::default().keeps_all());
    let report = store
        .prune(&Retention::default(), &no_grace())
        .expect("prunes");
    assert!(report.deleted.is_empty());
    assert_eq!(report.kept, 3);
}
