/* Test plugin: a shared library without any tessera entry point (the loader must say so). */
__attribute__((visibility("default"))) int not_a_tessera_plugin(void) { return 42; }
