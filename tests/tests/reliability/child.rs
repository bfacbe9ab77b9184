//! The child side of the crash, fault and concurrency tests: one job per process, chosen by
//! `CAIRN_REL_JOB`, working on `CAIRN_REL_DIR` (`root/` the workspace, `store/` its store,
//! `dst/` a second store). A job reports on stdout with lines starting `CAIRN-CHILD `:
//! `READY` just before the operation the parent times and kills, `DONE …` when it is over,
//! `ERR <KIND> <message>` when it failed. A crash job then sleeps until it is killed, so that
//! every run ends with a SIGKILL, early or late.

use crate::util::{open_store, open_ws, TAG};
use cairn_store::gc::GcOptions;
use cairn_store::{Classify, SnapshotId};
use std::path::PathBuf;
use std::time::Duration;

/// The collection every job runs: no grace period, and few packs kept, so that a collection
/// deletes, repacks and sweeps as much as it can.
pub fn eager_gc() -> GcOptions {
    GcOptions {
        grace: Duration::ZERO,
        max_packs: 2,
        ..GcOptions::default()
    }
}

fn say(line: &str) {
    println!("{TAG}{line}");
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set for the child"))
}

fn ids(name: &str) -> Vec<SnapshotId> {
    env(name)
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| SnapshotId::from_hex(s).expect("a snapshot id"))
        .collect()
}

fn now_ms() -> i64 {
    cairn_store::fsutil::now_ms()
}

fn report<T, E: Classify + std::fmt::Display>(r: Result<T, E>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            say(&format!("ERR {} {e}", e.kind()));
            None
        }
    }
}

