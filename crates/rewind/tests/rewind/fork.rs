//! Forks: the shared prefix, the checkpoint named at the point, files, dry runs and take-backs.

use crate::util::*;
use cairn_rewind::{EntryKind, EventKind, ForkOptions, NewEntry, RewindOptions};
use cairn_store::ErrorKind;

fn with_files_into(ws: &std::sync::Arc<crate::fake::Fake>) -> ForkOptions {
    ForkOptions {
        files: true,
        workspace: Some(ws.clone()),
        ..Default::default()
    }
}

#[test]
fn a_fork_shares_the_prefix_without_copying_entries() {
    let env = env();
    let t = two_turns(&env, "chat");
    let before = env.threads.entries(&t.thread, true).expect("all").len();
    let fork = env
        .threads
        .fork(&t.thread, &t.a1, &Default::default())
        .expect("fork");
    assert_eq!(fork.source_thread_id, t.thread);
    assert_eq!(fork.at_entry_id, t.a1);
    let branch = env.threads.active_branch(&fork.thread_id).expect("branch");
    assert_eq!(
        branch.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        vec![t.u1.entry.id.clone(), t.a1.clone()]
    );
    assert!(
        branch.iter().all(|e| e.thread_id == t.thread),
        "the entries are the source's own rows"
    );
    assert_eq!(
        branch[0].checkpoint, t.u1.entry.checkpoint,
        "checkpoint references are kept"
    );
    // Nothing was copied: the source still has 4 entries and the fork's own is the first new one.
    assert_eq!(
        env.threads.entries(&t.thread, true).expect("all").len(),
        before
    );
    let e = note(
        &env.threads,
        &fork.thread_id,
        EntryKind::User,
        "in the fork",
    );
    assert_eq!(
        env.threads.entry(&e).expect("entry").parent_id,
        Some(t.a1.clone())
    );
    assert_eq!(
        active_ids(&env.threads, &t.thread).len(),
        4,
        "the source is as it was"
    );
    let thread = env.threads.thread(&fork.thread_id).expect("thread");
    assert_eq!(thread.parent_thread, Some(t.thread.clone()));
    assert_eq!(thread.fork_entry, Some(t.a1.clone()));
}

#[test]
fn a_fork_names_the_checkpoint_at_its_point_so_rewinding_it_there_restores_the_same_files() {
    let env = env();
    let t = two_turns(&env, "chat");
    let fork = env
        .threads
        .fork(&t.thread, &t.a1, &Default::default())
        .expect("fork");
    let named = fork
        .file_checkpoint_at
        .clone()
        .expect("the next message's checkpoint");
    assert_eq!(
        Some(&named.checkpoint_id),
        t.u2.checkpoint.as_ref().map(|c| &c.id)
    );
    assert_eq!(
        env.threads
            .thread(&fork.thread_id)
            .expect("thread")
            .file_checkpoint_at,
        Some(named.clone())
    );
    // Work goes on in the fork, then it is rewound to its point.
    let run = env.run(&fork.thread_id);
    env.ws.write("a.txt", "fork's work");
    say(
        &env.threads,
        &fork.thread_id,
        &run,
        NewEntry::assistant("more"),
    );
    env.threads.end_run(&run).expect("end");
    let r = env
        .threads
        .rewind(&fork.thread_id, &t.a1, &with_files(&env.ws))
        .expect("rewind the fork");
    let files = r.files.expect("files");
    assert!(files.exact);
    assert_eq!(files.checkpoint_id, named.checkpoint_id);
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
}

#[test]
fn forking_a_fork_at_its_point_names_the_same_checkpoint() {
    let env = env();
    let t = two_turns(&env, "chat");
    let fork = env
        .threads
        .fork(&t.thread, &t.a1, &Default::default())
        .expect("fork");
    let again = env
        .threads
        .fork(&fork.thread_id, &t.a1, &Default::default())
        .expect("fork of the fork");
    assert_eq!(again.file_checkpoint_at, fork.file_checkpoint_at);
    let plan = env
        .threads
        .fork(
            &fork.thread_id,
            &t.a1,
            &ForkOptions {
                dry_run: true,
                ..with_files_into(&env.ws)
            },
        )
        .expect("plan");
    assert_eq!(
        plan.files.expect("files").checkpoint_id,
        fork.file_checkpoint_at.expect("named").checkpoint_id
    );
}

