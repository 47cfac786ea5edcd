// SPDX-License-Identifier: MIT
/* The pool of store readers shared by the HTTP handlers. */
#include <pthread.h>

#include "collector/collector_int.h"

struct store_reader *coll_reader_get(struct collector *c)
{
	struct store_reader *r = NULL;

	pthread_mutex_lock(&c->readers_lock);
	if (c->nreaders)
		r = c->readers[--c->nreaders];
	pthread_mutex_unlock(&c->readers_lock);
	return r ? r : store__reader_new(c->store);
}

void coll_reader_put(struct collector *c, struct store_reader *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&c->readers_lock);
	if (c->nreaders < (int)(sizeof(c->readers) / sizeof(c->readers[0]))) {
		c->readers[c->nreaders++] = r;
		r = NULL;
	}
	pthread_mutex_unlock(&c->readers_lock);
	store__reader_free(r);
}
