//! The workspace: a root, the store that keeps its snapshots, its capture settings, and the
//! holds that make a restore wait.

use crate::apply::ApplyOptions;
use crate::error::{Error, Result};
use crate::hold::{self, Hold, HoldInfo};
use crate::journal::{self, Journal, Recovery, StrayStaged};
use crate::plan::{self, Plan, PlanOptions};
use crate::report::Report;
use crate::site::Site;
use crate::watch_socket::client;
use crate::watch_socket::protocol::{RestoreRequest, Target};
use crate::{apply, home};
use cairn_snapshot::{
    CaptureSettings, Context, Options as SnapshotOptions, Snapshot, WatchOptions, Watcher,
};
use cairn_store::gc::GcOptions;
use cairn_store::retain::Retention;
use cairn_store::{SnapshotId, Store, StoreOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How a workspace is opened. `Default` is the safest choice.
#[derive(Debug, Clone)]
pub struct WorkspaceOptions {
    /// The store directory; by default (see [`crate::home::default_store`]) `$CAIRN_STORE`,
    /// else `<root>/.cairn` when an earlier version made a store there, else
    /// `<data>/stores/<name>-<hash>` in the user's data directory (`$CAIRN_HOME`, else
    /// `$XDG_DATA_HOME/cairn`, else `~/.local/share/cairn`), outside the workspace.
    pub store: Option<PathBuf>,
    /// The workspace id; default derived from the canonical root (`ws-` and 16 hex digits).
    pub id: Option<String>,
    /// What every snapshot of the workspace captures unless a call says otherwise: its
    /// exclude globs add up with each call's, its other settings are the call's defaults
    /// (see [`Workspace::snapshot_options`]).
    pub capture: CaptureSettings,
    /// Applied after each snapshot; `None` keeps everything. A prune that fails is reported in
    /// the snapshot's outcome, never failing the snapshot.
    pub retain: Option<Retention>,
    /// How collections after deletes and prunes run.
    pub gc: GcOptions,
    /// Complete pending restore journals when opening (default on).
    pub recover: bool,
    /// How the store is opened.
    pub store_options: StoreOptions,
}

impl Default for WorkspaceOptions {
    fn default() -> Self {
        WorkspaceOptions {
            store: None,
            id: None,
            capture: CaptureSettings::default(),
            retain: None,
            gc: GcOptions::default(),
            recover: true,
            store_options: StoreOptions::default(),
        }
    }
}

/// How many packs a snapshot taken in this process (walking, or with an in-process
/// watcher) may leave before it merges the small ones (see
/// [`cairn_store::Store::merge_small_packs`]). Twice the daemon's limit: a merge here is on
/// the snapshot's path, so it comes half as often, each copying at most 8 MiB of small packs
/// plus the new ones.
pub const MERGE_AFTER_SNAPSHOT_PACKS: usize = 64;

/// A workspace: a directory tree an agent edits, and the store that keeps its snapshots.
#[derive(Debug)]
pub struct Workspace {
    /// The root, id, store, stat cache and own files every step of a restore works on.
    pub(crate) site: Site,
    options: WorkspaceOptions,
    /// Why the store is where it is.
    home: home::StoreHome,
    /// What opening found in pending journals, if anything.
    recovered: Vec<Recovery>,
    /// The watcher [`Workspace::watch`] started in this process, if any.
    watcher: parking_lot::Mutex<Option<Arc<Watcher>>>,
}

impl Workspace {
    /// Opens the workspace at `root`, creating its store if needed, and completes any restore
    /// a crash interrupted (see [`Workspace::recovered`]).
    pub fn open(root: impl AsRef<Path>, options: WorkspaceOptions) -> Result<Workspace> {
        let given = root.as_ref();
        let root =
            std::fs::canonicalize(given).map_err(|e| Error::io("open workspace", given, e))?;
        if !root.is_dir() {
            return Err(Error::InvalidArgument(format!(
                "workspace root {} is not a directory",
                root.display()
            )));
        }
        if let Some(store) = cairn_store::store_containing(&root) {
            return Err(Error::UnsafeRoot {
                detail: format!(
                    "workspace root {} lies inside the Cairn store {}: a restore there would \
                     delete the store's own files; choose a directory outside the store",
                    root.display(),
                    store.display()
                ),
                root,
            });
        }
        // The workspace is the one whose recorded root identity is this directory's, whatever
        // path reached it (a rename, a bind mount); else the one its path names.
        let (store_path, home, found) =
            home::locate(&root, options.store.as_deref(), options.id.is_none())?;
        let store = Store::open(&store_path, options.store_options.clone())?;
        let id = options
            .id
            .clone()
            .or(found)
            .unwrap_or_else(|| home::default_workspace_id(&root));
        cairn_store::check_workspace_id(&id)?;
        home::note_root(&store, &id, &root);
        let mut ws = Workspace {
            site: Site {
                root,
                id,
                store,
                memo: cairn_snapshot::CacheMemo::default(),
                own_files: parking_lot::Mutex::new(Vec::new()),
            },
            options,
            home,
            recovered: Vec::new(),
            watcher: parking_lot::Mutex::new(None),
        };
        ws.recover_on_open()?;
        Ok(ws)
    }

    /// The recovery hook of [`Workspace::open`]: unless the options turn it off, completes
    /// the restores a crash left unfinished (see [`Workspace::recover`]) and keeps what it did
    /// for [`Workspace::recovered`].
    fn recover_on_open(&mut self) -> Result<()> {
        if self.options.recover {
            self.recovered = journal::recover_all(&self.site)?;
        }
        Ok(())
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        self.site.root()
    }

    /// The workspace id.
    pub fn id(&self) -> &str {
        self.site.id()
    }

    /// The store.
    pub fn store(&self) -> &Store {
        self.site.store()
    }

    /// Why the store is where it is: given, named by `$CAIRN_STORE`, in the data directory,
    /// or a legacy `<root>/.cairn`.
    pub fn store_home(&self) -> home::StoreHome {
        self.home
    }

    /// The options it was opened with.
    pub fn options(&self) -> &WorkspaceOptions {
        &self.options
    }

    /// What opening did with journals a crash left pending.
    pub fn recovered(&self) -> &[Recovery] {
        &self.recovered
    }

    /// Writes the stat cache the last snapshot left to the store now, and waits for it. A
    /// snapshot that changed something returns before its cache is written (a background
    /// thread writes it a moment later, unless the next snapshot supersedes it; the snapshot
    /// itself is durable); dropping the workspace writes it at once. For a caller that wants
    /// the file written now, and for benchmarks.
    pub fn flush_stat_cache(&self) {
        self.site.memo.wait();
    }

    /// Snapshot options with the workspace's capture settings as the call's defaults (the
    /// rest of its settings [`Workspace::snapshot`] applies itself).
    pub fn snapshot_options(&self) -> SnapshotOptions {
        SnapshotOptions {
            capture: self.options.capture.clone(),
            ..SnapshotOptions::default()
        }
    }

    /// Names a file Cairn itself keeps that may lie beneath the root, such as a thread
    /// database given with `--threads-db`: from now on every snapshot, plan and restore of
    /// this handle leaves it and its companions (`-wal`, `-shm`, `-journal`, `-holders`) out, as
    /// it does the store, so a rewind never finds it changed under it nor writes over it. A
    /// file outside the root changes nothing.
    pub fn keep_out(&self, file: &Path) {
        let mut own = self.site.own_files.lock();
        if !own.iter().any(|f| f == file) {
            own.push(file.to_path_buf());
        }
    }

    /// Takes a snapshot, watched and steered by `ctx`. A restore a crash left unfinished is
    /// finished first where it can be (see [`Workspace::recover`]; one with paths in its way
    /// stays pending and reported). The workspace's settings are applied to the call's
    /// options here, once: its excludes added to the call's, and the files Cairn keeps
    /// beneath the root ([`Workspace::keep_out`]) to the call's own; then finished restores
    /// are made durable (see [`Workspace::recover`]) and the workspace's retention runs (its
    /// failure is returned in the outcome, never failing the snapshot).
    ///
    /// With a watcher (`ctx`'s, this handle's from [`Workspace::watch`], or a `cairn watch`
    /// daemon of the workspace), only what changed is looked at (see [`crate::watch`]);
    /// [`Snapshot::walk`] says what was walked and why. A daemon takes the snapshot itself
    /// when `ctx` has no cancel token and no progress callback (see
    /// [`Workspace::daemon_takes_snapshots`]), with the options as they are.
    /// A label longer than [`cairn_store::MAX_LABEL_BYTES`] is refused with
    /// `INVALID_ARGUMENT` before anything is done.
    pub fn snapshot(
        &self,
        options: &SnapshotOptions,
        mut ctx: Context<'_>,
    ) -> Result<SnapshotOutcome> {
        if let Some(label) = &options.label {
            cairn_store::check_label(label)?;
        }
        journal::finish_before_snapshot(&self.site)?;
        let options = self.settled(options);
        match self.route(&ctx) {
            Route::Given => {}
            Route::Watcher(w) => ctx.watch = Some(w),
            Route::Daemon { socket, take } => {
                match client::delegate(socket, self.watch_target(), &options, take) {
                    client::Delegated::Taken(snapshot) => return Ok(self.outcome(*snapshot)),
                    client::Delegated::Ask(client) => ctx.watch = Some(Arc::new(client)),
                    client::Delegated::None => {}
                }
            }
            Route::Walk => {}
        }
        let snapshot = self.take_here(&options, ctx)?;
        self.merge_packs_after_snapshot();
        Ok(self.outcome(snapshot))
    }

    /// Whether a snapshot of this handle that nothing binds to the calling process (no cancel
    /// token, no progress callback, no watcher of the call's own) goes to a `cairn watch`
    /// daemon of the workspace, which takes it whole (there is then no progress to show): no
    /// watcher was started in this process ([`Workspace::watch`]), a daemon may be used
    /// (`CAIRN_WATCH` is not `off`) and its socket is there. A daemon that does not answer,
    /// or refuses, leaves the snapshot to this process after all.
    pub fn daemon_takes_snapshots(&self) -> bool {
        matches!(
            self.route(&Context::default()),
            Route::Daemon { take: true, .. }
        )
    }

    /// Where a snapshot with `ctx` is taken: the one decision of [`Workspace::snapshot`].
    fn route(&self, ctx: &Context<'_>) -> Route {
        if ctx.watch.is_some() {
            return Route::Given;
        }
        if let Some(w) = self.watcher() {
            return Route::Watcher(w);
        }
        match client::socket_in_use(self.store(), self.id()) {
            Some(socket) => Route::Daemon {
                socket,
                take: ctx.cancel.is_none() && ctx.progress.is_none(),
            },
            None => Route::Walk,
        }
    }

    /// This workspace as a request to a `cairn watch` daemon names it.
    pub(crate) fn watch_target(&self) -> Target {
        Target {
            store: self.store().path().to_path_buf(),
            workspace_id: self.id().to_string(),
            root: self.root().to_path_buf(),
            remote: self.options.store_options.remote.is_some(),
        }
    }

    /// The snapshot the `cairn watch` daemon takes for another process, with `options` as that
    /// process's [`Workspace::snapshot`] settled them and the daemon's watcher in `ctx`. A
    /// restore a crash left unfinished is finished first, as for any snapshot; the daemon
    /// merges its packs once idle, off the snapshots' path.
    pub(crate) fn snapshot_for_daemon(
        &self,
        options: &SnapshotOptions,
        ctx: Context<'_>,
    ) -> Result<SnapshotOutcome> {
        journal::finish_before_snapshot(&self.site)?;
        let snapshot = self.take_here(options, ctx)?;
        Ok(self.outcome(snapshot))
    }

    /// `options` with the workspace's settings applied: its excludes added to the call's, and
    /// the files Cairn keeps beneath the root to the call's own.
    fn settled(&self, options: &SnapshotOptions) -> SnapshotOptions {
        let mut opts = options.clone();
        for e in &self.options.capture.excludes {
            if !opts.capture.excludes.contains(e) {
                opts.capture.excludes.push(e.clone());
            }
        }
        for f in self.site.own_files() {
            if !opts.own_files.contains(&f) {
                opts.own_files.push(f);
            }
        }
        opts
    }

    /// Takes the snapshot in this process, with this handle's stat cache kept in memory
    /// (unless `ctx` brings one), and makes finished restores durable after it.
    fn take_here(&self, options: &SnapshotOptions, mut ctx: Context<'_>) -> Result<Snapshot> {
        ctx.memo.get_or_insert_with(|| self.site.memo.clone());
        let snapshot =
            cairn_snapshot::snapshot(self.store(), self.root(), self.id(), options, ctx)?;
        // A restore returns before its changes are known durable; confirm it now rather than
        // leave it to the next restore or opening. Best effort: a failure here never fails the
        // snapshot, and the next opening or restore confirms the same journal and reports it.
        let _ = journal::confirm_applied(&self.site);
        Ok(snapshot)
    }

    /// `snapshot` with the workspace's retention run after it.
    fn outcome(&self, snapshot: Snapshot) -> SnapshotOutcome {
        SnapshotOutcome {
            snapshot,
            prune: self.prune_after(),
        }
    }

    /// Merges the store's small packs once a snapshot leaves more than
    /// [`MERGE_AFTER_SNAPSHOT_PACKS`] packs (see [`cairn_store::Store::merge_small_packs`]):
    /// each snapshot that writes an object adds a pack, so a store snapshotted by walking
    /// processes or an in-process watcher would otherwise grow one per snapshot until a
    /// collection. Counted from the packs this handle loaded (no listing, no marker) before
    /// anything else, so that a snapshot below the limit pays nothing. Best effort: a merge
    /// that fails loses nothing (the packs stay as they were) and never fails the snapshot;
    /// the next snapshot tries again.
    fn merge_packs_after_snapshot(&self) {
        let store = self.store();
        if store.loaded_pack_count() <= MERGE_AFTER_SNAPSHOT_PACKS {
            return;
        }
        // (A store that caches a remote never merges: `merge_small_packs` says so.)
        let _ = store.merge_small_packs(&cairn_store::merge::MergeOptions {
            max_small_packs: MERGE_AFTER_SNAPSHOT_PACKS,
            ..Default::default()
        });
    }

    /// The workspace's retention, after a snapshot (its failure reported, never raised).
    fn prune_after(&self) -> Option<std::result::Result<cairn_store::retain::PruneReport, String>> {
        self.options.retain.as_ref().map(|r| {
            self.store()
                .prune(r, &self.options.gc)
                .map_err(|e| e.to_string())
        })
    }

    /// Starts a watcher of the workspace inside this process (see [`cairn_snapshot::watch`]):
    /// from now on each snapshot of this handle looks only at what changed since the last
    /// one. The store and Cairn's data directory are never watched. Replaces a watcher
    /// started before; refused on a file system inotify cannot watch.
    pub fn watch(&self, options: &WatchOptions) -> Result<Arc<Watcher>> {
        let mut options = options.clone();
        options.skip_dirs.push(self.store().path().to_path_buf());
        if let Ok(data) = cairn_store::home::data_dir() {
            options.skip_dirs.push(data);
        }
        let w = Arc::new(Watcher::start(self.root(), &options)?);
        *self.watcher.lock() = Some(w.clone());
        Ok(w)
    }

    /// Stops the watcher [`Workspace::watch`] started (snapshots walk again, or ask a daemon).
    pub fn unwatch(&self) {
        self.watcher.lock().take();
    }

    /// The watcher [`Workspace::watch`] started, if any.
    pub fn watcher(&self) -> Option<Arc<Watcher>> {
        self.watcher.lock().clone()
    }

    /// Takes a hold: while any hold stands, in this process or another sharing the store, a
    /// restore is refused with `BUSY` and a dry run says `busy: true`. With `pid`, the hold
    /// also lasts until that process exits (a command's leftover background process). Refused
    /// with `BUSY` while a restore changes files.
    pub fn hold(&self, what: &str, pid: Option<u32>) -> Result<Hold> {
        hold::take(&self.site, what, pid)
    }

    /// The holds standing on this workspace. Stale ones (holder gone, process exited) are
    /// removed.
    pub fn holds(&self) -> Result<Vec<HoldInfo>> {
        hold::list(&self.site)
    }

    /// Plans restoring `snapshot` into the workspace: walks the current files with the
    /// snapshot's capture settings and the stat cache (`ctx` watches and steers the walk), and
    /// lists every change. Changes nothing: this is the dry run ([`Report::dry_run`]).
    pub fn plan(
        &self,
        snapshot: &SnapshotId,
        options: &PlanOptions,
        ctx: Context<'_>,
    ) -> Result<Plan> {
        plan::plan(&self.site, snapshot, options, ctx)
    }

    /// Applies a plan made earlier: holds checked, a safety snapshot taken and the plan
    /// checked against it, then the plan carried out under a journal (see [`crate::apply`]
    /// for what the result means). `ctx` gives the safety snapshot's walk its progress and
    /// threads, and its cancel token is checked before the walk and after it. A watcher
    /// spares the walk as it spares [`Workspace::restore`]'s.
    pub fn apply(
        &self,
        plan: &Plan,
        options: &ApplyOptions,
        mut ctx: Context<'_>,
    ) -> Result<Report> {
        self.ask_watcher(&mut ctx);
        apply::apply(&self.site, plan, options, ctx)
    }

    /// Plans a restore of `snapshot` with `planning` and applies it with `options`: the files
    /// are walked once (`ctx` steers the walk): that walk is both what the plan is made from
    /// and the safety snapshot, which is written only when the plan changes something (a
    /// restore with nothing to do leaves no snapshot). A watcher spares it the whole tree as
    /// it spares a snapshot ([`Workspace::snapshot`]: `ctx`'s, this handle's, or a `cairn
    /// watch` daemon's, asked only what changed); every path the restore would then write
    /// over or remove is first compared with what the watched walk recorded, and one that
    /// differs makes it walk the whole tree after all ([`Report::safety_walk`] says which). [`Workspace::apply`] of a plan made earlier walks again for
    /// its safety snapshot and checks the plan against it.
    ///
    /// It returns once every change is made, without waiting for the disk: the next snapshot,
    /// restore or opening of the workspace, or [`Workspace::recover`], makes the changes
    /// durable (see [`crate::journal`] for what a crash or a power cut leaves).
    ///
    /// With a `cairn watch` daemon of the workspace running and nothing binding the call to
    /// this process (no cancel token, progress callback, thread count or watcher of its own,
    /// as for [`Workspace::daemon_takes_snapshots`]), the daemon carries the restore out,
    /// with the same plan, journal, safety snapshot and checks, and makes its changes durable
    /// right after it answers; its report, or its error (kind, message and path), is returned
    /// as this call's. This handle's stat cache is written first, for the daemon's walk. A
    /// daemon that refuses (another workspace, or a file [`Workspace::keep_out`] named that it
    /// does not keep out) or does not answer leaves the restore to this process, asking it
    /// what changed as above, under the idempotency key it was handed with (one of this
    /// call's making where `options` has none): a restore the daemon left unfinished is that
    /// one, finished here and reported as the daemon would have, its safety snapshot named.
    pub fn restore(
        &self,
        snapshot: &SnapshotId,
        planning: &PlanOptions,
        options: &ApplyOptions,
        mut ctx: Context<'_>,
    ) -> Result<Report> {
        let mut keyed = options.clone();
        match self.route(&ctx) {
            Route::Daemon { socket, take: true }
                if ctx.threads.is_none() && !options.bound_to_process() =>
            {
                // An idempotency key of its own where the caller gave none (a fresh journal
                // id): a daemon that dies midway leaves its journal under it, which this
                // process then finishes and reports as the daemon would have (with its safety
                // snapshot) instead of finding nothing left to do.
                keyed.key.get_or_insert_with(|| journal::journal_id(None));
                let req = self.restore_request(snapshot, planning, &keyed);
                // The stat cache this handle's snapshots left, written first: the daemon's
                // walk builds on the file.
                self.site.memo.wait();
                match client::restore(socket, req) {
                    client::Restored::Done(report) => return Ok(*report),
                    client::Restored::Failed(e) => return Err(e),
                    client::Restored::NotDone(asked) => ctx.watch = Some(Arc::new(asked)),
                }
            }
            _ => self.ask_watcher(&mut ctx),
        }
        apply::restore(&self.site, snapshot, planning, &keyed, ctx)
    }

    /// [`Workspace::restore`]'s arguments as a request to the `cairn watch` daemon.
    fn restore_request(
        &self,
        snapshot: &SnapshotId,
        planning: &PlanOptions,
        options: &ApplyOptions,
    ) -> RestoreRequest {
        use std::os::unix::ffi::OsStrExt;
        RestoreRequest {
            of: self.watch_target(),
            snapshot: *snapshot,
            planning: planning.clone(),
            key: options.key.clone(),
            own_files: self
                .site
                .own_files()
                .iter()
                .map(|f| f.as_os_str().as_bytes().to_vec())
                .collect(),
        }
    }

    /// Whether the `cairn watch` daemon serving this handle takes requests for `of`, or why
    /// not (the asking process does the work itself): another store, workspace, root or remote.
    pub(crate) fn serves(&self, of: &Target) -> std::result::Result<(), String> {
        if *of == self.watch_target() {
            return Ok(());
        }
        Err(format!(
            "this watcher serves workspace {} at {} in store {}",
            self.id(),
            self.root().display(),
            self.store().path().display()
        ))
    }

    /// Whether the `cairn watch` daemon carries out the restore another process asked for in
    /// `req`, or why not (the asking process does it itself): another workspace
    /// ([`Workspace::serves`]), or a file the asking process keeps out that this handle does
    /// not.
    pub(crate) fn accept_restore(&self, req: &RestoreRequest) -> std::result::Result<(), String> {
        self.serves(&req.of)?;
        use std::os::unix::ffi::OsStrExt;
        let own = self.site.own_files();
        if let Some(f) = req
            .own_files
            .iter()
            .find(|f| !own.iter().any(|o| o.as_os_str().as_bytes() == f.as_slice()))
        {
            return Err(format!(
                "the asking process keeps {} out of the workspace, and this watcher does not",
                String::from_utf8_lossy(f)
            ));
        }
        Ok(())
    }

    /// Carries out, in the daemon, a restore [`Workspace::accept_restore`] accepted, with the
    /// daemon's watcher, stat cache and cancel token in `ctx`.
    pub(crate) fn restore_for_daemon(
        &self,
        snapshot: &SnapshotId,
        planning: &PlanOptions,
        options: &ApplyOptions,
        ctx: Context<'_>,
    ) -> Result<Report> {
        apply::restore(&self.site, snapshot, planning, options, ctx)
    }

    /// Gives `ctx` the watcher a snapshot would ask ([`Workspace::route`]), for a restore's
    /// safety walk. The walk is the restore's own (checked against its plan before anything
    /// changes), so a daemon is asked only what changed.
    fn ask_watcher(&self, ctx: &mut Context<'_>) {
        match self.route(ctx) {
            Route::Given | Route::Walk => {}
            Route::Watcher(w) => ctx.watch = Some(w),
            Route::Daemon { socket, .. } => ctx.watch = Some(Arc::new(client::Client::new(socket))),
        }
    }

    /// Completes restores a crash left pending; returns what it did. A restore obstructed by a
    /// later edit stays pending (and later restores are refused with `CONFLICT`) until the
    /// obstruction is resolved and this is called again. While a restore of the workspace is
    /// running (in any process) this leaves its journal alone: that restore finishes it.
    ///
    /// It also makes the changes of finished restores durable (a restore returns once its
    /// changes are made, before the disk has them): call it after a restore to have them on
    /// disk before going on. Opening the workspace, the next snapshot and the next restore do it anyway.
    pub fn recover(&self) -> Result<Vec<Recovery>> {
        journal::recover_all(&self.site)
    }

    /// Finishes what [`Workspace::recover`] can of every interrupted restore, then gives up
    /// those it cannot finish (paths obstructed by later edits, or that cannot be changed):
    /// each is ended as it stands, its staged files removed, and reported with `abandoned`
    /// and the paths left as they are. Nothing is lost: the journal's safety snapshot holds
    /// the files as they were before the restore, its target as they would have been.
    /// `BUSY` while a restore of the workspace runs.
    pub fn give_up(&self) -> Result<Vec<Recovery>> {
        journal::give_up(&self.site)
    }

    /// Removes the files restores staged (`.cairn-tmp-<journal>-<n>`) that no unfinished
    /// restore of this workspace will finish: left in a tree copied (`cp -a`) while a restore
    /// of the original was pending, or by a restore whose journal is gone. They are Cairn's own
    /// copies of content it holds elsewhere, never the user's files, and snapshots and plans
    /// leave them out (`skipped` and `kept` with the reason `staged`). Walks the workspace
    /// (not the default excludes, not the store); `BUSY` while a restore of it runs.
    pub fn remove_stray_staged(&self) -> Result<Vec<StrayStaged>> {
        journal::remove_stray_staged(&self.site)
    }

    /// Every restore journal of the workspace (reads them all: done journals are kept for
    /// their idempotency keys).
    pub fn journals(&self) -> Result<Vec<Journal>> {
        journal::list(&self.site)
    }

    /// The journal of the restore made with idempotency key `key`, if there is one.
    pub fn journal_for_key(&self, key: &str) -> Result<Option<Journal>> {
        journal::read(&self.site, &journal::journal_id(Some(key)))
    }

    /// Whether the restore of journal `id` was given up ([`Workspace::give_up`]): ended as it
    /// stood, its done journal no sign that the files are the target's.
    pub fn journal_given_up(&self, id: &str) -> Result<bool> {
        journal::given_up(&self.site, id)
    }
}

/// Where [`Workspace::snapshot`] takes a snapshot (and where a restore's walk learns what
/// changed).
enum Route {
    /// In this process, with the watcher the call brings ([`Context::watch`]).
    Given,
    /// In this process, with the watcher [`Workspace::watch`] started.
    Watcher(Arc<Watcher>),
    /// By the `cairn watch` daemon listening at `socket` (`take`), or in this process with
    /// the daemon asked what changed (the call is bound to this process: a cancel token or a
    /// progress callback).
    Daemon { socket: PathBuf, take: bool },
    /// In this process, walking.
    Walk,
}

/// What [`Workspace::snapshot`] did: the snapshot, and the retention that followed.
#[derive(Debug)]
pub struct SnapshotOutcome {
    /// The snapshot.
    pub snapshot: Snapshot,
    /// The retention that followed, if the workspace has one: its report, or why it failed.
    pub prune: Option<std::result::Result<cairn_store::retain::PruneReport, String>>,
}
