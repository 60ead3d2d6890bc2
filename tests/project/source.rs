//! Reading the crate's source the way the compiler resolves its paths, for the checks that read
//! it (`layers`, `cycles`, `style`): its files, the module path of each, its code without
//! comments and test modules, and the modules a file names (`crate::…`, `super::…`, `self::…`,
//! brace groups spread out).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file under `src/gateway/` (`stages/route/index.rs` -> stages, route, index).
pub(crate) fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut m: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if m.last().is_some_and(|l| l == "mod") {
        m.pop();
    }
    m
}

/// The source without comments and without its inline unit-test module (`mod tests { .. }`
/// at the end; a `mod tests;` declaration is skipped as a file of its own, [`test_files`]).
pub(crate) fn code_of(text: &str) -> String {
    let cut = text.find("#[cfg(test)]\nmod tests {").unwrap_or(text.len());
    text[..cut]
        .lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The files of unit-test modules declared out of line (`#[cfg(test)]`, an optional
/// `#[path = ".."]`, then `mod name;`): test code may reach any layer, so it is not read.
pub(crate) fn test_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for (i, l) in lines.iter().enumerate() {
            if *l != "#[cfg(test)]" && !l.starts_with("#[path = ") {
                continue;
            }
            let mut j = i + 1;
            let mut path = l
                .strip_prefix("#[path = \"")
                .and_then(|r| r.strip_suffix("\"]"));
            if path.is_none() {
                if let Some(p) = lines.get(j).and_then(|n| n.strip_prefix("#[path = \"")) {
                    path = p.strip_suffix("\"]");
                    j += 1;
                }
            }
            let cfg_test = *l == "#[cfg(test)]" || (i > 0 && lines[i - 1] == "#[cfg(test)]");
            let Some(name) = lines
                .get(j)
                .and_then(|n| n.strip_prefix("mod ")?.strip_suffix(';'))
            else {
                continue;
            };
            if !cfg_test {
                continue;
            }
            let dir = f.parent().unwrap();
            match path {
                Some(p) => {
                    out.insert(dir.join(p));
                }
                None => {
                    let base = if f.file_name().is_some_and(|n| n == "mod.rs") {
                        dir.to_path_buf()
                    } else {
                        f.with_extension("")
                    };
                    out.insert(base.join(format!("{name}.rs")));
                    out.insert(base.join(name).join("mod.rs"));
                }
            }
        }
    }
    out
}

/// Every path the code names that starts at `prefix` (the root the module paths are under),
/// `super` or `self`, resolved to a module path under that root.
pub(crate) fn named_paths_from(code: &str, me: &[String], prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let boundary = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let start = if !boundary {
            None
        } else if let Some(r) = rest.strip_prefix(prefix) {
            Some((Vec::new(), r, i + prefix.len()))
        } else if let Some(r) = rest.strip_prefix("self::") {
            Some((me.to_vec(), r, i + "self::".len()))
        } else if rest.starts_with("super::") {
            let mut base = me.to_vec();
            let mut r = rest;
            while let Some(x) = r.strip_prefix("super::") {
                base.pop();
                r = x;
            }
            Some((base, r, code.len() - r.len()))
        } else {
            None
        };
        match start {
            Some((base, r, at)) => {
                for tail in spread(r) {
                    let mut p = base.clone();
                    p.extend(tail);
                    out.push(p);
                }
                i = at;
            }
            None => i += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    out
}

/// `a::b::{c, d::e}` -> [a b c], [a b d e] (the first path expression of `s`).
fn spread(s: &str) -> Vec<Vec<String>> {
    let mut segs = Vec::new();
    let mut r = s;
    loop {
        let n = r
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(r.len());
        if n == 0 {
            break;
        }
        segs.push(r[..n].to_string());
        r = &r[n..];
        match r.strip_prefix("::") {
            Some(x) => r = x,
            None => break,
        }
    }
    if !r.starts_with('{') {
        return vec![segs];
    }
    // A brace group: split its top level on commas.
    let (mut depth, mut item, mut out) = (0, String::new(), Vec::new());
    for c in r[1..].chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut item));
                continue;
            }
            _ => {}
        }
        item.push(c);
    }
    out.push(item);
    out.iter()
        .flat_map(|it| spread(it.trim()))
        .map(|t| segs.iter().cloned().chain(t).collect())
        .collect()
}

/// The longest prefix of `path` that is a module (a file or a folder) under `root`.
pub(crate) fn module_named(root: &Path, path: &[String]) -> Vec<String> {
    for n in (1..=path.len()).rev() {
        let p: PathBuf = path[..n].iter().collect();
        if root.join(&p).with_extension("rs").is_file() || root.join(&p).is_dir() {
            return path[..n].to_vec();
        }
    }
    Vec::new()
}
