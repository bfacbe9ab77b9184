//! Runs, leases, tool calls and the guards they raise: THREAD_BUSY, WORKSPACE_BUSY, force,
//! tool calls that outlive their run, holds, and a tool rewinding its own thread.

use crate::fake::Gate;
use crate::util::*;
use cairn_rewind::{
    AppendOptions, EntryKind, NewEntry, RewindOptions, RunOptions, RunStatus, ThreadsOptions,
};
use cairn_store::ErrorKind;
use std::sync::mpsc;
use std::time::Duration;

fn begin(env: &Env, thread: &cairn_rewind::ThreadId, opts: RunOptions) -> cairn_rewind::Run {
    env.threads.begin_run(thread, opts).expect("begin a run")
}

#[test]
fn a_going_run_of_the_thread_refuses_a_rewind_with_thread_busy() {
    let env = env();
    let t = two_turns(&env, "chat");
    let run = begin(&env, &t.thread, RunOptions::default());
    let r = env
        .threads
        .rewind(&t.thread, &t.a1, &RewindOptions::default());
    assert_eq!(kind(r), ErrorKind::ThreadBusy);
    assert_eq!(active_ids(&env.threads, &t.thread).len(), 4);
    // A dry run reports it.
    let plan = env
        .threads
        .rewind(
            &t.thread,
            &t.a1,
            &RewindOptions {
                dry_run: true,
                ..Default::default()
            },
        )
        .expect("dry run");
    assert_eq!(plan.runs.going, vec![run.id().clone()]);
    env.threads.end_run(&run).expect("end");
    env.threads
        .rewind(&t.thread, &t.a1, &RewindOptions::default())
        .expect("rewind once it ended");
}

#[test]
fn a_run_whose_lease_ran_out_is_not_going() {
    let env = env();
    let t = two_turns(&env, "chat");
    let run = begin(
        &env,
        &t.thread,
        RunOptions {
            lease: Duration::from_millis(50),
            ..Default::default()
        },
    );
    eventually("the lease to run out", || {
        !env.threads.run_info(run.id()).expect("info").going
    });
    env.threads
        .rewind(&t.thread, &t.a1, &RewindOptions::default())
        .expect("rewind");
    // A heartbeat renews it.
    let run = begin(
        &env,
        &t.thread,
        RunOptions {
            lease: Duration::from_secs(60),
            ..Default::default()
        },
    );
    env.threads.heartbeat(&run).expect("heartbeat");
    assert!(env.threads.run_info(run.id()).expect("info").going);
}

#[test]
fn a_run_of_another_thread_in_the_same_workspace_refuses_a_file_rewind_with_workspace_busy() {
    let env = env();
    let t = two_turns(&env, "chat");
    let other = env.thread("other");
    let run = run_in(&env.threads, &other, env.ws.clone());
    let r = env.threads.rewind(&t.thread, &t.a1, &with_files(&env.ws));
    assert_eq!(kind(r), ErrorKind::WorkspaceBusy);
    // Without files it is not in the way.
    env.threads
        .rewind(&t.thread, &t.a1, &RewindOptions::default())
        .expect("conversation only");
    env.threads.end_run(&run).expect("end");
}

#[test]
fn a_run_in_an_overlapping_workspace_refuses_a_file_rewind_and_a_disjoint_one_does_not() {
    let env = env();
    let t = two_turns(&env, "chat");
    let other = env.thread("other");
    let sub = env.fake("sub", "project/sub");
    let run = run_in(&env.threads, &other, sub.clone());
    assert_eq!(
        kind(env.threads.rewind(&t.thread, &t.a1, &with_files(&env.ws))),
        ErrorKind::WorkspaceBusy
    );
    env.threads.end_run(&run).expect("end");
    // The other way round: a run at the parent root refuses a restore of the sub workspace.
    let third = env.thread("third");
    let sub_run = run_in(&env.threads, &third, sub.clone());
    env.ws.write("x", "1");
    say(&env.threads, &third, &sub_run, NewEntry::user("in sub"));
    let sub_leaf = note(&env.threads, &third, EntryKind::Assistant, "ok");
    env.threads.end_run(&sub_run).expect("end");
    let parent_run = run_in(&env.threads, &other, env.ws.clone());
    assert_eq!(
        kind(env.threads.rewind(&third, &sub_leaf, &with_files(&sub))),
        ErrorKind::WorkspaceBusy
    );
    env.threads.end_run(&parent_run).expect("end");
    // A disjoint workspace is not in the way.
    let apart = env.fake("apart", "apart");
    let apart_run = run_in(&env.threads, &other, apart);
    env.threads
        .rewind(&t.thread, &t.a1, &with_files(&env.ws))
        .expect("rewind");
    env.threads.end_run(&apart_run).expect("end");
}

