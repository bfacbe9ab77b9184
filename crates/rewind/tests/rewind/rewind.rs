//! Rewinds: which checkpoint, the checks before anything changes, dry runs, keys, failures and
//! the forms `restore_before` and `restore_checkpoint`.

use crate::fake::Call;
use crate::util::*;
use cairn_rewind::{
    AppendOptions, CheckpointOptions, EntryKind, EventKind, NewEntry, RewindOptions,
    ThreadsOptions, FILE_CHECKPOINT_KEY,
};
use cairn_store::ErrorKind;

#[test]
fn rewinding_moves_the_leaf_back_and_lists_the_cut_entries() {
    let env = env();
    let t = two_turns(&env, "chat");
    let r = env
        .threads
        .rewind(&t.thread, &t.a1, &RewindOptions::default())
        .expect("rewind");
    assert!(r.conversation.rewound);
    assert_eq!(
        r.conversation.cut,
        vec![t.u2.entry.id.clone(), t.a2.clone()]
    );
    assert_eq!(r.conversation.previous_leaf_id, Some(t.a2.clone()));
    assert_eq!(r.to_entry_id, Some(t.a1.clone()));
    assert!(r.files.is_none());
    assert_eq!(
        active_ids(&env.threads, &t.thread),
        vec![t.u1.entry.id.clone(), t.a1.clone()]
    );
    // Files are restored only when asked.
    assert_eq!(env.ws.applies(), 0);
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v3"));
}

#[test]
fn rewinding_to_the_end_of_a_turn_restores_the_next_user_messages_checkpoint_exactly() {
    let env = env();
    let t = two_turns(&env, "chat");
    let r = env
        .threads
        .rewind(&t.thread, &t.a1, &with_files(&env.ws))
        .expect("rewind");
    let files = r.files.expect("files");
    assert!(files.exact);
    assert_eq!(files.entry_id, Some(t.u2.entry.id.clone()));
    assert_eq!(
        Some(files.snapshot_id),
        t.u2.checkpoint.as_ref().map(|c| c.snapshot_id)
    );
    assert_eq!(files.workspace_id, "project");
    assert!(files.safety_snapshot_id.is_some());
    assert_eq!(files.restore["deleted"], serde_json::json!(["b.txt"]));
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
    assert_eq!(env.ws.read("b.txt"), None);
    // The safety snapshot holds the files as they were.
    let safety = env
        .ws
        .snapshot_files(&files.safety_snapshot_id.expect("safety"))
        .expect("kept");
    assert_eq!(safety["a.txt"], "v3");
}

#[test]
fn rewinding_within_a_turn_restores_the_nearest_user_message_at_or_before_it() {
    let env = env();
    let t = two_turns(&env, "chat");
    let r = env
        .threads
        .rewind(&t.thread, &t.u1.entry.id, &with_files(&env.ws))
        .expect("rewind");
    let files = r.files.expect("files");
    assert!(!files.exact);
    assert_eq!(files.entry_id, Some(t.u1.entry.id.clone()));
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v1"));
    let env = crate::util::env();
    let t = two_turns(&env, "chat");
    let r = env
        .threads
        .rewind(&t.thread, &t.a2, &with_files(&env.ws))
        .expect("rewind to the leaf");
    let files = r.files.expect("files");
    assert!(!files.exact);
    assert_eq!(files.entry_id, Some(t.u2.entry.id.clone()));
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
}

#[test]
fn notes_and_session_events_before_the_next_message_still_end_the_turn() {
    let env = env();
    let thread = env.thread("chat");
    let run = env.run(&thread);
    env.ws.write("a.txt", "v1");
    say(&env.threads, &thread, &run, NewEntry::user("one"));
    let a1 = say(&env.threads, &thread, &run, NewEntry::assistant("ok"))
        .entry
        .id;
    note(&env.threads, &thread, EntryKind::Note, "a note");
    note(&env.threads, &thread, EntryKind::Event, "session resumed");
    env.ws.write("a.txt", "v2");
    let u2 = say(&env.threads, &thread, &run, NewEntry::user("two"));
    env.ws.write("a.txt", "v3");
    env.threads.end_run(&run).expect("end");
    let r = env
        .threads
        .rewind(&thread, &a1, &with_files(&env.ws))
        .expect("rewind");
    let files = r.files.expect("files");
    assert!(files.exact);
    assert_eq!(files.entry_id, Some(u2.entry.id));
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
}

