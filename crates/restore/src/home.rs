//! Where a workspace's store lives when no one names it: outside the workspace, in the user's
//! data directory, so that an agent cleaning the tree (`git clean -fdx`, `rm -rf *`) cannot
//! take the checkpoints with it, and `git status` never shows them.
//!
//! - The data directory: `$CAIRN_HOME`, else `$XDG_DATA_HOME/cairn`, else
//!   `~/.local/share/cairn` (made `0700`).
//! - A workspace's store: `<data>/stores/<name>-<hash>`, where `<name>` is the last component
//!   of the canonical root (so `ls` tells a person which store is which) and `<hash>` the 16 hex
//!   digits of the workspace id of that root.
//! - `$CAIRN_STORE` names a store for every workspace, as `--store` does.
//! - A workspace whose root already holds a store in `<root>/.cairn` (made by Cairn 0.1) goes
//!   on using it; [`move_store`] moves it out.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

pub use cairn_store::home::{data_dir, HOME_ENV};

/// The variable naming the store every workspace uses, as `--store` does.
pub const STORE_ENV: &str = "CAIRN_STORE";

/// The directory of the data directory that holds the stores.
pub const STORES_DIR: &str = "stores";

/// The name of the store an earlier version kept inside the workspace root.
pub const LEGACY_STORE: &str = ".cairn";

/// The file in a store's `workspaces/<id>/` that records the workspace's root (raw bytes), so
/// a store whose root was renamed or deleted can be told apart and found again.
pub const ROOT_FILE: &str = "root";

/// The file in a store's `workspaces/<id>/` that records the identity of the workspace's root
/// directory (see [`RootIdentity`]), so that the workspace is found again, with its snapshots and
/// any restore a crash left pending, whatever path reaches it.
pub const IDENTITY_FILE: &str = "identity";

/// What identifies a workspace's root directory whatever path reaches it: its device, inode and
/// birth time. A rename keeps all three, and so does a bind mount (what a container sees); a copy,
/// or a new directory made at the old path, has others. A file system that keeps no birth time
/// gives a root no identity (an inode number alone is reused by unrelated directories), and its
/// workspaces are known by their path only, as before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RootIdentity {
    dev: u64,
    ino: u64,
    btime_sec: i64,
    btime_nsec: u32,
}

impl RootIdentity {
    /// The identity of the directory at `root`, if its file system keeps a birth time (read
    /// with `statx`, Linux's; elsewhere there is none, and the root is known by its path).
    #[cfg(not(target_os = "linux"))]
    pub fn of(_root: &Path) -> Option<RootIdentity> {
        None
    }

    /// The identity of the directory at `root`, if its file system keeps a birth time.
    #[cfg(target_os = "linux")]
    pub fn of(root: &Path) -> Option<RootIdentity> {
        use rustix::fs::{AtFlags, StatxFlags};
        let st = rustix::fs::statx(
            rustix::fs::CWD,
            root,
            AtFlags::SYMLINK_NOFOLLOW,
            StatxFlags::INO | StatxFlags::BTIME,
        )
        .ok()?;
        if st.stx_mask & StatxFlags::BTIME.bits() == 0 || st.stx_mask & StatxFlags::INO.bits() == 0
        {
            return None;
        }
        Some(RootIdentity {
            dev: (u64::from(st.stx_dev_major) << 32) | u64::from(st.stx_dev_minor),
            ino: st.stx_ino,
            btime_sec: st.stx_btime.tv_sec,
            btime_nsec: st.stx_btime.tv_nsec,
        })
    }

    fn encode(&self) -> String {
        format!(
            "{} {} {}.{:09}\n",
            self.dev, self.ino, self.btime_sec, self.btime_nsec
        )
    }

    fn parse(text: &str) -> Option<RootIdentity> {
        let mut it = text.split_ascii_whitespace();
        let dev = it.next()?.parse().ok()?;
        let ino = it.next()?.parse().ok()?;
        let (s, ns) = it.next()?.split_once('.')?;
        Some(RootIdentity {
            dev,
            ino,
            btime_sec: s.parse().ok()?,
            btime_nsec: ns.parse().ok()?,
        })
    }
}

/// The identity recorded for workspace `id` in the store at `store`, if any.
fn recorded_identity(store: &Path, id: &str) -> Option<RootIdentity> {
    let path = store.join("workspaces").join(id).join(IDENTITY_FILE);
    let text = std::fs::read_to_string(path).ok()?;
    RootIdentity::parse(&text)
}

