//! The seed tools: the MRTR stories the demo and the load tester drive (`echo`, `create_repo`,
//! `deploy`, `charge`, `charge_count`, `onboard`, `summarize`, `list_workspace`). Their names,
//! input keys and texts are a contract with the load tester.

use serde_json::{json, Value};

use super::answers::*;
use super::{Call, LedgerOp, Outcome, Step, TaskSupport, Tool, NO_ARGS};
use crate::backend::ledger::Ledger;

pub(super) static TOOLS: &[Tool] = &[
    Tool {
        name: "echo",
        description: "Returns its text argument unchanged (the load tester's plain call); no text, no text.",
        schema: r#"{"type":"object","properties":{"text":{"type":"string"}}}"#,
        needs: &[],
        sealed: false,
        pinned: &[],
        param_headers: &[],
        task: TaskSupport::Forbidden,
        run: echo,
    },
    Tool {
        name: "create_repo",
        description: "Creates a GitHub repository; asks for your GitHub username first (elicitation).",
        schema: r#"{"type":"object","properties":{"repo":{"type":"string","description":"Repository name"}},"required":["repo"]}"#,
        needs: &["elicitation"],
        sealed: true,
        pinned: &[],
        param_headers: &[],
        task: TaskSupport::Forbidden,
        run: create_repo,
    },
    Tool {
        name: "deploy",
        description: "Deploys a service to an environment after you type the service name to confirm.",
        schema: r#"{"type":"object","properties":{"service":{"type":"string"},"environment":{"type":"string","x-mcp-header":"Environment"}},"required":["service","environment"]}"#,
        needs: &["elicitation"],
        sealed: true,
        pinned: &["environment"],
        param_headers: &[("environment", "Environment")],
        task: TaskSupport::Forbidden,
        run: deploy,
    },
    Tool {
        name: "charge",
        description: "Charges an amount to a cart after confirmation; a re-sent confirmation never charges twice.",
        schema: r#"{"type":"object","properties":{"cart_id":{"type":"string"},"amount":{"type":["number","string"]}},"required":["cart_id","amount"]}"#,
        needs: &["elicitation"],
        sealed: true,
        pinned: &[],
        param_headers: &[],
        task: TaskSupport::Forbidden,
        run: charge,
    },
    Tool {
        name: "charge_count",
        description: "Read-only: how many times a cart was charged on this backend pool.",
        schema: r#"{"type":"object","properties":{"cart_id":{"type":"string"}},"required":["cart_id"]}"#,
        needs: &[],
        sealed: false,
        pinned: &[],
        param_headers: &[],
        task: TaskSupport::Forbidden,
        run: charge_count,
    },
    Tool {
        name: "onboard",
        description: "Onboards a team member in two rounds: their role, then whether to grant access.",
        schema: r#"{"type":"object","properties":{"team":{"type":"string"}},"required":["team"]}"#,
        needs: &["elicitation"],
        sealed: true,
        pinned: &[],
        param_headers: &[],
        task: TaskSupport::Forbidden,
        run: onboard,
    },
    Tool {
        name: "summarize",
        description: "Summarizes a text with the client's model (sampling).",
        schema: r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#,
        needs: &["sampling"],
        sealed: true,
        pinned: &[],
        param_headers: &[],
        task: TaskSupport::Forbidden,
        run: summarize,
    },
    Tool {
        name: "list_workspace",
        description: "Lists the client's workspace roots (roots/list).",
        schema: NO_ARGS,
        needs: &["roots"],
        sealed: true,
        pinned: &[],
        param_headers: &[],
        task: TaskSupport::Forbidden,
        run: list_workspace,
    },
];

fn echo(c: &Call) -> Step {
    if !c.args.contains_key("text") {
        return Ok(complete_text(""));
    }
    Ok(complete_text(arg_str(c, "text")?))
}

fn create_repo(c: &Call) -> Step {
    let repo = arg_str(c, "repo")?;
    Ok(match elicit(c, "github_login")? {
        Elicit::Missing => ask(
            "github_login",
            elicit_req("Please provide your GitHub username", json!({"name": {"type": "string"}}), &["name"]),
            Value::Null,
        ),
        Elicit::Accept(content) => {
            let login = content_str(content, "github_login", "name")?;
            complete_text(format!("Created github.com/{login}/{repo}"))
        }
        Elicit::Refused(how) => error_text(format!(
            "Repository {repo} was not created: the GitHub username request was {how}. Call create_repo again to retry."
        )),
    })
}

fn deploy_ask(service: &str, env: &str, prefix: &str) -> Outcome {
    ask(
        "confirm",
        elicit_req(
            format!("{prefix}Type the service name to confirm deploying {service} to {env}"),
            json!({"confirmation": {"type": "string"}}),
            &["confirmation"],
        ),
        json!({ "environment": env }),
    )
}

fn deploy(c: &Call) -> Step {
    let service = arg_str(c, "service")?;
    let env = arg_str(c, "environment")?;
    Ok(match elicit(c, "confirm")? {
        Elicit::Missing => deploy_ask(service, env, ""),
        Elicit::Accept(content) => {
            let typed = content_str(content, "confirm", "confirmation")?;
            if typed == service {
                complete_text(format!("Deployed {service} to {env}"))
            } else {
                deploy_ask(
                    service,
                    env,
                    &format!("The confirmation {typed:?} did not match {service:?}. "),
                )
            }
        }
        Elicit::Refused(how) => error_text(format!(
            "Nothing was deployed: the confirmation to deploy {service} to {env} was {how}."
        )),
    })
}

