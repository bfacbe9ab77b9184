//! A full restore through the `cairn` command against `tar -xf` of the same tree, with the
//! library beside them, and a restore after 30 changes against shadow git (issue 56): whole
//! processes, side by side in one run, with each child's peak memory.
//!
//! ```text
//! cargo build --release -p cairn-cli
//! cargo run --release -p cairn-benches --bin restore_cli -- [--files 56970] [--big 500000] [--runs 5] [--big-runs 3] [--seed 262] [--rest 61] [--dir PATH] [--cairn PATH]
//! ```
//!
//! `CAIRN_BENCH_BIG=0` (or `--big 0`) skips the big tree; another number sets its size.
//!
//! - **test262**: a tree generated to the shape of tc39/test262 (`gen::TreeSpec::test262`:
//!   56,970 files, about 2,100 directories, 90 MB; the seed is printed), or `--dir PATH` (a
//!   checkout of the real one, copied with tar);
//! - **big**: a generated agent's workspace of 500,000 files (`gen::TreeSpec::new`).
//!
//! Each tree is snapshotted once into a store outside it (`cairn --store STORE snapshot`) and
//! archived once (`tar -cf`). Then each run times, in turns that rotate which goes first, into
//! a fresh empty directory each: `cairn --store STORE restore SNAP --yes` (what a person
//! runs, its output to a file), `tar -xf` of the archive, and the library (this binary run
//! again as a child: `Workspace::open` and `Workspace::restore`, as the `full_restore` bench
//! does in-process). Each child is started, timed and measured by a small spawner (this binary
//! run again), so its peak resident set (`wait4`'s `ru_maxrss`) is its own, not the bench's.
//! As in `full_restore`, nothing is deleted while timing (ext4 slows creation for minutes
//! after many deletes): every output stays until the tree's runs are done, the harness
//! `sync`s and waits `--rest` seconds after set-up, and `sync`s before each step.
//!
//! Then the restore after 30 changes on the test262 tree: a copy of it with a Cairn snapshot
//! and a shadow git commit (`GIT_DIR` outside, its own index, `add -A`, `write-tree`,
//! `commit-tree`); each run edits 10 files, adds 10 and deletes 10 (`gen::mutate`), waits
//! 2.1 s, and times `cairn --json restore SNAP --yes` or `git reset --hard` + `git clean -fd`,
//! in alternating order, each putting the tree back: first with no watcher, then with a
//! `cairn watch` daemon running, which the restore asks what changed (its report's
//! `safety_walk` says whether the whole tree was walked all the same).
//!
//! Every output is checked afterwards (untimed) to list the tree's paths. Everything stays on
//! disk until the end (about 1.6 GB for test262, 3 GB a run for the big tree), in a directory
//! under `CAIRN_BENCH_DIR` (default the system's temporary directory).

use cairn_benches::cli::{self, listing, Args};
use cairn_benches::gen;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: restore_cli [--files 56970] [--big 500000] [--runs 5] [--big-runs 3] \
                     [--seed 262] [--rest 61] [--dir PATH] [--cairn PATH]";

/// The hidden first argument that makes this binary the library's child.
const CHILD: &str = "--child-library";

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(MEASURE) {
        if let Err(e) = measure_child(&argv[2..]) {
            eprintln!("restore_cli spawner: {e}");
            std::process::exit(1);
        }
        return;
    }
    if argv.get(1).map(String::as_str) == Some(CHILD) {
        if let Err(e) = library_child(&argv[2..]) {
            eprintln!("restore_cli library child: {e}");
            std::process::exit(1);
        }
        return;
    }
    cli::main(
        "restore_cli",
        USAGE,
        &[
            "files", "big", "runs", "big-runs", "seed", "rest", "dir", "cairn",
        ],
        run,
    );
}

