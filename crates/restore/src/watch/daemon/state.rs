//! The daemon's shared state, in small types whose rules are in their methods: its status
//! counts, what the last snapshot asked for leaves the walks ahead, the store ahead under
//! way, and the idle merges of small packs.

#[cfg(doc)]
use super::{DaemonStatus, Served};
use cairn_snapshot::{Options as SnapshotOptions, Watcher};
use cairn_store::Store;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// How many merges of small packs in a row a snapshot may stop (see `Served::merge`).
pub(super) const MERGES_STOPPED_AT_MOST: u32 = 3;

/// What the daemon counts for its status ([`DaemonStatus`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum Count {
    /// Snapshots taken for others.
    Snapshots,
    /// Snapshots walked ahead.
    WalkedAhead,
    /// Snapshots answered with one walked ahead.
    AnsweredAhead,
    /// Changes whose objects were stored ahead.
    StoredAhead,
    /// Restores carried out for others.
    Restores,
}

/// The daemon's counts, one per [`Count`]: each only grows, and is read for the status
/// alone (no other state is ordered by it).
#[derive(Default)]
pub(super) struct Tally([AtomicU64; 5]);

impl Tally {
    /// Counts one more `count`.
    pub(super) fn add(&self, count: Count) {
        self.0[count as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// How many `count` so far.
    pub(super) fn get(&self, count: Count) -> u64 {
        self.0[count as usize].load(Ordering::Relaxed)
    }
}

/// What the last snapshot asked for leaves for the walks ahead (see [`Served::walk_ahead`]):
/// the options they walk with, the changes already covered, and whether one store ahead may
/// still follow it.
#[derive(Default)]
pub(super) struct Asked {
    /// The options of the last snapshot asked for (label, metadata and protection left out):
    /// the next is walked ahead with them.
    options: parking_lot::Mutex<Option<SnapshotOptions>>,
    /// The watcher's last event when the last snapshot (asked for or walked ahead) began:
    /// every change up to it is in that snapshot or reported to it.
    covered: parking_lot::Mutex<Option<std::time::Instant>>,
    /// A change may be stored ahead: set by each snapshot asked for, cleared as a store
    /// ahead begins, so that there is at most one per snapshot asked for (a file written
    /// every few tens of milliseconds would otherwise be read again at each pause).
    store_allowed: AtomicBool,
    /// The watcher's queue overflows when the last snapshot was asked for: a store ahead
    /// after another would walk the whole tree, and the snapshot asked for next again.
    overflows: AtomicU64,
}

impl Asked {
    /// A snapshot is asked for with `options` (label, metadata and protection left out), as
    /// `watcher` stands: the walks ahead take its options, it covers every change so far, and
    /// one store ahead may follow it.
    pub(super) fn snapshot_asked(&self, options: SnapshotOptions, watcher: &Watcher) {
        *self.options.lock() = Some(options);
        *self.covered.lock() = watcher.last_event();
        self.overflows.store(watcher.overflows(), Ordering::SeqCst);
        self.store_allowed.store(true, Ordering::SeqCst);
    }

    /// Whether a snapshot was asked for yet (none walks ahead before).
    pub(super) fn any(&self) -> bool {
        self.options.lock().is_some()
    }

    /// The options to walk ahead with: the last snapshot asked for's.
    pub(super) fn options(&self) -> Option<SnapshotOptions> {
        self.options.lock().clone()
    }

    /// Whether every change up to `last` (the watcher's last event) is covered by the last
    /// snapshot asked for or walked ahead.
    pub(super) fn covers(&self, last: std::time::Instant) -> bool {
        self.covered.lock().is_some_and(|c| c >= last)
    }

    /// Whether a store ahead may still follow the last snapshot asked for.
    pub(super) fn store_allowed(&self) -> bool {
        self.store_allowed.load(Ordering::SeqCst)
    }

    /// A store ahead begins: no other until the next snapshot asked for.
    pub(super) fn store_begins(&self) {
        self.store_allowed.store(false, Ordering::SeqCst);
    }

    /// A walk ahead begins: it covers every change `watcher` has seen.
    pub(super) fn walk_begins(&self, watcher: &Watcher) {
        *self.covered.lock() = watcher.last_event();
    }

    /// Whether `watcher`'s queue overflowed since the last snapshot was asked for.
    pub(super) fn overflowed_since(&self, watcher: &Watcher) -> bool {
        watcher.overflows() != self.overflows.load(Ordering::SeqCst)
    }
}

/// The merges of the store's small packs the daemon makes while idle (see [`Served::merge`]):
/// one at a time, stopped by a snapshot as it begins, and after [`MERGES_STOPPED_AT_MOST`]
/// stopped in a row, one that is not stopped.
#[derive(Default)]
pub(super) struct Merges {
    /// A merge runs (on a thread of its own), or was claimed to.
    running: AtomicBool,
    /// Set by a snapshot (asked for or walked ahead) as it begins: the merge under way
    /// stops ([`cairn_store::merge::MergeOptions::stop`]).
    stop: Arc<AtomicBool>,
    /// Merges stopped one after the other.
    stopped_in_a_row: AtomicU32,
    /// Small packs merged.
    packs_merged: AtomicU64,
    /// Why the last merge failed, if it did.
    error: parking_lot::Mutex<Option<String>>,
}

impl Merges {
    /// Stops the merge under way, if any (a snapshot begins, or the daemon ends).
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Claims the next merge, its stop cleared, to be run by [`Merges::run`] (or given back by
    /// [`Merges::unclaim`]): `false` when one is claimed or runs already. Called while no
    /// snapshot is under way: one that begins after this stops it.
    pub(super) fn claim(&self) -> bool {
        if self.running.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.stop.store(false, Ordering::SeqCst);
        true
    }

    /// Gives back a claim whose merge could not be started.
    pub(super) fn unclaim(&self) {
        self.running.store(false, Ordering::SeqCst);
    }

    /// Runs the merge claimed of `store`'s small packs: stoppable unless
    /// [`MERGES_STOPPED_AT_MOST`] were stopped in a row; counts what it merged, keeps why it
    /// failed, and gives the claim back.
    pub(super) fn run(&self, store: &Store) {
        let stoppable = self.stopped_in_a_row.load(Ordering::Relaxed) < MERGES_STOPPED_AT_MOST;
        let merged = store.merge_small_packs(&cairn_store::merge::MergeOptions {
            stop: stoppable.then(|| self.stop.clone()),
            ..Default::default()
        });
        match merged {
            Ok(report) => {
                self.packs_merged
                    .fetch_add(report.packs_merged, Ordering::Relaxed);
                if report.stopped {
                    self.stopped_in_a_row.fetch_add(1, Ordering::Relaxed);
                } else {
                    self.stopped_in_a_row.store(0, Ordering::Relaxed);
                }
                *self.error.lock() = None;
            }
            Err(e) => *self.error.lock() = Some(e.to_string()),
        }
        self.running.store(false, Ordering::SeqCst);
    }

    /// Small packs merged so far.
    pub(super) fn packs_merged(&self) -> u64 {
        self.packs_merged.load(Ordering::Relaxed)
    }

    /// Why the last merge failed, if it did.
    pub(super) fn error(&self) -> Option<String> {
        self.error.lock().clone()
    }
}

/// The store ahead under way (see [`Served::walk_ahead`]) and the snapshots asked for that
/// wait to begin: a snapshot asked for cancels the store ahead under way rather than wait for
/// it, and none begins while one waits.
#[derive(Default)]
pub(super) struct StoreAhead {
    /// Cancels the store ahead under way.
    storing: parking_lot::Mutex<Option<cairn_store::cancel::CancelToken>>,
    /// Snapshots asked for that wait to begin.
    asking: AtomicU64,
}

impl StoreAhead {
    /// A snapshot asked for waits for its turn (`wait`): the store ahead under way is
    /// cancelled, and none begins until `wait` returns.
    pub(super) fn asked<T>(&self, wait: impl FnOnce() -> T) -> T {
        self.asking.fetch_add(1, Ordering::SeqCst);
        if let Some(storing) = self.storing.lock().take() {
            storing.cancel();
        }
        let turn = wait();
        self.asking.fetch_sub(1, Ordering::SeqCst);
        turn
    }

    /// A store ahead cancelled by `cancel` is about to begin: `false` (it does not) when a
    /// snapshot asked for waits already (it may have looked for a token to cancel before this
    /// one was set).
    pub(super) fn begin(&self, cancel: &cairn_store::cancel::CancelToken) -> bool {
        *self.storing.lock() = Some(cancel.clone());
        if self.asking.load(Ordering::SeqCst) > 0 {
            self.storing.lock().take();
            return false;
        }
        true
    }

    /// The store ahead (or walk ahead) is over.
    pub(super) fn end(&self) {
        self.storing.lock().take();
    }
}
