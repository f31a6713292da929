//! A value derived from a snapshot, computed on first use.

use std::fmt;
use std::sync::OnceLock;

/// A lazily computed value that a copy does not inherit: a snapshot is
/// copied only to be changed, and what was derived from the original need
/// not hold for the copy.
pub struct Memo<T>(OnceLock<T>);

impl<T> Memo<T> {
    /// Empty: computed on first use.
    pub fn new() -> Self {
        Memo(OnceLock::new())
    }

    /// The value, computing it with `compute` the first time.
    pub fn get_or_init(&self, compute: impl FnOnce() -> T) -> &T {
        self.0.get_or_init(compute)
    }
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Memo::new()
    }
}

impl<T> Clone for Memo<T> {
    fn clone(&self) -> Self {
        Memo::new()
    }
}

impl<T> fmt::Debug for Memo<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "Memo(computed)"
        } else {
            "Memo(empty)"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn computes_once_and_copies_start_empty() {
        let memo = Memo::new();
        assert_eq!(*memo.get_or_init(|| 1), 1);
        assert_eq!(*memo.get_or_init(|| 2), 1);
        let copy = memo.clone();
        assert_eq!(*copy.get_or_init(|| 3), 3);
    }
}
