//! Where each key and value of a YAML file sits: one walk of the parser's event stream records
//! the line and column of every mapping key and every value under its path
//! (`rate_limits[1].name`, `pools.default.instances[0]`), so a check made after parsing (a
//! duplicate name, a dangling reference) points at the offending occurrence itself, not at the
//! first line that happens to contain the same text.
//!
//! Paths join mapping keys with `.` and sequence items with `[i]`, as the error messages write
//! them. Only the first document of a stream is indexed (the config is one document).

use std::collections::HashMap;
use std::fmt;
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::Marker;

/// A 1-based line and column in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pos {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// The positions of one file's keys and values, by path.
#[derive(Debug, Default, Clone)]
pub(crate) struct Positions {
    keys: HashMap<String, Pos>,
    values: HashMap<String, Pos>,
}

/// Where the walk is: inside a mapping (maybe after its key) or a sequence (at an index).
enum Frame {
    Map { path: String, key: Option<String> },
    Seq { path: String, next: usize },
}

fn pos(m: &Marker) -> Pos {
    // yaml-rust2 counts lines from 1 and columns from 0.
    Pos {
        line: m.line(),
        column: m.col() + 1,
    }
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl Positions {
    /// Index `text`. A file the parser refuses yields what was seen before the fault (the caller
    /// reports YAML syntax errors from serde, which says where they are).
    pub(crate) fn of(text: &str) -> Positions {
        let mut out = Positions::default();
        let mut stack: Vec<Frame> = Vec::new();
        let mut parser = Parser::new_from_str(text);
        let mut started = false;
        while let Ok((event, mark)) = parser.next_token() {
            let at = pos(&mark);
            // The path a value arriving now belongs to; None when the scalar is a mapping key.
            let value_path = match stack.last_mut() {
                None => Some(String::new()),
                Some(Frame::Map { key: None, .. }) => None,
                Some(Frame::Map { path, key }) => Some(join(path, &key.take().unwrap_or_default())),
                Some(Frame::Seq { path, next }) => {
                    *next += 1;
                    Some(format!("{path}[{}]", *next - 1))
                }
            };
            match event {
                Event::StreamEnd | Event::DocumentEnd if started => break,
                Event::DocumentStart => started = true,
                Event::Scalar(s, ..) => match value_path {
                    Some(p) => {
                        out.values.insert(p, at);
                    }
                    None => {
                        if let Some(Frame::Map { path, key }) = stack.last_mut() {
                            out.keys.entry(join(path, &s)).or_insert(at);
                            *key = Some(s);
                        }
                    }
                },
                Event::Alias(_) => {
                    if let Some(p) = value_path {
                        out.values.insert(p, at);
                    }
                }
                Event::MappingStart(..) | Event::SequenceStart(..) => {
                    // A collection used as a mapping key is not addressable by a path.
                    let path = value_path.unwrap_or_else(|| "?".into());
                    out.values.insert(path.clone(), at);
                    stack.push(match event {
                        Event::MappingStart(..) => Frame::Map { path, key: None },
                        _ => Frame::Seq { path, next: 0 },
                    });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                }
                _ => {}
            }
        }
        out
    }

    /// Where the key of `path` is written (for a sequence item: where the item starts).
    pub(crate) fn key(&self, path: &str) -> Option<Pos> {
        self.keys
            .get(path)
            .or_else(|| self.values.get(path))
            .copied()
    }

    /// Where the value of `path` starts.
    pub(crate) fn value(&self, path: &str) -> Option<Pos> {
        self.values.get(path).copied()
    }

    /// The value of `path` if the file writes it, else the key of its nearest written ancestor
    /// (a missing or defaulted key points at the section that should hold it).
    pub(crate) fn near(&self, path: &str) -> Option<Pos> {
        let mut p = path;
        if let Some(v) = self.value(p) {
            return Some(v);
        }
        loop {
            if let Some(k) = self.key(p) {
                return Some(k);
            }
            let cut = p.rfind(['.', '['])?;
            p = &p[..cut];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
pools:
  default:
    instances: [127.0.0.1:7001, 127.0.0.1:7002]
rate_limits:
  - name: a
    rate: 1/s
  - {name: a, rate: 2/s}
";

    #[test]
    fn keys_and_values_by_path() {
        let p = Positions::of(TEXT);
        let at = |line, column| Some(Pos { line, column });
        assert_eq!(p.key("pools"), at(1, 1));
        assert_eq!(p.key("pools.default.instances"), at(3, 5));
        assert_eq!(p.value("pools.default.instances[1]"), at(3, 33));
        assert_eq!(p.value("rate_limits[0].name"), at(5, 11));
        // The second `name: a` is found as itself, not as the first match of the text.
        assert_eq!(p.key("rate_limits[1].name"), at(7, 6));
        assert_eq!(p.value("rate_limits[1].name"), at(7, 12));
        assert_eq!(p.value("rate_limits[1]"), at(7, 5));
    }

    #[test]
    fn near_falls_back_to_the_closest_written_ancestor() {
        let p = Positions::of(TEXT);
        assert_eq!(p.near("rate_limits[1].max_keys"), p.value("rate_limits[1]"));
        assert_eq!(
            p.near("pools.default.health.interval"),
            p.key("pools.default")
        );
        assert_eq!(p.near("auth.jwks"), None);
    }
}
