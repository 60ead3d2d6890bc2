//! A throwaway body stage, compiled in tests only: it refuses a `tools/call` whose arguments
//! match a pattern. It exists to prove that a stage is one file plus one line in the pipeline's
//! list (`stages::pipeline::STAGES`): the tests in `journey::pipeline::tests` show explain, the
//! console, a sampled-out route and both legs seeing it with no other edit. It is on for a
//! gateway whose endpoint is `/guarded` (its "config").

use serde_json::{json, Value};
use std::sync::Arc;

use super::body::{BodyStage, Input, Scope, State};
use crate::config::Config;
use crate::mcp::{codes, Rejection};

pub(crate) static STAGE: BodyStage = BodyStage {
    name: "throwaway_guard",
    build,
    covers,
    run,
    explain,
};

fn build(config: &Config) -> Option<State> {
    let on = config.endpoint == "/guarded";
    on.then(|| Arc::new(regex::Regex::new("rm -rf").expect("a valid pattern")) as State)
}

fn covers(_: &State, _: &Scope) -> bool {
    true
}

fn matches(state: &State, input: &Input) -> bool {
    let re = state
        .downcast_ref::<regex::Regex>()
        .expect("built by build");
    let args = input.arguments().ok().flatten();
    input.method() == Some("tools/call") && args.is_some_and(|a| re.is_match(&a.to_string()))
}

fn run(state: &State, input: &Input) -> Result<(), Rejection> {
    match matches(state, input) {
        false => Ok(()),
        true => Err(Rejection::new(
            403,
            codes::GATEWAY_POLICY_DENIED,
            "throwaway-guard",
            "the throwaway guard refuses these arguments",
        )),
    }
}

fn explain(state: &State, input: &Input) -> Value {
    json!({"matches": matches(state, input)})
}
