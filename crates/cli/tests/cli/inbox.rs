//! The inbox of a thread from the command line and over `cairn serve` (issue 59): a prompt
//! queued with its key is delivered at the boundary with its checkpoint, a rewind cancels the
//! one still queued, and its old key answers with the cancelled admission. (Queued while a run
//! is under way: the library's tests, `crates/rewind/tests/rewind/inbox.rs`, hold runs.)

use crate::serve::serve;
use crate::Fixture;
use serde_json::json;

/// A thread `chat` with one user message; its id.
fn started(f: &Fixture) -> String {
    f.json(&["thread", "new", "--id", "chat"]);
    let v = f.json(&[
        "thread", "append", "chat", "--kind", "user", "--text", "start",
    ]);
    v["entry"]["id"].as_str().expect("an id").to_string()
}

// issue 59
#[test]
fn a_queued_prompt_is_delivered_with_its_checkpoint_and_a_rewind_cancels_the_next_for_good() {
    let f = Fixture::new();
    let start = started(&f);
    let q = f.json(&[
        "thread", "queue", "chat", "--key", "k-1", "--text", "second",
    ]);
    assert_eq!(
        (q["state"].as_str(), q["repeated"].as_bool()),
        (Some("queued"), Some(false))
    );
    f.write("later.txt", "written before the delivery\n");
    let d = f.json(&["thread", "deliver", "chat"]);
    assert_eq!(d["delivered"]["state"], "delivered");
    assert_eq!(d["delivered"]["key"], "k-1");
    let snap = d["snapshot_id"].as_str().expect("a checkpoint at delivery");
    let files = f.json(&["show", snap]);
    assert!(files.to_string().contains("later.txt"), "{files}");
    f.json(&["thread", "queue", "chat", "--key", "k-2", "--text", "third"]);
    f.json(&["rewind", "chat", &start]);
    let inbox = f.json(&["thread", "inbox", "chat"]);
    let states: Vec<(&str, &str)> = inbox
        .as_array()
        .expect("a list")
        .iter()
        .map(|a| {
            (
                a["key"].as_str().unwrap_or(""),
                a["state"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(states, vec![("k-1", "delivered"), ("k-2", "cancelled")]);
    let again = f.json(&["thread", "queue", "chat", "--key", "k-2", "--text", "third"]);
    assert_eq!(again["state"], "cancelled");
    assert_eq!(again["repeated"], true);
    assert!(again["rewind_id"]
        .as_str()
        .is_some_and(|r| r.starts_with("rw_")));
    let none = f.json(&["thread", "deliver", "chat"]);
    assert!(none["delivered"].is_null());
    assert_eq!(none["queued"], 0);
}

// issue 59
#[test]
fn the_inbox_over_http_queues_delivers_and_answers_a_cancelled_key_with_its_admission() {
    let f = Fixture::new();
    let start = started(&f);
    let s = serve(&f);
    let k1 = json!({"key": "k-1", "text": "second"});
    let (status, a) = s.call("POST", "/v1/threads/chat/inbox", Some(&k1));
    assert_eq!((status, a["state"].as_str()), (201, Some("queued")), "{a}");
    let (status, a) = s.call("POST", "/v1/threads/chat/inbox", Some(&k1));
    assert_eq!((status, a["repeated"].as_bool()), (200, Some(true)), "{a}");
    let (status, d) = s.call("POST", "/v1/threads/chat/inbox/deliver", None);
    assert_eq!(status, 200, "{d}");
    assert_eq!(d["delivered"]["state"], "delivered");
    assert!(d["snapshot_id"].is_string(), "{d}");
    let k2 = json!({"key": "k-2", "text": "third"});
    let (status, _) = s.call("POST", "/v1/threads/chat/inbox", Some(&k2));
    assert_eq!(status, 201);
    let (status, r) = s.call(
        "POST",
        "/v1/threads/chat/rewind",
        Some(&json!({"entry": start, "key": "undo-1"})),
    );
    assert_eq!(status, 200, "{r}");
    let (status, a) = s.call("POST", "/v1/threads/chat/inbox", Some(&k2));
    assert_eq!(status, 200, "{a}");
    assert_eq!(
        (a["state"].as_str(), a["repeated"].as_bool()),
        (Some("cancelled"), Some(true))
    );
    assert_eq!(a["rewind_id"], r["rewind_id"]);
    let inbox = s.get("/v1/threads/chat/inbox");
    assert_eq!(inbox.as_array().map(Vec::len), Some(2));
    let doc = s.get("/v1/openapi.json");
    assert!(doc["paths"]["/v1/threads/{id}/inbox"]["post"].is_object());
    assert!(doc["paths"]["/v1/threads/{id}/inbox/deliver"]["post"].is_object());
}
