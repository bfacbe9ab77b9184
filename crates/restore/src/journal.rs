//! Restore journals: the durable record of a restore in flight, completed after a crash.
//!
//! A journal file is `"CAIRNJNL"`, a little-endian `u32` version (2), then the journal's id,
//! key, workspace, target, safety snapshot, boot id and plan in postcard. It is written once;
//! where the restore stands is the file's name, and each step is one rename:
//!
//! | file | state | |
//! | --- | --- | --- |
//! | `<id>.staging` | [`State::Staging`] | written and synced before the first content is staged beside its target |
//! | `<id>.journal` | [`State::Pending`] | renamed, and the directory synced, before the first change |
//! | `<id>.applied` | [`State::Applied`] | renamed once every change is made, not synced: the restore returns |
//! | `<id>.done` | [`State::Done`] | renamed, and the directory synced, once the changes are known durable |
//!
//! A restore returns once its changes are made, as `tar -x` or `git checkout` do, without
//! waiting for the disk. Its journal is confirmed by the next snapshot or restore of the
//! workspace or the next time it is opened: made durable (`syncfs`, or each changed
//! file and directory for a small plan) and moved to `.done`. The journal records the boot
//! id of the machine (`/proc/sys/kernel/random/boot_id`): an applied journal from another boot
//! may have lost changes the kernel had not yet written when the machine stopped, so it is
//! completed path by path like a pending one.
//!
//! Opening the workspace completes a pending journal: a path already in its target state is
//! skipped, one still as the safety snapshot holds it is done, and one an unrelated later edit
//! obstructs is left as it is and reported, the journal staying for a retry. A staging journal
//! is abandoned: nothing in the workspace had changed, and its staged files are removed.
//!
//! Journals live in `<store>/journal/<workspace>/`. Opening the workspace reads the
//! unfinished ones (staging, pending, applied), never the `.done` files kept for their
//! idempotency keys. A journal's name only moves forward through the table above, so a
//! reader that finds a name gone looks at the later ones.
//!
//! Format 1 (the journal as JSON, its state inside, in `<id>.journal` or `<id>.done`) is still
//! read; its next step writes it again in format 2.

use crate::error::{Error, Result};
use crate::exec::{self, Exec, Mode};
use crate::plan::Plan;
use crate::report::Report;
use crate::site::Site;
use cairn_store::{fsutil, RelPath, SnapshotId};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Magic at the start of a journal file.
pub const JOURNAL_MAGIC: &[u8; 8] = b"CAIRNJNL";
/// The journal format version written.
pub const JOURNAL_VERSION: u32 = 2;
/// The first format version (JSON, the state inside), still read.
const JSON_VERSION: u32 = 1;

/// Where a restore stands, in the order a journal goes through the states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Contents are being staged beside their targets; nothing in the workspace has changed.
    /// Recovery removes the staged files and the journal: the restore is abandoned.
    Staging,
    /// Changes may have been made; not finished.
    Pending,
    /// Every change is made; not yet known to be on disk.
    Applied,
    /// Finished and durable; kept for its idempotency key.
    Done,
}

impl State {
    /// Every state, in order.
    const ALL: [State; 4] = [State::Staging, State::Pending, State::Applied, State::Done];

    /// The extension of a format 2 journal file in this state.
    fn extension(self) -> &'static str {
        match self {
            State::Staging => "staging",
            State::Pending => "journal",
            State::Applied => "applied",
            State::Done => "done",
        }
    }

    fn of_extension(ext: &str) -> Option<State> {
        State::ALL.into_iter().find(|s| s.extension() == ext)
    }
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
    /// The report, once applied.
    pub report: Option<Report>,
    /// The boot id of the machine the restore ran on, when known.
    #[serde(default)]
    pub boot_id: Option<String>,
    /// Read from a format 1 file (named `.journal` whether staging or pending).
    #[serde(skip)]
    legacy: bool,
}

/// The body of a format 2 journal file (the state is its name; the report follows from the
/// plan).
#[derive(Serialize)]
struct BodyRef<'a> {
    id: &'a str,
    key: Option<&'a str>,
    workspace_id: &'a str,
    target: &'a SnapshotId,
    safety: Option<&'a SnapshotId>,
    boot_id: Option<&'a str>,
    plan: &'a Plan,
}

/// [`BodyRef`], read back.
#[derive(Deserialize)]
struct Body {
    id: String,
    key: Option<String>,
    workspace_id: String,
    target: SnapshotId,
    safety: Option<SnapshotId>,
    boot_id: Option<String>,
    plan: Plan,
}

