"""What the analysis computes from frames, each after the paper that defines it: statistics,
what limited a run (diagnosis), matrices, closed-form ceilings, fairness, performance
envelopes and conformance against the kernel, transitivity."""
