//! Operation markers and `gc.lock`: a collection defers while any process holds a marker, and a
//! marker dies with its process.

use crate::util::{
    files_ending, helper, helper_dir, no_grace, open, snapshot, temp, wait_for, write_unreachable,
    KillOnDrop,
};
use cairn_store::fsutil::{self, LockMode};
use cairn_store::{OperationKind, Store, StoreOptions};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(60);

/// The child side: holds an operation marker on `<dir>/store` until it is killed.
#[test]
#[ignore = "a helper: run by a_collection_is_deferred_while_another_process_holds_a_marker"]
fn helper_holds_an_operation_marker_until_killed() {
    let Some(dir) = helper_dir() else { return };
    let store = Store::open(dir.join("store"), StoreOptions::default()).expect("opens");
    let _op = store
        .begin_operation(OperationKind::Snapshot, &[])
        .expect("begins");
    // Sleep until killed; give up after ten minutes so an orphan cannot linger forever.
    for _ in 0..600 {
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn a_collection_is_deferred_while_another_process_holds_a_marker_and_runs_after_it_is_killed() {
    let dir = temp();
    let store = open(dir.path());
    let live = snapshot(&store, &[("a", b"live\n")], None, 1);
    let dead = write_unreachable(&store, &[b"dead 1", b"dead 2"]);
    let packs_before = files_ending(&store.layout().packs, ".pack");

    let mut child = KillOnDrop(
        helper(
            "lock::helper_holds_an_operation_marker_until_killed",
            dir.path(),
        )
        .spawn()
        .expect("the helper starts"),
    );
    let locks = store.layout().locks.clone();
    wait_for("the child's marker", TIMEOUT, || {
        if let Some(status) = child.0.try_wait().expect("waits") {
            panic!("the helper exited early: {status}");
        }
        !files_ending(&locks, ".marker").is_empty()
    });
    let ops = store.live_operations().expect("lists");
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].pid, child.0.id());
    assert_eq!(ops[0].kind, OperationKind::Snapshot);

    let report = store.gc(&no_grace()).expect("collects");
    assert!(report.deferred);
    assert_eq!(report.objects_deleted, 0);
    assert!(report.plan.delete_packs.is_empty());
    assert_eq!(files_ending(&store.layout().packs, ".pack"), packs_before);
    assert!(dead.iter().all(|id| store.contains(id)));

    // SIGKILL: the child cannot clean up, but the kernel drops its flock.
    child.0.kill().expect("kills");
    child.0.wait().expect("reaps");
    assert_eq!(
        files_ending(&locks, ".marker").len(),
        1,
        "the marker outlives its process"
    );

    let report = store.gc(&no_grace()).expect("collects");
    assert!(!report.deferred);
    assert_eq!(report.objects_deleted, 2);
    assert!(dead.iter().all(|id| !store.contains(id)));
    assert!(
        files_ending(&locks, ".marker").is_empty(),
        "the stale marker is removed"
    );
    assert!(store.live_operations().expect("lists").is_empty());
    assert_eq!(
        store.read_object(&live.blobs[0]).expect("reads").1,
        b"live\n"
    );
}

#[test]
fn a_marker_held_in_this_process_defers_a_collection_until_dropped() {
    let dir = temp();
    let store = open(dir.path());
    let dead = write_unreachable(&store, &[b"dead"]);
    let op = store
        .begin_operation(OperationKind::Restore, &[])
        .expect("begins");
    // Through another handle on the same store, as another thread would.
    let other = Store::open(store.path(), StoreOptions::default()).expect("reopens");
    let report = other.gc(&no_grace()).expect("collects");
    assert!(report.deferred);
    assert!(store.contains(&dead[0]));
    drop(op);
    assert!(files_ending(&store.layout().locks, ".marker").is_empty());
    let report = other.gc(&no_grace()).expect("collects");
    assert!(!report.deferred);
    assert_eq!(report.objects_deleted, 1);
    store.refresh().expect("refreshes");
    assert!(!store.contains(&dead[0]));
}

#[test]
fn begin_operation_waits_while_a_collection_holds_gc_lock() {
    let dir = temp();
    let store = open(dir.path());
    let path = store.layout().locks.join("gc.lock");
    let gc_lock = fsutil::open_lock_file(&path).expect("opens");
    assert!(fsutil::flock(&gc_lock, LockMode::Exclusive, false, &path).expect("locks"));
    let (tx, rx) = std::sync::mpsc::channel();
    let s = store.clone();
    let t = std::thread::spawn(move || {
        let op = s.begin_operation(OperationKind::Snapshot, &[]);
        tx.send(op.is_ok()).expect("sends");
        op
    });
    // While the lock is held no marker may register. (A broken lock would show here at once;
    // a working one can only be seen to wait, so this check cannot fail spuriously.)
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    assert!(files_ending(&store.layout().locks, ".marker").is_empty());
    drop(gc_lock);
    assert!(rx.recv_timeout(TIMEOUT).expect("begins once released"));
    let op = t.join().expect("joins").expect("begins");
    assert_eq!(files_ending(&store.layout().locks, ".marker").len(), 1);
    assert_eq!(op.info().pid, std::process::id());
}

#[test]
fn a_released_lock_is_free_again_though_a_forked_child_still_holds_a_copy_of_its_descriptor() {
    // A child forked by another thread between fork and exec holds a copy of every open
    // descriptor, and so of the lock's open file description; a duplicated descriptor stands
    // in for it here. Closing our descriptor would leave the lock taken until the child execs
    // (a restore right after another then failed with BUSY under load: issue 18).
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("restore-x.lock");
    let held = cairn_store::fsutil::try_lock_exclusive(&path)
        .expect("lock")
        .expect("free");
    let childs_copy = held.file().try_clone().expect("dup");
    drop(held);
    let again = cairn_store::fsutil::try_lock_exclusive(&path).expect("lock");
    assert!(again.is_some(), "the lock was released for every copy");
    drop(childs_copy);
}
