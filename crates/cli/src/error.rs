//! The command's errors: one line for people (or one JSON document with `--json`) and a stable
//! exit code per error kind.

use cairn_store::{Classify, ErrorKind};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The exit code of a usage error: a bad argument, or a destructive command that cannot be
/// confirmed (no terminal and no `--yes`; `--json` without `--dry-run` or `--yes`).
pub const EXIT_USAGE: i32 = 2;

/// Exit codes of error kinds start here: the code is `EXIT_KIND_BASE + ErrorKind::code()`.
pub const EXIT_KIND_BASE: i32 = 10;

/// The exit-code table as a string literal, for `concat!`.
macro_rules! exit_codes_table {
    () => {
        "\
Exit codes (stable; 10 + the error kind's code, as in cairn.h):
   0  success
   2  usage: bad arguments, or a destructive command not confirmed (no terminal and
      no --yes; --json without --dry-run or --yes)
  11  INVALID_ARGUMENT     a malformed argument (bad id, ambiguous prefix, bad value)
  12  NOT_FOUND            no such snapshot, store, thread or entry
  13  VALIDATION           well formed but not allowed now (rewind rules; also: doctor
                           found a problem)
  14  BUSY                 something holds the workspace or store; try again later
  15  WORKSPACE_BUSY       a run or hold in an overlapping workspace refuses a restore
  16  THREAD_BUSY          a run of the thread is going on
  17  DENIED               it would lose data or cross a permission boundary
  18  IO                   the operating system failed a read or write
  19  CORRUPT              stored data is damaged (also: verify found damage)
  20  CONFLICT             someone else's change is in the way (also: recover obstructed)
  21  CANCELLED            cancelled (also: you answered no at the prompt)
  22  RUN_INTERRUPTED      a run was interrupted by a forced rewind
  23  UNSUPPORTED          not supported by this platform or store version
  24  NULL_ARGUMENT        (C ABI only)
  25  PANIC                an internal error; please report it
  26  ABORTED_BY_CALLBACK  a progress callback asked to stop"
    };
}
pub(crate) use exit_codes_table;

/// The exit-code table, printed under `cairn --help` (the README links there).
pub const EXIT_CODES_HELP: &str = exit_codes_table!();

/// An error the command reports.
#[derive(Debug, Clone)]
pub struct CliError {
    /// The kind, or `None` for a usage error.
    pub kind: Option<ErrorKind>,
    /// What happened and what to do.
    pub message: String,
    /// The path concerned, if any.
    pub path: Option<PathBuf>,
}

/// The JSON form of an error, printed on stderr with `--json`.
#[derive(Debug, Serialize)]
struct JsonError<'a> {
    kind: &'a str,
    code: Option<u32>,
    exit_code: i32,
    message: &'a str,
    #[serde(serialize_with = "cairn_store::relpath::opt_os_path::serialize")]
    path: Option<PathBuf>,
}

impl CliError {
    /// An error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        CliError {
            kind: Some(kind),
            message: message.into(),
            path: None,
        }
    }

    /// A usage error (exit code 2).
    pub fn usage(message: impl Into<String>) -> Self {
        CliError {
            kind: None,
            message: message.into(),
            path: None,
        }
    }

    /// The error with the path it concerns.
    pub fn with_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// The process exit code.
    pub fn exit_code(&self) -> i32 {
        match self.kind {
            None => EXIT_USAGE,
            Some(kind) => exit_code_of(kind),
        }
    }

    /// One line for people: what happened and what to do.
    pub fn line(&self) -> String {
        let mut msg = one_line(&self.message);
        if let Some(kind) = self.kind {
            if !msg.contains(';') {
                if let Some(hint) = hint(kind) {
                    msg.push_str("; ");
                    msg.push_str(hint);
                }
            }
        }
        msg
    }

    /// The JSON document printed on stderr with `--json`.
    pub fn json(&self) -> String {
        self.json_value().to_string()
    }

    /// [`CliError::json`] as a value: `{"error": {kind, code, exit_code, message, path}}`.
    pub fn json_value(&self) -> serde_json::Value {
        let line = self.line();
        serde_json::json!({
            "error": JsonError {
                kind: self.kind.map(|k| k.name()).unwrap_or("USAGE"),
                code: self.kind.map(|k| k.code()),
                exit_code: self.exit_code(),
                message: &line,
                path: self.path.clone(),
            }
        })
    }
}

/// The exit code of an error kind: `10 + code`.
pub fn exit_code_of(kind: ErrorKind) -> i32 {
    EXIT_KIND_BASE + kind.code() as i32
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What to do, for messages that do not say.
fn hint(kind: ErrorKind) -> Option<&'static str> {
    Some(match kind {
        ErrorKind::NotFound => "check the name or path (`cairn list` shows the snapshots)",
        ErrorKind::Busy | ErrorKind::WorkspaceBusy | ErrorKind::ThreadBusy => {
            "wait for it to finish, then try again"
        }
        ErrorKind::Denied => "check the permissions and ownership of the path",
        ErrorKind::Io => "check the path and the disk, then try again",
        ErrorKind::Corrupt => "run `cairn verify` to see what is affected",
        ErrorKind::Conflict => "resolve the edits in the way, then run `cairn recover`",
        ErrorKind::Panic => "this is a bug in Cairn; please report it",
        _ => return None,
    })
}

macro_rules! from_classified {
    ($($t:ty),*) => {$(
        impl From<$t> for CliError {
            fn from(e: $t) -> Self {
                CliError {
                    kind: Some(e.kind()),
                    message: e.to_string(),
                    path: e.path().map(Path::to_path_buf),
                }
            }
        }
    )*};
}

from_classified!(
    cairn_store::Error,
    cairn_snapshot::Error,
    cairn_restore::Error,
    cairn_rewind::Error
);

/// The command's result type.
pub type Result<T, E = CliError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_kind_has_its_documented_exit_code() {
        for kind in ErrorKind::ALL.into_iter().skip(1) {
            let code = exit_code_of(kind);
            assert_eq!(code, 10 + kind.code() as i32);
            let row = format!("{code:>4}  {}", kind.name());
            assert!(EXIT_CODES_HELP.contains(&row), "missing row {row:?}");
        }
    }

    #[test]
    fn an_error_is_one_line_with_what_to_do() {
        let e = CliError::new(ErrorKind::Busy, "the workspace\nis held");
        assert_eq!(
            e.line(),
            "the workspace is held; wait for it to finish, then try again"
        );
        let v: serde_json::Value = serde_json::from_str(&e.json()).expect("json");
        assert_eq!(v["error"]["kind"], "BUSY");
        assert_eq!(v["error"]["exit_code"], 14);
    }
}
