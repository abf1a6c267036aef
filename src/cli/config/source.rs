//! Where a run's inputs come from, shared by `run plan` and `orchestrate pool`: the pool
//! file, the placement (flags over the pool file's `[placement]`) and the weight source.

use color_eyre::Section;
use color_eyre::eyre::eyre;
use std::path::Path;

use crate::cli::args::PlacementFlags;
use crate::cli::exit::{CliError, ExitCode, plan_error};
use crate::planner::{Placement, Pool, check_pool, check_weights_url};
use crate::wire::WeightSource;

/// Checks `--weights-url` before anything is hashed or started (`invalid_weights_url`,
/// exit 4).
pub fn check_url(url: Option<&str>) -> Result<(), CliError> {
    url.map_or(Ok(()), |u| check_weights_url(u).map_err(plan_error))
}

/// Reads and parses a pool file, then judges what can be judged without its nodes
/// ([`check_pool`]: a rejection exits 4 with its plan reason).
pub fn read_pool(path: &Path) -> Result<Pool, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::new(
            ExitCode::Input,
            "io",
            eyre!(e).wrap_err(format!("cannot read pool file {}", path.display())),
        )
    })?;
    let pool = Pool::from_toml(&text).map_err(|e| {
        CliError::new(
            ExitCode::Input,
            "invalid_pool_file",
            eyre!(e)
                .wrap_err(format!("cannot use pool file {}", path.display()))
                .suggestion("see `swactor run plan --help` and README.md for the pool file format"),
        )
    })?;
    check_pool(&pool).map_err(plan_error)?;
    Ok(pool)
}

/// The placement of a run: `--nodes` and `--layers` where given, else the pool file's.
pub fn placement(pool: &Pool, flags: &PlacementFlags) -> Result<Placement, CliError> {
    let file_placement = pool.placement.clone().unwrap_or_default();
    let file_layers = pool
        .placement_layers()
        .map_err(|e| CliError::new(ExitCode::Input, "invalid_pool_file", eyre!(e)))?;
    // `--auto-stages` chooses nodes and ranges itself.
    let (file_nodes, file_layers) = match flags.auto_stages {
        true => (None, None),
        false => (file_placement.nodes, file_layers),
    };
    Ok(Placement {
        nodes: flags.node_ids().or(file_nodes),
        layers: flags.layers.clone().or(file_layers),
        by_memory: flags.balance == crate::cli::args::flags::BalanceBy::Memory,
        auto_stages: flags.auto_stages,
    })
}

/// Where the nodes read the weights: `model`'s absolute path, or `url` checked against the
/// model file's `size` and sha256 (a hashing error is wrapped in `hash_context`).
pub fn weight_source(
    model: &Path,
    url: Option<&str>,
    size: u64,
    hash_context: &str,
) -> Result<WeightSource, CliError> {
    Ok(match url {
        None => WeightSource::Local { path: absolute(model) },
        Some(url) => WeightSource::Url {
            url: url.to_string(),
            size,
            sha256: crate::stage::weights::sha256_file(model).map_err(|e| {
                CliError::new(ExitCode::Input, "io", eyre!(e).wrap_err(hash_context.to_string()))
            })?,
            // Each stage's ranges are added once the plan places the stages.
            ranges: Vec::new(),
        },
    })
}

/// A path as absolute as it can be made, as text.
pub fn absolute(path: &Path) -> String {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string()
}
