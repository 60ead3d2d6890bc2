//! The fixture tools the official conformance suite's 2025-11-25 scenarios call
//! (`test_elicitation`, `test_sampling`, `test_tool_with_logging`), served the 2026 way: they
//! ask by `input_required`. A 2025-era client reaches them through the gateway's protocol
//! bridge, which turns each question into the mid-call request that client expects
//! (tests/conformance/run.sh, mode `legacy`).

use serde_json::json;

use super::answers::*;
use super::fixtures::fixture;
use super::{Call, Outcome, Special, Step, Tool};

pub(super) static TOOLS: &[Tool] = &[
    Tool {
        schema: r#"{"type":"object","properties":{"message":{"type":"string"}}}"#,
        ..fixture(
            "test_elicitation",
            "Asks the user for a username and an email (elicitation).",
            &["elicitation"],
            user_info,
        )
    },
    Tool {
        schema: r#"{"type":"object","properties":{"prompt":{"type":"string"}}}"#,
        ..fixture(
            "test_sampling",
            "Asks the client's model the prompt argument (sampling).",
            &["sampling"],
            ask_model,
        )
    },
    fixture(
        "test_tool_with_logging",
        "Logs, if the request set a log level (the 2025 suite's name of test_logging_tool).",
        &[],
        |_| Ok(Outcome::Special(Special::Logging)),
    ),
];

fn user_info(c: &Call) -> Step {
    let message = c
        .args
        .get("message")
        .and_then(|m| m.as_str())
        .unwrap_or("Please provide your information");
    Ok(match elicit(c, "user_info")? {
        Elicit::Missing => ask(
            "user_info",
            elicit_req(
                message,
                json!({"username": {"type": "string", "description": "User's response"}, "email": {"type": "string", "description": "User's email address"}}),
                &["username", "email"],
            ),
            serde_json::Value::Null,
        ),
        Elicit::Accept(content) => complete_text(format!(
            "User response: <action: accept, content: {}>",
            serde_json::Value::Object(content.clone())
        )),
        Elicit::Refused(how) => complete_text(format!(
            "User response: <action: {}>",
            if how == "declined" {
                "decline"
            } else {
                "cancel"
            }
        )),
    })
}

fn ask_model(c: &Call) -> Step {
    let prompt = c
        .args
        .get("prompt")
        .and_then(|m| m.as_str())
        .unwrap_or("Hello");
    Ok(match sampled_text(c, "prompt")? {
        None => ask("prompt", sampling_req(prompt, 100), serde_json::Value::Null),
        Some(s) => complete_text(format!("LLM response: {s}")),
    })
}
