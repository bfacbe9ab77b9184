//! The files half of a rewind: which checkpoint the files go back to, the restore planned
//! through the `Files` seam, and what it reports.

use super::*;

impl Threads {
    pub(super) fn check_from_run(
        &self,
        run: &RunId,
        thread: &ThreadId,
        root: Option<&std::path::Path>,
    ) -> Result<()> {
        let row = self.inner.read(|c| load_run(c, run))?.ok_or_else(|| {
            Error::not_found(
                format!("run {run}"),
                "from_run must name the run whose tool asks",
            )
        })?;
        if &row.thread_id == thread {
            return Err(Error::validation(
                format!(
                    "a tool of run {run} asks to rewind its own thread {thread}: the rewind would have to stop \
                     the run that waits for it; rewind from outside the run"
                ),
                Some(run.to_string()),
            ));
        }
        if let (Some(a), Some(b)) = (root, &row.root) {
            if roots_overlap(a, b) {
                return Err(Error::validation(
                    format!(
                        "a tool of run {run} asks to restore its own workspace ({}): the restore would have to stop \
                         the run that waits for it; rewind from outside the run",
                        b.display()
                    ),
                    Some(run.to_string()),
                ));
            }
        }
        Ok(())
    }

    /// Picks and checks the checkpoint whose files to restore.
    /// The files a rewind leaves, for its drift check: the newest checkpoint of the lineage
    /// in the workspace taken after the one restored (with other files). `None` when there is
    /// none: what changed since the restored checkpoint is then the thread's own work, as far
    /// as anyone knows, and no path is taken for another's edit.
    pub(super) fn drift_reference(
        &self,
        lin: &Lineage,
        chosen: &ChosenFiles,
        workspace: &str,
    ) -> Result<Option<cairn_store::SnapshotId>> {
        let cps = self.inner.read(|c| lin.checkpoints(c))?;
        let after = cps
            .iter()
            .position(|cp| cp.id == chosen.checkpoint_id)
            .map(|i| i + 1)
            .unwrap_or(cps.len());
        Ok(cps[after..]
            .iter()
            .rev()
            .find(|cp| cp.workspace_id == workspace && cp.snapshot_id != chosen.snapshot_id)
            .map(|cp| cp.snapshot_id))
    }

    pub(crate) fn choose_files(
        &self,
        lin: &Lineage,
        point: Option<&EntryId>,
        from: &FilesFrom,
        ws: &dyn Files,
        root: &std::path::Path,
    ) -> Result<ChosenFiles> {
        let cand = match from {
            FilesFrom::Auto => point.and_then(|p| lin.at(p)),
            FilesFrom::Entry(e) => lin.of_entry(e),
            FilesFrom::Checkpoint(cp) => {
                let row = self.checkpoint_by_id(cp)?;
                Some(Candidate {
                    entry_id: row.entry_id,
                    checkpoint_id: Some(cp.clone()),
                    meta: None,
                    exact: true,
                    by_id: true,
                })
            }
        };
        let where_ = match (from, point) {
            (FilesFrom::Entry(e), _) => format!("for entry {e}"),
            (_, Some(p)) => format!("at or before entry {p}"),
            (_, None) => "at the start".to_string(),
        };
        let cand = cand.ok_or_else(|| {
            Error::validation(
                format!(
                    "thread {} has no checkpoint {where_}: there are no files to restore; rewind without files",
                    lin.thread.id
                ),
                point.map(|p| p.to_string()),
            )
        })?;
        let chosen = self.inner.read(|c| lin.check(c, &cand, ws.id(), root))?;
        let kept = ws
            .keeps(&chosen.snapshot_id)
            .map_err(|e| Error::files(ws.id(), "look up the checkpoint", e))?;
        if !kept {
            return Err(Error::validation(
                format!(
                    "checkpoint {} (snapshot {}) is no longer kept by workspace {} (it was pruned); \
                     rewind to a later point, or without files",
                    chosen.checkpoint_id,
                    chosen.snapshot_id.short(),
                    ws.id()
                ),
                Some(chosen.checkpoint_id.to_string()),
            ));
        }
        Ok(chosen)
    }
}

