//! Attacks: nothing outside the root changes, ever.

use crate::fixtures::{picture, Fx};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn outside(fx: &Fx) -> std::path::PathBuf {
    let o = fx.dir.path().join("outside");
    std::fs::create_dir_all(&o).expect("outside");
    std::fs::write(o.join("secret.txt"), b"secret").expect("write");
    o
}

#[test]
fn a_symlink_planted_where_a_file_will_be_written_is_replaced_not_followed() {
    let fx = Fx::new();
    fx.write("f.txt", b"snapshot content");
    let snap = fx.snap();
    let out = outside(&fx);
    std::fs::remove_file(fx.root().join("f.txt")).expect("rm");
    std::os::unix::fs::symlink(out.join("secret.txt"), fx.root().join("f.txt")).expect("plant");
    let before = picture(&out);
    fx.ws
        .restore(
            &snap.id,
            &Default::default(),
            &Default::default(),
            Default::default(),
        )
        .expect("restore");
    assert_eq!(picture(&out), before);
    assert_eq!(fx.read("f.txt"), b"snapshot content");
    assert!(!std::fs::symlink_metadata(fx.root().join("f.txt"))
        .expect("lstat")
        .file_type()
        .is_symlink());
}

#[test]
fn a_hard_link_to_a_file_outside_is_replaced_and_the_outside_file_is_untouched() {
    let fx = Fx::new();
    fx.write("f.txt", b"snapshot content");
    let snap = fx.snap();
    let out = outside(&fx);
    std::fs::remove_file(fx.root().join("f.txt")).expect("rm");
    std::fs::hard_link(out.join("secret.txt"), fx.root().join("f.txt")).expect("link");
    fx.write("extra.txt", b"to delete");
    std::fs::remove_file(fx.root().join("extra.txt")).expect("rm");
    std::fs::hard_link(out.join("secret.txt"), fx.root().join("extra.txt")).expect("link");
    let before = picture(&out);
    fx.ws
        .restore(
            &snap.id,
            &Default::default(),
            &Default::default(),
            Default::default(),
        )
        .expect("restore");
    assert_eq!(picture(&out), before);
    assert_eq!(
        std::fs::read(out.join("secret.txt")).expect("read"),
        b"secret"
    );
    assert_eq!(fx.read("f.txt"), b"snapshot content");
    assert!(!fx.root().join("extra.txt").exists());
}

#[test]
fn a_parent_directory_swapped_for_a_symlink_while_a_restore_runs_never_leads_outside() {
    for round in 0..20 {
        let fx = Fx::new();
        for i in 0..40 {
            fx.write(&format!("d/f{i}.txt"), format!("content {i}").as_bytes());
        }
        let snap = fx.snap();
        for i in 0..40 {
            fx.write(&format!("d/f{i}.txt"), b"edited");
        }
        fx.write("d/new.txt", b"new");
        let out = outside(&fx);
        for i in 0..40 {
            std::fs::write(out.join(format!("f{i}.txt")), b"outside").expect("write");
        }
        std::fs::write(out.join("new.txt"), b"outside").expect("write");
        let before = picture(&out);
        let stop = Arc::new(AtomicBool::new(false));
        let racer = {
            let stop = stop.clone();
            let root = fx.root();
            let out = out.clone();
            std::thread::spawn(move || {
                let d = root.join("d");
                let aside = root.join("d.aside");
                while !stop.load(Ordering::Relaxed) {
                    if std::fs::rename(&d, &aside).is_ok() {
                        let _ = std::os::unix::fs::symlink(&out, &d);
                        std::thread::yield_now();
                        let _ = std::fs::remove_file(&d);
                        let _ = std::fs::rename(&aside, &d);
                    }
                }
            })
        };
        // The restore may succeed or fail; either way nothing outside may change.
        let _ = fx.ws.restore(
            &snap.id,
            &Default::default(),
            &Default::default(),
            Default::default(),
        );
        stop.store(true, Ordering::Relaxed);
        racer.join().expect("racer");
        assert_eq!(
            picture(&out),
            before,
            "round {round}: something outside the root changed"
        );
    }
}

/// Content, permission bits and modification time of a file: what a restore must never
/// change outside the root.
fn state(p: &std::path::Path) -> (Vec<u8>, u32, i128) {
    use std::os::unix::fs::PermissionsExt;
    let m = std::fs::metadata(p).expect("stat");
    (
        std::fs::read(p).expect("read"),
        m.permissions().mode() & 0o7777,
        crate::fixtures::mtime_ns(p),
    )
}

