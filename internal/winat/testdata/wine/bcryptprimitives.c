/*
 * bcryptprimitives.dll for running Go test binaries under Wine 8.
 *
 * Go 1.24+ binaries for Windows call ProcessPrng from bcryptprimitives.dll
 * (loaded from system32) at start-up; Wine 8's builtin DLL lacks it, so
 * every Go binary aborts before main. This DLL provides ProcessPrng with
 * RtlGenRandom (advapi32 SystemFunction036), Wine's system random source.
 * It is octet's own test scaffolding, never shipped: the wine test in
 * internal/winat builds it with mingw-w64 and installs it into a private
 * Wine prefix (WINEDLLOVERRIDES=bcryptprimitives=n,b).
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
	while (len > 0) {
		ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		len -= n;
	}
	return TRUE;
}
