//! The power-cut explorer (issue 57). Each workload runs Cairn's commands on a recording FUSE
//! file system (`fs.rs`); from the record, `model.rs` builds the states a power cut could leave
//! (what every sync made durable, plus subsets and prefixes of what was pending), and each
//! state is materialised at the same path and opened as a user would after a reboot:
//! `recover`, `list`, `verify`, a restore of every listed snapshot into a scratch workspace,
//! `thread log`; then the properties are checked (`check.rs`).
//!
//! A test binary without libtest's harness (it also serves as the `cairn` command its children
//! run, so the command is always this build's): `cargo test -p cairn-tests --test powercut
//! [FILTER]`. Seeded (`CAIRN_SEED` replays a run); `CAIRN_LONG=1` explores many more states.
//! It needs root and `/dev/fuse`, and says why it skips where they are missing.

mod check;
mod fs;
mod model;
#[allow(dead_code)]
#[path = "../reliability/util.rs"]
mod util;
mod workloads;

use std::time::Instant;

/// One test: its name (a sentence) and body.
type Test = (&'static str, fn());

fn main() {
    if std::env::var_os(check::AS_CAIRN).is_some() {
        std::process::exit(cairn_cli::run());
    }
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    let tests: Vec<Test> = workloads::TESTS
        .iter()
        .copied()
        .filter(|(name, _)| name.contains(&filter))
        .collect();
    if std::env::args().any(|a| a == "--list") {
        for (name, _) in &tests {
            println!("{name}: test");
        }
        return;
    }
    if let Some(why) = check::cannot_run() {
        println!("powercut: skipped: {why}");
        println!(
            "test result: ok. 0 passed; 0 failed; {} ignored",
            tests.len()
        );
        return;
    }
    let start = Instant::now();
    let (mut passed, mut failed) = (0, Vec::new());
    for (name, body) in tests {
        let t0 = Instant::now();
        println!("test {name} ...");
        match std::panic::catch_unwind(body) {
            Ok(()) => {
                passed += 1;
                println!("test {name} ... ok ({:.1} s)", t0.elapsed().as_secs_f64());
            }
            Err(_) => {
                println!("test {name} ... FAILED");
                failed.push(name);
            }
        }
    }
    println!("powercut: {:.1} s in all", start.elapsed().as_secs_f64());
    if failed.is_empty() {
        println!("test result: ok. {passed} passed; 0 failed; 0 ignored");
    } else {
        println!("failures: {failed:?}");
        println!(
            "test result: FAILED. {passed} passed; {} failed; 0 ignored",
            failed.len()
        );
        std::process::exit(101);
    }
}