/// The workspace of the store at `store` whose root has identity `ident`: `preferred` when its
/// record says so, else the one recorded most recently. `None` when no workspace there has it.
pub fn find_identity(store: &Path, preferred: &str, ident: RootIdentity) -> Option<String> {
    if recorded_identity(store, preferred) == Some(ident) {
        return Some(preferred.to_string());
    }
    let mut best: Option<(std::time::SystemTime, String)> = None;
    for w in std::fs::read_dir(store.join("workspaces")).ok()?.flatten() {
        let Some(id) = w.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if cairn_store::check_workspace_id(&id).is_err() {
            continue;
        }
        let path = w.path().join(IDENTITY_FILE);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if RootIdentity::parse(&text) != Some(ident) {
            continue;
        }
        let when = std::fs::symlink_metadata(&path)
            .and_then(|m| m.modified())
            .unwrap_or(std::time::UNIX_EPOCH);
        if best.as_ref().is_none_or(|(t, _)| when > *t) {
            best = Some((when, id));
        }
    }
    best.map(|(_, id)| id)
}

/// The stores of the data directory's `stores/`, by path (none when it does not exist).
fn data_stores() -> Result<Vec<PathBuf>> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(data_dir()?.join(STORES_DIR))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    all.retain(|s| cairn_store::is_store_dir(s));
    all.sort();
    Ok(all)
}

/// Where the store of the workspace at the canonical `root` is, and which workspace of it the
/// root is when the root's identity is recorded under an id other than its path's (the root was
/// renamed, or is reached through a bind mount): [`default_store`]'s store unless it has no record
/// of the root's identity and another store of the data directory has one (the store of the
/// workspace before it moved). With `search` false (the caller names the workspace id) no
/// identity is looked for.
pub fn locate(
    root: &Path,
    given: Option<&Path>,
    search: bool,
) -> Result<(PathBuf, StoreHome, Option<String>)> {
    let (store, home) = match given {
        Some(s) => (s.to_path_buf(), StoreHome::Given),
        None => default_store(root)?,
    };
    let Some(ident) = RootIdentity::of(root).filter(|_| search) else {
        return Ok((store, home, None));
    };
    let path_id = default_workspace_id(root);
    if let Some(id) = find_identity(&store, &path_id, ident) {
        return Ok((store, home, Some(id)));
    }
    if home == StoreHome::Data {
        for other in data_stores()?.into_iter().filter(|o| *o != store) {
            if let Some(id) = find_identity(&other, &path_id, ident) {
                return Ok((other, home, Some(id)));
            }
        }
    }
    Ok((store, home, None))
}

/// What [`adopt`] did.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Adoption {
    /// The workspace id the root now carries.
    pub workspace_id: String,
    /// The store that holds that workspace.
    #[serde(with = "cairn_store::relpath::os_path")]
    pub store: PathBuf,
    /// The root the store recorded for the workspace before, lossily as text.
    pub previous_root: Option<String>,
    /// Other workspaces that had recorded this root as theirs and no longer do.
    pub released: Vec<String>,
}

