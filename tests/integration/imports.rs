//! Files import one way: no two source files of a crate import each other, directly or
//! around a longer cycle (the house rule of ARCHITECTURE.md; `docs/internals.md` draws the
//! picture). Read from the sources: every `use crate::…` and `use super::…` path is resolved
//! to the file that defines the module it names; a crate root or a folder's `mod.rs`, which
//! only re-export, is no node (an import of `crate::Snapshot` says nothing about which file
//! defines it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's module files by module path (`["factors", "recording"]`).
fn modules(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut found = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            found.insert(parts, path);
        }
    }
    found
}

/// The `use` paths of a file (`crate::a::b::X`, `super::c::Y`), groups expanded.
fn use_paths(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut statement = String::new();
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("#[cfg(test)]") {
            break; // tests may import anything
        }
        let start = ["use ", "pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .find_map(|p| line.strip_prefix(p));
        if let Some(rest) = start.filter(|_| !inside) {
            statement = rest.to_string();
            inside = true;
        } else if inside {
            statement.push_str(line);
        }
        if inside && statement.contains(';') {
            inside = false;
            expand("", statement.trim_end_matches(';').trim(), &mut paths);
        }
    }
    paths
}

/// `prefix` joined with a use tree (`a::{b, c::D}`) into flat paths.
fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = format!("{prefix}{}", &tree[..open]);
        let body = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in body.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&head, &body[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&head, &body[start..], out);
    } else if !tree.is_empty() {
        out.push(format!(
            "{prefix}{}",
            tree.split(" as ").next().unwrap_or(tree)
        ));
    }
}

/// The file a `use` path of the module `from` leads to: the deepest module it names that is
/// neither the crate root nor a folder's `mod.rs`.
fn target<'a>(
    from: &[String],
    path: &str,
    files: &'a BTreeMap<Vec<String>, PathBuf>,
) -> Option<&'a PathBuf> {
    let mut parts: Vec<&str> = path.split("::").map(str::trim).collect();
    let mut base: Vec<String> = match parts.first() {
        Some(&"crate") => Vec::new(),
        Some(&"super") => from[..from.len().saturating_sub(1)].to_vec(),
        Some(&"self") => from.to_vec(),
        _ => return None,
    };
    parts.remove(0);
    while parts.first() == Some(&"super") {
        base.pop();
        parts.remove(0);
    }
    let mut best = None;
    for part in parts {
        base.push(part.to_string());
        match files.get(&base) {
            Some(file) => best = Some(file),
            None => break,
        }
    }
    best.filter(|file| {
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        !matches!(name, "mod.rs" | "lib.rs" | "main.rs")
    })
}

/// A cycle in `edges`, as the files around it, if there is one.
fn cycle(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Option<Vec<PathBuf>> {
    fn visit(
        node: &PathBuf,
        edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        state: &mut BTreeMap<PathBuf, u8>,
        stack: &mut Vec<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        state.insert(node.clone(), 1);
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            match state.get(next) {
                Some(1) => {
                    let at = stack.iter().position(|n| n == next).unwrap_or(0);
                    let mut around = stack[at..].to_vec();
                    around.push(next.clone());
                    return Some(around);
                }
                Some(_) => {}
                None => {
                    if let Some(found) = visit(next, edges, state, stack) {
                        return Some(found);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in edges.keys() {
        if !state.contains_key(node)
            && let Some(found) = visit(node, edges, &mut state, &mut Vec::new())
        {
            return Some(found);
        }
    }
    None
}

/// The file-import edges of one crate's sources.
fn edges_of(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let files = modules(src);
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for (module, file) in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for path in use_paths(&text) {
            if let Some(to) = target(module, &path, &files)
                && to != file
            {
                edges.entry(file.clone()).or_default().insert(to.clone());
            }
        }
    }
    edges
}

#[test]
fn no_two_files_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = vec![root.join("src")];
    for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        sources.push(entry.path().join("src"));
    }
    let mut checked = 0;
    for src in sources.iter().filter(|s| s.is_dir()) {
        let edges = edges_of(src);
        checked += edges.len();
        if let Some(around) = cycle(&edges) {
            let names: Vec<String> = around
                .iter()
                .map(|p| p.strip_prefix(root).unwrap_or(p).display().to_string())
                .collect();
            panic!("files import each other: {}", names.join(" → "));
        }
    }
    assert!(
        checked > 50,
        "the sources were read ({checked} files import others)"
    );
}

/// The checker sees a cycle where there is one.
#[test]
fn a_cycle_is_found() {
    let a = PathBuf::from("a.rs");
    let b = PathBuf::from("b.rs");
    let c = PathBuf::from("c.rs");
    let mut edges = BTreeMap::new();
    edges.insert(a.clone(), BTreeSet::from([b.clone()]));
    edges.insert(b.clone(), BTreeSet::from([c.clone()]));
    assert!(cycle(&edges).is_none());
    edges.insert(c.clone(), BTreeSet::from([a.clone()]));
    assert_eq!(cycle(&edges).map(|c| c.len()), Some(4));
    let mut paths = Vec::new();
    expand(
        "",
        "super::{accumulator::{Accumulator, direction_of}, coverage::X as Y}",
        &mut paths,
    );
    assert_eq!(
        paths,
        [
            "super::accumulator::Accumulator",
            "super::accumulator::direction_of",
            "super::coverage::X"
        ]
    );
}
