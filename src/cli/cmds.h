/* SPDX-License-Identifier: MIT */
/*
 * The fay subcommands.  Each takes the arguments after its own name
 * (argv[0] is the subcommand) and returns the process exit status:
 * 0 success, 1 runtime failure, 2 usage or query error.
 * Every subcommand answers --help with a man-style page.
 */
#ifndef FAY_CLI_CMDS_H
#define FAY_CLI_CMDS_H

int cmd_agent(int argc, char **argv);      /* src/cli/cmd_agent.c */
int cmd_collector(int argc, char **argv);  /* src/cli/cmd_collector.c */
int cmd_traces(int argc, char **argv);     /* src/cli/cmd_traces.c */
int cmd_query(int argc, char **argv);      /* src/cli/cmd_query.c */
int cmd_probes(int argc, char **argv);     /* src/cli/cmd_probes.c */
int cmd_run(int argc, char **argv);        /* src/cli/cmd_run.c */
int cmd_sql(int argc, char **argv);        /* src/cli/cmd_sql.c */
int cmd_capture(int argc, char **argv);    /* src/cli/cmd_capture.c */

#endif
