//! Integration tests of `cairn-rewind`: the thread database against a recording fake of the
//! `Files` seam, child processes sharing one database, and crashes.

mod checkpoints;
mod crash;
mod db;
mod events;
mod fake;
mod fleet;
mod fork;
mod inbox;
mod memory;
mod names;
mod pg;
mod processes;
mod real;
mod rewind;
mod runs;
mod seam;
mod threads;
mod util;
