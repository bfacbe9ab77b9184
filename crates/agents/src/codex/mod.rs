//! Codex CLI: its hooks (`.codex/hooks.json`, Claude-Code-shaped), the trust Codex needs
//! before it runs one, its hook documents (each names the turn: Codex's id of a prompt), and
//! its own revert of a conversation (`thread/revert` over `codex app-server`), which takes the
//! same session back rather than forking a new one.

pub mod app_server;

use crate::error::{Error, Result};
use crate::settings::{self, Changes, Wanted};
use crate::{Agent, Continue, Event, Hook, Place};
use app_server::AppServer;
use cairn_rewind::ThreadId;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The agent's name.
pub const NAME: &str = "codex";

/// The tools whose call may change files: a checkpoint is taken before each (and before every
/// MCP tool, `mcp__SERVER__TOOL`). Codex names its shell tool `Bash` in hooks.
pub const FILE_TOOLS: &[&str] = &["apply_patch", "Bash"];

/// The `PreToolUse` matcher (a regular expression over the tool's name).
pub const TOOL_MATCHER: &str = "^(apply_patch|Bash|mcp__.*)$";

/// The hook events Cairn installs in Codex's hooks, with their matchers.
pub fn wanted() -> Vec<Wanted> {
    let all = |event| Wanted {
        event,
        matcher: None,
    };
    vec![
        all("SessionStart"),
        all("UserPromptSubmit"),
        Wanted {
            event: "PreToolUse",
            matcher: Some(TOOL_MATCHER.to_string()),
        },
        all("PreCompact"),
        all("Stop"),
    ]
}

/// The Codex program: `$CAIRN_CODEX` when set, else `codex` (found on PATH).
pub fn program() -> PathBuf {
    std::env::var_os("CAIRN_CODEX")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("codex"), PathBuf::from)
}

/// Codex CLI, OpenAI's command-line coding agent.
#[derive(Debug, Clone, Copy, Default)]
pub struct Codex;

/// The hook document Codex writes on stdin (the fields Cairn reads).
#[derive(Debug, Deserialize)]
struct HookInput {
    session_id: String,
    /// The turn: Codex's id of the prompt that started it (absent on `SessionStart`).
    #[serde(default)]
    turn_id: Option<String>,
    /// The session's rollout file.
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
}

impl HookInput {
    fn place(&self) -> Place {
        Place {
            agent: NAME.to_string(),
            session_id: self.session_id.clone(),
            transcript: self.transcript_path.clone(),
            cwd: self.cwd.clone(),
            ..Place::default()
        }
    }
}

/// One of Cairn's hooks as `hooks/list` tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Codex's key of the hook (`FILE:EVENT:GROUP:HANDLER`), under which its trust is kept.
    pub key: String,
    /// The hook's event (`preToolUse`).
    pub event: String,
    /// The hash of its definition, which trusting it records.
    pub hash: String,
    /// `trusted`, `untrusted`, `modified` (trusted once, changed since) or `managed`.
    pub trust: String,
    /// Whether the user left it enabled in `/hooks`.
    pub enabled: bool,
}