#[test]
fn repeating_a_rewind_to_the_same_point_restores_the_same_checkpoint() {
    let env = env();
    let t = two_turns(&env, "chat");
    let first = env
        .threads
        .rewind(&t.thread, &t.a1, &with_files(&env.ws))
        .expect("first");
    env.ws.write("a.txt", "edited since");
    let second = env
        .threads
        .rewind(&t.thread, &t.a1, &with_files(&env.ws))
        .expect("second");
    let (f1, f2) = (first.files.expect("f1"), second.files.expect("f2"));
    assert_eq!(f1.checkpoint_id, f2.checkpoint_id);
    assert!(f2.exact);
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
}

#[test]
fn the_next_message_written_last_wins_when_several_branches_follow_the_point() {
    let env = env();
    let t = two_turns(&env, "chat");
    env.threads
        .rewind(&t.thread, &t.a1, &RewindOptions::default())
        .expect("rewind");
    let run = env.run(&t.thread);
    env.ws.write("a.txt", "other v2");
    let u2b = say(
        &env.threads,
        &t.thread,
        &run,
        NewEntry::user("another second message"),
    );
    env.ws.write("a.txt", "other v3");
    env.threads.end_run(&run).expect("end");
    let r = env
        .threads
        .rewind(&t.thread, &t.a1, &with_files(&env.ws))
        .expect("rewind");
    assert_eq!(r.files.expect("files").entry_id, Some(u2b.entry.id));
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("other v2"));
}

#[test]
fn an_entry_not_on_the_active_branch_is_refused_with_validation() {
    let env = env();
    let t = two_turns(&env, "chat");
    env.threads
        .rewind(&t.thread, &t.a1, &RewindOptions::default())
        .expect("rewind");
    let r = env
        .threads
        .rewind(&t.thread, &t.a2, &RewindOptions::default());
    assert_eq!(kind(r), ErrorKind::Validation);
    let r = env
        .threads
        .rewind(&t.thread, &"e_missing".into(), &RewindOptions::default());
    assert_eq!(kind(r), ErrorKind::NotFound);
}

#[test]
fn no_checkpoint_at_or_before_the_point_is_refused_with_validation_before_anything_changes() {
    let env = env();
    let thread = env.thread("chat");
    note(&env.threads, &thread, EntryKind::User, "no checkpoint");
    let a = note(&env.threads, &thread, EntryKind::Assistant, "ok");
    let b = note(&env.threads, &thread, EntryKind::Assistant, "more");
    let r = env.threads.rewind(&thread, &a, &with_files(&env.ws));
    assert_eq!(kind(r), ErrorKind::Validation);
    assert_eq!(
        env.threads.thread(&thread).expect("thread").active_leaf,
        Some(b)
    );
    assert_eq!(env.ws.applies(), 0);
    assert!(env.threads.rewinds(&thread).expect("records").is_empty());
}

#[test]
fn a_rewind_with_files_needs_a_workspace() {
    let env = env();
    let t = two_turns(&env, "chat");
    let r = env.threads.rewind(
        &t.thread,
        &t.a1,
        &RewindOptions {
            files: Some(true),
            ..Default::default()
        },
    );
    assert_eq!(kind(r), ErrorKind::Validation);
}

#[test]
fn a_checkpoint_the_workspace_no_longer_keeps_is_refused_with_validation() {
    let env = env();
    let t = two_turns(&env, "chat");
    env.ws
        .prune(&t.u2.checkpoint.as_ref().expect("cp").snapshot_id);
    let r = env.threads.rewind(&t.thread, &t.a1, &with_files(&env.ws));
    let e = r.expect_err("refused");
    assert!(e.is_validation());
    assert!(e.to_string().contains("pruned"), "{e}");
    assert_eq!(active_ids(&env.threads, &t.thread).len(), 4);
    assert_eq!(env.ws.applies(), 0);
}

