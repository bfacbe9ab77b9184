//! A restore whose safety walk a watcher spares (issue 56): with this process's watcher or a
//! `cairn watch` daemon it `lstat`s only what changed and restores exactly; with a watcher that
//! missed an edit where the restore writes, it finds out before changing anything, walks the
//! whole tree, and its safety snapshot keeps the edit.
//!
//! Seeded: `CAIRN_SEED` picks the seed (default: from the clock, printed).

use crate::ahead::{with_daemon, Rng};
use crate::fixtures::{picture, Fx};
use cairn_snapshot::{ChangeSource, Changes, Context, Scope, Token, Walked, WatchOptions};
use std::sync::Arc;
use std::time::Duration;

/// A tree of `dirs` directories of `files` files each.
fn seed(fx: &Fx, dirs: usize, files: usize) {
    for d in 0..dirs {
        for f in 0..files {
            fx.write(&format!("d{d}/f{f}.txt"), format!("{d}/{f}\n").as_bytes());
        }
    }
}

/// Ten files changed, ten added, ten deleted, chosen by `rng`, in the tree [`seed`] made.
fn thirty_changes(fx: &Fx, rng: &mut Rng, dirs: usize, files: usize) {
    let mut chosen = std::collections::BTreeSet::new();
    while chosen.len() < 20 {
        chosen.insert((rng.below(dirs as u64), rng.below(files as u64)));
    }
    for (i, (d, f)) in chosen.into_iter().enumerate() {
        let path = fx.root().join(format!("d{d}/f{f}.txt"));
        if i % 2 == 0 {
            std::fs::write(&path, format!("changed {i}\n")).expect("change");
        } else {
            std::fs::remove_file(&path).expect("delete");
        }
    }
    for i in 0..10 {
        let d = rng.below(dirs as u64);
        fx.write(&format!("d{d}/new{i}.txt"), b"added\n");
    }
}

/// A restore of the edits `edit` makes to a seeded tree, then of its safety snapshot, with a
/// watcher running as `around` arranges it (and checks the first restore's walk): each
/// restore is exact.
fn restore_and_undo(
    what: &str,
    around: impl FnOnce(&Fx, &mut dyn FnMut() -> cairn_restore::Report),
) {
    let mut rng = Rng::from_env(what);
    let fx = Fx::new();
    let (dirs, files) = (12, 40);
    seed(&fx, dirs, files);
    let before = fx.snap();
    let target = picture(&fx.root());
    let edited = std::cell::RefCell::new(None);
    let mut restore = || {
        thirty_changes(&fx, &mut rng, dirs, files);
        *edited.borrow_mut() = Some(picture(&fx.root()));
        fx.restore(&before.id)
    };
    around(&fx, &mut restore);
    assert_eq!(picture(&fx.root()), target, "{what}: the restore is exact");
    let edited = edited.into_inner().expect("the edits were made");
    let journals = fx.ws.journals().expect("journals");
    let safety = journals
        .last()
        .and_then(|j| j.safety)
        .expect("the restore's safety snapshot");
    fx.restore(&safety);
    assert_eq!(
        picture(&fx.root()),
        edited,
        "{what}: the safety snapshot holds every edit"
    );
}

#[test]
fn a_restore_with_a_watcher_of_its_process_lstats_only_what_changed_and_is_exact() {
    restore_and_undo("in-process watcher", |fx, restore| {
        fx.ws.watch(&WatchOptions::default()).expect("a watcher");
        // The watcher's first snapshot walks whole and gives the stat cache its token.
        assert_eq!(fx.snap().walk.walked, Walked::Full);
        let report = restore();
        let walk = report.safety_walk.expect("the walk is reported");
        assert_eq!(walk.walked, Walked::Partial, "{walk:?}");
        assert!(walk.listed < 12, "it listed only what changed: {walk:?}");
        fx.ws.unwatch();
    });
}

#[test]
fn a_restore_with_a_cairn_watch_daemon_asks_it_what_changed_and_is_exact() {
    restore_and_undo("daemon", |fx, restore| {
        with_daemon(fx, Duration::from_millis(20), || {
            // Taken here, the daemon asked what changed (a cancel token binds it to this
            // process): this process's stat cache is then confirmed with the daemon's token.
            let taken = fx
                .ws
                .snapshot(
                    &fx.ws.snapshot_options(),
                    Context::with_cancel(Some(cairn_store::CancelToken::new())),
                )
                .expect("a snapshot")
                .snapshot;
            assert_eq!(taken.walk.walked, Walked::Full, "{:?}", taken.walk);
            // Carried out by the daemon, whose walk looks only at what changed.
            let report = restore();
            let walk = report.safety_walk.expect("the walk is reported");
            assert_ne!(walk.walked, Walked::Full, "{walk:?}");
            let daemon = cairn_restore::watch::status(fx.ws.store(), fx.ws.id())
                .expect("ask the daemon")
                .expect("a daemon answers");
            assert_eq!(daemon.restores, 1);
        });
    });
}