/// The library's side, in a process of its own: `STORE OUT SNAP`.
fn library_child(args: &[String]) -> Result<(), String> {
    let [store, out, snap] = args else {
        return Err("expected STORE OUT SNAPSHOT".into());
    };
    let store_path = PathBuf::from(store);
    let ws = cairn_restore::Workspace::open(
        Path::new(out),
        cairn_restore::WorkspaceOptions {
            store: Some(store_path),
            ..Default::default()
        },
    )
    .map_err(|e| format!("opening {out}: {e}"))?;
    let id = ws.store().resolve(snap).map_err(|e| e.to_string())?;
    ws.restore(
        &id,
        &Default::default(),
        &Default::default(),
        Default::default(),
    )
    .map_err(|e| format!("restore: {e}"))?;
    Ok(())
}

/// A finished child: wall-clock milliseconds and peak resident set, KiB.
struct Measured {
    ms: f64,
    peak_kib: u64,
}

/// The hidden first argument that makes this binary the spawner of one measured child:
/// `--child-measure RESULT PROGRAM ARGS...`.
const MEASURE: &str = "--child-measure";

/// Runs `cmd` (stdin empty, stdout to `out`, stderr kept) through a spawner (this binary run
/// again, small): a child's `ru_maxrss` counts the memory of the process it was forked from
/// until it `exec`s (Linux keeps the larger of the two), so a child forked straight from the
/// bench, which holds the big tree's listing, would be charged the bench's size. The spawner
/// times its child and reads its `wait4` usage; a failure is an error showing its standard
/// error.
fn measure(cmd: &mut Command, out: &Path) -> Result<Measured, String> {
    let stdout = std::fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let err_path = out.with_extension("stderr");
    let stderr =
        std::fs::File::create(&err_path).map_err(|e| format!("{}: {e}", err_path.display()))?;
    let result = out.with_extension("measured");
    let exe = std::env::current_exe().map_err(|e| format!("this bench's path: {e}"))?;
    let mut spawner = Command::new(exe);
    spawner
        .arg(MEASURE)
        .arg(&result)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => spawner.env(k, v),
            None => spawner.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        spawner.current_dir(dir);
    }
    let status = spawner
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .status()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if !status.success() {
        return Err(format!(
            "{cmd:?} failed ({status}): {}",
            std::fs::read_to_string(&err_path)
                .unwrap_or_default()
                .trim()
        ));
    }
    let text = std::fs::read_to_string(&result).map_err(|e| format!("{cmd:?}: {e}"))?;
    let _ = std::fs::remove_file(&result);
    let mut it = text.split_whitespace();
    let parsed = (|| Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?)))();
    let (ms, peak_kib) = parsed.ok_or_else(|| format!("{cmd:?}: the spawner wrote {text:?}"))?;
    Ok(Measured { ms, peak_kib })
}

/// The spawner's side: runs `PROGRAM ARGS...` with this process's standard streams, waits for
/// it with `wait4` and writes `MS PEAK_KIB` to `RESULT`; exits 1 if the child failed. (Neither
/// std nor rustix gives a child's resource usage: `libc::wait4`.)
#[allow(unsafe_code)]
fn measure_child(args: &[String]) -> Result<(), String> {
    let [result, program, rest @ ..] = args else {
        return Err("expected RESULT PROGRAM ARGS...".into());
    };
    let t = Instant::now();
    let child = Command::new(program)
        .args(rest)
        .spawn()
        .map_err(|e| format!("{program}: {e}"))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: `rusage` is plain data the kernel fills; `pid` is our child, reaped here once
    // (the `Child` is not waited on again).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let ms = t.elapsed().as_secs_f64() * 1e3;
    drop(child);
    if r != pid {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(format!("{program} failed (status {status:#x})"));
    }
    std::fs::write(result, format!("{ms} {}", usage.ru_maxrss))
        .map_err(|e| format!("{result}: {e}"))
}

