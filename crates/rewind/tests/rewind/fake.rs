//! A fake workspace behind the `Files` seam: its files are a map kept in a JSON file beside
//! the root (so a child process sees the same workspace), and every call is recorded.

use cairn_restore::{Plan, Report, Summary};
use cairn_rewind::{CheckpointRequest, FileOutcome, FilePlan, Files, FilesError};
use cairn_store::{ErrorKind, ObjectId, RelPath, SnapshotId, TreeId};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

/// A call the fake saw.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Checkpoint {
        label: String,
        metadata: serde_json::Map<String, serde_json::Value>,
        exclude: Vec<String>,
        max_file_bytes: u64,
    },
    Keeps(SnapshotId),
    Plan(SnapshotId),
    Apply {
        target: SnapshotId,
        key: String,
    },
    Finished {
        key: String,
    },
}

/// Behaviour to inject.
#[derive(Default)]
pub struct Hooks {
    pub fail_checkpoint: bool,
    pub fail_apply: bool,
    pub busy: bool,
    /// Restore the files, then panic before returning (a crash after the files).
    pub panic_after_apply: bool,
    /// Panic before restoring anything (a crash before the files).
    pub panic_before_apply: bool,
    /// Restore the files, then abort the process.
    pub abort_after_apply: bool,
    /// Block inside `apply` until released.
    pub gate: Option<Gate>,
    /// Block inside `checkpoint` until released.
    pub checkpoint_gate: Option<Gate>,
}

/// Blocks `apply`: it says it entered, then waits to be released.
pub struct Gate {
    pub entered: mpsc::Sender<()>,
    pub release: Mutex<mpsc::Receiver<()>>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    files: BTreeMap<String, String>,
    snapshots: BTreeMap<String, BTreeMap<String, String>>,
    journals: BTreeMap<String, Journal>,
    counter: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Journal {
    target: String,
    done: bool,
    outcome: FileOutcome,
}

/// The fake workspace.
pub struct Fake {
    id: String,
    root: PathBuf,
    state_path: PathBuf,
    lock: Mutex<()>,
    pub hooks: Mutex<Hooks>,
    calls: Mutex<Vec<Call>>,
}

impl Fake {
    /// A fake workspace `id` at `root` (created).
    pub fn new(id: &str, root: &Path) -> Fake {
        std::fs::create_dir_all(root).expect("create the fake root");
        let mut state_path = root.as_os_str().to_owned();
        state_path.push(".fake.json");
        Fake {
            id: id.to_string(),
            root: root.to_path_buf(),
            state_path: PathBuf::from(state_path),
            lock: Mutex::new(()),
            hooks: Mutex::new(Hooks::default()),
            calls: Mutex::new(Vec::new()),
        }
    }

    fn load(&self) -> State {
        match std::fs::read(&self.state_path) {
            Ok(bytes) => serde_json::from_slice(&bytes).expect("the fake's state decodes"),
            Err(_) => State::default(),
        }
    }

    fn save(&self, s: &State) {
        let tmp = self.state_path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec(s).expect("encode"))
            .expect("write the fake's state");
        std::fs::rename(&tmp, &self.state_path).expect("rename the fake's state");
    }

    /// Writes a file of the workspace.
    pub fn write(&self, path: &str, content: &str) {
        let _l = self.lock.lock();
        let mut s = self.load();
        s.files.insert(path.to_string(), content.to_string());
        self.save(&s);
    }

    /// Reads a file of the workspace.
    pub fn read(&self, path: &str) -> Option<String> {
        self.load().files.get(path).cloned()
    }

    /// Forgets a snapshot (a pruned checkpoint).
    pub fn prune(&self, id: &SnapshotId) {
        let _l = self.lock.lock();
        let mut s = self.load();
        s.snapshots.remove(&id.to_hex());
        self.save(&s);
    }

    /// How many snapshots it keeps.
    pub fn snapshot_count(&self) -> usize {
        self.load().snapshots.len()
    }

    /// The files of a snapshot.
    pub fn snapshot_files(&self, id: &SnapshotId) -> Option<BTreeMap<String, String>> {
        self.load().snapshots.get(&id.to_hex()).cloned()
    }

