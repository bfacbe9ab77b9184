//! Container workspaces (issue 58): a directory the host bind-mounts into a container. The
//! host's `cairn` snapshots and restores it as any workspace, but a restore (and a rewind with
//! files) is refused with `BUSY` while a process runs in the container, found from the
//! container's cgroup without asking the container anything.
//!
//! What counts as "a process runs": a process listed in the container's cgroup, or in one
//! below it, that is not the container's init (the process the engine names, and any process
//! that is PID 1 of its own PID namespace). A stopped container, or one whose init idles
//! (`sleep infinity`) with nothing else in it, runs nothing; a command started with `exec`,
//! a shell, a process the init started or one left in the background, runs.
//!
//! The setting is `container.json` in the workspace's directory of its store
//! (`workspaces/<id>/`), out of the container's reach: the container cannot switch the check
//! off.

use crate::args::ContainerArgs;
use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use cairn_restore::Workspace;
use cairn_store::{fsutil, Classify, ErrorKind};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The file of the setting, in the workspace's directory of its store.
const SETTING_FILE: &str = "container.json";

/// Which container the workspace is mounted in.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Setting {
    /// The container's name or id, as its engine knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The engine program asked for the container's init (`podman`, `docker`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Arguments the engine gets before `inspect`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engine_args: Vec<String>,
    /// The container's cgroup directory, when given instead of a name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<PathBuf>,
}

impl Setting {
    /// How messages name the container.
    fn shown(&self) -> String {
        match (&self.name, &self.cgroup) {
            (Some(n), _) => format!("container {n}"),
            (None, Some(c)) => format!("the container of cgroup {}", c.display()),
            (None, None) => "the container".into(),
        }
    }
}

/// A process found running in the container.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct Proc {
    /// Its process id, as the host sees it.
    pub pid: u32,
    /// Its command line (its name when it has none), cut to 80 characters.
    pub command: String,
}

/// An error of a container workspace.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// A process runs in the container: a restore could race it.
    #[error(
        "{container} runs {}: {}; a restore now would race {}: wait for {} to end (or stop {}), \
         then try again; --force does not go around this",
        crate::parse::count(processes.len() as u64, "process", "processes"),
        list(processes),
        if processes.len() == 1 { "it" } else { "them" },
        if processes.len() == 1 { "it" } else { "them" },
        if processes.len() == 1 { "it" } else { "them" }
    )]
    Busy {
        /// The container, as messages name it.
        container: String,
        /// What runs there.
        processes: Vec<Proc>,
    },
    /// The engine could not say which process is the container's init.
    #[error(
        "cannot tell whether {container} runs anything: `{command}` {detail}; start its engine \
         (or pass --engine / --engine-arg to `cairn init container`), or run `cairn init \
         container --remove` if the directory is no longer mounted in a container"
    )]
    Engine {
        /// The container.
        container: String,
        /// The command run.
        command: String,
        /// What went wrong.
        detail: String,
        /// The kind it is.
        kind: ErrorKind,
    },
    /// The container's cgroup could not be read.
    #[error(
        "cannot tell whether {container} runs anything: {action} {}: {source}; check that the \
         cgroup is there (`cairn init container --status`)", path.display()
    )]
    Cgroup {
        /// The container.
        container: String,
        /// What was being done.
        action: &'static str,
        /// The path concerned.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The setting's file does not decode.
    #[error(
        "{} does not decode ({detail}); set the container again with `cairn init container`",
        path.display()
    )]
    Setting {
        /// The file.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// A `--cgroup` directory that is none.
    #[error("{} is not a cgroup directory (it has no cgroup.procs); name the container's cgroup under /sys/fs/cgroup", path.display())]
    NotCgroup {
        /// The directory given.
        path: PathBuf,
    },
}

fn list(p: &[Proc]) -> String {
    p.iter()
        .map(|p| format!("{} ({})", p.pid, p.command))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Classify for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Busy { .. } => ErrorKind::Busy,
            Error::Engine { kind, .. } => *kind,
            Error::Cgroup { source, .. } => ErrorKind::of_io(source),
            Error::Setting { .. } => ErrorKind::Corrupt,
            Error::NotCgroup { .. } => ErrorKind::InvalidArgument,
        }
    }

    fn path(&self) -> Option<&Path> {
        match self {
            Error::Cgroup { path, .. }
            | Error::Setting { path, .. }
            | Error::NotCgroup { path } => Some(path),
            _ => None,
        }
    }
}