#[test]
fn a_checkpoint_forged_into_metadata_is_refused_with_validation() {
    let env = env();
    let thread = env.thread("chat");
    let forged = serde_json::json!({ FILE_CHECKPOINT_KEY: {
        "snapshot_id": "ab".repeat(32), "workspace_id": "project", "root": "/tmp/project",
    }});
    let u = env
        .threads
        .append(
            &thread,
            NewEntry::user("hi").with_metadata(forged),
            &AppendOptions::default(),
        )
        .expect("append");
    env.threads
        .begin_run(
            &thread,
            cairn_rewind::RunOptions {
                workspace: Some(env.ws.clone()),
                ..Default::default()
            },
        )
        .and_then(|r| env.threads.end_run(&r))
        .expect("the thread ran in the workspace");
    let r = env
        .threads
        .rewind(&thread, &u.entry.id, &with_files(&env.ws));
    let e = r.expect_err("refused");
    assert!(e.is_validation());
    assert!(e.to_string().contains("did not take"), "{e}");
}

#[test]
fn a_checkpoint_of_another_threads_lineage_named_in_metadata_is_refused_with_validation() {
    let env = env();
    let other = two_turns(&env, "other");
    let stolen = other.u1.entry.metadata[FILE_CHECKPOINT_KEY].clone();
    let thread = env.thread("chat");
    let run = env.run(&thread);
    env.threads.end_run(&run).expect("end");
    let u = env
        .threads
        .append(
            &thread,
            NewEntry::user("hi").with_metadata(serde_json::json!({ FILE_CHECKPOINT_KEY: stolen })),
            &AppendOptions::default(),
        )
        .expect("append");
    let r = env
        .threads
        .rewind(&thread, &u.entry.id, &with_files(&env.ws));
    assert_eq!(kind(r), ErrorKind::Validation);
    assert_eq!(env.ws.applies(), 0);
}

#[test]
fn a_workspace_the_thread_never_ran_in_is_refused_with_validation() {
    let env = env();
    let t = two_turns(&env, "chat");
    let stranger = env.fake("elsewhere", "elsewhere");
    let r = env.threads.rewind(&t.thread, &t.a1, &with_files(&stranger));
    let e = r.expect_err("refused");
    assert!(e.is_validation());
    assert!(e.to_string().contains("never ran in"), "{e}");
    // Same id, another root: the workspace moved (its directory's identity keeps its id
    // through a rename, a bind mount or `cairn workspace adopt`), and it is the same workspace.
    let moved = env.fake("project", "moved");
    let r = env.threads.rewind(&t.thread, &t.a1, &dry_files(&moved));
    assert!(
        !r.as_ref()
            .is_err_and(|e| e.to_string().contains("never ran in")),
        "{r:?}"
    );
}

#[test]
fn a_dry_run_changes_nothing_and_reports_the_plan() {
    let env = env();
    let t = two_turns(&env, "chat");
    let cursor = env.threads.last_cursor().expect("cursor");
    let opts = dry_files(&env.ws);
    let plan = env
        .threads
        .rewind(&t.thread, &t.a1, &opts)
        .expect("dry run");
    assert!(plan.dry_run);
    assert_eq!(plan.rewind_id, None);
    assert_eq!(
        plan.conversation.cut,
        vec![t.u2.entry.id.clone(), t.a2.clone()]
    );
    let files = plan.files.expect("files");
    assert!(files.exact);
    assert_eq!(files.restore["dry_run"], true);
    assert_eq!(files.restore["restored"], serde_json::json!(["a.txt"]));
    assert_eq!(files.safety_snapshot_id, None);
    assert_eq!(env.ws.applies(), 0);
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v3"));
    assert_eq!(active_ids(&env.threads, &t.thread).len(), 4);
    assert!(env.threads.rewinds(&t.thread).expect("records").is_empty());
    assert!(env
        .threads
        .events_since(cursor, 100)
        .expect("events")
        .is_empty());
}

#[test]
fn memory_off_with_files_restores_the_files_only() {
    let env = env();
    let t = two_turns(&env, "chat");
    let r = env
        .threads
        .rewind(
            &t.thread,
            &t.a1,
            &RewindOptions {
                memory: false,
                ..with_files(&env.ws)
            },
        )
        .expect("rewind");
    assert!(!r.conversation.rewound);
    assert!(r.conversation.cut.is_empty());
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
    assert_eq!(active_ids(&env.threads, &t.thread).len(), 4);
}

#[test]
fn files_and_memory_both_off_is_an_invalid_argument() {
    let env = env();
    let t = two_turns(&env, "chat");
    let r = env.threads.rewind(
        &t.thread,
        &t.a1,
        &RewindOptions {
            memory: false,
            ..Default::default()
        },
    );
    assert_eq!(kind(r), ErrorKind::InvalidArgument);
}

