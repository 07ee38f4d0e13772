//! A compiled function as a host calls it: its signature and what executes
//! it. A call goes through the boundary check ([`Signature::check`]), is
//! admitted only when what its executor will allocate fits in the memory
//! the process can still have ([`CheckedCall::admit`]), and then runs in the thread pool the caller gives; nothing of the compiler
//! is involved, so the JIT, AOT libraries and Python share this path.

use crate::call::CallBoundary;
use crate::call::{Arg, CheckedCall};
use crate::driver::Execute;
use crate::error::RuntimeError;
use crate::memory::Peak;
use crate::packed::Weights;
use crate::threads::ThreadPool;
use nax_contract::Signature;
use nax_host::HostTensor;
use nax_host::TensorMut;
use std::sync::Arc;

/// A callable function: `Send + Sync`, callable from many threads at once.
pub struct Function {
    signature: Arc<Signature>,
    exec: Box<dyn Execute>,
}

impl Function {
    /// A function from its signature and its executor (which holds the
    /// same signature, to refuse calls checked for another).
    pub fn new(signature: Arc<Signature>, exec: Box<dyn Execute>) -> Function {
        Function { signature, exec }
    }

    /// What it takes and gives.
    pub fn signature(&self) -> &Signature {
        &self.signature
    }

    /// Calls it with arguments by parameter name (host scalar parameters
    /// left out take their defaults), the module's weights (bound in their
    /// declared axis order) and a thread pool; returns the result. A
    /// function with several results is [`RuntimeError::SeveralResults`]:
    /// [`Function::call_results`] takes them.
    pub fn call(&self, args: Vec<(&str, Arg<'_>)>, weights: &dyn Weights, pool: &ThreadPool) -> Result<HostTensor, RuntimeError> {
        let args = self.signature.arguments(args)?;
        self.call_in_order(args, weights, pool)
    }

    /// As [`Function::call`], with one argument per parameter, in order.
    pub fn call_in_order(&self, args: Vec<Arg<'_>>, weights: &dyn Weights, pool: &ThreadPool) -> Result<HostTensor, RuntimeError> {
        self.one_result()?;
        single(self.check_and_run(args, weights, None, pool)?)
    }

    /// As [`Function::call`], for a function of any number of results:
    /// each one, in declared order (their names are the signature's).
    pub fn call_results(&self, args: Vec<(&str, Arg<'_>)>, weights: &dyn Weights, pool: &ThreadPool) -> Result<Vec<HostTensor>, RuntimeError> {
        let args = self.signature.arguments(args)?;
        self.call_results_in_order(args, weights, pool)
    }

    /// As [`Function::call_results`], with one argument per parameter, in order.
    pub fn call_results_in_order(&self, args: Vec<Arg<'_>>, weights: &dyn Weights, pool: &ThreadPool) -> Result<Vec<HostTensor>, RuntimeError> {
        let results = self.check_and_run(args, weights, None, pool)?;
        if results.len() != self.signature.results.len() {
            return Err(RuntimeError::Internal(format!("the call gave {} results of {}", results.len(), self.signature.results.len())));
        }
        Ok(results)
    }

    /// As [`Function::call`], writing the result into the caller's
    /// contiguous buffer (of the result's dtype and element count).
    pub fn call_into(&self, args: Vec<(&str, Arg<'_>)>, weights: &dyn Weights, out: &mut TensorMut<'_>, pool: &ThreadPool) -> Result<(), RuntimeError> {
        self.one_result()?;
        let args = self.signature.arguments(args)?;
        self.check_and_run(args, weights, Some(out), pool).map(drop)
    }

    /// Refuses a function of several results where one is asked for.
    fn one_result(&self) -> Result<(), RuntimeError> {
        match self.signature.results.len() {
            1 => Ok(()),
            count => Err(RuntimeError::SeveralResults { function: self.signature.name.clone(), count, names: self.signature.result_names() }),
        }
    }

    /// The boundary check and the run.
    fn check_and_run(
        &self,
        args: Vec<Arg<'_>>,
        weights: &dyn Weights,
        into: Option<&mut TensorMut<'_>>,
        pool: &ThreadPool,
    ) -> Result<Vec<HostTensor>, RuntimeError> {
        let call = self.signature.check(args, weights)?;
        self.admit_and_execute(&call, into, pool)
    }

    /// The most iterations any one loop nest of this call would run (a
    /// call over [`crate::error::MAX_ITERATIONS`] is refused when it runs): how a
    /// host, or a test, can tell a call that would take hours before
    /// making it.
    pub fn work(&self, call: &CheckedCall<'_>) -> Result<u128, RuntimeError> {
        call.require(&self.signature)?;
        self.exec.work(call)
    }

    /// Runs a call already checked against this function's signature (of one result).
    pub fn run(&self, call: &CheckedCall<'_>, pool: &ThreadPool) -> Result<HostTensor, RuntimeError> {
        self.one_result()?;
        single(self.run_results(call, pool)?)
    }

    /// Runs a call already checked against this function's signature: every result, in order.
    pub fn run_results(&self, call: &CheckedCall<'_>, pool: &ThreadPool) -> Result<Vec<HostTensor>, RuntimeError> {
        call.require(&self.signature)?;
        self.admit_and_execute(call, None, pool)
    }

    /// The memory plan's figure for a call already checked against this
    /// function's signature: what it allocates at most while it runs (its
    /// temporaries, sharing memory where their lifetimes allow, its
    /// results, the packing of its strided arguments), the figure the call
    /// is admitted against before it runs.
    pub fn peak(&self, call: &CheckedCall<'_>) -> Result<Peak, RuntimeError> {
        call.require(&self.signature)?;
        Ok(self.call_peak(call, false))
    }

    /// [`Self::peak`], the result written into the caller's buffer or not.
    fn call_peak(&self, call: &CheckedCall<'_>, into: bool) -> Peak {
        let peak = self.exec.peak(call, into);
        Peak { bytes: peak.bytes.saturating_add(call.packing_bytes()), ..peak }
    }

    /// Admits the call's peak, the packing of its strided arguments
    /// included, before anything of its size is allocated; then packs
    /// them (inside `pool`) and runs it.
    fn admit_and_execute(&self, call: &CheckedCall<'_>, into: Option<&mut TensorMut<'_>>, pool: &ThreadPool) -> Result<Vec<HostTensor>, RuntimeError> {
        call.admit(self.call_peak(call, into.is_some()))?;
        if call.packing_bytes() == 0 {
            return self.exec.execute(call, into, pool);
        }
        let packed = pool.install(|| call.packed())?;
        self.exec.execute(&packed, into, pool)
    }
}

/// The one result of a call of a one-result function.
fn single(results: Vec<HostTensor>) -> Result<HostTensor, RuntimeError> {
    let count = results.len();
    let mut results = results.into_iter();
    match (results.next(), results.next()) {
        (Some(r), None) => Ok(r),
        _ => Err(RuntimeError::Internal(format!("the call gave {count} results where one was asked for"))),
    }
}
