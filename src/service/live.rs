//! What the gateway reads again without a restart (the command registry, the reply templates, the
//! tenants): each read whole at one moment and swapped whole, so that a reader sees the old value
//! or the new one, never half of each (`arc-swap`: a read is a pointer load, no lock).

use std::sync::Arc;

use arc_swap::ArcSwap;

#[derive(Debug)]
pub struct Live<T>(Arc<ArcSwap<T>>);

impl<T> Clone for Live<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> Live<T> {
    pub fn new(value: T) -> Self {
        Self(Arc::new(ArcSwap::from_pointee(value)))
    }

    /// The value now; a reload after this does not change what the caller holds.
    pub fn get(&self) -> Arc<T> {
        self.0.load_full()
    }

    /// Puts `value` in place; returns the one it replaces.
    pub fn set(&self, value: T) -> Arc<T> {
        self.0.swap(Arc::new(value))
    }
}
