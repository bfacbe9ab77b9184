//! Checkpoints bound to entries: the policy's three levels, automatic points, admission keys,
//! failures, subagents, manual checkpoints and the lineage they are listed in.

use crate::fake::Call;
use crate::util::*;
use cairn_rewind::{
    AppendOptions, CheckpointKind, CheckpointOptions, Checkpoints, EffectivePolicy, EntryKind,
    NewEntry, RunOptions, ThreadsOptions, FILE_CHECKPOINT_KEY,
};
use cairn_store::ErrorKind;

#[test]
fn a_user_append_takes_a_checkpoint_labelled_with_the_entry_id_and_named_in_its_metadata() {
    let env = env();
    let t = env.thread("chat");
    let run = env.run(&t);
    env.ws.write("a.txt", "v1");
    let u = say(&env.threads, &t, &run, NewEntry::user("hi"));
    let cp = u.checkpoint.clone().expect("a checkpoint");
    assert_eq!(cp.kind, CheckpointKind::User);
    assert_eq!(cp.entry_id.as_ref(), Some(&u.entry.id));
    assert_eq!(cp.workspace_id, "project");
    let meta = &u.entry.metadata[FILE_CHECKPOINT_KEY];
    assert_eq!(meta["snapshot_id"], cp.snapshot_id.to_hex());
    assert_eq!(meta["workspace_id"], "project");
    assert_eq!(meta["checkpoint_id"], cp.id.as_str());
    assert!(meta["root"]
        .as_str()
        .is_some_and(|r| r.ends_with("project")));
    assert_eq!(
        u.entry.checkpoint.as_ref().map(|r| &r.snapshot_id),
        Some(&cp.snapshot_id)
    );
    match &env.ws.calls()[0] {
        Call::Checkpoint {
            label, metadata, ..
        } => {
            assert_eq!(label, u.entry.id.as_str());
            assert_eq!(metadata["cairn_entry_id"], u.entry.id.as_str());
            assert_eq!(metadata["cairn_thread_id"], "chat");
        }
        other => panic!("expected a checkpoint, got {other:?}"),
    }
    // The snapshot holds the files before the message.
    assert_eq!(
        env.ws.snapshot_files(&cp.snapshot_id).expect("kept")["a.txt"],
        "v1"
    );
}

#[test]
fn an_assistant_append_takes_no_checkpoint() {
    let env = env();
    let t = env.thread("chat");
    let run = env.run(&t);
    let a = say(&env.threads, &t, &run, NewEntry::assistant("hi"));
    assert!(a.checkpoint.is_none());
    assert_eq!(env.ws.checkpoints(), 0);
}

#[test]
fn a_repeated_admission_key_returns_the_first_entry_and_takes_no_second_checkpoint() {
    let env = env();
    let t = env.thread("chat");
    let run = env.run(&t);
    let opts = AppendOptions {
        run: Some(run.clone()),
        key: Some("prompt-1".into()),
        ..Default::default()
    };
    let first = env
        .threads
        .append(&t, NewEntry::user("hi"), &opts)
        .expect("first");
    let again = env
        .threads
        .append(&t, NewEntry::user("hi"), &opts)
        .expect("again");
    assert!(!first.repeated);
    assert!(again.repeated);
    assert_eq!(again.entry.id, first.entry.id);
    assert_eq!(again.checkpoint, first.checkpoint);
    assert_eq!(env.ws.checkpoints(), 1);
    assert_eq!(env.threads.active_branch(&t).expect("branch").len(), 1);
    // Another key is another message.
    let other = AppendOptions {
        key: Some("prompt-2".into()),
        ..opts
    };
    env.threads
        .append(&t, NewEntry::user("hi"), &other)
        .expect("second");
    assert_eq!(env.ws.checkpoints(), 2);
}

