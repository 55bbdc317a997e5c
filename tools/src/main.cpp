// tessera: command-line entry point. Errors are printed without a stack trace; exit code 1.
#include <iostream>

#include "commands.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/report.hpp"
#include "tessera/core/version.hpp"

int main(int argc, char** argv) {
  // What the libraries report (notices, warnings) goes to stderr, one line each.
  tessera::core::set_report_sink(
      [](tessera::core::ReportLevel, std::string_view m) { std::cerr << m << std::endl; });
  CLI::App app{"tessera: spatial tensor parallelism for high-resolution convolutional networks"};
  // "tessera 0.1.0" on its own line (what scripts compare), then what this build was made with.
  app.set_version_flag("--version", "tessera " + std::string(tessera::core::version()) +
                                        "\nbuild: " + tessera::core::build_description());
  app.require_subcommand(1);
  tessera::tools::Action action;
  tessera::tools::add_train_command(app, action);
  tessera::tools::add_export_command(app, action);
  tessera::tools::add_images_command(app, action);
  tessera::tools::add_launch_command(app, action);
  tessera::tools::add_halo_command(app, action);
  tessera::tools::add_verify_command(app, action);
  tessera::tools::add_backends_command(app, action);
  tessera::tools::add_sim_command(app, action);
  tessera::tools::add_plan_command(app, action);
  tessera::tools::add_calibrate_command(app, action);
  tessera::tools::add_studio_command(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return action ? action() : 0;
  } catch (const tessera::Error& e) {
    std::cerr << "tessera: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tessera: unexpected error: " << e.what() << "\n";
    return 1;
  }
}
