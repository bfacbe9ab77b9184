//! The property: snapshot, mutate at random, plan and apply: the tree equals the snapshot byte
//! for byte and mode for mode, the report is the plan, untouched files keep their mtime, and
//! restoring the safety snapshot gives back the mutated tree exactly.

use crate::fixtures::{mtime_ns, picture, temp_files, Fx, Node};
use cairn_restore::Action;
use proptest::prelude::*;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const NAMES: &[&[u8]] = &[
    b"a",
    b"b c",
    b"caf\xc3\xa9",
    b"\xff\xfe",
    b"new\nline",
    b"back\\slash",
    b"d",
];
const FILE_MODES: &[u32] = &[0o644, 0o755, 0o600, 0o444];
const DIR_MODES: &[u32] = &[0o755, 0o750, 0o700];

#[derive(Debug, Clone)]
enum Kind {
    File(Vec<u8>, u32),
    Dir(u32),
    Link(Vec<u8>),
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        3 => (proptest::collection::vec(any::<u8>(), 0..64), 0..FILE_MODES.len())
            .prop_map(|(c, m)| Kind::File(c, FILE_MODES[m])),
        2 => (0..DIR_MODES.len()).prop_map(|m| Kind::Dir(DIR_MODES[m])),
        1 => prop_oneof![Just(b"a".to_vec()), Just(b"../outside".to_vec()), Just(b"d/a".to_vec())]
            .prop_map(Kind::Link),
    ]
}

fn path() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0..NAMES.len(), 1..4)
}

fn rel(ixs: &[usize]) -> Vec<u8> {
    let mut p = Vec::new();
    for (i, ix) in ixs.iter().enumerate() {
        if i > 0 {
            p.push(b'/');
        }
        p.extend_from_slice(NAMES[*ix]);
    }
    p
}

fn os(p: &[u8]) -> &Path {
    Path::new(std::ffi::OsStr::from_bytes(p))
}

/// Makes `kind` at `p` under `root`, creating parent directories; gives up quietly where a
/// parent is not a directory.
fn make(root: &Path, p: &[u8], kind: &Kind) {
    let abs = root.join(os(p));
    let Some(parent) = abs.parent() else { return };
    if std::fs::create_dir_all(parent).is_err() {
        return;
    }
    if std::fs::symlink_metadata(&abs).is_ok() {
        return;
    }
    match kind {
        Kind::File(c, m) => {
            std::fs::write(&abs, c).expect("write");
            crate::fixtures::chmod(&abs, *m);
        }
        Kind::Dir(m) => {
            std::fs::create_dir(&abs).expect("mkdir");
            crate::fixtures::chmod(&abs, *m);
        }
        Kind::Link(t) => std::os::unix::fs::symlink(os(t), &abs).expect("symlink"),
    }
}

fn remove(abs: &Path) {
    match std::fs::symlink_metadata(abs) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(abs).expect("rm -r"),
        Ok(_) => std::fs::remove_file(abs).expect("rm"),
        Err(_) => {}
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Rewrite(usize, Vec<u8>),
    Delete(usize),
    Add(Vec<usize>, Kind),
    Chmod(usize, u32),
    SwapToDir(usize),
    SwapToFile(usize, Vec<u8>),
    ToLink(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 0..32)
        )
            .prop_map(|(i, c)| Mutation::Rewrite(i, c)),
        any::<usize>().prop_map(Mutation::Delete),
        (path(), kind()).prop_map(|(p, k)| Mutation::Add(p, k)),
        (any::<usize>(), 0..FILE_MODES.len()).prop_map(|(i, m)| Mutation::Chmod(i, FILE_MODES[m])),
        any::<usize>().prop_map(Mutation::SwapToDir),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 0..16)
        )
            .prop_map(|(i, c)| Mutation::SwapToFile(i, c)),
        any::<usize>().prop_map(Mutation::ToLink),
    ]
}

