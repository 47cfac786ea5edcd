/* SPDX-License-Identifier: MIT */
/*
 * A minimal OTLP/gRPC client for bench_otlp (bench/otlp_h2.c, on
 * nghttp2): unary TraceService/Export calls, one at a time, on one
 * HTTP/2 cleartext connection, as an SDK exporter with one batch in
 * flight makes them.
 */
#ifndef FAY_BENCH_OTLP_H2_H
#define FAY_BENCH_OTLP_H2_H

#include <stddef.h>

struct h2c;

/* Connected to 127.0.0.1:port with the preface sent, or NULL. */
struct h2c *h2c_open(int port);

/*
 * One Export call of msg (a gRPC message: the 5-byte prefix, then an
 * ExportTraceServiceRequest).  Returns its grpc-status (0: accepted), or
 * -1 when the connection failed.
 */
int h2c_export(struct h2c *h, const void *msg, size_t len);

void h2c_close(struct h2c *h);

#endif
