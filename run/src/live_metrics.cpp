// Live metrics: the Prometheus text of a step, and the loopback HTTP server (Boost.Beast) that
// serves it.
#include "tessera/run/live_metrics.hpp"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <mutex>
#include <thread>

#include "prometheus_text.hpp"
#include "tessera/core/error.hpp"

namespace tessera::run {

namespace {

using Text = PrometheusText;

std::string label(const std::string& v) { return prometheus_label(v); }

std::string rank_label(std::size_t r) { return "{rank=\"" + std::to_string(r) + "\"}"; }

/// What each rank's dataset decoded since the run began (a run on an image folder).
void data_series(Text& t, const std::vector<data::DataStats>& total) {
  if (total.empty()) return;
  struct Series {
    const char* name;
    const char* help;
    double (*value)(const data::DataStats&);
  };
  static const Series series[] = {
      {"tessera_data_pixels_decoded_total",
       "Pixels each rank's decoders produced (images and masks).",
       [](const data::DataStats& d) { return double(d.pixels_decoded); }},
      {"tessera_data_pixels_total",
       "Pixels of the files each rank decoded, in full (decoded / this: the share it decoded).",
       [](const data::DataStats& d) { return double(d.pixels_total); }},
      {"tessera_data_decode_seconds_total",
       "Seconds each rank's loading spent decoding and transforming (summed over threads).",
       [](const data::DataStats& d) { return d.decode_s; }},
      {"tessera_data_bad_samples_total",
       "Bad samples each rank skipped (skip_bad_samples), those left out at open included.",
       [](const data::DataStats& d) { return double(d.bad_skipped); }},
      {"tessera_data_labels_ignored_total",
       "Labels each rank set to ignore because their mask value was bad.",
       [](const data::DataStats& d) { return double(d.labels_ignored); }},
  };
  for (const Series& s : series) {
    t.family(s.name, "counter", s.help);
    for (std::size_t r = 0; r < total.size(); ++r)
      t.sample(s.name + rank_label(r), s.value(total[r]));
  }
}

}  // namespace

std::string prometheus_text(const LiveFigures& f) {
  Text t;
  t.family("tessera_run_info", "gauge", "The run: model, mesh and communication backend (value 1).");
  t.sample("tessera_run_info{model=\"" + label(f.model) + "\",mesh=\"" + label(f.mesh) + "\",backend=\"" +
               label(f.backend) + "\"}",
           1);
  const std::size_t n = f.ranks.size();
  const std::int64_t done = n ? f.ranks[0].step + 1 : 0;
  t.family("tessera_steps_completed", "gauge", "Training steps completed.");
  t.sample("tessera_steps_completed", done);
  if (n) {
    const nn::StepStats& s = f.ranks[0];
    double worst = 0;
    for (const nn::StepStats& r : f.ranks) worst = std::max(worst, r.step_time_s);
    t.family("tessera_loss", "gauge", "Loss of the last step (mean over the global batch).");
    t.sample("tessera_loss", s.loss);
    t.family("tessera_grad_norm", "gauge", "Global gradient L2 norm of the last step, before clipping.");
    t.sample("tessera_grad_norm", s.grad_norm);
    t.family("tessera_lr", "gauge", "Learning rate of the last step.");
    t.sample("tessera_lr", s.lr);
    t.family("tessera_loss_scale", "gauge", "Loss scale of the last step (1 without loss scaling).");
    t.sample("tessera_loss_scale", s.loss_scale);
    t.family("tessera_images_per_second", "gauge", "Global batch over the slowest rank's last step time.");
    t.sample("tessera_images_per_second", worst > 0 ? f.batch / worst : 0.0);
    t.family("tessera_step_time_seconds", "gauge", "Wall clock of each rank's last step, loading included.");
    for (std::size_t r = 0; r < n; ++r) t.sample("tessera_step_time_seconds" + rank_label(r), f.ranks[r].step_time_s);
    t.family("tessera_data_time_seconds", "gauge", "Time each rank's last step waited for its batch.");
    for (std::size_t r = 0; r < n; ++r) t.sample("tessera_data_time_seconds" + rank_label(r), f.ranks[r].data_time_s);
    t.family("tessera_load_time_seconds", "gauge",
             "Time each rank's loader took to load its last batch (above the step time: the loader cannot keep up).");
    for (std::size_t r = 0; r < n; ++r) t.sample("tessera_load_time_seconds" + rank_label(r), f.ranks[r].load_time_s);
    t.family("tessera_peak_memory_bytes", "gauge", "Each rank's allocator peak in the last step, by category.");
    for (std::size_t r = 0; r < n; ++r) {
      const std::string rk = "tessera_peak_memory_bytes{rank=\"" + std::to_string(r) + "\",category=\"";
      t.sample(rk + "total\"}", f.ranks[r].memory.peak_total);
      for (int c = 0; c < core::kNumMemCategories; ++c)
        t.sample(rk + std::string(core::mem_category_name(static_cast<core::MemCategory>(c))) + "\"}",
                 f.ranks[r].memory.peak[c]);
    }
  }
  auto per_rank = [&](const char* name, const char* type, const char* help, const std::vector<std::int64_t>& v) {
    if (v.empty()) return;
    t.family(name, type, help);
    for (std::size_t r = 0; r < v.size(); ++r) t.sample(name + rank_label(r), v[r]);
  };
  per_rank("tessera_step_halo_bytes", "gauge", "Halo bytes each rank sent in the last step.", f.halo_bytes);
  per_rank("tessera_step_collective_bytes", "gauge", "Bytes each rank handed to collectives in the last step.",
           f.collective_bytes);
  per_rank("tessera_halo_bytes_total", "counter", "Halo bytes each rank sent since the run began.",
           f.halo_bytes_total);
  per_rank("tessera_collective_bytes_total", "counter", "Bytes each rank handed to collectives since the run began.",
           f.collective_bytes_total);
  t.family("tessera_alarms_total", "counter", "Training alarms fired since the run began, by kind.");
  for (int k = 0; k < kNumAlarmKinds; ++k)
    t.sample("tessera_alarms_total{alarm=\"" + std::string(alarm_kind_name(static_cast<AlarmKind>(k))) + "\"}",
             f.alarms[std::size_t(k)]);
  data_series(t, f.data_total);
  return f.elastic ? t.str() + elastic_round_prometheus_text(*f.elastic) : t.str();
}

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

struct MetricsServer::Impl {
  net::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;
  std::mutex mu;
  std::string text = "# no step completed yet\n";
  std::atomic<std::int64_t> scrapes{0};
  int port = 0;

