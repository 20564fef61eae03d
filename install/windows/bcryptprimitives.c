/* Test-only stand-in for Windows' bcryptprimitives.dll, for running memd's Windows builds
 * under Wine 8.0, which lacks it. Rust's std (1.78+) draws its random numbers (HashMap keys)
 * from ProcessPrng in this DLL; this one forwards to RtlGenRandom (advapi32's
 * SystemFunction036), the generator Windows had before ProcessPrng. Never shipped: real
 * Windows has the real DLL. install/fetch-windows.sh builds it into memd's cache. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    /* RtlGenRandom takes a 32-bit length; ProcessPrng a pointer-sized one. */
    while (length > 0) {
        ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
