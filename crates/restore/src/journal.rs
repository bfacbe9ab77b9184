//! Restore journals: the durable record of a restore in flight, completed after a crash.
//!
//! A journal file is `"CAIRNJNL"`, a little-endian `u32` version, then the [`Journal`] as JSON
//! (the plan it holds is the same document a dry run prints). It is synced before the first
//! change. Opening the workspace completes a pending journal: a path already in its target
//! state is skipped, one still as the safety snapshot holds it is done, and one an unrelated
//! later edit obstructs is left as it is and reported, the journal staying for a retry.
//!
//! A journal lives in `<store>/journal/<workspace>/<id>.journal` until it is done, then in
//! `<id>.done`; opening the workspace reads only the `.journal` files.
//!
//! A journal is first written in the `staging` state, before the first content is staged
//! beside its target: a restore that dies while staging has changed nothing but left staged
//! files, and opening the workspace removes them and the journal (the restore is abandoned).

use crate::apply::{Exec, Mode, Report};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::workspace::Workspace;
use cairn_store::{fsutil, RelPath, SnapshotId};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Magic at the start of a journal file.
pub const JOURNAL_MAGIC: &[u8; 8] = b"CAIRNJNL";
/// The journal format version.
pub const JOURNAL_VERSION: u32 = 1;

/// Where a restore stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Contents are being staged beside their targets; nothing in the workspace has changed.
    /// Recovery removes the staged files and the journal: the restore is abandoned.
    Staging,
    /// Changes may have been made; not finished.
    Pending,
    /// Finished; the report is kept for its idempotency key.
    Done,
}

/// A restore journal.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    /// The journal's id (its file name).
    pub id: String,
    /// The idempotency key, if the caller gave one.
    pub key: Option<String>,
    /// The workspace.
    pub workspace_id: String,
    /// The snapshot restored.
    pub target: SnapshotId,
    /// The safety snapshot taken before the first change.
    pub safety: Option<SnapshotId>,
    /// The plan being carried out.
    pub plan: Plan,
    /// Where it stands.
    pub state: State,
    /// The report, once done.
    pub report: Option<Report>,
}

/// What completing a pending journal did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recovery {
    /// The journal.
    pub journal: String,
    /// The snapshot it restores.
    pub target: SnapshotId,
    /// The safety snapshot (restoring it undoes the restore).
    pub safety: Option<SnapshotId>,
    /// Whether the restore is now complete.
    pub completed: bool,
    /// Paths an unrelated later edit obstructs; left as they are.
    pub obstructed: Vec<RelPath>,
}

pub(crate) fn journal_dir(ws: &Workspace) -> Result<PathBuf> {
    let dir = ws.store().layout().journal.join(ws.id());
    fsutil::ensure_dir(&dir)?;
    Ok(dir)
}

/// The journal id for an idempotency key, or a fresh one.
pub(crate) fn journal_id(key: Option<&str>) -> String {
    match key {
        Some(k) => format!(
            "key-{}",
            &cairn_store::ObjectId::of(k.as_bytes()).to_hex()[..32]
        ),
        None => {
            let seed = format!(
                "{}-{}-{:?}",
                std::process::id(),
                fsutil::now_ms(),
                std::time::Instant::now()
            );
            format!(
                "r-{}",
                &cairn_store::ObjectId::of(seed.as_bytes()).to_hex()[..24]
            )
        }
    }
}

/// The file of a journal: `<id>.journal` while it is staging or pending, `<id>.done` once
/// done. Opening a workspace reads only the `.journal` files, so its cost does not grow with
/// the number of restores ever made.
fn path_of(dir: &std::path::Path, id: &str, done: bool) -> PathBuf {
    dir.join(format!("{id}.{}", if done { "done" } else { "journal" }))
}

pub(crate) fn write(ws: &Workspace, j: &Journal) -> Result<()> {
    let dir = journal_dir(ws)?;
    let mut bytes = Vec::new();
    bytes.extend_from_slice(JOURNAL_MAGIC);
    bytes.extend_from_slice(&JOURNAL_VERSION.to_le_bytes());
    bytes.extend_from_slice(&serde_json::to_vec(j).expect("a journal serialises"));
    let done = j.state == State::Done;
    fsutil::write_atomic(
        &ws.store().layout().tmp,
        &path_of(&dir, &j.id, done),
        &bytes,
    )?;
    if done {
        // A crash before this removal leaves both: the `.done` file wins (see `list`).
        fsutil::remove_if_exists(&path_of(&dir, &j.id, false))?;
    }
    Ok(())
}