impl Journal {
    /// Whether the restore is finished for its caller: done, or applied during this boot of
    /// the machine (what the kernel holds of its changes will reach the disk).
    pub fn finished(&self) -> bool {
        match self.state {
            State::Done => true,
            State::Applied => self.this_boot(),
            State::Staging | State::Pending => false,
        }
    }

    fn this_boot(&self) -> bool {
        self.boot_id.is_some() && self.boot_id == boot_id()
    }

    fn set_state(&mut self, state: State) {
        self.state = state;
        self.report = (state >= State::Applied)
            .then(|| Report::from_plan(&self.plan, false, self.safety, Some(self.id.clone())));
    }

    /// Its file in `dir`.
    fn file(&self, dir: &Path) -> PathBuf {
        if self.legacy {
            let done = self.state == State::Done;
            return dir.join(format!(
                "{}.{}",
                self.id,
                if done { "done" } else { "journal" }
            ));
        }
        path_of(dir, &self.id, self.state)
    }

    /// The journal file's bytes (format 2; the state is the file's name, not in them).
    pub fn encode(&self) -> Vec<u8> {
        encode_body(&BodyRef {
            id: &self.id,
            key: self.key.as_deref(),
            workspace_id: &self.workspace_id,
            target: &self.target,
            safety: self.safety.as_ref(),
            boot_id: self.boot_id.as_deref(),
            plan: &self.plan,
        })
    }
}

/// A format 2 journal file's bytes: magic, version, then the body.
fn encode_body(body: &BodyRef<'_>) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(64 + body.plan.actions.len() * 96);
    bytes.extend_from_slice(JOURNAL_MAGIC);
    bytes.extend_from_slice(&JOURNAL_VERSION.to_le_bytes());
    postcard::to_io(body, &mut bytes).expect("a journal serialises into memory");
    bytes
}

/// The journal of the restore this process is applying: its name and state. The plan stays
/// with the caller, written into the file from there (issue 56: the journal held a copy of
/// every action, and once applied a report listing every path again).
pub(crate) struct Live {
    id: String,
    state: State,
}

impl Live {
    /// Writes a new journal (staging) durably for `plan`, applied under `id` to restore
    /// `target` with `safety` as its safety snapshot.
    pub(crate) fn create(
        ws: &Site,
        id: &str,
        key: Option<&str>,
        safety: &SnapshotId,
        plan: &Plan,
    ) -> Result<Live> {
        let bytes = encode_body(&BodyRef {
            id,
            key,
            workspace_id: ws.id(),
            target: &plan.snapshot_id,
            safety: Some(safety),
            boot_id: boot_id().as_deref(),
            plan,
        });
        let dir = journal_dir(ws)?;
        fsutil::write_atomic(
            &ws.store().layout().tmp,
            &path_of(&dir, id, State::Staging),
            &bytes,
        )?;
        Ok(Live {
            id: id.to_string(),
            state: State::Staging,
        })
    }

    /// Moves it to state `to` (one rename; the journal directory synced when `durable`).
    pub(crate) fn advance(&mut self, ws: &Site, to: State, durable: bool) -> Result<()> {
        let dir = journal_dir(ws)?;
        rename_state(&dir, &self.id, self.state, to, durable)?;
        self.state = to;
        Ok(())
    }

    /// Removes its file (a restore that changed nothing).
    pub(crate) fn remove(&self, ws: &Site) -> Result<()> {
        remove_file(ws, |dir| path_of(dir, &self.id, self.state))
    }
}

/// Moves journal `id`'s file from state `from` to `to` (the directory synced when `durable`).
fn rename_state(dir: &Path, id: &str, from: State, to: State, durable: bool) -> Result<()> {
    let (from, dest) = (path_of(dir, id, from), path_of(dir, id, to));
    std::fs::rename(&from, &dest).map_err(|e| Error::io("move the journal", &from, e))?;
    if durable {
        fsutil::sync_dir(dir)?;
    }
    Ok(())
}

/// This boot of the machine (Linux: `/proc/sys/kernel/random/boot_id`); `None` where the
/// system does not say, and then an applied journal is always checked path by path.
fn boot_id() -> Option<String> {
    static BOOT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    BOOT.get_or_init(|| {
        // The power-cut explorer (issue 57) replays a crash state in the same boot: it names
        // the boot before and after the "reboot" itself. Only with the `test-hooks` feature.
        #[cfg(feature = "test-hooks")]
        if let Ok(b) = std::env::var("CAIRN_TEST_BOOT_ID") {
            return Some(b);
        }
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    })
    .clone()
}