/// A change source that walks the first snapshot whole and then says nothing changed: a
/// watcher that missed every event since.
#[derive(Debug, Default)]
struct Blind {
    seq: std::sync::atomic::AtomicU64,
}

impl ChangeSource for Blind {
    fn changes_since(&self, since: Option<Token>) -> Result<Changes, String> {
        let seq = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Changes {
            token: Token {
                instance: [9; 16],
                seq,
            },
            scope: match since {
                None => Scope::Full("the first snapshot".into()),
                Some(_) => Scope::Partial {
                    dirs: Vec::new(),
                    names: Vec::new(),
                    subtrees: Vec::new(),
                    note: None,
                },
            },
        })
    }
}

/// How the restore is asked for.
#[derive(Clone, Copy)]
enum Call {
    /// `Workspace::restore`: its walk makes the plan.
    Restore,
    /// `Workspace::plan`, then the unseen edit, then `Workspace::apply` of that plan.
    PlanThenApply,
}

/// Restores `before` (where `path` holds `old`, or nothing) after `path` was given
/// `unseen`, an edit the blind watcher does not report, with a snapshot in between that
/// holds `seen` there (or nothing).
fn blind_restore(path: &str, old: Option<&[u8]>, seen: Option<&[u8]>, unseen: &[u8]) {
    blind(Call::Restore, path, old, seen, unseen);
}

/// [`blind_restore`], the restore asked for as `call` says.
fn blind(call: Call, path: &str, old: Option<&[u8]>, seen: Option<&[u8]>, unseen: &[u8]) {
    let fx = Fx::new();
    fx.write("other/keep.txt", b"kept\n");
    let set = |content: Option<&[u8]>| match content {
        Some(c) => fx.write(path, c),
        None => {
            let _ = std::fs::remove_file(fx.root().join(path));
        }
    };
    set(old);
    let before = fx.snap();
    let blind: Arc<dyn ChangeSource> = Arc::new(Blind::default());
    let with_blind = || Context {
        watch: Some(blind.clone()),
        ..Context::default()
    };
    set(seen);
    let taken = fx
        .ws
        .snapshot(&fx.ws.snapshot_options(), with_blind())
        .expect("a snapshot")
        .snapshot;
    assert_eq!(taken.walk.walked, Walked::Full);
    let report = match call {
        Call::Restore => {
            fx.write(path, unseen);
            fx.ws
                .restore(
                    &before.id,
                    &Default::default(),
                    &Default::default(),
                    with_blind(),
                )
                .expect("restore")
        }
        Call::PlanThenApply => {
            let plan = fx
                .ws
                .plan(&before.id, &Default::default(), with_blind())
                .expect("plan");
            fx.write(path, unseen);
            fx.ws
                .apply(&plan, &Default::default(), with_blind())
                .expect("apply")
        }
    };
    match old {
        Some(old) => assert_eq!(fx.read(path), old),
        None => assert!(!fx.root().join(path).exists()),
    }
    fx.restore(&report.safety_snapshot_id.expect("a safety snapshot"));
    assert_eq!(
        fx.read(path),
        unseen,
        "the safety snapshot kept the unseen edit"
    );
    let walk = report.safety_walk.expect("the walk is reported");
    assert_eq!(walk.walked, Walked::Full, "{walk:?}");
    assert!(
        walk.reason
            .as_deref()
            .is_some_and(|r| r.contains("had not reported a change to") && r.contains(path)),
        "the reason names the path: {walk:?}"
    );
}

#[test]
fn a_restore_whose_watcher_missed_an_edit_it_would_overwrite_walks_whole_and_keeps_the_edit() {
    blind_restore(
        "src/a.txt",
        Some(b"old\n"),
        Some(b"seen\n"),
        b"edited, unseen\n",
    );
}

#[test]
fn a_restore_whose_watcher_missed_a_file_where_it_creates_one_walks_whole_and_keeps_the_file() {
    blind_restore("src/a.txt", Some(b"old\n"), None, b"made, unseen\n");
}

#[test]
fn a_restore_whose_watcher_missed_an_edit_to_a_file_it_removes_walks_whole_and_keeps_the_edit() {
    blind_restore("src/a.txt", None, Some(b"seen\n"), b"edited, unseen\n");
}

#[test]
fn applying_a_plan_after_an_edit_its_watcher_missed_walks_whole_and_keeps_the_edit() {
    blind(
        Call::PlanThenApply,
        "src/a.txt",
        Some(b"old\n"),
        Some(b"seen\n"),
        b"edited, unseen\n",
    );
}
