// The planner's search.
//
// Exhaustive: every candidate is replayed (every class of ranks, replay_folded), bounded and
// simulated, several at once.
//
// Otherwise, branch and bound in two steps, because replaying every class of a large mesh costs
// more than simulating a few candidates. First every candidate's rank 0 alone is replayed: its
// relaxed schedule bounds the iteration time (rank 0 is always simulated, plan_bounds.cpp) and
// its peak bounds the candidate's. Then the candidates whose rank 0 fits are taken in order of
// that bound (ties: enumeration order); one whose bound is strictly above the best fitting time
// so far is pruned; the others are replayed in full (exact memory, the bound over every class),
// pruned if they do not fit or if the full bound is above the best, and simulated otherwise.
// Every candidate that ties the best time has bounds ≤ it and is simulated, so the stable sort by
// time gives the exhaustive search's best plan. The best so far is kept per gradient compression,
// so that the fastest dense plan and the fastest top-k plan (the compression verdict) are both
// the exhaustive search's; with both compressions the other-compression twin of every simulated
// candidate is simulated too (simulate_twins), so that the verdict compares pairs.
//
// Determinism with threads: the decisions are those of the sequential walk over that order. A
// worker prunes position p only when a bound exceeds the best time already found among the
// positions before p, which is never below the walk's best at p (each such time is the walk's, or
// one it pruned, itself above the walk's best), so the walk finds every figure it needs. What
// workers computed beyond the walk's needs (a full replay, a simulation) is dropped: the result
// is that of one thread.
#include "plan_search.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "plan_bounds.hpp"
#include "tessera/core/error.hpp"
#include "tessera/sim/fold.hpp"