/// The `cairn` command with the bench's environment: `CAIRN_HOME` in the scratch directory,
/// none of the caller's `CAIRN_*` settings.
fn cairn(bin: &Path, home: &Path, store: &Path, root: &Path) -> Command {
    let mut c = Command::new(bin);
    c.arg("-C")
        .arg(root)
        .arg("--store")
        .arg(store)
        .env("CAIRN_HOME", home)
        .env_remove("CAIRN_STORE")
        .env_remove("CAIRN_WATCH")
        .env_remove("CAIRN_REMOTE")
        .env_remove("CAIRN_THREADS_DB")
        .env_remove("CLAUDE_PROJECT_DIR");
    c
}

/// Archives `tree` into `archive` with `tar -cf`.
fn archive(tree: &Path, archive: &Path) -> Result<(), String> {
    cli::output(
        Command::new("tar")
            .arg("-C")
            .arg(tree)
            .arg("-cf")
            .arg(archive)
            .arg("."),
    )
    .map(drop)
}

/// Copies the tree `from` into the directory `to` through the archive `via` (removed after).
fn copy(from: &Path, to: &Path, via: &Path) -> Result<(), String> {
    archive(from, via)?;
    cli::output(Command::new("tar").arg("-C").arg(to).arg("-xf").arg(via))?;
    let _ = std::fs::remove_file(via);
    Ok(())
}

/// Takes a snapshot of `tree` into `store` with the command, and returns its id.
fn snapshot(bin: &Path, home: &Path, store: &Path, tree: &Path) -> Result<String, String> {
    let out = cli::output(cairn(bin, home, store, tree).args(["--json", "snapshot"]))?;
    let json: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| format!("snapshot JSON: {e}"))?;
    json["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| "the snapshot printed no id".to_string())
}

fn mib(kib: f64) -> f64 {
    kib / 1024.0
}

/// The full restores of one tree: prints its table, returns its rows for the summary.
struct FullRow {
    tree: String,
    files: usize,
    /// Median ms and median peak KiB of cairn, tar, the library.
    ms: [f64; 3],
    kib: [f64; 3],
}

const SIDES: [&str; 3] = [
    "cairn restore --yes",
    "tar -xf",
    "library (Workspace::restore)",
];

