//! Stable sorting with one copy of the sorting code in the binary.
//!
//! `slice::sort_by` is generic over the element and the comparison: every call site with
//! its own closure instantiates the whole driftsort (about 2.4 KB of aarch64 code each; the
//! 28 sorts of picolet cost some 68 KB). Here the sort runs once, over indices, through a
//! `dyn` comparison, and only the small permutation loop is generic. The lists picolet sorts
//! are short (containers, pods, sandboxes, files), so the extra indirection costs nothing
//! that shows.
//!
//! For the same reason `collect_map` / `collect_set` build a `BTreeMap` / `BTreeSet` by
//! insertion: their `FromIterator` sorts the items first, a driftsort per element type.
//!
//! Must never: allocate more than one `Vec<usize>` per call.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// `v.sort_by(cmp)`: stable.
pub(crate) fn sort_by<T>(v: &mut [T], mut cmp: impl FnMut(&T, &T) -> Ordering) {
    if v.len() < 2 {
        return;
    }
    let order = order(v.len(), &mut |i, j| cmp(&v[i], &v[j]));
    permute(v, order);
}

/// `v.sort_by_key(key)`: stable.
pub(crate) fn sort_by_key<T, K: Ord>(v: &mut [T], mut key: impl FnMut(&T) -> K) {
    sort_by(v, |a, b| key(a).cmp(&key(b)));
}

/// `v.sort()`: stable.
pub(crate) fn sort<T: Ord>(v: &mut [T]) {
    sort_by(v, T::cmp);
}

/// `iter.collect::<BTreeMap<_, _>>()` without its sort. `FromIterator for BTreeMap` sorts
/// the pairs first (a stable sort instantiated per key and value type, some 3.7 KB of ARM
/// code each) to build the tree in bulk; inserting one pair at a time uses the map's
/// `insert`, which the program has anyway. Same map: the last value of a duplicate key wins.
pub(crate) fn collect_map<K: Ord, V>(pairs: impl IntoIterator<Item = (K, V)>) -> BTreeMap<K, V> {
    let mut map = BTreeMap::new();
    for (k, v) in pairs {
        map.insert(k, v);
    }
    map
}

/// `iter.collect::<BTreeSet<_>>()` without its sort (see [`collect_map`]).
pub(crate) fn collect_set<T: Ord>(items: impl IntoIterator<Item = T>) -> BTreeSet<T> {
    let mut set = BTreeSet::new();
    for t in items {
        set.insert(t);
    }
    set
}

/// The indices of `0..n` in sorted order (`order[k]` is the element that goes to `k`): the
/// one instantiation of the standard library's stable sort.
fn order(n: usize, cmp: &mut dyn FnMut(usize, usize) -> Ordering) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&a, &b| cmp(a, b));
    idx
}

/// Moves `v[order[k]]` to `k` for every `k`, by following each cycle of the permutation.
fn permute<T>(v: &mut [T], mut order: Vec<usize>) {
    for start in 0..v.len() {
        let mut at = start;
        // A cycle: `at` takes what `order[at]` holds; done positions point at themselves.
        while order[at] != at {
            let from = order[at];
            order[at] = at;
            if from == start {
                break;
            }
            v.swap(at, from);
            at = from;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_stably_like_the_standard_library() {
        // Pairs (key, position) so stability shows; lengths 0..40 and many patterns.
        let mut seed = 7u64;
        for len in 0..40 {
            for _ in 0..20 {
                let mut v: Vec<(u8, usize)> = (0..len)
                    .map(|i| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                        ((seed >> 60) as u8, i)
                    })
                    .collect();
                let mut want = v.clone();
                want.sort_by_key(|p| p.0);
                sort_by_key(&mut v, |p| p.0);
                assert_eq!(v, want);
            }
        }
        let mut words = vec!["b", "c", "a", "b"];
        sort(&mut words);
        assert_eq!(words, ["a", "b", "b", "c"]);
        let mut rev = vec![1, 3, 2];
        sort_by(&mut rev, |a, b| b.cmp(a));
        assert_eq!(rev, [3, 2, 1]);
    }

    #[test]
    fn collects_like_from_iter() {
        let pairs = [("b", 1), ("a", 2), ("b", 3), ("c", 4), ("a", 5)];
        let want: BTreeMap<&str, i32> = pairs.into_iter().collect();
        assert_eq!(collect_map(pairs), want);
        assert_eq!(want["b"], 3, "the last value of a duplicate key wins");
        let set: BTreeSet<&str> = pairs.iter().map(|p| p.0).collect();
        assert_eq!(collect_set(pairs.iter().map(|p| p.0)), set);
        assert!(collect_map(Vec::<(u8, u8)>::new()).is_empty());
    }
}