impl From<Error> for CliError {
    fn from(e: Error) -> Self {
        let mut err = CliError::new(e.kind(), e.to_string());
        err.path = e.path().map(Path::to_path_buf);
        err
    }
}

fn setting_path(ws: &Workspace) -> Result<PathBuf> {
    Ok(ws.store().workspace_dir(ws.id())?.join(SETTING_FILE))
}

/// The workspace's container setting, if it has one.
fn read_setting(ws: &Workspace) -> Result<Option<Setting>> {
    let path = setting_path(ws)?;
    let bytes = match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(cairn_store::Error::io("read", &path, e).into()),
        Ok(m) if !m.is_file() => {
            return Err(Error::Setting {
                path,
                detail: "not a regular file (a symlink is never followed)".into(),
            }
            .into())
        }
        Ok(_) => std::fs::read(&path).map_err(|e| cairn_store::Error::io("read", &path, e))?,
    };
    let setting = serde_json::from_slice(&bytes).map_err(|e| Error::Setting {
        path: path.clone(),
        detail: e.to_string(),
    })?;
    Ok(Some(setting))
}

/// Refuses (`BUSY`) a restore of `ws` while a process runs in its container; nothing when
/// the workspace is no container's.
pub(crate) fn refuse_if_busy(ws: &Workspace) -> Result<()> {
    let Some(setting) = read_setting(ws)? else {
        return Ok(());
    };
    let processes = running(&setting)?;
    if processes.is_empty() {
        return Ok(());
    }
    Err(Error::Busy {
        container: setting.shown(),
        processes,
    }
    .into())
}

/// The processes running in the container (see the module's documentation).
fn running(setting: &Setting) -> Result<Vec<Proc>, Error> {
    let container = setting.shown();
    let (dir, init) = match (&setting.cgroup, &setting.name) {
        (Some(dir), _) => (dir.clone(), None),
        (None, Some(name)) => {
            let Some(pid) = init_pid(setting, name)? else {
                // Not running: nothing runs in it.
                return Ok(Vec::new());
            };
            (cgroup_of(&container, pid)?, Some(pid))
        }
        (None, None) => return Ok(Vec::new()),
    };
    let mut pids = Vec::new();
    collect_procs(&container, &dir, &mut pids)?;
    pids.sort_unstable();
    pids.dedup();
    Ok(pids
        .into_iter()
        .filter(|&pid| Some(pid) != init)
        .filter_map(describe)
        .collect())
}

