//! The PyTorch emitter (being written).
