//! The conformance suite's tool fixtures (`test_*`, `json_schema_2020_12_tool`): the names,
//! contents and behaviours its scenarios expect of a server under test.

use serde_json::{json, Map, Value};

use super::answers::*;
use super::{Call, Outcome, Run, Special, Step, TaskSupport, Tool, NO_ARGS};
use crate::backend::state::StatePayload;
use crate::mcp::methods::{ELICITATION_CREATE, SAMPLING_CREATE_MESSAGE};

pub(super) static TOOLS: &[Tool] = &[
    fixture(
        "test_simple_text",
        "Returns a simple text.",
        &[],
        simple_text,
    ),
    fixture(
        "test_image_content",
        "Returns an image.",
        &[],
        image_content,
    ),
    fixture("test_audio_content", "Returns audio.", &[], audio_content),
    fixture(
        "test_embedded_resource",
        "Returns an embedded resource.",
        &[],
        embedded_resource,
    ),
    fixture(
        "test_multiple_content_types",
        "Returns text, image and resource content.",
        &[],
        multiple_content,
    ),
    fixture(
        "test_error_handling",
        "Always fails (isError).",
        &[],
        error_handling,
    ),
    fixture(
        "test_tool_with_progress",
        "Reports progress 0, 50, 100.",
        &[],
        |_| Ok(Outcome::Special(Special::Progress)),
    ),
    fixture(
        "test_logging_tool",
        "Logs, if the request set a log level.",
        &[],
        |_| Ok(Outcome::Special(Special::Logging)),
    ),
    fixture(
        "test_trigger_tool_change",
        "Announces a tool list change.",
        &[],
        |_| Ok(Outcome::Special(Special::TriggerTools)),
    ),
    fixture(
        "test_trigger_prompt_change",
        "Announces a prompt list change.",
        &[],
        |_| Ok(Outcome::Special(Special::TriggerPrompts)),
    ),
    fixture(
        "test_missing_capability",
        "Needs sampling.",
        &["sampling"],
        missing_capability,
    ),
    fixture(
        "test_streaming_elicitation",
        "Asks a question (elicitation).",
        &["elicitation"],
        streaming_elicitation,
    ),
    fixture(
        "test_input_required_result_elicitation",
        "MRTR: elicitation.",
        &["elicitation"],
        irr_elicitation,
    ),
    fixture(
        "test_input_required_result_sampling",
        "MRTR: sampling.",
        &["sampling"],
        irr_sampling,
    ),
    fixture(
        "test_input_required_result_list_roots",
        "MRTR: roots.",
        &["roots"],
        irr_roots,
    ),
    Tool {
        sealed: true,
        ..fixture(
            "test_input_required_result_request_state",
            "MRTR: requestState.",
            &["elicitation"],
            irr_request_state,
        )
    },
    fixture(
        "test_input_required_result_multiple_inputs",
        "MRTR: three requests at once.",
        &["elicitation", "sampling", "roots"],
        irr_multiple,
    ),
    Tool {
        sealed: true,
        ..fixture(
            "test_input_required_result_multi_round",
            "MRTR: two rounds.",
            &["elicitation"],
            irr_multi_round,
        )
    },
    Tool {
        sealed: true,
        ..fixture(
            "test_input_required_result_tampered_state",
            "MRTR: sealed state.",
            &["elicitation"],
            irr_tampered,
        )
    },
    fixture(
        "test_input_required_result_capabilities",
        "MRTR: asks only what the client declared.",
        &[],
        irr_capabilities,
    ),
    Tool {
        schema: r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}"##,
        ..fixture(
            "json_schema_2020_12_tool",
            "A JSON Schema 2020-12 input schema, listed verbatim.",
            &[],
            json_schema_tool,
        )
    },
];

pub(super) const fn fixture(
    name: &'static str,
    description: &'static str,
    needs: &'static [&'static str],
    run: Run,
) -> Tool {
    Tool {
        name,
        description,
        schema: NO_ARGS,
        needs,
        sealed: false,
        pinned: &[],
        param_headers: &[],
        task: TaskSupport::Forbidden,
        run,
    }
}

// Conformance fixtures

/// A 1×1 red PNG.
pub(super) const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A silent 8 kHz mono WAV with 4 samples.
const WAV_TINY: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQQAAACAgICA";

fn simple_text(_: &Call) -> Step {
    Ok(complete_text("This is a simple text response for testing."))
}

fn image_content(_: &Call) -> Step {
    Ok(Outcome::Complete(
        json!({"content": [{"type": "image", "data": PNG_1X1, "mimeType": "image/png"}]}),
    ))
}

fn audio_content(_: &Call) -> Step {
    Ok(Outcome::Complete(
        json!({"content": [{"type": "audio", "data": WAV_TINY, "mimeType": "audio/wav"}]}),
    ))
}

