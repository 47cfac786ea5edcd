/* SPDX-License-Identifier: MIT */
#ifndef FAY_COMMON_VERSION_H
#define FAY_COMMON_VERSION_H
#define FAY_VERSION "0.1.0"
#endif