/// What completing a pending journal did.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Recovery {
    /// The journal.
    pub journal: String,
    /// The snapshot it restores.
    pub target: SnapshotId,
    /// The safety snapshot (restoring it undoes the restore).
    pub safety: Option<SnapshotId>,
    /// Whether the restore is now complete.
    pub completed: bool,
    /// Paths an unrelated later edit obstructs, or that cannot be changed (another owner, an
    /// immutable file); left as they are.
    pub obstructed: Vec<RelPath>,
    /// The restore was given up ([`crate::Workspace::give_up`]): it is ended with the paths above as
    /// they are; the safety snapshot holds the files as they were before it.
    #[serde(default)]
    pub abandoned: bool,
}

/// A file a restore staged that no unfinished restore of the workspace would finish, as
/// [`crate::Workspace::remove_stray_staged`] found and removed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StrayStaged {
    /// Where it was.
    pub path: RelPath,
    /// The journal its name carries (of another workspace, or gone).
    pub journal: String,
    /// A directory staged whole.
    pub is_dir: bool,
}

pub(crate) fn journal_dir(ws: &Site) -> Result<PathBuf> {
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

/// The format 2 file of journal `id` in `state`.
fn path_of(dir: &Path, id: &str, state: State) -> PathBuf {
    dir.join(format!("{id}.{}", state.extension()))
}

/// The extension of the empty file that marks a journal given up (`<id>.given-up`): its
/// restore was ended as it stood, not finished.
const GIVEN_UP_EXTENSION: &str = "given-up";

/// Whether journal `id` of the workspace was given up ([`crate::Workspace::give_up`]).
pub(crate) fn given_up(ws: &Site, id: &str) -> Result<bool> {
    Ok(
        std::fs::symlink_metadata(journal_dir(ws)?.join(format!("{id}.{GIVEN_UP_EXTENSION}")))
            .is_ok(),
    )
}

/// Moves journal `j` to state `to` (one rename; the journal directory synced when `durable`).
pub(crate) fn advance(ws: &Site, j: &mut Journal, to: State, durable: bool) -> Result<()> {
    let dir = journal_dir(ws)?;
    if j.legacy {
        // A format 1 file: written again in format 2 under its new name (synced), then the old
        // one removed; a crash between the two leaves both, and the later state wins.
        let dest = path_of(&dir, &j.id, to);
        fsutil::write_atomic(&ws.store().layout().tmp, &dest, &j.encode())?;
        fsutil::remove_if_exists(&j.file(&dir))?;
        j.legacy = false;
    } else {
        rename_state(&dir, &j.id, j.state, to, durable)?;
    }
    j.set_state(to);
    Ok(())
}

/// Reads journal `id`, in whatever state it is.
pub(crate) fn read(ws: &Site, id: &str) -> Result<Option<Journal>> {
    read_from(&journal_dir(ws)?, id, State::Staging)
}

/// Reads journal `id`, looking at its files from state `first` on. A journal's name only moves
/// forward (staging, pending, applied, done), so looking in that order cannot miss one that
/// another process moves meanwhile.
fn read_from(dir: &Path, id: &str, first: State) -> Result<Option<Journal>> {
    for state in State::ALL.into_iter().filter(|s| *s >= first) {
        let path = path_of(dir, id, state);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("read journal", &path, e)),
        };
        let j = decode(&bytes, &path, state)?;
        if j.id != id {
            return Err(cairn_store::Error::corrupt(
                "journal",
                &path,
                format!("it holds journal {:?}", j.id),
            )
            .into());
        }
        if j.legacy && j.state != State::Done {
            // Format 1 wrote `.done` before removing `.journal`: both may be there.
            if let Some(done) = read_from(dir, id, State::Done)? {
                return Ok(Some(done));
            }
        }
        return Ok(Some(j));
    }
    Ok(None)
}

