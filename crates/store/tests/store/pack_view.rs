//! A long-lived handle lists the packs directory only when a watch on it says an index came or
//! went (`packwatch`); whatever other handles write and collect, its view must stay what a
//! handle opened afresh sees.

use crate::util::{no_grace, noise, open, snapshot, temp, write_unreachable};
use cairn_store::{ObjectId, SnapshotId, Store};

/// The seed from `CAIRN_TEST_SEED`, else a fixed one; printed so a failure can be replayed.
fn seed() -> u64 {
    let seed = std::env::var("CAIRN_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0023);
    eprintln!("seed {seed} (CAIRN_TEST_SEED={seed} replays it)");
    seed
}

#[test]
fn a_long_lived_handle_sees_every_pack_others_write_and_collect_as_a_fresh_handle_does() {
    let seed = seed();
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let dir = temp();
    let long = open(dir.path());
    let other = open(dir.path());
    let mut ids: Vec<ObjectId> = Vec::new();
    let mut snaps: Vec<SnapshotId> = Vec::new();
    let mut content = 0u64;
    for step in 0..150 {
        // Who acts: the long-lived handle itself, or another one.
        let by: &Store = if next(3) == 0 { &long } else { &other };
        let op = next(7);
        content += 1;
        let bytes = noise(seed ^ content, 64 + next(512) as usize);
        match op {
            0 | 1 => ids.extend(write_unreachable(by, &[&bytes, b"shared bytes"])),
            2 | 3 => {
                let s = snapshot(by, &[("f", &bytes)], None, content as i64);
                ids.extend(s.blobs);
                ids.push(s.root.0);
                snaps.push(s.id);
            }
            4 if !snaps.is_empty() => {
                let gone = snaps.remove(next(snaps.len() as u64) as usize);
                by.delete_snapshot(&gone, &no_grace()).expect("delete");
            }
            _ => {
                by.gc(&no_grace()).expect("gc");
            }
        }
        long.refresh().expect("refresh");
        let fresh = open(dir.path());
        fresh.refresh().expect("refresh");
        for id in &ids {
            assert_eq!(
                long.contains(id),
                fresh.contains(id),
                "seed {seed}, step {step} (op {op}): object {} held by one handle only",
                id.to_hex()
            );
            if long.contains(id) {
                long.read_object(id).expect("an object held reads back");
            }
        }
    }
    assert!(
        ids.iter().any(|id| !long.contains(id)),
        "seed {seed}: some collection removed something (else this test checks little)"
    );
}

#[test]
fn a_handle_that_never_refreshed_finds_the_objects_already_in_packs() {
    let dir = temp();
    let writer = open(dir.path());
    let ids = write_unreachable(&writer, &[b"first object", b"second object"]);
    // Another process opens the store and asks first, before anything has loaded its packs
    // (a restore's plan checks every blob it will write this way).
    let fresh = open(dir.path());
    for id in &ids {
        assert!(fresh.contains(id), "{} not found", id.to_hex());
    }
}
