//! The command line: `serve`, `migrate`, `purge`, `backup`, `check-config`, `audit verify|export`, `token mint`,
//! `stepup mint`, `simulate whatsapp|telegram|slack|messenger|instagram`, `chat`. The top layer:
//! imports any layer below it.

pub mod audit;
pub mod chat;
pub mod chat_channels;
pub mod conformance;
pub mod explain;
pub mod purge;
pub mod simulate;
pub mod simulate_channels;

use crate::service::telemetry::export::Exporting;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::Config;

use crate::config::ConfigSource;

use crate::service::Settings;
use crate::service::database::Database;
use crate::service::security::mint;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "chatgate", version, about = "Chat webhooks in, verified commands out, exactly once")]
struct Cli {
    /// Configuration file [default: config/chatgate.toml, optional]
    #[arg(long, global = true, env = "CHATGATE_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Apply migrations and serve HTTP until SIGTERM or SIGINT
    Serve,
    /// Apply the database migrations and exit
    Migrate,
    /// Overwrite the texts past `retention.texts` now (one pass), or count them
    Purge(crate::cli::purge::PurgeArgs),
    /// Copy SQLite's two files, online and consistent, into the new folder PATH
    Backup {
        /// The folder to create (it must not exist)
        path: PathBuf,
    },
    /// Validate the configuration and print it with every secret redacted
    CheckConfig,
    /// Evidence audit
    Audit {
        #[command(subcommand)]
        command: crate::cli::audit::AuditCommand,
    },
    /// Send provider-shaped, signed webhooks to a running gateway
    Simulate {
        #[command(subcommand)]
        channel: crate::cli::simulate_channels::SimulateChannel,
    },
    /// Talk to a running gateway as one person on WhatsApp, in the terminal
    Chat(crate::cli::chat::ChatArgs),
    /// API tokens from the configured development issuer
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Step-up tokens from the configured development step-up issuer
    Stepup {
        #[command(subcommand)]
        command: StepupCommand,
    },
    /// How a message would be read against the registry, without a running gateway
    Explain(crate::cli::explain::ExplainArgs),
    /// The conformance scenarios (conformance/*.json), run against a gateway as a black box
    Conformance {
        #[command(subcommand)]
        command: ConformanceCommand,
    },
}

#[derive(Subcommand)]
enum ConformanceCommand {
    /// Run every scenario of DIR, each against a gateway of its own; exits 1 if any fails
    Run {
        /// The gateway binary [default: this one]
        #[arg(long)]
        bin: Option<std::path::PathBuf>,
        /// A PostgreSQL server URL: each scenario gets a fresh database on it [default: SQLite]
        #[arg(long)]
        database_url: Option<String>,
        /// The folder of scenarios
        #[arg(default_value = "conformance")]
        dir: std::path::PathBuf,
        /// Leave a failed scenario's folder (its configuration and gateway.log) and database
        #[arg(long)]
        keep: bool,
    },
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Print an API bearer token (JWT) on stdout
    Mint {
        #[arg(long)]
        tenant: String,
        /// Space-separated scopes, e.g. "commands:read recovery:write"
        #[arg(long)]
        scope: String,
        #[arg(long, default_value = "chatgate-cli")]
        subject: String,
        /// The issuer (`iss`) to sign as [default: the first configured]
        #[arg(long)]
        issuer: Option<String>,
        /// Lifetime, e.g. 15m, 1h
        #[arg(long, default_value = "1h")]
        ttl: humantime::Duration,
    },
}

#[derive(Subcommand)]
enum StepupCommand {
    /// Print a single-use step-up token for an actor and a command on stdout
    Mint {
        /// The actor (WhatsApp id) who stepped up
        #[arg(long)]
        actor: String,
        /// The command id
        #[arg(long)]
        command: uuid::Uuid,
        /// The command's idempotency key [default: read from the database]
        #[arg(long)]
        idempotency_key: Option<String>,
    },
}

/// Parses the command line and runs it; every failure is one line on stderr and a non-zero exit.
pub fn main() -> ExitCode {
    crate::workers::limit_arenas();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return fail(&anyhow::anyhow!("cannot start the runtime: {e}")),
    };
    let exporting = init_tracing(runtime.handle());
    let code = match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => fail(&e),
    };
    // What is left of the traces is sent while the runtime still runs.
    if let Some(exporting) = exporting {
        exporting.shutdown();
    }
    code
}

