//! The gateway's layers, checked from its source: `src/gateway/` has one folder per layer
//! (telemetry, transport, stages, journey, runtime, plus the pingora phases in `proxy.rs`), and
//! a module names only modules of its own layer or of a layer below. Inside each layer the
//! modules also form no import cycle. A new module must be listed in a
//! layer folder; a path that goes up a layer fails here with the file that wrote it.
//!
//! A component ([`COMPONENTS`]) is one folder with its layers inside it, each a subfolder or a
//! file named by its layer (`federation/stages/`, `federation/journey/`,
//! `federation/telemetry.rs`): a module there is in the layer its second segment names, under
//! the same rules. The component's root `mod.rs` names only its own submodules, and nothing
//! names the root alone (a path must reach a layer, or its layer could not be read). Its
//! `config.rs` is `crate::config::<component>`, included by path: no gateway module, not read
//! here (`cycles` reads it as the config module it is).
//!
//! Paths are read the way the compiler resolves them: `crate::gateway::…`, `super::…` (from the
//! file's own module), and brace groups. Comments and `#[cfg(test)] mod tests` are skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::source::{code_of, module_named, module_of, named_paths_from, rust_files, test_files};

/// Bottom to top: a layer may name its own and those before it.
const LAYERS: &[&str] = &[
    "telemetry",
    "transport",
    "stages",
    "journey",
    "proxy",
    "runtime",
];

/// The component folders under `src/gateway/`, each with its layers inside it: a new one is a
/// line here.
pub(crate) const COMPONENTS: &[&str] = &[
    "federation",
    "cache",
    "balance",
    "rate_limits",
    "concurrency",
];

/// Every path the code names that starts at `crate::gateway` or `super`, resolved to a module
/// path under the gateway (brace groups spread out; only the leading segments matter).
fn named_paths(code: &str, me: &[String]) -> Vec<Vec<String>> {
    named_paths_from(code, me, "crate::gateway::")
}

/// What the checks read a module as: `layer/module` (its first two segments), or for a component
/// `component/layer`, or the component's root alone (`component`); `None` for a component's
/// `config.rs`, which is `crate::config::<component>`, not a gateway module.
fn unit_of(m: &[String]) -> Option<String> {
    let component = m.first().is_some_and(|c| COMPONENTS.contains(&c.as_str()));
    if component && m.get(1).is_some_and(|s| s == "config") {
        return None;
    }
    Some(m.iter().take(2).cloned().collect::<Vec<_>>().join("/"))
}

/// The units the code of module `me` names, other than its own.
fn units_named(root: &Path, me: &[String], code: &str) -> BTreeSet<String> {
    let Some(mine) = unit_of(me) else {
        return BTreeSet::new();
    };
    named_paths(code, me)
        .into_iter()
        .map(|p| module_named(root, &p))
        .filter(|t| !t.is_empty())
        .filter_map(|t| unit_of(&t))
        .filter(|t| *t != mine)
        .collect()
}

/// Module (as a unit, [`unit_of`]) -> the modules it names, with the files that name them.
fn graph(root: &Path) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let tests = test_files(&files);
    let mut g: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for f in files {
        let me = module_of(root, &f);
        if me.is_empty() || tests.contains(&f) {
            continue; // gateway/mod.rs: the map and its re-exports
        }
        let Some(mine) = unit_of(&me) else {
            continue; // a component's config.rs
        };
        let code = code_of(&std::fs::read_to_string(&f).unwrap());
        for target in units_named(root, &me, &code) {
            let shown = f.strip_prefix(root).unwrap().display().to_string();
            g.entry(mine.clone())
                .or_default()
                .entry(target)
                .or_default()
                .insert(shown);
        }
    }
    g
}

fn layer_of(unit: &str) -> &str {
    let mut segs = unit.split('/');
    let first = segs.next().unwrap().trim_end_matches(".rs");
    if !COMPONENTS.contains(&first) {
        return first;
    }
    match segs.next() {
        Some(layer) => layer.trim_end_matches(".rs"),
        None => panic!("src/gateway/{unit}/mod.rs, a component's root, is in no layer"),
    }
}

fn layer_rank(unit: &str) -> usize {
    let layer = layer_of(unit);
    LAYERS.iter().position(|l| *l == layer).unwrap_or_else(|| {
        panic!("src/gateway/{unit} is in no layer: move it into one of {LAYERS:?}")
    })
}

/// What is wrong with `from` naming `to`, if anything: a layer above, a component's root naming
/// anything but its own submodules, or a path that stops at a component's root.
fn offence(from: &str, to: &str) -> Option<String> {
    if COMPONENTS.contains(&from) {
        return (!to.starts_with(&format!("{from}/"))).then(|| {
            format!("{from} -> {to}: a component's mod.rs names only its own submodules")
        });
    }
    if COMPONENTS.contains(&to) {
        return Some(format!(
            "{from} -> {to}: name the component's layer module ({to}::stages, {to}::journey, ...), not its root"
        ));
    }
    (layer_rank(to) > layer_rank(from)).then(|| format!("{from} -> {to}: up a layer"))
}