/// Makes the directory at `root` the workspace `id`: a workspace copied, or moved to another
/// file system, where its root's identity changed, so that its snapshots, pending restores and
/// threads' file rewinds are its own again. The store is `given`, else the default one if it
/// holds `id`, else the store of the data directory that holds it (`NOT_FOUND` when none
/// does). Refused unless `force` while the workspace's recorded root is still there as it was
/// (then two directories would be one workspace). Other workspaces of those stores that had
/// recorded this root's identity stop claiming it.
pub fn adopt(root: &Path, id: &str, given: Option<&Path>, force: bool) -> Result<Adoption> {
    use std::os::unix::ffi::OsStrExt;
    let root = std::fs::canonicalize(root).map_err(|e| Error::io("open workspace", root, e))?;
    cairn_store::check_workspace_id(id)?;
    let Some(ident) = RootIdentity::of(&root) else {
        return Err(Error::InvalidArgument(format!(
            "cannot adopt a workspace at {}: its file system keeps no birth time to know the \
             directory by; open it with its store and workspace id named instead",
            root.display()
        )));
    };
    let (first, home) = match given {
        Some(s) => (s.to_path_buf(), StoreHome::Given),
        None => default_store(&root)?,
    };
    let holds = |s: &Path| s.join("workspaces").join(id).is_dir();
    let store = if holds(&first) {
        first.clone()
    } else {
        let mut found = None;
        if home == StoreHome::Data {
            found = data_stores()?.into_iter().find(|s| holds(s));
        }
        found.ok_or_else(|| {
            Error::Store(cairn_store::Error::NotFound {
                what: format!(
                    "workspace {id} in {} or any store of the data directory (`cairn stores` \
                     lists them with their workspaces)",
                    first.display()
                ),
                path: Some(first.clone()),
            })
        })?
    };
    let dir = store.join("workspaces").join(id);
    let previous_root = std::fs::read(dir.join(ROOT_FILE))
        .ok()
        .map(|b| PathBuf::from(std::ffi::OsStr::from_bytes(&b)));
    if let Some(prev) = &previous_root {
        let still_there = *prev != root
            && RootIdentity::of(prev).is_some()
            && RootIdentity::of(prev) == recorded_identity(&store, id);
        if still_there && !force {
            return Err(Error::InvalidArgument(format!(
                "workspace {id} is still at {}: adopting it at {} would make two directories one \
                 workspace; adopt is for a workspace moved or copied away from its directory \
                 (remove or rename {} first), or force it (`--force`)",
                prev.display(),
                root.display(),
                prev.display()
            )));
        }
    }
    let mut released = Vec::new();
    let mut stores = vec![store.clone()];
    if first != store {
        stores.push(first);
    }
    for s in &stores {
        let Ok(entries) = std::fs::read_dir(s.join("workspaces")) else {
            continue;
        };
        for w in entries.flatten() {
            let Some(other) = w.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if other != id && recorded_identity(s, &other) == Some(ident) {
                let path = w.path().join(IDENTITY_FILE);
                std::fs::remove_file(&path).map_err(|e| Error::io("release", path, e))?;
                released.push(other);
            }
        }
    }
    let handle = cairn_store::Store::open(&store, cairn_store::StoreOptions::default())?;
    cairn_store::fsutil::ensure_dir(&dir)?;
    cairn_store::fsutil::write_atomic(
        &handle.layout().tmp,
        &dir.join(IDENTITY_FILE),
        ident.encode().as_bytes(),
    )?;
    cairn_store::fsutil::write_atomic(
        &handle.layout().tmp,
        &dir.join(ROOT_FILE),
        root.as_os_str().as_bytes(),
    )?;
    Ok(Adoption {
        workspace_id: id.to_string(),
        store,
        previous_root: previous_root.map(|p| p.to_string_lossy().into_owned()),
        released,
    })
}

/// Where a workspace's store was found, and why there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum StoreHome {
    /// Named by the caller (`--store`, `WorkspaceOptions::store`).
    Given,
    /// Named by `$CAIRN_STORE`.
    Env,
    /// In the data directory (the default).
    Data,
    /// `<root>/.cairn`, made by an earlier version: move it with [`move_store`].
    Legacy,
}

/// The store directory's name for the canonical `root` in the data directory:
/// `<last component>-<16 hex digits>` (`root-…` for `/`); the component keeps
/// `[A-Za-z0-9._-]` and is cut to 40 bytes, other bytes become `_`.
pub fn store_name(root: &Path) -> String {
    let last = root
        .file_name()
        .map(|n| {
            use std::os::unix::ffi::OsStrExt;
            n.as_bytes()
                .iter()
                .take(40)
                .map(|&b| {
                    if b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-' {
                        b as char
                    } else {
                        '_'
                    }
                })
                .collect::<String>()
        })
        .filter(|s| !s.is_empty() && !s.starts_with('.'))
        .unwrap_or_else(|| "root".into());
    let id = default_workspace_id(root);
    format!("{last}-{}", id.trim_start_matches("ws-"))
}

/// Where the store of the workspace at the canonical `root` is when the caller names none:
/// `$CAIRN_STORE`, else `<root>/.cairn` when an earlier version made a store there, else
/// `<data>/stores/<name>-<hash>`.
pub fn default_store(root: &Path) -> Result<(PathBuf, StoreHome)> {
    if let Some(s) = std::env::var_os(STORE_ENV).filter(|v| !v.is_empty()) {
        let s = PathBuf::from(s);
        let s = if s.is_absolute() { s } else { root.join(s) };
        return Ok((s, StoreHome::Env));
    }
    let legacy = root.join(LEGACY_STORE);
    if cairn_store::is_store_dir(&legacy) {
        return Ok((legacy, StoreHome::Legacy));
    }
    Ok((
        data_dir()?.join(STORES_DIR).join(store_name(root)),
        StoreHome::Data,
    ))
}

