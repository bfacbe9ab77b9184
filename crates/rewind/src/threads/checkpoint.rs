//! Checkpoints: the files snapshotted through the `Files` seam and recorded against an entry,
//! and read back.

use super::*;

impl Threads {
    /// The checkpoint an append takes before its entry, when the policy (the run's, else the
    /// handle's) wants one and there is a workspace: what was taken, or why it failed.
    pub(super) fn checkpoint_before(
        &self,
        thread: &ThreadId,
        entry: &NewEntry,
        opts: &AppendOptions,
        entry_id: &EntryId,
    ) -> (Option<TakenCheckpoint>, Option<CheckpointFailure>) {
        if let Some(of) = &opts.files_of {
            return match self.checkpoint_by_id(of) {
                Ok(cp) => (
                    Some(TakenCheckpoint {
                        id: CheckpointId::generate(),
                        snapshot: cp.snapshot_id,
                        workspace_id: cp.workspace_id,
                        root: cp.root,
                    }),
                    None,
                ),
                Err(e) => (
                    None,
                    Some(CheckpointFailure {
                        kind: e.kind(),
                        message: format!("the files of checkpoint {of} for entry {entry_id}: {e}"),
                    }),
                ),
            };
        }
        let (workspace, policy) = match &opts.run {
            Some(run) => (
                run.shared.workspace.clone(),
                if run.is_subagent() {
                    EffectivePolicy::off()
                } else {
                    run.shared.policy.clone()
                },
            ),
            None => (
                opts.workspace.clone(),
                EffectivePolicy::resolve(self.inner.options.checkpoints.as_ref(), None, None),
            ),
        };
        let Some(ws) = workspace
            .as_deref()
            .filter(|_| policy.takes_before(entry.kind))
        else {
            return (None, None);
        };
        let cp_id = CheckpointId::generate();
        let kind = CheckpointKind::of_entry(entry.kind);
        self.inner.keep_out_of(ws);
        match take_snapshot(
            ws,
            &policy,
            thread,
            Some(entry_id),
            &cp_id,
            kind,
            entry_id.as_str(),
            &serde_json::Map::new(),
        ) {
            Ok(snapshot) => (
                Some(TakenCheckpoint {
                    id: cp_id,
                    snapshot,
                    workspace_id: ws.id().to_string(),
                    root: canonical_root(ws),
                }),
                None,
            ),
            Err(e) => (
                None,
                Some(CheckpointFailure {
                    kind: e.kind(),
                    message: format!("checkpoint before entry {entry_id} failed: {e}"),
                }),
            ),
        }
    }

    /// Takes a checkpoint by hand, at the thread's active leaf, whatever the automatic policy
    /// says. The workspace is the run's, else `opts.workspace`. A label longer than
    /// [`cairn_store::MAX_LABEL_BYTES`] is refused with `INVALID_ARGUMENT`.
    pub fn checkpoint(
        &self,
        thread: &ThreadId,
        label: &str,
        opts: &CheckpointOptions,
    ) -> Result<Checkpoint> {
        self.checkpoint_as(thread, CheckpointKind::Manual, label, opts)
    }

    /// [`Threads::checkpoint`] recorded as `kind`: a runtime that sees the automatic points
    /// itself (an agent's hook before a tool or before a compaction) records them as such.
    pub fn checkpoint_as(
        &self,
        thread: &ThreadId,
        kind: CheckpointKind,
        label: &str,
        opts: &CheckpointOptions,
    ) -> Result<Checkpoint> {
        cairn_store::check_label(label)?;
        let (ws, policy, run_id) = match &opts.run {
            Some(run) => {
                self.check_run_alive(run)?;
                (
                    run.shared.workspace.clone(),
                    run.shared.policy.clone(),
                    Some(run.id().clone()),
                )
            }
            None => (
                opts.workspace.clone(),
                EffectivePolicy::resolve(self.inner.options.checkpoints.as_ref(), None, None),
                None,
            ),
        };
        let ws = ws.ok_or_else(|| {
            Error::validation(
                format!("a checkpoint of thread {thread} needs a workspace: give a run with one, or CheckpointOptions::workspace"),
                Some(thread.to_string()),
            )
        })?;
        let t = self.thread(thread)?;
        let cp_id = CheckpointId::generate();
        self.inner.keep_out_of(ws.as_ref());
        let snap = take_snapshot(
            ws.as_ref(),
            &policy,
            thread,
            t.active_leaf.as_ref(),
            &cp_id,
            kind,
            label,
            &opts.metadata,
        )
        .map_err(|e| Error::files(ws.id(), "take a checkpoint", e))?;
        let root = canonical_root(ws.as_ref());
        self.inner.write("record a checkpoint", |c| {
            let t = require_thread(c, thread)?;
            c.execute(
                "INSERT INTO checkpoints (id, thread_id, entry_id, kind, label, snapshot_id, workspace_id, root, run_id, created_ms) \
                 VALUES (?1, ?2, ?3, ?10, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![cp_id, thread, t.active_leaf, label, snap.to_hex(), ws.id(), root_bytes(&root), run_id, c.now_ms(), kind.name()],
            )
            .db("record a checkpoint")?;
            note_workspace(c, thread, ws.id(), &root)?;
            emit(
                c,
                Some(thread),
                EventKind::CheckpointCreated,
                serde_json::json!({
                    "checkpoint_id": cp_id, "entry_id": t.active_leaf, "snapshot_id": snap,
                    "workspace_id": ws.id(), "kind": kind, "label": label,
                }),
            )?;
            load_checkpoint(c, &cp_id)?
                .ok_or_else(|| Error::not_found(format!("checkpoint {cp_id}"), "it was just written"))
        })
    }

