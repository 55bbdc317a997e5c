// tessera-studio: the desktop app (`tessera studio`), with --screenshot DIR a headless render of
// every view to PNG files, or with --json the simulation's JSON (as `tessera sim run --json`).
#include <QApplication>
#include <QCommandLineParser>
#include <cstdio>
#include <string>

#include "compare_view.hpp"
#include "main_window.hpp"
#include "screenshot.hpp"
#include "simulation.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/report.hpp"

int main(int argc, char** argv) {
  // What the libraries report (notices, warnings) goes to stderr, one line each, as in the CLI.
  tessera::core::set_report_sink([](tessera::core::ReportLevel, std::string_view m) {
    std::fprintf(stderr, "%s\n", std::string(m).c_str());
  });
  bool headless = false;
  for (int i = 1; i < argc; ++i)
    if (QByteArray(argv[i]) == "--screenshot" || QByteArray(argv[i]).startsWith("--screenshot=") ||
        QByteArray(argv[i]) == "--json")
      headless = true;
  if (headless && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("tessera studio"));
  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral(
      "tessera studio: shards, halos, communication, memory and timelines of a simulated training iteration"));
  parser.addHelpOption();
  QCommandLineOption screenshot(QStringList{"screenshot"}, QStringLiteral("Render every view to DIR/<view>.png and exit"),
                                QStringLiteral("DIR"));
  QCommandLineOption config(QStringList{"config"}, QStringLiteral("A configuration (or session) JSON file"),
                            QStringLiteral("FILE"));
  QCommandLineOption measured(QStringList{"measured"},
                              QStringLiteral("A measured trace (tessera train --trace) for the Compare view"),
                              QStringLiteral("FILE"));
  QCommandLineOption json(
      QStringList{"json"},
      QStringLiteral("Simulate the configuration as the studio does (every rank up to 64, folded "
                     "above) and print the "
                     "result's JSON (the keys of tessera sim run --json), without a window"));
  parser.addOption(json);
  parser.addOption(screenshot);
  parser.addOption(measured);
  parser.addOption(config);
  parser.process(app);
  using namespace tessera::studio;
  try {
    const StudioConfig cfg = parser.isSet(config) ? loadConfigFile(parser.value(config)) : StudioConfig{};
    if (parser.isSet(json)) {
      const std::shared_ptr<const Snapshot> snap = simulate(cfg);
      if (!snap->ok()) throw tessera::InvalidArgument(snap->error.toStdString());
      std::printf("%s\n", snap->json().c_str());
      return 0;
    }
    if (parser.isSet(screenshot)) {
      for (const QString& f : renderScreenshots(parser.value(screenshot), cfg, 1500, 900, parser.value(measured)))
        std::printf("wrote %s\n", qPrintable(f));
      return 0;
    }
    MainWindow w;
    w.resize(1500, 900);
    w.setConfig(cfg);
    if (parser.isSet(measured)) w.compare()->openMeasured(parser.value(measured));
    w.show();
    return QApplication::exec();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera studio: %s\n", e.what());
    return 1;
  }
}
