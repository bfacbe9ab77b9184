//! The studio's security checks and its digest check, against the real router on a loopback
//! port (raw HTTP/1.1, so every header is the test's own), and the turn's next checkpoint.

use super::*;
use crate::serve::plans::{apply_op, digest_of, Op, OpRequest};
use cairn_rewind::{AppendOptions, NewEntry, ThreadId};
use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;

struct Served {
    studio: Arc<Studio>,
    port: u16,
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    /// The snapshot of the first user message's checkpoint.
    first: cairn_store::SnapshotId,
}

const TOKEN: &str = "00112233445566778899aabbccddeeff";

/// A workspace with a thread of one turn (`a.txt` changed in it), served on a free port.
fn serve() -> Served {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().join("project");
    std::fs::create_dir(&root).expect("the project directory");
    std::fs::write(root.join("a.txt"), "one\n").expect("a file");
    let ctx = Ctx {
        store: Some(dir.path().join("store")),
        ..Ctx::new(Some(root.clone()), None, true)
    };
    let opened = crate::threads::open(&ctx, true).expect("the workspace and its threads");
    let t = opened
        .threads
        .create_thread(Some(ThreadId::new("t")), serde_json::json!({}))
        .expect("a thread");
    let options = AppendOptions {
        workspace: Some(opened.ws.clone() as Arc<dyn cairn_rewind::Files>),
        ..AppendOptions::default()
    };
    let u = opened
        .threads
        .append(&t.id, NewEntry::user("first"), &options)
        .expect("a user message");
    std::fs::write(root.join("a.txt"), "two\n").expect("the turn's change");
    let first = u.checkpoint.expect("a checkpoint").snapshot_id;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    listener.set_nonblocking(true).expect("non-blocking");
    let studio = Arc::new(Studio::new(ctx, opened, port, TOKEN.into()));
    let app = router(studio.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
            let _ = axum::serve(l, app).await;
        });
    });
    Served {
        studio,
        port,
        _dir: dir,
        root,
        first,
    }
}

/// Sends one request with exactly `headers` (plus a length) and returns the status and body.
fn send(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("the studio answers");
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).expect("the request is sent");
    let mut r = BufReader::new(s);
    let mut status = String::new();
    r.read_line(&mut status).expect("a status line");
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    let mut rest = String::new();
    let _ = r.read_to_string(&mut rest);
    let body = rest.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (code, body.to_string())
}

fn host(port: u16) -> (&'static str, String) {
    ("Host", format!("127.0.0.1:{port}"))
}

fn bearer() -> (&'static str, String) {
    ("Authorization", format!("Bearer {TOKEN}"))
}

fn kind_of(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    v["error"]["kind"].as_str().unwrap_or("").to_string()
}

#[test]
fn an_api_call_with_the_token_and_this_servers_host_is_answered() {
    let s = serve();
    let (code, body) = send(s.port, "GET", "/v1/threads", &[host(s.port), bearer()], "");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"t\""), "{body}");
    let (code, _) = send(
        s.port,
        "GET",
        "/v1/threads",
        &[("Host", format!("localhost:{}", s.port)), bearer()],
        "",
    );
    assert_eq!(code, 200);
}

#[test]
fn an_api_call_without_the_token_or_with_another_is_refused() {
    let s = serve();
    let (code, body) = send(s.port, "GET", "/v1/threads", &[host(s.port)], "");
    assert_eq!((code, kind_of(&body).as_str()), (401, "DENIED"), "{body}");
    let wrong = ("Authorization", format!("Bearer {}", "f".repeat(32)));
    assert_eq!(
        send(s.port, "GET", "/v1/threads", &[host(s.port), wrong], "").0,
        401
    );
    let short = ("Authorization", "Bearer 0011".to_string());
    assert_eq!(
        send(s.port, "GET", "/v1/threads", &[host(s.port), short], "").0,
        401
    );
    // The event stream takes it in the query, as EventSource cannot send headers.
    let (code, _) = send(s.port, "GET", "/v1/events?token=nope", &[host(s.port)], "");
    assert_eq!(code, 401);
}

