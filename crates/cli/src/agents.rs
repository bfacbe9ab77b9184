//! Cairn in the agents people run: `cairn hook claude-code`, run by Claude Code on its hook
//! events, and `cairn init claude-code`, which installs those hooks in its settings.

use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::threads::open;
use cairn_rewind::{
    AppendOptions, CheckpointKind, CheckpointOptions, Files, NewEntry, ThreadId, Threads,
};
use cairn_store::ErrorKind;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The tools whose call may change files: a checkpoint is taken before each.
pub const FILE_TOOLS: &[&str] = &["Write", "Edit", "MultiEdit", "NotebookEdit", "Bash"];

/// The exit code of a hook that failed: Claude Code shows its stderr and goes on (2 would
/// block the prompt or the tool).
pub const HOOK_FAILED: i32 = 1;

/// The hook document Claude Code writes on stdin (the fields Cairn reads).
#[derive(Debug, Deserialize)]
struct HookInput {
    session_id: String,
    #[serde(default)]
    transcript_path: Option<PathBuf>,
    #[serde(default)]
    cwd: Option<PathBuf>,
    hook_event_name: String,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    tool_use_id: Option<String>,
    /// The subagent whose tool call it is (absent for the main agent).
    #[serde(default)]
    agent_id: Option<String>,
    /// The subagent's type, when Claude Code says.
    #[serde(default)]
    agent_type: Option<String>,
}

/// The thread of a Claude Code session: `claude-` and the session id (bytes a thread id does
/// not take become `_`).
pub fn session_thread(session_id: &str) -> ThreadId {
    let clean: String = session_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.:@-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(120)
        .collect();
    ThreadId::new(format!("claude-{clean}"))
}

