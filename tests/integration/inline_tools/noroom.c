// SPDX-License-Identifier: MIT
/*
 * A program with no room after its code (issue #25: the fallback page of
 * inject_library_at_entry()): noroom.ld pads its executable segment to
 * the end of its last page, so the trampoline to its entry point cannot
 * go into the padding and fay maps a page for it.
 *
 * noroom FILE: writes to FILE the executable mappings of the process
 * that no file backs, but the vDSO ("anon N": the trampoline's page left
 * behind, if any), and whether getauxval(AT_ENTRY) is its own entry
 * point ("entry own" or "entry other"), then exits 3.
 */
#include <elf.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

/* the section noroom.ld keeps and pads (code, in the executable segment) */
__asm__(".section .fillpage,\"ax\",@progbits\n\tret\n\t.previous");

extern char _start[];

int main(int argc, char **argv)
{
	char line[4400], perms[8], path[4096];
	unsigned long ino;
	int anon = 0;
	FILE *f, *out;

	if (argc != 2)
		return 2;
	f = fopen("/proc/self/maps", "re");
	while (f && fgets(line, sizeof(line), f)) {
		path[0] = '\0';
		if (sscanf(line, "%*x-%*x %7s %*s %*s %lu %4095s", perms, &ino, path) < 2)
			continue;
		anon += perms[2] == 'x' && !ino && strcmp(path, "[vdso]") && strcmp(path, "[vsyscall]");
	}
	if (f)
		fclose(f);
	out = fopen(argv[1], "we");
	if (!out)
		return 1;
	fprintf(out, "anon %d\nentry %s\n", anon,
		getauxval(AT_ENTRY) == (unsigned long)_start ? "own" : "other");
	fclose(out);
	return 3;
}
