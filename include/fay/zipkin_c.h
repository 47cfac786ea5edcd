/* SPDX-License-Identifier: MIT */
/*
 * The header name ceph/blkin programs include: with -I<prefix>/include/fay
 * a program written for BlkKin (#include <zipkin_c.h>) builds unchanged
 * against libfay.  See blkin.h.
 */
#ifndef FAY_ZIPKIN_C_H
#define FAY_ZIPKIN_C_H

#include "blkin.h"

#endif
