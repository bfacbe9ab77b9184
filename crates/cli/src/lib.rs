//! `cairn-cli`: not built yet. This crate is empty on purpose; see the open issues.
