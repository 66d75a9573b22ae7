//! `custody`: the command line of the custody service (decisions §1).

mod chains;
mod commands;
mod config;
mod database;
mod datadir;
mod hot_wallets;
mod seeds;
mod support;

use commands::{credentials, init, ledger, outgoing, serve, treasury, wallets, webhooks};

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// mimalloc instead of glibc's malloc: a signed request allocates a few hundred small blocks
/// (headers, JSON, statements' values) across the runtime's threads, and the profile of a
/// transfer put about a tenth of its CPU in malloc/free (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "custody",
    version,
    about = "Custodial crypto core for BSC and TRON"
)]
struct Cli {
    /// The data dir: custody.toml, the SQLite database and the sealed master seed.
    #[arg(long, global = true, env = "CUSTODY_DATA_DIR")]
    data_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create a data dir: config, database, and a new (or imported) master seed.
    Init(InitArgs),
    /// Manage API credentials.
    #[command(subcommand)]
    Credentials(CredentialsCommand),
    /// Serve the API and run the background workers.
    Serve(ServeArgs),
    /// Manage webhook endpoints and events.
    #[command(subcommand)]
    Webhooks(webhooks::WebhooksCommand),
    /// Operator actions on the ledger.
    #[command(subcommand)]
    Ledger(LedgerCommand),
    /// The hot wallets.
    #[command(subcommand)]
    Treasury(TreasuryCommand),
    /// Operator actions on deposit wallets.
    #[command(subcommand)]
    Wallets(wallets::WalletsCommand),
    /// Operator actions on outgoing transactions (withdrawals, swaps, sweeps, fundings).
    #[command(subcommand)]
    Outgoing(OutgoingCommand),
}

#[derive(Debug, Subcommand)]
enum OutgoingCommand {
    /// Cancel a payment that can never proceed (audited): failed at once if nothing was
    /// signed; on BSC its nonce voided by a 0-value self-transfer, then failed and its hold
    /// released; on TRON failed once every attempt is void. `custody serve` carries it out.
    Cancel {
        /// The outgoing transaction's id (in the withdrawal's, swap's, sweep's or funding's
        /// record, or an alert).
        id: String,
        #[arg(long)]
        reason: String,
    },
}

#[derive(Debug, Subcommand)]
enum TreasuryCommand {
    /// Each network's hot wallets (retired ones marked), on-chain balances and next nonce.
    Show,
    /// Move a network's hot wallet to a new one under the newest imported seed and drain the
    /// old one into it (audited). Stop `custody serve` first; restart it afterwards.
    Rotate(treasury::RotateArgs),
    /// Drain what is left on a network's retired hot wallets (sweeps planned before the
    /// rotation, funds sent there since) into the active one (audited). Safe while serving.
    Drain(treasury::RotateArgs),
}

#[derive(Debug, Subcommand)]
enum LedgerCommand {
    /// Credit or debit a user against the adjustments account (audited).
    Adjust(AdjustArgs),
    /// Check that every transaction balances and every account equals its entries.
    Reconcile,
    /// Find the treasury's own moves (gas top-ups) that older versions credited to users as
    /// deposits, and take each back: reversed (what was spent is owed) or orphaned if still
    /// pending. Audited; prints what it did. Safe to run again.
    RepairTreasuryDeposits {
        /// Report what would be done, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Settle what a reversed deposit leaves a user owing (audited): from the user's balance
    /// of the asset, or written off by the house.
    SettleOwed(SettleOwedArgs),
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("how").required(true).args(["from_user", "write_off"])))]
pub struct SettleOwedArgs {
    #[arg(long)]
    pub tenant: String,
    #[arg(long)]
    pub deposit_id: String,
    /// Take it from what the user holds now (at most what is owed).
    #[arg(long)]
    pub from_user: bool,
    /// The house pays it from the adjustments account.
    #[arg(long)]
    pub write_off: bool,
    #[arg(long)]
    pub reason: String,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("direction").required(true).args(["credit", "debit"])))]
