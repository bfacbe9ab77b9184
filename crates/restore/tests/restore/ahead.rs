//! Snapshots the watcher walks ahead (issue 23): once the workspace has been quiet for the
//! watcher's racy window after a change, the `cairn watch` daemon walks and stores the next
//! snapshot before anyone asks, and answers the next request with it when nothing changed
//! since. Differentially: after random operations, each snapshot the daemon answers (walked
//! ahead or not) must have the root tree of a walk that reads every file, and one walked ahead
//! whose objects a collection removed meanwhile must not be used.
//!
//! Seeded: `CAIRN_SEED` picks the seed (default: from the clock, printed).

use crate::fixtures::{picture, Fx};
use cairn_restore::watch::{self, DaemonStatus, ServeEnd};
use cairn_snapshot::{Context, WatchOptions};
use cairn_store::gc::GcOptions;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A seeded generator (SplitMix64): the seed is printed, and `CAIRN_SEED` replays it.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn from_env(what: &str) -> Rng {
        let seed = std::env::var("CAIRN_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            });
        eprintln!("{what}: CAIRN_SEED={seed}");
        Rng(seed)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// Runs `f` while a daemon (the one `cairn watch` runs, in a thread of this process, with a
/// racy window of `racy`) serves the workspace of `fx`; `fx.ws` then sends it its snapshots.
pub(crate) fn with_daemon<T>(fx: &Fx, racy: Duration, f: impl FnOnce() -> T) -> T {
    let daemon_ws = crate::fixtures::open(fx.dir.path());
    let watcher = daemon_ws
        .watch(&WatchOptions {
            racy_window: racy,
            ..WatchOptions::default()
        })
        .expect("a watcher");
    let stop = AtomicBool::new(false);
    /// Stops the daemon when dropped: also when `f` panics, or the scope would wait for ever.
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    std::thread::scope(|scope| {
        let served = scope.spawn(|| watch::serve(&daemon_ws, watcher, &stop, None, |_| {}));
        let stopping = StopOnDrop(&stop);
        wait_for(|| daemon(fx).is_some(), "the daemon to listen");
        let out = f();
        drop(stopping);
        let end = served.join().expect("the daemon's thread");
        assert_eq!(end.expect("the daemon ends cleanly"), ServeEnd::Stopped);
        out
    })
}

fn daemon(fx: &Fx) -> Option<DaemonStatus> {
    watch::status(fx.ws.store(), fx.ws.id()).expect("ask the daemon")
}

pub(crate) fn wait_for(mut cond: impl FnMut() -> bool, what: &str) {
    let started = Instant::now();
    while !cond() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until the daemon has walked ahead more than `before` times.
fn walked_ahead_past(fx: &Fx, before: u64) {
    count_past(fx, |s| s.walked_ahead, before, "a walk ahead");
}

/// Waits until the daemon has stored changes ahead more than `before` times.
fn stored_ahead_past(fx: &Fx, before: u64) {
    count_past(fx, |s| s.stored_ahead, before, "a store ahead");
}

/// Waits until the daemon's count `count` (of its status) is more than `before`.
fn count_past(fx: &Fx, count: fn(&DaemonStatus) -> u64, before: u64, what: &str) {
    wait_for(|| daemon(fx).is_some_and(|s| count(&s) > before), what);
}

/// The root tree of a walk that reads every file, with the workspace's capture settings.
fn walked_root(fx: &Fx) -> cairn_store::TreeId {
    let mut opts = fx.ws.snapshot_options();
    opts.use_stat_cache = false;
    cairn_snapshot::scan(
        fx.ws.store(),
        &fx.root(),
        fx.ws.id(),
        &opts,
        Context::default(),
    )
    .expect("a walk")
    .root
}

const NAMES: &[&str] = &["a", "b", "c d", "e.txt", "f"];

fn any_dir(root: &Path, rng: &mut Rng) -> PathBuf {
    let mut dir = root.to_path_buf();
    for _ in 0..rng.below(3) {
        let subdirs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default();
        if subdirs.is_empty() {
            break;
        }
        dir = subdirs[rng.below(subdirs.len() as u64) as usize].clone();
    }
    dir
}

fn any_entry(root: &Path, rng: &mut Rng) -> Option<PathBuf> {
    let dir = any_dir(root, rng);
    let entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    (!entries.is_empty()).then(|| entries[rng.below(entries.len() as u64) as usize].clone())
}

/// One random change to the tree under `root`: a write, a new file, a deletion, a new
/// directory, an `rm -rf`, a rename, a chmod or a symlink (tried again until one changes
/// something, so that the watcher always has an event to report).
fn operate(root: &Path, rng: &mut Rng, n: u64) {
    while !try_operate(root, rng, n) {}
}

fn try_operate(root: &Path, rng: &mut Rng, n: u64) -> bool {
    let name = NAMES[rng.below(NAMES.len() as u64) as usize];
    match rng.below(8) {
        0 | 1 => {
            let p = any_dir(root, rng).join(name);
            !p.is_dir()
                && !p.is_symlink()
                && std::fs::write(&p, format!("content {n} {}\n", rng.below(1000))).is_ok()
        }
        2 => match any_entry(root, rng) {
            Some(p) if p.is_dir() && !p.is_symlink() => std::fs::remove_dir_all(&p).is_ok(),
            Some(p) => std::fs::remove_file(&p).is_ok(),
            None => false,
        },
        3 => std::fs::create_dir(any_dir(root, rng).join(format!("{name}{n}"))).is_ok(),
        4 => match any_entry(root, rng) {
            Some(p) => {
                let to = any_dir(root, rng).join(format!("{name}-moved{n}"));
                !to.starts_with(&p) && std::fs::rename(&p, &to).is_ok()
            }
            None => false,
        },
        5 => match any_entry(root, rng) {
            Some(p) if p.is_file() && !p.is_symlink() => {
                let mode = [0o644, 0o755, 0o600][rng.below(3) as usize];
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).is_ok()
            }
            _ => false,
        },
        6 => {
            let p = any_dir(root, rng).join(format!("link{}", rng.below(3)));
            let _ = std::fs::remove_file(&p);
            std::os::unix::fs::symlink(format!("target{n}"), &p).is_ok()
        }
        _ => {
            let p = any_dir(root, rng).join(format!("{name}.new{n}"));
            std::fs::write(&p, vec![b'x'; rng.below(5000) as usize]).is_ok()
        }
    }
}

fn seed_tree(fx: &Fx) {
    for (rel, content) in [
        ("README", "read me\n"),
        ("src/main.rs", "fn main() {}\n"),
        ("src/lib/mod.rs", "pub mod x;\n"),
        ("docs/a.md", "# a\n"),
        ("docs/deep/b.md", "# b\n"),
    ] {
        fx.write(rel, content.as_bytes());
    }
}

#[test]
fn snapshots_walked_ahead_equal_a_walk_after_random_operations_and_a_stale_one_is_never_used() {
    let mut rng = Rng::from_env("ahead differential");
    let fx = Fx::new();
    seed_tree(&fx);
    let root = fx.root();
    let (mut quiet, mut answered, mut stale, mut immediate) = (0u32, 0u32, 0u32, 0u32);
    with_daemon(&fx, Duration::ZERO, || {
        // The first snapshot asked for gives the daemon the options it walks ahead with.
        let first = fx.snap();
        assert_eq!(first.root, walked_root(&fx));
        for n in 0..60u64 {
            operate(&root, &mut rng, n);
            let walked = daemon(&fx).expect("the daemon runs").walked_ahead;
            let case = n % 3;
            let mut walked_first = walked;
            if case < 2 {
                walked_ahead_past(&fx, walked);
                walked_first = daemon(&fx).expect("the daemon runs").walked_ahead;
            }
            if case == 1 {
                // A change after the walk ahead: it must not stand in for this snapshot.
                operate(&root, &mut rng, n + 1000);
            }
            let before = daemon(&fx).expect("the daemon runs").answered_ahead;
            let snap = fx.snap();
            let after = daemon(&fx).expect("the daemon runs").answered_ahead;
            assert_eq!(
                snap.root,
                walked_root(&fx),
                "operation {n} (case {case}): the snapshot differs from a walk"
            );
            match case {
                0 => {
                    // Nothing changed since the walk ahead: it answers. (Unless this thread
                    // was held up for longer than the daemon's 20 ms margin inside the
                    // operation, between two of its system calls: then the walk ahead came
                    // before the operation's last change and must not answer; counted below.)
                    assert_eq!(
                        after > before,
                        snap.walk.ahead_ms.is_some(),
                        "{:?}",
                        snap.walk
                    );
                    quiet += 1;
                    if after > before {
                        answered += 1;
                    }
                }
                1 => {
                    // Held up past the daemon's 20 ms margin after the second change (a loaded
                    // machine), the daemon walks ahead again, after it: that walk may answer
                    // (the snapshot equals a walk, checked above). The first one never may.
                    let walked_again =
                        daemon(&fx).expect("the daemon runs").walked_ahead > walked_first;
                    if !walked_again {
                        assert_eq!(after, before, "operation {n}: a stale walk ahead was used");
                        assert!(snap.walk.ahead_ms.is_none());
                    }
                    stale += 1;
                }
                _ => immediate += 1,
            }
        }
    });
    eprintln!(
        "answered ahead {answered} of {quiet} asked after a walk ahead, stale {stale}, \
         asked at once {immediate}"
    );
    assert!(
        answered >= 5 && answered * 2 >= quiet,
        "too few snapshots answered ahead: {answered} of {quiet}"
    );
    // Every snapshot's objects are in the store and it restores exactly.
    assert!(fx.ws.store().verify().expect("verify").is_ok());
}

#[test]
fn a_walk_ahead_whose_objects_a_collection_removed_is_not_used_and_nothing_is_lost() {
    let fx = Fx::new();
    seed_tree(&fx);
    with_daemon(&fx, Duration::ZERO, || {
        let base = fx.snap();
        let walked = daemon(&fx).expect("the daemon runs").walked_ahead;
        fx.write("src/main.rs", b"fn main() { ahead_only() }\n");
        walked_ahead_past(&fx, walked);
        // Nothing names the walk ahead's objects: a collection without a grace period
        // removes them.
        let gc = fx
            .ws
            .store()
            .gc(&GcOptions::with_grace(Duration::ZERO))
            .expect("a collection");
        assert!(!gc.deferred, "the daemon holds no operation while it waits");
        let expected = picture(&fx.root());
        let snap = fx.snap();
        assert!(snap.walk.ahead_ms.is_none(), "{:?}", snap.walk);
        assert_eq!(daemon(&fx).expect("the daemon runs").answered_ahead, 0);
        assert_eq!(snap.root, walked_root(&fx));
        // It restores exactly, over a tree changed since.
        fx.write("src/main.rs", b"fn main() { later() }\n");
        fx.ws
            .restore(
                &snap.id,
                &Default::default(),
                &Default::default(),
                Context::default(),
            )
            .expect("restore");
        assert_eq!(picture(&fx.root()), expected);
        assert_ne!(base.root, snap.root);
    });
}

#[test]
fn a_walk_ahead_is_used_once_nothing_changed_and_costs_the_next_snapshot_only_its_manifest() {
    let fx = Fx::new();
    seed_tree(&fx);
    // A racy window of 250 ms: the walk ahead comes 270 ms after the last event, so this
    // thread being held up between its two writes cannot make it walk between them.
    with_daemon(&fx, Duration::from_millis(250), || {
        fx.snap();
        let walked = daemon(&fx).expect("the daemon runs").walked_ahead;
        fx.write("docs/deep/b.md", b"# b, edited\n");
        fx.write("src/new.rs", b"pub fn new() {}\n");
        walked_ahead_past(&fx, walked);
        let packs = std::fs::read_dir(fx.ws.store().path().join("objects/packs"))
            .expect("packs")
            .count();
        let snap = fx.snap();
        assert!(snap.walk.ahead_ms.is_some(), "{:?}", snap.walk);
        assert_eq!(daemon(&fx).expect("the daemon runs").answered_ahead, 1);
        assert_eq!(snap.root, walked_root(&fx));
        // The objects were stored ahead: answering wrote no pack.
        let packs_after = std::fs::read_dir(fx.ws.store().path().join("objects/packs"))
            .expect("packs")
            .count();
        assert_eq!(packs, packs_after);
        // Nothing changed since: no new walk ahead, and the next snapshot walks nothing.
        let again = fx.snap();
        assert_eq!(again.root, snap.root);
        assert_eq!(again.walk.walked, cairn_snapshot::Walked::None);
        assert_eq!(
            daemon(&fx).expect("the daemon runs").walked_ahead,
            walked + 1
        );
    });
}

#[test]
fn a_change_is_stored_a_moment_after_it_so_the_snapshot_asked_within_its_racy_window_writes_no_object(
) {
    let fx = Fx::new();
    seed_tree(&fx);
    // A racy window long enough that no walk ahead comes before the snapshots asked for.
    with_daemon(&fx, Duration::from_secs(3), || {
        let first = fx.snap();
        assert_eq!(first.root, walked_root(&fx));
        assert_eq!(daemon(&fx).expect("the daemon runs").stored_ahead, 0);
        fx.write("src/main.rs", b"fn main() { stored_ahead() }\n");
        fx.write("docs/deep/new.md", b"# new\n");
        stored_ahead_past(&fx, 0);
        let snap = fx.snap();
        // Walked (the store ahead cannot stand in for it), every object found stored.
        assert!(snap.walk.ahead_ms.is_none(), "{:?}", snap.walk);
        assert_eq!(snap.stats.stored_objects, 0, "{:?}", snap.stats);
        assert_eq!(snap.root, walked_root(&fx));
        // A change after the store ahead, asked for at once: seen, and stored then.
        fx.write("src/main.rs", b"fn main() { after_it() }\n");
        let after = fx.snap();
        assert!(after.stats.stored_objects > 0, "{:?}", after.stats);
        assert_eq!(after.root, walked_root(&fx));
        let st = daemon(&fx).expect("the daemon runs");
        assert_eq!((st.stored_ahead, st.walked_ahead), (1, 0), "{st:?}");
        // At most one store ahead per snapshot asked for: the changes after it wait for the
        // walk ahead (once the racy window is over), with no store ahead before it.
        fx.write("README", b"changed\n");
        stored_ahead_past(&fx, 1);
        fx.write("README", b"changed after the store ahead\n");
        walked_ahead_past(&fx, 0);
        assert_eq!(daemon(&fx).expect("the daemon runs").stored_ahead, 2);
        let ahead = fx.snap();
        assert!(ahead.walk.ahead_ms.is_some(), "{:?}", ahead.walk);
        assert_eq!(ahead.root, walked_root(&fx));
    });
    assert!(fx.ws.store().verify().expect("verify").is_ok());
}
