//! The inbox of a thread (issue 59): prompts queued with their admission key while the thread
//! is under way, delivered at the next safe boundary with the checkpoint taken then, cancelled
//! by a rewind (and by the recovery that finishes one), and old keys answered with their
//! admission.

use crate::crash::crash;
use crate::util::*;
use cairn_rewind::{
    AppendOptions, Checkpoints, DeliverOptions, EventKind, NewEntry, PromptState, ThreadId,
    ThreadsOptions,
};
use cairn_store::ErrorKind;
use std::sync::Arc;

/// A database whose runtime level takes a checkpoint before every user message.
fn env_checkpointed() -> Env {
    env_with(ThreadsOptions {
        checkpoints: Some(Checkpoints::default()),
        ..Default::default()
    })
}

/// Delivery without a run, checkpointing the env's workspace.
fn in_ws(env: &Env) -> DeliverOptions {
    DeliverOptions {
        workspace: Some(env.ws.clone()),
        ..Default::default()
    }
}

fn event_kinds(env: &Env, thread: &ThreadId) -> Vec<EventKind> {
    env.threads
        .thread_events_since(thread, 0, 1000)
        .expect("events")
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

// issue 59
#[test]
fn a_prompt_queued_while_a_run_is_under_way_is_delivered_with_its_checkpoint_at_the_boundary() {
    let env = env_checkpointed();
    let chat = env.thread("chat");
    let run = env.run(&chat);
    env.ws.write("a.txt", "v1");
    say(&env.threads, &chat, &run, NewEntry::user("make it v2"));
    let call = env.threads.tool_start(&run, "write_file").expect("tool");

    // Queued while the run and its tool call are under way: nothing enters the transcript.
    let queued = env
        .threads
        .enqueue(&chat, "k-1", NewEntry::user("then make it v3"))
        .expect("queue");
    assert_eq!(queued.state, PromptState::Queued);
    assert!(!queued.repeated);
    let before = active_ids(&env.threads, &chat);
    let checkpoints_before = env.ws.checkpoints();
    let waiting = env.threads.deliver(&chat, &in_ws(&env)).expect("deliver");
    assert!(waiting.delivered.is_none());
    assert_eq!(waiting.queued, 1);
    let why = waiting.waiting.expect("it says what is under way");
    assert!(why.contains(run.id().as_str()), "{why}");
    // The run itself, at its turn's end, still waits for its open tool call.
    let own = DeliverOptions {
        run: Some(run.clone()),
        ..Default::default()
    };
    let why = env.threads.deliver(&chat, &own).expect("deliver").waiting;
    assert!(why.is_some_and(|w| w.contains("write_file")));
    assert_eq!(active_ids(&env.threads, &chat), before);
    assert_eq!(
        env.ws.checkpoints(),
        checkpoints_before,
        "no checkpoint yet"
    );

    // The turn goes on after the prompt was queued: the checkpoint is of the files at delivery.
    env.ws.write("a.txt", "v2");
    env.threads.tool_finish(&call).expect("finish");
    say(&env.threads, &chat, &run, NewEntry::assistant("done"));
    env.threads.end_run(&run).expect("end");
    assert_eq!(env.threads.under_way(&chat).expect("boundary"), None);

    let d = env.threads.deliver(&chat, &in_ws(&env)).expect("deliver");
    assert_eq!(d.waiting, None);
    assert_eq!(d.queued, 0);
    let delivered = d.delivered.expect("delivered at the boundary");
    let entry = d.entry.expect("its entry");
    let cp = d.checkpoint.expect("its checkpoint");
    assert_eq!(delivered.state, PromptState::Delivered);
    assert_eq!(delivered.entry_id.as_ref(), Some(&entry.id));
    assert_eq!(delivered.checkpoint_id.as_ref(), Some(&cp.id));
    assert_eq!(entry.payload, b"then make it v3");
    assert_eq!(entry.key.as_deref(), Some("k-1"));
    assert_eq!(
        entry.checkpoint.as_ref().map(|r| &r.checkpoint_id),
        Some(&cp.id)
    );
    assert_eq!(cp.entry_id.as_ref(), Some(&entry.id));
    let files = env.ws.snapshot_files(&cp.snapshot_id).expect("snapshot");
    assert_eq!(files.get("a.txt").map(String::as_str), Some("v2"));
    assert_eq!(active_ids(&env.threads, &chat).last(), Some(&entry.id));

    // The same key again answers with that admission; nothing is sent or checkpointed twice.
    let checkpoints = env.ws.checkpoints();
    let again = env
        .threads
        .enqueue(&chat, "k-1", NewEntry::user("then make it v3"))
        .expect("queue again");
    assert!(again.repeated);
    assert_eq!(again.state, PromptState::Delivered);
    assert_eq!(again.entry_id.as_ref(), Some(&entry.id));
    let none = env.threads.deliver(&chat, &in_ws(&env)).expect("deliver");
    assert!(none.delivered.is_none() && none.waiting.is_none());
    assert_eq!(env.ws.checkpoints(), checkpoints);
    assert_eq!(active_ids(&env.threads, &chat).last(), Some(&entry.id));
    let kinds = event_kinds(&env, &chat);
    assert!(kinds.contains(&EventKind::PromptQueued), "{kinds:?}");
    assert!(kinds.contains(&EventKind::PromptDelivered), "{kinds:?}");
}

// issue 59
#[test]
fn a_paused_run_counts_as_under_way_and_a_run_delivers_to_itself_between_turns() {
    let env = env();
    let chat = env.thread("chat");
    let run = env.run(&chat);
    env.ws.write("a.txt", "v1");
    env.threads
        .enqueue(&chat, "k-1", NewEntry::user("hello"))
        .expect("queue");
    env.threads.pause_run(&run).expect("pause");
    let own = DeliverOptions {
        run: Some(run.clone()),
        ..Default::default()
    };
    let why = env.threads.deliver(&chat, &own).expect("deliver").waiting;
    assert!(why.is_some_and(|w| w.contains("paused")));
    env.threads.resume_run(&run).expect("resume");
    // Another run of the thread is under way for this one too.
    let other = env
        .threads
        .begin_run(&chat, Default::default())
        .expect("another run");
    let why = env.threads.deliver(&chat, &own).expect("deliver").waiting;
    assert!(why.is_some_and(|w| w.contains(other.id().as_str())));
    env.threads.end_run(&other).expect("end the other");
    // Between its turns, the run delivers the prompt to itself, with its own checkpoint policy.
    let d = env.threads.deliver(&chat, &own).expect("deliver");
    let entry = d.entry.expect("delivered");
    assert_eq!(entry.run_id.as_ref(), Some(run.id()));
    assert!(d.checkpoint.is_some(), "the run's policy takes one");
}

// issue 59
#[test]
fn a_rewind_cancels_the_queued_prompts_and_their_old_keys_answer_with_the_cancelled_admission() {
    let env = env_checkpointed();
    let t = two_turns(&env, "chat");
    // One prompt delivered before, two still queued when the rewind comes.
    env.threads
        .enqueue(&t.thread, "k-0", NewEntry::user("delivered before"))
        .expect("queue");
    let first = env
        .threads
        .deliver(&t.thread, &in_ws(&env))
        .expect("deliver")
        .entry
        .expect("delivered");
    let run = env.run(&t.thread);
    for key in ["k-1", "k-2"] {
        env.threads
            .enqueue(&t.thread, key, NewEntry::user(key))
            .expect("queue");
    }
    env.threads.end_run(&run).expect("end");
    let report = env
        .threads
        .rewind(&t.thread, &t.a1, &with_files(&env.ws))
        .expect("rewind");
    let rewind = report.rewind_id.expect("its id");
    let inbox = env.threads.inbox(&t.thread).expect("inbox");
    let states: Vec<(&str, PromptState)> =
        inbox.iter().map(|a| (a.key.as_str(), a.state)).collect();
    assert_eq!(
        states,
        vec![
            ("k-0", PromptState::Delivered),
            ("k-1", PromptState::Cancelled),
            ("k-2", PromptState::Cancelled),
        ]
    );
    assert!(inbox[1..]
        .iter()
        .all(|a| a.rewind_id.as_ref() == Some(&rewind) && a.entry_id.is_none()));

    // Retrying an old key answers with the cancelled admission and sends nothing.
    let branch = active_ids(&env.threads, &t.thread);
    let checkpoints = env.ws.checkpoints();
    let again = env
        .threads
        .enqueue(&t.thread, "k-1", NewEntry::user("k-1"))
        .expect("queue again");
    assert!(again.repeated);
    assert_eq!(again.state, PromptState::Cancelled);
    assert_eq!(again.rewind_id.as_ref(), Some(&rewind));
    let d = env
        .threads
        .deliver(&t.thread, &in_ws(&env))
        .expect("deliver");
    assert!(d.delivered.is_none());
    assert_eq!(d.queued, 0);
    // Appending with that key is refused too: a cancelled prompt is never sent.
    let append = env.threads.append(
        &t.thread,
        NewEntry::user("k-1"),
        &AppendOptions {
            key: Some("k-1".into()),
            ..Default::default()
        },
    );
    assert_eq!(kind(append), ErrorKind::Validation);
    assert_eq!(active_ids(&env.threads, &t.thread), branch);
    assert_eq!(env.ws.checkpoints(), checkpoints);
    // The delivered one keeps its admission (on the branch the rewind cut).
    let k0 = env.threads.admission(&t.thread, "k-0").expect("k-0");
    assert_eq!(k0.entry_id.as_ref(), Some(&first.id));
    let cancelled = event_kinds(&env, &t.thread)
        .into_iter()
        .filter(|k| *k == EventKind::PromptCancelled)
        .count();
    assert_eq!(cancelled, 2);
    // A new prompt after the rewind is queued and delivered as usual.
    env.threads
        .enqueue(&t.thread, "k-3", NewEntry::user("after"))
        .expect("queue");
    let d = env
        .threads
        .deliver(&t.thread, &in_ws(&env))
        .expect("deliver");
    assert_eq!(
        d.entry.and_then(|e| e.parent_id).as_ref(),
        Some(&t.a1),
        "delivered after the rewind's point"
    );
}

// issue 59
#[test]
fn a_rewind_a_crash_interrupted_cancels_the_queued_prompts_when_recovery_finishes_it() {
    let env = env();
    let t = two_turns(&env, "chat");
    env.threads
        .enqueue(&t.thread, "k-1", NewEntry::user("queued"))
        .expect("queue");
    env.ws.hooks.lock().panic_after_apply = true;
    crash(|| env.threads.rewind(&t.thread, &t.a1, &with_files(&env.ws)));
    env.ws.hooks.lock().panic_after_apply = false;
    // The conversation was not switched yet, and the prompt waits with it.
    let k1 = env.threads.admission(&t.thread, "k-1").expect("k-1");
    assert_eq!(k1.state, PromptState::Queued);
    let reopened = env.reopen(ThreadsOptions {
        workspaces: vec![env.ws.clone() as Arc<dyn cairn_rewind::Files>],
        ..Default::default()
    });
    let record = reopened.rewinds(&t.thread).expect("records").remove(0);
    assert_eq!(record.state, "completed");
    let k1 = reopened.admission(&t.thread, "k-1").expect("k-1");
    assert_eq!(k1.state, PromptState::Cancelled);
    assert_eq!(k1.rewind_id.as_ref(), Some(&record.id));
}

// issue 59
#[test]
fn a_checkpoint_that_fails_at_delivery_leaves_the_prompt_queued_with_its_error() {
    let env = env_checkpointed();
    let chat = env.thread("chat");
    env.threads
        .enqueue(&chat, "k-1", NewEntry::user("hello"))
        .expect("queue");
    env.ws.hooks.lock().fail_checkpoint = true;
    let r = env.threads.deliver(&chat, &in_ws(&env));
    assert!(r.is_err(), "a prompt is not sent without its checkpoint");
    let k1 = env.threads.admission(&chat, "k-1").expect("k-1");
    assert_eq!(k1.state, PromptState::Queued);
    assert!(k1.error.is_some());
    assert!(active_ids(&env.threads, &chat).is_empty());
    env.ws.hooks.lock().fail_checkpoint = false;
    let d = env.threads.deliver(&chat, &in_ws(&env)).expect("deliver");
    assert!(d.checkpoint.is_some());
    let k1 = env.threads.admission(&chat, "k-1").expect("k-1");
    assert_eq!((k1.state, k1.error), (PromptState::Delivered, None));
}

// issue 59
#[test]
fn a_key_appended_directly_is_answered_as_delivered_and_a_queue_needs_a_key_and_a_user_prompt() {
    let env = env();
    let chat = env.thread("chat");
    let appended = env
        .threads
        .append(
            &chat,
            NewEntry::user("hello"),
            &AppendOptions {
                key: Some("k-1".into()),
                ..Default::default()
            },
        )
        .expect("append");
    let a = env
        .threads
        .enqueue(&chat, "k-1", NewEntry::user("hello"))
        .expect("queue");
    assert_eq!(a.state, PromptState::Delivered);
    assert_eq!(a.entry_id.as_ref(), Some(&appended.entry.id));
    assert!(env.threads.inbox(&chat).expect("inbox").is_empty());
    assert_eq!(
        kind(env.threads.enqueue(&chat, "", NewEntry::user("x"))),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        kind(
            env.threads
                .enqueue(&chat, "k-2", NewEntry::assistant("not a prompt"))
        ),
        ErrorKind::InvalidArgument
    );
}

// issue 59
#[test]
fn a_rewind_in_flight_refuses_a_new_prompt_with_thread_busy_and_cancels_those_queued_before() {
    let env = env();
    let t = two_turns(&env, "chat");
    env.threads
        .enqueue(&t.thread, "k-1", NewEntry::user("queued before"))
        .expect("queue");
    let (release, rewind) = crate::runs::blocked_rewind(&env, &t);
    let during = env
        .threads
        .enqueue(&t.thread, "k-2", NewEntry::user("queued during"));
    assert_eq!(kind(during), ErrorKind::ThreadBusy);
    release.send(()).expect("release");
    rewind.join().expect("join").expect("rewind");
    let inbox = env.threads.inbox(&t.thread).expect("inbox");
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].state, PromptState::Cancelled);
}
