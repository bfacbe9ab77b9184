//! The remote store against a real 3-node Garage cluster (`replication_factor = 3`) on
//! loopback ports. Run by `scripts/test-garage` (the cluster needs the garage binary that
//! `scripts/garage install` builds): `cargo test -p cairn-remote --test garage -- --ignored`.

mod common;

#[path = "common/garage.rs"]
mod garage;

use cairn_rewind::{
    AppendOptions, CheckpointRequest, Checkpoints, FileOutcome, FilePlan, Files, FilesError,
    ForkOptions, NewEntry, RewindOptions, RunOptions, Threads, ThreadsOptions,
};
use cairn_store::{Classify, ErrorKind, SnapshotId, Store};
use common::*;
use garage::Garage;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn copy_tree(from: &Path, to: &Path) {
    for (rel, content) in tree_of(from) {
        match content {
            None => std::fs::create_dir_all(to.join(rel)).expect("dir"),
            Some(bytes) => {
                let p = to.join(rel);
                std::fs::create_dir_all(p.parent().expect("parent")).expect("dir");
                std::fs::write(p, bytes).expect("write");
            }
        }
    }
    std::fs::create_dir_all(to).expect("root");
}

/// Machine A's workspace as machine B sees it: its id and recorded root (which need not exist
/// on B) and the remote store they share, through B's cache. It serves the thread's checkpoints
/// to a fork; it cannot snapshot or restore A's files (they are on A).
struct Elsewhere {
    id: String,
    root: PathBuf,
    store: Store,
}

impl Elsewhere {
    fn refuse(&self) -> FilesError {
        FilesError::new(cairn_store::Error::Unsupported {
            what: format!("changing the files of workspace {}", self.id),
            detail: "they are on another machine".into(),
        })
    }
}

impl Files for Elsewhere {
    fn id(&self) -> &str {
        &self.id
    }
    fn root(&self) -> &Path {
        &self.root
    }
    fn store(&self) -> Option<&Store> {
        Some(&self.store)
    }
    fn checkpoint(&self, _: &CheckpointRequest) -> Result<SnapshotId, FilesError> {
        Err(self.refuse())
    }
    fn keeps(&self, snapshot: &SnapshotId) -> Result<bool, FilesError> {
        Ok(self.store.has_snapshot(snapshot))
    }
    fn plan(&self, _: &SnapshotId) -> Result<FilePlan, FilesError> {
        Err(self.refuse())
    }
    fn apply(&self, _: &FilePlan, _: &str) -> Result<FileOutcome, FilesError> {
        Err(self.refuse())
    }
    fn finished(&self, _: &str, _: &SnapshotId) -> Result<Option<FileOutcome>, FilesError> {
        Err(self.refuse())
    }
}

fn remote_options(g: &Garage, url: &str) -> cairn_store::StoreOptions {
    let mut o = cairn_remote::store_options(url, &g.options()).expect("store options");
    o.inline_max_bytes = 64 << 10;
    o
}

