//! The comparison harness: Cairn's contenders against `git status`, the shadow-git approach
//! agent tools use, and `tar`, side by side in one run.
//!
//! ```text
//! cargo run --release -p cairn-benches --bin compare -- [--files 10000,60000] [--dir PATH] [--runs 5] [--seed 1]
//! ```
//!
//! For each tree (generated with `cairn_benches::gen` into a temporary directory, or the
//! directory `--dir` names, copied first so it is never modified) and each run, every
//! contender gets its own fresh copy of the tree and goes through the scenarios in order; the
//! harness makes the same edits to every copy between scenarios (untimed) and times only the
//! contender's step:
//!
//! | scenario | edits before it | what is timed |
//! | --- | --- | --- |
//! | first snapshot | none | a snapshot of the whole tree |
//! | no change | none | a snapshot (or status) when nothing changed |
//! | 10 changed | 10 files modified | the same |
//! | 1000 changed | 1,000 files modified | the same |
//! | restore after 30 | 10 modified, 10 added, 10 deleted | putting the tree back to the last snapshot |
//! | full restore | none | writing the last snapshot into an empty directory |
//!
//! Restores are checked (untimed) against the tree's content when the contender took its last
//! snapshot. The table shows each contender's median time in milliseconds and the ratios of
//! medians against `git status`, shadow git and `tar` measured in the same run.
//!
//! A contender is a name and one closure per scenario it takes part in; see [`Contender`] and
//! [`cairn_contenders`] for Cairn's.

use cairn_benches::cli::{self, output, Args};
use cairn_benches::gen::{self, Kind, MutateSpec, TreeSpec};
use cairn_restore::{Workspace, WorkspaceOptions};
use cairn_store::{EntryKind, ObjectId, SnapshotId, Store, TreeId};
use rayon::prelude::*;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::Instant;

const USAGE: &str = "usage: compare [--files 10000,60000] [--dir PATH] [--runs 5] [--seed 1]\n\
     Times git status, shadow git, tar (and Cairn, once its contenders exist) on each tree.";

/// The scenarios, in the order each run goes through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scenario {
    /// A snapshot of the whole tree, the first one.
    FirstSnapshot,
    /// A snapshot when nothing changed since the last one.
    NoChange,
    /// A snapshot after 10 files were modified.
    Changed10,
    /// A snapshot after 1,000 (more) files were modified.
    Changed1000,
    /// Putting the tree back to the last snapshot after 10 files were modified, 10 added and
    /// 10 deleted.
    RestoreAfter30,
    /// Writing the last snapshot into an empty directory.
    FullRestore,
}

impl Scenario {
    const ALL: [Scenario; 6] = [
        Scenario::FirstSnapshot,
        Scenario::NoChange,
        Scenario::Changed10,
        Scenario::Changed1000,
        Scenario::RestoreAfter30,
        Scenario::FullRestore,
    ];

    fn label(self) -> &'static str {
        match self {
            Scenario::FirstSnapshot => "first snapshot",
            Scenario::NoChange => "no change",
            Scenario::Changed10 => "10 changed",
            Scenario::Changed1000 => "1000 changed",
            Scenario::RestoreAfter30 => "restore after 30",
            Scenario::FullRestore => "full restore",
        }
    }

    /// The edits the harness makes to the tree just before this scenario (untimed).
    fn edits(self, seed: u64) -> Option<MutateSpec> {
        let spec = |modify, add, delete, n| MutateSpec {
            modify,
            add,
            delete,
            seed: seed.wrapping_mul(1000).wrapping_add(n),
        };
        match self {
            Scenario::Changed10 => Some(spec(10, 0, 0, 10)),
            Scenario::Changed1000 => Some(spec(1000, 0, 0, 1000)),
            Scenario::RestoreAfter30 => Some(spec(10, 10, 10, 30)),
            _ => None,
        }
    }

    /// Whether a contender's step in this scenario records a snapshot the restores go back to.
    fn snapshots(self) -> bool {
        matches!(
            self,
            Scenario::FirstSnapshot
                | Scenario::NoChange
                | Scenario::Changed10
                | Scenario::Changed1000
        )
    }
}

