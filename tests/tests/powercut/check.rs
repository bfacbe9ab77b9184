//! Running `cairn`, recording a workload, and checking every crash state it could leave.

use crate::fs::Mounted;
use crate::model::{CrashState, Model, Op, Record};
use crate::util::{self, Picture, Rng};
use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Set in a child's environment: the test binary runs as `cairn`.
pub const AS_CAIRN: &str = "CAIRN_POWERCUT_AS_CAIRN";

/// The boot the workload runs in, and the one after the power cut (the restore journal tells
/// them apart: an applied restore of another boot is checked path by path).
const BOOT_BEFORE: &str = "powercut-boot-before";
const BOOT_AFTER: &str = "powercut-boot-after";

/// How long one command may take before it counts as wedged.
const WEDGED: Duration = Duration::from_secs(120);

/// Why the explorer cannot run here, if it cannot.
pub fn cannot_run() -> Option<String> {
    if !util::is_root() {
        return Some("mounting the recording FUSE file system needs root".into());
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        Ok(_) => None,
        Err(e) => Some(format!("/dev/fuse cannot be opened ({e})")),
    }
}

/// What a command did.
#[derive(Debug)]
pub struct Out {
    /// Exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cut = |s: &str| -> String {
            let s = s.trim();
            if s.chars().count() > 500 {
                format!("{}…", s.chars().take(500).collect::<String>())
            } else {
                s.to_string()
            }
        };
        write!(
            f,
            "exit {:?}; stdout: {}; stderr: {}",
            self.code,
            cut(&self.stdout),
            cut(&self.stderr)
        )
    }
}

impl Out {
    /// Whether it succeeded.
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// Its standard output as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.stdout, self.stderr))
    }
}

/// The directories of one exploration: the backing directory the file system records over,
/// where it is mounted (and where each crash state is materialised, so every path is the
/// same), and scratch space.
pub struct Lab {
    _dir: tempfile::TempDir,
    /// The backing directory.
    pub backing: PathBuf,
    /// The mount point, then the crash states' root.
    pub mnt: PathBuf,
    /// Scratch workspaces for the restores of each listed snapshot.
    pub scratch: PathBuf,
    boot: &'static str,
    /// Extra environment of the workload's commands (the test-only switch).
    pub env: Vec<(String, String)>,
}

impl Lab {
    /// A new lab (on `/dev/shm` when there is one).
    pub fn new() -> Lab {
        let dir = util::scratch();
        let backing = dir.path().join("backing");
        let mnt = dir.path().join("mnt");
        let scratch = dir.path().join("scratch");
        for d in [&backing, &mnt, &scratch] {
            std::fs::create_dir(d).expect("a lab directory");
        }
        std::fs::create_dir(mnt.join("home")).expect("home");
        std::fs::create_dir(mnt.join("ws")).expect("ws");
        Lab {
            _dir: dir,
            backing,
            mnt,
            scratch,
            boot: BOOT_BEFORE,
            env: Vec::new(),
        }
    }

    /// A path under the root (the mount while recording, the crash state when checking).
    pub fn at(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    /// The workspace.
    pub fn ws(&self) -> PathBuf {
        self.at("ws")
    }

    /// Runs `cairn -C DIR ARGS...` with the lab's data directory; panics past [`WEDGED`].
    pub fn cairn_in(&self, dir: &Path, args: &[&str]) -> Out {
        let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
        cmd.env(AS_CAIRN, "1")
            .env("CAIRN_HOME", self.at("home"))
            .env("CAIRN_TEST_BOOT_ID", self.boot)
            .env_remove("CAIRN_STORE")
            .env_remove("CAIRN_THREADS_DB")
            .env_remove("CAIRN_REMOTE")
            .env_remove("CAIRN_TEST_SKIP_SYNC")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if self.boot == BOOT_BEFORE {
            for (k, v) in &self.env {
                cmd.env(k, v);
            }
        }
        run_bounded(
            cmd,
            &format!("cairn -C {} {}", dir.display(), args.join(" ")),
        )
    }

    /// `cairn -C ws ARGS...`.
    pub fn cairn(&self, args: &[&str]) -> Out {
        self.cairn_in(&self.ws(), args)
    }

    /// `cairn -C ws ARGS...`, which must succeed.
    pub fn must(&self, args: &[&str]) -> Out {
        let out = self.cairn(args);
        assert!(out.ok(), "cairn {}: {out}", args.join(" "));
        out
    }

    fn clear_root(&self) {
        for e in std::fs::read_dir(&self.mnt)
            .expect("list the root")
            .flatten()
        {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                std::fs::remove_dir_all(&p).expect("clear a crash state");
            } else {
                std::fs::remove_file(&p).expect("clear a crash state");
            }
        }
        let _ = std::fs::remove_dir_all(&self.scratch);
        std::fs::create_dir(&self.scratch).expect("scratch");
    }
}

