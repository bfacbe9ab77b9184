//! Who changed what: for each path changed between two snapshots, the checkpoint intervals it
//! changed in and what opened each one.
//!
//! A thread's checkpoints carry who was about to act in their manifest's metadata: the kind
//! and thread a [`crate::Threads`] checkpoint records (`cairn_checkpoint_kind`,
//! `cairn_thread_id`), and what an agent's hook adds before a tool call (`tool_use_id`,
//! `tool_name`, `agent_id`). The snapshots of a workspace taken between two points cut the
//! span into intervals; a path that changed in an interval is attributed to the checkpoint
//! opening it. A shell command has no checkpoint of its own: what it changed falls in the
//! interval its Bash call's checkpoint opened, so it is attributed to that call.

use cairn_restore::Workspace;
use cairn_snapshot::{Change, Result};
use cairn_store::{Manifest, SnapshotId, Store};
use serde::{Deserialize, Serialize};

/// A checkpoint interval a path changed in, and what opened it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Attribution {
    /// The snapshot opening the interval: the files just before the change.
    pub from: SnapshotId,
    /// The snapshot closing it (`None`: the files now).
    pub to: Option<SnapshotId>,
    /// The opening snapshot's label (a tool call's id, an entry's id, a restore's safety).
    pub label: Option<String>,
    /// Its checkpoint kind (`user`, `tool`, `compaction`, `manual`, ...), when a thread took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_kind: Option<String>,
    /// The thread that took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The tool call that ran next (an agent's hook before a tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// Its tool (`Edit`, `Write`, `Bash`: a shell command is the Bash call that ran it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// The subagent whose call it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

impl Attribution {
    /// The attribution of the interval that snapshot `from` (its manifest `m`) opens and `to`
    /// closes.
    fn of(from: SnapshotId, m: &Manifest, to: Option<SnapshotId>) -> Attribution {
        let meta: serde_json::Value = serde_json::from_str(&m.metadata).unwrap_or_default();
        let text = |k: &str| meta[k].as_str().map(str::to_string);
        Attribution {
            from,
            to,
            label: m.label.clone(),
            checkpoint_kind: text("cairn_checkpoint_kind"),
            thread_id: text("cairn_thread_id"),
            tool_use_id: text("tool_use_id"),
            tool_name: text("tool_name"),
            agent_id: text("agent_id"),
        }
    }
}

/// For people: `toolu_1 (Edit, agent a1)`; the label, or the snapshot's short id, when no
/// tool call is known.
impl std::fmt::Display for Attribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = self
            .tool_use_id
            .clone()
            .or_else(|| self.label.clone())
            .unwrap_or_else(|| self.from.short());
        let more: Vec<String> = self
            .tool_name
            .iter()
            .cloned()
            .chain(self.agent_id.iter().map(|a| format!("agent {a}")))
            .collect();
        if more.is_empty() {
            write!(f, "{who}")
        } else {
            write!(f, "{who} ({})", more.join(", "))
        }
    }
}

/// Whether a change at `a` and one at `b` concern the same path (one may be a directory
/// holding the other).
fn same_path(a: &[u8], b: &[u8]) -> bool {
    let under = |x: &[u8], d: &[u8]| x.len() > d.len() && x.starts_with(d) && x[d.len()] == b'/';
    a == b || under(a, b) || under(b, a)
}

/// For each of `paths`, the checkpoint intervals between snapshot `from` and `to` it changed
/// in, oldest first. `to: None` means the files as they are now in `live`'s root (with no
/// `live` workspace, the last interval is left out). The intervals are cut by the snapshots of
/// `from`'s workspace taken between the two, in time order.
pub fn attribute(
    store: &Store,
    live: Option<&Workspace>,
    from: SnapshotId,
    to: Option<SnapshotId>,
    paths: &[Vec<u8>],
) -> Result<Vec<Vec<Attribution>>> {
    let first = store.read_manifest(&from)?;
    let last = match &to {
        Some(t) => Some((*t, store.read_manifest(t)?)),
        None => None,
    };
    let end_ms = last.as_ref().map(|(_, m)| m.created_ms);
    // Every manifest is read once: the chain keeps those it cuts the span with.
    let mut between: Vec<(SnapshotId, Manifest)> = Vec::new();
    for id in store.snapshot_ids()? {
        if id == from || Some(id) == to {
            continue;
        }
        let m = store.read_manifest(&id)?;
        let inside = m.workspace_id == first.workspace_id
            && m.created_ms >= first.created_ms
            && end_ms.is_none_or(|e| m.created_ms <= e);
        if inside {
            between.push((id, m));
        }
    }
    between.sort_by_key(|(id, m)| (m.created_ms, *id));
    let mut chain: Vec<(SnapshotId, Manifest)> = vec![(from, first)];
    chain.extend(between);
    let trees = |id: &cairn_store::TreeId| Ok(store.read_tree(id)?);
    let mut out: Vec<Vec<Attribution>> = vec![Vec::new(); paths.len()];
    for (i, (a, ma)) in chain.iter().enumerate() {
        let (b, changes) = match chain.get(i + 1).or(last.as_ref()) {
            Some((b, mb)) => (
                Some(*b),
                cairn_snapshot::diff_trees(&trees, ma.root, mb.root)?,
            ),
            None => match live {
                Some(ws) => (
                    None,
                    cairn_snapshot::diff_workspace(store, ws.root(), ws.id(), a)?,
                ),
                None => break,
            },
        };
        let mut who: Option<Attribution> = None;
        for (k, p) in paths.iter().enumerate() {
            if changes.iter().any(|c| same_path(&c.path, p)) {
                let w = who.get_or_insert_with(|| Attribution::of(*a, ma, b));
                out[k].push(w.clone());
            }
        }
    }
    Ok(out)
}

/// [`attribute`] for every path of `changes` (a diff from `from` to `to`), in their order.
pub fn attribute_changes(
    store: &Store,
    live: Option<&Workspace>,
    from: SnapshotId,
    to: Option<SnapshotId>,
    changes: &[Change],
) -> Result<Vec<Vec<Attribution>>> {
    let paths: Vec<Vec<u8>> = changes.iter().map(|c| c.path.clone()).collect();
    attribute(store, live, from, to, &paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_and_a_path_under_it_are_the_same_path_for_attribution() {
        assert!(same_path(b"src", b"src/main.rs"));
        assert!(same_path(b"src/main.rs", b"src"));
        assert!(same_path(b"a", b"a"));
        assert!(!same_path(b"src", b"src2/main.rs"));
        assert!(!same_path(b"a/b", b"a/c"));
    }
}