/// The directories a contender works in during one run.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The contender's own copy of the tree. The harness edits it between scenarios; a
    /// restore puts it back.
    pub tree: PathBuf,
    /// An empty directory for the contender's state in this run (a shadow repository, a
    /// store). Removed after the run.
    pub scratch: PathBuf,
    /// An empty directory: the target of [`Scenario::FullRestore`].
    pub empty: PathBuf,
}

/// One timed or preparing step: gets the run's directories, returns an error message on
/// failure.
pub type Step = Box<dyn FnMut(&Ctx) -> Result<(), String>>;

/// What the ratio columns compare against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `git status`: the floor for noticing changes.
    GitStatus,
    /// A shadow git repository: what agent tools do today.
    ShadowGit,
    /// `tar -c | tar -x`: the floor for copying a tree.
    Tar,
    /// Anything else (Cairn).
    Contender,
}

impl Role {
    /// Ratios are printed of a higher rank against a lower one.
    fn rank(self) -> u8 {
        match self {
            Role::GitStatus => 0,
            Role::Tar => 1,
            Role::ShadowGit => 2,
            Role::Contender => 3,
        }
    }
}

/// A measured system: a name and a closure per scenario it takes part in.
pub struct Contender {
    /// Shown in the table.
    pub name: String,
    /// Whether it is one of the baselines.
    pub role: Role,
    /// Run once per run, untimed, after the tree is copied and before the first scenario.
    pub prepare: Option<Step>,
    /// The timed steps; a scenario without one shows `-`.
    pub steps: Vec<(Scenario, Step)>,
    /// The content of the contender's last snapshot (as [`digest`] spells it), read back from
    /// its own storage; when present the harness checks it after every snapshot (untimed).
    pub snapshot_content: Option<SnapshotContent>,
}

/// Reads back the content of a contender's last snapshot.
pub type SnapshotContent = Box<dyn FnMut(&Ctx) -> Result<Digest, String>>;

/// Cairn's contender, through `cairn_restore::Workspace` as an agent runtime would use it:
/// a workspace on `ctx.tree` with its store in `ctx.scratch` (outside the tree) and default
/// options (stat cache on, `.gitignore` honoured).
///
/// - snapshots (first, no change, 10 and 1000 changed): `Workspace::snapshot`; each is read
///   back from the store and checked against the tree (untimed);
/// - restore after 30: `Workspace::restore` of the last snapshot with default options, which
///   plans, takes the safety snapshot, journals and applies;
/// - full restore: a second workspace on the empty directory sharing the store, restoring the
///   same snapshot.
fn cairn_contenders() -> Vec<Contender> {
    vec![cairn()]
}

/// Workspace options with the store at `store` and the id `id`.
// WorkspaceOptions may gain fields; build it from its Default.
#[allow(clippy::field_reassign_with_default)]
fn workspace_options(store: PathBuf, id: &str) -> WorkspaceOptions {
    let mut o = WorkspaceOptions::default();
    o.store = Some(store);
    o.id = Some(id.to_string());
    o
}

