//! Issue 58: snapshots carried as one stream (`cairn export`, `cairn import`), and container
//! workspaces (`cairn init container`): restores refused while a process runs in the
//! container's cgroup. The real engine (podman) runs in `scripts/test-containers`; here a
//! cgroup is a directory holding `cgroup.procs`, and an engine a script.

use crate::{json_error, Fixture};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command};

/// A workspace with a file large enough to be stored apart (not in a pack) and a symlink,
/// snapshotted; the id and the stream `cairn export` wrote of it.
fn exported(f: &Fixture) -> (String, Vec<u8>) {
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(f.path("big.bin"), &big).expect("write");
    std::os::unix::fs::symlink("src/main.rs", f.path("link")).expect("symlink");
    let id = f.snapshot("carried");
    let out = f.cairn(&["export", "carried"]).output().expect("run cairn");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (id, out.stdout)
}

/// `cairn --json import` in `b`, the stream on standard input.
fn import(b: &Fixture, stream: &[u8]) -> std::process::Output {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("cairn"))
        .arg("-C")
        .arg(&b.root)
        .args(["--json", "import"])
        .env_remove("CAIRN_FORCE_PROMPT")
        .env_remove("CAIRN_THREADS_DB")
        .env_remove("CAIRN_REMOTE")
        .env_remove("CAIRN_STORE")
        .env("CAIRN_HOME", &b.home)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run cairn import");
    // A refused import may stop reading before the end: a broken pipe is no failure here.
    let _ = child.stdin.take().expect("stdin").write_all(stream);
    child.wait_with_output().expect("wait")
}

/// The JSON error a refused import printed, once its exit code is checked to be CORRUPT's.
fn refused(out: &std::process::Output) -> serde_json::Value {
    assert_eq!(
        out.status.code(),
        Some(19),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stderr).expect("a JSON error");
    assert_eq!(v["error"]["kind"], "CORRUPT", "{v}");
    v
}

/// Every file under `dir` (the store's objects, its snapshots), as paths.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p.display().to_string());
            }
        }
    }
    out
}

// Issue 58: a snapshot goes to a store that shares nothing with the first, and its files come
// back byte for byte.
#[test]
fn an_exported_snapshot_imports_into_another_store_and_restores_byte_for_byte() {
    let a = Fixture::new();
    let (id, stream) = exported(&a);
    let b = Fixture::new();
    std::fs::remove_dir_all(&b.root).expect("an empty workspace");
    std::fs::create_dir(&b.root).expect("mkdir");
    let out = import(&b, &stream);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["snapshot"], id.as_str(), "{report}");
    assert_eq!(report["already_present"], false, "{report}");
    b.json(&["restore", &id, "--yes"]);
    for rel in ["big.bin", "src/main.rs", "README.md"] {
        assert_eq!(
            std::fs::read(b.path(rel)).expect("restored"),
            std::fs::read(a.path(rel)).expect("original"),
            "{rel}"
        );
    }
    assert_eq!(
        std::fs::read_link(b.path("link")).expect("a symlink"),
        Path::new("src/main.rs")
    );
    // Again: the store has it, nothing new is written.
    let again: serde_json::Value =
        serde_json::from_slice(&import(&b, &stream).stdout).expect("json");
    assert_eq!(again["already_present"], true, "{again}");
    // To a file with -o, the same bytes (one snapshot always makes the same stream).
    let file = a.root.parent().expect("parent").join("snap.tar");
    a.json(&["export", &id, "-o", file.to_str().expect("utf-8")]);
    assert_eq!(std::fs::read(&file).expect("the export"), stream);
}

// Issue 58: a stream cut short anywhere (in a header, in an object, at an entry's boundary
// before its END) is refused as CORRUPT, and the target store gets nothing: no snapshot, no
// object, nothing left in its tmp/.
#[test]
fn a_truncated_export_is_refused_as_corrupt_and_nothing_is_imported() {
    let a = Fixture::new();
    let (_, stream) = exported(&a);
    // The END entry's header: the last entry before the two zero blocks and END's one block.
    let end_header = stream.len() - 2 * 512 - 512 - 512;
    assert_eq!(&stream[end_header..end_header + 3], b"END");
    for cut in [100, 700, 1536 + 1000, stream.len() / 2, end_header] {
        let b = Fixture::new();
        b.snapshot("before");
        let store = b.store();
        let before = files_under(&store.join("objects"));
        let v = refused(&import(&b, &stream[..cut]));
        let msg = v["error"]["message"].as_str().expect("message");
        assert_eq!(v["error"]["kind"], "CORRUPT", "{v}");
        assert!(msg.contains("cut short"), "cut at {cut}: {msg}");
        assert!(msg.contains("nothing was imported"), "{msg}");
        let listed = b.json(&["list"]);
        assert_eq!(
            listed["snapshots"].as_array().expect("snapshots").len(),
            1,
            "cut at {cut}: {listed}"
        );
        assert_eq!(files_under(&store.join("objects")), before, "cut at {cut}");
        assert!(files_under(&store.join("tmp")).is_empty(), "cut at {cut}");
    }
}

