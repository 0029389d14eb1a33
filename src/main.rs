//! The `chatgate` binary: the command line lives in the library (`chatgate::cli`), where the
//! architecture test sees it.

fn main() -> std::process::ExitCode {
    chatgate::cli::main()
}