fn cairn() -> Contender {
    let ws: Rc<RefCell<Option<Workspace>>> = Rc::new(RefCell::new(None));
    let last: Rc<RefCell<Option<(SnapshotId, TreeId)>>> = Rc::new(RefCell::new(None));
    let prepare = {
        let (ws, last) = (ws.clone(), last.clone());
        move |ctx: &Ctx| -> Result<(), String> {
            let opened = Workspace::open(
                &ctx.tree,
                workspace_options(ctx.scratch.join("store"), "bench"),
            )
            .map_err(|e| format!("opening the workspace: {e}"))?;
            *ws.borrow_mut() = Some(opened);
            *last.borrow_mut() = None;
            Ok(())
        }
    };
    let snap = {
        let (ws, last) = (ws.clone(), last.clone());
        move |_: &Ctx| -> Result<(), String> {
            let ws = ws.borrow();
            let ws = ws.as_ref().ok_or("no workspace")?;
            let snap = ws
                .snapshot(&ws.snapshot_options(), Default::default())
                .map_err(|e| format!("snapshot: {e}"))?;
            *last.borrow_mut() = Some((snap.snapshot.id, snap.snapshot.root));
            Ok(())
        }
    };
    let restore = {
        let (ws, last) = (ws.clone(), last.clone());
        move |_: &Ctx| -> Result<(), String> {
            let ws = ws.borrow();
            let ws = ws.as_ref().ok_or("no workspace")?;
            let (id, _) = (*last.borrow()).ok_or("no snapshot")?;
            restore_to(ws, &id)
        }
    };
    let full_restore = {
        let last = last.clone();
        move |ctx: &Ctx| -> Result<(), String> {
            let (id, _) = (*last.borrow()).ok_or("no snapshot")?;
            let target = Workspace::open(
                &ctx.empty,
                workspace_options(ctx.scratch.join("store"), "bench-empty"),
            )
            .map_err(|e| format!("opening the empty workspace: {e}"))?;
            restore_to(&target, &id)
        }
    };
    let read_back = move |_: &Ctx| -> Result<Digest, String> {
        let ws = ws.borrow();
        let ws = ws.as_ref().ok_or("no workspace")?;
        let (_, root) = (*last.borrow()).ok_or("no snapshot")?;
        // The stat cache a snapshot that changed something leaves is written by a background
        // thread after it returns; let it finish here, untimed, so that it takes no CPU from
        // the next timed step.
        ws.flush_stat_cache();
        let mut out = Digest::new();
        stored_digest(ws.store(), &root, Path::new(""), &mut out)?;
        Ok(out)
    };
    Contender {
        name: "cairn".into(),
        role: Role::Contender,
        prepare: Some(Box::new(prepare)),
        steps: vec![
            (Scenario::FirstSnapshot, Box::new(snap.clone())),
            (Scenario::NoChange, Box::new(snap.clone())),
            (Scenario::Changed10, Box::new(snap.clone())),
            (Scenario::Changed1000, Box::new(snap)),
            (Scenario::RestoreAfter30, Box::new(restore)),
            (Scenario::FullRestore, Box::new(full_restore)),
        ],
        snapshot_content: Some(Box::new(read_back)),
    }
}

/// The [`Digest`] of a stored tree.
fn stored_digest(store: &Store, id: &TreeId, rel: &Path, out: &mut Digest) -> Result<(), String> {
    let tree = store
        .read_tree(id)
        .map_err(|e| format!("tree {}: {e}", id.to_hex()))?;
    for e in tree.entries() {
        let path = rel.join(std::ffi::OsStr::from_bytes(&e.name));
        let v = match e.kind {
            EntryKind::Dir => {
                stored_digest(store, &TreeId(e.id), &path, out)?;
                "dir".to_string()
            }
            EntryKind::Symlink => {
                let (_, target) = store
                    .read_object(&e.id)
                    .map_err(|err| format!("{}: {err}", path.display()))?;
                let target = PathBuf::from(std::ffi::OsString::from_vec(target));
                format!("link {}", target.display())
            }
            EntryKind::File => format!("file x={} {}", e.mode & 0o100 != 0, e.id.to_hex()),
        };
        out.insert(path, v);
    }
    Ok(())
}

fn main() {
    cli::main("compare", USAGE, &["files", "dir", "runs", "seed"], run);
}

