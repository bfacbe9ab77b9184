//! Several processes on one database: the test binary runs itself as a child (the `child`
//! test below does nothing unless `CAIRN_REWIND_CHILD` says what to do).

use crate::fake::Fake;
use crate::util::*;
use cairn_rewind::{
    AppendOptions, EntryKind, EventKind, NewEntry, RewindOptions, RunOptions, RunStatus, Threads,
    ThreadsOptions,
};
use cairn_store::{Classify, ErrorKind};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

const CHILD_ENV: &str = "CAIRN_REWIND_CHILD";

/// The child's side: does what the spec in `CAIRN_REWIND_CHILD` says, printing `CHILD …`
/// lines. Run only by the tests below, as a child process.
#[test]
#[ignore = "run as a child process by the tests of this module and of `real`"]
fn child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let spec: serde_json::Value = serde_json::from_str(&spec).expect("the child's spec");
    let s = |k: &str| spec[k].as_str().expect(k).to_string();
    if s("role") == "real-crash" {
        let mid = spec["mid"].as_bool().expect("mid");
        crate::real::crash_child(std::path::Path::new(&s("dir")), &s("to"), mid);
    }
    let threads = Threads::open(
        s("db"),
        ThreadsOptions {
            recover: false,
            ..Default::default()
        },
    )
    .expect("open");
    let thread = cairn_rewind::ThreadId::new(s("thread"));
    let workspace = || Arc::new(Fake::new(&s("ws_id"), std::path::Path::new(&s("ws_root"))));
    match s("role").as_str() {
        "append" => {
            for i in 0..spec["n"].as_u64().expect("n") {
                let e = threads
                    .append(
                        &thread,
                        NewEntry::user(format!("from the child {i}")),
                        &AppendOptions::default(),
                    )
                    .expect("append");
                println!("CHILD entry {}", e.entry.id);
            }
        }
        "read" => {
            let leaf = threads
                .thread(&thread)
                .expect("thread")
                .active_leaf
                .expect("a leaf");
            println!("CHILD leaf {leaf}");
            let last = threads
                .events_since(0, 10_000)
                .expect("events")
                .pop()
                .expect("an event");
            println!(
                "CHILD last {}",
                serde_json::to_value(last.kind)
                    .expect("kind")
                    .as_str()
                    .expect("str")
            );
        }
        "hold-run" => {
            let run = threads
                .begin_run(
                    &thread,
                    RunOptions {
                        workspace: Some(workspace()),
                        durable: spec["durable"].as_bool().unwrap_or(false),
                        lease: Duration::from_millis(spec["lease_ms"].as_u64().expect("lease")),
                        ..Default::default()
                    },
                )
                .expect("begin a run");
            println!("CHILD run {}", run.id());
            // Hold the process (and the run, without heartbeats) until stdin closes.
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
        }
        "heartbeat" => {
            let run = threads
                .begin_run(&thread, RunOptions::default())
                .expect("begin a run");
            println!("CHILD run {}", run.id());
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            loop {
                if let Err(e) = threads.heartbeat(&run) {
                    println!("CHILD ended {}", e.kind());
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "never interrupted");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        "crash-rewind" => {
            let ws = workspace();
            ws.hooks.lock().abort_after_apply = true;
            let to = cairn_rewind::EntryId::new(s("to"));
            let _ = threads.rewind(
                &thread,
                &to,
                &RewindOptions {
                    key: Some("k".into()),
                    ..with_files(&ws)
                },
            );
            unreachable!("the child aborts inside the restore");
        }
        other => panic!("unknown role {other}"),
    }
}

struct Spawned {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Spawned {
    /// The next `CHILD …` line, without the prefix.
    fn line(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(60))
            .expect("a line from the child")
    }

    fn finish(mut self) -> (std::process::ExitStatus, Vec<String>) {
        drop(self.child.stdin.take());
        let status = self.child.wait().expect("wait for the child");
        (status, self.lines.iter().collect())
    }
}

fn spawn(
    env: &Env,
    role: &str,
    thread: &cairn_rewind::ThreadId,
    extra: serde_json::Value,
) -> Spawned {
    let mut spec = serde_json::json!({
        "role": role,
        "db": env.db(),
        "thread": thread,
        "ws_id": "project",
        "ws_root": env.dir.path().join("project"),
    });
    if let (Some(map), Some(more)) = (spec.as_object_mut(), extra.as_object()) {
        map.extend(more.clone());
    }
    let exe = std::env::current_exe().expect("the test binary");
    let mut child = Command::new(exe)
        .args([
            "processes::child",
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
            "--quiet",
        ])
        .env(CHILD_ENV, spec.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("CHILD ") {
                if tx.send(rest.to_string()).is_err() {
                    break;
                }
            }
        }
    });
    Spawned { child, lines: rx }
}

