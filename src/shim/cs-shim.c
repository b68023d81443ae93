/*
 * The driver directory's libcuda.so.1 and libnvidia-ml.so.1 (docs/injection.md):
 * for where preloading is impossible, a library with the driver's soname
 * that loads libcuslice and the real driver, and defines nothing of the
 * driver's itself.
 *
 * Its dependencies, in this order, are libcuslice.so and the real library
 * under a name of its own (CS_SHIM_REAL: libcuslice-real-cuda.so.1, a link
 * in the directory's real/ to the node's libcuda.so.1), both found through
 * its RUNPATH $ORIGIN/real. A program linked with -lcuda, or a runtime that
 * dlopens libcuda.so.1 and looks names up on that handle, searches the shim,
 * then libcuslice, then the real driver: the names libcuslice wraps
 * (hooks-cuda.def, hooks-nvml.def) resolve to its wrappers, every other
 * name to the driver's own definition. The exports are thus derived from the
 * hook lists and the real library; nothing of NVIDIA's is restated here.
 *
 * The one symbol defined here tells libcuslice (cs-real.c), which opens
 * "libcuda.so.1" to find the real functions and would get this shim back,
 * which library is the real one.
 */

__attribute__((visibility("default"))) extern const char cuslice_driver_shim[];
const char cuslice_driver_shim[] = CS_SHIM_REAL;
