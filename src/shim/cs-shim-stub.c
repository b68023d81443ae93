/*
 * An empty library that stands, at link time only, for the real driver
 * behind a shim: its soname (libcuslice-real-cuda.so.1 or
 * libcuslice-real-nvml.so.1) becomes the shim's DT_NEEDED. Never installed.
 */
__attribute__((visibility("default"))) extern const int cuslice_shim_stub;
const int cuslice_shim_stub = 1;
