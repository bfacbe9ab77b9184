//! Operation markers and the collection lock.
//!
//! A snapshot, restore or copy registers a marker file in `locks/` and holds an exclusive
//! `flock` on it for as long as it works. A collection takes `locks/gc.lock` exclusively and
//! defers its sweep while any marker is held. Markers are registered under a shared hold of
//! `gc.lock`, so no operation can start between a collection's check and its sweep. The kernel
//! drops `flock` locks when a process dies, so a marker left by a crashed process is seen as
//! stale (its lock can be taken) and removed: no lock ever wedges the store.

use crate::error::{Error, Result};
use crate::fsutil::{self, HeldLock, LockMode};
use crate::id::SnapshotId;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// What kind of operation holds a marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationKind {
    /// Taking a snapshot.
    Snapshot,
    /// Restoring a snapshot.
    Restore,
    /// Copying a snapshot between stores.
    Copy,
    /// Writing objects for another reason (a repack, a test).
    Write,
}

/// What a marker file records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerInfo {
    /// The process holding it.
    pub pid: u32,
    /// What it does.
    pub kind: OperationKind,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_ms: i64,
    /// Snapshots it needs kept: retention never drops these while the marker is held.
    pub pins: Vec<SnapshotId>,
}

/// A held operation marker; dropping it removes the marker and releases its lock.
#[derive(Debug)]
pub struct OperationGuard {
    /// The operation's lease on the remote, when the store has one (released after the
    /// marker).
    pub(crate) lease: Option<crate::remote::Lease>,
    file: Option<HeldLock>,
    path: PathBuf,
    info: MarkerInfo,
}

impl OperationGuard {
    /// What the marker records.
    pub fn info(&self) -> &MarkerInfo {
        &self.info
    }
}

impl Drop for OperationGuard {
    fn drop(&mut self) {
        // Unlink while the lock is still held, then close (which releases it).
        let _ = std::fs::remove_file(&self.path);
        drop(self.file.take());
    }
}

pub(crate) fn gc_lock_path(locks: &Path) -> PathBuf {
    locks.join("gc.lock")
}

/// Registers a marker in `locks`, under a shared hold of `gc.lock`.
pub(crate) fn begin(
    locks: &Path,
    tmp: &Path,
    kind: OperationKind,
    pins: &[SnapshotId],
) -> Result<OperationGuard> {
    let gc_path = gc_lock_path(locks);
    // Waits while a collection sweeps; returns at once otherwise. Every lock here is a
    // HeldLock, ended with LOCK_UN when dropped: closing is not enough while a child forked
    // by another thread holds a copy of the descriptor.
    let gc = HeldLock::take(
        fsutil::open_lock_file(&gc_path)?,
        LockMode::Shared,
        true,
        &gc_path,
    )?;
    let info = MarkerInfo {
        pid: std::process::id(),
        kind,
        started_ms: fsutil::now_ms(),
        pins: pins.to_vec(),
    };
    let tmp_path = fsutil::temp_name(tmp, "marker");
    let file = fsutil::create_new_file(&tmp_path)?;
    let mut held = None;
    let result = (|| {
        let f = held.insert(
            HeldLock::take(file, LockMode::Exclusive, true, &tmp_path)?
                .expect("a lock waited for is taken"),
        );
        let json = serde_json::to_vec(&info).expect("a marker always serialises");
        f.file_mut()
            .write_all(&json)
            .map_err(|e| Error::io("write marker", &tmp_path, e))?;
        let name = tmp_path
            .file_name()
            .and_then(|n| n.to_str())
            .map(|n| n.trim_end_matches(".tmp").to_string())
            .unwrap_or_else(|| format!("op-{}", std::process::id()));
        let path = locks.join(format!("{name}.marker"));
        std::fs::rename(&tmp_path, &path).map_err(|e| Error::io("register marker", &path, e))?;
        Ok(path)
    })();
    drop(gc);
    match result {
        Ok(path) => Ok(OperationGuard {
            lease: None,
            file: held,
            path,
            info,
        }),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp_path);
            Err(e)
        }
    }
}

/// The markers held by live processes. Markers whose lock can be taken belong to processes that
/// died; they are removed.
pub(crate) fn live_markers(locks: &Path) -> Result<Vec<MarkerInfo>> {
    let mut out = Vec::new();
    let rd = std::fs::read_dir(locks).map_err(|e| Error::io("list", locks, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| Error::io("list", locks, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.ends_with(".marker") {
            continue;
        }
        let path = entry.path();
        let ft = entry
            .file_type()
            .map_err(|e| Error::io("inspect", &path, e))?;
        if !ft.is_file() {
            continue;
        }
        let mut f = match fsutil::open_lock_file(&path) {
            Ok(f) => f,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        };
        let mut buf = Vec::new();
        let read = f.read_to_end(&mut buf);
        if HeldLock::take(f, LockMode::Exclusive, false, &path)?.is_some() {
            // Its holder is gone (or is just now unlinking it): remove it while we hold it.
            let _ = std::fs::remove_file(&path);
            continue;
        }
        read.map_err(|e| Error::io("read marker", &path, e))?;
        match serde_json::from_slice::<MarkerInfo>(&buf) {
            Ok(info) => out.push(info),
            Err(_) => out.push(MarkerInfo {
                pid: 0,
                kind: OperationKind::Write,
                started_ms: 0,
                pins: Vec::new(),
            }),
        }
    }
    Ok(out)
}

/// The collection lock, held exclusively while a collection marks and sweeps.
#[derive(Debug)]
pub(crate) struct GcLock {
    _lock: HeldLock,
}

/// Takes `gc.lock` exclusively, waiting for another collection to finish and for operations
/// that are registering their markers (they hold it shared for a moment only).
pub(crate) fn gc_lock(locks: &Path) -> Result<GcLock> {
    let path = gc_lock_path(locks);
    let lock = HeldLock::take(
        fsutil::open_lock_file(&path)?,
        LockMode::Exclusive,
        true,
        &path,
    )?
    .expect("a lock waited for is taken");
    Ok(GcLock { _lock: lock })
}
