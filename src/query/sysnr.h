/* SPDX-License-Identifier: MIT */
/*
 * System call numbers of the build's architecture, from <asm/unistd.h>
 * (mk/sysnr.mk generates the table): what names the number that
 * raw_syscalls:sys_enter gives, for s.name of syscall("*").
 */
#ifndef FAY_QUERY_SYSNR_H
#define FAY_QUERY_SYSNR_H

#include <stddef.h>

struct sysnr {
	int nr;
	const char *name;	/* as <asm/unistd.h> spells it: "read", "stat" */
};

/* sysnr_count entries, by increasing number. */
extern const struct sysnr sysnr_tab[];
extern const size_t sysnr_count;

#endif