  // One connection: read a request (5 s at most), answer it, close.
  struct Session : std::enable_shared_from_this<Session> {
    Session(tcp::socket s, Impl& impl) : stream(std::move(s)), owner(impl) {}
    beast::tcp_stream stream;
    Impl& owner;
    beast::flat_buffer buffer;
    http::request<http::string_body> req;
    http::response<http::string_body> res;

    void run() {
      stream.expires_after(std::chrono::seconds(5));
      http::async_read(stream, buffer, req, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        if (!ec) self->answer();
      });
    }
    void answer() {
      const std::string target(req.target());
      const bool metrics = target == "/metrics" || target.rfind("/metrics?", 0) == 0;
      res.version(req.version());
      res.keep_alive(false);
      res.set(http::field::server, "tessera");
      if (req.method() != http::verb::get && req.method() != http::verb::head) {
        res.result(http::status::method_not_allowed);
        res.body() = "GET /metrics\n";
      } else if (!metrics) {
        res.result(http::status::not_found);
        res.body() = "tessera serves its live metrics at /metrics\n";
      } else {
        res.result(http::status::ok);
        std::lock_guard<std::mutex> lock(owner.mu);
        res.body() = owner.text;
        ++owner.scrapes;
      }
      res.set(http::field::content_type, metrics ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain");
      res.prepare_payload();
      stream.expires_after(std::chrono::seconds(5));
      http::async_write(stream, res, [self = shared_from_this()](beast::error_code, std::size_t) {
        beast::error_code ignored;
        self->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
      });
    }
  };

  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket s) {
      if (ec) return;  // closed: the server is stopping
      std::make_shared<Session>(std::move(s), *this)->run();
      accept();
    });
  }
};

MetricsServer::MetricsServer(int port) : impl_(std::make_unique<Impl>()) {
  TESSERA_CHECK(port >= 0 && port <= 65535, "metrics port ", port, ": give 1-65535, or 0 for any free port");
  const tcp::endpoint at(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port));
  beast::error_code ec;
  impl_->acceptor.open(at.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(at, ec);
  if (!ec) impl_->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    throw BackendError("live metrics", ec.value(), detail::cat("metrics port ", port, " on 127.0.0.1: ", ec.message(),
                                   "; choose another port, or 0 for any free one"));
  impl_->port = impl_->acceptor.local_endpoint().port();
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

MetricsServer::~MetricsServer() {
  net::post(impl_->io, [this] {
    beast::error_code ignored;
    impl_->acceptor.close(ignored);
  });
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int MetricsServer::port() const noexcept { return impl_->port; }

void MetricsServer::publish(std::string text) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->text = std::move(text);
}

std::int64_t MetricsServer::scrapes() const noexcept { return impl_->scrapes.load(); }

}  // namespace tessera::run
