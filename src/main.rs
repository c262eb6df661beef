use clap::Parser;
use framepipe::cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    let result = match &cli.command {
        None => framepipe::app::run(&cli.run),
        Some(Command::Bench(args)) => framepipe::bench::run(args),
        Some(Command::Doctor) => framepipe::doctor::run(),
    };
    if let Err(e) = result {
        eprintln!("framepipe: error: {e:#}");
        std::process::exit(1);
    }
}
