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
/// `measured` (optional): a `tessera train --trace` file the compare view opens; without it the
/// compare view shows how to get one. The teaching view is shown at its "Receive" step, and its
/// backward "Add" step goes to DIR/teaching_backward.png as well.
QStringList renderScreenshots(const QString& dir, const StudioConfig& config, int width = 1500, int height = 900,
                              const QString& measured = QString());

/// Reads a --config file (a configuration or a saved session); throws InvalidArgument.
StudioConfig loadConfigFile(const QString& path);

}  // namespace tessera::studio
