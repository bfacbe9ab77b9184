//! Claude Code's transcript of a session: one JSON object a line
//! (`~/.claude/projects/<project>/<session>.jsonl`). Each message line has a `uuid`, the
//! `parentUuid` of the message before it in the conversation (after Claude's own rewind, not
//! the line above it), a `type` (`user`, `assistant`, `attachment`, `system`, ...), and a
//! prompt's line the `promptId` its `UserPromptSubmit` hook was given. A `last-prompt` line
//! (no `uuid`) names the session's latest prompt as Claude Code lists sessions, and the message
//! the conversation had reached. Lines Cairn does not understand are skipped, so a changed
//! format loses a place, not the hook.

use crate::error::{Error, Result};
use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::Path;

/// One message line of a transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Its id.
    pub uuid: String,
    /// The message before it in the conversation.
    pub parent: Option<String>,
    /// `user`, `assistant`, ...
    pub kind: String,
    /// The prompt it belongs to (a prompt's line, its tool results).
    pub prompt_id: Option<String>,
    /// Whether it is a prompt the user sent (not a tool result, not Claude's own note).
    pub is_prompt: bool,
    /// The prompt's text, for a prompt.
    pub text: Option<String>,
    /// Where the line starts in the file.
    pub offset: u64,
    /// When it was written (`timestamp`, RFC 3339), when the line says.
    pub timestamp: Option<String>,
}

/// A `last-prompt` line: the session's latest prompt as Claude Code shows it in its list of
/// sessions ([`shortened`]), and the message the conversation had reached then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastPrompt {
    /// The prompt, [`shortened`].
    pub text: String,
    /// The message the conversation had reached (`leafUuid`).
    pub leaf: Option<String>,
}

/// The message lines of a transcript, in file order.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    /// The lines.
    pub lines: Vec<Line>,
    /// The `last-prompt` lines that name a prompt, in file order.
    pub last_prompts: Vec<LastPrompt>,
    by_uuid: HashMap<String, usize>,
}

/// A prompt as a `last-prompt` line holds it: as Claude Code 2.1 writes it, newlines turned
/// into spaces and trimmed, and past 200 UTF-16 units cut there, trimmed again and ended
/// with `…`.
pub fn shortened(prompt: &str) -> String {
    const MAX: usize = 200;
    let one_line = prompt.replace('\n', " ");
    let one_line = one_line.trim();
    let units: Vec<u16> = one_line.encode_utf16().collect();
    if units.len() <= MAX {
        return one_line.to_string();
    }
    format!("{}\u{2026}", String::from_utf16_lossy(&units[..MAX]).trim())
}

