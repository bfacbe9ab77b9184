//! Integration tests of `cairn-snapshot`, on real temporary trees.

mod capture;
mod diff;
mod fixtures;
mod skipping;
mod statcache;
mod statcache_property;
mod totals;
mod watch;
