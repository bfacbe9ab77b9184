//! The event log and two handles on one database.

use crate::util::*;
use cairn_rewind::{EventKind, NewEntry, RewindOptions, ThreadsOptions};

#[test]
fn events_record_checkpoints_appends_and_rewinds_in_order() {
    let env = env();
    let t = two_turns(&env, "chat");
    env.threads
        .rewind(&t.thread, &t.a1, &with_files(&env.ws))
        .expect("rewind");
    let events = env.threads.events_since(0, 1000).expect("events");
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    use EventKind::*;
    assert_eq!(
        kinds,
        vec![
            ThreadCreated,
            CheckpointCreated,
            EntryAppended,
            EntryAppended,
            CheckpointCreated,
            EntryAppended,
            EntryAppended,
            RewindStarted,
            // The files, restored before the conversation moves.
            RestoreApplied,
            // The rewind's "Before rewind" checkpoint, in the transaction that completes it.
            CheckpointCreated,
            RewindCompleted
        ]
    );
    assert!(events.windows(2).all(|w| w[0].cursor < w[1].cursor));
    assert_eq!(events[1].data["entry_id"], t.u1.entry.id.as_str());
    let completed = events.last().expect("last");
    assert_eq!(completed.data["to_entry_id"], t.a1.as_str());
    assert_eq!(completed.data["cut"].as_array().map(|a| a.len()), Some(2));
    // Reading on from a cursor gives what follows.
    let tail = env
        .threads
        .events_since(events[6].cursor, 10)
        .expect("tail");
    assert_eq!(
        tail.iter().map(|e| e.kind).collect::<Vec<_>>(),
        vec![
            RewindStarted,
            RestoreApplied,
            CheckpointCreated,
            RewindCompleted
        ]
    );
    // What the restore did, for a process that follows the log.
    let applied = &events[8];
    assert_eq!(applied.thread_id.as_ref(), Some(&t.thread));
    assert_eq!(applied.data["rewind_id"], events[7].data["rewind_id"]);
    assert_eq!(
        applied.data["workspace_id"],
        cairn_rewind::Files::id(env.ws.as_ref())
    );
    assert!(
        applied.data["safety_snapshot_id"].is_string(),
        "{}",
        applied.data
    );
    let u2_checkpoint = t.u2.checkpoint.as_ref().expect("u2's checkpoint");
    assert_eq!(applied.data["checkpoint_id"], u2_checkpoint.id.as_str());
    // a.txt back to v2, b.txt deleted.
    assert_eq!(applied.data["restored"], 1, "{}", applied.data);
    assert_eq!(applied.data["deleted"], 1, "{}", applied.data);
    assert_eq!(
        env.threads
            .thread_events_since(&t.thread, 0, 1000)
            .expect("thread's")
            .len(),
        events.len()
    );
    assert_eq!(env.threads.last_cursor().expect("cursor"), completed.cursor);
}

#[test]
fn two_handles_on_one_database_see_the_same_thread() {
    let env = env();
    let t = two_turns(&env, "chat");
    let other = env.reopen(ThreadsOptions::default());
    let cursor = other.last_cursor().expect("cursor");
    env.threads
        .rewind(&t.thread, &t.a1, &RewindOptions::default())
        .expect("rewind");
    assert_eq!(
        active_ids(&other, &t.thread),
        vec![t.u1.entry.id.clone(), t.a1.clone()]
    );
    let seen: Vec<EventKind> = other
        .events_since(cursor, 10)
        .expect("events")
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        seen,
        vec![EventKind::RewindStarted, EventKind::RewindCompleted]
    );
    let e = other
        .append(
            &t.thread,
            NewEntry::user("from the other handle"),
            &Default::default(),
        )
        .expect("append");
    assert_eq!(
        env.threads.thread(&t.thread).expect("thread").active_leaf,
        Some(e.entry.id)
    );
}

#[test]
fn a_restore_recorded_outside_any_thread_is_a_restore_applied_event_and_a_dry_run_is_not() {
    let env = env();
    let before = env.threads.last_cursor().expect("cursor");
    let report: cairn_restore::Report = serde_json::from_value(serde_json::json!({
        "snapshot_id": "ab".repeat(32), "dry_run": false, "restored": ["a.txt", "b.txt"],
        "deleted": ["c.txt"], "unchanged": 4, "kept": [], "busy": false, "drifted": [],
        "paths": ["a.txt", "b.txt", "c.txt"], "safety_snapshot_id": "cd".repeat(32),
        "operations": 3, "as_planned": true, "journal": "j1",
    }))
    .expect("a restore report");
    let root = std::path::Path::new("/work/project");
    env.threads
        .record_restore("ws-1", root, &report)
        .expect("record");
    let mut dry = report.clone();
    dry.dry_run = true;
    env.threads
        .record_restore("ws-1", root, &dry)
        .expect("a dry run");
    let events = env.threads.events_since(before, 10).expect("events");
    assert_eq!(events.len(), 1, "{events:?}");
    let e = &events[0];
    assert_eq!(
        (e.kind, e.thread_id.clone()),
        (EventKind::RestoreApplied, None)
    );
    assert_eq!(e.data["workspace_id"], "ws-1");
    assert_eq!(e.data["root"], "/work/project");
    assert_eq!(e.data["snapshot_id"], "ab".repeat(32));
    assert_eq!(e.data["safety_snapshot_id"], "cd".repeat(32));
    assert_eq!(
        (e.data["restored"].clone(), e.data["deleted"].clone()),
        (2.into(), 1.into())
    );
    assert_eq!(
        e.data["paths"],
        serde_json::json!(["a.txt", "b.txt", "c.txt"])
    );
}