fn embedded_resource(_: &Call) -> Step {
    Ok(Outcome::Complete(
        json!({"content": [{"type": "resource", "resource": {
        "uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}}]}),
    ))
}

fn multiple_content(_: &Call) -> Step {
    Ok(Outcome::Complete(json!({"content": [
        text("Multiple content types test:"),
        {"type": "image", "data": PNG_1X1, "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json",
            "text": "{\"test\":\"data\",\"value\":123}"}},
    ]})))
}

fn error_handling(_: &Call) -> Step {
    Ok(error_text(
        "This tool intentionally returns an error for testing",
    ))
}

fn missing_capability(c: &Call) -> Step {
    Ok(match sampled_text(c, "probe")? {
        None => ask("probe", sampling_req("Say hello.", 50), Value::Null),
        Some(s) => complete_text(format!("Sampling works: {s}")),
    })
}

fn name_question(c: &Call, key: &str, message: &str) -> Step {
    Ok(match elicit(c, key)? {
        Elicit::Missing => ask(
            key,
            elicit_req(message, json!({"name": {"type": "string"}}), &["name"]),
            Value::Null,
        ),
        Elicit::Accept(content) => {
            complete_text(format!("Hello, {}!", content_str(content, key, "name")?))
        }
        Elicit::Refused(how) => error_text(format!("The question was {how}.")),
    })
}

fn streaming_elicitation(c: &Call) -> Step {
    name_question(c, "user_name", "What is your name?")
}

fn irr_elicitation(c: &Call) -> Step {
    name_question(c, "user_name", "What is your name?")
}

fn irr_sampling(c: &Call) -> Step {
    Ok(match sampled_text(c, "capital_question")? {
        None => ask(
            "capital_question",
            sampling_req("What is the capital of France?", 100),
            Value::Null,
        ),
        Some(s) => complete_text(format!("The model answered: {s}")),
    })
}

fn irr_roots(c: &Call) -> Step {
    Ok(match root_uris(c, "client_roots")? {
        None => ask("client_roots", roots_req(), Value::Null),
        Some(uris) => complete_text(format!("Client roots: {}", uris.join(", "))),
    })
}

fn ok_question(c: &Call, key: &str, done: impl FnOnce(&StatePayload) -> String) -> Step {
    Ok(match (elicit(c, key)?, c.state) {
        (Elicit::Accept(_), Some(st)) => complete_text(done(st)),
        (Elicit::Refused(how), _) => error_text(format!("The confirmation was {how}.")),
        _ => ask(
            key,
            elicit_req(
                "Confirm to continue.",
                json!({"ok": {"type": "boolean"}}),
                &["ok"],
            ),
            Value::Null,
        ),
    })
}

fn irr_request_state(c: &Call) -> Step {
    ok_question(c, "confirm", |st| {
        format!(
            "state-ok: requestState verified (round {}, issued by {})",
            st.round, st.issuer
        )
    })
}

fn irr_tampered(c: &Call) -> Step {
    ok_question(c, "confirm", |_| "state-ok: requestState verified".into())
}

/// Ask every missing answer among `wanted` at once; complete when all are there.
fn gather(c: &Call, wanted: Vec<(&'static str, Value)>) -> Step {
    let mut requests = Map::new();
    let mut parts = Vec::new();
    for (key, req) in wanted {
        let method = req["method"].as_str().unwrap_or_default();
        let got = match method {
            ELICITATION_CREATE => match elicit(c, key)? {
                Elicit::Missing => None,
                Elicit::Accept(m) => Some(Value::Object(m.clone()).to_string()),
                Elicit::Refused(how) => Some(how.to_owned()),
            },
            SAMPLING_CREATE_MESSAGE => sampled_text(c, key)?,
            _ => root_uris(c, key)?.map(|u| u.join(", ")),
        };
        match got {
            Some(v) => parts.push(format!("{key}: {v}")),
            None => {
                requests.insert(key.to_owned(), req);
            }
        }
    }
    Ok(if requests.is_empty() {
        complete_text(format!("Received all answers. {}", parts.join("; ")))
    } else {
        Outcome::Ask {
            requests,
            data: Value::Null,
        }
    })
}

fn user_name_req() -> Value {
    elicit_req(
        "What is your name?",
        json!({"name": {"type": "string"}}),
        &["name"],
    )
}

fn irr_multiple(c: &Call) -> Step {
    gather(
        c,
        vec![
            ("user_name", user_name_req()),
            ("greeting", sampling_req("Write a one-line greeting.", 50)),
            ("client_roots", roots_req()),
        ],
    )
}

fn irr_capabilities(c: &Call) -> Step {
    let mut wanted = Vec::new();
    if c.declares("elicitation") {
        wanted.push(("user_name", user_name_req()));
    }
    if c.declares("sampling") {
        wanted.push(("greeting", sampling_req("Write a one-line greeting.", 50)));
    }
    if c.declares("roots") {
        wanted.push(("client_roots", roots_req()));
    }
    if wanted.is_empty() {
        return Ok(Outcome::NeedCapabilities(json!({"sampling": {}})));
    }
    gather(c, wanted)
}

fn irr_multi_round(c: &Call) -> Step {
    let color_q = |name: &str| {
        ask(
            "step2",
            elicit_req(
                format!("Thanks {name}. What is your favorite color?"),
                json!({"color": {"type": "string"}}),
                &["color"],
            ),
            json!({ "name": name }),
        )
    };
    Ok(match c.data("name").and_then(Value::as_str) {
        None => match elicit(c, "step1")? {
            Elicit::Missing => ask("step1", user_name_req(), Value::Null),
            Elicit::Accept(content) => color_q(content_str(content, "step1", "name")?),
            Elicit::Refused(how) => error_text(format!("Stopped: step 1 was {how}.")),
        },
        Some(name) => match elicit(c, "step2")? {
            Elicit::Missing => color_q(name),
            Elicit::Accept(content) => complete_text(format!(
                "{name}'s favorite color is {}",
                content_str(content, "step2", "color")?
            )),
            Elicit::Refused(how) => error_text(format!("Stopped: step 2 was {how}.")),
        },
    })
}

fn json_schema_tool(c: &Call) -> Step {
    Ok(complete_text(format!(
        "Received: {}",
        Value::Object(c.args.clone())
    )))
}
