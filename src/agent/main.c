// SPDX-License-Identifier: MIT
/* Placeholder until 'fay agent' lands: says so plainly. */
#include <stdio.h>

#include "cli/cmds.h"

int cmd_agent(int argc, char **argv)
{
	fprintf(stderr, "error: 'fay agent' is not built yet in this version\n");
	return 1;
}
