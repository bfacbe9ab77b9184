//! `cairn doctor` (issue 54): what would leave a user of Claude Code without checkpoints in the
//! workspace. Cairn's hooks missing from the settings Claude Code reads, pointing at a `cairn`
//! that is gone, or turned off by `disableAllHooks`; prompts in Claude Code's transcripts of the
//! project that no thread recorded (hooks that did not run: `claude --bare`, a `--settings` file
//! that was not loaded); a watcher the hooks ask for that does not answer; a store that cannot be
//! written. Each finding says what is wrong, what to do, and which path.
//!
//! [`session_start_notice`] runs the cheap checks for the `SessionStart` hook.

use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::parse::{count, human_bytes};
use cairn_agents::claude::{self, ClaudeCode};
use cairn_agents::{Agent, Place};
use cairn_restore::watch::{self, Found};
use cairn_rewind::{EntryKind, Threads, ThreadsOptions};
use cairn_store::{ErrorKind, Store};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The hook events `cairn init claude-code` installs that Cairn cannot do without (not
/// `SessionStart`, which only runs the notice of [`session_start_notice`]; settings written by
/// an earlier `cairn init` lack it).
fn needed_events() -> Vec<&'static str> {
    claude::wanted()
        .into_iter()
        .map(|w| w.event)
        .filter(|e| *e != "SessionStart")
        .collect()
}

/// Settings an administrator deploys; `disableAllHooks` there turns off every hook.
const MANAGED_SETTINGS: &str = "/etc/claude-code/managed-settings.json";

/// A store on a file system with less free space than this is reported: checkpoints fail once
/// it fills.
const MIN_FREE_BYTES: u64 = 100 << 20;

/// Transcripts modified longer ago than this are not read.
const TRANSCRIPT_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

/// At most this many transcripts (the newest) are read.
const TRANSCRIPT_MAX_COUNT: usize = 20;

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
struct Finding {
    /// The check's name (`hooks-installed`, `hooks-command`, ...).
    check: &'static str,
    /// Whether it passed.
    ok: bool,
    /// What it found.
    message: String,
    /// What to do (empty when it passed).
    fix: String,
    /// The path concerned.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "cairn_store::relpath::opt_os_path::serialize"
    )]
    path: Option<PathBuf>,
}

impl Finding {
    fn pass(check: &'static str, message: impl Into<String>) -> Finding {
        Finding {
            check,
            ok: true,
            message: message.into(),
            fix: String::new(),
            path: None,
        }
    }

