//! One machine of a fleet sharing a remote store, as a process of its own. The remote tests
//! run two of these snapshotting into one bucket while a third collects garbage.
//!
//! ```text
//! fleet_agent snapshot URL CACHE ROOT ROUNDS   edit files and snapshot ROUNDS times, deleting
//!                                              each snapshot but the newest two (garbage)
//! fleet_agent collect URL CACHE SECONDS GRACE_MS   collect the remote until SECONDS have passed
//! ```
//!
//! The endpoint and credentials come from the `AWS_*` variables. Each snapshot id is printed
//! as `snapshot <id>`, each collection as `collect <json report>`.

use cairn_restore::{Workspace, WorkspaceOptions};
use cairn_store::remote::RemoteGcOptions;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Err(e) = run(&args) {
        eprintln!("fleet_agent: {e}");
        std::process::exit(1);
    }
}

fn run(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let arg = |i: usize| -> Result<&str, String> {
        args.get(i)
            .map(String::as_str)
            .ok_or_else(|| format!("missing argument {i}: see the usage in the source"))
    };
    let options = cairn_remote::RemoteOptions::default();
    match arg(1)? {
        "snapshot" => {
            let store_options = cairn_remote::store_options(arg(2)?, &options)?;
            let root = PathBuf::from(arg(4)?);
            let rounds: usize = arg(5)?.parse()?;
            std::fs::create_dir_all(&root)?;
            let ws = Workspace::open(
                &root,
                WorkspaceOptions {
                    store: Some(PathBuf::from(arg(3)?)),
                    id: Some("agent".into()),
                    store_options,
                    ..WorkspaceOptions::default()
                },
            )?;
            let mut taken = Vec::new();
            for round in 0..rounds {
                // Files shared by every agent (deduplicated across machines) and its own.
                for i in 0..20 {
                    let body = format!("shared file {i}\n").repeat(50 + i);
                    std::fs::write(root.join(format!("shared{i}.txt")), body)?;
                }
                for i in 0..10 {
                    let body = format!("{} round {round} file {i}\n", root.display()).repeat(40);
                    std::fs::write(root.join(format!("own{i}.txt")), body)?;
                }
                let snap = ws.snapshot(&ws.snapshot_options(), Default::default())?;
                println!("snapshot {}", snap.snapshot.id.to_hex());
                taken.push(snap.snapshot.id);
                if taken.len() > 2 {
                    let old = taken.remove(0);
                    ws.store().delete_snapshot(&old, &Default::default())?;
                    println!("deleted {}", old.to_hex());
                }
            }
        }
        "collect" => {
            let store = cairn_remote::open(arg(2)?, arg(3)?, &options)?;
            let until = Instant::now() + Duration::from_secs(arg(4)?.parse()?);
            let gc = RemoteGcOptions {
                grace: Duration::from_millis(arg(5)?.parse()?),
                clock_skew: Duration::ZERO,
                dry_run: false,
            };
            while Instant::now() < until {
                let report = store.collect_remote(&gc)?;
                println!("collect {}", serde_json::to_string(&report)?);
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        other => return Err(format!("unknown command '{other}': snapshot or collect").into()),
    }
    Ok(())
}
