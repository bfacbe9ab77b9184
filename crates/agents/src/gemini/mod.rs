//! Gemini CLI (`@google/gemini-cli`): its hooks (`.gemini/settings.json`), its hook documents,
//! and its session file, where Cairn finds each prompt's message and takes the conversation
//! back the way Gemini CLI's own `/rewind` does.
//!
//! Gemini CLI has no command or protocol call that rewinds a session to a message (`/rewind`
//! is an interactive dialog; ACP's `session/fork` copies a whole session). Its session file
//! (`~/.gemini/tmp/<project>/chats/session-*.jsonl`) is a log of records, and `/rewind`
//! appends `{"$rewindTo": "<id of the first message taken off>"}` to it. A rewind of Cairn's
//! thread does the same ([`Agent::settle`]), then `gemini --resume <session>` continues the
//! same session from there: the rewind takes the session back rather than forking it.

pub mod session;

use crate::error::{Error, Result};
use crate::settings::{self, Changes, Wanted};
use crate::{Agent, Continue, Event, Hook, Place};
use cairn_rewind::ThreadId;
use serde::Deserialize;
use session::Session;
use std::path::{Path, PathBuf};

/// The agent's name.
pub const NAME: &str = "gemini";

/// The built-in tools whose call may change files: a checkpoint is taken before each (and
/// before every MCP tool, named `mcp_<server>_<tool>`).
pub const FILE_TOOLS: &[&str] = &["write_file", "replace", "run_shell_command"];

/// A hook's timeout in Gemini CLI's settings, in milliseconds (Claude Code's are seconds).
pub const TIMEOUT_MS: u64 = 60_000;

/// The name Cairn's hooks carry in Gemini CLI's settings (`gemini hooks`, `hooksConfig.disabled`).
pub const HOOK_NAME: &str = "cairn";

/// The hook events Cairn installs in Gemini CLI's settings, with their matchers.
pub fn wanted() -> Vec<Wanted> {
    let all = |event| Wanted {
        event,
        matcher: None,
    };
    vec![
        all("SessionStart"),
        all("BeforeAgent"),
        Wanted {
            event: "BeforeTool",
            // A regular expression tested against the tool's name.
            matcher: Some(format!("^({}|mcp_.+)$", FILE_TOOLS.join("|"))),
        },
        // Not PreCompress: Gemini CLI 0.61 fires it before every model request, compressing
        // or not, and a compression changes no file.
        all("AfterAgent"),
    ]
}

/// Gemini CLI, Google's command-line coding agent.
#[derive(Debug, Clone, Copy, Default)]
pub struct GeminiCli;

/// The hook document Gemini CLI writes on stdin (the fields Cairn reads).
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
    tool_input: Option<serde_json::Value>,
    #[serde(default)]
    timestamp: Option<String>,
}

impl HookInput {
    fn place(&self) -> Place {
        Place {
            agent: NAME.to_string(),
            session_id: self.session_id.clone(),
            transcript: self
                .transcript_path
                .clone()
                .filter(|p| !p.as_os_str().is_empty()),
            cwd: self.cwd.clone(),
            ..Place::default()
        }
    }
}

/// The session file a place names, read.
fn session_of(place: &Place) -> Result<(PathBuf, Session)> {
    let path = place.transcript.clone().ok_or_else(|| {
        Error::NoPlace(format!(
            "the hook of Gemini CLI session {} named no session file",
            place.session_id
        ))
    })?;
    let s = Session::read(&path)?;
    Ok((path, s))
}

/// The id of the message of the prompt at `place` in its session file.
fn prompt_message(place: &Place) -> Result<String> {
    let (path, s) = session_of(place)?;
    s.prompt_after(place.offset.unwrap_or(0))
        .map(str::to_string)
        .ok_or_else(|| Error::Transcript {
            path,
            reason: format!(
                "Gemini CLI's session file does not hold a prompt of session {} after byte {}",
                place.session_id,
                place.offset.unwrap_or(0)
            ),
        })
}

/// Gemini CLI's home (`$GEMINI_CLI_HOME`, else `$HOME`), where `.gemini` is.
fn gemini_home() -> Option<PathBuf> {
    ["GEMINI_CLI_HOME", "HOME"]
        .iter()
        .find_map(|v| std::env::var_os(v).filter(|h| !h.is_empty()))
        .map(PathBuf::from)
}

/// The session file of `session_id` under Gemini CLI's home (`~/.gemini/tmp/*/chats/`).
pub fn find_session_file(home: &Path, session_id: &str) -> Option<PathBuf> {
    let short: String = session_id.chars().take(8).collect();
    let projects = std::fs::read_dir(home.join(".gemini/tmp")).ok()?;
    let mut found = Vec::new();
    for project in projects.flatten() {
        let Ok(chats) = std::fs::read_dir(project.path().join("chats")) else {
            continue;
        };
        for f in chats.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.starts_with("session-") && name.ends_with(&format!("-{short}.jsonl")) {
                found.push(f.path());
            }
        }
    }
    // A resumed run appends to the session's file and may leave another one holding only the
    // session's header: the one with the conversation is the session's.
    found
        .into_iter()
        .filter_map(|p| Session::read(&p).ok().map(|s| (p, s)))
        .filter(|(_, s)| s.session_id.as_deref() == Some(session_id))
        .max_by_key(|(_, s)| s.messages().len())
        .map(|(p, _)| p)
}

