//! A snapshot answered by `cairn watch` against `git status` and the walk, side by side on
//! trees of several sizes in one run (issue 23):
//!
//! ```text
//! cargo build --release -p cairn-cli
//! cargo run --release -p cairn-benches --bin watch_loop -- [--files 57000,500000]
//!     [--dir PATH[,PATH]] [--in-place DIR[,DIR]] [--runs 11] [--seed 1] [--cairn PATH]
//!     [--watcher on|off]
//! ```
//!
//! Trees, measured one after the other in the same run: each `--dir` copied first (`cp -a`, so
//! it is never modified), each `--in-place` used as it is (it gets a `.git`, and the 10-changed
//! scenario edits its files), then each `--files` count generated. With none of these, a
//! generated tree the size of tc39/test262 (57,000 files) and one of 500,000: a long run.
//!
//! Per tree: `git init`, add and commit everything (the machine's and user's configuration
//! ignored, untracked cache on), `git status` twice to warm; a store and a `CAIRN_HOME` outside
//! the tree; two walking snapshots (untimed); `cairn watch` started once and kept running, ready
//! when `cairn --json watch --status` exits 0 saying `"running": true` (polled, never a fixed
//! sleep), and one watched snapshot (untimed). Each run then times three whole processes, the
//! CLI's start included, in an order rotated every run:
//!
//! 1. `git status --porcelain`;
//! 2. `cairn --json snapshot` with `CAIRN_WATCH=off`: the walk, the watcher ignored;
//! 3. `cairn --json snapshot`: answered by the watcher;
//!
//! in three scenarios, run in this order: **10 changed, at once** (`gen::mutate` modifies 10
//! files, and the three processes run right after: the watcher has had no time to walk
//! ahead); **10 changed** (10 other files, then 2.1 s of rest so nobody sees racy files: a
//! watcher walks ahead once its racy window, 2 s, has passed since the last change, and
//! answers with that walk, as it would a checkpoint taken before a user's next message); and
//! **nothing changed**. The watched snapshot's root tree must equal
//! the walk's of the same scenario (nothing changes between them), or the bench fails; the
//! watched snapshots' `stats.walked`, `stats.walk_reason` and whether they were walked ahead
//! (`stats.walked_ahead_ms`) are tallied, and a timed one that
//! walked the whole tree is printed as a finding. After the runs, the watcher's VmRSS (and its
//! RssAnon, the part that is not file pages mapped) and VmHWM
//! (from `/proc/PID/status`), its `watches` and the bytes of its own tables, and its processor
//! use over 10 s in which nothing changes, then its VmRSS and RssAnon again, idle (it gives
//! back what its snapshots left once idle for 3 s); then it is stopped with SIGTERM.
//!
//! It prints medians (ms), each contender's median by its place in the run (first, right after
//! the edits, or after another contender: a watcher stores 10 changed files' objects 20 ms
//! after the edits, so a snapshot asked for after `git status` or the walk finds them stored),
//! the ratios of medians to `git status`, each tree's watched median against the first
//! tree's, and markdown tables ready for docs/PERFORMANCE.md.
//! `--watcher off` leaves the watcher out (a CLI without `cairn watch`): git and the walk only.

use cairn_benches::cli::{self, Args};
use cairn_benches::gen::{self, Kind};
use cairn_store::{SnapshotId, Store, StoreOptions, TreeId};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: watch_loop [--files 57000,500000] [--dir PATH[,PATH]] \
                     [--in-place DIR[,DIR]] [--runs 11] [--seed 1] [--cairn PATH] \
                     [--watcher on|off]";

/// How often `watch --status` is asked whether the watcher is ready.
const POLL: Duration = Duration::from_millis(25);

/// How long a watcher may take to be ready (it reads the whole tree once).
const READY_TIMEOUT: Duration = Duration::from_secs(900);

/// How long a watcher may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// How long the watcher's idle processor use is measured over.
const IDLE_SECONDS: u64 = 10;

const SCENARIOS: [&str; 3] = ["nothing changed", "10 changed", "10 changed, at once"];
/// The scenarios' order within a run: the edits asked about at once first, so that the rest
/// after the next edits lets the watcher walk ahead past both (a snapshot asked for at once
/// leaves its directories to be looked at again by the next question, see
/// `cairn_snapshot::watch`), and nothing changed last, after a snapshot taken at rest.
const RUN_ORDER: [usize; 3] = [2, 1, 0];
const CONTENDERS: [&str; 3] = ["git status", "walk", "watched"];
const GIT: usize = 0;
const WALK: usize = 1;
const WATCHED: usize = 2;

