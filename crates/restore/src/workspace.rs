//! The workspace: a root, the store that keeps its snapshots, its capture settings, and the
//! holds that make a restore wait.

use crate::error::{Error, Result};
use cairn_snapshot::{Options as SnapshotOptions, Snapshot};
use cairn_store::fsutil::{self, HeldLock, LockMode};
use cairn_store::gc::GcOptions;
use cairn_store::retain::Retention;
use cairn_store::{Store, StoreOptions};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

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
    /// Exclude globs every snapshot of the workspace leaves out.
    pub excludes: Vec<String>,
    /// Files larger than this are skipped unless a call says otherwise (default 10 MiB).
    pub max_file_bytes: u64,
    /// Honour `.gitignore` and `.cairnignore` (default on).
    pub gitignore: bool,
    /// Skip files with several hard links.
    pub refuse_hard_links: bool,
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
            excludes: Vec::new(),
            max_file_bytes: cairn_snapshot::DEFAULT_MAX_FILE_BYTES,
            gitignore: true,
            refuse_hard_links: false,
            retain: None,
            gc: GcOptions::default(),
            recover: true,
            store_options: StoreOptions::default(),
        }
    }
}

/// A workspace: a directory tree an agent edits, and the store that keeps its snapshots.
#[derive(Debug)]
pub struct Workspace {
    pub(crate) root: PathBuf,
    pub(crate) id: String,
    pub(crate) store: Store,
    pub(crate) options: WorkspaceOptions,
    /// Why the store is where it is.
    pub(crate) home: crate::home::StoreHome,
    /// What opening found in pending journals, if anything.
    pub(crate) recovered: Vec<crate::journal::Recovery>,
    /// The stat cache between this handle's snapshots and plans.
    pub(crate) memo: cairn_snapshot::CacheMemo,
    /// Files Cairn keeps that may lie beneath the root ([`Workspace::keep_out`]).
    pub(crate) own_files: parking_lot::Mutex<Vec<PathBuf>>,
}