#[test]
#[ignore = "needs the Garage cluster: scripts/test-garage"]
fn a_thread_forked_with_its_files_onto_another_machine_rewinds_there_byte_for_byte() {
    let g = Garage::start();
    let dir = tempfile::tempdir().expect("tmp");
    let url = g.url("fleet");
    // The thread database: PostgreSQL when CAIRN_TEST_PG_URL names a server (scripts/test
    // starts one), as a fleet's is; else an SQLite file both "machines" reach.
    let pg = std::env::var("CAIRN_TEST_PG_URL")
        .ok()
        .filter(|u| !u.is_empty());
    let db = pg
        .clone()
        .map_or_else(|| dir.path().join("threads.db"), PathBuf::from);
    // Ids of their own in a database other runs may share.
    let (chat, chat_b) = match &pg {
        Some(_) => {
            let run = format!("{}-{}", std::process::id(), cairn_store::fsutil::now_ms());
            (format!("chat-{run}"), format!("chat-b-{run}"))
        }
        None => ("chat".to_string(), "chat-b".to_string()),
    };
    // Machine A: its workspace, its cache of the remote, the shared thread database.
    let ws_a = Arc::new(workspace(
        &dir.path().join("a/project"),
        &dir.path().join("a/cache"),
        "project",
        remote_options(&g, &url),
    ));
    let threads_a = Threads::open(&db, ThreadsOptions::default()).expect("threads on A");
    let thread = threads_a
        .create_thread(Some(chat.as_str().into()), serde_json::json!({}))
        .expect("thread")
        .id;
    let run = threads_a
        .begin_run(
            &thread,
            RunOptions {
                workspace: Some(ws_a.clone()),
                checkpoints: Some(Checkpoints::default()),
                ..Default::default()
            },
        )
        .expect("run");
    let say = |e: NewEntry| {
        threads_a
            .append(
                &thread,
                e,
                &AppendOptions {
                    run: Some(run.clone()),
                    ..Default::default()
                },
            )
            .expect("append")
    };
    populate(ws_a.root(), 80);
    let at_u1 = dir.path().join("expected-u1");
    copy_tree(ws_a.root(), &at_u1);
    let u1 = say(NewEntry::user("first"));
    edit(ws_a.root(), 10, 1);
    std::fs::write(ws_a.root().join("new.txt"), b"made in turn one").expect("write");
    let a1 = say(NewEntry::assistant("done")).entry.id;
    let at_a1 = dir.path().join("expected-a1");
    copy_tree(ws_a.root(), &at_a1);
    say(NewEntry::user("second"));
    edit(ws_a.root(), 20, 2);
    say(NewEntry::assistant("done again"));
    threads_a.end_run(&run).expect("end run");

    // Machine B: shares only the remote (through its own cache) and the thread database.
    let ws_b = Arc::new(workspace(
        &dir.path().join("b/project"),
        &dir.path().join("b/cache"),
        "project-b",
        remote_options(&g, &url),
    ));
    let threads_b = Threads::open(&db, ThreadsOptions::default()).expect("threads on B");
    let a_seen_from_b: Arc<dyn Files> = Arc::new(Elsewhere {
        id: "project".into(),
        root: ws_a.root().to_path_buf(),
        store: ws_b.store().clone(),
    });
    let fork = threads_b
        .fork(
            &thread,
            &a1,
            &ForkOptions {
                files: true,
                workspace: Some(ws_b.clone()),
                source: Some(a_seen_from_b),
                new_thread_id: Some(chat_b.as_str().into()),
                ..Default::default()
            },
        )
        .expect("fork onto B");
    assert_same_tree(&at_a1, ws_b.root());
    std::fs::write(ws_b.root().join("new.txt"), b"B's own work").expect("write");
    threads_b
        .rewind(
            &fork.thread_id,
            &u1.entry.id,
            &RewindOptions {
                files: Some(true),
                workspace: Some(ws_b.clone()),
                ..Default::default()
            },
        )
        .expect("rewind on B");
    assert_same_tree(&at_u1, ws_b.root());
    // B's cache holds only what it needed, fetched from Garage.
    assert!(ws_b.store().remote().is_some());
}

/// Runs the `fleet_agent` example (built by `cargo test`) with the cluster's credentials.
fn agent(g: &Garage, args: &[&str]) -> std::process::Child {
    let exe = std::env::current_exe().expect("test binary");
    let bin = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .join("examples/fleet_agent");
    assert!(bin.exists(), "{} is built by cargo test", bin.display());
    Command::new(bin)
        .args(args)
        .env("AWS_ENDPOINT", &g.endpoint)
        .env("AWS_ACCESS_KEY_ID", &g.key_id)
        .env("AWS_SECRET_ACCESS_KEY", &g.secret)
        .env("AWS_REGION", "garage")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start fleet_agent")
}

