//! `cairn-restore`: not built yet. This crate is empty on purpose; see the open issues.
