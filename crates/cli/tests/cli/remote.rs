//! `--remote URL`: the store as a cache of a remote object store (here a directory, through
//! `file://`; the Garage tests of `cairn-remote` cover S3).

use crate::Fixture;

#[test]
fn a_snapshot_taken_with_a_remote_is_listed_and_restored_by_another_workspace_that_shares_only_the_remote(
) {
    let a = Fixture::new();
    let b = Fixture::new();
    let remote = a.root.parent().expect("parent").join("remote");
    std::fs::create_dir_all(&remote).expect("remote dir");
    let url = format!("file://{}", remote.display());
    a.write("src/lib.rs", "pub fn shared() {}\n");
    let id = a.json(&["--remote", &url, "snapshot", "--label", "shared"])["id"]
        .as_str()
        .expect("an id")
        .to_string();
    assert!(
        remote.join("snapshots").join(&id).is_file(),
        "the manifest is on the remote"
    );
    // Another workspace (its own cache) sees it and restores it.
    let listed = b.json(&["--remote", &url, "list"]).to_string();
    assert!(listed.contains(&id), "{listed}");
    b.json(&["--remote", &url, "restore", "shared", "--yes"]);
    assert_eq!(
        b.read("src/lib.rs").as_deref(),
        Some("pub fn shared() {}\n")
    );
    assert_eq!(b.read("src/main.rs").as_deref(), Some("fn main() {}\n"));
    // The variable names the remote too; gc collects the remote, marking before deleting.
    let out = b
        .cairn(&["--json", "gc"])
        .env("CAIRN_REMOTE", &url)
        .output()
        .expect("run cairn");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["packs_deleted"], 0, "{report}");
    assert!(
        report["snapshots"].as_u64().expect("snapshots") >= 2,
        "{report}"
    );
}

#[test]
fn a_store_url_that_is_not_one_is_refused_as_an_invalid_argument() {
    let a = Fixture::new();
    a.cairn(&["--remote", "ftp://x/y", "list"])
        .assert()
        .code(11)
        .stderr(predicates::str::contains("s3://bucket/prefix"));
}

#[test]
fn a_store_with_local_snapshots_becomes_a_cache_of_a_remote_and_its_next_snapshot_is_whole_there() {
    let a = Fixture::new();
    let b = Fixture::new();
    let remote = a.root.parent().expect("parent").join("remote");
    std::fs::create_dir_all(&remote).expect("remote dir");
    let url = format!("file://{}", remote.display());
    a.snapshot("local-only");
    // Past the racy window, so the stat cache vouches for every file and tree.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    a.snapshot("local-again");
    let id = a.json(&["--remote", &url, "snapshot", "--label", "first-remote"])["id"]
        .as_str()
        .expect("an id")
        .to_string();
    b.json(&["--remote", &url, "restore", &id, "--yes"]);
    assert_eq!(b.read("src/main.rs").as_deref(), Some("fn main() {}\n"));
    a.cairn(&["--remote", &url, "verify"]).assert().success();
}
