// The op table (one entry per OpKind, from TESSERA_COMPUTE_OPS) and what reads it: op_name,
// OpCall's named accessors, the generic argument check and op_cost.
#include "tessera/compute/op_table.hpp"

#include "op_entries.hpp"
#include "tessera/core/half.hpp"

namespace tessera::compute {

using core::DType;
using core::Tensor;

namespace {

#define TESSERA_OP_ENTRY_ADDRESS(kind, name) &entries::k##kind,
constexpr const OpSpec* kTable[] = {TESSERA_COMPUTE_OPS(TESSERA_OP_ENTRY_ADDRESS)};
#undef TESSERA_OP_ENTRY_ADDRESS
static_assert(sizeof(kTable) / sizeof(kTable[0]) == static_cast<int>(OpKind::kCount));

#define TESSERA_OP_NAME(kind, name) #name,
constexpr std::string_view kNames[] = {TESSERA_COMPUTE_OPS(TESSERA_OP_NAME)};
#undef TESSERA_OP_NAME

template <std::size_t N>
int find_name(const std::array<Slot, N>& slots, std::string_view name) {
  for (std::size_t i = 0; i < N; ++i)
    if (!slots[i].name.empty() && slots[i].name == name) return static_cast<int>(i);
  return -1;
}
template <std::size_t N>
int find_name(const std::array<std::string_view, N>& names, std::string_view name) {
  for (std::size_t i = 0; i < N; ++i)
    if (!names[i].empty() && names[i] == name) return static_cast<int>(i);
  return -1;
}

// The index of `name` among `what` of the call's op, or InternalError (a kernel or decorator
// asking for a name its op's table entry does not have is a bug in that code).
template <class List>
int index_of(const OpCall& c, const List& list, const char* what, std::string_view name) {
  const int i = find_name(list, name);
  TESSERA_ASSERT(i >= 0, op_name(c.kind), " has no ", what, " named '", name, "' in its op table entry");
  return i;
}

bool is_floating(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::BF16 || t == DType::F16; }

// The tensor of the slot called `name`, input or output (null when absent).
const Tensor* slot_tensor(const OpCall& c, const OpSpec& s, std::string_view name) {
  if (const int i = find_name(s.inputs, name); i >= 0) return c.in[i];
  if (const int i = find_name(s.outputs, name); i >= 0) return c.out[i];
  TESSERA_ASSERT(false, op_name(c.kind), ": op table entry names '", name, "' as a shape partner but has no such slot");
  return nullptr;
}

}  // namespace

std::string_view activation_name(Activation a) noexcept {
  switch (a) {
    case Activation::Relu: return "relu";
    case Activation::Gelu: return "gelu";
    case Activation::Sigmoid: return "sigmoid";
  }
  return "?";
}

std::string_view op_name(OpKind k) noexcept {
  const int i = static_cast<int>(k);
  return i >= 0 && i < static_cast<int>(OpKind::kCount) ? kNames[i] : "?";
}

const OpSpec& op_spec(OpKind kind) {
  const int i = static_cast<int>(kind);
  TESSERA_ASSERT(i >= 0 && i < static_cast<int>(OpKind::kCount), "op_spec: no op kind ", i);
  return *kTable[i];
}

const Tensor& OpCall::input(std::string_view name) const {
  const Tensor* t = input_if(name);
  TESSERA_ASSERT(t != nullptr, op_name(kind), " call without its input '", name, "'");
  return *t;
}
const Tensor* OpCall::input_if(std::string_view name) const {
  return in[index_of(*this, op_spec(kind).inputs, "input", name)];
}
Tensor& OpCall::output(std::string_view name) const {
  Tensor* t = output_if(name);
  TESSERA_ASSERT(t != nullptr, op_name(kind), " call without its output '", name, "'");
  return *t;
}
Tensor* OpCall::output_if(std::string_view name) const {
  return out[index_of(*this, op_spec(kind).outputs, "output", name)];
}
double OpCall::scalar(std::string_view name) const {
  return scalars[index_of(*this, op_spec(kind).scalars, "scalar", name)];
}
std::int64_t OpCall::integer(std::string_view name) const {
  return integers[index_of(*this, op_spec(kind).integers, "integer", name)];
}
void OpCall::set_scalar(std::string_view name, double value) {
  scalars[index_of(*this, op_spec(kind).scalars, "scalar", name)] = value;
}
void OpCall::set_integer(std::string_view name, std::int64_t value) {
  integers[index_of(*this, op_spec(kind).integers, "integer", name)] = value;
}

const Tensor& conv_weight(const OpCall& c) {
  TESSERA_ASSERT(is_conv(c.kind), "conv_weight of ", op_name(c.kind), ", not a convolution");
  return c.kind == OpKind::Conv2dBackwardWeight ? c.output("dw") : c.input("w");
}

const Tensor& conv_output(const OpCall& c) {
  TESSERA_ASSERT(is_conv(c.kind), "conv_output of ", op_name(c.kind), ", not a convolution");
  return c.kind == OpKind::Conv2dForward ? c.output("y") : c.input("dy");
}

void check_call(const OpCall& c) {
  const OpSpec& s = op_spec(c.kind);
  const std::string_view op = op_name(c.kind);
  const Tensor* lead = float_lead(c);
  auto check = [&](const Tensor* t, const Slot& slot, const char* kind, int index) {
    if (slot.name.empty()) {
      TESSERA_ASSERT(t == nullptr, op, ": a tensor in ", kind, " slot ", index, ", which the op does not have");
      return;
    }
    if (t == nullptr) {
      TESSERA_CHECK(slot.optional, op, ": the ", kind, " ", slot.name, " is missing");
      return;
    }
    switch (slot.type) {
      case SlotType::Float:
        TESSERA_CHECK(t->dtype() == lead->dtype(), op, ": ", kind, " ", slot.name, " ", t->describe(), " must be ",
                      core::dtype_name(lead->dtype()), " like ", lead->describe(),
                      " (the tensors of a call share one float dtype, except f64 reductions and i64 labels)");
        break;
      case SlotType::F64:
      case SlotType::I64: {
        const DType want = slot.type == SlotType::F64 ? DType::F64 : DType::I64;
        TESSERA_CHECK(t->dtype() == want, op, ": ", kind, " ", slot.name, " ", t->describe(), " must be ",
                      core::dtype_name(want));
        break;
      }
      case SlotType::Master:
        TESSERA_CHECK(t->dtype() == lead->dtype() ||
                          (core::dtype_is_half(lead->dtype()) && t->dtype() == DType::F32),
                      op, ": ", kind, " ", slot.name, " ", t->describe(), " must be ", core::dtype_name(lead->dtype()),
                      core::dtype_is_half(lead->dtype()) ? " or f32" : "", " like ", lead->describe(),
                      " (parameters, their gradients and statistics take the call's dtype, or f32 in a bf16/f16 "
                      "call)");
        break;
      case SlotType::Index: {
        TESSERA_CHECK(lead->dtype() == DType::F32 || lead->dtype() == DType::F64, op, ": ", kind, " ", slot.name,
                      " holds indices of the call's float width, and ", lead->describe(),
                      " is neither f32 nor f64 (top-k compresses f32 and f64 buckets only)");
        const DType want = index_dtype(lead->dtype());
        TESSERA_CHECK(t->dtype() == want, op, ": ", kind, " ", slot.name, " ", t->describe(), " must be ",
                      core::dtype_name(want), " in a call of ", core::dtype_name(lead->dtype()), " like ",
                      lead->describe(), " (an index or a value's bits per slot)");
        break;
      }
      case SlotType::AnyFloat:
        TESSERA_CHECK(is_floating(t->dtype()), op, ": ", kind, " ", slot.name, " ", t->describe(),
                      " must have a float dtype (f32, f64, bf16 or f16)");
        break;
    }
    if (!slot.like.empty()) {
      const Tensor* other = slot_tensor(c, s, slot.like);
      TESSERA_CHECK(other == nullptr || t->shape() == other->shape(), op, ": ", kind, " ", slot.name, " ",
                    t->describe(), " must have the shape of ", slot.like, " ", other->describe());
    }
  };
  for (int i = 0; i < kMaxOpInputs; ++i) check(c.in[i], s.inputs[i], "input", i);
  for (int i = 0; i < kMaxOpOutputs; ++i) check(c.out[i], s.outputs[i], "output", i);
}

const Tensor* float_lead(const OpCall& c) {
  const OpSpec& s = op_spec(c.kind);
  for (int i = 0; i < kMaxOpInputs; ++i)
    if (c.in[i] && s.inputs[i].type == SlotType::Float) return c.in[i];
  for (int i = 0; i < kMaxOpOutputs; ++i)
    if (c.out[i] && s.outputs[i].type == SlotType::Float) return c.out[i];
  return nullptr;
}

double lead_numel(const OpCall& c) { return entries::numel(c.in[0] ? c.in[0] : c.out[0]); }

OpCost op_cost(const OpCall& c) {
  const OpSpec& s = op_spec(c.kind);
  OpCost cost;
  for (const Tensor* t : c.in)
    if (t) cost.bytes_read += static_cast<std::int64_t>(t->nbytes());
  for (const Tensor* t : c.out)
    if (t) cost.bytes_written += static_cast<std::int64_t>(t->nbytes());
  if (s.updates_outputs || c.accumulate)
    for (const Tensor* t : c.out)
      if (t) cost.bytes_read += static_cast<std::int64_t>(t->nbytes());
  if (s.flops) cost.flops = s.flops(c);
  if (s.rows) cost.rows = s.rows(c);
  return cost;
}

namespace entries {

void submit(Backend& b, const OpCall& c) {
  check_call(c);
  b.execute(c);
}

void is_float(const char* op, const Tensor& t) {
  TESSERA_CHECK(is_floating(t.dtype()), op, ": ", t.describe(), " must be f32, f64, bf16 or f16");
}
void is_f64_vector(const char* op, const char* what, const Tensor& t, std::int64_t n) {
  TESSERA_CHECK(t.dtype() == DType::F64 && t.ndim() == 1 && t.size(0) == n, op, ": ", what, " ",
                t.describe(), " must be f64[", n, "]");
}
void channel_vector(const char* op, const char* what, const Tensor& t, std::int64_t c) {
  TESSERA_CHECK(t.ndim() == 1 && t.size(0) == c, op, ": ", what, " ", t.describe(), " must be a vector of ", c,
                " entries");
}
void contiguous(const char* op, const char* what, const Tensor& t) {
  TESSERA_CHECK(t.is_contiguous(), op, ": ", what, " ", t.describe(), " must be contiguous");
}
core::Shape without_dim1(const core::Shape& s) {
  core::Shape r;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (i != 1) r.push_back(s[i]);
  return r;
}

}  // namespace entries

}  // namespace tessera::compute
