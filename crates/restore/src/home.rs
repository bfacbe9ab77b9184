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

/// Where a workspace's store was found, and why there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    let id = crate::workspace::default_workspace_id(root);
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

/// Records `root` as the root of workspace `id` in `store` (`workspaces/<id>/root`), unless it
/// is recorded already. Best effort: a store that cannot be written is not refused for it.
pub(crate) fn note_root(store: &cairn_store::Store, id: &str, root: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let dir = store.layout().workspaces.join(id);
    let path = dir.join(ROOT_FILE);
    let bytes = root.as_os_str().as_bytes();
    if std::fs::read(&path).is_ok_and(|b| b == bytes) {
        return;
    }
    if cairn_store::fsutil::ensure_dir(&dir).is_ok() {
        let _ = cairn_store::fsutil::write_atomic(&store.layout().tmp, &path, bytes);
    }
}

/// One store of the data directory, as [`stores`] lists it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StoreInfo {
    /// The store directory.
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
/// `rename` on the same file system; across file systems a copy into `<to>.partial`, renamed
/// to `to` once complete and synced, then the removal of `from` (a move that stops half way
/// leaves `from` whole and is started again from the beginning). Refused with `BUSY` while
/// another process uses the store (any operation marker, or a collection).
pub fn move_store(from: &Path, to: &Path) -> Result<()> {
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
    if let Some(parent) = to.parent() {
        cairn_store::fsutil::ensure_dir(parent)?;
    }
    match std::fs::rename(from, to) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {
            let partial = PathBuf::from(format!("{}.partial", to.display()));
            if std::fs::symlink_metadata(&partial).is_ok() {
                std::fs::remove_dir_all(&partial)
                    .map_err(|e| Error::io("remove the unfinished copy", partial.clone(), e))?;
            }
            copy_tree(from, &partial)?;
            rustix::fs::sync();
            std::fs::rename(&partial, to)
                .map_err(|e| Error::io("rename the copied store", to.to_path_buf(), e))?;
            std::fs::remove_dir_all(from)
                .map_err(|e| Error::io("remove the moved store", from.to_path_buf(), e))?;
        }
        Err(e) => return Err(Error::io("move the store", from.to_path_buf(), e)),
    }
    if let Some(parent) = to.parent() {
        let _ = cairn_store::fsutil::sync_dir(parent);
    }
    Ok(())
}

/// Copies the directory tree at `from` to `to` (new), files with their modes; the store holds
/// no symlinks (a symlink is refused).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for e in walkdir::WalkDir::new(from) {
        let e = e.map_err(|err| {
            Error::io(
                "read the store",
                from.to_path_buf(),
                std::io::Error::other(err.to_string()),
            )
        })?;
        let rel = e.path().strip_prefix(from).unwrap_or(e.path());
        let dest = to.join(rel);
        let ft = e.file_type();
        if ft.is_dir() {
            std::fs::create_dir_all(&dest).map_err(|err| Error::io("create", dest.clone(), err))?;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o700))
                .map_err(|err| Error::io("set permissions of", dest.clone(), err))?;
        } else if ft.is_file() {
            std::fs::copy(e.path(), &dest).map_err(|err| Error::io("copy", dest.clone(), err))?;
        } else {
            return Err(Error::InvalidArgument(format!(
                "the store holds {}, which is neither a file nor a directory; remove it first",
                e.path().display()
            )));
        }
    }
    Ok(())
}
