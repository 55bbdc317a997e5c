// The op table: for every compute op, its inputs, outputs and parameters by name, the dtype each
// tensor slot holds, and its cost formula. The typed entry points (compute/ops.hpp) fill calls in
// the table's slot order, check_call checks what the table can say about a call, op_cost reads
// its formulas, and OpCall's accessors (call.input("x")) look names up in it.
#pragma once

#include <array>
#include <string_view>

#include "tessera/compute/ops.hpp"

namespace tessera::compute {

/// The dtype a tensor slot holds.
enum class SlotType : std::uint8_t {
  Float,     ///< the call's float dtype: that of its first Float tensor, shared by every Float slot
  F64,       ///< always f64 (the per-channel reductions, the loss, the sum of squares)
  I64,       ///< always i64 (labels)
  AnyFloat,  ///< a float dtype of its own, whatever the call's (the target of a conversion)
  /// Parameters, their gradients and normalisation statistics: the call's float dtype, or f32 in a
  /// bf16/f16 call (mixed precision keeps master weights, weight gradients and statistics in f32
  /// while activations are stored in 16 bits; docs/training.md, "Mixed precision").
  Master,
  /// An integer of the call's float width: i32 in an f32 call, i64 in an f64 call (top-k's pair
  /// buffers, whose slots hold an index or a value's bits); no other float dtype has one.
  Index,
};

/// One tensor slot of an op. An unnamed slot is unused.
struct Slot {
  std::string_view name;
  SlotType type = SlotType::Float;
  bool optional = false;
  /// When set, the tensor must have the shape of the slot (input or output) of this name.
  std::string_view like;
};

/// A cost term of a call (FLOPs or convolution rows), from its shapes.
using CostFormula = double (*)(const OpCall&);

/// One op's table entry (its name is op_name, from TESSERA_COMPUTE_OPS).
struct OpSpec {
  std::array<Slot, kMaxOpInputs> inputs{};
  std::array<Slot, kMaxOpOutputs> outputs{};
  std::array<std::string_view, kMaxOpScalars> scalars{};    ///< OpCall::scalars by name
  std::array<std::string_view, kMaxOpIntegers> integers{};  ///< OpCall::integers by name
  /// The op reads its outputs even without `accumulate` (in-place updates: y += αx, optimizers).
  bool updates_outputs = false;
  CostFormula flops = nullptr;  ///< null: no arithmetic (a pure copy)
  CostFormula rows = nullptr;   ///< OpCost::rows; null: 0
};

/// The entry of `kind`; kind must be below kCount.
const OpSpec& op_spec(OpKind kind);

/// Checks a call against its table entry, the generic part of every op's argument check: each
/// required slot set and no unused one; every Float tensor of the call's one dtype, F64/I64 slots
/// of theirs, AnyFloat slots of a float dtype, Master slots of the call's dtype or (in a bf16/f16
/// call) f32, Index slots of index_dtype(the call's dtype); `like` slots of their partner's shape.
/// Throws InvalidArgument naming the op, the slot and the tensor. A backend then refuses a float dtype
/// it lacks with Unsupported. The typed entry points call it before Backend::execute.
void check_call(const OpCall& call);

/// The dtype of an Index slot in a call of `float_dtype` (f32 or f64): i32 for f32, i64 for f64,
/// the width of a value's bits.
constexpr core::DType index_dtype(core::DType float_dtype) noexcept {
  return float_dtype == core::DType::F64 ? core::DType::I64 : core::DType::I32;
}

/// The tensor whose dtype is the call's float dtype: its first tensor in a Float slot (null when
/// it has none).
const core::Tensor* float_lead(const OpCall& call);

/// The element count of the call's first input (of its first output where it has none): the
/// size the elementwise cost formulas count per.
double lead_numel(const OpCall& call);

}  // namespace tessera::compute
