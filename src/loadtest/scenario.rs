//! Scenarios: which flows a load test runs and with what weights ([`Scenario`], [`FlowSpec`]),
//! the built-in ones, reading a scenario file (YAML or JSON) and validating it, and the weighted
//! pick of the next flow. Plain data; no I/O beyond reading the file.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::checks::CheckSpec;
use crate::mcp::methods;

/// How many legs a flow may take before it is abandoned, unless the scenario says otherwise.
pub const DEFAULT_MAX_ROUNDS: u32 = 8;

/// Prefix of an answer-table string that refers to an argument of the flow: `"$args.service"`.
pub const ARG_REF_PREFIX: &str = "$args.";

/// One flow of a scenario: a `tools/call` (possibly several MRTR legs) or a plain request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Display name; defaults to the tool or method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A `tools/call` of this tool...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// ...or a plain request with this method (`server/discover`, `tools/list`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Tool arguments, sent unchanged on every leg.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub arguments: Map<String, Value>,
    /// Relative weight in the scenario's mix.
    #[serde(default = "one")]
    pub weight: u32,
    /// Answers to elicitation properties, by property name (merged over the defaults
    /// `name: octocat`, `role: admin`). A string `"$args.X"` is the argument `X`.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub answers: Map<String, Value>,
    /// `Mcp-Param-{Header}` headers mirrored from arguments: header suffix → argument name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub param_headers: BTreeMap<String, String>,
    /// Checks on the final result of each flow (see [`CheckSpec`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckSpec>,
    /// Declare the Tasks extension: a call answered with a task is followed through
    /// `tasks/get` (with backoff), `tasks/update` (answering its input requests) and, for a
    /// share of them (`--task-cancel-share`), `tasks/cancel`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tasks: bool,
}

fn one() -> u32 {
    1
}

impl FlowSpec {
    pub(crate) fn call(tool: &str, arguments: Value, weight: u32) -> Self {
        FlowSpec {
            name: None,
            tool: Some(tool.into()),
            method: None,
            arguments: match arguments {
                Value::Object(m) => m,
                _ => Map::new(),
            },
            weight,
            answers: Map::new(),
            param_headers: BTreeMap::new(),
            checks: Vec::new(),
            tasks: false,
        }
    }

    pub(crate) fn with_tasks(mut self) -> Self {
        self.tasks = true;
        self
    }

    pub(crate) fn plain(method: &str, weight: u32) -> Self {
        FlowSpec {
            tool: None,
            method: Some(method.into()),
            ..FlowSpec::call("", json!({}), weight)
        }
    }

    pub(crate) fn answer(mut self, property: &str, value: Value) -> Self {
        self.answers.insert(property.into(), value);
        self
    }

    pub(crate) fn param_header(mut self, header_suffix: &str, argument: &str) -> Self {
        self.param_headers
            .insert(header_suffix.into(), argument.into());
        self
    }

    /// The label used in reports: `tools/call create_repo` or the plain method.
    pub(crate) fn label(&self) -> String {
        match (&self.name, &self.tool, &self.method) {
            (Some(n), _, _) => n.clone(),
            (None, Some(t), _) => format!("{} {t}", methods::TOOLS_CALL),
            (None, None, Some(m)) => m.clone(),
            (None, None, None) => "?".into(),
        }
    }
}

/// A weighted mix of flows, from a built-in name or a YAML/JSON file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// Legs after which an unfinished flow is abandoned.
    #[serde(default = "default_max_rounds")]
    pub max_rounds: u32,
    pub flows: Vec<FlowSpec>,
}

fn default_max_rounds() -> u32 {
    DEFAULT_MAX_ROUNDS
}

/// Built-in scenario names with a one-line description (shown by `--help`).
pub const BUILTIN_SCENARIOS: &[(&str, &str)] = &[
    (
        "mixed",
        "create_repo 3, deploy 2, charge 2, onboard 2, echo 1, tools/list 1, server/discover 1",
    ),
    (
        "mrtr",
        "create_repo, deploy, charge, onboard, equal weights",
    ),
    ("multi-round", "onboard only (two input_required rounds)"),
    ("plain", "tools/list and server/discover"),
    ("create_repo", "create_repo only"),
    ("deploy", "deploy only"),
    ("charge", "charge only"),
    ("onboard", "onboard only"),
    ("echo", "echo only (one leg, no MRTR)"),
    (
        "tasks",
        "Tasks extension: deploy_async 3 (confirm through tasks/update), slow_compute 1; polls tasks/get, cancels --task-cancel-share",
    ),
];

