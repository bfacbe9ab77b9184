//! The remote mirror against object_store's in-memory and local-directory backends.

mod common;

use cairn_remote::{ObjectStoreRemote, RemoteOptions};
use cairn_store::remote::{RemoteGcOptions, RemoteStats};
use cairn_store::{Classify, ErrorKind, ObjectKind, OperationKind, Remote, Store};
use common::*;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use std::sync::Arc;
use std::time::Duration;

fn memory_remote() -> Arc<ObjectStoreRemote> {
    ObjectStoreRemote::new(
        Arc::new(InMemory::new()),
        ObjectPath::from("fleet/one"),
        "memory:///fleet/one".into(),
    )
    .expect("remote")
}

/// Collector options with `grace` and clocks taken as equal (one machine).
fn gc_options(grace: Duration) -> RemoteGcOptions {
    RemoteGcOptions {
        grace,
        clock_skew: Duration::ZERO,
        dry_run: false,
    }
}

/// Writes `bytes` as a blob no manifest names (garbage, unless a snapshot names it later).
fn put_unnamed(store: &Store, bytes: &[u8]) {
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("op");
    let w = store.writer(&op);
    w.put(ObjectKind::Blob, bytes).expect("put");
    w.commit().expect("commit");
}

fn keys(remote: &ObjectStoreRemote, prefix: &str) -> Vec<String> {
    remote
        .list(prefix)
        .expect("list")
        .into_iter()
        .map(|o| o.key)
        .collect()
}

#[test]
fn a_snapshot_taken_on_one_cache_restores_byte_for_byte_from_another_that_shares_only_the_remote() {
    let dir = tempfile::tempdir().expect("tmp");
    let remote = memory_remote();
    let a = workspace(
        &dir.path().join("a"),
        &dir.path().join("cache-a"),
        "agent",
        options_over(remote.clone()),
    );
    populate(a.root(), 40);
    let snap = a
        .snapshot(&a.snapshot_options(), Default::default())
        .expect("snapshot");
    let b = workspace(
        &dir.path().join("b"),
        &dir.path().join("cache-b"),
        "agent",
        options_over(remote.clone()),
    );
    assert!(
        b.store().has_snapshot(&snap.snapshot.id),
        "B sees A's snapshot"
    );
    b.restore(
        &snap.snapshot.id,
        &Default::default(),
        &Default::default(),
        Default::default(),
    )
    .expect("restore on B");
    assert_same_tree(a.root(), b.root());
    // B downloaded the pack and the large object it needed into its own cache.
    assert!(std::fs::read_dir(dir.path().join("cache-b/objects/packs"))
        .expect("packs")
        .any(|e| e
            .expect("entry")
            .path()
            .extension()
            .is_some_and(|x| x == "pack")));
}

#[test]
fn a_per_message_snapshot_with_a_warm_stat_cache_uploads_one_pack_and_one_manifest() {
    let dir = tempfile::tempdir().expect("tmp");
    let remote = memory_remote();
    let a = workspace(
        &dir.path().join("a"),
        &dir.path().join("cache"),
        "agent",
        options_over(remote.clone()),
    );
    populate(a.root(), 60);
    a.snapshot(&a.snapshot_options(), Default::default())
        .expect("first snapshot");
    edit(a.root(), 10, 1);
    let packs_before = keys(&remote, "packs/").len();
    let before = remote.stats();
    let snap = a
        .snapshot(&a.snapshot_options(), Default::default())
        .expect("per-message snapshot");
    let d: RemoteStats = remote.stats().since(&before);
    assert_eq!(
        keys(&remote, "packs/").len(),
        packs_before + 2,
        "one pack and its index"
    );
    assert!(
        keys(&remote, "snapshots/").contains(&format!("snapshots/{}", snap.snapshot.id.to_hex()))
    );
    // pack + index + manifest + the lease (taken, then deleted), and the writer's refresh
    // (LIST packs/ and large/, GET gc/candidates).
    assert_eq!(d.puts, 4, "{d:?}");
    assert_eq!(d.deletes, 1, "{d:?}");
    assert_eq!((d.lists, d.gets), (2, 1), "{d:?}");
    assert_eq!(d.requests, 8, "{d:?}");
}