fn run(args: Args) -> Result<(), String> {
    let runs = args.number("runs", 5)?.max(1) as usize;
    let seed = args.number("seed", 1)?;
    let dir = args.get("dir").map(PathBuf::from);
    let files = match (&dir, args.get("files")) {
        (Some(_), None) => Vec::new(),
        _ => args.numbers("files", &[10_000, 60_000])?,
    };

    let git = tool_version("git");
    let tar = tool_version("tar");
    println!(
        "machine: {} cores; {}; {}; runs: {runs}, medians in ms (min-max)",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        git.as_deref()
            .unwrap_or("git not found: git status and shadow git skipped"),
        tar.as_deref().unwrap_or("tar not found: tar skipped"),
    );

    let opts = Opts {
        runs,
        seed,
        git: git.is_some(),
        tar: tar.is_some(),
    };
    let scratch = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    let source = scratch.path().join("source");
    let trees = dir.into_iter().map(Ok).chain(files.into_iter().map(Err));
    for tree in trees {
        let title = match tree {
            Ok(dir) => {
                copy_tree(&dir, &source)?;
                format!("{} (copied)", dir.display())
            }
            Err(n) => {
                let t = Instant::now();
                let s = gen::generate(&source, &TreeSpec::new(n as usize, seed))
                    .map_err(|e| format!("generating a tree of {n} files: {e}"))?;
                format!(
                    "generated, {} files (seed {seed}): {} dirs, {} symlinks, {} (of which {} \
                     large files {}), made in {:.0} s",
                    s.files,
                    s.dirs,
                    s.symlinks,
                    cli::bytes(s.bytes),
                    s.large_files,
                    cli::bytes(s.large_bytes),
                    t.elapsed().as_secs_f64()
                )
            }
        };
        compare_tree(&title, &source, scratch.path(), &opts)?;
        fs::remove_dir_all(&source).map_err(|e| format!("removing the tree: {e}"))?;
    }
    Ok(())
}

fn contenders(git: bool, tar: bool) -> Vec<Contender> {
    let mut all = Vec::new();
    if git {
        all.push(git_status());
        all.push(shadow_git());
    }
    if tar {
        all.push(tar_copy());
    }
    all.extend(cairn_contenders());
    all
}

/// The content of a tree: each path's kind, exec bit, and content hash or link target.
pub type Digest = BTreeMap<PathBuf, String>;

fn digest(root: &Path) -> Result<Digest, String> {
    let entries = gen::walk(root).map_err(|e| format!("walking {}: {e}", root.display()))?;
    entries
        .into_par_iter()
        .map(|(p, k)| {
            let full = root.join(&p);
            let v = match k {
                Kind::Dir => "dir".to_string(),
                Kind::Symlink => {
                    let t = fs::read_link(&full).map_err(|e| format!("{}: {e}", full.display()))?;
                    format!("link {}", t.display())
                }
                Kind::File { executable, .. } => {
                    let bytes = fs::read(&full).map_err(|e| format!("{}: {e}", full.display()))?;
                    format!("file x={executable} {}", ObjectId::of(&bytes).to_hex())
                }
            };
            Ok((p, v))
        })
        .collect()
}

/// `None` when equal, else how they differ.
fn difference(want: &Digest, got: &Digest) -> Option<String> {
    let mut paths: Vec<&PathBuf> = want
        .keys()
        .chain(got.keys().filter(|k| !want.contains_key(*k)))
        .filter(|p| want.get(*p) != got.get(*p))
        .collect();
    if paths.is_empty() {
        return None;
    }
    paths.sort();
    let shown: Vec<String> = paths
        .iter()
        .take(3)
        .map(|p| p.display().to_string())
        .collect();
    Some(format!(
        "{} paths differ, e.g. {}",
        paths.len(),
        shown.join(", ")
    ))
}

/// The tree's content before each scenario, from a reference copy edited as every contender's
/// copy will be: the edits depend only on the tree and the seed, so every copy goes through the
/// same states.
fn reference_states(
    source: &Path,
    scratch: &Path,
    seed: u64,
) -> Result<BTreeMap<Scenario, Digest>, String> {
    let reference = scratch.join("reference");
    copy_tree(source, &reference)?;
    let mut states = BTreeMap::new();
    let mut current = digest(&reference)?;
    for s in Scenario::ALL {
        if let Some(edits) = s.edits(seed) {
            gen::mutate(&reference, &edits).map_err(|e| format!("editing the reference: {e}"))?;
            current = digest(&reference)?;
        }
        states.insert(s, current.clone());
    }
    fs::remove_dir_all(&reference).map_err(|e| format!("removing the reference: {e}"))?;
    Ok(states)
}

