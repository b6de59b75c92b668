//! The layer table in src/lib.rs holds: no engine module imports a module of its own layer or
//! of a later one, and the files of one folder import each other without cycles. Imports are
//! read from the source (`crate::NAME` paths, and `super::NAME` between files of a folder),
//! outside `#[cfg(test)]` modules and test folders.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Module name -> layer index, from the ```text table under "Layers" in lib.rs.
fn layer_table(lib: &str) -> BTreeMap<String, usize> {
    let start = lib
        .find("//! Layers, lowest first")
        .expect("lib.rs has the layer table");
    let block = &lib[start..];
    let open = block.find("```text").expect("the table is a ```text block") + 7;
    let close = open + block[open..].find("```").expect("the block ends");
    let mut layers = BTreeMap::new();
    for (i, line) in block[open..close]
        .lines()
        .map(|l| l.trim_start_matches("//!").trim())
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        let names = line.split("  ").next().unwrap_or("");
        for name in names.split(',') {
            layers.insert(name.trim().to_string(), i);
        }
    }
    layers
}

/// Where the first `#[cfg(test)]` module starts: the attribute, any further attributes on their
/// own lines (`#[allow(...)]`), then `mod `. Test-only functions outside such a module count.
fn test_module_start(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find("#[cfg(test)]\n") {
        let at = from + i;
        let mut rest = text[at..].lines().skip(1).map(str::trim_start);
        let next = rest.find(|l| !l.starts_with("#["));
        if next.is_some_and(|l| l.starts_with("mod ") || l.starts_with("pub(crate) mod ")) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// Source without comments and without a trailing `#[cfg(test)] mod ...` block.
fn production_code(text: &str) -> String {
    let cut = test_module_start(text).unwrap_or(text.len());
    text[..cut]
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Names following `prefix` in `code` (`crate::wal::x` gives `wal` for prefix `crate::`).
fn referenced(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let after = &rest[i + prefix.len()..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
        rest = after;
    }
    out
}

/// Every production .rs file under `dir`, skipping test folders and `*_tests.rs`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "tests") {
                files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs")
            && !p.to_string_lossy().ends_with("_tests.rs")
        {
            out.push(p);
        }
    }
}

/// The top-level module a file belongs to (`wal/space.rs` -> `wal`, `db.rs` -> `db`).
fn module_of(root: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(root).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// Upward or same-layer imports, as "from -> to (file)".
fn violations(root: &Path, layers: &BTreeMap<String, usize>) -> Vec<String> {
    let mut all = Vec::new();
    files(root, &mut all);
    let mut bad = Vec::new();
    for f in all {
        let m = module_of(root, &f);
        if m == "lib" {
            continue;
        }
        let Some(&from) = layers.get(&m) else {
            bad.push(format!("{m} ({}) is not in the layer table", f.display()));
            continue;
        };
        let code = production_code(&std::fs::read_to_string(&f).unwrap());
        for to in referenced(&code, "crate::") {
            if to == m {
                continue;
            }
            match layers.get(&to) {
                Some(&l) if l < from => {}
                Some(_) => bad.push(format!("{m} -> {to} ({})", f.display())),
                None => bad.push(format!("{m} -> {to}: {to} is not in the layer table")),
            }
        }
    }
    bad.sort();
    bad.dedup();
    bad
}

/// A cycle among the files of `folder` (`super::NAME` between siblings), if any.
fn folder_cycle(folder: &Path) -> Option<Vec<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let siblings: BTreeSet<String> = std::fs::read_dir(folder)
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            let stem = p.file_stem()?.to_string_lossy().to_string();
            (p.extension().is_some_and(|x| x == "rs") && stem != "mod").then_some(stem)
        })
        .collect();
    for s in &siblings {
        let code =
            production_code(&std::fs::read_to_string(folder.join(format!("{s}.rs"))).unwrap());
        let folder_name = folder.file_name().unwrap().to_string_lossy().to_string();
        let mut deps: BTreeSet<String> = referenced(&code, "super::");
        deps.extend(referenced(&code, &format!("{folder_name}::")));
        deps.retain(|d| siblings.contains(d) && d != s);
        graph.insert(s.clone(), deps);
    }
    // depth-first search for a back edge
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(1) => {
                let at = path.iter().position(|p| p == n).unwrap_or(0);
                let mut cycle = path[at..].to_vec();
                cycle.push(n.to_string());
                return Some(cycle);
            }
            Some(_) => return None,
            None => {}
        }
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(d, g, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if let Some(c) = visit(n, &graph, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[test]
fn a_test_module_with_further_attributes_is_cut() {
    let text = "use crate::a;\n#[cfg(test)]\nfn helper() {}\n#[cfg(test)]\n#[allow(clippy::unwrap_used)]\nmod tests {\n    use crate::b;\n}\n";
    let code = production_code(text);
    assert!(
        code.contains("crate::a") && code.contains("helper"),
        "{code}"
    );
    assert!(!code.contains("crate::b"), "{code}");
}

#[test]
fn no_module_imports_its_own_layer_or_a_later_one() {
    let root = src();
    let layers = layer_table(&std::fs::read_to_string(root.join("lib.rs")).unwrap());
    assert!(layers.len() >= 15, "layer table too short: {layers:?}");
    let bad = violations(&root, &layers);
    assert!(
        bad.is_empty(),
        "imports against the layer table in lib.rs:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_files_of_a_folder_import_each_other_without_cycles() {
    let root = src();
    let mut folders = vec![root.clone()];
    let mut found = Vec::new();
    while let Some(dir) = folders.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() && p.file_name().is_some_and(|n| n != "tests") {
                if let Some(c) = folder_cycle(&p) {
                    found.push(format!("{}: {}", p.display(), c.join(" -> ")));
                }
                folders.push(p);
            }
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

/// The checker itself: an upward import and a cycle are found in made-up sources.
#[test]
fn the_checks_catch_an_upward_import_and_a_cycle() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::write(
        root.join("lib.rs"),
        "//! Layers, lowest first\n//! ```text\n//!   low   x\n//!   high  y\n//! ```\n",
    )
    .unwrap();
    std::fs::write(root.join("low.rs"), "use crate::high::Thing;\n").unwrap();
    std::fs::write(
        root.join("high.rs"),
        "use crate::low::Other; // crate::nowhere\n",
    )
    .unwrap();
    let layers = layer_table(&std::fs::read_to_string(root.join("lib.rs")).unwrap());
    assert_eq!(
        violations(root, &layers),
        ["low -> high (".to_string() + &root.join("low.rs").display().to_string() + ")"]
    );
    let folder = root.join("f");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("mod.rs"), "mod a; mod b;\n").unwrap();
    std::fs::write(folder.join("a.rs"), "use super::b::B;\n").unwrap();
    std::fs::write(
        folder.join("b.rs"),
        "use super::a::A;\n#[cfg(test)]\nmod tests {}\n",
    )
    .unwrap();
    assert_eq!(
        folder_cycle(&folder),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
    std::fs::write(
        folder.join("b.rs"),
        "#[cfg(test)]\nmod tests { use super::a::A; }\n",
    )
    .unwrap();
    assert_eq!(folder_cycle(&folder), None);
}
