//! The files of one folder of the workbench import each other without cycles, and nothing
//! under src/run/ imports `cli`: the command line turns arguments into run options and calls
//! run/, never the other way. The folder rule holds for crates/cli/src/torture/ too.
//!
//! Imports are read from the source: every path that starts with `crate::`, `super::` or
//! `self::` (grouped `use` trees expanded), in production code, that is outside comments,
//! string and char literals, and items under `#[cfg(test)]`. A path is resolved to the child
//! module of the folder it names (a file, or a subfolder with all its files), also through a
//! `use` in the folder's own module file (`mod.rs`, `NAME.rs` beside the folder, or `lib.rs`):
//! `super::Item` where mod.rs has `pub use sibling::Item` is an import of `sibling`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn bench_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn cli_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/src")
}

/// `text` without comments, with string and char literals emptied and without items under
/// `#[cfg(test)]`; what is left keeps its line breaks.
fn production_code(text: &str) -> String {
    strip_test_items(&strip_comments_and_literals(text))
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn strip_comments_and_literals(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        let at = |k: usize| c.get(k).copied().unwrap_or('\0');
        if c[i] == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && at(i + 1) == '*' {
            // Block comments nest.
            let mut depth = 0;
            loop {
                if i >= c.len() {
                    break;
                }
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
            out.push(' ');
        } else if c[i] == 'r'
            && (i == 0
                || !is_ident(c[i - 1])
                || (c[i - 1] == 'b' && (i < 2 || !is_ident(c[i - 2]))))
            && (at(i + 1) == '"' || at(i + 1) == '#')
        {
            // A raw string r"..." or r#"..."# (also after b), unless r# starts a raw identifier.
            let mut j = i + 1;
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) != '"' {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (1..=hashes).all(|h| at(j + h) == '#') {
                    j += 1 + hashes;
                    break;
                }
                if c[j] == '\n' {
                    out.push('\n');
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                if at(i) == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && (at(i + 1) == '\\' || at(i + 2) == '\'') {
            // A char literal ('x', '\n', '\u{..}'); otherwise a lifetime, kept.
            i += 2;
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Removes every item that follows `#[cfg(test)]`: up to its first `;` or through its first
/// `{ ... }` block, whichever comes first at the item's own nesting level.
fn strip_test_items(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let item = &rest[at + MARK.len()..];
        let mut depth = 0i32;
        let mut end = item.len();
        for (k, ch) in item.char_indices() {
            match ch {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' => depth -= 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                _ => {}
            }
        }
        // Keep the line count of what was removed.
        out.extend(item[..end].chars().filter(|&ch| ch == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Identifiers (with `$crate` as one) and punctuation, `::` as one token.
fn tokens(code: &str) -> Vec<String> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if c[i].is_whitespace() {
            i += 1;
        } else if is_ident(c[i]) || (c[i] == '$' && c.get(i + 1).is_some_and(|&n| is_ident(n))) {
            let start = i;
            i += 1;
            while i < c.len() && is_ident(c[i]) {
                i += 1;
            }
            out.push(c[start..i].iter().collect());
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".to_string());
            i += 2;
        } else {
            out.push(c[i].to_string());
            i += 1;
        }
    }
    out
}

/// One path of a `use` tree or an expression, and the name it is bound to (`as NAME`, or its
/// last segment).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Leaf {
    segments: Vec<String>,
    name: Option<String>,
}

/// Parses the path (or `use` tree) that starts at `t[i]`, appending its leaves under
/// `prefix`; returns the index after it.
fn parse_tree(t: &[String], mut i: usize, prefix: &[String], out: &mut Vec<Leaf>) -> usize {
    let mut segs = prefix.to_vec();
    loop {
        match t.get(i).map(String::as_str) {
            Some("{") => {
                i += 1;
                while i < t.len() && t[i] != "}" {
                    i = parse_tree(t, i, &segs, out);
                    if t.get(i).is_some_and(|x| x == ",") {
                        i += 1;
                    }
                }
                return i + 1;
            }
            Some("*") => {
                out.push(Leaf {
                    segments: segs,
                    name: None,
                });
                return i + 1;
            }
            Some(x) if x.starts_with(|ch: char| is_ident(ch) || ch == '$') => {
                if x != "self" || segs.is_empty() {
                    segs.push(x.to_string());
                }
                i += 1;
                if t.get(i).is_some_and(|x| x == "::") {
                    i += 1;
                    continue;
                }
                let mut name = segs.last().cloned();
                if t.get(i).is_some_and(|x| x == "as") {
                    name = t.get(i + 1).cloned();
                    i += 2;
                }
                out.push(Leaf {
                    segments: segs,
                    name,
                });
                return i;
            }
            _ => {
                if segs.len() > prefix.len() {
                    out.push(Leaf {
                        segments: segs,
                        name: None,
                    });
                }
                return i;
            }
        }
    }
}

/// Every path in `code` that starts with `crate`, `$crate`, `super` or `self` and a `::`.
fn anchored_paths(code: &str) -> Vec<Leaf> {
    let t = tokens(code);
    let mut out = Vec::new();
    for i in 0..t.len() {
        let start = matches!(t[i].as_str(), "crate" | "$crate" | "super" | "self");
        let after_sep = i > 0 && t[i - 1] == "::";
        if start && !after_sep && t.get(i + 1).is_some_and(|x| x == "::") {
            parse_tree(&t, i, &[], &mut out);
        }
    }
    out
}

/// Every `use` tree in `code`, anchored or not (`use child::Item`).
fn use_trees(code: &str) -> Vec<Leaf> {
    let t = tokens(code);
    let mut out = Vec::new();
    for i in 0..t.len() {
        if t[i] == "use" && (i == 0 || t[i - 1] != "::") {
            let from = if t.get(i + 1).is_some_and(|x| x == "::") {
                i + 2
            } else {
                i + 1
            };
            parse_tree(&t, from, &[], &mut out);
        }
    }
    out
}

/// The module a path from module `module` names: `crate`, `super` and `self` resolved.
fn resolve(module: &[String], segments: &[String]) -> Vec<String> {
    let mut out = module.to_vec();
    for (k, s) in segments.iter().enumerate() {
        match s.as_str() {
            "crate" | "$crate" if k == 0 => out.clear(),
            "super" => {
                out.pop();
            }
            "self" => {}
            _ => out.push(s.clone()),
        }
    }
    out
}

/// The module path of a source file (`run/kv/mod.rs` -> run::kv, `lib.rs` -> the root).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut m: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    let last = m.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    let is_root = m.is_empty() && (stem == "lib" || stem == "main");
    if stem != "mod" && !is_root {
        m.push(stem.to_string());
    }
    m
}

fn is_test_file(p: &Path) -> bool {
    let name = p.file_name().unwrap().to_string_lossy();
    name == "tests" || name == "tests.rs" || name.ends_with("_tests.rs")
}

/// Production .rs files under `dir`, recursively.
fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if is_test_file(&p) {
            continue;
        }
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Imports between the child modules of one folder: (from, to) -> the files that make them.
type Edges = BTreeMap<(String, String), BTreeSet<String>>;

/// The imports between the child modules of `folder` (a folder under `src`, or `src` itself).
fn folder_edges(src: &Path, folder: &Path) -> Edges {
    let here = module_of(src, &folder.join("mod.rs"));
    let mut children = BTreeSet::new();
    for e in std::fs::read_dir(folder).unwrap() {
        let p = e.unwrap().path();
        let stem = p.file_stem().unwrap().to_string_lossy().to_string();
        if is_test_file(&p) || (folder == src && (stem == "lib" || stem == "main")) {
            continue;
        }
        if p.is_dir() || (p.extension().is_some_and(|x| x == "rs") && stem != "mod") {
            children.insert(stem);
        }
    }
    // Names the folder's own module file brings in from its children.
    let mut roots = vec![folder.join("mod.rs"), folder.with_extension("rs")];
    if folder == src {
        roots = vec![src.join("lib.rs"), src.join("main.rs")];
    }
    let mut brought: BTreeMap<String, String> = BTreeMap::new();
    for root in roots.iter().filter(|r| r.is_file()) {
        let code = production_code(&std::fs::read_to_string(root).unwrap());
        for leaf in use_trees(&code) {
            // Anchored, or relative to the folder's module (`use child::Item`); not another crate.
            let first = leaf.segments.first().map(String::as_str).unwrap_or("");
            let anchored = matches!(first, "crate" | "$crate" | "super" | "self");
            if !anchored && !children.contains(first) {
                continue;
            }
            let full = resolve(&here, &leaf.segments);
            if let (Some(child), Some(name)) = (full.get(here.len()), &leaf.name) {
                if full.len() > here.len() + 1 && full.starts_with(&here) {
                    brought.insert(name.clone(), child.clone());
                }
            }
        }
    }
    let mut files = Vec::new();
    rs_files(folder, &mut files);
    let mut edges = Edges::new();
    for f in files {
        let module = module_of(src, &f);
        let Some(from) = module.get(here.len()) else {
            continue; // the folder's own module file
        };
        let code = production_code(&std::fs::read_to_string(&f).unwrap());
        for leaf in anchored_paths(&code) {
            let target = resolve(&module, &leaf.segments);
            if !target.starts_with(&here) {
                continue;
            }
            let Some(name) = target.get(here.len()) else {
                continue;
            };
            let to = if children.contains(name) {
                name.clone()
            } else if let Some(child) = brought.get(name) {
                child.clone()
            } else {
                continue;
            };
            if &to != from {
                let rel = f.strip_prefix(src).unwrap().display().to_string();
                edges.entry((from.clone(), to)).or_default().insert(rel);
            }
        }
    }
    edges
}

/// A cycle among the imports of `edges`, as the modules along it, if there is one.
fn find_cycle(edges: &Edges) -> Option<Vec<String>> {
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        graph.entry(from).or_default().push(to);
    }
    fn visit<'a>(
        n: &'a str,
        g: &BTreeMap<&'a str, Vec<&'a str>>,
        state: &mut BTreeMap<&'a str, bool>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(true) => return None,
            Some(false) => {
                let at = path.iter().position(|p| *p == n).unwrap();
                let mut cycle: Vec<String> = path[at..].iter().map(|s| s.to_string()).collect();
                cycle.push(n.to_string());
                return Some(cycle);
            }
            None => {}
        }
        state.insert(n, false);
        path.push(n);
        for d in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(d, g, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n, true);
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

/// `folder`'s cycle, if any, with the files that make each of its imports.
fn cycle_in(src: &Path, folder: &Path) -> Option<String> {
    let edges = folder_edges(src, folder);
    let cycle = find_cycle(&edges)?;
    let steps: Vec<String> = cycle
        .windows(2)
        .map(|w| {
            let files = &edges[&(w[0].clone(), w[1].clone())];
            let files: Vec<&str> = files.iter().map(String::as_str).collect();
            format!("{} -> {} ({})", w[0], w[1], files.join(", "))
        })
        .collect();
    Some(format!("{}: {}", folder.display(), steps.join("; ")))
}

/// `src` and every folder under it.
fn folders(src: &Path) -> Vec<PathBuf> {
    let mut out = vec![src.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        for e in std::fs::read_dir(&out[i]).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() && !is_test_file(&p) {
                out.push(p);
            }
        }
        i += 1;
    }
    out
}

#[test]
fn the_files_of_a_bench_folder_import_each_other_without_cycles() {
    let src = bench_src();
    let all = folders(&src);
    assert!(all.len() >= 8, "too few folders under {}", src.display());
    let found: Vec<String> = all.iter().filter_map(|f| cycle_in(&src, f)).collect();
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn nothing_under_run_imports_cli() {
    let src = bench_src();
    let edges = folder_edges(&src, &src);
    assert!(
        edges.contains_key(&("cli".to_string(), "run".to_string())),
        "the check reads imports: cli imports run"
    );
    let up = edges.get(&("run".to_string(), "cli".to_string()));
    assert!(up.is_none(), "run/ imports cli: {up:?}");
}

#[test]
fn the_files_of_the_torture_folder_import_each_other_without_cycles() {
    let src = cli_src();
    let torture = src.join("torture");
    let edges = folder_edges(&src, &torture);
    assert!(
        edges.contains_key(&("child".to_string(), "kv".to_string())),
        "the check reads imports: child imports kv, found {edges:?}"
    );
    if let Some(c) = cycle_in(&src, &torture) {
        panic!("import cycle: {c}");
    }
}

/// The reader and the checks on made-up sources: what counts as an import, what does not,
/// and cycles made directly, through a grouped `use` and through the folder's mod.rs.
#[test]
fn the_checks_catch_cycles_and_skip_tests_comments_and_strings() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path();
    let write = |rel: &str, text: &str| {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("lib.rs", "pub mod f; pub mod top;\n");
    write("top.rs", "pub struct T;\n");
    write("f/mod.rs", "mod a; mod b; mod c;\npub use c::Brought;\n");
    write("f/a.rs", "use super::b::B;\n");
    write(
        "f/b.rs",
        "// super::a::A\nconst S: &str = \"crate::f::a\";\nconst Q: char = '\"';\n\
         #[cfg(test)]\nmod tests { use super::super::a::A; }\n\
         fn g() -> crate::top::T { crate::top::T }\n",
    );
    write("f/c.rs", "pub struct Brought;\n");
    assert_eq!(find_cycle(&folder_edges(src, &src.join("f"))), None);
    let top = folder_edges(src, src);
    assert!(top.contains_key(&("f".to_string(), "top".to_string())));

    write("f/b.rs", "use crate::f::{c, a::{self as aa, A}};\n");
    let found = cycle_in(src, &src.join("f")).expect("a cycle through a grouped use");
    assert!(
        found.contains("a -> b (f/a.rs); b -> a (f/b.rs)"),
        "{found}"
    );

    write("f/b.rs", "pub struct B;\n");
    write("f/c.rs", "pub struct Brought; fn h() { super::a::g() }\n");
    write("f/a.rs", "use super::Brought; pub fn g() {}\n");
    let found = cycle_in(src, &src.join("f")).expect("a cycle through mod.rs");
    assert!(
        found.contains("a -> c (f/a.rs); c -> a (f/c.rs)"),
        "{found}"
    );

    write(
        "f/c.rs",
        "/* super::a /* nested */ super::a */ pub struct Brought;\n",
    );
    assert_eq!(find_cycle(&folder_edges(src, &src.join("f"))), None);

    // A subfolder is one module of its folder, with the imports of all its files.
    write("f/d/mod.rs", "mod e;\n");
    write("f/d/e.rs", "use super::super::a::g;\n");
    write(
        "f/a.rs",
        "use super::Brought; pub fn g() { crate::f::d::e::x() }\n",
    );
    let found = cycle_in(src, &src.join("f")).expect("a cycle through a subfolder");
    assert!(
        found.contains("a -> d (f/a.rs); d -> a (f/d/e.rs)"),
        "{found}"
    );
}
