//! A deterministic generator of source-like trees, and deterministic edits to them.
//!
//! [`generate`] writes a tree shaped like an agent's workspace: file sizes log-normal around
//! 1 KiB (most between 200 B and 8 KiB), a few binary files of several MiB, directories up to
//! [`TreeSpec::max_depth`] deep with fan-out from one to hundreds of entries, text that
//! compresses like code, some executable scripts, a few symlinks and two `.gitignore` files
//! (whose patterns match nothing generated, so every tool sees the same files). The same spec
//! writes byte-identical trees on every run.
//!
//! [`mutate`] modifies, adds and deletes files of any tree, chosen by a seed, and says which.
//! Entries named `.git` or `.cairn` are never walked into, so a tree may hold a repository or
//! a store.

use crate::rng::{self, Rng};
use crate::text::{self, Lang};
use rayon::prelude::*;
use std::collections::HashSet;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Names [`mutate`] and [`walk`] never enter: a repository or a store kept inside a tree.
pub const SKIPPED_NAMES: &[&str] = &[".git", ".cairn"];

/// Files larger than this are treated as binary assets, and [`mutate`] leaves them alone.
pub const LARGE_FILE: u64 = 1 << 20;

/// What tree to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeSpec {
    /// Regular files in all (text, large binary and `.gitignore` files together).
    pub files: usize,
    /// Seeds everything: the same spec gives the same bytes.
    pub seed: u64,
    /// How many of the files are binary files of `large_min..=large_max` bytes.
    pub large_files: usize,
    /// Smallest large file.
    pub large_min: u64,
    /// Largest large file.
    pub large_max: u64,
    /// Median size of a text file.
    pub median_bytes: u64,
    /// Deepest directory below the root (the root is depth 0).
    pub max_depth: usize,
    /// Symlinks, besides the files.
    pub symlinks: usize,
    /// Files per directory, on average (one directory per this many files).
    pub files_per_dir: usize,
}

impl TreeSpec {
    /// A tree of `files` files with proportionate defaults: one directory per 12 files, one
    /// large file per 15,000 files (at least one from 2,000 files, at most five), one symlink
    /// per 3,000 files (at least two, at most twenty).
    pub fn new(files: usize, seed: u64) -> Self {
        TreeSpec {
            files,
            seed,
            large_files: if files >= 2000 {
                (files / 15_000).clamp(1, 5)
            } else {
                0
            },
            large_min: 2 << 20,
            large_max: 8 << 20,
            median_bytes: 1024,
            max_depth: 8,
            symlinks: if files >= 10 {
                (files / 3000).clamp(2, 20)
            } else {
                0
            },
            files_per_dir: 12,
        }
    }

    /// A tree shaped like tc39/test262 at `files` files (56,970 files in 2,119 directories,
    /// 90 MB: about 27 files a directory, sizes as here, no large binaries).
    pub fn test262(files: usize, seed: u64) -> Self {
        TreeSpec {
            large_files: 0,
            files_per_dir: 27,
            ..TreeSpec::new(files, seed)
        }
    }
}

/// What [`generate`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GenStats {
    /// Regular files (equals [`TreeSpec::files`]).
    pub files: usize,
    /// Directories below the root.
    pub dirs: usize,
    /// Symlinks.
    pub symlinks: usize,
    /// Files with mode 0755.
    pub executables: usize,
    /// Bytes of all regular files.
    pub bytes: u64,
    /// Large binary files.
    pub large_files: usize,
    /// Their bytes.
    pub large_bytes: u64,
    /// The deepest directory's depth.
    pub max_depth: usize,
    /// The most files any one directory holds.
    pub max_files_in_dir: usize,
}

