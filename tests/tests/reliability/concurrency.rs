//! Concurrency: four processes snapshot the same workspace in a loop (opening it afresh each
//! time, as the command does), a fifth prunes and collects garbage with no grace period, and a
//! sixth restores one of three versions after another, for a bounded time (10 s, 60 s with
//! `CAIRN_LONG=1`). Afterwards:
//!
//! - every process ended cleanly: no snapshot, collection or restore failed (a restore may be
//!   answered BUSY, which says "try again", while another process opening the workspace holds
//!   the restore lock for a moment; the restorer retries, and the count is reported);
//! - the store verifies, and every snapshot it holds restores into a fresh directory exactly
//!   as its tree says;
//! - every snapshot taken while the files stood still between two restores has exactly the
//!   tree of the version restored (so the stat cache never vouched for a stale file);
//! - the workspace holds exactly the version restored last.

use crate::util::{
    child_command, clear, figures, long, open_ws, picture, populate, scratch, tree_picture,
    ws_options, Spawned,
};
use cairn_restore::Workspace;
use cairn_store::{SnapshotId, TreeId};
use std::collections::HashMap;
use std::time::Duration;

struct Restored {
    version: SnapshotId,
    before: i64,
    after: i64,
}

fn field<T: std::str::FromStr>(parts: &[&str], i: usize, line: &str) -> T {
    parts
        .get(i)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("a malformed child line: {line}"))
}

#[test]
fn four_snapshotters_a_collector_and_a_restorer_at_once_lose_nothing() {
    let seconds = if long() { 60 } else { 10 };
    let base = scratch();
    let dir = base.path();
    let root = dir.join("root");
    std::fs::create_dir_all(&root).expect("root");
    let ws = open_ws(dir);
    let mut versions = Vec::new();
    let mut roots: HashMap<SnapshotId, TreeId> = HashMap::new();
    for v in [0, 1, 2] {
        clear(&root);
        populate(&root, v);
        let mut options = ws.snapshot_options();
        options.protect = true;
        let s = ws
            .snapshot(&options, Default::default())
            .expect("a version");
        versions.push(s.snapshot.id);
        roots.insert(s.snapshot.id, s.snapshot.root);
    }
    drop(ws);

    let until = cairn_store::fsutil::now_ms() + seconds * 1000;
    let list = versions
        .iter()
        .map(|v| v.to_hex())
        .collect::<Vec<_>>()
        .join(",");
    let mut children = Vec::new();
    for job in [
        "snapshot-loop",
        "snapshot-loop",
        "snapshot-loop",
        "snapshot-loop",
        "gc-loop",
        "restore-loop",
    ] {
        let mut cmd = child_command(job, dir);
        cmd.env("CAIRN_REL_UNTIL", until.to_string())
            .env("CAIRN_REL_SNAPS", &list);
        children.push((job, Spawned::start(cmd)));
    }
    let mut snaps = Vec::new();
    let mut restores = Vec::new();
    let (mut gcs, mut deferred, mut collected, mut busy) = (0, 0, 0, 0);
    for (job, mut child) in children {
        let done = child.wait_for("DONE", Duration::from_secs(seconds as u64 + 300));
        let status = child.wait();
        let (lines, err) = child.finish();
        assert!(
            done.is_some() && status.success(),
            "the {job} process failed ({status}):\n{err}"
        );
        for line in &lines {
            let parts: Vec<&str> = line.split(' ').collect();
            match parts[0] {
                "SNAP" => snaps.push((
                    field::<String>(&parts, 2, line),
                    field::<i64>(&parts, 3, line),
                    field::<i64>(&parts, 4, line),
                )),
                "RESTORED" => {
                    busy += field::<usize>(&parts, 4, line);
                    restores.push(Restored {
                        version: SnapshotId::from_hex(parts[1]).expect("an id"),
                        before: field(&parts, 2, line),
                        after: field(&parts, 3, line),
                    })
                }
                "GC" => {
                    gcs += 1;
                    deferred += usize::from(parts[1] == "true");
                    collected += usize::from(field::<u64>(&parts, 3, line) > 0);
                }
                _ => {}
            }
        }
    }
    assert!(!snaps.is_empty() && !restores.is_empty() && gcs > 0);

    // Snapshots taken while the files stood still have exactly the version's tree. Before the
    // first restore the files are the last version made.
    let mut windows = vec![(i64::MIN, restores[0].before, versions[2])];
    for w in restores.windows(2) {
        windows.push((w[0].after, w[1].before, w[0].version));
    }
    let last = restores.last().expect("a restore").version;
    windows.push((restores[restores.len() - 1].after, i64::MAX, last));
    let mut checked = 0;
    for (root_hex, start, end) in &snaps {
        if let Some((_, _, v)) = windows.iter().find(|(a, b, _)| a < start && end < b) {
            assert_eq!(
                root_hex,
                &roots[v].to_hex(),
                "a snapshot taken while version {v} stood still"
            );
            checked += 1;
        }
    }

    // The store verifies, and every snapshot restores exactly into a fresh directory.
    let ws = open_ws(dir);
    let store = ws.store().clone();
    let report = store.verify().expect("verify");
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(
        picture(&root),
        tree_picture(&store, roots[&last]),
        "the workspace holds the version restored last"
    );
    let ids = crate::util::snapshot_ids(&store);
    for (i, id) in ids.iter().enumerate() {
        let fresh = dir.join(format!("fresh-{i}"));
        std::fs::create_dir_all(&fresh).expect("fresh");
        let mut options = ws_options(&dir.join("store"));
        options.id = Some(format!("fresh-{i}"));
        let into = Workspace::open(&fresh, options).expect("open a fresh workspace");
        into.restore(
            id,
            &Default::default(),
            &Default::default(),
            Default::default(),
        )
        .unwrap_or_else(|e| panic!("snapshot {id} restores: {e}"));
        let m = store.read_manifest(id).expect("manifest");
        assert_eq!(
            picture(&fresh),
            tree_picture(&store, m.root),
            "snapshot {id}"
        );
    }
    figures(
        "concurrency",
        &format!(
            "{seconds} s: 4 processes took {} snapshots ({checked} of them while the files \
             stood still, each exactly the version restored), 1 process ran {gcs} prunes and \
             collections with no grace ({deferred} deferred by a live operation, {collected} \
             removed objects), 1 process made {} restores (retrying {busy} BUSY answers, given \
             while another process's open held the restore lock for a moment); afterwards the \
             store verified and all {} snapshots it kept restored exactly into fresh directories",
            snaps.len(),
            restores.len(),
            ids.len()
        ),
    );
}