pub(crate) fn read(ws: &Workspace, id: &str) -> Result<Option<Journal>> {
    let dir = journal_dir(ws)?;
    // `.done` wins over `.journal` (a crash between writing one and removing the other leaves
    // both); looked for again last, in case the restore finished between the first two looks.
    for done in [true, false, true] {
        let path = path_of(&dir, id, done);
        match std::fs::read(&path) {
            Ok(b) => return decode(&b, &path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("read journal", &path, e)),
        }
    }
    Ok(None)
}

/// Decodes journal file bytes (`path` is only named in errors). Bytes that are not a journal
/// are `CORRUPT`; another format version is `UNSUPPORTED`.
pub fn decode(bytes: &[u8], path: &std::path::Path) -> Result<Journal> {
    if bytes.len() < 12 || &bytes[..8] != JOURNAL_MAGIC {
        return Err(cairn_store::Error::corrupt("journal", path, "bad magic").into());
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != JOURNAL_VERSION {
        return Err(cairn_store::Error::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            supported: JOURNAL_VERSION,
        }
        .into());
    }
    let j: Journal = serde_json::from_slice(&bytes[12..])
        .map_err(|e| cairn_store::Error::corrupt("journal", path, e.to_string()))?;
    // A journal is carried out when the workspace is opened: every path it acts on must be a
    // plain relative path whose components a tree could hold (never empty, `.` or `..`).
    let plain = |p: &[u8]| {
        !p.is_empty()
            && p.split(|&b| b == b'/')
                .all(|c| cairn_store::tree::check_name(c).is_ok())
    };
    if let Some(a) = j.plan.actions.iter().find(|a| !plain(a.path().as_bytes())) {
        return Err(cairn_store::Error::corrupt(
            "journal",
            path,
            format!(
                "it acts on {:?}, which is not a path inside the workspace",
                a.path().display()
            ),
        )
        .into());
    }
    Ok(j)
}

/// Every journal of the workspace, done ones included.
pub fn list(ws: &Workspace) -> Result<Vec<Journal>> {
    let mut out = read_all(ws, true)?;
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// The journals not done: the only ones opening a workspace reads.
fn list_unfinished(ws: &Workspace) -> Result<Vec<Journal>> {
    let mut out = read_all(ws, false)?;
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

fn read_all(ws: &Workspace, with_done: bool) -> Result<Vec<Journal>> {
    let dir = journal_dir(ws)?;
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| Error::io("list", &dir, e))? {
        let entry = entry.map_err(|e| Error::io("list", &dir, e))?;
        let path = entry.path();
        let done = match path.extension().and_then(|e| e.to_str()) {
            Some("journal") => false,
            Some("done") if with_done => true,
            _ => continue,
        };
        if !entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
            continue;
        }
        // A journal whose `.done` file exists is done (a crash came between the two).
        if !done && path.with_extension("done").exists() {
            continue;
        }
        out.extend(read_listed(&path, with_done)?);
    }
    // The listing may also have met the `.done` file read in place of a vanished `.journal`.
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out.dedup_by(|a, b| a.id == b.id);
    Ok(out)
}

/// Reads the journal file `path` a listing of the journal directory met. One finished
/// (moved to `.done`) or abandoned (removed) by its restore, in another process, since the
/// listing is not an error: with `with_done`, its `.done` file is read in its place, else it
/// is `None`.
fn read_listed(path: &std::path::Path, with_done: bool) -> Result<Option<Journal>> {
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    match std::fs::read(path) {
        Ok(bytes) => decode(&bytes, path).map(Some),
        Err(e) if gone(&e) => {
            let finished = path.with_extension("done");
            if !with_done || finished == path {
                return Ok(None);
            }
            match std::fs::read(&finished) {
                Ok(bytes) => decode(&bytes, &finished).map(Some),
                Err(e) if gone(&e) => Ok(None),
                Err(e) => Err(Error::io("read journal", &finished, e)),
            }
        }
        Err(e) => Err(Error::io("read journal", path, e)),
    }
}

/// Completes every pending journal of the workspace (see the module documentation).
///
/// A restore that is running holds the workspace's restore lock until it ends, and its
/// journal is its own: recovery takes that lock without waiting, and leaves every journal
/// alone when it cannot (another process opening the workspace meanwhile must not race the
/// restore through its plan). A journal whose process died has no holder.
pub(crate) fn recover_all(ws: &Workspace) -> Result<Vec<Recovery>> {
    if list_unfinished(ws)?.iter().all(|j| j.state == State::Done) {
        return Ok(Vec::new());
    }
    let path = crate::workspace::restore_lock_path(&ws.store().layout().locks, ws.id());
    let lock = fsutil::open_lock_file(&path)?;
    if !fsutil::flock(&lock, fsutil::LockMode::Exclusive, false, &path)? {
        return Ok(Vec::new());
    }
    recover_locked(ws)
}