#[test]
fn two_appends_of_one_key_at_once_make_one_entry_and_one_checkpoint() {
    let env = env();
    let t = env.thread("chat");
    let run = env.run(&t);
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel();
    env.ws.hooks.lock().checkpoint_gate = Some(crate::fake::Gate {
        entered: entered_tx,
        release: parking_lot::Mutex::new(release_rx),
    });
    let opts = AppendOptions {
        run: Some(run.clone()),
        key: Some("prompt-1".into()),
        ..Default::default()
    };
    let first = {
        let (threads, t, opts) = (env.threads.clone(), t.clone(), opts.clone());
        std::thread::spawn(move || threads.append(&t, NewEntry::user("hi"), &opts))
    };
    entered_rx
        .recv()
        .expect("the first append is taking its checkpoint");
    // A second handle (another client) delivers the same prompt meanwhile: it waits.
    let other = env.reopen(ThreadsOptions::default());
    let second = {
        let (t, opts) = (t.clone(), AppendOptions { run: None, ..opts });
        std::thread::spawn(move || other.append(&t, NewEntry::user("hi"), &opts))
    };
    release_tx.send(()).expect("release");
    let first = first.join().expect("join").expect("first");
    let second = second.join().expect("join").expect("second");
    assert!(!first.repeated);
    assert!(second.repeated);
    assert_eq!(second.entry.id, first.entry.id);
    assert_eq!(env.ws.checkpoints(), 1);
    assert_eq!(env.threads.active_branch(&t).expect("branch").len(), 1);
}

#[test]
fn admission_keys_are_per_thread() {
    let env = env();
    let a = env.thread("a");
    let b = env.thread("b");
    let opts = AppendOptions {
        key: Some("k".into()),
        ..Default::default()
    };
    let x = env
        .threads
        .append(&a, NewEntry::user("x"), &opts)
        .expect("a");
    let y = env
        .threads
        .append(&b, NewEntry::user("y"), &opts)
        .expect("b");
    assert!(!y.repeated);
    assert_ne!(x.entry.id, y.entry.id);
}

#[test]
fn a_checkpoint_that_fails_is_reported_and_the_entry_is_saved_without_one() {
    let env = env();
    let t = env.thread("chat");
    let run = env.run(&t);
    env.ws.hooks.lock().fail_checkpoint = true;
    let u = say(&env.threads, &t, &run, NewEntry::user("hi"));
    assert!(u.checkpoint.is_none());
    let failure = u.checkpoint_error.expect("the failure is reported");
    assert_eq!(failure.kind, ErrorKind::Io);
    assert!(
        failure.message.contains("disk is full"),
        "{}",
        failure.message
    );
    assert!(u.entry.metadata.get(FILE_CHECKPOINT_KEY).is_none());
    assert_eq!(env.threads.active_branch(&t).expect("branch").len(), 1);
}

#[test]
fn without_any_level_of_the_policy_set_no_checkpoint_is_taken() {
    let env = env();
    let t = env.thread("chat");
    let run = env
        .threads
        .begin_run(
            &t,
            RunOptions {
                workspace: Some(env.ws.clone()),
                ..Default::default()
            },
        )
        .expect("run");
    let u = say(&env.threads, &t, &run, NewEntry::user("hi"));
    assert!(u.checkpoint.is_none());
    assert_eq!(env.ws.checkpoints(), 0);
}

#[test]
fn the_most_specific_level_turns_checkpoints_on_or_off() {
    let on = Checkpoints::default();
    let off = Checkpoints::off();
    assert!(EffectivePolicy::resolve(Some(&on), None, None).enabled);
    assert!(!EffectivePolicy::resolve(Some(&on), Some(&off), None).enabled);
    assert!(EffectivePolicy::resolve(Some(&off), Some(&off), Some(&on)).enabled);
    assert!(!EffectivePolicy::resolve(Some(&on), Some(&on), Some(&off)).enabled);
    assert!(EffectivePolicy::resolve(None, Some(&on), None).enabled);
    assert!(!EffectivePolicy::resolve(None, None, None).enabled);

    // Through runs: the runtime turns them on, an agent off, a run back on.
    let env = env_with(ThreadsOptions {
        checkpoints: Some(on.clone()),
        ..Default::default()
    });
    let t = env.thread("chat");
    let begin = |agent: Option<Checkpoints>, run: Option<Checkpoints>| {
        env.threads
            .begin_run(
                &t,
                RunOptions {
                    workspace: Some(env.ws.clone()),
                    agent_checkpoints: agent,
                    checkpoints: run,
                    ..Default::default()
                },
            )
            .expect("run")
    };
    let r = begin(None, None);
    assert!(say(&env.threads, &t, &r, NewEntry::user("1"))
        .checkpoint
        .is_some());
    let r = begin(Some(off.clone()), None);
    assert!(say(&env.threads, &t, &r, NewEntry::user("2"))
        .checkpoint
        .is_none());
    let r = begin(Some(off), Some(on));
    assert!(say(&env.threads, &t, &r, NewEntry::user("3"))
        .checkpoint
        .is_some());
}

