// SPDX-License-Identifier: MIT
/* Placeholder until 'fay collector' lands: says so plainly. */
#include <stdio.h>

#include "cli/cmds.h"

int cmd_collector(int argc, char **argv)
{
	fprintf(stderr, "error: 'fay collector' is not built yet in this version\n");
	return 1;
}
