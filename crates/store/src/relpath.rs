//! Paths relative to a workspace root, as raw bytes, with an unambiguous JSON form.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A path relative to a workspace root: raw bytes, components separated by `/`, no leading
/// `/`. In JSON (and every human-readable serde format) it is a string when the bytes are
/// UTF-8, and `{"hex": "…"}` otherwise, so every name round-trips exactly.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RelPath(pub Vec<u8>);

impl RelPath {
    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The path for the operating system.
    pub fn as_path(&self) -> &std::path::Path {
        use std::os::unix::ffi::OsStrExt;
        std::path::Path::new(std::ffi::OsStr::from_bytes(&self.0))
    }

    /// The parent path (empty for a top-level entry) and the last component.
    pub fn split_last(&self) -> (&[u8], &[u8]) {
        match self.0.iter().rposition(|&b| b == b'/') {
            Some(i) => (&self.0[..i], &self.0[i + 1..]),
            None => (&[], &self.0),
        }
    }

    /// A text form for people: lossy where the name is not UTF-8, and with control
    /// characters (C0, DEL, C1) written as escapes (`\x1b`, `\n`, `\u{9b}`), so that a file
    /// name cannot drive the terminal that shows it nor fake a line of output. Machine forms
    /// (JSON, the hex form) keep the bytes exactly.
    pub fn display(&self) -> std::borrow::Cow<'_, str> {
        escape_controls(String::from_utf8_lossy(&self.0))
    }
}

/// `text` with its control characters (C0, DEL, C1) escaped, as [`RelPath::display`] shows
/// them; borrowed when it has none.
pub fn escape_controls(text: std::borrow::Cow<'_, str>) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Joins a relative directory path (empty for the root) and an entry name with `/`.
pub fn join(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    if prefix.is_empty() {
        return name.to_vec();
    }
    let mut p = Vec::with_capacity(prefix.len() + 1 + name.len());
    p.extend_from_slice(prefix);
    p.push(b'/');
    p.extend_from_slice(name);
    p
}

impl From<Vec<u8>> for RelPath {
    fn from(v: Vec<u8>) -> Self {
        RelPath(v)
    }
}

impl From<&[u8]> for RelPath {
    fn from(v: &[u8]) -> Self {
        RelPath(v.to_vec())
    }
}

impl From<&str> for RelPath {
    fn from(v: &str) -> Self {
        RelPath(v.as_bytes().to_vec())
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.display())
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

#[derive(Serialize, Deserialize)]
struct HexForm {
    hex: String,
}

impl Serialize for RelPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            match std::str::from_utf8(&self.0) {
                Ok(text) => s.serialize_str(text),
                Err(_) => HexForm {
                    hex: hex::encode(&self.0),
                }
                .serialize(s),
            }
        } else {
            s.serialize_bytes(&self.0)
        }
    }
}

/// In JSON a path is a string when it is UTF-8, else `{"hex": ...}` of its bytes.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for RelPath {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Path".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A path (relative to the workspace root where it is one): a string when it is UTF-8, else {\"hex\": ...} of its bytes.",
            "anyOf": [
                { "type": "string" },
                {
                    "type": "object",
                    "properties": { "hex": { "type": "string" } },
                    "required": ["hex"],
                    "additionalProperties": false
                }
            ]
        })
    }
}

impl<'de> Deserialize<'de> for RelPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            #[derive(Deserialize)]
            #[serde(untagged)]
            enum Form {
                Text(String),
                Hex(HexForm),
            }
            match Form::deserialize(d)? {
                Form::Text(t) => Ok(RelPath(t.into_bytes())),
                Form::Hex(h) => hex::decode(&h.hex)
                    .map(RelPath)
                    .map_err(serde::de::Error::custom),
            }
        } else {
            let bytes: serde_bytes_compat::ByteBuf = Deserialize::deserialize(d)?;
            Ok(RelPath(bytes.0))
        }
    }
}

/// Serde for a path field that may not be UTF-8 (`#[serde(with =
/// "cairn_store::relpath::os_path")]`), written as a [`RelPath`] is: in JSON a string when it
/// is UTF-8, else `{"hex": ...}` of its bytes; in a binary format (the watcher's socket) its
/// bytes. Serde's own `Path` refuses a path that is not UTF-8 in every format, so a report
/// naming a workspace at such a path could not be written at all.
pub mod os_path {
    use super::RelPath;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::{Path, PathBuf};

