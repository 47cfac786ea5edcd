// SPDX-License-Identifier: MIT
/* Placeholder until 'fay query' lands: says so plainly. */
#include <stdio.h>

#include "cli/cmds.h"

int cmd_query(int argc, char **argv)
{
	fprintf(stderr, "error: 'fay query' is not built yet in this version\n");
	return 1;
}