#[test]
fn force_interrupts_the_runs_here_and_they_end_with_run_interrupted() {
    let env = env();
    let t = two_turns(&env, "chat");
    let mine = run_in(&env.threads, &t.thread, env.ws.clone());
    let other_thread = env.thread("other");
    let neighbour = run_in(&env.threads, &other_thread, env.ws.clone());
    let r = env
        .threads
        .rewind(&t.thread, &t.a1, &forced_files(&env.ws))
        .expect("forced rewind");
    let mut interrupted = r.runs.interrupted.clone();
    interrupted.sort();
    let mut expected = vec![mine.id().clone(), neighbour.id().clone()];
    expected.sort();
    assert_eq!(interrupted, expected);
    assert!(mine.is_interrupted());
    assert_eq!(
        kind(env.threads.heartbeat(&mine)),
        ErrorKind::RunInterrupted
    );
    let appended = env.threads.append(
        &t.thread,
        NewEntry::user("late"),
        &AppendOptions {
            run: Some(mine.clone()),
            ..Default::default()
        },
    );
    assert_eq!(kind(appended), ErrorKind::RunInterrupted);
    assert_eq!(
        kind(env.threads.tool_start(&mine, "write_file")),
        ErrorKind::RunInterrupted
    );
    assert_eq!(
        env.threads.end_run(&mine).expect("end"),
        RunStatus::Interrupted
    );
    assert_eq!(
        env.threads.run_info(neighbour.id()).expect("info").status,
        RunStatus::Interrupted
    );
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
}

#[test]
fn a_forced_rewind_without_files_leaves_runs_of_other_threads_alone() {
    let env = env();
    let t = two_turns(&env, "chat");
    let other = env.thread("other");
    let neighbour = run_in(&env.threads, &other, env.ws.clone());
    let mine = run_in(&env.threads, &t.thread, env.ws.clone());
    let r = env
        .threads
        .rewind(&t.thread, &t.a1, &forced())
        .expect("forced");
    assert_eq!(r.runs.interrupted, vec![mine.id().clone()]);
    assert!(env.threads.run_info(neighbour.id()).expect("info").going);
}

#[test]
fn an_open_tool_call_refuses_a_file_rewind_without_force_even_after_its_run_ended() {
    let env = env();
    let t = two_turns(&env, "chat");
    let other = env.thread("other");
    let run = run_in(&env.threads, &other, env.ws.clone());
    let call = env.threads.tool_start(&run, "shell").expect("tool");
    env.threads.end_run(&run).expect("end");
    let r = env.threads.rewind(&t.thread, &t.a1, &with_files(&env.ws));
    let e = r.expect_err("refused");
    assert_eq!(cairn_store::Classify::kind(&e), ErrorKind::WorkspaceBusy);
    assert!(e.to_string().contains("shell"), "{e}");
    env.threads.tool_finish(&call).expect("finish");
    env.threads
        .tool_finish(&call)
        .expect("finishing twice is fine");
    env.threads
        .rewind(&t.thread, &t.a1, &with_files(&env.ws))
        .expect("rewind");
}

#[test]
fn a_forced_rewind_waits_for_a_tool_call_that_outlives_its_run() {
    let env = env();
    let t = two_turns(&env, "chat");
    let run = run_in(&env.threads, &t.thread, env.ws.clone());
    let call = env.threads.tool_start(&run, "long_shell").expect("tool");
    let threads = env.threads.clone();
    let watcher = {
        let run = run.clone();
        std::thread::spawn(move || {
            // The tool goes on after its run was stopped, then finishes.
            eventually("the run to be interrupted", || run.is_interrupted());
            threads.tool_finish(&call).expect("finish");
        })
    };
    let r = env
        .threads
        .rewind(
            &t.thread,
            &t.a1,
            &RewindOptions {
                force: true,
                tool_settle: Duration::from_secs(30),
                ..with_files(&env.ws)
            },
        )
        .expect("forced rewind");
    watcher.join().expect("watcher");
    assert_eq!(r.runs.interrupted, vec![run.id().clone()]);
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
    assert_eq!(
        env.threads
            .run_info(run.id())
            .expect("info")
            .open_tool_calls,
        0
    );
}