/// [`recover_all`] for a caller that holds the restore lock.
pub(crate) fn recover_locked(ws: &Workspace) -> Result<Vec<Recovery>> {
    let mut out = Vec::new();
    for j in list_unfinished(ws)? {
        match j.state {
            State::Pending => out.push(recover_one(ws, j)?),
            State::Staging => abandon(ws, &j)?,
            State::Done => {}
        }
    }
    Ok(out)
}

/// Removes the staged files of a restore that died while staging (nothing in the workspace
/// had changed), then its journal.
pub(crate) fn abandon(ws: &Workspace, j: &Journal) -> Result<()> {
    let mut exec = Exec::new(ws, &j.id, Mode::Apply, None)?;
    exec.cleanup_temp(&j.plan)?;
    remove(ws, &j.id)
}

/// Removes a journal file.
pub(crate) fn remove(ws: &Workspace, id: &str) -> Result<()> {
    let dir = journal_dir(ws)?;
    fsutil::remove_if_exists(&dir.join(format!("{id}.journal")))?;
    fsutil::sync_dir(&dir)?;
    Ok(())
}

pub(crate) fn recover_one(ws: &Workspace, mut j: Journal) -> Result<Recovery> {
    let _op = ws.store().begin_operation(
        cairn_store::OperationKind::Restore,
        &[j.target].into_iter().chain(j.safety).collect::<Vec<_>>(),
    )?;
    let mut exec = Exec::new(ws, &j.id, Mode::Recover { safety: j.safety }, None)?;
    exec.cleanup_temp(&j.plan)?;
    let obstructed = exec.run(&j.plan)?;
    exec.finish()?;
    let completed = obstructed.is_empty();
    if completed {
        let report = Report::from_plan(&j.plan, false, j.safety, Some(j.id.clone()));
        j.state = State::Done;
        j.report = Some(report);
        write(ws, &j)?;
    }
    Ok(Recovery {
        journal: j.id,
        target: j.target,
        safety: j.safety,
        completed,
        obstructed,
    })
}

impl Workspace {
    /// Completes restores a crash left pending; returns what it did. A restore obstructed by a
    /// later edit stays pending (and later restores are refused with `CONFLICT`) until the
    /// obstruction is resolved and this is called again. While a restore of the workspace is
    /// running (in any process) this does nothing: that restore finishes its own journal.
    pub fn recover(&self) -> Result<Vec<Recovery>> {
        recover_all(self)
    }

    /// Every restore journal of the workspace (reads them all: done journals are kept for
    /// their idempotency keys).
    pub fn journals(&self) -> Result<Vec<Journal>> {
        list(self)
    }

    /// The journal of the restore made with idempotency key `key`, if there is one.
    pub fn journal_for_key(&self, key: &str) -> Result<Option<Journal>> {
        read(self, &journal_id(Some(key)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_journal_that_finished_before_it_was_read_is_read_from_its_done_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().join("root");
        std::fs::create_dir(&root).expect("root");
        std::fs::write(root.join("a.txt"), b"one\n").expect("write");
        let ws = Workspace::open(
            &root,
            crate::WorkspaceOptions {
                store: Some(dir.path().join("store")),
                ..Default::default()
            },
        )
        .expect("open");
        let snap = ws.snapshot(&ws.snapshot_options()).expect("snapshot");
        std::fs::write(root.join("a.txt"), b"two\n").expect("write");
        let report = ws
            .restore(&snap.id, &crate::RestoreOptions::default())
            .expect("restore");
        let id = report.journal.expect("a journal");
        let jdir = journal_dir(&ws).expect("dir");
        // The listing met `<id>.journal`; by the time it reads it, the restore moved it.
        let listed = path_of(&jdir, &id, false);
        assert!(!listed.exists());
        let read = read_listed(&listed, true)
            .expect("read")
            .expect("the done journal");
        assert_eq!(read.id, id);
        assert_eq!(read.state, State::Done);
        // Opening a workspace reads only unfinished journals: nothing.
        assert!(read_listed(&listed, false).expect("read").is_none());
        // Abandoned: neither file.
        std::fs::remove_file(path_of(&jdir, &id, true)).expect("remove");
        assert!(read_listed(&listed, true).expect("read").is_none());
    }
}