fn run_bounded(mut cmd: Command, what: &str) -> Out {
    let mut child = cmd.spawn().expect("cairn starts");
    let mut so = child.stdout.take().expect("piped");
    let mut se = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut so, &mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut se, &mut s);
        s
    });
    let end = Instant::now() + WEDGED;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for cairn") {
            break s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("wedged: {what} did not end in {} s", WEDGED.as_secs());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Out {
        code: status.code(),
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    }
}

/// What the workload was told, and so what every later crash state must keep.
#[derive(Debug, Clone)]
pub enum Expect {
    /// A snapshot (or checkpoint) returned: its id and the files it holds.
    Snapshot {
        /// The snapshot's id.
        id: String,
        /// The files.
        files: Picture,
    },
    /// An operation that changed the workspace `ws` returned: from then on its files are
    /// `files[index]` of the workload's list of workspace states, or a later one.
    Files {
        /// Which directory under the root.
        ws: &'static str,
        /// The index of its state.
        index: usize,
    },
    /// A thread entry returned.
    Entry {
        /// The directory the thread is opened from.
        ws: &'static str,
        /// The thread.
        thread: String,
        /// The entry.
        entry: String,
    },
    /// A store move returned (the store is found where it went).
    Moved,
    /// A rewind of `thread` began: its entries past the point may leave the active branch.
    Rewinding {
        /// The thread.
        thread: String,
    },
    /// A prune began: these snapshots may be gone.
    Deleted {
        /// The snapshots it deleted.
        ids: Vec<String>,
    },
}

/// A workload being recorded: the lab, the mount, and what it was told.
pub struct Recording<'a> {
    /// The lab.
    pub lab: &'a Lab,
    /// The recording file system (none during the setup, which runs on the plain directory).
    mounted: Option<&'a Mounted>,
    /// The acknowledgements, in order.
    pub acks: Vec<Expect>,
    /// Each workspace's successive legitimate states: (directory, files).
    pub states: Vec<(&'static str, Picture)>,
}

