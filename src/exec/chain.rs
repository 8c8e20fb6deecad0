use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::{AsyncHandle, Exec};
use crate::action::{DynAction, json_type_name};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::instruction::Instruction;

/// How a [`Chain`] ended.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum ChainOutcome {
    /// Every step ran; the accumulated params and outputs.
    Completed(Map<String, Value>),
    /// The interrupt check fired before a step; the accumulated values so
    /// far (the output of the last step that ran, merged in).
    Interrupted(Map<String, Value>),
}

type InterruptCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// Actions run one after another, each output merged into the params of the
/// next.
///
/// The accumulated map starts as the initial params. Before each step its
/// own params are merged into the accumulated map (its own win), the step
/// runs with that map, and its output is merged (shallowly) into it, so a
/// step's params stay visible to the steps after it, as in Jido. The first
/// error halts the chain (later steps do not run). Effects of the steps are
/// dropped, as in Jido.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use jido::prelude::*;
/// use jido::exec::{Chain, ChainOutcome};
/// use serde_json::json;
///
/// #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
/// struct N { n: i64 }
/// struct Double;
/// impl Action for Double {
///     type Params = N;
///     type Output = serde_json::Value;
///     const NAME: &'static str = "double";
///     async fn run(&self, p: N, _: &Context) -> jido::Result<serde_json::Value> {
///         Ok(json!({"n": p.n * 2}))
///     }
/// }
///
/// let chain = Chain::new().step(Double).step(Double);
/// let out = chain.run(&Exec::new(), json!({"n": 3}), Context::new()).await?;
/// assert_eq!(out, ChainOutcome::Completed(json!({"n": 12}).as_object().unwrap().clone()));
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct Chain {
    steps: Vec<Instruction>,
    interrupt: Option<InterruptCheck>,
}

impl Chain {
    /// An empty chain.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a step with no params of its own.
    #[must_use]
    pub fn step(self, action: impl Into<DynAction>) -> Self {
        self.instruction(Instruction::new(action))
    }

    /// Appends a step with params of its own (merged over the accumulated
    /// ones).
    #[must_use]
    pub fn step_with(self, action: impl Into<DynAction>, params: Value) -> Self {
        self.instruction(Instruction::new(action).with_params(params))
    }

    /// Appends an instruction as a step (its options apply to that step).
    #[must_use]
    pub fn instruction(mut self, instruction: Instruction) -> Self {
        self.steps.push(instruction);
        self
    }

    /// Checked before each step; when it returns `true` the chain stops
    /// with [`ChainOutcome::Interrupted`].
    #[must_use]
    pub fn interrupt_when(mut self, check: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.interrupt = Some(Arc::new(check));
        self
    }

    /// Number of steps.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether the chain has no steps.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Runs the chain on `exec`.
    ///
    /// # Errors
    ///
    /// A validation error when `params` or a step's params are not an
    /// object; otherwise the first step's error, which halts the chain.
    pub async fn run(&self, exec: &Exec, params: Value, ctx: Context) -> Result<ChainOutcome> {
        let mut acc = into_object(params, "params")?;
        for step in &self.steps {
            if self.interrupt.as_ref().is_some_and(|check| check()) {
                let name = step.action.name();
                tracing::info!(action = name, "chain interrupted before action {name}");
                return Ok(ChainOutcome::Interrupted(acc));
            }
            acc.extend(into_object(step.params.clone(), "step params")?);
            let out = exec
                .execute_parts(
                    step.action.clone(),
                    Value::Object(acc.clone()),
                    step.context.clone(),
                    step.opts,
                    ctx.clone(),
                )
                .await
                .into_result()?;
            acc.extend(out.output);
        }
        Ok(ChainOutcome::Completed(acc))
    }

    /// Runs the chain in a supervised task of `exec`.
    ///
    /// # Errors
    ///
    /// A cancelled error when the executor is shut down.
    pub fn spawn(
        self,
        exec: &Exec,
        params: Value,
        ctx: Context,
    ) -> Result<AsyncHandle<ChainOutcome>> {
        let exec2 = exec.clone();
        let handle = exec
            .supervisor()
            .spawn_tracked(async move { self.run(&exec2, params, ctx).await })?;
        Ok(AsyncHandle::new(handle))
    }
}

fn into_object(value: Value, what: &str) -> Result<Map<String, Value>> {
    match value {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        other => Err(Error::validation(format!(
            "invalid {what}: expected a JSON object, got {}",
            json_type_name(&other)
        ))),
    }
}

impl fmt::Debug for Chain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chain")
            .field(
                "steps",
                &self
                    .steps
                    .iter()
                    .map(|s| s.action.name())
                    .collect::<Vec<_>>(),
            )
            .field("interruptible", &self.interrupt.is_some())
            .finish()
    }
}
