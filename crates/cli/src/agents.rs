//! Cairn in the agents people run: `cairn hook AGENT`, run by the agent on its hook events,
//! `cairn init AGENT`, which installs those hooks in its settings, and the agent's half of a
//! rewind (where its conversation continues, `cairn resume`). What each agent is lives in
//! `cairn_agents`; this module acts on its events.

use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::threads::open;
use cairn_agents::{Agent, Event};
use cairn_rewind::{
    AppendOptions, CheckpointKind, CheckpointOptions, Files, NewEntry, ThreadId, Threads,
};
use cairn_store::{Classify, ErrorKind};
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The exit code of a hook that failed: the agent shows its stderr and goes on (2 would
/// block the prompt or the tool).
pub const HOOK_FAILED: i32 = 1;

impl From<cairn_agents::Error> for CliError {
    fn from(e: cairn_agents::Error) -> Self {
        let err = CliError::new(e.kind(), e.to_string());
        match e.path() {
            Some(p) => err.with_path(p),
            None => err,
        }
    }
}

/// The thread a session of `agent` records into: the one a rewind named for it (its
/// continued conversation), else its own, made on first use.
pub(crate) fn session_thread(
    threads: &Threads,
    agent: &dyn Agent,
    session_id: &str,
) -> Result<ThreadId> {
    let own = agent.thread_of(session_id);
    match threads.resolve(&own) {
        Ok(t) => return Ok(t),
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e.into()),
    }
    match threads.create_thread(
        Some(own.clone()),
        serde_json::json!({ "agent": agent.name() }),
    ) {
        Ok(_) => Ok(own),
        // Another hook of the same session made it meanwhile.
        Err(_) if threads.thread(&own).is_ok() => Ok(own),
        Err(e) => Err(e.into()),
    }
}

