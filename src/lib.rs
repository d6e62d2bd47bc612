//! gpumem: know your GPU memory before you deploy.
//!
//! The library computes and never prints: [`backend`] finds devices, [`units`] parses and
//! formats sizes, and [`output`] renders reports for the binary. The command layer
//! ([`commands`]) wires clap's types ([`cli`]) to them.

pub mod alloc;
pub mod backend;
pub mod cli;
pub mod commands;
pub mod error;
pub mod exit;
pub mod model;
pub mod output;
pub mod plan;
pub mod units;
pub mod workload;