#[test]
fn a_request_naming_another_host_is_refused_even_with_the_token() {
    // DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1.
    let s = serve();
    for h in [
        format!("evil.example:{}", s.port),
        "127.0.0.1".to_string(),
        format!("127.0.0.1:{}", s.port + 1),
        String::new(),
    ] {
        let (code, body) = send(
            s.port,
            "GET",
            "/v1/threads",
            &[("Host", h.clone()), bearer()],
            "",
        );
        assert_eq!(
            (code, kind_of(&body).as_str()),
            (403, "DENIED"),
            "{h}: {body}"
        );
    }
    // The page itself too: it would carry the attacker's script no token.
    let (code, _) = send(
        s.port,
        "GET",
        "/",
        &[("Host", format!("evil.example:{}", s.port))],
        "",
    );
    assert_eq!(code, 403);
}

#[test]
fn a_request_from_a_foreign_origin_or_site_is_refused_even_with_the_token() {
    let s = serve();
    let origin = ("Origin", "http://evil.example".to_string());
    let (code, body) = send(
        s.port,
        "GET",
        "/v1/threads",
        &[host(s.port), bearer(), origin],
        "",
    );
    assert_eq!((code, kind_of(&body).as_str()), (403, "DENIED"), "{body}");
    let other_port = ("Origin", format!("http://127.0.0.1:{}", s.port + 1));
    assert_eq!(
        send(
            s.port,
            "GET",
            "/v1/threads",
            &[host(s.port), bearer(), other_port],
            ""
        )
        .0,
        403
    );
    let site = ("Sec-Fetch-Site", "cross-site".to_string());
    assert_eq!(
        send(
            s.port,
            "GET",
            "/v1/threads",
            &[host(s.port), bearer(), site],
            ""
        )
        .0,
        403
    );
    let own = ("Origin", format!("http://127.0.0.1:{}", s.port));
    assert_eq!(
        send(
            s.port,
            "GET",
            "/v1/threads",
            &[host(s.port), bearer(), own],
            ""
        )
        .0,
        200
    );
}

#[test]
fn the_page_is_served_from_the_binary_without_the_token_and_runs_only_its_own_script() {
    let s = serve();
    let (code, body) = send(s.port, "GET", "/", &[host(s.port)], "");
    assert_eq!(code, 200);
    assert!(body.contains("<script src=\"/app.js\""), "{body}");
    let (code, js) = send(s.port, "GET", "/app.js", &[host(s.port)], "");
    assert_eq!((code, js.len() > 1000), (200, true));
    let mut raw = TcpStream::connect(("127.0.0.1", s.port)).expect("connects");
    raw.write_all(
        format!(
            "GET / HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            s.port
        )
        .as_bytes(),
    )
    .expect("sent");
    let mut all = String::new();
    let _ = raw.read_to_string(&mut all);
    assert!(
        all.to_ascii_lowercase()
            .contains("content-security-policy: default-src 'none'; script-src 'self'"),
        "{all}"
    );
}

fn restore_request(snapshot: &cairn_store::SnapshotId) -> OpRequest {
    OpRequest {
        op: Op::Restore,
        thread: None,
        entry: None,
        snapshot: Some(snapshot.to_string()),
        files: false,
        into: None,
        new_thread_id: None,
        root: None,
        on_drift: None,
        key: None,
    }
}

/// A rewind with files of thread `t` to its first entry, with `key`.
fn rewind_request(s: &Served, key: Option<&str>) -> OpRequest {
    let entry = s
        .studio
        .opened
        .threads
        .entries(&ThreadId::new("t"), false)
        .expect("entries")[0]
        .id
        .to_string();
    OpRequest {
        op: Op::Rewind,
        thread: Some("t".into()),
        entry: Some(entry),
        files: true,
        snapshot: None,
        into: None,
        new_thread_id: None,
        root: None,
        on_drift: None,
        key: key.map(str::to_string),
    }
}

