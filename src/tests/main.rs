//! Integration tests: the real server, a real redis-server, a real SQLite database (or
//! PostgreSQL and a Redis Cluster in the second pass). One test crate, as svix-server
//! keeps its `tests/it`: each file a domain's drills, the helpers apart in `support/`
//! (a server in this process, `support::TestApp`; one as a child process,
//! `support::process`).

mod access;
mod accounts;
mod api;
mod audit;
mod cluster;
mod faults;
mod gate;
mod hostile;
mod idempotency;
mod lifecycle;
mod live;
mod migrations;
mod monitoring;
mod names;
mod operators;
mod order_ids;
mod pages;
mod paging;
mod recovery;
mod redis_keys;
mod refusals;
mod report;
mod run_sale;
mod sale_day;
mod shards;
mod shop_login;
mod sign_up;
mod storm;
mod support;
mod warm;