/// Decodes journal file bytes, read from a file named for `state` (`path` is only named in
/// errors). Bytes that are not a journal are `CORRUPT`; another format version is
/// `UNSUPPORTED`.
pub fn decode(bytes: &[u8], path: &Path, state: State) -> Result<Journal> {
    let corrupt = |d: String| Error::from(cairn_store::Error::corrupt("journal", path, d));
    if bytes.len() < 12 || &bytes[..8] != JOURNAL_MAGIC {
        return Err(corrupt("bad magic".into()));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    let mut j = match version {
        JOURNAL_VERSION => {
            let (body, rest): (Body, _) =
                postcard::take_from_bytes(&bytes[12..]).map_err(|e| corrupt(e.to_string()))?;
            if !rest.is_empty() {
                return Err(corrupt(format!("{} bytes after its end", rest.len())));
            }
            Journal {
                id: body.id,
                key: body.key,
                workspace_id: body.workspace_id,
                target: body.target,
                safety: body.safety,
                plan: body.plan,
                state,
                report: None,
                boot_id: body.boot_id,
                legacy: false,
            }
        }
        JSON_VERSION => {
            let mut j: Journal =
                serde_json::from_slice(&bytes[12..]).map_err(|e| corrupt(e.to_string()))?;
            j.legacy = true;
            // Format 1 had no applied state: a `done` journal was made durable.
            if j.state == State::Applied {
                return Err(corrupt("format 1 has no applied state".into()));
            }
            j
        }
        found => {
            return Err(cairn_store::Error::UnsupportedVersion {
                path: path.to_path_buf(),
                found,
                supported: JOURNAL_VERSION,
            }
            .into())
        }
    };
    // A journal is carried out when the workspace is opened: every path it acts on must be a
    // plain relative path whose components a tree could hold (never empty, `.` or `..`).
    let plain = |p: &[u8]| {
        !p.is_empty()
            && p.split(|&b| b == b'/')
                .all(|c| cairn_store::tree::check_name(c).is_ok())
    };
    if let Some(a) = j.plan.actions.iter().find(|a| !plain(a.path().as_bytes())) {
        return Err(corrupt(format!(
            "it acts on {:?}, which is not a path inside the workspace",
            a.path().display()
        )));
    }
    if j.id.is_empty() || j.id.contains(['/', '\0']) || j.id.starts_with('.') {
        return Err(corrupt(format!("{:?} is not a journal id", j.id)));
    }
    // The report follows from the plan (format 1 also stored it).
    j.set_state(j.state);
    Ok(j)
}

/// Every journal of the workspace, done ones included.
pub(crate) fn list(ws: &Site) -> Result<Vec<Journal>> {
    read_all(ws, true)
}

/// The journals not done: the only ones opening a workspace reads.
fn list_unfinished(ws: &Site) -> Result<Vec<Journal>> {
    read_all(ws, false)
}

/// The journal files in `dir`, by id and the state their names say.
fn listing(dir: &Path) -> Result<Vec<(String, State)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))? {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let name = entry.file_name();
        let Some((id, state)) = name
            .to_str()
            .and_then(|n| n.rsplit_once('.'))
            .and_then(|(id, ext)| Some((id, State::of_extension(ext)?)))
        else {
            continue;
        };
        if entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
            out.push((id.to_string(), state));
        }
    }
    Ok(out)
}

fn read_all(ws: &Site, with_done: bool) -> Result<Vec<Journal>> {
    let dir = journal_dir(ws)?;
    let mut out = Vec::new();
    for (id, state) in listing(&dir)? {
        if state == State::Done && !with_done {
            continue;
        }
        // One moved on since the listing (by its restore, in another process) is read under
        // its later name; one abandoned meanwhile is gone.
        match read_from(&dir, &id, state)? {
            Some(j) if with_done || j.state != State::Done => out.push(j),
            _ => {}
        }
    }
    // The listing may have met one journal under two names: the later state wins.
    out.sort_by(|a, b| a.id.cmp(&b.id).then(b.state.cmp(&a.state)));
    out.dedup_by(|a, b| a.id == b.id);
    Ok(out)
}

/// Completes every unfinished journal of the workspace (see the module documentation).
///
/// Applied journals of this boot are confirmed first, without the restore lock: their
/// restores have finished, and confirming one twice is harmless. For the others, a restore
/// that is running holds the workspace's restore lock until it ends, and its journal is its
/// own: recovery takes that lock without waiting, and leaves every journal alone when it
/// cannot (another process opening the workspace meanwhile must not race the restore through
/// its plan). A journal whose process died has no holder.
pub(crate) fn recover_all(ws: &Site) -> Result<Vec<Recovery>> {
    confirm_applied(ws)?;
    if list_unfinished(ws)?.is_empty() {
        return Ok(Vec::new());
    }
    let path = ws.restore_lock_path();
    let Some(_lock) = fsutil::try_lock_exclusive(&path)? else {
        return Ok(Vec::new());
    };
    recover_locked(ws)
}

