//! Docs that cannot rot: in README.md and docs/*.md, every relative link points at a file or
//! folder of the repository (and its `#anchor`, when it has one, at a heading of that file),
//! every repository path they name (`src/…`, `tests/…`, `bench/…`, `deploy/…`, `docs/…`,
//! `scripts/…`, `examples/…`) exists, and every command of the README's Quick start exists:
//! each `mcp-edge` subcommand answers `--help`, each script is there and executable.
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
