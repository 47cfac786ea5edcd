// SPDX-License-Identifier: MIT
/*
 * The schema text, embedded from src/store/schema.sql at build time, so
 * that the documented schema and the one the store creates are one file.
 * (The assembler's .incbin path is relative to the top of the tree, where
 * make runs; mk/collector.mk makes this object depend on the .sql file.)
 */
#include "store/sqlite_int.h"

__asm__(".section .rodata\n"
	".global store_schema_sql\n"
	".type store_schema_sql, @object\n"
	"store_schema_sql:\n"
	".incbin \"src/store/schema.sql\"\n"
	".byte 0\n"
	".size store_schema_sql, . - store_schema_sql\n"
	".previous\n");
