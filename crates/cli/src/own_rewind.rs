//! The agent's own rewind (Claude Code's `/rewind`, Esc Esc, `--resume-session-at` without a
//! fork): the user took the conversation back inside the agent, so the new prompt follows an
//! earlier turn than the last one Cairn recorded. At the end of that turn Cairn's thread
//! follows: the turns the agent dropped leave the active branch (kept on a branch of their
//! own, as a Cairn rewind keeps them), and the new prompt goes back after the point with the
//! files it was sent with. Files are never restored here: the agent's rewind left them as the
//! dropped turns made them, and the user is told in one line which differ and the command that
//! puts them back (issue 54).

use crate::error::Result;
use crate::threads::Opened;
use cairn_agents::{Agent, Place};
use cairn_rewind::{
    AppendOptions, Entry, EntryKind, NewEntry, RewindOptions, ThreadId, FILE_CHECKPOINT_KEY,
};

/// How many changed paths the notice names before it counts the rest.
const NAMED_PATHS: usize = 5;

/// Moves the thread of `session_id` to where the agent's conversation stands when the user
/// rewound it inside the agent, and prints the notice (`{"systemMessage": ...}`) on stdout.
/// A transcript that cannot be read leaves the thread as it is.
pub(crate) fn follow(
    o: &Opened,
    agent: &dyn Agent,
    thread: &ThreadId,
    session_id: &str,
) -> Result<()> {
    let entries = o.threads.entries(thread, false)?;
    let prompts: Vec<(usize, Place)> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EntryKind::User)
        .filter_map(|(i, e)| Place::of(e).map(|p| (i, p)))
        .collect();
    let Some(((newest_at, place), earlier)) = prompts.split_last() else {
        return Ok(());
    };
    if place.session_id != session_id || earlier.is_empty() {
        return Ok(());
    }
    let places: Vec<Place> = earlier.iter().map(|(_, p)| p.clone()).collect();
    let Ok(Some(k)) = agent.follows(place, &places) else {
        return Ok(());
    };
    if k + 1 == earlier.len() {
        return Ok(());
    }
    // The conversation goes on after the last entry of turn `k`: just before the next prompt.
    let first_dropped = &entries[earlier[k + 1].0];
    let point = &entries[earlier[k + 1].0 - 1];
    let newest = &entries[*newest_at];
    o.threads.rewind(
        thread,
        &point.id,
        &RewindOptions {
            files: Some(false),
            ..RewindOptions::default()
        },
    )?;
    let mut metadata = newest.metadata.clone();
    if let Some(m) = metadata.as_object_mut() {
        m.remove(FILE_CHECKPOINT_KEY);
    }
    let moved = o.threads.append(
        thread,
        NewEntry::user(newest.payload.clone()).with_metadata(metadata),
        &AppendOptions {
            files_of: newest.checkpoint.as_ref().map(|c| c.checkpoint_id.clone()),
            key: newest
                .key
                .as_ref()
                .map(|k| format!("{k}-moved-{}", point.id)),
            ..AppendOptions::default()
        },
    )?;
    if let Some(notice) = notice(o, thread, first_dropped, newest, &moved.entry) {
        println!("{}", serde_json::json!({ "systemMessage": notice }));
    }
    Ok(())
}

/// The one line for the user: which files differ from the point the agent rewound to (the
/// files before the first dropped turn) as the prompt found them, and the command that puts
/// them back. `None` when none differ or a checkpoint is missing.
fn notice(
    o: &Opened,
    thread: &ThreadId,
    first_dropped: &Entry,
    newest: &Entry,
    moved: &Entry,
) -> Option<String> {
    let from = first_dropped.checkpoint.as_ref()?;
    let to = newest.checkpoint.as_ref()?;
    let changes =
        cairn_snapshot::diff_snapshots(o.ws.store(), &from.snapshot_id, &to.snapshot_id).ok()?;
    let paths: Vec<String> = changes
        .iter()
        .map(|c| String::from_utf8_lossy(&c.path).into_owned())
        .collect();
    let moved_note = format!(
        "Cairn's thread {thread} follows Claude Code's rewind (entry {})",
        moved.id
    );
    if paths.is_empty() {
        return Some(format!(
            "{moved_note}; the files are as they were at that point"
        ));
    }
    let mut named = paths
        .iter()
        .take(NAMED_PATHS)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > NAMED_PATHS {
        named.push_str(&format!(" and {} more", paths.len() - NAMED_PATHS));
    }
    let quoted: Vec<String> = paths
        .iter()
        .map(|p| crate::agents::shell_quote(std::path::Path::new(p)))
        .collect();
    let command = if paths.len() <= NAMED_PATHS {
        format!(
            "cairn rewind {thread} {} --files --no-memory -- {}",
            from.checkpoint_id,
            quoted.join(" ")
        )
    } else {
        format!(
            "cairn rewind {thread} {} --files --no-memory",
            from.checkpoint_id
        )
    };
    Some(format!(
        "{moved_note}; the rewind left {} as the dropped turns changed {}: {named}; `{command}` puts {} back",
        crate::parse::count(paths.len() as u64, "file", "files"),
        if paths.len() == 1 { "it" } else { "them" },
        if paths.len() == 1 { "it" } else { "them" },
    ))
}