/// The default id of a workspace rooted at `root` (canonical): `ws-` and 16 hex digits of its
/// SHA-256.
pub fn default_workspace_id(root: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let id = cairn_store::ObjectId::of(root.as_os_str().as_bytes());
    format!("ws-{}", &id.to_hex()[..16])
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
            crate::home::locate(&root, options.store.as_deref(), options.id.is_none())?;
        let store = Store::open(&store_path, options.store_options.clone())?;
        let id = options
            .id
            .clone()
            .or(found)
            .unwrap_or_else(|| default_workspace_id(&root));
        cairn_store::check_workspace_id(&id)?;
        crate::home::note_root(&store, &id, &root);
        let mut ws = Workspace {
            root,
            id,
            store,
            options,
            home,
            recovered: Vec::new(),
            memo: cairn_snapshot::CacheMemo::default(),
            own_files: parking_lot::Mutex::new(Vec::new()),
        };
        if ws.options.recover {
            ws.recovered = crate::journal::recover_all(&ws)?;
        }
        Ok(ws)
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The workspace id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Why the store is where it is: given, named by `$CAIRN_STORE`, in the data directory,
    /// or a legacy `<root>/.cairn`.
    pub fn store_home(&self) -> crate::home::StoreHome {
        self.home
    }

    /// The options it was opened with.
    pub fn options(&self) -> &WorkspaceOptions {
        &self.options
    }

    /// What opening did with journals a crash left pending.
    pub fn recovered(&self) -> &[crate::journal::Recovery] {
        &self.recovered
    }

    /// Waits until the stat cache the last snapshot left is written to the store. A snapshot
    /// that changed something returns before its cache is written (a background thread writes
    /// it; the snapshot itself is durable); the next snapshot, and dropping the workspace, wait
    /// for it anyway. For a caller that wants the file written now, and for benchmarks.
    pub fn flush_stat_cache(&self) {
        self.memo.wait();
    }

    /// Snapshot options with the workspace's capture settings and its in-memory stat cache.
    pub fn snapshot_options(&self) -> SnapshotOptions {
        SnapshotOptions {
            excludes: self.options.excludes.clone(),
            max_file_bytes: self.options.max_file_bytes,
            gitignore: self.options.gitignore,
            refuse_hard_links: self.options.refuse_hard_links,
            memo: Some(self.memo.clone()),
            own_files: self.own_files(),
            ..SnapshotOptions::default()
        }
    }

    /// Names a file Cairn itself keeps that may lie beneath the root, such as a thread
    /// database given with `--threads-db`: from now on every snapshot, plan and restore of
    /// this handle leaves it and its companions (`-wal`, `-shm`, `-journal`, `-holders`) out, as
    /// it does the store, so a rewind never finds it changed under it nor writes over it. A
    /// file outside the root changes nothing.
    pub fn keep_out(&self, file: &Path) {
        let mut own = self.own_files.lock();
        if !own.iter().any(|f| f == file) {
            own.push(file.to_path_buf());
        }
    }

    /// The files [`Workspace::keep_out`] named.
    pub(crate) fn own_files(&self) -> Vec<PathBuf> {
        self.own_files.lock().clone()
    }

    /// Takes a snapshot. A restore a crash left unfinished is finished first where it can be
    /// (see [`Workspace::recover`]; one with paths in its way stays pending and reported). The
    /// workspace's excludes are added to `options.excludes`; then finished restores are made durable (see [`Workspace::recover`]) and the workspace's
    /// retention runs (its failure is returned in the outcome, never failing the snapshot).
    pub fn snapshot(&self, options: &SnapshotOptions) -> Result<Snapshot> {
        self.snapshot_with_progress(options, None)
            .map(|o| o.snapshot)
    }

    /// [`Workspace::snapshot`] with a progress callback, returning the retention outcome too.
    pub fn snapshot_with_progress(
        &self,
        options: &SnapshotOptions,
        progress: Option<cairn_snapshot::ProgressFn<'_>>,
    ) -> Result<SnapshotOutcome> {
        crate::journal::finish_before_snapshot(self)?;
        let mut opts = options.clone();
        opts.memo.get_or_insert_with(|| self.memo.clone());
        for e in &self.options.excludes {
            if !opts.excludes.contains(e) {
                opts.excludes.push(e.clone());
            }
        }
        let snapshot = cairn_snapshot::snapshot_with_progress(
            &self.store,
            &self.root,
            &self.id,
            &opts,
            progress,
        )?;
        // A restore returns before its changes are known durable; confirm it now rather than
        // leave it to the next restore or opening. Best effort: a failure here never fails the
        // snapshot, and the next opening or restore confirms the same journal and reports it.
        let _ = crate::journal::confirm_applied(self);
        let prune = self.options.retain.as_ref().map(|r| {
            self.store
                .prune(r, &self.options.gc)
                .map_err(|e| e.to_string())
        });
        Ok(SnapshotOutcome { snapshot, prune })
    }

    /// Takes a hold: while any hold stands, in this process or another sharing the store, a
    /// restore is refused with `BUSY` and a dry run says `busy: true`. With `pid`, the hold
    /// also lasts until that process exits (a command's leftover background process). Refused
    /// with `BUSY` while a restore changes files.
    pub fn hold(&self, what: &str, pid: Option<u32>) -> Result<Hold> {
        let locks = &self.store.layout().locks;
        let restore_lock_path = restore_lock_path(locks, &self.id);
        // Both locks are HeldLocks, ended with LOCK_UN: a descriptor merely closed keeps its
        // lock while a child forked by another thread holds a copy, and a restore started
        // just after the hold would be refused as if another were running.
        let restore_lock = fsutil::open_lock_file(&restore_lock_path)?;
        let Some(restore_lock) =
            HeldLock::take(restore_lock, LockMode::Shared, false, &restore_lock_path)?
        else {
            return Err(Error::Busy {
                detail: format!("a restore of {} is changing files", self.root.display()),
            });
        };
        let info = HoldInfo {
            workspace_id: self.id.clone(),
            what: what.to_string(),
            pid,
            holder_pid: std::process::id(),
        };
        let tmp = fsutil::temp_name(&self.store.layout().tmp, "hold");
        let mut f = HeldLock::take(
            fsutil::create_new_file(&tmp)?,
            LockMode::Exclusive,
            true,
            &tmp,
        )?
        .expect("a lock waited for is taken");
        f.file_mut()
            .write_all(&serde_json::to_vec(&info).expect("a hold serialises"))
            .map_err(|e| Error::io("write hold", &tmp, e))?;
        let name = tmp
            .file_name()
            .map(|n| n.to_string_lossy().trim_end_matches(".tmp").to_string())
            .unwrap_or_default();
        let path = locks.join(format!("{name}.hold"));
        std::fs::rename(&tmp, &path).map_err(|e| Error::io("register hold", &path, e))?;
        drop(restore_lock);
        Ok(Hold {
            file: Some(f),
            path,
            keep_file: pid.is_some(),
        })
    }

    /// The holds standing on this workspace. Stale ones (holder gone, process exited) are
    /// removed.
    pub fn holds(&self) -> Result<Vec<HoldInfo>> {
        let locks = &self.store.layout().locks;
        let mut out = Vec::new();
        for entry in std::fs::read_dir(locks).map_err(|e| Error::io("list", locks, e))? {
            let entry = entry.map_err(|e| Error::io("list", locks, e))?;
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("hold")
                || !entry.file_type().map(|t| t.is_file()).unwrap_or(false)
            {
                continue;
            }
            let mut f = match fsutil::open_lock_file(&path) {
                Ok(f) => f,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e.into()),
            };
            let mut buf = Vec::new();
            let _ = f.read_to_end(&mut buf);
            let info: Option<HoldInfo> = serde_json::from_slice(&buf).ok();
            // The probe's lock, if taken, ends with LOCK_UN at the end of this turn.
            let probe = HeldLock::take(f, LockMode::Exclusive, false, &path)?;
            let held = probe.is_none();
            let process_alive = info
                .as_ref()
                .and_then(|i| i.pid)
                .map(pid_alive)
                .unwrap_or(false);
            if !held && !process_alive {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            if let Some(info) = info {
                if info.workspace_id == self.id {
                    out.push(info);
                }
            }
        }
        Ok(out)
    }
}

