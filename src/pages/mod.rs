//! Pages: each composes components of several domains. Pages sit above the domains;
//! no domain imports a page or the shell (`app.rs`).

pub mod admin;
pub mod report;
pub mod shop;
