//! Trust in the files whose commands Cairn runs (issue 53): the `on_rewind` commands of a
//! `cairn.json` run only once the user has trusted that file's exact content out of band, never
//! because a repository or an agent wrote the file (as Codex trusts hooks by hash, and direnv
//! an `.envrc` by `direnv allow`).
//!
//! - A trust record lives outside every workspace, in Cairn's data directory:
//!   `<data>/trusted/<SHA-256 of the file's canonical path>`, owner-only and written
//!   atomically, holding the SHA-256 of the trusted bytes and the path. `cairn trust [PATH]` and
//!   `cairn init claude-code --on-rewind` (the user typing it) write one; `cairn trust --revoke`
//!   removes it.
//! - After a rewind the file's bytes are read once, hashed and parsed: its commands run only if
//!   the hash is the record's. Any change since (an agent, a `git pull`) leaves them unrun, and
//!   the rewind's report says so with the command that trusts the file.
//! - The user's own `~/.claude/cairn.json` needs no record while it is theirs, no one else can
//!   write it or its directory, and it does not lie inside the workspace (where an agent
//!   writes): it sits beside the user's shell start-up files, which run anyway.
//! - A workspace's file that leads out of the workspace (through a symlink) never runs: the
//!   commands a user trusted for another workspace must not run in this one.

use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use cairn_store::ErrorKind;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The file beside Claude Code's settings where the `on_rewind` commands are kept.
pub(crate) const CONFIG: &str = "cairn.json";

/// The directory of Cairn's data directory that holds the trust records.
const TRUST_DIR: &str = "trusted";

/// A `cairn.json` as read once: what is checked and what runs come from the same bytes.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// Its canonical path (the key of its trust record).
    pub path: PathBuf,
    /// The SHA-256 of its bytes, in hex.
    pub sha256: String,
    /// Its `on_rewind` commands (none when it is not a JSON object).
    pub commands: Vec<String>,
    /// It is a JSON object.
    pub valid: bool,
}

impl Config {
    /// The file at `path` (symlinks followed), read once; `None` when nothing is there.
    pub(crate) fn read(path: &Path) -> std::io::Result<Option<Config>> {
        let mut file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let canonical = std::fs::canonicalize(path)?;
        // The file opened is the one the canonical path names (not swapped in between).
        let (opened, named) = (file.metadata()?, std::fs::metadata(&canonical)?);
        if (opened.dev(), opened.ino()) != (named.dev(), named.ino()) {
            return Err(std::io::Error::other("it was replaced while it was read"));
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(Some(Config::of(canonical, &bytes)))
    }

    /// The file at canonical path `path` holding `bytes`.
    pub(crate) fn of(path: PathBuf, bytes: &[u8]) -> Config {
        let doc = serde_json::from_slice::<serde_json::Value>(bytes).ok();
        Config {
            path,
            sha256: hex::encode(Sha256::digest(bytes)),
            commands: doc.as_ref().map(commands_of).unwrap_or_default(),
            valid: doc.as_ref().is_some_and(serde_json::Value::is_object),
        }
    }
}

/// The `on_rewind` commands of a `cairn.json` document.
pub(crate) fn commands_of(doc: &serde_json::Value) -> Vec<String> {
    doc["on_rewind"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c["command"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The user's own `cairn.json` (`~/.claude/cairn.json`), if HOME is set.
pub(crate) fn user_config() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".claude").join(CONFIG))
}

/// Owned by this user and writable by no one else.
fn private(meta: &std::fs::Metadata) -> bool {
    meta.uid() == rustix::process::geteuid().as_raw() && meta.mode() & 0o022 == 0
}

/// The trust record of the file at canonical path `path`.
fn record_path(path: &Path) -> Result<PathBuf> {
    let key = hex::encode(Sha256::digest(path.as_os_str().as_bytes()));
    Ok(cairn_store::home::data_dir()?.join(TRUST_DIR).join(key))
}

/// What a record of `config` holds.
fn record_bytes(config: &Config) -> Vec<u8> {
    let mut bytes = format!("{}\n", config.sha256).into_bytes();
    bytes.extend_from_slice(config.path.as_os_str().as_bytes());
    bytes.push(b'\n');
    bytes
}

/// The user trusted this exact content of the file: its record, in a directory that is the
/// user's and writable by no one else, names these bytes.
fn recorded(config: &Config) -> bool {
    let Ok(path) = record_path(&config.path) else {
        return false;
    };
    let dir_ok = path
        .parent()
        .and_then(|d| std::fs::symlink_metadata(d).ok())
        .is_some_and(|m| m.is_dir() && private(&m));
    let file_ok = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && private(&m));
    dir_ok && file_ok && std::fs::read(&path).is_ok_and(|b| b == record_bytes(config))
}

