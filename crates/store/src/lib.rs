//! `cairn-store`: the content-addressed store at the bottom of Cairn.
//!
//! Objects are named by the SHA-256 of their bytes: a *blob* is a file's content (so
//! `sha256sum FILE` names it), a *tree* is one directory listing in a canonical encoding.
//! Objects are written in *packs*, so storing N new objects creates O(1) files; blobs larger
//! than [`StoreOptions::inline_max_bytes`] are streamed into files of their own. Each snapshot
//! has a *manifest* naming its root tree. Several processes may share a store: operations
//! register markers held with `flock`, and a collection defers its sweep while any is held.
//!
//! ```
//! use cairn_store::{Store, StoreOptions, ObjectKind, OperationKind};
//! # fn main() -> Result<(), cairn_store::Error> {
//! let dir = tempfile::tempdir().expect("a temporary directory");
//! let store = Store::open(dir.path().join("store"), StoreOptions::default())?;
//! let op = store.begin_operation(OperationKind::Write, &[])?;
//! let writer = store.writer(&op);
//! let put = writer.put(ObjectKind::Blob, b"hello\n")?;
//! writer.commit()?;
//! assert_eq!(put.id.to_hex(), "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
//! assert_eq!(store.read_object(&put.id)?.1, b"hello\n");
//! # Ok(()) }
//! ```
//!
//! The on-disk formats are documented in `docs/FORMAT.md`.

// `deny`, not `forbid`: the exceptions are two glibc allocator calls (`malloc_trim`,
// `mallopt`) for the long-lived `cairn watch` daemon, in `store/heap.rs`.
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod cancel;
pub mod copy;
pub mod error;
pub mod export;
pub mod fsutil;
pub mod gc;
pub mod home;
pub mod id;
pub mod location;
pub mod lock;
pub mod manifest;
pub mod merge;
pub mod pack;
mod packwatch;
pub mod relpath;
pub mod remote;
pub mod retain;
mod store;
pub mod tree;
pub mod verify;

pub use cancel::CancelToken;
pub use error::{Classify, Error, ErrorKind, Result};
pub use id::{BlobId, Hasher, ObjectId, SnapshotId, TreeId};
pub use lock::{MarkerInfo, OperationGuard, OperationKind};
pub use manifest::{CaptureSettings, Manifest, SkipReason, Skipped, Stats, DEFAULT_MAX_FILE_BYTES};
pub use pack::ObjectKind;
pub use relpath::RelPath;
pub use remote::{
    Remote, RemoteConfig, RemoteGcOptions, RemoteGcReport, RemoteObject, RemoteStats,
};
pub use store::{
    check_label, check_workspace_id, fix_mmap_threshold, is_store_dir, limit_heap_arenas,
    store_containing, BrokenIndex, Compression, IdleLock, Layout, ObjectWriter, PutOutcome,
    SnapshotEntry, SnapshotList, Store, StoreOptions, WriteStats, GITIGNORE, MAX_LABEL_BYTES,
};
pub use tree::{encode_sorted, EntryKind, EntryRef, Tree, TreeEntry};

/// Read-only access to objects, the interface the restore layer reads through.
pub trait ObjectSource: Send + Sync {
    /// Reads and decodes a tree.
    fn tree(&self, id: &TreeId) -> Result<Tree>;
    /// Streams a blob into `out`, checking its hash; returns its length.
    fn blob_to(&self, id: &BlobId, out: &mut dyn std::io::Write) -> Result<u64>;
    /// Reads a (small) blob whole, checking its hash.
    fn blob(&self, id: &BlobId) -> Result<Vec<u8>>;
}

impl ObjectSource for Store {
    fn tree(&self, id: &TreeId) -> Result<Tree> {
        self.read_tree(id)
    }
    fn blob_to(&self, id: &BlobId, out: &mut dyn std::io::Write) -> Result<u64> {
        self.copy_object_to(&id.0, out)
    }
    fn blob(&self, id: &BlobId) -> Result<Vec<u8>> {
        Ok(self.read_object(&id.0)?.1)
    }
}