#[test]
fn the_runtime_can_turn_file_rewinds_on_by_default() {
    let env = env_with(ThreadsOptions {
        rewind_files: true,
        ..Default::default()
    });
    let t = two_turns(&env, "chat");
    let r = env
        .threads
        .rewind(
            &t.thread,
            &t.a1,
            &RewindOptions {
                workspace: Some(env.ws.clone()),
                ..Default::default()
            },
        )
        .expect("rewind");
    assert!(r.files.is_some());
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
}

#[test]
fn a_failed_restore_leaves_the_conversation_as_it_was_and_says_so() {
    let env = env();
    let t = two_turns(&env, "chat");
    env.ws.hooks.lock().fail_apply = true;
    let r = env.threads.rewind(&t.thread, &t.a1, &with_files(&env.ws));
    assert_eq!(kind(r), ErrorKind::Denied);
    assert_eq!(active_ids(&env.threads, &t.thread).len(), 4);
    let records = env.threads.rewinds(&t.thread).expect("records");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].state, "failed");
    assert!(records[0]
        .error
        .as_deref()
        .is_some_and(|e| e.contains("another user")));
    let kinds: Vec<EventKind> = env
        .threads
        .events_since(0, 1000)
        .expect("events")
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert!(
        kinds.ends_with(&[EventKind::RewindStarted, EventKind::RewindFailed]),
        "{kinds:?}"
    );
    // The thread is free again.
    env.ws.hooks.lock().fail_apply = false;
    env.threads
        .rewind(&t.thread, &t.a1, &with_files(&env.ws))
        .expect("a second try");
}

#[test]
fn a_repeated_key_returns_the_first_result_without_restoring_again() {
    let env = env();
    let t = two_turns(&env, "chat");
    let opts = RewindOptions {
        key: Some("undo-1".into()),
        ..with_files(&env.ws)
    };
    let first = env.threads.rewind(&t.thread, &t.a1, &opts).expect("first");
    env.ws.write("a.txt", "edited after the rewind");
    let again = env.threads.rewind(&t.thread, &t.a1, &opts).expect("again");
    assert_eq!(first, again);
    assert_eq!(env.ws.applies(), 1);
    assert_eq!(
        env.ws.read("a.txt").as_deref(),
        Some("edited after the rewind")
    );
    // A key belongs to its first rewind: another point is refused.
    let r = env.threads.rewind(&t.thread, &t.u1.entry.id, &opts);
    assert_eq!(r.expect("the stored result").rewind_id, first.rewind_id);
}

#[test]
fn a_failed_rewind_retried_with_the_same_key_completes() {
    let env = env();
    let t = two_turns(&env, "chat");
    let opts = RewindOptions {
        key: Some("undo-1".into()),
        ..with_files(&env.ws)
    };
    env.ws.hooks.lock().fail_apply = true;
    assert_eq!(
        kind(env.threads.rewind(&t.thread, &t.a1, &opts)),
        ErrorKind::Denied
    );
    let r = env.threads.rewind(&t.thread, &t.u1.entry.id, &opts);
    assert_eq!(
        kind(r),
        ErrorKind::Validation,
        "a key retries only its own rewind"
    );
    env.ws.hooks.lock().fail_apply = false;
    let r = env.threads.rewind(&t.thread, &t.a1, &opts).expect("retry");
    let records = env.threads.rewinds(&t.thread).expect("records");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].state, "completed");
    assert_eq!(r.rewind_id.as_ref(), Some(&records[0].id));
}

#[test]
fn restore_before_a_prompt_rewinds_to_the_entry_before_it_with_its_own_checkpoint() {
    let env = env();
    let t = two_turns(&env, "chat");
    let r = env
        .threads
        .restore_before(&t.thread, &t.u2.entry.id, &with_files(&env.ws))
        .expect("restore");
    assert_eq!(r.to_entry_id, Some(t.a1.clone()));
    let files = r.files.expect("files");
    assert!(files.exact);
    assert_eq!(files.entry_id, Some(t.u2.entry.id.clone()));
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
    let r = env
        .threads
        .restore_before(&t.thread, &t.a1, &with_files(&env.ws));
    assert_eq!(kind(r), ErrorKind::Validation, "only before a user message");
}