/// The entries of the active branch that are not `point` or before it.
/// The entries a rewind to `point` puts back on the active branch: those from the root to
/// `point` that are not on it now, first entry first.
pub(super) fn restored_list(lin: &Lineage, point: Option<&EntryId>) -> Vec<EntryId> {
    let active: HashSet<&EntryId> = lin.active.iter().collect();
    let mut back = Vec::new();
    let mut seen = HashSet::new();
    let mut cur = point.cloned();
    while let Some(id) = cur {
        if !seen.insert(id.clone()) {
            break;
        }
        cur = lin.entries.get(&id).and_then(|l| l.parent_id.clone());
        if !active.contains(&id) {
            back.push(id);
        }
    }
    back.reverse();
    back
}

pub(super) fn cut_list(lin: &Lineage, point: Option<&EntryId>) -> Vec<EntryId> {
    let mut keep = HashSet::new();
    let mut cur = point.cloned();
    while let Some(id) = cur {
        cur = lin.entries.get(&id).and_then(|l| l.parent_id.clone());
        if !keep.insert(id) {
            break;
        }
    }
    lin.active
        .iter()
        .filter(|e| !keep.contains(*e))
        .cloned()
        .collect()
}

/// Plans a restore of the chosen files; the thread database is kept out of it first when it
/// lies beneath the workspace (see [`crate::threads::Inner::keep_out_of`]).
pub(crate) fn plan_restore(
    db: &crate::threads::Inner,
    ws: &dyn Files,
    ch: &ChosenFiles,
) -> Result<FilePlan> {
    db.keep_out_of(ws);
    ws.plan_scoped(&ch.snapshot_id, &ch.scope)
        .map_err(|e| Error::files(ws.id(), "plan the restore", e))
}

pub(crate) fn busy_workspace(ws: &dyn Files, root: Option<&std::path::Path>) -> Error {
    Error::WorkspaceBusy {
        workspace: ws.id().to_string(),
        root: root
            .map(PathBuf::from)
            .unwrap_or_else(|| ws.root().to_path_buf()),
        detail: "a command or hold of the workspace is going on; try again when it is done".into(),
    }
}

/// The files part of a rewind's or fork's report, with the restore's report (`None`: the files
/// were not restored) as the JSON value the report keeps.
pub(crate) fn files_report(
    ch: &ChosenFiles,
    restore: Option<&cairn_restore::Report>,
    safety: Option<cairn_store::SnapshotId>,
) -> FilesReport {
    let restore = restore.map_or(serde_json::Value::Null, |r| {
        serde_json::to_value(r).expect("a restore report always serialises")
    });
    FilesReport {
        entry_id: ch.entry_id.clone(),
        checkpoint_id: ch.checkpoint_id.clone(),
        snapshot_id: ch.snapshot_id,
        exact: ch.exact,
        workspace_id: ch.workspace_id.clone(),
        root: ch.root.clone(),
        safety_snapshot_id: safety,
        before_rewind_checkpoint_id: None,
        restore,
    }
}

pub(super) fn dry_report(
    c: &Conn<'_>,
    lin: &Lineage,
    point: Option<&EntryId>,
    memory: bool,
    chosen: Option<&ChosenFiles>,
    plan: Option<&FilePlan>,
    s: &Survey,
) -> Result<RewindReport> {
    let previous = lin.thread.active_leaf.clone();
    let (conversation, mem, paused, durable) = if memory {
        let cut = cut_list(lin, point);
        let staled = stale_candidates(c, &lin.thread.id, &cut)?;
        (
            ConversationReport {
                rewound: previous.as_ref() != point,
                cut,
                restored: restored_list(lin, point),
                previous_leaf_id: previous,
            },
            MemoryReport { staled },
            s.paused(),
            s.durable(),
        )
    } else {
        (
            ConversationReport {
                previous_leaf_id: previous,
                ..Default::default()
            },
            MemoryReport::default(),
            Vec::new(),
            Vec::new(),
        )
    };
    Ok(RewindReport {
        rewind_id: None,
        thread_id: lin.thread.id.clone(),
        to_entry_id: point.cloned(),
        dry_run: true,
        conversation,
        files: chosen
            .zip(plan)
            .map(|(ch, p)| files_report(ch, Some(&p.report()), None)),
        memory: mem,
        runs: RunsReport {
            going: s.going_ids(),
            interrupted: Vec::new(),
            paused,
            durable,
        },
        recovered: false,
        continuation: None,
    })
}