fn fail(error: &anyhow::Error) -> ExitCode {
    // `{:#}` puts the cause chain on one line; some causes (TOML's) span lines of their own.
    let message = format!("{error:#}");
    let one_line: Vec<&str> = message.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    eprintln!("chatgate: error: {}", one_line.join(" "));
    ExitCode::FAILURE
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let source = cli.config.map_or(ConfigSource::Default, ConfigSource::Explicit);
    let env = |name: &str| std::env::var(name).ok();
    match cli.command {
        Command::Serve => crate::http::server::serve(Settings::load(&source, &env)?).await?,
        Command::Migrate => {
            let config = Config::load(&source, &env)?;
            let database = Database::connect(&config.storage).await?;
            database.migrate().await?;
            database.close().await;
            println!("migrations applied ({})", database.backend_name());
        }
        Command::Purge(args) => return crate::cli::purge::run(&Settings::load(&source, &env)?, &args).await,
        Command::Backup { path } => return backup(&Config::load(&source, &env)?, &path).await,
        Command::CheckConfig => {
            let settings = Settings::load(&source, &env)?;
            print!("{}", settings.config.to_redacted_toml());
            eprintln!("{}", settings.summary());
            for name in settings.config.demo_secrets() {
                eprintln!("warning: {name} is a demo value; set your own before production");
            }
            eprintln!("configuration is valid");
        }
        Command::Simulate { channel } => {
            let config = Config::load(&source, &env)?;
            return crate::cli::simulate_channels::run(&config, channel).await;
        }
        Command::Chat(args) => {
            let config = Config::load(&source, &env)?;
            return crate::cli::chat::chat(&config, &args).await;
        }
        Command::Token { command: TokenCommand::Mint { tenant, scope, subject, issuer, ttl } } => {
            let settings = Settings::load(&source, &env)?;
            let now = time::OffsetDateTime::now_utc();
            let authenticator = &settings.security.authenticator;
            let token = mint::api_token(authenticator, issuer.as_deref(), &tenant, &subject, &scope, ttl.into(), now)
                .map_err(|e| anyhow::anyhow!("cannot mint: {e}"))?;
            println!("{token}");
        }
        Command::Stepup { command: StepupCommand::Mint { actor, command, idempotency_key } } => {
            let settings = Settings::load(&source, &env)?;
            let key = match idempotency_key {
                Some(key) => key,
                None => stored_key(&settings.config, command).await?,
            };
            let now = time::OffsetDateTime::now_utc();
            let stepup = &settings.security.stepup;
            let token = stepup.mint(&actor, command, &key, now).map_err(|e| anyhow::anyhow!("cannot mint: {e}"))?;
            println!("{token}");
        }
        Command::Explain(args) => return crate::cli::explain::run(&Settings::load(&source, &env)?, &args),
        Command::Conformance { command: ConformanceCommand::Run { bin, database_url, dir, keep } } => {
            return crate::cli::conformance::run(bin, database_url, &dir, keep).await;
        }
        Command::Audit { command } => return crate::cli::audit::run(&Config::load(&source, &env)?, command).await,
    }
    Ok(ExitCode::SUCCESS)
}

/// The idempotency key of command `id`, read from the database.
async fn stored_key(config: &Config, id: uuid::Uuid) -> anyhow::Result<String> {
    let database = Database::connect(&config.storage).await?;
    database.migrate().await?;
    let found = database.reads().command_of_any_tenant(id).await?;
    database.close().await;
    let command = found.ok_or_else(|| anyhow::anyhow!("no command {id} in the database"))?;
    Ok(command.envelope.idempotency_key.as_str().to_owned())
}

async fn backup(config: &Config, path: &std::path::Path) -> anyhow::Result<ExitCode> {
    for file in crate::service::database::backup(&config.storage, path).await? {
        println!("{} -> {} ({} bytes, checked)", file.source.display(), file.copy.display(), file.bytes);
    }
    eprintln!("backup complete: {}", path.display());
    Ok(ExitCode::SUCCESS)
}

/// Logs, and traces when OpenTelemetry's variables ask for them (`service::telemetry::export`).
fn init_tracing(runtime: &tokio::runtime::Handle) -> Option<Exporting> {
    use tracing_subscriber::filter::{EnvFilter, Targets};
    use tracing_subscriber::prelude::*;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    // Logs go to stderr so that `check-config` and `audit verify --json` print clean output.
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(filter);
    let (exporting, failed) = match Exporting::from_env(runtime.clone()) {
        Ok(exporting) => (exporting, None),
        Err(error) => (None, Some(error)),
    };
    // Only the gateway's own spans become traces (and the events inside them, span events).
    let traces = exporting.as_ref().map(|exporting| {
        let spans = Targets::new().with_target("chatgate", tracing::Level::INFO);
        tracing_opentelemetry::layer().with_tracer(exporting.tracer()).with_filter(spans)
    });
    tracing_subscriber::registry().with(logs).with(traces).init();
    if let Some(error) = failed {
        tracing::error!(%error, "traces are not exported");
    }
    exporting
}
