//! `cairn doctor` (issue 54): what would leave a user of Claude Code without checkpoints in the
//! workspace. Cairn's hooks missing from the settings Claude Code reads, pointing at a `cairn`
//! that is gone, or turned off by `disableAllHooks`; prompts in Claude Code's transcripts of the
//! project that no thread recorded (hooks that did not run: `claude --bare`, a `--settings` file
//! that was not loaded); a watcher the hooks ask for that does not answer; a store that cannot be
//! written. Each finding says what is wrong, what to do, and which path.
//!
//! [`session_start_notice`] runs the cheap checks for the `SessionStart` hook.
//!
//! This module runs the checks and reads the settings; the checks are in `hooks` (the hooks in
//! those settings), `runtime` (the watcher, Codex, the store) and `transcripts`.

mod hooks;
mod runtime;
mod transcripts;

use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::parse::count;
use cairn_agents::claude::ClaudeCode;
use cairn_agents::Agent;
use cairn_store::ErrorKind;
use hooks::{hooks_command, hooks_disabled, hooks_installed};
use runtime::{codex_hooks, store_writable, watcher};
use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;
use std::time::SystemTime;
use transcripts::transcript_prompts;

/// Settings an administrator deploys; `disableAllHooks` there turns off every hook.
const MANAGED_SETTINGS: &str = "/etc/claude-code/managed-settings.json";

/// What `cairn doctor --json` prints.
#[derive(Debug, Serialize)]
struct DoctorJson {
    /// Whether every check passed.
    ok: bool,
    /// One finding per check that ran, passed ones included.
    findings: Vec<Finding>,
}

/// What one check found.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Finding {
    /// The check's name (`hooks-installed`, `hooks-command`, ...).
    pub(super) check: &'static str,
    /// Whether it passed.
    pub(super) ok: bool,
    /// What it found.
    pub(super) message: String,
    /// What to do (empty when it passed).
    pub(super) fix: String,
    /// The path concerned.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "cairn_store::relpath::opt_os_path::serialize"
    )]
    pub(super) path: Option<PathBuf>,
}

impl Finding {
    pub(super) fn pass(check: &'static str, message: impl Into<String>) -> Finding {
        Finding {
            check,
            ok: true,
            message: message.into(),
            fix: String::new(),
            path: None,
        }
    }

    pub(super) fn fail(
        check: &'static str,
        message: impl Into<String>,
        fix: impl Into<String>,
        path: Option<PathBuf>,
    ) -> Finding {
        Finding {
            check,
            ok: false,
            message: message.into(),
            fix: fix.into(),
            path,
        }
    }

    /// One line for people.
    fn line(&self) -> String {
        if self.ok {
            return format!("ok    {}: {}", self.check, self.message);
        }
        let mut line = format!(
            "FAIL  {}: {}; to fix: {}",
            self.check, self.message, self.fix
        );
        if let Some(p) = &self.path {
            line.push_str(&format!(" ({})", p.display()));
        }
        line
    }
}

/// `cairn doctor`: runs every check, prints one line per finding (`--json`: the findings), and
/// fails with `VALIDATION` when any check did not pass.
pub(crate) fn doctor(ctx: &Ctx) -> Result<()> {
    let settings = Settings::read(ctx);
    let codex = codex_hooks(ctx);
    // Claude Code's checks, unless only Codex has Cairn's hooks (a Codex user is not told to
    // install Claude Code's).
    let claude = !settings.hooks.is_empty() || codex.is_none();
    let mut findings = Vec::new();
    if claude {
        findings.push(hooks_installed(&settings, &ctx.canonical_root()));
        findings.push(hooks_disabled(&settings));
    }
    if !settings.hooks.is_empty() {
        findings.push(hooks_command(&settings, ctx));
    }
    if let Some(f) = watcher(ctx, &settings, false) {
        findings.push(f);
    }
    findings.push(store_writable(ctx));
    if claude {
        findings.push(transcript_prompts(ctx, &settings));
    }
    findings.extend(codex);
    let failed: Vec<&Finding> = findings.iter().filter(|f| !f.ok).collect();
    let json = DoctorJson {
        ok: failed.is_empty(),
        findings: findings.clone(),
    };
    ctx.emit(&json, || {
        let mut out: String = json.findings.iter().map(|f| f.line() + "\n").collect();
        if json.ok {
            out.push_str("all good: the agent's prompts and file changes get checkpoints\n");
        }
        out
    })?;
    if failed.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = failed.iter().map(|f| f.check).collect();
    Err(CliError::new(
        ErrorKind::Validation,
        format!(
            "doctor found {} ({}); each line above says what to do",
            count(failed.len() as u64, "problem", "problems"),
            names.join(", ")
        ),
    ))
}

