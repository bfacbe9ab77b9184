//! Claude Code: its hooks (`.claude/settings.json`), its hook documents, and its transcript,
//! where each prompt's line names the message before it.

pub mod transcript;

use crate::error::{Error, Result};
use crate::settings::{self, Changes, Wanted};
use crate::{Agent, Event, Hook, Place};
use cairn_rewind::ThreadId;
use serde::Deserialize;
use std::path::PathBuf;
use transcript::Transcript;

/// The agent's name.
pub const NAME: &str = "claude-code";

/// The tools whose call may change files: a checkpoint is taken before each.
pub const FILE_TOOLS: &[&str] = &["Write", "Edit", "MultiEdit", "NotebookEdit", "Bash"];

/// The hook events Cairn installs in Claude Code's settings, with their matchers.
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
            matcher: Some(FILE_TOOLS.join("|")),
        },
        all("PreCompact"),
        all("Stop"),
    ]
}

/// Claude Code, the command-line coding agent.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClaudeCode;

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
    prompt_id: Option<String>,
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

    /// How long the transcript is now (0 when it is not written yet).
    fn transcript_len(&self) -> u64 {
        self.transcript_path
            .as_deref()
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len())
    }
}

/// The admission key of a prompt: the same delivery of the same prompt (the session, the text
/// and how long the transcript was) is one entry; the same words typed again later are another.
fn prompt_key(session_id: &str, prompt: &str, transcript_len: u64) -> String {
    let mut h = cairn_store::Hasher::new();
    h.update(session_id.as_bytes());
    h.update(&[0]);
    h.update(prompt.as_bytes());
    h.update(&[0]);
    h.update(&transcript_len.to_le_bytes());
    format!("claude-prompt-{}", &h.finish().to_hex()[..32])
}

/// What a hook's place tells of the transcript, read once.
fn transcript_of(place: &Place) -> Result<(PathBuf, Transcript)> {
    let path = place.transcript.clone().ok_or_else(|| {
        Error::NoPlace(format!(
            "the hook of Claude Code session {} named no transcript",
            place.session_id
        ))
    })?;
    let t = Transcript::read(&path)?;
    Ok((path, t))
}

/// The line of the prompt at `place` in its transcript `t` (read from `path`).
fn prompt_line<'a>(
    t: &'a Transcript,
    path: &std::path::Path,
    place: &Place,
) -> Result<&'a transcript::Line> {
    t.prompt(place.prompt_id.as_deref(), place.offset)
        .ok_or_else(|| Error::Transcript {
            path: path.to_path_buf(),
            reason: format!(
                "Claude Code's transcript does not hold the prompt {} of session {}",
                place.prompt_id.as_deref().unwrap_or("(no id)"),
                place.session_id
            ),
        })
}

impl Agent for ClaudeCode {
    fn name(&self) -> &'static str {
        NAME
    }

    fn display_name(&self) -> &'static str {
        "Claude Code"
    }

    fn project_settings(&self, root: &std::path::Path) -> PathBuf {
        root.join(".claude/settings.json")
    }

    fn user_settings(&self, home: &std::path::Path) -> PathBuf {
        home.join(".claude/settings.json")
    }

    /// `claude-` and the session id (bytes a thread id does not take become `_`).
    fn thread_of(&self, session_id: &str) -> ThreadId {
        crate::session_thread("claude", session_id)
    }

    fn read_hook(&self, doc: &str, extra_tools: &[String]) -> Result<Hook> {
        let input: HookInput = serde_json::from_str(doc).map_err(|e| Error::HookDocument {
            agent: "Claude Code",
            reason: e.to_string(),
        })?;
        let event = match input.hook_event_name.as_str() {
            "UserPromptSubmit" => {
                let text = input.prompt.clone().unwrap_or_default();
                let len = input.transcript_len();
                Event::Prompt {
                    key: prompt_key(&input.session_id, &text, len),
                    text,
                    place: Place {
                        prompt_id: input.prompt_id.clone(),
                        offset: Some(len),
                        ..input.place()
                    },
                }
            }
            "PreToolUse" => {
                let tool = input.tool_name.clone().unwrap_or_default();
                Event::before_tool(
                    &tool,
                    FILE_TOOLS.contains(&tool.as_str()) || extra_tools.contains(&tool),
                    input.tool_use_id.as_deref(),
                    &[
                        ("tool_use_id", input.tool_use_id.as_deref()),
                        ("agent_id", input.agent_id.as_deref()),
                        ("agent_type", input.agent_type.as_deref()),
                    ],
                )
            }
            "PreCompact" => Event::Compaction,
            "Stop" => {
                let last = transcript_of(&input.place())
                    .ok()
                    .and_then(|(_, t)| t.last_message().map(|l| l.uuid.clone()));
                Event::TurnEnd {
                    place: Place {
                        last,
                        ..input.place()
                    },
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
        settings::merge_hooks(settings, &wanted(), command, remove, |c| self.is_ours(c))
    }

    fn before(&self, place: &Place) -> Result<Option<String>> {
        let (path, t) = transcript_of(place)?;
        let line = prompt_line(&t, &path, place)?;
        let Some(parent) = &line.parent else {
            return Ok(None);
        };
        Ok(Some(
            t.message_at_or_above(parent)
                .map_or_else(|| parent.clone(), |l| l.uuid.clone()),
        ))
    }

    fn follows(&self, place: &Place, earlier: &[Place]) -> Result<Option<usize>> {
        let (path, t) = transcript_of(place)?;
        let line = prompt_line(&t, &path, place)?;
        let above: std::collections::HashSet<&str> = match &line.parent {
            Some(p) => t.chain(p).map(|l| l.uuid.as_str()).collect(),
            None => Default::default(),
        };
        for (i, e) in earlier.iter().enumerate().rev() {
            // A forked session's transcript holds the earlier prompts' lines as they were.
            let own;
            let found = match t.prompt(e.prompt_id.as_deref(), None) {
                Some(l) => Some(l.uuid.clone()),
                None if e.transcript.is_some() && e.transcript != place.transcript => {
                    own = transcript_of(e).ok();
                    own.as_ref()
                        .and_then(|(_, t)| t.prompt(e.prompt_id.as_deref(), e.offset))
                        .map(|l| l.uuid.clone())
                }
                None => None,
            };
            if found.is_some_and(|u| above.contains(u.as_str())) {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    fn continue_argv(
        &self,
        session_id: &str,
        at: Option<&str>,
        new_session: Option<&str>,
    ) -> Vec<String> {
        let mut argv = vec!["claude".to_string()];
        match (at, new_session) {
            (Some(at), Some(new)) => argv.extend([
                "--resume".into(),
                session_id.into(),
                "--resume-session-at".into(),
                at.into(),
                "--fork-session".into(),
                "--session-id".into(),
                new.into(),
            ]),
            // The prompt cut began its conversation: a new one.
            (None, Some(new)) => argv.extend(["--session-id".into(), new.into()]),
            (Some(at), None) => argv.extend([
                "--resume".into(),
                session_id.into(),
                "--resume-session-at".into(),
                at.into(),
            ]),
            (None, None) => argv.extend(["--resume".into(), session_id.into()]),
        }
        argv
    }
}
