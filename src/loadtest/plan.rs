//! Everything decided before the first leg: which scenario runs (a built-in, a file,
//! `--scenario auto` or the `--tool` one-liner), the preflight against the target, the user's
//! headers, `Mcp-Param-*` headers for tools that declare `x-mcp-header`, the compiled flow
//! templates and content checks, and the data feed. A flow whose arguments hold templates
//! (`$seq`, `$feed.x`, ...) is compiled again for each run of it ([`FlowPlan::instantiate`]).

use anyhow::{bail, Context as _};
use http::{HeaderMap, HeaderName, HeaderValue};
use rand::Rng;
use serde_json::Value;

use super::auto;
use super::checks::{Check, CheckSpec};
use super::client::Http;
use super::feed::{self, Feed, Vars};
use super::preflight::{self, header_params, Discovery, PreflightError};
use super::scenario::{FlowSpec, Scenario};
use super::template::FlowTemplate;
use super::trial;
use super::LoadTestArgs;

/// One flow ready to run.
pub(super) struct FlowPlan {
    pub tpl: FlowTemplate,
    pub spec: FlowSpec,
    /// The arguments hold templates: compile per run.
    pub dynamic: bool,
    pub checks: Vec<Check>,
}

impl FlowPlan {
    /// The template for run `seq` of a dynamic flow: arguments rendered, headers rebuilt.
    pub(crate) fn instantiate(
        &self,
        seq: u64,
        rng: &mut impl Rng,
        feed: Option<&Feed>,
        extra: &HeaderMap,
    ) -> anyhow::Result<FlowTemplate> {
        let row = feed.map(|f| f.row(seq, rng).clone());
        let mut vars = Vars {
            seq,
            row: row.as_ref(),
            rng,
        };
        let args = feed::render(&Value::Object(self.spec.arguments.clone()), &mut vars);
        let spec = FlowSpec {
            arguments: match args {
                Value::Object(m) => m,
                _ => unreachable!("an object renders to an object"),
            },
            ..self.spec.clone()
        };
        let mut t = FlowTemplate::new(&spec)?;
        add_headers(&mut t, extra);
        Ok(t)
    }
}

/// What [`build`] decided.
pub(super) struct Plan {
    pub scenario: Scenario,
    pub flows: Vec<FlowPlan>,
    pub discovery: Option<Discovery>,
    pub feed: Option<Feed>,
    /// The `-H` headers.
    pub extra: HeaderMap,
    /// `--scenario auto`: tools left out, with the reason.
    pub excluded: Vec<(String, &'static str)>,
}

/// Parse `-H 'Name: value'` headers.
pub(crate) fn parse_headers(list: &[String]) -> anyhow::Result<HeaderMap> {
    let mut h = HeaderMap::new();
    for raw in list {
        let (n, v) = raw
            .split_once(':')
            .with_context(|| format!("--header {raw:?}: write 'Name: value'"))?;
        let name = HeaderName::from_bytes(n.trim().as_bytes())
            .with_context(|| format!("--header {raw:?}: {:?} is not a header name", n.trim()))?;
        let value = HeaderValue::from_str(v.trim())
            .with_context(|| format!("--header {raw:?}: the value is not a valid header value"))?;
        h.append(name, value);
    }
    Ok(h)
}

fn add_headers(t: &mut FlowTemplate, extra: &HeaderMap) {
    for (k, v) in extra {
        t.headers.insert(k, v.clone());
        t.bad_headers.insert(k, v.clone());
    }
}

/// The headers of a preflight request: a plain request's, the user's, one principal.
fn preflight_headers(opts: &LoadTestArgs, extra: &HeaderMap) -> anyhow::Result<HeaderMap> {
    let spec: FlowSpec = serde_yaml::from_str("method: tools/list").expect("valid flow");
    let mut t = FlowTemplate::new(&spec)?;
    add_headers(&mut t, extra);
    if !extra.contains_key(http::header::AUTHORIZATION) {
        let p = opts
            .principal_tokens()
            .into_iter()
            .next()
            .unwrap_or_default();
        t.headers.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {p}"))?,
        );
    }
    Ok(t.headers)
}

