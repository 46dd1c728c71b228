//! MPI plumbing that learner and actor ranks share (cargo feature `mpi`):
//! start-up at the thread level the transport needs, the rank layout
//! every rank learns at start ([`Layout`]), message tags, and safe wrappers
//! over the parts of `mpi::ffi` that rsmpi 0.8 has no safe API for —
//! non-blocking sends of owned buffers ([`Outbox`]) and one-sided RMA
//! windows ([`Window`]) — plus the actors' mailboxes the `rma` workflows
//! deposit into ([`mailbox`]).
//!
//! Launch is MPMD: `mpirun -n L learner-server mpi RUN.toml : -n A
//! actor-client mpi`. Ranks learn each other's roles from one allgather.

pub mod env_comm;
pub mod layout;
pub mod mailbox;
pub mod outbox;
pub mod window;

pub use env_comm::{Abandon, Abandoned, EnvComm, env_groups};
pub use layout::{Layout, Role};
pub use mailbox::Geometry;
pub use outbox::Outbox;
pub use window::{Epoch, Window};

/// The rsmpi crate itself, for its safe two-sided and collective API.
pub use ::mpi as rsmpi;
pub use mpi::environment::Universe;
pub use mpi::topology::SimpleCommunicator;

use crate::wire::{FrameError, Message};

/// Polling where MPI has no readiness notification to wait on: a few
/// yields, then pauses that double from 10 µs up to `max`; `reset` after
/// finding work.
#[derive(Debug, Clone)]
pub struct Backoff {
    polls: u32,
    spins: u32,
    max: std::time::Duration,
}

impl Backoff {
    pub fn new(spins: u32, max: std::time::Duration) -> Backoff {
        Backoff {
            polls: 0,
            spins,
            max,
        }
    }

    /// Waits a little longer than last time.
    pub fn wait(&mut self) {
        self.polls = self.polls.saturating_add(1);
        if self.polls <= self.spins {
            std::thread::yield_now();
        } else {
            let doublings = (self.polls - self.spins - 1).min(6);
            let pause = std::time::Duration::from_micros(10 << doublings);
            std::thread::sleep(pause.min(self.max));
        }
    }

    pub fn reset(&mut self) {
        self.polls = 0;
    }
}

/// A framed [`crate::wire::Message`] (length prefix included).
pub const TAG_MESSAGE: i32 = 1;
/// An actor rank leaves; the payload is its reason in UTF-8 (`done`
/// when it finished normally).
pub const TAG_BYE: i32 = 2;
/// The reason an actor that finished normally gives.
pub const BYE_DONE: &str = "done";

/// Steers OpenMPI away from its `osc/rdma` one-sided component unless
/// the user chose one (`OMPI_MCA_osc`): OpenMPI 4.1.4's `osc/rdma` over
/// the shared-memory BTL crashes the target rank under
/// `MPI_THREAD_MULTIPLE` (a segfault in `mca_btl_vader_poll_handle_frag`,
/// reproduced by `rlfleet-bench mpi-rma`). `osc/sm` then serves windows on
/// one node and `osc/ucx` windows across nodes.
///
/// Call it first thing in `main`, before any other thread exists (it sets
/// an environment variable that `MPI_Init` reads).
pub fn steer_components() {
    if std::env::var_os("OMPI_MCA_osc").is_none() {
        // SAFETY (edition 2024 marks set_var unsafe): the caller runs this
        // before starting threads, so nothing reads the environment
        // concurrently.
        #[allow(unsafe_code)]
        unsafe {
            std::env::set_var("OMPI_MCA_osc", "^rdma");
        }
    }
}

/// Initialises MPI with `MPI_THREAD_MULTIPLE`: the learner's transport
/// thread and the tokio tasks beside it may each call MPI.
pub fn init() -> Result<Universe, String> {
    use mpi::Threading;
    let (universe, level) = mpi::initialize_with_threading(Threading::Multiple)
        .ok_or("MPI was already initialised in this process")?;
    if level != Threading::Multiple {
        return Err(format!(
            "this MPI library provides thread level {level:?}; rlfleet needs Multiple \
             (OpenMPI built with --enable-mpi-thread-multiple, the Debian default)"
        ));
    }
    Ok(universe)
}

/// Ends the whole job with `code` (every rank), after printing `why`.
/// Used when one rank cannot go on and the others would wait for it.
pub fn abort(why: &str, code: i32) -> ! {
    use mpi::topology::Communicator;
    eprintln!("error: {why}");
    SimpleCommunicator::world().abort(code)
}

/// A frame received over MPI (length prefix included), checked against
/// `max_bytes` and validated.
pub fn decode_frame(bytes: &[u8], max_bytes: u32) -> Result<Message, FrameError> {
    let (len, body) = bytes
        .split_first_chunk::<4>()
        .ok_or(FrameError::Truncated)?;
    let len = u32::from_le_bytes(*len);
    if len > max_bytes {
        return Err(FrameError::TooLarge {
            len,
            max: max_bytes,
        });
    }
    if len as usize != body.len() {
        return Err(FrameError::Invalid(format!(
            "the frame says {len} bytes but carries {}",
            body.len()
        )));
    }
    crate::wire::decode(body)
}

/// A communicator that may move to the thread that uses it (the learner
/// ranks' group, used by a run's thread for data-parallel steps).
pub struct Group(pub SimpleCommunicator);

// SAFETY: MPI runs at MPI_THREAD_MULTIPLE (`init`), so a communicator may
// be used from any one thread at a time; `Group` is not `Sync`.
#[allow(unsafe_code)]
unsafe impl Send for Group {}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use mpi::topology::Communicator;
        f.debug_struct("Group")
            .field("rank", &self.0.rank())
            .field("size", &self.0.size())
            .finish()
    }
}

/// Collective over the world: the communicator of the ranks that share
/// this rank's role (learners with learners, actors with actors).
pub fn split_by_role(world: &SimpleCommunicator, role: Role) -> SimpleCommunicator {
    use mpi::topology::{Color, Communicator};
    let color = match role {
        Role::Learner => 1,
        Role::Actor | Role::EnvRank => 2,
    };
    world
        .split_by_color(Color::with_value(color))
        .expect("a defined color always gives a communicator")
}