/// Records that the user trusts `config`'s content; returns the record's path.
pub(crate) fn trust(config: &Config) -> Result<PathBuf> {
    let path = record_path(&config.path)?;
    let dir = path.parent().expect("a record is in the trust directory");
    cairn_store::fsutil::ensure_dir(dir)?;
    cairn_store::fsutil::write_atomic(dir, &path, &record_bytes(config))?;
    Ok(path)
}

/// Why the commands of `config` may not run after a rewind in the workspace at canonical
/// `root` (`None`: they may). `user`: it is the user's own `~/.claude/cairn.json`. The one
/// place that decides, for `cairn rewind`, the MCP server, the Studio and `cairn init`.
pub(crate) fn why_not(config: &Config, root: &Path, user: bool, named: &Path) -> Option<String> {
    let inside = config.path.starts_with(root);
    if !user && !inside {
        return Some(format!(
            "the on_rewind commands of {} were not run: it leads out of the workspace (to {}); put \
             the file itself in the workspace, then trust it with `cairn trust`",
            named.display(),
            config.path.display()
        ));
    }
    let users_own = || {
        let meta = |p: &Path| std::fs::symlink_metadata(p).ok();
        user && !inside
            && meta(&config.path).is_some_and(|m| m.is_file() && private(&m))
            && config
                .path
                .parent()
                .and_then(meta)
                .is_some_and(|m| private(&m))
    };
    if recorded(config) || users_own() {
        return None;
    }
    Some(format!(
        "the on_rewind commands of {} were not run: that content is not trusted (new, or changed \
         since it was trusted{}); read it, then trust it with `cairn trust {}`",
        config.path.display(),
        if user && !inside {
            ", and it or its directory is not yours alone to write"
        } else {
            ""
        },
        crate::agents::shell_quote(&config.path)
    ))
}

/// A file whose `on_rewind` commands were not run, and why.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct NotRun {
    /// The file.
    #[serde(with = "cairn_store::relpath::os_path")]
    pub path: PathBuf,
    /// Its commands, not run.
    pub commands: Vec<String>,
    /// Why, and what to do, in one line.
    pub message: String,
}

/// The `on_rewind` commands that may run after a rewind in the workspace at `root` (those of
/// its `.claude/cairn.json` and of the user's `~/.claude/cairn.json` that are trusted, each
/// once), and the files whose commands may not.
pub(crate) fn on_rewind(root: &Path) -> (Vec<String>, Vec<NotRun>) {
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut files = vec![(root.join(".claude").join(CONFIG), false)];
    files.extend(user_config().map(|u| (u, true)));
    let (mut commands, mut not_run, mut seen) = (Vec::new(), Vec::new(), Vec::new());
    for (named, user) in files {
        let config = match Config::read(&named) {
            Ok(Some(c)) if !c.commands.is_empty() && !seen.contains(&c.path) => c,
            Ok(_) => continue,
            Err(e) => {
                not_run.push(NotRun {
                    message: format!(
                        "the on_rewind commands of {} were not run: it cannot be read ({e})",
                        named.display()
                    ),
                    path: named,
                    commands: Vec::new(),
                });
                continue;
            }
        };
        seen.push(config.path.clone());
        match why_not(&config, &root, user, &named) {
            None => {
                for c in config.commands {
                    if !commands.contains(&c) {
                        commands.push(c);
                    }
                }
            }
            Some(message) => not_run.push(NotRun {
                path: config.path,
                commands: config.commands,
                message,
            }),
        }
    }
    (commands, not_run)
}

/// The lines a report adds for the files whose commands were not run.
pub(crate) fn not_run_text(not_run: &[NotRun]) -> String {
    not_run
        .iter()
        .map(|n| format!("  {}\n", n.message))
        .collect()
}