/// The cheap checks (the hook commands, the store, a watcher that holds the workspace and does
/// not answer; not the transcripts) in one line naming what is wrong and `cairn doctor`, for the
/// `SessionStart` hook; `None` when all is well. A watcher that does not run yet is not reported
/// here: a hook with `--watch` has just started one.
pub(crate) fn session_start_notice(ctx: &Ctx) -> Option<String> {
    let settings = Settings::read(ctx);
    let mut failed: Vec<Finding> = Vec::new();
    if !settings.hooks.is_empty() {
        failed.push(hooks_command(&settings, ctx));
    }
    failed.push(store_writable(ctx));
    failed.extend(watcher(ctx, &settings, true));
    failed.retain(|f| !f.ok);
    let first = failed.first()?;
    let more = match failed.len() {
        1 => String::new(),
        n => format!(" (and {} more)", count(n as u64 - 1, "problem", "problems")),
    };
    Some(format!(
        "Cairn may not checkpoint this session: {}{more}; `cairn doctor` says what to do",
        first.message
    ))
}

/// One settings file Claude Code reads for the project.
#[derive(Debug)]
pub(super) struct SettingsFile {
    pub(super) path: PathBuf,
    /// Its content; `None` when it does not parse (Claude Code skips it).
    pub(super) json: Option<Value>,
    /// Why it does not parse.
    pub(super) error: Option<String>,
    pub(super) modified: Option<SystemTime>,
}

/// The settings files Claude Code reads for the workspace, and Cairn's hooks in them.
#[derive(Debug)]
pub(super) struct Settings {
    pub(super) files: Vec<SettingsFile>,
    /// (event, command, file) of every hook of Cairn's.
    pub(super) hooks: Vec<(String, String, PathBuf)>,
    /// The project's settings file, where `cairn init claude-code` puts the hooks.
    pub(super) project: PathBuf,
}

impl Settings {
    fn read(ctx: &Ctx) -> Settings {
        let root = ctx.canonical_root();
        let project = root.join(".claude/settings.json");
        let mut paths = vec![project.clone(), root.join(".claude/settings.local.json")];
        if let Some(dir) = claude_config_dir() {
            paths.push(dir.join("settings.json"));
        }
        paths.push(PathBuf::from(MANAGED_SETTINGS));
        let mut files = Vec::new();
        for path in paths {
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    files.push(SettingsFile {
                        error: Some(format!("cannot be read: {e}")),
                        path,
                        json: None,
                        modified: None,
                    });
                    continue;
                }
            };
            let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
            let (json, error) = match serde_json::from_str::<Value>(&text) {
                Ok(v) => (Some(v), None),
                Err(e) if text.trim().is_empty() => (None, Some(format!("is empty ({e})"))),
                Err(e) => (None, Some(format!("is not valid JSON ({e})"))),
            };
            files.push(SettingsFile {
                path,
                json,
                error,
                modified,
            });
        }
        let mut hooks = Vec::new();
        for f in &files {
            let Some(events) = f.json.as_ref().and_then(|j| j["hooks"].as_object()) else {
                continue;
            };
            for (event, groups) in events {
                let commands = groups
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|g| g["hooks"].as_array())
                    .flatten()
                    .filter(|h| h["type"].as_str().is_none_or(|t| t == "command"))
                    .filter_map(|h| h["command"].as_str())
                    .filter(|c| ClaudeCode.is_ours(c));
                for c in commands {
                    hooks.push((event.clone(), c.to_string(), f.path.clone()));
                }
            }
        }
        Settings {
            files,
            hooks,
            project,
        }
    }

    /// The files that hold a hook of Cairn's.
    pub(super) fn files_with_hooks(&self) -> Vec<&SettingsFile> {
        self.files
            .iter()
            .filter(|f| self.hooks.iter().any(|(_, _, p)| *p == f.path))
            .collect()
    }
}

/// Claude Code's own directory: `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
pub(super) fn claude_config_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    home().map(|h| h.join(".claude"))
}

/// The user's home directory, `$HOME`, when it is set.
pub(super) fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}
