//! Kernels that share their code. A loop is written out when it is checked
//! (LANGUAGE.md section 14), so a model's layers give kernels that differ
//! only in the buffers they touch and in the constant positions they read
//! (layer `l`'s slice of a stacked weight, `w[L = l]`). Such kernels
//! compile to one body, which reads those positions as parameters, and
//! each kernel keeps an entry of its own that passes its buffers and its
//! positions: code generation's time grows with the kinds of kernels a
//! program has, not with its layers.
//!
//! Two kernels share a body when they are equal once their buffers are
//! numbered by their place in the kernel's buffer list, their sizes read
//! as the slots (or constants) the code reads, their index checks (which
//! the driver runs) set aside and their constant positions set to 0; when
//! their buffers have the same dtypes and shapes; and when their constant
//! positions, keyed by buffer, axis and the body's position, agree on one
//! value per key. A position of the kernel's own output is never a
//! parameter (the lowering addresses the output at positions of its own).
//! Programs with a fault record (`--check-bounds`) share nothing: their
//! code names the kernel it runs for.

use crate::plan::Slots;
use nax_kernel::{Expr, Index, Kernel, Program};
use nax_runtime::plan::SizeRef;
use nax_runtime::{DType, Size, SymId};
use std::collections::HashMap;

/// The constant positions a body reads from its parameters, which its
/// code receives in the size array after the program's slots and after
/// what the driver passes there ([`crate::lower::driver_values`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parameters {
    /// The slot of the first parameter.
    first_slot: usize,
    /// Each parameter's number, by (buffer, axis, position) as the body's kernel reads them.
    at: HashMap<(usize, usize, usize), usize>,
}

impl Parameters {
    /// The slot holding the position `position` of `buffer` along `axis`
    /// (as the body's own kernel has it), when that is a parameter.
    pub fn slot(&self, buffer: usize, axis: usize, position: usize) -> Option<usize> {
        self.at.get(&(buffer, axis, position)).map(|j| self.first_slot + j)
    }

    /// The slot of the first parameter: every slot before it is the driver's.
    pub fn first_slot(&self) -> usize {
        self.first_slot
    }
}

/// Which kernels of a program share which body.
#[derive(Clone, Debug, PartialEq)]
pub struct Sharing {
    /// For each kernel, the kernel whose body its entry calls (itself when
    /// it is a body).
    pub body: Vec<usize>,
    /// For each kernel, the values of its body's parameters, in order.
    pub arguments: Vec<Vec<i64>>,
    /// For each kernel that is a body, its parameters (none for the others).
    pub parameters: Vec<Parameters>,
}

/// A constant position a kernel reads: its buffer (the program's number),
/// the buffer's place in the kernel's list, the axis and the position.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Site {
    buffer: usize,
    local: usize,
    axis: usize,
    position: usize,
}

/// A kernel as its code sees it (see the module's documentation), with
/// the constant positions taken out, in the order they occur.
struct Canonical {
    kernel: Kernel,
    buffers: Vec<(DType, Vec<SizeRef>)>,
    sites: Vec<Site>,
}

impl Sharing {
    /// Every kernel its own body.
    fn none(p: &Program) -> Sharing {
        let n = p.kernels.len();
        Sharing { body: (0..n).collect(), arguments: vec![Vec::new(); n], parameters: vec![Parameters::default(); n] }
    }

    /// The kernels of `p` that share a body, with their slots.
    pub fn new(p: &Program, slots: &Slots) -> Sharing {
        let mut sharing = Sharing::none(p);
        if p.fault_buffer().is_some() {
            return sharing;
        }
        let forms: Vec<Canonical> = p.kernels.iter().map(|k| canonical(p, slots, k)).collect();
        // Candidate groups: equal canonical forms, by their text first.
        let mut by_text: HashMap<String, Vec<Vec<usize>>> = HashMap::new();
        for (i, form) in forms.iter().enumerate() {
            let groups = by_text.entry(format!("{:?}{:?}", form.kernel, form.buffers)).or_default();
            match groups.iter_mut().find(|g| forms[g[0]].kernel == form.kernel && forms[g[0]].buffers == form.buffers) {
                Some(group) => group.push(i),
                None => groups.push(vec![i]),
            }
        }
        let mut groups: Vec<Vec<usize>> = by_text.into_values().flatten().filter(|g| g.len() > 1).collect();
        groups.sort_unstable();
        for group in groups {
            sharing.join(p, slots, &forms, &group);
        }
        sharing
    }