impl Listed {
    /// Whether Codex runs it.
    pub fn runs(&self) -> bool {
        self.enabled && matches!(self.trust.as_str(), "trusted" | "managed")
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// Cairn's hooks (those whose command `is_ours`) from `settings`, as the app-server lists them
/// for the directory `cwd`.
pub fn list_ours(
    server: &mut AppServer,
    cwd: &Path,
    settings: &Path,
    is_ours: impl Fn(&str) -> bool,
) -> Result<Vec<Listed>> {
    let list = server.call("hooks/list", serde_json::json!({ "cwds": [cwd] }))?;
    let mut ours = Vec::new();
    for entry in list["data"].as_array().into_iter().flatten() {
        for h in entry["hooks"].as_array().into_iter().flatten() {
            let command = h["command"].as_str().unwrap_or_default();
            let from = Path::new(h["sourcePath"].as_str().unwrap_or_default());
            if !is_ours(command) || !same_file(from, settings) {
                continue;
            }
            let text = |k: &str| h[k].as_str().unwrap_or_default().to_string();
            ours.push(Listed {
                key: text("key"),
                event: text("eventName"),
                hash: text("currentHash"),
                trust: text("trustStatus"),
                enabled: h["enabled"].as_bool().unwrap_or(true),
            });
        }
    }
    Ok(ours)
}

/// The directory whose hooks Codex lists for `settings` (`ROOT/.codex/hooks.json`: ROOT).
fn root_of(settings: &Path) -> &Path {
    settings
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."))
}

/// Why Codex does not load `settings`, when it lists none of Cairn's hooks from it.
fn not_loaded(settings: &Path) -> String {
    let root = root_of(settings);
    format!(
        "Codex does not load {} (it lists none of Cairn's hooks from it): Codex reads a \
         project's .codex/ only once the project is trusted; trust it when `codex` asks in {}, \
         or add [projects.\"{}\"] trust_level = \"trusted\" to Codex's config.toml",
        settings.display(),
        root.display(),
        root.display()
    )
}

/// Whether the hooks file `settings` holds a hook whose command `is_ours`.
pub fn has_ours(settings: &Path, is_ours: impl Fn(&str) -> bool) -> bool {
    let Ok(json) = settings::read(settings) else {
        return false;
    };
    let hooks = json["hooks"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values());
    hooks
        .filter_map(serde_json::Value::as_array)
        .flatten()
        .filter_map(|g| g["hooks"].as_array())
        .flatten()
        .any(|h| h["command"].as_str().is_some_and(&is_ours))
}

/// What keeps Codex from running Cairn's hooks in `settings`, asked of Codex (`hooks/list`)
/// without changing anything: one sentence each; empty when Codex runs them all.
pub fn hooks_not_run(settings: &Path, is_ours: impl Fn(&str) -> bool) -> Result<Vec<String>> {
    let root = root_of(settings);
    let mut server = AppServer::start(&program(), Some(root))?;
    let ours = list_ours(&mut server, root, settings, &is_ours)?;
    if ours.is_empty() {
        return Ok(vec![not_loaded(settings)]);
    }
    Ok(ours
        .iter()
        .filter(|h| !h.runs())
        .map(|h| {
            if h.enabled {
                format!(
                    "Codex skips Cairn's {} hook: it is {} (Codex runs a hook only once trusted)",
                    h.event, h.trust
                )
            } else {
                format!("Cairn's {} hook is disabled in Codex", h.event)
            }
        })
        .collect())
}

/// Makes Codex trust Cairn's hooks in `settings` through its own interface (the app-server's
/// `hooks/list`, then `config/batchWrite` of `hooks.state.KEY.trusted_hash` with the hash
/// Codex reported, as its `/hooks` screen does), and checks that it now runs them: what was
/// done or is still needed, in sentences.
pub fn trust_ours(settings: &Path, is_ours: impl Fn(&str) -> bool) -> Result<Vec<String>> {
    let root = root_of(settings);
    let mut server = AppServer::start(&program(), Some(root))?;
    let ours = list_ours(&mut server, root, settings, &is_ours)?;
    if ours.is_empty() {
        return Ok(vec![not_loaded(settings)]);
    }
    let untrusted: Vec<&Listed> = ours
        .iter()
        .filter(|h| !matches!(h.trust.as_str(), "trusted" | "managed"))
        .collect();
    let mut notes = Vec::new();
    if !untrusted.is_empty() {
        let state: serde_json::Map<String, serde_json::Value> = untrusted
            .iter()
            .map(|h| (h.key.clone(), serde_json::json!({ "trusted_hash": h.hash })))
            .collect();
        server.call(
            "config/batchWrite",
            serde_json::json!({"edits": [{
                "keyPath": "hooks.state",
                "mergeStrategy": "upsert",
                "value": state,
            }]}),
        )?;
        let again = list_ours(&mut server, root, settings, &is_ours)?;
        let still: Vec<String> = again
            .iter()
            .filter(|h| !matches!(h.trust.as_str(), "trusted" | "managed"))
            .map(|h| format!("{} ({})", h.key, h.trust))
            .collect();
        if !still.is_empty() {
            return Err(Error::AppServer {
                program: program(),
                reason: format!("it still does not trust {}", still.join(", ")),
            });
        }
        notes.push(format!(
            "Codex had not trusted {} of Cairn's hooks in {} ({}; Codex skips such a hook without \
             a word): Cairn trusted them through Codex's app-server (hooks/list, then \
             config/batchWrite of hooks.state, as /hooks in Codex does), in Codex's config.toml",
            untrusted.len(),
            settings.display(),
            untrusted
                .iter()
                .map(|h| format!("{} {}", h.event, h.trust))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for h in ours.iter().filter(|h| !h.enabled) {
        notes.push(format!(
            "Cairn's {} hook is disabled in Codex: enable it in /hooks in Codex",
            h.event
        ));
    }
    Ok(notes)
}

/// What to do when Cairn could not check or trust its hooks in `settings`.
fn how_to_trust(settings: &Path, command: &str, why: &Error) -> String {
    format!(
        "Codex runs a hook only once it is trusted, and Cairn could not check or trust its hooks in \
         {} ({why}): run `codex` in {}, type /hooks and trust the hooks whose command is `{command}`; \
         or run `cairn init codex` again with `codex` on PATH (or CAIRN_CODEX naming it)",
        settings.display(),
        root_of(settings).display()
    )
}

impl Agent for Codex {
    fn name(&self) -> &'static str {
        NAME
    }

    fn display_name(&self) -> &'static str {
        "Codex"
    }

    fn project_settings(&self, root: &Path) -> PathBuf {
        root.join(".codex/hooks.json")
    }

    /// `$CODEX_HOME/hooks.json`, or `~/.codex/hooks.json` (where Codex looks).
    fn user_settings(&self, home: &Path) -> PathBuf {
        std::env::var_os("CODEX_HOME")
            .filter(|h| !h.is_empty())
            .map_or_else(|| home.join(".codex"), PathBuf::from)
            .join("hooks.json")
    }

    /// Trusts Cairn's hooks through Codex's app-server (see [`trust_ours`]) and says so, or
    /// says exactly how to trust them when it cannot.
    fn check_install(&self, settings: &Path, command: &str) -> Vec<String> {
        trust_ours(settings, |c| self.is_ours(c))
            .unwrap_or_else(|e| vec![how_to_trust(settings, command, &e)])
    }

    fn forks(&self) -> bool {
        false
    }

    /// `thread/resume` then `thread/revert {threadId, beforeTurnId}` over `codex app-server`
    /// (the app-server finds a thread only once resumed). A turn the thread no longer holds
    /// was reverted already: nothing is done.
    fn settle(&self, cont: &Continue) -> Result<()> {
        let Some(turn) = &cont.at else {
            return Ok(());
        };
        let cwd = cont.cwd.as_deref().filter(|d| d.is_dir());
        let mut server = AppServer::start(&program(), cwd)?;
        let thread = server.call(
            "thread/resume",
            serde_json::json!({ "threadId": cont.from_session }),
        )?;
        let holds = thread["thread"]["turns"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["id"].as_str() == Some(turn));
        if holds {
            server.call(
                "thread/revert",
                serde_json::json!({ "threadId": cont.from_session, "beforeTurnId": turn }),
            )?;
        }
        Ok(())
    }

    fn thread_of(&self, session_id: &str) -> ThreadId {
        crate::session_thread(NAME, session_id)
    }

    fn read_hook(&self, doc: &str, extra_tools: &[String]) -> Result<Hook> {
        let input: HookInput = serde_json::from_str(doc).map_err(|e| Error::HookDocument {
            agent: "Codex",
            reason: e.to_string(),
        })?;
        let event = match input.hook_event_name.as_str() {
            "UserPromptSubmit" => {
                let text = input.prompt.clone().unwrap_or_default();
                let key = match &input.turn_id {
                    Some(turn) => format!("codex-turn-{turn}"),
                    None => {
                        let mut h = cairn_store::Hasher::new();
                        for part in [&input.session_id, &text] {
                            h.update(part.as_bytes());
                            h.update(&[0]);
                        }
                        format!("codex-prompt-{}", &h.finish().to_hex()[..32])
                    }
                };
                Event::Prompt {
                    key,
                    text,
                    place: Place {
                        prompt_id: input.turn_id.clone(),
                        ..input.place()
                    },
                }
            }
            "PreToolUse" => {
                let tool = input.tool_name.clone().unwrap_or_default();
                Event::before_tool(
                    &tool,
                    FILE_TOOLS.contains(&tool.as_str())
                        || tool.starts_with("mcp__")
                        || extra_tools.contains(&tool),
                    input.tool_use_id.as_deref(),
                    &[
                        ("tool_use_id", input.tool_use_id.as_deref()),
                        ("turn_id", input.turn_id.as_deref()),
                    ],
                )
            }
            "PreCompact" => Event::Compaction,
            "Stop" => Event::TurnEnd {
                place: Place {
                    last: input.turn_id.clone(),
                    ..input.place()
                },
            },
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
        settings::merge_hooks(settings, &wanted(), command, remove, |c| self.is_ours(c))
    }

    /// The prompt's turn: `thread/revert` takes it and every later turn away.
    fn before(&self, place: &Place) -> Result<Option<String>> {
        place.prompt_id.clone().map(Some).ok_or_else(|| {
            Error::NoPlace(format!(
                "the hook of Codex session {} named no turn id for the prompt",
                place.session_id
            ))
        })
    }

    /// `codex resume SESSION`: the same session, taken back by [`Agent::settle`].
    fn continue_argv(
        &self,
        session_id: &str,
        at: Option<&str>,
        new_session: Option<&str>,
    ) -> Vec<String> {
        let _ = (at, new_session);
        vec!["codex".into(), "resume".into(), session_id.into()]
    }

    /// `codex resume SESSION ARGS...` (interactive); `-- exec ARGS...` runs
    /// `codex exec resume SESSION ARGS...` (non-interactive: `exec PROMPT`).
    fn resume_argv(&self, cont: &Continue, args: &[String]) -> Vec<String> {
        match args.split_first() {
            Some((first, rest)) if first == "exec" && !cont.argv.is_empty() => {
                let mut argv = vec![cont.argv[0].clone(), "exec".into()];
                argv.extend(cont.argv[1..].iter().cloned());
                argv.extend(rest.iter().cloned());
                argv
            }
            _ => cont.argv.iter().chain(args).cloned().collect(),
        }
    }
}