#[derive(Debug)]
enum Content {
    Text(Lang),
    Binary { skewed: bool },
    Fixed(&'static str),
}

#[derive(Debug)]
struct PlannedFile {
    path: PathBuf,
    content: Content,
    size: usize,
    executable: bool,
    seed: u64,
}

struct Dir {
    path: PathBuf,
    depth: usize,
    lang: Lang,
    names: HashSet<String>,
    files: usize,
}

const ROOT_GITIGNORE: &str =
    "# build output and editor files\n/target/\n/build/\n/dist/\nnode_modules/\n*.log\n*.tmp\n*.swp\n.DS_Store\n";
const SUB_GITIGNORE: &str = "__pycache__/\n*.pyc\n.cache/\ncoverage/\n";

const LARGE_NAMES: &[&str] = &[
    "model.bin",
    "dataset.parquet",
    "logo.png",
    "bundle.tar.gz",
    "font.woff2",
    "fixtures.sqlite",
    "screenshot.jpg",
];

fn unique_name(
    rng: &mut Rng,
    names: &mut HashSet<String>,
    mut make: impl FnMut(&mut Rng) -> String,
) -> String {
    for _ in 0..4 {
        let name = make(rng);
        if names.insert(name.clone()) {
            return name;
        }
    }
    let base = make(rng);
    let (stem, ext) = match base.split_once('.') {
        Some((s, e)) => (s.to_string(), format!(".{e}")),
        None => (base.clone(), String::new()),
    };
    let mut n = 2u64;
    loop {
        let name = format!("{stem}_{n}{ext}");
        if names.insert(name.clone()) {
            return name;
        }
        n += 1;
    }
}

fn plan_dirs(rng: &mut Rng, spec: &TreeSpec) -> Vec<Dir> {
    let count = 1 + spec.files / spec.files_per_dir.max(1);
    let mut dirs = vec![Dir {
        path: PathBuf::new(),
        depth: 0,
        lang: Lang::Rust,
        names: HashSet::new(),
        files: 0,
    }];
    for i in 1..count {
        // Half the time a uniformly chosen parent (wide, bushy levels), half the time one of the
        // last few made (deep chains).
        let mut parent = if rng.chance(500) {
            rng.index(dirs.len())
        } else {
            let recent = dirs.len().min(6);
            dirs.len() - 1 - rng.index(recent)
        };
        while dirs[parent].depth >= spec.max_depth {
            parent = rng.index(dirs.len());
        }
        let name = unique_name(rng, &mut dirs[parent].names, |r| {
            if r.chance(700) {
                r.pick(text::DIR_WORDS).to_string()
            } else {
                format!("{}_{}", r.pick(text::WORDS), r.pick(text::DIR_WORDS))
            }
        });
        let lang = if i % 5 == 0 {
            dirs[parent].lang
        } else {
            Lang::random(rng)
        };
        dirs.push(Dir {
            path: dirs[parent].path.join(&name),
            depth: dirs[parent].depth + 1,
            lang,
            names: HashSet::new(),
            files: 0,
        });
    }
    dirs
}

fn plan(spec: &TreeSpec) -> (Vec<Dir>, Vec<PlannedFile>, Vec<(PathBuf, String)>) {
    let mut rng = Rng::new(spec.seed);
    let mut dirs = plan_dirs(&mut rng, spec);
    let mut files = Vec::with_capacity(spec.files);

    // Directory weights are log-normal too: most directories hold a handful of files, a few
    // hold hundreds.
    let weights: Vec<u32> = dirs
        .iter()
        .map(|_| (rng::log_normal(&mut rng, 100.0, 2.2).clamp(1.0, 1e6)) as u32)
        .collect();
    let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    let cumulative: Vec<u64> = weights
        .iter()
        .scan(0u64, |acc, &w| {
            *acc += u64::from(w);
            Some(*acc)
        })
        .collect();

    let mut next_dir = 0usize;
    let mut pick_dir = |rng: &mut Rng| -> usize {
        // Every directory gets one file first, so none is left empty (git keeps no empty
        // directories, and the baselines must see the same tree).
        if next_dir < cumulative.len() {
            next_dir += 1;
            return next_dir - 1;
        }
        let x = rng.below(total);
        cumulative.partition_point(|&c| c <= x)
    };

    let gitignores = spec.files.min(if dirs.len() > 1 { 2 } else { 1 });
    let large = spec.large_files.min(spec.files - gitignores);
    for i in 0..spec.files {
        let seed = rng::derive(spec.seed, i as u64);
        let (d, content, size, name_fn): (usize, Content, usize, Option<&str>) = if i < gitignores {
            let (d, body) = if i == 0 {
                (0, ROOT_GITIGNORE)
            } else {
                (1 + rng.index(dirs.len() - 1), SUB_GITIGNORE)
            };
            (d, Content::Fixed(body), body.len(), Some(".gitignore"))
        } else if i < gitignores + large {
            let size = rng.range(spec.large_min, spec.large_max) as usize;
            let d = pick_dir(&mut rng);
            let skewed = rng.chance(500);
            (d, Content::Binary { skewed }, size, None)
        } else {
            let d = pick_dir(&mut rng);
            let lang = if rng.chance(750) {
                dirs[d].lang
            } else {
                Lang::random(&mut rng)
            };
            let size = if rng.chance(5) {
                0
            } else {
                rng::log_normal(&mut rng, spec.median_bytes as f64, 1.45).clamp(16.0, 1e6) as usize
            };
            (d, Content::Text(lang), size, None)
        };
        let name = match (name_fn, &content) {
            (Some(n), _) => {
                dirs[d].names.insert(n.to_string());
                n.to_string()
            }
            (None, Content::Binary { .. }) => unique_name(&mut rng, &mut dirs[d].names, |r| {
                r.pick(LARGE_NAMES).to_string()
            }),
            (None, Content::Text(lang)) => {
                let lang = *lang;
                unique_name(&mut rng, &mut dirs[d].names, |r| {
                    format!("{}.{}", text::file_stem(r, lang), lang.ext())
                })
            }
            (None, Content::Fixed(_)) => String::from("file.txt"),
        };
        let executable = match content {
            Content::Text(Lang::Shell) => true,
            Content::Text(Lang::Python) => rng.chance(20),
            _ => false,
        };
        dirs[d].files += 1;
        files.push(PlannedFile {
            path: dirs[d].path.join(name),
            content,
            size,
            executable,
            seed,
        });
    }

    // Symlinks: most to a sibling file, one to a directory, one dangling.
    let mut links = Vec::new();
    let text_files = gitignores + large..files.len();
    for i in 0..spec.symlinks {
        if text_files.is_empty() {
            break;
        }
        let f = &files[text_files.start + rng.index(text_files.len())];
        let parent = f.path.parent().map(Path::to_path_buf).unwrap_or_default();
        let target_name = f
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let d = dirs.iter().position(|d| d.path == parent).unwrap_or(0);
        let (target, stem) = match i {
            0 if dirs.len() > 1 => {
                let sub = &dirs[1].path;
                (sub.to_string_lossy().into_owned(), "latest".to_string())
            }
            1 => ("does/not/exist".to_string(), "dangling".to_string()),
            _ => (target_name.clone(), format!("current_{target_name}")),
        };
        let d = if i == 0 { 0 } else { d };
        let name = unique_name(&mut rng, &mut dirs[d].names, |_| stem.clone());
        links.push((dirs[d].path.join(name), target));
    }
    (dirs, files, links)
}

fn content_of(f: &PlannedFile) -> Vec<u8> {
    let mut rng = Rng::new(f.seed);
    match f.content {
        Content::Text(lang) => text::generate(&mut rng, lang, f.size),
        Content::Binary { skewed } => text::binary(&mut rng, f.size, skewed),
        Content::Fixed(s) => s.as_bytes().to_vec(),
    }
}

/// Writes the tree `spec` describes into `root` (created if missing; it should be empty).
/// Files are written in parallel; their content depends only on the spec.
pub fn generate(root: &Path, spec: &TreeSpec) -> io::Result<GenStats> {
    let (dirs, files, links) = plan(spec);
    fs::create_dir_all(root)?;
    for d in &dirs[1..] {
        fs::create_dir(root.join(&d.path))?;
    }
    files.par_iter().try_for_each(|f| -> io::Result<()> {
        let path = root.join(&f.path);
        fs::write(&path, content_of(f))?;
        let mode = if f.executable { 0o755 } else { 0o644 };
        fs::set_permissions(&path, fs::Permissions::from_mode(mode))
    })?;
    for (path, target) in &links {
        std::os::unix::fs::symlink(target, root.join(path))?;
    }
    let large: Vec<&PlannedFile> = files
        .iter()
        .filter(|f| matches!(f.content, Content::Binary { .. }))
        .collect();
    Ok(GenStats {
        files: files.len(),
        dirs: dirs.len() - 1,
        symlinks: links.len(),
        executables: files.iter().filter(|f| f.executable).count(),
        bytes: files.iter().map(|f| f.size as u64).sum(),
        large_files: large.len(),
        large_bytes: large.iter().map(|f| f.size as u64).sum(),
        max_depth: dirs.iter().map(|d| d.depth).max().unwrap_or(0),
        max_files_in_dir: dirs.iter().map(|d| d.files).max().unwrap_or(0),
    })
}

/// What kind of entry [`walk`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file of this many bytes, executable or not.
    File {
        /// Its length.
        size: u64,
        /// Whether its owner may execute it.
        executable: bool,
    },
    /// A directory.
    Dir,
    /// A symlink.
    Symlink,
}