    /// The checkpoints of a thread's lineage, oldest first: those taken in it, those of the
    /// threads it was forked from up to its fork point, and the one it names at its fork point.
    pub fn list_checkpoints(&self, thread: &ThreadId) -> Result<Vec<Checkpoint>> {
        self.inner.read(|c| {
            let lin = crate::lineage::Lineage::load(c, thread)?;
            lin.checkpoints(c)
        })
    }

    /// A checkpoint by id.
    pub fn checkpoint_by_id(&self, id: &CheckpointId) -> Result<Checkpoint> {
        self.inner.read(|c| {
            load_checkpoint(c, id)?.ok_or_else(|| {
                Error::not_found(
                    format!("checkpoint {id}"),
                    "list them with list_checkpoints()",
                )
            })
        })
    }
}

/// The checkpoint an append took before its entry, not yet recorded.
pub(super) struct TakenCheckpoint {
    pub(super) id: CheckpointId,
    pub(super) snapshot: SnapshotId,
    pub(super) workspace_id: String,
    pub(super) root: PathBuf,
}

/// The entry's metadata, naming its checkpoint under [`FILE_CHECKPOINT_KEY`] when one was
/// taken.
pub(super) fn metadata_with_checkpoint(
    mut metadata: serde_json::Value,
    checkpoint: Option<&TakenCheckpoint>,
) -> serde_json::Value {
    if let (Some(cp), Some(map)) = (checkpoint, metadata.as_object_mut()) {
        map.insert(
            FILE_CHECKPOINT_KEY.to_string(),
            serde_json::json!({
                "checkpoint_id": cp.id,
                "snapshot_id": cp.snapshot,
                "workspace_id": cp.workspace_id,
                "root": cp.root.to_string_lossy(),
            }),
        );
    }
    metadata
}

/// Records the checkpoint taken before entry `entry_id`: its row, the thread's use of the
/// workspace, and its event.
pub(super) fn record_checkpoint(
    c: &Conn<'_>,
    thread: &ThreadId,
    entry_id: &EntryId,
    kind: EntryKind,
    cp: &TakenCheckpoint,
    run_id: Option<&RunId>,
    now: i64,
) -> Result<()> {
    c.execute(
        "INSERT INTO checkpoints (id, thread_id, entry_id, kind, snapshot_id, workspace_id, root, run_id, created_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            cp.id,
            thread,
            entry_id,
            CheckpointKind::of_entry(kind).name(),
            cp.snapshot.to_hex(),
            cp.workspace_id,
            root_bytes(&cp.root),
            run_id,
            now
        ],
    )
    .db("record a checkpoint")?;
    note_workspace(c, thread, &cp.workspace_id, &cp.root)?;
    emit(
        c,
        Some(thread),
        EventKind::CheckpointCreated,
        serde_json::json!({
            "checkpoint_id": cp.id, "entry_id": entry_id, "snapshot_id": cp.snapshot,
            "workspace_id": cp.workspace_id, "kind": CheckpointKind::of_entry(kind),
        }),
    )
}

/// Takes a snapshot for a checkpoint through the seam.
#[allow(clippy::too_many_arguments)] // each is one column of what the manifest records
pub(crate) fn take_snapshot(
    ws: &dyn Files,
    policy: &EffectivePolicy,
    thread: &ThreadId,
    entry: Option<&EntryId>,
    cp_id: &CheckpointId,
    kind: CheckpointKind,
    label: &str,
    extra: &serde_json::Map<String, serde_json::Value>,
) -> std::result::Result<SnapshotId, FilesError> {
    let mut metadata: serde_json::Map<String, serde_json::Value> = extra
        .iter()
        .filter(|(k, _)| !k.starts_with("cairn_"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    metadata.insert("cairn_thread_id".into(), thread.as_str().into());
    if let Some(e) = entry {
        metadata.insert("cairn_entry_id".into(), e.as_str().into());
    }
    metadata.insert("cairn_checkpoint_id".into(), cp_id.as_str().into());
    metadata.insert("cairn_checkpoint_kind".into(), kind.name().into());
    ws.checkpoint(&CheckpointRequest {
        label: label.to_string(),
        metadata,
        exclude: policy.exclude.clone(),
        max_file_bytes: policy.max_file_bytes.unwrap_or(0),
    })
}
