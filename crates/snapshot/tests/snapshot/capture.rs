//! What a snapshot records: modes, links, names, nested repositories, excludes.

use crate::fixtures::{blob, os, Ws};
use cairn_snapshot::{snapshot, ExcludeReason, Options};
use cairn_store::{EntryKind, Store, StoreOptions};
use std::os::unix::fs::PermissionsExt;

#[test]
fn files_are_recorded_with_their_modes_and_executable_bits() {
    let ws = Ws::new();
    ws.write("run.sh", b"#!/bin/sh\necho hi\n");
    ws.write("lib/data.txt", b"data\n");
    std::fs::set_permissions(
        ws.root().join("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    std::fs::set_permissions(
        ws.root().join("lib/data.txt"),
        std::fs::Permissions::from_mode(0o640),
    )
    .expect("chmod");
    std::fs::set_permissions(
        ws.root().join("lib"),
        std::fs::Permissions::from_mode(0o750),
    )
    .expect("chmod");
    let snap = ws.snap(&Options::default());
    let run = ws.entry(&snap, b"run.sh").expect("run.sh");
    assert_eq!(run.kind, EntryKind::File);
    assert_eq!(run.mode, 0o100755);
    assert_eq!(blob(&ws.store, &run), b"#!/bin/sh\necho hi\n");
    assert_eq!(
        ws.entry(&snap, b"lib/data.txt").expect("data").mode,
        0o100640
    );
    let lib = ws.entry(&snap, b"lib").expect("lib");
    assert_eq!((lib.kind, lib.mode), (EntryKind::Dir, 0o040750));
    assert_eq!(snap.stats.files, 2);
    assert_eq!(snap.stats.dirs, 2);
    assert_eq!(snap.stats.bytes, 23);
}

#[test]
fn a_symlink_to_a_directory_outside_the_root_is_recorded_and_never_entered() {
    let ws = Ws::new();
    let outside = ws.dir.path().join("outside");
    std::fs::create_dir(&outside).expect("outside");
    std::fs::write(outside.join("secret.txt"), b"secret").expect("write");
    std::os::unix::fs::symlink(&outside, ws.root().join("link")).expect("symlink");
    std::os::unix::fs::symlink("does/not/exist", ws.root().join("dangling")).expect("symlink");
    let snap = ws.snap(&Options::default());
    let link = ws.entry(&snap, b"link").expect("link");
    assert_eq!(link.kind, EntryKind::Symlink);
    assert_eq!(link.mode & 0o170000, 0o120000);
    assert_eq!(
        blob(&ws.store, &link),
        outside.as_os_str().as_encoded_bytes()
    );
    assert_eq!(
        blob(&ws.store, &ws.entry(&snap, b"dangling").expect("dangling")),
        b"does/not/exist"
    );
    assert_eq!(ws.paths(&snap), vec!["dangling", "link"]);
    assert_eq!(snap.stats.files, 0);
    assert_eq!(snap.stats.symlinks, 2);
}

#[test]
fn any_name_a_directory_holds_is_kept_byte_for_byte() {
    let ws = Ws::new();
    let names: [&[u8]; 4] = [b"caf\xe9-latin1", b"back\\slash", b"new\nline", b" spaced "];
    for n in names {
        std::fs::write(ws.root().join(os(n)), n).expect("write");
    }
    let snap = ws.snap(&Options::default());
    for n in names {
        let e = ws.entry(&snap, n).expect("entry");
        assert_eq!(e.name, n);
        assert_eq!(blob(&ws.store, &e), n);
    }
}

#[test]
fn a_nested_repository_is_captured_as_plain_files_without_its_git_directory() {
    let ws = Ws::new();
    ws.write(".git/HEAD", b"ref: refs/heads/main\n");
    ws.write("vendor/lib/.git/config", b"[core]\n");
    ws.write("vendor/lib/src/x.c", b"int x;\n");
    ws.write("vendor/lib/.gitignore", b"build/\n");
    ws.write("vendor/lib/build/out.o", b"obj");
    let snap = ws.snap(&Options::default());
    assert_eq!(
        ws.paths(&snap),
        vec![
            "vendor/",
            "vendor/lib/",
            "vendor/lib/.gitignore",
            "vendor/lib/src/",
            "vendor/lib/src/x.c"
        ]
    );
    assert!(snap
        .kept
        .iter()
        .any(|k| k.path == b"vendor/lib/.git" && k.reason == ExcludeReason::Default));
}

#[test]
fn node_modules_and_git_are_left_out_at_any_depth() {
    let ws = Ws::new();
    ws.write("node_modules/a/index.js", b"x");
    ws.write("pkg/node_modules/b.js", b"x");
    ws.write("pkg/src/.git", b"gitdir: elsewhere\n");
    ws.write("pkg/main.js", b"x");
    let snap = ws.snap(&Options::default());
    assert_eq!(ws.paths(&snap), vec!["pkg/", "pkg/main.js", "pkg/src/"]);
}

#[test]
fn gitignore_negation_nesting_and_anchoring_are_honoured() {
    let ws = Ws::new();
    ws.write(".gitignore", b"*.log\n/build\n!keep.log\n");
    ws.write("a.log", b"x");
    ws.write("keep.log", b"x");
    ws.write("build/out", b"x");
    ws.write("src/build/gen.rs", b"x");
    ws.write("src/.gitignore", b"!debug.log\n*.tmp\n");
    ws.write("src/debug.log", b"x");
    ws.write("src/other.log", b"x");
    ws.write("src/x.tmp", b"x");
    ws.write("x.tmp", b"x");
    ws.write(".cairnignore", b"secret.env\n");
    ws.write("secret.env", b"x");
    let snap = ws.snap(&Options::default());
    assert_eq!(
        ws.paths(&snap),
        vec![
            ".cairnignore",
            ".gitignore",
            "keep.log",
            "src/",
            "src/.gitignore",
            "src/build/",
            "src/build/gen.rs",
            "src/debug.log",
            "x.tmp"
        ]
    );
    let ignored: Vec<String> = snap
        .kept
        .iter()
        .filter(|k| k.reason == ExcludeReason::Ignored)
        .map(|k| String::from_utf8_lossy(&k.path).into_owned())
        .collect();
    assert_eq!(
        ignored,
        vec!["a.log", "build", "secret.env", "src/other.log", "src/x.tmp"]
    );
}

#[test]
fn a_byte_order_mark_at_the_start_of_an_ignore_file_is_skipped_as_git_skips_it() {
    let ws = Ws::new();
    ws.write(".gitignore", b"\xef\xbb\xbfsecret.txt\n");
    ws.write("sub/.cairnignore", b"\xef\xbb\xbfnotes.md\n");
    ws.write("secret.txt", b"x");
    ws.write("sub/notes.md", b"x");
    ws.write("kept.txt", b"x");
    let snap = ws.snap(&Options::default());
    assert_eq!(
        ws.paths(&snap),
        vec![".gitignore", "kept.txt", "sub/", "sub/.cairnignore"]
    );
}

#[test]
fn gitignore_handling_can_be_turned_off() {
    let ws = Ws::new();
    ws.write(".gitignore", b"*.log\n");
    ws.write("a.log", b"x");
    let snap = ws.snap(&Options {
        capture: cairn_snapshot::CaptureSettings {
            gitignore: false,
            ..Default::default()
        },
        ..Options::default()
    });
    assert_eq!(ws.paths(&snap), vec![".gitignore", "a.log"]);
}

#[test]
fn exclude_globs_leave_out_what_they_match_and_everything_under_it() {
    let ws = Ws::new();
    ws.write("dist/bundle.js", b"x");
    ws.write("dist/sub/map.js", b"x");
    ws.write("src/app.js", b"x");
    ws.write("src/deep/trace.log", b"x");
    ws.write("src/gen/out.rs", b"x");
    let snap = ws.snap(&Options {
        capture: cairn_snapshot::CaptureSettings {
            excludes: vec!["dist".into(), "*.log".into(), "src/gen/**".into()],
            ..Default::default()
        },
        ..Options::default()
    });
    assert_eq!(
        ws.paths(&snap),
        vec!["src/", "src/app.js", "src/deep/", "src/gen/"]
    );
    assert_eq!(snap.manifest.capture.excludes.len(), 3);
}

#[test]
fn a_bad_exclude_glob_is_an_invalid_argument() {
    let ws = Ws::new();
    let err = snapshot(
        &ws.store,
        &ws.root(),
        "ws",
        &Options {
            capture: cairn_snapshot::CaptureSettings {
                excludes: vec!["a[".into()],
                ..Default::default()
            },
            ..Options::default()
        },
        Default::default(),
    )
    .expect_err("bad glob");
    use cairn_store::Classify;
    assert_eq!(err.kind(), cairn_store::ErrorKind::InvalidArgument);
}

#[test]
fn the_store_inside_the_root_is_excluded_whatever_its_name() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("a.txt"), b"a").expect("write");
    let store = Store::open(dir.path().join("my-store"), StoreOptions::default()).expect("store");
    let take = || {
        snapshot(
            &store,
            dir.path(),
            "ws",
            &Options::default(),
            Default::default(),
        )
    };
    let snap = take().expect("snap");
    let tree = store.read_tree(&snap.root).expect("tree");
    let names: Vec<&[u8]> = tree.entries().iter().map(|e| e.name.as_slice()).collect();
    assert_eq!(names, vec![b"a.txt".as_slice()]);
    // And a second snapshot, after the store grew, still holds only the file.
    let again = take().expect("snap");
    assert_eq!(again.root, snap.root);
}

