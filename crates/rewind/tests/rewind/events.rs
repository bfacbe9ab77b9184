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
        vec![RewindStarted, CheckpointCreated, RewindCompleted]
    );
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