#[allow(clippy::too_many_arguments)]
fn full_restores(
    bin: &Path,
    scratch: &Path,
    name: &str,
    tree: &Path,
    runs: usize,
    rest: Duration,
) -> Result<FullRow, String> {
    let home = scratch.join("home");
    let store = scratch.join(format!("{name}-store"));
    let tarball = scratch.join(format!("{name}.tar"));
    archive(tree, &tarball)?;
    let snap = snapshot(bin, &home, &store, tree)?;
    let want = listing(tree)?;
    let files = want.len();
    rustix::fs::sync();
    std::thread::sleep(rest);
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut ms: [Vec<f64>; 3] = Default::default();
    let mut kib: [Vec<f64>; 3] = Default::default();
    let mut lines = 0;
    for r in 0..runs {
        for k in 0..3 {
            let who = (r + k) % 3;
            let out = scratch.join(format!("{name}-out-{r}-{who}"));
            std::fs::create_dir(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            let log = scratch.join(format!("{name}-out-{r}-{who}.log"));
            rustix::fs::sync();
            let m = match who {
                0 => measure(
                    cairn(bin, &home, &store, &out).args(["restore", &snap, "--yes"]),
                    &log,
                )?,
                1 => measure(
                    Command::new("tar")
                        .arg("-C")
                        .arg(&out)
                        .arg("-xf")
                        .arg(&tarball),
                    &log,
                )?,
                _ => measure(
                    Command::new(&me)
                        .arg(CHILD)
                        .arg(&store)
                        .arg(&out)
                        .arg(&snap)
                        .env("CAIRN_HOME", &home),
                    &log,
                )?,
            };
            if who == 0 {
                lines = std::fs::read_to_string(&log)
                    .map(|s| s.lines().count())
                    .unwrap_or(0);
            }
            ms[who].push(m.ms);
            kib[who].push(m.peak_kib as f64);
        }
        eprint!("\r  {name}: run {}/{runs} done", r + 1);
    }
    eprintln!();
    for r in 0..runs {
        for (who, side) in SIDES.iter().enumerate() {
            let got = listing(&scratch.join(format!("{name}-out-{r}-{who}")))?;
            if got != want {
                return Err(format!(
                    "{name} run {r}: {side} restored {} paths, the tree has {}",
                    got.len(),
                    want.len()
                ));
            }
        }
    }
    let med = |v: &[f64]| cli::median(v).unwrap_or(0.0);
    let each = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("\n{name}: {files} paths, {runs} runs; `cairn restore` printed {lines} lines");
    println!(
        "| | median, ms | each run, ms | / tar | peak RSS, MiB (median) | each run, MiB | MiB per 100k files |"
    );
    println!("| --- | ---: | --- | ---: | ---: | --- | ---: |");
    let tar = med(&ms[1]);
    for who in 0..3 {
        let peak = mib(med(&kib[who]));
        let peaks: Vec<String> = kib[who].iter().map(|k| format!("{:.1}", mib(*k))).collect();
        println!(
            "| {} | {:.0} | {} | {:.2}x | {:.1} | {} | {:.1} |",
            SIDES[who],
            med(&ms[who]),
            each(&ms[who]),
            med(&ms[who]) / tar,
            peak,
            peaks.join(", "),
            peak * 100_000.0 / files as f64
        );
    }
    // Nothing is deleted until the end (the scratch directory goes with the process): a delete
    // of many files slows the creations that follow for minutes.
    Ok(FullRow {
        tree: name.to_string(),
        files,
        ms: [med(&ms[0]), med(&ms[1]), med(&ms[2])],
        kib: [med(&kib[0]), med(&kib[1]), med(&kib[2])],
    })
}

/// `git` on the shadow repository of `work` (`GIT_DIR` outside it, its own index), with the
/// machine's and the user's configuration ignored ([`cli::git_command`]).
fn shadow(scratch: &Path, work: &Path) -> Command {
    let mut c = cli::git_command();
    c.current_dir(work)
        .env("GIT_DIR", scratch.join("shadow.git"))
        .env("GIT_WORK_TREE", work)
        .env("GIT_INDEX_FILE", scratch.join("shadow.index"));
    c
}

/// The restore after 30 changes, twice: without a watcher, then with `cairn watch` running
/// (which carries the restore out, asked only what changed), each beside shadow git in
/// alternating order.
fn after_30(bin: &Path, scratch: &Path, tree: &Path, runs: usize) -> Result<(), String> {
    let work = scratch.join("work");
    std::fs::create_dir(&work).map_err(|e| e.to_string())?;
    copy(tree, &work, &scratch.join("work.tar"))?;
    let home = scratch.join("home");
    let store = scratch.join("work-store");
    let snap = snapshot(bin, &home, &store, &work)?;
    cli::output(shadow(scratch, &work).args(["init", "-q"]))?;
    cli::output(shadow(scratch, &work).args(["add", "-A"]))?;
    let t = cli::output(shadow(scratch, &work).arg("write-tree"))?;
    let commit = cli::output(shadow(scratch, &work).args(["commit-tree", t.trim(), "-m", "base"]))?;
    let side = Side {
        bin,
        scratch,
        home: &home,
        store: &store,
        work: &work,
        snap: &snap,
        commit: commit.trim(),
        want: listing(&work)?,
    };
    let plain = side.runs(runs, 0, "after 30")?;
    let watcher = start_watch(bin, &home, &store, &work, &scratch.join("watch.log"))?;
    // The daemon's first snapshot walks whole and gives the stat cache the daemon's token.
    cli::output(cairn(bin, &home, &store, &work).arg("snapshot"))?;
    let watched = side.runs(runs, runs, "after 30, watched")?;
    let status =
        cli::output(cairn(bin, &home, &store, &work).args(["--json", "watch", "--status"]))?;
    let status: serde_json::Value =
        serde_json::from_str(&status).map_err(|e| format!("the watcher's status: {e}"))?;
    let carried_out = status["restores"].as_u64().unwrap_or(0);
    cli::output(cairn(bin, &home, &store, &work).args(["watch", "--stop"]))?;
    drop(watcher);
    let med = |v: &[f64]| cli::median(v).unwrap_or(0.0);
    println!("\nrestore after 10 modified, 10 added, 10 deleted (test262), {runs} runs each:");
    println!("| | median, ms | / shadow git | peak RSS, MiB | safety walks: whole / watched |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (name, r) in [
        ("cairn restore --yes", &plain),
        ("cairn restore --yes, `cairn watch` running", &watched),
    ] {
        println!(
            "| {name} | {:.0} | {:.2}x | {:.1} | {} / {} |",
            med(&r.cairn_ms),
            med(&r.cairn_ms) / med(&r.git_ms),
            mib(med(&r.cairn_kib)),
            r.whole,
            r.cairn_ms.len() - r.whole
        );
        println!(
            "| shadow git reset --hard + clean -fd (beside it) | {:.0} | 1.00x | | |",
            med(&r.git_ms)
        );
    }
    println!("the `cairn watch` daemon carried out {carried_out} of the {runs} watched restores");
    Ok(())
}

/// The restores after 30 changes of one phase: cairn's and shadow git's times, cairn's peaks,
/// and how many of cairn's safety snapshots walked the whole tree.
struct After30 {
    cairn_ms: Vec<f64>,
    git_ms: Vec<f64>,
    cairn_kib: Vec<f64>,
    whole: usize,
}

/// What the restores after 30 changes work on.
struct Side<'a> {
    bin: &'a Path,
    scratch: &'a Path,
    home: &'a Path,
    store: &'a Path,
    work: &'a Path,
    snap: &'a str,
    commit: &'a str,
    want: Vec<PathBuf>,
}

