//! Per-tool authorization: ordered allow/deny rules on the claimed method and name (the same
//! patterns as routes), against the verified token's scopes and claims. The first rule whose
//! `match` and `when` both hold decides; without one, `auth.default` does. Decided before the
//! body is read; the header↔body check then proves the body names the same tool.

use crate::config::auth::{Effect, RuleConfig};
use crate::config::Pattern;

use super::Identity;

pub struct Rule {
    pub name: String,
    method: Option<Pattern>,
    mcp_name: Option<Pattern>,
    effect: Effect,
    scopes: Vec<String>,
    claims: Vec<(String, Vec<String>)>,
}

impl Rule {
    pub(crate) fn from_config(c: &RuleConfig) -> Rule {
        Rule {
            name: c.name.clone(),
            method: c.matcher.method.clone(),
            mcp_name: c.matcher.name.clone(),
            effect: c.effect,
            scopes: c.when.scopes.clone(),
            claims: c
                .when
                .claims
                .iter()
                .map(|(k, v)| (k.clone(), v.values()))
                .collect(),
        }
    }

    fn matches(&self, method: Option<&str>, name: Option<&str>) -> bool {
        let ok = |p: &Option<Pattern>, v: Option<&str>| match (p, v) {
            (None, _) => true,
            (Some(p), Some(v)) => p.matches(v),
            (Some(_), None) => false,
        };
        ok(&self.method, method) && ok(&self.mcp_name, name)
    }

    fn holds(&self, id: &Identity) -> bool {
        self.scopes.iter().all(|s| id.has_scope(s))
            && self
                .claims
                .iter()
                .all(|(c, vals)| id.claim_matches(c, vals))
    }
}

/// The outcome of the rules for one (method, name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision<'a> {
    /// Allowed, by this rule (`None`: the default).
    Allow(Option<&'a str>),
    /// Denied, by this rule (`None`: the default). `scopes` would have let an earlier allow
    /// rule decide: the `scope` of the 403's `WWW-Authenticate`.
    Deny {
        rule: Option<&'a str>,
        scopes: Vec<&'a str>,
    },
}

impl Decision<'_> {
    pub(crate) fn allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }
}

pub struct Rules {
    pub rules: Vec<Rule>,
    pub default: Effect,
}

impl Rules {
    pub(crate) fn new(rules: &[RuleConfig], default: Effect) -> Rules {
        Rules {
            rules: rules.iter().map(Rule::from_config).collect(),
            default,
        }
    }

    /// Whether any rule could treat a call of `method` differently from another caller.
    pub(crate) fn covers(&self, method: &str) -> bool {
        self.default == Effect::Deny
            || self
                .rules
                .iter()
                .any(|r| r.method.as_ref().is_none_or(|p| p.matches(method)))
    }

    pub(crate) fn decide(
        &self,
        method: Option<&str>,
        name: Option<&str>,
        id: &Identity,
    ) -> Decision<'_> {
        let mut hint: Vec<&str> = Vec::new();
        for r in &self.rules {
            if !r.matches(method, name) {
                continue;
            }
            if r.holds(id) {
                return match r.effect {
                    Effect::Allow => Decision::Allow(Some(&r.name)),
                    Effect::Deny => Decision::Deny {
                        rule: Some(&r.name),
                        scopes: hint,
                    },
                };
            }
            if r.effect == Effect::Allow {
                hint.extend(
                    r.scopes
                        .iter()
                        .map(String::as_str)
                        .filter(|s| !id.has_scope(s)),
                );
            }
        }
        match self.default {
            Effect::Allow => Decision::Allow(None),
            Effect::Deny => Decision::Deny {
                rule: None,
                scopes: hint,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(yaml: &str) -> Rules {
        #[derive(serde::Deserialize)]
        struct R {
            rules: Vec<RuleConfig>,
            #[serde(default)]
            default: Effect,
        }
        let r: R = serde_yaml::from_str(yaml).unwrap();
        Rules::new(&r.rules, r.default)
    }

    fn who(scope: &str, groups: serde_json::Value) -> Identity {
        let c = json!({"sub": "u", "scope": scope, "groups": groups});
        Identity::new("u".into(), c.as_object().unwrap().clone())
    }

    const DEPLOY: &str = "rules:\n\
      - {name: deploy-scope, match: {method: tools/call, name: deploy_*}, when: {scopes: [deploy:write]}}\n\
      - {name: deploy-sre, match: {method: tools/call, name: deploy_*}, when: {claims: {groups: sre}}}\n\
      - {name: no-deploys, match: {method: tools/call, name: deploy_*}, effect: deny}\n";

    #[test]
    fn deploys_need_the_scope_or_the_group() {
        let r = rules(DEPLOY);
        let call = |id: &Identity, n: &str| r.decide(Some("tools/call"), Some(n), id);
        let plain = who("mcp:read", json!([]));
        assert_eq!(
            call(&plain, "deploy_prod"),
            Decision::Deny {
                rule: Some("no-deploys"),
                scopes: vec!["deploy:write"]
            }
        );
        assert_eq!(call(&plain, "echo"), Decision::Allow(None));
        assert_eq!(
            call(&who("mcp:read deploy:write", json!([])), "deploy_prod"),
            Decision::Allow(Some("deploy-scope"))
        );
        assert_eq!(
            call(&who("mcp:read", json!(["dev", "sre"])), "deploy_prod"),
            Decision::Allow(Some("deploy-sre"))
        );
        assert_eq!(
            call(&who("", json!("sre")), "deploy_x"),
            Decision::Allow(Some("deploy-sre")),
            "a string claim matches too"
        );
        assert!(r.covers("tools/call"));
        assert!(!r.covers("prompts/list"));
    }

    #[test]
    fn default_deny_and_name_patterns_need_a_name() {
        let r = rules("default: deny\nrules:\n  - {name: reads, match: {method: tools/list}}\n  - {name: echo, match: {name: echo}}\n");
        let id = who("", json!([]));
        assert!(r.decide(Some("tools/list"), None, &id).allowed());
        assert!(r.decide(Some("tools/call"), Some("echo"), &id).allowed());
        assert_eq!(
            r.decide(Some("server/discover"), None, &id),
            Decision::Deny {
                rule: None,
                scopes: vec![]
            }
        );
        assert!(r.covers("anything"));
    }
}
