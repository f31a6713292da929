//! What every request reads, in memory: the organization snapshots and the
//! account table. Only the commit path changes them, after a change is
//! durable and before it is answered, so the very next request sees it.

pub mod accounts;
pub mod directory;
pub mod recent_checks;