fn plan_over_http(s: &Served, request: &OpRequest) -> serde_json::Value {
    let (code, body) = send(
        s.port,
        "POST",
        "/v1/plans",
        &[
            host(s.port),
            bearer(),
            ("Content-Type", "application/json".into()),
        ],
        &serde_json::to_string(request).expect("encodes"),
    );
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).expect("a plan")
}

#[test]
fn a_change_confirmed_with_its_plans_digest_is_made_and_names_its_safety_snapshot() {
    let s = serve();
    let plan = plan_over_http(&s, &restore_request(&s.first));
    assert_eq!(plan["plan"]["files"]["restore"][0], "a.txt");
    assert_eq!(
        std::fs::read_to_string(s.root.join("a.txt")).expect("read"),
        "two\n"
    );
    let body = serde_json::json!({"request": plan["request"], "digest": plan["digest"]});
    let (code, done) = send(
        s.port,
        "POST",
        "/v1/plans/apply",
        &[
            host(s.port),
            bearer(),
            ("Content-Type", "application/json".into()),
        ],
        &body.to_string(),
    );
    assert_eq!(code, 200, "{done}");
    assert_eq!(
        std::fs::read_to_string(s.root.join("a.txt")).expect("read"),
        "one\n"
    );
    let done: serde_json::Value = serde_json::from_str(&done).expect("a report");
    let safety = done["safety_snapshot_id"]
        .as_str()
        .expect("a safety snapshot");
    assert_eq!(done["undo"]["snapshot"], safety);
}

#[test]
fn a_change_whose_digest_is_not_the_plan_it_would_carry_out_is_refused_with_conflict() {
    let s = serve();
    let request = restore_request(&s.first);
    let plan = plan_over_http(&s, &request);
    let digest = plan["digest"].as_str().expect("a digest").to_string();
    let exact: OpRequest = serde_json::from_value(plan["request"].clone()).expect("a request");
    // A digest the page never saw.
    let e = apply_op(&s.studio, &exact, &"0".repeat(64)).expect_err("refused");
    assert_eq!(e.kind, Some(ErrorKind::Conflict));
    // The files changed since the plan was shown: the plan now differs, so its digest does.
    std::fs::write(s.root.join("a.txt"), "three\n").expect("a change after the plan");
    let e = apply_op(&s.studio, &exact, &digest).expect_err("refused");
    assert_eq!(e.kind, Some(ErrorKind::Conflict), "{}", e.message);
    assert_eq!(
        std::fs::read_to_string(s.root.join("a.txt")).expect("read"),
        "three\n"
    );
    // No digest at all is not a confirmation.
    let (code, body) = send(
        s.port,
        "POST",
        "/v1/plans/apply",
        &[
            host(s.port),
            bearer(),
            ("Content-Type", "application/json".into()),
        ],
        &serde_json::json!({"request": plan["request"]}).to_string(),
    );
    assert_eq!(
        (code, kind_of(&body).as_str()),
        (400, "INVALID_ARGUMENT"),
        "{body}"
    );
}

#[test]
fn a_request_other_than_the_one_its_plan_answered_is_refused() {
    let s = serve();
    // Named by a prefix, as a page may: the plan answers the full id, which apply needs.
    let mut loose = restore_request(&s.first);
    loose.snapshot = Some(s.first.to_string()[..12].to_string());
    let plan = plan_over_http(&s, &loose);
    let digest = plan["digest"].as_str().expect("a digest");
    let e = apply_op(&s.studio, &loose, digest).expect_err("refused");
    assert_eq!(e.kind, Some(ErrorKind::InvalidArgument), "{}", e.message);
    assert_eq!(
        std::fs::read_to_string(s.root.join("a.txt")).expect("read"),
        "two\n"
    );
}

