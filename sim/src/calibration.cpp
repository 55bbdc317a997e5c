// The calibration file: JSON writer, a reader that refuses anything malformed naming the field,
// and apply_calibration (the catalog entry and the kernel rates a simulation uses).
#include "tessera/sim/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "json_fields.hpp"
#include "tessera/core/file_io.hpp"
#include "tessera/sim/kernel_class.hpp"

namespace tessera::sim {

using namespace json_fields;

namespace {

constexpr const char* kFormat = "tessera-calibration";
constexpr int kVersion = 3;        // 2: per-row term ("row_ns", samples' "rows"); 3: "precisions"
constexpr int kOldestVersion = 2;  // read as timed in fp32 only

Json samples_json(const std::vector<KernelSample>& samples) {
  Json a = Json::array();
  for (const KernelSample& s : samples)
    a.push_back({{"flops", s.flops}, {"bytes", s.bytes}, {"rows", s.rows}, {"us", s.seconds * 1e6}, {"in_step", s.in_step}});
  return a;
}

/// A required number in [lo, hi] (json_fields::number_in with a finite check).
double in_range(const Json& obj, const char* key, double lo, double hi, const std::string& where) {
  return number_in(obj, key, lo, hi, where, "measured figures are finite and non-negative");
}

bool bool_field(const Json& obj, const char* key, const std::string& where) {
  const Json& v = required(obj, key, where);
  if (!v.is_boolean())
    throw InvalidArgument(detail::cat("sim: ", where, ": field \"", key, "\" must be true or false, got ", v.dump()));
  return v.get<bool>();
}

KernelCalibration read_kernel(const Json& e, const std::string& where) {
  TESSERA_CHECK(e.is_object(), "sim: ", where, " must be an object {\"rate_gflops\", \"rate_GBps\", \"overhead_us\"}");
  refuse_unknown(e, {"rate_gflops", "rate_GBps", "overhead_us", "row_ns", "far_GBps", "near_bytes", "samples"}, where);
  KernelCalibration k;
  k.rate.flops_per_s = in_range(e, "rate_gflops", 0, 1e9, where) * 1e9;
  k.rate.bytes_per_s = in_range(e, "rate_GBps", 0, 1e9, where) * 1e9;
  k.rate.overhead_s = in_range(e, "overhead_us", 0, 1e6, where) * 1e-6;
  k.rate.row_s = in_range(e, "row_ns", 0, 1e9, where) * 1e-9;
  // The far term (optional: a file without it has none, the rate as fitted before it existed).
  TESSERA_CHECK(e.contains("far_GBps") == e.contains("near_bytes"), "sim: ", where,
                ": fields \"far_GBps\" and \"near_bytes\" come together (the far-memory term)");
  if (e.contains("far_GBps")) {
    k.rate.far_bytes_per_s = in_range(e, "far_GBps", 0, 1e9, where) * 1e9;
    k.rate.near_bytes = in_range(e, "near_bytes", 0, 1e15, where);
  }
  if (!e.contains("samples")) return k;
  const Json& list = e["samples"];
  TESSERA_CHECK(list.is_array(), "sim: ", where,
                ": field \"samples\" must be an array of {\"flops\", \"bytes\", \"rows\", \"us\", \"in_step\"}");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string w = detail::cat(where, ": samples[", i, "]");
    TESSERA_CHECK(list[i].is_object(), "sim: ", w, " must be an object {\"flops\", \"bytes\", \"rows\", \"us\", \"in_step\"}");
    refuse_unknown(list[i], {"flops", "bytes", "rows", "us", "in_step"}, w);
    KernelSample s;
    s.flops = in_range(list[i], "flops", 0, 1e18, w);
    s.bytes = in_range(list[i], "bytes", 0, 1e18, w);
    s.rows = in_range(list[i], "rows", 0, 1e18, w);
    s.seconds = in_range(list[i], "us", 0, 1e9, w) * 1e-6;
    s.in_step = bool_field(list[i], "in_step", w);
    k.samples.push_back(s);
  }
  return k;
}

/// The "precisions" field: known names, fp32 among them, none twice.
std::vector<nn::Precision> read_precisions(const Json& doc, const std::string& origin) {
  const Json& list = required(doc, "precisions", origin);
  const std::string where = origin + ": field \"precisions\"";
  TESSERA_CHECK(list.is_array() && !list.empty(), "sim: ", where,
                " must be a non-empty array of precision names (\"fp32\", \"bf16\", \"fp16\")");
  std::vector<nn::Precision> out;
  for (const Json& v : list) {
    const std::optional<nn::Precision> p =
        v.is_string() ? nn::parse_precision(v.get<std::string>()) : std::nullopt;
    TESSERA_CHECK(p.has_value(), "sim: ", where, ": ", v.dump(), " is not fp32, bf16 or fp16");
    TESSERA_CHECK(std::find(out.begin(), out.end(), *p) == out.end(), "sim: ", where, ": ",
                  v.dump(), " is listed twice");
    out.push_back(*p);
  }
  TESSERA_CHECK(std::find(out.begin(), out.end(), nn::Precision::FP32) != out.end(), "sim: ", where,
                " must include \"fp32\" (every calibration times the f32 kernels)");
  return out;
}

}  // namespace

