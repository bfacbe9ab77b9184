//! Differential: random sequences of snapshots under random capture settings, with files
//! edited in place (their directory's own `lstat` unchanged), each compared with a snapshot of
//! the same moment taken with no stat cache at all (issue 28). Seeded from `CAIRN_SEED` (else
//! the clock); the seed is printed.

use crate::fixtures::{Rng, Ws};
use cairn_snapshot::statcache::RACY_WINDOW_NS;
use cairn_snapshot::Options;
use std::time::Duration;

const FILES: [&str; 6] = ["a", "b.log", "d/c", "d/e.log", "d/f/g", "h"];

fn options(rng: &mut Rng) -> Options {
    let max_file_bytes = [0, 100, 1000, 5000, 10 << 20][rng.below(5) as usize];
    let excludes = match rng.below(3) {
        0 => vec![],
        1 => vec!["*.log".to_string()],
        _ => vec!["d/f".to_string()],
    };
    Options {
        capture: cairn_snapshot::CaptureSettings {
            max_file_bytes,
            excludes,
            refuse_hard_links: rng.below(3) == 0,
            ..Default::default()
        },
        ..Options::default()
    }
}

#[test]
fn snapshots_under_random_settings_and_in_place_edits_equal_snapshots_without_a_cache() {
    let mut rng = Rng::from_env("stat cache differential");
    let ws = Ws::new();
    for (i, f) in FILES.iter().enumerate() {
        ws.write(f, &vec![b'0' + i as u8; 50 + 1000 * i]);
    }
    // One file has a second link outside the root, so refusing hard links leaves it out.
    std::fs::hard_link(ws.root().join("h"), ws.dir.path().join("h-outside")).expect("link");
    ws.snap(&Options::default());
    // Past the racy window the directories' records are trusted: from here on only files are
    // edited, in place, so every directory's own lstat stays as the cache recorded it.
    std::thread::sleep(Duration::from_nanos(RACY_WINDOW_NS as u64) + Duration::from_millis(100));
    for step in 0..60 {
        if rng.below(2) == 0 {
            let f = FILES[rng.below(FILES.len() as u64) as usize];
            let len = [10, 500, 3000, 8000][rng.below(4) as usize];
            let byte = b'a' + rng.below(26) as u8;
            std::fs::write(ws.root().join(f), vec![byte; len]).expect("edit in place");
        }
        let o = options(&mut rng);
        let cached = ws.snap(&o);
        let fresh = ws.snap(&Options {
            use_stat_cache: false,
            ..o.clone()
        });
        let what = format!(
            "step {step}: max_file_bytes {} excludes {:?} refuse_hard_links {}",
            o.capture.max_file_bytes, o.capture.excludes, o.capture.refuse_hard_links
        );
        assert_eq!(cached.root, fresh.root, "{what}: the trees differ");
        let list = |s: &cairn_snapshot::Snapshot| {
            let mut l: Vec<_> = s
                .skipped
                .iter()
                .map(|k| (k.path.clone(), format!("{:?}", k.reason)))
                .collect();
            l.sort();
            l
        };
        let (a, b) = (list(&cached), list(&fresh));
        assert_eq!(a, b, "{what}: the skipped lists differ");
    }
}