struct Results {
    ms: BTreeMap<(usize, Scenario), Vec<f64>>,
    notes: Vec<String>,
}

/// How to run the comparison.
#[derive(Clone, Copy)]
struct Opts {
    runs: usize,
    seed: u64,
    git: bool,
    tar: bool,
}

fn compare_tree(title: &str, source: &Path, scratch: &Path, opts: &Opts) -> Result<(), String> {
    let Opts {
        runs,
        seed,
        git,
        tar,
    } = *opts;
    println!("\n== tree: {title}");
    let states = reference_states(source, scratch, seed)?;

    let mut all = contenders(git, tar);
    let mut results = Results {
        ms: BTreeMap::new(),
        notes: Vec::new(),
    };
    for run in 0..runs {
        // Rotate the order so no contender always goes first.
        let n = all.len();
        for k in 0..n {
            let i = (k + run) % n;
            let dir = scratch.join(format!("run{run}-{i}"));
            let ctx = Ctx {
                tree: dir.join("tree"),
                scratch: dir.join("scratch"),
                empty: dir.join("empty"),
            };
            copy_tree(source, &ctx.tree)?;
            for d in [&ctx.scratch, &ctx.empty] {
                fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            }
            if let Err(e) = run_contender(&mut all[i], i, &ctx, seed, &states, &mut results) {
                results
                    .notes
                    .push(format!("{} (run {}): {e}", all[i].name, run + 1));
            }
            fs::remove_dir_all(&dir).map_err(|e| format!("removing {}: {e}", dir.display()))?;
        }
        eprint!("\r  run {}/{runs} done", run + 1);
    }
    eprintln!();
    print_table(&all, &results);
    Ok(())
}

fn run_contender(
    c: &mut Contender,
    index: usize,
    ctx: &Ctx,
    seed: u64,
    states: &BTreeMap<Scenario, Digest>,
    results: &mut Results,
) -> Result<(), String> {
    if let Some(prepare) = c.prepare.as_mut() {
        prepare(ctx).map_err(|e| format!("preparing: {e}"))?;
    }
    // Let the fresh copy's timestamps age past the racy window (2 s for Cairn's stat cache,
    // about as long for git's index), untimed: the scenarios model a workspace whose files
    // were not all written a moment ago, and no contender pays for a copy it did not make.
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    let mut last_snapshot: Option<Scenario> = None;
    for s in Scenario::ALL {
        if let Some(edits) = s.edits(seed) {
            gen::mutate(&ctx.tree, &edits).map_err(|e| format!("editing the tree: {e}"))?;
        }
        let Some((_, step)) = c.steps.iter_mut().find(|(x, _)| *x == s) else {
            continue;
        };
        // Write back what the harness itself made dirty (the copy, the edits), untimed, so a
        // contender that makes its own writes durable (`fsync`, `syncfs`) pays for those only.
        rustix::fs::sync();
        let t = Instant::now();
        step(ctx).map_err(|e| format!("{}: {e}", s.label()))?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        results.ms.entry((index, s)).or_default().push(ms);
        if s.snapshots() {
            last_snapshot = Some(s);
            if let Some(read) = c.snapshot_content.as_mut() {
                let got = read(ctx).map_err(|e| format!("reading its snapshot back: {e}"))?;
                if let Some(diff) = difference(&states[&s], &got) {
                    note(
                        results,
                        format!(
                            "{}: its {} snapshot differs from the tree: {diff}",
                            c.name,
                            s.label()
                        ),
                    );
                }
            }
        }
        let restored = match s {
            Scenario::RestoreAfter30 => Some(&ctx.tree),
            Scenario::FullRestore => Some(&ctx.empty),
            _ => None,
        };
        if let (Some(dir), Some(snap)) = (restored, last_snapshot) {
            let want = &states[&snap];
            if let Some(diff) = difference(want, &digest(dir)?) {
                let text = format!(
                    "{}: {} does not match the tree at its last snapshot ({}): {diff}",
                    c.name,
                    s.label(),
                    snap.label()
                );
                note(results, text);
            }
        }
    }
    Ok(())
}