/// Every entry below `root` (not `root` itself), sorted by path, without entering
/// [`SKIPPED_NAMES`]. Paths are relative to `root`. Symlinks are never followed.
pub fn walk(root: &Path) -> io::Result<Vec<(PathBuf, Kind)>> {
    fn visit(root: &Path, rel: &Path, out: &mut Vec<(PathBuf, Kind)>) -> io::Result<()> {
        let mut entries: Vec<_> = fs::read_dir(root.join(rel))?.collect::<io::Result<_>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name();
            if SKIPPED_NAMES.iter().any(|s| name == *s) {
                continue;
            }
            let path = rel.join(&name);
            let meta = fs::symlink_metadata(root.join(&path))?;
            let ft = meta.file_type();
            if ft.is_dir() {
                out.push((path.clone(), Kind::Dir));
                visit(root, &path, out)?;
            } else if ft.is_symlink() {
                out.push((path, Kind::Symlink));
            } else if ft.is_file() {
                let executable = meta.permissions().mode() & 0o100 != 0;
                out.push((
                    path,
                    Kind::File {
                        size: meta.len(),
                        executable,
                    },
                ));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    visit(root, Path::new(""), &mut out)?;
    Ok(out)
}

/// Which edits [`mutate`] makes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MutateSpec {
    /// Files to modify (lines inserted; size and content change, mode kept).
    pub modify: usize,
    /// New files to add, in existing directories.
    pub add: usize,
    /// Files to delete.
    pub delete: usize,
    /// Chooses the files and the new bytes.
    pub seed: u64,
}

/// The paths [`mutate`] touched, relative to the root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mutation {
    /// Files whose content changed.
    pub modified: Vec<PathBuf>,
    /// Files created.
    pub added: Vec<PathBuf>,
    /// Files removed.
    pub deleted: Vec<PathBuf>,
}

