//! Typed ids: threads, entries, checkpoints, runs, tool calls, memory items, rewinds and forks.
//!
//! Every id is a short string. Thread ids may be chosen by the caller; every other id is made by
//! this crate (a prefix and 20 hex digits), so it is unique across processes sharing a database.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Defines a typed string id with display, serde and SQLite conversions.
macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The prefix of the ids this crate makes.
            pub const PREFIX: &'static str = $prefix;

            /// Wraps an id as given (no check; ids read back from the database or a report).
            pub fn new(id: impl Into<String>) -> Self {
                $name(id.into())
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// A new unique id.
            pub(crate) fn generate() -> Self {
                $name(format!("{}{}", $prefix, fresh_hex()))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name(s.to_string())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                $name(s)
            }
        }

        impl From<&$name> for $name {
            fn from(s: &$name) -> Self {
                s.clone()
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl crate::sql::ToValue for $name {
            fn to_value(&self) -> crate::sql::Value {
                crate::sql::ToValue::to_value(&self.0)
            }
        }

        impl crate::sql::FromValue for $name {
            fn from_value(v: crate::sql::Value) -> std::result::Result<Self, String> {
                <String as crate::sql::FromValue>::from_value(v).map($name)
            }
        }
    };
}

string_id!(
    /// The id of a thread (a conversation). Callers may choose it: 1 to 128 of
    /// `[A-Za-z0-9_.:@-]`; otherwise one is made (`t_…`).
    ThreadId,
    "t_"
);
string_id!(
    /// The id of an entry of a thread (`e_…`).
    EntryId,
    "e_"
);
string_id!(
    /// The id of a checkpoint: a snapshot this crate took and bound to a thread (`cp_…`).
    CheckpointId,
    "cp_"
);
string_id!(
    /// The id of a run (`r_…`).
    RunId,
    "r_"
);
string_id!(
    /// The id of a tool call of a run (`tc_…`).
    ToolCallId,
    "tc_"
);
string_id!(
    /// The id of a memory item (`m_…`).
    MemoryId,
    "m_"
);
string_id!(
    /// The id of a rewind record (`rw_…`).
    RewindId,
    "rw_"
);
string_id!(
    /// The id of a fork record (`fk_…`).
    ForkId,
    "fk_"
);

impl ThreadId {
    /// Checks a caller-chosen thread id: 1 to 128 of `[A-Za-z0-9_.:@-]`.
    pub fn check(&self) -> crate::Result<()> {
        let ok = !self.0.is_empty()
            && self.0.len() <= 128
            && self
                .0
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.:@-".contains(&b));
        if ok {
            Ok(())
        } else {
            Err(crate::Error::InvalidArgument(format!(
                "'{}' is not a thread id: use 1 to 128 letters, digits, '_', '.', ':', '@' or '-'",
                self.0
            )))
        }
    }
}

/// 20 hex digits unique across processes: a hash of the pid, the time, a counter and a
/// per-process seed.
pub(crate) fn fresh_hex() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static SEED: std::sync::OnceLock<[u8; 32]> = std::sync::OnceLock::new();
    let seed = SEED.get_or_init(|| {
        let mut h = Sha256::new();
        h.update(std::process::id().to_le_bytes());
        h.update(nanos().to_le_bytes());
        let local = 0u8;
        h.update((std::ptr::addr_of!(local) as usize).to_le_bytes());
        h.finalize().into()
    });
    let mut h = Sha256::new();
    h.update(seed);
    h.update(std::process::id().to_le_bytes());
    h.update(nanos().to_le_bytes());
    h.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    let digest = h.finalize();
    hex::encode(&digest[..10])
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}