#[test]
fn restore_before_the_first_prompt_empties_the_active_branch() {
    let env = env();
    let t = two_turns(&env, "chat");
    let r = env
        .threads
        .restore_before(&t.thread, &t.u1.entry.id, &with_files(&env.ws))
        .expect("restore");
    assert_eq!(r.to_entry_id, None);
    assert_eq!(r.conversation.cut.len(), 4);
    assert!(env
        .threads
        .active_branch(&t.thread)
        .expect("branch")
        .is_empty());
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v1"));
    assert_eq!(env.threads.entries(&t.thread, true).expect("all").len(), 4);
    let first = note(&env.threads, &t.thread, EntryKind::User, "start over");
    assert_eq!(env.threads.entry(&first).expect("entry").parent_id, None);
}

#[test]
fn restore_checkpoint_restores_files_of_the_lineage_without_touching_the_conversation() {
    let env = env();
    let t = two_turns(&env, "chat");
    let manual = env
        .threads
        .checkpoint(
            &t.thread,
            "before-change",
            &CheckpointOptions {
                workspace: Some(env.ws.clone()),
                ..Default::default()
            },
        )
        .expect("checkpoint");
    env.ws.write("a.txt", "changed");
    let r = env
        .threads
        .restore_checkpoint(&t.thread, &manual.id, &with_files(&env.ws))
        .expect("restore");
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v3"));
    assert_eq!(
        r.files.expect("files").restore["restored"],
        serde_json::json!(["a.txt"])
    );
    assert!(r.conversation.cut.is_empty());
    assert_eq!(active_ids(&env.threads, &t.thread).len(), 4);
}

#[test]
fn restore_checkpoint_of_an_unrelated_thread_is_refused_with_validation() {
    let env = env();
    let t = two_turns(&env, "chat");
    let other = two_turns(&env, "other");
    let cp = other.u1.checkpoint.expect("cp").id;
    let r = env
        .threads
        .restore_checkpoint(&t.thread, &cp, &with_files(&env.ws));
    let e = r.expect_err("refused");
    assert!(e.is_validation());
    assert!(e.to_string().contains("lineage"), "{e}");
}

#[test]
fn the_report_serialises_in_snake_case() {
    let env = env();
    let t = two_turns(&env, "chat");
    let r = env
        .threads
        .rewind(&t.thread, &t.a1, &with_files(&env.ws))
        .expect("rewind");
    let v = serde_json::to_value(&r).expect("serialise");
    for key in [
        "rewind_id",
        "thread_id",
        "to_entry_id",
        "dry_run",
        "conversation",
        "files",
        "memory",
        "runs",
    ] {
        assert!(v.get(key).is_some(), "{key} in {v}");
    }
    assert!(v["conversation"]["previous_leaf_id"].is_string());
    assert!(v["files"]["safety_snapshot_id"].is_string());
    assert_eq!(v["files"]["exact"], true);
    assert!(v["runs"]["interrupted"].is_array());
    assert!(v["memory"]["staled"].is_array());
}

#[test]
fn the_workspace_is_asked_in_order_check_plan_then_apply() {
    let env = env();
    let t = two_turns(&env, "chat");
    let before = env.ws.calls().len();
    env.threads
        .rewind(&t.thread, &t.a1, &with_files(&env.ws))
        .expect("rewind");
    let calls: Vec<Call> = env.ws.calls()[before..].to_vec();
    let target = t.u2.checkpoint.expect("cp").snapshot_id;
    assert_eq!(calls[0], Call::Keeps(target));
    assert_eq!(calls[1], Call::Plan(target));
    assert!(
        matches!(&calls[2], Call::Apply { target: x, key } if *x == target && key.starts_with("cairn-rewind-"))
    );
    assert_eq!(calls.len(), 3);
}