#[test]
fn a_forced_rewind_refuses_past_tool_settle_and_leaves_the_conversation() {
    let env = env();
    let t = two_turns(&env, "chat");
    let run = run_in(&env.threads, &t.thread, env.ws.clone());
    let _call = env.threads.tool_start(&run, "never_ends").expect("tool");
    let r = env.threads.rewind(
        &t.thread,
        &t.a1,
        &RewindOptions {
            force: true,
            tool_settle: Duration::from_millis(50),
            ..with_files(&env.ws)
        },
    );
    let e = r.expect_err("refused");
    assert_eq!(cairn_store::Classify::kind(&e), ErrorKind::WorkspaceBusy);
    assert!(e.to_string().contains("never_ends"), "{e}");
    assert_eq!(active_ids(&env.threads, &t.thread).len(), 4);
    assert_eq!(env.ws.applies(), 0);
    assert_eq!(
        env.threads.rewinds(&t.thread).expect("records")[0].state,
        "failed"
    );
    // The run stays interrupted: force stopped it before the wait.
    assert!(run.is_interrupted());
}

#[test]
fn a_rewind_drops_the_threads_paused_and_durable_runs() {
    let env = env();
    let t = two_turns(&env, "chat");
    let paused = begin(&env, &t.thread, RunOptions::default());
    env.threads.pause_run(&paused).expect("pause");
    let durable = begin(
        &env,
        &t.thread,
        RunOptions {
            durable: true,
            lease: Duration::from_millis(20),
            ..Default::default()
        },
    );
    eventually("the durable run's lease to run out", || {
        !env.threads.run_info(durable.id()).expect("info").going
    });
    let runs = env.threads.runs(&t.thread).expect("runs");
    assert_eq!(runs.paused.len(), 1);
    assert_eq!(runs.durable.len(), 1);
    assert!(runs.going.is_empty());
    let r = env
        .threads
        .rewind(&t.thread, &t.a1, &RewindOptions::default())
        .expect("rewind");
    assert_eq!(r.runs.paused, vec![paused.id().clone()]);
    assert_eq!(r.runs.durable, vec![durable.id().clone()]);
    assert_eq!(
        env.threads.run_info(paused.id()).expect("info").status,
        RunStatus::Dropped
    );
    assert_eq!(
        kind(env.threads.resume_run(&paused)),
        ErrorKind::RunInterrupted
    );
    assert_eq!(
        kind(env.threads.heartbeat(&durable)),
        ErrorKind::RunInterrupted
    );
    let runs = env.threads.runs(&t.thread).expect("runs");
    assert!(runs.paused.is_empty() && runs.durable.is_empty());
}

#[test]
fn a_tool_of_a_run_asking_to_rewind_its_own_thread_gets_validation() {
    let env = env();
    let t = two_turns(&env, "chat");
    let run = begin(&env, &t.thread, RunOptions::default());
    let r = env.threads.rewind(
        &t.thread,
        &t.a1,
        &RewindOptions {
            from_run: Some(run.id().clone()),
            force: true,
            ..Default::default()
        },
    );
    assert_eq!(kind(r), ErrorKind::Validation);
    assert!(!run.is_interrupted());
    // Nor its own workspace, from another thread.
    let other = env.thread("other");
    let run2 = run_in(&env.threads, &other, env.ws.clone());
    let r = env.threads.rewind(
        &t.thread,
        &t.a1,
        &RewindOptions {
            from_run: Some(run2.id().clone()),
            ..with_files(&env.ws)
        },
    );
    assert_eq!(kind(r), ErrorKind::Validation);
}

/// Starts a file rewind on another thread that blocks inside the restore; returns once the
/// restore was entered, with the channel that releases it.
pub(crate) fn blocked_rewind(
    env: &Env,
    t: &Turns,
) -> (
    mpsc::Sender<()>,
    std::thread::JoinHandle<cairn_rewind::Result<cairn_rewind::RewindReport>>,
) {
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    env.ws.hooks.lock().gate = Some(Gate {
        entered: entered_tx,
        release: parking_lot::Mutex::new(release_rx),
    });
    let threads = env.threads.clone();
    let ws = env.ws.clone();
    let (thread, a1) = (t.thread.clone(), t.a1.clone());
    let handle = std::thread::spawn(move || threads.rewind(&thread, &a1, &with_files(&ws)));
    entered_rx.recv().expect("the restore was entered");
    (release_tx, handle)
}

