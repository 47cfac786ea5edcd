# SPDX-License-Identifier: MIT
# bench/bench_categorize.c: k-means and k chosen by silhouette (categorize
# ... into K / into auto) per window, against scikit-learn on the same
# data.  Run from the top of the tree:  $(B)/bench/bench_categorize
BENCH_CATEGORIZE := $(B)/bench/bench_categorize

$(BENCH_CATEGORIZE): bench/bench_categorize.c $(LIBINT)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBINT) $(LDLIBS)

bench: $(BENCH_CATEGORIZE)