/// Sleeps until killed; gives up after two minutes so that no orphan lingers.
fn wait_to_be_killed() {
    for _ in 0..120 {
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn deadline_passed() -> bool {
    let until: i64 = env("CAIRN_REL_UNTIL").parse().expect("a deadline");
    now_ms() >= until
}

#[test]
#[ignore = "the child side of the reliability tests; they run it in child processes"]
fn child() {
    let Ok(job) = std::env::var("CAIRN_REL_JOB") else {
        return;
    };
    let dir = PathBuf::from(env("CAIRN_REL_DIR"));
    match job.as_str() {
        "snapshot" => {
            let ws = open_ws(&dir);
            say("READY");
            if let Some(s) = report(ws.snapshot(&ws.snapshot_options(), Default::default())) {
                say(&format!("DONE {}", s.snapshot.id.to_hex()));
            }
            wait_to_be_killed();
        }
        "restore" => {
            let ws = open_ws(&dir);
            let target = ids("CAIRN_REL_SNAPS")[0];
            let options = cairn_restore::ApplyOptions {
                crash_after_ops: std::env::var("CAIRN_REL_CRASH_AFTER")
                    .ok()
                    .and_then(|n| n.parse().ok()),
                ..Default::default()
            };
            say("READY");
            let restored = ws.restore(&target, &Default::default(), &options, Default::default());
            if report(restored).is_some() {
                say("DONE");
            }
            wait_to_be_killed();
        }
        "copy" => {
            let src = open_store(&dir.join("store"));
            let dst = open_store(&dir.join("dst"));
            let snaps = ids("CAIRN_REL_SNAPS");
            say("READY");
            let all = snaps
                .iter()
                .all(|id| report(src.copy_snapshot_to(id, &dst)).is_some());
            if all {
                say("DONE");
            }
            wait_to_be_killed();
        }
        "gc" => {
            let store = open_store(&dir.join("store"));
            say("READY");
            if let Some(r) = report(store.gc(&eager_gc())) {
                say(&format!("DONE deferred={}", r.deferred));
            }
            wait_to_be_killed();
        }
        "rewind" => {
            let ws = std::sync::Arc::new(open_ws(&dir));
            let threads = open_threads(&dir, &ws);
            let thread = cairn_rewind::ThreadId::from(env("CAIRN_REL_THREAD"));
            let to = cairn_rewind::EntryId::from(env("CAIRN_REL_ENTRY"));
            say("READY");
            if report(threads.rewind(&thread, &to, &rewind_with_files(&ws))).is_some() {
                say("DONE");
            }
            wait_to_be_killed();
        }
        "lock-db" => {
            let conn = rusqlite::Connection::open(dir.join("store").join(cairn_rewind::DB_FILE))
                .expect("the database opens");
            conn.execute_batch("BEGIN EXCLUSIVE")
                .expect("an exclusive transaction");
            say("READY");
            wait_to_be_killed();
        }
        "snapshot-loop" => snapshot_loop(&dir),
        "gc-loop" => gc_loop(&dir),
        "restore-loop" => restore_loop(&dir),
        "try" => try_ops(&dir),
        other => panic!("unknown child job {other}"),
    }
}

/// Snapshots the workspace until the deadline, opening it afresh each time as a command
/// would, reporting `SNAP <id> <root tree> <start ms> <end ms>`.
fn snapshot_loop(dir: &std::path::Path) {
    let mut rng = crate::util::Rng::new(u64::from(std::process::id()));
    while !deadline_passed() {
        let start = now_ms();
        let ws = open_ws(dir);
        let snap = ws
            .snapshot(&ws.snapshot_options(), Default::default())
            .expect("a snapshot succeeds while others run");
        let end = now_ms();
        say(&format!(
            "SNAP {} {} {start} {end}",
            snap.snapshot.id.to_hex(),
            snap.snapshot.root.to_hex()
        ));
        std::thread::sleep(Duration::from_millis(rng.below(100)));
    }
    say("DONE");
}

/// Prunes (keeping the protected snapshots and the newest few) and collects garbage with no
/// grace period until the deadline, reporting `GC <deferred> <objects deleted> <repacked>`.
fn gc_loop(dir: &std::path::Path) {
    let store = open_store(&dir.join("store"));
    let keep = cairn_store::retain::Retention {
        count: Some(6),
        ..cairn_store::retain::Retention::default()
    };
    while !deadline_passed() {
        let r = store
            .prune(&keep, &eager_gc())
            .expect("a prune succeeds while others run");
        say(&format!(
            "GC {} {} {} {}",
            r.gc.deferred,
            r.deleted.len(),
            r.gc.objects_deleted,
            r.gc.packs_repacked
        ));
        std::thread::sleep(Duration::from_millis(5));
    }
    say("DONE");
}

/// Restores one of the versions in `CAIRN_REL_SNAPS` after another until the deadline,
/// reporting `RESTORED <id> <ms before it began> <ms after it ended> <BUSY answers retried>`,
/// and pausing between restores so that the files stand still for a while.
fn restore_loop(dir: &std::path::Path) {
    let ws = open_ws(dir);
    let versions = ids("CAIRN_REL_SNAPS");
    let mut rng = crate::util::Rng::new(u64::from(std::process::id()) ^ 0x5eed);
    while !deadline_passed() {
        let target = versions[rng.below(versions.len() as u64) as usize];
        let before = now_ms();
        // BUSY says "try again": a process opening the workspace may hold the restore lock for
        // a moment while it checks whether a journal needs recovering.
        let mut tries = 0;
        loop {
            match ws.restore(
                &target,
                &Default::default(),
                &Default::default(),
                Default::default(),
            ) {
                Ok(_) => break,
                Err(e) if e.kind() == cairn_store::ErrorKind::Busy && tries < 50 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("a restore failed while snapshots and collections ran: {e}"),
            }
        }
        let after = now_ms();
        say(&format!(
            "RESTORED {} {before} {after} {tries}",
            target.to_hex()
        ));
        std::thread::sleep(Duration::from_millis(200 + rng.below(300)));
    }
    say("DONE");
}

/// Runs the operations named in `CAIRN_REL_OPS` (comma separated: `open`, `snapshot`,
/// `restore`, `verify`, `gc`) one after another, reporting `RESULT <op> OK` or
/// `RESULT <op> <KIND> <message>` for each, and stopping at the first failure. Used by the
/// fault tests, run as another user.
fn try_ops(dir: &std::path::Path) {
    let ops = env("CAIRN_REL_OPS");
    let result = |op: &str, r: Result<(), (cairn_store::ErrorKind, String)>| {
        let ok = r.is_ok();
        match r {
            Ok(()) => say(&format!("RESULT {op} OK")),
            Err((k, m)) => say(&format!("RESULT {op} {k} {m}")),
        }
        ok
    };
    let ws = match cairn_restore::Workspace::open(
        dir.join("root"),
        crate::util::ws_options(&dir.join("store")),
    ) {
        Ok(ws) => {
            result("open", Ok(()));
            ws
        }
        Err(e) => {
            result("open", Err((e.kind(), e.to_string())));
            return;
        }
    };
    fn kind<T, E: Classify + std::fmt::Display>(
        r: Result<T, E>,
    ) -> Result<(), (cairn_store::ErrorKind, String)> {
        r.map(|_| ()).map_err(|e| (e.kind(), e.to_string()))
    }
    for op in ops.split(',') {
        let r = match op {
            "snapshot" => kind(ws.snapshot(&ws.snapshot_options(), Default::default())),
            "restore" => kind(ws.restore(
                &ids("CAIRN_REL_SNAPS")[0],
                &Default::default(),
                &Default::default(),
                Default::default(),
            )),
            "verify" => match ws.store().verify() {
                Ok(v) if v.is_ok() => Ok(()),
                Ok(v) => Err((cairn_store::ErrorKind::Corrupt, format!("{v:?}"))),
                Err(e) => Err((e.kind(), e.to_string())),
            },
            "gc" => kind(ws.store().gc(&eager_gc())),
            other => panic!("unknown operation {other}"),
        };
        if !result(op, r) {
            return;
        }
    }
}

/// The thread database of the store in `dir`, recovering with the workspace `ws`.
pub fn open_threads(
    dir: &std::path::Path,
    ws: &std::sync::Arc<cairn_restore::Workspace>,
) -> cairn_rewind::Threads {
    let files: std::sync::Arc<dyn cairn_rewind::Files> = ws.clone();
    cairn_rewind::Threads::open_in_store(
        dir.join("store"),
        cairn_rewind::ThreadsOptions {
            checkpoints: Some(cairn_rewind::Checkpoints::default()),
            workspaces: vec![files],
            ..cairn_rewind::ThreadsOptions::default()
        },
    )
    .expect("the thread database opens")
}

/// Rewind options that restore the files of `ws`.
pub fn rewind_with_files(
    ws: &std::sync::Arc<cairn_restore::Workspace>,
) -> cairn_rewind::RewindOptions {
    let files: std::sync::Arc<dyn cairn_rewind::Files> = ws.clone();
    cairn_rewind::RewindOptions {
        files: Some(true),
        workspace: Some(files),
        ..cairn_rewind::RewindOptions::default()
    }
}
