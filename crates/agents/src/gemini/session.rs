//! Gemini CLI's session file (`session-*.jsonl`): a log of records, read as Gemini CLI reads
//! it. A record is the session's metadata (`sessionId`, `projectHash`, ...), a message (`id`,
//! `type`: `user` | `gemini` | ..., `content`; a later record with the same id updates it in
//! place), `{"$set": {...}}` (metadata; with `messages`, the whole conversation anew) or
//! `{"$rewindTo": ID}` (the message ID and every one after it taken off, what `/rewind`
//! writes).

use crate::error::{Error, Result};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Its id.
    pub id: String,
    /// `user`, `gemini`, `info`, ...
    pub kind: String,
    /// Where its first record starts in the file.
    pub offset: u64,
    /// A prompt typed by the user: a `user` message with text and no function response, in a
    /// record of its own (the session's context and a resumed conversation come whole in a
    /// `$set`, after the prompts they hold were first written).
    pub prompt: bool,
}

/// A session file, read.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// The session's id, from its metadata.
    pub session_id: Option<String>,
    /// Every message record in file order (an update of an id is not a new one).
    records: Vec<Message>,
    /// The conversation as it stands: ids in order.
    held: Vec<String>,
}

fn is_prompt(m: &Value) -> bool {
    m["type"] == "user"
        && m["content"].as_array().is_some_and(|parts| {
            parts.iter().any(|p| p["text"].is_string())
                && !parts.iter().any(|p| p.get("functionResponse").is_some())
        })
}

impl Session {
    /// Reads the session file at `path`.
    pub fn read(path: &Path) -> Result<Session> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Session::parse(&text))
    }

    /// Reads a session file's text (lines that are not JSON are skipped, as Gemini CLI does).
    pub fn parse(text: &str) -> Session {
        let mut s = Session::default();
        let mut offset = 0u64;
        for line in text.split_inclusive('\n') {
            let at = offset;
            offset += line.len() as u64;
            let Ok(record) = serde_json::from_str::<Value>(line.trim()) else {
                continue;
            };
            if let Some(to) = record["$rewindTo"].as_str() {
                match s.held.iter().position(|id| id == to) {
                    Some(i) => s.held.truncate(i),
                    None => s.held.clear(),
                }
            } else if record["id"].is_string() {
                s.message(&record, at, true);
            } else {
                let set = record.get("$set").unwrap_or(&record);
                if let Some(id) = record["sessionId"].as_str() {
                    s.session_id = Some(id.to_string());
                }
                if let Some(messages) = set["messages"].as_array() {
                    if record.get("$set").is_some() {
                        s.held.clear();
                    }
                    for m in messages.iter().filter(|m| m["id"].is_string()) {
                        s.message(m, at, false);
                    }
                }
            }
        }
        s
    }

    fn message(&mut self, m: &Value, at: u64, own_record: bool) {
        let id = m["id"].as_str().unwrap_or_default().to_string();
        if !self.records.iter().any(|r| r.id == id) {
            self.records.push(Message {
                id: id.clone(),
                kind: m["type"].as_str().unwrap_or_default().to_string(),
                offset: at,
                prompt: own_record && is_prompt(m),
            });
        }
        if !self.held.contains(&id) {
            self.held.push(id);
        }
    }

    /// The conversation as it stands, in order.
    pub fn messages(&self) -> Vec<&Message> {
        self.held
            .iter()
            .filter_map(|id| self.records.iter().find(|r| &r.id == id))
            .collect()
    }

    /// The id of the first prompt whose record starts at or after byte `offset` (how long the
    /// file was when the prompt's hook ran).
    pub fn prompt_after(&self, offset: u64) -> Option<&str> {
        self.records
            .iter()
            .find(|r| r.prompt && r.offset >= offset)
            .map(|r| r.id.as_str())
    }

    /// Whether the conversation as it stands holds the message `id`.
    pub fn holds(&self, id: &str) -> bool {
        self.held.iter().any(|h| h == id)
    }

    /// Takes the conversation of the session file at `path` back to before the message `id`,
    /// as Gemini CLI's `/rewind` does: appends `{"$rewindTo": id}`, unless the conversation no
    /// longer holds `id` (taken back already): doing it again changes nothing.
    pub fn rewind_to(path: &Path, id: &str) -> Result<()> {
        let s = Session::read(path)?;
        if !s.holds(id) {
            return Ok(());
        }
        let io = |source| Error::Io {
            action: "append to",
            path: PathBuf::from(path),
            source,
        };
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io)?;
        let text = std::fs::read(path).map_err(io)?;
        let sep = if text.is_empty() || text.ends_with(b"\n") {
            ""
        } else {
            "\n"
        };
        let line = format!("{sep}{}\n", serde_json::json!({ "$rewindTo": id }));
        f.write_all(line.as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)
    }
}