/// [`recover_all`] for a caller that holds the restore lock. Confirming an applied journal of
/// this boot is not reported: that restore had finished.
pub(crate) fn recover_locked(ws: &Site) -> Result<Vec<Recovery>> {
    let mut out = Vec::new();
    for j in list_unfinished(ws)? {
        match j.state {
            State::Staging => abandon(ws, &j)?,
            State::Applied if j.this_boot() => confirm(ws, j)?,
            State::Pending | State::Applied => out.push(recover_one(ws, j)?),
            State::Done => {}
        }
    }
    Ok(out)
}

/// Before a snapshot: a restore a crash left unfinished (by another process, while this handle
/// stayed open) is finished first, so the snapshot does not take the mix of before and after for
/// a state the user had. One it cannot finish (paths in its way) is left reported, and the
/// snapshot goes on: it keeps the edits in the way, and a per-message checkpoint must never be
/// wedged by a path no one may change. Only a listing of the journal directory when nothing is
/// pending.
pub(crate) fn finish_before_snapshot(ws: &Site) -> Result<()> {
    let dir = journal_dir(ws)?;
    if listing(&dir)?
        .iter()
        .any(|(_, s)| matches!(s, State::Pending | State::Applied))
    {
        recover_all(ws)?;
    }
    Ok(())
}

/// Whether any restore of the workspace is not done (staging, pending or applied): one runs,
/// or a crash left it for [`finish_before_snapshot`]. A snapshot walked ahead of being asked
/// for is not taken meanwhile.
pub(crate) fn any_unfinished(ws: &Site) -> Result<bool> {
    Ok(listing(&journal_dir(ws)?)?
        .iter()
        .any(|(_, s)| *s != State::Done))
}

/// Confirms the applied journals of this boot, reading no other journal. A snapshot calls it,
/// so that a restore's changes are confirmed soon after it in a process that keeps the
/// workspace open and restores nothing more (an applied journal still there when the machine
/// restarts is checked path by path, and edits made since would be reported as obstructions).
pub(crate) fn confirm_applied(ws: &Site) -> Result<()> {
    let dir = journal_dir(ws)?;
    for (id, state) in listing(&dir)? {
        if state != State::Applied {
            continue;
        }
        if let Some(j) = read_from(&dir, &id, State::Applied)? {
            if j.state == State::Applied && j.this_boot() {
                confirm(ws, j)?;
            }
        }
    }
    Ok(())
}