    /// A path borrowed, serialised as [`os_path`] does.
    pub(crate) struct Form<'a>(pub &'a Path);

    impl Serialize for Form<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            RelPath(self.0.as_os_str().as_bytes().to_vec()).serialize(s)
        }
    }

    pub(crate) fn from_rel(r: RelPath) -> PathBuf {
        PathBuf::from(std::ffi::OsString::from_vec(r.0))
    }

    /// Serialises `p`.
    pub fn serialize<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
        Form(p).serialize(s)
    }

    /// Reads a path written by [`serialize`] (or any string).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        RelPath::deserialize(d).map(from_rel)
    }
}

/// [`os_path`] for an optional path.
pub mod opt_os_path {
    use super::os_path::{from_rel, Form};
    use super::RelPath;
    use serde::{Deserialize, Deserializer, Serializer};
    use std::path::PathBuf;

    /// Serialises `p`.
    pub fn serialize<S: Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        match p {
            Some(p) => s.serialize_some(&Form(p)),
            None => s.serialize_none(),
        }
    }

    /// Reads a path written by [`serialize`].
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        Option::<RelPath>::deserialize(d).map(|r| r.map(from_rel))
    }
}

/// [`os_path`] for a list of paths.
pub mod os_paths {
    use super::os_path::{from_rel, Form};
    use super::RelPath;
    use serde::ser::SerializeSeq;
    use serde::{Deserialize, Deserializer, Serializer};
    use std::path::PathBuf;

    /// Serialises `paths`.
    pub fn serialize<S: Serializer>(paths: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(paths.len()))?;
        for p in paths {
            seq.serialize_element(&Form(p))?;
        }
        seq.end()
    }

    /// Reads paths written by [`serialize`].
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
        Vec::<RelPath>::deserialize(d).map(|v| v.into_iter().map(from_rel).collect())
    }
}

mod serde_bytes_compat {
    //! A byte buffer that deserialises from serde's bytes (or a sequence of u8).
    use serde::de::{Deserialize, Deserializer, SeqAccess, Visitor};
    use std::fmt;

    pub struct ByteBuf(pub Vec<u8>);

    impl<'de> Deserialize<'de> for ByteBuf {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = ByteBuf;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("bytes")
                }
                fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<ByteBuf, E> {
                    Ok(ByteBuf(v.to_vec()))
                }
                fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<ByteBuf, E> {
                    Ok(ByteBuf(v))
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ByteBuf, A::Error> {
                    let mut out = Vec::new();
                    while let Some(b) = seq.next_element::<u8>()? {
                        out.push(b);
                    }
                    Ok(ByteBuf(out))
                }
            }
            d.deserialize_bytes(V)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStrExt;
    use std::path::PathBuf;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Paths {
        #[serde(with = "super::os_path")]
        one: PathBuf,
        #[serde(with = "super::opt_os_path")]
        maybe: Option<PathBuf>,
        #[serde(with = "super::os_paths")]
        many: Vec<PathBuf>,
    }

    #[test]
    fn a_path_that_is_not_utf8_round_trips_as_hex_in_json_and_as_bytes_in_postcard() {
        let odd = PathBuf::from(std::ffi::OsStr::from_bytes(b"/w/ws-\xff"));
        let p = Paths {
            one: odd.clone(),
            maybe: Some(PathBuf::from("/w/plain")),
            many: vec![PathBuf::from("/a"), odd.clone()],
        };
        let json = serde_json::to_value(&p).expect("encodes");
        assert_eq!(
            json,
            serde_json::json!({
                "one": {"hex": "2f772f77732dff"},
                "maybe": "/w/plain",
                "many": ["/a", {"hex": "2f772f77732dff"}],
            })
        );
        assert_eq!(serde_json::from_value::<Paths>(json).expect("decodes"), p);
        let bytes = postcard::to_stdvec(&p).expect("encodes");
        assert_eq!(postcard::from_bytes::<Paths>(&bytes).expect("decodes"), p);
        let none = Paths { maybe: None, ..p };
        let json = serde_json::to_value(&none).expect("encodes");
        assert!(json["maybe"].is_null());
        assert_eq!(
            serde_json::from_value::<Paths>(json).expect("decodes"),
            none
        );
    }
}
