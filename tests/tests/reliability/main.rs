//! Reliability (issue 11): crash loops, faults, concurrency and hostile input across the
//! crates, showing that no data is lost. What is promised and the figures these tests produce
//! are in `docs/RELIABILITY.md`; `CAIRN_LONG=1` runs the long versions.

mod child;
mod concurrency;
mod corpus;
mod crash;
mod faults;
mod hostile;
mod util;
