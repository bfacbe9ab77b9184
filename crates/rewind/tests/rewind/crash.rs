//! Crashes inside this process (a panic stands for the crash): the rewind record lets the
//! next handle finish or fail what was interrupted.

use crate::util::*;
use cairn_rewind::{EventKind, ForkOptions, RewindOptions, ThreadsOptions};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// Runs `f`, which must panic (the simulated crash).
pub fn crash<T>(f: impl FnOnce() -> T) {
    let r = std::panic::catch_unwind(AssertUnwindSafe(f));
    assert!(r.is_err(), "the simulated crash happened");
}

#[test]
fn a_crash_between_the_files_and_the_conversation_switch_is_finished_on_reopen() {
    let env = env();
    let t = two_turns(&env, "chat");
    env.ws.hooks.lock().panic_after_apply = true;
    crash(|| env.threads.rewind(&t.thread, &t.a1, &with_files(&env.ws)));
    env.ws.hooks.lock().panic_after_apply = false;
    // The files were restored; the conversation was not switched.
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
    assert_eq!(active_ids(&env.threads, &t.thread).len(), 4);
    let Env { dir, threads, ws } = env;
    drop(threads);
    let reopened = crate::util::open_in_store(
        dir.path().join("store"),
        ThreadsOptions {
            workspaces: vec![ws.clone() as Arc<dyn cairn_rewind::Files>],
            ..Default::default()
        },
    )
    .expect("reopen");
    assert_eq!(
        active_ids(&reopened, &t.thread),
        vec![t.u1.entry.id.clone(), t.a1.clone()]
    );
    let records = reopened.rewinds(&t.thread).expect("records");
    assert_eq!(records[0].state, "completed");
    let events = reopened.events_since(0, 1000).expect("events");
    let done = events
        .iter()
        .find(|e| e.kind == EventKind::RewindCompleted)
        .expect("completed");
    assert_eq!(done.data["recovered"], true);
    assert_eq!(ws.applies(), 1, "the files were not restored twice");
}

#[test]
fn recovery_reports_what_it_finished() {
    let env = env();
    let t = two_turns(&env, "chat");
    env.ws.hooks.lock().panic_after_apply = true;
    crash(|| env.threads.rewind(&t.thread, &t.a1, &with_files(&env.ws)));
    env.ws.hooks.lock().panic_after_apply = false;
    // Without its workspace the rewind is left for later, and the thread is not held by it.
    let blind = env.reopen(ThreadsOptions {
        recover: false,
        ..Default::default()
    });
    let none = blind.recover(&[]).expect("recover without the workspace");
    assert_eq!(none.pending.len(), 1);
    assert!(none.completed.is_empty());
    let ws: Arc<dyn cairn_rewind::Files> = env.ws.clone();
    let done = blind.recover(&[ws]).expect("recover with it");
    assert_eq!(done.completed.len(), 1);
    let report = &done.completed[0];
    assert!(report.recovered);
    assert_eq!(
        report.conversation.cut,
        vec![t.u2.entry.id.clone(), t.a2.clone()]
    );
    assert!(report
        .files
        .as_ref()
        .is_some_and(|f| f.safety_snapshot_id.is_some()));
}

#[test]
fn repeating_the_key_of_a_rewind_a_crash_interrupted_finishes_it() {
    let env = env();
    let t = two_turns(&env, "chat");
    let opts = RewindOptions {
        key: Some("undo".into()),
        ..with_files(&env.ws)
    };
    env.ws.hooks.lock().panic_after_apply = true;
    crash(|| env.threads.rewind(&t.thread, &t.a1, &opts));
    env.ws.hooks.lock().panic_after_apply = false;
    let r = env
        .threads
        .rewind(&t.thread, &t.a1, &opts)
        .expect("the same key");
    assert!(r.recovered);
    assert_eq!(env.ws.applies(), 1);
    assert_eq!(active_ids(&env.threads, &t.thread).len(), 2);
    assert_eq!(
        env.threads.rewind(&t.thread, &t.a1, &opts).expect("again"),
        r
    );
}

#[test]
fn a_crash_before_the_files_were_restored_fails_the_rewind_on_reopen_and_the_key_retries() {
    let env = env();
    let t = two_turns(&env, "chat");
    let opts = RewindOptions {
        key: Some("undo".into()),
        ..with_files(&env.ws)
    };
    env.ws.hooks.lock().panic_before_apply = true;
    crash(|| env.threads.rewind(&t.thread, &t.a1, &opts));
    env.ws.hooks.lock().panic_before_apply = false;
    let ws: Arc<dyn cairn_rewind::Files> = env.ws.clone();
    let reopened = env.reopen(ThreadsOptions {
        workspaces: vec![ws],
        ..Default::default()
    });
    let records = reopened.rewinds(&t.thread).expect("records");
    assert_eq!(records[0].state, "failed");
    assert!(records[0]
        .error
        .as_deref()
        .is_some_and(|e| e.contains("before its files were restored")));
    assert_eq!(
        active_ids(&reopened, &t.thread).len(),
        4,
        "the conversation is as it was"
    );
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v3"));
    let r = reopened.rewind(&t.thread, &t.a1, &opts).expect("retry");
    assert!(!r.recovered);
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
}

#[test]
fn a_new_rewind_supersedes_one_a_crash_left_undecided() {
    let env = env();
    let t = two_turns(&env, "chat");
    env.ws.hooks.lock().panic_after_apply = true;
    crash(|| env.threads.rewind(&t.thread, &t.a1, &with_files(&env.ws)));
    env.ws.hooks.lock().panic_after_apply = false;
    // Another workspace handle than the record's cannot decide it; a conversation rewind
    // proceeds and the old record can never switch the leaf after it.
    env.threads
        .rewind(&t.thread, &t.u1.entry.id, &RewindOptions::default())
        .expect("rewind");
    let records = env.threads.rewinds(&t.thread).expect("records");
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].state, "failed");
    assert!(records[0]
        .error
        .as_deref()
        .is_some_and(|e| e.contains("superseded")));
    let ws: Arc<dyn cairn_rewind::Files> = env.ws.clone();
    env.threads.recover(&[ws]).expect("recover");
    assert_eq!(
        active_ids(&env.threads, &t.thread),
        vec![t.u1.entry.id.clone()]
    );
}

#[test]
fn a_fork_a_crash_interrupted_is_taken_back_on_reopen() {
    let env = env();
    let t = two_turns(&env, "chat");
    env.ws.hooks.lock().panic_after_apply = true;
    crash(|| {
        env.threads.fork(
            &t.thread,
            &t.a1,
            &ForkOptions {
                files: true,
                workspace: Some(env.ws.clone()),
                new_thread_id: Some("half".into()),
                ..Default::default()
            },
        )
    });
    env.ws.hooks.lock().panic_after_apply = false;
    assert_eq!(
        kind(env.threads.thread(&"half".into())),
        cairn_store::ErrorKind::NotFound,
        "a pending fork is not seen"
    );
    let reopened = env.reopen(ThreadsOptions {
        recover: false,
        ..Default::default()
    });
    let recovery = reopened.recover(&[]).expect("recover");
    assert_eq!(
        recovery.forks_taken_back,
        vec![cairn_rewind::ThreadId::from("half")]
    );
    reopened
        .create_thread(Some("half".into()), serde_json::json!({}))
        .expect("the id is free again");
    reopened
        .rewind(&t.thread, &t.a1, &RewindOptions::default())
        .expect("the source is not held");
}
