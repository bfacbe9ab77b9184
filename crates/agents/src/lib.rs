//! Cairn inside coding agents: one module per agent behind one small trait, [`Agent`].
//!
//! An agent runs Cairn from its hooks. An adapter installs and removes those hooks in the
//! agent's settings, reads a hook's document into Cairn's words ([`Hook`], [`Event`]), finds
//! where a prompt sits in the agent's own conversation ([`Place`], [`Agent::before`]), and says
//! the command that continues that conversation from an earlier message
//! ([`Agent::continue_argv`]). With those, a rewind takes the agent's conversation back with
//! the files: [`prepare`] chooses where the conversation continues before any file changes,
//! and the rewind's journal keeps it (see `cairn_rewind::Continuation`).
//!
//! The command line acts on the events (checkpoints, entries); this crate knows the agents.

pub mod claude;
pub mod codex;
pub mod copilot;
mod error;
pub mod gemini;
pub mod rewind;
pub mod settings;

pub use error::{Error, Result};

use cairn_rewind::{Entry, EntryKind, ThreadId};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The key of an entry's metadata under which its [`Place`] is kept.
pub const PLACE_KEY: &str = "conversation";

/// The agents Cairn knows, by the name `cairn init` and `cairn hook` take.
pub fn by_name(name: &str) -> Option<&'static dyn Agent> {
    match name {
        claude::NAME => Some(&claude::ClaudeCode),
        codex::NAME => Some(&codex::Codex),
        gemini::NAME => Some(&gemini::GeminiCli),
        copilot::NAME => Some(&copilot::CopilotCli),
        _ => None,
    }
}

/// The thread of an agent's session: `PREFIX-` and the session id (bytes a thread id does not
/// take become `_`).
pub(crate) fn session_thread(prefix: &str, session_id: &str) -> ThreadId {
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
    ThreadId::new(format!("{prefix}-{clean}"))
}

/// The admission key of a prompt: `PREFIX-prompt-` and a hash of the session, the prompt and
/// how long the agent's transcript was, so the same delivery of the same prompt is one entry
/// and the same words typed again later are another.
pub(crate) fn prompt_key(
    prefix: &str,
    session_id: &str,
    prompt: &str,
    transcript_len: u64,
) -> String {
    let mut h = cairn_store::Hasher::new();
    for part in [
        session_id.as_bytes(),
        prompt.as_bytes(),
        &transcript_len.to_le_bytes(),
    ] {
        h.update(part);
        h.update(&[0]);
    }
    format!("{prefix}-prompt-{}", &h.finish().to_hex()[..32])
}

/// The agent whose thread this is (its metadata's `agent`), if Cairn knows it.
pub fn of_thread(metadata: &serde_json::Value) -> Option<&'static dyn Agent> {
    metadata["agent"].as_str().and_then(by_name)
}

/// One hook event of an agent, read into Cairn's words.
#[derive(Debug, Clone, PartialEq)]
pub struct Hook {
    /// The agent's session.
    pub session_id: String,
    /// The directory the agent works in, when it says.
    pub cwd: Option<PathBuf>,
    /// What happened.
    pub event: Event,
}

/// What a hook event asks of Cairn.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The user sent a prompt: checkpoint the files, then record the prompt.
    Prompt {
        /// The prompt's text.
        text: String,
        /// Where it sits in the agent's conversation.
        place: Place,
        /// The admission key: the same delivery of the same prompt is one entry.
        key: String,
    },
    /// A tool that may change files is about to run: checkpoint the files.
    BeforeTool {
        /// The checkpoint's label (the tool call's id when the agent gives one).
        label: String,
        /// Who is about to change files (`tool_name`, `tool_use_id`, `agent_id`, ...).
        who: serde_json::Map<String, serde_json::Value>,
    },
    /// A tool Cairn does not checkpoint is about to run.
    OtherTool,
    /// The agent is about to compact its context.
    Compaction,
    /// The turn ended: the files as the agent left them.
    TurnEnd {
        /// Where the turn ended in the agent's conversation ([`Place::last`]).
        place: Place,
    },
    /// A session started or resumed.
    SessionStart,
    /// An event Cairn does not act on.
    Other,
}

