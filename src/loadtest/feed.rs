//! Per-flow argument templates and data feeds, so that tools with side effects do not get
//! identical calls: a string argument may hold `$uuid` (a random v4 UUID), `$seq` (the flow's
//! sequence number), `$rand(A,B)` (an integer from A to B inclusive) and `$feed.COLUMN` (a column
//! of the `--feed` file's row for this flow: CSV with a header line, or JSON Lines of objects;
//! rows taken in turn or at random). A string that is exactly one token becomes the token's
//! typed value (a number, or the feed's JSON value); otherwise tokens are spliced into the text.
//! `$$` is a literal `$`. Pure apart from reading the feed file once.

use std::path::Path;

use anyhow::{bail, Context as _};
use rand::Rng;
use serde_json::{Map, Value};

/// How rows of a feed are handed to flows.
#[derive(
    clap::ValueEnum,
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum FeedOrder {
    /// Flow N gets row N modulo the row count.
    #[default]
    RoundRobin,
    /// Each flow gets a row drawn at random.
    Random,
}

/// The rows of a data feed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Feed {
    pub columns: Vec<String>,
    pub rows: Vec<Map<String, Value>>,
    pub order: FeedOrder,
    /// A shard's feed: the run-wide `$seq` values of its flows are this far apart.
    pub stride: u64,
}

impl Feed {
    /// Read a `.csv` file (header line, then rows; values as strings) or a JSON Lines file
    /// (`.jsonl`/`.ndjson`: one object per line).
    pub(crate) fn load(path: &Path, order: FeedOrder) -> anyhow::Result<Feed> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the feed {}", path.display()))?;
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let mut feed = match ext.to_ascii_lowercase().as_str() {
            "csv" => Feed::parse_csv(&text),
            "jsonl" | "ndjson" => Feed::parse_jsonl(&text),
            _ => bail!("feed {}: use a .csv or .jsonl file", path.display()),
        }
        .with_context(|| format!("feed {}", path.display()))?;
        feed.order = order;
        Ok(feed)
    }

    pub(crate) fn parse_csv(text: &str) -> anyhow::Result<Feed> {
        let mut r = csv::Reader::from_reader(text.as_bytes());
        let columns: Vec<String> = r.headers()?.iter().map(str::to_owned).collect();
        let mut rows = Vec::new();
        for (i, rec) in r.records().enumerate() {
            let rec = rec.with_context(|| format!("row {}", i + 2))?;
            rows.push(
                columns
                    .iter()
                    .zip(rec.iter())
                    .map(|(c, v)| (c.clone(), Value::String(v.to_owned())))
                    .collect(),
            );
        }
        Feed::checked(columns, rows)
    }

    pub(crate) fn parse_jsonl(text: &str) -> anyhow::Result<Feed> {
        let mut rows = Vec::new();
        let mut columns: Vec<String> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let row: Map<String, Value> = serde_json::from_str(line)
                .with_context(|| format!("line {}: not a JSON object", i + 1))?;
            for k in row.keys() {
                if !columns.contains(k) {
                    columns.push(k.clone());
                }
            }
            rows.push(row);
        }
        Feed::checked(columns, rows)
    }

    fn checked(columns: Vec<String>, rows: Vec<Map<String, Value>>) -> anyhow::Result<Feed> {
        if rows.is_empty() {
            bail!("the feed has no rows");
        }
        Ok(Feed {
            columns,
            rows,
            order: FeedOrder::RoundRobin,
            stride: 1,
        })
    }

    /// Shard `s`'s feed: the rows ≡ s.index mod s.count, so that no two shards use one row.
    /// Its flows (`$seq` ≡ s.index) take them in turn: with a row count that is a multiple of
    /// the shard count, flow `seq` gets the very row it would get in one process.
    pub(crate) fn shard(self, s: super::shard::Shard) -> anyhow::Result<Feed> {
        if (self.rows.len() as u64) < s.count {
            bail!(
                "the feed has {} rows, fewer than the {} shards: each shard needs rows of its own",
                self.rows.len(),
                s.count
            );
        }
        let rows = self.rows.into_iter().enumerate();
        Ok(Feed {
            rows: rows
                .filter(|(i, _)| s.owns(*i as u64))
                .map(|(_, r)| r)
                .collect(),
            stride: s.count,
            ..self
        })
    }

    /// The row for flow `seq` (run-wide).
    pub(crate) fn row(&self, seq: u64, rng: &mut impl Rng) -> &Map<String, Value> {
        let i = match self.order {
            FeedOrder::RoundRobin => (seq / self.stride.max(1) % self.rows.len() as u64) as usize,
            FeedOrder::Random => rng.gen_range(0..self.rows.len()),
        };
        &self.rows[i]
    }
}