/// Render an amount argument as given: a string as is, a number in JSON notation.
fn amount(c: &Call) -> Result<String, Outcome> {
    match c.args.get("amount") {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        _ => Err(invalid(
            "arguments.amount is required by charge (a number or a string)".into(),
        )),
    }
}

fn charge(c: &Call) -> Step {
    let cart = arg_str(c, "cart_id")?;
    let amount = amount(c)?;
    let asking = || {
        ask(
            "confirm_charge",
            elicit_req(
                format!("Charge {amount} to cart {cart}?"),
                json!({"confirm": {"type": "boolean"}}),
                &["confirm"],
            ),
            Value::Null,
        )
    };
    Ok(match elicit(c, "confirm_charge")? {
        Elicit::Missing => asking(),
        Elicit::Accept(content) => {
            if !content_bool(content, "confirm_charge", "confirm")? {
                return Ok(error_text(format!(
                    "Not charged: the charge of {amount} to cart {cart} was not confirmed."
                )));
            }
            // Sealed tool: answers only arrive with a verified state.
            let Some(st) = c.state else {
                return Ok(asking());
            };
            Outcome::Ledger(LedgerOp::Charge {
                cart: cart.to_owned(),
                amount,
                nonce: st.nonce.clone(),
                expires_at_ms: st.expires_at_ms,
            })
        }
        Elicit::Refused(how) => error_text(format!(
            "Not charged: the charge of {amount} to cart {cart} was {how}."
        )),
    })
}

fn charge_count(c: &Call) -> Step {
    Ok(Outcome::Ledger(LedgerOp::Count {
        cart: arg_str(c, "cart_id")?.to_owned(),
    }))
}

/// Carry out a ledger operation of `charge` / `charge_count` and build the tool result, with
/// the URI of the resource it changed (`charges://<cart>` when a charge was made now).
pub async fn settle(op: LedgerOp, ledger: &Ledger) -> Result<(Value, Option<String>), String> {
    Ok(match op {
        LedgerOp::Charge {
            cart,
            amount,
            nonce,
            expires_at_ms,
        } => {
            let (now, charges) = ledger.charge(&cart, &nonce, expires_at_ms).await?;
            let updated = now.then(|| format!("charges://{cart}"));
            let result = json!({
                "content": [text(format!("Charged {amount} to cart {cart}"))],
                "structuredContent": {"cart_id": cart, "amount": amount, "charges": charges, "alreadyCharged": !now},
            });
            (result, updated)
        }
        LedgerOp::Count { cart } => {
            let n = ledger.count(&cart).await?;
            let result = json!({
                "content": [text(format!("Cart {cart} has been charged {n} time(s)"))],
                "structuredContent": {"cart_id": cart, "charges": n},
            });
            (result, None)
        }
    })
}

fn onboard_access(team: &str, role: &str) -> Outcome {
    ask(
        "access",
        elicit_req(
            format!("Grant {role} access to {team}?"),
            json!({"grant": {"type": "boolean"}}),
            &["grant"],
        ),
        json!({ "role": role }),
    )
}

fn onboard(c: &Call) -> Step {
    let team = arg_str(c, "team")?;
    let refused = |how| {
        error_text(format!(
            "Onboarding to {team} stopped: the question was {how}."
        ))
    };
    Ok(match c.data("role").and_then(Value::as_str) {
        None => match elicit(c, "role")? {
            Elicit::Missing => ask(
                "role",
                elicit_req(
                    format!("Which role will the new member of {team} have?"),
                    json!({"role": {"type": "string"}}),
                    &["role"],
                ),
                Value::Null,
            ),
            Elicit::Accept(content) => onboard_access(team, content_str(content, "role", "role")?),
            Elicit::Refused(how) => refused(how),
        },
        Some(role) => match elicit(c, "access")? {
            Elicit::Missing => onboard_access(team, role),
            Elicit::Accept(content) => {
                if content_bool(content, "access", "grant")? {
                    complete_text(format!("Onboarded {team} as {role}"))
                } else {
                    complete_text(format!("Onboarded {team} as {role} without access"))
                }
            }
            Elicit::Refused(how) => refused(how),
        },
    })
}

fn summarize(c: &Call) -> Step {
    let input = arg_str(c, "text")?;
    Ok(match sampled_text(c, "summary")? {
        None => ask(
            "summary",
            sampling_req(format!("Summarize in one sentence:\n\n{input}"), 200),
            Value::Null,
        ),
        Some(s) => complete_text(s),
    })
}

fn list_workspace(c: &Call) -> Step {
    Ok(match root_uris(c, "roots")? {
        None => ask("roots", roots_req(), Value::Null),
        Some(uris) if uris.is_empty() => complete_text("The client shared no workspace roots."),
        Some(uris) => complete_text(format!(
            "Workspace roots:\n{}",
            uris.iter()
                .map(|u| format!("- {u}"))
                .collect::<Vec<_>>()
                .join("\n")
        )),
    })
}
