//! The JSON Schema of gateway.yaml: the committed file is what `mcp-edge schema` prints, every
//! shipped config validates against it (and names it on its first line for editors), and it
//! refuses what the loader refuses (an unknown key, a bad duration or rate).

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const SCHEMA_FILE: &str = "schema/gateway.schema.json";

/// The shipped gateway configs, with the `$schema` path each names on its first line.
const SHIPPED: &[(&str, &str)] = &[
    ("gateway.yaml", "./schema/gateway.schema.json"),
    (
        "deploy/gateway.container.yaml",
        "../schema/gateway.schema.json",
    ),
    ("examples/auth.yaml", "../schema/gateway.schema.json"),
    ("examples/federation.yaml", "../schema/gateway.schema.json"),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn printed_schema() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .arg("schema")
        .output()
        .expect("run mcp-edge schema");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(root().join(SCHEMA_FILE)).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::validator_for(&schema).expect("the schema is a valid JSON Schema")
}

fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).expect("YAML")
}

/// The validation errors of `doc`, one line each.
fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

#[test]
fn the_committed_schema_is_what_mcp_edge_schema_prints() {
    let committed = std::fs::read_to_string(root().join(SCHEMA_FILE)).unwrap();
    assert!(
        committed == printed_schema(),
        "{SCHEMA_FILE} is stale: run `cargo run -- schema > {SCHEMA_FILE}`"
    );
}

#[test]
fn every_shipped_config_names_the_schema_and_validates_against_it() {
    let v = validator();
    for (file, schema_path) in SHIPPED {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        let first = text.lines().next().unwrap_or_default();
        assert_eq!(
            first,
            format!("# yaml-language-server: $schema={schema_path}"),
            "{file}: first line"
        );
        assert!(
            root()
                .join(file)
                .parent()
                .unwrap()
                .join(schema_path)
                .is_file(),
            "{file}: {schema_path} does not resolve"
        );
        let errs = errors(&v, &yaml(&text));
        assert!(errs.is_empty(), "{file}: {errs:#?}");
    }
}

#[test]
fn the_kubernetes_configmaps_gateway_yaml_validates() {
    let text = std::fs::read_to_string(root().join("deploy/k8s/gateway-configmap.yaml")).unwrap();
    let map = yaml(&text);
    let inner = map["data"]["gateway.yaml"]
        .as_str()
        .expect("data.gateway.yaml");
    let errs = errors(&validator(), &yaml(inner));
    assert!(errs.is_empty(), "{errs:#?}");
}

#[test]
fn the_schema_refuses_what_the_loader_refuses() {
    let v = validator();
    let base = "pools:\n  default:\n    instances: [127.0.0.1:7001]\n";
    assert!(errors(&v, &yaml(base)).is_empty());
    for (extra, at) in [
        ("listn:\n  mcp: 127.0.0.1:1\n", ""),
        ("timeouts:\n  connect: soon\n", "/timeouts/connect"),
        ("timeouts:\n  conect: 2s\n", "/timeouts"),
        (
            "rate_limits:\n  - {name: a, rate: 10/fortnight}\n",
            "/rate_limits/0/rate",
        ),
        ("validation:\n  sample: lots\n", "/validation/sample"),
        (
            "routes:\n  - {match: {nmae: x}, pool: default}\n",
            "/routes/0/match",
        ),
        ("upstream_header: 7\n", "/upstream_header"),
    ] {
        let doc = format!("{base}{extra}");
        assert!(
            mcp_edge::config::Config::parse(&doc, "t.yaml").is_err(),
            "the loader takes {extra:?}"
        );
        let errs = errors(&v, &yaml(&doc));
        assert!(
            errs.iter().any(|e| e.ends_with(&format!(" at {at}"))),
            "{extra:?}: {errs:#?}"
        );
    }
}
