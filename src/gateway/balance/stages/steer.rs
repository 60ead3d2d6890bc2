//! Retry landing: which instances an MRTR retry leg should avoid when its pool says
//! `mrtr.retry_landing: elsewhere`, and how that went.
//!
//! The journey finds the previous leg's instance (and leg 1's) in the flows it follows and hands
//! them here as a [`Steer`]; [`Steer::avoid`] turns them into a set of instances to skip, given
//! which are eligible: both when another instance is eligible, else the previous one alone, else
//! none (the leg then lands where it can: a refusal would prove nothing). This module never
//! refuses a request and never looks at a body.

use super::Tried;

/// The instances a retry leg should not land on, as the flow store knows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Steer {
    /// The instance that served the previous leg of the flow.
    pub previous: Option<usize>,
    /// The instance that served leg 1 of the flow (avoided too when a third is eligible, so
    /// that a flow of three legs or more also leaves its first instance).
    pub first: Option<usize>,
}

/// Where a steered retry leg landed (the value of the `x-mcp-edge-retry-landing` header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landing {
    /// On another instance than the previous leg's.
    Elsewhere,
    /// On the previous leg's instance: no other was eligible (down, ejected or already tried).
    Same,
    /// This gateway did not see the previous leg (another replica served it, its flow expired
    /// or was evicted, or its body was not checked): balanced as usual.
    Untracked,
}

impl Landing {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Landing::Elsewhere => "elsewhere",
            Landing::Same => "same",
            Landing::Untracked => "untracked",
        }
    }

    pub(crate) fn header_value(self) -> http::HeaderValue {
        http::HeaderValue::from_static(self.label())
    }
}

impl Steer {
    /// Is there anything to steer away from?
    pub(crate) fn is_set(&self) -> bool {
        self.previous.is_some()
    }

    /// The instances to skip among `n`, given which are `eligible`, and the landing that
    /// follows: both avoided instances when one more is eligible, else the previous one, else
    /// none.
    pub(crate) fn avoid(&self, n: usize, eligible: &impl Fn(usize) -> bool) -> (Tried, Landing) {
        let Some(prev) = self.previous else {
            return (Tried::default(), Landing::Untracked);
        };
        let mut both = Tried::default();
        both.add(prev);
        if let Some(f) = self.first {
            both.add(f);
        }
        let left = |skip: Tried| (0..n).any(|i| eligible(i) && !skip.has(i));
        if left(both) {
            return (both, Landing::Elsewhere);
        }
        let mut one = Tried::default();
        one.add(prev);
        if left(one) {
            return (one, Landing::Elsewhere);
        }
        (Tried::default(), Landing::Same)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steer(previous: usize, first: Option<usize>) -> Steer {
        Steer {
            previous: Some(previous),
            first,
        }
    }

    #[test]
    fn both_legs_instances_are_avoided_when_a_third_is_eligible() {
        let (skip, landing) = steer(1, Some(0)).avoid(3, &|_| true);
        assert_eq!(landing, Landing::Elsewhere);
        assert!(skip.has(0) && skip.has(1) && !skip.has(2));
    }

    #[test]
    fn with_two_instances_only_the_previous_one_is_avoided() {
        let (skip, landing) = steer(1, Some(0)).avoid(2, &|_| true);
        assert_eq!(landing, Landing::Elsewhere);
        assert!(skip.has(1) && !skip.has(0));
        // The third instance is down: the same rule on three.
        let (skip, _) = steer(1, Some(0)).avoid(3, &|i| i != 2);
        assert!(skip.has(1) && !skip.has(0));
    }

    #[test]
    fn the_previous_instance_is_taken_when_no_other_is_eligible() {
        let (skip, landing) = steer(0, Some(0)).avoid(2, &|i| i == 0);
        assert_eq!(landing, Landing::Same);
        assert_eq!(skip, Tried::default());
        let (skip, landing) = Steer::default().avoid(2, &|_| true);
        assert_eq!((skip, landing), (Tried::default(), Landing::Untracked));
    }
}
