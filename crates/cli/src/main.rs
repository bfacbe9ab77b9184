//! The `cairn` command.

fn main() {
    std::process::exit(cairn_cli::run());
}
