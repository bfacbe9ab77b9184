//! The chosen paths of a restore: made plain, and where a path lies with respect to them.

use crate::error::{Error, Result};
use cairn_store::RelPath;

/// Where a path lies with respect to the chosen paths of a restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// At or under a chosen path (or no paths were chosen): planned as usual.
    Inside,
    /// A directory above a chosen path: only what leads to it is planned.
    Above,
    /// Neither: left untouched.
    Outside,
}

/// The chosen paths of a restore, checked and made plain: no empty, `.` or `..` component,
/// no leading or doubled `/` (a trailing one is dropped), each kept once and none under
/// another (a directory covers everything under it). `INVALID_ARGUMENT` names a bad one.
pub fn normalize_paths(paths: &[RelPath]) -> Result<Vec<RelPath>> {
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(paths.len());
    for p in paths {
        let mut b = p.as_bytes();
        while let Some(rest) = b.strip_suffix(b"/") {
            b = rest;
        }
        let bad = b.is_empty()
            || b.split(|&c| c == b'/')
                .any(|c| cairn_store::tree::check_name(c).is_err());
        if bad {
            return Err(Error::InvalidArgument(format!(
                "the path {:?} is not a plain path inside the workspace (relative to its root, \
                 without empty, `.` or `..` parts); name a file or directory under the root",
                p.display()
            )));
        }
        out.push(b.to_vec());
    }
    out.sort();
    out.dedup();
    let mut kept: Vec<Vec<u8>> = Vec::with_capacity(out.len());
    for p in out {
        if kept.last().map(|k| within(&p, k)).unwrap_or(false) {
            continue;
        }
        kept.push(p);
    }
    Ok(kept.into_iter().map(RelPath).collect())
}

/// Whether `path` is `dir` or lies under it.
pub(super) fn within(path: &[u8], dir: &[u8]) -> bool {
    path.starts_with(dir) && (path.len() == dir.len() || path[dir.len()] == b'/')
}
