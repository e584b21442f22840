//! What the floors above work out once from a run's samples (a process's classified samples) and
//! several rules ask for again: kept beside the run and shared by every view of it, since the
//! views (the job's GPUs, the loop without its phases) keep the samples whole.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gpulse_model::Stacks;

/// Each entry is keyed by what it is (its type and a key of its own) and by the samples it was
/// worked out from: a run given other stacks asks again.
#[derive(Default)]
pub struct Memo {
    entries: Mutex<HashMap<(TypeId, u64), Entry>>,
}

struct Entry {
    /// The stacks it came from, held so that their address is never another's while it lives;
    /// `None` for a value seeded from outside, which holds for any stacks this memo is given.
    from: Option<Arc<Stacks>>,
    value: Arc<dyn Any + Send + Sync>,
}

impl Memo {
    /// The value of `key` for `stacks`, made by `make` the first time it is asked for.
    pub(crate) fn get<T: Any + Send + Sync>(&self, stacks: &Arc<Stacks>, key: u64, make: impl FnOnce() -> T) -> Arc<T> {
        let k = (TypeId::of::<T>(), key);
        if let Some(e) = self.entries.lock().unwrap_or_else(|e| e.into_inner()).get(&k)
            && e.from.as_ref().is_none_or(|from| Arc::ptr_eq(from, stacks))
            && let Ok(v) = e.value.clone().downcast::<T>()
        {
            return v;
        }
        // Made outside the lock: making may ask for other entries.
        let v = Arc::new(make());
        let entry = Entry { from: Some(stacks.clone()), value: v.clone() };
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).insert(k, entry);
        v
    }

    /// Makes `value` the entry of `key` whatever stacks are asked with: for what a caller keeps
    /// across runs whose stacks grow but keep their ids' meaning (the live window's).
    pub(crate) fn seed<T: Any + Send + Sync>(&self, key: u64, value: Arc<T>) {
        let entry = Entry { from: None, value };
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).insert((TypeId::of::<T>(), key), entry);
    }
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.entries.lock().map_or(0, |e| e.len());
        write!(f, "Memo({n} entries)")
    }
}
