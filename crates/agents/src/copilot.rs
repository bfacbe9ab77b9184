//! GitHub Copilot CLI (`@github/copilot`): its hooks (`.github/hooks/cairn.json`, a file of
//! Cairn's own; with `--user`, `~/.copilot/hooks/cairn.json`) and its hook documents.
//!
//! Cairn's hooks use the events' PascalCase names, for which Copilot CLI sends the
//! documents with snake_case fields (`session_id`, `prompt`, `tool_name`, ...), as Claude Code
//! does. Copilot CLI keeps each session in `~/.copilot/session-state/<session>/events.jsonl`
//! and continues one with `copilot --resume=<session>`; it has no command that continues a
//! session from an earlier message (its `/rewind` takes back the last turn, in the
//! interactive session), so a rewind of Cairn's thread takes the files back and says that
//! Copilot CLI's conversation still holds the turns taken off.

use crate::error::{Error, Result};
use crate::settings::Changes;
use crate::{Agent, Event, Hook, Place};
use cairn_rewind::ThreadId;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The agent's name.
pub const NAME: &str = "copilot";

/// The tools whose call may change files, by the names Copilot CLI gives them in the
/// PascalCase hooks' documents (`create` is `Write` there) and in its own.
pub const FILE_TOOLS: &[&str] = &[
    "Write",
    "Edit",
    "MultiEdit",
    "Bash",
    "create",
    "edit",
    "bash",
    "powershell",
];

/// The hook events Cairn installs (Copilot CLI's PascalCase names).
pub const EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PreCompact",
    "Stop",
];

/// A hook's timeout, in seconds.
pub const TIMEOUT_SEC: u64 = 60;

/// GitHub Copilot CLI.
#[derive(Debug, Clone, Copy, Default)]
pub struct CopilotCli;

/// The hook document Copilot CLI writes on stdin for a PascalCase event (the fields Cairn
/// reads).
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
}

/// Copilot CLI's directory (`$COPILOT_HOME`, else `$HOME/.copilot`).
fn copilot_home() -> Option<PathBuf> {
    std::env::var_os("COPILOT_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".copilot"))
        })
}

/// A JSON file Copilot CLI writes with `//` comment lines (its `config.json`), read; `{}` when
/// it is missing or unreadable.
pub fn read_jsonc(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let json: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    serde_json::from_str(&json).unwrap_or_else(|_| serde_json::json!({}))
}

/// What stands between Copilot CLI and the hooks of the workspace `root` (`None` for the
/// user's hooks), with `home` as Copilot CLI's directory (`~/.copilot`).
pub fn check_install_at(root: Option<&Path>, home: Option<&Path>) -> Vec<String> {
    let mut notes = Vec::new();
    let Some(home) = home else { return notes };
    let settings = home.join("settings.json");
    if read_jsonc(&settings)["disableAllHooks"] == serde_json::Value::Bool(true) {
        notes.push(format!(
            "GitHub Copilot CLI runs no hooks: {} sets disableAllHooks; set it to false",
            settings.display()
        ));
    }
    if let Some(root) = root {
        let config = home.join("config.json");
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        let trusted = read_jsonc(&config)["trustedFolders"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str())
            .any(|f| root.starts_with(std::fs::canonicalize(f).unwrap_or_else(|_| f.into())));
        if !trusted {
            notes.push(format!(
                "GitHub Copilot CLI loads a repository's hooks only in a folder you trust, and skips them \
                 without a word otherwise: start `copilot` in {} and trust the folder (kept in {} \
                 trustedFolders); --trust-folder trusts it for one new -p session only",
                root.display(),
                config.display()
            ));
        }
    }
    notes
}

