//! Unified diffs of the text files a change concerns (`cairn diff --patch`).

use crate::error::Result;
use cairn_snapshot::{Change, EntryInfo};
use cairn_store::{BlobId, EntryKind, ObjectSource, Store};
use similar::TextDiff;
use std::path::Path;

/// Contents larger than this are not diffed line by line.
const MAX_PATCH_BYTES: u64 = 4 << 20;

/// The patch of one change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Patch {
    /// A unified diff.
    Text(String),
    /// One side is binary (or too large to diff): named, not shown.
    Binary,
    /// Nothing to show (a mode change, a directory).
    None,
}

/// The content one side of a change shows in a patch: a file's bytes, a link's target.
fn content(
    store: &Store,
    live_root: Option<&Path>,
    path: &[u8],
    side: &Option<EntryInfo>,
    is_new: bool,
) -> Result<Option<Vec<u8>>> {
    let Some(info) = side else {
        return Ok(Some(Vec::new()));
    };
    if info.kind == EntryKind::Dir {
        // A directory replaced by a file, or the other way round: the file side is all the
        // patch shows.
        return Ok(Some(Vec::new()));
    }
    if info.size > MAX_PATCH_BYTES {
        return Ok(None);
    }
    let live = if is_new { live_root } else { None };
    let mut bytes = match live {
        Some(root) => {
            use std::os::unix::ffi::OsStrExt;
            let p = root.join(std::ffi::OsStr::from_bytes(path));
            let read = if info.kind == EntryKind::Symlink {
                std::fs::read_link(&p).map(|t| t.as_os_str().as_bytes().to_vec())
            } else {
                std::fs::read(&p)
            };
            match read {
                Ok(b) => b,
                // Changed again since the walk: show nothing rather than fail the diff.
                Err(_) => return Ok(None),
            }
        }
        None => store.blob(&BlobId(info.id))?,
    };
    if info.kind == EntryKind::Symlink {
        let mut t = b"-> ".to_vec();
        t.append(&mut bytes);
        t.push(b'\n');
        bytes = t;
    }
    Ok(Some(bytes))
}

fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8000)].contains(&0) || std::str::from_utf8(bytes).is_err()
}

/// The patch of `change`. `live_root` is the workspace root when the newer side is the files
/// as they are now (read from disk), `None` when both sides are snapshots.
pub fn patch_of(store: &Store, live_root: Option<&Path>, change: &Change) -> Result<Patch> {
    let absent_or_dir = |s: &Option<EntryInfo>| s.as_ref().is_none_or(|e| e.kind == EntryKind::Dir);
    if absent_or_dir(&change.old) && absent_or_dir(&change.new) {
        return Ok(Patch::None);
    }
    if let (Some(o), Some(n)) = (&change.old, &change.new) {
        if o.id == n.id && o.kind == n.kind {
            // Only the mode changed.
            return Ok(Patch::None);
        }
    }
    let old = content(store, live_root, &change.path, &change.old, false)?;
    let new = content(store, live_root, &change.path, &change.new, true)?;
    let (Some(old), Some(new)) = (old, new) else {
        return Ok(Patch::Binary);
    };
    if is_binary(&old) || is_binary(&new) {
        return Ok(Patch::Binary);
    }
    let (old, new) = (
        String::from_utf8_lossy(&old).into_owned(),
        String::from_utf8_lossy(&new).into_owned(),
    );
    let name = String::from_utf8_lossy(&change.path);
    let a = if change.old.is_some() {
        format!("a/{name}")
    } else {
        "/dev/null".to_string()
    };
    let b = if change.new.is_some() {
        format!("b/{name}")
    } else {
        "/dev/null".to_string()
    };
    let diff = TextDiff::from_lines(&old, &new);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .missing_newline_hint(true)
        .header(&a, &b)
        .to_string();
    Ok(Patch::Text(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_bytes_and_invalid_utf8_are_binary() {
        assert!(is_binary(b"a\0b"));
        assert!(is_binary(&[0xff, 0xfe]));
        assert!(!is_binary("héllo\n".as_bytes()));
    }
}
