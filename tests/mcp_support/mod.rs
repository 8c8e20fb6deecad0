//! What the MCP tests start: the third-party reference server
//! `@modelcontextprotocol/server-everything` (npm) and the tiny fault
//! server `fake_server.py` beside this file.
//!
//! A missing tool (npx, python3) skips the test with a message, except
//! under `CI=true`, where it fails: `.ci/run` installs what they need
//! (`scripts/mcp_server.sh install`).
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use jido::ai::mcp::{McpClient, McpServerConfig};

/// The version `scripts/mcp_server.sh` installs.
pub const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";

/// Skips (returns `None`) with `why`, or fails under `CI=true`.
pub fn skip<T>(test: &str, why: &str) -> Option<T> {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: {why} under CI=true (run `scripts/mcp_server.sh install` first)");
    }
    let _ = writeln!(std::io::stderr(), "{test}: skipped, {why}");
    None
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// How to start server-everything over stdio: `JIDO_MCP_EVERYTHING` (the
/// installed `mcp-server-everything`, as `scripts/mcp_server.sh install`
/// prints it), else `npx -y` (which may download it).
pub fn everything_config(test: &str) -> Option<McpServerConfig> {
    let config = match std::env::var("JIDO_MCP_EVERYTHING") {
        Ok(bin) if !bin.is_empty() => {
            if !Path::new(&bin).is_file() {
                return skip(test, &format!("JIDO_MCP_EVERYTHING={bin} does not exist"));
            }
            McpServerConfig::stdio(bin).arg("stdio")
        }
        _ => {
            if !on_path("npx") {
                return skip(test, "npx is not installed (server-everything needs node)");
            }
            McpServerConfig::stdio("npx").args(["-y", EVERYTHING, "stdio"])
        }
    };
    // A first `npx -y` downloads the package.
    Some(
        config
            .name("everything")
            .connect_timeout(Duration::from_secs(180)),
    )
}

/// A connected server-everything, or a skip.
pub async fn everything(test: &str) -> Option<McpClient> {
    let config = everything_config(test)?;
    match McpClient::connect(config).await {
        Ok(client) => Some(client),
        Err(e) => skip(test, &format!("server-everything did not start: {e}")),
    }
}

/// The fault server (`python3 fake_server.py ARGS`), or a skip.
pub fn fake_config(test: &str, args: &[&str]) -> Option<McpServerConfig> {
    if !on_path("python3") {
        return skip(test, "python3 is not installed");
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_support/fake_server.py");
    Some(
        McpServerConfig::stdio("python3")
            .arg(script.to_string_lossy().into_owned())
            .args(args.iter().copied())
            .name("fake")
            .connect_timeout(Duration::from_secs(60)),
    )
}