    /// Makes the first kernel of `group` the body of those others whose
    /// positions its parameters can give.
    fn join(&mut self, p: &Program, slots: &Slots, forms: &[Canonical], group: &[usize]) {
        let body = group[0];
        let own = &forms[body].sites;
        let differs = |m: usize, s: usize| forms[m].sites[s].position != own[s].position;
        // The canonical kernel's output is its place in the kernel's buffer list.
        let output = forms[body].kernel.output;
        // A kernel whose positions in its own output differ from the body's keeps its code.
        let mut members: Vec<usize> = group[1..].iter().copied().filter(|&m| (0..own.len()).all(|s| own[s].local != output || !differs(m, s))).collect();
        // The parameters are the keys where some member differs; a member
        // whose positions at one key differ among themselves keeps its
        // code, and the keys are taken again without it.
        loop {
            let keys = parameter_keys(own, |s| members.iter().any(|&m| differs(m, s)));
            let arguments: Vec<Option<Vec<i64>>> = members.iter().map(|&m| arguments_of(own, &forms[m].sites, &keys)).collect();
            if arguments.iter().any(Option::is_none) {
                let mut kept = arguments.iter().map(Option::is_some);
                members.retain(|_| kept.next().unwrap_or(false));
                continue;
            }
            if members.is_empty() {
                return;
            }
            let first_slot = slots.slot_count() + crate::lower::driver_values(&p.kernels[body]);
            self.parameters[body] = Parameters { first_slot, at: keys.iter().enumerate().map(|(j, &key)| (key, j)).collect() };
            self.arguments[body] = keys.iter().map(|&(_, _, position)| position as i64).collect();
            for (m, a) in members.into_iter().zip(arguments.into_iter().flatten()) {
                self.body[m] = body;
                self.arguments[m] = a;
            }
            return;
        }
    }

    /// Whether some other kernel runs kernel `i`'s body.
    pub fn is_shared(&self, i: usize) -> bool {
        self.body.iter().enumerate().any(|(k, &b)| b == i && k != i)
    }

    /// The functions `0..count` of the program (kernels, then
    /// microkernels) split into one part per thread of the current rayon
    /// pool, as [`crate::per_thread`] splits them, each kernel in the part
    /// of its body.
    pub fn parts(&self, count: usize) -> Vec<Vec<usize>> {
        let bodies: Vec<usize> = (0..count).filter(|&i| self.body.get(i).is_none_or(|&b| b == i)).collect();
        let mut parts: Vec<Vec<usize>> = crate::per_thread(bodies.len()).into_iter().map(|part| part.into_iter().map(|j| bodies[j]).collect()).collect();
        let part_of: HashMap<usize, usize> = parts.iter().enumerate().flat_map(|(t, part)| part.iter().map(move |&f| (f, t))).collect();
        for (i, &b) in self.body.iter().enumerate() {
            if b != i {
                parts[part_of[&b]].push(i);
            }
        }
        parts
    }
}

