//! Match patterns for header values (`Mcp-Method`, `Mcp-Name`, `Origin`): exact, `prefix*`, or
//! a glob with `*` and `?`. A config value that the route table, rate limits, concurrency limits,
//! auth rules and the origin check all match against; matching allocates nothing.

use serde::{Deserialize, Deserializer};
use std::fmt;

/// A value pattern: exact, `prefix*`, or a glob with `*` (any run) and `?` (one character).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    Any,
    Exact(String),
    Prefix(String),
    Glob(String),
}

impl Pattern {
    pub(crate) fn parse(s: &str) -> Pattern {
        if s == "*" {
            return Pattern::Any;
        }
        let wild = |c: char| c == '*' || c == '?';
        match s.find(wild) {
            None => Pattern::Exact(s.to_string()),
            Some(i) if i == s.len() - 1 && s.ends_with('*') => Pattern::Prefix(s[..i].to_string()),
            Some(_) => Pattern::Glob(s.to_string()),
        }
    }

    pub(crate) fn matches(&self, v: &str) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::Exact(e) => e == v,
            Pattern::Prefix(p) => v.starts_with(p.as_str()),
            Pattern::Glob(g) => glob(g, v, false),
        }
    }

    /// [`Pattern::matches`] with ASCII letters compared case-insensitively (an `Origin`'s
    /// scheme and host).
    pub(crate) fn matches_ignore_ascii_case(&self, v: &str) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::Exact(e) => e.eq_ignore_ascii_case(v),
            Pattern::Prefix(p) => v
                .as_bytes()
                .get(..p.len())
                .is_some_and(|h| h.eq_ignore_ascii_case(p.as_bytes())),
            Pattern::Glob(g) => glob(g, v, true),
        }
    }
}

/// Iterative glob match with backtracking to the last `*`; `?` is one character (`fold`: ASCII
/// letters in either case). No allocation.
fn glob(p: &str, v: &str, fold: bool) -> bool {
    let first = |s: &str, i: usize| s[i..].chars().next();
    let (mut pi, mut vi) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while let Some(vc) = first(v, vi) {
        match first(p, pi) {
            Some('*') => {
                star = Some((pi, vi));
                pi += 1;
                continue;
            }
            Some(pc) if pc == '?' || pc == vc || (fold && pc.eq_ignore_ascii_case(&vc)) => {
                pi += pc.len_utf8();
                vi += vc.len_utf8();
                continue;
            }
            _ => {}
        }
        let Some((sp, sv)) = star else { return false };
        // Let the last `*` swallow one more character and retry from there.
        let next = sv + first(v, sv).map_or(1, char::len_utf8);
        pi = sp + 1;
        vi = next;
        star = Some((sp, next));
    }
    p[pi..].chars().all(|c| c == '*')
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Pattern::Any => f.write_str("*"),
            Pattern::Exact(s) | Pattern::Glob(s) => f.write_str(s),
            Pattern::Prefix(p) => write!(f, "{p}*"),
        }
    }
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() {
            return Err(serde::de::Error::custom(
                "a match pattern cannot be empty; omit it to match anything",
            ));
        }
        Ok(Pattern::parse(&s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(Pattern::parse("tools/call").matches("tools/call"));
        assert!(!Pattern::parse("tools/call").matches("tools/call2"));
        assert_eq!(Pattern::parse("tools/*"), Pattern::Prefix("tools/".into()));
        assert!(Pattern::parse("tools/*").matches("tools/list"));
        assert!(!Pattern::parse("tools/*").matches("prompts/list"));
        assert!(Pattern::parse("deploy_*").matches("deploy_"));
        assert!(Pattern::parse("*_prod").matches("deploy_prod"));
        assert!(!Pattern::parse("*_prod").matches("deploy_dev"));
        assert!(Pattern::parse("a*b*c").matches("aXXbYYbZc"));
        assert!(!Pattern::parse("a*b*c").matches("aXXbYY"));
        assert!(Pattern::parse("m?t?o").matches("météo"));
        assert!(Pattern::parse("file:///srv/*.toml").matches("file:///srv/app/config.toml"));
        assert!(Pattern::parse("*").matches(""));
        assert!(!Pattern::parse("Tools/*").matches("tools/list"));
        assert!(Pattern::parse("Tools/*").matches_ignore_ascii_case("tools/list"));
        assert!(
            Pattern::parse("http://LOCALHOST:*").matches_ignore_ascii_case("HTTP://localhost:1")
        );
        assert!(
            Pattern::parse("https://App.example").matches_ignore_ascii_case("https://app.EXAMPLE")
        );
        assert!(!Pattern::parse("é*").matches_ignore_ascii_case("É"));
    }
}
