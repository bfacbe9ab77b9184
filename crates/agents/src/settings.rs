//! Agents' JSON settings files: read, Cairn's hooks merged in or taken out, written whole.

use crate::error::{Error, Result};
use std::path::Path;

/// What installing or removing Cairn's hooks changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Hook events that gained Cairn's hook (or whose Cairn command changed).
    pub added: Vec<String>,
    /// Hook events whose Cairn hook was taken out.
    pub removed: Vec<String>,
}

/// The JSON settings at `path`: `{}` when the file is missing or empty.
pub fn read(path: &Path) -> Result<serde_json::Value> {
    match std::fs::read_to_string(path) {
        Ok(t) if t.trim().is_empty() => Ok(serde_json::json!({})),
        Ok(t) => serde_json::from_str(&t).map_err(|e| Error::Settings {
            path: path.to_path_buf(),
            reason: format!("is not valid JSON ({e})"),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(serde_json::json!({})),
        Err(source) => Err(Error::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes `settings` to `path` through a temporary file renamed over it (the directory made
/// if needed); returns the bytes written.
pub fn write(path: &Path, settings: &serde_json::Value) -> Result<Vec<u8>> {
    let io = |source| Error::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut text =
        serde_json::to_string_pretty(settings).map_err(|e| io(std::io::Error::other(e)))?;
    text.push('\n');
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.cairn-{}", std::process::id()));
    std::fs::write(&tmp, &text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map(|()| text.into_bytes())
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(e)
        })
}

/// One hook Cairn installs: the event, and the matcher of tools it fires for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// The hook event (`UserPromptSubmit`).
    pub event: &'static str,
    /// The tools it fires for (`None`: every one).
    pub matcher: Option<String>,
}

/// Adds (or with `remove`, takes out) hooks running `command` for each of `wanted` in the
/// Claude-Code-shaped `settings` (`{"hooks": {EVENT: [{"matcher", "hooks": [{"type":
/// "command", "command", "timeout"}]}]}}`); a hook is Cairn's when `is_ours` says so, and one
/// with another command (another binary) is made this one. Other hooks stay as they are.
pub fn merge_hooks(
    settings: &mut serde_json::Value,
    wanted: &[Wanted],
    command: &str,
    remove: bool,
    is_ours: impl Fn(&str) -> bool,
) -> std::result::Result<Changes, String> {
    let obj = settings
        .as_object_mut()
        .ok_or("the settings are not a JSON object")?;
    let hooks = obj
        .entry("hooks")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
        .ok_or("its \"hooks\" is not a JSON object")?;
    let mut changes = Changes::default();
    let ours = |h: &serde_json::Value| h["command"].as_str().is_some_and(&is_ours);
    for w in wanted {
        let event = w.event;
        let groups = hooks
            .entry(event)
            .or_insert_with(|| serde_json::json!([]))
            .as_array_mut()
            .ok_or_else(|| format!("its hooks.{event} is not a list"))?;
        let has_ours =
            |g: &serde_json::Value| g["hooks"].as_array().is_some_and(|hs| hs.iter().any(ours));
        if remove {
            let before = groups.len();
            for g in groups.iter_mut() {
                if let Some(hs) = g["hooks"].as_array_mut() {
                    hs.retain(|h| !ours(h));
                }
            }
            groups.retain(|g| g["hooks"].as_array().is_none_or(|hs| !hs.is_empty()));
            if groups.len() != before {
                changes.removed.push(event.to_string());
            }
        } else if groups.iter().any(has_ours) {
            let mut changed = false;
            for h in groups
                .iter_mut()
                .filter_map(|g| g["hooks"].as_array_mut())
                .flatten()
            {
                if ours(h) && h["command"].as_str() != Some(command) {
                    h["command"] = serde_json::Value::String(command.to_string());
                    changed = true;
                }
            }
            if changed {
                changes.added.push(event.to_string());
            }
        } else {
            let mut group = serde_json::json!({
                "hooks": [{ "type": "command", "command": command, "timeout": 60 }]
            });
            if let Some(m) = &w.matcher {
                group["matcher"] = serde_json::Value::String(m.clone());
            }
            groups.push(group);
            changes.added.push(event.to_string());
        }
    }
    hooks.retain(|_, v| v.as_array().is_none_or(|a| !a.is_empty()));
    Ok(changes)
}