impl Event {
    /// The tool `tool` is about to run: with `checkpoint`, a checkpoint labelled with the
    /// call's id (`before-TOOL` without one), its `who` naming the tool and each of `ids` the
    /// agent gave; else [`Event::OtherTool`].
    pub fn before_tool(
        tool: &str,
        checkpoint: bool,
        call_id: Option<&str>,
        ids: &[(&str, Option<&str>)],
    ) -> Event {
        if !checkpoint {
            return Event::OtherTool;
        }
        let mut who = serde_json::Map::new();
        who.insert("tool_name".into(), tool.into());
        for (key, value) in ids {
            if let Some(v) = value {
                who.insert((*key).into(), (*v).into());
            }
        }
        Event::BeforeTool {
            label: call_id.map_or_else(|| format!("before-{tool}"), str::to_string),
            who,
        }
    }
}

/// Where an entry sits in the agent's own conversation, kept in its metadata under
/// [`PLACE_KEY`]. What an agent leaves out stays `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    /// The agent ([`Agent::name`]).
    pub agent: String,
    /// The agent's session.
    pub session_id: String,
    /// The agent's transcript of the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<PathBuf>,
    /// The agent's id of the prompt (Claude Code's `prompt_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_id: Option<String>,
    /// How long the transcript was when the prompt was sent: the prompt is written after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// At the end of a turn: the id of the turn's last message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<String>,
    /// The directory the agent worked in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
}

impl Place {
    /// The place an entry's metadata keeps, if any.
    pub fn of(entry: &Entry) -> Option<Place> {
        serde_json::from_value(entry.metadata.get(PLACE_KEY)?.clone()).ok()
    }

    /// `metadata` with this place under [`PLACE_KEY`].
    pub fn into_metadata(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        if let Ok(v) = serde_json::to_value(self) {
            map.insert(PLACE_KEY.into(), v);
        }
        serde_json::Value::Object(map)
    }
}

/// A coding agent Cairn works inside.
pub trait Agent: Send + Sync {
    /// Its name, as `cairn init NAME` and `cairn hook NAME` take it (`claude-code`).
    fn name(&self) -> &'static str;

    /// Its name for people (`Claude Code`).
    fn display_name(&self) -> &'static str;

    /// The project's settings file Cairn's hooks go in (under `root`).
    fn project_settings(&self, root: &std::path::Path) -> PathBuf;

    /// The user's settings file Cairn's hooks go in with `--user` (under `home`).
    fn user_settings(&self, home: &std::path::Path) -> PathBuf;

    /// After Cairn's hooks running `command` were installed in `settings`: what the agent
    /// still needs before it runs them (an untrusted hook the agent skips), each with what to
    /// do. The default: nothing.
    fn check_install(&self, settings: &std::path::Path, command: &str) -> Vec<String> {
        let _ = (settings, command);
        Vec::new()
    }

    /// Whether a rewind continues the agent's conversation in a new session (Claude Code
    /// forks one) rather than taking the same session back (`false`: [`Agent::settle`] does).
    fn forks(&self) -> bool {
        true
    }

    /// Takes the agent's own record of the conversation to `cont`'s point, for an agent whose
    /// conversation a command alone cannot continue from there (one that keeps a single
    /// history and has its own revert). Run once the rewind has completed, by `cairn recover`
    /// after a crash, and by `cairn resume` before it runs [`Continue::argv`]: doing it again
    /// must change nothing. The default: nothing to do.
    fn settle(&self, cont: &Continue) -> Result<()> {
        let _ = cont;
        Ok(())
    }

    /// The thread a session of the agent records into, until a rewind names another.
    fn thread_of(&self, session_id: &str) -> ThreadId;

    /// Reads one hook document. `extra_tools` are more tools to checkpoint before.
    fn read_hook(&self, doc: &str, extra_tools: &[String]) -> Result<Hook>;

    /// Adds Cairn's hooks running `command` to the agent's `settings` (or with `remove`, takes
    /// them out), leaving every other setting as it is: the events that changed, or what in
    /// the settings is in the way.
    fn install(
        &self,
        settings: &mut serde_json::Value,
        command: &str,
        remove: bool,
    ) -> std::result::Result<settings::Changes, String>;