impl Recording<'_> {
    /// Records that the workload was told `e`.
    pub fn ack(&mut self, e: Expect) {
        if let Some(m) = self.mounted {
            m.mark(Op::Ack(self.acks.len()));
        }
        self.acks.push(e);
    }

    /// `cairn --json snapshot` of `ws` (under the root), acknowledged with its files.
    pub fn snapshot(&mut self, ws: &'static str) -> String {
        let dir = self.lab.at(ws);
        let out = self.lab.cairn_in(&dir, &["--json", "snapshot"]);
        assert!(out.ok(), "snapshot: {out}");
        let id = out.json()["id"].as_str().expect("an id").to_string();
        self.ack(Expect::Snapshot {
            id: id.clone(),
            files: util::picture(&dir),
        });
        id
    }

    /// `cairn thread new` in `ws`; returns the thread's id.
    pub fn thread(&mut self, ws: &'static str) -> String {
        let out = self
            .lab
            .cairn_in(&self.lab.at(ws), &["--json", "thread", "new"]);
        assert!(out.ok(), "thread new: {out}");
        let id = out.json()["id"].as_str().expect("a thread id").to_string();
        self.ack(Expect::Entry {
            ws,
            thread: id.clone(),
            entry: id.clone(),
        });
        id
    }

    /// `cairn thread append THREAD --kind user` in `ws`: acknowledged as the entry and its
    /// checkpoint's snapshot; returns the entry's id.
    pub fn append(&mut self, ws: &'static str, thread: &str, text: &str) -> String {
        let dir = self.lab.at(ws);
        let out = self.lab.cairn_in(
            &dir,
            &[
                "--json", "thread", "append", thread, "--kind", "user", "--text", text,
            ],
        );
        assert!(out.ok(), "thread append: {out}");
        let doc = out.json();
        let entry = doc["entry"]["id"]
            .as_str()
            .expect("an entry id")
            .to_string();
        let snap = doc["entry"]["checkpoint"]["snapshot_id"]
            .as_str()
            .expect("a checkpoint")
            .to_string();
        self.ack(Expect::Snapshot {
            id: snap,
            files: util::picture(&dir),
        });
        self.ack(Expect::Entry {
            ws,
            thread: thread.to_string(),
            entry: entry.clone(),
        });
        entry
    }

    /// Makes everything so far durable: call it after the test's own edits of the workspace,
    /// which stand for a user's long since on the disk.
    pub fn barrier(&self) {
        if let Some(m) = self.mounted {
            m.mark(Op::Barrier);
        }
    }

    /// Notes the files of `ws` now as a state it may be left in; returns its index.
    pub fn state(&mut self, ws: &'static str) -> usize {
        let dir = self.lab.at(ws);
        let files = if dir.exists() {
            util::picture(&dir)
        } else {
            Picture::new()
        };
        self.states.push((ws, files));
        self.states.len() - 1
    }
}

/// Counts of one exploration, for the figures.
#[derive(Debug, Default)]
pub struct Explored {
    /// Operations recorded.
    pub ops: usize,
    /// Syncs among them.
    pub syncs: usize,
    /// Places a cut was tried.
    pub cuts: usize,
    /// Distinct crash states checked.
    pub states: usize,
    /// States that broke a property, with what broke.
    pub failures: Vec<String>,
}