fn builtin_flows() -> [FlowSpec; 7] {
    [
        FlowSpec::call("create_repo", json!({"repo": "loadtest"}), 3),
        FlowSpec::call(
            "deploy",
            json!({"service": "payments", "environment": "staging"}),
            2,
        )
        .answer("confirmation", json!(format!("{ARG_REF_PREFIX}service")))
        .param_header("Environment", "environment"),
        FlowSpec::call("charge", json!({"cart_id": "c18", "amount": 48}), 2),
        FlowSpec::call("onboard", json!({"team": "platform"}), 2).answer("role", json!("admin")),
        FlowSpec::call("echo", json!({"text": "hello"}), 1),
        FlowSpec::plain(methods::TOOLS_LIST, 1),
        FlowSpec::plain(methods::DISCOVER, 1),
    ]
}

/// The flows of the `tasks` scenario: the reference backend's task tools, short runs.
fn task_flows() -> Vec<FlowSpec> {
    vec![
        FlowSpec::call(
            "deploy_async",
            json!({"service": "payments", "environment": "staging", "seconds": 1}),
            3,
        )
        .answer("confirmation", json!(format!("{ARG_REF_PREFIX}service")))
        .with_tasks(),
        FlowSpec::call(
            "slow_compute",
            json!({"seconds": 0.5, "label": "loadtest"}),
            1,
        )
        .with_tasks(),
    ]
}

impl Scenario {
    /// Does any flow follow tasks?
    pub(crate) fn has_tasks(&self) -> bool {
        self.flows.iter().any(|f| f.tasks)
    }

    /// A built-in scenario by name.
    pub fn builtin(name: &str) -> Option<Scenario> {
        let [create_repo, deploy, charge, onboard, echo, list, discover] = builtin_flows();
        let equal = |f: FlowSpec| FlowSpec { weight: 1, ..f };
        let flows = match name {
            "mixed" => vec![create_repo, deploy, charge, onboard, echo, list, discover],
            "mrtr" => vec![
                equal(create_repo),
                equal(deploy),
                equal(charge),
                equal(onboard),
            ],
            "multi-round" | "onboard" => vec![equal(onboard)],
            "plain" => vec![list, discover],
            "create_repo" => vec![equal(create_repo)],
            "deploy" => vec![equal(deploy)],
            "charge" => vec![equal(charge)],
            "echo" => vec![equal(echo)],
            "tasks" => task_flows(),
            _ => return None,
        };
        Some(Scenario {
            name: name.into(),
            max_rounds: DEFAULT_MAX_ROUNDS,
            flows,
        })
    }

    /// Parse a scenario document (YAML, of which JSON is a subset).
    pub(crate) fn parse(text: &str) -> anyhow::Result<Scenario> {
        let s: Scenario = serde_yaml::from_str(text).context("invalid scenario document")?;
        s.validate()?;
        Ok(s)
    }

