//! Giving a burst's table space back.
//!
//! A `HashMap` or `VecDeque` that grew to hold 500 pods keeps its table when the pods
//! are deleted: std never shrinks one by itself. After a mass delete, the per-pod maps
//! (workers, backoffs, the pod cache, the relister's view, ...) each held 50–160 kB of
//! empty buckets (heaptrack, 500 pods deleted).
//! [`ShrinkSparse::shrink_sparse`] shrinks a table once it is at most a quarter full,
//! to twice what it holds, so the next few pods do not make it grow again. The owners
//! call it from housekeeping; a check is two loads and never allocates.
//!
//! A leaf: std only.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hash};

/// Tables at or under this capacity are left alone: not worth a reallocation.
pub(crate) const MIN_CAPACITY: usize = 32;

/// The capacity to shrink to, if a table of `capacity` holding `len` should shrink.
pub(crate) fn shrink_target(len: usize, capacity: usize) -> Option<usize> {
    if capacity <= MIN_CAPACITY || len > capacity / 4 {
        return None;
    }
    Some((len * 2).max(MIN_CAPACITY / 2))
}

/// A collection whose capacity can be given back when it is mostly empty.
pub(crate) trait ShrinkSparse {
    /// Shrinks the table if it is at most a quarter full; true if it did.
    fn shrink_sparse(&mut self) -> bool;
}

/// `ShrinkSparse` for a std collection with `len`, `capacity` and `shrink_to`.
macro_rules! shrink_sparse {
    ($([$($generics:tt)*] $ty:ty),* $(,)?) => {$(
        impl<$($generics)*> ShrinkSparse for $ty {
            fn shrink_sparse(&mut self) -> bool {
                match shrink_target(self.len(), self.capacity()) {
                    Some(to) => {
                        self.shrink_to(to);
                        true
                    }
                    None => false,
                }
            }
        }
    )*};
}

shrink_sparse! {
    [K: Eq + Hash, V, S: BuildHasher] HashMap<K, V, S>,
    [T: Eq + Hash, S: BuildHasher] HashSet<T, S>,
    [T] VecDeque<T>,
    [T] Vec<T>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_twice_the_length_once_a_quarter_full() {
        // (len, capacity) → target
        let table: &[(usize, usize, Option<usize>)] = &[
            (0, 0, None),
            (0, 32, None),     // small tables are left alone
            (1, 33, Some(16)), // not below MIN_CAPACITY / 2
            (0, 896, Some(16)),
            (224, 896, Some(448)), // exactly a quarter
            (225, 896, None),
            (500, 896, None),
            (100, 1792, Some(200)),
        ];
        for &(len, cap, want) in table {
            assert_eq!(shrink_target(len, cap), want, "len {len}, capacity {cap}");
        }
    }

    #[test]
    fn a_map_emptied_after_a_burst_gives_its_table_back_and_keeps_its_entries() {
        let mut m: HashMap<String, u64> = (0..500).map(|i| (format!("uid-{i}"), i)).collect();
        let full = m.capacity();
        assert!(!m.shrink_sparse(), "full: kept");
        for i in 3..500 {
            m.remove(&format!("uid-{i}"));
        }
        assert!(m.shrink_sparse());
        assert!(m.capacity() < full / 4, "{} of {full}", m.capacity());
        assert_eq!(m.len(), 3);
        assert_eq!(m.get("uid-2"), Some(&2));
        assert!(!m.shrink_sparse(), "once is enough");
    }

    #[test]
    fn sets_queues_and_vecs_shrink_the_same_way() {
        let mut s: HashSet<u32> = (0..400).collect();
        s.retain(|&i| i < 2);
        assert!(s.shrink_sparse());
        assert!(s.capacity() <= 32);
        let mut q: VecDeque<u32> = (0..400).collect();
        q.drain(..398);
        assert!(q.shrink_sparse());
        assert!(q.capacity() <= 32);
        assert_eq!(q, [398, 399]);
        let mut v: Vec<u32> = (0..400).collect();
        v.truncate(10);
        assert!(v.shrink_sparse());
        assert!(v.capacity() <= 32 && v.len() == 10);
    }
}