#[test]
fn a_fork_with_a_new_thread_id_that_exists_is_refused_before_anything_is_made() {
    let env = env();
    let t = two_turns(&env, "chat");
    env.thread("taken");
    let cursor = env.threads.last_cursor().expect("cursor");
    let r = env.threads.fork(
        &t.thread,
        &t.a1,
        &ForkOptions {
            new_thread_id: Some("taken".into()),
            ..with_files_into(&env.ws)
        },
    );
    assert_eq!(kind(r), ErrorKind::Validation);
    assert_eq!(env.threads.threads().expect("threads").len(), 2);
    assert_eq!(env.ws.applies(), 0);
    assert!(env
        .threads
        .events_since(cursor, 10)
        .expect("events")
        .is_empty());
}

#[test]
fn a_fork_with_files_restores_its_workspace_after_a_safety_snapshot() {
    let env = env();
    let t = two_turns(&env, "chat");
    let fork = env
        .threads
        .fork(
            &t.thread,
            &t.a1,
            &ForkOptions {
                new_thread_id: Some("try-2".into()),
                ..with_files_into(&env.ws)
            },
        )
        .expect("fork");
    assert_eq!(fork.thread_id.as_str(), "try-2");
    let files = fork.files.expect("files");
    assert!(files.exact);
    assert!(files.safety_snapshot_id.is_some());
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
    assert!(
        fork.snapshots_copied.is_empty(),
        "same workspace: nothing to copy"
    );
    let events = env.threads.events_since(0, 1000).expect("events");
    let created = events
        .iter()
        .find(|e| e.kind == EventKind::ForkCreated)
        .expect("fork_created");
    assert_eq!(created.data["thread_id"], "try-2");
    // The fork can rewind in the workspace it was made in.
    env.threads
        .rewind(&fork.thread_id, &t.u1.entry.id, &with_files(&env.ws))
        .expect("rewind the fork");
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v1"));
}

#[test]
fn a_fork_dry_run_leaves_nothing_behind() {
    let env = env();
    let t = two_turns(&env, "chat");
    let cursor = env.threads.last_cursor().expect("cursor");
    let snapshots = env.ws.snapshot_count();
    let plan = env
        .threads
        .fork(
            &t.thread,
            &t.a1,
            &ForkOptions {
                dry_run: true,
                ..with_files_into(&env.ws)
            },
        )
        .expect("plan");
    assert!(plan.dry_run);
    assert_eq!(
        plan.files.expect("files").restore["restored"],
        serde_json::json!(["a.txt"])
    );
    assert_eq!(env.threads.threads().expect("threads").len(), 1);
    assert_eq!(env.ws.applies(), 0);
    assert_eq!(env.ws.snapshot_count(), snapshots);
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v3"));
    assert!(env
        .threads
        .events_since(cursor, 10)
        .expect("events")
        .is_empty());
}

#[test]
fn a_fork_whose_files_fail_is_taken_back_whole() {
    let env = env();
    let t = two_turns(&env, "chat");
    env.ws.hooks.lock().fail_apply = true;
    let r = env.threads.fork(
        &t.thread,
        &t.a1,
        &ForkOptions {
            new_thread_id: Some("doomed".into()),
            ..with_files_into(&env.ws)
        },
    );
    assert_eq!(kind(r), ErrorKind::Denied);
    assert_eq!(
        kind(env.threads.thread(&"doomed".into())),
        ErrorKind::NotFound
    );
    assert_eq!(env.threads.threads().expect("threads").len(), 1);
    assert!(!env
        .threads
        .events_since(0, 1000)
        .expect("events")
        .iter()
        .any(|e| e.kind == EventKind::ForkCreated));
    // The id is free again, and the source thread is not held.
    env.ws.hooks.lock().fail_apply = false;
    env.threads
        .fork(
            &t.thread,
            &t.a1,
            &ForkOptions {
                new_thread_id: Some("doomed".into()),
                ..with_files_into(&env.ws)
            },
        )
        .expect("a second try");
    env.threads
        .rewind(&t.thread, &t.a1, &RewindOptions::default())
        .expect("the source is free");
}

