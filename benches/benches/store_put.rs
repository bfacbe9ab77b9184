//! Criterion benches of the store's writer.
//!
//! - `store_put/10k_1KiB/{objects,bytes}`: 10,000 distinct source-like objects of 1 KiB through
//!   `Store::writer` + `ObjectWriter::put` + `commit`, into a fresh store each iteration, at
//!   the default compression (zstd 3); the same work reported as objects/s and as bytes/s.
//! - `store_put/10k_1KiB_uncompressed/objects`: the same with `Compression::None`.
//! - `store_put/blob_256MiB/{text,random}`: one 256 MiB blob through `put_blob_from` (streamed
//!   into a large object), source-like text (compressed) and random bytes (stored raw after
//!   the first chunk does not shrink).
//!
//! `cargo bench -p cairn-benches --bench store_put`. Under `cargo test` (no `--bench`
//! argument) each bench runs once on 500 objects and a 2 MiB blob (still a large object)
//! instead, so the test suite stays fast.

// criterion_group! and criterion_main! define undocumented public functions.
#![allow(missing_docs)]

use cairn_benches::ingest::store_options;
use cairn_benches::rng::{self, Rng};
use cairn_benches::text::{self, Lang};
use cairn_store::{Compression, ObjectKind, OperationGuard, OperationKind, Store};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::io::Cursor;
use std::time::Duration;
use tempfile::TempDir;

const OBJECTS: usize = 10_000;
const OBJECT_BYTES: usize = 1024;

/// True when run by `cargo bench`, false under `cargo test`.
fn benchmarking() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// A fresh store in a temporary directory, and an operation to write under.
fn fresh_store(compression: Compression) -> (TempDir, Store, OperationGuard) {
    let dir = tempfile::tempdir().expect("a temporary directory for the store");
    let store = Store::open(dir.path().join("store"), store_options(compression))
        .expect("a new store opens");
    let op = store
        .begin_operation(OperationKind::Write, &[])
        .expect("an operation marker");
    (dir, store, op)
}

fn small_objects() -> Vec<Vec<u8>> {
    let count = if benchmarking() { OBJECTS } else { 500 };
    (0..count)
        .map(|i| {
            let mut r = Rng::new(rng::derive(0xC0DE, i as u64));
            let lang = Lang::random(&mut r);
            text::generate(&mut r, lang, OBJECT_BYTES)
        })
        .collect()
}

fn put_all(objects: &[Vec<u8>], (dir, store, op): (TempDir, Store, OperationGuard)) -> TempDir {
    let writer = store.writer(&op);
    for o in objects {
        writer.put(ObjectKind::Blob, o).expect("put");
    }
    let stats = writer.commit().expect("commit");
    assert_eq!(stats.objects as usize, objects.len());
    dir
}

fn bench_small(c: &mut Criterion) {
    let objects = small_objects();
    let mut g = c.benchmark_group("store_put");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));
    let zstd3 = Compression::Zstd { level: 3 };
    let count = objects.len();
    g.throughput(Throughput::Elements(count as u64));
    g.bench_function("10k_1KiB/objects", |b| {
        b.iter_batched(
            || fresh_store(zstd3),
            |s| put_all(&objects, s),
            BatchSize::PerIteration,
        )
    });
    g.bench_function("10k_1KiB_uncompressed/objects", |b| {
        b.iter_batched(
            || fresh_store(Compression::None),
            |s| put_all(&objects, s),
            BatchSize::PerIteration,
        )
    });
    g.throughput(Throughput::Bytes((count * OBJECT_BYTES) as u64));
    g.bench_function("10k_1KiB/bytes", |b| {
        b.iter_batched(
            || fresh_store(zstd3),
            |s| put_all(&objects, s),
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn bench_blob(c: &mut Criterion) {
    let size: usize = if benchmarking() { 256 << 20 } else { 2 << 20 };
    // Source-like text: 16 MiB of generated code repeated with a varying line between copies,
    // so the blob is large without taking long to make.
    let text_blob = {
        let mut r = Rng::new(7);
        let unit = text::generate(&mut r, Lang::Rust, size.min(16 << 20));
        let mut v = Vec::with_capacity(size + unit.len());
        let mut n = 0u64;
        while v.len() < size {
            v.extend_from_slice(format!("// part {n}\n").as_bytes());
            v.extend_from_slice(&unit);
            n += 1;
        }
        v.truncate(size);
        v
    };
    let random_blob = text::binary(&mut Rng::new(8), size, false);
    let mut g = c.benchmark_group("store_put");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Bytes(size as u64));
    for (name, blob) in [
        ("blob_256MiB/text", &text_blob),
        ("blob_256MiB/random", &random_blob),
    ] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || fresh_store(Compression::default()),
                |(dir, store, op)| {
                    let writer = store.writer(&op);
                    let put = writer
                        .put_blob_from(&mut Cursor::new(blob.as_slice()), size as u64)
                        .expect("put_blob_from");
                    assert_eq!(put.size, size as u64);
                    writer.commit().expect("commit");
                    dir
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench_small, bench_blob);
criterion_main!(benches);
