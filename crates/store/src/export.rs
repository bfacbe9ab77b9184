//! A snapshot with its objects as one stream (`cairn export`), and reading one into another
//! store (`cairn import`), verified (issue 58).
//!
//! The stream is a POSIX (ustar) tar archive, so any tool or file API that carries a file
//! carries it, and `tar -tf` lists it:
//!
//! - `cairn-export.json` first: `{"format": "cairn-export", "version": 1, "snapshot": ID}`;
//! - `snapshots/<id>`: the manifest's bytes, which hash to its id;
//! - `trees/<id>` and `blobs/<id>`: every object the snapshot reaches, uncompressed, each
//!   named by the SHA-256 of its bytes;
//! - `END` last: `{"objects": N}`, so a stream cut at an entry's boundary is told from a whole
//!   one.
//!
//! [`import`] stages the stream in a store of its own under the target's `tmp/`, checking
//! every object's hash as it is read; only once `END` is read, the counts agree and every
//! object the snapshot reaches is there does it copy the snapshot into the target
//! ([`crate::copy::copy_snapshot`], which reads each object back, hashed again). A truncated,
//! altered or foreign stream is refused (`CORRUPT`) and the target store is not written.

use crate::copy::{copy_snapshot, CopyReport};
use crate::fsutil;
use crate::id::{ObjectId, SnapshotId, TreeId};
use crate::lock::OperationKind;
use crate::manifest::Manifest;
use crate::pack::ObjectKind;
use crate::store::{Compression, Store, StoreOptions};
use crate::tree::EntryKind;
use crate::{Classify, ErrorKind};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The `format` field of an export's first entry.
pub const FORMAT: &str = "cairn-export";
/// The version of the export format this code writes and reads.
pub const VERSION: u32 = 1;
const HEADER_ENTRY: &str = "cairn-export.json";
const END_ENTRY: &str = "END";
const BLOCK: usize = 512;

/// An error exporting or importing a snapshot stream.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A store failed (reading the snapshot, staging, copying into the target).
    #[error(transparent)]
    Store(#[from] crate::Error),
    /// The stream could not be read or written.
    #[error("cannot {action} the export stream {stream}: {source}")]
    Stream {
        /// `"read"` or `"write"`.
        action: &'static str,
        /// Where the stream is (a file, or standard input or output).
        stream: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The stream is not a whole, unaltered Cairn export; nothing was imported.
    #[error(
        "the export stream {stream} is damaged: {detail}; nothing was imported; export the \
         snapshot again (`cairn export SNAP`) and carry it whole"
    )]
    Damaged {
        /// Where the stream is.
        stream: String,
        /// What is wrong.
        detail: String,
    },
    /// The stream is a Cairn export of a version this build does not read.
    #[error(
        "the export stream {stream} is version {found} of the format; this cairn reads version \
         {VERSION}: import it with the cairn that exported it, or a newer one"
    )]
    Version {
        /// Where the stream is.
        stream: String,
        /// The version it says.
        found: u32,
    },
}

impl Classify for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Store(e) => e.kind(),
            Error::Stream { source, .. } => ErrorKind::of_io(source),
            Error::Damaged { .. } => ErrorKind::Corrupt,
            Error::Version { .. } => ErrorKind::Unsupported,
        }
    }

    fn path(&self) -> Option<&Path> {
        match self {
            Error::Store(e) => e.path(),
            _ => None,
        }
    }
}

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    snapshot: SnapshotId,
}

#[derive(Serialize, Deserialize)]
struct End {
    objects: u64,
}

/// What an export wrote.
#[derive(Debug, Clone, Serialize)]
pub struct ExportReport {
    /// The snapshot exported.
    pub snapshot: SnapshotId,
    /// Objects written (trees and blobs).
    pub objects: u64,
    /// Bytes of the stream.
    pub bytes: u64,
}

/// What an import did.
#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    /// Objects the stream carried, every one checked against its name.
    pub objects_read: u64,
    /// The copy into the target store: the snapshot (the same id as in the exporting store),
    /// and what the target lacked and got.
    #[serde(flatten)]
    pub copy: CopyReport,
}

