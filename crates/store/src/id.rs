//! Object and snapshot ids: SHA-256 digests, typed by what they name.

use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// The length of an id in bytes.
pub const ID_LEN: usize = 32;

/// The shortest prefix, in hex characters, that may name an id.
pub const MIN_PREFIX_LEN: usize = 4;

/// A SHA-256 digest naming an object (a blob or a tree) or a snapshot manifest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(pub [u8; ID_LEN]);

impl ObjectId {
    /// The id of `bytes`: their SHA-256.
    pub fn of(bytes: &[u8]) -> Self {
        ObjectId(Sha256::digest(bytes).into())
    }

    /// The raw digest.
    pub fn as_bytes(&self) -> &[u8; ID_LEN] {
        &self.0
    }

    /// The full lower-case hex form (64 characters).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The first `n` hex characters, for people.
    pub fn short(&self) -> String {
        let mut s = self.to_hex();
        s.truncate(12);
        s
    }

    /// Parses a full 64-character hex id.
    pub fn from_hex(s: &str) -> Result<Self, Error> {
        let mut out = [0u8; ID_LEN];
        if s.len() != ID_LEN * 2 {
            return Err(Error::InvalidArgument(format!(
                "'{s}' is not a full id: expected 64 hex characters, got {}",
                s.len()
            )));
        }
        hex::decode_to_slice(s, &mut out)
            .map_err(|_| Error::InvalidArgument(format!("'{s}' is not a hex id")))?;
        Ok(ObjectId(out))
    }

    /// Whether this id's hex form starts with the (lower-case) hex prefix `prefix`.
    pub fn has_prefix(&self, prefix: &str) -> bool {
        let hex = self.to_hex();
        hex.starts_with(&prefix.to_ascii_lowercase())
    }
}

/// An incremental SHA-256 hasher producing an [`ObjectId`].
#[derive(Default, Clone)]
pub struct Hasher(Sha256);

impl Hasher {
    /// A new hasher.
    pub fn new() -> Self {
        Hasher(Sha256::new())
    }
    /// Adds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    /// Adds everything `reader` yields, a chunk at a time (never held whole); returns how many
    /// bytes were read. An interrupted read is retried.
    pub fn update_from(&mut self, reader: &mut dyn std::io::Read) -> std::io::Result<u64> {
        // 64 KiB: below malloc's mmap threshold, so hashing many small files costs no mmap.
        let mut buf = vec![0u8; 64 * 1024];
        let mut n = 0u64;
        loop {
            match reader.read(&mut buf) {
                Ok(0) => return Ok(n),
                Ok(k) => {
                    self.update(&buf[..k]);
                    n += k as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The id of everything added.
    pub fn finish(self) -> ObjectId {
        ObjectId(self.0.finalize().into())
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({})", self.short())
    }
}

impl FromStr for ObjectId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        ObjectId::from_hex(s)
    }
}

impl serde::Serialize for ObjectId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&self.to_hex())
        } else {
            self.0.serialize(s)
        }
    }
}

/// In JSON an id is its 64 lowercase hex digits.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for ObjectId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ObjectId".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "An object id: 64 lowercase hex digits.",
            "type": "string",
            "pattern": "^[0-9a-f]{64}$"
        })
    }
}

impl<'de> serde::Deserialize<'de> for ObjectId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let s = String::deserialize(d)?;
            ObjectId::from_hex(&s).map_err(serde::de::Error::custom)
        } else {
            <[u8; ID_LEN]>::deserialize(d).map(ObjectId)
        }
    }
}

/// Defines a typed id wrapping [`ObjectId`], with hex display, parsing and serde.
macro_rules! typed_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[serde(transparent)]
        pub struct $name(pub ObjectId);

        impl $name {
            /// The untyped object id.
            pub fn object(&self) -> ObjectId {
                self.0
            }
            /// The full hex form.
            pub fn to_hex(&self) -> String {
                self.0.to_hex()
            }
            /// A short hex form for people (12 characters).
            pub fn short(&self) -> String {
                self.0.short()
            }
            /// Parses a full 64-character hex id.
            pub fn from_hex(s: &str) -> Result<Self, Error> {
                ObjectId::from_hex(s).map($name)
            }
        }

        impl From<ObjectId> for $name {
            fn from(id: ObjectId) -> Self {
                $name(id)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.0.short())
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self, Error> {
                Self::from_hex(s)
            }
        }
    };
}

typed_id!(
    /// The id of a blob: the SHA-256 of a file's bytes (or of a symlink's target), so
    /// `sha256sum FILE` names it.
    BlobId
);
typed_id!(
    /// The id of a tree: the SHA-256 of its canonical encoding (see `docs/FORMAT.md`).
    TreeId
);
typed_id!(
    /// The id of a snapshot: the SHA-256 of its encoded manifest file.
    SnapshotId
);

/// Resolves a hex prefix of at least [`MIN_PREFIX_LEN`] characters against `candidates`.
///
/// A full id that is not among the candidates is `NOT_FOUND`; an ambiguous prefix is an
/// `INVALID_ARGUMENT` error listing the candidates it matches.
pub fn resolve_prefix<I>(prefix: &str, what: &str, candidates: I) -> Result<ObjectId, Error>
where
    I: IntoIterator<Item = ObjectId>,
{
    let prefix = prefix.trim();
    if prefix.len() < MIN_PREFIX_LEN || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::InvalidArgument(format!(
            "'{prefix}' does not name a {what}: give its id or a prefix of at least {MIN_PREFIX_LEN} hex characters"
        )));
    }
    let matches: Vec<ObjectId> = candidates
        .into_iter()
        .filter(|id| id.has_prefix(prefix))
        .collect();
    match matches.len() {
        0 => Err(Error::not_found(format!("{what} '{prefix}'"))),
        1 => Ok(matches[0]),
        _ => {
            let mut names: Vec<String> = matches.iter().map(|m| m.short()).collect();
            names.sort();
            Err(Error::InvalidArgument(format!(
                "the prefix '{prefix}' is ambiguous: it names the {what}s {}; give more characters",
                names.join(", ")
            )))
        }
    }
}
