//! The paths a [`Scope::Partial`] names, as the walk looks them up.

use super::*;

/// The set of paths a [`Scope::Partial`] names, for the walk's lookups.
#[derive(Debug, Default)]
pub(crate) struct Partial {
    /// Directories to list again.
    pub dirs: std::collections::HashSet<Vec<u8>>,
    /// Directories of `dirs` whose changed entries are known by name, with those names.
    pub names: HashMap<Vec<u8>, Vec<Vec<u8>>>,
    /// Subtrees walked whole.
    pub subtrees: std::collections::HashSet<Vec<u8>>,
    /// Every proper ancestor of the above (the root among them when anything changed).
    pub ancestors: std::collections::HashSet<Vec<u8>>,
}

impl Partial {
    pub(crate) fn new(
        dirs: &[Vec<u8>],
        names: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
        subtrees: &[Vec<u8>],
    ) -> Partial {
        let mut out = Partial {
            dirs: dirs.iter().cloned().collect(),
            names: names.into_iter().collect(),
            subtrees: subtrees.iter().cloned().collect(),
            ancestors: Default::default(),
        };
        for p in dirs.iter().chain(subtrees) {
            let mut p = p.as_slice();
            while !p.is_empty() {
                p = match p.iter().rposition(|&b| b == b'/') {
                    Some(i) => &p[..i],
                    None => b"",
                };
                if !out.ancestors.insert(p.to_vec()) {
                    break;
                }
            }
        }
        out
    }

    /// Whether `rel` lies in (or is) a subtree walked whole.
    pub(crate) fn in_subtree(&self, rel: &[u8]) -> bool {
        if self.subtrees.is_empty() {
            return false;
        }
        if self.subtrees.contains(rel) || self.subtrees.contains(&b""[..]) {
            return true;
        }
        let mut p = rel;
        while let Some(i) = p.iter().rposition(|&b| b == b'/') {
            p = &p[..i];
            if self.subtrees.contains(p) {
                return true;
            }
        }
        false
    }
}