thread_local! {
    static FIXED_SEED: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Runs `body` with every exploration in it seeded by `seed` (a recorded case).
pub fn with_seed(seed: u64, body: fn()) {
    FIXED_SEED.with(|s| s.set(Some(seed)));
    let r = std::panic::catch_unwind(body);
    FIXED_SEED.with(|s| s.set(None));
    if let Err(p) = r {
        std::panic::resume_unwind(p);
    }
}

/// How many distinct states to check per workload.
pub fn budget() -> usize {
    if util::long() {
        200
    } else {
        24
    }
}

/// Records a workload: `setup` runs on the mount and all of it counts as durable (the start);
/// `work` is what a power cut interrupts. Then checks up to `budget` distinct crash states;
/// returns the counts and every failure (none expected unless `env` removes a sync).
pub fn explore(
    name: &str,
    env: &[(&str, &str)],
    budget: usize,
    setup: impl FnOnce(&mut Recording<'_>),
    work: impl FnOnce(&mut Recording<'_>),
) -> Explored {
    let mut rng = match FIXED_SEED.with(|s| s.get()) {
        Some(seed) => {
            println!("{name}: CAIRN_SEED={seed} (a recorded case)");
            Rng::new(seed)
        }
        None => Rng::from_env(name),
    };
    let mut lab = Lab::new();
    lab.env = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // The setup runs on the plain directory (at the same paths), all of it the durable start;
    // then its files move to the backing directory and the recorder is mounted over them.
    let mut rec = Recording {
        lab: &lab,
        mounted: None,
        acks: Vec::new(),
        states: Vec::new(),
    };
    setup(&mut rec);
    let n_setup = rec.acks.len();
    let (mut acks, mut states) = (rec.acks, rec.states);
    for e in std::fs::read_dir(&lab.mnt)
        .expect("list the setup")
        .flatten()
    {
        std::fs::rename(e.path(), lab.backing.join(e.file_name())).expect("move the setup");
    }
    let (mounted, base) =
        Mounted::mount(&lab.backing, &lab.mnt).unwrap_or_else(|e| panic!("{name}: {e}"));
    {
        let mut rec = Recording {
            lab: &lab,
            mounted: Some(&mounted),
            acks: std::mem::take(&mut acks),
            states: std::mem::take(&mut states),
        };
        work(&mut rec);
        (acks, states) = (rec.acks, rec.states);
    }
    let ops = mounted.finish();
    lab.boot = BOOT_AFTER;
    if std::env::var_os("CAIRN_POWERCUT_DUMP").is_some() {
        for (i, op) in ops.iter().enumerate() {
            println!("  #{i} {}", describe(op));
        }
    }
    let record = Record::new(ops);
    // The explorer's own check: the whole record applies to the start, every operation.
    let mut full = base.clone();
    let unapplied: Vec<String> = record
        .ops
        .iter()
        .enumerate()
        .filter(|(_, op)| !full.apply(op))
        .map(|(i, op)| format!("#{i} {}", describe(op)))
        .take(5)
        .collect();
    assert!(
        unapplied.is_empty(),
        "{name}: the record does not replay onto its start (a recorder bug): {unapplied:?}"
    );
    let cuts = record.cut_points();
    let mut explored = Explored {
        ops: record.ops.len(),
        syncs: record
            .ops
            .iter()
            .filter(|o| matches!(o, Op::Fsync { .. } | Op::FsyncDir { .. }))
            .count(),
        cuts: cuts.len(),
        ..Explored::default()
    };
    let chosen = choose(&record, &base, &cuts, budget, &mut rng);
    for (state, model) in chosen {
        explored.states += 1;
        lab.clear_root();
        model.materialise(&lab.mnt);
        // The setup's acknowledgements, then the workload's before the cut.
        let acked: Vec<usize> = (0..n_setup).chain(record.acked(state.at)).collect();
        let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check_state(&lab, &acks, &acked, &states)
        }));
        let problem = match verdict {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(p) => Some(
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a panic".into()),
            ),
        };
        if let Some(problem) = problem {
            let lost: Vec<String> = state
                .included
                .iter()
                .enumerate()
                .filter(|(_, inc)| !**inc)
                .take(12)
                .map(|(i, _)| format!("#{i} {}", describe(&record.ops[i])))
                .collect();
            let msg = format!(
                "{name}: the cut before operation {} of {} ({}; {} acknowledged; {} pending, \
                 {} of them lost, first: {lost:?}): {problem}",
                state.at,
                record.ops.len(),
                state.how,
                acked.len(),
                record.pending(state.at),
                state.included.iter().filter(|i| !**i).count(),
            );
            println!("  FAILED STATE {msg}");
            // To look at a failing state by hand: CAIRN_POWERCUT_KEEP=DIR keeps a copy of it.
            if let Some(keep) = std::env::var_os("CAIRN_POWERCUT_KEEP") {
                let to = Path::new(&keep).join(format!("{name}-{}", explored.failures.len()));
                let _ = std::fs::create_dir_all(&to);
                model.materialise(&to);
                println!("  kept as {}", to.display());
            }
            explored.failures.push(msg);
        }
    }
    lab.clear_root();
    println!(
        "  {name}: {} operations, {} syncs, {} cut points, {} crash states checked, {} failed",
        explored.ops,
        explored.syncs,
        explored.cuts,
        explored.states,
        explored.failures.len()
    );
    explored
}

fn describe(op: &Op) -> String {
    match op {
        Op::Write { ino, offset, data } => format!("write ino {ino} @{offset} +{}", data.len()),
        other => format!("{other:?}"),
    }
}

