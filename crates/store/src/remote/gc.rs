//! The remote's collector: what no manifest of any machine names, listed as candidates, and
//! removed once past their grace period and no lease spares them.

use super::*;

/// A deletion candidate in the collector's list.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(super) struct Candidate {
    /// `packs/<id>` (the pack and its index), `large/<id>` or `packs/<id>.pack` (a pack whose
    /// index never arrived).
    pub(super) key: String,
    /// When the list that first named it was published (the remote's clock), in ms; 0 in the
    /// list being written (the next collection reads the time from the object itself).
    pub(super) marked_ms: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct CandidateList {
    pub(super) version: u32,
    pub(super) candidates: Vec<Candidate>,
}

pub(super) fn read_candidates(remote: &dyn Remote) -> Result<(CandidateList, i64)> {
    match remote.get(CANDIDATES_KEY)? {
        None => Ok((CandidateList::default(), 0)),
        Some((bytes, modified_ms)) => {
            let list: CandidateList = serde_json::from_slice(&bytes).map_err(|e| {
                remote_err(
                    remote,
                    "read the collector's candidates",
                    format!(
                        "{CANDIDATES_KEY} does not parse ({e}); delete it to start marking afresh"
                    ),
                )
            })?;
            Ok((list, modified_ms))
        }
    }
}

/// How a collection of the remote runs.
#[derive(Debug, Clone)]
pub struct RemoteGcOptions {
    /// An object is deleted only once it is older than this, and only when a collection at
    /// least this long before marked it as a candidate. Default: one hour.
    pub grace: Duration,
    /// How far the clocks of the machines sharing the remote may differ. A lease counts as
    /// live until its expiry plus this, and a lease taken less than this after a candidate was
    /// marked still keeps it. Default: one minute.
    pub clock_skew: Duration,
    /// Compute and report, delete nothing, write no candidates.
    pub dry_run: bool,
}

impl Default for RemoteGcOptions {
    fn default() -> Self {
        RemoteGcOptions {
            grace: Duration::from_secs(3600),
            clock_skew: Duration::from_secs(60),
            dry_run: false,
        }
    }
}

/// What a collection of the remote did.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[non_exhaustive]
pub struct RemoteGcReport {
    /// Manifests marked (including those written during the run).
    pub snapshots: usize,
    /// Manifests that appeared while the collection ran (marked too).
    pub snapshots_during_run: usize,
    /// Objects reachable from them.
    pub reachable_objects: usize,
    /// Snapshots whose objects could not all be read: nothing was deleted.
    pub unreadable: Vec<Unreadable>,
    /// Leases live during the run.
    pub live_leases: usize,
    /// Unreachable packs and large objects listed as candidates after the run.
    pub candidates: usize,
    /// Candidates kept this time because a lease older than their marking is still live.
    pub kept_for_leases: usize,
    /// Candidates kept because they were marked, or written, less than `grace` ago.
    pub kept_for_grace: usize,
    /// Packs deleted (each with its index).
    pub packs_deleted: usize,
    /// Large objects deleted.
    pub large_deleted: usize,
    /// Bytes the remote shrank by.
    pub bytes_freed: u64,
}

