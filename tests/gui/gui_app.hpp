// One QApplication for the whole test executable, on the offscreen platform unless one is set.
#pragma once

#include <QApplication>

inline QApplication& guiApp() {
  static int argc = 1;
  static char name[] = "tessera_tests_gui";
  static char* argv[] = {name, nullptr};
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  static QApplication* app = new QApplication(argc, argv);
  return *app;
}
