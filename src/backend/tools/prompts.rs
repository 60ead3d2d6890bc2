//! The prompts (the conformance suite's `test_*` prompts, one of them MRTR).

use serde_json::{json, Value};

use super::answers::*;
use super::fixtures::PNG_1X1;
use super::{Call, Outcome, Prompt, Step};
use crate::mcp::codes;

pub(super) static PROMPTS: &[Prompt] = &[
    Prompt {
        name: "test_simple_prompt",
        description: "A simple prompt.",
        arguments: &[],
        needs: &[],
        sealed: false,
        run: simple_prompt,
    },
    Prompt {
        name: "test_prompt_with_arguments",
        description: "A prompt with two arguments.",
        arguments: &[
            ("arg1", "First argument", true),
            ("arg2", "Second argument", true),
        ],
        needs: &[],
        sealed: false,
        run: prompt_with_arguments,
    },
    Prompt {
        name: "test_prompt_with_embedded_resource",
        description: "A prompt that embeds a resource.",
        arguments: &[("resourceUri", "URI of the resource to embed", true)],
        needs: &[],
        sealed: false,
        run: prompt_with_resource,
    },
    Prompt {
        name: "test_prompt_with_image",
        description: "A prompt with an image.",
        arguments: &[],
        needs: &[],
        sealed: false,
        run: prompt_with_image,
    },
    Prompt {
        name: "test_input_required_result_prompt",
        description: "A prompt that asks for context first (MRTR).",
        arguments: &[],
        needs: &["elicitation"],
        sealed: false,
        run: prompt_input_required,
    },
];

fn prompt_result(description: &str, messages: Vec<Value>) -> Outcome {
    Outcome::Complete(json!({ "description": description, "messages": messages }))
}

fn user_text(s: impl Into<String>) -> Value {
    json!({"role": "user", "content": text(s)})
}

fn simple_prompt(_: &Call) -> Step {
    Ok(prompt_result(
        "A simple prompt",
        vec![user_text("This is a simple prompt for testing.")],
    ))
}

fn prompt_with_arguments(c: &Call) -> Step {
    let a1 = arg_str(c, "arg1")?;
    let a2 = arg_str(c, "arg2")?;
    Ok(prompt_result(
        "A prompt with arguments",
        vec![user_text(format!(
            "Prompt with arguments: arg1='{a1}', arg2='{a2}'"
        ))],
    ))
}

fn prompt_with_resource(c: &Call) -> Step {
    let uri = arg_str(c, "resourceUri")?;
    Ok(prompt_result(
        "A prompt with an embedded resource",
        vec![
            json!({"role": "user", "content": {"type": "resource", "resource": {"uri": uri, "mimeType": "text/plain", "text": "Embedded resource content for testing."}}}),
            user_text("Please process the embedded resource above."),
        ],
    ))
}

fn prompt_with_image(_: &Call) -> Step {
    Ok(prompt_result(
        "A prompt with an image",
        vec![
            json!({"role": "user", "content": {"type": "image", "data": PNG_1X1, "mimeType": "image/png"}}),
            user_text("Please analyze the image above."),
        ],
    ))
}

fn prompt_input_required(c: &Call) -> Step {
    Ok(match elicit(c, "user_context")? {
        Elicit::Missing => ask(
            "user_context",
            elicit_req(
                "What context should the prompt use?",
                json!({"context": {"type": "string"}}),
                &["context"],
            ),
            Value::Null,
        ),
        Elicit::Accept(content) => {
            let ctx = content_str(content, "user_context", "context")?;
            prompt_result(
                "A prompt built from your context",
                vec![user_text(format!("Use this context: {ctx}"))],
            )
        }
        Elicit::Refused(how) => Outcome::Error(
            codes::INVALID_PARAMS,
            format!("The prompt needs a context, and the question was {how}."),
        ),
    })
}
