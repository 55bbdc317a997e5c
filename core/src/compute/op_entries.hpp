// Internal to core: what the files of core/src/compute/ share to define an op — the table entry
// of each op (defined next to its typed entry point), slot builders, the shape checks several ops
// make, and submit() (check_call, then Backend::execute).
#pragma once

#include <string_view>

#include "tessera/compute/op_table.hpp"
#include "tessera/core/error.hpp"

namespace tessera::compute::entries {

/// The table entry of every op, k<Kind> (e.g. kLayerNormForward), each defined in the file of its
/// family with its typed entry point.
#define TESSERA_OP_ENTRY(kind, name) extern const OpSpec k##kind;
TESSERA_COMPUTE_OPS(TESSERA_OP_ENTRY)
#undef TESSERA_OP_ENTRY

/// A Float slot (the call's dtype), optionally of the shape of the slot `like`.
constexpr Slot slot(std::string_view name, std::string_view like = {}) {
  return {name, SlotType::Float, false, like};
}
/// A Float slot the caller may leave out.
constexpr Slot optional_slot(std::string_view name, std::string_view like = {}) {
  return {name, SlotType::Float, true, like};
}
/// A Master slot (the call's dtype, or f32 in a bf16/f16 call): a parameter, its gradient or a
/// statistic.
constexpr Slot master_slot(std::string_view name, std::string_view like = {}) {
  return {name, SlotType::Master, false, like};
}
constexpr Slot optional_master_slot(std::string_view name, std::string_view like = {}) {
  return {name, SlotType::Master, true, like};
}
constexpr Slot f64_slot(std::string_view name) { return {name, SlotType::F64, false, {}}; }
constexpr Slot i64_slot(std::string_view name) { return {name, SlotType::I64, false, {}}; }
/// An Index slot (i32 in an f32 call, i64 in an f64 call).
constexpr Slot index_slot(std::string_view name, std::string_view like = {}) {
  return {name, SlotType::Index, false, like};
}
constexpr Slot any_float_slot(std::string_view name, std::string_view like = {}) {
  return {name, SlotType::AnyFloat, false, like};
}

/// The numel of a tensor as a double, 0 for null.
inline double numel(const core::Tensor* t) { return t ? static_cast<double>(t->numel()) : 0.0; }

/// check_call(c), then b.execute(c).
void submit(Backend& b, const OpCall& c);

/// `t` or null when it is null or undefined (how the entry points pass optional tensors on).
template <class T>
T* present(T* t) {
  return (t && t->defined()) ? t : nullptr;
}

// Shape checks of several ops; each throws InvalidArgument naming `op` and the tensor.
/// t holds a float dtype (f32, f64, bf16 or f16).
void is_float(const char* op, const core::Tensor& t);
void is_f64_vector(const char* op, const char* what, const core::Tensor& t, std::int64_t n);
/// t is a vector of c entries (its dtype is check_call's).
void channel_vector(const char* op, const char* what, const core::Tensor& t, std::int64_t c);
void contiguous(const char* op, const char* what, const core::Tensor& t);
/// The shape without dim 1 (the per-pixel statistics of a normalisation over channels).
core::Shape without_dim1(const core::Shape& s);

}  // namespace tessera::compute::entries