fn mutate(root: &Path, m: &Mutation) {
    let paths: Vec<Vec<u8>> = picture(root).keys().cloned().collect();
    let pick = |i: &usize| -> Option<Vec<u8>> {
        (!paths.is_empty()).then(|| paths[i % paths.len()].clone())
    };
    match m {
        Mutation::Rewrite(i, c) => {
            if let Some(p) = pick(i) {
                let abs = root.join(os(&p));
                if std::fs::symlink_metadata(&abs)
                    .map(|m| m.is_file())
                    .unwrap_or(false)
                {
                    crate::fixtures::chmod(&abs, 0o644);
                    std::fs::write(&abs, c).expect("rewrite");
                }
            }
        }
        Mutation::Delete(i) => {
            if let Some(p) = pick(i) {
                remove(&root.join(os(&p)));
            }
        }
        Mutation::Add(p, k) => make(root, &rel(p), k),
        Mutation::Chmod(i, mode) => {
            if let Some(p) = pick(i) {
                let abs = root.join(os(&p));
                if std::fs::symlink_metadata(&abs)
                    .map(|m| m.is_file())
                    .unwrap_or(false)
                {
                    crate::fixtures::chmod(&abs, *mode);
                }
            }
        }
        Mutation::SwapToDir(i) => {
            if let Some(p) = pick(i) {
                let abs = root.join(os(&p));
                remove(&abs);
                std::fs::create_dir(&abs).expect("mkdir");
                std::fs::write(abs.join("inside"), b"inside").expect("write");
            }
        }
        Mutation::SwapToFile(i, c) => {
            if let Some(p) = pick(i) {
                let abs = root.join(os(&p));
                remove(&abs);
                std::fs::write(&abs, c).expect("write");
            }
        }
        Mutation::ToLink(i) => {
            if let Some(p) = pick(i) {
                let abs = root.join(os(&p));
                remove(&abs);
                std::os::unix::fs::symlink("elsewhere", &abs).expect("symlink");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(32),
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_restore_gives_back_the_snapshot_exactly_and_its_safety_snapshot_gives_back_the_mutation(
        entries in proptest::collection::vec((path(), kind()), 1..14),
        mutations in proptest::collection::vec(mutation(), 1..8),
    ) {
        let fx = Fx::new();
        let root = fx.root();
        for (p, k) in &entries {
            make(&root, &rel(p), k);
        }
        let original = fx.picture();
        let snap = fx.snap();
        for m in &mutations {
            mutate(&root, m);
        }
        let mutated = fx.picture();
        let mtimes: Vec<(Vec<u8>, i128)> = mutated
            .iter()
            .filter(|(_, n)| matches!(n, Node::File { .. }))
            .map(|(p, _)| (p.clone(), mtime_ns(&root.join(os(p)))))
            .collect();
        let plan = fx.ws.plan(&snap.id, &Default::default(), Default::default()).expect("plan");
        let report = fx.ws.apply(&plan, &Default::default(), Default::default()).expect("apply");
        prop_assert_eq!(&fx.picture(), &original);
        prop_assert_eq!(&report.summary.restored, &plan.summary.restored);
        prop_assert_eq!(&report.summary.deleted, &plan.summary.deleted);
        prop_assert_eq!(report.summary.unchanged, plan.summary.unchanged);
        prop_assert!(report.as_planned);
        let touched: Vec<&[u8]> = plan.actions.iter().map(|a: &Action| a.path().as_bytes()).collect();
        for (p, t) in &mtimes {
            if !touched.contains(&p.as_slice()) && original.get(p) == mutated.get(p) {
                prop_assert_eq!(mtime_ns(&root.join(os(p))), *t, "untouched {:?} changed mtime", String::from_utf8_lossy(p));
            }
        }
        prop_assert!(temp_files(&root).is_empty());
        match report.safety_snapshot_id {
            Some(safety) => {
                fx.ws.restore(&safety, &Default::default(), &Default::default(), Default::default()).expect("undo");
                prop_assert_eq!(&fx.picture(), &mutated);
            }
            None => prop_assert_eq!(&original, &mutated),
        }
    }
}

/// Whether `p` is `c` or under it.
fn within(p: &[u8], c: &[u8]) -> bool {
    p.starts_with(c) && (p.len() == c.len() || p[c.len()] == b'/')
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(32),
        ..ProptestConfig::default()
    })]

    /// A restore of chosen paths: at and under them the tree is the snapshot's; every other
    /// path (but the directories above them) is as the mutation left it, mtime included; and
    /// the safety snapshot restored with the same paths gives back the mutation exactly.
    #[test]
    fn a_restore_of_chosen_paths_gives_back_only_them_and_its_safety_snapshot_undoes_exactly_that(
        entries in proptest::collection::vec((path(), kind()), 1..14),
        mutations in proptest::collection::vec(mutation(), 1..8),
        chosen in proptest::collection::vec(any::<usize>(), 1..3),
    ) {
        let fx = Fx::new();
        let root = fx.root();
        for (p, k) in &entries {
            make(&root, &rel(p), k);
        }
        let original = fx.picture();
        let snap = fx.snap();
        for m in &mutations {
            mutate(&root, m);
        }
        let mutated = fx.picture();
        let all: Vec<Vec<u8>> = original.keys().chain(mutated.keys()).cloned().collect();
        prop_assume!(!all.is_empty());
        let paths: Vec<cairn_store::RelPath> = chosen
            .iter()
            .map(|i| cairn_store::RelPath(all[i % all.len()].clone()))
            .collect();
        let paths = cairn_restore::normalize_paths(&paths).expect("plain paths");
        let inside = |p: &[u8]| paths.iter().any(|c| within(p, c.as_bytes()));
        let above = |p: &[u8]| paths.iter().any(|c| within(c.as_bytes(), p) && c.as_bytes() != p);
        let mtimes: Vec<(Vec<u8>, i128)> = mutated
            .iter()
            .filter(|(p, n)| matches!(n, Node::File { .. }) && !inside(p) && !above(p))
            .map(|(p, _)| (p.clone(), mtime_ns(&root.join(os(p)))))
            .collect();
        let options = cairn_restore::PlanOptions { paths: paths.clone(), ..Default::default() };
        let restore = |id| fx.ws.restore(id, &options, &Default::default(), Default::default());
        let report = match restore(&snap.id) {
            Ok(r) => r,
            Err(e) => {
                // A directory above a chosen path that the workspace has as a file or link.
                prop_assert_eq!(cairn_store::Classify::kind(&e), cairn_store::ErrorKind::Denied, "{}", e);
                prop_assert_eq!(&fx.picture(), &mutated);
                return Ok(());
            }
        };
        prop_assert_eq!(&report.paths, &paths);
        let after = fx.picture();
        for p in original.keys().chain(mutated.keys()).chain(after.keys()) {
            if inside(p) {
                prop_assert_eq!(after.get(p), original.get(p), "inside {:?}", String::from_utf8_lossy(p));
            } else if above(p) {
                let is_dir = after.get(p).is_none_or(|n| matches!(n, Node::Dir { .. }));
                prop_assert!(is_dir, "above {:?}", String::from_utf8_lossy(p));
            } else {
                prop_assert_eq!(after.get(p), mutated.get(p), "outside {:?}", String::from_utf8_lossy(p));
            }
        }
        for (p, t) in &mtimes {
            prop_assert_eq!(mtime_ns(&root.join(os(p))), *t, "outside {:?} changed mtime", String::from_utf8_lossy(p));
        }
        prop_assert!(temp_files(&root).is_empty());
        if let Some(safety) = report.safety_snapshot_id {
            restore(&safety).expect("undo");
            prop_assert_eq!(&fx.picture(), &mutated);
            for (p, t) in &mtimes {
                prop_assert_eq!(mtime_ns(&root.join(os(p))), *t);
            }
        } else {
            prop_assert_eq!(&after, &mutated);
        }
    }
}