/// What [`Workspace::snapshot_with_progress`] did.
#[derive(Debug)]
pub struct SnapshotOutcome {
    /// The snapshot.
    pub snapshot: Snapshot,
    /// The retention that followed, if the workspace has one: its report, or why it failed.
    pub prune: Option<std::result::Result<cairn_store::retain::PruneReport, String>>,
}

fn pid_alive(pid: u32) -> bool {
    match rustix::process::Pid::from_raw(pid as i32) {
        Some(p) => rustix::process::test_kill_process(p).is_ok(),
        None => false,
    }
}

pub(crate) fn restore_lock_path(locks: &Path, workspace_id: &str) -> PathBuf {
    locks.join(format!("restore-{workspace_id}.lock"))
}

/// What a hold records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldInfo {
    /// The workspace held.
    pub workspace_id: String,
    /// What holds it (a command, a run, a tool call).
    pub what: String,
    /// A process whose life the hold lasts for.
    pub pid: Option<u32>,
    /// The process that took the hold.
    pub holder_pid: u32,
}

/// A hold; dropping it releases it (a hold naming a process lasts until that process exits).
#[derive(Debug)]
pub struct Hold {
    file: Option<HeldLock>,
    path: PathBuf,
    keep_file: bool,
}

impl Drop for Hold {
    fn drop(&mut self) {
        if !self.keep_file {
            let _ = std::fs::remove_file(&self.path);
        }
        drop(self.file.take());
    }
}