#[test]
fn the_digest_covers_the_request_and_every_path_of_the_plan() {
    let a = restore_request(&cairn_store::SnapshotId(cairn_store::ObjectId([1; 32])));
    let b = OpRequest {
        root: Some("/elsewhere".into()),
        ..a.clone()
    };
    let plan = serde_json::json!({"restored": ["x"]});
    let d = digest_of(&a, &plan).expect("a digest");
    assert_eq!(d.len(), 64);
    assert_eq!(d, digest_of(&a, &plan).expect("a digest"));
    assert_ne!(d, digest_of(&b, &plan).expect("a digest"));
    assert_ne!(
        d,
        digest_of(&a, &serde_json::json!({"restored": ["x", "y"]})).expect("a digest")
    );
}

#[test]
fn tokens_are_random_128_bit_hex_and_compared_whole() {
    let (a, b) = (new_token().expect("a token"), new_token().expect("a token"));
    assert_eq!(a.len(), 32);
    assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a, b);
    assert!(same_secret(a.as_bytes(), a.as_bytes()));
    assert!(!same_secret(a.as_bytes(), &a.as_bytes()[..31]));
    assert!(!same_secret(a.as_bytes(), b.as_bytes()));
}

#[test]
fn the_mutating_calls_are_post_only() {
    let s = serve();
    let (code, _) = send(
        s.port,
        "GET",
        "/v1/plans/apply",
        &[host(s.port), bearer()],
        "",
    );
    assert_eq!(code, 405);
}

fn checkpoint(entry: Option<&str>, snap: u8) -> cairn_rewind::Checkpoint {
    cairn_rewind::Checkpoint {
        id: cairn_rewind::CheckpointId::new(format!("cp_{snap}")),
        thread_id: ThreadId::new("t"),
        entry_id: entry.map(cairn_rewind::EntryId::new),
        kind: cairn_rewind::CheckpointKind::User,
        label: None,
        snapshot_id: cairn_store::SnapshotId(cairn_store::ObjectId([snap; 32])),
        workspace_id: "w".into(),
        root: "/w".into(),
        run_id: None,
        created_ms: i64::from(snap),
    }
}

#[test]
fn a_turn_ends_at_the_next_checkpoint_on_its_own_branch() {
    // e1 -> e2 -> e3 (a branch a rewind cut) and e1 -> e4 (the active one).
    let parents: std::collections::HashMap<_, _> = [
        ("e1", None),
        ("e2", Some("e1")),
        ("e3", Some("e2")),
        ("e4", Some("e1")),
    ]
    .into_iter()
    .map(|(e, p)| {
        (
            cairn_rewind::EntryId::new(e),
            p.map(cairn_rewind::EntryId::new),
        )
    })
    .collect();
    let list = [
        checkpoint(Some("e1"), 1),
        checkpoint(Some("e3"), 3),
        checkpoint(Some("e4"), 4),
        checkpoint(Some("e2"), 2),
    ];
    let next = crate::serve::next_checkpoints(&list, &parents);
    let snap = |n: u8| Some(cairn_store::SnapshotId(cairn_store::ObjectId([n; 32])));
    // e1's turn ends at the first later checkpoint below it (e3's); e3's and e4's turns are
    // still going, and so is e2's (e3's checkpoint came before it).
    assert_eq!(next, vec![snap(3), None, None, None]);
}