    /// Whether a hook command is Cairn's.
    fn is_ours(&self, command: &str) -> bool {
        command.contains("cairn") && command.contains(&format!("hook {}", self.name()))
    }

    /// Where the agent's conversation is cut to take the prompt at `place` and everything
    /// after it away, in the agent's own terms: for Claude Code the id of the message before
    /// the prompt (`None`: the prompt began the conversation); for an agent that reverts by
    /// turn, the prompt's turn. An error says why it cannot be told (a transcript that cannot
    /// be read, a prompt it does not hold).
    fn before(&self, place: &Place) -> Result<Option<String>>;

    /// For the prompt at `place`, the newest of `earlier` (the places of the prompts recorded
    /// before it, oldest first) whose turn it follows in the agent's conversation: the last
    /// one, unless the user rewound the conversation inside the agent. `Ok(None)`: it follows
    /// none of them. An agent whose user cannot rewind on their own says the last one.
    fn follows(&self, place: &Place, earlier: &[Place]) -> Result<Option<usize>> {
        let _ = place;
        Ok(earlier.len().checked_sub(1))
    }

    /// The command `cairn resume` runs: `cont`'s command, then the user's `args`. An agent
    /// whose non-interactive run is another subcommand may place them otherwise (Codex:
    /// `-- exec PROMPT` runs `codex exec resume SESSION PROMPT`).
    fn resume_argv(&self, cont: &Continue, args: &[String]) -> Vec<String> {
        cont.argv.iter().chain(args).cloned().collect()
    }

    /// The command that continues the conversation of `session_id`: from the message `at`
    /// in a new session `new_session` when given, else the whole session as it stands.
    fn continue_argv(
        &self,
        session_id: &str,
        at: Option<&str>,
        new_session: Option<&str>,
    ) -> Vec<String>;
}

/// Where a rewind leaves the agent's conversation, kept in the rewind's journal
/// (`cairn_rewind::Continuation::data`) before any file changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Continue {
    /// The agent.
    pub agent: String,
    /// The session whose conversation is continued.
    pub from_session: String,
    /// The message it continues from (`None`: the whole session, or a new conversation when
    /// `session_id` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The new session the agent continues in (chosen by the rewind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The command that continues it.
    pub argv: Vec<String>,
    /// The directory to run it in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
}

/// Prepares the agent's half of a rewind that takes `cut` (the entries leaving the active
/// branch, oldest first) off a thread whose kept branch is `kept` (oldest first): the
/// conversation continues from the message before the first cut prompt, in a new session
/// whose thread name is returned with it; with no prompt cut, the newest kept prompt's session
/// continues as it stands. `Ok(None)`: no entry knows its place (recorded before Cairn kept
/// them). An error says why the conversation cannot be prepared (the rewind of the files and
/// of Cairn's thread can still go on).
pub fn prepare(
    agent: &dyn Agent,
    cut: &[Entry],
    kept: &[Entry],
) -> Result<Option<(Continue, Vec<ThreadId>)>> {
    let prompt = |e: &&Entry| e.kind == EntryKind::User;
    if let Some(place) = cut.iter().filter(prompt).find_map(Place::of) {
        let at = agent.before(&place)?;
        let new = agent.forks().then(|| uuid::Uuid::new_v4().to_string());
        let argv = agent.continue_argv(&place.session_id, at.as_deref(), new.as_deref());
        let names = new.iter().map(|n| agent.thread_of(n)).collect();
        return Ok(Some((
            Continue {
                agent: agent.name().to_string(),
                from_session: place.session_id.clone(),
                at,
                session_id: new,
                argv,
                cwd: place.cwd.clone(),
            },
            names,
        )));
    }
    let Some(place) = kept.iter().rev().filter(prompt).find_map(Place::of) else {
        return Ok(None);
    };
    Ok(Some((
        Continue {
            agent: agent.name().to_string(),
            argv: agent.continue_argv(&place.session_id, None, None),
            from_session: place.session_id,
            at: None,
            session_id: None,
            cwd: place.cwd,
        },
        Vec::new(),
    )))
}