#[test]
fn a_rewind_with_files_records_a_before_rewind_checkpoint_of_the_files_and_the_leaf() {
    let env = env();
    let t = two_turns(&env, "chat");
    let before = env
        .threads
        .list_checkpoints(&t.thread)
        .expect("checkpoints")
        .len();
    let r = env
        .threads
        .rewind(&t.thread, &t.a1, &with_files(&env.ws))
        .expect("rewind");
    let files = r.files.expect("files");
    let safety = files.safety_snapshot_id.expect("a safety snapshot");
    let cp_id = files
        .before_rewind_checkpoint_id
        .expect("a Before rewind checkpoint");
    let listed = env
        .threads
        .list_checkpoints(&t.thread)
        .expect("checkpoints");
    assert_eq!(listed.len(), before + 1);
    let cp = listed.last().expect("the newest");
    assert_eq!(cp.id, cp_id);
    assert_eq!(cp.label.as_deref(), Some(cairn_rewind::BEFORE_REWIND));
    assert_eq!(cp.kind, cairn_rewind::CheckpointKind::Manual);
    assert_eq!(cp.snapshot_id, safety);
    // The conversation as it was: the leaf the rewind left.
    assert_eq!(cp.entry_id.as_ref(), Some(&t.a2));
    assert_eq!(env.ws.snapshot_files(&safety).expect("kept")["a.txt"], "v3");
    // A rewind without files has no safety snapshot, so no such checkpoint.
    let plain = env
        .threads
        .rewind(&t.thread, &t.u1.entry.id, &RewindOptions::default())
        .expect("rewind without files");
    assert!(plain.files.is_none());
    assert_eq!(
        env.threads
            .list_checkpoints(&t.thread)
            .expect("checkpoints")
            .len(),
        before + 1
    );
}

#[test]
fn rewinding_to_the_before_rewind_checkpoint_brings_back_the_files_and_the_conversation() {
    let env = env();
    let t = two_turns(&env, "chat");
    let r = env
        .threads
        .rewind(&t.thread, &t.a1, &with_files(&env.ws))
        .expect("rewind");
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
    assert_eq!(env.ws.read("b.txt"), None);
    let cp = r
        .files
        .and_then(|f| f.before_rewind_checkpoint_id)
        .expect("a Before rewind checkpoint");
    // The dry run says what would come back, changing nothing.
    let plan = env
        .threads
        .rewind_to_checkpoint(&t.thread, &cp, &dry_files(&env.ws))
        .expect("dry run");
    assert!(plan.dry_run);
    assert_eq!(plan.to_entry_id, Some(t.a2.clone()));
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
    let back = env
        .threads
        .rewind_to_checkpoint(&t.thread, &cp, &with_files(&env.ws))
        .expect("undo the rewind");
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v3"));
    assert_eq!(env.ws.read("b.txt").as_deref(), Some("new"));
    assert_eq!(
        active_ids(&env.threads, &t.thread),
        vec![
            t.u1.entry.id.clone(),
            t.a1.clone(),
            t.u2.entry.id.clone(),
            t.a2.clone()
        ]
    );
    assert!(back.conversation.rewound);
    assert!(back.conversation.cut.is_empty());
    // It is a rewind like any other: it has its own Before rewind checkpoint, at a1.
    let again = back
        .files
        .and_then(|f| f.before_rewind_checkpoint_id)
        .expect("its own Before rewind checkpoint");
    let cp2 = env.threads.checkpoint_by_id(&again).expect("listed");
    assert_eq!(cp2.entry_id.as_ref(), Some(&t.a1));
}

#[test]
fn rewinding_to_a_user_messages_checkpoint_goes_back_before_that_message() {
    let env = env();
    let t = two_turns(&env, "chat");
    let cp = t.u2.checkpoint.clone().expect("checkpoint before u2").id;
    let r = env
        .threads
        .rewind_to_checkpoint(&t.thread, &cp, &with_files(&env.ws))
        .expect("rewind to the checkpoint");
    assert_eq!(r.to_entry_id, Some(t.a1.clone()));
    assert_eq!(
        active_ids(&env.threads, &t.thread),
        vec![t.u1.entry.id.clone(), t.a1.clone()]
    );
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
    // `memory: false` restores the files only, as restore_checkpoint does.
    env.ws.write("a.txt", "edited");
    let files_only = env
        .threads
        .rewind_to_checkpoint(
            &t.thread,
            &cp,
            &RewindOptions {
                memory: false,
                ..with_files(&env.ws)
            },
        )
        .expect("files only");
    assert!(files_only.conversation.cut.is_empty());
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
}

#[test]
fn rewinding_to_a_checkpoint_of_an_unrelated_thread_is_refused_with_validation() {
    let env = env();
    let t = two_turns(&env, "chat");
    let other = two_turns(&env, "other");
    let cp = other.u2.checkpoint.expect("cp").id;
    let e = env
        .threads
        .rewind_to_checkpoint(&t.thread, &cp, &with_files(&env.ws))
        .expect_err("refused");
    assert!(e.is_validation(), "{e}");
    assert!(e.to_string().contains("lineage"), "{e}");
    assert_eq!(active_ids(&env.threads, &t.thread).len(), 4);
}
