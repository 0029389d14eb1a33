//! One text message in its sender's conversation (issue #48): the order intake reads it in, as
//! one function that intake and the conversations corpus (`tests/language/conversations.txt`)
//! share. With a command being written in turns: a cancel word ends it; a whole command is that
//! command; else the message is the value asked for (taken, or missed and asked again, a few
//! times at most). Without one: a command as usual, or the beginning of one ("refund"), or why not.

use super::turns::{Begun, Missing, Turn};
use super::{Audience, BrokenRule, CommandSpec, Interpretation, Registry};

/// The command a person is writing in turns, and the answers in a row that missed its value.
#[derive(Debug, Clone, Copy)]
pub struct Open<'b> {
    pub begun: &'b Begun,
    pub tries: u32,
}

/// Why an answer was not the value asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Missed {
    /// Not a value of its type ("lots" for an amount).
    NotOfItsType,
    Broken(BrokenRule),
}

crate::domain::names::named_enum! {
    /// Why a command written in turns ended without being sent: cancelled, or too many answers
    /// in a row missed the value (the `turns_ended` reply's `reason`).
    Ending {
        Cancelled => "cancelled",
        Tries => "tries",
    }
}

/// What a text message is.
#[derive(Debug, PartialEq)]
pub enum Step<'a> {
    /// Read on its own, as `interpret_text_for` reads it: no conversation, a whole command in one,
    /// or one whose command is gone from the registry (which then ends).
    Alone(Interpretation<'a>),
    /// A command begun (`first`) or carried on: `missing` asked for; `missed`, why the last answer
    /// was not it; `tries`, the misses in a row so far.
    Ask {
        begun: Begun,
        missing: Missing,
        first: bool,
        tries: u32,
        missed: Option<Missed>,
    },
    /// Its last value: the command, read as if written in one go.
    Complete(Interpretation<'a>),
    Ended(Ending),
}

impl Registry {
    /// What `text` asks about linking a person's channels, if it is about that (read before any
    /// command: "link" is the gateway's word, whatever the registry names).
    pub fn linking(&self, text: &str) -> Option<super::Linking> {
        self.normalizer.may_link(text).then(|| self.normalizer.linking(&self.normalizer.tokens(text))).flatten()
    }

    /// `text` from a person who `may` ask for some commands, with `open` the command they are
    /// writing in turns if any; `most_tries` misses in a row end it.
    pub fn step(
        &self,
        open: Option<Open<'_>>,
        text: &str,
        audience: &Audience,
        may: impl Fn(&CommandSpec) -> bool,
        most_tries: u32,
    ) -> Step<'_> {
        let Some(open) = open else {
            let read = self.interpret_text_for(text, audience);
            if matches!(read, Interpretation::NoMatch | Interpretation::DidYouMean { .. })
                && let Some((begun, missing)) = self.begin(text, audience, may)
            {
                return Step::Ask { begun, missing, first: true, tries: 0, missed: None };
            }
            return Step::Alone(read);
        };
        if self.get(&open.begun.command).is_some() && self.is_cancel(text) {
            return Step::Ended(Ending::Cancelled);
        }
        let read = self.interpret_text_for(text, audience);
        if matches!(read, Interpretation::Command { .. }) {
            return Step::Alone(read);
        }
        match self.next_turn(open.begun, text, audience) {
            Turn::Complete(command) => Step::Complete(command),
            Turn::Next { begun, missing } => Step::Ask { begun, missing, first: false, tries: 0, missed: None },
            Turn::Wrong { missing, broken } => {
                let tries = open.tries + 1;
                if tries >= most_tries {
                    return Step::Ended(Ending::Tries);
                }
                let missed = Some(broken.map_or(Missed::NotOfItsType, Missed::Broken));
                Step::Ask { begun: open.begun.clone(), missing, first: false, tries, missed }
            }
            Turn::Gone => Step::Alone(read),
        }
    }
}