impl Side<'_> {
    /// `runs` rounds, each editing the tree (seeds from `first`) and putting it back once with
    /// cairn and once with shadow git, in alternating order.
    fn runs(&self, runs: usize, first: usize, what: &str) -> Result<After30, String> {
        let mut out = After30 {
            cairn_ms: Vec::new(),
            git_ms: Vec::new(),
            cairn_kib: Vec::new(),
            whole: 0,
        };
        for r in first..first + runs {
            let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
            for who in order {
                let spec = gen::MutateSpec {
                    modify: 10,
                    add: 10,
                    delete: 10,
                    seed: (r * 2 + who) as u64 + 1,
                };
                gen::mutate(self.work, &spec).map_err(|e| format!("editing: {e}"))?;
                std::thread::sleep(cli::REST);
                let log = self.scratch.join("after30.log");
                if who == 0 {
                    let m = measure(
                        cairn(self.bin, self.home, self.store, self.work)
                            .args(["--json", "restore", self.snap, "--yes"]),
                        &log,
                    )?;
                    out.cairn_ms.push(m.ms);
                    out.cairn_kib.push(m.peak_kib as f64);
                    let report = std::fs::read_to_string(&log).map_err(|e| e.to_string())?;
                    let report: serde_json::Value = serde_json::from_str(&report)
                        .map_err(|e| format!("{what}, run {r}: the restore's report: {e}"))?;
                    match report["safety_walk"]["walked"].as_str() {
                        Some("full") => out.whole += 1,
                        Some(_) => {}
                        None => return Err(format!("{what}, run {r}: no safety_walk: {report}")),
                    }
                } else {
                    let t = Instant::now();
                    cli::output(shadow(self.scratch, self.work).args([
                        "reset",
                        "-q",
                        "--hard",
                        self.commit,
                    ]))?;
                    cli::output(shadow(self.scratch, self.work).args(["clean", "-fdq"]))?;
                    out.git_ms.push(t.elapsed().as_secs_f64() * 1e3);
                }
                if listing(self.work)? != self.want {
                    return Err(format!(
                        "{what}, run {r}: {} did not put the tree back",
                        ["cairn", "shadow git"][who]
                    ));
                }
            }
            eprint!("\r  {what}: run {}/{runs} done", r - first + 1);
        }
        eprintln!();
        Ok(out)
    }
}