#[test]
fn mode_content_and_delete_changes_on_paths_hard_linked_outside_leave_the_outside_files_untouched()
{
    use std::os::unix::fs::PermissionsExt;
    for refuse_hard_links in [false, true] {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::create_dir(dir.path().join("root")).expect("root");
        let ws = cairn_restore::Workspace::open(
            dir.path().join("root"),
            cairn_restore::WorkspaceOptions {
                store: Some(dir.path().join("store")),
                capture: cairn_snapshot::CaptureSettings {
                    refuse_hard_links,
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .expect("open");
        let root = ws.root().to_path_buf();
        std::fs::write(root.join("modeonly"), b"same\n").expect("write");
        crate::fixtures::chmod(&root.join("modeonly"), 0o755);
        std::fs::write(root.join("content"), b"snapshot content\n").expect("write");
        let snap = ws
            .snapshot(&ws.snapshot_options(), Default::default())
            .expect("snapshot");
        // Planted: hard links to files outside the root, one with the same content as the
        // snapshot (only its mode differs), one with other content, one where nothing was.
        let out = dir.path().join("outside");
        std::fs::create_dir(&out).expect("outside");
        std::fs::write(out.join("same"), b"same\n").expect("write");
        crate::fixtures::chmod(&out.join("same"), 0o600);
        std::fs::write(out.join("other"), b"a key\n").expect("write");
        crate::fixtures::chmod(&out.join("other"), 0o600);
        std::fs::write(out.join("gone"), b"another key\n").expect("write");
        crate::fixtures::chmod(&out.join("gone"), 0o600);
        for (inside, outside) in [("modeonly", "same"), ("content", "other")] {
            std::fs::remove_file(root.join(inside)).expect("rm");
            std::fs::hard_link(out.join(outside), root.join(inside)).expect("link");
        }
        std::fs::hard_link(out.join("gone"), root.join("extra")).expect("link");
        let before: Vec<_> = ["same", "other", "gone"]
            .iter()
            .map(|n| state(&out.join(n)))
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let r = ws.restore(
            &snap.snapshot.id,
            &Default::default(),
            &Default::default(),
            Default::default(),
        );
        if refuse_hard_links {
            // Under refuse_hard_links the safety snapshot cannot read those paths, so the
            // restore refuses them before any change.
            let e = r.expect_err("refused");
            assert_eq!(
                cairn_store::Classify::kind(&e),
                cairn_store::ErrorKind::Denied,
                "{e}"
            );
        } else {
            r.expect("restore");
        }
        let after: Vec<_> = ["same", "other", "gone"]
            .iter()
            .map(|n| state(&out.join(n)))
            .collect();
        assert_eq!(
            after, before,
            "refuse_hard_links {refuse_hard_links}: outside files"
        );
        let what = format!("refuse_hard_links {refuse_hard_links}");
        if !refuse_hard_links {
            assert_eq!(
                std::fs::read(root.join("modeonly")).expect("read"),
                b"same\n"
            );
            let m = std::fs::metadata(root.join("modeonly")).expect("stat");
            assert_eq!(m.permissions().mode() & 0o777, 0o755, "{what}");
            use std::os::unix::fs::MetadataExt;
            assert_eq!(m.nlink(), 1, "{what}: the link is broken");
            assert_eq!(
                std::fs::read(root.join("content")).expect("read"),
                b"snapshot content\n"
            );
            assert!(!root.join("extra").exists(), "{what}");
        }
    }
}

#[test]
fn an_open_workspace_writes_nothing_through_store_directories_swapped_for_symlinks() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::create_dir(dir.path().join("root")).expect("root");
    let store_dir = dir.path().join("store");
    let ws = cairn_restore::Workspace::open(
        dir.path().join("root"),
        cairn_restore::WorkspaceOptions {
            store: Some(store_dir.clone()),
            ..Default::default()
        },
    )
    .expect("open");
    std::fs::write(ws.root().join("a.txt"), b"one\n").expect("write");
    let first = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect("snapshot");
    ws.flush_stat_cache();
    // While the handle stays open, two of the store's directories become symlinks to a
    // directory outside it.
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).expect("outside");
    for d in ["objects/packs", "snapshots"] {
        let real = store_dir.join(d);
        let aside = dir.path().join(d.replace('/', "-"));
        std::fs::rename(&real, &aside).expect("move aside");
        std::os::unix::fs::symlink(&outside, &real).expect("symlink");
    }
    std::fs::write(ws.root().join("a.txt"), b"two, a change to store\n").expect("write");
    let e = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect_err("refused while a store directory is a symlink");
    assert_eq!(
        cairn_store::Classify::kind(&e),
        cairn_store::ErrorKind::Corrupt,
        "{e}"
    );
    let written: Vec<_> = std::fs::read_dir(&outside)
        .expect("outside")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(written.is_empty(), "nothing written outside: {written:?}");
    let r = ws.restore(
        &first.snapshot.id,
        &Default::default(),
        &Default::default(),
        Default::default(),
    );
    assert!(r.is_err(), "a restore is refused too");
    assert_eq!(
        std::fs::read(ws.root().join("a.txt")).expect("read"),
        b"two, a change to store\n"
    );
}