/// What stands between Gemini CLI and the hooks in `settings` (a settings file of the
/// workspace `root`, when it is a project's), with `home` as Gemini CLI's home.
pub fn check_install_at(settings: &Path, root: Option<&Path>, home: Option<&Path>) -> Vec<String> {
    let mut notes = Vec::new();
    let user = home.map(|h| h.join(".gemini/settings.json"));
    let files: Vec<&Path> = [Some(settings), user.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    for f in &files {
        let Ok(s) = settings::read(f) else { continue };
        if s["hooksConfig"]["enabled"] == serde_json::Value::Bool(false) {
            notes.push(format!(
                "Gemini CLI runs no hooks: {} sets hooksConfig.enabled to false; set it to true",
                f.display()
            ));
        }
        if let Some(off) = s["hooksConfig"]["disabled"].as_array() {
            if off.iter().any(|n| n.as_str() == Some(HOOK_NAME)) {
                notes.push(format!(
                    "Gemini CLI skips Cairn's hooks: {} lists \"{HOOK_NAME}\" in hooksConfig.disabled; take it out",
                    f.display()
                ));
            }
        }
    }
    let trust_on = user
        .as_deref()
        .and_then(|u| settings::read(u).ok())
        .is_none_or(|s| s["security"]["folderTrust"]["enabled"] != serde_json::Value::Bool(false));
    if let (true, Some(root)) = (trust_on, root) {
        let file = std::env::var_os("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(".gemini/trustedFolders.json")));
        let rules = file
            .as_deref()
            .and_then(|f| settings::read(f).ok())
            .unwrap_or_default();
        if !folder_trusted(&rules, root) {
            notes.push(format!(
                "Gemini CLI runs no hooks in a folder it does not trust (security.folderTrust): trust {} \
                 (start `gemini` there and choose \"Trust folder\", or /permissions), then check with `gemini hooks list`",
                root.display()
            ));
        }
    }
    notes
}

/// Whether Gemini CLI's trusted folders (`{"PATH": "TRUST_FOLDER" | "TRUST_PARENT" |
/// "DO_NOT_TRUST"}`) trust `root`: the rule nearest above it decides.
pub fn folder_trusted(rules: &serde_json::Value, root: &Path) -> bool {
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut best: Option<(usize, bool)> = None;
    for (path, level) in rules.as_object().into_iter().flatten() {
        let path = PathBuf::from(path);
        let (dir, trusted) = match level.as_str() {
            Some("TRUST_FOLDER") => (path, true),
            Some("TRUST_PARENT") => match path.parent() {
                Some(p) => (p.to_path_buf(), true),
                None => continue,
            },
            Some("DO_NOT_TRUST") => (path, false),
            _ => continue,
        };
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        if root.starts_with(&dir) {
            let depth = dir.components().count();
            if best.is_none_or(|(d, _)| depth >= d) {
                best = Some((depth, trusted));
            }
        }
    }
    best.is_some_and(|(_, t)| t)
}

impl Agent for GeminiCli {
    fn name(&self) -> &'static str {
        NAME
    }

    fn display_name(&self) -> &'static str {
        "Gemini CLI"
    }

    fn project_settings(&self, root: &Path) -> PathBuf {
        root.join(".gemini/settings.json")
    }

    fn user_settings(&self, home: &Path) -> PathBuf {
        home.join(".gemini/settings.json")
    }

    /// Hooks off (`hooksConfig`), and a workspace Gemini CLI does not trust: it runs no hook
    /// there, the user's included.
    fn check_install(&self, settings: &Path, command: &str) -> Vec<String> {
        let _ = command;
        let home = gemini_home();
        // A project's settings are ROOT/.gemini/settings.json; the user's are not a workspace.
        let root = settings
            .parent()
            .and_then(Path::parent)
            .filter(|r| home.as_deref() != Some(*r));
        check_install_at(settings, root, home.as_deref())
    }

    /// Gemini CLI keeps one history per session: a rewind takes the same session back.
    fn forks(&self) -> bool {
        false
    }

    /// Appends `{"$rewindTo": at}` to the session's file, as `/rewind` does, unless its
    /// conversation no longer holds that message (done already, or rewound past it).
    fn settle(&self, cont: &Continue) -> Result<()> {
        let Some(at) = &cont.at else { return Ok(()) };
        let home = gemini_home().ok_or_else(|| {
            Error::NoPlace(
                "neither GEMINI_CLI_HOME nor HOME is set: cannot find Gemini CLI's sessions".into(),
            )
        })?;
        let path = find_session_file(&home, &cont.from_session).ok_or_else(|| {
            Error::NoPlace(format!(
                "no session file of Gemini CLI session {} under {}",
                cont.from_session,
                home.join(".gemini/tmp").display()
            ))
        })?;
        Session::rewind_to(&path, at)
    }

    /// `gemini-` and the session id.
    fn thread_of(&self, session_id: &str) -> ThreadId {
        crate::session_thread("gemini", session_id)
    }

    fn read_hook(&self, doc: &str, extra_tools: &[String]) -> Result<Hook> {
        let input: HookInput = serde_json::from_str(doc).map_err(|e| Error::HookDocument {
            agent: "Gemini CLI",
            reason: e.to_string(),
        })?;
        let event = match input.hook_event_name.as_str() {
            "BeforeAgent" => {
                let text = input.prompt.clone().unwrap_or_default();
                let place = input.place();
                // The prompt's message is written after this hook: past this length.
                let len = place
                    .transcript
                    .as_deref()
                    .and_then(|p| std::fs::metadata(p).ok())
                    .map_or(0, |m| m.len());
                Event::Prompt {
                    key: crate::prompt_key("gemini", &input.session_id, &text, len),
                    text,
                    place: Place {
                        offset: Some(len),
                        ..place
                    },
                }
            }
            "BeforeTool" => {
                let tool = input.tool_name.clone().unwrap_or_default();
                if FILE_TOOLS.contains(&tool.as_str())
                    || tool.starts_with("mcp_")
                    || extra_tools.contains(&tool)
                {
                    let mut who = serde_json::Map::new();
                    who.insert("tool_name".into(), tool.clone().into());
                    let args = input.tool_input.as_ref();
                    for key in ["file_path", "command"] {
                        if let Some(v) = args.and_then(|a| a.get(key)) {
                            who.insert(key.into(), v.clone());
                        }
                    }
                    if let Some(t) = &input.timestamp {
                        who.insert("timestamp".into(), t.clone().into());
                    }
                    Event::BeforeTool {
                        label: format!("before-{tool}"),
                        who,
                    }
                } else {
                    Event::OtherTool
                }
            }
            "PreCompress" => Event::Compaction,
            "AfterAgent" => {
                let place = input.place();
                let last = session_of(&place)
                    .ok()
                    .and_then(|(_, s)| s.messages().last().map(|m| m.id.clone()));
                Event::TurnEnd {
                    place: Place { last, ..place },
                }
            }
            "SessionStart" => Event::SessionStart,
            _ => Event::Other,
        };
        Ok(Hook {
            session_id: input.session_id,
            cwd: input.cwd,
            event,
        })
    }

    fn install(
        &self,
        settings: &mut serde_json::Value,
        command: &str,
        remove: bool,
    ) -> std::result::Result<Changes, String> {
        let changes =
            settings::merge_hooks(settings, &wanted(), command, remove, |c| self.is_ours(c))?;
        // Gemini CLI's timeouts are milliseconds; its hooks are known by name.
        for group in settings["hooks"]
            .as_object_mut()
            .into_iter()
            .flat_map(|h| h.values_mut())
            .filter_map(|g| g.as_array_mut())
            .flatten()
        {
            for h in group["hooks"].as_array_mut().into_iter().flatten() {
                if h["command"].as_str().is_some_and(|c| self.is_ours(c)) {
                    h["timeout"] = TIMEOUT_MS.into();
                    h["name"] = HOOK_NAME.into();
                }
            }
        }
        Ok(changes)
    }

    /// The id of the prompt's own message: `$rewindTo` takes it and everything after it off.
    fn before(&self, place: &Place) -> Result<Option<String>> {
        prompt_message(place).map(Some)
    }

    /// The newest earlier prompt whose message the session still holds: after the user's own
    /// `/rewind`, the prompts it took off are not followed.
    fn follows(&self, place: &Place, earlier: &[Place]) -> Result<Option<usize>> {
        let (_, s) = session_of(place)?;
        let held: std::collections::HashSet<String> =
            s.messages().iter().map(|m| m.id.clone()).collect();
        for (i, e) in earlier.iter().enumerate().rev() {
            let same_file = e.transcript.is_none() || e.transcript == place.transcript;
            let id = if same_file {
                s.prompt_after(e.offset.unwrap_or(0)).map(str::to_string)
            } else {
                prompt_message(e).ok()
            };
            if id.is_some_and(|id| held.contains(&id)) {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// `gemini --resume SESSION`: the same session, taken back by [`Agent::settle`] first.
    fn continue_argv(
        &self,
        session_id: &str,
        at: Option<&str>,
        new_session: Option<&str>,
    ) -> Vec<String> {
        let _ = at;
        match new_session {
            Some(new) => vec!["gemini".into(), "--session-id".into(), new.into()],
            None => vec!["gemini".into(), "--resume".into(), session_id.into()],
        }
    }
}