/// Collects garbage on the remote of `store`, in two phases: objects that no manifest reaches
/// are *marked* (listed in `gc/candidates`, and writers stop reusing them); a later collection
/// deletes a candidate only when it is still unreachable, is older than `grace`, was marked at
/// least `grace` ago, and no lease live now began before it was marked (such an operation may
/// have reused it). Manifests written while the collection runs are marked before anything is
/// deleted. Several collectors may run at once: a candidate's marking time is only ever kept or
/// delayed. Refused (`UNSUPPORTED`) on a store without a remote.
pub fn collect(store: &Store, options: &RemoteGcOptions) -> Result<RemoteGcReport> {
    let mirror = store.mirror().ok_or_else(|| Error::Unsupported {
        what: format!("collecting a remote on {}", store.path().display()),
        detail: "this store has no remote; use gc::sweep".into(),
    })?;
    let remote = mirror.remote();
    let mut report = RemoteGcReport::default();
    let skew = options.clock_skew.as_millis() as i64;
    let grace = options.grace.as_millis() as i64;

    // Leases first: an operation that begins after this point reads the candidates we publish
    // (or the previous ones) and does not reuse them.
    let now = fsutil::now_ms();
    let mut live_lease_starts = Vec::new();
    for o in remote.list("leases/")? {
        let Some((bytes, modified_ms)) = remote.get(&o.key)? else {
            continue;
        };
        match serde_json::from_slice::<LeaseInfo>(&bytes) {
            Ok(l) if l.expires_ms + skew > now => live_lease_starts.push(l.started_ms),
            Ok(_) => {}
            // A lease that does not parse counts as live for a grace period after its writing.
            Err(_) if modified_ms + grace > now => live_lease_starts.push(0),
            Err(_) => {}
        }
    }
    report.live_leases = live_lease_starts.len();
    let (previous, published_ms) = read_candidates(remote)?;
    let mut marked: HashMap<String, i64> = HashMap::new();
    for c in previous.candidates {
        let t = if c.marked_ms == 0 {
            published_ms
        } else {
            c.marked_ms
        };
        marked.insert(c.key, t);
    }

    // The remote's objects, then every manifest.
    store.refresh()?;
    let mut objects: BTreeMap<String, RemoteObject> = BTreeMap::new();
    for o in remote
        .list("packs/")?
        .into_iter()
        .chain(remote.list("large/")?)
    {
        objects.insert(o.key.clone(), o);
    }
    let mut reachable = HashSet::new();
    let mut seen_manifests = HashSet::new();
    mark_manifests(
        store,
        mirror,
        &mut seen_manifests,
        &mut reachable,
        &mut report,
    )?;

    let unreachable = |reachable: &HashSet<ObjectId>| -> BTreeMap<String, (u64, i64, Vec<String>)> {
        let mut out = BTreeMap::new();
        let packs: HashMap<ObjectId, _> = store.packs().into_iter().map(|p| (p.id, p)).collect();
        for (key, o) in &objects {
            if let Some(id) = id_in(key, "packs/", ".idx") {
                let live = match packs.get(&id) {
                    // An entry that cannot be read: keep the pack.
                    Some(p) => p
                        .index
                        .entries()
                        .any(|e| e.map_or(true, |e| reachable.contains(&e.id))),
                    // An index we could not load: keep the pack.
                    None => true,
                };
                if !live {
                    let pack = objects.get(&pack_key(&id, "pack"));
                    let size = o.size + pack.map(|p| p.size).unwrap_or(0);
                    let modified = pack
                        .map(|p| p.modified_ms.max(o.modified_ms))
                        .unwrap_or(o.modified_ms);
                    out.insert(
                        format!("packs/{}", id.to_hex()),
                        (
                            size,
                            modified,
                            vec![pack_key(&id, "idx"), pack_key(&id, "pack")],
                        ),
                    );
                }
            } else if let Some(id) = id_in(key, "packs/", ".pack") {
                if !objects.contains_key(&pack_key(&id, "idx")) {
                    out.insert(key.clone(), (o.size, o.modified_ms, vec![key.clone()]));
                }
            } else if let Some(id) = id_in(key, "large/", "") {
                if !reachable.contains(&id) {
                    out.insert(key.clone(), (o.size, o.modified_ms, vec![key.clone()]));
                }
            }
        }
        out
    };
    let mut dead = unreachable(&reachable);
    if !report.unreadable.is_empty() {
        // What an unreadable snapshot reaches is unknown: delete nothing, mark nothing new.
        report.candidates = marked.len();
        return Ok(report);
    }

    // Candidates that may go now.
    let mut to_delete = Vec::new();
    for (key, (_, modified, _)) in &dead {
        let Some(&marked_ms) = marked.get(key) else {
            continue;
        };
        if now - marked_ms < grace || now - modified < grace {
            report.kept_for_grace += 1;
            continue;
        }
        if live_lease_starts.iter().any(|&s| s <= marked_ms + skew) {
            report.kept_for_leases += 1;
            continue;
        }
        to_delete.push(key.clone());
    }

    // Manifests written during the run keep what they reach.
    let before = seen_manifests.len();
    mark_manifests(
        store,
        mirror,
        &mut seen_manifests,
        &mut reachable,
        &mut report,
    )?;
    report.snapshots_during_run = seen_manifests.len() - before;
    if !report.unreadable.is_empty() {
        report.candidates = marked.len();
        return Ok(report);
    }
    if report.snapshots_during_run > 0 {
        store.refresh()?;
        let still = unreachable(&reachable);
        to_delete.retain(|k| still.contains_key(k));
        dead = still;
    }
    report.reachable_objects = reachable.len();
    report.snapshots = seen_manifests.len();

    if options.dry_run {
        report.candidates = dead.len();
        return Ok(report);
    }
    let mut deleted = HashSet::new();
    for key in &to_delete {
        let (size, _, keys) = &dead[key];
        for k in keys {
            remote.delete(k)?;
        }
        deleted.insert(key.clone());
        report.bytes_freed += size;
        if key.starts_with("large/") {
            report.large_deleted += 1;
        } else {
            report.packs_deleted += 1;
        }
    }
    let list = CandidateList {
        version: FORMAT_VERSION,
        candidates: dead
            .keys()
            .filter(|k| !deleted.contains(*k))
            .map(|k| Candidate {
                key: k.clone(),
                marked_ms: marked.get(k).copied().unwrap_or(0),
            })
            .collect(),
    };
    report.candidates = list.candidates.len();
    let body = serde_json::to_vec(&list).expect("a candidate list always serialises");
    remote.put(CANDIDATES_KEY, body)?;
    if !deleted.is_empty() {
        store.refresh()?;
    }
    Ok(report)
}

/// Marks every remote manifest not in `seen`.
pub(super) fn mark_manifests(
    store: &Store,
    mirror: &Mirror,
    seen: &mut HashSet<SnapshotId>,
    reachable: &mut HashSet<ObjectId>,
    report: &mut RemoteGcReport,
) -> Result<()> {
    let mut new = Vec::new();
    for id in mirror.manifest_ids()? {
        if seen.insert(id) {
            new.push(id);
        }
    }
    if !new.is_empty() {
        // Packs uploaded with these manifests.
        store.refresh()?;
    }
    for id in new {
        let m = match store.read_manifest(&id) {
            Ok(m) => m,
            Err(e) if e.is_not_found() => continue,
            Err(e) => {
                report.unreadable.push(Unreadable {
                    snapshot: id,
                    error: e.to_string(),
                });
                continue;
            }
        };
        if let Err(e) = mark_tree(store, m.root, reachable) {
            report.unreadable.push(Unreadable {
                snapshot: id,
                error: e.to_string(),
            });
        }
    }
    Ok(())
}
