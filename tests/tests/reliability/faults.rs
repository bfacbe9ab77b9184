//! Faults: a full disk (a small tmpfs), permission denied (a child process run as another
//! user), a store made read-only (by its modes, and by a read-only mount), and objects
//! truncated or flipped on disk. Each gives a clear error of the right kind and leaves the
//! workspace and the store as they were: the store verifies (or reports exactly the damage
//! that was done to it), the files are unchanged, nothing is left half-done.
//!
//! The tests that need root (to mount, or to run a child as uid 65534) print why they are
//! skipped when run as a user.

use crate::child::eager_gc;
use crate::util::{
    child_command, copy_dir, figures, is_root, names, open_store, picture, populate, snapshot_ids,
    staged_leftovers, store_options, tree_picture, write, ws_options, Rng, Spawned, Tmpfs, WS_ID,
};
use cairn_restore::Workspace;
use cairn_store::{Classify, ErrorKind, SnapshotId};
use std::os::unix::process::CommandExt;
use std::path::Path;

fn kind<T, E: Classify>(r: Result<T, E>) -> Option<ErrorKind> {
    r.err().map(|e| e.kind())
}

fn available(dir: &Path) -> u64 {
    let st = rustix::fs::statvfs(dir).expect("statvfs");
    st.f_bavail * st.f_frsize as u64
}

/// Fills the file system of `dir` so that about `free` bytes stay available.
fn fill(dir: &Path, free: u64) {
    let filler = dir.join("filler");
    let _ = std::fs::remove_file(&filler);
    let have = available(dir);
    if have > free {
        let n = usize::try_from(have - free).expect("fits");
        // The filler may not fit exactly (page rounding): write what goes.
        let _ = std::fs::write(&filler, vec![0u8; n]);
    }
}

fn unfill(dir: &Path) {
    let _ = std::fs::remove_file(dir.join("filler"));
}

fn reset(from: &Path, to: &Path) {
    if to.exists() {
        let _ = std::process::Command::new("chmod")
            .args(["-R", "u+rwx"])
            .arg(to)
            .status();
        std::fs::remove_dir_all(to).expect("remove");
    }
    copy_dir(from, to);
}

fn pending_journals(ws: &Workspace) -> usize {
    ws.journals()
        .expect("journals")
        .iter()
        .filter(|j| j.state != cairn_restore::journal::State::Done)
        .count()
}