/// A report with the files whose `on_rewind` commands were not run (left out when none).
#[derive(Debug, Serialize)]
pub(crate) struct WithNotRun<'a, T: Serialize> {
    /// The report.
    #[serde(flatten)]
    pub report: &'a T,
    /// The files whose `on_rewind` commands were not run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub on_rewind_not_run: Vec<NotRun>,
}

/// What `cairn trust --json` prints.
#[derive(Debug, Serialize)]
struct TrustJson {
    #[serde(with = "cairn_store::relpath::os_path")]
    path: PathBuf,
    /// The content's SHA-256 (absent with `--revoke`).
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
    /// The commands now trusted (none with `--revoke`).
    on_rewind: Vec<String>,
    /// The file's content is trusted now.
    trusted: bool,
    /// With `--revoke`: a record was there and is gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    revoked: Option<bool>,
}

/// `cairn trust [PATH] [--revoke]`: trusts the exact content of a `cairn.json` (default: the
/// workspace's `.claude/cairn.json`), showing the commands it trusts; `--revoke` takes the
/// trust back.
pub(crate) fn trust_command(ctx: &Ctx, path: Option<&Path>, revoke: bool) -> Result<()> {
    let named = match path {
        Some(p) => ctx.root.join(p),
        None => ctx.root.join(".claude").join(CONFIG),
    };
    let io = |e: std::io::Error| {
        CliError::new(
            ErrorKind::of_io(&e),
            format!("cannot read {}: {e}", named.display()),
        )
        .with_path(&named)
    };
    if revoke {
        let canonical = std::fs::canonicalize(&named).or_else(|e| {
            // A file gone since: its directory still names its record.
            let dir = named.parent().ok_or_else(|| io(e))?;
            let name = named.file_name().unwrap_or_default();
            Ok::<_, CliError>(std::fs::canonicalize(dir).map_err(io)?.join(name))
        })?;
        let record = record_path(&canonical)?;
        let revoked = match std::fs::remove_file(&record) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => {
                return Err(CliError::new(
                    ErrorKind::of_io(&e),
                    format!("cannot remove the trust record {}: {e}", record.display()),
                )
                .with_path(&record))
            }
        };
        let json = TrustJson {
            path: canonical,
            sha256: None,
            on_rewind: Vec::new(),
            trusted: false,
            revoked: Some(revoked),
        };
        return ctx.emit(&json, || {
            if revoked {
                format!(
                    "{} is no longer trusted: its on_rewind commands do not run\n",
                    json.path.display()
                )
            } else {
                format!("{} was not trusted; nothing changed\n", json.path.display())
            }
        });
    }
    let config = Config::read(&named).map_err(io)?.ok_or_else(|| {
        CliError::new(
            ErrorKind::NotFound,
            format!(
                "no file at {}: name the cairn.json to trust (`cairn init claude-code --on-rewind CMD` \
                 makes one)",
                named.display()
            ),
        )
        .with_path(&named)
    })?;
    if !config.valid {
        return Err(CliError::new(
            ErrorKind::InvalidArgument,
            format!(
                "{} is not a JSON object; fix it first, nothing was trusted",
                named.display()
            ),
        )
        .with_path(&named));
    }
    let root = ctx.canonical_root();
    if path.is_none() && !config.path.starts_with(&root) {
        // A rewind would not run it anyway (see `why_not`).
        let why = why_not(&config, &root, false, &named).unwrap_or_default();
        return Err(CliError::new(ErrorKind::InvalidArgument, why).with_path(&named));
    }
    trust(&config)?;
    let json = TrustJson {
        path: config.path,
        sha256: Some(config.sha256),
        on_rewind: config.commands,
        trusted: true,
        revoked: None,
    };
    ctx.emit(&json, || {
        let mut out = format!(
            "trusted this content of {} (sha256 {})",
            json.path.display(),
            json.sha256.as_deref().unwrap_or_default()
        );
        if json.on_rewind.is_empty() {
            out.push_str(": it has no on_rewind commands\n");
        } else {
            out.push_str(": after each rewind of its workspace, Cairn runs\n");
            for c in &json.on_rewind {
                out.push_str(&format!("  {c}\n"));
            }
        }
        out.push_str(
            "a change to the file makes it untrusted again; `cairn trust --revoke` takes it back\n",
        );
        out
    })
}
