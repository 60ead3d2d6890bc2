//! Tools that run as tasks (Tasks extension): the conformance suite's task fixtures, its sync
//! `greet`, and the seed story `deploy_async`. Each task tool returns [`Outcome::Task`] with
//! the [`Job`] to run; the MRTR layer creates the task (or runs the job inline for a client
//! without the extension, when the tool allows it).

use serde_json::{json, Value};

use super::answers::*;
use super::{Call, Outcome, Step, TaskSupport, Tool, NO_ARGS};
use crate::backend::tasks::jobs::{Job, MAX_SECONDS};

const fn task_tool(
    name: &'static str,
    description: &'static str,
    schema: &'static str,
    needs: &'static [&'static str],
    task: TaskSupport,
    run: super::Run,
) -> Tool {
    Tool {
        name,
        description,
        schema,
        needs,
        sealed: false,
        pinned: &[],
        param_headers: &[],
        task,
        run,
    }
}

pub(super) static TOOLS: &[Tool] = &[
    task_tool(
        "greet",
        "Says hello to a name (sync only).",
        r#"{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}"#,
        &[],
        TaskSupport::Forbidden,
        greet,
    ),
    task_tool(
        "slow_compute",
        "Sleeps `seconds` then answers; runs as a task when the client supports tasks.",
        r#"{"type":"object","properties":{"seconds":{"type":"number","minimum":0,"maximum":120},"label":{"type":"string"}}}"#,
        &[],
        TaskSupport::Optional,
        slow_compute,
    ),
    task_tool(
        "failing_job",
        "A task whose tool reports an error after about a second.",
        NO_ARGS,
        &[],
        TaskSupport::Required,
        |_| Ok(Outcome::Task(Job::Failing)),
    ),
    task_tool(
        "protocol_error_job",
        "A task that fails with a protocol-level error.",
        NO_ARGS,
        &[],
        TaskSupport::Optional,
        |_| Ok(Outcome::Task(Job::ProtocolError)),
    ),
    task_tool(
        "confirm_delete",
        "A task that asks to confirm deleting a file (elicitation through tasks/update).",
        r#"{"type":"object","properties":{"filename":{"type":"string"}},"required":["filename"]}"#,
        &["elicitation"],
        TaskSupport::Required,
        confirm_delete,
    ),
    task_tool(
        "multi_input",
        "A task that asks two questions at once.",
        NO_ARGS,
        &["elicitation"],
        TaskSupport::Required,
        |_| Ok(Outcome::Task(Job::MultiInput)),
    ),
    task_tool(
        "test_tool_with_task",
        "Asks your name (MRTR), then greets you from a task.",
        NO_ARGS,
        &["elicitation"],
        TaskSupport::Required,
        tool_with_task,
    ),
    task_tool(
        "deploy_async",
        "Deploys a service as a task: confirm by typing the service name (tasks/update), then a rollout of `seconds` (default 3) reported in statusMessage.",
        r#"{"type":"object","properties":{"service":{"type":"string"},"environment":{"type":"string"},"seconds":{"type":"number","minimum":0,"maximum":120}},"required":["service","environment"]}"#,
        &["elicitation"],
        TaskSupport::Required,
        deploy_async,
    ),
];

fn greet(c: &Call) -> Step {
    Ok(complete_text(format!("Hello, {}!", arg_str(c, "name")?)))
}

/// An optional `seconds` argument (a number, 0 to [`MAX_SECONDS`]).
fn seconds(c: &Call, default: f64) -> Result<f64, Outcome> {
    match c.args.get("seconds") {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_f64()
            .filter(|s| (0.0..=MAX_SECONDS).contains(s))
            .ok_or_else(|| {
                invalid(format!(
                    "arguments.seconds of {} must be a number from 0 to {MAX_SECONDS}",
                    c.name
                ))
            }),
    }
}

fn slow_compute(c: &Call) -> Step {
    let label = match c.args.get("label") {
        None | Some(Value::Null) => "unlabelled".to_owned(),
        Some(_) => arg_str(c, "label")?.to_owned(),
    };
    Ok(Outcome::Task(Job::SlowCompute {
        seconds: seconds(c, 1.0)?,
        label,
    }))
}

fn confirm_delete(c: &Call) -> Step {
    Ok(Outcome::Task(Job::ConfirmDelete {
        filename: arg_str(c, "filename")?.to_owned(),
    }))
}

fn tool_with_task(c: &Call) -> Step {
    Ok(match elicit(c, "user_name")? {
        Elicit::Missing => ask(
            "user_name",
            elicit_req(
                "What is your name?",
                json!({"name": {"type": "string"}}),
                &["name"],
            ),
            Value::Null,
        ),
        Elicit::Accept(content) => Outcome::Task(Job::Greeting {
            name: content_str(content, "user_name", "name")?.to_owned(),
        }),
        Elicit::Refused(how) => error_text(format!("The question was {how}.")),
    })
}

fn deploy_async(c: &Call) -> Step {
    Ok(Outcome::Task(Job::Deploy {
        service: arg_str(c, "service")?.to_owned(),
        environment: arg_str(c, "environment")?.to_owned(),
        seconds: seconds(c, 3.0)?,
    }))
}