#[test]
fn a_run_asked_for_during_a_rewind_waits_for_it_and_goes_on_after_the_point() {
    let env = env();
    let t = two_turns(&env, "chat");
    let (release, rewind) = blocked_rewind(&env, &t);
    let threads = env.threads.clone();
    let thread = t.thread.clone();
    let (started_tx, started_rx) = mpsc::channel();
    let runner = std::thread::spawn(move || {
        let run = threads
            .begin_run(&thread, RunOptions::default())
            .expect("the run waits, then starts");
        started_tx.send(()).expect("send");
        let e = threads
            .append(
                &thread,
                NewEntry::user("after"),
                &AppendOptions {
                    run: Some(run),
                    ..Default::default()
                },
            )
            .expect("append");
        e.entry
    });
    assert!(
        started_rx.recv_timeout(Duration::from_millis(100)).is_err(),
        "the run must wait"
    );
    release.send(()).expect("release");
    rewind.join().expect("join").expect("rewind");
    let entry = runner.join().expect("runner");
    assert_eq!(entry.parent_id, Some(t.a1.clone()));
}

#[test]
fn a_run_that_asks_not_to_wait_fails_with_thread_busy_during_a_rewind() {
    let env = env();
    let t = two_turns(&env, "chat");
    let (release, rewind) = blocked_rewind(&env, &t);
    let r = env.threads.begin_run(
        &t.thread,
        RunOptions {
            reject_if_busy: true,
            ..Default::default()
        },
    );
    assert_eq!(kind(r), ErrorKind::ThreadBusy);
    // With files the workspace is held too: a run of another thread there is refused.
    let other = env.thread("other");
    let r = env.threads.begin_run(
        &other,
        RunOptions {
            workspace: Some(env.ws.clone()),
            reject_if_busy: true,
            ..Default::default()
        },
    );
    assert_eq!(kind(r), ErrorKind::WorkspaceBusy);
    // An append without a run is refused as well, and another rewind.
    let r = env
        .threads
        .append(&t.thread, NewEntry::user("x"), &AppendOptions::default());
    assert_eq!(kind(r), ErrorKind::ThreadBusy);
    let r = env
        .threads
        .rewind(&t.thread, &t.u1.entry.id, &RewindOptions::default());
    assert_eq!(kind(r), ErrorKind::ThreadBusy);
    release.send(()).expect("release");
    rewind.join().expect("join").expect("rewind");
    env.threads
        .begin_run(
            &t.thread,
            RunOptions {
                reject_if_busy: true,
                ..Default::default()
            },
        )
        .expect("free again");
}

#[test]
fn a_second_handle_sees_the_hold_of_the_first() {
    let env = env();
    let t = two_turns(&env, "chat");
    let second = env.reopen(ThreadsOptions::default());
    let (release, rewind) = blocked_rewind(&env, &t);
    let r = second.begin_run(
        &t.thread,
        RunOptions {
            reject_if_busy: true,
            ..Default::default()
        },
    );
    assert_eq!(kind(r), ErrorKind::ThreadBusy);
    release.send(()).expect("release");
    rewind.join().expect("join").expect("rewind");
}

#[test]
fn a_workspace_hold_refuses_a_file_rewind_with_workspace_busy() {
    let env = env();
    let t = two_turns(&env, "chat");
    env.ws.hooks.lock().busy = true;
    assert_eq!(
        kind(env.threads.rewind(&t.thread, &t.a1, &with_files(&env.ws))),
        ErrorKind::WorkspaceBusy
    );
    let plan = env
        .threads
        .rewind(&t.thread, &t.a1, &dry_files(&env.ws))
        .expect("a dry run says so");
    assert_eq!(plan.files.expect("files").restore["busy"], true);
    assert_eq!(env.ws.applies(), 0);
}

#[test]
fn a_durable_run_can_be_adopted_once_its_holder_is_gone() {
    let env = env();
    let t = env.thread("chat");
    let second = env.reopen(ThreadsOptions::default());
    let run = second
        .begin_run(
            &t,
            RunOptions {
                durable: true,
                ..Default::default()
            },
        )
        .expect("durable");
    assert_eq!(
        kind(env.threads.adopt_run(run.id(), RunOptions::default())),
        ErrorKind::ThreadBusy
    );
    drop(run);
    drop(second);
    let adopted = env
        .threads
        .adopt_run(&"r_unknown".into(), RunOptions::default());
    assert_eq!(kind(adopted), ErrorKind::NotFound);
    let runs = env.threads.runs(&t).expect("runs");
    assert!(runs.going.is_empty(), "its holder is gone");
    let id = runs.durable[0].id.clone();
    let adopted = env
        .threads
        .adopt_run(&id, RunOptions::default())
        .expect("adopt");
    assert!(env.threads.run_info(adopted.id()).expect("info").here);
    env.threads.heartbeat(&adopted).expect("heartbeat");
}