/// Decide the scenario and compile it; runs the preflight unless `--no-preflight`.
pub(super) async fn build(opts: &LoadTestArgs, http: &Http, print: bool) -> anyhow::Result<Plan> {
    let extra = parse_headers(&opts.header)?;
    let want_auto = opts.tool.is_none() && opts.scenario == auto::AUTO;
    let discovery = discover(opts, http, &extra, want_auto, print).await?;
    let (mut scenario, mut excluded) = choose_scenario(opts, discovery.as_ref(), want_auto)?;
    if let Some(d) = &discovery {
        d.check_scenario(&scenario)?;
        add_param_headers(&mut scenario, d);
    }
    let cli_checks = opts
        .check
        .iter()
        .map(|c| CheckSpec::parse_cli(c))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // A shard reads the whole feed and keeps its own rows.
    let feed = match (&opts.feed, opts.shard) {
        (Some(p), Some(s)) => Some(Feed::load(p, opts.feed_order)?.shard(s)?),
        (Some(p), None) => Some(Feed::load(p, opts.feed_order)?),
        (None, _) => None,
    };
    let given = Given {
        feed: feed.as_ref(),
        discovery: discovery.as_ref(),
        cli_checks: &cli_checks,
        extra: &extra,
    };
    let mut flows = Vec::with_capacity(scenario.flows.len());
    for spec in &scenario.flows {
        flows.push(compile_flow(spec, given)?);
    }
    if want_auto {
        try_tools(
            opts,
            http,
            &extra,
            (&mut scenario, &mut flows),
            &mut excluded,
        )
        .await?;
        if print && !excluded.is_empty() {
            let list: Vec<String> = excluded.iter().map(|(n, w)| format!("{n} ({w})")).collect();
            eprintln!("preflight: auto scenario leaves out {}", list.join(", "));
        }
    }
    Ok(Plan {
        scenario,
        flows,
        discovery,
        feed,
        extra,
        excluded,
    })
}

/// The preflight against the target (its summary printed when `print`), or `None` with
/// `--no-preflight` (refused when the scenario is `auto`, which needs it).
async fn discover(
    opts: &LoadTestArgs,
    http: &Http,
    extra: &HeaderMap,
    want_auto: bool,
    print: bool,
) -> anyhow::Result<Option<Discovery>> {
    if opts.no_preflight {
        if want_auto {
            bail!("--scenario auto needs the preflight's tools/list; leave out --no-preflight");
        }
        return Ok(None);
    }
    let d = preflight::discover(http, &preflight_headers(opts, extra)?, opts.timeout).await;
    if print {
        eprintln!("{}", d.summary());
    }
    Ok(Some(d))
}