#[test]
fn a_rewind_whose_files_changed_after_its_plan_was_shown_is_refused_with_conflict() {
    let s = serve();
    let request = rewind_request(&s, None);
    let plan = plan_over_http(&s, &request);
    let exact: OpRequest = serde_json::from_value(plan["request"].clone()).expect("a request");
    let digest = plan["digest"].as_str().expect("a digest").to_string();
    assert_eq!(plan["plan"]["files"]["restore"][0], "a.txt", "{plan}");
    // The same paths to restore, but a.txt is not what the page was shown any more.
    std::fs::write(s.root.join("a.txt"), "three\n").expect("a change after the plan");
    let e = apply_op(&s.studio, &exact, &digest).expect_err("refused");
    assert_eq!(e.kind, Some(ErrorKind::Conflict), "{}", e.message);
    assert_eq!(
        std::fs::read_to_string(s.root.join("a.txt")).expect("read"),
        "three\n"
    );
    // Planned again, it goes through, and names the safety snapshot that keeps "three".
    let plan = plan_over_http(&s, &exact);
    let done = apply_op(
        &s.studio,
        &exact,
        plan["digest"].as_str().expect("a digest"),
    )
    .expect("the rewind");
    assert_eq!(
        std::fs::read_to_string(s.root.join("a.txt")).expect("read"),
        "one\n"
    );
    let undo = serde_json::to_value(&done).expect("encodes")["undo"].clone();
    assert_eq!(undo["op"], "restore", "{undo}");
}

#[test]
fn a_diff_asked_with_attribution_names_the_tool_call_that_changed_each_path() {
    let s = serve();
    // The hook's checkpoint before a tool call, naming it; then the tool changes b.txt.
    let mut who = serde_json::Map::new();
    who.insert("tool_use_id".into(), "toolu_7".into());
    who.insert("tool_name".into(), "Write".into());
    s.studio
        .opened
        .threads
        .checkpoint_as(
            &ThreadId::new("t"),
            cairn_rewind::CheckpointKind::Tool,
            "toolu_7",
            &cairn_rewind::CheckpointOptions {
                workspace: Some(s.studio.opened.ws.clone() as Arc<dyn cairn_rewind::Files>),
                metadata: who,
                ..cairn_rewind::CheckpointOptions::default()
            },
        )
        .expect("a tool checkpoint");
    std::fs::write(s.root.join("b.txt"), "by the tool\n").expect("the tool's change");
    let path = format!("/v1/diff?from={}&to=live&attribute=true", s.first.to_hex());
    let (code, body) = send(s.port, "GET", &path, &[host(s.port), bearer()], "");
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let by_path: std::collections::BTreeMap<String, serde_json::Value> = v["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap_or("").to_string(),
                c["attribution"].clone(),
            )
        })
        .collect();
    assert_eq!(by_path["b.txt"][0]["tool_use_id"], "toolu_7", "{body}");
    assert_eq!(by_path["b.txt"][0]["tool_name"], "Write", "{body}");
    assert_eq!(by_path["b.txt"][0]["checkpoint_kind"], "tool", "{body}");
    // a.txt changed before the tool's checkpoint: in the interval the user message opened.
    assert_eq!(by_path["a.txt"][0]["checkpoint_kind"], "user", "{body}");
    assert_eq!(by_path["a.txt"].as_array().map(Vec::len), Some(1), "{body}");
    // Without asking, no attribution is computed.
    let plain = format!("/v1/diff?from={}&to=live", s.first.to_hex());
    let (_, body) = send(s.port, "GET", &plain, &[host(s.port), bearer()], "");
    assert!(!body.contains("attribution"), "{body}");
}

/// The page's exchange at `/api/session`, from the page's own origin: the status and session.
fn session_for(s: &Served, body: serde_json::Value) -> (u16, Option<String>) {
    let own = ("Origin", format!("http://127.0.0.1:{}", s.port));
    let (code, body) = send(
        s.port,
        "POST",
        "/api/session",
        &[host(s.port), own],
        &body.to_string(),
    );
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    (code, v["session"].as_str().map(str::to_string))
}