/// Records a note once.
fn note(results: &mut Results, text: String) {
    if !results.notes.contains(&text) {
        results.notes.push(text);
    }
}

fn print_table(all: &[Contender], results: &Results) {
    let width = 22;
    print!("{:<18}", "scenario");
    for c in all {
        print!("{:>width$}", c.name);
    }
    println!();
    let median = |i: usize, s: Scenario| results.ms.get(&(i, s)).and_then(|v| cli::median(v));
    for s in Scenario::ALL {
        print!("{:<18}", s.label());
        for (i, _) in all.iter().enumerate() {
            let cell = match results.ms.get(&(i, s)) {
                Some(v) if !v.is_empty() => {
                    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = v.iter().copied().fold(0.0, f64::max);
                    format!(
                        "{} ({}-{})",
                        ms(cli::median(v).unwrap_or(0.0)),
                        ms(lo),
                        ms(hi)
                    )
                }
                _ => "-".to_string(),
            };
            print!("{cell:>width$}");
        }
        println!();
    }

    let baselines: Vec<(usize, &Contender)> = all
        .iter()
        .enumerate()
        .filter(|(_, c)| c.role != Role::Contender)
        .collect();
    println!("\nratios of medians (contender / baseline):");
    print!("{:<18}{:<14}", "scenario", "contender");
    for (_, b) in &baselines {
        print!("{:>16}", format!("/ {}", b.name));
    }
    println!();
    for s in Scenario::ALL {
        for (i, c) in all.iter().enumerate() {
            let Some(m) = median(i, s) else { continue };
            let cells: Vec<String> = baselines
                .iter()
                .map(|&(j, b)| match median(j, s) {
                    // Each pair of baselines once: shadow git against git status and tar.
                    Some(base) if c.role.rank() > b.role.rank() && base > 0.0 => {
                        format!("{:.2}x", m / base)
                    }
                    _ => "-".to_string(),
                })
                .collect();
            if cells.iter().all(|x| x == "-") {
                continue;
            }
            print!("{:<18}{:<14}", s.label(), c.name);
            for cell in cells {
                print!("{cell:>16}");
            }
            println!();
        }
    }
    if results.notes.is_empty() {
        println!(
            "\nchecks (restores against the tree at the last snapshot, snapshots read back where a \
             contender can): all match"
        );
    } else {
        println!();
        for n in &results.notes {
            println!("note: {n}");
        }
    }
}

fn ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// The first line of `tool --version`, or `None` when it cannot run.
fn tool_version(tool: &str) -> Option<String> {
    let out = Command::new(tool).arg("--version").output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(str::to_string)
}

