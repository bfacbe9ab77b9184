//! Whether a store lies where no other user can change it (issue 53), checked each time a store
//! is opened, as ssh's `StrictModes` checks the directories above `authorized_keys` and git's
//! `safe.directory` the owner of a repository.
//!
//! The rule, for the store's directory (or, for a store not made yet, its nearest directory that
//! exists), each of its own directories (`objects/`, `snapshots/`, ...) and every directory above
//! it up to `/`, both as the path reaches them and as they really are (symlinks resolved):
//!
//! - it is owned by this user (the effective uid; under `sudo`, `SUDO_UID` as well) or by root;
//! - it is not writable by others (`o+w`) unless it is sticky (`+t`, as `/tmp`: no one may
//!   rename or remove what another user made there);
//! - it is not writable by its group (`g+w`) unless it is sticky or its group is this user's own
//!   group (the effective gid: a umask of 002 with a group per user makes such directories).
//!
//! A directory that fails is refused with `DENIED`, naming it, its owner and mode, and the way
//! past: [`UNSAFE_STORE_ENV`]. The user's own directory made writable by all (a umask of 000) is
//! refused as well: every other user could rename its `snapshots/` or slip in manifests.

use crate::error::{Error, Result};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The variable that lets a store in an unsafe place be used: a `:`-separated list of stores,
/// or of directories whose stores are all trusted, or `*` for every store (git's
/// `safe.directory`).
pub const UNSAFE_STORE_ENV: &str = "CAIRN_UNSAFE_STORE_OK";

/// Refuses (`DENIED`) a store at `store` that another user could change (see the module's rule),
/// unless [`UNSAFE_STORE_ENV`] names it. Changes nothing.
pub fn check_store_location(store: &Path, own_dirs: &[&Path]) -> Result<()> {
    let Ok(given) = std::path::absolute(store) else {
        return Ok(()); // no working directory: the open fails on its own
    };
    let users = Users::current();
    let mut seen = Vec::new();
    // As the path reaches them: a directory holding a symlink on the way is on this chain.
    let lexical = given.ancestors().map(Path::to_path_buf);
    // As they are: the directories the store's files really lie in.
    let real = given
        .ancestors()
        .find_map(|a| std::fs::canonicalize(a).ok())
        .map(|c| c.ancestors().map(Path::to_path_buf).collect::<Vec<_>>())
        .unwrap_or_default();
    let own = own_dirs.iter().map(|d| d.to_path_buf());
    for dir in own.chain(lexical).chain(real) {
        let Ok(m) = std::fs::metadata(&dir) else {
            continue; // not made yet (it will be, owner-only), or out of reach (the open fails)
        };
        if !m.is_dir() || seen.contains(&(m.dev(), m.ino())) {
            continue;
        }
        seen.push((m.dev(), m.ino()));
        if let Some(why) = users.unsafe_because(&m) {
            if opted_in(&given) {
                return Ok(());
            }
            return Err(refusal(&given, &dir, &m, why));
        }
    }
    Ok(())
}

/// Who may own and write the directories of a store.
struct Users {
    uid: u32,
    gid: u32,
    sudo_uid: Option<u32>,
}

impl Users {
    fn current() -> Users {
        let uid = rustix::process::geteuid().as_raw();
        let sudo_uid = (uid == 0)
            .then(|| std::env::var("SUDO_UID").ok()?.parse().ok())
            .flatten();
        Users {
            uid,
            gid: rustix::process::getegid().as_raw(),
            sudo_uid,
        }
    }

    /// Why another user could change what the directory `m` holds, if one could.
    fn unsafe_because(&self, m: &std::fs::Metadata) -> Option<&'static str> {
        let owner = m.uid();
        if owner != 0 && owner != self.uid && Some(owner) != self.sudo_uid {
            return Some("owned by another user, who may rename or replace anything in it");
        }
        let sticky = m.mode() & 0o1000 != 0;
        if m.mode() & 0o002 != 0 && !sticky {
            return Some("writable by every user and not sticky (as /tmp is)");
        }
        if m.mode() & 0o020 != 0 && !sticky && m.gid() != self.gid {
            return Some("writable by its group, which is not yours alone");
        }
        None
    }
}

/// Whether [`UNSAFE_STORE_ENV`] names the store at `store` (absolute), a directory it lies in,
/// or is `*`.
fn opted_in(store: &Path) -> bool {
    let Some(list) = std::env::var_os(UNSAFE_STORE_ENV) else {
        return false;
    };
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let store = real(store);
    std::env::split_paths(&list)
        .filter(|e| !e.as_os_str().is_empty())
        .any(|e| e.as_os_str() == "*" || store.starts_with(real(&e)))
}

fn refusal(store: &Path, dir: &Path, m: &std::fs::Metadata, why: &str) -> Error {
    let at = if dir == store {
        "the store's directory".to_string()
    } else if dir.starts_with(store) {
        format!("the store's directory {}", dir.display())
    } else {
        format!("{}, a directory above the store,", dir.display())
    };
    Error::Denied {
        path: dir.to_path_buf(),
        detail: format!(
            "the store at {store} is not used: {at} is owned by uid {owner} and has mode {mode:04o} \
             ({why}), so another user could change its snapshots or slip in files a restore \
             would write; name a store only you can write, or, if you trust every user who can \
             write there, set {env}={store} (to use it, or to move it with `cairn store move \
             DIR`)",
            store = store.display(),
            owner = m.uid(),
            mode = m.mode() & 0o7777,
            env = UNSAFE_STORE_ENV,
        ),
    }
}
