//! The admin API and bootstrap.
