//! Integration tests of `cairn-restore`, on real temporary trees.

mod ahead;
mod attack;
mod behaviour;
mod crash;
mod daemon;
mod delegated;
mod fixtures;
mod property;
mod statcache;
mod watched;
