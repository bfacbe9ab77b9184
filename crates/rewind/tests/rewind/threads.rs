//! Threads, entries, branches and appends.

use crate::util::*;
use cairn_rewind::{AppendOptions, EntryKind, NewEntry, RewindOptions, ThreadId};
use cairn_store::ErrorKind;

#[test]
fn creating_a_thread_with_an_id_that_exists_is_refused_with_validation() {
    let env = env();
    env.thread("chat");
    let again = env
        .threads
        .create_thread(Some("chat".into()), serde_json::json!({}));
    assert_eq!(kind(again), ErrorKind::Validation);
    assert_eq!(env.threads.threads().expect("list").len(), 1);
}

#[test]
fn a_thread_id_that_is_malformed_is_an_invalid_argument() {
    let env = env();
    for bad in ["", "a b", "x/y", &"t".repeat(129)] {
        let r = env
            .threads
            .create_thread(Some(ThreadId::new(bad)), serde_json::json!({}));
        assert_eq!(kind(r), ErrorKind::InvalidArgument, "{bad:?}");
    }
}

#[test]
fn a_thread_made_without_an_id_gets_one() {
    let env = env();
    let t = env
        .threads
        .create_thread(None, serde_json::json!({"title": "x"}))
        .expect("create");
    assert!(t.id.as_str().starts_with("t_"));
    assert_eq!(t.metadata["title"], "x");
    assert_eq!(env.threads.thread(&t.id).expect("read"), t);
}

#[test]
fn an_unknown_thread_is_not_found() {
    let env = env();
    let r = env.threads.append(
        &"nope".into(),
        NewEntry::user("x"),
        &AppendOptions::default(),
    );
    assert_eq!(kind(r), ErrorKind::NotFound);
}

#[test]
fn appending_links_each_entry_to_the_leaf_and_moves_the_leaf() {
    let env = env();
    let t = env.thread("chat");
    let a = note(&env.threads, &t, EntryKind::User, "hi");
    let b = note(&env.threads, &t, EntryKind::Assistant, "hello");
    let c = note(&env.threads, &t, EntryKind::Tool, "ls");
    let branch = env.threads.active_branch(&t).expect("branch");
    assert_eq!(
        branch.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        vec![a.clone(), b.clone(), c.clone()]
    );
    assert_eq!(branch[0].parent_id, None);
    assert_eq!(branch[1].parent_id, Some(a));
    assert_eq!(branch[2].parent_id, Some(b));
    assert_eq!(branch[2].payload, b"ls");
    assert_eq!(env.threads.thread(&t).expect("thread").active_leaf, Some(c));
}

#[test]
fn entry_metadata_and_payload_come_back_as_given() {
    let env = env();
    let t = env.thread("chat");
    let bytes = vec![0u8, 255, 10, 13];
    let e = env
        .threads
        .append(
            &t,
            NewEntry::new(EntryKind::Event, bytes.clone())
                .with_metadata(serde_json::json!({"k": [1, 2]})),
            &AppendOptions::default(),
        )
        .expect("append");
    let back = env.threads.entry(&e.entry.id).expect("entry");
    assert_eq!(back.payload, bytes);
    assert_eq!(back.metadata, serde_json::json!({"k": [1, 2]}));
    assert_eq!(back.kind, EntryKind::Event);
}

#[test]
fn metadata_that_is_not_an_object_is_an_invalid_argument() {
    let env = env();
    let t = env.thread("chat");
    let r = env.threads.append(
        &t,
        NewEntry::user("x").with_metadata(serde_json::json!([1])),
        &AppendOptions::default(),
    );
    assert_eq!(kind(r), ErrorKind::InvalidArgument);
}

#[test]
fn cut_entries_stay_on_a_branch_of_their_own_and_log_all_lists_them() {
    let env = env();
    let t = env.thread("chat");
    let u1 = note(&env.threads, &t, EntryKind::User, "1");
    let a1 = note(&env.threads, &t, EntryKind::Assistant, "1");
    let u2 = note(&env.threads, &t, EntryKind::User, "2");
    env.threads
        .rewind(&t, &a1, &RewindOptions::default())
        .expect("rewind");
    let u3 = note(&env.threads, &t, EntryKind::User, "3");
    assert_eq!(
        env.threads.entry(&u3).expect("u3").parent_id,
        Some(a1.clone())
    );
    assert_eq!(
        active_ids(&env.threads, &t),
        vec![u1.clone(), a1.clone(), u3.clone()]
    );
    let all = env.threads.entries(&t, true).expect("all");
    assert_eq!(
        all.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        vec![u1, a1, u2.clone(), u3]
    );
    let cut = all.iter().find(|e| e.id == u2).expect("u2 kept");
    assert!(!cut.on_active_branch);
    assert_eq!(all.iter().filter(|e| e.on_active_branch).count(), 3);
}

#[test]
fn branches_lists_every_leaf_and_marks_the_active_one() {
    let env = env();
    let t = env.thread("chat");
    let u1 = note(&env.threads, &t, EntryKind::User, "1");
    let a1 = note(&env.threads, &t, EntryKind::Assistant, "1");
    env.threads
        .rewind(&t, &u1, &RewindOptions::default())
        .expect("rewind");
    let a1b = note(&env.threads, &t, EntryKind::Assistant, "1b");
    let mut branches = env.threads.branches(&t).expect("branches");
    branches.sort_by_key(|b| b.active);
    assert_eq!(branches.len(), 2);
    assert_eq!(branches[0].leaf, a1);
    assert!(!branches[0].active);
    assert_eq!(branches[1].leaf, a1b);
    assert!(branches[1].active);
    assert_eq!(branches[1].length, 2);
}

#[test]
fn a_rewind_to_the_leaf_cuts_nothing() {
    let env = env();
    let t = env.thread("chat");
    note(&env.threads, &t, EntryKind::User, "1");
    let a1 = note(&env.threads, &t, EntryKind::Assistant, "1");
    let r = env
        .threads
        .rewind(&t, &a1, &RewindOptions::default())
        .expect("rewind");
    assert!(!r.conversation.rewound);
    assert!(r.conversation.cut.is_empty());
}

#[test]
fn append_and_entry_say_whether_the_entry_is_on_the_active_branch() {
    let env = env();
    let t = two_turns(&env, "chat");
    assert!(env.threads.entry(&t.a2).expect("entry").on_active_branch);
    env.threads
        .rewind(&t.thread, &t.a1, &RewindOptions::default())
        .expect("rewind");
    assert!(!env.threads.entry(&t.a2).expect("entry").on_active_branch);
    assert!(env.threads.entry(&t.a1).expect("entry").on_active_branch);
    let appended = env
        .threads
        .append(
            &t.thread,
            NewEntry::new(EntryKind::Note, "after the rewind"),
            &AppendOptions {
                key: Some("k1".into()),
                ..Default::default()
            },
        )
        .expect("append");
    assert!(appended.entry.on_active_branch);
    let repeated = env
        .threads
        .append(
            &t.thread,
            NewEntry::new(EntryKind::Note, "after the rewind"),
            &AppendOptions {
                key: Some("k1".into()),
                ..Default::default()
            },
        )
        .expect("repeat");
    assert!(repeated.repeated);
    assert!(repeated.entry.on_active_branch);
}