    fn fail(
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
struct SettingsFile {
    path: PathBuf,
    /// Its content; `None` when it does not parse (Claude Code skips it).
    json: Option<Value>,
    /// Why it does not parse.
    error: Option<String>,
    modified: Option<SystemTime>,
}

/// The settings files Claude Code reads for the workspace, and Cairn's hooks in them.
#[derive(Debug)]
struct Settings {
    files: Vec<SettingsFile>,
    /// (event, command, file) of every hook of Cairn's.
    hooks: Vec<(String, String, PathBuf)>,
    /// The project's settings file, where `cairn init claude-code` puts the hooks.
    project: PathBuf,
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
    fn files_with_hooks(&self) -> Vec<&SettingsFile> {
        self.files
            .iter()
            .filter(|f| self.hooks.iter().any(|(_, _, p)| *p == f.path))
            .collect()
    }
}

/// Claude Code's own directory: `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
fn claude_config_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    home().map(|h| h.join(".claude"))
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `hooks-installed`: each event Cairn needs has its hook in a settings file Claude Code reads.
fn hooks_installed(settings: &Settings, root: &Path) -> Finding {
    let needed = needed_events();
    let missing: Vec<&str> = needed
        .iter()
        .copied()
        .filter(|e| !settings.hooks.iter().any(|(ev, _, _)| ev == e))
        .collect();
    let unreadable: Vec<String> = settings
        .files
        .iter()
        .filter_map(|f| {
            f.error
                .as_ref()
                .map(|e| format!("{} {e}", f.path.display()))
        })
        .collect();
    if missing.is_empty() {
        let files: Vec<String> = settings
            .files_with_hooks()
            .iter()
            .map(|f| f.path.display().to_string())
            .collect();
        return Finding::pass(
            "hooks-installed",
            format!(
                "Cairn's hooks are installed for {} (in {})",
                needed.join(", "),
                files.join(", ")
            ),
        );
    }
    let mut message = format!(
        "Cairn's hook is missing for {} in the settings Claude Code reads for {}, so {}",
        missing.join(", "),
        root.display(),
        if missing.contains(&"UserPromptSubmit") {
            "prompts get no checkpoint"
        } else {
            "some changes get no checkpoint"
        }
    );
    if !unreadable.is_empty() {
        message.push_str(&format!(
            " (Claude Code skips a settings file it cannot parse: {})",
            unreadable.join("; ")
        ));
    }
    Finding::fail(
        "hooks-installed",
        message,
        "run `cairn init claude-code` in the project (or `cairn init claude-code --user` for \
         every project)",
        Some(
            settings
                .files
                .iter()
                .find(|f| f.error.is_some())
                .map_or_else(|| settings.project.clone(), |f| f.path.clone()),
        ),
    )
}

/// `hooks-disabled`: `"disableAllHooks": true` in a settings file Claude Code reads.
fn hooks_disabled(settings: &Settings) -> Finding {
    let disabling: Vec<&SettingsFile> = settings
        .files
        .iter()
        .filter(|f| {
            f.json
                .as_ref()
                .is_some_and(|j| j["disableAllHooks"] == true)
        })
        .collect();
    let Some(first) = disabling.first() else {
        return Finding::pass(
            "hooks-disabled",
            "no settings file turns Claude Code's hooks off (disableAllHooks)",
        );
    };
    let names: Vec<String> = disabling
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    Finding::fail(
        "hooks-disabled",
        format!(
            "\"disableAllHooks\": true in {} turns off every hook, Cairn's too: no prompt or \
             tool call gets a checkpoint",
            names.join(" and ")
        ),
        format!("remove \"disableAllHooks\" from {}", names.join(" and ")),
        Some(first.path.clone()),
    )
}

/// `hooks-command`: each hook command of Cairn's starts an executable file.
fn hooks_command(settings: &Settings, ctx: &Ctx) -> Finding {
    let root = ctx.canonical_root();
    let mut seen = HashSet::new();
    let mut broken: Vec<(String, PathBuf)> = Vec::new();
    let mut programs: Vec<String> = Vec::new();
    for (_, command, file) in &settings.hooks {
        if !seen.insert((command.clone(), file.clone())) {
            continue;
        }
        match program_of(command, &root) {
            Ok(p) => {
                let shown = p.display().to_string();
                if !programs.contains(&shown) {
                    programs.push(shown);
                }
            }
            Err(why) => {
                let what = format!("`{command}` in {}: {why}", file.display());
                if !broken.iter().any(|(w, _)| *w == what) {
                    broken.push((what, file.clone()));
                }
            }
        }
    }
    let Some((_, file)) = broken.first() else {
        return Finding::pass(
            "hooks-command",
            format!("Cairn's hooks run {}", programs.join(", ")),
        );
    };
    let whats: Vec<&str> = broken.iter().map(|(w, _)| w.as_str()).collect();
    let user = claude_config_dir().is_some_and(|d| *file == d.join("settings.json"));
    Finding::fail(
        "hooks-command",
        format!(
            "Cairn's hook cannot start, so Claude Code runs without checkpoints: {}",
            whats.join("; ")
        ),
        format!(
            "run `cairn init claude-code{}` again with the cairn you use (it rewrites the \
             command)",
            if user { " --user" } else { "" }
        ),
        Some(file.clone()),
    )
}

/// The executable a hook command starts: its first word (after `NAME=value` assignments), shell
/// quoting undone, `~`, `$HOME` and `$CLAUDE_PROJECT_DIR` expanded, looked up on `PATH` when it
/// names no directory; or why there is none.
fn program_of(command: &str, root: &Path) -> std::result::Result<PathBuf, String> {
    let words = shell_words(command).ok_or("its quotes are not closed")?;
    let word = words
        .into_iter()
        .find(|w| !is_assignment(w))
        .ok_or("it names no program")?;
    let word = expand(&word, root)?;
    let candidates: Vec<PathBuf> = if word.contains('/') {
        let p = PathBuf::from(&word);
        vec![if p.is_absolute() { p } else { root.join(p) }]
    } else {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|d| d.join(&word))
            .collect()
    };
    if let Some(found) = candidates.iter().find(|p| is_executable(p)) {
        return Ok(found.clone());
    }
    match candidates.as_slice() {
        [one] if one.exists() => Err(format!("{} is not an executable file", one.display())),
        [one] => Err(format!("{} does not exist", one.display())),
        _ => Err(format!("no executable {word} on PATH")),
    }
}

/// `~/…`, `$HOME/…`, `${HOME}/…`, `$CLAUDE_PROJECT_DIR/…` expanded; other variables are not
/// known here.
fn expand(word: &str, root: &Path) -> std::result::Result<String, String> {
    let home = home().map(|h| h.display().to_string());
    let root = root.display().to_string();
    for (prefix, value) in [
        ("~", home.as_deref()),
        ("$HOME", home.as_deref()),
        ("${HOME}", home.as_deref()),
        ("$CLAUDE_PROJECT_DIR", Some(root.as_str())),
        ("${CLAUDE_PROJECT_DIR}", Some(root.as_str())),
    ] {
        if let Some(rest) = word.strip_prefix(prefix) {
            if rest.is_empty() || rest.starts_with('/') {
                let value = value.ok_or("HOME is not set")?;
                return Ok(format!("{value}{rest}"));
            }
        }
    }
    if word.contains('$') {
        return Err(format!(
            "{word} names a variable this check cannot expand; give the path itself"
        ));
    }
    Ok(word.to_string())
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file())
        && rustix::fs::access(p, rustix::fs::Access::EXEC_OK).is_ok()
}