/// `cp -a SRC DST`: a copy that keeps modes, symlinks and times.
fn copy_tree(src: &Path, dst: &Path) -> Result<(), String> {
    if let Some(parent) = dst.parent() {
        fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    output(Command::new("cp").arg("-a").arg(src).arg(dst)).map(drop)
}

/// A git command isolated from the machine's and the user's configuration.
fn git_cmd() -> Command {
    let mut c = Command::new("git");
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("LC_ALL", "C")
        .args([
            "-c",
            "user.name=cairn-bench",
            "-c",
            "user.email=bench@example.invalid",
            "-c",
            "gc.auto=0",
            "-c",
            "maintenance.auto=false",
            "-c",
            "commit.gpgSign=false",
        ]);
    c
}

/// `git status --porcelain` with the untracked cache on, in a copy of the tree made a
/// repository with everything committed; warmed once before timing.
fn git_status() -> Contender {
    let status: fn(&Ctx) -> Result<(), String> = |ctx| {
        output(git_cmd().current_dir(&ctx.tree).args([
            "-c",
            "core.untrackedCache=true",
            "status",
            "--porcelain",
        ]))
        .map(drop)
    };
    Contender {
        name: "git status".into(),
        role: Role::GitStatus,
        prepare: Some(Box::new(move |ctx| {
            let git = |args: &[&str]| output(git_cmd().current_dir(&ctx.tree).args(args));
            git(&["init", "-q"])?;
            git(&["add", "-A"])?;
            git(&["commit", "-q", "-m", "base"])?;
            // Twice: the first writes the untracked cache into the index, the second uses it.
            status(ctx)?;
            status(ctx)
        })),
        steps: vec![
            (Scenario::NoChange, Box::new(status)),
            (Scenario::Changed10, Box::new(status)),
            (Scenario::Changed1000, Box::new(status)),
        ],
        snapshot_content: None,
    }
}

/// What agent tools do: a repository outside the tree (`--git-dir=SHADOW --work-tree=TREE`)
/// with its own index (`GIT_INDEX_FILE`); a snapshot is `add -A`, `write-tree` and
/// `commit-tree` (the commit is what `reset --hard` needs); a restore is `reset --hard` and
/// `clean -fd`; a full restore is `reset --hard` into an empty work tree with a fresh index.
fn shadow_git() -> Contender {
    let head: Rc<RefCell<Option<String>>> = Rc::new(RefCell::new(None));
    let shadow = |ctx: &Ctx, work: &Path, index: &str| {
        let mut c = git_cmd();
        c.env("GIT_DIR", ctx.scratch.join("shadow.git"))
            .env("GIT_WORK_TREE", work)
            .env("GIT_INDEX_FILE", ctx.scratch.join(index))
            .current_dir(work);
        c
    };
    let snapshot = {
        let head = head.clone();
        move |ctx: &Ctx| -> Result<(), String> {
            let run = |args: &[&str]| output(shadow(ctx, &ctx.tree, "index").args(args));
            run(&["add", "-A"])?;
            let tree = run(&["write-tree"])?.trim().to_string();
            let parent = head.borrow().clone();
            let mut args = vec!["commit-tree", tree.as_str(), "-m", "snapshot"];
            if let Some(p) = parent.as_deref() {
                args.extend(["-p", p]);
            }
            let commit = run(&args)?.trim().to_string();
            *head.borrow_mut() = Some(commit);
            Ok(())
        }
    };
    let commit = {
        let head = head.clone();
        move || {
            head.borrow()
                .clone()
                .ok_or("no snapshot to restore".to_string())
        }
    };
    let restore = {
        let commit = commit.clone();
        move |ctx: &Ctx| -> Result<(), String> {
            let c = commit()?;
            output(shadow(ctx, &ctx.tree, "index").args(["reset", "-q", "--hard", &c]))?;
            output(shadow(ctx, &ctx.tree, "index").args(["clean", "-fdq"])).map(drop)
        }
    };
    let full_restore = move |ctx: &Ctx| -> Result<(), String> {
        let c = commit()?;
        output(shadow(ctx, &ctx.empty, "restore-index").args(["reset", "-q", "--hard", &c]))
            .map(drop)
    };
    let prepare = {
        let head = head.clone();
        move |ctx: &Ctx| -> Result<(), String> {
            *head.borrow_mut() = None;
            output(
                git_cmd()
                    .env("GIT_DIR", ctx.scratch.join("shadow.git"))
                    .args(["init", "-q"]),
            )
            .map(drop)
        }
    };
    Contender {
        name: "shadow git".into(),
        role: Role::ShadowGit,
        prepare: Some(Box::new(prepare)),
        steps: vec![
            (Scenario::FirstSnapshot, Box::new(snapshot.clone())),
            (Scenario::NoChange, Box::new(snapshot.clone())),
            (Scenario::Changed10, Box::new(snapshot.clone())),
            (Scenario::Changed1000, Box::new(snapshot)),
            (Scenario::RestoreAfter30, Box::new(restore)),
            (Scenario::FullRestore, Box::new(full_restore)),
        ],
        snapshot_content: None,
    }
}

/// `tar -cf - -C SRC . | tar -xf - -C DST`.
fn tar_pipe(src: &Path, dst: &Path) -> Result<(), String> {
    let mut create = Command::new("tar")
        .arg("-cf")
        .arg("-")
        .arg("-C")
        .arg(src)
        .arg(".")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("tar -c: {e}"))?;
    let pipe = create.stdout.take().ok_or("tar -c has no output")?;
    let extract = Command::new("tar")
        .arg("-xf")
        .arg("-")
        .arg("-C")
        .arg(dst)
        .stdin(pipe)
        .status()
        .map_err(|e| format!("tar -x: {e}"))?;
    let created = create.wait().map_err(|e| format!("tar -c: {e}"))?;
    if !created.success() || !extract.success() {
        return Err(format!("tar -c {created}, tar -x {extract}"));
    }
    Ok(())
}