/// The engine's word for the container's init: `None` when the container is not running.
fn init_pid(setting: &Setting, name: &str) -> Result<Option<u32>, Error> {
    let engine = setting.engine.clone().unwrap_or_else(default_engine);
    let mut cmd = Command::new(&engine);
    cmd.args(&setting.engine_args)
        .args(["inspect", "--format", "{{.State.Pid}}", name])
        .stdin(std::process::Stdio::null());
    let shown = format!(
        "{engine} {}inspect --format {{{{.State.Pid}}}} {name}",
        setting
            .engine_args
            .iter()
            .map(|a| format!("{a} "))
            .collect::<String>()
    );
    let fail = |detail: String, kind: ErrorKind| Error::Engine {
        container: setting.shown(),
        command: shown.clone(),
        detail,
        kind,
    };
    let out = cmd.output().map_err(|e| {
        fail(
            format!("could not be run ({e})"),
            if e.kind() == std::io::ErrorKind::NotFound {
                ErrorKind::NotFound
            } else {
                ErrorKind::of_io(&e)
            },
        )
    })?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        let said = said.split_whitespace().collect::<Vec<_>>().join(" ");
        return Err(fail(
            format!("failed ({}): {said}", out.status),
            ErrorKind::NotFound,
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let pid: u32 = text.trim().parse().map_err(|_| {
        fail(
            format!("answered {:?}, not a process id", text.trim()),
            ErrorKind::Io,
        )
    })?;
    Ok((pid != 0).then_some(pid))
}

/// `podman` when it is on PATH, else `docker`.
fn default_engine() -> String {
    let on_path = |name: &str| {
        std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
    };
    if on_path("podman") || !on_path("docker") {
        "podman".into()
    } else {
        "docker".into()
    }
}

/// The cgroup directory process `pid` is in: the unified hierarchy's first, else the pids
/// controller's, else name=systemd's, else any other, whichever is mounted here.
fn cgroup_of(container: &str, pid: u32) -> Result<PathBuf, Error> {
    let read = |path: PathBuf| {
        std::fs::read_to_string(&path).map_err(|source| Error::Cgroup {
            container: container.to_string(),
            action: "read",
            path,
            source,
        })
    };
    let cgroups = read(PathBuf::from(format!("/proc/{pid}/cgroup")))?;
    let mounts = read(PathBuf::from("/proc/self/mountinfo"))?;
    let mounts: Vec<CgroupMount> = mounts.lines().filter_map(CgroupMount::parse).collect();
    let mut found: Vec<(u8, PathBuf)> = Vec::new();
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let controllers: Vec<&str> = controllers.split(',').filter(|c| !c.is_empty()).collect();
        for m in &mounts {
            let matches = if controllers.is_empty() {
                m.unified
            } else {
                !m.unified && controllers.iter().all(|c| m.options.iter().any(|o| o == c))
            };
            if !matches {
                continue;
            }
            let Some(rel) = Path::new(path).strip_prefix(&m.root).ok() else {
                continue;
            };
            let dir = m.mount_point.join(rel);
            if !dir.join("cgroup.procs").is_file() {
                continue;
            }
            let rank = if m.unified {
                0
            } else if controllers.contains(&"pids") {
                1
            } else if controllers.contains(&"name=systemd") {
                2
            } else {
                3
            };
            found.push((rank, dir));
        }
    }
    found.sort();
    found
        .into_iter()
        .next()
        .map(|(_, d)| d)
        .ok_or_else(|| Error::Cgroup {
            container: container.to_string(),
            action: "find the mounted cgroup of",
            path: PathBuf::from(format!("/proc/{pid}/cgroup")),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "none of its cgroups is mounted here",
            ),
        })
}

/// A cgroup file system mounted here, from one line of `/proc/self/mountinfo`.
struct CgroupMount {
    root: PathBuf,
    mount_point: PathBuf,
    unified: bool,
    options: Vec<String>,
}

impl CgroupMount {
    fn parse(line: &str) -> Option<CgroupMount> {
        let (left, right) = line.split_once(" - ")?;
        let fields: Vec<&str> = left.split(' ').collect();
        let mut right = right.split(' ');
        let fstype = right.next()?;
        let _source = right.next()?;
        let options = right.next().unwrap_or("");
        let unified = match fstype {
            "cgroup2" => true,
            "cgroup" => false,
            _ => return None,
        };
        Some(CgroupMount {
            root: PathBuf::from(unescape(fields.get(3)?)),
            mount_point: PathBuf::from(unescape(fields.get(4)?)),
            unified,
            options: options.split(',').map(str::to_string).collect(),
        })
    }
}

/// mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The process ids listed in `dir`'s `cgroup.procs` and in those of the cgroups below it (no
/// symlink is followed).
fn collect_procs(container: &str, dir: &Path, out: &mut Vec<u32>) -> Result<(), Error> {
    let err = |action: &'static str, path: &Path, source: std::io::Error| Error::Cgroup {
        container: container.to_string(),
        action,
        path: path.to_path_buf(),
        source,
    };
    let procs = dir.join("cgroup.procs");
    let text = std::fs::read_to_string(&procs).map_err(|e| err("read", &procs, e))?;
    out.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    for entry in std::fs::read_dir(dir).map_err(|e| err("list", dir, e))? {
        let entry = entry.map_err(|e| err("list", dir, e))?;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            match collect_procs(container, &entry.path(), out) {
                // A cgroup removed while it was read held nothing by then.
                Err(Error::Cgroup { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound => {}
                r => r?,
            }
        }
    }
    Ok(())
}

