//! Memory items through rewinds and forks.

use crate::util::*;
use cairn_rewind::{EntryKind, MemoryKind, MemoryStatus, NewMemory, RewindOptions};
use cairn_store::ErrorKind;

fn item(text: &str, stands_on: &[&cairn_rewind::EntryId]) -> NewMemory {
    NewMemory {
        kind: MemoryKind::Item,
        text: text.into(),
        payload: Vec::new(),
        stands_on: stands_on.iter().map(|e| (*e).clone()).collect(),
    }
}

fn summary(text: &str, stands_on: &[&cairn_rewind::EntryId]) -> NewMemory {
    NewMemory {
        kind: MemoryKind::Summary,
        ..item(text, stands_on)
    }
}

#[test]
fn items_standing_only_on_cut_entries_become_stale_with_reason_rewound() {
    let env = env();
    let t = env.thread("chat");
    let u1 = note(&env.threads, &t, EntryKind::User, "1");
    let a1 = note(&env.threads, &t, EntryKind::Assistant, "1");
    let u2 = note(&env.threads, &t, EntryKind::User, "2");
    let a2 = note(&env.threads, &t, EntryKind::Assistant, "2");
    let kept = env
        .threads
        .add_memory(&t, item("from turn 1", &[&u1]))
        .expect("add");
    let both = env
        .threads
        .add_memory(&t, item("spans both", &[&a1, &u2]))
        .expect("add");
    let cut = env
        .threads
        .add_memory(&t, item("from turn 2", &[&u2, &a2]))
        .expect("add");
    let loose = env
        .threads
        .add_memory(&t, item("stands on nothing", &[]))
        .expect("add");
    let r = env
        .threads
        .rewind(&t, &a1, &RewindOptions::default())
        .expect("rewind");
    assert_eq!(r.memory.staled, vec![cut.id.clone()]);
    let stale = env.threads.memory_item(&cut.id).expect("item");
    match &stale.status {
        MemoryStatus::Stale { reason, rewind_id } => {
            assert_eq!(reason, "rewound");
            assert_eq!(
                rewind_id.as_deref(),
                r.rewind_id.as_ref().map(|i| i.as_str())
            );
        }
        other => panic!("expected stale, got {other:?}"),
    }
    for id in [&kept.id, &both.id, &loose.id] {
        assert_eq!(
            env.threads.memory_item(id).expect("item").status,
            MemoryStatus::Active
        );
    }
    let seen: Vec<_> = env
        .threads
        .memory(&t)
        .expect("memory")
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(seen, vec![kept.id, both.id, loose.id]);
    assert_eq!(env.threads.memory_items(&t).expect("all").len(), 4);
}

#[test]
fn summaries_of_the_branch_left_behind_are_not_seen_from_the_new_one() {
    let env = env();
    let t = env.thread("chat");
    let u1 = note(&env.threads, &t, EntryKind::User, "1");
    let a1 = note(&env.threads, &t, EntryKind::Assistant, "1");
    let u2 = note(&env.threads, &t, EntryKind::User, "2");
    let s = env
        .threads
        .add_memory(&t, summary("turns 1 and 2", &[&u1, &a1, &u2]))
        .expect("add");
    assert_eq!(env.threads.memory(&t).expect("memory").len(), 1);
    let r = env
        .threads
        .rewind(&t, &a1, &RewindOptions::default())
        .expect("rewind");
    assert!(r.memory.staled.is_empty(), "it stands on kept entries too");
    assert_eq!(
        env.threads.memory_item(&s.id).expect("item").status,
        MemoryStatus::Active
    );
    assert!(env.threads.memory(&t).expect("memory").is_empty());
    // Seen again from a branch holding all it stands on.
    env.threads
        .rewind(&t, &a1, &RewindOptions::default())
        .expect("no-op rewind");
    assert!(env.threads.memory(&t).expect("memory").is_empty());
}

#[test]
fn a_memory_item_stands_only_on_entries_its_thread_sees() {
    let env = env();
    let a = env.thread("a");
    let b = env.thread("b");
    let e = note(&env.threads, &b, EntryKind::User, "b's");
    assert_eq!(
        kind(env.threads.add_memory(&a, item("x", &[&e]))),
        ErrorKind::Validation
    );
}

#[test]
fn a_fork_sees_the_memory_of_its_source_up_to_the_fork_point() {
    let env = env();
    let t = env.thread("chat");
    let u1 = note(&env.threads, &t, EntryKind::User, "1");
    let a1 = note(&env.threads, &t, EntryKind::Assistant, "1");
    let u2 = note(&env.threads, &t, EntryKind::User, "2");
    let early = env
        .threads
        .add_memory(&t, item("early", &[&u1]))
        .expect("add");
    env.threads
        .add_memory(&t, item("late", &[&u2]))
        .expect("add");
    let fork = env
        .threads
        .fork(&t, &a1, &Default::default())
        .expect("fork");
    let seen: Vec<_> = env
        .threads
        .memory(&fork.thread_id)
        .expect("memory")
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(seen, vec![early.id]);
    // The fork's own memory is its own.
    let own = env
        .threads
        .add_memory(&fork.thread_id, item("fork's", &[&a1]))
        .expect("add");
    assert!(!env
        .threads
        .memory(&t)
        .expect("source")
        .iter()
        .any(|m| m.id == own.id));
}