pub struct AdjustArgs {
    #[arg(long)]
    pub tenant: String,
    #[arg(long)]
    pub external_user_id: String,
    #[arg(long)]
    pub network: String,
    #[arg(long)]
    pub asset: String,
    #[arg(long)]
    pub credit: bool,
    #[arg(long)]
    pub debit: bool,
    #[arg(long)]
    pub amount_units: String,
    #[arg(long)]
    pub reason: String,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Store the seed unencrypted (local development only).
    #[arg(long)]
    pub insecure_dev_seed: bool,
    /// Import this BIP39 mnemonic instead of generating one.
    #[arg(long)]
    pub mnemonic_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum CredentialsCommand {
    /// Create a credential; prints it as JSON, with its secret, once.
    Create(CreateCredentialArgs),
    /// List credentials (no secrets).
    List,
    /// Revoke a credential.
    Revoke {
        #[arg(long)]
        api_key: String,
    },
}

#[derive(Debug, Args)]
pub struct CreateCredentialArgs {
    #[arg(long)]
    pub tenant: String,
    /// Comma-separated scopes; default: every non-admin scope.
    #[arg(long, value_delimiter = ',')]
    pub scopes: Option<Vec<String>>,
    /// Grant access to /admin/*.
    #[arg(long)]
    pub admin: bool,
    /// Requests per 60 s window.
    #[arg(long, default_value_t = 600)]
    pub rate_limit: u32,
    /// Require this PIN (X-Service-Pin) on sensitive operations.
    #[arg(long)]
    pub pin: Option<String>,
    /// Require a TOTP code (X-Service-OTP) on sensitive operations.
    #[arg(long)]
    pub totp: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (overrides custody.toml); port 0 picks a free port.
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CUSTODY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_current_span(false)
        .try_init();
}

fn main() -> ExitCode {
    // Before any thread exists and before any key is in memory.
    support::take_passphrase();
    if let Err(message) = custody_cli::harden::forbid_core_dumps() {
        eprintln!("error: {message}");
        return ExitCode::FAILURE;
    }
    init_logging();
    let cli = Cli::parse();
    let Some(data_dir) = cli.data_dir else {
        eprintln!("error: --data-dir DIR (or CUSTODY_DATA_DIR) is required");
        return ExitCode::from(2);
    };
    let dir = datadir::DataDir::new(data_dir);
    let result = match cli.command {
        Command::Init(args) => init::init(&dir, &args),
        Command::Credentials(CredentialsCommand::Create(args)) => {
            credentials::create_credential(&dir, &args)
        }
        Command::Credentials(CredentialsCommand::List) => credentials::list_credentials(&dir),
        Command::Credentials(CredentialsCommand::Revoke { api_key }) => {
            credentials::revoke_credential(&dir, &api_key)
        }
        Command::Serve(args) => serve::serve(&dir, &args),
        Command::Webhooks(command) => webhooks::run(&dir, &command),
        Command::Ledger(LedgerCommand::Adjust(args)) => ledger::adjust(&dir, &args),
        Command::Ledger(LedgerCommand::Reconcile) => ledger::reconcile(&dir),
        Command::Ledger(LedgerCommand::RepairTreasuryDeposits { dry_run }) => {
            ledger::repair_treasury_deposits(&dir, dry_run)
        }
        Command::Ledger(LedgerCommand::SettleOwed(args)) => ledger::settle_owed(&dir, &args),
        Command::Treasury(TreasuryCommand::Show) => treasury::show(&dir),
        Command::Treasury(TreasuryCommand::Rotate(args)) => treasury::rotate(&dir, &args),
        Command::Treasury(TreasuryCommand::Drain(args)) => treasury::drain(&dir, &args),
        Command::Wallets(command) => wallets::run(&dir, &command),
        Command::Outgoing(OutgoingCommand::Cancel { id, reason }) => {
            outgoing::cancel(&dir, &id, &reason)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