fn main() {
    cli::main(
        "watch_loop",
        USAGE,
        &[
            "files", "dir", "in-place", "runs", "seed", "cairn", "watcher",
        ],
        run,
    );
}

/// The first of `paths` (each a list of keys into nested objects) that `v` holds.
fn field<'a>(v: &'a serde_json::Value, paths: &[&[&str]]) -> Option<&'a serde_json::Value> {
    paths.iter().find_map(|path| {
        let found = path.iter().fold(v, |v, key| &v[*key]);
        (!found.is_null()).then_some(found)
    })
}

/// What the harness reads from `cairn --json snapshot`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SnapshotOut {
    id: String,
    /// `stats.walked` (or `walk.walked`): "none", "partial" or "full"; `None` from a CLI that
    /// does not say.
    walked: Option<String>,
    /// `stats.walk_reason` (or `walk.reason`), when given.
    walk_reason: Option<String>,
    /// Directories whose entries it listed (`stats.listed` or `walk.listed`), when given.
    listed: Option<u64>,
    /// Directories of which it looked only at the entries the watcher named (`stats.named`
    /// or `walk.named`), when given.
    named: Option<u64>,
    /// `stats.walked_ahead_ms`: the watcher walked it ahead, this long before it was asked.
    ahead_ms: Option<u64>,
    hashed: u64,
}

impl SnapshotOut {
    fn parse(json: &str) -> Result<SnapshotOut, String> {
        let v: serde_json::Value =
            serde_json::from_str(json).map_err(|e| format!("snapshot JSON {json:?}: {e}"))?;
        let text = |paths: &[&[&str]]| field(&v, paths).and_then(|x| x.as_str().map(String::from));
        Ok(SnapshotOut {
            id: text(&[&["id"]]).ok_or_else(|| format!("snapshot JSON has no id: {json}"))?,
            walked: text(&[&["stats", "walked"], &["walk", "walked"]]),
            walk_reason: text(&[&["stats", "walk_reason"], &["walk", "reason"]]),
            listed: field(&v, &[&["stats", "listed"], &["walk", "listed"]])
                .and_then(|x| x.as_u64()),
            named: field(&v, &[&["stats", "named"], &["walk", "named"]]).and_then(|x| x.as_u64()),
            ahead_ms: field(&v, &[&["stats", "walked_ahead_ms"], &["walk", "ahead_ms"]])
                .and_then(|x| x.as_u64()),
            hashed: v["stats"]["hashed"].as_u64().unwrap_or(0),
        })
    }

    /// How the tally names it: `partial`, `partial, walked ahead`, `full (no watcher)`,
    /// `(not said)`.
    fn walk_key(&self) -> String {
        let walked = match (&self.walked, self.ahead_ms) {
            (Some(w), Some(_)) => Some(format!("{w}, walked ahead")),
            (w, _) => w.clone(),
        };
        match (walked, &self.walk_reason) {
            (None, _) => "(not said)".to_string(),
            (Some(w), None) => w,
            (Some(w), Some(r)) => format!("{w} ({r})"),
        }
    }

    /// `hashed` files, `/listed` directories and `/named` ones when said: `10/12/3`.
    fn cost(&self) -> String {
        match (self.listed, self.named) {
            (Some(l), Some(n)) => format!("{}/{l}/{n}", self.hashed),
            (Some(l), None) => format!("{}/{l}", self.hashed),
            _ => self.hashed.to_string(),
        }
    }
}

/// What the harness reads from `cairn --json watch --status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WatchStatus {
    running: bool,
    pid: Option<u32>,
    /// `watches`, or `watch.watches`.
    watches: Option<u64>,
    /// Processor time the daemon used (`cpu_ms`), when it says.
    cpu_ms: Option<u64>,
    /// Bytes the watcher's own tables take (`watch.table_bytes`), when it says.
    table_bytes: Option<u64>,
}

impl WatchStatus {
    fn parse(json: &str) -> Result<WatchStatus, String> {
        let v: serde_json::Value =
            serde_json::from_str(json).map_err(|e| format!("watch --status JSON {json:?}: {e}"))?;
        let number = |paths: &[&[&str]]| field(&v, paths).and_then(|x| x.as_u64());
        Ok(WatchStatus {
            running: v["running"] == true,
            pid: number(&[&["pid"]]).and_then(|p| u32::try_from(p).ok()),
            watches: number(&[&["watches"], &["watch", "watches"]]),
            cpu_ms: number(&[&["cpu_ms"]]),
            table_bytes: number(&[&["watch", "table_bytes"]]),
        })
    }
}