#[test]
fn a_fork_with_files_is_refused_by_the_same_runs_as_a_rewind_unless_forced() {
    let env = env();
    let t = two_turns(&env, "chat");
    let run = run_in(&env.threads, &t.thread, env.ws.clone());
    assert_eq!(
        kind(
            env.threads
                .fork(&t.thread, &t.a1, &with_files_into(&env.ws))
        ),
        ErrorKind::ThreadBusy
    );
    assert_eq!(env.threads.threads().expect("threads").len(), 1);
    // Without files a fork does not touch the workspace and is not in the way of anything.
    env.threads
        .fork(&t.thread, &t.a1, &Default::default())
        .expect("conversation fork");
    let forced = env
        .threads
        .fork(
            &t.thread,
            &t.a1,
            &ForkOptions {
                force: true,
                ..with_files_into(&env.ws)
            },
        )
        .expect("forced fork");
    assert_eq!(forced.runs.interrupted, vec![run.id().clone()]);
}

#[test]
fn a_run_stopped_by_a_forced_fork_says_the_fork_stopped_it_not_a_rewind() {
    let env = env();
    let t = two_turns(&env, "chat");
    let run = run_in(&env.threads, &t.thread, env.ws.clone());
    env.threads
        .fork(
            &t.thread,
            &t.a1,
            &ForkOptions {
                force: true,
                ..with_files_into(&env.ws)
            },
        )
        .expect("forced fork");
    use cairn_store::Classify;
    let err = env
        .threads
        .heartbeat(&run)
        .expect_err("the run was stopped");
    assert_eq!(err.kind(), ErrorKind::RunInterrupted);
    let text = err.to_string();
    assert!(
        text.contains("interrupted by the forced fork fk_"),
        "{text}"
    );
    assert!(!text.contains("rewind"), "{text}");
}

#[test]
fn a_fork_into_another_workspace_without_local_stores_is_refused_with_validation() {
    let env = env();
    let t = two_turns(&env, "chat");
    let elsewhere = env.fake("copy", "copy");
    let r = env.threads.fork(
        &t.thread,
        &t.a1,
        &ForkOptions {
            source: Some(env.ws.clone()),
            ..with_files_into(&elsewhere)
        },
    );
    assert_eq!(kind(r), ErrorKind::Validation);
    assert_eq!(env.threads.threads().expect("threads").len(), 1);
}

#[test]
fn a_fork_from_an_entry_the_thread_does_not_see_is_refused() {
    let env = env();
    let t = two_turns(&env, "chat");
    let other = two_turns(&env, "other");
    assert_eq!(
        kind(env.threads.fork(&t.thread, &other.a1, &Default::default())),
        ErrorKind::Validation
    );
    assert_eq!(
        kind(
            env.threads
                .fork(&t.thread, &"e_nope".into(), &Default::default())
        ),
        ErrorKind::NotFound
    );
}

#[test]
fn a_fork_from_a_cut_branch_is_allowed() {
    let env = env();
    let t = two_turns(&env, "chat");
    env.threads
        .rewind(&t.thread, &t.a1, &RewindOptions::default())
        .expect("rewind");
    let fork = env
        .threads
        .fork(&t.thread, &t.a2, &Default::default())
        .expect("fork from the cut branch");
    assert_eq!(active_ids(&env.threads, &fork.thread_id).len(), 4);
}
