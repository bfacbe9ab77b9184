//! The few command-line options the harness binaries take: `--name value` or `--name=value`.

use std::collections::BTreeMap;

/// Parsed options.
#[derive(Debug, Default)]
pub struct Args {
    values: BTreeMap<String, String>,
    /// Whether `--help` or `-h` was given.
    pub help: bool,
}

impl Args {
    /// Parses the process's arguments; every option must be one of `known` (names without
    /// the dashes).
    pub fn parse(known: &[&str]) -> Result<Args, String> {
        Self::parse_from(std::env::args().skip(1), known)
    }

    /// Parses `args`.
    pub fn parse_from(
        args: impl IntoIterator<Item = String>,
        known: &[&str],
    ) -> Result<Args, String> {
        let mut out = Args::default();
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            if arg == "--help" || arg == "-h" {
                out.help = true;
                continue;
            }
            // cargo bench passes --bench to every target; ignore it.
            if arg == "--bench" {
                continue;
            }
            let Some(rest) = arg.strip_prefix("--") else {
                return Err(format!("unexpected argument {arg:?}"));
            };
            let (name, value) = match rest.split_once('=') {
                Some((n, v)) => (n.to_string(), v.to_string()),
                None => {
                    let v = it.next().ok_or_else(|| format!("--{rest} needs a value"))?;
                    (rest.to_string(), v)
                }
            };
            if !known.contains(&name.as_str()) {
                return Err(format!("unknown option --{name}"));
            }
            out.values.insert(name, value);
        }
        Ok(out)
    }

    /// The raw value of `--name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// `--name` as a number, or `default`.
    pub fn number(&self, name: &str, default: u64) -> Result<u64, String> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => parse_count(v).ok_or_else(|| format!("--{name}: {v:?} is not a number")),
        }
    }

    /// `--name` as a comma-separated list (empty items left out); empty when not given.
    pub fn list(&self, name: &str) -> Vec<&str> {
        self.get(name)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `--name` as a comma-separated list of numbers, or `default`.
    pub fn numbers(&self, name: &str, default: &[u64]) -> Result<Vec<u64>, String> {
        match self.get(name) {
            None => Ok(default.to_vec()),
            Some(v) => v
                .split(',')
                .map(|s| {
                    parse_count(s.trim()).ok_or_else(|| format!("--{name}: {s:?} is not a number"))
                })
                .collect(),
        }
    }
}

/// Runs a harness binary: parses the options `known`, prints `usage` for `--help`, runs
/// `body`, and on an error prints it with the usage and exits with status 2.
pub fn main(
    name: &str,
    usage: &str,
    known: &[&str],
    body: impl FnOnce(Args) -> Result<(), String>,
) {
    let result = Args::parse(known).and_then(|args| {
        if args.help {
            println!("{usage}");
            Ok(())
        } else {
            body(args)
        }
    });
    if let Err(e) = result {
        eprintln!("{name}: {e}\n{usage}");
        std::process::exit(2);
    }
}

/// A count, allowing `_` separators and a `k` suffix (`60k`, `60_000`).
fn parse_count(s: &str) -> Option<u64> {
    let s = s.replace('_', "");
    match s.strip_suffix(['k', 'K']) {
        Some(n) => n.parse::<u64>().ok()?.checked_mul(1000),
        None => s.parse().ok(),
    }
}

/// Generates the tree `--files` (default `files`) and `--seed` (default 1) ask for at `at`, and
/// returns how to name it in a report.
pub fn generate_tree(args: &Args, at: &std::path::Path, files: u64) -> Result<String, String> {
    generate_files(at, args.number("files", files)?, args.number("seed", 1)?)
}

/// Generates a tree of `files` files from `seed` at `at`, and returns how to name it in a
/// report.
pub fn generate_files(at: &std::path::Path, files: u64, seed: u64) -> Result<String, String> {
    let n = files as usize;
    let s = crate::gen::generate(at, &crate::gen::TreeSpec::new(n, seed))
        .map_err(|e| format!("generating a tree of {n} files: {e}"))?;
    Ok(format!(
        "generated, {} files (seed {seed}), {}",
        s.files,
        bytes(s.bytes)
    ))
}

