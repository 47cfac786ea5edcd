// SPDX-License-Identifier: MIT
/* Placeholder until 'fay traces' lands: says so plainly. */
#include <stdio.h>

#include "cli/cmds.h"

int cmd_traces(int argc, char **argv)
{
	fprintf(stderr, "error: 'fay traces' is not built yet in this version\n");
	return 1;
}
