//! `actor-client`: flags and output around the library.

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "actor-client", version, about = "The rlfleet actor")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Play episodes locally with random actions; print one CSV row each.
    Rollout {
        #[arg(long, default_value = "CartPole-v1")]
        env: String,
        #[arg(long, default_value_t = 10)]
        episodes: u64,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Rollout {
            env,
            episodes,
            seed,
        } => {
            let results = actor_client::random_rollout(&env, episodes, seed)?;
            println!("episode,return,length,terminated");
            for r in &results {
                println!("{},{},{},{}", r.episode, r.ret, r.length, r.terminated);
            }
            let mean = results.iter().map(|r| r.ret).sum::<f64>() / results.len().max(1) as f64;
            eprintln!("{} episodes of {env}, mean return {mean:.2}", results.len());
            Ok(())
        }
    }
}
