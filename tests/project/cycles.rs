//! No import cycle between the modules of the crate outside the gateway (whose layers and
//! cycles `layers` checks): `mcp`, `config`, `auth`, `credentials`, `backend`, `loadtest`,
//! `init` and the small shared modules, file by file. Paths are read as `layers` reads them
//! (`crate::…`, `super::…`, `self::…`, brace groups; comments and test modules skipped). A
//! cycle fails with the modules on it and the file of each step. A file included by path
//! (`#[path = "…"] mod name;`, as `crate::config` includes a gateway component's `config.rs`)
//! is read as the module it is declared as.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::layers::COMPONENTS;
use super::source::{code_of, module_named, module_of, named_paths_from, rust_files, test_files};

type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// The files included by path outside the gateway (a `#[path = "…"]` line, then `mod name;`,
/// not under `#[cfg(test)]`): the file -> the module it is declared as.
fn included(root: &Path, files: &[PathBuf]) -> BTreeMap<PathBuf, Vec<String>> {
    let mut out = BTreeMap::new();
    for f in files {
        let me = module_of(root, f);
        if me.first().is_none_or(|m| m == "gateway") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for (i, l) in lines.iter().enumerate() {
            let Some(path) = l
                .strip_prefix("#[path = \"")
                .and_then(|r| r.strip_suffix("\"]"))
            else {
                continue;
            };
            if i > 0 && lines[i - 1] == "#[cfg(test)]" {
                continue;
            }
            let decl = lines.get(i + 1).and_then(|n| n.strip_suffix(';'));
            let Some(name) = decl.and_then(|d| d.rsplit_once("mod ")).map(|(_, n)| n) else {
                continue;
            };
            let file = f.parent().unwrap().join(path).canonicalize().unwrap();
            let parent = if f.file_name().is_some_and(|n| n == "mod.rs") {
                me.clone()
            } else {
                me[..me.len() - 1].to_vec()
            };
            let mut module = parent;
            module.push(name.to_string());
            out.insert(file, module);
        }
    }
    out
}

/// Module -> the modules it names (and a file that names each), outside `src/gateway` (a file
/// under it included by path elsewhere is read as that module). Every module read is a key.
fn graph(root: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let tests = test_files(&files);
    let included = included(root, &files);
    // The longest module a path names, a module included by path counted.
    let named = |p: &[String]| {
        let real = module_named(root, p);
        included
            .values()
            .filter(|m| p.starts_with(m) && m.len() > real.len())
            .max_by_key(|m| m.len())
            .cloned()
            .unwrap_or(real)
    };
    let mut g = Graph::new();
    for f in files {
        let me = match included.get(&f.canonicalize().unwrap()) {
            Some(m) => m.clone(),
            None => module_of(root, &f),
        };
        let outside = me
            .first()
            .is_some_and(|m| m != "gateway" && m != "lib" && m != "main");
        if !outside || tests.contains(&f) {
            continue;
        }
        g.entry(me.join("::")).or_default();
        let code = code_of(&std::fs::read_to_string(&f).unwrap());
        for p in named_paths_from(&code, &me, "crate::") {
            let target = named(&p);
            if target.is_empty() || target == me || target[0] == "gateway" {
                continue;
            }
            let shown = f.strip_prefix(root).unwrap().display().to_string();
            g.entry(me.join("::"))
                .or_default()
                .entry(target.join("::"))
                .or_insert(shown);
        }
    }
    g
}

/// The first cycle found, as its modules with the file of each step.
fn a_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        g: &Graph,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_owned(), 1);
        path.push(m.to_owned());
        for (to, file) in g.get(m).into_iter().flatten() {
            match state.get(to) {
                Some(1) => {
                    let from = path.iter().position(|p| p == to).unwrap();
                    let mut c: Vec<String> = path[from..].to_vec();
                    c.push(format!("{to} (named in {file})"));
                    return Some(c);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(to, g, state, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        state.insert(m.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in g.keys() {
        if !state.contains_key(m) {
            if let Some(c) = visit(m, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn no_module_outside_the_gateway_is_on_an_import_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&root);
    assert!(
        g.len() > 50,
        "the reader found too few modules: {}",
        g.len()
    );
    // A gateway component's config.rs is read as the config module it is declared as.
    for c in COMPONENTS {
        if root.join("gateway").join(c).join("config.rs").is_file() {
            let m = format!("config::{c}");
            assert!(g.contains_key(&m), "{m} was not read as a config module");
        }
    }
    if let Some(c) = a_cycle(&g) {
        panic!(
            "import cycle outside the gateway: {}\nmove what both sides name below both",
            c.join(" -> ")
        );
    }
}

#[test]
fn the_reader_finds_a_cycle() {
    let mut g = Graph::new();
    let edge = |g: &mut Graph, a: &str, b: &str| {
        g.entry(a.into())
            .or_default()
            .insert(b.into(), format!("{a}.rs"));
    };
    edge(&mut g, "a", "b");
    edge(&mut g, "b", "c");
    assert_eq!(a_cycle(&g), None);
    edge(&mut g, "c", "a");
    let c = a_cycle(&g).expect("a -> b -> c -> a");
    assert_eq!(c.len(), 4, "{c:?}");
}