/// `cairn hook AGENT`: acts on one hook document read from stdin. Prints nothing on stdout
/// but a notice for the user (`{"systemMessage": ...}`; Claude Code adds other stdout of a
/// `UserPromptSubmit` hook to the prompt). With `watch`, it also starts `cairn watch` for the
/// workspace when none runs.
pub(crate) fn hook(
    ctx: &Ctx,
    agent: &dyn Agent,
    extra_tools: &[String],
    watch: bool,
) -> Result<()> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| CliError::new(ErrorKind::Io, format!("cannot read the hook document: {e}")))?;
    let hook = agent.read_hook(&text, extra_tools)?;
    let root = std::env::var_os("CLAUDE_PROJECT_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| hook.cwd.clone())
        .unwrap_or_else(|| ctx.root.clone());
    let ctx = Ctx {
        root: std::path::absolute(&root).unwrap_or(root),
        ..ctx.clone()
    };
    if watch {
        if let Ok(ws) = ctx.open_workspace(true) {
            crate::watch::start_in_background(&ctx, &ws);
        }
    }
    match hook.event {
        Event::Prompt { text, place, key } => {
            let o = open(&ctx, true)?;
            let thread = session_thread(&o.threads, agent, &hook.session_id)?;
            let options = AppendOptions {
                workspace: Some(o.ws.clone() as Arc<dyn Files>),
                key: Some(key),
                ..AppendOptions::default()
            };
            let appended = o.threads.append(
                &thread,
                NewEntry::user(text).with_metadata(place.into_metadata()),
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
        Event::BeforeTool { label, who } => checkpoint(
            &session_of(&ctx, agent, &hook.session_id)?,
            CheckpointKind::Tool,
            &label,
            who,
        ),
        Event::Compaction => checkpoint(
            &session_of(&ctx, agent, &hook.session_id)?,
            CheckpointKind::Compaction,
            "before-compaction",
            serde_json::Map::new(),
        ),
        // The end of a turn: the files as the agent left them. Not a checkpoint a rewind
        // restores (it names no entry), but the newest one of the thread, so the drift check of
        // a later rewind counts only what changed after the agent stopped (the user's edits,
        // another session's) as someone else's, and never the turn's own last tool call.
        Event::TurnEnd { place } => {
            let mut meta = serde_json::Map::new();
            if let Ok(v) = serde_json::to_value(&place) {
                meta.insert(cairn_agents::PLACE_KEY.into(), v);
            }
            // One opening of the workspace and its threads serves both.
            let opened = session_of(&ctx, agent, &hook.session_id)?;
            checkpoint(&opened, CheckpointKind::Manual, END_OF_TURN, meta)?;
            crate::own_rewind::follow(&opened.0, agent, &opened.1, &hook.session_id)
        }
        Event::SessionStart => {
            if let Some(notice) = crate::doctor::session_start_notice(&ctx) {
                println!("{}", serde_json::json!({ "systemMessage": notice }));
            }
            Ok(())
        }
        // PostToolUse, other tools and the rest: nothing a thread needs.
        Event::OtherTool | Event::Other => Ok(()),
    }
}

/// Opens the workspace and its threads, and finds the thread of the agent's session.
fn session_of(
    ctx: &Ctx,
    agent: &dyn Agent,
    session_id: &str,
) -> Result<(crate::threads::Opened, ThreadId)> {
    let o = open(ctx, true)?;
    let thread = session_thread(&o.threads, agent, session_id)?;
    Ok((o, thread))
}

fn checkpoint(
    (o, thread): &(crate::threads::Opened, ThreadId),
    kind: CheckpointKind,
    label: &str,
    metadata: serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
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
    /// What the agent needs before it runs the hooks (an untrusted hook, say), each with
    /// what to do; empty when it runs them as they are.
    notes: Vec<String>,
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
        written = Some(cairn_agents::settings::write(path, &doc)?);
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

/// `cairn init AGENT [--user] [--remove]`: merges Cairn's hooks into the agent's settings
/// (the project's, or with `user` the user's: for Claude Code `.claude/settings.json`),
/// leaving every other setting and hook as it is; idempotent. Then says what the agent needs
/// before it runs them, if anything ([`Agent::check_install`]).
pub(crate) fn init(
    ctx: &Ctx,
    agent: &dyn Agent,
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
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let path = match (user, &home) {
        (true, None) => {
            return Err(CliError::new(
                ErrorKind::InvalidArgument,
                format!(
                    "HOME is not set: cannot find {}'s user settings",
                    agent.name()
                ),
            ))
        }
        (true, Some(home)) => agent.user_settings(home),
        (false, _) => agent.project_settings(&ctx.root),
    };
    let exe = std::env::current_exe()
        .map_err(|e| CliError::new(ErrorKind::Io, format!("cannot find the cairn binary: {e}")))?;
    let mut command = format!("{} hook {}", shell_quote(&exe), agent.name());
    if watch {
        command.push_str(" --watch");
    }
    let mut settings = cairn_agents::settings::read(&path)?;
    let cairn_agents::settings::Changes { added, removed } = agent
        .install(&mut settings, &command, remove)
        .map_err(|what| {
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
        cairn_agents::settings::write(&path, &settings)?;
    }
    let notes = if remove {
        Vec::new()
    } else {
        agent.check_install(&path, &command)
    };
    // The after-rewind commands are Cairn's, one file whichever agent wrote the thread.
    let cairn_config = match (user, &home) {
        (true, Some(home)) => home.join(".claude"),
        _ => ctx.root.join(".claude"),
    }
    .join(CAIRN_CONFIG);
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
        notes,
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
            out.push_str(&format!(
                "added to {}: {e} -> {}\n",
                json.settings.display(),
                json.command
            ));
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
        for n in &json.notes {
            out.push_str(&format!("{n}\n"));
        }
        if !remove && !json.added.is_empty() {
            // Until the agent runs the hooks (the notes above say what it needs), it does not.
            let when = if json.notes.is_empty() {
                "now checkpoints"
            } else {
                "will checkpoint, once it runs the hooks (see above),"
            };
            out.push_str(&format!(
                "{} {when} the files before every prompt and before every tool that \
                 changes files; see them with `cairn thread list` and `cairn list`\n",
                agent.display_name()
            ));
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

pub(crate) use cairn_agents::rewind::Half as AgentHalf;

/// Prepares the agent's half of the rewind `plan` (a dry run's report) of `thread`
/// ([`cairn_agents::rewind::prepare_rewind`]).
pub(crate) fn prepare_rewind(
    threads: &Threads,
    thread: &ThreadId,
    plan: &cairn_rewind::RewindReport,
    memory: bool,
) -> Result<AgentHalf> {
    Ok(cairn_agents::rewind::prepare_rewind(
        threads, thread, plan, memory,
    )?)
}

/// Takes the agent's own conversation to the point `report`'s rewind kept in its journal, for
/// an agent that keeps one history; nothing for the others. A failure is said on stderr and
/// left for `cairn resume`, which settles again before it continues.
pub(crate) fn settle(report: &cairn_rewind::RewindReport) {
    if let Err(e) = cairn_agents::rewind::settle(report) {
        eprintln!(
            "cairn: the agent's conversation was not taken back yet ({e}); `cairn resume {}` tries again",
            report.thread_id
        );
    }
}

/// What a rewind of an agent's thread says of the agent's conversation and of what no rewind
/// takes back, for people.
pub(crate) fn rewind_words(half: &AgentHalf, report: &cairn_rewind::RewindReport) -> String {
    let Some(agent) = half.agent else {
        return String::new();
    };
    let mut out = String::new();
    // A plan carries none: the one prepared for it is what it would keep.
    let cont = cairn_agents::rewind::continuation_of(report).or_else(|| {
        half.continuation
            .as_ref()
            .and_then(|c| serde_json::from_value(c.data.clone()).ok())
    });
    let thread = &report.thread_id;
    let name = agent.display_name();
    match (&cont, &half.not_prepared) {
        (Some(c), _) => {
            let how = match (&c.at, &c.session_id) {
                (Some(at), Some(new)) => format!(
                    "continues from message {at} of session {} in a new session {new}",
                    c.from_session
                ),
                (None, Some(new)) => format!("starts anew in session {new}"),
                (Some(at), None) => format!("session {} taken back to before {at}", c.from_session),
                (None, None) => format!("continues session {} as it stands", c.from_session),
            };
            let chosen = if report.dry_run && c.session_id.is_some() {
                " (the rewind chooses its own new session)"
            } else {
                ""
            };
            out.push_str(&format!(
                "  {name}'s conversation: {how}{chosen}: `cairn resume {thread}` runs `{}`\n",
                c.argv.join(" ")
            ));
        }
        (None, Some(why)) => out.push_str(&format!(
            "  {name}'s conversation: not prepared ({why}); it still holds the turns taken off: \
             continue it by hand and rewind it there\n"
        )),
        (None, None) => out.push_str(&format!(
            "  {name}'s conversation: left as it is (a rewind of the files only)\n"
        )),
    }
    out.push_str(
        "  not undone: what the turns did outside the workspace's files (network calls, databases, processes they started)\n",
    );
    out
}

/// `cairn resume THREAD [-- ARGS...]`: runs the agent's command that continues the thread's
/// conversation: from the newest rewind's point while nothing was recorded after it, else
/// from where the thread stands. `args` go after the agent's own.
pub(crate) fn resume(ctx: &Ctx, name: &str, args: &[String]) -> Result<()> {
    let o = open(ctx, false)?;
    let thread = crate::threads::thread_named(&o.threads, name)?;
    let Some(agent) = cairn_agents::of_thread(&thread.metadata) else {
        return Err(CliError::new(
            ErrorKind::Validation,
            format!(
                "thread {} was not written by an agent Cairn knows (its metadata names none): \
                 there is no conversation to continue",
                thread.id
            ),
        ));
    };
    let entries = o.threads.entries(&thread.id, false)?;
    let rewound = o
        .threads
        .rewinds(&thread.id)?
        .into_iter()
        .filter(|r| r.state == "completed")
        .max_by_key(|r| r.created_ms);
    let since_rewind = |created: i64| {
        entries
            .iter()
            .any(|e| e.kind == cairn_rewind::EntryKind::User && e.created_ms >= created)
    };
    let cont = match rewound {
        Some(r) if !since_rewind(r.created_ms) => r
            .continuation
            .and_then(|v| serde_json::from_value::<cairn_agents::Continue>(v).ok()),
        _ => None,
    };
    let cont = match cont {
        Some(c) => c,
        None => match cairn_agents::prepare(agent, &[], &entries)? {
            Some((c, _)) => c,
            None => {
                return Err(CliError::new(
                    ErrorKind::NotFound,
                    format!(
                        "no entry of thread {} says where it sits in {}'s conversation (recorded before \
                         Cairn kept it): continue it with the agent itself",
                        thread.id,
                        agent.name()
                    ),
                ))
            }
        },
    };
    agent.settle(&cont)?;
    // CAIRN_CLAUDE (CAIRN_<PROGRAM>) names the agent's program when it is not on PATH.
    let env = format!(
        "CAIRN_{}",
        cont.argv[0].to_ascii_uppercase().replace('-', "_")
    );
    let program = std::env::var_os(&env)
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| cont.argv[0].clone().into());
    let dir = cont
        .cwd
        .clone()
        .unwrap_or_else(|| o.ws.root().to_path_buf());
    let argv = agent.resume_argv(&cont, args);
    let mut cmd = std::process::Command::new(&program);
    cmd.args(argv.iter().skip(1)).current_dir(&dir);
    if !ctx.json {
        eprintln!(
            "cairn: continuing thread {} with: {}",
            thread.id,
            argv.join(" ")
        );
    }
    drop(o);
    use std::os::unix::process::CommandExt as _;
    let e = cmd.exec();
    Err(CliError::new(
        ErrorKind::of_io(&e),
        format!(
            "cannot run {} in {}: {e}; install it or set {env} to its path",
            std::path::Path::new(&program).display(),
            dir.display()
        ),
    ))
}