/// Records `root` as the root of workspace `id` in `store` (`workspaces/<id>/root`) and its
/// identity (`workspaces/<id>/identity`), unless they are recorded already. Best effort: a store
/// that cannot be written is not refused for it.
pub(crate) fn note_root(store: &cairn_store::Store, id: &str, root: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let dir = store.layout().workspaces.join(id);
    let path = dir.join(ROOT_FILE);
    let bytes = root.as_os_str().as_bytes();
    let ident = RootIdentity::of(root);
    let ident_path = dir.join(IDENTITY_FILE);
    let root_known = std::fs::read(&path).is_ok_and(|b| b == bytes);
    let ident_known = ident.is_none() || recorded_identity(store.path(), id) == ident;
    if root_known && ident_known {
        return;
    }
    if cairn_store::fsutil::ensure_dir(&dir).is_err() {
        return;
    }
    if !root_known {
        let _ = cairn_store::fsutil::write_atomic(&store.layout().tmp, &path, bytes);
    }
    if let Some(ident) = ident.filter(|_| !ident_known) {
        let _ = cairn_store::fsutil::write_atomic(
            &store.layout().tmp,
            &ident_path,
            ident.encode().as_bytes(),
        );
    }
}

/// One store of the data directory, as [`stores`] lists it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StoreInfo {
    /// The store directory.
    #[serde(with = "cairn_store::relpath::os_path")]
    pub path: PathBuf,
    /// The roots of the workspaces it holds snapshots of, as recorded when they were opened.
    pub roots: Vec<StoreRoot>,
    /// How many snapshots it holds.
    pub snapshots: u64,
    /// The bytes of its files.
    pub bytes: u64,
    /// When it last changed a snapshot (the modification time of `snapshots/`), in milliseconds
    /// since the Unix epoch.
    pub last_used_ms: i64,
}

/// A workspace root a store records.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StoreRoot {
    /// The workspace id.
    pub workspace_id: String,
    /// The root, lossily as text.
    pub root: String,
    /// Whether a directory is still there.
    pub exists: bool,
}