#[test]
fn a_remote_manifest_is_uploaded_only_after_the_pack_and_index_it_names() {
    let dir = tempfile::tempdir().expect("tmp");
    let remote = memory_remote();
    let store = Store::open(dir.path().join("cache"), options_over(remote.clone())).expect("open");
    let ws = workspace(
        &dir.path().join("w"),
        &dir.path().join("cache"),
        "w",
        options_over(remote.clone()),
    );
    std::fs::write(ws.root().join("f"), b"content").expect("file");
    let snap = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect("snapshot");
    // Every object the manifest reaches can be read through a fresh cache.
    let fresh = Store::open(dir.path().join("fresh"), options_over(remote.clone())).expect("open");
    let m = fresh.read_manifest(&snap.snapshot.id).expect("manifest");
    assert!(fresh.read_tree(&m.root).is_ok());
    drop(store);
}

#[test]
fn opening_a_bad_url_is_an_invalid_argument() {
    let dir = tempfile::tempdir().expect("tmp");
    let e = cairn_remote::open("nope://x/y", dir.path(), &RemoteOptions::default())
        .expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("s3://bucket/prefix"), "{e}");
}

#[test]
fn a_bad_url_with_credentials_in_it_is_refused_without_showing_them() {
    let dir = tempfile::tempdir().expect("tmp");
    for url in [
        "nosuch://agent:hunter2@bucket/x?token=hunter3",
        "not a url @hunter2",
    ] {
        let e = cairn_remote::open(url, dir.path().join("c"), &RemoteOptions::default())
            .expect_err("refused");
        let msg = e.to_string();
        assert!(
            !msg.contains("hunter2") && !msg.contains("hunter3"),
            "{url}: {msg}"
        );
    }
    assert_eq!(
        cairn_remote::redacted("s3://agent:hunter2@bucket/x?token=t"),
        "s3://bucket/x"
    );
}

#[test]
fn a_store_url_of_a_local_directory_mirrors_into_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let remote_dir = dir.path().join("remote");
    std::fs::create_dir_all(&remote_dir).expect("dir");
    let url = format!("file://{}", remote_dir.display());
    let store = cairn_remote::open(&url, dir.path().join("cache"), &RemoteOptions::default())
        .expect("open");
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("op");
    let w = store.writer(&op);
    let put = w.put(ObjectKind::Blob, b"hello\n").expect("put");
    w.commit().expect("commit");
    let packs: Vec<_> = std::fs::read_dir(remote_dir.join("packs"))
        .expect("remote packs")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    assert_eq!(packs.len(), 2, "{packs:?}");
    let other = cairn_remote::open(&url, dir.path().join("cache2"), &RemoteOptions::default())
        .expect("open");
    assert_eq!(other.read_object(&put.id).expect("read").1, b"hello\n");
}

#[test]
fn copy_snapshot_works_from_a_local_store_to_a_remote_one_and_back() {
    let dir = tempfile::tempdir().expect("tmp");
    let remote = memory_remote();
    let local_ws = cairn_restore::Workspace::open(
        {
            let r = dir.path().join("local");
            std::fs::create_dir_all(&r).expect("root");
            populate(&r, 20);
            r
        },
        cairn_restore::WorkspaceOptions {
            store: Some(dir.path().join("local-store")),
            ..Default::default()
        },
    )
    .expect("local workspace");
    let snap = local_ws
        .snapshot(&local_ws.snapshot_options(), Default::default())
        .expect("snapshot");
    let remote_store =
        Store::open(dir.path().join("cache"), options_over(remote.clone())).expect("open");
    let report =
        cairn_store::copy::copy_snapshot(local_ws.store(), &snap.snapshot.id, &remote_store)
            .expect("copy to remote");
    assert!(report.objects_copied > 0);
    assert!(
        keys(&remote, "snapshots/").contains(&format!("snapshots/{}", snap.snapshot.id.to_hex()))
    );
    // Back, from a cache that has nothing yet, into a new local store.
    let other_cache =
        Store::open(dir.path().join("cache2"), options_over(remote.clone())).expect("open");
    let back = Store::open(dir.path().join("back"), Default::default()).expect("local");
    cairn_store::copy::copy_snapshot(&other_cache, &snap.snapshot.id, &back).expect("copy back");
    let checks = cairn_store::verify::verify(&back).expect("verify");
    assert!(checks.is_ok(), "{checks:?}");
    assert!(back.has_snapshot(&snap.snapshot.id));
    assert!(back.remote().is_none());
}