/// `NAME=value`: an assignment before the command, not the program.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The words of a command as a POSIX shell splits them (single and double quotes, backslashes;
/// no expansion); `None` when a quote is not closed.
fn shell_words(s: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => word.push(c),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => match chars.next()? {
                            c @ ('"' | '\\' | '$' | '`') => word.push(c),
                            '\n' => {}
                            c => {
                                word.push('\\');
                                word.push(c);
                            }
                        },
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') | None => {}
                    Some(c) => word.push(c),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

/// `watcher`: when Cairn's hooks start a watcher (`--watch`), one answers for the workspace.
/// `silent_only` reports only a watcher that holds the workspace and does not answer (a hook
/// that has just started one is not yet answering). `None` when the hooks ask for no watcher.
fn watcher(ctx: &Ctx, settings: &Settings, silent_only: bool) -> Option<Finding> {
    const CHECK: &str = "watcher";
    let (_, command, file) = settings
        .hooks
        .iter()
        .find(|(_, c, _)| shell_words(c).is_some_and(|w| w.iter().any(|w| w == "--watch")))?;
    if ctx.remote.is_some() {
        return Some(Finding::pass(
            CHECK,
            "the hooks start no watcher for a store that mirrors a remote",
        ));
    }
    let root = ctx.canonical_root();
    let found = (|| -> Result<Option<Found>> {
        let (store_path, _, id) = ctx.workspace_location()?;
        if std::fs::symlink_metadata(&store_path).is_err() {
            return Ok(None);
        }
        let store = Store::open(&store_path, ctx.store_options(false)?)?;
        Ok(Some(watch::find(&store, &id)?))
    })();
    let none = || {
        Finding::fail(
            CHECK,
            format!(
                "Cairn's hooks ask for a watcher (`{command}`) but none answers for {}: each \
                 checkpoint walks the whole tree until one runs",
                root.display()
            ),
            "run `cairn watch &` in the project (the next hook starts one too)",
            Some(file.clone()),
        )
    };
    match found {
        Ok(Some(Found::Running(st))) => Some(Finding::pass(
            CHECK,
            format!(
                "a watcher answers for {} (process {})",
                root.display(),
                st.pid
            ),
        )),
        Ok(Some(Found::Silent { pid, why })) => {
            Some(Finding::fail(
                CHECK,
                format!(
                "a watcher holds {} ({}) but does not answer: {why}; each checkpoint walks the \
                 whole tree meanwhile",
                root.display(),
                pid.map_or("its process unknown".to_string(), |p| format!("process {p}"))
            ),
                "run `cairn watch --stop` (the next hook starts another)",
                Some(file.clone()),
            ))
        }
        Ok(None | Some(Found::None)) if silent_only => None,
        Ok(None | Some(Found::None)) => Some(none()),
        Err(e) => Some(Finding::fail(
            CHECK,
            format!("cannot ask the watcher of {}: {}", root.display(), e.line()),
            "run `cairn watch --status` to see more",
            e.path.clone(),
        )),
    }
}

/// `store-writable`: a file can be made in the store (or, before the first checkpoint, where it
/// will be made), the thread database can be written, and the file system has room.
/// Issue 55: when Cairn's hooks are in Codex's hooks (the project's, else the user's), whether
/// Codex runs them, asked of Codex itself (`codex app-server`): it skips an untrusted or
/// disabled hook without a word. `None` when no Codex hooks of Cairn's are installed.
fn codex_hooks(ctx: &Ctx) -> Option<Finding> {
    use cairn_agents::codex::{self, Codex};
    const CHECK: &str = "codex-hooks-trusted";
    let mut files = vec![Codex.project_settings(&ctx.root)];
    files.extend(home().map(|h| Codex.user_settings(&h)));
    let path = files
        .into_iter()
        .find(|p| codex::has_ours(p, |c| Codex.is_ours(c)))?;
    Some(match codex::hooks_not_run(&path, |c| Codex.is_ours(c)) {
        Ok(problems) if problems.is_empty() => {
            Finding::pass(CHECK, format!("Codex runs Cairn's hooks in {}", path.display()))
        }
        Ok(problems) => Finding::fail(
            CHECK,
            problems.join("; "),
            "run `cairn init codex` (it trusts Cairn's hooks through Codex's app-server), or trust \
             and enable them in /hooks in Codex",
            Some(path),
        ),
        Err(e) => Finding::fail(
            CHECK,
            format!("cannot ask Codex whether it runs Cairn's hooks ({e})"),
            "put `codex` on PATH or set CAIRN_CODEX to it, then run `cairn doctor` again; or check \
             /hooks in Codex",
            Some(path),
        ),
    })
}

fn store_writable(ctx: &Ctx) -> Finding {
    const CHECK: &str = "store-writable";
    let store = match ctx.store_path() {
        Ok(s) => s,
        Err(e) => {
            return Finding::fail(
                CHECK,
                format!("cannot tell where the store is: {}", e.line()),
                "run `cairn info` to see more",
                e.path,
            )
        }
    };
    let move_it = "or move the store with `cairn store move DIR`";
    // Before the first checkpoint: the nearest directory the store will be made in.
    let mut dir = store.as_path();
    while std::fs::symlink_metadata(dir).is_err() {
        match dir.parent() {
            Some(p) => dir = p,
            None => break,
        }
    }
    let (dir, exists) = (dir.to_path_buf(), dir == store);
    // What is wrong with the store, or with where it will be made.
    let problem = |what: String| {
        if exists {
            format!("the store {} {what}", store.display())
        } else {
            format!(
                "the store {} cannot be made: {} {what}",
                store.display(),
                dir.display()
            )
        }
    };
    if !dir.is_dir() {
        return Finding::fail(
            CHECK,
            problem("is not a directory".into()),
            format!("remove what is at {}, {move_it}", dir.display()),
            Some(dir),
        );
    }
    if let Err(e) = tempfile::Builder::new()
        .prefix(".cairn-doctor-")
        .tempfile_in(&dir)
    {
        return Finding::fail(
            CHECK,
            problem(format!("cannot be written: {e}")),
            format!(
                "let this user write {} (check its permissions and owner), {move_it}",
                dir.display()
            ),
            Some(dir),
        );
    }
    if exists {
        if let Ok(db) = ctx.threads_db_with(|| Ok(store.clone())) {
            let is_file = !db.to_str().is_some_and(cairn_rewind::is_pg_url) && db.is_file();
            if is_file && rustix::fs::access(&db, rustix::fs::Access::WRITE_OK).is_err() {
                return Finding::fail(
                    CHECK,
                    format!(
                        "the thread database {} cannot be written: prompts are not recorded",
                        db.display()
                    ),
                    format!("let this user write {}", db.display()),
                    Some(db),
                );
            }
        }
    }
    if let Ok(st) = rustix::fs::statvfs(&dir) {
        let free = st.f_bavail.saturating_mul(st.f_frsize);
        if free < MIN_FREE_BYTES {
            return Finding::fail(
                CHECK,
                format!(
                    "only {} free on the file system of the store {}: checkpoints fail once it \
                     is full",
                    human_bytes(free),
                    store.display()
                ),
                format!(
                    "free space there (`cairn prune --max-age 14d` drops old snapshots), \
                     {move_it}"
                ),
                Some(store),
            );
        }
        return Finding::pass(
            CHECK,
            format!(
                "the store {} {} ({} free)",
                store.display(),
                if exists {
                    "can be written"
                } else {
                    "can be made by the first checkpoint"
                },
                human_bytes(free)
            ),
        );
    }
    Finding::pass(
        CHECK,
        format!("the store {} can be written", store.display()),
    )
}

/// `transcript-prompts`: every prompt of Claude Code's recent transcripts of the project has a
/// user entry in a thread of the workspace (prompts typed before Cairn's hooks were installed
/// are not counted: the settings file holding them is younger).
fn transcript_prompts(ctx: &Ctx, settings: &Settings) -> Finding {
    const CHECK: &str = "transcript-prompts";
    let root = ctx.canonical_root();
    let Some(config) = claude_config_dir() else {
        return Finding::pass(
            CHECK,
            "HOME is not set: Claude Code's transcripts cannot be found",
        );
    };
    let dir = config.join("projects").join(project_dir_name(&root));
    let transcripts = recent_transcripts(&dir);
    if transcripts.is_empty() {
        return Finding::pass(
            CHECK,
            format!(
                "no transcript of Claude Code for {} in {} from the last 30 days",
                root.display(),
                dir.display()
            ),
        );
    }
    let recorded = match Recorded::read(ctx) {
        Ok(r) => r,
        Err(e) => {
            return Finding::fail(
                CHECK,
                format!("cannot read the thread database: {}", e.line()),
                "run `cairn verify` to see more",
                e.path,
            )
        }
    };
    // Prompts older than the hooks were not theirs to record.
    let since_ms = settings
        .files_with_hooks()
        .iter()
        .filter_map(|f| f.modified)
        .min()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(i64::MIN, |d| d.as_millis() as i64);
    let mut missing: Vec<(String, PathBuf, usize)> = Vec::new();
    let mut checked = 0usize;
    for path in &transcripts {
        let prompts = prompts_of(path);
        checked += prompts.len();
        let n = prompts
            .iter()
            .filter(|p| p.at_ms.is_none_or(|t| t >= since_ms) && !recorded.has(p))
            .count();
        if n > 0 {
            let session = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            missing.push((session, path.clone(), n));
        }
    }
    let Some((session, path, n)) = missing.first().cloned() else {
        return Finding::pass(
            CHECK,
            format!(
                "every prompt of Claude Code's {} of {} has a checkpoint ({} read)",
                count(
                    transcripts.len() as u64,
                    "recent transcript",
                    "recent transcripts"
                ),
                root.display(),
                count(checked as u64, "prompt", "prompts")
            ),
        );
    };
    let mut message = format!(
        "{} of Claude Code session {session} (transcript {}) {} no checkpoint: Cairn's hooks \
         did not run (`claude --bare` and `--settings` files that are not loaded skip them)",
        count(n as u64, "prompt", "prompts"),
        path.display(),
        if n == 1 { "has" } else { "have" }
    );
    if missing.len() > 1 {
        let others: Vec<String> = missing[1..]
            .iter()
            .map(|(s, _, n)| format!("{s} ({n})"))
            .collect();
        message.push_str(&format!(
            "; prompts of {} have none either: {}",
            count(others.len() as u64, "other session", "other sessions"),
            others.join(", ")
        ));
    }
    Finding::fail(
        CHECK,
        message,
        "run Claude Code without `--bare`, with Cairn's hooks in a settings file it loads \
         (`cairn init claude-code`; the other findings say whether they are installed and can \
         run); the prompts already missed have no checkpoint to go back to",
        Some(path),
    )
}

/// The directory Claude Code keeps a project's transcripts in, under `~/.claude/projects`: the
/// project's path with every character but ASCII letters and digits turned into `-` (each
/// UTF-16 unit, as Claude Code counts them), and past 200 of them cut, with a hash of the path
/// after a `-` (Claude Code 2.1).
fn project_dir_name(root: &Path) -> String {
    const MAX: usize = 200;
    let path = root.to_string_lossy();
    let units: Vec<u16> = path.encode_utf16().collect();
    let name: String = units
        .iter()
        .map(|&u| match char::from_u32(u32::from(u)) {
            Some(c) if c.is_ascii_alphanumeric() => c,
            _ => '-',
        })
        .collect();
    if name.len() <= MAX {
        return name;
    }
    // JavaScript's `(h << 5) - h + unit | 0` over the path, then `Math.abs(h).toString(36)`.
    let mut h: i32 = 0;
    for &u in &units {
        h = h.wrapping_shl(5).wrapping_sub(h).wrapping_add(i32::from(u));
    }
    let mut n = i64::from(h).unsigned_abs();
    let mut digits = Vec::new();
    loop {
        digits.push(char::from_digit((n % 36) as u32, 36).unwrap_or('0'));
        n /= 36;
        if n == 0 {
            break;
        }
    }
    let hash: String = digits.into_iter().rev().collect();
    format!("{}-{hash}", &name[..MAX])
}

/// The transcripts (`*.jsonl`) in `dir` modified in the last 30 days, newest first, at most 20.
fn recent_transcripts(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let oldest = SystemTime::now()
        .checked_sub(TRANSCRIPT_MAX_AGE)
        .unwrap_or(UNIX_EPOCH);
    let mut found: Vec<(SystemTime, PathBuf)> = read
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|p| {
            let m = std::fs::metadata(&p).ok().filter(|m| m.is_file())?;
            Some((m.modified().ok()?, p))
        })
        .filter(|(t, _)| *t >= oldest)
        .collect();
    found.sort_by_key(|(t, _)| std::cmp::Reverse(*t));
    found.truncate(TRANSCRIPT_MAX_COUNT);
    found.into_iter().map(|(_, p)| p).collect()
}

