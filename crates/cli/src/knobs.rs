//! knobs: `evenkeel options`, every engine option with its default, valid range and doc, all
//! taken from the engine's one table of knobs (`Options::help`), so this list cannot drift.
//!
//! With `--config` / `--set` it also shows the value those flags give each option (after
//! validating them), which makes it a way to check a config file before using it.

use crate::config::ConfigArgs;
use crate::failure::CmdResult;
use clap::Args;
use evenkeel::Options;
use std::collections::HashMap;

#[derive(Args, Debug)]
pub struct OptionsArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
}

pub fn run(args: &OptionsArgs) -> CmdResult {
    let given = args.config.config.is_some() || !args.config.set.is_empty();
    let opts = args.config.options()?;
    print!("{}", render(&opts, given));
    Ok(())
}

pub fn render(opts: &Options, show_values: bool) -> String {
    let values: HashMap<&str, String> = opts.describe().into_iter().collect();
    let mut out = String::from(
        "Engine options: set them in a TOML file (--config FILE) or with --set name=value.\n\
         Names may carry an innodb_ prefix and use - for _. Sizes take K, M, G, T suffixes.\n\n",
    );
    for (name, default, range, doc) in Options::help() {
        out.push_str(&format!(
            "{name}\n    {doc}\n    default: {default}\n    valid:   {range}\n"
        ));
        if show_values {
            if let Some(v) = values.get(name) {
                out.push_str(&format!("    value:   {v}\n"));
            }
        }
    }
    out
}