impl Transcript {
    /// Reads the transcript at `path`.
    pub fn read(path: &Path) -> Result<Transcript> {
        let file = std::fs::File::open(path).map_err(|source| Error::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        })?;
        let mut reader = std::io::BufReader::new(file);
        let mut t = Transcript::default();
        let mut offset = 0u64;
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let n = reader
                .read_until(b'\n', &mut buf)
                .map_err(|source| Error::Io {
                    action: "read",
                    path: path.to_path_buf(),
                    source,
                })?;
            if n == 0 {
                break;
            }
            match parse(&buf, offset) {
                Some(Parsed::Line(line)) => {
                    t.by_uuid.insert(line.uuid.clone(), t.lines.len());
                    t.lines.push(line);
                }
                Some(Parsed::LastPrompt(last)) => t.last_prompts.push(last),
                None => {}
            }
            offset += n as u64;
        }
        Ok(t)
    }

    /// The line of `uuid`.
    pub fn get(&self, uuid: &str) -> Option<&Line> {
        self.by_uuid.get(uuid).map(|&i| &self.lines[i])
    }

    /// The prompt line of `prompt_id`, else the first prompt at or after `offset`. The last
    /// line with the id: Claude Code 2.1.332 gives the history a fork copies the `promptId` of
    /// the new session's first prompt, which is written after it.
    pub fn prompt(&self, prompt_id: Option<&str>, offset: Option<u64>) -> Option<&Line> {
        let prompts = || self.lines.iter().filter(|l| l.is_prompt);
        if let Some(id) = prompt_id {
            let mut with_id = prompts().filter(|l| l.prompt_id.as_deref() == Some(id));
            if let Some(l) = with_id.next_back() {
                return Some(l);
            }
        }
        let from = offset?;
        prompts().find(|l| l.offset >= from)
    }

    /// The nearest message at or above `uuid` that is the user's or the model's (skipping
    /// attachments, system notes and the like): what a conversation continues from.
    pub fn message_at_or_above(&self, uuid: &str) -> Option<&Line> {
        self.chain(uuid)
            .find(|l| l.kind == "user" || l.kind == "assistant")
    }

    /// `uuid`'s line and the lines above it in the conversation, nearest first.
    pub fn chain<'a>(&'a self, uuid: &str) -> impl Iterator<Item = &'a Line> + 'a {
        let mut next = self.get(uuid);
        let mut steps = 0usize;
        let limit = self.lines.len();
        std::iter::from_fn(move || {
            let line = next?;
            steps += 1;
            next = match &line.parent {
                // A cycle in a damaged file ends the walk.
                Some(p) if steps <= limit => self.get(p),
                _ => None,
            };
            Some(line)
        })
    }

    /// The last message of the model, in file order: where a turn that just ended stands.
    pub fn last_message(&self) -> Option<&Line> {
        self.lines.iter().rev().find(|l| l.kind == "assistant")
    }

    /// Prompts the transcript lost: each `last-prompt` whose text is no prompt line's and
    /// whose message the file lacks, or whose message's conversation reaches a line the file
    /// lacks before it reaches a prompt, once. Claude Code 2.1.197 run with `--bare` on a busy
    /// machine was seen writing a session's file without its first lines, the prompt's among
    /// them, keeping the model's answer (its parent missing) and the `last-prompt` line. Slash
    /// commands (`/...`) and shell input (`! ...`), which a `last-prompt` also names, are not
    /// counted.
    pub fn lost_prompts(&self) -> Vec<&LastPrompt> {
        let mut seen: HashSet<String> = self
            .lines
            .iter()
            .filter_map(|l| l.text.as_deref())
            .map(shortened)
            .collect();
        self.last_prompts
            .iter()
            .filter(|p| !p.text.starts_with('/') && !p.text.starts_with("! "))
            .filter(|p| {
                p.leaf
                    .as_deref()
                    .is_some_and(|leaf| self.loses_prompt(leaf))
            })
            .filter(|p| seen.insert(p.text.clone()))
            .collect()
    }

    /// Whether the file lacks `uuid`, or `uuid`'s conversation, walked up, reaches a parent the
    /// file lacks before any prompt.
    fn loses_prompt(&self, uuid: &str) -> bool {
        let mut last = None;
        for line in self.chain(uuid) {
            if line.is_prompt {
                return false;
            }
            last = Some(line);
        }
        match last {
            None => true,
            Some(l) => l.parent.as_deref().is_some_and(|p| self.get(p).is_none()),
        }
    }
}

/// What a line of a transcript is, when Cairn reads it.
enum Parsed {
    Line(Line),
    LastPrompt(LastPrompt),
}

fn parse(bytes: &[u8], offset: u64) -> Option<Parsed> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    if v["type"] == "last-prompt" {
        return Some(Parsed::LastPrompt(LastPrompt {
            text: v["lastPrompt"].as_str()?.to_string(),
            leaf: v["leafUuid"].as_str().map(str::to_string),
        }));
    }
    let uuid = v["uuid"].as_str()?.to_string();
    let kind = v["type"].as_str()?.to_string();
    let content = &v["message"]["content"];
    let text = match content {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(blocks) if !blocks.iter().any(|b| b["type"] == "tool_result") => {
            let t: Vec<&str> = blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect();
            (!t.is_empty()).then(|| t.join("\n"))
        }
        _ => None,
    };
    let flag = |key: &str| v[key].as_bool() == Some(true);
    // Lines Claude Code writes itself as the user's: a command's output, an interruption.
    let written_by_claude = text.as_deref().is_some_and(|t| {
        let t = t.trim_start();
        [
            "<local-command-",
            "<command-name>",
            "<command-message>",
            "[Request interrupted",
        ]
        .iter()
        .any(|p| t.starts_with(p))
    });
    let is_prompt = kind == "user"
        && !flag("isMeta")
        && !flag("isSidechain")
        && !flag("isCompactSummary")
        && !flag("isVisibleInTranscriptOnly")
        && v.get("toolUseResult").is_none()
        && !written_by_claude
        && text.is_some();
    Some(Parsed::Line(Line {
        uuid,
        parent: v["parentUuid"].as_str().map(str::to_string),
        kind,
        prompt_id: v["promptId"].as_str().map(str::to_string),
        text: text.filter(|_| is_prompt),
        is_prompt,
        offset,
        timestamp: v["timestamp"].as_str().map(str::to_string),
    }))
}