#[test]
fn a_full_disk_under_the_store_fails_a_snapshot_with_io_and_leaves_the_store_as_it_was() {
    let base = tempfile::tempdir().expect("tmp");
    let Some(disk) = Tmpfs::mount(&base.path().join("disk"), "2m") else {
        return;
    };
    let root = base.path().join("root");
    std::fs::create_dir_all(&root).expect("root");
    write(&root, "README", b"a small project\n");
    let store = disk.0.join("store");
    let template = base.path().join("store-template");
    {
        let ws = Workspace::open(&root, ws_options(&store)).expect("open");
        ws.snapshot(&ws.snapshot_options(), Default::default())
            .expect("first snapshot");
    }
    copy_dir(&store, &template);
    // New, incompressible content: a pack of about 600 KiB, an index, a manifest and a stat
    // cache of 300 records.
    let mut rng = Rng::new(11);
    for i in 0..300 {
        write(
            &root,
            &format!("data/{}/f{i}.bin", i % 10),
            &rng.bytes(2048),
        );
    }
    let files = picture(&root);
    let free0 = available(&disk.0);
    {
        let ws = Workspace::open(&root, ws_options(&store)).expect("open");
        ws.snapshot(&ws.snapshot_options(), Default::default())
            .expect("a snapshot with room");
    }
    let need = free0 - available(&disk.0);
    // Leave from nothing to all it needs free, finely near the end, where the manifest and
    // the stat cache are written.
    let mut targets: Vec<u64> = (0..10).map(|k| need * k / 10).collect();
    targets.extend((1..=24).map(|j| need.saturating_sub(j * 4096)));
    let (mut failed, mut succeeded) = (0, 0);
    for free in targets {
        reset(&template, &store);
        fill(&disk.0, free);
        let ws = Workspace::open(&root, ws_options(&store)).expect("open");
        let s = ws.store();
        let ids = snapshot_ids(s);
        let cache_path = cairn_snapshot::StatCache::path(s, WS_ID).expect("cache path");
        let cache = std::fs::read(&cache_path).expect("the stat cache");
        let what = format!("{free} bytes free of the {need} a snapshot needs");
        match ws.snapshot(&ws.snapshot_options(), Default::default()) {
            Ok(snap) => {
                succeeded += 1;
                assert!(s.has_snapshot(&snap.snapshot.id), "{what}");
                let m = s.read_manifest(&snap.snapshot.id).expect("manifest");
                assert_eq!(tree_picture(s, m.root), files, "{what}: exact");
            }
            Err(e) => {
                failed += 1;
                assert_eq!(e.kind(), ErrorKind::Io, "{what}: {e}");
                assert!(
                    e.to_string().contains("No space left"),
                    "{what}: the error says why: {e}"
                );
                assert_eq!(snapshot_ids(s), ids, "{what}: no new snapshot");
                assert_eq!(
                    std::fs::read(&cache_path).expect("cache"),
                    cache,
                    "{what}: the stat cache is unchanged"
                );
                assert_eq!(names(&s.layout().tmp), Vec::<String>::new(), "{what}: tmp/");
            }
        }
        assert!(s.live_operations().expect("markers").is_empty(), "{what}");
        let report = s.verify().expect("verify");
        assert!(report.is_ok(), "{what}: {report:?}");
        assert_eq!(picture(&root), files, "{what}: the files are untouched");
        unfill(&disk.0);
        ws.snapshot(&ws.snapshot_options(), Default::default())
            .unwrap_or_else(|e| panic!("{what}: with room again: {e}"));
    }
    assert!(
        failed > 0 && succeeded > 0,
        "{failed} failed, {succeeded} fit"
    );
    figures(
        "fault-full-disk-snapshot",
        &format!(
            "{} snapshots on a 2 MiB tmpfs left with 0 to {need} bytes free: {failed} failed \
             with IO (no space left) leaving no manifest, no temporary file and the stat cache \
             as it was; {succeeded} fit; every store verified and took a snapshot once space \
             was freed",
            failed + succeeded
        ),
    );
}

#[test]
fn a_full_disk_under_the_workspace_fails_a_restore_before_any_change_or_recovers_it() {
    let base = tempfile::tempdir().expect("tmp");
    let Some(disk) = Tmpfs::mount(&base.path().join("disk"), "2m") else {
        return;
    };
    let root = disk.0.join("root");
    std::fs::create_dir_all(&root).expect("root");
    let store = base.path().join("store");
    let mut rng = Rng::new(12);
    for i in 0..40 {
        write(
            &root,
            &format!("src/f{i}.txt"),
            format!("line {i}\n").as_bytes(),
        );
    }
    for i in 0..20 {
        write(
            &root,
            &format!("data/d{}/b{i}.bin", i % 4),
            &rng.bytes(40 * 1024),
        );
    }
    let ws = Workspace::open(&root, ws_options(&store)).expect("open");
    let target = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect("target")
        .snapshot
        .id;
    let target_files = picture(&root);
    std::fs::remove_dir_all(root.join("data")).expect("rm data");
    for i in 0..40 {
        write(&root, &format!("src/f{i}.txt"), b"edited\n");
    }
    ws.snapshot(&ws.snapshot_options(), Default::default())
        .expect("start");
    let start_files = picture(&root);
    drop(ws);
    let root_template = base.path().join("root-template");
    let store_template = base.path().join("store-template");
    copy_dir(&root, &root_template);
    copy_dir(&store, &store_template);
    let need = 20 * 40 * 1024 + 64 * 1024;
    let (mut before_change, mut recovered, mut succeeded) = (0, 0, 0);
    for k in 0..=12u64 {
        let free = need * k / 10;
        reset(&root_template, &root);
        reset(&store_template, &store);
        fill(&disk.0, free);
        let what = format!("{free} bytes free of about {need}");
        let ws = Workspace::open(&root, ws_options(&store)).expect("open");
        let ids = snapshot_ids(ws.store());
        match ws.restore(
            &target,
            &Default::default(),
            &Default::default(),
            Default::default(),
        ) {
            Ok(_) => {
                succeeded += 1;
                assert_eq!(picture(&root), target_files, "{what}");
            }
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Io, "{what}: {e}");
                // The error names the file it could not write (issue 34.6: it said <output>).
                let msg = e.to_string();
                assert!(
                    !msg.contains("<output>") && msg.contains(&*root.to_string_lossy()),
                    "{what}: the error names no path of the workspace: {msg}"
                );
                assert_eq!(staged_leftovers(&root), Vec::<String>::new(), "{what}");
                if pending_journals(&ws) == 0 {
                    before_change += 1;
                    assert_eq!(picture(&root), start_files, "{what}: nothing changed");
                    // What the store gained is the safety snapshot of these very files.
                    for id in snapshot_ids(ws.store()) {
                        if !ids.contains(&id) {
                            let m = ws.store().read_manifest(&id).expect("manifest");
                            assert_eq!(tree_picture(ws.store(), m.root), start_files);
                        }
                    }
                } else {
                    // It failed after changes began: the journal finishes it once there is room.
                    recovered += 1;
                    unfill(&disk.0);
                    let again = Workspace::open(&root, ws_options(&store)).expect("reopen");
                    assert!(again.recovered().iter().all(|r| r.completed), "{what}");
                    assert_eq!(picture(&root), target_files, "{what}: recovered");
                }
            }
        }
        let report = ws.store().verify().expect("verify");
        assert!(report.is_ok(), "{what}: {report:?}");
        unfill(&disk.0);
    }
    assert!(before_change > 0 && succeeded > 0);
    figures(
        "fault-full-disk-restore",
        &format!(
            "13 restores into a 2 MiB tmpfs left with 0 to 120% of the ~{} KiB they write: \
             {before_change} failed with IO before any change (files as they were, no staged \
             file), {recovered} failed after changes began and were finished by the journal once \
             space was freed, {succeeded} fit",
            need / 1024
        ),
    );
}