/// One token of a template string.
#[derive(Debug, Clone, PartialEq)]
enum Token<'a> {
    Text(&'a str),
    Uuid,
    Seq,
    Rand(i64, i64),
    Feed(&'a str),
}

fn tokens(s: &str) -> Result<Vec<Token<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        if i > 0 {
            out.push(Token::Text(&rest[..i]));
        }
        let t = &rest[i + 1..];
        let ident_len = |t: &str| {
            t.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(t.len())
        };
        if let Some(r) = t.strip_prefix('$') {
            out.push(Token::Text("$"));
            rest = r;
        } else if let Some(r) = t.strip_prefix("uuid") {
            out.push(Token::Uuid);
            rest = r;
        } else if let Some(r) = t.strip_prefix("seq") {
            out.push(Token::Seq);
            rest = r;
        } else if let Some(r) = t.strip_prefix("rand(") {
            let end = r
                .find(')')
                .ok_or_else(|| format!("{s:?}: $rand( without )"))?;
            let (a, b) = r[..end]
                .split_once(',')
                .ok_or_else(|| format!("{s:?}: write $rand(LOW,HIGH)"))?;
            let p = |x: &str| {
                x.trim()
                    .parse::<i64>()
                    .map_err(|_| format!("{s:?}: $rand bounds must be integers"))
            };
            let (a, b) = (p(a)?, p(b)?);
            if a > b {
                return Err(format!("{s:?}: $rand({a},{b}) has LOW above HIGH"));
            }
            out.push(Token::Rand(a, b));
            rest = &r[end + 1..];
        } else if let Some(r) = t.strip_prefix("feed.") {
            let n = ident_len(r);
            if n == 0 {
                return Err(format!("{s:?}: $feed. needs a column name"));
            }
            out.push(Token::Feed(&r[..n]));
            rest = &r[n..];
        } else {
            // Not a template token (e.g. `$args.x` in an answer table): kept as text.
            out.push(Token::Text("$"));
            rest = t;
        }
    }
    if !rest.is_empty() {
        out.push(Token::Text(rest));
    }
    Ok(out)
}

fn is_templated(s: &str) -> bool {
    tokens(s).is_ok_and(|t| t.iter().any(|t| !matches!(t, Token::Text(_))))
}

/// Whether any string inside `v` holds a template token.
pub(crate) fn has_templates(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('$') && is_templated(s),
        Value::Array(a) => a.iter().any(has_templates),
        Value::Object(o) => o.values().any(has_templates),
        _ => false,
    }
}

/// Check every template in `v` before the run: syntax, and feed columns against `feed`.
pub(crate) fn validate(v: &Value, feed: Option<&Feed>) -> Result<(), String> {
    match v {
        Value::String(s) if s.contains('$') => {
            for t in tokens(s)? {
                if let Token::Feed(col) = t {
                    match feed {
                        None => {
                            return Err(format!("{s:?} uses $feed.{col} but no --feed is given"))
                        }
                        Some(f) if !f.columns.iter().any(|c| c == col) => {
                            return Err(format!(
                                "{s:?}: the feed has no column {col:?} (columns: {})",
                                f.columns.join(", ")
                            ))
                        }
                        Some(_) => {}
                    }
                }
            }
            Ok(())
        }
        Value::Array(a) => a.iter().try_for_each(|x| validate(x, feed)),
        Value::Object(o) => o.values().try_for_each(|x| validate(x, feed)),
        _ => Ok(()),
    }
}

/// What one flow's templates are rendered with.
pub(crate) struct Vars<'a, R: Rng> {
    pub seq: u64,
    pub row: Option<&'a Map<String, Value>>,
    pub rng: &'a mut R,
}