/// Picks up to `budget` distinct states: first, at every acknowledgement, the one with only
/// what was synced (where a missing sync loses the most); then seeded random ones: a cut point,
/// and there what was synced plus nothing, everything, a prefix or a random subset of what was
/// pending.
fn choose(
    record: &Record,
    base: &Model,
    cuts: &[usize],
    budget: usize,
    rng: &mut Rng,
) -> Vec<(CrashState, Model)> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut consider = |s: CrashState, out: &mut Vec<(CrashState, Model)>| {
        let m = record.build(base, &s);
        if seen.insert((m.digest(), record.acked(s.at).len())) {
            out.push((s, m));
        }
    };
    let acks: Vec<usize> = record
        .ops
        .iter()
        .enumerate()
        .filter(|(_, o)| matches!(o, Op::Ack(_)))
        .map(|(i, _)| i + 1)
        .collect();
    for &at in &acks {
        if out.len() >= budget {
            break;
        }
        consider(record.minimal(at), &mut out);
    }
    let mut tries = 0;
    while out.len() < budget && tries < budget * 40 {
        tries += 1;
        let at = cuts[rng.below(cuts.len() as u64) as usize];
        let s = match rng.below(8) {
            0 => record.minimal(at),
            1 => record.everything(at),
            2 | 3 => record.prefix(at, rng.below(at as u64 + 1) as usize),
            _ => {
                let p = 1 + rng.below(3);
                record.subset(at, &mut |n| rng.below(n), p)
            }
        };
        consider(s, &mut out);
    }
    out
}