#[test]
fn a_store_on_a_read_only_mount_refuses_snapshots_and_restores_with_io_and_still_verifies() {
    let base = tempfile::tempdir().expect("tmp");
    let Some(disk) = Tmpfs::mount(&base.path().join("disk"), "8m") else {
        return;
    };
    let root = base.path().join("root");
    std::fs::create_dir_all(&root).expect("root");
    populate(&root, 0);
    let store = disk.0.join("store");
    let ws = Workspace::open(&root, ws_options(&store)).expect("open");
    let first = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect("snapshot")
        .snapshot
        .id;
    write(&root, "src/mod0/f0.rs", b"edited\n");
    drop(ws);
    let files = picture(&root);
    let stored = picture(&store);
    disk.remount(true);
    let ws = Workspace::open(&root, ws_options(&store)).expect("a read-only store opens");
    let e = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect_err("read-only");
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(e.to_string().contains("Read-only file system"), "{e}");
    let e = ws
        .restore(
            &first,
            &Default::default(),
            &Default::default(),
            Default::default(),
        )
        .expect_err("read-only");
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    let report = ws.store().verify().expect("verify reads a read-only store");
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(picture(&root), files, "the files are untouched");
    assert_eq!(picture(&store), stored, "the store is untouched");
    drop(ws);
    disk.remount(false);
    let ws = Workspace::open(&root, ws_options(&store)).expect("open");
    ws.snapshot(&ws.snapshot_options(), Default::default())
        .expect("writable again");
}

/// Runs the `try` child job as uid/gid 65534 on `dir` and returns its `RESULT` lines.
fn as_nobody(dir: &Path, ops: &str, snaps: &[SnapshotId]) -> Vec<String> {
    let mut cmd = child_command("try", dir);
    cmd.env("CAIRN_REL_OPS", ops)
        .env(
            "CAIRN_REL_SNAPS",
            snaps
                .iter()
                .map(|s| s.to_hex())
                .collect::<Vec<_>>()
                .join(","),
        )
        .uid(65534)
        .gid(65534);
    let mut child = Spawned::start(cmd);
    let status = child.wait();
    let (lines, err) = child.finish();
    assert!(
        status.success(),
        "the unprivileged child: {status}: {lines:?}\n{err}"
    );
    lines
        .into_iter()
        .filter_map(|l| l.strip_prefix("RESULT ").map(str::to_string))
        .collect()
}

fn chown_all(dir: &Path, uid: u32) {
    let status = std::process::Command::new("chown")
        .args(["-R", &format!("{uid}:{uid}")])
        .arg(dir)
        .status()
        .expect("chown");
    assert!(status.success());
}