#[test]
fn a_page_code_is_exchanged_once_for_a_session_that_opens_the_api() {
    // Issue 53: the browser is opened on a code good once, never on the token.
    let s = serve();
    let code = "0123456789abcdef0123456789abcdef";
    let until = std::time::Instant::now() + login::CODE_LIFETIME;
    s.studio.set_code(code.into(), until, None);
    let (status, session) = session_for(&s, serde_json::json!({ "code": code }));
    let session = session.unwrap_or_else(|| panic!("a session for the code ({status})"));
    assert_ne!(session, TOKEN);
    let with = ("Authorization", format!("Bearer {session}"));
    assert_eq!(
        send(s.port, "GET", "/v1/threads", &[host(s.port), with], "").0,
        200
    );
    // The event stream's query carries it too.
    let q = format!("/v1/threads?token={session}");
    assert_eq!(send(s.port, "GET", &q, &[host(s.port)], "").0, 200);
    // The code itself opens nothing, and is dead once used.
    let with_code = ("Authorization", format!("Bearer {code}"));
    assert_eq!(
        send(s.port, "GET", "/v1/threads", &[host(s.port), with_code], "").0,
        401
    );
    assert_eq!(
        session_for(&s, serde_json::json!({ "code": code })),
        (401, None)
    );
    // The printed token gets a session too; a wrong one, or both at once, none.
    assert!(session_for(&s, serde_json::json!({ "token": TOKEN }))
        .1
        .is_some());
    let wrong = "f".repeat(32);
    assert_eq!(
        session_for(&s, serde_json::json!({ "token": wrong })),
        (401, None)
    );
    assert_eq!(
        session_for(&s, serde_json::json!({ "token": TOKEN, "code": code })).0,
        401
    );
}

#[test]
fn a_page_code_older_than_its_lifetime_or_another_is_refused() {
    // Issue 53: a code read later (from a file or a history) is dead.
    let s = serve();
    let code = "0123456789abcdef0123456789abcdef".to_string();
    let now = std::time::Instant::now();
    let later = now + login::CODE_LIFETIME;
    let ask = |code: &str| -> login::SessionRequest {
        serde_json::from_value(serde_json::json!({ "code": code })).expect("a request")
    };
    s.studio.set_code(code.clone(), later, None);
    assert!(s.studio.exchange(&ask(&code), later).is_err());
    // A wrong code does not use up the right one, nor does a check before its end.
    assert!(s.studio.exchange(&ask(&"0".repeat(32)), now).is_err());
    s.studio.drop_code(Some(now));
    assert!(s.studio.exchange(&ask(&code), now).is_ok());
    // Its end, or the server's, forgets it.
    s.studio.set_code(code.clone(), later, None);
    s.studio.drop_code(Some(later));
    assert!(s.studio.exchange(&ask(&code), now).is_err());
    s.studio.set_code(code.clone(), later, None);
    s.studio.drop_code(None);
    assert!(s.studio.exchange(&ask(&code), now).is_err());
}

#[test]
fn the_page_may_be_reached_from_another_site_but_not_its_script_nor_the_api() {
    // Issue 53: the page file's origin is a file, so the browser marks the page's load
    // cross-site; that page holds no secret (nor may it be framed). The rest stays refused.
    let s = serve();
    let navigation = |site: &str| {
        [
            host(s.port),
            ("Sec-Fetch-Site", site.to_string()),
            ("Sec-Fetch-Mode", "navigate".to_string()),
            ("Sec-Fetch-Dest", "document".to_string()),
        ]
    };
    assert_eq!(
        send(s.port, "GET", "/?code=00", &navigation("cross-site"), "").0,
        200
    );
    let site = ("Sec-Fetch-Site", "cross-site".to_string());
    for path in ["/app.js", "/v1/threads"] {
        let (code, body) = send(
            s.port,
            "GET",
            path,
            &[host(s.port), bearer(), site.clone()],
            "",
        );
        assert_eq!((code, kind_of(&body).as_str()), (403, "DENIED"), "{path}");
    }
    // A navigation that is an API call is still one.
    let mut nav = navigation("cross-site").to_vec();
    nav.push(bearer());
    assert_eq!(send(s.port, "GET", "/v1/threads", &nav, "").0, 403);
    // Nor is the page served to another host for all that.
    let mut other = navigation("cross-site").to_vec();
    other[0] = ("Host", format!("evil.example:{}", s.port));
    assert_eq!(send(s.port, "GET", "/", &other, "").0, 403);
}