#[test]
#[ignore = "needs the Garage cluster: scripts/test-garage"]
fn two_processes_snapshot_into_one_bucket_while_a_third_collects_and_every_snapshot_verifies() {
    let g = Garage::start();
    let dir = tempfile::tempdir().expect("tmp");
    let url = g.url("busy");
    let d = |p: &str| dir.path().join(p).display().to_string();
    let collector = agent(&g, &["collect", &url, &d("gc-cache"), "12", "300"]);
    let one = agent(&g, &["snapshot", &url, &d("c1"), &d("w1"), "15"]);
    let two = agent(&g, &["snapshot", &url, &d("c2"), &d("w2"), "15"]);
    let mut kept = Vec::new();
    for child in [one, two] {
        let out = child.wait_with_output().expect("agent");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "agent failed: {}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        );
        let deleted: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("deleted "))
            .collect();
        let taken: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("snapshot "))
            .map(str::to_string)
            .collect();
        assert_eq!(taken.len(), 15, "{text}");
        kept.extend(taken.into_iter().filter(|s| !deleted.contains(&s.as_str())));
    }
    let out = collector.wait_with_output().expect("collector");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "collector failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("collect "))
        .map(|j| serde_json::from_str(j).expect("report"))
        .collect();
    assert!(runs.len() > 3, "{text}");
    let deleted: u64 = runs
        .iter()
        .map(|r| {
            r["packs_deleted"].as_u64().unwrap_or(0) + r["large_deleted"].as_u64().unwrap_or(0)
        })
        .sum();
    // Once the snapshotting is over, collections with a grace period elapsed finish the job.
    let store = Store::open(d("check"), remote_options(&g, &url)).expect("open");
    std::thread::sleep(Duration::from_millis(400));
    let gc = cairn_store::RemoteGcOptions {
        grace: Duration::from_millis(300),
        clock_skew: Duration::ZERO,
        dry_run: false,
    };
    let mut after = 0;
    for _ in 0..2 {
        let r = store.collect_remote(&gc).expect("collect");
        after += r.packs_deleted + r.large_deleted;
        std::thread::sleep(Duration::from_millis(400));
    }
    eprintln!(
        "collector: {} runs, {deleted} packs or large objects deleted while the agents ran, {after} after",
        runs.len()
    );
    assert!(
        deleted as usize + after > 0,
        "the collector deleted garbage: {text}"
    );
    // Every snapshot left verifies from a cache that has nothing of its own.
    assert_eq!(kept.len(), 4);
    let report = cairn_store::verify::verify(&store).expect("verify");
    assert!(report.is_ok(), "{report:?}");
    let ids: Vec<String> = report.snapshots.iter().map(|s| s.id.to_hex()).collect();
    for k in &kept {
        assert!(
            ids.contains(k),
            "snapshot {k} is there and verified: {ids:?}"
        );
    }
}

/// A workspace over `url` whose packs are small (256 KiB), holding `files` incompressible
/// files of 20 KB: its first snapshot uploads many packs, one after another.
fn noisy_workspace(g: &Garage, dir: &Path, url: &str, files: u64) -> cairn_restore::Workspace {
    let mut opts = remote_options(g, url);
    opts.pack_target_bytes = 256 << 10;
    let ws = workspace(&dir.join("w"), &dir.join("cache"), "w", opts);
    for i in 0..files {
        std::fs::write(ws.root().join(format!("f{i}.bin")), noise(20_000, i + 1)).expect("write");
    }
    ws
}

