//! The store as a cache of its remote: the remote it mirrors, its collection, and the trim
//! of the local cache.

use super::*;

impl Store {
    /// The remote this store mirrors into, if any.
    pub fn remote(&self) -> Option<&Arc<dyn Remote>> {
        self.mirror().map(|m| &m.config.remote)
    }

    /// Collects garbage on the remote; see [`collect`].
    pub fn collect_remote(&self, options: &RemoteGcOptions) -> Result<RemoteGcReport> {
        collect(self, options)
    }

    /// Shrinks the cache to at most `max_bytes` of packs and large objects that the remote
    /// holds, removing the least recently fetched or written first (by modification time;
    /// a pack is downloaded again when it is next read). Files the remote does not hold (an
    /// upload that failed) are never removed. Refused (`UNSUPPORTED`) without a remote.
    pub fn trim_cache(&self, max_bytes: u64) -> Result<CacheTrim> {
        let mirror = self.mirror().ok_or_else(|| Error::Unsupported {
            what: format!("trimming {}", self.path().display()),
            detail: "it caches no remote: its files are the only copy".into(),
        })?;
        self.refresh()?;
        let (on_remote_packs, on_remote_large) = {
            let st = mirror.state.read();
            (st.packs.clone(), st.large.clone())
        };
        let layout = self.layout();
        // (modified, bytes, files to remove): a pack goes with its index.
        let mut cached: Vec<(std::time::SystemTime, u64, Vec<PathBuf>)> = Vec::new();
        let files = |dir: &Path| -> Result<Vec<(String, std::fs::Metadata, PathBuf)>> {
            let mut out = Vec::new();
            for entry in std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))? {
                let entry = entry.map_err(|e| Error::io("list", dir, e))?;
                let path = entry.path();
                let meta = entry
                    .metadata()
                    .map_err(|e| Error::io("inspect", &path, e))?;
                if meta.is_file() {
                    out.push((entry.file_name().to_string_lossy().into_owned(), meta, path));
                }
            }
            Ok(out)
        };
        for (name, meta, path) in files(&layout.packs)? {
            if let Some(id) = id_in(&name, "", ".pack") {
                if on_remote_packs.contains(&id) {
                    let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
                    let idx = path.with_extension("idx");
                    cached.push((modified, meta.len(), vec![idx, path]));
                }
            }
        }
        for (name, meta, path) in files(&layout.large)? {
            if let Some(id) = id_in(&name, "", "") {
                if on_remote_large.contains(&id) {
                    let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
                    cached.push((modified, meta.len(), vec![path]));
                }
            }
        }
        let mut report = CacheTrim {
            cached_bytes: cached.iter().map(|c| c.1).sum(),
            ..CacheTrim::default()
        };
        cached.sort_by_key(|c| c.0);
        let mut left = report.cached_bytes;
        let mut forgotten = Vec::new();
        for (_, bytes, paths) in cached {
            if left <= max_bytes {
                break;
            }
            for p in &paths {
                fsutil::remove_if_exists(p)?;
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                if let Some(id) = name.as_deref().and_then(|n| id_in(n, "", ".pack")) {
                    forgotten.push(id);
                }
            }
            left -= bytes;
            report.removed_files += 1;
            report.removed_bytes += bytes;
        }
        report.cached_bytes = left;
        // Close the files of removed packs (freeing their space); they load again as remote.
        self.forget_packs(&forgotten);
        self.refresh()?;
        Ok(report)
    }
}

/// What [`Store::trim_cache`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[non_exhaustive]
pub struct CacheTrim {
    /// Packs and large objects removed from the cache (the remote keeps them).
    pub removed_files: u64,
    /// Their bytes.
    pub removed_bytes: u64,
    /// Bytes of remote-held packs and large objects still cached.
    pub cached_bytes: u64,
}