#[test]
fn two_processes_share_one_database_and_see_the_same_thread() {
    let env = env();
    let t = env.thread("chat");
    let first = note(&env.threads, &t, EntryKind::User, "from the parent");
    let cursor = env.threads.last_cursor().expect("cursor");
    let (status, lines) = spawn(&env, "append", &t, serde_json::json!({"n": 2})).finish();
    assert!(status.success());
    let ids: Vec<String> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("entry ").map(String::from))
        .collect();
    assert_eq!(ids.len(), 2);
    let branch: Vec<String> = active_ids(&env.threads, &t)
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        branch,
        vec![first.to_string(), ids[0].clone(), ids[1].clone()]
    );
    let events = env.threads.events_since(cursor, 10).expect("events");
    assert_eq!(
        events
            .iter()
            .filter(|e| e.kind == EventKind::EntryAppended)
            .count(),
        2
    );
    // The parent rewinds; the child reads the same view.
    env.threads
        .rewind(&t, &first, &RewindOptions::default())
        .expect("rewind");
    let (status, lines) = spawn(&env, "read", &t, serde_json::json!({})).finish();
    assert!(status.success());
    assert!(lines.contains(&format!("leaf {first}")), "{lines:?}");
    assert!(
        lines.contains(&"last rewind_completed".to_string()),
        "{lines:?}"
    );
}

#[test]
fn a_crash_of_another_process_between_the_files_and_the_conversation_switch_is_finished_on_reopen()
{
    let env = env();
    let t = two_turns(&env, "chat");
    let (status, _) = spawn(
        &env,
        "crash-rewind",
        &t.thread,
        serde_json::json!({"to": t.a1}),
    )
    .finish();
    assert!(!status.success(), "the child aborted");
    assert_eq!(
        env.ws.read("a.txt").as_deref(),
        Some("v2"),
        "the child restored the files"
    );
    assert_eq!(active_ids(&env.threads, &t.thread).len(), 4);
    // Until it is finished, work on the thread stays paused.
    let r = env.threads.append(
        &t.thread,
        NewEntry::new(EntryKind::Note, "x"),
        &AppendOptions::default(),
    );
    let e = r.expect_err("paused");
    assert_eq!(e.kind(), ErrorKind::ThreadBusy);
    assert!(e.to_string().contains("interrupted by a crash"), "{e}");
    let ws: Arc<dyn cairn_rewind::Files> = env.ws.clone();
    let reopened = env.reopen(ThreadsOptions {
        workspaces: vec![ws],
        ..Default::default()
    });
    assert_eq!(
        active_ids(&reopened, &t.thread),
        vec![t.u1.entry.id.clone(), t.a1.clone()]
    );
    let records = reopened.rewinds(&t.thread).expect("records");
    assert_eq!(
        (records[0].state.as_str(), records[0].key.as_deref()),
        ("completed", Some("k"))
    );
    assert_eq!(env.ws.applies(), 0, "this process never restored anything");
    env.threads
        .append(
            &t.thread,
            NewEntry::new(EntryKind::Note, "goes on"),
            &AppendOptions::default(),
        )
        .expect("the thread goes on");
}

#[test]
fn a_durable_run_another_process_holds_is_waited_for_until_its_lease_runs_out() {
    let env = env();
    let t = two_turns(&env, "chat");
    let child = spawn(
        &env,
        "hold-run",
        &t.thread,
        serde_json::json!({"durable": true, "lease_ms": 300}),
    );
    let run_id = cairn_rewind::RunId::new(child.line().strip_prefix("run ").expect("run id"));
    let r = env
        .threads
        .rewind(
            &t.thread,
            &t.a1,
            &RewindOptions {
                force: true,
                lease_wait: Duration::from_secs(60),
                ..with_files(&env.ws)
            },
        )
        .expect("the rewind waits, then goes");
    let info = env.threads.run_info(&run_id).expect("info");
    assert!(
        !r.runs.interrupted.contains(&run_id),
        "never forced while files are restored"
    );
    assert_eq!(
        r.runs.durable,
        vec![run_id.clone()],
        "then dropped with the conversation"
    );
    assert_eq!(info.status, RunStatus::Dropped);
    let record = &env.threads.rewinds(&t.thread).expect("records")[0];
    assert!(
        record.finished_ms.expect("finished") >= info.lease_expires_ms,
        "the files waited for the lease"
    );
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
    assert!(child.finish().0.success());
}