namespace tessera::sim::detail_plan {

namespace {

constexpr Picos kNone = std::numeric_limits<Picos>::max();

double seconds(Picos t) { return static_cast<double>(t) / static_cast<double>(kPicosPerSecond); }

// What one candidate came to.
struct Eval {
  PlanEntry first;  // rank 0's memory and bound (smart search)
  PlanEntry full;   // every class's memory and bound; the engine's busy times
  Picos first_bound = 0, full_bound = 0;
  Picos time_ps = kNone;  // simulated iteration time
  bool has_first = false, has_full = false, simulated = false;
  std::optional<std::string> error;  // the replay or the engine refused it: skipped
  enum class Shown { Undecided, Simulated, PrunedFirst, PrunedFull, Skipped } shown{};
};

// Runs fn(i) for i in [0, n) on `threads` threads; the first exception stops the others and is
// rethrown.
template <class F>
void parallel(int threads, int n, F&& fn) {
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex m;
  auto work = [&] {
    for (int i; !failed && (i = next++) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min(threads, n); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

// Runs `f`, turning the refusals of a bad configuration into `error`.
template <class F>
void refusing(std::optional<std::string>& error, F&& f) {
  try {
    f();
  } catch (const InvalidArgument& x) {
    error = x.what();
  } catch (const Unsupported& x) {
    error = x.what();
  }
}

class Search {
 public:
  explicit Search(const SearchInput& in)
      : in_(in),
        o_(in.options),
        evals_(in.candidates.size()),
        bounds_(in.topology, in.options.engine.collective_algorithm) {
    threads_ = o_.threads > 0 ? o_.threads : static_cast<int>(std::thread::hardware_concurrency());
    threads_ = std::max(threads_, 1);
    live_.total = in.total;
    live_.done = in.skipped;
  }

  void run(PlanResult& res, std::vector<IndexedSkip>& skips) {
    const int n = static_cast<int>(evals_.size());
    if (o_.exhaustive) {
      parallel(threads_, n, [&](int i) { exhaustive(i); });
    } else {
      parallel(threads_, n, [&](int i) { first(i); });
      if (!cancelled()) branch_and_bound();
      walk();
      if (!cancelled()) simulate_twins();
    }
    finish(res, skips);
  }

 private:
  bool cancelled() const { return o_.cancel != nullptr && o_.cancel->load(); }
  Eval& eval(int i) { return evals_[static_cast<std::size_t>(i)]; }
  const Candidate& candidate(int i) const { return in_.candidates[static_cast<std::size_t>(i)]; }
  nn::TrainOptions train(int i) const { return options_for(o_.train, candidate(i).config); }

  // Every class replayed: exact memory, the full bound.
  std::optional<FoldedReplay> replay_full(int i) {
    Eval& e = eval(i);
    std::optional<FoldedReplay> f;
    refusing(e.error, [&] {
      f = replay_folded(train(i), candidate(i).mesh);
      std::vector<const RankReplay*> classes;
      for (const RankReplay& c : f->classes) classes.push_back(&c);
      e.full.config = candidate(i).config;
      set_memory(classes, f->num_ranks(), in_.topology, in_.catalog, o_, e.full);
      e.full.classes = static_cast<int>(f->classes.size());
      e.full_bound = iteration_lower_bound(*f, in_.topology, in_.catalog, o_.engine, bounds_);
      e.has_full = true;
    });
    if (e.error) f.reset();
    return f;
  }

  void simulate(int i, const FoldedReplay& f) {
    Eval& e = eval(i);
    refusing(e.error, [&] {
      EngineOptions eo = o_.engine;
      eo.trace = false;
      eo.collective_links = false;
      const SimResult r = simulate_iteration(f, in_.topology, in_.catalog, eo);
      e.time_ps = r.iteration_ps;
      for (const DeviceResult& d : r.devices) {
        e.full.compute_busy_s = std::max(e.full.compute_busy_s, seconds(d.compute_busy_ps));
        e.full.comm_busy_s = std::max(e.full.comm_busy_s, seconds(d.comm_busy_ps));
      }
      e.simulated = true;
    });
  }

  void exhaustive(int i) {
    if (cancelled()) return;
    Eval& e = eval(i);
    if (const std::optional<FoldedReplay> f = replay_full(i)) simulate(i, *f);
    e.shown = e.error ? Eval::Shown::Skipped : Eval::Shown::Simulated;
    decided(e);
  }

  // Rank 0 alone: a bound on the time and on the peak.
  void first(int i) {
    if (cancelled()) return;
    Eval& e = eval(i);
    refusing(e.error, [&] {
      const RankReplay r0 = replay_rank(train(i), candidate(i).mesh, 0);
      e.first.config = candidate(i).config;
      set_memory({&r0}, candidate(i).mesh.size(), in_.topology, in_.catalog, o_, e.first);
      e.first.classes = 1;
      e.first.memory_exact = false;
      e.first_bound = rank_lower_bound(r0, in_.topology, in_.catalog, o_.engine, bounds_);
      e.has_first = true;
    });
    if (e.error || !e.first.fits) {  // rank 0 alone is over the limit: so is the candidate
      e.shown = e.error ? Eval::Shown::Skipped : Eval::Shown::PrunedFirst;
      decided(e);
    }
  }

  // The candidates whose rank 0 fits, by bound; each pruned, or replayed in full and simulated.
  void branch_and_bound() {
    for (std::size_t i = 0; i < evals_.size(); ++i)
      if (evals_[i].has_first && evals_[i].first.fits) order_.push_back(static_cast<int>(i));
    std::stable_sort(order_.begin(), order_.end(),
                     [&](int a, int b) { return eval(a).first_bound < eval(b).first_bound; });
    finished_.assign(order_.size(), kNone);
    parallel(threads_, static_cast<int>(order_.size()), [&](int p) {
      if (cancelled()) return;
      const int i = order_[static_cast<std::size_t>(p)];
      Eval& e = eval(i);
      e.shown = Eval::Shown::PrunedFirst;
      if (e.first_bound <= best_before(p)) {
        const std::optional<FoldedReplay> f = replay_full(i);
        e.shown = e.error ? Eval::Shown::Skipped : Eval::Shown::PrunedFull;
        if (f && e.full.fits && e.full_bound <= best_before(p)) simulate(i, *f);
        if (e.simulated) e.shown = Eval::Shown::Simulated;
        std::lock_guard<std::mutex> lock(mutex_);
        finished_[static_cast<std::size_t>(p)] = e.simulated ? e.time_ps : kNone;
      }
      decided(e);
    });
  }

  // The best time simulated so far among the positions before p with p's compression.
  Picos best_before(int p) {
    const std::string& g = candidate(order_[static_cast<std::size_t>(p)]).config.compression;
    std::lock_guard<std::mutex> lock(mutex_);
    Picos best = kNone;
    for (int q = 0; q < p; ++q)
      if (candidate(order_[static_cast<std::size_t>(q)]).config.compression == g)
        best = std::min(best, finished_[static_cast<std::size_t>(q)]);
    return best;
  }

  void walk();
  void simulate_twins();
  void finish(PlanResult& res, std::vector<IndexedSkip>& skips);

  // Counts a decided candidate in the live progress and reports.
  void decided(const Eval& e) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++live_.done;
      live_.simulated += e.shown == Eval::Shown::Simulated;
      live_.pruned += e.shown == Eval::Shown::PrunedFirst || e.shown == Eval::Shown::PrunedFull;
      if (e.shown == Eval::Shown::Simulated && e.full.fits &&
          (live_.best.empty() || seconds(e.time_ps) < live_.best_s)) {
        live_.best_s = seconds(e.time_ps);
        live_.best = describe(e.full.config);
      }
    }
    report(nullptr);
  }

  // Reports `last` (the final counts), or the live ones at most every 100 ms.
  void report(const PlanProgress* last) {
    if (!o_.progress) return;
    std::lock_guard<std::mutex> serial(report_mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (!last && now - last_report_ < std::chrono::milliseconds(100)) return;
    last_report_ = now;
    PlanProgress p;
    if (last) {
      p = *last;
    } else {
      std::lock_guard<std::mutex> lock(mutex_);
      p = live_;
    }
    o_.progress(p);
  }

  const SearchInput& in_;
  const PlanOptions& o_;
  std::vector<Eval> evals_;
  CollectiveBounds bounds_;
  int threads_ = 1;
  std::vector<int> order_;       // branch and bound: candidate indices by rank 0's bound
  std::vector<Picos> finished_;  // per position: the simulated time, kNone if none
  std::mutex mutex_, report_mutex_;
  std::chrono::steady_clock::time_point last_report_{};
  PlanProgress live_;
};

// The sequential walk over the bound order sets what each candidate shows. It stops at the
// first candidate a cancel left undecided.
void Search::walk() {
  std::map<std::string, Picos> bests;  // per compression
  for (std::size_t p = 0; p < order_.size(); ++p) {
    Eval& e = eval(order_[p]);
    Picos& best = bests.try_emplace(candidate(order_[p]).config.compression, kNone).first->second;
    if (e.shown == Eval::Shown::Undecided) {
      for (std::size_t q = p; q < order_.size(); ++q)
        eval(order_[q]).shown = Eval::Shown::Undecided;
      return;
    }
    if (e.first_bound > best) {
      e.shown = Eval::Shown::PrunedFirst;
    } else if (e.error) {
      e.shown = Eval::Shown::Skipped;
    } else if (!e.full.fits || e.full_bound > best) {
      e.shown = Eval::Shown::PrunedFull;
    } else {
      e.shown = Eval::Shown::Simulated;
      best = std::min(best, e.time_ps);
    }
  }
}

// With both compressions, the twin (the same mesh, shard, checkpointing and precision) of every
// candidate the walk simulated is simulated too, unless its rank 0 does not fit: the compression
// verdict compares configurations simulated both ways. Decided by the walk: deterministic.
void Search::simulate_twins() {
  auto run_of = [&](int i) {
    PlanConfig c = candidate(i).config;
    c.compression.clear();
    return describe(c);
  };
  std::map<std::string, bool> simulated_runs;  // run → one of its compressions was simulated
  for (std::size_t i = 0; i < evals_.size(); ++i)
    if (evals_[i].shown == Eval::Shown::Simulated)
      simulated_runs[run_of(static_cast<int>(i))] = true;
  std::vector<int> twins;
  for (std::size_t i = 0; i < evals_.size(); ++i) {
    const Eval& e = evals_[i];
    const bool pruned = e.shown == Eval::Shown::PrunedFirst || e.shown == Eval::Shown::PrunedFull;
    if (pruned && e.first.fits && simulated_runs.count(run_of(static_cast<int>(i))))
      twins.push_back(static_cast<int>(i));
  }
  parallel(threads_, static_cast<int>(twins.size()), [&](int k) {
    const int i = twins[static_cast<std::size_t>(k)];
    Eval& e = eval(i);
    if (!e.simulated) {
      const std::optional<FoldedReplay> f = replay_full(i);
      if (f && e.full.fits) simulate(i, *f);
    }
    e.shown = e.error       ? Eval::Shown::Skipped
              : e.simulated ? Eval::Shown::Simulated
                            : Eval::Shown::PrunedFull;
  });
}

void Search::finish(PlanResult& res, std::vector<IndexedSkip>& skips) {
  res.cancelled = cancelled();
  PlanProgress n;
  n.total = in_.total;
  n.done = in_.skipped;
  Picos best = kNone;
  for (std::size_t i = 0; i < evals_.size(); ++i) {
    Eval& e = evals_[i];
    using S = Eval::Shown;
    if (e.shown == S::Undecided) continue;  // cancelled first
    ++n.done;
    if (e.shown == S::Skipped) {
      skips.push_back({in_.candidates[i].index, {in_.candidates[i].config, *e.error}});
      continue;
    }
    PlanEntry x = e.shown == S::PrunedFirst ? e.first : e.full;
    x.simulated = e.shown == S::Simulated;
    const Picos bound = e.shown == S::PrunedFirst ? e.first_bound : e.full_bound;
    x.lower_bound_s = seconds(bound);
    x.iteration_s = seconds(x.simulated ? e.time_ps : bound);
    x.images_per_s = x.iteration_s > 0 ? o_.train.batch / x.iteration_s : 0;
    if (!x.simulated) x.compute_busy_s = x.comm_busy_s = 0;
    ++(x.simulated ? n.simulated : n.pruned);
    if (x.simulated && x.fits && e.time_ps < best) {
      best = e.time_ps;
      n.best_s = x.iteration_s;
      n.best = describe(x.config);
    }
    res.entries.push_back(std::move(x));
  }
  std::stable_sort(
      res.entries.begin(), res.entries.end(),
      [](const PlanEntry& a, const PlanEntry& b) { return a.iteration_s < b.iteration_s; });
  res.progress = n;
  report(&n);
}

}  // namespace

void search(const SearchInput& in, PlanResult& res, std::vector<IndexedSkip>& skips) {
  Search s(in);
  s.run(res, skips);
}

}  // namespace tessera::sim::detail_plan
