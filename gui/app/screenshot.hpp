// Headless rendering of every view to PNG files (`tessera studio --screenshot DIR`).
#pragma once

#include <QString>
#include <QStringList>

#include "studio_config.hpp"

namespace tessera::studio {

/// Simulates `config` (and plans for it) synchronously, shows the result in a main window of
/// `width`×`height` and writes DIR/<view>.png for every view. Needs a QApplication (the offscreen
/// platform is enough). Returns the files written; throws tessera::Error when the configuration
/// is bad (the simulator's message) or a file cannot be written.
QStringList renderScreenshots(const QString& dir, const StudioConfig& config, int width = 1500, int height = 900);

/// Reads a --config file (a configuration or a saved session); throws InvalidArgument.
StudioConfig loadConfigFile(const QString& path);

}  // namespace tessera::studio
