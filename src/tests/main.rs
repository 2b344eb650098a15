//! Integration tests: the real server, a real redis-server, a real SQLite database.

mod api;
mod gate;
mod recovery;
mod storm;
mod support;
mod warm;
