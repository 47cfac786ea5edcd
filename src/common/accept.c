// SPDX-License-Identifier: MIT
/* The one accept module: see accept.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/accept.h"
#include "common/budget.h"
#include "common/net.h"
#include "common/tls.h"

void acceptor_init(struct acceptor *a)
{
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->idle, NULL);
	a->conns = NULL;
	a->n = 0;
	a->stop = 0;
}

void acceptor_destroy(struct acceptor *a)
{
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->idle);
}

int acceptor_accept(struct acceptor *a, struct acc_conn *k)
{
	int fd;

	k->sl = sizeof(k->ss);
	fd = net_accept(a->fd, &k->ss, &k->sl);
	if (fd < 0)
		return fd;
	k->fd = fd;
	net_addr_ip((struct sockaddr *)&k->ss, k->ip, sizeof(k->ip));
	net_addr_str((struct sockaddr *)&k->ss, k->peer, sizeof(k->peer));
	return 0;
}

/* Connections open from ip (a->lock held). */
static unsigned peer_count(const struct acceptor *a, const char *ip)
{
	unsigned n = 0;

	for (const struct acc_conn *o = a->conns; o; o = o->next)
		n += !strcmp(o->ip, ip);
	return n;
}

static void count_busy(struct acceptor *a)
{
	if (a->busy)
		__atomic_add_fetch(a->busy, 1, __ATOMIC_RELAXED);
}

enum acc_verdict acceptor_admit(struct acceptor *a, struct acc_conn *k)
{
	enum acc_verdict v = ACC_IN;

	pthread_mutex_lock(&a->lock);
	if (a->stop)
		v = ACC_STOPPING;
	else if (a->max_conns && a->n >= a->max_conns)
		v = ACC_FULL;
	else if (a->max_per_peer && peer_count(a, k->ip) >= a->max_per_peer)
		v = ACC_PEER;
	else if (mem_budget_take(a->budget, a->conn_mem))
		v = ACC_BUSY;
	if (v == ACC_IN) {
		k->mem = a->conn_mem;
		k->next = a->conns;
		if (k->next)
			k->next->pprev = &k->next;
		k->pprev = &a->conns;
		a->conns = k;
		a->n++;
	}
	pthread_mutex_unlock(&a->lock);
	if (v == ACC_BUSY)
		count_busy(a);
	return v;
}

int acceptor_fits(struct acceptor *a)
{
	if (mem_budget_fits(a->budget, a->conn_mem))
		return 1;
	count_busy(a);
	return 0;
}

int acceptor_tls(struct acceptor *a, struct acc_conn *k)
{
	if (!a->tls)
		return 0;
	k->fd = tls_accept(a->tls, k->fd, k->ip, a->alpn, a->tls_mutual);
	if (k->fd < 0) {
		k->fd = -1;
		return -1;
	}
	return 0;
}

void acceptor_leave(struct acceptor *a, struct acc_conn *k)
{
	pthread_mutex_lock(&a->lock);
	*k->pprev = k->next;
	if (k->next)
		k->next->pprev = k->pprev;
	mem_budget_give(a->budget, k->mem);
	k->mem = 0;
	if (!--a->n)
		pthread_cond_broadcast(&a->idle);
	pthread_mutex_unlock(&a->lock);
}

void acceptor_stop(struct acceptor *a)
{
	pthread_mutex_lock(&a->lock);
	a->stop = 1;
	for (struct acc_conn *k = a->conns; k; k = k->next)
		if (k->fd >= 0)
			shutdown(k->fd, SHUT_RD);
	pthread_mutex_unlock(&a->lock);
}

void acceptor_wait_idle(struct acceptor *a)
{
	pthread_mutex_lock(&a->lock);
	while (a->n)
		pthread_cond_wait(&a->idle, &a->lock);
	pthread_mutex_unlock(&a->lock);
}