/// The thread of the session, made on first use.
fn session(threads: &Threads, id: &ThreadId) -> Result<()> {
    match threads.thread(id) {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => {
            match threads.create_thread(
                Some(id.clone()),
                serde_json::json!({ "agent": "claude-code" }),
            ) {
                Ok(_) => Ok(()),
                // Another hook of the same session made it meanwhile.
                Err(_) if threads.thread(id).is_ok() => Ok(()),
                Err(e) => Err(e.into()),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// The admission key of a prompt: the same delivery of the same prompt (the session, the text
/// and how long the transcript was) is one entry; the same words typed again later are another.
fn prompt_key(input: &HookInput, prompt: &str) -> String {
    let transcript_len = input
        .transcript_path
        .as_deref()
        .and_then(|p| std::fs::metadata(p).ok())
        .map_or(0, |m| m.len());
    let mut h = cairn_store::Hasher::new();
    h.update(input.session_id.as_bytes());
    h.update(&[0]);
    h.update(prompt.as_bytes());
    h.update(&[0]);
    h.update(&transcript_len.to_le_bytes());
    format!("claude-prompt-{}", &h.finish().to_hex()[..32])
}

/// `cairn hook claude-code`: acts on one hook document read from stdin. Prints nothing on
/// stdout (Claude Code adds a `UserPromptSubmit` hook's stdout to the prompt).
/// With `watch`, it also starts `cairn watch` for the workspace when none runs.
pub(crate) fn hook_claude_code(ctx: &Ctx, extra_tools: &[String], watch: bool) -> Result<()> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| CliError::new(ErrorKind::Io, format!("cannot read the hook document: {e}")))?;
    let input: HookInput = serde_json::from_str(&text).map_err(|e| {
        CliError::new(
            ErrorKind::InvalidArgument,
            format!("the hook document on stdin is not what Claude Code sends: {e}"),
        )
    })?;
    let root = std::env::var_os("CLAUDE_PROJECT_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| input.cwd.clone())
        .unwrap_or_else(|| ctx.root.clone());
    let ctx = Ctx {
        root: std::path::absolute(&root).unwrap_or(root),
        ..ctx.clone()
    };
    let thread = session_thread(&input.session_id);
    if watch {
        if let Ok(ws) = ctx.open_workspace(true) {
            crate::watch::start_in_background(&ctx, &ws);
        }
    }
    match input.hook_event_name.as_str() {
        "UserPromptSubmit" => {
            let prompt = input.prompt.clone().unwrap_or_default();
            let o = open(&ctx, true)?;
            session(&o.threads, &thread)?;
            let options = AppendOptions {
                workspace: Some(o.ws.clone() as Arc<dyn Files>),
                key: Some(prompt_key(&input, &prompt)),
                ..AppendOptions::default()
            };
            let appended = o.threads.append(
                &thread,
                NewEntry::new(cairn_rewind::EntryKind::User, prompt),
                &options,
            )?;
            if let Some(e) = appended.checkpoint_error {
                return Err(CliError::new(
                    e.kind,
                    format!(
                        "the prompt was recorded, but its checkpoint failed: {}",
                        e.message
                    ),
                ));
            }
            Ok(())
        }
        "PreToolUse" => {
            let tool = input.tool_name.clone().unwrap_or_default();
            let changes_files = FILE_TOOLS.contains(&tool.as_str()) || extra_tools.contains(&tool);
            if !changes_files {
                return Ok(());
            }
            let label = input
                .tool_use_id
                .clone()
                .unwrap_or_else(|| format!("before-{tool}"));
            // Who is about to change files, for `cairn diff --attribute`.
            let mut who = serde_json::Map::new();
            who.insert("tool_name".into(), tool.clone().into());
            for (key, value) in [
                ("tool_use_id", &input.tool_use_id),
                ("agent_id", &input.agent_id),
                ("agent_type", &input.agent_type),
            ] {
                if let Some(v) = value {
                    who.insert(key.into(), v.clone().into());
                }
            }
            checkpoint(&ctx, &thread, CheckpointKind::Tool, &label, who)
        }
        "PreCompact" => checkpoint(
            &ctx,
            &thread,
            CheckpointKind::Compaction,
            "before-compaction",
            serde_json::Map::new(),
        ),
        // The end of a turn: the files as the agent left them. Not a checkpoint a rewind
        // restores (it names no entry), but the newest one of the thread, so the drift check of
        // a later rewind counts only what changed after the agent stopped (the user's edits,
        // another session's) as someone else's, and never the turn's own last tool call.
        "Stop" => checkpoint(
            &ctx,
            &thread,
            CheckpointKind::Manual,
            END_OF_TURN,
            serde_json::Map::new(),
        ),
        // SessionStart, PostToolUse and the rest: nothing a thread needs.
        _ => Ok(()),
    }
}

fn checkpoint(
    ctx: &Ctx,
    thread: &ThreadId,
    kind: CheckpointKind,
    label: &str,
    metadata: serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let o = open(ctx, true)?;
    session(&o.threads, thread)?;
    o.threads.checkpoint_as(
        thread,
        kind,
        label,
        &CheckpointOptions {
            workspace: Some(o.ws.clone() as Arc<dyn Files>),
            metadata,
            ..CheckpointOptions::default()
        },
    )?;
    Ok(())
}

/// The label of the checkpoint the `Stop` hook takes when a turn ends.
pub(crate) const END_OF_TURN: &str = "end-of-turn";

/// The hook events `cairn init claude-code` installs, with their matchers.
fn wanted_hooks(command: &str) -> Vec<(&'static str, Option<String>, String)> {
    vec![
        ("UserPromptSubmit", None, command.to_string()),
        (
            "PreToolUse",
            Some(FILE_TOOLS.join("|")),
            command.to_string(),
        ),
        ("PreCompact", None, command.to_string()),
        ("Stop", None, command.to_string()),
    ]
}

/// Whether a hook command is Cairn's (`… hook claude-code`).
fn is_ours(command: &str) -> bool {
    command.contains("cairn") && command.contains("hook claude-code")
}

/// What `cairn init claude-code --json` prints.
#[derive(Debug, Serialize)]
struct InitJson {
    #[serde(with = "cairn_store::relpath::os_path")]
    settings: PathBuf,
    command: String,
    /// Hook events that gained Cairn's hook.
    added: Vec<String>,
    /// Hook events whose Cairn hook was taken out.
    removed: Vec<String>,
    /// The file of the commands run after a rewind, and those commands (as they now stand).
    #[serde(with = "cairn_store::relpath::os_path")]
    cairn_config: PathBuf,
    on_rewind: Vec<String>,
    /// That file's content is trusted, so its commands run (issue 53: see [`crate::trust`]).
    trusted: bool,
    /// Why they do not, when they do not.
    #[serde(skip_serializing_if = "Option::is_none")]
    not_trusted: Option<String>,
}

/// The file beside Claude Code's settings where `--on-rewind` commands are kept.
const CAIRN_CONFIG: &str = crate::trust::CONFIG;

/// The `on_rewind` commands of a `cairn.json` (none when it is missing or unreadable).
fn on_rewind_commands(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .map(|v| crate::trust::commands_of(&v))
        .unwrap_or_default()
}

/// Adds `add` to (or with `remove`, clears) the `on_rewind` commands of `path`; returns them
/// as they now stand, and the bytes written when the file changed. Other keys of the file
/// are kept.
fn update_on_rewind(
    path: &Path,
    add: &[String],
    remove: bool,
) -> Result<(Vec<String>, Option<Vec<u8>>)> {
    let mut doc: serde_json::Value = match std::fs::read_to_string(path) {
        Ok(t) if !t.trim().is_empty() => serde_json::from_str(&t).map_err(|e| {
            CliError::new(
                ErrorKind::InvalidArgument,
                format!("{} is not valid JSON ({e}); fix it first", path.display()),
            )
            .with_path(path)
        })?,
        _ => serde_json::json!({}),
    };
    let Some(obj) = doc.as_object_mut() else {
        return Err(CliError::new(
            ErrorKind::InvalidArgument,
            format!("{} is not a JSON object; fix it first", path.display()),
        )
        .with_path(path));
    };
    let mut commands = on_rewind_commands(path);
    let before = commands.clone();
    if remove {
        commands.clear();
    }
    for c in add {
        if !commands.contains(c) {
            commands.push(c.clone());
        }
    }
    let mut written = None;
    if commands != before {
        obj.insert(
            "on_rewind".into(),
            serde_json::Value::Array(
                commands
                    .iter()
                    .map(|c| serde_json::json!({ "command": c, "timeout": 60 }))
                    .collect(),
            ),
        );
        written = Some(write_settings(path, &doc)?);
    }
    Ok((commands, written))
}

/// Runs the trusted `--on-rewind` commands of the project (`ROOT/.claude/cairn.json`) and of
/// the user (`~/.claude/cairn.json`) with `event` on stdin (issue 53: [`crate::trust::on_rewind`]
/// decides which); returns the files whose commands were not run, and why. A command that
/// fails or takes longer than 60 s is reported on stderr; the rewind stands either way.
pub(crate) fn run_on_rewind(root: &Path, event: &serde_json::Value) -> Vec<crate::trust::NotRun> {
    use std::io::Write as _;
    let (commands, not_run) = crate::trust::on_rewind(root);
    let input = event.to_string();
    for cmd in commands {
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .current_dir(root)
            .env("CAIRN_EVENT", "rewind_completed")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                eprintln!("cairn: the on-rewind command `{cmd}` could not start: {e}");
                continue;
            }
        };
        if let Some(mut stdin) = child.stdin.take() {
            // A command that does not read its input is fine.
            let _ = stdin.write_all(input.as_bytes());
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        match status {
            Some(s) if s.success() => {}
            Some(s) => eprintln!("cairn: the on-rewind command `{cmd}` failed ({s})"),
            None => {
                eprintln!("cairn: the on-rewind command `{cmd}` took over 60 s and was stopped")
            }
        }
    }
    not_run
}

/// `cairn init claude-code [--user] [--remove]`: merges Cairn's hooks into Claude Code's
/// settings (the project's `.claude/settings.json`, or the user's `~/.claude/settings.json`),
/// leaving every other setting and hook as it is; idempotent.
pub(crate) fn init_claude_code(
    ctx: &Ctx,
    user: bool,
    remove: bool,
    on_rewind: &[String],
    watch: bool,
) -> Result<()> {
    if remove && !on_rewind.is_empty() {
        return Err(CliError::usage(
            "--remove takes out every --on-rewind command; give one or the other",
        ));
    }
    let path = if user {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .ok_or_else(|| {
                CliError::new(
                    ErrorKind::InvalidArgument,
                    "HOME is not set: cannot find ~/.claude",
                )
            })?;
        PathBuf::from(home).join(".claude/settings.json")
    } else {
        ctx.root.join(".claude/settings.json")
    };
    let exe = std::env::current_exe()
        .map_err(|e| CliError::new(ErrorKind::Io, format!("cannot find the cairn binary: {e}")))?;
    let mut command = format!("{} hook claude-code", shell_quote(&exe));
    if watch {
        command.push_str(" --watch");
    }
    let mut settings: serde_json::Value = match std::fs::read_to_string(&path) {
        Ok(t) if t.trim().is_empty() => serde_json::json!({}),
        Ok(t) => serde_json::from_str(&t).map_err(|e| {
            CliError::new(
                ErrorKind::InvalidArgument,
                format!(
                    "{} is not valid JSON ({e}); fix it first, nothing was changed",
                    path.display()
                ),
            )
            .with_path(&path)
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::json!({}),
        Err(e) => {
            return Err(CliError::new(
                ErrorKind::of_io(&e),
                format!("cannot read {}: {e}", path.display()),
            )
            .with_path(&path))
        }
    };
    let (added, removed) = merge(&mut settings, &command, remove).map_err(|what| {
        CliError::new(
            ErrorKind::InvalidArgument,
            format!(
                "{}: {what}; fix it first, nothing was changed",
                path.display()
            ),
        )
        .with_path(&path)
    })?;
    if !added.is_empty() || !removed.is_empty() {
        write_settings(&path, &settings)?;
    }
    let cairn_config = path.with_file_name(CAIRN_CONFIG);
    let (on_rewind, not_trusted) = if remove || !on_rewind.is_empty() {
        init_on_rewind(ctx, &cairn_config, on_rewind, remove, user)?
    } else {
        let commands = on_rewind_commands(&cairn_config);
        let why = match crate::trust::Config::read(&cairn_config) {
            Ok(Some(c)) if !c.commands.is_empty() => {
                crate::trust::why_not(&c, &ctx.canonical_root(), user, &cairn_config)
            }
            _ => None,
        };
        (commands, why)
    };
    let json = InitJson {
        settings: path,
        command,
        added,
        removed,
        cairn_config,
        trusted: not_trusted.is_none(),
        not_trusted,
        on_rewind,
    };
    ctx.emit(&json, || {
        let mut out = String::new();
        if json.added.is_empty() && json.removed.is_empty() {
            out.push_str(&format!(
                "{} already {} Cairn's hooks; nothing changed\n",
                json.settings.display(),
                if remove { "lacks" } else { "has" }
            ));
        }
        for e in &json.added {
            out.push_str(&format!("added to {}: {e} -> {}\n", json.settings.display(), json.command));
        }
        for e in &json.removed {
            out.push_str(&format!("removed from {}: {e}\n", json.settings.display()));
        }
        for c in &json.on_rewind {
            out.push_str(&format!(
                "after each rewind (kept in {}): {c}\n",
                json.cairn_config.display()
            ));
        }
        if let Some(why) = &json.not_trusted {
            out.push_str(&format!("{why}\n"));
        }
        if !remove && !json.added.is_empty() {
            out.push_str(
                "Claude Code now checkpoints the files before every prompt and before every tool that \
                 changes files; see them with `cairn thread list` and `cairn list`\n",
            );
        }
        out
    })
}

/// `init`'s change to the `on_rewind` commands of `path`: the commands as they now stand, and
/// why they do not run, if they do not. The user typing the command vouches for the commands
/// they typed, and for the others only if the file was trusted before: the content written is
/// trusted when every command in it is one of those (issue 53).
fn init_on_rewind(
    ctx: &Ctx,
    path: &Path,
    add: &[String],
    remove: bool,
    user: bool,
) -> Result<(Vec<String>, Option<String>)> {
    use crate::trust::Config;
    let root = ctx.canonical_root();
    let before = Config::read(path).ok().flatten();
    let (commands, written) = update_on_rewind(path, add, remove)?;
    let trusted_before = before
        .as_ref()
        .filter(|b| crate::trust::why_not(b, &root, user, path).is_none())
        .map(|b| b.commands.clone())
        .unwrap_or_default();
    let vouched = commands
        .iter()
        .all(|c| add.contains(c) || trusted_before.contains(c));
    let now = match written {
        Some(bytes) => Some(Config::of(
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
            &bytes,
        )),
        None => before,
    };
    let Some(now) = now else {
        return Ok((commands, None));
    };
    if vouched {
        crate::trust::trust(&now)?;
    }
    Ok((commands, crate::trust::why_not(&now, &root, user, path)))
}

/// Adds (or with `remove`, takes out) Cairn's hooks in `settings`: the events that changed.
fn merge(
    settings: &mut serde_json::Value,
    command: &str,
    remove: bool,
) -> std::result::Result<(Vec<String>, Vec<String>), String> {
    let obj = settings
        .as_object_mut()
        .ok_or("the settings are not a JSON object")?;
    let hooks = obj
        .entry("hooks")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
        .ok_or("its \"hooks\" is not a JSON object")?;
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    for (event, matcher, cmd) in wanted_hooks(command) {
        let groups = hooks
            .entry(event)
            .or_insert_with(|| serde_json::json!([]))
            .as_array_mut()
            .ok_or_else(|| format!("its hooks.{event} is not a list"))?;
        let has_ours = |g: &serde_json::Value| {
            g["hooks"].as_array().is_some_and(|hs| {
                hs.iter()
                    .any(|h| h["command"].as_str().is_some_and(is_ours))
            })
        };
        if remove {
            let before = groups.len();
            for g in groups.iter_mut() {
                if let Some(hs) = g["hooks"].as_array_mut() {
                    hs.retain(|h| !h["command"].as_str().is_some_and(is_ours));
                }
            }
            groups.retain(|g| g["hooks"].as_array().is_none_or(|hs| !hs.is_empty()));
            if groups.len() != before {
                removed.push(event.to_string());
            }
        } else if groups.iter().any(has_ours) {
            // Ours, with another command (another binary, --watch given or not): made this one.
            let mut changed = false;
            for h in groups
                .iter_mut()
                .filter_map(|g| g["hooks"].as_array_mut())
                .flatten()
            {
                if h["command"]
                    .as_str()
                    .is_some_and(|c| is_ours(c) && c != cmd)
                {
                    h["command"] = serde_json::Value::String(cmd.clone());
                    changed = true;
                }
            }
            if changed {
                added.push(event.to_string());
            }
        } else {
            let mut group = serde_json::json!({
                "hooks": [{ "type": "command", "command": cmd, "timeout": 60 }]
            });
            if let Some(m) = matcher {
                group["matcher"] = serde_json::Value::String(m);
            }
            groups.push(group);
            added.push(event.to_string());
        }
    }
    hooks.retain(|_, v| v.as_array().is_none_or(|a| !a.is_empty()));
    Ok((added, removed))
}

/// Writes the settings through a temporary file renamed over the old one.
fn write_settings(path: &Path, settings: &serde_json::Value) -> Result<Vec<u8>> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| {
        CliError::new(
            ErrorKind::of_io(&e),
            format!("cannot create {}: {e}", dir.display()),
        )
        .with_path(dir)
    })?;
    let mut text = serde_json::to_string_pretty(settings)
        .map_err(|e| CliError::new(ErrorKind::Panic, format!("cannot encode the settings: {e}")))?;
    text.push('\n');
    let tmp = dir.join(format!(".settings.json.cairn-{}", std::process::id()));
    std::fs::write(&tmp, &text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map(|()| text.into_bytes())
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            CliError::new(
                ErrorKind::of_io(&e),
                format!("cannot write {}: {e}", path.display()),
            )
            .with_path(path)
        })
}

/// `path` as a shell would need it typed in a hook command.
pub(crate) fn shell_quote(path: &Path) -> String {
    let s = path.to_string_lossy();
    if s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