/// Opens one crash state as a user would after the reboot, and checks the properties.
fn check_state(
    lab: &Lab,
    acks: &[Expect],
    acked: &[usize],
    states: &[(&'static str, Picture)],
) -> Result<(), String> {
    let mut dirs: Vec<&'static str> = vec!["ws"];
    for (ws, _) in states {
        if !dirs.contains(ws) {
            dirs.push(ws);
        }
    }
    let mut all_ids: HashSet<String> = HashSet::new();
    for ws in &dirs {
        let dir = lab.at(ws);
        if !dir.exists() {
            continue;
        }
        // 1. recover: finishes what a restore left, and must not fail.
        let out = lab.cairn_in(&dir, &["recover"]);
        if !out.ok() && !out.stderr.contains("no Cairn store") {
            return Err(format!("`cairn recover` in {ws} failed: {out}"));
        }
    }
    let with_store =
        |args: &[&str]| -> Vec<String> { args.iter().map(|s| s.to_string()).collect() };
    let run = |ws: &str, args: Vec<String>| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        lab.cairn_in(&lab.at(ws), &a)
    };
    for ws in &dirs {
        if !lab.at(ws).exists() {
            continue;
        }
        // 2. list: every acknowledged snapshot of this store is there.
        let out = run(ws, with_store(&["--json", "list"]));
        if !out.ok() {
            // No store (yet): no snapshot of it is listed, which the check of what was
            // acknowledged below judges.
            if out.stderr.contains("no Cairn store") {
                continue;
            }
            return Err(format!("`cairn list` in {ws} failed: {out}"));
        }
        let ids: Vec<String> = out.json()["snapshots"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s["id"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        // 3. verify.
        let v = run(ws, with_store(&["verify"]));
        if !v.ok() {
            return Err(format!("`cairn verify` in {ws} failed: {v}"));
        }
        // 4. every listed snapshot restores, into a scratch workspace of the same store.
        for (i, id) in ids.iter().enumerate() {
            let scratch = lab.scratch.join(format!("{ws}-{i}"));
            std::fs::create_dir_all(&scratch).expect("a scratch workspace");
            let info = run(ws, vec!["--json".into(), "info".into()]);
            let store_of_ws = info.json()["store"].as_str().map(str::to_string);
            let Some(store_of_ws) = store_of_ws else {
                return Err(format!("no store for {ws}"));
            };
            let out = lab.cairn_in(&scratch, &["--store", &store_of_ws, "restore", id, "--yes"]);
            if !out.ok() {
                return Err(format!("restoring listed snapshot {id} of {ws}: {out}"));
            }
            let want = acks.iter().find_map(|e| match e {
                Expect::Snapshot { id: s, files } if s == id => Some(files),
                _ => None,
            });
            if let Some(want) = want {
                if &util::picture(&scratch) != want {
                    return Err(format!("snapshot {id} restores other files than it took"));
                }
            }
        }
        all_ids.extend(ids);
    }
    // 5. every acknowledged snapshot is listed, unless an acknowledged prune deleted it.
    let deleted: HashSet<&String> = acked
        .iter()
        .flat_map(|&a| match &acks[a] {
            Expect::Deleted { ids } => ids.iter().collect(),
            _ => Vec::new(),
        })
        .collect();
    for &a in acked {
        if let Expect::Snapshot { id, .. } = &acks[a] {
            if !all_ids.contains(id) && !deleted.contains(id) {
                return Err(format!("acknowledged snapshot {id} is gone"));
            }
        }
    }
    // 6. each workspace holds a state it may be in: after its last acknowledged change, one
    // of the states from there on; never a mix.
    for ws in &dirs {
        let legit: Vec<usize> = (0..states.len()).filter(|&i| states[i].0 == *ws).collect();
        if legit.is_empty() {
            continue;
        }
        let from = acked
            .iter()
            .filter_map(|&a| match &acks[a] {
                Expect::Files { ws: w, index } if w == ws => Some(*index),
                _ => None,
            })
            .max();
        let allowed: Vec<usize> = legit
            .into_iter()
            .filter(|&i| from.is_none_or(|f| i >= f))
            .collect();
        let dir = lab.at(ws);
        let now = if dir.exists() {
            util::picture(&dir)
        } else {
            Picture::new()
        };
        if !allowed.iter().any(|&i| states[i].1 == now) {
            let staged = if dir.exists() {
                util::staged_leftovers(&dir)
            } else {
                Vec::new()
            };
            let differ: Vec<String> = allowed
                .iter()
                .map(|&i| {
                    let want = &states[i].1;
                    let mut d: Vec<String> = want
                        .keys()
                        .chain(now.keys())
                        .filter(|k| want.get(*k) != now.get(*k))
                        .map(|k| String::from_utf8_lossy(k).into_owned())
                        .collect();
                    d.sort();
                    d.dedup();
                    d.truncate(8);
                    format!("state {i} differs at {d:?}")
                })
                .collect();
            return Err(format!(
                "the files of {ws} after recover are none of the states it may be in \
                 ({differ:?}; staged files left: {staged:?})"
            ));
        }
    }
    // 7. the thread database agrees with the store: every checkpoint an entry names is a
    // snapshot that exists; every acknowledged entry is there.
    for ws in &dirs {
        if !lab.at(ws).exists() {
            continue;
        }
        let out = run(ws, with_store(&["--json", "thread", "list"]));
        if !out.ok() {
            if out.stderr.contains("no Cairn store") || out.stderr.contains("NOT_FOUND") {
                continue;
            }
            return Err(format!("`cairn thread list` in {ws}: {out}"));
        }
        let threads: Vec<String> = out.json()["threads"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t["id"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        for t in threads {
            let out = run(ws, with_store(&["--json", "thread", "log", &t]));
            if !out.ok() {
                return Err(format!("`cairn thread log {t}` in {ws}: {out}"));
            }
            let mut named = Vec::new();
            snapshot_ids_in(&out.json(), &mut named);
            for id in named {
                if !all_ids.contains(&id) {
                    return Err(format!(
                        "thread {t} names checkpoint snapshot {id}, which no store lists"
                    ));
                }
            }
        }
    }
    let rewound: HashSet<&String> = acked
        .iter()
        .filter_map(|&a| match &acks[a] {
            Expect::Rewinding { thread } => Some(thread),
            _ => None,
        })
        .collect();
    for &a in acked {
        if let Expect::Entry { ws, thread, entry } = &acks[a] {
            // A rewound thread keeps its entries, off its active branch: the thread is there.
            let entry = if rewound.contains(thread) {
                thread
            } else {
                entry
            };
            let out = run(ws, with_store(&["--json", "thread", "log", thread]));
            if !out.ok() || !out.stdout.contains(entry.as_str()) {
                return Err(format!(
                    "acknowledged entry {entry} of thread {thread} is gone: {out}"
                ));
            }
        }
    }
    Ok(())
}

fn snapshot_ids_in(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x.as_str()) {
                    ("snapshot_id", Some(s)) => out.push(s.to_string()),
                    _ => snapshot_ids_in(x, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| snapshot_ids_in(x, out)),
        _ => {}
    }
}

/// Shortens an `OsStr` for messages.
#[allow(dead_code)]
pub fn show(s: &OsStr) -> String {
    s.to_string_lossy().into_owned()
}