/// Issue 54: the Studio's rewind of a Claude Code thread keeps where Claude's conversation
/// continues, as `cairn rewind` does, and shows it in the plan and the result.
#[test]
fn a_studio_rewind_of_a_claude_thread_keeps_where_its_conversation_continues() {
    let s = serve();
    let threads = &s.studio.opened.threads;
    let t = threads
        .create_thread(
            Some(ThreadId::new("claude-s1")),
            serde_json::json!({ "agent": "claude-code" }),
        )
        .expect("a thread");
    let transcript = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agents/tests/data/claude-2.1.197-rewound.jsonl");
    let prompt = |text: &str, id: &str| {
        let place = serde_json::json!({ "conversation": {
            "agent": "claude-code", "session_id": "s1", "transcript": transcript, "prompt_id": id,
        }});
        threads
            .append(
                &t.id,
                NewEntry::user(text.to_string()).with_metadata(place),
                &AppendOptions::default(),
            )
            .expect("a prompt")
            .entry
            .id
    };
    let first = prompt("FIRST", "38a2cfb1-c739-481c-87be-a2aaf2f1aebd");
    prompt("SECOND", "3297a2da-d41f-4ecb-b327-58618dc03a6b");
    let request = OpRequest {
        op: Op::Rewind,
        thread: Some("claude-s1".into()),
        entry: Some(first.to_string()),
        files: false,
        snapshot: None,
        into: None,
        new_thread_id: None,
        root: None,
        on_drift: None,
        key: None,
    };
    let plan = plan_over_http(&s, &request);
    let shown = plan["plan"]["agent"].to_string();
    assert!(
        shown.contains("continues from message 24d6161b-b108-4fd7-88ed-cef7e50fa2e4"),
        "{plan}"
    );
    let exact: OpRequest = serde_json::from_value(plan["request"].clone()).expect("a request");
    let done = apply_op(
        &s.studio,
        &exact,
        plan["digest"].as_str().expect("a digest"),
    )
    .expect("the rewind");
    let done = serde_json::to_value(&done).expect("encodes");
    assert!(
        done["agent"]
            .to_string()
            .contains("`cairn resume claude-s1`"),
        "{done}"
    );
    let record = &threads.rewinds(&t.id).expect("records")[0];
    let cont = record.continuation.clone().expect("kept in the journal");
    let new = cont["session_id"].as_str().expect("a new session");
    assert_eq!(
        threads
            .resolve(&ThreadId::new(format!("claude-{new}")))
            .expect("the name"),
        t.id
    );
}

// Issue 59: the page's "retry" confirms the same request again; with its key that answers the
// rewind already made, even though the plan (and its digest) changed with it.
#[test]
fn a_rewind_confirmed_again_with_its_key_answers_the_rewind_it_made() {
    let s = serve();
    let thread = ThreadId::new("t");
    let request = rewind_request(&s, Some("studio-k1"));
    let plan = plan_over_http(&s, &request);
    let exact: OpRequest = serde_json::from_value(plan["request"].clone()).expect("a request");
    assert_eq!(exact.key.as_deref(), Some("studio-k1"));
    let digest = plan["digest"].as_str().expect("a digest").to_string();
    apply_op(&s.studio, &exact, &digest).expect("the rewind");
    std::fs::write(s.root.join("a.txt"), "edited after\n").expect("an edit");
    apply_op(&s.studio, &exact, &digest).expect("the same rewind, not a conflict");
    assert_eq!(
        std::fs::read_to_string(s.root.join("a.txt")).expect("read"),
        "edited after\n",
        "nothing ran again"
    );
    let rewinds = s.studio.opened.threads.rewinds(&thread).expect("rewinds");
    assert_eq!(rewinds.len(), 1);
    assert_eq!(rewinds[0].key.as_deref(), Some("studio-k1"));
}
