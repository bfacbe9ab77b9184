//! `cairn mcp` spoken to as an MCP client speaks over stdio (newline-delimited JSON-RPC): what
//! the process does at its edges. The tools themselves are tested with the official MCP client
//! SDK by `scripts/test-mcp`.

use crate::Fixture;
use serde_json::{json, Value};

/// The lines a client writes to open a session, then `calls` as `tools/call` requests with ids
/// from 10 up.
fn session(calls: &[(&str, Value)]) -> String {
    let mut lines = vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "cli-test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ];
    for (i, (name, args)) in calls.iter().enumerate() {
        lines.push(
            json!({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
            "params": {"name": name, "arguments": args}}),
        );
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// Runs `cairn mcp` on `input` (stdin closes after it) and returns every line of its stdout,
/// each parsed: anything on stdout that is not a JSON-RPC message fails.
fn serve(f: &Fixture, input: String) -> Vec<Value> {
    let out = f
        .cairn(&["mcp"])
        .write_stdin(input)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("run cairn mcp");
    assert!(
        out.status.success(),
        "cairn mcp failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("only JSON-RPC lines on stdout");
            assert_eq!(v["jsonrpc"], "2.0", "{l}");
            v
        })
        .collect()
}

fn answer(lines: &[Value], id: u64) -> &Value {
    lines
        .iter()
        .find(|l| l["id"] == id)
        .unwrap_or_else(|| panic!("no answer to request {id} in {lines:?}"))
}

#[test]
fn mcp_refuses_a_workspace_that_is_not_a_directory() {
    let f = Fixture::new();
    let missing = f.path("nowhere");
    let out = assert_cmd::Command::cargo_bin("cairn")
        .expect("the cairn binary")
        .arg("-C")
        .arg(&missing)
        .arg("mcp")
        .env("CAIRN_HOME", &f.home)
        .write_stdin("")
        .output()
        .expect("run cairn mcp");
    assert_eq!(out.status.code(), Some(12), "NOT_FOUND");
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a directory"));
}

#[test]
fn mcp_restore_writes_only_protocol_on_stdout_and_finishes_a_call_made_before_stdin_closes() {
    let f = Fixture::new();
    f.snapshot("base");
    f.write("README.md", "changed\n");
    f.write("new.txt", "new\n");
    // The command line prints a restore's plan on stdout; the server must not.
    let lines = serve(
        &f,
        session(&[("restore", json!({"snapshot": "base", "dry_run": false}))]),
    );
    assert_eq!(answer(&lines, 1)["result"]["serverInfo"]["name"], "cairn");
    let r = &answer(&lines, 10)["result"];
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["deleted"], json!(["new.txt"]));
    assert!(r["structuredContent"]["safety_snapshot_id"].is_string());
    assert_eq!(f.read("README.md").as_deref(), Some("# demo\n"));
    assert_eq!(f.read("new.txt"), None);
}

#[test]
fn mcp_answers_a_failed_call_as_a_tool_error_and_goes_on_to_the_next() {
    let f = Fixture::new();
    f.snapshot("base");
    let lines = serve(
        &f,
        session(&[
            ("diff", json!({"from": "no-such-label"})),
            ("list_checkpoints", json!({})),
        ]),
    );
    let bad = &answer(&lines, 10)["result"];
    assert_eq!(bad["isError"], true);
    assert_eq!(bad["structuredContent"]["error"]["kind"], "NOT_FOUND");
    let good = &answer(&lines, 11)["result"];
    assert_eq!(good["isError"], false);
    assert_eq!(good["structuredContent"], f.json(&["list"]));
}