/// A prompt the user typed, as a transcript keeps it.
#[derive(Debug)]
struct Prompt {
    /// Its text (text blocks joined by newlines), and each text block on its own.
    texts: Vec<String>,
    /// Claude Code's id of the prompt (`promptId`).
    prompt_id: Option<String>,
    /// When it was typed (ms since the epoch), when the line says.
    at_ms: Option<i64>,
}

/// The prompts of a transcript (as `cairn_agents` reads them: not meta, not a tool's result,
/// not a compaction's summary nor a subagent's, not Claude's own notes), each once.
fn prompts_of(path: &Path) -> Vec<Prompt> {
    let Ok(t) = cairn_agents::claude::transcript::Transcript::read(path) else {
        return Vec::new();
    };
    let mut seen = HashSet::new();
    t.lines
        .into_iter()
        .filter(|l| l.is_prompt && seen.insert(l.uuid.clone()))
        .map(|l| Prompt {
            texts: l.text.into_iter().collect(),
            prompt_id: l.prompt_id,
            at_ms: l.timestamp.as_deref().and_then(iso_ms),
        })
        .collect()
}

/// Milliseconds since the epoch of a UTC time as Claude Code writes it
/// (`2026-12-07T04:40:43.993Z`).
fn iso_ms(s: &str) -> Option<i64> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    let ms: i64 = format!("{frac:0<3}").get(..3)?.parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hh) * 60 + mm) * 60_000 + ss * 1000 + ms)
}