/// The parameters' keys, in order of first occurrence: (buffer, axis,
/// position) of every site for which `varies` holds.
fn parameter_keys(own: &[Site], varies: impl Fn(usize) -> bool) -> Vec<(usize, usize, usize)> {
    let mut keys = Vec::new();
    for (s, site) in own.iter().enumerate() {
        let key = (site.buffer, site.axis, site.position);
        if varies(s) && !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

/// The parameters' values for a kernel of positions `sites`: for each key,
/// the one position its sites have there; `None` when they have two.
fn arguments_of(own: &[Site], sites: &[Site], keys: &[(usize, usize, usize)]) -> Option<Vec<i64>> {
    let mut values: Vec<Option<usize>> = vec![None; keys.len()];
    for (o, s) in own.iter().zip(sites) {
        let Some(j) = keys.iter().position(|&k| k == (o.buffer, o.axis, o.position)) else {
            if o.position != s.position {
                return None;
            }
            continue;
        };
        match values[j] {
            Some(v) if v != s.position => return None,
            _ => values[j] = Some(s.position),
        }
    }
    values.into_iter().map(|v| v.and_then(|v| i64::try_from(v).ok())).collect()
}

/// A kernel as its code sees it.
fn canonical(p: &Program, slots: &Slots, k: &Kernel) -> Canonical {
    let used = p.kernel_buffers(k);
    let local = |b: usize| used.iter().position(|&u| u == b).unwrap_or(usize::MAX);
    let size = |s: Size| match slots.size(p, s) {
        SizeRef::Const(c) => Size::Const(c),
        SizeRef::Slot(i) => Size::Sym(SymId(i as u32)),
    };
    let mut kernel = k.clone();
    let mut sites = Vec::new();
    let take_positions = |buffer: usize, index: &mut [Index], sites: &mut Vec<Site>| {
        for (axis, i) in index.iter_mut().enumerate() {
            if let Index::Const(position) = *i {
                sites.push(Site { buffer, local: local(buffer), axis, position });
                *i = Index::Const(0);
            }
        }
    };
    kernel.checks.clear();
    for l in &mut kernel.loops {
        l.extent = size(l.extent);
    }
    for v in kernel.values_mut() {
        v.rewrite(&mut |e| match e {
            Expr::Load { buffer, index } | Expr::Gather { buffer, index, .. } => take_positions(*buffer, index, &mut sites),
            Expr::Size(s) => *s = size(*s),
            _ => {}
        });
    }
    if let Some(t) = &mut kernel.schedule.transpose {
        take_positions(t.buffer, &mut t.index, &mut sites);
    }
    kernel.rename_buffers(local);
    let buffers = used.iter().map(|&b| (p.buffers[b].dtype, p.buffers[b].shape.iter().map(|&s| slots.size(p, s)).collect())).collect();
    Canonical { kernel, buffers, sites }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two turns of a layer over a stacked weight, then a kernel of another form.
    const LAYERS: &str = "program layers
buffer %0 f32[3 8] weight \"w\"
buffer %1 f32[8] input 0
buffer %2 f32[8] temporary
buffer %3 f32[8] temporary
buffer %4 f32[8] temporary
buffer %5 f32[8] temporary
kernel %2 loops [8 parallel-vector] store add(f32, load %1[i0], load %0[0 i0])
kernel %3 loops [8 parallel-vector] store add(f32, load %2[i0], load %0[2 i0])
kernel %4 loops [8 parallel-vector] store mul(f32, load %3[i0], load %0[1 i0])
kernel %5 loops [8 parallel-vector] store add(f32, load %4[i0], load %0[1 i0])
result %5
";

    fn sharing(text: &str) -> Sharing {
        let p = nax_kernel::text::parse(text).expect("the kernel text parses");
        Sharing::new(&p, &Slots::new(&p))
    }

    #[test]
    fn turns_of_a_layer_share_a_body_with_their_positions_as_parameters() {
        let s = sharing(LAYERS);
        assert_eq!(s.body, vec![0, 0, 2, 0]);
        assert_eq!(s.arguments, vec![vec![0], vec![2], vec![], vec![1]]);
        assert_eq!(s.parameters[0].slot(0, 0, 0), Some(0));
        assert_eq!(s.parameters[0].slot(0, 1, 0), None);
        assert!(s.is_shared(0) && !s.is_shared(2));
        // Every body and microkernel is in one part, each kernel with its body.
        let parts = s.parts(4);
        let part_of = |f: usize| parts.iter().position(|p| p.contains(&f));
        assert_eq!(parts.iter().map(Vec::len).sum::<usize>(), 4);
        assert!([1, 3].iter().all(|&k| part_of(k) == part_of(0)));
    }

    #[test]
    fn equal_positions_stay_constants() {
        let text = LAYERS.replace("load %0[2 i0]", "load %0[0 i0]").replace("load %4[i0], load %0[1 i0]", "load %4[i0], load %0[0 i0]");
        let s = sharing(&text);
        assert_eq!(s.body, vec![0, 0, 2, 0]);
        assert!(s.arguments.iter().all(Vec::is_empty));
        assert_eq!(s.parameters[0], Parameters::default());
    }

    #[test]
    fn positions_that_one_parameter_cannot_give_keep_their_code() {
        // Two reads at one position in the body, at two in the other kernel.
        let text = LAYERS
            .replace("store add(f32, load %1[i0], load %0[0 i0])", "store add(f32, load %0[0 i0], load %0[0 i0])")
            .replace("store add(f32, load %2[i0], load %0[2 i0])", "store add(f32, load %0[1 i0], load %0[2 i0])");
        let s = sharing(&text);
        assert_eq!(s.body[1], 1);
        assert!(s.arguments[1].is_empty());
    }

    #[test]
    fn a_program_with_a_fault_record_shares_nothing() {
        let text = LAYERS.replace("buffer %5 f32[8] temporary", "buffer %5 f32[8] temporary\nbuffer %6 i64[12] fault");
        assert_eq!(sharing(&text).body, vec![0, 1, 2, 3]);
    }
}