// Issue 58: a byte changed in an object, in the manifest or in a header is found (each object
// is checked against its name, the manifest against its id, each header against its
// checksum), and a stream that is no Cairn export is refused.
#[test]
fn an_altered_or_foreign_export_is_refused_as_corrupt_naming_what_is_wrong() {
    let a = Fixture::new();
    let (id, stream) = exported(&a);
    let find = |needle: &[u8]| {
        stream
            .windows(needle.len())
            .position(|w| w == needle)
            .expect("an entry")
    };
    let manifest = find(format!("snapshots/{id}").as_bytes());
    let cases: Vec<(usize, &str)> = vec![
        // A byte in the middle of the stream: one of the large file's.
        (stream.len() / 2, "was altered"),
        // A byte of the padding after the manifest (tar ignores it; an export is exact).
        (manifest + 512 + 200, "padding"),
        // The manifest's bytes.
        (manifest + 512 + 20, "hash"),
        // A header's name: its checksum no longer matches.
        (manifest + 3, "checksum"),
    ];
    for (at, said) in cases {
        let mut bad = stream.clone();
        bad[at] ^= 0x5a;
        let b = Fixture::new();
        let v = refused(&import(&b, &bad));
        let msg = v["error"]["message"].as_str().expect("message");
        assert!(msg.contains(said), "byte {at}: {msg}");
        assert!(msg.contains("nothing was imported"), "{msg}");
    }
    let b = Fixture::new();
    let v = refused(&import(&b, &[7u8; 4096]));
    assert!(
        v["error"]["message"]
            .as_str()
            .expect("message")
            .contains("checksum"),
        "{v}"
    );
    let v = refused(&import(&b, &[]));
    assert!(
        v["error"]["message"]
            .as_str()
            .expect("message")
            .contains("empty"),
        "{v}"
    );
}

/// A `sleep` child the test kills when done.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        Sleeper(Command::new("sleep").arg("600").spawn().expect("run sleep"))
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A thread `chat` with one user message (its checkpoint holds the files as they are), then
/// an edit: its entry id.
fn thread_with_a_checkpoint(f: &Fixture) -> String {
    f.json(&["thread", "new", "--id", "chat"]);
    let v = f.json(&["thread", "append", "chat", "--kind", "user", "--text", "hi"]);
    f.write("src/main.rs", "fn main() { edited() }\n");
    v["entry"]["id"].as_str().expect("an entry id").to_string()
}

// Issue 58: a container's workspace is refused with BUSY (restore, rewind --files, fork --files
// into it), the dry run too and with --force, while its cgroup (or one below it) lists a running process, naming the container and the
// process; once that process has exited the restore goes through.
#[test]
fn a_restore_of_a_container_workspace_is_busy_while_a_process_runs_in_its_cgroup() {
    let f = Fixture::new();
    let id = f.snapshot("start");
    let entry = thread_with_a_checkpoint(&f);
    let cgroup = f.root.parent().expect("parent").join("cgroup");
    std::fs::create_dir_all(cgroup.join("exec-1")).expect("mkdir");
    std::fs::write(cgroup.join("cgroup.procs"), "").expect("write");
    let mut sleeper = Sleeper::start();
    // A process in a cgroup below the container's counts too.
    std::fs::write(
        cgroup.join("exec-1/cgroup.procs"),
        format!("{}\n", sleeper.pid()),
    )
    .expect("write");
    let cg = cgroup.to_str().expect("utf-8");
    let status = f.json(&["init", "container", "--cgroup", cg]);
    assert_eq!(status["busy"], true, "{status}");
    for args in [
        vec!["--json", "restore", &id, "--dry-run"],
        vec!["--json", "restore", &id, "--yes"],
        vec!["--json", "rewind", "chat", &entry, "--files", "--dry-run"],
        vec![
            "--json", "rewind", "chat", &entry, "--files", "--yes", "--force",
        ],
        vec!["--json", "fork", "chat", &entry, "--files", "--dry-run"],
    ] {
        let v = json_error(&mut f.cairn(&args), 14);
        let msg = v["error"]["message"].as_str().expect("message");
        assert_eq!(v["error"]["kind"], "BUSY", "{args:?}: {v}");
        assert!(msg.contains(cg), "{args:?}: {msg}");
        assert!(
            msg.contains(&format!("{} (sleep 600)", sleeper.pid())),
            "{args:?}: {msg}"
        );
    }
    assert_eq!(
        f.read("src/main.rs").as_deref(),
        Some("fn main() { edited() }\n"),
        "nothing was restored"
    );
    // The process exits (its pid may stay listed a moment: an exited one runs nothing).
    sleeper.stop();
    f.json(&["restore", &id, "--yes"]);
    assert_eq!(f.read("src/main.rs").as_deref(), Some("fn main() {}\n"));
    f.write("src/main.rs", "fn main() { edited() }\n");
    f.json(&["rewind", "chat", &entry, "--files", "--yes"]);
    assert_eq!(f.read("src/main.rs").as_deref(), Some("fn main() {}\n"));
    // Removed, the workspace is an ordinary one.
    let status = f.json(&["init", "container", "--remove"]);
    assert_eq!(status["container"], serde_json::Value::Null, "{status}");
}

