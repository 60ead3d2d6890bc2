//! The pipeline: the one ordered list of a request's stages ([`STAGES`]). The proxy runs it
//! (`gateway::journey::pipeline`: the head stages in `request_filter`, the body stages at the
//! one point the body is in hand, whatever the leg and the body's plan), `explain` walks it
//! (`gateway::runtime::explain`), the console names its stages from it, and
//! docs/architecture.md describes it. Reorder the list and the proxy and explain both follow.
//!
//! Each entry says what the stage needs, which sets where it runs:
//!
//! | needs          | runs                                                                    |
//! |----------------|-------------------------------------------------------------------------|
//! | `Claims`       | on the head, before the body is invited (`100 Continue`)                 |
//! | `Identity`     | on the head, after `auth` verified the caller                            |
//! | `Body`         | on the parsed body, wherever it is in hand: before any upstream (read whole), or at the end of a body held chunk by chunk on pingora's pipe; also on a sampled-out route, where a stage that covers the request makes the body be read and parsed |
//! | `CheckedBody`  | on a body that passed the header↔body check, before any upstream is chosen (a stage that may answer itself: federation, the cache); not on a sampled-out or held body |
//! | `Pool`         | once the pool is final, before and while an instance is chosen           |
//!
//! Sampling (`routes[].validation.sample`) decides whether the header↔body `check` runs, never
//! whether a `Body` stage sees the body.
//!
//! A stage is either one of the gateway's own steps ([`Step`], run by the journey's runner,
//! which knows each one's signature) or a body stage ([`super::body::BodyStage`]: plain
//! functions over the parsed body). **Adding a body stage is one file and one line here**
//! (docs/architecture.md, "Adding a stage").

use super::body::{BodyStage, State};
use crate::config::Config;

/// What a stage needs, in the order a request provides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Needs {
    Claims,
    Identity,
    Body,
    CheckedBody,
    Pool,
}

impl Needs {
    /// Runs on the head, before the body.
    pub(crate) fn on_head(self) -> bool {
        matches!(self, Needs::Claims | Needs::Identity)
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Needs::Claims => "claimed headers",
            Needs::Identity => "verified identity",
            Needs::Body => "parsed body",
            Needs::CheckedBody => "checked body, before any upstream",
            Needs::Pool => "chosen pool",
        }
    }
}

/// The gateway's own steps (each run by `gateway::journey::pipeline`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Admit,
    Route,
    Auth,
    Limits,
    Pins,
    Check,
    Federation,
    Seal,
    Cache,
    Capacity,
    Credentials,
    Balance,
}

/// How a stage runs.
pub(crate) enum Run {
    Step(Step),
    Body(&'static BodyStage),
}

/// One entry of the list.
pub(crate) struct Stage {
    step_name: &'static str,
    pub(crate) needs: Needs,
    pub(crate) run: Run,
}

impl Stage {
    const fn step(name: &'static str, needs: Needs, step: Step) -> Stage {
        Stage {
            step_name: name,
            needs,
            run: Run::Step(step),
        }
    }

    const fn body(stage: &'static BodyStage) -> Stage {
        Stage {
            step_name: "",
            needs: Needs::Body,
            run: Run::Body(stage),
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        match self.run {
            Run::Body(b) => b.name,
            Run::Step(_) => self.step_name,
        }
    }
}

/// The stages, in the order a request meets them.
pub(crate) static STAGES: &[Stage] = &[
    Stage::step("admit", Needs::Claims, Step::Admit),
    Stage::step("route", Needs::Claims, Step::Route),
    Stage::step("auth", Needs::Claims, Step::Auth),
    Stage::step("limits", Needs::Identity, Step::Limits),
    Stage::step("pins", Needs::Identity, Step::Pins),
    Stage::step("check", Needs::Body, Step::Check),
    Stage::body(&super::policy::STAGE),
    #[cfg(test)]
    Stage::body(&super::throwaway::STAGE),
    Stage::step("federation", Needs::CheckedBody, Step::Federation),
    Stage::step("seal", Needs::CheckedBody, Step::Seal),
    Stage::step("cache", Needs::CheckedBody, Step::Cache),
    Stage::step("capacity", Needs::Pool, Step::Capacity),
    Stage::step("credentials", Needs::Pool, Step::Credentials),
    Stage::step("balance", Needs::Pool, Step::Balance),
];

/// The index of a step in [`STAGES`].
pub(crate) fn index_of(step: Step) -> usize {
    STAGES
        .iter()
        .position(|s| matches!(s.run, Run::Step(x) if x == step))
        .expect("every step is in the list")
}

/// The body stages' states for a config, indexed as [`STAGES`] (`None`: off, or not a body
/// stage).
pub(crate) fn build_states(config: &Config) -> Vec<Option<State>> {
    STAGES
        .iter()
        .map(|s| match s.run {
            Run::Body(b) => (b.build)(config),
            Run::Step(_) => None,
        })
        .collect()
}

/// The stages a request went through, as a set of [`STAGES`] indices (cheap to keep on every
/// request; named for `explain`'s agreement test and the console).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ran(u64);

impl Ran {
    pub(crate) fn mark(&mut self, i: usize) {
        self.0 |= 1 << i;
    }

    /// The names, in list order.
    pub(crate) fn names(self) -> Vec<&'static str> {
        let on = |i: &usize| self.0 & (1 << i) != 0;
        (0..STAGES.len())
            .filter(on)
            .map(|i| STAGES[i].name())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_architecture_page_lists_the_stages_in_order_with_their_needs() {
        let doc = include_str!("../../../docs/architecture.md");
        let start = doc
            .find("| stage | needs |")
            .expect("the table in docs/architecture.md");
        let rows: Vec<(&str, &str)> = doc[start..]
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                (cells[1].trim_matches('`'), cells[2])
            })
            .collect();
        let listed: Vec<(&str, &str)> = STAGES
            .iter()
            .filter(|s| !matches!(s.run, Run::Body(b) if std::ptr::eq(b, &super::super::throwaway::STAGE)))
            .map(|s| (s.name(), s.needs.label()))
            .collect();
        assert_eq!(
            rows, listed,
            "docs/architecture.md's stage table and STAGES differ"
        );
    }

    #[test]
    fn each_stage_comes_after_what_it_needs() {
        assert!(STAGES.len() <= 64, "Ran holds 64 stages");
        let needs: Vec<Needs> = STAGES.iter().map(|s| s.needs).collect();
        assert!(needs.windows(2).all(|w| w[0] <= w[1]), "{needs:?}");
        // The steps the runner relies on sit where their needs say.
        assert!(index_of(Step::Auth) < index_of(Step::Limits));
        assert!(index_of(Step::Check) < index_of(Step::Cache));
        let names: Vec<&str> = STAGES.iter().map(Stage::name).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
    }
}