impl Mutation {
    /// Every path touched.
    pub fn touched(&self) -> Vec<PathBuf> {
        let mut all =
            Vec::with_capacity(self.modified.len() + self.added.len() + self.deleted.len());
        all.extend(self.modified.iter().cloned());
        all.extend(self.added.iter().cloned());
        all.extend(self.deleted.iter().cloned());
        all
    }
}

/// Modifies, deletes and adds files below `root` as `spec` says. The files are chosen among
/// regular files of at most [`LARGE_FILE`] bytes other than `.gitignore`, by the seed and the
/// tree's sorted listing, so the same tree and spec give the same edits. Asks for more edits
/// than the tree has files are cut to what it has.
pub fn mutate(root: &Path, spec: &MutateSpec) -> io::Result<Mutation> {
    let entries = walk(root)?;
    let candidates: Vec<&PathBuf> = entries
        .iter()
        .filter(|(p, k)| {
            matches!(k, Kind::File { size, .. } if *size <= LARGE_FILE)
                && p.file_name().is_some_and(|n| n != ".gitignore")
        })
        .map(|(p, _)| p)
        .collect();
    let mut dirs: Vec<PathBuf> = vec![PathBuf::new()];
    dirs.extend(
        entries
            .iter()
            .filter(|(_, k)| *k == Kind::Dir)
            .map(|(p, _)| p.clone()),
    );
    let mut rng = Rng::new(spec.seed);

    // A partial Fisher-Yates shuffle picks distinct files.
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    let wanted = (spec.modify + spec.delete).min(order.len());
    for i in 0..wanted {
        let j = i + rng.index(order.len() - i);
        order.swap(i, j);
    }
    let modify = spec.modify.min(wanted);
    let mut result = Mutation::default();
    for &i in &order[..modify] {
        let rel = candidates[i].clone();
        let path = root.join(&rel);
        let old = fs::read(&path)?;
        let mut lines = Rng::new(rng.next_u64());
        let lang = Lang::random(&mut lines);
        let size = 40 + lines.index(200);
        let insert = text::generate(&mut lines, lang, size);
        // Insert at a line boundary somewhere in the file.
        let at = if old.is_empty() {
            0
        } else {
            let guess = rng.index(old.len());
            old[guess..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(old.len(), |p| guess + p + 1)
        };
        let mut new = Vec::with_capacity(old.len() + insert.len() + 1);
        new.extend_from_slice(&old[..at]);
        new.extend_from_slice(&insert);
        new.push(b'\n');
        new.extend_from_slice(&old[at..]);
        fs::write(&path, new)?;
        result.modified.push(rel);
    }
    for &i in &order[modify..wanted] {
        let rel = candidates[i].clone();
        fs::remove_file(root.join(&rel))?;
        result.deleted.push(rel);
    }
    for i in 0..spec.add {
        let dir = &dirs[rng.index(dirs.len())];
        let lang = Lang::random(&mut rng);
        let stem = text::file_stem(&mut rng, lang);
        let mut rel = dir.join(format!("{stem}_{:x}_{i}.{}", spec.seed, lang.ext()));
        let mut n = 0;
        while fs::symlink_metadata(root.join(&rel)).is_ok() {
            n += 1;
            rel = dir.join(format!("{stem}_{:x}_{i}_{n}.{}", spec.seed, lang.ext()));
        }
        let size = rng::log_normal(&mut rng, 1024.0, 1.45).clamp(16.0, 1e6) as usize;
        let mut body = Rng::new(rng.next_u64());
        fs::write(root.join(&rel), text::generate(&mut body, lang, size))?;
        result.added.push(rel);
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_store::ObjectId;
    use std::collections::BTreeMap;

    /// Every entry's kind and content (files by hash, symlinks by target).
    fn fingerprint(root: &Path) -> BTreeMap<PathBuf, String> {
        walk(root)
            .expect("walk")
            .into_iter()
            .map(|(p, k)| {
                let full = root.join(&p);
                let v = match k {
                    Kind::File { executable, .. } => {
                        let id = ObjectId::of(&fs::read(&full).expect("read"));
                        format!("file {executable} {}", id.to_hex())
                    }
                    Kind::Symlink => {
                        format!("link {}", fs::read_link(&full).expect("readlink").display())
                    }
                    Kind::Dir => "dir".to_string(),
                };
                (p, v)
            })
            .collect()
    }

    fn small_spec(seed: u64) -> TreeSpec {
        TreeSpec {
            large_files: 2,
            large_min: 64 << 10,
            large_max: 128 << 10,
            ..TreeSpec::new(600, seed)
        }
    }

    /// Two trees generated from `small_spec(seed_a)` and `small_spec(seed_b)`.
    fn two_trees(
        seed_a: u64,
        seed_b: u64,
    ) -> (tempfile::TempDir, tempfile::TempDir, GenStats, GenStats) {
        let (a, b) = (
            tempfile::tempdir().expect("tmp"),
            tempfile::tempdir().expect("tmp"),
        );
        let sa = generate(a.path(), &small_spec(seed_a)).expect("generate a");
        let sb = generate(b.path(), &small_spec(seed_b)).expect("generate b");
        (a, b, sa, sb)
    }

    #[test]
    fn the_same_seed_writes_identical_trees() {
        let (a, b, sa, sb) = two_trees(42, 42);
        assert_eq!(sa, sb);
        assert_eq!(fingerprint(a.path()), fingerprint(b.path()));
    }

    #[test]
    fn another_seed_writes_another_tree() {
        let (a, b, _, _) = two_trees(1, 2);
        assert_ne!(fingerprint(a.path()), fingerprint(b.path()));
    }

    #[test]
    fn the_tree_has_the_counts_the_spec_asks_for() {
        let dir = tempfile::tempdir().expect("tmp");
        let spec = small_spec(5);
        let stats = generate(dir.path(), &spec).expect("generate");
        let entries = walk(dir.path()).expect("walk");
        let files: Vec<_> = entries
            .iter()
            .filter_map(|(p, k)| match k {
                Kind::File { size, executable } => Some((p, *size, *executable)),
                _ => None,
            })
            .collect();
        assert_eq!(files.len(), spec.files);
        assert_eq!(stats.files, spec.files);
        assert_eq!(stats.symlinks, spec.symlinks);
        assert_eq!(
            entries.iter().filter(|(_, k)| *k == Kind::Symlink).count(),
            spec.symlinks
        );
        assert_eq!(
            entries.iter().filter(|(_, k)| *k == Kind::Dir).count(),
            stats.dirs
        );
        assert_eq!(files.iter().map(|f| f.1).sum::<u64>(), stats.bytes);
        assert_eq!(files.iter().filter(|f| f.2).count(), stats.executables);
        assert!(stats.executables > 0);
        assert_eq!(files.iter().filter(|f| f.1 >= spec.large_min).count(), 2);
        assert_eq!(
            files
                .iter()
                .filter(|f| f.0.file_name().is_some_and(|n| n == ".gitignore"))
                .count(),
            2
        );
        assert!(stats.max_depth >= 3, "depth {}", stats.max_depth);
    }

    #[test]
    fn sizes_centre_on_a_kibibyte() {
        let dir = tempfile::tempdir().expect("tmp");
        let spec = TreeSpec::new(1000, 11);
        generate(dir.path(), &spec).expect("generate");
        let mut sizes: Vec<u64> = walk(dir.path())
            .expect("walk")
            .into_iter()
            .filter_map(|(_, k)| match k {
                Kind::File { size, .. } => Some(size),
                _ => None,
            })
            .collect();
        sizes.sort_unstable();
        let median = sizes[sizes.len() / 2];
        assert!((700..1500).contains(&median), "median {median}");
        let typical = sizes.iter().filter(|&&s| (200..=8192).contains(&s)).count();
        assert!(
            typical * 100 > sizes.len() * 85,
            "{typical} of {}",
            sizes.len()
        );
    }

    #[test]
    fn mutate_touches_what_it_says_and_is_deterministic() {
        let (a, b, _, _) = two_trees(3, 3);
        let before = fingerprint(a.path());
        let spec = MutateSpec {
            modify: 10,
            add: 7,
            delete: 5,
            seed: 99,
        };
        let ma = mutate(a.path(), &spec).expect("mutate a");
        let mb = mutate(b.path(), &spec).expect("mutate b");
        assert_eq!(ma, mb);
        assert_eq!(fingerprint(a.path()), fingerprint(b.path()));
        assert_eq!(
            (ma.modified.len(), ma.added.len(), ma.deleted.len()),
            (10, 7, 5)
        );

        let after = fingerprint(a.path());
        let changed: HashSet<&PathBuf> = before
            .keys()
            .chain(after.keys())
            .filter(|p| before.get(*p) != after.get(*p))
            .collect();
        let touched = ma.touched();
        assert_eq!(changed.len(), touched.len());
        assert!(touched.iter().all(|p| changed.contains(p)));
        assert!(ma.modified.iter().all(|p| after.contains_key(p)));
        assert!(ma.added.iter().all(|p| !before.contains_key(p)));
        assert!(ma.deleted.iter().all(|p| !after.contains_key(p)));
    }

    #[test]
    fn mutate_skips_repositories_inside_the_tree() {
        let dir = tempfile::tempdir().expect("tmp");
        fs::create_dir(dir.path().join(".git")).expect("mkdir");
        fs::write(dir.path().join(".git/config"), b"x").expect("write");
        fs::write(dir.path().join("a.txt"), b"a").expect("write");
        let m = mutate(
            dir.path(),
            &MutateSpec {
                modify: 5,
                delete: 5,
                ..MutateSpec::default()
            },
        )
        .expect("mutate");
        assert_eq!(m.modified, vec![PathBuf::from("a.txt")]);
        assert!(m.deleted.is_empty());
        assert_eq!(
            fs::read(dir.path().join(".git/config")).expect("read"),
            b"x"
        );
    }
}