/// The user entries of the workspace's threads: the prompt ids their metadata carries
/// (`conversation.prompt_id`), and their texts, apart for the entries that carry no id.
#[derive(Debug, Default)]
struct Recorded {
    ids: HashSet<String>,
    texts: HashSet<String>,
    texts_without_id: HashSet<String>,
}

impl Recorded {
    /// Reads them from the thread database (none when it was never made).
    fn read(ctx: &Ctx) -> Result<Recorded> {
        let mut r = Recorded::default();
        if ctx.threads_db.is_none()
            && ctx
                .store_path()
                .is_ok_and(|s| std::fs::symlink_metadata(s).is_err())
        {
            // No store yet: no thread either.
            return Ok(r);
        }
        let db = match ctx.threads_db() {
            Ok(db) => db,
            // No store yet: no thread either.
            Err(e) if e.kind == Some(ErrorKind::NotFound) => return Ok(r),
            Err(e) => return Err(e),
        };
        let is_url = db.to_str().is_some_and(cairn_rewind::is_pg_url);
        if !is_url && std::fs::symlink_metadata(&db).is_err() {
            return Ok(r);
        }
        let threads = Threads::open(
            &db,
            ThreadsOptions {
                recover: false,
                ..ThreadsOptions::default()
            },
        )?;
        for t in threads.threads()? {
            for e in threads.entries(&t.id, true)? {
                if e.kind != EntryKind::User {
                    continue;
                }
                let text = String::from_utf8_lossy(&e.payload).into_owned();
                match Place::of(&e).and_then(|p| p.prompt_id) {
                    Some(id) => {
                        r.ids.insert(id);
                    }
                    None => {
                        r.texts_without_id.insert(text.clone());
                    }
                }
                r.texts.insert(text);
            }
        }
        Ok(r)
    }

