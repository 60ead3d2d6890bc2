//! Docs that cannot rot: in README.md and docs/*.md (every page of docs/, found by listing the
//! folder, so a new page is covered the day it is added), every relative link points at a file
//! or folder of the repository (and its `#anchor`, when it has one, at a heading of that file),
//! every repository path they name (`src/…`, `tests/…`, `bench/…`, `deploy/…`, `docs/…`,
//! `scripts/…`, `examples/…`) exists, every page of docs/ is listed in the index docs/README.md,
//! every command of the README's Quick start exists (each `mcp-edge` subcommand answers
//! `--help`, each script is there and executable), and every gateway config shown passes
//! `mcp-edge check`.
//!
//! **Config examples.** A config example is a fenced block whose info string is `yaml`, or a
//! here-document written to a `*.yaml` file inside a fenced shell block
//! (`cat > x.yaml <<'YAML'` … `YAML`). One that is a whole gateway config, i.e. has a top-level
//! `pools:` key (a line starting with `pools:`), is written to a file in an empty temporary
//! folder and must pass `mcp-edge check --config <file>`, run from that folder (so relative
//! paths in it resolve there, as they would for a user who saved the example). A block without
//! a top-level `pools:` is a fragment (one section of a config) and is not checked. A whole
//! config can be marked as a fragment only explicitly, with a reason, by the line right before
//! its opening fence:
//!
//! ```text
//! <!-- fragment: names certificate files that exist only on a deployed host -->
//! ```
//!
//! The reason must say what the example needs that a temporary folder lacks (certificate files,
//! a key made by a command shown beside it). A marker on a block that is a fragment anyway, or
//! not followed by a fence, is an error: markers cannot outlive their reason unnoticed.
//!
//! Only file reading and the `mcp-edge` binary: no server is started.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use regex::Regex;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/*.md, as (path relative to the root, text).
fn documents() -> Vec<(PathBuf, String)> {
    let mut files = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| p.strip_prefix(root()).unwrap().to_path_buf())
        .collect();
    docs.sort();
    files.extend(docs);
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(root().join(&f))
                .unwrap_or_else(|e| panic!("reading {}: {e}", f.display()));
            (f, text)
        })
        .collect()
}

/// The lines of `text` outside fenced code blocks, with their line numbers (from 1).
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// The anchors GitHub makes of a file's headings: lower case, punctuation dropped, spaces as
/// hyphens, `-1`, `-2`… after repeats.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for (_, line) in prose(text) {
        let Some(title) = line.strip_prefix('#') else {
            continue;
        };
        let title = title.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut unique = slug.clone();
        let mut n = 0;
        while !seen.insert(unique.clone()) {
            n += 1;
            unique = format!("{slug}-{n}");
        }
    }
    seen
}

/// Whether `path` (relative to the root) exists; a `*` in its last part matches any run of
/// characters (`tests/peers/package*.json`).
fn exists(path: &str) -> bool {
    let p = root().join(path.trim_end_matches('/'));
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let Some((head, tail)) = name.split_once('*') else {
        return p.exists();
    };
    let dir = p.parent().expect("a parent folder");
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.len() >= head.len() + tail.len() && n.starts_with(head) && n.ends_with(tail)
        })
    })
}

/// Why the link `target` in `doc` is broken, if it is.
fn broken_link(doc: &Path, target: &str, own_anchors: &HashSet<String>) -> Option<String> {
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    if path.is_empty() {
        let a = anchor.unwrap_or("");
        return (!own_anchors.contains(a)).then(|| format!("no heading makes #{a}"));
    }
    let base = doc.parent().unwrap_or(Path::new(""));
    let file = base.join(path);
    let file_text = file.to_str().expect("a UTF-8 path");
    if !exists(file_text) {
        return Some(format!("{} does not exist", file.display()));
    }
    let a = anchor?;
    if !file_text.ends_with(".md") {
        return None;
    }
    let text = std::fs::read_to_string(root().join(&file)).unwrap();
    (!anchors(&text).contains(a)).then(|| format!("no heading of {} makes #{a}", file.display()))
}

