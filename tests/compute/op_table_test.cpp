// The op table: one well-formed entry per op, calls read by name, the generic argument check
// (slots, dtypes, shapes) and op_cost's formulas on hand-counted calls.
#include <set>
#include <string>
#include <vector>

#include "conv_test_util.hpp"  // error_of
#include "support/test_utils.hpp"
#include "tessera/compute/op_table.hpp"
#include "tessera/compute/ops.hpp"

namespace tessera::test {
namespace {

using namespace tessera::compute;
using core::DType;
using core::Tensor;
using Catch::Matchers::Contains;

/// Keeps the last call it is given (what a typed entry point handed to execute).
class CaptureBackend final : public Backend {
 public:
  std::string_view name() const noexcept override { return "capture"; }
  int num_threads() const noexcept override { return 1; }
  void set_num_threads(int) override {}
  void execute(const OpCall& call) override {
    last = call;
    ++calls;
  }
  OpCall last;
  int calls = 0;
};

TEST_CASE("every op has one well-formed table entry", "[ops][op_table]") {
  std::set<std::string> names;
  for (int k = 0; k < static_cast<int>(OpKind::kCount); ++k) {
    const auto kind = static_cast<OpKind>(k);
    const std::string name(op_name(kind));
    INFO(name);
    REQUIRE(name != "?");
    REQUIRE(names.insert(name).second);
    const OpSpec& s = op_spec(kind);
    std::set<std::string> slots;
    int tensors = 0;
    std::vector<Slot> all(s.inputs.begin(), s.inputs.end());
    all.insert(all.end(), s.outputs.begin(), s.outputs.end());
    for (const Slot& slot : all) {
      if (slot.name.empty()) continue;
      REQUIRE(slots.insert(std::string(slot.name)).second);  // names are unique within an op
      ++tensors;
    }
    REQUIRE(tensors > 0);
    // Shape partners name a slot of the same op.
    for (const Slot& slot : all)
      if (!slot.like.empty()) REQUIRE(slots.count(std::string(slot.like)) == 1);
  }
  REQUIRE(op_name(OpKind::kCount) == "?");
}

TEST_CASE("calls are read by the names of the op table", "[ops][op_table]") {
  CaptureBackend be;
  const Tensor x = Tensor::zeros({2, 3, 4}), gamma = Tensor::zeros({3}), beta = Tensor::zeros({3});
  Tensor y = Tensor::zeros({2, 3, 4}), mean = Tensor::zeros({2, 4}), rstd = Tensor::zeros({2, 4});
  layernorm_forward(be, x, gamma, beta, 1e-5, y, mean, rstd);
  REQUIRE(be.calls == 1);
  const OpCall& c = be.last;
  REQUIRE(&c.input("x") == &x);
  REQUIRE(&c.input("beta") == &beta);
  REQUIRE(&c.output("rstd") == &rstd);
  REQUIRE(c.scalar("eps") == 1e-5);
  REQUIRE_THROWS_AS(c.input("bias"), InternalError);
  REQUIRE_THROWS_AS(c.scalar("alpha"), InternalError);

  Tensor w = Tensor::zeros({5, 3}), lin_y = Tensor::zeros({2, 5});
  const Tensor lin_x = Tensor::zeros({2, 3});
  linear_forward(be, lin_x, w, nullptr, lin_y);
  REQUIRE(be.last.input_if("bias") == nullptr);
  REQUIRE_THROWS_AS(be.last.input("bias"), InternalError);  // optional and absent

  // A convolution's weight and output-shaped tensor, whichever slot holds them.
  Conv2dParams p;
  p.kernel_h = p.kernel_w = 3;
  p.pad_h = p.pad_w = 1;
  const Tensor cx = Tensor::zeros({1, 2, 5, 5}), cdy = Tensor::zeros({1, 4, 5, 5});
  Tensor dw = Tensor::zeros({4, 2, 3, 3});
  conv2d_backward_weight(be, p, cx, cdy, dw, nullptr);
  REQUIRE(&conv_weight(be.last) == &dw);
  REQUIRE(&conv_output(be.last) == &cdy);
}

TEST_CASE("the generic check refuses wrong dtypes and shapes, naming the slot", "[ops][op_table]") {
  CaptureBackend be;
  const Tensor x = Tensor::zeros({2, 3, 4}), gamma = Tensor::zeros({3}), beta = Tensor::zeros({3});
  Tensor y = Tensor::zeros({2, 3, 4}), rstd = Tensor::zeros({2, 4});
  Tensor mean64 = Tensor::zeros({2, 4}, DType::F64);
  std::string msg = error_of<InvalidArgument>([&] { layernorm_forward(be, x, gamma, beta, 1e-5, y, mean64, rstd); });
  REQUIRE_THAT(msg, Contains("layernorm_forward") && Contains("output mean") && Contains("must be f32"));

  Tensor s32 = Tensor::zeros({1});
  msg = error_of<InvalidArgument>([&] { sum_squares(be, Tensor::zeros({4}), s32); });
  REQUIRE_THAT(msg, Contains("must be f64[1]"));

  const Tensor a = Tensor::zeros({4}), b = Tensor::zeros({5});
  Tensor sum = Tensor::zeros({4});
  msg = error_of<InvalidArgument>([&] { add(be, a, b, sum); });
  REQUIRE_THAT(msg, Contains("add: input b") && Contains("must have the shape of a"));

  OpCall unused_slot{.kind = OpKind::Add, .in = {&a, &a, &a}, .out = {&sum}};
  REQUIRE_THROWS_AS(check_call(unused_slot), InternalError);
  OpCall missing{.kind = OpKind::Add, .in = {&a}, .out = {&sum}};
  REQUIRE_THAT(error_of<InvalidArgument>([&] { check_call(missing); }), Contains("the input b is missing"));
  REQUIRE(be.calls == 0);  // nothing reached the backend
}

TEST_CASE("op_cost follows the table's formulas", "[ops][op_table]") {
  CaptureBackend be;
  // conv2d_forward, 3x3, 2 -> 4 channels, bias: 2·(N·Cout·Ho·Wo)·Cin·9 + N·Cout·Ho·Wo.
  Conv2dParams p;
  p.kernel_h = p.kernel_w = 3;
  p.pad_h = p.pad_w = 1;
  const Tensor x = Tensor::zeros({1, 2, 5, 6}), w = Tensor::zeros({4, 2, 3, 3}), bias = Tensor::zeros({4});
  Tensor y = Tensor::zeros({1, 4, 5, 6});
  conv2d_forward(be, p, x, w, &bias, y);
  OpCost c = op_cost(be.last);
  REQUIRE(c.flops == 2.0 * 120 * 2 * 9 + 120);
  REQUIRE(c.rows == 20);
  REQUIRE(c.bytes_read == 4 * (60 + 72 + 4));
  REQUIRE(c.bytes_written == 4 * 120);

  // axpy reads its output too; linear_backward without dx or db counts dw's GEMM only.
  const Tensor v = Tensor::zeros({10});
  Tensor acc = Tensor::zeros({10});
  axpy(be, 2.0, v, acc);
  c = op_cost(be.last);
  REQUIRE(c.flops == 20);
  REQUIRE(c.bytes_read == 80);
  const Tensor dy = Tensor::zeros({2, 5}), lx = Tensor::zeros({2, 3}), lw = Tensor::zeros({5, 3});
  Tensor ldw = Tensor::zeros({5, 3});
  linear_backward(be, dy, lx, lw, nullptr, ldw, nullptr);
  REQUIRE(op_cost(be.last).flops == 2.0 * 2 * 5 * 3);
}

}  // namespace
}  // namespace tessera::test