/// Writes snapshot `id` of `store`, with every object it reaches, to `out` as one tar stream
/// (see the module's documentation). `stream` names `out` in errors.
pub fn export(
    store: &Store,
    id: &SnapshotId,
    out: &mut dyn Write,
    stream: &str,
) -> Result<ExportReport> {
    let _op = store.begin_operation(OperationKind::Copy, &[*id])?;
    let manifest_bytes = store.read_manifest_bytes(id)?;
    let manifest = Manifest::decode(&manifest_bytes, Some(id), &store.layout().manifest_path(id))?;
    let mut w = TarWriter {
        out,
        written: 0,
        stream,
    };
    let header = Header {
        format: FORMAT.into(),
        version: VERSION,
        snapshot: *id,
    };
    w.entry_bytes(
        HEADER_ENTRY,
        &serde_json::to_vec(&header).expect("a header serialises"),
    )?;
    w.entry_bytes(&format!("snapshots/{}", id.to_hex()), &manifest_bytes)?;
    let mut objects = 0u64;
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let mut stack = vec![manifest.root];
    while let Some(t) = stack.pop() {
        if !seen.insert(t.0) {
            continue;
        }
        let tree = store.read_tree(&t)?;
        w.entry_bytes(&format!("trees/{}", t.0.to_hex()), &tree.encode())?;
        objects += 1;
        for e in tree.entries() {
            match e.kind {
                EntryKind::Dir => stack.push(TreeId(e.id)),
                EntryKind::File | EntryKind::Symlink => {
                    if !seen.insert(e.id) {
                        continue;
                    }
                    let size = store.object_size(&e.id).ok_or_else(|| {
                        crate::Error::not_found(format!("object {}", e.id.short()))
                    })?;
                    w.entry_header(&format!("blobs/{}", e.id.to_hex()), size)?;
                    let mut counted = fsutil::CountingWriter {
                        inner: &mut *w.out,
                        n: 0,
                    };
                    store
                        .copy_object_to(&e.id, &mut counted)
                        .map_err(|e| e.at(PathBuf::from(stream)))?;
                    if counted.n != size {
                        return Err(crate::Error::corrupt(
                            format!("object {}", e.id.short()),
                            store.path(),
                            format!("it holds {} bytes, its index says {size}", counted.n),
                        )
                        .into());
                    }
                    w.written += size;
                    w.pad(size)?;
                    objects += 1;
                }
            }
        }
    }
    w.entry_bytes(
        END_ENTRY,
        &serde_json::to_vec(&End { objects }).expect("serialises"),
    )?;
    // Two zero blocks end a tar archive.
    w.write(&[0u8; 2 * BLOCK])?;
    w.out.flush().map_err(|e| w.err("write", e))?;
    Ok(ExportReport {
        snapshot: *id,
        objects,
        bytes: w.written,
    })
}

/// Reads an export stream from `input` into `target`, verified (see the module's
/// documentation); `stream` names `input` in errors. Nothing is written into `target` unless
/// the whole stream is sound.
pub fn import(target: &Store, input: &mut dyn Read, stream: &str) -> Result<ImportReport> {
    let staging = fsutil::temp_name(&target.layout().tmp, "import");
    let result = (|| {
        let staged = Store::open(
            &staging,
            StoreOptions {
                create: true,
                compression: Compression::None,
                ..StoreOptions::default()
            },
        )?;
        let (id, objects_read) = stage(&staged, input, stream)?;
        let damaged = |detail: String| Error::Damaged {
            stream: stream.to_string(),
            detail,
        };
        let copy = copy_snapshot(&staged, &id, target).map_err(|e| match e.kind() {
            // An object the snapshot reaches was not in the stream, or did not decode.
            ErrorKind::NotFound | ErrorKind::Corrupt => {
                damaged(format!("the snapshot is not whole in it ({e})"))
            }
            _ => Error::Store(e),
        })?;
        Ok(ImportReport { objects_read, copy })
    })();
    let _ = std::fs::remove_dir_all(&staging);
    result
}