/// `tar -c | tar -x`: the first snapshot is a copy of the tree; the full restore copies that
/// copy into the empty directory.
fn tar_copy() -> Contender {
    Contender {
        name: "tar".into(),
        role: Role::Tar,
        prepare: Some(Box::new(|ctx| {
            fs::create_dir_all(ctx.scratch.join("copy")).map_err(|e| format!("mkdir: {e}"))
        })),
        steps: vec![
            (
                Scenario::FirstSnapshot,
                Box::new(|ctx| tar_pipe(&ctx.tree, &ctx.scratch.join("copy"))),
            ),
            (
                Scenario::FullRestore,
                Box::new(|ctx| tar_pipe(&ctx.scratch.join("copy"), &ctx.empty)),
            ),
        ],
        snapshot_content: None,
    }
}

/// Restores snapshot `id` into `ws` with the default options.
fn restore_to(ws: &Workspace, id: &cairn_store::SnapshotId) -> Result<(), String> {
    ws.restore(
        id,
        &Default::default(),
        &Default::default(),
        Default::default(),
    )
    .map_err(|e| format!("restore: {e}"))
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_baseline_runs_its_scenarios_and_restores_what_it_snapshotted() {
        let dir = tempfile::tempdir().expect("tmp");
        let source = dir.path().join("source");
        gen::generate(&source, &TreeSpec::new(60, 4)).expect("generate");
        let opts = Opts {
            runs: 1,
            seed: 4,
            git: tool_version("git").is_some(),
            tar: tool_version("tar").is_some(),
        };
        let mut all = contenders(opts.git, opts.tar);
        let states = reference_states(&source, dir.path(), opts.seed).expect("states");
        let mut results = Results {
            ms: BTreeMap::new(),
            notes: Vec::new(),
        };
        for (i, c) in all.iter_mut().enumerate() {
            let run = dir.path().join(format!("run-{i}"));
            let ctx = Ctx {
                tree: run.join("tree"),
                scratch: run.join("scratch"),
                empty: run.join("empty"),
            };
            copy_tree(&source, &ctx.tree).expect("copy");
            fs::create_dir_all(&ctx.scratch).expect("mkdir");
            fs::create_dir_all(&ctx.empty).expect("mkdir");
            run_contender(c, i, &ctx, opts.seed, &states, &mut results).expect("contender runs");
        }
        assert!(results.notes.is_empty(), "{:?}", results.notes);
        let steps: usize = all.iter().map(|c| c.steps.len()).sum();
        assert_eq!(results.ms.len(), steps);
        // The source was never touched.
        let fresh = dir.path().join("fresh");
        gen::generate(&fresh, &TreeSpec::new(60, 4)).expect("generate");
        assert_eq!(
            digest(&source).expect("digest"),
            digest(&fresh).expect("digest")
        );
    }

    #[test]
    fn a_difference_names_the_paths() {
        let a: Digest = [(PathBuf::from("x"), "1".to_string())].into();
        let b: Digest = [(PathBuf::from("y"), "1".to_string())].into();
        assert_eq!(difference(&a, &a), None);
        let d = difference(&a, &b).expect("differs");
        assert!(d.starts_with("2 paths differ"), "{d}");
    }
}