/// Every store in the data directory's `stores/`, by path: what each holds and for whom, so a
/// person can find the stores of workspaces that are gone. An absent data directory lists
/// nothing.
pub fn stores(data: &Path) -> Result<Vec<StoreInfo>> {
    let dir = data.join(STORES_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list", dir, e)),
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e.map_err(|err| Error::io("list", dir.clone(), err))?;
        let path = e.path();
        if !cairn_store::is_store_dir(&path) {
            continue;
        }
        out.push(store_info(&path));
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// What [`stores`] says of the store at `path`.
pub fn store_info(path: &Path) -> StoreInfo {
    use std::os::unix::ffi::OsStrExt;
    let mut roots = Vec::new();
    if let Ok(ws) = std::fs::read_dir(path.join("workspaces")) {
        for w in ws.flatten() {
            if let Ok(bytes) = std::fs::read(w.path().join(ROOT_FILE)) {
                let root = Path::new(std::ffi::OsStr::from_bytes(&bytes));
                roots.push(StoreRoot {
                    workspace_id: w.file_name().to_string_lossy().into_owned(),
                    root: root.to_string_lossy().into_owned(),
                    exists: root.is_dir(),
                });
            }
        }
    }
    roots.sort_by(|a, b| a.root.cmp(&b.root));
    let snapshots = std::fs::read_dir(path.join("snapshots"))
        .map(|d| d.flatten().count() as u64)
        .unwrap_or(0);
    let bytes = walkdir::WalkDir::new(path)
        .into_iter()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    let last_used_ms = std::fs::metadata(path.join("snapshots"))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    StoreInfo {
        path: path.to_path_buf(),
        roots,
        snapshots,
        bytes,
        last_used_ms,
    }
}

/// Moves the store at `from` to `to` (which must not exist), with everything in it: one
/// `rename` on the same file system; across file systems a copy into `<to>.partial`, made
/// durable file by file and directory by directory, renamed to `to`, the rename made durable
/// (`to`'s parent synced), and only then the removal of `from` (its parent synced after). A
/// power loss at any point leaves a whole store at `from` or at `to` (issue 53): a move that
/// stops before the rename leaves `from` whole and `<to>.partial`, which the next move clears
/// and starts again; after the rename, `to` is whole and durable. Refused with `BUSY` while
/// another process uses the store (any operation marker, or a collection), and with
/// `CONFLICT` (nothing changed) when `<to>.partial` holds something `from` lacks or `from` is
/// gone: an earlier move (or an older version's, which removed `from` before its rename was
/// durable) may have left the only copy there; see [`check_unfinished_move`].
pub fn move_store(from: &Path, to: &Path) -> Result<()> {
    move_store_with(from, to, false, &mut |_| {})
}

/// [`move_store`] through the copy even on one file system, telling `record` each durable step
/// in the order taken: what the tests check the crash-safe order with.
#[doc(hidden)]
pub fn move_store_by_copy(from: &Path, to: &Path, record: &mut dyn FnMut(MoveStep)) -> Result<()> {
    move_store_with(from, to, true, record)
}

/// A step of a store move that changes what is on disk, in the order [`move_store_by_copy`]
/// takes them.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveStep {
    /// The copy an earlier move left at `<to>.partial`, all of it also in the source, removed.
    ClearedPartial,
    /// A file or directory made durable (`fsync`): each of the copy's, then `to`'s parent, then
    /// `from`'s parent.
    Synced(PathBuf),
    /// `<to>.partial` renamed to `to`.
    Renamed,
    /// The source store removed.
    RemovedSource,
}

/// Where a move to `to` across file systems copies the store before its rename: `<to>.partial`.
pub fn partial_path(to: &Path) -> PathBuf {
    let mut p = to.as_os_str().to_owned();
    p.push(".partial");
    PathBuf::from(p)
}

/// Refuses a move from `from` to `to` while `<to>.partial` may hold the only copy of some of
/// the store (`CONFLICT`, naming both paths and what to do; nothing is changed): when `from` is
/// no store, or `<to>.partial` holds a pack, large object or manifest (their names are their
/// ids) that `from` lacks. A leftover copy `from` holds all of is no copy of anything: the move
/// clears it. Read only.
pub fn check_unfinished_move(from: &Path, to: &Path) -> Result<()> {
    let partial = partial_path(to);
    if std::fs::symlink_metadata(&partial).is_err() {
        return Ok(());
    }
    let (f, p, t) = (from.display(), partial.display(), to.display());
    if !cairn_store::is_store_dir(from) {
        return Err(Error::UnfinishedMove {
            detail: format!(
                "{f} holds no Cairn store, and {p} holds the copy an earlier `cairn store move` \
                 to {t} left, which may be the only copy of the store; nothing was changed: \
                 check it with `cairn --store {p} verify`, and if it is whole rename it to {t} \
                 (`mv {p} {t}`) and name it with `--store {t}`"
            ),
            partial,
        });
    }
    if let Some(rel) = first_missing(&partial, from)? {
        return Err(Error::UnfinishedMove {
            detail: format!(
                "{p}, the copy an earlier `cairn store move` to {t} left, holds {}, which the \
                 store at {f} lacks: that move may have stopped while removing {f}, and {p} may \
                 hold the only copy of some snapshots; nothing was changed: compare them with \
                 `cairn --store {f} list` and `cairn --store {p} list` (and `verify`), remove \
                 the one you do not keep (if {f} is whole and yours, remove {p}), then run the \
                 move again",
                rel.display()
            ),
            partial,
        });
    }
    Ok(())
}

/// The first file under `copy`'s `objects/` and `snapshots/` that `store` does not have under
/// the same name. Their names are ids, and a store's removal unlinks whole files: a name there
/// holds the same content.
fn first_missing(copy: &Path, store: &Path) -> Result<Option<PathBuf>> {
    for top in ["objects", "snapshots"] {
        for e in walkdir::WalkDir::new(copy.join(top)) {
            let e = match e {
                Ok(e) => e,
                Err(err)
                    if err.io_error().map(std::io::Error::kind)
                        == Some(std::io::ErrorKind::NotFound) =>
                {
                    continue
                }
                Err(err) => return Err(walk_error(copy, err)),
            };
            if e.file_type().is_dir() {
                continue;
            }
            let rel = e.path().strip_prefix(copy).unwrap_or(e.path());
            if std::fs::symlink_metadata(store.join(rel)).is_err() {
                return Ok(Some(rel.to_path_buf()));
            }
        }
    }
    Ok(None)
}

fn walk_error(root: &Path, err: walkdir::Error) -> Error {
    let path = err.path().unwrap_or(root).to_path_buf();
    Error::io("read", path, std::io::Error::other(err.to_string()))
}

fn move_store_with(
    from: &Path,
    to: &Path,
    always_copy: bool,
    record: &mut dyn FnMut(MoveStep),
) -> Result<()> {
    check_unfinished_move(from, to)?;
    if !cairn_store::is_store_dir(from) {
        return Err(Error::InvalidArgument(format!(
            "{} is not a Cairn store (it has no objects/, snapshots/ and locks/ directories)",
            from.display()
        )));
    }
    if std::fs::symlink_metadata(to).is_ok() {
        return Err(Error::InvalidArgument(format!(
            "cannot move the store to {}: something is there already; remove it or choose \
             another directory",
            to.display()
        )));
    }
    let store = cairn_store::Store::open(from, cairn_store::StoreOptions::default())?;
    let _idle = store.lock_idle()?;
    // Again under the lock, which keeps a collection from removing files of `from` meanwhile.
    check_unfinished_move(from, to)?;
    let partial = partial_path(to);
    if std::fs::symlink_metadata(&partial).is_ok() {
        std::fs::remove_dir_all(&partial)
            .map_err(|e| Error::io("remove the unfinished copy", partial.clone(), e))?;
        record(MoveStep::ClearedPartial);
    }
    let to_parent = to.parent().unwrap_or(Path::new("/"));
    let from_parent = from.parent().unwrap_or(Path::new("/"));
    cairn_store::fsutil::ensure_dir(to_parent)?;
    let renamed = if always_copy {
        false
    } else {
        match std::fs::rename(from, to) {
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => false,
            Err(e) => return Err(Error::io("move the store", from.to_path_buf(), e)),
        }
    };
    if renamed {
        record(MoveStep::Renamed);
        // The store is at `to` now whatever follows: a failed sync is no failed move.
        for dir in [to_parent, from_parent] {
            if cairn_store::fsutil::sync_dir(dir).is_ok() {
                record(MoveStep::Synced(dir.to_path_buf()));
            }
        }
        return Ok(());
    }
    // Across file systems. The order is what keeps a whole store on disk through a power loss:
    // the copy made durable before its rename, the rename made durable before the source goes.
    copy_tree(from, &partial, record)?;
    std::fs::rename(&partial, to)
        .map_err(|e| Error::io("rename the copied store", to.to_path_buf(), e))?;
    record(MoveStep::Renamed);
    cairn_store::fsutil::sync_dir(to_parent)?;
    record(MoveStep::Synced(to_parent.to_path_buf()));
    std::fs::remove_dir_all(from)
        .map_err(|e| Error::io("remove the moved store", from.to_path_buf(), e))?;
    record(MoveStep::RemovedSource);
    cairn_store::fsutil::sync_dir(from_parent)?;
    record(MoveStep::Synced(from_parent.to_path_buf()));
    Ok(())
}

/// Copies the directory tree at `from` to `to` (new), files with their modes, and makes the
/// copy durable: each file synced once written, each directory once its entries are all made
/// (deepest first, `to` last). The store holds no symlinks (a symlink is refused).
fn copy_tree(from: &Path, to: &Path, record: &mut dyn FnMut(MoveStep)) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut dirs = Vec::new();
    for e in walkdir::WalkDir::new(from) {
        let e = e.map_err(|err| walk_error(from, err))?;
        let rel = e.path().strip_prefix(from).unwrap_or(e.path());
        let dest = to.join(rel);
        let ft = e.file_type();
        if ft.is_dir() {
            std::fs::create_dir_all(&dest).map_err(|err| Error::io("create", dest.clone(), err))?;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o700))
                .map_err(|err| Error::io("set permissions of", dest.clone(), err))?;
            dirs.push(dest);
        } else if ft.is_file() {
            std::fs::copy(e.path(), &dest).map_err(|err| Error::io("copy", dest.clone(), err))?;
            std::fs::File::open(&dest)
                .and_then(|f| f.sync_all())
                .map_err(|err| Error::io("sync", dest.clone(), err))?;
            record(MoveStep::Synced(dest));
        } else {
            return Err(Error::InvalidArgument(format!(
                "the store holds {}, which is neither a file nor a directory; remove it first",
                e.path().display()
            )));
        }
    }
    for dir in dirs.into_iter().rev() {
        cairn_store::fsutil::sync_dir(&dir)?;
        record(MoveStep::Synced(dir));
    }
    Ok(())
}

/// The default id of a workspace rooted at `root` (canonical): `ws-` and 16 hex digits of its
/// SHA-256.
pub fn default_workspace_id(root: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let id = cairn_store::ObjectId::of(root.as_os_str().as_bytes());
    format!("ws-{}", &id.to_hex()[..16])
}