    /// Whether a thread recorded the prompt: by its id when the entries carry one, else by its
    /// text (a forked session's transcript repeats the earlier session's prompts under the new
    /// session's id: they count as recorded wherever they were).
    fn has(&self, p: &Prompt) -> bool {
        match &p.prompt_id {
            Some(id) if self.ids.contains(id) => true,
            Some(_) => p.texts.iter().any(|t| self.texts_without_id.contains(t)),
            None => p.texts.iter().any(|t| self.texts.contains(t)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 54: the name Claude Code 2.1.197 gave /work/exp/w/project's directory, and its rule.
    #[test]
    fn a_project_directory_is_named_as_claude_code_names_it() {
        assert_eq!(
            project_dir_name(Path::new("/work/exp/w/project")),
            "-work-exp-w-project"
        );
        assert_eq!(
            project_dir_name(Path::new("/home/me/my.app_2/é")),
            "-home-me-my-app-2--"
        );
        let long = format!("/{}", "a".repeat(300));
        let name = project_dir_name(Path::new(&long));
        // As Claude Code's own code names it (node: `Math.abs(h).toString(36)`).
        assert_eq!(name, format!("-{}-vtkmfl", "a".repeat(199)));
    }

    // Issue 54.
    #[test]
    fn a_hook_command_is_split_as_a_shell_splits_it() {
        assert_eq!(
            shell_words("'/opt/my tools/cairn' hook claude-code --watch"),
            Some(vec![
                "/opt/my tools/cairn".to_string(),
                "hook".into(),
                "claude-code".into(),
                "--watch".into()
            ])
        );
        assert_eq!(
            shell_words(r#"'it'\''s/cairn' x"#).map(|w| w[0].clone()),
            Some("it's/cairn".to_string())
        );
        assert_eq!(
            shell_words(r#""a\"b" c\ d"#),
            Some(vec!["a\"b".to_string(), "c d".into()])
        );
        assert_eq!(shell_words("'open"), None);
        assert!(is_assignment("CAIRN_HOME=/x"));
        assert!(!is_assignment("/usr/bin/cairn"));
    }

    // Issue 54.
    #[test]
    fn claude_codes_timestamps_are_read_to_the_millisecond() {
        assert_eq!(iso_ms("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(iso_ms("2026-12-07T04:40:43.993Z"), Some(1_796_618_443_993));
        assert_eq!(iso_ms("2000-03-01T00:00:01Z"), Some(951_868_801_000));
        assert_eq!(iso_ms("yesterday"), None);
    }
}
