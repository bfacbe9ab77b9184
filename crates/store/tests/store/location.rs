//! Where a store may lie (issue 53): a store another user could change (a directory of it or
//! above it owned by another user, or writable by others) is refused with `DENIED` at open,
//! unless `CAIRN_UNSAFE_STORE_OK` names it.

use crate::util::{helper, helper_dir, temp};
use cairn_store::location::UNSAFE_STORE_ENV;
use cairn_store::{Classify, ErrorKind, Store, StoreOptions};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const NOBODY: u32 = 65534;

/// Whether the tests run as root (they must, to make a directory of another owner).
fn root() -> bool {
    let is = rustix::process::geteuid().is_root();
    if !is {
        eprintln!("skipped: making a directory of another owner needs root");
    }
    is
}

/// Makes `dir` with `mode` (exactly), owned by `uid`:`gid`.
fn make_dir(dir: &Path, mode: u32, uid: u32, gid: u32) {
    std::fs::create_dir(dir).expect("mkdir");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).expect("chmod");
    std::os::unix::fs::chown(dir, Some(uid), Some(gid)).expect("chown");
}

/// Opens the store at `path` in a child process with `CAIRN_UNSAFE_STORE_OK` set to `opt_in`
/// (so this process's environment stays as it is): whether it opened.
fn opens_with_opt_in(path: &Path, opt_in: &Path) -> bool {
    let out = helper("location::open_helper", path)
        .env(UNSAFE_STORE_ENV, opt_in)
        .output()
        .expect("runs the helper");
    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    out.status.success()
}

/// Helper run by [`opens_with_opt_in`]: opens the store at the directory it was given.
#[test]
#[ignore = "a helper run by opens_with_opt_in in a child process"]
fn open_helper() {
    let Some(path) = helper_dir() else { return };
    Store::open(&path, StoreOptions::default()).expect("the store opens with the opt-in");
}

#[test]
fn a_store_in_a_directory_another_user_owns_and_all_may_write_is_refused_unless_opted_in() {
    // Issue 53: another user, owner of a directory writable by all, renamed the store's
    // snapshots/ and `cairn list` said 0 snapshots; they could as well slip in manifests and
    // packs for a later restore to write. The store is refused, naming the directory, its owner
    // and mode, and the opt-in.
    if !root() {
        return;
    }
    let dir = temp();
    let shared = dir.path().join("shared");
    make_dir(&shared, 0o777, NOBODY, NOBODY);
    let path = shared.join("store");
    for made in [false, true] {
        if made {
            // A store made there earlier, its own directories the user's.
            std::fs::create_dir(&path).expect("mkdir");
            for d in ["objects", "snapshots", "locks"] {
                std::fs::create_dir(path.join(d)).expect("mkdir");
            }
        }
        let e = Store::open(&path, StoreOptions::default()).expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::Denied, "{e}");
        assert_eq!(e.path(), Some(shared.as_path()), "{e}");
        let m = e.to_string();
        for part in [
            &*shared.to_string_lossy(),
            "uid 65534",
            "mode 0777",
            &format!("{UNSAFE_STORE_ENV}={}", path.display()),
        ] {
            assert!(m.contains(part), "{part:?} not in: {m}");
        }
        assert_eq!(path.exists(), made, "nothing made");
    }
    // Named in the opt-in, the store or a directory it lies in: it opens.
    assert!(opens_with_opt_in(&path, &path));
    assert!(opens_with_opt_in(&path, &shared));
    assert!(opens_with_opt_in(&path, Path::new("*")));
    // Another store named: still refused.
    assert!(!opens_with_opt_in(&path, &dir.path().join("elsewhere")));
}

#[test]
fn the_rule_lets_in_sticky_and_own_group_directories_and_refuses_the_users_own_writable_by_all() {
    // Issue 53: the rule, directory by directory. Root-owned and sticky (as /tmp) is safe: no
    // one may rename what another made there. The user's own group writing is a umask of 002;
    // another group, or every user (a umask of 000), is not safe, even in the user's own
    // directory, and not in the store's own directories either.
    if !root() {
        return;
    }
    let me = rustix::process::getegid().as_raw();
    let cases: [(&str, u32, u32, u32, bool); 6] = [
        ("sticky, root's, writable by all", 0o1777, 0, 0, true),
        (
            "the user's, writable by the user's group",
            0o775,
            0,
            me,
            true,
        ),
        ("sticky, another user's", 0o1777, NOBODY, NOBODY, false),
        ("the user's, writable by all", 0o777, 0, 0, false),
        (
            "the user's, writable by another group",
            0o775,
            0,
            NOBODY,
            false,
        ),
        (
            "another user's, writable by no one else",
            0o755,
            NOBODY,
            NOBODY,
            false,
        ),
    ];
    for (what, mode, uid, gid, opens) in cases {
        let dir = temp();
        let place = dir.path().join("place");
        make_dir(&place, mode, uid, gid);
        let r = Store::open(place.join("store"), StoreOptions::default());
        assert_eq!(r.is_ok(), opens, "{what}: {:?}", r.err());
        if let Err(e) = r {
            assert_eq!(e.kind(), ErrorKind::Denied, "{what}: {e}");
            assert!(
                e.to_string().contains(&format!("{mode:04o}")),
                "{what}: {e}"
            );
        }
    }
    // The store's own directory, and one of its directories, made writable by all.
    for inner in ["", "snapshots"] {
        let dir = temp();
        let path = dir.path().join("store");
        drop(Store::open(&path, StoreOptions::default()).expect("opens"));
        let d = path.join(inner);
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = Store::open(&path, StoreOptions::default()).expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::Denied, "{inner:?}: {e}");
        assert_eq!(e.path(), Some(d.as_path()), "{inner:?}: {e}");
    }
}

#[test]
fn a_store_reached_through_a_symlink_in_a_directory_others_may_write_is_refused() {
    // Issue 53: the store's real directories are the user's, but a link on the way to it lies
    // where another user may replace it; and the other way, a link in the user's directory
    // leading to a place another user may change.
    if !root() {
        return;
    }
    let dir = temp();
    let mine = dir.path().join("mine");
    make_dir(&mine, 0o700, 0, 0);
    drop(Store::open(mine.join("store"), StoreOptions::default()).expect("opens"));
    let shared = dir.path().join("shared");
    make_dir(&shared, 0o777, NOBODY, NOBODY);
    std::os::unix::fs::symlink(&mine, shared.join("link")).expect("symlink");
    let e = Store::open(shared.join("link/store"), StoreOptions::default()).expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Denied, "{e}");
    assert_eq!(e.path(), Some(shared.as_path()), "{e}");

    let theirs = shared.join("theirs");
    make_dir(&theirs, 0o700, 0, 0);
    std::os::unix::fs::symlink(&theirs, dir.path().join("via")).expect("symlink");
    let e =
        Store::open(dir.path().join("via/store"), StoreOptions::default()).expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Denied, "{e}");
    assert_eq!(e.path(), Some(shared.as_path()), "{e}");
}
