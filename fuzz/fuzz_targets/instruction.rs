//! Tool-argument normalisation: arbitrary JSON through
//! `Instruction::from_json` and the params decoding of a typed action.
//! Never panics.
#![no_main]

use jido::prelude::*;
use libfuzzer_sys::fuzz_target;

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Params {
    #[allow(dead_code)]
    n: i64,
    #[allow(dead_code)]
    tags: Option<Vec<String>>,
}

struct Ping;
impl Action for Ping {
    type Params = Params;
    type Output = ();
    const NAME: &'static str = "ping";
    async fn run(&self, _: Params, _: &Context) -> jido::Result<()> {
        Ok(())
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let allowed = [DynAction::new(Ping)];
    // Inline runs (timeout zero, no retries): decoding is all that runs.
    let exec = Exec::with_defaults(
        ExecOptions::new()
            .timeout(std::time::Duration::ZERO)
            .max_retries(0),
    );
    let mut list = Instruction::from_json(&value, &allowed).unwrap_or_default();
    list.push(Instruction::new(Ping).with_params(value));
    runtime().block_on(async {
        for ins in list {
            if let Err(e) = exec.run_instruction(ins).await {
                // Bad params are validation errors, never anything else.
                assert_eq!(e.kind(), ErrorKind::Validation, "{e}");
            }
        }
    });
});
