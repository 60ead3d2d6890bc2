//! The legs of one flow: each leg's answer read into what comes next ([`Step`]), the state
//! carried from leg to leg ([`Legs`]), and the flow's end recorded ([`Flow::finish`]).

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use bytes::Bytes;
use http::HeaderValue;

use super::super::answer::{answer_input_requests_as, ElicitAction};
use super::super::ctx::{Ctx, Draw};
use super::super::leg::{send_leg, LegMode, Outcome};
use super::super::measure::{FlowEnd, LegError, LegKind};
use super::super::plan::FlowPlan;
use super::super::task_flow::TaskStart;
use super::super::template::{FlowTemplate, RetryParts};
use super::{follow_task, record_leg, LegDone};

/// What stays fixed through one flow's legs.
pub(super) struct Flow<'a> {
    pub(super) ctx: &'a Ctx,
    pub(super) shard: usize,
    pub(super) op: usize,
    pub(super) d: &'a Draw,
    pub(super) tpl: &'a FlowTemplate,
    pub(super) principal: &'a HeaderValue,
}

/// What changes from one leg of a flow to the next.
struct Legs {
    /// An elicitation was answered (with the flow's action).
    asked: bool,
    first_instance: Option<Bytes>,
    state: Option<String>,
    responses: Vec<u8>,
    has_responses: bool,
    send_at: Instant,
    round: u32,
    final_result: Option<serde_json::Value>,
}

/// What a leg's answer means for the flow.
enum Step {
    /// The flow ends here.
    End(FlowEnd),
    /// Another leg follows, carrying this request state.
    Retry(Option<String>),
    /// The call created this task: follow it.
    Task(String),
}

/// How a flow's legs ended.
pub(super) struct Done {
    end: FlowEnd,
    at: Instant,
    round: u32,
    asked: bool,
    final_result: Option<serde_json::Value>,
}

impl Legs {
    /// The retry parts of the next leg: the answers to the last input requests and the state.
    fn retry(&self) -> RetryParts<'_> {
        RetryParts {
            input_responses: self.has_responses.then_some(self.responses.as_slice()),
            request_state: self.state.as_deref(),
        }
    }

    /// Read a leg's outcome: keep a final result, answer input requests into
    /// [`Legs::responses`], and set `e` when the answer fails the flow though the leg did not.
    fn take(&mut self, f: &Flow<'_>, outcome: Outcome, e: &mut Option<LegError>) -> Step {
        match outcome {
            Outcome::Task { task_id } if f.tpl.tasks => Step::Task(task_id),
            Outcome::Task { .. } => {
                *e = Some(LegError {
                    kind: "unexpected_task",
                    status: None,
                    code: None,
                    message: Some(
                        "the call was answered with a task, but this flow does not follow tasks (set `tasks: true`)"
                            .into(),
                    ),
                });
                Step::End(FlowEnd::Failed)
            }
            Outcome::Complete { result } => {
                self.final_result = result;
                Step::End(FlowEnd::Completed)
            }
            Outcome::Failed { result } => {
                self.final_result = result;
                Step::End(FlowEnd::Failed)
            }
            Outcome::InputRequired { .. } if self.round >= f.ctx.max_rounds => {
                Step::End(FlowEnd::Abandoned)
            }
            Outcome::InputRequired {
                input_requests,
                request_state,
            } => self.answer(f, input_requests, request_state, e),
        }
    }

    /// Answer a leg's input requests (if any) with the flow's action, for the next leg.
    fn answer(
        &mut self,
        f: &Flow<'_>,
        input_requests: Option<String>,
        request_state: Option<String>,
        e: &mut Option<LegError>,
    ) -> Step {
        self.responses.clear();
        self.has_responses = false;
        self.asked = true;
        let answered = input_requests.map(|ir| {
            answer_input_requests_as(&ir, &f.tpl.answers, f.d.action, &mut self.responses)
        });
        match answered {
            Some(Err(why)) => {
                *e = Some(LegError {
                    kind: "unanswerable_input_request",
                    status: None,
                    code: None,
                    message: Some(why.to_string()),
                });
                Step::End(FlowEnd::Failed)
            }
            answered => {
                self.has_responses = answered.is_some();
                Step::Retry(request_state)
            }
        }
    }

    /// The flow's legs ended with `end` at `at`.
    fn done(self, end: FlowEnd, at: Instant) -> Done {
        Done {
            end,
            at,
            round: self.round,
            asked: self.asked,
            final_result: self.final_result,
        }
    }
}