#[test]
fn the_remote_collector_marks_first_and_deletes_only_after_the_grace_period() {
    let dir = tempfile::tempdir().expect("tmp");
    let remote = memory_remote();
    let store = Store::open(dir.path().join("cache"), options_over(remote.clone())).expect("open");
    // An unreachable pack (objects written, no manifest) and a snapshot.
    put_unnamed(&store, b"garbage nobody names");
    let ws = workspace(
        &dir.path().join("w"),
        &dir.path().join("cache"),
        "w",
        options_over(remote.clone()),
    );
    populate(ws.root(), 5);
    let snap = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect("snapshot");
    let opts = gc_options(Duration::from_millis(300));
    let packs = keys(&remote, "packs/").len();
    let r1 = store.collect_remote(&opts).expect("collect");
    assert_eq!(r1.packs_deleted, 0, "first pass only marks: {r1:?}");
    assert_eq!(r1.candidates, 1, "{r1:?}");
    assert_eq!(keys(&remote, "packs/").len(), packs);
    std::thread::sleep(Duration::from_millis(700));
    let r2 = store.collect_remote(&opts).expect("collect");
    assert_eq!(r2.packs_deleted, 1, "{r2:?}");
    assert_eq!(keys(&remote, "packs/").len(), packs - 2);
    let fresh = Store::open(dir.path().join("fresh"), options_over(remote.clone())).expect("open");
    let checks = cairn_store::verify::verify(&fresh).expect("verify");
    assert!(checks.is_ok(), "{checks:?}");
    assert!(fresh.has_snapshot(&snap.snapshot.id));
}

#[test]
fn a_live_lease_older_than_the_marking_keeps_a_candidate() {
    let dir = tempfile::tempdir().expect("tmp");
    let remote = memory_remote();
    let store = Store::open(dir.path().join("cache"), options_over(remote.clone())).expect("open");
    put_unnamed(&store, b"reused later, maybe");
    // An operation on another machine begins before the candidate is marked.
    let other = Store::open(dir.path().join("other"), options_over(remote.clone())).expect("open");
    let long_op = other
        .begin_operation(OperationKind::Snapshot, &[])
        .expect("op");
    let opts = gc_options(Duration::from_millis(200));
    store.collect_remote(&opts).expect("mark");
    std::thread::sleep(Duration::from_millis(500));
    let r = store.collect_remote(&opts).expect("collect");
    assert_eq!(r.packs_deleted, 0, "{r:?}");
    assert_eq!(r.kept_for_leases, 1, "{r:?}");
    drop(long_op);
    let r = store.collect_remote(&opts).expect("collect");
    assert_eq!(r.packs_deleted, 1, "{r:?}");
}

#[test]
fn a_writer_does_not_reuse_an_object_marked_for_deletion() {
    let dir = tempfile::tempdir().expect("tmp");
    let remote = memory_remote();
    let store = Store::open(dir.path().join("cache"), options_over(remote.clone())).expect("open");
    let bytes = b"an object a collection marked";
    put_unnamed(&store, bytes);
    let opts = gc_options(Duration::from_secs(3600));
    assert_eq!(store.collect_remote(&opts).expect("mark").candidates, 1);
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("op");
    let w = store.writer(&op);
    let put = w.put(ObjectKind::Blob, bytes).expect("put");
    assert!(
        put.written,
        "the marked copy is not reused: a new one is written"
    );
    w.commit().expect("commit");
}

#[test]
fn a_local_collection_of_a_remote_cache_is_refused_and_points_to_the_remote_collector() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = Store::open(dir.path().join("cache"), options_over(memory_remote())).expect("open");
    let e = cairn_store::gc::sweep(&store, &Default::default()).expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.to_string().contains("remote::collect"), "{e}");
}