#[test]
fn excludes_of_every_level_add_up_and_max_file_bytes_comes_from_the_most_specific() {
    let runtime = Checkpoints {
        exclude: vec!["dist/**".into()],
        max_file_bytes: Some(100),
        ..Default::default()
    };
    let agent = Checkpoints {
        exclude: vec!["*.log".into(), "dist/**".into()],
        ..Default::default()
    };
    let run = Checkpoints {
        exclude: vec!["tmp/**".into()],
        max_file_bytes: Some(7),
        ..Default::default()
    };
    let env = env_with(ThreadsOptions {
        checkpoints: Some(runtime),
        ..Default::default()
    });
    let t = env.thread("chat");
    let r = env
        .threads
        .begin_run(
            &t,
            RunOptions {
                workspace: Some(env.ws.clone()),
                agent_checkpoints: Some(agent),
                checkpoints: Some(run),
                ..Default::default()
            },
        )
        .expect("run");
    assert_eq!(r.policy().exclude, vec!["dist/**", "*.log", "tmp/**"]);
    say(&env.threads, &t, &r, NewEntry::user("hi"));
    match &env.ws.calls()[0] {
        Call::Checkpoint {
            exclude,
            max_file_bytes,
            ..
        } => {
            assert_eq!(
                exclude,
                &vec!["dist/**".to_string(), "*.log".into(), "tmp/**".into()]
            );
            assert_eq!(*max_file_bytes, 7);
        }
        other => panic!("expected a checkpoint, got {other:?}"),
    }
    let defaults = EffectivePolicy::resolve(Some(&Checkpoints::default()), None, None);
    assert_eq!(defaults.max_file_bytes, None, "the workspace's own limit");
}