/// Takes a snapshot of `ws` and stops `nodes` once it has made `puts` uploads, while it still
/// has more to make.
fn snapshot_stopping(
    ws: &cairn_restore::Workspace,
    g: &mut Garage,
    puts: u64,
    nodes: &[usize],
) -> Result<cairn_snapshot::Snapshot, cairn_restore::Error> {
    let remote = ws.store().remote().expect("remote").clone();
    let before = remote.stats().puts;
    std::thread::scope(|s| {
        let snap = s.spawn(|| {
            ws.snapshot(&ws.snapshot_options(), Default::default())
                .map(|o| o.snapshot)
        });
        while remote.stats().puts < before + puts && !snap.is_finished() {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(!snap.is_finished(), "the nodes stop during the snapshot");
        for &n in nodes {
            g.kill_node(n);
        }
        eprintln!(
            "nodes {nodes:?} stopped after {} uploads of the snapshot",
            remote.stats().puts - before
        );
        snap.join().expect("snapshot thread")
    })
}

#[test]
#[ignore = "needs the Garage cluster: scripts/test-garage"]
fn a_snapshot_during_which_a_garage_node_stops_completes_or_fails_cleanly_and_a_retry_succeeds() {
    let mut g = Garage::start();
    let dir = tempfile::tempdir().expect("tmp");
    let url = g.url("faulty");
    // Incompressible content, 8 MB in 400 files: some 32 packs to upload.
    let ws = noisy_workspace(&g, dir.path(), &url, 400);
    let started = Instant::now();
    // Node 2 stops once the lease and the first two packs are up.
    let first = snapshot_stopping(&ws, &mut g, 5, &[2]);
    let elapsed = started.elapsed();
    match &first {
        Ok(s) => eprintln!("the snapshot completed with a node down: {}", s.id),
        Err(e) => {
            eprintln!("the snapshot failed: {e}");
            assert!(
                matches!(e.kind(), ErrorKind::Io | ErrorKind::Busy),
                "a clean failure: {e}"
            );
        }
    }
    assert!(elapsed < Duration::from_secs(120));
    // Retried, with the node still down (2 of 3 replicas make a quorum), then with it back.
    let second = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect("retry with a node down");
    g.start_node(2);
    let check = Store::open(dir.path().join("check"), remote_options(&g, &url)).expect("open");
    let report = cairn_store::verify::verify(&check).expect("verify");
    assert!(report.is_ok(), "{report:?}");
    assert!(check.has_snapshot(&second.snapshot.id));
    if let Ok(s) = first {
        assert!(check.has_snapshot(&s.id));
    }
    let back = dir.path().join("back");
    let restored = workspace(
        &back,
        &dir.path().join("cache-back"),
        "back",
        remote_options(&g, &url),
    );
    restored
        .restore(
            &second.snapshot.id,
            &Default::default(),
            &Default::default(),
            Default::default(),
        )
        .expect("restore");
    assert_same_tree(ws.root(), &back);
}

/// Opens the store at `url` with `options`, which must fail within ten seconds.
fn refused_quickly(
    url: &str,
    cache: &Path,
    options: &cairn_remote::RemoteOptions,
) -> cairn_store::Error {
    let started = Instant::now();
    let e = cairn_remote::open(url, cache, options).expect_err("refused");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "{e} took {took:?}");
    e
}

#[test]
#[ignore = "needs the Garage cluster: scripts/test-garage"]
fn a_bad_endpoint_or_bad_credentials_give_a_clear_error_in_under_ten_seconds() {
    let g = Garage::start();
    let dir = tempfile::tempdir().expect("tmp");
    let url = g.url("x");
    // Nothing listens on this port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("port")
        .local_addr()
        .expect("addr")
        .port();
    let mut bad_endpoint = g.options();
    bad_endpoint.endpoint = Some(format!("http://127.0.0.1:{port}"));
    let e = refused_quickly(&url, &dir.path().join("c1"), &bad_endpoint);
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("s3://cairn/x") && msg.contains("endpoint"),
        "{msg}"
    );

    let mut bad_secret = g.options();
    bad_secret.secret_access_key = Some("0".repeat(64));
    let e = refused_quickly(&url, &dir.path().join("c2"), &bad_secret);
    assert_eq!(e.kind(), ErrorKind::Denied, "{e}");
    assert!(e.to_string().contains("secret"), "{e}");

    let mut bad_key = g.options();
    bad_key.access_key_id = Some("GK0000000000000000000000".into());
    let e = refused_quickly(&url, &dir.path().join("c3"), &bad_key);
    assert_eq!(e.kind(), ErrorKind::Denied, "{e}");

    // The good ones work, so the failures above are the endpoint's and the credentials'.
    cairn_remote::open(&url, dir.path().join("c4"), &g.options()).expect("good options");
}