/// The process `pid` as a running one, or `None` when it has exited or is the init of its own
/// PID namespace (`NSpid` ending in 1).
fn describe(pid: u32) -> Option<Proc> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let ns_pids: Vec<&str> = status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    let ns_init = ns_pids.len() > 1 && ns_pids.last() == Some(&"1");
    if ns_init {
        return None;
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut command = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    if command.is_empty() {
        command = status
            .lines()
            .find_map(|l| l.strip_prefix("Name:"))
            .map(|n| n.trim().to_string())
            .unwrap_or_else(|| "?".into());
    }
    if command.chars().count() > 80 {
        command = command.chars().take(77).collect::<String>() + "...";
    }
    Some(Proc { pid, command })
}

#[derive(Serialize)]
struct StatusJson {
    root: PathBuf,
    container: Option<Setting>,
    processes: Vec<Proc>,
    busy: bool,
}

/// Says that `ws` is no container's workspace, then `words`.
fn none(ctx: &Ctx, ws: &Workspace, words: &str) -> Result<()> {
    let status = StatusJson {
        root: ws.root().to_path_buf(),
        container: None,
        processes: Vec::new(),
        busy: false,
    };
    ctx.emit(&status, || {
        format!(
            "{} is no container's workspace {words}\n",
            ws.root().display()
        )
    })
}

/// `cairn init container`.
pub(crate) fn init(ctx: &Ctx, a: &ContainerArgs) -> Result<()> {
    let ws = ctx.open_workspace(true)?;
    let path = setting_path(&ws)?;
    let store = ws.store();
    if a.remove {
        fsutil::remove_if_exists(&path)?;
        return none(
            ctx,
            &ws,
            "now: restores no longer look for processes in one",
        );
    }
    if a.name.is_some() || a.cgroup.is_some() {
        let setting = Setting {
            name: a.name.clone(),
            engine: a.engine.clone(),
            engine_args: a.engine_arg.clone(),
            cgroup: match &a.cgroup {
                Some(c) => {
                    let c = std::path::absolute(c).unwrap_or_else(|_| c.clone());
                    if !c.join("cgroup.procs").is_file() {
                        return Err(Error::NotCgroup { path: c }.into());
                    }
                    Some(c)
                }
                None => None,
            },
        };
        let bytes = serde_json::to_vec_pretty(&setting).expect("a setting serialises");
        fsutil::write_atomic(&store.layout().tmp, &path, &bytes)?;
    }
    let Some(setting) = read_setting(&ws)? else {
        return none(ctx, &ws, "(`cairn init container NAME` makes it one)");
    };
    // Checked now, so that a name the engine does not know is said at once, not at the
    // first restore.
    let processes = running(&setting)?;
    let status = StatusJson {
        root: ws.root().to_path_buf(),
        busy: !processes.is_empty(),
        container: Some(setting.clone()),
        processes,
    };
    ctx.emit(&status, || {
        let mut out = format!(
            "{} is mounted in {}: a restore or a rewind with files is refused (BUSY) while a \
             process other than its init runs there\n",
            status.root.display(),
            setting.shown()
        );
        if status.processes.is_empty() {
            out.push_str("nothing runs in it now\n");
        } else {
            out.push_str(&format!("running now: {}\n", list(&status.processes)));
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 58: the cgroup mounts of a hybrid host (v1 controllers and the unified hierarchy
    // side by side, as on the machine the container tests run on) are read from mountinfo,
    // with its octal escapes; other file systems are not cgroups.
    #[test]
    fn cgroup_mounts_are_read_from_mountinfo_lines_v1_and_unified() {
        let pids = CgroupMount::parse(
            "40 30 0:35 / /sys/fs/cgroup/pids rw,relatime shared:17 - cgroup cgroup rw,pids",
        )
        .expect("a v1 mount");
        assert!(!pids.unified);
        assert_eq!(pids.mount_point, Path::new("/sys/fs/cgroup/pids"));
        assert!(pids.options.iter().any(|o| o == "pids"));
        let unified = CgroupMount::parse(
            "42 30 0:37 /sub /sys/fs/cgroup/uni\\040fied rw,relatime - cgroup2 cgroup2 rw",
        )
        .expect("a v2 mount");
        assert!(unified.unified);
        assert_eq!(unified.root, Path::new("/sub"));
        assert_eq!(unified.mount_point, Path::new("/sys/fs/cgroup/uni fied"));
        assert!(CgroupMount::parse("22 1 0:5 / /proc rw - proc proc rw").is_none());
    }
}