/// The scenario to run: the `--tool` one-liner, `auto` (from the preflight's tools, with those
/// left out and why), or a built-in or file.
fn choose_scenario(
    opts: &LoadTestArgs,
    discovery: Option<&Discovery>,
    want_auto: bool,
) -> anyhow::Result<(Scenario, Vec<(String, &'static str)>)> {
    let scenario = match (&opts.tool, want_auto) {
        (Some(t), _) => Scenario::one_tool(t, opts.tool_args.as_deref(), &opts.answer)?,
        (None, true) => {
            let d = discovery.expect("preflight ran");
            if let Some(e) = &d.list_error {
                return Err(PreflightError(format!(
                    "--scenario auto needs the target's tools, but tools/list failed: {e}"
                ))
                .into());
            }
            let (s, ex) = auto::scenario(&d.tools, opts.include_destructive)
                .map_err(|e| PreflightError(format!("{e:#}")))?;
            return Ok((s, ex));
        }
        (None, false) => Scenario::load(&opts.scenario)?,
    };
    Ok((scenario, Vec::new()))
}

/// `--scenario auto`: call each tool once ([`trial`]) and leave out those that answer an error,
/// with the reason (refused when no tool is left).
async fn try_tools(
    opts: &LoadTestArgs,
    http: &Http,
    extra: &HeaderMap,
    (scenario, flows): (&mut Scenario, &mut Vec<FlowPlan>),
    excluded: &mut Vec<(String, &'static str)>,
) -> anyhow::Result<()> {
    let auth = preflight_headers(opts, extra)?
        .get(http::header::AUTHORIZATION)
        .cloned();
    let tpls: Vec<&FlowTemplate> = flows.iter().map(|f| &f.tpl).collect();
    let verdicts = trial::run(http, &tpls, auth.as_ref(), opts.timeout).await;
    for (f, why) in flows.iter().zip(&verdicts) {
        if let Some(why) = why {
            excluded.push((f.spec.tool.clone().unwrap_or_default(), why));
        }
    }
    // Flows and the scenario's specs are in the same order.
    let keep: Vec<bool> = verdicts.iter().map(Option::is_none).collect();
    let mut k = keep.iter();
    flows.retain(|_| *k.next().unwrap_or(&true));
    let mut k = keep.iter();
    scenario.flows.retain(|_| *k.next().unwrap_or(&true));
    if flows.is_empty() {
        let why: Vec<String> = excluded.iter().map(|(n, w)| format!("{n}: {w}")).collect();
        return Err(PreflightError(format!(
            "--scenario auto: every tool the target offers was left out ({})",
            why.join("; ")
        ))
        .into());
    }
    Ok(())
}

/// Tools that declare x-mcp-header get their Mcp-Param-* headers, unless the flow says.
fn add_param_headers(scenario: &mut Scenario, d: &Discovery) {
    for f in &mut scenario.flows {
        let Some(tool) = f.tool.as_deref().and_then(|t| d.tool(t)) else {
            continue;
        };
        if f.param_headers.is_empty() {
            for (arg, suffix) in header_params(tool) {
                if f.arguments.contains_key(&arg) {
                    f.param_headers.insert(suffix, arg);
                }
            }
        }
    }
}

/// What every flow is compiled against.
#[derive(Clone, Copy)]
struct Given<'a> {
    feed: Option<&'a Feed>,
    discovery: Option<&'a Discovery>,
    /// The `--check` options (applied to every tool flow).
    cli_checks: &'a [CheckSpec],
    /// The `-H` headers.
    extra: &'a HeaderMap,
}

/// One flow compiled: its arguments checked against the feed, its content checks (its own,
/// then the `--check` ones) against the tool's output schema, its template with the headers.
fn compile_flow(spec: &FlowSpec, given: Given<'_>) -> anyhow::Result<FlowPlan> {
    let args = Value::Object(spec.arguments.clone());
    feed::validate(&args, given.feed)
        .map_err(|e| anyhow::anyhow!("flow {:?}: {e}", spec.label()))?;
    let out_schema = spec
        .tool
        .as_deref()
        .and_then(|t| given.discovery?.tool(t)?.get("outputSchema"));
    let mut checks = Vec::new();
    for c in &spec.checks {
        checks.push(
            Check::compile(c, out_schema)
                .with_context(|| format!("flow {:?}, check {}", spec.label(), c.label()))?,
        );
    }
    if spec.tool.is_some() {
        for c in given.cli_checks {
            if c.output_schema && out_schema.is_none() {
                continue; // `--check schema` applies to tools that declare one.
            }
            checks.push(
                Check::compile(c, out_schema).with_context(|| format!("--check {}", c.label()))?,
            );
        }
    }
    let mut tpl = FlowTemplate::new(spec)?;
    add_headers(&mut tpl, given.extra);
    let label = tpl.label.clone();
    for c in &mut checks {
        c.label = format!("{label}: {}", c.label);
    }
    Ok(FlowPlan {
        tpl,
        spec: spec.clone(),
        dynamic: feed::has_templates(&args),
        checks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_headers_parse_and_refuse_nonsense() {
        let h = parse_headers(&["X-Api-Key: k1".into(), "X-Tenant:acme ".into()]).unwrap();
        assert_eq!(h["x-api-key"], "k1");
        assert_eq!(h["x-tenant"], "acme");
        assert!(parse_headers(&["no colon".into()]).is_err());
        assert!(parse_headers(&["bad name: v".into()]).is_err());
    }
}
