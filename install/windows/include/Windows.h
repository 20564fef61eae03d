/* Case shim for cross-building on Linux: C++ sources written for Windows (usearch's index.hpp)
 * include <Windows.h>, while mingw-w64 ships the header as windows.h and Linux file systems are
 * case-sensitive. Only install/build-windows.sh puts this directory on the include path. */
#include <windows.h>