std::string calibration_to_json(const Calibration& c) {
  DeviceCatalog catalog;
  catalog.add(c.device);
  Json kernels = Json::object();
  for (const auto& [name, k] : c.kernels)
    kernels[name] = {{"rate_gflops", k.rate.flops_per_s / 1e9},
                     {"rate_GBps", k.rate.bytes_per_s / 1e9},
                     {"overhead_us", k.rate.overhead_s * 1e6},
                     {"row_ns", k.rate.row_s * 1e9},
                     {"far_GBps", k.rate.far_bytes_per_s / 1e9},
                     {"near_bytes", k.rate.near_bytes},
                     {"samples", samples_json(k.samples)}};
  Json precisions = Json::array();
  for (nn::Precision p : c.precisions) precisions.push_back(std::string(nn::precision_name(p)));
  Json doc = {{"format", kFormat},
              {"version", kVersion},
              {"host", c.host},
              {"created_utc", c.created_utc},
              {"threads_per_rank", c.threads_per_rank},
              {"concurrent_ranks", c.concurrent_ranks},
              {"quick", c.quick},
              {"devices", Json::parse(catalog.to_json({c.device.name}))["devices"]},
              {"link",
               {{"p2p_latency_us", c.link.p2p_latency_s * 1e6},
                {"p2p_bw_GBps", c.link.p2p_bw_bytes_per_s / 1e9},
                {"all_reduce_latency_us", c.link.all_reduce_latency_s * 1e6},
                {"all_reduce_bw_GBps", c.link.all_reduce_bw_bytes_per_s / 1e9}}},
              {"runtime",
               {{"host_overhead_us", c.host_overhead_s * 1e6},
                {"p2p_wait_us", c.waits.p2p_s * 1e6},
                {"collective_wait_us", c.waits.collective_s * 1e6},
                {"cpu_share", c.cpu_share}}},
              {"topology", Json::parse(c.topology.to_json())},
              {"precisions", precisions},
              {"kernels", kernels}};
  if (!c.device_copy.memory.empty())
    doc["device_copy"] = {{"memory", c.device_copy.memory},
                          {"d2d_GBps", c.device_copy.d2d_bw_bytes_per_s / 1e9},
                          {"h2d_GBps", c.device_copy.h2d_bw_bytes_per_s / 1e9},
                          {"d2h_GBps", c.device_copy.d2h_bw_bytes_per_s / 1e9}};
  return doc.dump(2) + "\n";
}

