use clap::Parser;

fn main() {
    let cli = framepipe::cli::Cli::parse();
    if let Err(e) = framepipe::app::run(&cli.run) {
        eprintln!("framepipe: error: {e:#}");
        std::process::exit(1);
    }
}
