/* Test plugin: exports the v1 entry point but reports api_version 99 (the loader must refuse). */
#include "tessera/comm/plugin_v1.h"

__attribute__((visibility("default"))) const tessera_comm_plugin_v1_t* tessera_comm_plugin_v1(void) {
  static tessera_comm_plugin_v1_t t;
  t.api_version = 99;
  t.name = "badver";
  return &t;
}