impl Agent for CopilotCli {
    fn name(&self) -> &'static str {
        NAME
    }

    fn display_name(&self) -> &'static str {
        "GitHub Copilot CLI"
    }

    fn project_settings(&self, root: &Path) -> PathBuf {
        root.join(".github/hooks/cairn.json")
    }

    fn user_settings(&self, home: &Path) -> PathBuf {
        home.join(".copilot/hooks/cairn.json")
    }

    /// An untrusted folder (Copilot CLI skips its hooks without a word) and
    /// `disableAllHooks`.
    fn check_install(&self, settings: &Path, command: &str) -> Vec<String> {
        let _ = command;
        let home = copilot_home();
        // A project's hooks are ROOT/.github/hooks/cairn.json; the user's are in Copilot's home.
        let root = settings
            .parent()
            .and_then(Path::parent)
            .and_then(Path::parent)
            .filter(|_| home.as_deref().is_none_or(|h| !settings.starts_with(h)));
        check_install_at(root, home.as_deref())
    }

    /// `copilot-` and the session id.
    fn thread_of(&self, session_id: &str) -> ThreadId {
        crate::session_thread("copilot", session_id)
    }

    fn read_hook(&self, doc: &str, extra_tools: &[String]) -> Result<Hook> {
        let input: HookInput = serde_json::from_str(doc).map_err(|e| Error::HookDocument {
            agent: "GitHub Copilot CLI",
            reason: e.to_string(),
        })?;
        // The prompt's document names no transcript: it is the session's events.jsonl.
        let transcript = input.transcript_path.clone().or_else(|| {
            copilot_home().map(|h| {
                h.join("session-state")
                    .join(&input.session_id)
                    .join("events.jsonl")
            })
        });
        let place = Place {
            agent: NAME.to_string(),
            session_id: input.session_id.clone(),
            transcript: transcript.clone(),
            cwd: input.cwd.clone(),
            ..Place::default()
        };
        let event = match input.hook_event_name.as_str() {
            "UserPromptSubmit" => {
                let text = input.prompt.clone().unwrap_or_default();
                let len = transcript
                    .as_deref()
                    .and_then(|p| std::fs::metadata(p).ok())
                    .map_or(0, |m| m.len());
                Event::Prompt {
                    key: crate::prompt_key("copilot", &input.session_id, &text, len),
                    text,
                    place: Place {
                        offset: Some(len),
                        ..place
                    },
                }
            }
            "PreToolUse" => {
                let tool = input.tool_name.clone().unwrap_or_default();
                if FILE_TOOLS.contains(&tool.as_str()) || extra_tools.contains(&tool) {
                    let mut who = serde_json::Map::new();
                    who.insert("tool_name".into(), tool.clone().into());
                    let args = input.tool_input.as_ref();
                    for key in ["path", "file_path", "command"] {
                        if let Some(v) = args.and_then(|a| a.get(key)) {
                            who.insert(key.into(), v.clone());
                        }
                    }
                    Event::BeforeTool {
                        label: format!("before-{tool}"),
                        who,
                    }
                } else {
                    Event::OtherTool
                }
            }
            "PreCompact" => Event::Compaction,
            "Stop" => Event::TurnEnd { place },
            "SessionStart" => Event::SessionStart,
            _ => Event::Other,
        };
        Ok(Hook {
            session_id: input.session_id,
            cwd: input.cwd,
            event,
        })
    }

    /// Copilot CLI's hooks file: `{"version": 1, "hooks": {EVENT: [{"type": "command",
    /// "bash": COMMAND, "timeoutSec": 60}]}}`, every hook of an event in one list.
    fn install(
        &self,
        settings: &mut serde_json::Value,
        command: &str,
        remove: bool,
    ) -> std::result::Result<Changes, String> {
        let obj = settings
            .as_object_mut()
            .ok_or("the hooks file is not a JSON object")?;
        obj.entry("version").or_insert_with(|| 1.into());
        let hooks = obj
            .entry("hooks")
            .or_insert_with(|| serde_json::json!({}))
            .as_object_mut()
            .ok_or("its \"hooks\" is not a JSON object")?;
        let ours = |h: &serde_json::Value| h["bash"].as_str().is_some_and(|c| self.is_ours(c));
        let mut changes = Changes::default();
        for &event in EVENTS {
            let list = hooks
                .entry(event)
                .or_insert_with(|| serde_json::json!([]))
                .as_array_mut()
                .ok_or_else(|| format!("its hooks.{event} is not a list"))?;
            if remove {
                let before = list.len();
                list.retain(|h| !ours(h));
                if list.len() != before {
                    changes.removed.push(event.to_string());
                }
            } else if let Some(h) = list.iter_mut().find(|h| ours(h)) {
                if h["bash"].as_str() != Some(command) {
                    h["bash"] = command.into();
                    changes.added.push(event.to_string());
                }
            } else {
                list.push(serde_json::json!({
                    "type": "command", "bash": command, "timeoutSec": TIMEOUT_SEC,
                }));
                changes.added.push(event.to_string());
            }
        }
        hooks.retain(|_, v| v.as_array().is_none_or(|a| !a.is_empty()));
        Ok(changes)
    }

    /// Copilot CLI cannot continue a session from an earlier message.
    fn before(&self, place: &Place) -> Result<Option<String>> {
        Err(Error::NoPlace(format!(
            "GitHub Copilot CLI has no command that continues session {} from an earlier message \
             (its /rewind takes back the last turn, in the interactive session)",
            place.session_id
        )))
    }

    /// `copilot --resume=SESSION`: the session as it stands.
    fn continue_argv(
        &self,
        session_id: &str,
        at: Option<&str>,
        new_session: Option<&str>,
    ) -> Vec<String> {
        let _ = at;
        match new_session {
            Some(new) => vec!["copilot".into(), "--session-id".into(), new.into()],
            None => vec!["copilot".into(), format!("--resume={session_id}")],
        }
    }
}