Calibration calibration_from_json(const std::string& text, const std::string& origin) {
  const Json doc = parse(text, origin);
  TESSERA_CHECK(doc.is_object(), "sim: ", origin, ": a calibration file is an object {\"format\": \"", kFormat,
                "\", ...}; write one with tessera calibrate");
  refuse_unknown(
      doc,
      {"format", "version", "host", "created_utc", "threads_per_rank", "concurrent_ranks", "quick",
       "devices", "link", "runtime", "topology", "precisions", "kernels", "device_copy"},
      origin);
  const std::string format = string_field(required(doc, "format", origin), "format", origin);
  TESSERA_CHECK(format == kFormat, "sim: ", origin, ": field \"format\" is \"", format, "\", not \"", kFormat,
                "\"; is this a calibration file (tessera calibrate --out FILE)?");
  const int version = int_field(required(doc, "version", origin), "version", origin);
  TESSERA_CHECK(version >= kOldestVersion && version <= kVersion, "sim: ", origin,
                ": field \"version\" is ", version, "; this build reads versions ", kOldestVersion,
                " to ", kVersion, " (run tessera calibrate again)");
  Calibration c;
  if (version >= 3)
    c.precisions = read_precisions(doc, origin);
  else
    TESSERA_CHECK(!doc.contains("precisions"), "sim: ", origin,
                  ": field \"precisions\" came with version 3, and this "
                  "file says version ",
                  version);
  c.host = string_field(required(doc, "host", origin), "host", origin);
  c.created_utc = string_field(required(doc, "created_utc", origin), "created_utc", origin);
  c.threads_per_rank = int_field(required(doc, "threads_per_rank", origin), "threads_per_rank", origin);
  c.concurrent_ranks = int_field(required(doc, "concurrent_ranks", origin), "concurrent_ranks", origin);
  TESSERA_CHECK(c.threads_per_rank >= 1 && c.concurrent_ranks >= 1, "sim: ", origin,
                ": fields \"threads_per_rank\" and \"concurrent_ranks\" must be at least 1");
  c.quick = bool_field(doc, "quick", origin);

  const Json& devices = required(doc, "devices", origin);
  TESSERA_CHECK(devices.is_array() && devices.size() == 1, "sim: ", origin,
                ": field \"devices\" must be an array of one device entry (the calibrated device)");
  DeviceCatalog catalog;
  catalog.add_from_json(Json{{"devices", devices}}.dump(), origin);
  c.device = catalog.get(devices[0]["name"].get<std::string>());

  const Json& link = required(doc, "link", origin);
  const std::string lw = origin + ": field \"link\"";
  TESSERA_CHECK(link.is_object(), "sim: ", lw, " must be an object");
  refuse_unknown(link, {"p2p_latency_us", "p2p_bw_GBps", "all_reduce_latency_us", "all_reduce_bw_GBps"}, lw);
  c.link.p2p_latency_s = in_range(link, "p2p_latency_us", 0, 1e6, lw) * 1e-6;
  c.link.p2p_bw_bytes_per_s = in_range(link, "p2p_bw_GBps", 1e-9, 1e9, lw) * 1e9;
  c.link.all_reduce_latency_s = in_range(link, "all_reduce_latency_us", 0, 1e6, lw) * 1e-6;
  c.link.all_reduce_bw_bytes_per_s = in_range(link, "all_reduce_bw_GBps", 1e-9, 1e9, lw) * 1e9;

  const Json& runtime = required(doc, "runtime", origin);
  const std::string rw = origin + ": field \"runtime\"";
  TESSERA_CHECK(runtime.is_object(), "sim: ", rw,
                " must be an object {\"host_overhead_us\", \"p2p_wait_us\", \"collective_wait_us\", \"cpu_share\"}");
  refuse_unknown(runtime, {"host_overhead_us", "p2p_wait_us", "collective_wait_us", "cpu_share"}, rw);
  c.waits.p2p_s = in_range(runtime, "p2p_wait_us", 0, 1e6, rw) * 1e-6;
  c.waits.collective_s = in_range(runtime, "collective_wait_us", 0, 1e6, rw) * 1e-6;
  c.host_overhead_s = in_range(runtime, "host_overhead_us", 0, 1e6, rw) * 1e-6;
  c.cpu_share = number_in(runtime, "cpu_share", 0.01, 1, rw, "the share of a core is a fraction in (0, 1]");

  const Json& topo = required(doc, "topology", origin);
  TESSERA_CHECK(topo.is_object(), "sim: ", origin, ": field \"topology\" must be a topology object");
  c.topology = Topology::from_json(topo.dump(), catalog, origin + ": field \"topology\"");

  if (doc.contains("device_copy")) {
    const Json& dc = doc["device_copy"];
    const std::string dw = origin + ": field \"device_copy\"";
    TESSERA_CHECK(dc.is_object(), "sim: ", dw, " must be an object {\"memory\", \"d2d_GBps\", \"h2d_GBps\", \"d2h_GBps\"}");
    refuse_unknown(dc, {"memory", "d2d_GBps", "h2d_GBps", "d2h_GBps"}, dw);
    c.device_copy.memory = string_field(required(dc, "memory", dw), "memory", dw);
    c.device_copy.d2d_bw_bytes_per_s = in_range(dc, "d2d_GBps", 0, 1e9, dw) * 1e9;
    c.device_copy.h2d_bw_bytes_per_s = in_range(dc, "h2d_GBps", 0, 1e9, dw) * 1e9;
    c.device_copy.d2h_bw_bytes_per_s = in_range(dc, "d2h_GBps", 0, 1e9, dw) * 1e9;
  }

  const Json& kernels = required(doc, "kernels", origin);
  TESSERA_CHECK(kernels.is_object(), "sim: ", origin,
                ": field \"kernels\" must be an object {\"<kernel class>\": {\"rate_gflops\", ...}}");
  for (const auto& item : kernels.items()) {
    TESSERA_CHECK(is_kernel_class(item.key()), "sim: ", origin, ": kernels: unknown kernel class \"", item.key(),
                  "\"; a class is an op name (conv2d_forward, layernorm_forward, ...) with, for convolutions, "
                  "/depthwise, /pointwise, /grouped, /patchify or /dense and, for activations, /relu, /gelu or /sigmoid");
    for (nn::Precision p : {nn::Precision::BF16, nn::Precision::FP16}) {
      const std::string suffix =
          "@" + std::string(core::dtype_name(nn::precision_dtype(p, core::DType::F32)));
      TESSERA_CHECK(
          !item.key().ends_with(suffix) ||
              std::find(c.precisions.begin(), c.precisions.end(), p) != c.precisions.end(),
          "sim: ", origin, ": kernels: class \"", item.key(), "\" was timed in ",
          nn::precision_name(p), ", which field \"precisions\" does not list");
    }
    c.kernels[item.key()] = read_kernel(item.value(), origin + ": kernels[\"" + item.key() + "\"]");
  }
  return c;
}

Calibration load_calibration(const std::string& path) {
  return calibration_from_json(core::read_file(path), "calibration file '" + path + "'");
}

void save_calibration(const Calibration& c, const std::string& path) {
  core::write_file_atomic(path, calibration_to_json(c));
}

void apply_calibration(const Calibration& c, DeviceCatalog& catalog, EngineOptions& options) {
  catalog.add(c.device);
  for (const auto& [name, k] : c.kernels) {
    KernelRate r = k.rate;
    r.overhead_s += c.host_overhead_s;
    options.kernel_rates[name] = r;
  }
  options.kernel_rates_device = c.device.name;
  options.kernel_rates_dtypes.clear();
  for (nn::Precision p : c.precisions)
    options.kernel_rates_dtypes.push_back(nn::precision_dtype(p, core::DType::F32));
  options.waits = c.waits;
}

}  // namespace tessera::sim
