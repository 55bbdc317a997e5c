// SpecOptions: CLI11 options named after RunSpec's fields, applied with RunSpec::set.
#include "spec_options.hpp"

namespace tessera::tools {

void SpecOptions::add(CLI::App& c, const std::vector<std::string>& fields, bool with_config) {
  if (with_config)
    c.add_option("--config", config_,
                 "A run description (JSON object of these options' fields, e.g. {\"mesh\": \"dp=2,sp=2\", "
                 "\"bucket_mib\": 8}); options given here override it");
  for (const std::string& f : fields) {
    std::string help = run::RunSpec::help(f);
    CLI::Option* o = nullptr;
    if (f == "overlap") {
      o = c.add_flag("--no-overlap", flags_[f], "Do not overlap halo exchange and gradient all-reduce with compute");
    } else if (f == "shuffle") {
      o = c.add_flag("--no-shuffle", flags_[f], "Visit the samples in index order, not in a new order every epoch");
    } else if (f == "tf32") {
      o = c.add_flag("--tf32", flags_[f], help);
    } else if (f == "augment") {
      o = c.add_flag("--no-augment", flags_[f],
                     "Images: no random zoom, crop or flip; resize to cover the input and "
                     "centre-crop");
    } else if (f == "flip") {
      o = c.add_flag("--no-flip", flags_[f], "Images: no random left-right flip");
    } else if (f == "skip_bad_samples") {
      o = c.add_flag("--skip-bad-samples", flags_[f], help);
    } else {
      std::string name = f == "timeout_s" ? "timeout" : f;
      for (char& ch : name)
        if (ch == '_') ch = '-';
      o = c.add_option("--" + name, text_[f], help)->type_name(run::RunSpec::value_kind(f));
      const std::string def = defaults_.get(f);
      if (!def.empty()) o->default_str(def);
    }
    options_.emplace_back(f, o);
  }
}

run::RunSpec SpecOptions::spec() const {
  run::RunSpec s = config_.empty() ? defaults_ : run::RunSpec::from_json_file(config_, defaults_);
  for (const auto& [field, opt] : options_) {
    if (opt->count() == 0) continue;
    if (field == "overlap") s.set("overlap", "false");
    else if (field == "shuffle") s.set("shuffle", "false");
    else if (field == "tf32") s.set("tf32", "true");
    else if (field == "augment" || field == "flip")
      s.set(field, "false");
    else if (field == "skip_bad_samples")
      s.set(field, "true");
    else s.set(field, text_.at(field));
  }
  return s;
}

std::vector<std::string> simulation_fields() {
  return {"model",
          "input",
          "batch",
          "mesh",
          "shard",
          "checkpointing",
          "halo_recompute",
          "optimizer",
          "task",
          "classes",
          "dtype",
          "precision",
          "grad_reduce_dtype",
          "grad_compression",
          "topk_ratio",
          "all_reduce",
          "node_dim",
          "topology",
          "device",
          "calibration",
          "bucket_mib",
          "micro_batches",
          "schedule",
          "stage_starts",
          "prefetch",
          "overlap",
          "tf32",
          "comm_progress",
          "engine"};
}

}  // namespace tessera::tools