/// Reads the stream into `staged`: the snapshot's id and the number of objects read.
fn stage(staged: &Store, input: &mut dyn Read, stream: &str) -> Result<(SnapshotId, u64)> {
    let damaged = |detail: String| Error::Damaged {
        stream: stream.to_string(),
        detail,
    };
    let mut r = TarReader { input, stream };
    let Some((name, size)) = r.next_header()? else {
        return Err(damaged("it is empty".into()));
    };
    if name != HEADER_ENTRY || size > 64 * 1024 {
        return Err(damaged(format!(
            "it is not a Cairn export (its first entry is {name:?}, not {HEADER_ENTRY})"
        )));
    }
    let header: Header = serde_json::from_slice(&r.body(size)?)
        .map_err(|e| damaged(format!("its {HEADER_ENTRY} does not decode: {e}")))?;
    if header.format != FORMAT {
        return Err(damaged(format!(
            "it is not a Cairn export (format {:?})",
            header.format
        )));
    }
    if header.version != VERSION {
        return Err(Error::Version {
            stream: stream.to_string(),
            found: header.version,
        });
    }
    let id = header.snapshot;
    let op = staged.begin_operation(OperationKind::Copy, &[id])?;
    let writer = staged.writer(&op);
    let mut manifest = None;
    let mut objects = 0u64;
    loop {
        let Some((name, size)) = r.next_header()? else {
            return Err(damaged(format!(
                "it ends after {objects} objects without its {END_ENTRY} entry: it was cut short"
            )));
        };
        if name == END_ENTRY {
            let end: End = serde_json::from_slice(&r.body(size.min(4096))?)
                .map_err(|e| damaged(format!("its {END_ENTRY} entry does not decode: {e}")))?;
            if end.objects != objects {
                return Err(damaged(format!(
                    "it says {} objects and holds {objects}",
                    end.objects
                )));
            }
            break;
        }
        let (kind, hex) = match name.split_once('/') {
            Some(("snapshots", hex)) => (None, hex),
            Some(("trees", hex)) => (Some(ObjectKind::Tree), hex),
            Some(("blobs", hex)) => (Some(ObjectKind::Blob), hex),
            _ => {
                return Err(damaged(format!(
                    "it holds an entry no export has: {name:?}"
                )))
            }
        };
        let named = ObjectId::from_hex(hex)
            .map_err(|_| damaged(format!("entry {name:?} is not named by an object id")))?;
        let got = match kind {
            None => {
                let bytes = r.body(size)?;
                if SnapshotId(named) != id {
                    return Err(damaged(format!(
                        "it holds another snapshot's manifest ({name})"
                    )));
                }
                let m = Manifest::decode(&bytes, Some(&id), Path::new(stream))
                    .map_err(|e| damaged(e.to_string()))?;
                manifest = Some((m, bytes));
                continue;
            }
            Some(ObjectKind::Tree) => writer.put(ObjectKind::Tree, &r.body(size)?)?.id,
            Some(_) => {
                let mut body = r.body_reader(size);
                let out = writer.put_blob_from(&mut body, size);
                // A short read shows as the reader's own error, said first.
                body.finish()?;
                let out = out?;
                if out.size != size {
                    return Err(damaged(format!(
                        "entry {name} holds {} bytes, not {size}",
                        out.size
                    )));
                }
                r.skip_padding(size)?;
                out.id
            }
        };
        if got != named {
            return Err(damaged(format!(
                "entry {name} was altered: its bytes hash to {}",
                got.short()
            )));
        }
        objects += 1;
    }
    let Some((_, bytes)) = manifest else {
        return Err(damaged(format!(
            "it lacks the manifest of snapshot {}",
            id.short()
        )));
    };
    writer.commit()?;
    fsutil::write_atomic(
        &staged.layout().tmp,
        &staged.layout().manifest_path(&id),
        &bytes,
    )?;
    Ok((id, objects))
}

struct TarWriter<'a> {
    out: &'a mut dyn Write,
    written: u64,
    stream: &'a str,
}

impl TarWriter<'_> {
    fn err(&self, action: &'static str, source: std::io::Error) -> Error {
        Error::Stream {
            action,
            stream: self.stream.to_string(),
            source,
        }
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.out
            .write_all(bytes)
            .map_err(|e| self.err("write", e))?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn entry_header(&mut self, name: &str, size: u64) -> Result<()> {
        let h = ustar_header(name, size);
        self.write(&h)
    }

    fn pad(&mut self, size: u64) -> Result<()> {
        let rem = (size % BLOCK as u64) as usize;
        if rem != 0 {
            self.write(&[0u8; BLOCK][..BLOCK - rem])?;
        }
        Ok(())
    }

    fn entry_bytes(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        self.entry_header(name, bytes.len() as u64)?;
        self.write(bytes)?;
        self.pad(bytes.len() as u64)
    }
}

/// A ustar header for a regular file `name` (at most 100 bytes) of `size` bytes: mode 0644,
/// owner 0, time 0, so that one snapshot always makes the same stream.
fn ustar_header(name: &str, size: u64) -> [u8; BLOCK] {
    let mut h = [0u8; BLOCK];
    let n = name.as_bytes();
    h[..n.len().min(100)].copy_from_slice(&n[..n.len().min(100)]);
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    if size < 0o77777777777 {
        h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    } else {
        // GNU's base-256 form for sizes past 8 GiB.
        h[124] = 0x80;
        h[128..136].copy_from_slice(&size.to_be_bytes());
    }
    h[136..148].copy_from_slice(b"00000000000\0");
    h[156] = b'0';
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}

struct TarReader<'a> {
    input: &'a mut dyn Read,
    stream: &'a str,
}

impl<'a> TarReader<'a> {
    fn damaged(&self, detail: String) -> Error {
        Error::Damaged {
            stream: self.stream.to_string(),
            detail,
        }
    }

