//! Cairn's data directory, where the stores of workspaces live when no one names one (the
//! restore layer's `home` module places them there). Known to this layer so that a snapshot of
//! a tree holding it (a workspace rooted at `~`) leaves it out.

use crate::error::{Error, Result};
use std::ffi::OsString;
use std::path::PathBuf;

/// The variable naming Cairn's data directory.
pub const HOME_ENV: &str = "CAIRN_HOME";

fn non_empty(var: &str) -> Option<OsString> {
    std::env::var_os(var).filter(|v| !v.is_empty())
}

/// Cairn's data directory: `$CAIRN_HOME`, else `$XDG_DATA_HOME/cairn`, else
/// `$HOME/.local/share/cairn`. `INVALID_ARGUMENT` when none of them is set.
pub fn data_dir() -> Result<PathBuf> {
    if let Some(h) = non_empty(HOME_ENV) {
        return Ok(PathBuf::from(h));
    }
    if let Some(x) = non_empty("XDG_DATA_HOME") {
        return Ok(PathBuf::from(x).join("cairn"));
    }
    if let Some(home) = non_empty("HOME") {
        return Ok(PathBuf::from(home).join(".local/share/cairn"));
    }
    Err(Error::InvalidArgument(
        "cannot tell where Cairn keeps its stores: none of CAIRN_HOME, XDG_DATA_HOME and HOME \
         is set; set CAIRN_HOME to a directory, or name the store with --store"
            .into(),
    ))
}
