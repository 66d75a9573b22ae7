//! Placeholder crate root; filled by its issue.