    /// The calls seen so far.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().clone()
    }

    /// How many `apply` calls were seen.
    pub fn applies(&self) -> usize {
        self.calls()
            .iter()
            .filter(|c| matches!(c, Call::Apply { .. }))
            .count()
    }

    /// How many `checkpoint` calls were seen.
    pub fn checkpoints(&self) -> usize {
        self.calls()
            .iter()
            .filter(|c| matches!(c, Call::Checkpoint { .. }))
            .count()
    }

    fn record(&self, call: Call) {
        self.calls.lock().push(call);
    }

    fn take(&self, s: &mut State) -> SnapshotId {
        s.counter += 1;
        let id = SnapshotId(ObjectId::of(
            format!(
                "{}-{}-{}",
                self.id,
                s.counter,
                serde_json::to_string(&s.files).expect("encode")
            )
            .as_bytes(),
        ));
        s.snapshots.insert(id.to_hex(), s.files.clone());
        id
    }

    /// What restoring `target` over `current` changes.
    fn diff(current: &BTreeMap<String, String>, target: &BTreeMap<String, String>) -> Summary {
        let restored = target
            .iter()
            .filter(|(k, v)| current.get(*k) != Some(*v))
            .map(|(k, _)| RelPath::from(k.as_str()))
            .collect();
        let deleted = current
            .keys()
            .filter(|k| !target.contains_key(*k))
            .map(|k| RelPath::from(k.as_str()))
            .collect();
        let unchanged = target
            .iter()
            .filter(|(k, v)| current.get(*k) == Some(*v))
            .count() as u64;
        Summary {
            restored,
            deleted,
            unchanged,
            ..Default::default()
        }
    }

    /// A plan of `target` whose changes are `summary`'s (the fake keeps no trees or actions).
    fn plan_of(target: &SnapshotId, summary: Summary) -> Plan {
        let tree = TreeId(ObjectId::of(b"a fake workspace keeps no trees"));
        Plan {
            snapshot_id: *target,
            target_root: tree,
            current_root: tree,
            capture: Default::default(),
            actions: Vec::new(),
            summary,
            reference: None,
            paths: Vec::new(),
            on_drift: Default::default(),
        }
    }
}

fn err(kind: ErrorKind, msg: &str) -> FilesError {
    FilesError::msg(kind, msg)
}

impl Files for Fake {
    fn id(&self) -> &str {
        &self.id
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn checkpoint(&self, request: &CheckpointRequest) -> Result<SnapshotId, FilesError> {
        self.record(Call::Checkpoint {
            label: request.label.clone(),
            metadata: request.metadata.clone(),
            exclude: request.exclude.clone(),
            max_file_bytes: request.max_file_bytes,
        });
        let gate = self.hooks.lock().checkpoint_gate.take();
        if let Some(g) = &gate {
            let _ = g.entered.send(());
            let _ = g.release.lock().recv();
        }
        if self.hooks.lock().fail_checkpoint {
            return Err(err(ErrorKind::Io, "the disk is full"));
        }
        let _l = self.lock.lock();
        let mut s = self.load();
        let id = self.take(&mut s);
        self.save(&s);
        Ok(id)
    }

    fn keeps(&self, snapshot: &SnapshotId) -> Result<bool, FilesError> {
        self.record(Call::Keeps(*snapshot));
        Ok(self.load().snapshots.contains_key(&snapshot.to_hex()))
    }

    fn plan(&self, target: &SnapshotId) -> Result<FilePlan, FilesError> {
        self.record(Call::Plan(*target));
        let s = self.load();
        let want = s
            .snapshots
            .get(&target.to_hex())
            .ok_or_else(|| err(ErrorKind::NotFound, "no such snapshot"))?;
        let summary = Summary {
            busy: self.hooks.lock().busy,
            ..Fake::diff(&s.files, want)
        };
        Ok(FilePlan::new(Fake::plan_of(target, summary)))
    }

    fn apply(&self, plan: &FilePlan, key: &str) -> Result<FileOutcome, FilesError> {
        self.record(Call::Apply {
            target: plan.target(),
            key: key.to_string(),
        });
        let gate = self.hooks.lock().gate.take();
        if let Some(g) = &gate {
            let _ = g.entered.send(());
            let _ = g.release.lock().recv();
        }
        let (fail, panic_before, panic_after, abort_after) = {
            let h = self.hooks.lock();
            (
                h.fail_apply,
                h.panic_before_apply,
                h.panic_after_apply,
                h.abort_after_apply,
            )
        };
        if fail {
            return Err(err(
                ErrorKind::Denied,
                "a directory of another user is in the way",
            ));
        }
        if panic_before {
            panic!("simulated crash before the files");
        }
        let outcome = {
            let _l = self.lock.lock();
            let mut s = self.load();
            let want = s
                .snapshots
                .get(&plan.target().to_hex())
                .cloned()
                .ok_or_else(|| err(ErrorKind::NotFound, "no such snapshot"))?;
            let summary = Fake::diff(&s.files, &want);
            let operations = (summary.restored.len() + summary.deleted.len()) as u64;
            let safety = (operations > 0).then(|| self.take(&mut s));
            let report = Report {
                snapshot_id: plan.target(),
                dry_run: false,
                summary,
                paths: Vec::new(),
                safety_snapshot_id: safety,
                operations,
                as_planned: true,
                journal: None,
                safety_walk: None,
            };
            s.files = want;
            let outcome = FileOutcome {
                report,
                safety_snapshot_id: safety,
            };
            s.journals.insert(
                key.to_string(),
                Journal {
                    target: plan.target().to_hex(),
                    done: true,
                    outcome: outcome.clone(),
                },
            );
            self.save(&s);
            outcome
        };
        if abort_after {
            std::process::abort();
        }
        if panic_after {
            panic!("simulated crash after the files");
        }
        Ok(outcome)
    }

    fn finished(&self, key: &str, target: &SnapshotId) -> Result<Option<FileOutcome>, FilesError> {
        self.record(Call::Finished {
            key: key.to_string(),
        });
        let s = self.load();
        Ok(s.journals
            .get(key)
            .filter(|j| j.done && j.target == target.to_hex())
            .map(|j| j.outcome.clone()))
    }
}