// Issue 58: with a container's name, its engine names the container's init (`inspect`): a
// stopped container (pid 0) runs nothing, and a name the engine does not know refuses the
// restore (NOT_FOUND) naming the container and the command, rather than restoring blind.
#[test]
fn a_container_named_to_its_engine_is_looked_up_by_inspect_and_an_unknown_one_refuses() {
    let f = Fixture::new();
    let id = f.snapshot("start");
    let dir = f.root.parent().expect("parent");
    let engine = dir.join("engine");
    let log = dir.join("engine.log");
    std::fs::write(
        &engine,
        format!(
            "#!/bin/sh\necho \"$@\" >> {}\nif [ \"$3\" = inspect ] && [ \"$6\" = stopped-box ]; then echo 0; exit 0; fi\n\
             echo \"Error: no such container $6\" >&2\nexit 125\n",
            log.display()
        ),
    )
    .expect("write");
    std::fs::set_permissions(&engine, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let e = engine.to_str().expect("utf-8");
    let status = f.json(&[
        "init",
        "container",
        "stopped-box",
        "--engine",
        e,
        "--engine-arg",
        "--root",
        "--engine-arg",
        "/x",
    ]);
    assert_eq!(status["busy"], false, "{status}");
    f.write("src/main.rs", "changed\n");
    f.json(&["restore", &id, "--yes"]);
    assert_eq!(f.read("src/main.rs").as_deref(), Some("fn main() {}\n"));
    let asked = std::fs::read_to_string(&log).expect("the engine was asked");
    assert!(
        asked.contains("--root /x inspect --format {{.State.Pid}} stopped-box"),
        "{asked}"
    );
    // A container the engine does not know: refused before anything changes.
    let v = json_error(
        &mut f.cairn(&["--json", "init", "container", "gone-box", "--engine", e]),
        12,
    );
    let msg = v["error"]["message"].as_str().expect("message");
    assert!(msg.contains("container gone-box"), "{msg}");
    assert!(msg.contains("no such container"), "{msg}");
    f.write("src/main.rs", "changed\n");
    let v = json_error(&mut f.cairn(&["--json", "restore", &id, "--yes"]), 12);
    assert!(
        v["error"]["message"]
            .as_str()
            .expect("message")
            .contains("--remove"),
        "{v}"
    );
    assert_eq!(f.read("src/main.rs").as_deref(), Some("changed\n"));
}

// Issue 58: paths a container made into symlinks (whose targets, resolved on the host, lie
// outside the workspace) are removed as links: a restore never writes or deletes through one.
#[test]
fn removals_never_follow_symlinks_made_inside_the_container() {
    let f = Fixture::new();
    let id = f.snapshot("start");
    let outside = f.root.parent().expect("parent").join("host-files");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(outside.join("main.rs"), "host's own\n").expect("write");
    std::fs::write(outside.join("keep"), "host's own\n").expect("write");
    // A directory of the snapshot replaced by a link out, and a new link out.
    std::fs::remove_dir_all(f.path("src")).expect("rm");
    std::os::unix::fs::symlink(&outside, f.path("src")).expect("symlink");
    std::os::unix::fs::symlink(&outside, f.path("dist")).expect("symlink");
    f.json(&["restore", &id, "--yes"]);
    assert!(std::fs::symlink_metadata(f.path("src"))
        .expect("src")
        .is_dir());
    assert_eq!(f.read("src/main.rs").as_deref(), Some("fn main() {}\n"));
    assert!(!crate::exists(&f.path("dist")));
    assert_eq!(
        std::fs::read_to_string(outside.join("main.rs")).expect("still there"),
        "host's own\n"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("keep")).expect("still there"),
        "host's own\n"
    );
}
