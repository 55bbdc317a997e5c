// Collectives: names, the nccl-tests bandwidth factors, and simulation of a plan on an idle
// FlowNetwork (each step once, times its repeat count), with Auto choosing the fastest.
#include "tessera/sim/collectives.hpp"

#include "tessera/core/error.hpp"

namespace tessera::sim {

namespace {
constexpr const char* kOpNames[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                    "all_to_all"};
constexpr const char* kAlgoNames[] = {"auto", "ring", "tree", "hier", "pairwise"};
}  // namespace

std::string collective_op_name(CollectiveOp op) { return kOpNames[static_cast<int>(op)]; }
std::string algorithm_name(Algorithm a) { return kAlgoNames[static_cast<int>(a)]; }

CollectiveOp parse_collective_op(const std::string& s) {
  for (int i = 0; i < 5; ++i)
    if (s == kOpNames[i]) return static_cast<CollectiveOp>(i);
  throw InvalidArgument(detail::cat("sim: unknown collective \"", s, "\"; use all_reduce, "
                                    "all_gather, reduce_scatter, broadcast or all_to_all"));
}

Algorithm parse_algorithm(const std::string& s) {
  if (s == "hierarchical") return Algorithm::Hierarchical;
  for (int i = 0; i < 5; ++i)
    if (s == kAlgoNames[i]) return static_cast<Algorithm>(i);
  throw InvalidArgument(detail::cat("sim: unknown collective algorithm \"", s,
                                    "\"; use auto, ring, tree, hier or pairwise"));
}

double busbw_factor(CollectiveOp op, int p) {
  TESSERA_CHECK(p >= 1, "sim: busbw_factor needs p ≥ 1 ranks, got ", p);
  switch (op) {
    case CollectiveOp::AllReduce: return 2.0 * (p - 1) / p;
    case CollectiveOp::Broadcast: return 1.0;
    default: return static_cast<double>(p - 1) / p;
  }
}

CollectiveResult simulate_plan(const Topology& t, const CollectivePlan& plan,
                               const std::vector<int>& group) {
  CollectiveResult res;
  res.algorithm = plan.algorithm;
  res.edge_bytes.assign(t.num_edges(), 0.0);
  FlowNetwork net(t);
  for (const CollectiveStep& step : plan.steps) {
    TESSERA_CHECK(step.repeat >= 1, "sim: a collective step repeats ", step.repeat,
                  " times; give a count ≥ 1");
    if (step.transfers.empty()) continue;
    const Picos begin = net.now();
    for (const Transfer& tr : step.transfers) {
      TESSERA_CHECK(tr.from >= 0 && tr.from < static_cast<int>(group.size()) && tr.to >= 0 &&
                        tr.to < static_cast<int>(group.size()),
                    "sim: transfer ", tr.from, " → ", tr.to, " names a rank outside the ",
                    group.size(), "-rank group");
      net.start(group[tr.from], group[tr.to], tr.bytes);
      for (int e : t.route(group[tr.from], group[tr.to]))
        res.edge_bytes[e] += static_cast<double>(tr.bytes) * step.repeat;
    }
    res.time_ps += (net.run_to_completion() - begin) * step.repeat;
  }
  if (res.time_ps > 0) {
    const double seconds = static_cast<double>(res.time_ps) / kPicosPerSecond;
    res.algbw_GBps = static_cast<double>(plan.bytes) / seconds / 1e9;
    res.busbw_GBps = res.algbw_GBps * busbw_factor(plan.op, static_cast<int>(group.size()));
  }
  return res;
}

CollectiveResult simulate_collective(const Topology& t, CollectiveOp op, Algorithm algo,
                                     const std::vector<int>& group, std::int64_t bytes) {
  if (algo != Algorithm::Auto) return simulate_plan(t, plan_collective(t, op, algo, group, bytes), group);
  CollectiveResult best;
  bool first = true;
  for (Algorithm a : candidate_algorithms(t, op, group)) {
    CollectiveResult r = simulate_plan(t, plan_collective(t, op, a, group, bytes), group);
    if (first || r.time_ps < best.time_ps) best = std::move(r);
    first = false;
  }
  return best;
}

}  // namespace tessera::sim