#[test]
fn every_relative_link_points_at_a_file_and_heading_that_exist() {
    let inline = Regex::new(r#"\]\(([^)\s]+)(?:\s+"[^"]*")?\)"#).unwrap();
    let reference = Regex::new(r"^\s*\[[^\]]+\]:\s*(\S+)").unwrap();
    let mut broken = Vec::new();
    let mut checked = 0;
    for (doc, text) in documents() {
        let own = anchors(&text);
        for (n, line) in prose(&text) {
            let targets = inline
                .captures_iter(line)
                .chain(reference.captures_iter(line))
                .map(|c| c[1].trim_matches(['<', '>']).to_string());
            for t in targets {
                if t.contains("://") || t.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                if let Some(why) = broken_link(&doc, &t, &own) {
                    broken.push(format!("{}:{n}: ({t}): {why}", doc.display()));
                }
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} links found: is the pattern right?"
    );
    assert!(
        broken.is_empty(),
        "broken links (fix the link, or the file it points at):\n{}",
        broken.join("\n")
    );
}

#[test]
fn every_repository_path_the_docs_name_exists() {
    let named = Regex::new(
        r"(?:^|[^A-Za-z0-9_./-])((?:src|tests|bench|benches|deploy|docs|scripts|examples)/[A-Za-z0-9_./*-]*[A-Za-z0-9_/*-])",
    )
    .unwrap();
    let mut missing = Vec::new();
    let mut checked = 0;
    for (doc, text) in documents() {
        for (i, line) in text.lines().enumerate() {
            for c in named.captures_iter(line) {
                checked += 1;
                if !exists(&c[1]) {
                    missing.push(format!("{}:{}: {}", doc.display(), i + 1, &c[1]));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} paths found: is the pattern right?"
    );
    assert!(
        missing.is_empty(),
        "paths named in the docs that the repository does not have (moved or renamed?):\n{}",
        missing.join("\n")
    );
}

/// The README's Quick start section.
fn quick_start() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme
        .find("\n## Quick start")
        .expect("README.md has a ## Quick start section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_string()
}

#[test]
fn every_command_of_the_quick_start_exists() {
    let section = quick_start();
    let mut fenced = false;
    let mut commands = Vec::new();
    for line in section.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if fenced {
            commands.push(line.trim());
        }
    }
    let sub = Regex::new(r"^(?:cargo run(?: --release)? -- |mcp-edge )([a-z][a-z-]*)").unwrap();
    let (mut subcommands, mut scripts) = (Vec::new(), Vec::new());
    for line in commands {
        let word = line.split_whitespace().next().unwrap_or("");
        if let Some(c) = sub.captures(line) {
            subcommands.push(c[1].to_string());
        } else if word.contains('/') {
            scripts.push(word.to_string());
        }
    }
    assert!(
        !subcommands.is_empty(),
        "no mcp-edge command in:\n{section}"
    );
    for s in &subcommands {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
            .args([s.as_str(), "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && help.contains("Usage: mcp-edge"),
            "`mcp-edge {s} --help`, from the Quick start, did not answer: {}{}",
            help,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for s in &scripts {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(root().join(s))
            .unwrap_or_else(|e| panic!("{s}, from the Quick start: {e}"));
        assert!(
            meta.permissions().mode() & 0o111 != 0,
            "{s}, from the Quick start, is not executable (chmod +x, and commit the mode)"
        );
    }
}

/// A config example of a document: where it starts (the line of its opening fence, from 1), its
/// text, and the fragment marker's reason, if the line before its fence has one.
struct Example {
    doc: PathBuf,
    line: usize,
    yaml: String,
    fragment: Option<String>,
}

/// The reason of a `<!-- fragment: reason -->` line.
fn fragment_reason(line: &str) -> Option<String> {
    let rest = line.trim().strip_prefix("<!--")?.trim_start();
    let rest = rest.strip_prefix("fragment:")?;
    Some(rest.trim().trim_end_matches("-->").trim().to_string())
}

/// Every config example of every document, and the markers that precede no fence.
fn examples() -> (Vec<Example>, Vec<String>) {
    let heredoc = Regex::new(r#"<<-?\s*['"]?([A-Za-z_]+)['"]?"#).unwrap();
    let mut found = Vec::new();
    let mut stray = Vec::new();
    for (doc, text) in documents() {
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            let marker = fragment_reason(line);
            let next_is_fence = lines
                .get(i + 1)
                .is_some_and(|l| l.trim_start().starts_with("```"));
            if marker.is_some() && !next_is_fence {
                stray.push(format!(
                    "{}:{}: a fragment marker not right before a fence",
                    doc.display(),
                    i + 1
                ));
            }
            let Some(info) = line.trim_start().strip_prefix("```") else {
                i += 1;
                continue;
            };
            let fragment = i.checked_sub(1).and_then(|p| fragment_reason(lines[p]));
            let start = i + 1;
            let mut end = start;
            while end < lines.len() && !lines[end].trim_start().starts_with("```") {
                end += 1;
            }
            let block = &lines[start..end.min(lines.len())];
            let info = info.trim();
            if info == "yaml" {
                found.push(Example {
                    doc: doc.clone(),
                    line: i + 1,
                    yaml: block.join("\n") + "\n",
                    fragment,
                });
            } else if matches!(info, "sh" | "bash" | "shell" | "console") {
                // Here-documents written to a *.yaml file.
                let mut j = 0;
                while j < block.len() {
                    let l = block[j];
                    let to_yaml = l.contains(".yaml") && l.contains('>');
                    match heredoc.captures(l).filter(|_| to_yaml) {
                        Some(c) => {
                            let end_word = c[1].to_string();
                            let body: Vec<&str> = block[j + 1..]
                                .iter()
                                .take_while(|b| b.trim() != end_word)
                                .copied()
                                .collect();
                            j += body.len() + 2;
                            found.push(Example {
                                doc: doc.clone(),
                                line: i + 1,
                                yaml: body.join("\n") + "\n",
                                fragment: fragment.clone(),
                            });
                        }
                        None => j += 1,
                    }
                }
            }
            i = end + 1;
        }
    }
    (found, stray)
}

/// Whether a config example is a whole gateway config (it has a top-level `pools:`).
fn is_whole_config(yaml: &str) -> bool {
    yaml.lines().any(|l| l.starts_with("pools:"))
}

#[test]
fn every_whole_config_example_passes_mcp_edge_check() {
    let (examples, mut problems) = examples();
    let dir = std::env::temp_dir().join(format!("mcp-edge-docs-{}", std::process::id()));
    let (mut checked, mut marked) = (0, 0);
    for (n, ex) in examples.iter().enumerate() {
        let at = format!("{}:{}", ex.doc.display(), ex.line);
        let whole = is_whole_config(&ex.yaml);
        match (&ex.fragment, whole) {
            (Some(reason), _) if reason.is_empty() => {
                problems.push(format!("{at}: a fragment marker without a reason"));
                continue;
            }
            (Some(_), false) => {
                problems.push(format!(
                    "{at}: marked as a fragment, but it has no top-level pools: and is one anyway (remove the marker)"
                ));
                continue;
            }
            (Some(_), true) => {
                marked += 1;
                continue;
            }
            (None, false) => continue,
            (None, true) => {}
        }
        checked += 1;
        // A folder of its own per example, empty: relative paths resolve against nothing.
        let here = dir.join(n.to_string());
        std::fs::create_dir_all(&here).unwrap();
        std::fs::write(here.join("example.yaml"), &ex.yaml).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
            .args(["check", "--config", "example.yaml"])
            .current_dir(&here)
            .output()
            .unwrap();
        if !out.status.success() {
            problems.push(format!(
                "{at}: `mcp-edge check` refused this example (fix the example, or mark it as a fragment with the reason):\n{}{}\n---\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                ex.yaml
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        checked >= 3,
        "only {checked} whole config examples found ({marked} marked as fragments): is the pattern right?"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn the_index_lists_every_page_of_docs() {
    let index = std::fs::read_to_string(root().join("docs/README.md"))
        .expect("docs/README.md, the index of docs/, exists");
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        readme.contains("](docs/README.md)"),
        "README.md does not link the index docs/README.md"
    );
    let missing: Vec<String> = documents()
        .into_iter()
        .filter_map(|(doc, _)| {
            let name = doc.strip_prefix("docs").ok()?.to_str()?.to_string();
            (name != "README.md" && !index.contains(&format!("]({name})"))).then_some(name)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "pages of docs/ that the index docs/README.md does not link: {missing:?}"
    );
}

/// Every property name of a JSON Schema, at any depth.
fn schema_keys(v: &serde_json::Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::Object(props)) = map.get("properties") {
                out.extend(props.keys().cloned());
            }
            map.values().for_each(|x| schema_keys(x, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|x| schema_keys(x, out)),
        _ => {}
    }
}

/// The reference cannot fall behind the config: every key of `schema/gateway.schema.json` (the
/// schema `mcp-edge schema` prints, generated from the types that load the config, kept equal
/// to them by its own test) is documented: each top-level key in docs/configuration.md, each key
/// at any depth somewhere in README.md or docs/, shown as `key:` or `` `key` ``.
#[test]
fn every_config_key_of_the_schema_is_documented() {
    let text = std::fs::read_to_string(root().join("schema/gateway.schema.json")).unwrap();
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    let shown = |doc: &str, key: &str| {
        doc.lines().any(|l| {
            l.trim_start().starts_with(&format!("{key}:"))
                || l.contains(&format!("{{ {key}:"))
                || l.contains(&format!("{{{key}:"))
                || l.contains(&format!(", {key}:"))
        }) || doc.contains(&format!("`{key}`"))
            || doc.contains(&format!("`{key}:"))
            || doc.contains(&format!(".{key}`"))
    };
    let reference = std::fs::read_to_string(root().join("docs/configuration.md")).unwrap();
    let top: Vec<&String> = schema["properties"]
        .as_object()
        .expect("the schema has top-level properties")
        .keys()
        .collect();
    let missing_top: Vec<&&String> = top.iter().filter(|k| !shown(&reference, k)).collect();
    assert!(
        missing_top.is_empty(),
        "top-level config keys that docs/configuration.md does not show: {missing_top:?}"
    );
    let all_docs: String = documents().into_iter().map(|(_, t)| t + "\n").collect();
    let mut keys = std::collections::BTreeSet::new();
    schema_keys(&schema, &mut keys);
    assert!(keys.len() > 50, "only {} keys in the schema", keys.len());
    let missing: Vec<&String> = keys.iter().filter(|k| !shown(&all_docs, k)).collect();
    assert!(
        missing.is_empty(),
        "config keys that no page of the docs shows (as `key:` in an example or `key` in prose): {missing:?}"
    );
}
