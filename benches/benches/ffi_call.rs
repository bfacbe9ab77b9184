//! The per-call cost of the C ABI: a trivial call, and a snapshot of a 10-file tree, through
//! `libcairn`'s exported functions against the same through Rust, side by side in one run.
//! `cargo bench -p cairn-benches --bench ffi_call`.

#![allow(unsafe_code)]
#![allow(missing_docs)]

use cairn::*;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::os::unix::ffi::OsStrExt;

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::create_dir(dir.path().join("root")).expect("root");
    for i in 0..10 {
        std::fs::write(
            dir.path().join(format!("root/f{i}.rs")),
            format!("fn f{i}() -> u32 {{ {i} }}\n"),
        )
        .expect("write");
    }
    // Old enough that the stat cache trusts every file (outside the racy window).
    std::thread::sleep(std::time::Duration::from_millis(2100));
    dir
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("ffi_call");
    g.sample_size(20);

    g.bench_function("trivial/rust", |b| {
        b.iter(|| black_box(cairn::CAIRN_ABI_VERSION))
    });
    g.bench_function("trivial/c_abi", |b| {
        b.iter(|| black_box(cairn_abi_version()))
    });
    g.bench_function("status_name/c_abi", |b| {
        b.iter(|| black_box(cairn_status_name(black_box(2))))
    });

    // Snapshot of a 10-file tree, nothing changed (the per-message case), Rust vs C ABI.
    let dir = tree();
    let root = dir.path().join("root");
    let ws = cairn_restore::Workspace::open(&root, cairn_restore::WorkspaceOptions::default())
        .expect("workspace");
    let opts = ws.snapshot_options();
    ws.snapshot(&opts, Default::default()).expect("warm");
    g.bench_function("snapshot_10_files/rust", |b| {
        b.iter(|| black_box(ws.snapshot(&opts, Default::default()).expect("snapshot")))
    });
    drop(ws);

    let root_b = root.as_os_str().as_bytes();
    let mut handle: *mut cairn_workspace = std::ptr::null_mut();
    // SAFETY: valid inputs and out-pointers, per cairn.h.
    let st = unsafe {
        cairn_workspace_open(
            root_b.as_ptr(),
            root_b.len(),
            std::ptr::null(),
            0,
            &mut handle,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(st, cairn_status::CAIRN_OK);
    g.bench_function("snapshot_10_files/c_abi", |b| {
        b.iter(|| {
            let mut buf: *mut cairn_buf = std::ptr::null_mut();
            // SAFETY: a live handle and valid out-pointers.
            let st = unsafe {
                cairn_workspace_snapshot(
                    handle,
                    std::ptr::null(),
                    0,
                    None,
                    std::ptr::null_mut(),
                    std::ptr::null(),
                    &mut buf,
                    std::ptr::null_mut(),
                )
            };
            assert_eq!(st, cairn_status::CAIRN_OK);
            // SAFETY: the buffer the call returned.
            unsafe { cairn_buf_free(buf) };
        })
    });
    // SAFETY: the handle opened above, no longer used.
    unsafe { cairn_workspace_free(handle) };
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