/// Runs `cmd` with no input and returns its standard output; a command that cannot start or
/// fails is an error that shows it and its standard error.
pub fn output(cmd: &mut std::process::Command) -> Result<String, String> {
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `git ARGS` in `tree` with the machine's and the user's configuration ignored (as in
/// `compare`) and the untracked cache on, as the harnesses time it.
pub fn git(tree: &std::path::Path, args: &[&str]) -> Result<(), String> {
    output(git_command().current_dir(tree).args(args)).map(drop)
}

/// `git` with the machine's and the user's configuration ignored, no automatic gc, a bench
/// identity, no signing and the untracked cache on.
pub fn git_command() -> std::process::Command {
    let mut c = std::process::Command::new("git");
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args([
            "-c",
            "gc.auto=0",
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.invalid",
            "-c",
            "commit.gpgSign=false",
            "-c",
            "core.untrackedCache=true",
        ]);
    c
}

/// Every path below `root` (as [`crate::gen::walk`] lists them), sorted: what a restored copy
/// is checked against.
pub fn listing(root: &std::path::Path) -> Result<Vec<std::path::PathBuf>, String> {
    let mut paths: Vec<_> = crate::gen::walk(root)
        .map_err(|e| format!("walking {}: {e}", root.display()))?
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    paths.sort();
    Ok(paths)
}

/// How long the harnesses wait after editing files, so no tool sees them as racy (inside the
/// second of its last look, where a timestamp cannot tell an edit).
pub const REST: std::time::Duration = std::time::Duration::from_millis(2100);

/// Modifies `files` files of `tree` chosen by `seed` ([`crate::gen::mutate`]), then waits
/// [`REST`].
pub fn modify_and_rest(tree: &std::path::Path, files: usize, seed: u64) -> Result<(), String> {
    modify(tree, files, seed)?;
    std::thread::sleep(REST);
    Ok(())
}

/// Modifies `files` files of `tree` chosen by `seed` ([`crate::gen::mutate`]).
pub fn modify(tree: &std::path::Path, files: usize, seed: u64) -> Result<(), String> {
    let spec = crate::gen::MutateSpec {
        modify: files,
        seed,
        ..crate::gen::MutateSpec::default()
    };
    crate::gen::mutate(tree, &spec)
        .map(drop)
        .map_err(|e| format!("editing the tree: {e}"))
}

/// The CLI the harnesses run: `--cairn PATH`, else the workspace's `target/release/cairn`,
/// which must be built.
pub fn cairn_binary(args: &Args) -> Result<std::path::PathBuf, String> {
    let bin = match args.get("cairn") {
        Some(p) => std::path::PathBuf::from(p),
        None => {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/cairn")
        }
    };
    if !bin.is_file() {
        return Err(format!(
            "{} is not built: run `cargo build --release -p cairn-cli` (or give --cairn PATH)",
            bin.display()
        ));
    }
    Ok(bin)
}

/// Runs `cairn -C ROOT ARGS` with `CAIRN_HOME=home` and `stdin` (no `CAIRN_STORE`,
/// `CAIRN_WATCH` or `CLAUDE_PROJECT_DIR` from the bench's environment), a whole process as an
/// agent or a user runs it: its standard output and the milliseconds it took; one that fails
/// is an error showing its standard error.
pub fn cairn_timed(
    cairn: &std::path::Path,
    root: &std::path::Path,
    home: &std::path::Path,
    args: &[&str],
    stdin: &str,
) -> Result<(String, f64), String> {
    use std::io::Write;
    use std::process::Stdio;
    let t = std::time::Instant::now();
    let mut child = std::process::Command::new(cairn)
        .arg("-C")
        .arg(root)
        .args(args)
        .env("CAIRN_HOME", home)
        .env_remove("CAIRN_STORE")
        .env_remove("CAIRN_WATCH")
        .env_remove("CLAUDE_PROJECT_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", cairn.display()))?;
    if let Some(mut i) = child.stdin.take() {
        i.write_all(stdin.as_bytes())
            .map_err(|e| format!("stdin: {e}"))?;
    }
    let out = child.wait_with_output().map_err(|e| format!("wait: {e}"))?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    if !out.status.success() {
        return Err(format!(
            "cairn {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok((String::from_utf8_lossy(&out.stdout).into_owned(), ms))
}

/// Bytes for people: `12.3 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: &[&str] = &["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The median of `xs` (the mean of the middle two for an even count); `None` when empty.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Opens a workspace on `tree` with its store at `store` (outside the tree), as the harnesses
/// keep one open in the process, the way an agent runtime holds it.
pub fn open_workspace(
    tree: &std::path::Path,
    store: std::path::PathBuf,
) -> Result<cairn_restore::Workspace, String> {
    let options = cairn_restore::WorkspaceOptions {
        store: Some(store),
        ..cairn_restore::WorkspaceOptions::default()
    };
    cairn_restore::Workspace::open(tree, options).map_err(|e| format!("opening: {e}"))
}

/// A `cairn watch` a bench started: continued (should the bench have stopped it), killed and
/// reaped when dropped, so an error leaves no watcher behind.
pub struct Watch(pub std::process::Child);

impl Watch {
    /// Spawns `watch` (a `cairn ... watch` command, its output set by the caller) and waits
    /// until `status` (what `cairn --json watch --status` printed) says it runs, for at most
    /// 120 s.
    pub fn start(
        watch: &mut std::process::Command,
        mut status: impl FnMut() -> Result<String, String>,
    ) -> Result<Watch, String> {
        let child = watch
            .stdin(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("cairn watch: {e}"))?;
        let w = Watch(child);
        let started = std::time::Instant::now();
        loop {
            let out = status()?;
            let v: serde_json::Value =
                serde_json::from_str(&out).map_err(|e| format!("watch --status: {e}: {out}"))?;
            if v["running"] == true {
                return Ok(w);
            }
            if started.elapsed() > std::time::Duration::from_secs(120) {
                return Err(format!("cairn watch did not run within 120 s: {out}"));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Sends it `sig`.
    pub fn signal(&self, sig: rustix::process::Signal) -> Result<(), String> {
        let pid = rustix::process::Pid::from_raw(self.0.id() as i32).ok_or("no process id")?;
        rustix::process::kill_process(pid, sig).map_err(|e| format!("{sig:?}: {e}"))
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.signal(rustix::process::Signal::CONT);
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_parse_in_both_spellings() {
        let a = Args::parse_from(
            args(&["--files", "10k,60_000", "--runs=3"]),
            &["files", "runs"],
        )
        .expect("parses");
        assert_eq!(
            a.numbers("files", &[]).expect("numbers"),
            vec![10_000, 60_000]
        );
        assert_eq!(a.number("runs", 5).expect("number"), 3);
        assert_eq!(a.list("files"), vec!["10k", "60_000"]);
        assert!(a.list("dir").is_empty());
        assert_eq!(a.number("seed", 1).expect("default"), 1);
        assert!(Args::parse_from(args(&["--nope", "1"]), &["files"]).is_err());
        assert!(Args::parse_from(args(&["--files"]), &["files"]).is_err());
    }

    #[test]
    fn medians_and_sizes_print_as_expected() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(12), "12 B");
    }
}