#[test]
fn a_durable_run_another_process_holds_refuses_a_file_rewind_past_lease_wait() {
    let env = env();
    let t = two_turns(&env, "chat");
    let child = spawn(
        &env,
        "hold-run",
        &t.thread,
        serde_json::json!({"durable": true, "lease_ms": 120_000}),
    );
    let run_id = cairn_rewind::RunId::new(child.line().strip_prefix("run ").expect("run id"));
    let r = env.threads.rewind(
        &t.thread,
        &t.a1,
        &RewindOptions {
            force: true,
            lease_wait: Duration::from_millis(100),
            ..with_files(&env.ws)
        },
    );
    assert_eq!(kind(r), ErrorKind::ThreadBusy);
    assert_eq!(
        env.threads.run_info(&run_id).expect("info").status,
        RunStatus::Running
    );
    assert_eq!(active_ids(&env.threads, &t.thread).len(), 4);
    assert_eq!(env.ws.applies(), 0);
    assert!(child.finish().0.success());
}

#[test]
fn a_run_of_another_process_in_the_workspace_refuses_a_file_rewind_with_workspace_busy() {
    let env = env();
    let t = two_turns(&env, "chat");
    let other = env.thread("other");
    let child = spawn(
        &env,
        "hold-run",
        &other,
        serde_json::json!({"lease_ms": 120_000}),
    );
    child.line();
    assert_eq!(
        kind(env.threads.rewind(&t.thread, &t.a1, &with_files(&env.ws))),
        ErrorKind::WorkspaceBusy
    );
    assert!(child.finish().0.success());
    // Its process is gone: its run no longer goes on, lease or not.
    env.threads
        .rewind(&t.thread, &t.a1, &with_files(&env.ws))
        .expect("rewind");
}

#[test]
fn a_forced_rewind_without_files_stops_a_run_of_another_process_at_its_next_heartbeat() {
    let env = env();
    let t = two_turns(&env, "chat");
    let child = spawn(&env, "heartbeat", &t.thread, serde_json::json!({}));
    let run_id = cairn_rewind::RunId::new(child.line().strip_prefix("run ").expect("run id"));
    assert_eq!(
        kind(
            env.threads
                .rewind(&t.thread, &t.a1, &RewindOptions::default())
        ),
        ErrorKind::ThreadBusy
    );
    let r = env
        .threads
        .rewind(&t.thread, &t.a1, &forced())
        .expect("forced");
    assert_eq!(r.runs.interrupted, vec![run_id]);
    assert_eq!(child.line(), "ended RUN_INTERRUPTED");
    assert!(child.finish().0.success());
}

#[test]
fn a_forced_rewind_without_files_drops_a_durable_run_another_process_holds() {
    let env = env();
    let t = two_turns(&env, "chat");
    let child = spawn(
        &env,
        "hold-run",
        &t.thread,
        serde_json::json!({"durable": true, "lease_ms": 120_000}),
    );
    let run_id = cairn_rewind::RunId::new(child.line().strip_prefix("run ").expect("run id"));
    assert_eq!(
        kind(
            env.threads
                .rewind(&t.thread, &t.a1, &RewindOptions::default())
        ),
        ErrorKind::ThreadBusy
    );
    let r = env
        .threads
        .rewind(&t.thread, &t.a1, &forced())
        .expect("forced");
    assert_eq!(r.runs.going, vec![run_id.clone()]);
    assert_eq!(r.runs.durable, vec![run_id.clone()]);
    assert!(
        r.runs.interrupted.is_empty(),
        "dropped, to stop at its next step"
    );
    assert_eq!(
        env.threads.run_info(&run_id).expect("info").status,
        RunStatus::Dropped
    );
    assert!(child.finish().0.success());
}