/// Makes the changes of an applied journal durable, then marks it done. Another process may
/// have confirmed it meanwhile: then there is nothing left to move.
fn confirm(ws: &Site, mut j: Journal) -> Result<()> {
    exec::make_durable(ws, &j.plan)?;
    match advance(ws, &mut j, State::Done, true) {
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// Removes the staged files of a restore that died while staging (nothing in the workspace
/// had changed), then its journal.
pub(crate) fn abandon(ws: &Site, j: &Journal) -> Result<()> {
    let mut exec = Exec::new(ws, &j.id, Mode::Apply, None)?;
    exec.cleanup_temp(&j.plan)?;
    remove(ws, j)
}

/// Removes a journal's file.
pub(crate) fn remove(ws: &Site, j: &Journal) -> Result<()> {
    remove_file(ws, |dir| j.file(dir))
}

/// Removes the file `file` names in the workspace's journal directory, durably.
fn remove_file(ws: &Site, file: impl FnOnce(&Path) -> PathBuf) -> Result<()> {
    let dir = journal_dir(ws)?;
    fsutil::remove_if_exists(&file(&dir))?;
    fsutil::sync_dir(&dir)?;
    Ok(())
}

/// Completes a pending journal (or an applied one from another boot), path by path.
pub(crate) fn recover_one(ws: &Site, mut j: Journal) -> Result<Recovery> {
    let _op = ws.store().begin_operation(
        cairn_store::OperationKind::Restore,
        &[j.target].into_iter().chain(j.safety).collect::<Vec<_>>(),
    )?;
    let mut exec = Exec::new(ws, &j.id, Mode::Recover { safety: j.safety }, None)?;
    exec.cleanup_temp(&j.plan)?;
    let obstructed = exec.carry_out(&j.plan)?;
    exec::make_durable(ws, &j.plan)?;
    let completed = obstructed.is_empty();
    if completed {
        advance(ws, &mut j, State::Done, true)?;
    }
    Ok(Recovery {
        journal: j.id,
        target: j.target,
        safety: j.safety,
        completed,
        obstructed,
        abandoned: false,
    })
}

/// [`give_up`], under the restore lock.
pub(crate) fn give_up_locked(ws: &Site) -> Result<Vec<Recovery>> {
    let mut out = Vec::new();
    for r in recover_locked(ws)? {
        if r.completed {
            out.push(r);
            continue;
        }
        let Some(mut j) = read(ws, &r.journal)? else {
            continue;
        };
        let mut exec = Exec::new(ws, &j.id, Mode::Apply, None)?;
        exec.cleanup_temp(&j.plan)?;
        // Marked first, so that a done journal of a given-up restore is never taken for a
        // restore whose files are all the target's (a rewind's recovery asks).
        let dir = journal_dir(ws)?;
        let mark = dir.join(format!("{}.{GIVEN_UP_EXTENSION}", j.id));
        fsutil::write_atomic(&ws.store().layout().tmp, &mark, b"")?;
        advance(ws, &mut j, State::Done, true)?;
        out.push(Recovery {
            abandoned: true,
            ..r
        });
    }
    Ok(out)
}

/// Completes what [`recover_all`] can, then gives up the restores it cannot finish (see
/// [`crate::Workspace::give_up`]); `BUSY` while a restore of the workspace runs.
pub(crate) fn give_up(ws: &Site) -> Result<Vec<Recovery>> {
    confirm_applied(ws)?;
    let path = ws.restore_lock_path();
    let Some(_lock) = fsutil::try_lock_exclusive(&path)? else {
        return Err(Error::Busy {
            detail: "a restore of this workspace is running; try again when it is done".into(),
        });
    };
    give_up_locked(ws)
}

/// Removes the staged files no unfinished restore of the workspace will finish (see
/// [`crate::Workspace::remove_stray_staged`]); `BUSY` while a restore of it runs.
pub(crate) fn remove_stray_staged(ws: &Site) -> Result<Vec<StrayStaged>> {
    use std::os::unix::ffi::OsStrExt;
    let path = ws.restore_lock_path();
    let Some(_lock) = fsutil::try_lock_exclusive(&path)? else {
        return Err(Error::Busy {
            detail: "a restore of this workspace is running; try again when it is done".into(),
        });
    };
    let live: std::collections::HashSet<String> =
        list_unfinished(ws)?.into_iter().map(|j| j.id).collect();
    let skip_dirs: Vec<(u64, u64)> = [
        Some(ws.store().path().to_path_buf()),
        cairn_store::home::data_dir().ok(),
    ]
    .into_iter()
    .flatten()
    .filter_map(|p| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
    })
    .collect();
    let mut found = Vec::new();
    let walk = walkdir::WalkDir::new(ws.root())
        .follow_links(false)
        .same_file_system(true)
        .into_iter()
        .filter_entry(|e| {
            use std::os::unix::fs::MetadataExt;
            e.depth() == 0
                || !(cairn_snapshot::Excludes::is_default(e.file_name().as_bytes())
                    || (e.file_type().is_dir()
                        && e.metadata()
                            .is_ok_and(|m| skip_dirs.contains(&(m.dev(), m.ino())))))
        });
    let mut it = walk;
    while let Some(entry) = it.next() {
        let Ok(entry) = entry else { continue };
        let Some(jid) = fsutil::staged_journal(entry.file_name().as_bytes()) else {
            continue;
        };
        let is_dir = entry.file_type().is_dir();
        if is_dir {
            it.skip_current_dir();
        }
        if live.contains(jid) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(ws.root()) else {
            continue;
        };
        found.push(StrayStaged {
            path: RelPath(rel.as_os_str().as_bytes().to_vec()),
            journal: jid.to_string(),
            is_dir,
        });
    }
    let mut exec = Exec::new(ws, "stray", Mode::Apply, None)?;
    for s in &found {
        exec.remove_staged(&s.path)?;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace holding `a.txt` ("one") and `b.txt` ("bee"), snapshotted, both edited,
    /// then restored to that snapshot: the workspace, the restore's report and the journal
    /// directory.
    fn restored(dir: &Path) -> (crate::Workspace, Report, PathBuf) {
        let root = dir.join("root");
        std::fs::create_dir(&root).expect("root");
        std::fs::write(root.join("a.txt"), b"one\n").expect("write");
        std::fs::write(root.join("b.txt"), b"bee\n").expect("write");
        let ws = crate::Workspace::open(
            &root,
            crate::WorkspaceOptions {
                store: Some(dir.join("store")),
                ..Default::default()
            },
        )
        .expect("open");
        let snap = ws
            .snapshot(&ws.snapshot_options(), Default::default())
            .expect("snapshot");
        std::fs::write(root.join("a.txt"), b"two\n").expect("write");
        std::fs::write(root.join("b.txt"), b"bzz\n").expect("write");
        let report = ws
            .restore(
                &snap.snapshot.id,
                &Default::default(),
                &Default::default(),
                Default::default(),
            )
            .expect("restore");
        let jdir = journal_dir(&ws.site).expect("dir");
        (ws, report, jdir)
    }

    #[test]
    fn a_listed_journal_that_moved_on_before_it_was_read_is_read_under_its_later_name() {
        let dir = tempfile::tempdir().expect("tmp");
        let (_ws, report, jdir) = restored(dir.path());
        let id = report.journal.clone().expect("a journal");
        // A listing met `<id>.journal`; by the time it reads it, the restore moved it on.
        assert!(!path_of(&jdir, &id, State::Pending).exists());
        let read = read_from(&jdir, &id, State::Pending)
            .expect("read")
            .expect("the applied journal");
        assert_eq!(read.id, id);
        assert_eq!(read.state, State::Applied);
        assert!(read.finished());
        // The journal's report is the restore's, less how that call walked.
        let report = Report {
            safety_walk: None,
            ..report
        };
        assert_eq!(read.report.as_ref(), Some(&report));
        // Abandoned: no file at all.
        std::fs::remove_file(path_of(&jdir, &id, State::Applied)).expect("remove");
        assert!(read_from(&jdir, &id, State::Pending)
            .expect("read")
            .is_none());
    }

    #[test]
    fn a_restore_returns_applied_and_the_next_opening_makes_it_durable_and_done() {
        let dir = tempfile::tempdir().expect("tmp");
        let (ws, report, jdir) = restored(dir.path());
        let id = report.journal.expect("a journal");
        assert!(path_of(&jdir, &id, State::Applied).exists());
        // An edit made since the restore is not the restore's business: confirming it during
        // this boot makes it durable and done, and leaves the edit alone.
        std::fs::write(ws.root().join("a.txt"), b"three\n").expect("write");
        let again = crate::Workspace::open(ws.root(), ws.options().clone()).expect("open");
        assert!(again.recovered().is_empty(), "{:?}", again.recovered());
        assert!(path_of(&jdir, &id, State::Done).exists());
        assert!(!path_of(&jdir, &id, State::Applied).exists());
        assert_eq!(
            std::fs::read(ws.root().join("a.txt")).expect("read"),
            b"three\n"
        );
        let j = read(&again.site, &id).expect("read").expect("journal");
        assert_eq!(j.state, State::Done);
        assert!(j.finished());
    }

    #[test]
    fn a_snapshot_after_a_restore_makes_it_durable_and_done() {
        let dir = tempfile::tempdir().expect("tmp");
        let (ws, report, jdir) = restored(dir.path());
        let id = report.journal.expect("a journal");
        assert!(path_of(&jdir, &id, State::Applied).exists());
        ws.snapshot(&ws.snapshot_options(), Default::default())
            .expect("snapshot");
        assert!(path_of(&jdir, &id, State::Done).exists());
        assert!(!path_of(&jdir, &id, State::Applied).exists());
    }

    /// Rewrites journal `id`'s file (in `state`) as if written during another boot.
    fn from_another_boot(jdir: &Path, id: &str, state: State) {
        let path = path_of(jdir, id, state);
        let mut j = decode(&std::fs::read(&path).expect("read"), &path, state).expect("decode");
        j.boot_id = Some("another-boot".into());
        std::fs::write(&path, j.encode()).expect("write");
    }

    #[test]
    fn an_applied_journal_from_another_boot_is_checked_path_by_path() {
        let dir = tempfile::tempdir().expect("tmp");
        let (ws, report, jdir) = restored(dir.path());
        let id = report.journal.expect("a journal");
        from_another_boot(&jdir, &id, State::Applied);
        assert!(!read(&ws.site, &id)
            .expect("read")
            .expect("journal")
            .finished());
        // As a power cut may leave them: a.txt lost the restore's change (as before it),
        // b.txt holds neither the snapshot's content nor the one before (an edit, or a torn
        // write): it is reported, never overwritten.
        std::fs::write(ws.root().join("a.txt"), b"two\n").expect("write");
        std::fs::write(ws.root().join("b.txt"), b"torn").expect("write");
        let again = crate::Workspace::open(ws.root(), ws.options().clone()).expect("open");
        let rec = again.recovered();
        assert_eq!(rec.len(), 1, "{rec:?}");
        assert!(!rec[0].completed);
        assert_eq!(rec[0].obstructed, vec![RelPath::from("b.txt")]);
        assert_eq!(
            std::fs::read(ws.root().join("a.txt")).expect("read"),
            b"one\n"
        );
        assert_eq!(
            std::fs::read(ws.root().join("b.txt")).expect("read"),
            b"torn"
        );
        assert!(path_of(&jdir, &id, State::Applied).exists());
        // Once the obstruction is resolved, the next opening finishes it.
        std::fs::write(ws.root().join("b.txt"), b"bee\n").expect("write");
        let third = crate::Workspace::open(ws.root(), ws.options().clone()).expect("open");
        assert!(
            third.recovered().iter().all(|r| r.completed),
            "{:?}",
            third.recovered()
        );
        assert!(path_of(&jdir, &id, State::Done).exists());
    }

    #[test]
    fn a_format_1_journal_is_still_recovered_and_moves_on_in_format_2() {
        let dir = tempfile::tempdir().expect("tmp");
        let (ws, report, jdir) = restored(dir.path());
        let id = report.journal.expect("a journal");
        let applied = path_of(&jdir, &id, State::Applied);
        let mut j = read(&ws.site, &id).expect("read").expect("journal");
        // As format 1 wrote it: pending, JSON, in `<id>.journal`; the file as before.
        j.state = State::Pending;
        j.report = None;
        let mut bytes = JOURNAL_MAGIC.to_vec();
        bytes.extend_from_slice(&JSON_VERSION.to_le_bytes());
        bytes.extend_from_slice(&serde_json::to_vec(&j).expect("json"));
        std::fs::remove_file(&applied).expect("remove");
        std::fs::write(path_of(&jdir, &id, State::Pending), bytes).expect("write");
        std::fs::write(ws.root().join("a.txt"), b"two\n").expect("write");
        let again = crate::Workspace::open(ws.root(), ws.options().clone()).expect("open");
        assert_eq!(again.recovered().len(), 1);
        assert!(again.recovered()[0].completed);
        assert_eq!(
            std::fs::read(ws.root().join("a.txt")).expect("read"),
            b"one\n"
        );
        assert!(!path_of(&jdir, &id, State::Pending).exists());
        let done = path_of(&jdir, &id, State::Done);
        let bytes = std::fs::read(&done).expect("done journal");
        assert_eq!(bytes[8..12], JOURNAL_VERSION.to_le_bytes());
        assert_eq!(decode(&bytes, &done, State::Done).expect("decode").id, id);
    }

    #[test]
    fn a_journal_of_chosen_paths_keeps_format_2_and_only_their_actions_while_a_json_plan_keeps_the_paths(
    ) {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().join("root");
        std::fs::create_dir(&root).expect("root");
        std::fs::write(root.join("a.txt"), b"one\n").expect("write");
        std::fs::write(root.join("b.txt"), b"bee\n").expect("write");
        let ws = crate::Workspace::open(
            &root,
            crate::WorkspaceOptions {
                store: Some(dir.path().join("store")),
                ..Default::default()
            },
        )
        .expect("open");
        let snap = ws
            .snapshot(&ws.snapshot_options(), Default::default())
            .expect("snapshot");
        std::fs::write(root.join("a.txt"), b"two\n").expect("write");
        std::fs::write(root.join("b.txt"), b"bzz\n").expect("write");
        let options = crate::PlanOptions {
            paths: vec![RelPath::from("a.txt")],
            on_drift: crate::DriftPolicy::Skip,
            ..Default::default()
        };
        let plan = ws
            .plan(&snap.snapshot.id, &options, Default::default())
            .expect("plan");
        let json: crate::Plan =
            serde_json::from_slice(&serde_json::to_vec(&plan).expect("json")).expect("parse");
        assert_eq!(json, plan, "a JSON plan keeps paths and on_drift");
        let report = ws
            .apply(&plan, &Default::default(), Default::default())
            .expect("apply");
        assert_eq!(report.paths, vec![RelPath::from("a.txt")]);
        let id = report.journal.expect("a journal");
        let jdir = journal_dir(&ws.site).expect("dir");
        let file = path_of(&jdir, &id, State::Applied);
        let bytes = std::fs::read(&file).expect("journal");
        assert_eq!(bytes[8..12], JOURNAL_VERSION.to_le_bytes());
        let j = decode(&bytes, &file, State::Applied).expect("decode");
        assert!(j
            .plan
            .actions
            .iter()
            .all(|a| a.path().as_bytes() == b"a.txt"));
        assert!(j.plan.paths.is_empty(), "format 2 has no paths");
        assert_eq!(j.plan.actions, plan.actions);
        assert_eq!(std::fs::read(root.join("b.txt")).expect("read"), b"bzz\n");
    }
}