#[test]
fn checkpoints_before_tools_and_compaction_are_taken_only_when_the_policy_asks() {
    let env = env();
    let t = env.thread("chat");
    let plain = env.run(&t);
    assert!(say(
        &env.threads,
        &t,
        &plain,
        NewEntry::new(EntryKind::Tool, "ls")
    )
    .checkpoint
    .is_none());
    assert!(say(
        &env.threads,
        &t,
        &plain,
        NewEntry::new(EntryKind::Compaction, "sum")
    )
    .checkpoint
    .is_none());
    let asks = env
        .threads
        .begin_run(
            &t,
            RunOptions {
                workspace: Some(env.ws.clone()),
                checkpoints: Some(Checkpoints {
                    before_tools: Some(true),
                    before_compaction: Some(true),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .expect("run");
    let tool = say(
        &env.threads,
        &t,
        &asks,
        NewEntry::new(EntryKind::Tool, "ls"),
    );
    assert_eq!(
        tool.checkpoint.as_ref().map(|c| c.kind),
        Some(CheckpointKind::Tool)
    );
    let compaction = say(
        &env.threads,
        &t,
        &asks,
        NewEntry::new(EntryKind::Compaction, "summary"),
    );
    let cp = compaction
        .checkpoint
        .expect("a checkpoint before the compaction");
    assert_eq!(cp.kind, CheckpointKind::Compaction);
    // The compaction entry names its checkpoint.
    assert_eq!(
        compaction.entry.metadata[FILE_CHECKPOINT_KEY]["checkpoint_id"],
        cp.id.as_str()
    );
    assert_eq!(
        compaction.entry.checkpoint.map(|r| r.checkpoint_id),
        Some(cp.id)
    );
}

#[test]
fn a_run_started_from_another_runs_tool_call_takes_no_checkpoints() {
    let env = env();
    let t = env.thread("chat");
    let parent = env.run(&t);
    let sub = env
        .threads
        .begin_run(
            &t,
            RunOptions {
                workspace: Some(env.ws.clone()),
                checkpoints: Some(Checkpoints::default()),
                parent_run: Some(parent.id().clone()),
                ..Default::default()
            },
        )
        .expect("subagent");
    assert!(sub.is_subagent());
    let u = say(&env.threads, &t, &sub, NewEntry::user("from the subagent"));
    assert!(u.checkpoint.is_none());
    assert_eq!(env.ws.checkpoints(), 0);
}

#[test]
fn a_subagent_with_an_unknown_parent_run_is_not_found() {
    let env = env();
    let t = env.thread("chat");
    let r = env.threads.begin_run(
        &t,
        RunOptions {
            parent_run: Some("r_nope".into()),
            ..Default::default()
        },
    );
    assert_eq!(kind(r), ErrorKind::NotFound);
}

#[test]
fn a_manual_checkpoint_is_taken_whatever_the_policy_and_bound_to_the_leaf() {
    let env = env();
    let t = env.thread("chat");
    let empty = env
        .threads
        .checkpoint(
            &t,
            "start",
            &CheckpointOptions {
                workspace: Some(env.ws.clone()),
                ..Default::default()
            },
        )
        .expect("a checkpoint of an empty thread");
    assert_eq!(empty.entry_id, None);
    let u = note(&env.threads, &t, EntryKind::User, "hi");
    let cp = env
        .threads
        .checkpoint(
            &t,
            "before-change",
            &CheckpointOptions {
                workspace: Some(env.ws.clone()),
                ..Default::default()
            },
        )
        .expect("checkpoint");
    assert_eq!(cp.kind, CheckpointKind::Manual);
    assert_eq!(cp.label.as_deref(), Some("before-change"));
    assert_eq!(cp.entry_id, Some(u));
    match env.ws.calls().last() {
        Some(Call::Checkpoint { label, .. }) => assert_eq!(label, "before-change"),
        other => panic!("expected a checkpoint, got {other:?}"),
    }
    let listed = env.threads.list_checkpoints(&t).expect("list");
    assert_eq!(
        listed.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        vec![empty.id, cp.id]
    );
}

#[test]
fn a_manual_checkpoint_without_a_workspace_is_refused_with_validation() {
    let env = env();
    let t = env.thread("chat");
    let r = env
        .threads
        .checkpoint(&t, "x", &CheckpointOptions::default());
    assert_eq!(kind(r), ErrorKind::Validation);
}

#[test]
fn list_checkpoints_covers_the_lineage_up_to_a_fork_point_and_nothing_of_another_thread() {
    let env = env();
    let turns = two_turns(&env, "chat");
    let other = two_turns(&env, "other");
    let fork = env
        .threads
        .fork(&turns.thread, &turns.u1.entry.id, &Default::default())
        .expect("fork at the first message");
    let fork_cps = env
        .threads
        .list_checkpoints(&fork.thread_id)
        .expect("fork's");
    let u1_cp = turns.u1.checkpoint.clone().expect("u1 cp").id;
    assert_eq!(
        fork_cps.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        vec![u1_cp.clone()]
    );
    let source = env
        .threads
        .list_checkpoints(&turns.thread)
        .expect("source's");
    assert_eq!(source.len(), 2);
    assert!(!source
        .iter()
        .any(|c| Some(&c.id) == other.u1.checkpoint.as_ref().map(|c| &c.id)));
    // Forked at the end of the first turn, the fork names the second message's checkpoint too.
    let at_turn_end = env
        .threads
        .fork(&turns.thread, &turns.a1, &Default::default())
        .expect("fork");
    let listed = env
        .threads
        .list_checkpoints(&at_turn_end.thread_id)
        .expect("list");
    assert_eq!(listed.len(), 2);
    // A manual checkpoint taken in the source after the fork, at an entry the fork shares,
    // is not the fork's.
    env.threads
        .rewind(&turns.thread, &turns.a1, &Default::default())
        .expect("rewind the source");
    env.threads
        .checkpoint(
            &turns.thread,
            "later",
            &CheckpointOptions {
                workspace: Some(env.ws.clone()),
                ..Default::default()
            },
        )
        .expect("checkpoint");
    assert_eq!(
        env.threads
            .list_checkpoints(&at_turn_end.thread_id)
            .expect("list")
            .len(),
        2
    );
}
