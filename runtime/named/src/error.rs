//! The errors of eager named-tensor operations: coordinate labels that do
//! not fit their axes, operands whose axes cannot be paired or do not
//! broadcast, and what torch refuses too; a failure of the host data
//! underneath (memory, a size past the machine's) as itself. Also the
//! operand (left or right) a message is about.

use nax_host::{HostError, shortened, shown_names};
use std::fmt;

/// One operand of a binary op, as errors name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// The left operand (`self` of `NamedTensor::binary`).
    Left,
    /// The right operand.
    Right,
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operand::Left => "left",
            Operand::Right => "right",
        })
    }
}

/// Why an eager named-tensor operation failed. The `Display` text is a
/// complete sentence fragment meant for users, naming the operands and
/// the axis.
#[derive(Debug, thiserror::Error)]
pub enum NamedError {
    /// A named tensor given a number of coordinate label lists other than
    /// its rank.
    #[error(
        "{given} coordinate label lists given for a tensor of rank {} {}",
        .names.len(),
        shown_names(.names)
    )]
    CoordsRank {
        /// The number of label lists given.
        given: usize,
        /// The tensor's axis names (one per axis).
        names: Vec<Option<String>>,
    },

    /// An axis whose coordinate labels are not one per position.
    #[error("{} has size {size} but {labels} coordinate labels", fmt_axis(*.axis, .name))]
    LabelCount {
        /// The axis position.
        axis: usize,
        /// The axis name, if any.
        name: Option<String>,
        /// The size of the axis.
        size: usize,
        /// The number of labels given.
        labels: usize,
    },

    /// A coordinate label that occurs twice on one axis.
    #[error(
        "{} has the coordinate label '{label}' twice; the labels of an axis must be unique",
        fmt_axis(*.axis, .name)
    )]
    DuplicateLabel {
        /// The axis position.
        axis: usize,
        /// The axis name, if any.
        name: Option<String>,
        /// The repeated label.
        label: String,
    },

    /// An axis position that is not below the rank.
    #[error("axis {axis} does not exist in a tensor of rank {rank}")]
    AxisOutOfRange {
        /// The rejected position.
        axis: usize,
        /// The tensor's rank.
        rank: usize,
    },

    /// An eager op between operands whose names differ, one of which has
    /// an unnamed axis after a named one: pairing by name would be
    /// ambiguous.
    #[error(
        "axis {position} of the {side} operand is unnamed but follows a named axis, and the \
         operands' names differ (left {}, right {}): pairing axes by name would be ambiguous; \
         put the unnamed axes first, name every axis, or give both operands the same names",
        shown_names(.left_names),
        shown_names(.right_names)
    )]
    UnnamedAfterNamedOperand {
        /// The operand with the misplaced unnamed axis.
        side: Operand,
        /// The position of that axis in that operand.
        position: usize,
        /// The left operand's axis names.
        left_names: Vec<Option<String>>,
        /// The right operand's axis names.
        right_names: Vec<Option<String>>,
    },

    /// Two axes of an eager op that meet but whose sizes neither match nor
    /// broadcast (one of them 1).
    #[error(
        "{} (size {left_size}) of the left operand {} and {} (size {right_size}) of the right \
         operand {} do not broadcast: the sizes must be equal or one of them 1",
        fmt_axis_in(*.left_axis, .left_names),
        shown_names(.left_names),
        fmt_axis_in(*.right_axis, .right_names),
        shown_names(.right_names)
    )]
    OperandSizes {
        /// The left operand's axis position.
        left_axis: usize,
        /// Its size.
        left_size: usize,
        /// The left operand's axis names.
        left_names: Vec<Option<String>>,
        /// The right operand's axis position.
        right_axis: usize,
        /// Its size.
        right_size: usize,
        /// The right operand's axis names.
        right_names: Vec<Option<String>>,
    },

    /// A labelled axis of size 1 in an eager op that would broadcast to a
    /// larger size: its one label cannot describe the result's positions.
    #[error(
        "{} of the {side} operand {} has size 1 and a coordinate label, so it cannot broadcast \
         to size {size}; drop its labels or give the other operand's axis the same labels",
        fmt_axis_in(*.axis, .names),
        shown_names(.names)
    )]
    LabelsBroadcast {
        /// The operand with the labelled axis.
        side: Operand,
        /// The axis position in that operand.
        axis: usize,
        /// That operand's axis names.
        names: Vec<Option<String>>,
        /// The size it would broadcast to.
        size: usize,
    },

    /// `-` between two bool tensors, which torch rejects too.
    #[error(
        "subtraction of two bool tensors is not supported (as in torch); use `ne` for an \
         exclusive or"
    )]
    BoolSubtraction,

    /// Host data refused (memory, a size past the machine's, a tensor).
    #[error(transparent)]
    Host(#[from] HostError),
}

/// `axis 'n'` for a named axis, `axis 2` for an unnamed one.
fn fmt_axis(position: usize, name: &Option<String>) -> String {
    match name {
        Some(n) => format!("axis '{}'", shortened(n)),
        None => format!("axis {position}"),
    }
}

/// `axis 'n'` or `axis 2` for the axis at `position` of an operand with
/// these names.
fn fmt_axis_in(position: usize, names: &[Option<String>]) -> String {
    fmt_axis(position, names.get(position).unwrap_or(&None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_are_shown_by_name_or_position() {
        assert_eq!(fmt_axis(1, &None), "axis 1");
        assert_eq!(fmt_axis(1, &Some("n".into())), "axis 'n'");
        assert_eq!(fmt_axis_in(0, &[Some("b".into())]), "axis 'b'");
    }
}
