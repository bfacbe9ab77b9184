//! Holds: while one stands, in this process or another sharing the store, a restore is
//! refused with `BUSY` and a plan says `busy: true`.

use crate::error::{Error, Result};
use crate::site::Site;
use cairn_store::fsutil::{self, HeldLock, LockMode};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::PathBuf;

/// Takes a hold on the workspace (see [`crate::Workspace::hold`]).
pub(crate) fn take(ws: &Site, what: &str, pid: Option<u32>) -> Result<Hold> {
    let locks = &ws.store().layout().locks;
    let restore_lock_path = ws.restore_lock_path();
    // Both locks are HeldLocks, ended with LOCK_UN: a descriptor merely closed keeps its
    // lock while a child forked by another thread holds a copy, and a restore started
    // just after the hold would be refused as if another were running.
    let restore_lock = fsutil::open_lock_file(&restore_lock_path)?;
    let Some(restore_lock) =
        HeldLock::take(restore_lock, LockMode::Shared, false, &restore_lock_path)?
    else {
        return Err(Error::Busy {
            detail: format!("a restore of {} is changing files", ws.root().display()),
        });
    };
    let info = HoldInfo {
        workspace_id: ws.id().to_string(),
        what: what.to_string(),
        pid,
        holder_pid: std::process::id(),
    };
    let tmp = fsutil::temp_name(&ws.store().layout().tmp, "hold");
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

/// The holds standing on the workspace. Stale ones (holder gone, process exited) are removed.
pub(crate) fn list(ws: &Site) -> Result<Vec<HoldInfo>> {
    let locks = &ws.store().layout().locks;
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
            if info.workspace_id == ws.id() {
                out.push(info);
            }
        }
    }
    Ok(out)
}

fn pid_alive(pid: u32) -> bool {
    match rustix::process::Pid::from_raw(pid as i32) {
        Some(p) => rustix::process::test_kill_process(p).is_ok(),
        None => false,
    }
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
