//! [`serve_helper`]: a helper learner rank's loop — it follows the lead's
//! commands (observe, load the lead's state, take gradient steps) until
//! `Finish`, when it sends its weights back.

use super::allreduce::AllreduceMean;
use super::command::{Command, Item};
use crate::agents::{Agent, AgentState};
use rlfleet_shared::mpi::rsmpi::traits::{Communicator, Destination, MatchedReceiveVec, Source};
use rlfleet_shared::mpi::{Backoff, Group};

/// A helper learner rank: takes the same agent the lead built (its output,
/// if any, under `learner-RANK/`) and follows the lead's commands until
/// `Finish`. A command that does not decode aborts the job.
pub fn serve_helper(mut agent: Box<dyn Agent>, commands: Group, reduce: Group) {
    let reduces = agent.set_gradient_reduce(Box::new(AllreduceMean::new(reduce)));
    let lead = commands.0.process_at_rank(0);
    loop {
        // Polls (yielding, then pausing briefly) rather than block in MPI,
        // which spins: the ranks share few cores with the actors.
        let mut backoff = Backoff::new(1000, std::time::Duration::from_micros(20));
        let probed = loop {
            if let Some(p) = lead.immediate_matched_probe() {
                break p;
            }
            backoff.wait();
        };
        let (msg, _) = probed.matched_receive_vec::<u8>();
        let command = match Command::decode(&msg) {
            Ok(c) => c,
            Err(e) => rlfleet_shared::mpi::abort(
                &format!("a helper learner: a command from the lead does not decode: {e}"),
                1,
            ),
        };
        match command {
            Command::Observe(items) => {
                for item in items {
                    observe(agent.as_mut(), item);
                }
            }
            Command::Train(n) => {
                for _ in 0..n {
                    agent.sample_step();
                }
            }
            Command::State(s) => {
                if let Err(e) = agent.load_state(&AgentState::from(s)) {
                    rlfleet_shared::mpi::abort(&format!("a helper learner: {e}"), 1);
                }
            }
            Command::Finish => {
                let w = agent.weights().data;
                lead.send(&w[..]);
                tracing::info!(reduces, "helper learner done");
                return;
            }
        }
    }
}

fn observe(agent: &mut dyn Agent, item: Item) {
    match item {
        Item::Transition(t) => agent.observe(&t.transition()),
        Item::Bytes(t) => agent.observe_bytes(&t.transition()),
        Item::End(e) => agent.end_episode(e),
        Item::Abandon(e) => agent.abandon_episode(e),
    }
}
