//! Large objects: a blob too large for a pack in a file of its own, its header and its
//! (optionally zstd-compressed) bytes streamed, never held whole.

use crate::error::{Error, Result};
use crate::id::ObjectId;
use crate::pack::{Codec, ObjectKind};
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Magic at the start of a large object's file.
pub const LARGE_MAGIC: &[u8; 8] = b"CAIRNLRG";
/// Length of a large object's header.
pub const LARGE_HEADER_LEN: u64 = 24;
const LARGE_VERSION: u32 = 1;
pub(super) const CHUNK: usize = 256 * 1024;

#[derive(Debug, Clone, Copy)]
pub(crate) struct LargeHeader {
    pub(crate) kind: ObjectKind,
    pub(crate) codec: Codec,
    pub(crate) raw_len: u64,
}

pub(crate) fn read_large_header(path: &Path) -> Result<LargeHeader> {
    let f = File::open(path).map_err(|e| Error::io("open object", path, e))?;
    let mut h = [0u8; LARGE_HEADER_LEN as usize];
    f.read_exact_at(&mut h, 0).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => {
            Error::corrupt("large object", path, "truncated header")
        }
        _ => Error::io("read object", path, e),
    })?;
    parse_large_header(&h, path)
}

fn parse_large_header(h: &[u8; LARGE_HEADER_LEN as usize], path: &Path) -> Result<LargeHeader> {
    let bad = |d: &str| Error::corrupt("large object", path, d);
    if &h[..8] != LARGE_MAGIC {
        return Err(bad("bad magic"));
    }
    let version = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
    if version != LARGE_VERSION {
        return Err(Error::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            supported: LARGE_VERSION,
        });
    }
    Ok(LargeHeader {
        kind: ObjectKind::from_code(h[12]).ok_or_else(|| bad("unknown kind"))?,
        codec: Codec::from_code(h[13]).ok_or_else(|| bad("unknown codec"))?,
        raw_len: u64::from_le_bytes(h[16..24].try_into().expect("8 bytes")),
    })
}

pub(super) fn encode_large_header(h: &LargeHeader) -> [u8; LARGE_HEADER_LEN as usize] {
    let mut out = [0u8; LARGE_HEADER_LEN as usize];
    out[..8].copy_from_slice(LARGE_MAGIC);
    out[8..12].copy_from_slice(&LARGE_VERSION.to_le_bytes());
    out[12] = h.kind.code();
    out[13] = h.codec.code();
    out[16..24].copy_from_slice(&h.raw_len.to_le_bytes());
    out
}

/// Streams a large object into `out`, checking its length and hash at the end.
pub(crate) fn copy_large(path: &Path, id: &ObjectId, out: &mut dyn Write) -> Result<ObjectKind> {
    let mut f = File::open(path).map_err(|e| Error::io("open object", path, e))?;
    let mut h = [0u8; LARGE_HEADER_LEN as usize];
    f.read_exact(&mut h).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => {
            Error::corrupt(format!("object {}", id.short()), path, "truncated header")
        }
        _ => Error::io("read object", path, e),
    })?;
    let header = parse_large_header(&h, path)?;
    let mut hasher = crate::id::Hasher::new();
    let mut n = 0u64;
    let mut buf = vec![0u8; CHUNK];
    let bad = |d: String| Error::corrupt(format!("object {}", id.short()), path, d);
    let mut reader: Box<dyn Read> = match header.codec {
        Codec::Raw => Box::new(f),
        Codec::Zstd => Box::new(
            zstd::stream::read::Decoder::new(f).map_err(|e| Error::io("read object", path, e))?,
        ),
    };
    loop {
        let k = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(bad(format!("does not read back: {e}"))),
        };
        hasher.update(&buf[..k]);
        n += k as u64;
        if n > header.raw_len {
            return Err(bad("longer than recorded".into()));
        }
        out.write_all(&buf[..k]).map_err(|e| Error::Stream {
            action: "write",
            source: e,
        })?;
    }
    if n != header.raw_len {
        return Err(bad(format!(
            "{n} bytes where {} were stored",
            header.raw_len
        )));
    }
    let actual = hasher.finish();
    if actual != *id {
        return Err(bad(format!("its bytes hash to {}", actual.short())));
    }
    Ok(header.kind)
}
