// UcxBackend: one rank's view of a group over UCP tagged messages. Collectives are built on the
// same posted sends/receives as batch_p2p; see README.md for the algorithms and their limits.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collective_thread.hpp"
#include "context.hpp"
#include "tessera/comm/backend.hpp"

namespace tessera::comm::ucx {

/// What every message of a collective starts with, so ranks that disagree on the call find out.
struct Header {
  std::uint32_t magic = 0x54535843;  // "CXST"
  std::uint8_t op = 0;               // CollOp
  std::uint8_t dtype = 0;
  std::uint8_t rop = 0;
  std::uint8_t pad = 0;
  std::int32_t root = -1;
  std::uint32_t step = 0;
  std::uint64_t count = 0;
  std::uint32_t seq = 0;
  std::int32_t src = -1;  // group rank of the sender
};
static_assert(sizeof(Header) == 32);

enum class CollOp : std::uint8_t {
  AllReduce = 1,
  AllGather,
  ReduceScatter,
  Broadcast,
  AllToAll,
  Barrier,
  Split
};
const char* coll_name(CollOp op);

/// Payloads up to this size travel in one message behind their header (one copy, one message);
/// larger ones as a message of their own, straight from and into the caller's memory (UCX's
/// zero-copy rendezvous), after a header-only message.
inline constexpr std::size_t kPackBytes = 16 * 1024;
/// The tag bit of a collective's payload message (the sequence number keeps 31 bits).
inline constexpr std::uint32_t kPayloadBit = 0x80000000u;

/// Per-rank payload bytes up to which collectives exchange directly (one round, rank-order
/// reductions); above it they use rings.
inline constexpr std::size_t kDirectBytes = 32 * 1024;
/// An all_reduce over a power-of-two group of 4 or more ranks halves and doubles (instead of a
/// direct round or a ring) above this many bytes: with 4 processes on 2 cores, 16 KiB took 82 µs
/// in one direct round and 33 µs in four halving/doubling steps.
inline constexpr std::size_t kHalvingBytes = 8 * 1024;

/// A reduce step (ring or halving) moves its block in chunks of at most this many bytes, each
/// reduced as soon as it is in: the chunk lands in a small scratch that is still in L2 when it is
/// reduced, and 256 KiB stays under the eager threshold (context.cpp), so sender and receiver copy
/// at once. bench_comm all_reduce against one message per block (medians of 2 runs each, taken
/// alternately): 2 processes 1 MiB 179–197 -> 162–172 us, 4 MiB 0.88–0.90 -> 0.71–0.75 ms,
/// 16 MiB 8.3–9.6 -> 6.7–7.2 ms; 4 processes on 2 cores 4 MiB 6.0–7.0 -> 5.2–6.3 ms, 16 MiB
/// 26.6–31.0 -> 23.9–26.2 ms. (128 KiB chunks gained less; 512 KiB, sent by rendezvous, less still.)
inline constexpr std::size_t kReduceChunkBytes = 256 * 1024;

class UcxBackend final : public Backend {
 public:
  UcxBackend(std::shared_ptr<Context> ctx, std::vector<int> members, int comm_id,
             std::chrono::milliseconds timeout);

  std::string_view name() const noexcept override { return "ucx"; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return static_cast<int>(members_.size()); }
  Capabilities capabilities() const noexcept override;
  std::chrono::milliseconds timeout() const noexcept override { return timeout_; }

  WorkPtr all_reduce(BufferView buf, ReduceOp op) override;
  WorkPtr all_gather(BufferView send, BufferView recv) override;
  WorkPtr reduce_scatter(BufferView send, BufferView recv, ReduceOp op) override;
  WorkPtr broadcast(BufferView buf, int root) override;
  WorkPtr batch_p2p(const std::vector<P2POp>& ops) override;
  void barrier() override;
  WorkPtr all_to_all(BufferView send, BufferView recv) override;
  std::unique_ptr<Backend> split(const std::vector<int>& ranks) override;

  // Used by the collective algorithms (collectives.cpp).
  struct Send {
    int peer;  ///< group rank
    const void* data;
    std::size_t bytes;
    std::uint32_t step = 0;
  };
  struct Recv {
    Recv(int p, std::size_t b, std::uint32_t s = 0, void* d = nullptr)
        : peer(p), bytes(b), step(s), dst(d) {}
    int peer;           ///< group rank
    std::size_t bytes;  ///< payload bytes expected (header not counted)
    std::uint32_t step = 0;
    void* dst = nullptr;     ///< where the payload lands; null: in `data`
    std::vector<char> data;  ///< the payload when dst is null
    const char* payload() const { return dst ? static_cast<const char*>(dst) : data.data(); }
  };
  /// One round of a collective: posts every receive and send, waits, checks the headers.
  void exchange(const Header& h, const std::vector<Send>& sends, std::vector<Recv>& recvs);
  Header header(CollOp op, core::DType dtype, ReduceOp rop, std::size_t count, int root = -1);
  std::string where() const;  ///< "rank 1" or "rank 1 (world rank 3)"
  /// Runs `task` as this group's next collective: on the group's thread (Progress::Thread), or
  /// here, now; small ones (`small`) here when nothing is queued. batch_p2p uses it too, to
  /// have a rendezvous-sized batch progressed while the caller computes.
  WorkPtr run_collective(std::function<void()> task, bool small);
  /// Whether collectives run on a thread (Progress::Thread).
  bool threaded() const noexcept { return thread_ != nullptr; }

