/* Test plugin: exports only a (future) v2 entry point; this tessera knows v1 (wrong version). */
__attribute__((visibility("default"))) const void* tessera_comm_plugin_v2(void) { return 0; }
