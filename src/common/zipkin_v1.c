// SPDX-License-Identifier: MIT
/*
 * Zipkin's V1 rule shared by the store's and the agent's merge of BlkKin
 * records (zipkin_v1.h).
 */
#include <string.h>

#include "common/spanrec.h"
#include "common/zipkin_v1.h"

static const struct {
	char v[3];
	uint8_t kind;
} core[ZV1_NCORE] = {
	[ZV1_CS] = { "cs", SPAN_KIND_CLIENT },	 [ZV1_SR] = { "sr", SPAN_KIND_SERVER },
	[ZV1_SS] = { "ss", SPAN_KIND_SERVER },	 [ZV1_CR] = { "cr", SPAN_KIND_CLIENT },
	[ZV1_MS] = { "ms", SPAN_KIND_PRODUCER }, [ZV1_MR] = { "mr", SPAN_KIND_CONSUMER },
	[ZV1_WS] = { "ws", SPAN_KIND_UNSET },	 [ZV1_WR] = { "wr", SPAN_KIND_UNSET },
};

int zv1_core(const char *s, size_t len)
{
	if (len != 2)
		return -1;
	for (int k = 0; k < ZV1_NCORE; k++)
		if (!memcmp(s, core[k].v, 2))
			return k;
	return -1;
}

uint8_t zv1_kind(int k)
{
	return k >= 0 && k < ZV1_NCORE ? core[k].kind : SPAN_KIND_UNSET;
}

uint64_t zv1_duration(uint64_t begin, uint64_t end, uint64_t one_us)
{
	if (end < begin)
		return 0;
	return end - begin < one_us ? one_us : end - begin;
}