/// Starts `cairn watch` on `work`, its output in `log`, and waits until it runs.
fn start_watch(
    bin: &Path,
    home: &Path,
    store: &Path,
    work: &Path,
    log: &Path,
) -> Result<cli::Watch, String> {
    let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    cli::Watch::start(
        cairn(bin, home, store, work)
            .arg("watch")
            .stdout(out)
            .stderr(err),
        || cli::output(cairn(bin, home, store, work).args(["--json", "watch", "--status"])),
    )
    .map_err(|e| format!("{e}: {}", std::fs::read_to_string(log).unwrap_or_default()))
}

fn run(args: Args) -> Result<(), String> {
    let bin = cli::cairn_binary(&args)?;
    let runs = args.number("runs", 5)?.max(1) as usize;
    let big_runs = args.number("big-runs", 3)?.max(1) as usize;
    let seed = args.number("seed", 262)?;
    let rest = Duration::from_secs(args.number("rest", 61)?);
    let big = match std::env::var("CAIRN_BENCH_BIG") {
        Ok(v) => v
            .parse::<u64>()
            .map_err(|_| format!("CAIRN_BENCH_BIG={v:?} is not a number"))?,
        Err(_) => args.number("big", 500_000)?,
    };
    let base = std::env::var_os("CAIRN_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let scratch = tempfile::tempdir_in(&base).map_err(|e| format!("temporary directory: {e}"))?;
    let s = scratch.path();
    println!(
        "machine: {} cores; runs: {runs} (big tree: {big_runs}); seed {seed}; cairn: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        bin.display()
    );
    let t262 = s.join("test262");
    std::fs::create_dir(&t262).map_err(|e| e.to_string())?;
    match args.get("dir") {
        Some(d) => {
            copy(Path::new(d), &t262, &s.join("in.tar"))?;
            println!("test262: a copy of {d}");
        }
        None => {
            let files = args.number("files", 56_970)? as usize;
            let st = gen::generate(&t262, &gen::TreeSpec::test262(files, seed))
                .map_err(|e| format!("generating: {e}"))?;
            println!(
                "test262: generated (seed {seed}): {} files, {} directories, {} symlinks, {}",
                st.files,
                st.dirs,
                st.symlinks,
                cli::bytes(st.bytes)
            );
        }
    }
    let mut rows = vec![full_restores(&bin, s, "test262", &t262, runs, rest)?];
    after_30(&bin, s, &t262, runs)?;
    if big > 0 {
        let tree = s.join("big");
        std::fs::create_dir(&tree).map_err(|e| e.to_string())?;
        let st = gen::generate(&tree, &gen::TreeSpec::new(big as usize, seed))
            .map_err(|e| format!("generating: {e}"))?;
        println!(
            "\nbig: generated (seed {seed}): {} files, {} directories, {}",
            st.files,
            st.dirs,
            cli::bytes(st.bytes)
        );
        rows.push(full_restores(&bin, s, "big", &tree, big_runs, rest)?);
    }
    println!("\nsummary (medians; targets: cairn at most 0.5x tar, peak at most 64 MiB):");
    println!("| tree | paths | cairn, ms | tar, ms | library, ms | cairn / tar | library / tar | cairn peak, MiB | library peak, MiB | tar peak, MiB |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in &rows {
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.2}x | {:.2}x | {:.1} | {:.1} | {:.1} |",
            r.tree,
            r.files,
            r.ms[0],
            r.ms[1],
            r.ms[2],
            r.ms[0] / r.ms[1],
            r.ms[2] / r.ms[1],
            mib(r.kib[0]),
            mib(r.kib[2]),
            mib(r.kib[1])
        );
    }
    Ok(())
}