    /// The one-liner scenario of `--tool NAME --args JSON --answer KEY=VALUE`.
    pub(crate) fn one_tool(
        tool: &str,
        args: Option<&str>,
        answers: &[String],
    ) -> anyhow::Result<Scenario> {
        let arguments = match args {
            None => Value::Object(Map::new()),
            Some(a) => serde_json::from_str(a).with_context(|| {
                format!("--args {a:?} is not JSON; write an object, e.g. '{{\"repo\": \"demo\"}}'")
            })?,
        };
        if !arguments.is_object() {
            bail!("--args must be a JSON object, not {arguments}");
        }
        let mut flow = FlowSpec::call(tool, arguments, 1);
        for a in answers {
            let (k, v) = a
                .split_once('=')
                .with_context(|| format!("--answer {a:?}: write KEY=VALUE"))?;
            let v = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.into()));
            flow = flow.answer(k.trim(), v);
        }
        let s = Scenario {
            name: format!("tool {tool}"),
            max_rounds: DEFAULT_MAX_ROUNDS,
            flows: vec![flow],
        };
        s.validate()?;
        Ok(s)
    }

    /// The tools the scenario calls.
    pub(crate) fn tools(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .flows
            .iter()
            .filter_map(|f| f.tool.as_deref())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// A built-in name, or else a path to a YAML/JSON file.
    pub(crate) fn load(name_or_file: &str) -> anyhow::Result<Scenario> {
        if let Some(s) = Scenario::builtin(name_or_file) {
            return Ok(s);
        }
        let path = Path::new(name_or_file);
        if !path.exists() {
            let names: Vec<&str> = BUILTIN_SCENARIOS.iter().map(|(n, _)| *n).collect();
            bail!(
                "unknown scenario {name_or_file:?}: not a built-in ({}) and no such file",
                names.join(", ")
            );
        }
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Scenario::parse(&text).with_context(|| format!("scenario file {}", path.display()))
    }

    pub(crate) fn validate(&self) -> anyhow::Result<()> {
        if self.flows.is_empty() {
            bail!("scenario {:?} has no flows", self.name);
        }
        if self.max_rounds == 0 {
            bail!("max_rounds must be at least 1");
        }
        if self.flows.iter().all(|f| f.weight == 0) {
            bail!("scenario {:?}: every weight is 0", self.name);
        }
        for f in &self.flows {
            match (&f.tool, &f.method) {
                (Some(_), None) => {}
                (None, Some(m)) if methods::name_field(m).is_none() => {}
                (None, Some(m)) => bail!(
                    "flow {:?}: method {m} needs a name; use `tool:` for tools/call",
                    f.label()
                ),
                _ => bail!(
                    "flow {:?}: give exactly one of `tool` or `method`",
                    f.label()
                ),
            }
            for (h, arg) in &f.param_headers {
                if !f.arguments.contains_key(arg) {
                    bail!(
                        "flow {:?}: param header {h} mirrors a missing argument {arg:?}",
                        f.label()
                    );
                }
            }
        }
        Ok(())
    }
}

/// Pick a flow by weight from a uniform draw `r` in `[0, total_weight)`.
pub fn pick_weighted(cumulative: &[u64], r: u64) -> usize {
    cumulative
        .partition_point(|c| *c <= r)
        .min(cumulative.len().saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loadtest::template::FlowTemplate;

    #[test]
    fn scenarios_parse_and_validate() {
        for (name, _) in BUILTIN_SCENARIOS {
            let s = Scenario::builtin(name).unwrap();
            s.validate().unwrap();
            for f in &s.flows {
                FlowTemplate::new(f).unwrap();
            }
        }
        let yaml = "name: custom\nflows:\n  - tool: deploy\n    weight: 5\n    arguments: {service: api, environment: prod}\n    answers: {confirmation: $args.service}\n    param_headers: {Environment: environment}\n  - method: tools/list\n";
        let s = Scenario::parse(yaml).unwrap();
        assert_eq!(s.max_rounds, DEFAULT_MAX_ROUNDS);
        assert_eq!(s.flows[0].weight, 5);
        assert_eq!(s.flows[1].weight, 1);
        assert_eq!(
            FlowTemplate::new(&s.flows[0]).unwrap().answers["confirmation"],
            "api"
        );
        let json_doc =
            r#"{"name":"j","max_rounds":3,"flows":[{"tool":"echo","arguments":{"text":"x"}}]}"#;
        assert_eq!(Scenario::parse(json_doc).unwrap().max_rounds, 3);
        assert!(Scenario::parse("name: x\nflows: []\n").is_err());
        assert!(Scenario::parse("name: x\nflows:\n  - method: tools/call\n").is_err());
        assert!(Scenario::parse("name: x\nflows:\n  - tool: a\n    typo: 1\n").is_err());
        assert!(Scenario::load("no-such-scenario").is_err());
        let one = Scenario::one_tool(
            "add",
            Some(r#"{"a": 2}"#),
            &["ok=true".into(), "who=ann".into()],
        )
        .unwrap();
        assert_eq!(one.flows[0].arguments["a"], 2);
        assert_eq!(one.flows[0].answers["ok"], true);
        assert_eq!(one.flows[0].answers["who"], "ann");
        assert_eq!(one.tools(), ["add"]);
        assert!(Scenario::one_tool("add", Some("[1]"), &[]).is_err());
        assert!(Scenario::one_tool("add", Some("{"), &[]).is_err());
        assert!(Scenario::one_tool("add", None, &["novalue".into()]).is_err());
    }

    #[test]
    fn weighted_pick() {
        let cum = [3, 5, 6];
        let picks: Vec<usize> = (0..6).map(|r| pick_weighted(&cum, r)).collect();
        assert_eq!(picks, [0, 0, 0, 1, 1, 2]);
    }
}
