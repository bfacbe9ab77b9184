//! Integration tests of `cairn-store`, one module per module of `src`, sharing the fixtures in
//! `util`. Tests that need a second process re-run this binary on a helper test that is ignored
//! unless run that way (see `util::helper`).

// Tests set options field by field from `Default`, which builds whether or not an options struct
// is `#[non_exhaustive]`; this lint would have them use struct-update syntax instead.
#![allow(clippy::field_reassign_with_default)]

mod copy;
mod gc;
mod hostile;
mod id;
mod index_read;
mod location;
mod lock;
mod manifest;
mod merge;
mod pack_view;
mod retain;
mod stale_view;
mod store;
mod tree;
mod util;
mod verify;