fn uuid_v4(rng: &mut impl Rng) -> String {
    let b: [u8; 16] = rng.gen();
    let x = u128::from_be_bytes(b);
    let x = (x & !(0xf << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let h = format!("{x:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

fn token_value<R: Rng>(t: &Token<'_>, vars: &mut Vars<'_, R>) -> Value {
    match t {
        Token::Text(s) => Value::String((*s).to_owned()),
        Token::Uuid => Value::String(uuid_v4(vars.rng)),
        Token::Seq => Value::from(vars.seq),
        Token::Rand(a, b) => Value::from(vars.rng.gen_range(*a..=*b)),
        Token::Feed(c) => vars
            .row
            .and_then(|r| r.get(*c))
            .cloned()
            .unwrap_or(Value::Null),
    }
}

/// `v` with every template rendered (validate first: an invalid template is left as it is).
pub(crate) fn render<R: Rng>(v: &Value, vars: &mut Vars<'_, R>) -> Value {
    match v {
        Value::String(s) if s.contains('$') => match tokens(s) {
            Ok(ts) if ts.len() == 1 => token_value(&ts[0], vars),
            Ok(ts) => {
                let mut out = String::new();
                for t in &ts {
                    match token_value(t, vars) {
                        Value::String(s) => out.push_str(&s),
                        Value::Null => {}
                        other => out.push_str(&other.to_string()),
                    }
                }
                Value::String(out)
            }
            Err(_) => v.clone(),
        },
        Value::Array(a) => Value::Array(a.iter().map(|x| render(x, vars)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), render(x, vars)))
                .collect(),
        ),
        _ => v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use serde_json::json;

    #[test]
    fn tokens_render_typed_or_spliced() {
        let feed = Feed::parse_csv("user,team\nann,red\n\"bo, jr\",blue\n").unwrap();
        assert_eq!(feed.columns, ["user", "team"]);
        let args = json!({"id": "$uuid", "n": "$seq", "r": "$rand(5,7)", "who": "$feed.user",
            "repo": "repo-$seq-$feed.team", "price": "$$5", "plain": 3, "keep": "$args.x"});
        assert!(has_templates(&args));
        assert!(!has_templates(&json!({"a": "$args.x", "b": "5$"})));
        validate(&args, Some(&feed)).unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        let mut seen = std::collections::BTreeSet::new();
        for seq in 0..4u64 {
            let row = feed.row(seq, &mut rng).clone();
            let mut vars = Vars {
                seq,
                row: Some(&row),
                rng: &mut rng,
            };
            let v = render(&args, &mut vars);
            assert_eq!(v["n"], seq);
            assert!((5..=7).contains(&v["r"].as_i64().unwrap()));
            let id = v["id"].as_str().unwrap();
            assert_eq!(id.len(), 36);
            assert_eq!(&id[14..15], "4");
            assert!(seen.insert(id.to_string()));
            let (user, team) = if seq % 2 == 0 {
                ("ann", "red")
            } else {
                ("bo, jr", "blue")
            };
            assert_eq!(v["who"], user);
            assert_eq!(v["repo"], format!("repo-{seq}-{team}"));
            assert_eq!(v["price"], "$5");
            assert_eq!(v["plain"], 3);
            assert_eq!(v["keep"], "$args.x");
        }
    }

    #[test]
    fn bad_templates_and_feeds_are_refused_with_a_reason() {
        let feed = Feed::parse_jsonl("{\"a\": 1}\n\n{\"a\": 2, \"b\": [1]}\n").unwrap();
        assert_eq!(feed.columns, ["a", "b"]);
        assert_eq!(feed.rows[1]["b"], json!([1]));
        let e = validate(&json!({"x": "$feed.zz"}), Some(&feed)).unwrap_err();
        assert!(e.contains("no column \"zz\"") && e.contains("a, b"), "{e}");
        assert!(validate(&json!("$feed.a"), None)
            .unwrap_err()
            .contains("no --feed"));
        assert!(validate(&json!("$rand(9,1)"), None).is_err());
        assert!(validate(&json!("$rand(1)"), None).is_err());
        assert!(Feed::parse_jsonl("[1]\n").is_err());
        assert!(Feed::parse_csv("a,b\n").is_err());
    }
}