    /// Reads into `buf` until it is full or the stream ends: how many bytes it got.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut got = 0;
        while got < buf.len() {
            match self.input.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Error::Stream {
                        action: "read",
                        stream: self.stream.to_string(),
                        source: e,
                    })
                }
            }
        }
        Ok(got)
    }

    /// Fills `buf` whole; a stream that ends first is damaged (cut short).
    fn read_exact(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        if self.fill(buf)? < buf.len() {
            return Err(self.damaged(format!("it ends in the middle of {what}: it was cut short")));
        }
        Ok(())
    }

    /// The next entry's name and size, `None` at the archive's end (a zero block, or the end
    /// of the stream on a block boundary).
    fn next_header(&mut self) -> Result<Option<(String, u64)>> {
        let mut h = [0u8; BLOCK];
        match self.fill(&mut h)? {
            0 => return Ok(None),
            BLOCK => {}
            _ => {
                return Err(
                    self.damaged("it ends in the middle of a header: it was cut short".into())
                )
            }
        }
        if h.iter().all(|&b| b == 0) {
            return Ok(None);
        }
        let stored = parse_octal(&h[148..156]);
        let mut sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        sum -= h[148..156].iter().map(|&b| u32::from(b)).sum::<u32>();
        sum += 8 * u32::from(b' ');
        if stored != Some(u64::from(sum)) {
            return Err(self.damaged(
                "a tar header's checksum does not match: it was altered, or it is no tar".into(),
            ));
        }
        if !matches!(h[156], b'0' | 0) {
            return Err(self.damaged(format!(
                "it holds a tar entry of type {:?}, which no export has",
                char::from(h[156])
            )));
        }
        let end = h[..100].iter().position(|&b| b == 0).unwrap_or(100);
        let name = String::from_utf8_lossy(&h[..end]).into_owned();
        let size = if h[124] & 0x80 != 0 {
            u64::from_be_bytes(h[128..136].try_into().expect("8 bytes"))
        } else {
            parse_octal(&h[124..136])
                .ok_or_else(|| self.damaged(format!("entry {name:?} has no readable size")))?
        };
        Ok(Some((name, size)))
    }

    /// An entry's body (small: a header, a manifest, a tree) and its padding.
    fn body(&mut self, size: u64) -> Result<Vec<u8>> {
        let len =
            usize::try_from(size).map_err(|_| self.damaged(format!("an entry of {size} bytes")))?;
        let mut buf = vec![0u8; len];
        self.read_exact(&mut buf, "an entry")?;
        self.skip_padding(size)?;
        Ok(buf)
    }

    fn skip_padding(&mut self, size: u64) -> Result<()> {
        let rem = (size % BLOCK as u64) as usize;
        if rem != 0 {
            let mut pad = [0u8; BLOCK];
            self.read_exact(&mut pad[..BLOCK - rem], "an entry's padding")?;
            if pad.iter().any(|&b| b != 0) {
                return Err(self.damaged(
                    "an entry's padding holds bytes other than zeros: it was altered".into(),
                ));
            }
        }
        Ok(())
    }

    /// A reader of the next `size` bytes (a large blob, streamed).
    fn body_reader(&mut self, size: u64) -> BodyReader<'_, 'a> {
        BodyReader {
            r: self,
            left: size,
            short: false,
        }
    }
}

/// Reads exactly `left` bytes of an entry; a stream that ends first is remembered as cut
/// short (see [`BodyReader::finish`]).
struct BodyReader<'r, 'a> {
    r: &'r mut TarReader<'a>,
    left: u64,
    short: bool,
}

impl BodyReader<'_, '_> {
    fn finish(self) -> Result<()> {
        if self.short || self.left > 0 {
            return Err(self
                .r
                .damaged("it ends in the middle of an object: it was cut short".into()));
        }
        Ok(())
    }
}

impl Read for BodyReader<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.r.input.read(&mut buf[..want])?;
        if n == 0 {
            self.short = true;
        }
        self.left -= n as u64;
        Ok(n)
    }
}

fn parse_octal(field: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(field).ok()?;
    let s = s.trim_matches(|c: char| c == '\0' || c == ' ');
    if s.is_empty() {
        return None;
    }
    u64::from_str_radix(s, 8).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 58: the header this module writes is one `tar` reads; its checksum is checked back.
    #[test]
    fn a_header_written_reads_back_with_its_name_and_size() {
        let h = ustar_header("blobs/abc", 1234);
        let mut input: &[u8] = &h;
        let mut r = TarReader {
            input: &mut input,
            stream: "test",
        };
        assert_eq!(
            r.next_header().expect("a sound header"),
            Some(("blobs/abc".to_string(), 1234))
        );
        let mut bad = h;
        bad[3] ^= 1;
        let mut input: &[u8] = &bad;
        let mut r = TarReader {
            input: &mut input,
            stream: "test",
        };
        assert!(matches!(r.next_header(), Err(Error::Damaged { .. })));
    }
}
