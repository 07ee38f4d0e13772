//! The weights a call reads ([`Weights`]), and weights packed once. A matrix product whose B operand is a weight (or
//! a reshape of one) reads B from panels in the microkernel's layout
//! (see [`crate::gemm`]); a weight is the same at every call, so its
//! panels are packed at the first call that needs them and kept with the
//! weights' binding ([`PackedWeights`], which a [`Weights`] holder offers
//! through [`Weights::packed`]): the JIT's `Program`, the Python package
//! (through it) and an AOT library's model. Later calls, from any thread,
//! pack nothing for it.
//!
//! The panels of one weight depend on the product's geometry (the part of
//! the weight it reads, its steps, the depth and columns) and on how the
//! product reads it: panels blocked by columns (`nc`, decided by the
//! thread count and the product's shape: two layouts at most per weight
//! and geometry), or split for the AMX tiles where the product has the
//! rows for them ([`crate::gemm::Packing`]), so the store keys them by all
//! of these. A binding whose weights change is a
//! new binding with a new store: nothing packed from old weights is
//! ever read for new ones.
//!
//! A weight a program reads in both orientations is packed in one only
//! (the driver's `weight_reads` decides which, from the plan): the store
//! is not asked for the other.
//!

use crate::gemm::{PackedB, Packing};
use nax_contract::DType;
use nax_host::HostTensor;
use nax_host::TensorView;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A program's weights as calls read them, each bound in its declared
/// axis order and contiguous: tensors read from a file (a map by name), or
/// views of memory that lives as long as the program (an AOT library's
/// embedded weights, read in place).
pub trait Weights: Sync {
    /// The weight `name`, or `None` when there is none of that name.
    fn weight(&self, name: &str) -> Option<TensorView<'_>>;

    /// Where the matrix products keep the weights they pack, packed once
    /// for as long as these weights are bound (see [`PackedWeights`]);
    /// `None`, the default, packs them at every call.
    fn packed(&self) -> Option<&PackedWeights> {
        None
    }
}

impl Weights for HashMap<String, HostTensor> {
    fn weight(&self, name: &str) -> Option<TensorView<'_>> {
        self.get(name).map(HostTensor::view)
    }
}

/// What one weight's packed panels were packed for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PackKey {
    /// The weight.
    pub weight: String,
    /// The product's B: its first element's offset into the weight (in
    /// elements), its steps from one depth position and one column to the
    /// next, its depth and its columns.
    pub offset: isize,
    pub steps: (isize, isize),
    pub depth: usize,
    pub cols: usize,
    pub dtype: DType,
    /// The microkernel (its entry's address) and how B is packed for it.
    pub microkernel: usize,
    pub packing: Packing,
}

/// One key's panels: packed once, by the first call that asks (`None`
/// where the product packs no B).
type Slot = Arc<OnceLock<Option<Arc<PackedB>>>>;

/// The packed weights of one binding, filled as calls need them.
#[derive(Default)]
pub struct PackedWeights {
    panels: Mutex<HashMap<PackKey, Slot>>,
    packings: AtomicU64,
    bytes: AtomicU64,
}

impl PackedWeights {
    /// An empty store, for a new binding of weights.
    pub fn new() -> PackedWeights {
        PackedWeights::default()
    }

    /// How many times a weight was packed into this store: each weight and
    /// geometry once, however many calls read it.
    pub fn packings(&self) -> u64 {
        self.packings.load(Ordering::Relaxed)
    }

    /// The bytes the packed panels take.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The panels of `key`, packed by `pack` if no call packed them before
    /// (concurrent calls wait for one packing); `None` where `pack` gives
    /// none.
    pub(crate) fn get_or_pack(&self, key: PackKey, pack: impl FnOnce() -> Option<PackedB>) -> Option<Arc<PackedB>> {
        let cell = {
            let mut panels = self.panels.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(panels.entry(key).or_default())
        };
        cell.get_or_init(|| {
            let packed = pack()?;
            self.packings.fetch_add(1, Ordering::Relaxed);
            self.bytes.fetch_add(packed.bytes() as u64, Ordering::Relaxed);
            Some(Arc::new(packed))
        })
        .clone()
    }
}

/// Host tensors bound as a program's weights, with the store their packed
/// panels go to ([`PackedWeights`]): what the JIT's `Program` holds.
#[derive(Default)]
pub struct BoundWeights {
    tensors: HashMap<String, HostTensor>,
    packed: PackedWeights,
}

impl BoundWeights {
    /// These tensors, by weight name, with an empty store.
    pub fn new(tensors: HashMap<String, HostTensor>) -> BoundWeights {
        BoundWeights { tensors, packed: PackedWeights::new() }
    }

    /// The tensors, by weight name.
    pub fn tensors(&self) -> &HashMap<String, HostTensor> {
        &self.tensors
    }

    /// The store of their packed panels.
    pub fn packed_weights(&self) -> &PackedWeights {
        &self.packed
    }
}

impl Weights for BoundWeights {
    fn weight(&self, name: &str) -> Option<TensorView<'_>> {
        self.tensors.get(name).map(HostTensor::view)
    }

    fn packed(&self) -> Option<&PackedWeights> {
        Some(&self.packed)
    }
}