impl Flow<'_> {
    /// Send legs, the first at `intended`, until the flow ends (following a task the call
    /// creates to its end), recording each.
    pub(super) async fn legs(&self, want_result: bool, intended: Instant) -> Done {
        let mut s = Legs {
            asked: false,
            first_instance: None,
            state: None,
            responses: Vec::new(),
            has_responses: false,
            send_at: intended,
            round: 1,
            final_result: None,
        };
        loop {
            let id = self.ctx.next_id.fetch_add(1, Relaxed);
            let body = self.tpl.body(id, s.retry());
            let mode = LegMode {
                bad: false,
                want_result,
                // After a decline or cancel, the tool's error result is the expected end.
                tool_error_ok: s.asked && self.d.action != ElicitAction::Accept,
            };
            let sent = send_leg(self.ctx, self.tpl, self.principal, id, body, mode).await;
            let (outcome, mut e, inst) = (sent.outcome, sent.error, sent.instance);
            let now = Instant::now();
            let kind = self.leg_kind(s.round);
            let step = s.take(self, outcome, &mut e);
            let leg = LegDone {
                op: self.op,
                kind,
                sent: s.send_at,
                now,
                error: e,
                instance: inst.as_deref(),
                first: s.first_instance.as_deref(),
                steered: sent.steered,
            };
            record_leg(self.ctx, self.shard, leg);
            let owner = if matches!(step, Step::Task(_)) {
                inst.clone()
            } else {
                None
            };
            if s.round == 1 {
                s.first_instance = inst;
            }
            match step {
                Step::Task(task_id) => {
                    let (end, result) = self.follow_task(task_id, owner, s.send_at).await;
                    s.final_result = result;
                    return s.done(end, Instant::now());
                }
                Step::End(end) => return s.done(end, now),
                Step::Retry(state) => {
                    s.state = state;
                    s.send_at = now;
                    s.round += 1;
                }
            }
        }
    }

    /// The kind of the flow's leg in `round`: a call's first leg or a retry, or a plain request.
    fn leg_kind(&self, round: u32) -> LegKind {
        match (self.tpl.is_call(), round) {
            (false, _) => LegKind::Plain,
            (true, 1) => LegKind::First,
            (true, _) => LegKind::Retry,
        }
    }

    /// Follow the task `task_id` a call sent at `created_sent` created (`owner`: the instance
    /// that answered it).
    async fn follow_task(
        &self,
        task_id: String,
        owner: Option<Bytes>,
        created_sent: Instant,
    ) -> (FlowEnd, Option<serde_json::Value>) {
        let start = TaskStart {
            tpl: self.tpl,
            principal: self.principal,
            task_id,
            owner,
            cancel: self.d.cancel_task,
            created_sent,
        };
        follow_task(self.ctx, self.shard, start).await
    }

    /// Record the flow's end: the live counters, its content checks (on the final result of a
    /// flow that accepted its elicitations), deliberate declines and cancels, and the flow.
    pub(super) fn finish(&self, plan: &FlowPlan, done: Done, intended: Instant) {
        let (ctx, d) = (self.ctx, self.d);
        let Done {
            end,
            at,
            round,
            asked,
            final_result,
        } = done;
        if end == FlowEnd::Completed {
            ctx.live.flows.fetch_add(1, Relaxed);
        } else if end == FlowEnd::Abandoned {
            ctx.live.errors.fetch_add(1, Relaxed);
        }
        let is_call = self.tpl.is_call();
        let deliberate = asked && d.action != ElicitAction::Accept;
        let checked: Vec<(&str, Result<(), String>)> = match (&final_result, deliberate) {
            (Some(r), false) => plan
                .checks
                .iter()
                .map(|c| (c.label.as_str(), c.evaluate(r)))
                .collect(),
            _ => Vec::new(),
        };
        let stage = ctx.stage(at);
        ctx.record(self.shard, |m| {
            for (label, outcome) in checked {
                m.tally.check(label, outcome);
            }
            if deliberate {
                match d.action {
                    ElicitAction::Decline => m.tally.declined += 1,
                    ElicitAction::Cancel => m.tally.cancelled += 1,
                    ElicitAction::Accept => {}
                }
            }
            if let (Some(s), FlowEnd::Completed) = (stage, end) {
                m.tally.stage_flow_completed(s);
            }
            m.record_flow(self.op, end, round, at - intended, ctx.sec(at), is_call)
        });
    }
}