/// A remote whose listings fail while `fail` is set (a refresh that cannot reach it).
#[derive(Debug)]
struct Flaky {
    inner: Arc<ObjectStoreRemote>,
    fail: std::sync::atomic::AtomicBool,
}

impl Remote for Flaky {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn put(&self, key: &str, bytes: Vec<u8>) -> cairn_store::Result<()> {
        self.inner.put(key, bytes)
    }
    fn put_file(&self, key: &str, path: &std::path::Path) -> cairn_store::Result<()> {
        self.inner.put_file(key, path)
    }
    fn get(&self, key: &str) -> cairn_store::Result<Option<(Vec<u8>, i64)>> {
        self.inner.get(key)
    }
    fn get_to_file(&self, key: &str, path: &std::path::Path) -> cairn_store::Result<bool> {
        self.inner.get_to_file(key, path)
    }
    fn list(&self, prefix: &str) -> cairn_store::Result<Vec<cairn_store::RemoteObject>> {
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(cairn_store::Error::Remote {
                action: format!("list {prefix}"),
                location: self.location(),
                detail: "unreachable (test)".into(),
                kind: ErrorKind::Io,
            });
        }
        self.inner.list(prefix)
    }
    fn delete(&self, key: &str) -> cairn_store::Result<()> {
        self.inner.delete(key)
    }
    fn stats(&self) -> RemoteStats {
        self.inner.stats()
    }
}

#[test]
fn a_writer_whose_refresh_fails_reuses_nothing_since_it_cannot_know_what_a_collection_marked() {
    let dir = tempfile::tempdir().expect("tmp");
    let flaky = Arc::new(Flaky {
        inner: memory_remote(),
        fail: std::sync::atomic::AtomicBool::new(false),
    });
    let store = Store::open(dir.path().join("cache"), options_over(flaky.clone())).expect("open");
    put_unnamed(&store, b"stored and uploaded");
    let put_again = |fail: bool| {
        flaky.fail.store(fail, std::sync::atomic::Ordering::SeqCst);
        let op = store
            .begin_operation(OperationKind::Write, &[])
            .expect("op");
        let w = store.writer(&op);
        let put = w
            .put(ObjectKind::Blob, b"stored and uploaded")
            .expect("put");
        w.commit().expect("commit");
        put.written
    };
    assert!(
        put_again(true),
        "written again rather than reused on a stale view"
    );
    assert!(!put_again(false), "reused once the view is fresh");
}

#[test]
fn trimming_the_cache_removes_the_least_recent_remote_packs_and_reads_fetch_them_again() {
    let dir = tempfile::tempdir().expect("tmp");
    let remote = memory_remote();
    let ws = workspace(
        &dir.path().join("w"),
        &dir.path().join("cache"),
        "w",
        options_over(remote.clone()),
    );
    populate(ws.root(), 30);
    let first = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect("snapshot");
    edit(ws.root(), 5, 1);
    let second = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect("snapshot");
    let store = ws.store();
    let all = store.trim_cache(u64::MAX).expect("trim nothing");
    assert_eq!(all.removed_files, 0);
    assert!(all.cached_bytes > 0);
    let trimmed = store.trim_cache(0).expect("trim all");
    assert!(
        trimmed.removed_files >= 3,
        "two packs and a large object: {trimmed:?}"
    );
    assert_eq!(trimmed.cached_bytes, 0);
    // Reads fetch what they need again, and the snapshots restore whole.
    let before = remote.stats();
    let out = dir.path().join("out");
    let other = workspace(
        &out,
        &dir.path().join("cache"),
        "out",
        options_over(remote.clone()),
    );
    other
        .restore(
            &first.snapshot.id,
            &Default::default(),
            &Default::default(),
            Default::default(),
        )
        .expect("restore");
    assert!(remote.stats().since(&before).bytes_received > 0);
    other
        .restore(
            &second.snapshot.id,
            &Default::default(),
            &Default::default(),
            Default::default(),
        )
        .expect("restore");
    assert_same_tree(ws.root(), &out);
    // A store without a remote holds the only copy: it is never trimmed.
    let local = Store::open(dir.path().join("local"), Default::default()).expect("open");
    let e = local.trim_cache(0).expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Unsupported);
}
