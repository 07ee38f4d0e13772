//! The back-end interface: every back end (interp, llvm, cranelift, mlir,
//! cuda) compiles a [`Graph`] into an [`Executable`] called with host
//! tensors, so back ends are interchangeable and one test suite runs them
//! all. The call-boundary checks are done here, once, for every back end.

use crate::graph::{Graph, Op};
use nax_front::check::sizes::Size;
use nax_front::check::types::Type;
use nax_runtime::HostTensor;
use std::collections::HashMap;

/// One argument of a call, in parameter order. Tensors are already in the
/// parameter's axis order (see `nax_runtime::bind`).
#[derive(Clone, Debug)]
pub enum Argument {
    Tensor(HostTensor),
    Float(f64),
    Int(i64),
    Bool(bool),
}

/// A compiled function.
pub trait Executable {
    /// Runs on arguments whose sizes [`check_call`] accepted (`sizes` is its result).
    fn run(&self, args: &[Argument], weights: &HashMap<String, HostTensor>, sizes: &[Option<u64>]) -> Result<HostTensor, String>;
}

/// A code generator.
pub trait Backend {
    /// The name used by `--backend`.
    fn name(&self) -> &'static str;
    /// Compiles one function's graph.
    fn compile(&self, graph: &Graph) -> Result<Box<dyn Executable>, String>;
    /// Compiles, calling `stage(name)` as each stage ends (`kernels`,
    /// `codegen`, `link`, ...), for `--timings`.
    fn compile_timed(&self, graph: &Graph, stage: &mut dyn FnMut(&'static str)) -> Result<Box<dyn Executable>, String> {
        let compiled = self.compile(graph)?;
        stage("codegen");
        Ok(compiled)
    }
}

/// The call-boundary check: every argument and weight against the graph's
/// types (kind of argument, dtype, rank, sizes: constants directly, symbols
/// fixed by their first binding, then every derived size and exact
/// division), and no value too large for the machine's memory. Gives the
/// value of every size symbol for the call.
pub fn check_call(g: &Graph, args: &[Argument], weights: &HashMap<String, HostTensor>) -> Result<Vec<Option<u64>>, String> {
    let mut given: Vec<(Size, u64, String)> = Vec::new();
    if args.len() != g.inputs.len() {
        return Err(format!("`{}` takes {} arguments, {} given", g.name, g.inputs.len(), args.len()));
    }
    let mut check_tensor = |what: String, ty: &Type, t: &HostTensor| -> Result<(), String> {
        let Type::Tensor(want) = ty else { return Err(format!("{what} is a host scalar, not a tensor")) };
        if t.dtype() != want.dtype {
            return Err(format!("{what} is {} but the tensor is {}", want.dtype.as_str(), t.dtype().as_str()));
        }
        if t.rank() != want.rank() {
            return Err(format!("{what} has {} axes but the tensor has {}", want.rank(), t.rank()));
        }
        for (axis, &actual) in want.axes.iter().zip(t.shape()) {
            let label = match &axis.name {
                Some(n) => format!("{what}: axis '{n}'"),
                None => format!("{what}: an unnamed axis"),
            };
            given.push((axis.size, actual as u64, label));
        }
        Ok(())
    };
    for (&input, arg) in g.inputs.iter().zip(args) {
        let node = &g.graph[input];
        let Op::Input { name, .. } = &node.op else { continue };
        let what = format!("parameter '{name}'");
        match (arg, &node.ty) {
            (Argument::Tensor(t), ty) => check_tensor(what, ty, t)?,
            (_, Type::Tensor(_)) => return Err(format!("{what} needs a tensor, not a host scalar")),
            _ => {}
        }
    }
    for n in g.graph.node_indices() {
        if let Op::Weight { name } = &g.graph[n].op {
            let t = weights.get(name).ok_or_else(|| format!("the weight '{name}' is missing"))?;
            check_tensor(format!("weight '{name}'"), &g.graph[n].ty, t)?;
        }
    }
    for &(size, index) in &g.size_arguments {
        let name = match g.inputs.get(index).map(|&i| &g.graph[i].op) {
            Some(Op::Input { name, .. }) => name.clone(),
            _ => format!("#{index}"),
        };
        match args.get(index) {
            Some(Argument::Int(v)) if *v > 0 => given.push((size, *v as u64, format!("parameter '{name}' (a size)"))),
            Some(Argument::Int(v)) => return Err(format!("parameter '{name}' gives the size `{}`, which must be positive, not {v}", g.symbols.display(size))),
            _ => return Err(format!("parameter '{name}' gives a size and must be an int")),
        }
    }
    let mut first: HashMap<Size, (u64, &str)> = HashMap::new();
    for (size, actual, label) in &given {
        match g.symbols.resolve(*size) {
            Size::Const(c) if c != *actual => return Err(format!("{label} has size {actual}, expected {c}")),
            Size::Const(_) => {}
            root => match first.get(&root) {
                Some((v, other)) if v != actual => {
                    return Err(format!("{label} has size {actual}, but {other} gave `{}` the size {v}", g.symbols.display(root)));
                }
                Some(_) => {}
                None => {
                    first.insert(root, (*actual, label));
                }
            },
        }
    }
    let pairs: Vec<(Size, u64)> = given.iter().map(|(s, v, _)| (*s, *v)).collect();
    let sizes = g.symbols.solve(&pairs).map_err(|e| format!("the sizes of the arguments do not fit `{}`: {}", g.name, e.message))?;
    check_memory(g, &sizes)?;
    Ok(sizes)
}

/// The machine's physical memory in bytes (`None` where it cannot be read).
fn physical_memory() -> Option<u128> {
    // SAFETY: sysconf only reads system configuration.
    let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    (pages > 0 && page > 0).then(|| pages as u128 * page as u128)
}

/// Refuses a call one of whose values could not fit in the machine's
/// memory: the sizes are legal, but running would only end in an
/// out-of-memory kill.
fn check_memory(g: &Graph, sizes: &[Option<u64>]) -> Result<(), String> {
    let Some(memory) = physical_memory() else { return Ok(()) };
    for n in g.graph.node_indices() {
        let Type::Tensor(t) = &g.graph[n].ty else { continue };
        let mut elements: u128 = 1;
        let mut shown = Vec::with_capacity(t.axes.len());
        for a in &t.axes {
            let value = match g.symbols.resolve(a.size) {
                Size::Const(c) => Some(c),
                Size::Sym(id) => sizes.get(id.0 as usize).copied().flatten(),
            };
            let Some(v) = value else { break };
            elements = elements.saturating_mul(u128::from(v));
            shown.push(match &a.name {
                Some(name) => format!("{name}={v}"),
                None => v.to_string(),
            });
        }
        let bytes = elements.saturating_mul(t.dtype.size_bytes() as u128);
        if bytes > memory {
            return Err(format!(
                "`{}` would compute a {} tensor of shape [{}], {bytes} bytes, more than this machine's {memory} bytes of memory",
                g.name,
                t.dtype.as_str(),
                shown.join(" ")
            ));
        }
    }
    Ok(())
}