#[test]
fn no_module_names_a_layer_above_its_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/gateway");
    let mut up = Vec::new();
    for (from, targets) in graph(&root) {
        for (to, files) in targets {
            if let Some(why) = offence(&from, &to) {
                up.push(format!("{why} (in {files:?})"));
            }
        }
    }
    assert!(
        up.is_empty(),
        "imports running up a layer:\n{}",
        up.join("\n")
    );
}

#[test]
fn no_layer_has_an_import_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/gateway");
    let g = graph(&root);
    for layer in ["telemetry", "transport", "stages", "journey", "runtime"] {
        // Depth-first search for a back edge among this layer's modules (a component's root
        // is in no layer).
        let inside = |m: &str| !COMPONENTS.contains(&m) && layer_of(m) == layer;
        let mut state: BTreeMap<&str, u8> = BTreeMap::new();
        fn visit<'a>(
            m: &'a str,
            g: &'a BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
            inside: &dyn Fn(&str) -> bool,
            state: &mut BTreeMap<&'a str, u8>,
            path: &mut Vec<&'a str>,
        ) {
            state.insert(m, 1);
            path.push(m);
            for to in g.get(m).into_iter().flat_map(|t| t.keys()) {
                if !inside(to) {
                    continue;
                }
                match state.get(to.as_str()) {
                    Some(1) => panic!("import cycle: {} -> {to}", path.join(" -> ")),
                    Some(_) => {}
                    None => visit(to, g, inside, state, path),
                }
            }
            path.pop();
            state.insert(m, 2);
        }
        for m in g.keys().filter(|m| inside(m)) {
            if !state.contains_key(m.as_str()) {
                visit(m, &g, &inside, &mut state, &mut Vec::new());
            }
        }
    }
}

#[test]
fn the_reader_sees_a_path_going_up() {
    // The reader itself: a path from a transport file into a stage is found, through `super`
    // and inside a brace group.
    let me: Vec<String> = ["transport", "parked"].map(String::from).to_vec();
    let code = "use super::super::journey::{request::RequestCtx, steps};\nfn f() { crate::gateway::telemetry::labels::x(); }";
    let paths = named_paths(code, &me);
    assert!(
        paths.contains(
            &["journey", "request", "RequestCtx"]
                .map(String::from)
                .to_vec()
        ),
        "{paths:?}"
    );
    assert!(
        paths.contains(&["journey", "steps"].map(String::from).to_vec()),
        "{paths:?}"
    );
    assert!(
        paths.contains(&["telemetry", "labels", "x"].map(String::from).to_vec()),
        "{paths:?}"
    );
    // Code after an out-of-line test module's declaration is still read (a stage's function
    // below `mod tests;` once hid an import of the journey); an inline one is cut off.
    let code = code_of("#[cfg(test)]\nmod tests;\nuse crate::gateway::journey::state::Gateway;");
    assert!(code.contains("journey::state"), "{code}");
    let code =
        code_of("fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::gateway::journey::x;\n}");
    assert!(!code.contains("journey"), "{code}");
}

#[test]
fn a_component_keeps_the_layer_rules() {
    // A component's stage naming its own journey goes up a layer, as a stage naming the
    // journey does; its journey naming its stages or a layer folder's stage does not.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/gateway");
    let c = COMPONENTS[0];
    let me: Vec<String> = [c, "stages", "x"].map(String::from).to_vec();
    let named = units_named(&root, &me, "use super::super::journey::y;");
    assert_eq!(named, BTreeSet::from([format!("{c}/journey")]));
    let up = offence(&format!("{c}/stages"), &format!("{c}/journey"));
    assert!(up.is_some_and(|m| m.contains("up a layer")));
    assert!(offence(&format!("{c}/stages"), "journey/steps").is_some());
    assert!(offence("stages/route", &format!("{c}/journey")).is_some());
    assert_eq!(
        offence(&format!("{c}/journey"), &format!("{c}/stages")),
        None
    );
    assert_eq!(offence(&format!("{c}/journey"), "stages/route"), None);
    assert_eq!(
        offence("telemetry/metrics", &format!("{c}/telemetry")),
        None
    );
    // The root names only its own submodules; a path that stops at the root is refused, as its
    // layer cannot be read; the component's config.rs is the config's, not the gateway's.
    assert_eq!(offence(c, &format!("{c}/journey")), None);
    assert!(offence(c, "stages/route").is_some());
    assert!(offence("journey/steps", c).is_some());
    let me: Vec<String> = ["journey", "steps"].map(String::from).to_vec();
    let code = format!("use crate::gateway::{c};");
    assert_eq!(
        units_named(&root, &me, &code),
        BTreeSet::from([c.to_string()])
    );
    assert_eq!(unit_of(&[c, "config"].map(String::from)), None);
}