fn chmod_all(dir: &Path, spec: &str) {
    let status = std::process::Command::new("chmod")
        .args(["-R", spec])
        .arg(dir)
        .status()
        .expect("chmod");
    assert!(status.success());
}

/// A directory another user can enter, holding `root/` (variant 0 then edited) and `store/`
/// with a snapshot of variant 0.
fn shared_dir() -> (tempfile::TempDir, SnapshotId) {
    let base = tempfile::tempdir().expect("tmp");
    std::fs::set_permissions(
        base.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let root = base.path().join("root");
    std::fs::create_dir_all(&root).expect("root");
    populate(&root, 0);
    let ws = crate::util::open_ws(base.path());
    let snap = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect("snapshot")
        .snapshot
        .id;
    write(&root, "src/mod1/f1.rs", b"edited\n");
    (base, snap)
}

fn results(lines: &[String]) -> Vec<(String, String)> {
    lines
        .iter()
        .map(|l| {
            let mut it = l.splitn(3, ' ');
            let op = it.next().unwrap_or_default().to_string();
            let kind = it.next().unwrap_or_default().to_string();
            (op, kind)
        })
        .collect()
}

#[test]
fn a_store_of_another_user_is_refused_with_denied_and_left_as_it_was() {
    if !is_root() {
        println!("skipped: running a child as another user needs root");
        return;
    }
    let (base, _) = shared_dir();
    chown_all(&base.path().join("root"), 65534);
    let stored = picture(&base.path().join("store"));
    let files = picture(&base.path().join("root"));
    let lines = as_nobody(base.path(), "snapshot", &[]);
    assert_eq!(
        results(&lines),
        vec![("open".into(), "DENIED".into())],
        "{lines:?}"
    );
    assert!(lines[0].contains("ermission denied"), "{lines:?}");
    assert_eq!(picture(&base.path().join("store")), stored);
    assert_eq!(picture(&base.path().join("root")), files);
}

#[test]
fn a_store_made_read_only_refuses_snapshots_and_restores_with_denied_and_changes_nothing() {
    if !is_root() {
        println!("skipped: running a child as another user needs root");
        return;
    }
    let (base, snap) = shared_dir();
    chown_all(base.path(), 65534);
    chmod_all(&base.path().join("store"), "a-w");
    let stored = picture(&base.path().join("store"));
    let files = picture(&base.path().join("root"));
    let lines = as_nobody(base.path(), "verify,snapshot", &[]);
    assert_eq!(
        results(&lines),
        vec![
            ("open".into(), "OK".into()),
            ("verify".into(), "OK".into()),
            ("snapshot".into(), "DENIED".into())
        ],
        "{lines:?}"
    );
    let lines = as_nobody(base.path(), "restore", &[snap]);
    assert_eq!(
        results(&lines),
        vec![
            ("open".into(), "OK".into()),
            ("restore".into(), "DENIED".into())
        ],
        "{lines:?}"
    );
    assert_eq!(picture(&base.path().join("store")), stored, "the store");
    assert_eq!(picture(&base.path().join("root")), files, "the files");
    assert!(staged_leftovers(&base.path().join("root")).is_empty());
}

#[test]
fn files_and_directories_of_another_user_skip_in_a_snapshot_and_deny_a_restore() {
    if !is_root() {
        println!("skipped: running a child as another user needs root");
        return;
    }
    let (base, _) = shared_dir();
    let root = base.path().join("root");
    write(&root, "theirs/a.txt", b"one\n");
    write(&root, "secret.txt", b"not yours\n");
    let target = {
        let ws = crate::util::open_ws(base.path());
        ws.snapshot(&ws.snapshot_options(), Default::default())
            .expect("snapshot")
            .snapshot
            .id
    };
    write(&root, "theirs/a.txt", b"two\n");
    chown_all(base.path(), 65534);
    for p in ["theirs", "theirs/a.txt", "secret.txt"] {
        std::os::unix::fs::lchown(root.join(p), Some(0), Some(0)).expect("chown");
    }
    std::fs::set_permissions(
        root.join("secret.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .expect("chmod");
    let files = picture(&root);
    let lines = as_nobody(base.path(), "snapshot,restore", &[target]);
    assert_eq!(
        results(&lines),
        vec![
            ("open".into(), "OK".into()),
            ("snapshot".into(), "OK".into()),
            ("restore".into(), "DENIED".into())
        ],
        "{lines:?}"
    );
    assert!(
        lines[2].contains("theirs"),
        "the error names the path: {lines:?}"
    );
    assert_eq!(picture(&root), files, "the files");
    // The store and the directory above it are the child's user's now: handed back to root to
    // be read here, since a store another user could change is refused (issue 53).
    std::os::unix::fs::chown(base.path(), Some(0), Some(0)).expect("chown");
    chown_all(&base.path().join("store"), 0);
    let store = open_store(&base.path().join("store"));
    let (list, _) = store.list_snapshots().expect("list");
    let last = list.last().expect("the child's snapshot");
    assert!(
        last.manifest
            .skipped
            .iter()
            .any(|s| s.path == b"secret.txt" && s.reason == cairn_store::SkipReason::Unreadable),
        "the unreadable file is recorded as skipped: {:?}",
        last.manifest.skipped
    );
    assert!(store.verify().expect("verify").is_ok());
}

/// How to damage a store.
#[derive(Debug, Clone, Copy)]
enum Damage {
    FlipBlob,
    TruncatePack,
    FlipLarge,
    TruncateLarge,
    FlipTree,
    FlipManifest,
    FlipIndex,
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).expect("read");
    let i = usize::try_from(at).expect("fits") % bytes.len();
    bytes[i] ^= 0x20;
    std::fs::write(path, bytes).expect("write");
}

fn truncate(path: &Path, len: u64) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open");
    f.set_len(len).expect("truncate");
}

/// Where `id` lies in a pack of `store`: the pack's path, its index's path and the entry.
fn in_pack(
    store: &cairn_store::Store,
    id: &cairn_store::ObjectId,
) -> (
    std::path::PathBuf,
    std::path::PathBuf,
    cairn_store::pack::IndexEntry,
) {
    for name in names(&store.layout().packs) {
        let Some(hex) = name.strip_suffix(".idx") else {
            continue;
        };
        let idx = store.layout().packs.join(&name);
        let index = cairn_store::pack::PackIndex::load(&idx).expect("index");
        if let Some(e) = index.lookup(id) {
            return (store.layout().packs.join(format!("{hex}.pack")), idx, e);
        }
    }
    panic!("object {id} is in no pack");
}

fn damage(store: &cairn_store::Store, snap: &SnapshotId, other: &SnapshotId, how: Damage) {
    let mine = tree_picture(store, store.read_manifest(snap).expect("m").root);
    let theirs = tree_picture(store, store.read_manifest(other).expect("m").root);
    let unique = |large: bool| {
        mine.iter()
            .filter_map(|(k, n)| match n {
                crate::util::Node::File(_, id) if !theirs.values().any(|t| t == n) => {
                    Some((k.clone(), *id))
                }
                _ => None,
            })
            .find(|(k, _)| k.starts_with(b"assets/") == large)
            .expect("a blob only this snapshot has")
            .1
    };
    match how {
        Damage::FlipBlob => {
            let (pack, _, e) = in_pack(store, &unique(false));
            flip(&pack, e.offset + 52 + e.stored_len / 2);
        }
        Damage::TruncatePack => {
            let (pack, _, e) = in_pack(store, &unique(false));
            truncate(&pack, e.offset + 52 + e.stored_len / 2);
        }
        Damage::FlipLarge => {
            let path = store.layout().large_path(&unique(true));
            flip(&path, 4000);
        }
        Damage::TruncateLarge => {
            let path = store.layout().large_path(&unique(true));
            let len = std::fs::metadata(&path).expect("stat").len();
            truncate(&path, len / 2);
        }
        Damage::FlipTree => {
            let root = store.read_manifest(snap).expect("m").root;
            let (pack, _, e) = in_pack(store, &root.0);
            flip(&pack, e.offset + 52 + e.stored_len / 2);
        }
        Damage::FlipManifest => flip(&store.layout().manifest_path(snap), 20),
        Damage::FlipIndex => {
            let (_, idx, _) = in_pack(store, &unique(false));
            flip(&idx, 2000);
        }
    }
}

#[test]
fn a_truncated_or_flipped_object_is_reported_refused_and_harms_nothing_else() {
    let base = tempfile::tempdir().expect("tmp");
    let template = base.path().join("template");
    std::fs::create_dir_all(template.join("root")).expect("root");
    let ws = crate::util::open_ws(&template);
    populate(&template.join("root"), 0);
    let damaged = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect("a")
        .snapshot
        .id;
    crate::util::clear(&template.join("root"));
    populate(&template.join("root"), 2);
    let sound = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect("b")
        .snapshot
        .id;
    let sound_picture = tree_picture(
        ws.store(),
        ws.store().read_manifest(&sound).expect("m").root,
    );
    drop(ws);
    let cases = [
        (Damage::FlipBlob, ErrorKind::Io),
        (Damage::TruncatePack, ErrorKind::Corrupt),
        (Damage::FlipLarge, ErrorKind::Io),
        (Damage::TruncateLarge, ErrorKind::Io),
        (Damage::FlipTree, ErrorKind::Corrupt),
        (Damage::FlipManifest, ErrorKind::Corrupt),
        (Damage::FlipIndex, ErrorKind::Corrupt),
    ];
    let mut lines = Vec::new();
    for (i, (how, restore_kind)) in cases.into_iter().enumerate() {
        let dir = base.path().join(format!("case-{i}"));
        copy_dir(&template, &dir);
        let what = format!("{how:?}");
        let store = open_store(&dir.join("store"));
        damage(&store, &damaged, &sound, how);
        drop(store);
        let ws = crate::util::open_ws(&dir);
        let files = picture(&dir.join("root"));
        let store = ws.store();
        let report = store.verify().expect("verify");
        assert!(!report.is_ok(), "{what}: verify sees the damage");
        let check = |id: &SnapshotId| {
            report
                .snapshots
                .iter()
                .find(|c| c.id == *id)
                .map(|c| c.is_ok())
        };
        assert_ne!(check(&damaged), Some(true), "{what}: the damaged snapshot");
        let sound_ok = check(&sound) == Some(true);
        // Restoring the damaged snapshot fails before any change.
        let r = ws.restore(
            &damaged,
            &Default::default(),
            &Default::default(),
            Default::default(),
        );
        assert_eq!(kind(r), Some(restore_kind), "{what}: restore");
        assert_eq!(picture(&dir.join("root")), files, "{what}: files unchanged");
        assert!(staged_leftovers(&dir.join("root")).is_empty(), "{what}");
        assert_eq!(pending_journals(&ws), 0, "{what}: nothing to recover");
        // Copying it fails and the other store gets no manifest.
        let other = cairn_store::Store::open(dir.join("dst"), store_options()).expect("dst");
        let r = store.copy_snapshot_to(&damaged, &other);
        let copy_kind = kind(r);
        assert!(
            copy_kind == Some(ErrorKind::Corrupt),
            "{what}: copy gave {copy_kind:?}"
        );
        assert!(!other.has_snapshot(&damaged), "{what}");
        assert!(other.verify().expect("verify").is_ok(), "{what}");
        // A collection keeps what is sound; a new snapshot of the files works.
        let gc = store.gc(&eager_gc()).expect("collects");
        assert!(!gc.deferred);
        if sound_ok {
            let report = store.verify().expect("verify");
            let c = report.snapshots.iter().find(|c| c.id == sound).expect("b");
            assert!(c.is_ok(), "{what}: the sound snapshot after a collection");
            let m = store.read_manifest(&sound).expect("m");
            assert_eq!(tree_picture(store, m.root), sound_picture, "{what}");
        }
        ws.snapshot(&ws.snapshot_options(), Default::default())
            .unwrap_or_else(|e| panic!("{what}: a snapshot after the damage: {e}"));
        lines.push(format!(
            "{what}: verify reports it{}, restore {restore_kind}, copy {}",
            if sound_ok {
                ", the other snapshot stays whole"
            } else {
                " (the other snapshot shares the damaged file)"
            },
            copy_kind.map(|k| k.name()).unwrap_or("ok")
        ));
        drop(ws);
    }
    figures("fault-damaged-objects", &lines.join("; "));
}

#[test]
fn a_thread_database_locked_by_another_process_gives_busy_and_changes_nothing() {
    use crate::child::{open_threads, rewind_with_files};
    use cairn_rewind::{AppendOptions, NewEntry, Threads, ThreadsOptions};
    let base = tempfile::tempdir().expect("tmp");
    let dir = base.path();
    let root = dir.join("root");
    std::fs::create_dir_all(&root).expect("root");
    let ws = std::sync::Arc::new(crate::util::open_ws(dir));
    let files: std::sync::Arc<dyn cairn_rewind::Files> = ws.clone();
    let with_ws = AppendOptions {
        workspace: Some(files.clone()),
        ..AppendOptions::default()
    };
    let threads = open_threads(dir, &ws);
    let thread = threads
        .create_thread(Some("chat".into()), serde_json::json!({}))
        .expect("thread")
        .id;
    populate(&root, 0);
    threads
        .append(&thread, NewEntry::user("one"), &with_ws)
        .expect("append");
    let a1 = threads
        .append(&thread, NewEntry::assistant("done"), &with_ws)
        .expect("append")
        .entry
        .id;
    write(&root, "src/mod0/f0.rs", b"edited\n");
    threads
        .append(&thread, NewEntry::user("two"), &with_ws)
        .expect("append");
    write(&root, "src/mod0/f0.rs", b"edited again\n");
    let entries = threads.entries(&thread, true).expect("entries").len();
    drop(threads);
    let files_before = picture(&root);
    let snapshots = snapshot_ids(ws.store());

    let quick = ThreadsOptions {
        busy_timeout: std::time::Duration::from_millis(300),
        workspaces: vec![files.clone()],
        checkpoints: Some(cairn_rewind::Checkpoints::default()),
        ..ThreadsOptions::default()
    };
    // A handle opened before the lock, and one opened while it is held.
    let t = Threads::open_in_store(dir.join("store"), quick.clone()).expect("open");
    let mut locker = Spawned::start(child_command("lock-db", dir));
    assert!(
        locker
            .wait_for("READY", std::time::Duration::from_secs(60))
            .is_some_and(|l| l.starts_with("READY")),
        "the locking process is ready"
    );
    let mut kinds = Vec::new();
    if let Err(e) = Threads::open_in_store(dir.join("store"), quick) {
        kinds.push(("open", e.kind(), e.to_string()));
    }
    let e = t
        .append(&thread, NewEntry::user("three"), &with_ws)
        .expect_err("the database is locked");
    kinds.push(("append", e.kind(), e.to_string()));
    let e = t
        .rewind(&thread, &a1, &rewind_with_files(&ws))
        .expect_err("the database is locked");
    kinds.push(("rewind", e.kind(), e.to_string()));
    drop(t);
    for (op, kind, message) in &kinds {
        assert_eq!(*kind, ErrorKind::Busy, "{op}: {message}");
        assert!(
            message.contains("lock") || message.contains("busy"),
            "{op}: {message}"
        );
    }
    assert_eq!(picture(&root), files_before, "the files are untouched");
    assert!(staged_leftovers(&root).is_empty());
    locker.kill();
    drop(locker);
    let threads = open_threads(dir, &ws);
    assert_eq!(
        threads.entries(&thread, true).expect("entries").len(),
        entries,
        "no entry was added"
    );
    let extra: Vec<SnapshotId> = snapshot_ids(ws.store())
        .into_iter()
        .filter(|id| !snapshots.contains(id))
        .collect();
    // The refused append had taken its checkpoint before it met the lock: a snapshot of the
    // files as they are, which no entry names (harmless; retention removes it).
    for id in &extra {
        let m = ws.store().read_manifest(id).expect("manifest");
        assert_eq!(tree_picture(ws.store(), m.root), files_before);
    }
    assert!(ws.store().verify().expect("verify").is_ok());
    // Unlocked, the same calls go through.
    threads
        .append(&thread, NewEntry::user("three"), &with_ws)
        .expect("append once unlocked");
    figures(
        "fault-locked-thread-db",
        &format!(
            "with another process holding an exclusive transaction on threads.db: {}; files \
             and entries unchanged; {} checkpoint snapshot(s) of the unchanged files left in \
             the store by the refused append, which no entry names; store verified; the same append went through once the lock was gone",
            kinds
                .iter()
                .map(|(op, k, _)| format!("{op} {k}"))
                .collect::<Vec<_>>()
                .join(", "),
            extra.len()
        ),
    );
}
