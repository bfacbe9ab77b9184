//! The watcher's socket as every snapshotting process meets it, below the workspace: its
//! protocol ([`protocol`]), the lock that makes one daemon per workspace ([`lock`]) and the
//! client's side ([`client`]). The daemon that serves it (`crate::watch`, above the
//! workspace) and the workspace both build on this module, and it on neither.

pub(crate) mod client;
pub(crate) mod lock;
pub(crate) mod protocol;