#[test]
fn a_fifo_is_left_out_and_reported_as_special() {
    let ws = Ws::new();
    ws.write("a.txt", b"a");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        ws.root().join("pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
    let snap = ws.snap(&Options::default());
    assert_eq!(ws.paths(&snap), vec!["a.txt"]);
    assert!(snap
        .kept
        .iter()
        .any(|k| k.path == b"pipe" && k.reason == ExcludeReason::Special));
}

#[test]
fn labels_metadata_and_protection_are_recorded_in_the_manifest() {
    let ws = Ws::new();
    ws.write("a", b"a");
    let mut metadata = serde_json::Map::new();
    metadata.insert("entry".into(), serde_json::json!("e1"));
    let snap = ws.snap(&Options {
        label: Some("before-msg".into()),
        metadata,
        protect: true,
        ..Options::default()
    });
    let m = ws.store.read_manifest(&snap.id).expect("manifest");
    assert_eq!(m.label.as_deref(), Some("before-msg"));
    assert_eq!(m.metadata, r#"{"entry":"e1"}"#);
    assert!(m.protected);
    assert_eq!(m.workspace_id, "ws");
    assert_eq!(ws.store.resolve("before-msg").expect("resolve"), snap.id);
}

#[test]
fn a_large_file_is_streamed_into_the_store_and_reads_back_whole() {
    let ws = Ws::new();
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    ws.write("big.bin", &big);
    let snap = ws.snap(&Options::default());
    let e = ws.entry(&snap, b"big.bin").expect("big");
    assert_eq!(e.size, big.len() as u64);
    assert_eq!(blob(&ws.store, &e), big);
}

#[test]
fn a_missing_root_is_refused_with_not_found() {
    let ws = Ws::new();
    let err = snapshot(
        &ws.store,
        &ws.dir.path().join("nope"),
        "ws",
        &Options::default(),
        Default::default(),
    )
    .expect_err("missing");
    use cairn_store::Classify;
    assert_eq!(err.kind(), cairn_store::ErrorKind::NotFound);
}