 private:
  std::uint64_t tag(bool collective, std::uint32_t x, int src_world) const;
  void check_host(const BufferView& b, const char* op) const;
  // The collectives' argument checks (at the post, on the caller's thread) and their bodies (on
  // the group's thread, in post order).
  void check_all_gather(BufferView send, BufferView recv) const;
  void check_reduce_scatter(BufferView send, BufferView recv) const;
  void check_broadcast(BufferView buf, int root) const;
  void check_all_to_all(BufferView send, BufferView recv) const;
  void all_reduce_now(BufferView buf, ReduceOp op);
  void all_gather_now(BufferView send, BufferView recv);
  void reduce_scatter_now(BufferView send, BufferView recv, ReduceOp op);
  void broadcast_now(BufferView buf, int root);
  void all_to_all_now(BufferView send, BufferView recv);
  void barrier_now();
  std::unique_ptr<Backend> split_now(const std::vector<int>& ranks);
  [[noreturn]] void fail_wait(const std::string& why, const std::string& what,
                              const std::vector<Op*>& ops,
                              const std::vector<std::string>& waiting_for);
  /// One reduce step: sends send_count elements at `send` to rank `to` and reduces the
  /// recv_count elements that rank `from` sends into `dst`, in chunks of kReduceChunkBytes.
  /// max_count (the longest message of this step on any rank) sets the number of chunks, so it
  /// is the same on every rank; `step` advances by it.
  void exchange_reduce(const Header& h, int to, const void* send, std::size_t send_count, int from, void* dst,
                       std::size_t recv_count, std::size_t max_count, core::DType dt, ReduceOp op,
                       std::uint32_t& step);
  /// The ring and the halving/doubling all_reduce: the reduce steps accumulate in `acc`, the rank
  /// that owns a finished block divides it (Avg) and, when `out` is a bf16/f16 buffer and `acc`
  /// its f32 copy, rounds it into `out`; the gather steps move `out`'s blocks. For every other
  /// dtype acc and out are the same buffer.
  void all_reduce_ring(BufferView acc, BufferView out, ReduceOp op, const Header& h);
  void all_reduce_halving(BufferView acc, BufferView out, ReduceOp op, const Header& h);
  /// The 16-bit elements (dtype dt) widened to f32 into wide_ (kept between calls).
  BufferView widened(const void* data, std::size_t count, core::DType dt);

  std::shared_ptr<Context> ctx_;
  std::vector<int> members_;  // world rank of each group rank
  int rank_ = 0;
  int comm_id_ = 1;
  std::chrono::milliseconds timeout_;
  std::uint32_t seq_ = 0;
  std::uint32_t splits_ = 0;
  std::string failed_;         // set when a collective failed: the group is unusable
  std::vector<char> scratch_;  // ring steps receive here (kept: no page faults per call)
  std::vector<float> wide_;    // f32 copy of a bf16/f16 buffer that a ring or halving reduces
  // Kept message buffers of the exchange round: headers (with a packed payload) received, one
  // per peer of a round, and packed messages sent.
  std::vector<std::unique_ptr<char[]>> rx_, tx_;
  char* rx_buffer(std::size_t i);
  char* tx_buffer(std::size_t i);
  // Last: joined (running what is queued) before the members its tasks use are destroyed.
  std::unique_ptr<CollectiveThread> thread_;
};

/// How a group's collectives progress, from TESSERA_UCX_PROGRESS (read once per process):
/// "thread" — on the group's CollectiveThread, while the caller computes, and rendezvous-sized
/// batches progressed by the context's helper; "calls" — whole inside the post
/// (Capabilities::overlaps_compute false); "auto" (the default) — thread unless the launcher
/// says this machine runs more ranks than it has cores (collectives_post.cpp gives the figures).
enum class Progress : std::uint8_t { Thread, Calls };
Progress progress_mode() noexcept;
/// Throws InvalidArgument when TESSERA_UCX_PROGRESS is set to something else (the factory calls
/// it; progress_mode() then falls back to the default).
void check_progress_env();

/// Messages above this size go by rendezvous (context.cpp sets UCX_RNDV_THRESH to one byte
/// more): they move only while both sides progress the worker.
inline constexpr std::size_t kEagerBytes = 256 * 1024;

/// The factory behind the plugin: options.rendezvous must offer a store.
std::unique_ptr<Backend> create(const BackendOptions& options);
Capabilities capabilities();

}  // namespace tessera::comm::ucx