/// A `/proc/PID/status` field in kB (`VmRSS:    1234 kB`), as KiB.
fn proc_status_kib(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// `kib` KiB in MiB, for the tables.
fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Counts of each walk key, printed as `partial: 10, full (first): 1`.
#[derive(Debug, Default)]
struct Tally(BTreeMap<String, usize>);

impl Tally {
    fn add(&mut self, key: String) {
        *self.0.entry(key).or_default() += 1;
    }

    fn show(&self) -> String {
        if self.0.is_empty() {
            return "-".to_string();
        }
        let parts: Vec<String> = self.0.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        parts.join(", ")
    }
}

/// How to run the CLI on one tree: its root, its store and a `CAIRN_HOME` of its own; the
/// walking contender has a store (so a stat cache) of its own too, so that neither snapshot
/// finds the stat cache the other just wrote: each is timed in its own steady state, as a
/// user with or without a watcher would meet it.
struct Cairn<'a> {
    bin: &'a Path,
    tree: &'a Path,
    store: PathBuf,
    walk_store: PathBuf,
    home: PathBuf,
}

impl Cairn<'_> {
    fn command(&self, args: &[&str]) -> Command {
        self.command_in(&self.store, args)
    }

    fn command_in(&self, store: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(self.bin);
        c.arg("-C")
            .arg(self.tree)
            .arg("--store")
            .arg(store)
            .args(args)
            .env("CAIRN_HOME", &self.home)
            .env_remove("CAIRN_STORE")
            .env_remove("CAIRN_REMOTE")
            .env_remove("CAIRN_THREADS_DB")
            .env_remove("CAIRN_WATCH");
        c
    }

    /// One snapshot, a whole process: its output and the milliseconds it took. `walk` sets
    /// `CAIRN_WATCH=off`, so the snapshot walks even with a watcher running.
    fn snapshot(&self, walk: bool) -> Result<(SnapshotOut, f64), String> {
        let mut c = if walk {
            let mut c = self.command_in(&self.walk_store, &["--json", "snapshot"]);
            c.env("CAIRN_WATCH", "off");
            c
        } else {
            self.command(&["--json", "snapshot"])
        };
        let t = Instant::now();
        let out = cli::output(&mut c)?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let snap = SnapshotOut::parse(&out)?;
        if walk && snap.walked.as_deref().is_some_and(|w| w != "full") {
            return Err(format!(
                "a snapshot with CAIRN_WATCH=off said it walked {:?}: the variable is not \
                 honoured, so the walk cannot be timed beside the watcher",
                snap.walk_key()
            ));
        }
        Ok((snap, ms))
    }

    /// `watch --status`, or `None` while it fails (no watcher yet).
    fn watch_status(&self) -> Result<Option<WatchStatus>, String> {
        let out = self
            .command(&["--json", "watch", "--status"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", self.bin.display()))?;
        if !out.status.success() {
            return Ok(None);
        }
        WatchStatus::parse(&String::from_utf8_lossy(&out.stdout)).map(Some)
    }
}

/// A `cairn watch` this harness started: stopped (SIGTERM, then SIGKILL) when dropped, so an
/// error leaves no watcher behind.
struct Watcher {
    child: Child,
    log: PathBuf,
    /// The pid `watch --status` names, when it is not the child's (a watcher that forks).
    other_pid: Option<u32>,
}

impl Watcher {
    /// Starts the watcher and waits until `watch --status` says it runs; returns it with the
    /// milliseconds that took and the first status that said so.
    fn start(cairn: &Cairn, log: PathBuf) -> Result<(Watcher, f64, WatchStatus), String> {
        let out = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let t = Instant::now();
        let child = cairn
            .command(&["watch"])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("{}: {e}", cairn.bin.display()))?;
        let mut w = Watcher {
            child,
            log,
            other_pid: None,
        };
        loop {
            if let Some(s) = cairn.watch_status()? {
                if s.running {
                    let ms = t.elapsed().as_secs_f64() * 1e3;
                    w.other_pid = s.pid.filter(|&p| p != w.child.id());
                    return Ok((w, ms, s));
                }
            }
            if let Some(status) = w.child.try_wait().map_err(|e| format!("wait: {e}"))? {
                // A watcher that forks leaves its child serving: keep asking until the timeout.
                if !status.success() {
                    return Err(format!(
                        "`cairn watch` exited with {status} before it was ready: {}",
                        w.log_tail()
                    ));
                }
            }
            if t.elapsed() > READY_TIMEOUT {
                return Err(format!(
                    "`cairn watch` was not ready after {READY_TIMEOUT:?}: {}",
                    w.log_tail()
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    /// The pid serving the snapshots.
    fn pid(&self) -> u32 {
        self.other_pid.unwrap_or_else(|| self.child.id())
    }

    /// The last lines the watcher wrote.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        if tail.is_empty() {
            "(it wrote nothing)".to_string()
        } else {
            tail
        }
    }

    /// VmRSS, VmHWM and RssAnon (its heap and stacks; the rest of VmRSS is file pages
    /// mapped, such as the pack indexes, which the kernel may drop) of the serving process,
    /// in KiB.
    fn memory(&self) -> Result<(u64, u64, u64), String> {
        let path = format!("/proc/{}/status", self.pid());
        let status = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
        let field =
            |f: &str| proc_status_kib(&status, f).ok_or_else(|| format!("{path} has no {f} in kB"));
        Ok((field("VmRSS")?, field("VmHWM")?, field("RssAnon")?))
    }

    /// SIGTERM to the processes this harness started, then waits; SIGKILL after
    /// [`STOP_TIMEOUT`]. Returns how the child ended.
    fn stop(&mut self) -> Result<String, String> {
        let pids = [Some(self.child.id()), self.other_pid];
        for pid in pids.into_iter().flatten() {
            let Some(p) = i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            else {
                continue;
            };
            // An error is a process already gone.
            let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
        }
        let t = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().map_err(|e| format!("wait: {e}"))? {
                return Ok(status.to_string());
            }
            if t.elapsed() > STOP_TIMEOUT {
                self.child.kill().map_err(|e| format!("kill: {e}"))?;
                self.child.wait().map_err(|e| format!("wait: {e}"))?;
                return Ok(format!("killed: no exit {STOP_TIMEOUT:?} after SIGTERM"));
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.stop();
        }
    }
}

/// What one tree measured.
struct TreeResult {
    title: String,
    files: usize,
    /// Milliseconds, `[scenario][contender]`.
    times: [[Vec<f64>; 3]; 3],
    /// The watched snapshots' walk keys, per scenario.
    walked: [Tally; 3],
    /// What the walk and the watched snapshot read, per scenario and run: files hashed (and
    /// directories listed, when the CLI says), as `walk | watched`.
    hashed: [Vec<String>; 3],
    /// Milliseconds, `[scenario][contender]`, split by the contender's place in the run: `[0]`
    /// first (right after the edits), `[1]` after another contender (some tens of
    /// milliseconds later: a watcher stores the changes' objects 20 ms after them, while the
    /// contender then running shares the two cores with it).
    by_place: [[[Vec<f64>; 2]; 3]; 3],
    watcher: Option<WatcherFigures>,
}

struct WatcherFigures {
    ready_ms: f64,
    first_walk: String,
    watches: Option<u64>,
    /// Processor time the watcher used by the end, when it says.
    cpu_ms: Option<u64>,
    /// Its own tables (watches, paths, marks), bytes.
    table_bytes: Option<u64>,
    /// Its processor use while nothing changed, percent of a core.
    idle_pct: Option<f64>,
    /// VmRSS and RssAnon right after the last timed snapshot.
    rss_kib: u64,
    hwm_kib: u64,
    anon_kib: u64,
    /// VmRSS and RssAnon after the idle spell (the daemon gives back what its snapshots
    /// left once it is idle).
    idle_rss_kib: u64,
    idle_anon_kib: u64,
    stopped: String,
}

/// A tree to measure: where it comes from.
enum Source {
    Copy(PathBuf),
    InPlace(PathBuf),
    Generated(u64),
}

/// The order of the contenders in run `run`: the two snapshots swap every run (the second
/// finds the first's hashes of the 10 changed files in the shared stat cache), and `git status`
/// moves through the three places every two runs.
fn order(run: usize, watch: bool) -> Vec<usize> {
    let mut cairn = if !watch {
        vec![WALK]
    } else if run % 2 == 0 {
        vec![WALK, WATCHED]
    } else {
        vec![WATCHED, WALK]
    };
    cairn.insert((run / 2) % (cairn.len() + 1), GIT);
    cairn
}

/// Regular files below `tree`, `.git` and `.cairn` left out.
fn count_files(tree: &Path) -> Result<usize, String> {
    let entries = gen::walk(tree).map_err(|e| format!("{}: {e}", tree.display()))?;
    Ok(entries
        .iter()
        .filter(|(_, k)| matches!(k, Kind::File { .. }))
        .count())
}

/// The root tree of snapshot `id` in `store`.
fn root_of(store: &Store, id: &str) -> Result<TreeId, String> {
    let sid = SnapshotId::from_hex(id).map_err(|e| format!("snapshot id {id:?}: {e}"))?;
    store
        .read_manifest(&sid)
        .map(|m| m.root)
        .map_err(|e| format!("manifest {id}: {e}"))
}

fn measure(
    source: &Source,
    bin: &Path,
    runs: usize,
    seed: u64,
    watch: bool,
) -> Result<TreeResult, String> {
    let scratch = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let copy = scratch.path().join("tree");
    let (tree, title) = match source {
        Source::Copy(d) => {
            eprintln!("copying {} ...", d.display());
            cli::output(Command::new("cp").arg("-a").arg(d).arg(&copy))?;
            (copy, format!("{} (a copy)", d.display()))
        }
        Source::InPlace(d) => (d.clone(), format!("{} (in place)", d.display())),
        Source::Generated(n) => {
            eprintln!("generating {n} files ...");
            let title = cli::generate_files(&copy, *n, seed)?;
            (copy, title)
        }
    };
    let files = count_files(&tree)?;
    eprintln!("{title}: {files} files; git add and commit ...");
    cli::git(&tree, &["init", "-q"])?;
    cli::git(&tree, &["add", "-A"])?;
    // --allow-empty: an in-place tree may hold a repository with everything committed.
    cli::git(&tree, &["commit", "-q", "--allow-empty", "-m", "base"])?;
    let status = || -> Result<f64, String> {
        let t = Instant::now();
        cli::git(&tree, &["status", "--porcelain"])?;
        Ok(t.elapsed().as_secs_f64() * 1e3)
    };
    // Twice: the first writes the untracked cache into the index, the second uses it.
    status()?;
    status()?;
    let cairn = Cairn {
        bin,
        tree: &tree,
        store: scratch.path().join("store"),
        walk_store: scratch.path().join("walk-store"),
        home: scratch.path().join("cairn-home"),
    };
    eprintln!("first snapshots (walks) ...");
    cairn.snapshot(true)?;
    std::thread::sleep(cli::REST);
    cairn.snapshot(true)?;
    // The watched contender's store, walked once before its watcher starts.
    let mut first = cairn.command(&["--json", "snapshot"]);
    first.env("CAIRN_WATCH", "off");
    cli::output(&mut first)?;
    let open = |path: &Path| {
        Store::open(
            path,
            StoreOptions {
                create: false,
                ..StoreOptions::default()
            },
        )
        .map_err(|e| format!("store {}: {e}", path.display()))
    };
    let store = open(&cairn.store)?;
    let walk_store = open(&cairn.walk_store)?;

    let mut watcher = None;
    if watch {
        eprintln!("starting cairn watch ...");
        let (w, ready_ms, _) = Watcher::start(&cairn, scratch.path().join("watch.log"))?;
        let (first, _) = cairn.snapshot(false)?;
        eprintln!(
            "watcher ready in {ready_ms:.0} ms; first watched snapshot: {}",
            first.walk_key()
        );
        watcher = Some((w, ready_ms, first.walk_key()));
    }

    let mut times: [[Vec<f64>; 3]; 3] = Default::default();
    let mut walked: [Tally; 3] = Default::default();
    let mut hashed: [Vec<String>; 3] = Default::default();
    let mut by_place: [[[Vec<f64>; 2]; 3]; 3] = Default::default();
    for run in 0..runs {
        eprintln!("run {}/{runs}", run + 1);
        for scenario in RUN_ORDER {
            match scenario {
                1 => cli::modify_and_rest(&tree, 10, seed.wrapping_add(run as u64 + 1))?,
                2 => cli::modify(&tree, 10, seed.wrapping_add(run as u64 + 1) ^ (1 << 40))?,
                _ => {}
            }
            let mut ids: [Option<SnapshotOut>; 3] = Default::default();
            for (place, who) in order(run, watch).into_iter().enumerate() {
                let ms = if who == GIT {
                    status()?
                } else {
                    let (snap, ms) = cairn.snapshot(who == WALK)?;
                    ids[who] = Some(snap);
                    ms
                };
                times[scenario][who].push(ms);
                by_place[scenario][who][usize::from(place > 0)].push(ms);
            }
            let walk = ids[WALK].as_ref().ok_or("no walking snapshot")?;
            let Some(watched) = &ids[WATCHED] else {
                hashed[scenario].push(walk.cost());
                continue;
            };
            hashed[scenario].push(format!("{} | {}", walk.cost(), watched.cost()));
            walked[scenario].add(watched.walk_key());
            if watched.walked.as_deref() == Some("full") {
                eprintln!(
                    "FINDING: run {}, {}: the watched snapshot walked the whole tree ({})",
                    run + 1,
                    SCENARIOS[scenario],
                    watched.walk_key()
                );
            }
            let (a, b) = (
                root_of(&store, &watched.id)?,
                root_of(&walk_store, &walk.id)?,
            );
            if a != b {
                return Err(format!(
                    "run {}, {}: the watched snapshot {} has root {a}, the walk {} has {b}, \
                     with nothing changed between them",
                    run + 1,
                    SCENARIOS[scenario],
                    watched.id,
                    walk.id
                ));
            }
        }
    }
    let watcher = match watcher {
        Some((mut w, ready_ms, first_walk)) => {
            let (rss_kib, hwm_kib, anon_kib) = w.memory()?;
            let status = cairn.watch_status()?;
            let watches = status.and_then(|s| s.watches);
            let cpu_ms = status.and_then(|s| s.cpu_ms);
            let table_bytes = status.and_then(|s| s.table_bytes);
            // Its processor time over an idle spell with nothing changing: a measured
            // interval (what is asked is a rate), not a wait for a condition. First it settles:
            // the stat cache the last snapshot changed is written in the background, which is
            // that snapshot's cost, not the idle watcher's (until two readings a second apart
            // agree, at most 60 s).
            // The write starts 2 s after the snapshot (the stat cache's WRITE_DELAY): let it.
            std::thread::sleep(std::time::Duration::from_secs(3));
            let mut before = cairn.watch_status()?.and_then(|s| s.cpu_ms);
            for _ in 0..60 {
                std::thread::sleep(std::time::Duration::from_secs(1));
                let now = cairn.watch_status()?.and_then(|s| s.cpu_ms);
                if now == before {
                    break;
                }
                before = now;
            }
            let idle = std::time::Duration::from_secs(IDLE_SECONDS);
            std::thread::sleep(idle);
            let after = cairn.watch_status()?.and_then(|s| s.cpu_ms);
            let (idle_rss_kib, _, idle_anon_kib) = w.memory()?;
            let idle_pct = match (before, after) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / (IDLE_SECONDS * 10) as f64),
                _ => None,
            };
            let stopped = w.stop()?;
            Some(WatcherFigures {
                ready_ms,
                first_walk,
                watches,
                cpu_ms,
                table_bytes,
                idle_pct,
                rss_kib,
                hwm_kib,
                anon_kib,
                idle_rss_kib,
                idle_anon_kib,
                stopped,
            })
        }
        None => None,
    };
    Ok(TreeResult {
        title,
        files,
        times,
        walked,
        hashed,
        by_place,
        watcher,
    })
}

fn run(args: Args) -> Result<(), String> {
    let runs = args.number("runs", 11)?.max(1) as usize;
    let seed = args.number("seed", 1)?;
    let bin = cli::cairn_binary(&args)?;
    let watch = match args.get("watcher").unwrap_or("on") {
        "on" => true,
        "off" => false,
        other => return Err(format!("--watcher: {other:?} is neither on nor off")),
    };
    if watch
        && !Command::new(&bin)
            .args(["watch", "--help"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    {
        return Err(format!(
            "{} has no `watch` command: build one that has (issue 23), or pass --watcher off \
             to time git status and the walk alone",
            bin.display()
        ));
    }
    let mut sources: Vec<Source> = Vec::new();
    sources.extend(args.list("dir").into_iter().map(|d| Source::Copy(d.into())));
    sources.extend(
        args.list("in-place")
            .into_iter()
            .map(|d| Source::InPlace(d.into())),
    );
    let default: &[u64] = if sources.is_empty() {
        &[57_000, 500_000]
    } else {
        &[]
    };
    sources.extend(
        args.numbers("files", default)?
            .into_iter()
            .map(Source::Generated),
    );
    println!(
        "machine: {} cores; runs: {runs}; {}; each contender a whole process",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if watch {
            "git status, the walk (CAIRN_WATCH=off) and the watched snapshot"
        } else {
            "git status and the walk (no watcher: --watcher off)"
        }
    );
    let mut results = Vec::new();
    for source in &sources {
        results.push(measure(source, &bin, runs, seed, watch)?);
    }
    report(&results);
    Ok(())
}

/// Prints each tree's details, then the tables.
fn report(results: &[TreeResult]) {
    let m = |v: &[f64]| cli::median(v);
    let ms = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.1}"));
    let first_watched: [Option<f64>; 3] =
        std::array::from_fn(|s| results.first().and_then(|r| m(&r.times[s][WATCHED])));
    for r in results {
        println!("\n{}: {} files", r.title, r.files);
        if let Some(w) = &r.watcher {
            println!(
                "  watcher: ready in {:.0} ms; first watched snapshot walked {}; stopped: {}",
                w.ready_ms, w.first_walk, w.stopped
            );
        }
        for (s, label) in SCENARIOS.iter().enumerate() {
            println!(
                "  {label}: watched snapshots walked: {}",
                r.walked[s].show()
            );
            if r.walked[s].0.keys().any(|k| k.starts_with("full")) {
                println!("  FINDING: {label}: a timed watched snapshot walked the whole tree");
            }
            println!(
                "  {label}: files hashed[/directories listed[/looked at by name]] per run (walk{}): {}",
                if r.watcher.is_some() {
                    " | watched"
                } else {
                    ""
                },
                r.hashed[s].join(", ")
            );
            let place = |who: usize, p: usize| {
                let v = &r.by_place[s][who][p];
                format!("{} ms (n={})", ms(m(v)), v.len())
            };
            for (who, name) in CONTENDERS.iter().enumerate() {
                if r.by_place[s][who].iter().any(|v| !v.is_empty()) {
                    println!(
                        "  {label}: {name} median first {}, after another contender {}",
                        place(who, 0),
                        place(who, 1)
                    );
                }
            }
        }
    }
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.3}x", a / b),
        _ => "-".to_string(),
    };
    println!(
        "\nMedians of {} runs; the last column is each tree's watched median over the first \
         tree's ({}).\n",
        results.first().map_or(0, |r| r.times[0][GIT].len()),
        results.first().map_or("", |r| r.title.as_str())
    );
    println!(
        "| tree | files | scenario | {}, ms | {}, ms | {}, ms | walk / git status | watched / \
         git status | watched / first tree's |",
        CONTENDERS[GIT], CONTENDERS[WALK], CONTENDERS[WATCHED]
    );
    println!("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in results {
        for (s, label) in SCENARIOS.iter().enumerate() {
            let [g, k, w] = &r.times[s];
            let (g, k, w) = (m(g), m(k), m(w));
            println!(
                "| {} | {} | {label} | {} | {} | {} | {} | {} | {} |",
                r.title,
                r.files,
                ms(g),
                ms(k),
                ms(w),
                ratio(k, g),
                ratio(w, g),
                ratio(w, first_watched[s])
            );
        }
    }
    if results.iter().any(|r| r.watcher.is_some()) {
        println!(
            "\n| tree | files | watcher ready, ms | watches | its tables, MiB | VmRSS, MiB | \
             of it RssAnon, MiB | idle VmRSS, MiB | of it RssAnon, MiB | VmHWM, MiB | \
             watcher CPU, ms | idle CPU, % of a core |"
        );
        println!(
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        );
        for r in results {
            if let Some(w) = &r.watcher {
                println!(
                    "| {} | {} | {:.0} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} |",
                    r.title,
                    r.files,
                    w.ready_ms,
                    w.watches.map_or("-".to_string(), |n| n.to_string()),
                    w.table_bytes
                        .map_or("-".to_string(), |b| format!("{:.1}", mib(b / 1024))),
                    mib(w.rss_kib),
                    mib(w.anon_kib),
                    mib(w.idle_rss_kib),
                    mib(w.idle_anon_kib),
                    mib(w.hwm_kib),
                    w.cpu_ms.map_or("-".to_string(), |n| n.to_string()),
                    w.idle_pct.map_or("-".to_string(), |p| format!("{p:.2}"))
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_snapshot_says_how_much_it_walked() {
        let json = r#"{"id": "ab12", "root": "/t", "stats": {"files": 3, "hashed": 2,
            "walked": "partial", "walk_reason": "12 directories changed"}}"#;
        let s = SnapshotOut::parse(json).expect("parses");
        assert_eq!(s.id, "ab12");
        assert_eq!(s.hashed, 2);
        assert_eq!(s.walk_key(), "partial (12 directories changed)");
        assert_eq!(s.cost(), "2");
        let nested = SnapshotOut::parse(
            r#"{"id": "ab", "stats": {"hashed": 10},
                "walk": {"walked": "full", "reason": "no earlier token", "listed": 41667}}"#,
        )
        .expect("parses");
        assert_eq!(nested.walk_key(), "full (no earlier token)");
        assert_eq!(nested.cost(), "10/41667");
        let named =
            SnapshotOut::parse(r#"{"id": "ab", "stats": {"hashed": 10, "listed": 0, "named": 9}}"#)
                .expect("parses");
        assert_eq!(named.cost(), "10/0/9");
        let old = SnapshotOut::parse(r#"{"id": "cd34", "stats": {"hashed": 0}}"#).expect("parses");
        assert_eq!(old.walked, None);
        assert_eq!(old.walk_key(), "(not said)");
        let none = SnapshotOut::parse(r#"{"id": "ef", "stats": {"walked": "none"}}"#);
        assert_eq!(none.expect("parses").walk_key(), "none");
        assert!(SnapshotOut::parse(r#"{"stats": {}}"#).is_err());
        assert!(SnapshotOut::parse("not json").is_err());
    }

    #[test]
    fn the_watch_status_gives_running_pid_and_watches() {
        let s = WatchStatus::parse(r#"{"running": true, "pid": 4242, "watches": 41667}"#)
            .expect("parses");
        assert_eq!(
            s,
            WatchStatus {
                running: true,
                pid: Some(4242),
                watches: Some(41667),
                cpu_ms: None,
                table_bytes: None,
            }
        );
        let daemon = WatchStatus::parse(
            r#"{"running": true, "pid": 7, "watch": {"watches": 12}, "cpu_ms": 340}"#,
        )
        .expect("parses");
        assert_eq!((daemon.watches, daemon.cpu_ms), (Some(12), Some(340)));
        let starting = WatchStatus::parse(r#"{"running": false}"#).expect("parses");
        assert!(!starting.running);
        assert_eq!(starting.pid, None);
        assert!(
            !WatchStatus::parse(r#"{"running": "yes"}"#)
                .expect("parses")
                .running
        );
        assert!(WatchStatus::parse("").is_err());
    }

    #[test]
    fn memory_is_read_from_proc_status_lines() {
        let status = "Name:\tcairn\nVmPeak:\t  99999 kB\nVmHWM:\t   40960 kB\n\
                      VmRSS:\t   20480 kB\nThreads:\t3\n";
        assert_eq!(proc_status_kib(status, "VmRSS"), Some(20480));
        assert_eq!(proc_status_kib(status, "VmHWM"), Some(40960));
        assert_eq!(proc_status_kib(status, "VmSwap"), None);
        assert_eq!(proc_status_kib(status, "Threads"), None);
        assert_eq!(mib(40960), 40.0);
    }

    #[test]
    fn the_order_swaps_the_snapshots_every_run_and_moves_git_through_every_place() {
        let orders: Vec<Vec<usize>> = (0..6).map(|r| order(r, true)).collect();
        assert_eq!(orders[0], vec![GIT, WALK, WATCHED]);
        assert_eq!(orders[1], vec![GIT, WATCHED, WALK]);
        assert_eq!(orders[2], vec![WALK, GIT, WATCHED]);
        assert_eq!(orders[5], vec![WATCHED, WALK, GIT]);
        let walk_first = orders
            .iter()
            .filter(|o| o.iter().position(|&c| c == WALK) < o.iter().position(|&c| c == WATCHED))
            .count();
        assert_eq!(walk_first, 3);
        for place in 0..3 {
            assert_eq!(orders.iter().filter(|o| o[place] == GIT).count(), 2);
        }
        assert_eq!(order(0, false), vec![GIT, WALK]);
        assert_eq!(order(2, false), vec![WALK, GIT]);
    }

    #[test]
    fn a_tally_counts_each_kind_of_walk() {
        let mut t = Tally::default();
        assert_eq!(t.show(), "-");
        t.add("partial".into());
        t.add("none".into());
        t.add("partial".into());
        assert_eq!(t.show(), "none: 1, partial: 2");
    }
}
