//! Integration tests: the real server, a real redis-server, a real SQLite database.

mod access;
mod accounts;
mod api;
mod audit;
mod cluster;
mod faults;
mod gate;
mod hostile;
mod lifecycle;
mod live;
mod migrations;
mod monitoring;
mod operators;
mod order_ids;
mod pages;
mod process;
mod recovery;
mod report;
mod run_sale;
mod sale_day;
mod shop_login;
mod sign_up;
mod storm;
mod support;
mod warm;