#[test]
fn mcp_restore_while_the_workspace_is_held_is_a_busy_tool_error_that_changes_nothing() {
    let f = Fixture::new();
    f.snapshot("base");
    f.write("README.md", "changed\n");
    let ws = cairn_restore::Workspace::open(
        &f.root,
        cairn_restore::WorkspaceOptions {
            store: Some(f.store()),
            ..Default::default()
        },
    )
    .expect("open");
    let _hold = ws.hold("a test command", None).expect("hold");
    let lines = serve(
        &f,
        session(&[
            ("restore", json!({"snapshot": "base", "dry_run": true})),
            ("restore", json!({"snapshot": "base", "dry_run": false})),
        ]),
    );
    let dry = &answer(&lines, 10)["result"];
    assert_eq!(dry["isError"], false);
    assert_eq!(dry["structuredContent"]["busy"], true);
    let busy = &answer(&lines, 11)["result"];
    assert_eq!(busy["isError"], true, "{busy}");
    assert_eq!(busy["structuredContent"]["error"]["kind"], "BUSY");
    assert_eq!(busy["structuredContent"]["error"]["exit_code"], 14);
    assert_eq!(f.read("README.md").as_deref(), Some("changed\n"));
}

#[test]
fn mcp_rewind_runs_no_on_rewind_command_of_an_untrusted_workspace_file_and_says_so() {
    // Issue 53: an agent that can write .claude/cairn.json and call `rewind` ran shell
    // commands outside its Bash permission.
    let f = Fixture::new();
    let marker = f.root.with_file_name("ran");
    crate::agents::repository_on_rewind(&f, &marker);
    let first = crate::agents::message(&f, "one");
    // The agent's call: a new message, then `rewind` to the first one.
    let rewind = |text: &str| {
        crate::agents::message(&f, text);
        let lines = serve(
            &f,
            session(&[(
                "rewind",
                json!({"thread": "chat", "entry": first, "dry_run": false}),
            )]),
        );
        let r = answer(&lines, 10)["result"].clone();
        assert_eq!(r["isError"], false, "{r}");
        r
    };
    let r = rewind("two");
    assert!(
        !crate::exists(&marker),
        "an untrusted on_rewind command ran"
    );
    let config = std::fs::canonicalize(f.path(".claude/cairn.json")).expect("canonical");
    let not_run = &r["structuredContent"]["on_rewind_not_run"][0];
    assert_eq!(not_run["path"], config.display().to_string(), "{r}");
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains(&format!("cairn trust {}", config.display())),
        "{text}"
    );

    // Once the user trusts it (out of band), the agent's rewind runs it.
    f.json(&["trust"]);
    let r = rewind("three");
    assert!(crate::exists(&marker), "the trusted command ran: {r}");
}

#[test]
fn mcp_rewind_repeated_with_its_key_answers_the_same_rewind_and_runs_once() {
    // Issue 59: an agent retrying its `rewind` call with the same key runs one rewind.
    let f = Fixture::new();
    let first = crate::agents::message(&f, "one");
    crate::agents::message(&f, "two");
    let call = json!({"thread": "chat", "entry": first, "dry_run": false, "key": "k-mcp"});
    // Two calls of one session (which the server may run at once), then one more.
    let lines = serve(
        &f,
        session(&[("rewind", call.clone()), ("rewind", call.clone())]),
    );
    let later = serve(&f, session(&[("rewind", call)]));
    let last = &answer(&later, 10)["result"];
    assert_eq!(last["isError"], false, "{last}");
    let id = last["structuredContent"]["rewind_id"]
        .as_str()
        .expect("a rewind id");
    for n in [10, 11] {
        let r = &answer(&lines, n)["result"];
        if r["isError"] == true {
            // The other call's rewind was under way: busy, naming it.
            let e = &r["structuredContent"]["error"];
            assert_eq!(e["kind"], "THREAD_BUSY", "{r}");
            assert!(e["message"].as_str().is_some_and(|m| m.contains(id)), "{r}");
        } else {
            assert_eq!(r["structuredContent"]["rewind_id"], id, "{r}");
        }
    }
    let events = f.json_bytes(&["events"]);
    let started = String::from_utf8_lossy(&events)
        .lines()
        .filter(|l| l.contains("\"rewind_started\""))
        .count();
    assert_eq!(started, 1, "one rewind ran");
}
