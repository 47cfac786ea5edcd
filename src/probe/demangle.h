/* SPDX-License-Identifier: MIT */
/*
 * C++ symbol names as users write them: the Itanium C++ ABI's mangled
 * names ("_ZN3fay3unw5Level4callElll") demangled
 * ("fay::unw::Level::call(long, long, long)").  The one file that holds
 * the demangler (libiberty's, Debian's libiberty-dev, linked statically).
 */
#ifndef FAY_PROBE_DEMANGLE_H
#define FAY_PROBE_DEMANGLE_H

#include <stdbool.h>

/* The C++ name of symbol name (a "@VERSION" suffix ignored), with its
 * parameter list when params ("ns::f(int, char const*)", else "ns::f"):
 * a malloc()ed string, or NULL (not a mangled C++ name, or no memory). */
char *sym_demangle(const char *name, bool params);

/* The colon that ends BINARY in "BINARY:SYMBOL": the last one that is
 * not half of a C++ "::" ("app:ns::C::f"), or NULL. */
const char *sym_spec_colon(const char *spec);

#endif
