// SPDX-License-Identifier: MIT
/*
 * profile(HZ): a software CPU-clock perf event per online CPU, sampling at
 * HZ per second, running a BPF_PROG_TYPE_PERF_EVENT program whose context
 * (struct bpf_perf_event_data) starts with the interrupted pt_regs.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "probe/provider.h"

#define PROFILE_MAX_HZ 100000

static int profile_resolve(struct probe *p)
{
	unsigned int hz = p->opts.hz;

	if (!hz) {
		char *end;
		unsigned long v = strtoul(p->spec, &end, 10);

		if (*p->spec && !*end)
			hz = (unsigned int)v;
	}
	if (!hz || hz > PROFILE_MAX_HZ)
		return probe_fail(p, -EINVAL, "profile(%s): the rate must be 1 to "
				  "%d samples per second", *p->spec ? p->spec : "?",
				  PROFILE_MAX_HZ);
	p->opts.hz = hz;
	p->prog_type = BPF_PROG_TYPE_PERF_EVENT;
	p->mech = "perf_event";
	p->nargs = 0;
	snprintf(p->desc, sizeof(p->desc), "profile %u Hz on every CPU", hz);
	return 0;
}

/* Fields of a sample: "ip" (the interrupted instruction), "sp". */
static int profile_emit_field(struct probe *p, struct ir *ir, ir_reg dst,
			      const char *name)
{
	if (!strcmp(name, "ip"))
		emit_pt_regs(ir, dst, PT_IP);
	else if (!strcmp(name, "sp"))
		emit_pt_regs(ir, dst, PT_SP);
	else
		return probe_fail(p, -ENOENT, "%s has no field \"%s\" (fields: ip, sp)",
				  p->desc, name);
	return 0;
}

static int profile_attach(struct probe *p, int prog_fd)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	int attached = 0;

	for (long cpu = 0; cpu < ncpu; cpu++) {
		struct perf_event_attr attr = {
			.type = PERF_TYPE_SOFTWARE,
			.config = PERF_COUNT_SW_CPU_CLOCK,
			.freq = 1,
			.sample_freq = p->opts.hz,
		};
		int fd = perf_attach_bpf(&attr, -1, (int)cpu, prog_fd);

		if (fd == -ENODEV || fd == -EINVAL)
			continue;	/* offline CPU */
		if (fd < 0)
			return fd;
		if (probe_keep_fd(p, fd))
			return -ENOMEM;
		attached++;
	}
	return attached ? 0 : probe_fail(p, -ENODEV, "no CPU to sample");
}

const struct provider provider_profile = {
	.name = "profile",
	.resolve = profile_resolve,
	.emit_field = profile_emit_field,
	.attach = profile_attach,
};
