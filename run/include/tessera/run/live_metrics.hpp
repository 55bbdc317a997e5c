// Live metrics of a training run in the Prometheus text exposition format (version 0.0.4):
// served over HTTP on loopback (`tessera train --metrics-port`) for a Prometheus scraper, or
// written as a node-exporter textfile-collector file (`--metrics-textfile`) where a port is not
// wanted. Rank 0 publishes after every step.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/nn/trainer.hpp"
#include "tessera/run/alarms.hpp"
#include "tessera/run/elastic.hpp"

namespace tessera::run {

/// What one publication shows: the last step's figures of every rank and the run's totals.
struct LiveFigures {
  std::string model, mesh, backend;
  int batch = 0;
  std::vector<nn::StepStats> ranks;              ///< the last completed step, every rank
  std::vector<std::int64_t> halo_bytes;          ///< per rank: halo bytes sent in that step
  std::vector<std::int64_t> collective_bytes;    ///< per rank: bytes handed to collectives in that step
  std::vector<std::int64_t> halo_bytes_total;    ///< per rank, since the run began
  std::vector<std::int64_t> collective_bytes_total;
  std::array<std::int64_t, kNumAlarmKinds> alarms{};  ///< alarms fired so far, by kind
  /// A run on an image folder: per rank, what its dataset read and decoded since the run began
  /// (empty otherwise: no tessera_data_* series).
  std::vector<data::DataStats> data_total;
  /// A rank of an elastic job: the round it runs in (nothing otherwise: no tessera_elastic_*
  /// series).
  std::optional<ElasticRound> elastic;
};

/// The figures as Prometheus text: tessera_steps_completed, tessera_loss, tessera_grad_norm,
/// tessera_lr, tessera_loss_scale, tessera_step_time_seconds{rank},
/// tessera_data_time_seconds{rank}, tessera_load_time_seconds{rank}, tessera_images_per_second,
/// tessera_peak_memory_bytes{rank,category} (category "total" too), tessera_step_halo_bytes{rank}
/// and tessera_step_collective_bytes{rank} (the last step), tessera_halo_bytes_total{rank},
/// tessera_collective_bytes_total{rank}, tessera_alarms_total{alarm} (every kind, 0 included) and
/// tessera_run_info{model,mesh,backend}; on an image folder
/// tessera_data_pixels_decoded_total{rank}, tessera_data_pixels_total{rank},
/// tessera_data_decode_seconds_total{rank}, tessera_data_bad_samples_total{rank} and
/// tessera_data_labels_ignored_total{rank}; in a round of an elastic job the series of
/// elastic_round_prometheus_text.
std::string prometheus_text(const LiveFigures& f);

/// An HTTP server on 127.0.0.1 that answers GET /metrics with the last published text (and 404
/// for other paths), on a thread of its own; a client that sends nothing is dropped after 5 s.
/// Port 0 takes a free port (port() says which). Throws BackendError ("live metrics") when the
/// port cannot be bound (in use, or privileged), naming it.
class MetricsServer {
 public:
  explicit MetricsServer(int port);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  int port() const noexcept;
  void publish(std::string text);
  std::int64_t scrapes() const noexcept;  ///< GET /metrics answered so far

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::run
