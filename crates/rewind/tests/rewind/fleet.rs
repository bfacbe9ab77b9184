//! A fleet: two machines whose agents share one thread database on PostgreSQL and one store
//! (here a directory both see, as a network file system would give them), and nothing else.
//! Machine A works and checkpoints; machine B forks the thread with its files into its own
//! workspace and rewinds there; B's trees must equal A's at the same points, byte for byte.
//!
//! Needs `CAIRN_TEST_PG_URL` (`scripts/test` sets it); without it the test says it is skipped.

use crate::real::write_in;
use crate::util::{fresh_pg_url, pg_url};
use cairn_restore::{Workspace, WorkspaceOptions};
use cairn_rewind::{
    AppendOptions, Checkpoints, FileOutcome, FilePlan, Files, FilesError, ForkOptions, NewEntry,
    RewindOptions, RunOptions, Threads, ThreadsOptions,
};
use cairn_store::{SnapshotId, Store};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a tree holds, path by path: a file's mode bits and bytes, a symlink's target, a
/// directory's mode bits.
#[derive(Debug, PartialEq, Eq)]
enum Node {
    File { mode: u32, bytes: Vec<u8> },
    Link(PathBuf),
    Dir { mode: u32 },
}

fn tree(root: &Path) -> BTreeMap<PathBuf, Node> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Node>) {
        for entry in std::fs::read_dir(dir).expect("read a directory") {
            let path = entry.expect("an entry").path();
            let rel = path
                .strip_prefix(root)
                .expect("under the root")
                .to_path_buf();
            let meta = std::fs::symlink_metadata(&path).expect("lstat");
            let mode = meta.permissions().mode() & 0o7777;
            if meta.file_type().is_symlink() {
                out.insert(
                    rel,
                    Node::Link(std::fs::read_link(&path).expect("readlink")),
                );
            } else if meta.is_dir() {
                out.insert(rel, Node::Dir { mode });
                walk(root, &path, out);
            } else {
                let bytes = std::fs::read(&path).expect("read a file");
                out.insert(rel, Node::File { mode, bytes });
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// A machine: its workspace (the shared store) and its own connection to the database.
struct Machine {
    ws: Arc<Workspace>,
    threads: Threads,
}

fn machine(root: &Path, id: &str, store: &Path, url: &str) -> Machine {
    std::fs::create_dir_all(root).expect("the workspace root");
    let ws = Arc::new(
        Workspace::open(
            root,
            WorkspaceOptions {
                id: Some(id.into()),
                store: Some(store.to_path_buf()),
                ..Default::default()
            },
        )
        .expect("open the workspace"),
    );
    let threads = Threads::open(
        url,
        ThreadsOptions {
            workspaces: vec![ws.clone() as Arc<dyn Files>],
            ..Default::default()
        },
    )
    .expect("open the thread database");
    Machine { ws, threads }
}

/// Another machine's workspace as this one knows it: its id and root (as the database recorded
/// them) and the shared store that keeps its checkpoints. Its files are not here: this side
/// only names where a fork's checkpoints come from (`ForkOptions::source`).
struct Elsewhere {
    id: String,
    root: PathBuf,
    store: Arc<Workspace>,
}

fn not_here(what: &str) -> FilesError {
    FilesError::msg(
        cairn_store::ErrorKind::Unsupported,
        format!("{what}: the workspace is on another machine"),
    )
}

impl Files for Elsewhere {
    fn id(&self) -> &str {
        &self.id
    }
    fn root(&self) -> &Path {
        &self.root
    }
    fn store(&self) -> Option<&Store> {
        Files::store(self.store.as_ref())
    }
    fn checkpoint(&self, _: &cairn_rewind::CheckpointRequest) -> Result<SnapshotId, FilesError> {
        Err(not_here("take a checkpoint"))
    }
    fn keeps(&self, snapshot: &SnapshotId) -> Result<bool, FilesError> {
        Files::keeps(self.store.as_ref(), snapshot)
    }
    fn plan(&self, _: &SnapshotId) -> Result<FilePlan, FilesError> {
        Err(not_here("plan a restore"))
    }
    fn apply(&self, _: &FilePlan, _: &str) -> Result<FileOutcome, FilesError> {
        Err(not_here("restore files"))
    }
    fn finished(&self, _: &str, _: &SnapshotId) -> Result<Option<FileOutcome>, FilesError> {
        Ok(None)
    }
}

#[test]
fn a_thread_forked_with_its_files_onto_another_machine_rewinds_there_to_the_same_bytes() {
    let Some(admin) = pg_url() else {
        eprintln!(
            "skipped the fleet test: CAIRN_TEST_PG_URL is not set (scripts/test starts a PostgreSQL server and sets it)"
        );
        return;
    };
    let url = fresh_pg_url(&admin);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = dir.path().join("shared-store");
    let a = machine(&dir.path().join("machine-a/project"), "a", &store, &url);

    // Machine A: two turns, a checkpoint before each user message.
    let thread = a
        .threads
        .create_thread(Some("feature".into()), serde_json::json!({}))
        .expect("create")
        .id;
    let run = a
        .threads
        .begin_run(
            &thread,
            RunOptions {
                workspace: Some(a.ws.clone()),
                checkpoints: Some(Checkpoints::default()),
                ..Default::default()
            },
        )
        .expect("begin a run");
    let say = |entry: NewEntry| {
        a.threads
            .append(
                &thread,
                entry,
                &AppendOptions {
                    run: Some(run.clone()),
                    ..Default::default()
                },
            )
            .expect("append")
    };
    let root_a = Workspace::root(&a.ws).to_path_buf();
    write_in(&root_a, "src/main.rs", "fn main() {}\n");
    write_in(&root_a, "README.md", "# feature\n");
    let binary: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    std::fs::write(root_a.join("logo.bin"), &binary).expect("write");
    write_in(&root_a, "scripts/run.sh", "#!/bin/sh\necho run\n");
    std::fs::set_permissions(
        root_a.join("scripts/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    std::os::unix::fs::symlink("src/main.rs", root_a.join("entry")).expect("symlink");
    let before_u1 = tree(&root_a);
    let u1 = say(NewEntry::user("add the feature"));
    assert!(u1.checkpoint.is_some(), "a checkpoint before the message");

    write_in(&root_a, "src/main.rs", "fn main() { feature() }\n");
    write_in(&root_a, "src/feature.rs", "pub fn feature() {}\n");
    std::fs::remove_file(root_a.join("logo.bin")).expect("rm");
    std::fs::set_permissions(
        root_a.join("scripts/run.sh"),
        std::fs::Permissions::from_mode(0o700),
    )
    .expect("chmod");
    let a1 = say(NewEntry::assistant("added")).entry.id;
    let before_u2 = tree(&root_a);
    let u2 = say(NewEntry::user("now document it"));
    assert!(u2.checkpoint.is_some());
    write_in(&root_a, "docs/feature.md", "It works.\n");
    std::fs::remove_dir_all(root_a.join("scripts")).expect("rm -r");
    say(NewEntry::assistant("documented"));
    a.threads.end_run(&run).expect("end the run");
    assert_ne!(before_u1, before_u2);

    // Machine B: only the store and the database are shared.
    let b = machine(&dir.path().join("machine-b/project"), "b", &store, &url);
    let root_b = Workspace::root(&b.ws).to_path_buf();
    let recorded_root = a
        .threads
        .checkpoint_by_id(&u2.checkpoint.as_ref().expect("checkpoint").id)
        .expect("the checkpoint")
        .root;
    let source: Arc<dyn Files> = Arc::new(Elsewhere {
        id: "a".into(),
        root: recorded_root,
        store: b.ws.clone(),
    });
    let fork = b
        .threads
        .fork(
            &thread,
            &a1,
            &ForkOptions {
                files: true,
                workspace: Some(b.ws.clone()),
                source: Some(source),
                new_thread_id: Some("feature-on-b".into()),
                ..Default::default()
            },
        )
        .expect("fork onto machine B");
    assert!(
        fork.snapshots_copied.is_empty(),
        "one shared store: nothing to copy"
    );
    // The end of turn one on A is the files before the second message.
    assert_eq!(tree(&root_b), before_u2);

    // B works on, then rewinds the fork to its first message: A's files before it.
    write_in(&root_b, "src/main.rs", "fn main() { b_was_here() }\n");
    let report = b
        .threads
        .rewind(
            &fork.thread_id,
            &u1.entry.id,
            &RewindOptions {
                files: Some(true),
                workspace: Some(b.ws.clone()),
                ..Default::default()
            },
        )
        .expect("rewind on machine B");
    assert_eq!(report.files.expect("files").workspace_id, "b");
    assert_eq!(tree(&root_b), before_u1);
    // A's workspace is as A left it, and A sees B's fork and its rewind.
    assert!(root_a.join("docs/feature.md").is_file());
    assert_eq!(
        a.threads
            .active_branch(&fork.thread_id)
            .expect("A reads B's thread")
            .len(),
        1,
        "rewound to its first message"
    );
}
