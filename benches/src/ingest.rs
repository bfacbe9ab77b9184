//! Stores a directory in a [`Store`] the simplest way: a parallel walk that reads and stores
//! every file and builds trees bottom-up. It exists to measure the store (its size on disk,
//! the cost of compression); it is not a snapshot (no stat cache, no excludes, no manifest)
//! and not a substitute for `cairn-snapshot`.

use crate::gen::SKIPPED_NAMES;
use cairn_store::{
    Compression, EntryKind, Error, ObjectKind, ObjectWriter, OperationKind, Result, Store,
    StoreOptions, Tree, TreeEntry, TreeId, WriteStats,
};
use rayon::prelude::*;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// What [`ingest`] stored.
#[derive(Debug, Clone, Copy)]
pub struct Ingested {
    /// The root tree.
    pub root: TreeId,
    /// What the writer wrote.
    pub stats: WriteStats,
}

/// Stores every file, symlink and directory below `root` (except [`SKIPPED_NAMES`]) and
/// returns the root tree's id. Everything is durable when it returns.
pub fn ingest(store: &Store, root: &Path) -> Result<Ingested> {
    let op = store.begin_operation(OperationKind::Write, &[])?;
    let writer = store.writer(&op);
    let (root_id, _) = ingest_dir(&writer, root)?;
    let stats = writer.commit()?;
    Ok(Ingested {
        root: root_id,
        stats,
    })
}

fn ingest_dir(w: &ObjectWriter<'_>, dir: &Path) -> Result<(TreeId, u64)> {
    let names: Vec<_> = fs::read_dir(dir)
        .and_then(|it| it.map(|e| e.map(|e| e.file_name())).collect())
        .map_err(|e| Error::io("read directory", dir, e))?;
    let entries = names
        .par_iter()
        .filter(|n| !SKIPPED_NAMES.iter().any(|s| *n == *s))
        .map(|name| -> Result<TreeEntry> {
            let path = dir.join(name);
            let meta = fs::symlink_metadata(&path).map_err(|e| Error::io("inspect", &path, e))?;
            let ft = meta.file_type();
            let (kind, id, size) = if ft.is_dir() {
                let (tree, size) = ingest_dir(w, &path)?;
                (EntryKind::Dir, tree.0, size)
            } else if ft.is_symlink() {
                let target = fs::read_link(&path).map_err(|e| Error::io("read link", &path, e))?;
                let bytes = target.as_os_str().as_bytes();
                let put = w.put(ObjectKind::Blob, bytes)?;
                (EntryKind::Symlink, put.id, bytes.len() as u64)
            } else {
                let mut f = fs::File::open(&path).map_err(|e| Error::io("open", &path, e))?;
                let put = w.put_blob_from(&mut f, meta.len())?;
                (EntryKind::File, put.id, put.size)
            };
            Ok(TreeEntry {
                name: name.as_bytes().to_vec(),
                kind,
                mode: meta.mode(),
                size,
                id,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let tree = Tree::new(entries)?;
    let size = tree.total_size();
    Ok((w.put_tree(&tree)?, size))
}

/// Default store options with `compression`.
// StoreOptions is #[non_exhaustive]: a struct expression cannot build it outside its crate.
#[allow(clippy::field_reassign_with_default)]
pub fn store_options(compression: Compression) -> StoreOptions {
    let mut options = StoreOptions::default();
    options.compression = compression;
    options
}

/// Bytes below `path` (not following symlinks): `(apparent, allocated)`, where allocated is
/// what `du` counts (512-byte blocks).
pub fn disk_usage(path: &Path) -> std::io::Result<(u64, u64)> {
    let meta = fs::symlink_metadata(path)?;
    let mut total = (meta.len(), meta.blocks() * 512);
    if meta.is_dir() {
        for e in fs::read_dir(path)? {
            let (a, b) = disk_usage(&e?.path())?;
            total.0 += a;
            total.1 += b;
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{generate, TreeSpec};

    #[test]
    fn an_ingested_tree_reads_back() {
        let dir = tempfile::tempdir().expect("tmp");
        let tree = dir.path().join("tree");
        generate(&tree, &TreeSpec::new(200, 1)).expect("generate");
        let store = Store::open(dir.path().join("store"), StoreOptions::default()).expect("open");
        let got = ingest(&store, &tree).expect("ingest");
        let root = store.read_tree(&got.root).expect("root tree");
        let gitignore = root.get(b".gitignore").expect("root .gitignore");
        assert_eq!(
            store.read_object(&gitignore.id).expect("blob").1,
            fs::read(tree.join(".gitignore")).expect("read")
        );
        assert!(got.stats.objects > 200);
        // Ingesting again stores nothing new.
        let again = ingest(&store, &tree).expect("ingest again");
        assert_eq!(again.root, got.root);
        assert_eq!(again.stats.objects, 0);
    }
}