/// Of the packs in `of`, those whose `.pack` file is in a cache (fetched from the remote).
fn cached_packs(cache: &Path, of: &[String]) -> usize {
    std::fs::read_dir(cache.join("objects/packs"))
        .expect("packs")
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            of.contains(&format!("packs/{name}"))
        })
        .count()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The figures of `docs/PERFORMANCE.md` ("Remote store"): `scripts/test-garage --release
/// measured -- --nocapture` prints them.
#[test]
#[ignore = "needs the Garage cluster: scripts/test-garage"]
fn a_per_message_snapshot_uploads_one_pack_and_one_manifest_and_a_restore_fetches_only_the_packs_it_needs_measured(
) {
    let g = Garage::start();
    let dir = tempfile::tempdir().expect("tmp");
    let url = g.url("bench");
    // Default store options: blobs up to 1 MiB go into packs.
    let ws = workspace(
        &dir.path().join("agent"),
        &dir.path().join("cache"),
        "agent",
        cairn_remote::store_options(&url, &g.options()).expect("options"),
    );
    populate(ws.root(), 2000);
    // Files written less than 2 s before a snapshot are re-read by the next one (the racy rule):
    // let the clock move on, so the stat cache is warm from the second snapshot on.
    std::thread::sleep(Duration::from_millis(2100));
    let remote = ws.store().remote().expect("remote").clone();
    let s0 = remote.stats();
    let t = Instant::now();
    let first = ws
        .snapshot(&ws.snapshot_options(), Default::default())
        .expect("first snapshot");
    let first_ms = ms(t.elapsed());
    let d0 = remote.stats().since(&s0);
    println!(
        "first snapshot: {} files, {:.0} ms, {} requests ({} PUT, {} GET, {} LIST, {} DELETE), {} bytes sent, {} received",
        first.snapshot.stats.files, first_ms, d0.requests, d0.puts, d0.gets, d0.lists, d0.deletes, d0.bytes_sent, d0.bytes_received
    );
    let rounds = 20;
    let mut times = Vec::new();
    let mut per = Vec::new();
    let mut last = first.snapshot.id;
    for round in 1..=rounds {
        edit(ws.root(), 10, round);
        let packs_before = remote.list("packs/").expect("list").len();
        let before = remote.stats();
        let t = Instant::now();
        let snap = ws
            .snapshot(&ws.snapshot_options(), Default::default())
            .expect("snapshot");
        times.push(ms(t.elapsed()));
        let d = remote.stats().since(&before);
        assert_eq!(
            remote.list("packs/").expect("list").len(),
            packs_before + 2,
            "one new pack and its index"
        );
        assert_eq!(d.puts, 4, "lease, pack, index, manifest: {d:?}");
        assert_eq!(
            d.requests, 8,
            "and the lease's deletion, the refresh's 3: {d:?}"
        );
        assert_eq!(snap.snapshot.stats.hashed, 10, "the stat cache is warm");
        per.push(d);
        last = snap.snapshot.id;
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let avg = |f: fn(&cairn_store::RemoteStats) -> u64| {
        per.iter().map(f).sum::<u64>() as f64 / per.len() as f64
    };
    println!(
        "per-message snapshot (10 of 2001 files changed), {rounds} rounds: median {median:.1} ms (min {:.1}, max {:.1}); per snapshot {:.1} requests ({:.1} PUT, {:.1} GET, {:.1} LIST, {:.1} DELETE) waited on for {:.1} ms, {:.0} bytes sent, {:.0} received",
        times[0],
        times[times.len() - 1],
        avg(|d| d.requests),
        avg(|d| d.puts),
        avg(|d| d.gets),
        avg(|d| d.lists),
        avg(|d| d.deletes),
        avg(|d| d.busy_us) / 1000.0,
        avg(|d| d.bytes_sent),
        avg(|d| d.bytes_received),
    );

    // Restores on machines that share only the remote.
    let snapshot_packs: Vec<String> = remote
        .list("packs/")
        .expect("list")
        .into_iter()
        .map(|o| o.key)
        .filter(|k| k.ends_with(".pack"))
        .collect();
    for (name, snap, expect_packs) in [("first", first.snapshot.id, 1), ("latest", last, 0)] {
        let cache = dir.path().join(format!("cache-{name}"));
        let opts = cairn_remote::store_options(&url, &g.options()).expect("options");
        let r = opts.remote.as_ref().expect("remote").remote.clone();
        let s = r.stats();
        let t = Instant::now();
        let other = workspace(
            &dir.path().join(format!("restore-{name}")),
            &cache,
            "other",
            opts,
        );
        other
            .restore(
                &snap,
                &Default::default(),
                &Default::default(),
                Default::default(),
            )
            .expect("restore");
        let took = ms(t.elapsed());
        let d = r.stats().since(&s);
        let packs = cached_packs(&cache, &snapshot_packs);
        if expect_packs > 0 {
            assert_eq!(
                packs, expect_packs,
                "only the pack the first snapshot lies in"
            );
        }
        println!(
            "restore of the {name} snapshot on a new machine (open included): {took:.0} ms, {packs} packs of {} fetched, {} requests ({} PUT, {} GET, {} LIST, {} DELETE) waited on for {} ms, {} bytes sent, {} received",
            rounds + 1,
            d.requests, d.puts, d.gets, d.lists, d.deletes, d.busy_us / 1000, d.bytes_sent, d.bytes_received
        );
    }
    let fresh = dir.path().join("restore-latest");
    assert_same_tree(ws.root(), &fresh);
}

#[test]
#[ignore = "needs the Garage cluster: scripts/test-garage"]
fn copy_snapshot_moves_a_snapshot_from_a_local_store_into_garage_and_back_into_another_local_store()
{
    let g = Garage::start();
    let dir = tempfile::tempdir().expect("tmp");
    let url = g.url("copies");
    let root = dir.path().join("local");
    std::fs::create_dir_all(&root).expect("root");
    populate(&root, 50);
    let local = cairn_restore::Workspace::open(
        &root,
        cairn_restore::WorkspaceOptions {
            store: Some(dir.path().join("local-store")),
            ..Default::default()
        },
    )
    .expect("a local workspace");
    let snap = local
        .snapshot(&local.snapshot_options(), Default::default())
        .expect("snapshot");
    let remote = Store::open(dir.path().join("cache"), remote_options(&g, &url)).expect("open");
    let up =
        cairn_store::copy::copy_snapshot(local.store(), &snap.snapshot.id, &remote).expect("up");
    assert!(up.objects_copied > 50, "{up:?}");
    let again =
        cairn_store::copy::copy_snapshot(local.store(), &snap.snapshot.id, &remote).expect("again");
    assert!(again.already_present, "idempotent: {again:?}");
    // Down, through a cache that has nothing yet, into a local store without a remote.
    let other = Store::open(dir.path().join("cache2"), remote_options(&g, &url)).expect("open");
    let back = Store::open(dir.path().join("back"), Default::default()).expect("local store");
    cairn_store::copy::copy_snapshot(&other, &snap.snapshot.id, &back).expect("down");
    assert!(back.remote().is_none());
    let report = cairn_store::verify::verify(&back).expect("verify");
    assert!(report.is_ok(), "{report:?}");
    let out = dir.path().join("restored");
    let restored = cairn_restore::Workspace::open(
        {
            std::fs::create_dir_all(&out).expect("out");
            &out
        },
        cairn_restore::WorkspaceOptions {
            store: Some(dir.path().join("back")),
            ..Default::default()
        },
    )
    .expect("a workspace on the copy");
    restored
        .restore(
            &snap.snapshot.id,
            &Default::default(),
            &Default::default(),
            Default::default(),
        )
        .expect("restore from the copy");
    assert_same_tree(&root, &out);
}

#[test]
#[ignore = "needs the Garage cluster: scripts/test-garage"]
fn a_snapshot_without_a_write_quorum_fails_cleanly_publishes_nothing_and_succeeds_when_retried() {
    let mut g = Garage::start();
    let dir = tempfile::tempdir().expect("tmp");
    let url = g.url("quorum");
    let ws = noisy_workspace(&g, dir.path(), &url, 300);
    let started = Instant::now();
    // Two of three replicas stop once the lease and the first pack are up: no later write
    // reaches its quorum.
    let e = snapshot_stopping(&ws, &mut g, 3, &[1, 2]).expect_err("no quorum, no snapshot");
    let took = started.elapsed();
    eprintln!("failed in {took:?}: {e}");
    assert!(took < Duration::from_secs(120), "{took:?}");
    assert!(
        matches!(e.kind(), ErrorKind::Io | ErrorKind::Busy),
        "a clean failure: {e}"
    );
    g.start_node(1);
    g.start_node(2);
    // Retried once the nodes are back (they may need a moment to rejoin).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut tries = 1;
    let snap = loop {
        match ws.snapshot(&ws.snapshot_options(), Default::default()) {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline => {
                assert!(matches!(e.kind(), ErrorKind::Io | ErrorKind::Busy), "{e}");
                tries += 1;
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(e) => panic!("the retry never succeeded: {e}"),
        }
    };
    eprintln!("the snapshot succeeded at try {tries}, once the nodes were back");
    let check = Store::open(dir.path().join("check"), remote_options(&g, &url)).expect("open");
    let report = cairn_store::verify::verify(&check).expect("verify");
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(
        report.snapshots.len(),
        1,
        "the failed attempt published no manifest"
    );
    assert!(check.has_snapshot(&snap.snapshot.id));
}
