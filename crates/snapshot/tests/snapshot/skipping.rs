//! What a snapshot skips, and says so; what a failed or cancelled snapshot leaves behind.

use crate::fixtures::{blob, is_root, Ws};
use cairn_snapshot::{snapshot, Context, Options, StatCache};
use cairn_store::{CancelToken, Classify, ErrorKind, SkipReason};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn reasons(snap: &cairn_snapshot::Snapshot) -> Vec<(String, SkipReason)> {
    snap.skipped
        .iter()
        .map(|s| (String::from_utf8_lossy(&s.path).into_owned(), s.reason))
        .collect()
}

#[test]
fn a_file_over_max_file_bytes_is_skipped_as_too_large() {
    let ws = Ws::new();
    ws.write("small.txt", b"1234");
    ws.write("big.txt", &[b'x'; 5000]);
    let snap = ws.snap(&Options {
        capture: cairn_snapshot::CaptureSettings {
            max_file_bytes: 4096,
            ..Default::default()
        },
        ..Options::default()
    });
    assert_eq!(
        reasons(&snap),
        vec![("big.txt".into(), SkipReason::TooLarge)]
    );
    assert_eq!(ws.paths(&snap), vec!["small.txt"]);
    let m = ws.store.read_manifest(&snap.id).expect("manifest");
    assert_eq!(m.skipped.len(), 1);
    assert_eq!(m.capture.max_file_bytes, 4096);
}

#[test]
fn a_file_with_several_hard_links_is_skipped_with_refuse_hard_links() {
    let ws = Ws::new();
    ws.write("a.txt", b"shared");
    std::fs::hard_link(ws.root().join("a.txt"), ws.dir.path().join("outside-link")).expect("link");
    ws.write("b.txt", b"alone");
    let snap = ws.snap(&Options {
        capture: cairn_snapshot::CaptureSettings {
            refuse_hard_links: true,
            ..Default::default()
        },
        ..Options::default()
    });
    assert_eq!(reasons(&snap), vec![("a.txt".into(), SkipReason::HardLink)]);
    assert_eq!(snap.stats.hashed, 1);
    // Without the option the file is read as any other.
    let snap = ws.snap(&Options::default());
    assert!(snap.skipped.is_empty());
    assert_eq!(ws.paths(&snap), vec!["a.txt", "b.txt"]);
}

/// Runs the test named `body` in a child process as an unprivileged user (uid/gid 65534),
/// with `dir` handed over to that user. Permission checks do not apply to root.
fn run_unprivileged(body: &str, dir: &std::path::Path) {
    use std::os::unix::process::CommandExt;
    chown_tree(dir);
    let status = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            body,
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CAIRN_TEST_DIR", dir)
        .uid(65534)
        .gid(65534)
        .status()
        .expect("spawn child");
    assert!(status.success(), "the unprivileged child failed");
}

fn chown_tree(dir: &std::path::Path) {
    for e in walkdir(dir) {
        std::os::unix::fs::lchown(&e, Some(65534), Some(65534)).expect("chown");
    }
}

fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                out.extend(walkdir(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn unreadable_files_and_directories_are_skipped_as_unreadable() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::create_dir_all(dir.path().join("root/locked/inner")).expect("mkdir");
    std::fs::write(dir.path().join("root/locked/inner/x"), b"x").expect("write");
    std::fs::write(dir.path().join("root/secret"), b"s").expect("write");
    std::fs::write(dir.path().join("root/open"), b"o").expect("write");
    if is_root() {
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        run_unprivileged("skipping::unreadable_body", dir.path());
    } else {
        unreadable_check(dir.path());
    }
}

#[test]
#[ignore = "run by unreadable_files_and_directories_are_skipped_as_unreadable"]
fn unreadable_body() {
    let Some(dir) = std::env::var_os("CAIRN_TEST_DIR") else {
        return;
    };
    unreadable_check(std::path::Path::new(&dir));
}

fn unreadable_check(dir: &std::path::Path) {
    let root = dir.join("root");
    std::fs::set_permissions(root.join("locked"), std::fs::Permissions::from_mode(0o000))
        .expect("chmod");
    std::fs::set_permissions(root.join("secret"), std::fs::Permissions::from_mode(0o000))
        .expect("chmod");
    let store = cairn_store::Store::open(dir.join("store"), Default::default()).expect("store");
    let snap =
        snapshot(&store, &root, "ws", &Options::default(), Context::default()).expect("snapshot");
    let got: Vec<(String, SkipReason, bool)> = snap
        .skipped
        .iter()
        .map(|s| {
            (
                String::from_utf8_lossy(&s.path).into_owned(),
                s.reason,
                s.is_dir,
            )
        })
        .collect();
    std::fs::set_permissions(root.join("locked"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    assert_eq!(
        got,
        vec![
            ("locked".into(), SkipReason::Unreadable, true),
            ("secret".into(), SkipReason::Unreadable, false)
        ]
    );
    assert_eq!(snap.stats.files, 1);
}

#[test]
fn a_file_appended_to_while_snapshotted_is_changing_or_one_whole_version() {
    let ws = Ws::new();
    let line = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";
    let mut initial = Vec::new();
    for _ in 0..(4 << 20) / line.len() {
        initial.extend_from_slice(line);
    }
    ws.write("growing.log", &initial);
    let stop = Arc::new(AtomicBool::new(false));
    let path = ws.root().join("growing.log");
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(path)
                .expect("open");
            // Whole lines, one write each, about 6 MB/s: enough to overlap every read, bounded
            // so the file stays small.
            let mut written = 0usize;
            while !stop.load(Ordering::Relaxed) && written < 64 << 20 {
                for _ in 0..100 {
                    f.write_all(line).expect("append");
                }
                written += 100 * line.len();
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        let snap = ws.snap(&Options {
            capture: cairn_snapshot::CaptureSettings {
                max_file_bytes: 1 << 30,
                ..Default::default()
            },
            use_stat_cache: false,
            ..Options::default()
        });
        outcomes.push(snap);
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    let finished = std::fs::read(ws.root().join("growing.log")).expect("read");
    for snap in outcomes {
        match ws.entry(&snap, b"growing.log") {
            None => assert_eq!(
                reasons(&snap),
                vec![("growing.log".into(), SkipReason::Changing)]
            ),
            Some(e) => {
                let content = blob(&ws.store, &e);
                assert_eq!(content.len() as u64, e.size);
                assert!(content.len() >= initial.len());
                assert_eq!(content.len() % line.len(), 0, "a torn line was recorded");
                assert_eq!(
                    &finished[..content.len()],
                    &content[..],
                    "not a version of the file"
                );
            }
        }
    }
}

/// Appends a line to `never-still.log` after every read of it, counting the reads.
fn append_after_each_read(path: &std::path::Path) {
    if path.file_name() == Some(std::ffi::OsStr::new("never-still.log")) {
        NEVER_STILL_READS.fetch_add(1, Ordering::SeqCst);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .expect("open never-still.log");
        f.write_all(b"one more line\n").expect("append");
    }
}

static NEVER_STILL_READS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[test]
fn a_file_that_changes_during_every_read_is_skipped_as_changing_after_five_reads() {
    assert!(
        cairn_snapshot::set_read_hook(append_after_each_read),
        "the read hook is installed by this test only"
    );
    let ws = Ws::new();
    ws.write("never-still.log", b"first line\n");
    ws.write("still.txt", b"holds still");
    let snap = ws.snap(&Options {
        use_stat_cache: false,
        ..Options::default()
    });
    assert_eq!(
        reasons(&snap),
        vec![("never-still.log".into(), SkipReason::Changing)]
    );
    assert_eq!(ws.paths(&snap), vec!["still.txt"]);
    assert_eq!(
        NEVER_STILL_READS.load(Ordering::SeqCst),
        cairn_snapshot::MAX_READS
    );
    assert_eq!(cairn_snapshot::MAX_READS, 5);
    let m = ws.store.read_manifest(&snap.id).expect("manifest");
    assert_eq!(m.skipped.len(), 1);
    assert_eq!(m.skipped[0].reason, SkipReason::Changing);
}

#[test]
fn a_cancelled_snapshot_leaves_no_manifest_no_cache_change_and_no_temp_files() {
    let ws = Ws::new();
    for i in 0..200 {
        ws.write(
            &format!("d{}/f{i}.txt", i % 10),
            format!("file {i}").as_bytes(),
        );
    }
    let first = ws.snap(&Options::default());
    let cache_path = StatCache::path(&ws.store, "ws").expect("path");
    let cache_before = std::fs::read(&cache_path).expect("cache");
    ws.write("new.txt", b"new");
    let token = CancelToken::new();
    token.cancel();
    let err = snapshot(
        &ws.store,
        &ws.root(),
        "ws",
        &Options::default(),
        Context::with_cancel(Some(token)),
    )
    .expect_err("cancelled");
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(ws.store.snapshot_ids().expect("ids"), vec![first.id]);
    assert_eq!(std::fs::read(&cache_path).expect("cache"), cache_before);
    assert!(ws.temp_files().is_empty(), "{:?}", ws.temp_files());
    assert!(ws.store.live_operations().expect("ops").is_empty());
}

#[test]
fn a_progress_callback_runs_on_the_calling_thread_and_can_stop_the_snapshot() {
    let ws = Ws::new();
    let big = vec![7u8; 8 << 20];
    for i in 0..12 {
        ws.write(&format!("big{i}.bin"), &big);
    }
    let caller = std::thread::current().id();
    let mut calls = 0;
    let mut cb = |_p: &cairn_snapshot::Progress| {
        assert_eq!(std::thread::current().id(), caller);
        calls += 1;
        false
    };
    let err = snapshot(
        &ws.store,
        &ws.root(),
        "ws",
        &Options {
            capture: cairn_snapshot::CaptureSettings {
                max_file_bytes: 1 << 30,
                ..Default::default()
            },
            use_stat_cache: false,
            ..Options::default()
        },
        Context {
            progress: Some(&mut cb),
            ..Context::default()
        },
    )
    .expect_err("aborted");
    assert_eq!(err.kind(), ErrorKind::AbortedByCallback);
    assert!(calls >= 1);
    assert!(ws.store.snapshot_ids().expect("ids").is_empty());
    assert!(ws.temp_files().is_empty());
    // A callback that lets it run sees the final counts.
    let mut last = cairn_snapshot::Progress::default();
    let mut cb = |p: &cairn_snapshot::Progress| {
        last = *p;
        true
    };
    let snap = snapshot(
        &ws.store,
        &ws.root(),
        "ws",
        &Options {
            capture: cairn_snapshot::CaptureSettings {
                max_file_bytes: 1 << 30,
                ..Default::default()
            },
            ..Options::default()
        },
        Context {
            progress: Some(&mut cb),
            ..Context::default()
        },
    )
    .expect("snapshot");
    assert_eq!(last.files, snap.stats.files);
    assert_eq!(snap.stats.files, 12);
}
