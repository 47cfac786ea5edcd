# SPDX-License-Identifier: MIT
# The shm ring: its unit tests' shared header, and the drain benchmark.

# The ring tests include tests/unit/ring/ringtest.h: rebuild them when it changes.
$(filter $(B)/tests/unit/ring/%,$(UNIT_BIN)): tests/unit/ring/ringtest.h
