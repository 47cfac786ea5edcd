// SPDX-License-Identifier: MIT
/* Placeholder until 'fay probes' lands: says so plainly. */
#include <stdio.h>

#include "cli/cmds.h"

int cmd_probes(int argc, char **argv)
{
	fprintf(stderr, "error: 'fay probes' is not built yet in this version\n");
	return 1;
}
